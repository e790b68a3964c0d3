"""The classic answers a real Kafka Connect worker does not survive, in one place.

Taken from Apache Kafka's code (facts, not code): kafka-clients'
`org.apache.kafka.clients.consumer.internals.AbstractCoordinator`, which Connect's
`WorkerCoordinator` extends, and connect-runtime's `WorkerCoordinator`, `WorkerGroupMember` and
`DistributedHerder`. Where an answer ends when it is fatal:

- `AbstractCoordinator.joinGroupIfNeeded` goes on after UnknownMemberId, IllegalGeneration,
  RebalanceInProgress and MemberIdRequired, backs off and retries after a retriable error
  (CoordinatorLoadInProgress, CoordinatorNotAvailable, NotCoordinator), and throws anything else;
  JoinGroup's and SyncGroup's failures both reach it (the SyncGroup future is chained to the
  JoinGroup's);
- the heartbeat thread (`AbstractCoordinator.HeartbeatThread.run`) survives every failed heartbeat
  but FencedInstanceId, which it keeps in `failed`; `AbstractCoordinator.pollHeartbeat` throws it;
- both reach `WorkerCoordinator.poll` from `WorkerGroupMember.ensureActive`/`poll`, called by
  `DistributedHerder.tick`; nothing on the way catches them, and `DistributedHerder.run` catches
  Throwable, logs "Uncaught exception in herder work thread, exiting" and calls `Exit.exit(1)`:
  the worker process dies.

`assert_survivable(api, response, ...)` raises AssertionError naming the rule an answer breaks.
`check(request, response)` takes the rest from the request. The `connect_survivable` fixture (autouse
once this module is a plugin: `pytest_plugins = ["connect_fatal"]` in tests/conftest.py, or imported
into a test module) checks every classic answer the in-memory `Driver` gives, the answers to parked
requests included. A test that means to get a fatal answer says so: `with allow_fatal(code, ...)`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from coordinator.core.protocol import (
    ClassicHeartbeatRequest,
    ErrorCode,
    JoinGroupRequest,
    LeaveGroupRequest,
    Parked,
    SyncGroupRequest,
)

JOIN, SYNC, HEARTBEAT, LEAVE = "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"

# Kafka's codes that our ErrorCode does not have.
UNSUPPORTED_VERSION = 35


@dataclass(frozen=True, slots=True)
class Rule:
    """An answer that stops a Connect worker: what it is, and where Kafka's code makes it fatal."""

    api: str
    answer: str
    source: str


# --- the answers Connect goes on after --------------------------------------------------------

_JOIN_SURVIVED = {
    ErrorCode.NONE: "AbstractCoordinator.JoinGroupResponseHandler.handle (but see the NONE rules below)",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "JoinGroupResponseHandler.handle: 'backoff and retry' (retriable)",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "JoinGroupResponseHandler.handle: markCoordinatorUnknown, retry",
    ErrorCode.NOT_COORDINATOR: "JoinGroupResponseHandler.handle: markCoordinatorUnknown, retry",
    ErrorCode.UNKNOWN_MEMBER_ID: "JoinGroupResponseHandler.handle: resets the member id, joinGroupIfNeeded goes on",
    ErrorCode.REBALANCE_IN_PROGRESS: "JoinGroupResponseHandler.handle: 'Will retry'",
    ErrorCode.MEMBER_ID_REQUIRED: "JoinGroupResponseHandler.handle: rejoins with the member id given",
}
_SYNC_SURVIVED = {
    ErrorCode.NONE: "AbstractCoordinator.SyncGroupResponseHandler.handle (but see the NONE rules below)",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "SyncGroupResponseHandler.handle: markCoordinatorUnknown, retry",
    ErrorCode.NOT_COORDINATOR: "SyncGroupResponseHandler.handle: markCoordinatorUnknown, retry",
    ErrorCode.ILLEGAL_GENERATION: "SyncGroupResponseHandler.handle: resets the generation, rejoins",
    ErrorCode.UNKNOWN_MEMBER_ID: "SyncGroupResponseHandler.handle: resets the member id, rejoins",
    ErrorCode.REBALANCE_IN_PROGRESS: "SyncGroupResponseHandler.handle: rejoins",
}

# --- the fatal ones -------------------------------------------------------------------------------

