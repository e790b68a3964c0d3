"""The worker's side of the protocol as one sans-I/O state machine (`coordinator.core.worker.member`),
against the coordinator's state machine on the in-memory driver. No broker, no network: time is
an argument. Each test is one of the promises the module docstring lists."""

from __future__ import annotations

from records import ConnectorsAndTasks, TaskId

from coordinator.core.assignors import MemberAssignment
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.items import items_of
from coordinator.core.protocol import ErrorCode, HeartbeatResponse
from coordinator.core.worker.member import Assign, ComputeAssignment, GiveUp, Lose, Member, Revoke


def _group(connectors: dict[str, int], *names: str, **config: int) -> tuple[Driver, list[SimWorker]]:
    driver = Driver()
    driver.set_config("g", scheduled_rebalance_max_delay_ms=0, **config)
    driver.set_connectors("g", connectors)
    workers = [SimWorker(driver, "g", name) for name in names]
    converge(workers)
    return driver, workers


def test_a_joining_member_sends_every_field_then_only_what_changed() -> None:
    m = Member(
        "g",
        "m1",
        instance_id="i1",
        rack_id="r1",
        rebalance_timeout_ms=5_000,
        url="http://w1",
        server_assignor="incremental_cooperative",
    )
    first = m.heartbeat(0)
    assert (
        first.member_epoch,
        first.instance_id,
        first.rack_id,
        first.rebalance_timeout_ms,
        first.url,
        first.server_assignor,
    ) == (0, "i1", "r1", 5_000, "http://w1", "incremental_cooperative")
    assert first.owned == ConnectorsAndTasks()
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 3, 1_000), 10)
    steady = m.heartbeat(1_000)
    assert (
        steady.member_epoch,
        steady.instance_id,
        steady.rebalance_timeout_ms,
        steady.server_assignor,
        steady.owned,
    ) == (3, None, -1, None, None)


def test_a_lost_response_makes_the_next_heartbeat_full_and_the_coordinator_rescues_it() -> None:
    """Seed 000: every field "when an error occurs (e.g. request timed out)". The coordinator moved
    the member to a new epoch and the answer was lost: the full request (with what it owns) is
    taken as the lost-response case, not fenced."""
    driver, (w1, w2) = _group({"A": 4}, "w1", "w2")
    w3 = SimWorker(driver, "g", "w3")
    w3.heartbeat()
    for _ in range(20):  # heartbeat until an answer moves w3 to a new epoch; that answer is lost
        w1.heartbeat()
        w2.heartbeat()
        request = w3.member.heartbeat(driver.now)
        lost = driver.heartbeat(request)
        if lost.member_epoch != request.member_epoch:
            break
        w3.carry_out(w3.member.received(lost, driver.now))
    else:
        raise AssertionError("w3 never moved to a new epoch")
    assert w3.member.failed(driver.now, "timed out") == []
    retry = w3.member.heartbeat(driver.now)
    assert retry.member_epoch == request.member_epoch
    assert retry.rebalance_timeout_ms != -1 and retry.owned is not None, "after an error, every field"
    response = driver.heartbeat(retry)
    assert response.error_code == ErrorCode.NONE, f"fenced instead of rescued: {response}"
    assert response.member_epoch == lost.member_epoch
    w3.carry_out(w3.member.received(response, driver.now))
    converge([w1, w2, w3])
    assert w3.owned


def test_a_revocation_is_acted_on_before_the_acknowledgement_which_is_due_at_once() -> None:
    m = Member("g", "m1")
    m.heartbeat(0)
    given = ConnectorsAndTasks(("A",), (TaskId("A", 0), TaskId("A", 1)))
    actions = m.received(HeartbeatResponse(ErrorCode.NONE, None, 1, 3_000, MemberAssignment(given)), 0)
    assert actions == [Assign(given, MemberAssignment(given))]
    assert m.heartbeat_due() == 0, "the coordinator has not heard what it owns"
    m.heartbeat(0)
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 1, 3_000), 5)
    assert m.heartbeat_due() == 3_005
    kept = ConnectorsAndTasks(("A",), (TaskId("A", 0),))
    m.heartbeat(3_005)
    actions = m.received(HeartbeatResponse(ErrorCode.NONE, None, 2, 3_000, MemberAssignment(kept)), 3_010)
    assert actions == [Revoke(ConnectorsAndTasks((), (TaskId("A", 1),)))]
    assert m.heartbeat_due() == 3_010, "a revocation is acknowledged at once"
    ack = m.heartbeat(3_010)
    assert ack.owned == kept


