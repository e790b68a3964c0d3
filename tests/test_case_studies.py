"""The case studies of seed 000 ("Case Studies"), step by step, through the pure state machine.

The seed's items map to connectors A (2 tasks) and B (1 task): AC0 = A, AT1 = A-0, AT2 = A-1,
BC0 = B, BT1 = B-0. Epoch numbers are relative: setting the connectors is itself a change of the
group metadata, so the group is at epoch E0 = 1 before the first worker joins.
"""

from __future__ import annotations

from records import ConnectorsAndTasks, TaskId

from coordinator.core.assignors import ASSIGNORS
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.items import items_of
from coordinator.core.protocol import ErrorCode
from coordinator.core.states import MemberState

AC0, AT1, AT2, BC0, BT1 = "A", TaskId("A", 0), TaskId("A", 1), "B", TaskId("B", 0)
ALL = {AC0, AT1, AT2, BC0, BT1}
G = "connect-cluster"


def group(d: Driver):  # noqa: ANN201
    return d.state.groups[G]


def current(d: Driver, member: str) -> tuple[int, set]:
    c = group(d).current(member)
    return c.member_epoch, set(items_of(c.assignment))


def target(d: Driver, member: str) -> set:
    t = group(d).targets.get(member)
    return set() if t is None else set(items_of(t.assignment))


def new_group(delay_ms: int = 300_000) -> Driver:
    d = Driver()
    d.set_config(G, session_timeout_ms=10_000, heartbeat_interval_ms=3_000, scheduled_rebalance_max_delay_ms=delay_ms)
    d.set_connectors(G, {"A": 2, "B": 1})
    return d


def test_empty_group() -> None:
    d = new_group()
    g = group(d)
    assert g.group_epoch == 1  # the connectors were set
    assert g.assignment_epoch == 0 and not g.members and not g.targets and not g.currents


def test_w1_joins_and_gets_everything() -> None:
    d = new_group()
    w1 = SimWorker(d, G, "W1")
    response = w1.heartbeat(compute=False)
    # "The coordinator bumps the group epoch, adds W1 to the group, and creates an empty member assignment."
    assert group(d).group_epoch == 2
    assert current(d, "W1") == (0, set())
    # "W1 is selected as the member to run the client assignor."
    assert response.error_code == ErrorCode.COMPUTE_ASSIGNMENT
    assert w1.compute_assignment().error_code == ErrorCode.NONE
    assert group(d).assignment_epoch == 2 and target(d, "W1") == ALL
    assert current(d, "W1") == (0, set())  # until it heartbeats
    response = w1.heartbeat()
    # "the group coordinator transitions it to its target epoch/assignment because it does not have
    # any connectors/tasks to revoke"
    assert response.member_epoch == 2
    assert items_of(response.assignment.assignment) == ALL
    assert current(d, "W1") == (2, ALL)


def test_w2_joins_and_never_gets_b_before_w1_revoked_it() -> None:
    d = new_group()
    w1 = SimWorker(d, G, "W1")
    w1.heartbeat()
    w1.heartbeat()
    assert current(d, "W1") == (2, ALL)

    w2 = SimWorker(d, G, "W2")
    w2.heartbeat()
    assert group(d).group_epoch == 3  # "adds the member to the group and bumps the group epoch"
    assert current(d, "W1") == (2, ALL)
    assert w2.owned == frozenset()

    # "W1 is chosen as the member to run the client side assignor."
    assert w1.heartbeat(compute=False).error_code == ErrorCode.COMPUTE_ASSIGNMENT
    w1.compute_assignment()
    assert group(d).assignment_epoch == 3
    assert target(d, "W1") == {AC0, AT1, AT2} and target(d, "W2") == {BC0, BT1}

    # "W2 ... can't have BC0, BT1 until W1 revokes them."
    w2.heartbeat()
    assert not w2.owned & {BC0, BT1}
    assert group(d).current("W2").state == MemberState.UNRELEASED

    # "When W1 heartbeats the next time, it would be asked to revoke them."
    response = w1.heartbeat()
    assert response.member_epoch == 2  # the member keeps its epoch while it revokes
    assert items_of(response.assignment.assignment) == {AC0, AT1, AT2}  # current ∩ target
    assert group(d).current("W1").state == MemberState.UNREVOKED
    assert items_of(group(d).current("W1").pending_revocation) == {BC0, BT1}

    w2.heartbeat()
    assert not w2.owned & {BC0, BT1}, "W2 got B before W1 acknowledged its revocation"

    # "When it acknowledges the revocation, the coordinator would transition it to epoch" 3.
    response = w1.heartbeat()
    assert response.member_epoch == 3
    assert current(d, "W1") == (3, {AC0, AT1, AT2})

    # "When W2 heartbeats, it would get its assignments and be bumped to epoch" 3.
    response = w2.heartbeat()
    assert items_of(response.assignment.assignment) == {BC0, BT1}
    assert current(d, "W2") == (3, {BC0, BT1})


