"""The coordinator's memory, and `replay`: the only code that changes it (DESIGN §3).

Theory of operation
-------------------
The topic is a compacted log of keyed records; compaction keeps the latest value per key. The
state here mirrors that exactly: every record key is one *slot* (a group's epoch, its connectors,
its configuration, its target-assignment metadata, and per member its metadata, target and current
assignment), and replaying a record puts its value into its slot, or empties the slot for a
tombstone. Nothing else is stored, so

- replaying the live log and replaying its compacted form give the same slots for every key that
  is still alive (compaction only drops values that a later record of the same key replaced);
- a record may arrive without the records that preceded it before compaction: a member slot
  without its group's epoch slot is simply a member of a group at epoch 0 until the epoch arrives;
- a tombstone for a slot that was never filled is a no-op;
- a group whose slots are all empty no longer exists.

A few things are derived from the slots to keep the handlers fast: who owns which item (built on
first use, then kept up to date by replay), which member holds which static InstanceId, and the set
of configured items. They are caches: they can always be rebuilt from the slots.

Two pieces of state are *volatile*: which member the coordinator asked to compute the next target
assignment (seed 000 "Worker Selection"), and when a server-side assignor may run again. Both are
simply chosen afresh after a failover, so they are never written; handlers still change them only
through `replay`, as an `AssignmentComputationUpdate`, a `ServerAssignmentWindow` or an
`InitialAssignmentWindow` (how long an empty group that got members waits for more).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from records import (
    DEFAULT_FORMAT_LEVEL,
    ClassicGroupMetadataKey,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    ConnectorsTasksMetadataKey,
    ConnectorsTasksMetadataValue,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    FormatLevelKey,
    FormatLevelValue,
    GroupConfigurationKey,
    GroupConfigurationValue,
    MemberMetadataKey,
    MemberMetadataValue,
    Record,
    RecordKey,
    RecordValue,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataKey,
    TargetAssignmentMetadataValue,
)

from coordinator.core.assignors import GroupSpec
from coordinator.core.classic.group import ClassicGroup, ClassicGroupUpdate, from_record
from coordinator.core.items import EMPTY, Item, configured_work, items_of
from coordinator.core.states import MemberState

# The current assignment of a member that has none recorded yet: it just joined and owns nothing.
NEW_MEMBER_CURRENT = CurrentMemberAssignmentValue(
    member_epoch=0, previous_member_epoch=-1, state=MemberState.STABLE, assignment=EMPTY
)


@dataclass(slots=True, frozen=True)
class AssignmentComputation:
    """The member asked to compute the target for the group's current epoch (volatile)."""

    member_id: str
    deadline_ms: int  # it loses the job if it has not installed by then (DESIGN §5)
    excluded: frozenset[str] = frozenset()  # members that already let a deadline pass
    prepared: GroupSpec | None = None  # what PrepareAssignment answered: a stale install is checked against it


@dataclass(slots=True, frozen=True)
class AssignmentComputationUpdate:
    """A volatile change: replace the group's computation (None: nobody is computing)."""

    group_id: str
    computation: AssignmentComputation | None


@dataclass(slots=True, frozen=True)
class InitialAssignmentWindow:
    """A volatile change: an empty group got members at `started_ms`, and waits for more before its
    first target until `not_before_ms` (Kafka's group.initial.rebalance.delay.ms). None ends it."""

    group_id: str
    window: tuple[int, int] | None  # (started_ms, not_before_ms)


@dataclass(slots=True, frozen=True)
class ServerAssignmentWindow:
    """A volatile change: a server-side assignor may run for the group again from `not_before_ms`.

    Spacing the computations coalesces a storm of joins (a rolling restart of a thousand workers)
    into a few assignments instead of one per join."""

    group_id: str
    not_before_ms: int


