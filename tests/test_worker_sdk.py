"""The worker SDK against a running coordinator and the session broker: revoke-then-assign order,
callbacks once per change, immediate acknowledgement of revocations, on_lost and rejoin after
fencing, a static member's bounce, listener exceptions, and rebalance metrics; and the promises of
its member state machine (issue 15): revoke before leaving, on_lost defaulting to on_revoked, a
full heartbeat after a lost answer, a visible stop on refusal, self-fencing when cut off, an
assignor priority list rolled through the group, and the move limit from the SDK."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.items import items_of
from coordinator.sdk.client import CoordinatorClient, Unavailable
from coordinator.sdk.worker import RebalanceListener, Worker
from coordinator.service.server import CoordinatorServer
from coordinator.tools.devbroker import free_port
from tests.support.waiting import until
from tests.support.worker_sdk import G, Recorder, _sequence, check_history, everything, set_connectors
from tests.topics import create_topic

pytestmark = pytest.mark.integration


def _run(
    broker,
    topic: str,
    scenario: Callable[[CoordinatorClient, CoordinatorServer], Awaitable[None]],  # noqa: ANN001
    **config: int,
) -> None:
    create_topic(broker.bootstrap_servers, topic)

    async def run() -> None:
        port = free_port()
        server = CoordinatorServer(
            broker.client_config(),
            topic,
            1,
            [0],
            f"http://127.0.0.1:{port}",
            CoordinatorConfig(**{"heartbeat_interval_ms": 100, **config}),
        )
        await server.start()
        http = TestServer(server.app(), host="127.0.0.1", port=port)
        await http.start_server()
        try:
            async with CoordinatorClient(f"http://127.0.0.1:{port}", retry_for_s=10) as client:
                await scenario(client, server)
        finally:
            await http.close()
            await server.close()

    asyncio.run(run())


def _covered(workers: list[Worker], expected: frozenset) -> bool:
    owned = [i for w in workers for i in w.owned]
    return len(owned) == len(set(owned)) and set(owned) == expected and all(w.stable for w in workers)


@pytest.mark.ops
@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_scale_out_revokes_before_assigning(kafka_broker, unique_topic, server_side: bool) -> None:  # noqa: ANN001
    tasks = {"A": 4, "B": 2}

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, **tasks)
        events: list = []
        workers = [
            Worker(client, G, member_id=f"w{i}", server_side=server_side, listener=Recorder(f"w{i}", events))
            for i in range(2)
        ]
        for w in workers:
            await w.start()
        await until(lambda: _covered(workers, everything(**tasks)))
        mark = len(events)
        newcomer = Worker(client, G, member_id="w2", server_side=server_side, listener=Recorder("w2", events))
        await newcomer.start()
        workers.append(newcomer)
        await until(lambda: _covered(workers, everything(**tasks)) and newcomer.owned)
        check_history(events)
        revoked = [e for e in events[mark:] if e[2] == "revoked"]
        assert revoked and all(e[1] != "w2" for e in revoked)
        # Only the newcomer's share moved, and it got exactly what the others gave up.
        assert set().union(*(e[3] for e in revoked)) == newcomer.owned
        for w in workers:
            snapshot = w.metrics.snapshot()
            assert snapshot["rebalance-total"] >= 1 and snapshot["last-rebalance-seconds-ago"] is not None
            assert snapshot["rebalance-latency-max"] >= snapshot["rebalance-latency-avg"] > 0
            await w.stop()
        assert [e[2] for e in events[-3:]] == ["revoked"] * 3  # a graceful stop revokes everything
        # What an operator's alert sees of it (issue 19): a normal rebalance is no error, even when
        # the members compute the target themselves (COMPUTE_ASSIGNMENT is a signal), and each
        # rebalance that converged is in the live histogram.
        scraped = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(server.metrics.exposition().decode())
            for s in f.samples
        }
        # every API's error series exist from the start at 0 (issue 29, item 4): none may have counted
        assert not [k for k, v in scraped.items() if k[0] == "coordinator_errors_total" and v], scraped
        signals = sum(
            v
            for k, v in scraped.items()
            if k[0] == "coordinator_protocol_signals_total" and ("signal", "COMPUTE_ASSIGNMENT") in k[1]
        )
        assert (signals > 0) is not server_side
        assert scraped[("coordinator_rebalance_duration_seconds_count", (("partition", "0"),))] >= 2

    _run(kafka_broker, unique_topic, scenario, server_assignment_interval_ms=0)


def test_a_revocation_is_acknowledged_at_once(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    # The heartbeat interval is 5 s: the coordinator learns of the revocation within a second of
    # on_revoked only if the worker acknowledges at once instead of waiting for its next beat.
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=4)
        events: list = []
        first = Worker(client, G, member_id="w0", listener=Recorder("w0", events))
        await first.start()
        await until(lambda: len(first.owned) == 5)
        second = Worker(client, G, member_id="w1")
        await second.start()
        await until(lambda: any(e[2] == "revoked" for e in events), timeout=15)

        def acknowledged() -> bool:
            w0 = next(m for m in server.runtimes[0].coordinator.describe_group(G).members if m.member_id == "w0")
            return items_of(w0.assignment) == first.owned

        await until(acknowledged, timeout=1.0)
        await first.stop()
        await second.stop()

    _run(kafka_broker, unique_topic, scenario, heartbeat_interval_ms=5_000, session_timeout_ms=30_000)


def test_fenced_worker_loses_everything_and_rejoins_with_the_same_id(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=2)
        events: list = []
        worker = Worker(client, G, member_id="w0", listener=Recorder("w0", events))
        await worker.start()
        await until(lambda: len(worker.owned) == 3)
        held = worker.owned
        await worker.stop(leave=False)  # a long pause: the session expires, the coordinator forgets it
        await until(lambda: not server.runtimes[0].coordinator.state.groups[G].members, timeout=10)
        await worker.start()
        await until(lambda: any(e[2] == "lost" for e in events))
        await until(lambda: len(worker.owned) == 3 and worker.stable)
        kinds = [(e[2], e[3]) for e in sorted(events)]
        assert kinds == [("assigned", held), ("lost", held), ("assigned", held)]
        assert worker.member_id == "w0" and worker.metrics.failed_rebalance_total == 1
        await worker.stop()

    _run(kafka_broker, unique_topic, scenario, session_timeout_ms=400, heartbeat_interval_ms=100)


def test_static_member_bounce_within_the_session_timeout_keeps_its_work(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=4, B=2)
        events: list = []
        workers = [
            Worker(client, G, member_id=f"w{i}", instance_id=f"host-{i}", listener=Recorder(f"w{i}", events))
            for i in range(3)
        ]
        for w in workers:
            await w.start()
        await until(lambda: _covered(workers, everything(A=4, B=2)))
        before = {w.instance_id: w.owned for w in workers}
        mark = len(events)
        await workers[1].stop()  # a static leave (-2): its work waits for it
        back = Worker(client, G, member_id="w1-restarted", instance_id="host-1", listener=Recorder("w1", events))
        await back.start()
        workers[1] = back
        await until(lambda: _covered(workers, everything(A=4, B=2)))
        assert {w.instance_id: w.owned for w in workers} == before
        # Nobody else was disturbed: the only callbacks are the bouncing worker's own.
        assert {e[1] for e in events[mark:]} == {"w1"}
        for w in workers:
            await w.stop()

    _run(kafka_broker, unique_topic, scenario, session_timeout_ms=5_000, scheduled_rebalance_max_delay_ms=60_000)


def test_a_listener_exception_does_not_corrupt_the_view(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=1)
        events: list = []
        worker = Worker(client, G, member_id="w0", listener=Recorder("w0", events, fail_on="assigned"))
        await worker.start()
        await until(lambda: len(worker.owned) == 2 and worker.stable)
        assert len(worker.listener_errors) == 1 and worker.failure is None
        described = server.runtimes[0].coordinator.describe_group(G)
        assert items_of(described.members[0].assignment) == worker.owned
        await worker.stop()

    _run(kafka_broker, unique_topic, scenario)


# --- the worker's promises (issue 15): each fails on the SDK before its member state machine -------


class OnlyRevokedAndAssigned(RebalanceListener):
    """A listener that implements only revoked and assigned, as many do."""

    def __init__(self, events: list, name: str = "w0") -> None:
        self.events, self.name = events, name

    def on_revoked(self, items) -> None:  # noqa: ANN001
        self.events.append((next(_sequence), self.name, "revoked", frozenset(items_of(items))))

    def on_assigned(self, items) -> None:  # noqa: ANN001
        self.events.append((next(_sequence), self.name, "assigned", frozenset(items_of(items))))


def test_stop_revokes_before_the_group_hears_it_left(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Revoke before leave: while on_revoked runs, the coordinator still counts the worker as the
    owner, so nobody else can have been given its work yet (with eager, or a delay of 0, the next
    owner would start at once)."""

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=3)
        seen: list[bool] = []

        class Check(RebalanceListener):
            def on_revoked(self, items) -> None:  # noqa: ANN001
                seen.append("w0" in server.runtimes[0].coordinator.state.groups[G].members)

        leaving = Worker(client, G, member_id="w0", assignors=["eager"], listener=Check())
        staying = Worker(client, G, member_id="w1", assignors=["eager"])
        for w in (leaving, staying):
            await w.start()
        await until(lambda: _covered([leaving, staying], everything(A=3)))
        await leaving.stop()
        assert seen == [True], "on_revoked ran after the leave heartbeat"
        await until(lambda: _covered([staying], everything(A=3)))
        await staying.stop()

    _run(kafka_broker, unique_topic, scenario, scheduled_rebalance_max_delay_ms=0)


