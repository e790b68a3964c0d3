"""Classic workers (`ClassicWorker`, Kafka Connect's WorkerCoordinator) against the pure
coordinator, in Kafka Connect's protocols and bytes: the leader assigns in SyncGroup, cooperative
rounds (`sessioned`, `compatible`) never give an item another worker still runs and say only what
is added, deferred work waits for its owner, eager (`default`) stops everything first. No item is ever owned by two workers, checked after every step."""

from __future__ import annotations

from collections import Counter

from records import ConnectorsAndTasks, ConnectorTaskCount, TaskId
from records.connect_protocol import (
    WorkerAssignment,
    WorkerMetadata,
    decode_assignment,
    decode_metadata,
    encode_metadata,
)

from coordinator.core.driver import Driver, SimClassicWorker, step_all
from coordinator.core.items import configured_work
from coordinator.core.protocol import ErrorCode, ErrorResponse, JoinGroupMember, JoinGroupRequest, JoinGroupResponse
from coordinator.core.states import ClassicGroupState
from coordinator.core.worker.classic import ClassicWorker
from coordinator.core.worker.member import Assign, Lose, Revoke

G = "connect-cluster"
CONNECTORS = {"A": 4, "B": 3}


def every_item() -> frozenset:
    return configured_work(tuple(ConnectorTaskCount(n, t) for n, t in CONNECTORS.items())).items


def fleet(d: Driver, names: list[str], **options) -> list[SimClassicWorker]:  # noqa: ANN003
    options.setdefault("session_timeout_ms", 3_000)
    options.setdefault("rebalance_timeout_ms", 5_000)
    options.setdefault("heartbeat_interval_ms", 500)
    options.setdefault("scheduled_rebalance_max_delay_ms", 4_000)
    return [SimClassicWorker(d, G, n, **options) for n in names]


def run(workers: list[SimClassicWorker], ms: int, tick_ms: int = 100) -> None:
    """Time passes; after every step no item is owned by two workers."""
    d = workers[0].driver

    def nothing_owned_twice() -> None:
        owners = Counter(item for v in workers for item in v.owned)
        doubled = [item for item, n in owners.items() if n > 1]
        assert not doubled, f"owned twice: {doubled}"

    for _ in range(ms // tick_ms):
        step_all(workers, after=nothing_owned_twice)
        d.advance(tick_ms)


def converged(workers: list[SimClassicWorker]) -> bool:
    owned = [item for w in workers for item in w.owned]
    return len(owned) == len(set(owned)) and set(owned) == every_item()


def started(names: list[str], **options) -> tuple[Driver, list[SimClassicWorker]]:  # noqa: ANN003
    d = Driver()
    d.set_connectors(G, CONNECTORS)
    workers = fleet(d, names, **options)
    run(workers, 2_000)
    assert converged(workers) and d.state.classic_groups[G].state == ClassicGroupState.STABLE
    return d, workers


def test_three_workers_share_the_work_and_the_leader_assigned_it() -> None:
    d, workers = started(["w1", "w2", "w3"])
    tasks = [sum(1 for i in w.owned if isinstance(i, TaskId)) for w in workers]
    assert max(tasks) - min(tasks) <= 1 and all(w.owned for w in workers)  # 7 tasks and 2 connectors over 3
    group = d.state.classic_groups[G]
    assert group.protocol == "sessioned" and group.leader in {w.member_id for w in workers}
    leader = next(w for w in workers if w.member_id == group.leader)
    # The leader remembers what it gave, as Connect's LeaderState: exactly what each member runs.
    state = leader.worker.assignor.leader_state
    assert {m: frozenset(v.connectors) | frozenset(v.tasks) for m, v in state.items()} == {
        w.member_id: w.owned for w in workers
    }


def test_a_new_worker_gets_a_share_in_two_rounds_and_nothing_else_moves() -> None:
    d, workers = started(["w1", "w2", "w3"])
    before = {w.name: w.owned for w in workers}
    generation = d.state.classic_groups[G].generation
    workers += fleet(d, ["w4"])
    run(workers, 3_000)
    assert converged(workers) and workers[3].owned
    moved = sum(len(before[w.name] - w.owned) for w in workers[:3])
    assert moved == len(workers[3].owned)  # only what the new worker took moved
    # Cooperative: the first round revoked, the second assigned (Connect's two rebalances).
    assert d.state.classic_groups[G].generation >= generation + 2


def test_a_graceful_leave_defers_its_work_for_the_delay_then_gives_it_out() -> None:
    d, workers = started(["w1", "w2", "w3"])
    leaving = next(w for w in workers if w.member_id != d.state.classic_groups[G].leader)
    its_work = leaving.owned
    leaving.leave()
    rest = [w for w in workers if w is not leaving]
    run(rest, 2_000)
    assert not (its_work & (rest[0].owned | rest[1].owned))  # deferred, waiting for it
    run(rest, 3_000)  # the 4 s delay passes: the members join again and the leader gives it out
    assert converged(rest)


def test_a_static_worker_back_within_the_delay_gets_its_own_work_back_when_the_delay_ends() -> None:
    """Connect's leader keeps a departed worker's work unassigned for the scheduled delay and then
    hands it to the workers that joined empty meanwhile: the new process is the only one."""
    d, workers = started(["w1", "w2", "w3"], instance_id=None)
    static = fleet(d, ["s1"], instance_id="host-s1")
    workers += static
    run(workers, 3_000)
    assert converged(workers)
    its_work = static[0].owned
    assert its_work
    # The process dies (no leave) and a new one with the same instance id starts 1 s later.
    alive = workers[:3]
    run(alive, 1_000)
    workers[3] = SimClassicWorker(
        d,
        G,
        "s1-again",
        instance_id="host-s1",
        session_timeout_ms=3_000,
        rebalance_timeout_ms=5_000,
        heartbeat_interval_ms=500,
        scheduled_rebalance_max_delay_ms=4_000,
    )
    run(workers, 2_000)
    assert not workers[3].owned  # the work waits for the delay, unowned
    run(workers, 5_000)
    assert converged(workers) and workers[3].owned == its_work


def test_a_crashed_worker_is_timed_out_and_its_work_given_out_after_the_delay() -> None:
    d, workers = started(["w1", "w2", "w3"])
    crashed = next(w for w in workers if w.member_id != d.state.classic_groups[G].leader)
    rest = [w for w in workers if w is not crashed]
    run(rest, 10_000)  # session 3 s, then the 4 s delay
    assert converged(rest)


def test_eager_stops_everything_before_every_rebalance() -> None:
    d, workers = started(["w1", "w2"], connect_protocol="default")
    assert d.state.classic_groups[G].protocol == "default"
    workers += fleet(d, ["w3"], connect_protocol="default")
    run(workers, 3_000)
    assert converged(workers)
    revoked = [a for a in workers[0].log if isinstance(a, Revoke)]
    assert revoked and items_count(revoked[-1].items) > 0


def items_count(items: ConnectorsAndTasks) -> int:
    return len(items.connectors) + len(items.tasks)


def test_new_connectors_are_assigned_by_the_leader() -> None:
    d, workers = started(["w1", "w2"])
    CONNECTORS_NEW = {"A": 4, "B": 3, "C": 2}
    d.set_connectors(G, CONNECTORS_NEW)
    run(workers, 3_000)
    owned = [item for w in workers for item in w.owned]
    assert "C" in owned and TaskId("C", 1) in owned and len(owned) == len(set(owned)) == 1 + 4 + 1 + 3 + 1 + 2


def test_a_coordinator_failover_in_the_middle_of_a_rebalance_converges() -> None:
    d, workers = started(["w1", "w2", "w3"])
    workers += fleet(d, ["w4"])
    for w in workers:
        w.step()  # w4's JoinGroup waits; the others are told to join at their next heartbeat
    # The coordinator fails: a new one replays the log; requests waiting on the old one fail.
    live = d.state.slots()
    assert d.fail_over().slots() == live
    for w in workers:
        w.coordinator_gone()
    run(workers, 5_000)
    assert converged(workers)


def test_errors_that_no_retry_fixes_give_up_and_stop_the_work() -> None:
    w = ClassicWorker(G)
    _, join = w.poll(0)
    assert join.member_id == "" and [p.name for p in join.protocols] == ["sessioned", "compatible", "default"]
    first = decode_metadata(join.protocols[0].metadata)
    assert first.allocation is None and first.version == 2  # a first join: no assignment yet, as Connect's
    actions = w.joined(JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "no"), 1)
    assert w.given_up and w.poll(2) == ([], None)
    assert actions[-1].reason.startswith("INCONSISTENT_GROUP_PROTOCOL")


