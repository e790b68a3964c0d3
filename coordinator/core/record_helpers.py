"""Builders for every record the coordinator writes (Kafka's `GroupCoordinatorRecordHelpers`).

Handlers never build records inline: each kind of change has one builder here, so what the topic
holds for "member joined", "target installed" or "member left" is defined in one place.
"""

from __future__ import annotations

from records import (
    ClassicGroupMetadataKey,
    ClassicGroupMetadataValue,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    ConnectorsTasksMetadataKey,
    ConnectorsTasksMetadataValue,
    ConnectorTaskCount,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    Departure,
    GroupConfigurationKey,
    GroupConfigurationValue,
    MemberMetadataKey,
    MemberMetadataValue,
    Record,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataKey,
    TargetAssignmentMetadataValue,
)


def group_epoch(group_id: str, epoch: int, departures: tuple[Departure, ...] = ()) -> Record:
    """Type 3: the group metadata changed; a new target assignment is needed. `departures`: the
    members this change removed, and why."""
    return Record(ConnectGroupMetadataKey(group_id), ConnectGroupMetadataValue(epoch, departures=departures))


def connectors(group_id: str, counts: tuple[ConnectorTaskCount, ...]) -> Record:
    """Type 4: the connectors (and task counts) the group must run."""
    return Record(ConnectorsTasksMetadataKey(group_id), ConnectorsTasksMetadataValue(counts))


def configuration(group_id: str, value: GroupConfigurationValue) -> Record:
    """Type 9: the group's timeouts."""
    return Record(GroupConfigurationKey(group_id), value)


def member_metadata(group_id: str, member_id: str, value: MemberMetadataValue | None) -> Record:
    """Type 5: what a member told us about itself (None: it left)."""
    return Record(MemberMetadataKey(group_id, member_id), value)


def target_metadata(group_id: str, value: TargetAssignmentMetadataValue) -> Record:
    """Type 6: the target assignment's epoch, assignor, error, deferred and departed work."""
    return Record(TargetAssignmentMetadataKey(group_id), value)


def target_member(group_id: str, member_id: str, value: TargetAssignmentMemberValue | None) -> Record:
    """Type 7: one member's part of the target assignment (None: it left)."""
    return Record(TargetAssignmentMemberKey(group_id, member_id), value)


def current_assignment(group_id: str, member_id: str, value: CurrentMemberAssignmentValue | None) -> Record:
    """Type 8: a member's current assignment and member epoch (None: it left)."""
    return Record(CurrentMemberAssignmentKey(group_id, member_id), value)


def classic_group(group_id: str, value: ClassicGroupMetadataValue | None) -> Record:
    """Type 2: a classic group's generation, members and assignments (None: it is gone, deleted or
    converted to a connect group)."""
    return Record(ClassicGroupMetadataKey(group_id), value)


def group_tombstones(
    group_id: str, member_ids: list[str], targets: list[str], currents: list[str], keep_work: bool = False
) -> list[Record]:
    """A group is deleted: every key it has, members first and the group epoch last. With
    `keep_work`, its connectors and configuration stay: the group goes on as a classic group."""
    records = [Record(MemberMetadataKey(group_id, m), None) for m in member_ids]
    records += [Record(TargetAssignmentMemberKey(group_id, m), None) for m in targets]
    records += [Record(CurrentMemberAssignmentKey(group_id, m), None) for m in currents]
    kinds = (
        (TargetAssignmentMetadataKey, ConnectGroupMetadataKey)
        if keep_work
        else (TargetAssignmentMetadataKey, ConnectorsTasksMetadataKey, GroupConfigurationKey, ConnectGroupMetadataKey)
    )
    records += [Record(key(group_id), None) for key in kinds]
    return records