def _seed_state(delay_ms: int) -> tuple[Driver, dict[str, SimWorker]]:
    """Three workers with the seed's assignment: W1=[AC0, AT1], W2=[BC0, BT1], W3=[AT2]."""
    d = new_group(delay_ms)
    workers = {m: SimWorker(d, G, m) for m in ("W1", "W2", "W3")}
    for w in workers.values():
        w.heartbeat(compute=False)
    chosen = group(d).computation.member_id
    w = workers[chosen]
    w.heartbeat(compute=False)
    spec = d.run(d.coordinator.prepare_assignment(_prepare(w), d.now))
    result = ASSIGNORS["incremental_cooperative"].assign(spec)
    seed = {"W1": {AC0, AT1}, "W2": {BC0, BT1}, "W3": {AT2}}
    result = _with_members(result, seed)
    assert w.install(spec.group_epoch, result).error_code == ErrorCode.NONE
    converge(workers.values())
    for m, items in seed.items():
        assert set(workers[m].owned) == items
        assert current(d, m)[1] == items
    return d, workers


def _prepare(w: SimWorker):  # noqa: ANN202
    from coordinator.core.protocol import PrepareAssignmentRequest

    return PrepareAssignmentRequest(G, w.member_id, w.member_epoch)


def _with_members(result, members: dict[str, set]):  # noqa: ANN001, ANN202
    from dataclasses import replace

    import msgspec

    from coordinator.core.items import connectors_and_tasks

    return replace(
        result,
        members={
            m: msgspec.structs.replace(result.members[m], assignment=connectors_and_tasks(items))
            for m, items in members.items()
        },
    )


def _let_w2_session_expire(d: Driver, workers: dict[str, SimWorker]) -> int:
    epoch = group(d).group_epoch
    # W1 and W3 keep heartbeating; W2 fails to.
    for _ in range(4):
        d.advance(3_000)
        workers["W1"].heartbeat()
        workers["W3"].heartbeat()
    assert "W2" not in group(d).members
    assert (
        group(d).group_epoch == epoch + 1
    )  # "kicks it out after the session timeout expires and bump the group epoch"
    return epoch + 1


def test_worker_leaves_work_is_deferred_then_reassigned_after_the_delay() -> None:
    d, workers = _seed_state(delay_ms=60_000)
    w1, w3 = workers["W1"], workers["W3"]
    epoch = _let_w2_session_expire(d, workers)
    converge([w1, w3])
    g = group(d)
    # "this time it won't change any assignments to give the failing worker a chance to come back"
    assert g.assignment_epoch == epoch
    assert current(d, "W1") == (epoch, {AC0, AT1}) and current(d, "W3") == (epoch, {AT2})
    assert items_of(g.target_metadata.deferred) == {BC0, BT1}
    deadline = g.target_metadata.scheduled_rebalance_at_ms
    assert deadline is not None and deadline > d.now
    assert [dm.member_id for dm in g.target_metadata.departed_members] == ["W2"]

    # Nothing moves before the delay passes, however often they heartbeat.
    while d.now + 3_000 < deadline:
        d.advance(3_000)
        w1.heartbeat()
        w3.heartbeat()
        assert not (w1.owned | w3.owned) & {BC0, BT1}

    # The persisted deadline fires: a new epoch, and the deferred work is spread over W1 and W3.
    d.advance(deadline - d.now)
    assert group(d).group_epoch == epoch + 1
    converge([w1, w3])
    assert group(d).assignment_epoch == epoch + 1
    assert w1.owned | w3.owned == ALL and not w1.owned & w3.owned
    assert {AC0, AT1} <= w1.owned and AT2 in w3.owned  # sticky: what they had stays
    assert not items_of(group(d).target_metadata.deferred)
    assert group(d).target_metadata.departed_members == ()


def test_worker_bounces_and_gets_its_work_back_at_once() -> None:
    d, workers = _seed_state(delay_ms=300_000)
    w1, w2, w3 = workers["W1"], workers["W2"], workers["W3"]
    epoch = _let_w2_session_expire(d, workers)
    converge([w1, w3])
    assert items_of(group(d).target_metadata.deferred) == {BC0, BT1}
    before = {m: current(d, m)[1] for m in ("W1", "W3")}

    # "before that W2 joins back ... with the last known epoch": it is no longer a member.
    assert w2.heartbeat().error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # It rejoins with epoch 0 under the same member id: a new group epoch, and the assignor gives
    # it its old work at once instead of waiting for the 300 s delay.
    w2.heartbeat()
    assert group(d).group_epoch == epoch + 1
    converge([w1, w2, w3])
    final = epoch + 1
    assert current(d, "W2") == (final, {BC0, BT1})
    assert {m: current(d, m)[1] for m in ("W1", "W3")} == before  # nothing else moved
    assert current(d, "W1")[0] == final and current(d, "W3")[0] == final
    assert not items_of(group(d).target_metadata.deferred)
    assert group(d).target_metadata.scheduled_rebalance_at_ms is None
    assert d.now < 300_000


def test_seed_assignment_shape_is_what_the_seed_shows() -> None:
    # The helper above forced the seed's exact assignment; check it is also a valid one.
    d, workers = _seed_state(delay_ms=1_000)
    assert group(d).targets["W2"].assignment == ConnectorsAndTasks(("B",), (BT1,))