RULES: dict[str, dict[int | str, Rule]] = {
    JOIN: {
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL: Rule(
            JOIN,
            "INCONSISTENT_GROUP_PROTOCOL (23)",
            "AbstractCoordinator.JoinGroupResponseHandler.handle: 'JoinGroup failed due to fatal error'",
        ),
        ErrorCode.INVALID_GROUP_ID: Rule(JOIN, "INVALID_GROUP_ID (24)", "JoinGroupResponseHandler.handle: fatal error"),
        ErrorCode.INVALID_SESSION_TIMEOUT: Rule(
            JOIN, "INVALID_SESSION_TIMEOUT (26)", "JoinGroupResponseHandler.handle: fatal error"
        ),
        ErrorCode.GROUP_AUTHORIZATION_FAILED: Rule(
            JOIN, "GROUP_AUTHORIZATION_FAILED (30)", "JoinGroupResponseHandler.handle: GroupAuthorizationException"
        ),
        ErrorCode.GROUP_MAX_SIZE_REACHED: Rule(
            JOIN, "GROUP_MAX_SIZE_REACHED (81)", "JoinGroupResponseHandler.handle: GroupMaxSizeReachedException"
        ),
        ErrorCode.FENCED_INSTANCE_ID: Rule(
            JOIN, "FENCED_INSTANCE_ID (82)", "JoinGroupResponseHandler.handle: 'always treat this as a fatal error'"
        ),
        UNSUPPORTED_VERSION: Rule(
            JOIN,
            "UNSUPPORTED_VERSION (35)",
            "JoinGroupResponseHandler.handle: UnsupportedVersionException, not retriable",
        ),
        "other": Rule(
            JOIN,
            "any other error code (ILLEGAL_GENERATION and INVALID_REQUEST among them)",
            "JoinGroupResponseHandler.handle: KafkaException 'Unexpected error in join group response'",
        ),
        "protocol-type": Rule(
            JOIN,
            "NONE with a ProtocolType other than the member's",
            "JoinGroupResponseHandler.handle: isProtocolTypeInconsistent -> INCONSISTENT_GROUP_PROTOCOL",
        ),
        "skip-assignment": Rule(
            JOIN,
            "NONE telling the leader SkipAssignment",
            "WorkerCoordinator.onLeaderElected: IllegalStateException \"Can't skip assignment "
            'because Connect does not support static membership" (Connect never sends a '
            "GroupInstanceId: GroupRebalanceConfig; the rule is Connect's, so a static member, "
            "which our own classic worker may be, is exempt)",
        ),
        "leader-not-a-member": Rule(
            JOIN,
            "NONE making a member leader without itself among Members",
            "EagerAssignor/IncrementalCooperativeAssignor.performAssignment: "
            "memberConfigs.get(leaderId).url(), a NullPointerException",
        ),
    },
    SYNC: {
        ErrorCode.GROUP_AUTHORIZATION_FAILED: Rule(
            SYNC,
            "GROUP_AUTHORIZATION_FAILED (30)",
            "AbstractCoordinator.SyncGroupResponseHandler.handle: GroupAuthorizationException",
        ),
        ErrorCode.FENCED_INSTANCE_ID: Rule(
            SYNC, "FENCED_INSTANCE_ID (82)", "SyncGroupResponseHandler.handle: 'always treat this as a fatal error'"
        ),
        "other": Rule(
            SYNC,
            "any other error code (COORDINATOR_LOAD_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL and "
            "INVALID_REQUEST among them)",
            "SyncGroupResponseHandler.handle: KafkaException 'Unexpected error from SyncGroup'",
        ),
        "protocol-type": Rule(
            SYNC,
            "NONE with a ProtocolType other than the member's",
            "SyncGroupResponseHandler.handle: isProtocolTypeInconsistent -> INCONSISTENT_GROUP_PROTOCOL",
        ),
        "protocol-name": Rule(
            SYNC,
            "NONE with a ProtocolName other than the generation's",
            "SyncGroupResponseHandler.handle: protocolNameInconsistent -> INCONSISTENT_GROUP_PROTOCOL",
        ),
    },
    HEARTBEAT: {
        ErrorCode.FENCED_INSTANCE_ID: Rule(
            HEARTBEAT,
            "FENCED_INSTANCE_ID (82)",
            "AbstractCoordinator.HeartbeatThread.run keeps it in `failed`; "
            "pollHeartbeat throws it (every other failed heartbeat is retried)",
        ),
    },
    # No LeaveGroup answer stops a worker: AbstractCoordinator.maybeLeaveGroup sends it and nobody
    # waits for its future (WorkerCoordinator.close, DistributedHerder's "taking too long to read
    # the log"); LeaveGroupResponseHandler.handle only raises into it, which is logged.
    LEAVE: {},
}

_allowed: list[frozenset[int]] = []


@contextlib.contextmanager
def allow_fatal(*codes: int) -> Iterator[None]:
    """Inside, answers with these error codes pass (0: the NONE rules too): the test means them."""
    _allowed.append(frozenset(int(c) for c in codes))
    try:
        yield
    finally:
        _allowed.pop()


