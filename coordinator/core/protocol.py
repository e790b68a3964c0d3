"""The connect group protocol's vocabulary: error codes, sentinel epochs, requests and responses.

These are the state machine's inputs and outputs (seed 000 "Public Interfaces"), with the field
names of the seed in snake_case. The HTTP layer maps its JSON (DESIGN §7) onto them one to one.
Nullable request fields follow the seed: None means "unchanged since the last heartbeat".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Generic, TypeVar

from records import (
    Assignor,
    ClassicMemberMetadata,
    ClassicMemberProtocol,
    ConnectorsAndTasks,
    ConnectorTaskCount,
    Departure,
    Record,
)

from coordinator.core.assignors import GroupSpec, MemberAssignment

# Member epochs with a meaning of their own (seed 000 ConnectGroupHeartbeat "MemberEpoch").
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # leaves, but the InstanceId's assignment waits for its return


class ErrorCode(IntEnum):
    """Kafka's numbers where Kafka has the error (DESIGN §5); 1000+ for the connect type's own."""

    NONE = 0
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35  # a record format level this coordinator does not know
    INVALID_REQUEST = 42
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    COMPUTE_ASSIGNMENT = 1000
    INVALID_ASSIGNMENT = 1001
    UNKNOWN_CONNECTOR = 1002


class LeaveReason:
    """Why a member was removed from a connect group: the `Reason` of a type 3 `Departure`.

    A static member's leave (-2) removes nothing and is its own record (type 8 at epoch -2): its
    assignment waits for its InstanceId. If the instance comes back under a new member id, the old
    member is REPLACED; if its session expires first, it is removed as a STATIC_LEAVE, not a
    SESSION_TIMEOUT (it said it was going, it did not crash). A group is deleted only once it has no
    members (NON_EMPTY_GROUP otherwise), so no member is ever removed for that: the deletion is the
    type 3 tombstone. The field is a string, so a reason added later needs no new schema version;
    a reader shows one it does not know as it is (`leave_reason_text`)."""

    LEAVE = "leave"  # a leave heartbeat (-1), or a classic member's LeaveGroup
    STATIC_LEAVE = "static-leave"  # left with -2 and its instance did not return within its session
    SESSION_TIMEOUT = "session-timeout"  # no heartbeat within its session timeout
    REBALANCE_TIMEOUT = "rebalance-timeout"  # did not revoke within its rebalance timeout
    FENCED_EPOCH = "fenced-epoch"  # sent an epoch it had left behind
    REPLACED = "replaced"  # a new member took its InstanceId over


# Each reason in words, after the member id: "W2 fenced: no heartbeat within its session timeout".
# The one wording of describe, `coordinator replay timeline` and the replay plot.
LEAVE_REASON_TEXT = {
    LeaveReason.LEAVE: "left the group",
    LeaveReason.STATIC_LEAVE: "left as a static member and its instance did not return within its session timeout",
    LeaveReason.SESSION_TIMEOUT: "fenced: no heartbeat within its session timeout",
    LeaveReason.REBALANCE_TIMEOUT: "fenced: did not revoke within its rebalance timeout",
    LeaveReason.FENCED_EPOCH: "fenced: it sent an epoch it had left behind",
    LeaveReason.REPLACED: "replaced: a new member took its instance over",
}


def leave_reason_text(reason: str) -> str:
    """`reason` in words; one this version does not know (a newer coordinator's) as it is."""
    return LEAVE_REASON_TEXT.get(reason, reason)


class ProtocolError(Exception):
    """A request the protocol refuses, with the error code to answer (seed 000's error table).

    Raised wherever a handler finds it, before it has changed anything; `GroupCoordinator` turns
    it into the handler's response in one place. A refusal that writes records (fencing a member,
    an invalid assignment that resets the computation) is a `Result` like any other answer."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- requests --------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class RequestContext:
    """Who sent a request, from the transport rather than the body (Kafka's `RequestContext`):
    the client id the client gave (Kafka's request header `client.id`; over HTTP the `Client-Id`
    header, else the authenticated principal), recorded as the member's ClientId, and the remote
    address. `fresh_id` is a unique id the transport made for this request: the member id a classic
    JoinGroup hands out, as Kafka's coordinator makes one (the core has no randomness)."""

    client_id: str = ""
    client_host: str = ""
    fresh_id: str = ""


NO_CONTEXT = RequestContext()


@dataclass(slots=True, frozen=True)
class HeartbeatRequest:
    """ConnectGroupHeartbeat. `owned` is the seed's ConnectorsAndTasks: what the worker owns."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    client_assignors: tuple[Assignor, ...] | None = None
    owned: ConnectorsAndTasks | None = None
    # Where the worker's REST API listens (the seed's Worker "url"); None = unchanged.
    url: str | None = None
    # Seed 003: a connect member owns connectors and tasks; sending topic partitions is an error.
    topic_partitions: Any = None
    # Set only by the coordinator itself, for a classic member's JoinGroup translated into a
    # heartbeat (seed 000's migration): its session timeout and protocols. Never on the wire.
    classic: ClassicMemberMetadata | None = None


@dataclass(slots=True, frozen=True)
class PrepareAssignmentRequest:
    group_id: str
    member_id: str
    member_epoch: int


@dataclass(slots=True, frozen=True)
class InstallMember:
    """One member's part of an installed assignment."""

    member_id: str
    assignment: MemberAssignment | None  # None: the body had no ConnectorsAndTasks
    topic_partitions: Any = None  # seed 003: never together with ConnectorsAndTasks


@dataclass(slots=True, frozen=True)
class InstallAssignmentRequest:
    """ConnectGroupInstallAssignment, with the deferred items and delay of DESIGN §5."""

    group_id: str
    member_id: str
    member_epoch: int
    group_epoch: int
    members: tuple[InstallMember, ...] = ()
    error: int = 0
    error_message: str | None = None
    deferred: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)
    scheduled_rebalance_delay_ms: int | None = None


@dataclass(slots=True, frozen=True)
class SetConnectorsRequest:
    group_id: str
    connectors: tuple[ConnectorTaskCount, ...]


@dataclass(slots=True, frozen=True)
class SetConfigRequest:
    """Per-group timeouts; None restores the server's default."""

    group_id: str
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    rebalance_timeout_ms: int | None = None
    scheduled_rebalance_max_delay_ms: int | None = None
    initial_assignment_delay_ms: int | None = None


@dataclass(slots=True, frozen=True)
class DeleteGroupRequest:
    group_id: str


# --- the classic protocol (seed 004) ----------------------------------------------------------

UNKNOWN_GENERATION = -1


# One entry of a JoinGroup's Protocols: a name (for Connect, the assignor) and its metadata. The
# record's class, since a classic member of a connect group keeps them in its metadata (type 5 v2).
ClassicProtocol = ClassicMemberProtocol


@dataclass(slots=True, frozen=True)
class JoinGroupRequest:
    """JoinGroup: `member_id` is empty on a member's first join (the coordinator gives it one);
    `protocols` by preference. RebalanceTimeoutMs -1 means the session timeout (Kafka's v0)."""

    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[ClassicProtocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1
    instance_id: str | None = None
    reason: str | None = None


@dataclass(slots=True, frozen=True)
class JoinGroupMember:
    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(slots=True, frozen=True)
class JoinGroupResponse:
    """`members` is filled for the leader only: it computes everyone's assignment. SkipAssignment:
    a static leader that came back to a stable group is leader again but must not assign."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    generation_id: int = UNKNOWN_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(slots=True, frozen=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(slots=True, frozen=True)
class SyncGroupRequest:
    """SyncGroup: the leader sends every member's assignment, the others none."""

    group_id: str
    member_id: str
    generation_id: int
    instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncGroupAssignment, ...] = ()


@dataclass(slots=True, frozen=True)
class SyncGroupResponse:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, frozen=True)
class ClassicHeartbeatRequest:
    group_id: str
    member_id: str
    generation_id: int
    instance_id: str | None = None