def test_on_lost_defaults_to_on_revoked(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=2)
        events: list = []
        worker = Worker(client, G, member_id="w0", listener=OnlyRevokedAndAssigned(events))
        await worker.start()
        await until(lambda: len(worker.owned) == 3)
        held = worker.owned
        await worker.stop(leave=False)  # a long pause: the coordinator fences it
        await until(lambda: not server.runtimes[0].coordinator.state.groups[G].members, timeout=10)
        await worker.start()
        await until(lambda: any(e[2] == "revoked" for e in events))
        await until(lambda: len(worker.owned) == 3 and worker.stable)
        assert [(e[2], e[3]) for e in sorted(events)] == [("assigned", held), ("revoked", held), ("assigned", held)]
        await worker.stop()

    _run(kafka_broker, unique_topic, scenario, session_timeout_ms=400, heartbeat_interval_ms=100)


class FlakyClient(CoordinatorClient):
    """A client whose network loses the answer of a heartbeat that moved the member's epoch
    (the coordinator did it; the worker never hears), or that goes dark (`cut`)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.lose_epoch_change = False
        self.lost = 0
        self.cut = False

    async def call(self, group_id: str, method: str, path: str, answer: type, body=None):  # noqa: ANN001, ANN201
        if self.cut:  # a blackhole: no answer, no error, until the request times out as the cut ends
            while self.cut:
                await asyncio.sleep(0.05)
            raise Unavailable("timed out")
        got = await super().call(group_id, method, path, answer, body)
        if (
            self.lose_epoch_change
            and path == "/v1/connect-group/heartbeat"
            and body.member_epoch > 0
            and getattr(got, "member_epoch", body.member_epoch) != body.member_epoch
        ):
            self.lose_epoch_change = False
            self.lost += 1
            raise Unavailable("the answer was lost")
        return got


def test_a_lost_answer_is_followed_by_a_full_heartbeat_and_rescued(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Seed 000: after an error every field goes, with what the member owns, and the coordinator
    takes the old epoch as the lost-response case: no fencing, nothing lost."""

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=4)
        events: list = []
        flaky = FlakyClient(client.bootstrap_url, retry_for_s=10)
        try:
            first = Worker(flaky, G, member_id="w0", listener=Recorder("w0", events))
            await first.start()
            await until(lambda: len(first.owned) == 5 and first.stable)
            flaky.lose_epoch_change = True
            second = Worker(client, G, member_id="w1", listener=Recorder("w1", events))
            await second.start()
            await until(lambda: flaky.lost == 1 and _covered([first, second], everything(A=4)))
            assert not [e for e in events if e[2] == "lost"], "the worker was fenced instead of rescued"
            assert first.metrics.failed_rebalance_total == 0
            check_history(events)
            for w in (first, second):
                await w.stop()
        finally:
            await flaky.close()

    _run(kafka_broker, unique_topic, scenario)