def _fail(rule: Rule, response: Any) -> None:
    raise AssertionError(
        f"{rule.api} answered {rule.answer}: a Kafka Connect worker does not survive it "
        f"({rule.source}; DistributedHerder.run then exits the process). Answer: {response!r}"
    )


def assert_survivable(
    api: str,
    response: Any,
    *,
    protocol_type: str | None = "connect",
    protocol_name: str | None = None,
    static: bool = False,
) -> None:
    """Raise AssertionError if a Connect worker does not survive `response` to its `api` request
    (JOIN, SYNC, HEARTBEAT, LEAVE; our core responses: JoinGroupResponse, SyncGroupResponse,
    ErrorResponse, LeaveGroupResponse, or only the error code, whose NONE is then not looked into).
    `protocol_type` and `protocol_name` are what the request sent (None: not checked); `static`:
    the request carried a GroupInstanceId."""
    code = int(response) if isinstance(response, int) else int(response.error_code)
    if any(code in allowed for allowed in _allowed):
        return
    if isinstance(response, int) and code == ErrorCode.NONE:
        return
    rules = RULES[api]
    if api == JOIN:
        if code not in _JOIN_SURVIVED:
            _fail(rules.get(code, rules["other"]), response)
        if code == ErrorCode.NONE:
            if (
                protocol_type is not None
                and response.protocol_type is not None
                and response.protocol_type != protocol_type
            ):
                _fail(rules["protocol-type"], response)
            if response.leader and response.leader == response.member_id:
                if response.skip_assignment and not static:
                    _fail(rules["skip-assignment"], response)
                if not response.skip_assignment and response.member_id not in {m.member_id for m in response.members}:
                    _fail(rules["leader-not-a-member"], response)
    elif api == SYNC:
        if code not in _SYNC_SURVIVED:
            _fail(rules.get(code, rules["other"]), response)
        if code == ErrorCode.NONE:
            if (
                protocol_type is not None
                and response.protocol_type is not None
                and response.protocol_type != protocol_type
            ):
                _fail(rules["protocol-type"], response)
            if (
                protocol_name is not None
                and response.protocol_name is not None
                and response.protocol_name != protocol_name
            ):
                _fail(rules["protocol-name"], response)
    elif api == HEARTBEAT:
        if code in rules:
            _fail(rules[code], response)
    elif api != LEAVE:
        raise ValueError(f"unknown api {api!r}")


def api_of(request: Any) -> str:
    if isinstance(request, JoinGroupRequest):
        return JOIN
    if isinstance(request, SyncGroupRequest):
        return SYNC
    if isinstance(request, ClassicHeartbeatRequest):
        return HEARTBEAT
    if isinstance(request, LeaveGroupRequest):
        return LEAVE
    raise TypeError(f"not a classic request: {request!r}")


def check(request: Any, response: Any) -> Any:
    """`assert_survivable` for `response` to `request` (which says the api, the protocol type and
    name it sent, and whether it is static); returns `response`."""
    assert_survivable(
        api_of(request),
        response,
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        static=getattr(request, "instance_id", None) is not None,
    )
    return response


# --- the fixture: every classic answer of the in-memory driver ----------------------------------


@pytest.fixture(autouse=True)
def connect_survivable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checks every classic answer `coordinator.core.driver.Driver` gives, direct or to a parked
    request, with `check`."""
    from coordinator.core.driver import Driver

    def parked_requests(driver: Driver) -> dict:
        requests = driver.__dict__.get("_connect_fatal_requests")
        if requests is None:
            requests = driver.__dict__["_connect_fatal_requests"] = {}
        return requests

    def checked(method: Any) -> Any:
        def call(self: Driver, request: Any, *args: Any) -> Any:
            response = method(self, request, *args)
            if isinstance(response, Parked):
                parked_requests(self)[response.key] = request
            else:
                check(request, response)
            return response

        return call

    run = Driver.run

    def checked_run(self: Driver, result: Any) -> Any:
        waiting = set(self.waiting)
        response = run(self, result)
        requests = parked_requests(self)
        for key, answer in result.deliveries:
            if key in waiting:
                waiting.discard(key)
                request = requests.get(key)
                if request is not None:
                    check(request, answer)
                else:
                    assert_survivable(JOIN if key[0] == "join" else SYNC, answer, protocol_type=None)
        return response

    for name in ("join_group", "sync_group", "classic_heartbeat", "leave_group"):
        monkeypatch.setattr(Driver, name, checked(getattr(Driver, name)))
    monkeypatch.setattr(Driver, "run", checked_run)