def test_fenced_loses_everything_and_rejoins_with_the_same_member_id() -> None:
    m = Member("g", "m1")
    m.heartbeat(0)
    given = ConnectorsAndTasks(("A",))
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 4, 1_000, MemberAssignment(given)), 0)
    m.heartbeat(1_000)
    actions = m.received(HeartbeatResponse(ErrorCode.FENCED_MEMBER_EPOCH, "fenced"), 1_000)
    assert len(actions) == 1 and isinstance(actions[0], Lose) and actions[0].items == given
    rejoin = m.heartbeat(1_000)
    assert (rejoin.member_id, rejoin.member_epoch, rejoin.owned) == ("m1", 0, ConnectorsAndTasks())


def test_leaving_revokes_everything_before_the_leave_request() -> None:
    m = Member("g", "m1", instance_id="i1")
    m.heartbeat(0)
    given = ConnectorsAndTasks(("A",), (TaskId("A", 0),))
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 2, 1_000, MemberAssignment(given)), 0)
    actions, request = m.leave()
    assert actions == [Revoke(given)]
    assert request is not None and request.member_epoch == -2, "a static member leaves with -2"
    assert m.owned == frozenset() and m.member_epoch == 0


def test_no_answer_for_a_session_timeout_stops_the_work_before_the_coordinator_gives_it_away() -> None:
    """KAFKA-9184's zombie tasks: cut off, the worker stops its work itself. Its last answered
    heartbeat was sent at `sent`; the coordinator's session timer started when it arrived, no
    earlier, so the worker's deadline comes first."""
    driver, (w1, w2) = _group({"A": 4}, "w1", "w2", session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    sent = driver.now
    w1.heartbeat()
    assert w1.owned
    assert w1.member.poll(sent + 9_999) == []
    actions = w1.member.failed(sent + 10_000, "connection refused")
    assert [type(a) for a in actions] == [Lose] and items_of(actions[0].items) and not w1.owned
    # The coordinator has not fenced it yet: its session runs from when the heartbeat arrived.
    assert "w1" in driver.state.groups["g"].members
    driver.advance(10_001)
    assert "w1" not in driver.state.groups["g"].members
    converge([w1, w2])
    owners: dict = {}
    for w in (w1, w2):
        for item in w.owned:
            assert item not in owners, f"{item} owned by {owners[item]} and {w.member_id}"
            owners[item] = w.member_id


def test_an_error_no_retry_can_fix_loses_everything_and_gives_up() -> None:
    m = Member("g", "m1")
    m.heartbeat(0)
    given = ConnectorsAndTasks(("A",))
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 1, 1_000, MemberAssignment(given)), 0)
    m.heartbeat(1_000)
    actions = m.received(HeartbeatResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED, "no"), 1_000)
    assert [type(a) for a in actions] == [Lose, GiveUp]
    assert actions[0].items == given and "GROUP_AUTHORIZATION_FAILED" in actions[1].reason
    assert m.given_up is not None


def test_retriable_errors_are_failures_not_refusals() -> None:
    m = Member("g", "m1")
    m.heartbeat(0)
    m.received(HeartbeatResponse(ErrorCode.NONE, None, 1, 1_000), 0)
    m.heartbeat(1_000)
    assert m.received(HeartbeatResponse(ErrorCode.NOT_COORDINATOR, "moved"), 1_000) == []
    assert m.given_up is None and m.full_request


def test_compute_assignment_is_an_action_after_the_reconciliation() -> None:
    m = Member("g", "m1")
    m.heartbeat(0)
    given = ConnectorsAndTasks(("A",))
    actions = m.received(
        HeartbeatResponse(ErrorCode.COMPUTE_ASSIGNMENT, "compute", 1, 1_000, MemberAssignment(given)), 0
    )
    assert [type(a) for a in actions] == [Assign, ComputeAssignment]


def test_unreleased_instance_asks_again_soon() -> None:
    m = Member("g", "m1", instance_id="i1", heartbeat_interval_ms=3_000)
    m.heartbeat(0)
    assert m.received(HeartbeatResponse(ErrorCode.UNRELEASED_INSTANCE_ID, "held"), 10) == []
    assert 10 < m.heartbeat_due() <= 210
    assert m.heartbeat(m.heartbeat_due()).member_epoch == 0
