"""Typed records of the `__worker_offsets` topic (DESIGN §4, seed 000 "Records").

A record is a key and a value. The key names what the record is about (a group, or a member of a
group) and carries the record type; the value is the latest state of that thing, or None for a
tombstone. Compaction keeps the latest value per key, so every key class below is one "slot" of
state and every value class is what fills it.

Field names are the snake_case of the Avro field names in `records/schemas/` (`GroupEpoch` ->
`group_epoch`); `records.schema` checks at import that the classes and the schemas agree, so the
.avsc files stay the single definition of the wire format.

The value classes are plain slotted dataclasses, not frozen ones: decoding builds millions of them
and a frozen dataclass costs about four times as much to construct (measured here: 1.15 µs against
0.27 µs for ten fields). Treat them as values all the same: the coordinator never mutates a record,
it replays it into its own state. Keys are frozen: the decoder caches them, so they are built once.

The shapes the records share with the HTTP API (TaskId, ConnectorsAndTasks, Assignor, ...; type 7's
value, which is also the seed's MemberAssignment) are msgspec Structs (`Shape`), declared once: the
HTTP decoder builds them from JSON, the record codec from Avro, and the core uses them as they are.
A Struct is also the cheapest to build (TaskId: 0.27 µs against 0.88 µs for the NamedTuple it was).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Annotated, ClassVar

from msgspec import Struct, field

from records.constraints import Base64, Int8, Int16, Int32, Int64, doc

__all__ = [
    "Assignor",
    "ClassicGroupMember",
    "ClassicGroupMetadataKey",
    "ClassicGroupMetadataValue",
    "ClassicMemberMetadata",
    "ClassicMemberProtocol",
    "Departure",
    "ConnectGroupMetadataKey",
    "ConnectGroupMetadataValue",
    "ConnectorTaskCount",
    "ConnectorsAndTasks",
    "ConnectorsTasksMetadataKey",
    "ConnectorsTasksMetadataValue",
    "CurrentMemberAssignmentKey",
    "CurrentMemberAssignmentValue",
    "DepartedMember",
    "FormatLevelKey",
    "FormatLevelValue",
    "GroupConfigurationKey",
    "GroupConfigurationValue",
    "GroupKey",
    "GroupMemberKey",
    "MemberMetadataKey",
    "MemberMetadataValue",
    "Record",
    "RecordKey",
    "RecordValue",
    "TargetAssignmentMemberKey",
    "TargetAssignmentMemberValue",
    "TargetAssignmentMetadataKey",
    "TargetAssignmentMetadataValue",
    "TaskId",
]

record = dataclass(slots=True)


class Shape(Struct, rename="pascal", gc=False):
    """A shape the records share with the HTTP API's bodies (DESIGN §7): msgspec decodes a request's
    JSON straight into it, its field names the seed's (`rename="pascal"`: `member_id` is `MemberId`).
    Nothing refers back to itself, so the garbage collector need not track them (`gc=False`)."""


class TaskId(Shape, frozen=True, order=True):
    """A connector task, numbered from 0 as in Kafka Connect."""

    # Ordered by connector, then task number; never equal to a connector's name (a str), so that one
    # set holds both (`coordinator.core.items`).

    connector: Annotated[str, doc("The connector's name.")]
    task: Annotated[Int32, doc("The task number; below 0 is INVALID_REQUEST (HTTP 200).")]

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


class ConnectorsAndTasks(Shape):
    """A set of connectors and tasks: what a worker owns, an assignment, a pending revocation, deferred
    work. Names must be non-empty and items listed once, else INVALID_REQUEST (HTTP 200)."""

    connectors: Annotated[tuple[str, ...], doc("The connectors; absent is empty, null is refused.")] = ()
    tasks: Annotated[tuple[TaskId, ...], doc("The tasks; absent is empty, null is refused.")] = ()


class ConnectorTaskCount(Shape):
    """A connector the group must run, and how many tasks it has."""

    name: Annotated[str, doc("The connector's name (non-empty, listed once; else INVALID_REQUEST at HTTP 200).")]
    tasks: Annotated[Int32, doc("How many tasks it has, within [0, 100000] (else INVALID_REQUEST at HTTP 200).")]


class Assignor(Shape):
    """A client-side assignor a worker supports (seed 000 "Assignor")."""

    name: Annotated[str, doc("The name of the assignor.")]
    minimum_version: Annotated[
        Int16, doc("The minimum supported version for the metadata (>= -1, else INVALID_REQUEST at HTTP 200).")
    ]
    maximum_version: Annotated[
        Int16,
        doc(
            "The maximum supported version for the metadata (>= 0 and >= "
            "MinimumVersion, else INVALID_REQUEST at HTTP 200)."
        ),
    ]
    reason: Annotated[Int8, doc("The reason of the metadata update; absent is 0.")] = 0
    version: Annotated[
        Int16, doc("The version of the metadata, within [MinimumVersion, MaximumVersion]; absent is 0.")
    ] = 0
    metadata: Annotated[Base64, doc("The metadata; absent is empty.")] = b""


class DepartedMember(Shape):
    """A member that left while owning work, kept so that its work can wait for its return."""

    member_id: Annotated[str, doc("The member ID.")]
    instance_id: Annotated[str | None, doc("The member instance ID.")]
    assignment: Annotated[ConnectorsAndTasks, doc("The work it held, kept for its return.")] = field(
        name="ConnectorsAndTasks"
    )
    departed_at_ms: Annotated[Int64, doc("When it left (coordinator clock, ms since the epoch).")]


@record
class ClassicGroupMember:
    """A member of a classic-protocol group (seed 004)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class ClassicMemberProtocol(Shape):
    """One protocol a classic member supports (a JoinGroup's Protocols entry): its name (for
    Connect, an assignor) and the member's metadata for it."""

    name: Annotated[str, doc("The protocol name.")]
    metadata: Annotated[Base64, doc("The protocol metadata.")] = b""


