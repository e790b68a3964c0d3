"""What every part of the protocol shares: error codes, sentinel epochs, why members leave, the
`Message` every request and response is, and what a handler returns (`Result`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Annotated, Any, Generic, TypeVar

from msgspec import Struct

from records import Record
from records.constraints import doc

__all__ = [
    "ASSIGNMENT",
    "ASSIGNMENT_RETRY",
    "CLASSIC_JOIN",
    "CLASSIC_SESSION",
    "CLASSIC_SYNC",
    "INITIAL_ASSIGNMENT",
    "JOIN",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "LEAVE_REASON_TEXT",
    "NO_CONTEXT",
    "REBALANCE",
    "SCHEDULED_REBALANCE",
    "SERVER_ASSIGNMENT",
    "SESSION",
    "SYNC",
    "ErrorCode",
    "ErrorResponse",
    "LeaveReason",
    "Message",
    "ParkKey",
    "Parked",
    "ProtocolError",
    "RequestContext",
    "Result",
    "Timer",
    "TimerKey",
    "leave_reason_text",
    "timer_key",
]

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


class Message(Struct, rename="pascal", frozen=True, gc=False):
    """A request or response: its JSON field names are the seed's (`rename="pascal"`); immutable, and
    nothing refers back to itself, so the garbage collector need not track it (`gc=False`: a third
    off decoding)."""


class ErrorResponse(Message):
    """An outcome and nothing else: the whole answer of install-assignment and the admin writes, and of
    any operation whose partition cannot serve (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) or whose
    coordinator failed unexpectedly (COORDINATOR_NOT_AVAILABLE)."""

    error_code: Annotated[int, doc("The top-level error code, or 0 if there was no error.")] = ErrorCode.NONE
    error_message: Annotated[str | None, doc("The top-level error message, or null if there was no error.")] = None


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