def test_an_error_no_retry_can_fix_stops_the_work_visibly(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Refused for good mid-life (here the ACLs change: 403): on_lost for everything, then the
    worker stops with the reason in `failure`. Never a dead loop with its tasks still running."""
    from coordinator.service.auth import Acl, Authorizer, Operation

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=2)
        events: list = []
        worker = Worker(client, G, member_id="w0", listener=Recorder("w0", events))
        await worker.start()
        await until(lambda: len(worker.owned) == 3 and worker.stable)
        held = worker.owned
        server.authorizer = Authorizer({}, [Acl("*", frozenset({Operation.DESCRIBE}), "*")], allow_anonymous=True)
        await until(lambda: worker.failure is not None)
        assert "403" in str(worker.failure) and not worker.owned
        assert (events[-1][2], events[-1][3]) == ("lost", held)
        await worker.stop()

    _run(kafka_broker, unique_topic, scenario)


def test_a_worker_cut_off_stops_its_work_before_another_is_given_it(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """KAFKA-9184's zombie: cut off from the coordinator, the worker stops its work once a session
    timeout has passed without an answer; the coordinator, whose timer started later, gives the
    work away only after that. No item ever runs on two workers; the worker rejoins when it can."""

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=4)
        events: list = []
        flaky = FlakyClient(client.bootstrap_url, retry_for_s=10)
        try:
            cut = Worker(flaky, G, member_id="w0", listener=Recorder("w0", events), session_timeout_ms=1_000)
            other = Worker(client, G, member_id="w1", listener=Recorder("w1", events), session_timeout_ms=1_000)
            for w in (cut, other):
                await w.start()
            await until(lambda: _covered([cut, other], everything(A=4)))
            held = cut.owned
            flaky.cut = True
            await until(lambda: _covered([other], everything(A=4)), timeout=20)
            lost = [e for e in events if e[1] == "w0" and e[2] == "lost"]
            assert lost and lost[0][3] == held
            check_history(events)  # w1 was assigned each item only after w0 had lost it
            flaky.cut = False
            await until(lambda: _covered([cut, other], everything(A=4)) and cut.owned, timeout=20)
            check_history(events)
            for w in (cut, other):
                await w.stop()
        finally:
            await flaky.close()

    _run(
        kafka_broker,
        unique_topic,
        scenario,
        session_timeout_ms=1_000,
        heartbeat_interval_ms=100,
        scheduled_rebalance_max_delay_ms=0,
    )


def test_a_rolling_switch_from_eager_to_incremental_cooperative(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Assignors as a priority list (seed 000, seed 004's upgrade path): workers are restarted one at
    a time offering [incremental_cooperative, eager]; the group keeps eager, the one everyone offers,
    until the last has restarted, then runs incremental_cooperative. No item on two workers."""

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=4, B=2)
        events: list = []

        def worker(i: int, assignors: list[str]) -> Worker:
            return Worker(
                client,
                G,
                member_id=f"w{i}-{'-'.join(assignors)}",
                instance_id=f"host-{i}",
                assignors=assignors,
                listener=Recorder(f"w{i}", events),
            )

        workers = [worker(i, ["eager"]) for i in range(3)]
        for w in workers:
            await w.start()
        await until(lambda: _covered(workers, everything(A=4, B=2)))
        used = []
        for i in range(3):
            await workers[i].stop()
            workers[i] = worker(i, ["incremental_cooperative", "eager"])
            await workers[i].start()
            await until(lambda: _covered(workers, everything(A=4, B=2)), timeout=20)
            used.append(server.runtimes[0].coordinator.describe_group(G).assignor)
        assert used == ["eager", "eager", "incremental_cooperative"]
        check_history(events)
        for w in workers:
            await w.stop()

    _run(kafka_broker, unique_topic, scenario, session_timeout_ms=5_000, scheduled_rebalance_max_delay_ms=0)