def test_the_leader_never_assigns_what_another_member_still_runs() -> None:
    w = ClassicWorker(G, url="http://w1")
    w.poll(0)
    a_tasks = ConnectorsAndTasks(("A",), tuple(TaskId("A", i) for i in range(4)))
    members = (
        JoinGroupMember("w1", None, encode_metadata(WorkerMetadata("http://w1", 7), "sessioned")),
        JoinGroupMember(
            "w2",
            None,
            encode_metadata(
                WorkerMetadata("http://w2", 9, WorkerAssignment("w2", "http://w2", 9, a_tasks)), "sessioned"
            ),
        ),
    )
    w.joined(
        JoinGroupResponse(ErrorCode.NONE, None, 5, "connect", "sessioned", "w1", False, "w1", members),
        10,
        (ConnectorTaskCount("A", 4),),
    )
    _, sync = w.poll(10)
    given = {a.member_id: decode_assignment(a.assignment) for a in sync.assignments}
    assert given["w1"].assigned == ConnectorsAndTasks() and given["w1"].leader == "w1"
    assert given["w1"].leader_url == "http://w1" and given["w2"].version == 2
    assert {g.config_offset for g in given.values()} == {9}  # never behind any member
    revoked = given["w2"].revoked
    assert revoked.connectors or revoked.tasks  # w2 gives up a share, to be assigned next round
    assert given["w2"].assigned == ConnectorsAndTasks()  # a difference: it keeps the rest without being told


def test_a_worker_applies_an_assignment_as_connect_does() -> None:
    """compatible/sessioned: Assigned is added to what the worker runs, after Revoked stops; the
    next JoinGroup's allocation says everything it runs."""
    d, workers = started(["w1", "w2"])
    for w in workers:
        _, heartbeat = w.worker.poll(d.now + 100)
        w.worker.heartbeat_answered(ErrorResponse(ErrorCode.REBALANCE_IN_PROGRESS, "join again"), d.now + 100)
        _, join = w.worker.poll(d.now + 100)
        assert isinstance(join, JoinGroupRequest) and w.worker.owned  # cooperative: it keeps its work
        said = decode_metadata(join.protocols[0].metadata)
        assert (
            said.allocation is not None
            and frozenset(said.owned.connectors) | frozenset(said.owned.tasks) == w.worker.owned
        )


def test_self_fencing_stops_the_work_when_the_coordinator_stops_answering() -> None:
    d, workers = started(["w1"])
    w = workers[0].worker
    owned = w.owned
    _, heartbeat = w.poll(d.now + 1_000)
    actions = w.failed(d.now + 4_000, "connection refused")
    assert any(isinstance(a, Lose) and a.items for a in actions) and not w.owned and owned
    assert not any(isinstance(a, Assign) for a in actions)