class ConnectGroup:
    """One connect group: its slots, the caches derived from them, and the volatile computation."""

    __slots__ = (
        "group_id",
        "metadata",
        "connectors",
        "config",
        "target_metadata",
        "members",
        "targets",
        "currents",
        "computation",
        "server_assignment_not_before_ms",
        "initial_assignment_window",
        "_owners",
        "_instances",
        "_configured",
    )

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.metadata: ConnectGroupMetadataValue | None = None  # type 3
        self.connectors: ConnectorsTasksMetadataValue | None = None  # type 4
        self.config: GroupConfigurationValue | None = None  # type 9
        self.target_metadata: TargetAssignmentMetadataValue | None = None  # type 6
        self.members: dict[str, MemberMetadataValue] = {}  # type 5
        self.targets: dict[str, TargetAssignmentMemberValue] = {}  # type 7
        self.currents: dict[str, CurrentMemberAssignmentValue] = {}  # type 8
        self.computation: AssignmentComputation | None = None
        self.server_assignment_not_before_ms = 0
        self.initial_assignment_window: tuple[int, int] | None = None  # (started_ms, not_before_ms)
        self._owners: dict[Item, str] | None = None
        self._instances: dict[str, str] = {}
        self._configured: frozenset[Item] | None = None

    # --- reading -------------------------------------------------------------------------------

    @property
    def group_epoch(self) -> int:
        return 0 if self.metadata is None else self.metadata.group_epoch

    @property
    def assignment_epoch(self) -> int:
        return 0 if self.target_metadata is None else self.target_metadata.assignment_epoch

    @property
    def connector_counts(self) -> tuple:
        return () if self.connectors is None else self.connectors.connectors

    def configured(self) -> frozenset[Item]:
        """Every connector and task the group must run."""
        if self._configured is None:
            self._configured = configured_work(self.connector_counts).items
        return self._configured

    def current(self, member_id: str) -> CurrentMemberAssignmentValue:
        return self.currents.get(member_id, NEW_MEMBER_CURRENT)

    def owners(self) -> dict[Item, str]:
        """Item -> the member whose current assignment holds it (owned or still being revoked)."""
        if self._owners is None:
            owners: dict[Item, str] = {}
            for member_id, current in self.currents.items():
                for item in held_items(current):
                    owners[item] = member_id
            self._owners = owners
        return self._owners

    def member_with_instance(self, instance_id: str) -> str | None:
        return self._instances.get(instance_id)

    def is_empty(self) -> bool:
        return (
            self.metadata is None
            and self.connectors is None
            and self.config is None
            and self.target_metadata is None
            and not self.members
            and not self.targets
            and not self.currents
        )

    def slots(self) -> Iterator[tuple[RecordKey, RecordValue]]:
        """Every live slot as (key, value): the state a replay of the log must reproduce."""
        g = self.group_id
        for key, value in (
            (ConnectGroupMetadataKey(g), self.metadata),
            (ConnectorsTasksMetadataKey(g), self.connectors),
            (GroupConfigurationKey(g), self.config),
            (TargetAssignmentMetadataKey(g), self.target_metadata),
        ):
            if value is not None:
                yield key, value
        for member_id, value in self.members.items():
            yield MemberMetadataKey(g, member_id), value
        for member_id, value in self.targets.items():
            yield TargetAssignmentMemberKey(g, member_id), value
        for member_id, value in self.currents.items():
            yield CurrentMemberAssignmentKey(g, member_id), value

    # --- replay, one method per record type ----------------------------------------------------

    def _replay_metadata(self, key: RecordKey, value: ConnectGroupMetadataValue | None) -> None:
        self.metadata = value

    def _replay_connectors(self, key: RecordKey, value: ConnectorsTasksMetadataValue | None) -> None:
        self.connectors = value
        self._configured = None

    def _replay_config(self, key: RecordKey, value: GroupConfigurationValue | None) -> None:
        self.config = value

    def _replay_target_metadata(self, key: RecordKey, value: TargetAssignmentMetadataValue | None) -> None:
        self.target_metadata = value

    def _replay_member(self, key: MemberMetadataKey, value: MemberMetadataValue | None) -> None:
        member_id = key.member_id
        old = self.members.get(member_id)
        if old is not None and old.instance_id is not None and self._instances.get(old.instance_id) == member_id:
            del self._instances[old.instance_id]
        if value is None:
            self.members.pop(member_id, None)
            if self.computation is not None and self.computation.member_id == member_id:
                self.computation = None  # the member computing the target left: choose again
            return
        self.members[member_id] = value
        if value.instance_id is not None:
            self._instances[value.instance_id] = member_id

    def _replay_target(self, key: TargetAssignmentMemberKey, value: TargetAssignmentMemberValue | None) -> None:
        if value is None:
            self.targets.pop(key.member_id, None)
        else:
            self.targets[key.member_id] = value

    def _replay_current(self, key: CurrentMemberAssignmentKey, value: CurrentMemberAssignmentValue | None) -> None:
        member_id = key.member_id
        old = self.currents.pop(member_id, None) if value is None else self.currents.get(member_id)
        if value is not None:
            self.currents[member_id] = value
        owners = self._owners
        if owners is None:
            return  # built on first use; replaying a whole partition never pays for it
        if old is not None:
            for item in held_items(old):
                if owners.get(item) == member_id:
                    del owners[item]
        if value is not None:
            for item in held_items(value):
                owners[item] = member_id