def test_the_move_limit_is_reachable_from_the_sdk(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Seed 002's Design III: an assignor object in the priority list, here with at most two moves
    per rebalance; the newcomer's share is taken from the first worker two items at a time."""
    from coordinator.core.assignors.incremental_cooperative import IncrementalCooperativeAssignor

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=8)
        events: list = []
        # Follow-up rounds slower than heartbeats (100 ms): the worker sees every round's target.
        limited = [IncrementalCooperativeAssignor(max_moves=2, follow_up_delay_ms=500)]
        first = Worker(client, G, member_id="w0", assignors=limited, listener=Recorder("w0", events))
        await first.start()
        await until(lambda: len(first.owned) == 9 and first.stable)
        second = Worker(client, G, member_id="w1", assignors=limited, listener=Recorder("w1", events))
        await second.start()
        await until(lambda: len(second.owned) >= 4 and _covered([first, second], everything(A=8)), timeout=20)
        taken = [e[3] for e in events if e[1] == "w0" and e[2] == "revoked"]
        assert len(taken) >= 2 and all(len(t) <= 2 for t in taken), taken
        check_history(events)
        for w in (first, second):
            await w.stop()

    _run(kafka_broker, unique_topic, scenario)


def test_rebalance_metrics_are_exported_to_prometheus_under_both_names(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Seed 001's rebalance metrics, and Kafka Connect's connect-worker-rebalance-metrics names, per
    member, from a registry a Prometheus scrape reads."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from coordinator.sdk.metrics import WorkerMetrics

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=2)
        workers = [Worker(client, G, member_id=f"w{i}") for i in range(2)]
        registry = CollectorRegistry()
        registry.register(WorkerMetrics(lambda: workers))
        for w in workers:
            await w.start()
        await until(lambda: _covered(workers, everything(A=2)))
        samples = {
            (s.name, s.labels["member"]): s.value
            for f in text_string_to_metric_families(generate_latest(registry).decode())
            for s in f.samples
        }
        for w in workers:
            snapshot = w.metrics.snapshot()
            seed_total = samples[("worker_coordinator_member_rebalance_total", w.member_id)]
            assert seed_total == snapshot["rebalance-total"] >= 1
            assert samples[("kafka_connect_worker_rebalance_completed_rebalances_total", w.member_id)] >= 1
            assert samples[("kafka_connect_worker_rebalance_epoch", w.member_id)] == w.member_epoch > 0
            assert samples[("kafka_connect_worker_rebalance_rebalancing", w.member_id)] == 0
            assert ("worker_coordinator_member_connectors_assigned_latency_max_ms", w.member_id) in samples
        for w in workers:
            await w.stop()

    _run(kafka_broker, unique_topic, scenario)