@dataclass(slots=True, frozen=True)
class LeaveMember:
    """One member leaving: by member id, or by instance id alone (Kafka's LeaveGroup v3+)."""

    member_id: str
    instance_id: str | None = None
    reason: str | None = None


@dataclass(slots=True, frozen=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeaveMember, ...]


@dataclass(slots=True, frozen=True)
class LeaveMemberResponse:
    member_id: str
    instance_id: str | None
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(slots=True, frozen=True)
class LeaveGroupResponse:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    members: tuple[LeaveMemberResponse, ...] = ()


# --- responses -------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class HeartbeatResponse:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: MemberAssignment | None = None  # what the member should own now; None unless it changes
    # Beyond the seed: the session timeout the coordinator holds this member to (the group's, type 9
    # config or the server's default). The member stops its work when it has had no answer for the
    # shorter of this and its own, before the coordinator can give the work to another. 0: not said
    # (an error answer, or a coordinator older than the field).
    session_timeout_ms: int = 0


@dataclass(slots=True, frozen=True)
class PrepareAssignmentResponse:
    """The group state to feed the assignor: `group` is exactly what `ConnectAssignor.assign` takes."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    group_epoch: int = 0
    assignor_name: str | None = None
    group: GroupSpec | None = None


@dataclass(slots=True, frozen=True)
class ErrorResponse:
    """The answer of requests that return nothing but an outcome (install, admin writes)."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(slots=True, frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    url: str | None
    member_epoch: int
    state: str
    assignment: ConnectorsAndTasks
    pending_revocation: ConnectorsAndTasks
    target: ConnectorsAndTasks
    server_assignor: str | None
    client_assignors: tuple[Assignor, ...]
    protocol: str = "connect"  # or "classic": the protocol this member speaks


