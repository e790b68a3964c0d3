"""The group's session timeout reaches the worker (issue 29, item 2): the heartbeat response says
the session the coordinator holds the member to (`SessionTimeoutMs`, beyond the seed), and the
member stops its work after the shorter of that and its own. Pure: the coordinator's and the
member's state machines on the in-memory driver, time an argument."""

from __future__ import annotations

import msgspec

from records import ConnectorsAndTasks, TaskId

from coordinator.api import wire
from coordinator.core.assignors import MemberAssignment
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.items import items_of
from coordinator.core.protocol import ErrorCode, HeartbeatRequest, HeartbeatResponse
from coordinator.core.worker.member import Lose, Member

GIVEN = ConnectorsAndTasks(("A",), (TaskId("A", 0),))


def _member(own_ms: int = 10_000) -> Member:
    return Member("g", "m1", session_timeout_ms=own_ms)


def _answer(epoch: int, session_ms: int, assignment: ConnectorsAndTasks | None = None) -> HeartbeatResponse:
    given = None if assignment is None else MemberAssignment(assignment)
    return HeartbeatResponse(ErrorCode.NONE, None, epoch, 500, given, session_ms)


# --- the member, alone ---------------------------------------------------------------------------------


def test_the_member_fences_itself_at_the_groups_session_when_it_is_shorter() -> None:
    m = _member(10_000)
    m.heartbeat(0)
    m.received(_answer(1, 2_000, GIVEN), 5)
    assert m.group_session_timeout_ms == 2_000 and m.fence_timeout_ms == 2_000
    assert m.fence_deadline() == 2_000, "measured from when the answered request was sent"
    assert m.poll(1_999) == []
    (lost,) = m.poll(2_000)
    assert isinstance(lost, Lose) and lost.items == GIVEN and "session timeout 2000 ms" in lost.reason
    assert not m.owned and m.member_epoch == 0


def test_the_members_own_session_holds_when_it_is_the_shorter() -> None:
    m = _member(1_500)
    m.heartbeat(0)
    m.received(_answer(1, 30_000, GIVEN), 5)
    assert m.fence_timeout_ms == 1_500 and m.fence_deadline() == 1_500


def test_without_a_word_from_the_coordinator_the_member_keeps_its_own() -> None:
    """0: an error answer, or a coordinator older than the field. Neither forgets what was heard."""
    m = _member(10_000)
    m.heartbeat(0)
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 1, 500, MemberAssignment(GIVEN)), 5)
    assert m.group_session_timeout_ms is None and m.fence_deadline() == 10_000
    m.heartbeat(500)
    m.received(_answer(1, 2_000), 510)
    m.heartbeat(1_000)
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 1, 500), 1_010)
    assert m.group_session_timeout_ms == 2_000 and m.fence_deadline() == 3_000


def test_the_last_value_heard_wins_and_outlives_a_rejoin() -> None:
    m = _member(10_000)
    m.heartbeat(0)
    m.received(_answer(1, 2_000, GIVEN), 5)
    m.heartbeat(500)
    m.received(_answer(1, 4_000), 505)  # an operator lengthened the group's session
    assert m.fence_deadline() == 4_500
    m.heartbeat(1_000)
    m.received(HeartbeatResponse(ErrorCode.FENCED_MEMBER_EPOCH, "fenced"), 1_010)
    assert m.member_epoch == 0 and m.group_session_timeout_ms == 4_000
    m.heartbeat(1_010)
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 3, 500, MemberAssignment(GIVEN)), 1_020)
    assert m.fence_deadline() == 1_010 + 4_000, "the group's session is known before the next answer says it"


def test_failures_before_the_deadline_keep_the_work_and_the_deadline_still_comes() -> None:
    m = _member(10_000)
    m.heartbeat(0)
    m.received(_answer(1, 2_000, GIVEN), 5)
    m.heartbeat(500)
    assert m.failed(1_200, "connection refused") == []
    assert m.owned, "a failure is not yet a session timeout"
    assert m.heartbeat_due() > m.fence_deadline() - 1_000
    (lost,) = m.failed(2_000, "timed out")
    assert isinstance(lost, Lose) and lost.items == GIVEN


# --- the coordinator says it --------------------------------------------------------------------------


def _group(**config: int) -> tuple[Driver, list[SimWorker]]:
    driver = Driver()
    driver.set_config("g", scheduled_rebalance_max_delay_ms=0, **config)
    driver.set_connectors("g", {"A": 4})
    workers = [SimWorker(driver, "g", name, session_timeout_ms=30_000) for name in ("w1", "w2")]
    converge(workers)
    return driver, workers


def test_every_answer_without_an_error_says_the_groups_session_timeout() -> None:
    driver, (w1, w2) = _group(session_timeout_ms=2_000, heartbeat_interval_ms=500)
    assert w1.heartbeat().session_timeout_ms == 2_000  # a steady heartbeat
    assert w1.member.fence_timeout_ms == 2_000 and w2.member.fence_timeout_ms == 2_000
    # The operator changes the group's session: the next answers say the new one.
    driver.set_config("g", session_timeout_ms=6_000, heartbeat_interval_ms=500, scheduled_rebalance_max_delay_ms=0)
    assert w1.heartbeat().session_timeout_ms == 6_000
    # Back to the server's default.
    driver.set_config("g")
    assert w1.heartbeat().session_timeout_ms == driver.coordinator.config.session_timeout_ms
    # A join says it too, and an error answer says nothing.
    joined = SimWorker(driver, "g", "w3").heartbeat()
    assert joined.error_code == ErrorCode.NONE and joined.session_timeout_ms == 10_000
    fenced = driver.heartbeat(HeartbeatRequest("g", "w3", 77))
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH and fenced.session_timeout_ms == 0


def test_a_worker_cut_off_stops_before_the_coordinator_gives_its_work_away() -> None:
    """The worker's own session (30 s) is far longer than the group's (2 s): it stops at the
    group's, before the coordinator's session timer, started when the request arrived, fires."""
    driver, (w1, w2) = _group(session_timeout_ms=2_000, heartbeat_interval_ms=500)
    sent = driver.now
    w1.heartbeat()
    held = w1.owned
    assert held
    driver.advance(1_999)
    w2.heartbeat()
    assert w1.member.poll(driver.now) == [] and w1.owned == held
    (lost,) = w1.member.poll(sent + 2_000)
    assert isinstance(lost, Lose) and items_of(lost.items) == held and not w1.owned
    assert "w1" in driver.state.groups["g"].members, "the coordinator has not fenced it yet"
    driver.advance(1)
    assert "w1" not in driver.state.groups["g"].members
    converge([w2])
    assert w2.owned >= held


# --- the wire -----------------------------------------------------------------------------------------


def test_the_wire_carries_session_timeout_ms_and_reads_an_older_coordinators_answer() -> None:
    body = msgspec.json.decode(wire.encode(_answer(3, 2_000)))
    assert body["SessionTimeoutMs"] == 2_000 and body["HeartbeatIntervalMs"] == 500
    older = {"ErrorCode": 0, "ErrorMessage": None, "MemberEpoch": 3, "HeartbeatIntervalMs": 500, "Assignment": None}
    assert msgspec.convert(older, HeartbeatResponse).session_timeout_ms == 0