def test_fifty_thousand_tasks_with_long_names(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """A large group works end to end: installs of about 4 MB, heartbeats acknowledging 25,000 tasks,
    assignment records of more than Kafka's default 1 MiB (the topic and the writer take 16 MiB).
    Before, the InstallAssignment got 413 and the chosen worker died silently."""
    tasks = {f"a-connector-with-a-rather-long-name-as-people-write-them-{i:03d}": 1_000 for i in range(50)}

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, **tasks)
        workers = [Worker(client, G, member_id=f"w{i}", rebalance_timeout_ms=120_000) for i in range(2)]
        for w in workers:
            await w.start()
        await until(lambda: _covered(workers, everything(**tasks)), timeout=120)
        assert all(w.failure is None and len(w.owned) > 20_000 for w in workers)
        group = server.runtimes[0].coordinator.describe_group(G)
        assert group.assignment_epoch == group.group_epoch and group.assignor_kind == "client"
        for w in workers:
            await w.stop()

    _run(kafka_broker, unique_topic, scenario, session_timeout_ms=60_000, heartbeat_interval_ms=1_000)


def test_a_worker_asks_for_a_rebalance_with_its_assignor_reason(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Seed 000's assignor Reason, from the SDK: the group computes a new target at once."""

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await set_connectors(client, A=4)
        events: list = []
        workers = [Worker(client, G, member_id=f"w{i}", listener=Recorder(f"w{i}", events)) for i in range(2)]
        for w in workers:
            await w.start()
        await until(lambda: _covered(workers, everything(A=4)))
        epoch = server.runtimes[0].coordinator.describe_group(G).group_epoch
        workers[0].request_rebalance(reason=3, metadata=b"\x07")
        await until(lambda: server.runtimes[0].coordinator.describe_group(G).assignment_epoch > epoch, timeout=5)
        member = server.runtimes[0].coordinator.state.groups[G].members["w0"]
        assert (member.client_assignors[0].reason, member.client_assignors[0].metadata) == (3, b"\x07")
        await until(lambda: _covered(workers, everything(A=4)))
        check_history(events)
        with pytest.raises(ValueError):
            Worker(client, G, server_side=True).request_rebalance()
        for w in workers:
            await w.stop()

    _run(kafka_broker, unique_topic, scenario)
