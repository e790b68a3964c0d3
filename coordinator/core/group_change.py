"""A handler's pending change to one group: what it reads, and the records it writes."""

from __future__ import annotations

from records import (
    ConnectorTaskCount,
    CurrentMemberAssignmentValue,
    Departure,
    MemberMetadataValue,
    Record,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
)

from coordinator.core import record_helpers
from coordinator.core.items import Item
from coordinator.core.protocol import REBALANCE, SESSION, Result, Timer, timer_key
from coordinator.core.state import (
    NEW_MEMBER_CURRENT,
    AssignmentComputation,
    AssignmentComputationUpdate,
    ConnectGroup,
    InitialAssignmentWindow,
    ServerAssignmentWindow,
    held_items,
)

_UNSET = object()


class GroupChange:
    """A handler's pending changes to one group (Kafka's group coordinator collects them as a
    list of records; we keep them by key so that reads see them). Nothing touches the state: the
    records go through `CoordinatorState.replay` once they are durable.

    `records()` lists the changes once each, in a fixed order that reads well in the topic: group
    configuration and metadata first (members, connectors, epoch), then the target (members, then
    its metadata), then current assignments.
    """

    __slots__ = (
        "group",
        "epoch",
        "connectors",
        "config",
        "target_metadata",
        "members",
        "targets",
        "currents",
        "computation",
        "server_window",
        "initial_window",
        "timers",
        "departures",
        "_held",
    )

    def __init__(self, group: ConnectGroup) -> None:
        self.group = group
        self.epoch: int | None = None
        self.connectors = _UNSET
        self.config = _UNSET
        self.target_metadata = _UNSET
        self.members: dict[str, MemberMetadataValue | None] = {}
        self.targets: dict[str, TargetAssignmentMemberValue | None] = {}
        self.currents: dict[str, CurrentMemberAssignmentValue | None] = {}
        self.computation = _UNSET
        self.server_window: int | None = None
        self.initial_window = _UNSET
        self.timers: list[Timer] = []
        self.departures: list[Departure] = []  # members removed, and why: written with the new epoch
        self._held: dict[str, frozenset[Item]] = {}

    # --- reads -----------------------------------------------------------------------------------

    @property
    def group_epoch(self) -> int:
        return self.group.group_epoch if self.epoch is None else self.epoch

    def bump(self) -> None:
        """The group metadata changed: one new group epoch per handler, however many changes."""
        if self.epoch is None:
            self.epoch = self.group.group_epoch + 1

    def target_meta(self) -> TargetAssignmentMetadataValue | None:
        return self.group.target_metadata if self.target_metadata is _UNSET else self.target_metadata

    @property
    def assignment_epoch(self) -> int:
        value = self.target_meta()
        return 0 if value is None else value.assignment_epoch

    def connector_counts(self) -> tuple[ConnectorTaskCount, ...]:
        if self.connectors is _UNSET:
            return self.group.connector_counts
        return self.connectors

    def member(self, member_id: str) -> MemberMetadataValue | None:
        members = self.members
        return members[member_id] if member_id in members else self.group.members.get(member_id)

    def all_members(self) -> dict[str, MemberMetadataValue]:
        if not self.members:
            return self.group.members
        merged = dict(self.group.members)
        for member_id, value in self.members.items():
            if value is None:
                merged.pop(member_id, None)
            else:
                merged[member_id] = value
        return merged

    def target(self, member_id: str) -> TargetAssignmentMemberValue | None:
        targets = self.targets
        return targets[member_id] if member_id in targets else self.group.targets.get(member_id)

    def current(self, member_id: str) -> CurrentMemberAssignmentValue:
        if member_id in self.currents:
            return self.currents[member_id] or NEW_MEMBER_CURRENT
        return self.group.current(member_id)

    def held_by_other(self, item: Item, member_id: str) -> bool:
        """Whether a member other than `member_id` holds `item` (owned or pending revocation)."""
        for other, held in self._held.items():
            if other != member_id and item in held:
                return True
        owner = self.group.owners().get(item)
        return owner is not None and owner != member_id and owner not in self.currents

    def server_assignment_not_before(self) -> int:
        return self.group.server_assignment_not_before_ms if self.server_window is None else self.server_window

    def current_initial_window(self) -> tuple[int, int] | None:
        return self.group.initial_assignment_window if self.initial_window is _UNSET else self.initial_window

    def current_computation(self) -> AssignmentComputation | None:
        return self.group.computation if self.computation is _UNSET else self.computation

    # --- writes ----------------------------------------------------------------------------------

    def set_member(self, member_id: str, value: MemberMetadataValue | None) -> None:
        self.members[member_id] = value

    def set_target(self, member_id: str, value: TargetAssignmentMemberValue | None) -> None:
        self.targets[member_id] = value

    def set_current(self, member_id: str, value: CurrentMemberAssignmentValue | None) -> None:
        self.currents[member_id] = value
        self._held[member_id] = frozenset() if value is None else held_items(value)

    def remove_member(self, member_id: str, reason: str) -> None:
        member = self.member(member_id)
        self.departures.append(Departure(member_id, member.instance_id if member is not None else None, reason))
        self.bump()
        self.set_member(member_id, None)
        self.set_target(member_id, None)
        self.set_current(member_id, None)
        self.timers.append(Timer(timer_key(SESSION, self.group.group_id, member_id), None))
        self.timers.append(Timer(timer_key(REBALANCE, self.group.group_id, member_id), None))
        self.release_computation(member_id)

    def release_computation(self, member_id: str) -> None:
        """A member that leaves, for good or for a while, no longer computes the target."""
        computation = self.current_computation()
        if computation is not None and computation.member_id == member_id:
            self.computation = None

    def records(self) -> list[Record]:
        g = self.group.group_id
        group = self.group
        out: list[Record] = []
        if self.config is not _UNSET:
            out.append(record_helpers.configuration(g, self.config))
        for member_id, value in self.members.items():
            if value is not None or member_id in group.members:
                out.append(record_helpers.member_metadata(g, member_id, value))
        if self.connectors is not _UNSET:
            out.append(record_helpers.connectors(g, self.connectors))
        if self.epoch is not None:
            out.append(record_helpers.group_epoch(g, self.epoch, tuple(self.departures)))
        for member_id, value in self.targets.items():
            if value is not None or member_id in group.targets:
                out.append(record_helpers.target_member(g, member_id, value))
        if self.target_metadata is not _UNSET:
            out.append(record_helpers.target_metadata(g, self.target_metadata))
        for member_id, value in self.currents.items():
            if value is not None or member_id in group.currents:
                out.append(record_helpers.current_assignment(g, member_id, value))
        return out

    def result(self, response: object) -> Result:
        volatile = []
        if self.computation is not _UNSET and self.computation != self.group.computation:
            volatile.append(AssignmentComputationUpdate(self.group.group_id, self.computation))
        if self.server_window is not None:
            volatile.append(ServerAssignmentWindow(self.group.group_id, self.server_window))
        if self.initial_window is not _UNSET and self.initial_window != self.group.initial_assignment_window:
            volatile.append(InitialAssignmentWindow(self.group.group_id, self.initial_window))
        return Result(response, self.records(), self.timers, volatile)