def held_items(current: CurrentMemberAssignmentValue) -> frozenset[Item]:
    """What a member holds: what it owns plus what it has not yet revoked."""
    pending = current.pending_revocation
    if not (pending.connectors or pending.tasks):
        return items_of(current.assignment)
    return items_of(current.assignment) | items_of(pending)


_REPLAY = {
    ConnectGroupMetadataKey.RECORD_TYPE: ConnectGroup._replay_metadata,
    ConnectorsTasksMetadataKey.RECORD_TYPE: ConnectGroup._replay_connectors,
    GroupConfigurationKey.RECORD_TYPE: ConnectGroup._replay_config,
    TargetAssignmentMetadataKey.RECORD_TYPE: ConnectGroup._replay_target_metadata,
    MemberMetadataKey.RECORD_TYPE: ConnectGroup._replay_member,
    TargetAssignmentMemberKey.RECORD_TYPE: ConnectGroup._replay_target,
    CurrentMemberAssignmentKey.RECORD_TYPE: ConnectGroup._replay_current,
}


class CoordinatorState:
    """The groups of one partition of the topic."""

    __slots__ = ("groups", "classic_groups", "format_level_record")

    def __init__(self) -> None:
        self.groups: dict[str, ConnectGroup] = {}
        # Type 2: groups on the classic protocol (seed 004, `coordinator.core.classic.handlers`). A group id
        # has connect slots (types 3-9) and a classic group at once only for its connectors and
        # configuration (types 4 and 9), which both protocols read.
        self.classic_groups: dict[str, ClassicGroup] = {}
        # Type 10: the value versions this partition's records may use (`records.FORMAT_LEVELS`);
        # what the coordinator writes follows it, and the handlers set no field it lacks.
        self.format_level_record: FormatLevelValue | None = None

    def replay(
        self,
        record: Record
        | AssignmentComputationUpdate
        | ServerAssignmentWindow
        | InitialAssignmentWindow
        | ClassicGroupUpdate,
    ) -> None:
        """Apply one record (from a handler or from the topic) or one volatile update."""
        if record.__class__ is not Record:
            if record.__class__ is ClassicGroupUpdate:
                if record.group is None:
                    self.classic_groups.pop(record.group_id, None)
                else:
                    self.classic_groups[record.group_id] = record.group
                return
            group = self.groups.get(record.group_id)
            if group is None:
                return
            if record.__class__ is AssignmentComputationUpdate:
                group.computation = record.computation
            elif record.__class__ is ServerAssignmentWindow:
                group.server_assignment_not_before_ms = record.not_before_ms
            elif record.__class__ is InitialAssignmentWindow:
                group.initial_assignment_window = record.window
            return
        key = record.key
        value = record.value
        apply = _REPLAY.get(key.RECORD_TYPE)
        if apply is None:
            if key.__class__ is ClassicGroupMetadataKey:
                if value is None:
                    self.classic_groups.pop(key.group_id, None)
                else:
                    self.classic_groups[key.group_id] = from_record(key.group_id, value)
            elif key.__class__ is FormatLevelKey:
                self.format_level_record = value  # raised only; never a tombstone from a writer
            return  # types this coordinator does not model are kept by the topic, not by us
        group = self.groups.get(key.group_id)
        if group is None:
            if value is None:
                return  # a tombstone for state we never saw
            group = self.groups[key.group_id] = ConnectGroup(key.group_id)
        apply(group, key, value)
        if value is None and group.is_empty():
            del self.groups[key.group_id]

    def replay_all(self, records: Iterable[Record]) -> None:
        """Replay many records: a partition being loaded, or a log being examined.

        Python's cyclic garbage collector is paused meanwhile. Records hold no cycles and what is
        replayed stays alive, so each collection would only walk the growing state again: on a
        million records that tripled the cost of applying them (bench/bench_state.py)."""
        replay = self.replay
        paused = gc.isenabled()
        gc.disable()
        try:
            for record in records:
                replay(record)
        finally:
            if paused:
                gc.enable()

    def slots(self) -> dict[RecordKey, RecordValue]:
        """Every live slot of every group: what compaction keeps, and what a replay must rebuild."""
        slots: dict[RecordKey, RecordValue] = {}
        for group in self.groups.values():
            slots.update(group.slots())
        for group_id, group in self.classic_groups.items():
            if group.record is not None:
                slots[ClassicGroupMetadataKey(group_id)] = group.record
        if self.format_level_record is not None:
            slots[FormatLevelKey(FormatLevelKey.PARTITION)] = self.format_level_record
        return slots

    @property
    def format_level(self) -> int:
        record = self.format_level_record
        return DEFAULT_FORMAT_LEVEL if record is None else record.level