@record
class ClassicMemberMetadata:
    """A classic member of a connect group (seed 000's migration): what its JoinGroup said that the
    connect protocol has no field for, kept so that its session is its own and so that the group
    can go back to the classic protocol."""

    session_timeout_ms: int
    protocols: tuple[ClassicMemberProtocol, ...] = ()


class Departure(Shape):
    """A member the change that wrote the group epoch removed, and why (written with the group epoch
    it bumped)."""

    member_id: Annotated[str, doc("The member ID it had.")]
    instance_id: Annotated[str | None, doc("Its instance ID, or null.")]
    reason: Annotated[  # coordinator.core.protocol.LeaveReason
        str,
        doc(
            "Why: leave (it sent -1, or a classic LeaveGroup), static-leave (it left with -2 and its instance did not "
            "return within its session timeout), session-timeout, rebalance-timeout (did not revoke in time), "
            "fenced-epoch (sent an epoch it had left behind), replaced (a new member took its instance ID). A "
            "later version may add reasons."
        ),
    ]


# --- keys ------------------------------------------------------------------------------------
# One class per record type, so that a tombstone (a key without a value) still says what it
# deletes, and keys of different types never compare equal. Keys are frozen and hashable: the
# decoder shares one key object between the many records of the same key.


@dataclass(slots=True, frozen=True)
class GroupKey:
    RECORD_TYPE: ClassVar[int]
    group_id: str


@dataclass(slots=True, frozen=True)
class GroupMemberKey:
    RECORD_TYPE: ClassVar[int]
    group_id: str
    member_id: str


class ClassicGroupMetadataKey(GroupKey):
    __slots__ = ()
    RECORD_TYPE = 2


class ConnectGroupMetadataKey(GroupKey):
    __slots__ = ()
    RECORD_TYPE = 3


class ConnectorsTasksMetadataKey(GroupKey):
    __slots__ = ()
    RECORD_TYPE = 4


class MemberMetadataKey(GroupMemberKey):
    __slots__ = ()
    RECORD_TYPE = 5


class TargetAssignmentMetadataKey(GroupKey):
    __slots__ = ()
    RECORD_TYPE = 6


class TargetAssignmentMemberKey(GroupMemberKey):
    __slots__ = ()
    RECORD_TYPE = 7


class CurrentMemberAssignmentKey(GroupMemberKey):
    __slots__ = ()
    RECORD_TYPE = 8


class GroupConfigurationKey(GroupKey):
    __slots__ = ()
    RECORD_TYPE = 9


class FormatLevelKey(GroupKey):
    """Type 10's key. Its group id is always "" (`PARTITION`): the level is its partition's, and
    the GroupKey schema keeps every reader that splits keys by group working unchanged."""

    __slots__ = ()
    RECORD_TYPE = 10
    PARTITION: ClassVar[str] = ""


RecordKey = GroupKey | GroupMemberKey


# --- values ----------------------------------------------------------------------------------


@record
class ClassicGroupMetadataValue:
    """Type 2: a classic-protocol group, from which a group can migrate to the connect type."""

    RECORD_TYPE: ClassVar[int] = 2
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[ClassicGroupMember, ...] = ()
    # Added in v1: the group's state when written (Empty, PreparingRebalance, CompletingRebalance,
    # Stable), so that a coordinator taking over resumes a rebalance a departure started, or waits
    # for the leader's SyncGroup, instead of taking the group for stable. None in v0 records.
    state: str | None = None