@dataclass(slots=True, frozen=True)
class GroupDescription:
    group_id: str
    group_epoch: int
    assignment_epoch: int
    state: str  # EMPTY, ASSIGNING, RECONCILING or STABLE
    assignor: str | None
    assignor_kind: str | None  # "server" or "client"
    connectors: tuple[ConnectorTaskCount, ...]
    members: tuple[MemberDescription, ...]
    deferred: ConnectorsAndTasks
    scheduled_rebalance_at_ms: int | None
    assignment_error: int
    assignment_error_message: str | None
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int | None
    scheduled_rebalance_max_delay_ms: int
    initial_assignment_delay_ms: int
    group_type: str = "connect"  # or "classic" (seed 004)
    generation: int | None = None  # a classic group's generation
    protocol_name: str | None = None  # the protocol a classic group chose
    leader: str | None = None  # a classic group's leader
    # Who the change that wrote `group_epoch` removed, and why (type 3 v1): the departures the
    # state holds. Earlier ones went with the epoch records after them (`coordinator replay`).
    departures: tuple[Departure, ...] = ()
    # While the group rebalances: since when (type 3 v2, record format level 2; None below it, or
    # when the group is not rebalancing).
    rebalancing_since_ms: int | None = None


@dataclass(slots=True, frozen=True)
class GroupListing:
    group_id: str
    group_epoch: int
    state: str
    members: int


@dataclass(slots=True, frozen=True)
class ItemStatus:
    """A connector's or a task's place: its state, the member holding it (None when UNASSIGNED),
    that member's instance id, and when the coordinator rebalances for it if it is deferred."""

    state: str
    member_id: str | None = None
    instance_id: str | None = None
    deferred_until_ms: int | None = None


@dataclass(slots=True, frozen=True)
class ConnectorStatus:
    """A connector of a group and its tasks (by task number), as Kafka Connect's status shows them."""

    group_id: str
    name: str
    connector: ItemStatus
    tasks: tuple[tuple[int, ItemStatus], ...]


# --- handler results -------------------------------------------------------------------------

TimerKey = tuple[str, ...]  # ("session", group, member), ("scheduled-rebalance", group), ...

# The kinds of timer (a key's first element). The runtime owns the clocks and treats keys as opaque.
SESSION = "session"  # a member's session: no heartbeat for session.timeout.ms
REBALANCE = "rebalance"  # a member's deadline to revoke what it must give up
ASSIGNMENT = "assignment"  # the chosen member's deadline to install (client-side)
SERVER_ASSIGNMENT = "server-assignment"  # the end of a server-side assignor's interval
INITIAL_ASSIGNMENT = "initial-assignment"  # an empty group that got members stops waiting for more
SCHEDULED_REBALANCE = "scheduled-rebalance"  # deferred work is given out (DESIGN §5)
ASSIGNMENT_RETRY = "assignment-retry"  # after an assignor error, ask again
CLASSIC_SESSION = "classic-session"  # a classic member's own session timeout
CLASSIC_JOIN = "classic-join"  # the end of a classic group's join phase
CLASSIC_SYNC = "classic-sync"  # the classic leader's deadline to send the assignments


def timer_key(kind: str, group_id: str, member_id: str | None = None) -> TimerKey:
    return (kind, group_id) if member_id is None else (kind, group_id, member_id)


@dataclass(slots=True, frozen=True)
class Timer:
    """Arm the timer `key` to fire at `deadline_ms`, replacing any timer of that key; None cancels."""

    key: TimerKey
    deadline_ms: int | None


# A request the coordinator answers later (a classic JoinGroup waits for the other members, a
# SyncGroup for the leader's assignments): ("join" or "sync", group id, member id).
ParkKey = tuple[str, str, str]
JOIN = "join"
SYNC = "sync"


@dataclass(slots=True, frozen=True)
class Parked:
    """A handler's response that says "not yet": the runtime keeps the request under `key` until
    a later result delivers its answer. A failover answers it NOT_COORDINATOR: the member asks the
    new coordinator again (seed 004, coordinator failures)."""

    key: ParkKey


R = TypeVar("R")


@dataclass(slots=True)
class Result(Generic[R]):
    """What a handler returns: records to make durable, the response to send once they are, and
    timers to arm or cancel. `volatile` holds the in-memory-only changes (which member computes
    the assignment); they go through `replay` like records but are never written. `deliveries`
    answer parked requests, sent like the response once the records are durable; they come before
    a `Parked` response of the same key (a member that asks again replaces its waiting request)."""

    response: R
    records: list[Record] = field(default_factory=list)
    timers: list[Timer] = field(default_factory=list)
    volatile: list[Any] = field(default_factory=list)
    deliveries: list[tuple[ParkKey, Any]] = field(default_factory=list)

    def merge(self, other: Result) -> None:
        """Take `other`'s effects too (its response is dropped): one handler, two groups' changes."""
        self.records.extend(other.records)
        self.timers.extend(other.timers)
        self.volatile.extend(other.volatile)
        self.deliveries.extend(other.deliveries)