@record
class ConnectGroupMetadataValue:
    """Type 3: the group epoch; bumped whenever the group's metadata changes."""

    RECORD_TYPE: ClassVar[int] = 3
    group_epoch: int
    group_type: str = "connect"
    departures: tuple[Departure, ...] = ()  # since value version 1: who left at this epoch, and why
    # Since value version 2 (record format level 2): when this epoch was bumped, and when the
    # rebalance it belongs to began, so that a coordinator that loads the group times it.
    epoch_bumped_ms: int | None = None
    rebalance_started_ms: int | None = None


@record
class ConnectorsTasksMetadataValue:
    """Type 4: the connectors the group must run, with their task counts."""

    RECORD_TYPE: ClassVar[int] = 4
    connectors: tuple[ConnectorTaskCount, ...] = ()


@record
class MemberMetadataValue:
    """Type 5: what a worker told the coordinator about itself."""

    RECORD_TYPE: ClassVar[int] = 5
    group_epoch: int
    instance_id: str | None
    client_id: str
    client_host: str
    url: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    client_assignors: tuple[Assignor, ...] = ()
    rack_id: str | None = None  # since value version 1
    classic_member_metadata: ClassicMemberMetadata | None = None  # since v2: a member on the classic protocol


@record
class TargetAssignmentMetadataValue:
    """Type 6: the target assignment's epoch, assignor, error and deferred work."""

    RECORD_TYPE: ClassVar[int] = 6
    assignment_epoch: int
    error: int = 0
    error_message: str | None = None
    assignor_name: str | None = None
    installed_by: str | None = None
    scheduled_rebalance_at_ms: int | None = None
    deferred: ConnectorsAndTasks = dataclass_field(default_factory=ConnectorsAndTasks)
    departed_members: tuple[DepartedMember, ...] = ()  # since value version 1


class TargetAssignmentMemberValue(Shape):
    """Type 7: one member's part of the target assignment. Also the seed's MemberAssignment: what an
    assignor answers, and in a heartbeat answer what the member should own now."""

    RECORD_TYPE: ClassVar[int] = 7
    assignment: Annotated[ConnectorsAndTasks, doc("The assigned connectors/tasks to the member.")] = field(
        name="ConnectorsAndTasks"
    )
    error: Annotated[Int8, doc("The assigned error (the assignor's, 0 for none).")] = 0
    version: Annotated[Int16, doc("The version of the metadata.")] = 0
    metadata: Annotated[Base64, doc("The assigned metadata.")] = b""


@record
class CurrentMemberAssignmentValue:
    """Type 8: what a member owns at its member epoch, and what it still has to revoke."""

    RECORD_TYPE: ClassVar[int] = 8
    member_epoch: int
    previous_member_epoch: int
    state: str
    assignment: ConnectorsAndTasks
    pending_revocation: ConnectorsAndTasks = dataclass_field(default_factory=ConnectorsAndTasks)
    error: int = 0
    version: int = 0
    metadata: bytes = b""


@record
class GroupConfigurationValue:
    """Type 9: per-group timeouts; None means the server's default."""

    RECORD_TYPE: ClassVar[int] = 9
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    rebalance_timeout_ms: int | None = None
    scheduled_rebalance_max_delay_ms: int | None = None
    initial_assignment_delay_ms: int | None = None  # since value version 1


@record
class FormatLevelValue:
    """Type 10: the record format level of its partition (`records.schema.FORMAT_LEVELS`): no
    record of the partition is written at a value version above what this level allows."""

    RECORD_TYPE: ClassVar[int] = 10
    level: int


RecordValue = (
    ClassicGroupMetadataValue
    | ConnectGroupMetadataValue
    | ConnectorsTasksMetadataValue
    | MemberMetadataValue
    | TargetAssignmentMetadataValue
    | TargetAssignmentMemberValue
    | CurrentMemberAssignmentValue
    | GroupConfigurationValue
    | FormatLevelValue
)


@dataclass(slots=True)
class Record:
    """One entry of the topic: a key and its value, or None for a tombstone.

    `version` is the value version the record was decoded from (None: not decoded, write the
    latest). It is not part of equality: the same state read from v0 or v1 bytes is the same record.
    """

    key: RecordKey
    value: RecordValue | None
    version: int | None = None

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Record:
            return NotImplemented
        return self.key == other.key and self.value == other.value  # type: ignore[attr-defined]

    @property
    def record_type(self) -> int:
        return self.key.RECORD_TYPE

    @property
    def is_tombstone(self) -> bool:
        return self.value is None
