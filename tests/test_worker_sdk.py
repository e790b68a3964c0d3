"""The worker SDK against a running coordinator and the session broker: revoke-then-assign order,
callbacks once per change, immediate acknowledgement of revocations, on_lost and rejoin after
fencing, a static member's bounce, listener exceptions, and rebalance metrics."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestServer

from coordinator.cli import main as coordinator
from coordinator.api import wire
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.items import items_of
from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.worker import RebalanceListener, Worker
from coordinator.service.server import CoordinatorServer
from coordinator.tools.devbroker import free_port

pytestmark = pytest.mark.integration
G = "sdk-group"
_sequence = itertools.count()


class Recorder(RebalanceListener):
    """Every callback of every worker, in one global order."""

    def __init__(self, name: str, events: list, fail_on: str | None = None) -> None:
        self.name, self.events, self.fail_on = name, events, fail_on

    def _record(self, kind: str, items) -> None:  # noqa: ANN001
        self.events.append((next(_sequence), self.name, kind, frozenset(items_of(items))))
        if kind == self.fail_on:
            raise RuntimeError(f"{self.name} refuses to {kind}")

    def on_revoked(self, items) -> None:  # noqa: ANN001
        self._record("revoked", items)

    async def on_assigned(self, items) -> None:  # noqa: ANN001
        await asyncio.sleep(0)  # async listeners are awaited
        self._record("assigned", items)

    def on_lost(self, items) -> None:  # noqa: ANN001
        self._record("lost", items)


def _run(broker, topic: str, scenario: Callable[[CoordinatorClient, CoordinatorServer], Awaitable[None]],  # noqa: ANN001
         **config: int) -> None:
    assert coordinator(["topic", "create", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                        "--partitions", "1", "--replication-factor", "1"]) == 0

    async def run() -> None:
        port = free_port()
        server = CoordinatorServer(broker.client_config(), topic, 1, [0], f"http://127.0.0.1:{port}",
                                   CoordinatorConfig(**{"heartbeat_interval_ms": 100, **config}))
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


async def _connectors(client: CoordinatorClient, **tasks: int) -> None:
    body = wire.SetConnectorsRequest(connectors=[wire.ConnectorTaskCount(name=n, tasks=t) for n, t in tasks.items()])
    answer = await client.call(G, "PUT", f"/v1/groups/{G}/connectors", wire.ErrorResponse, body)
    assert answer.error_code == 0


async def _until(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


def _everything(**tasks: int) -> frozenset:
    return frozenset(list(tasks) + [(c, t) for c, n in tasks.items() for t in range(n)])


def _covered(workers: list[Worker], expected: frozenset) -> bool:
    owned = [i for w in workers for i in w.owned]
    return len(owned) == len(set(owned)) and set(owned) == expected and all(w.stable for w in workers)


def _check_history(events: list) -> None:
    """No item is assigned to a worker while another still runs it; each callback is a change."""
    owner: dict = {}
    for _, worker, kind, items in sorted(events):
        assert items, f"{worker}: on_{kind} with nothing"
        for item in items:
            if kind == "assigned":
                assert item not in owner, f"{item} assigned to {worker} while {owner[item]} runs it"
                owner[item] = worker
            else:
                assert owner.get(item) == worker, f"{worker} {kind} {item} it did not run"
                del owner[item]


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_scale_out_revokes_before_assigning(kafka_broker, unique_topic, server_side: bool) -> None:  # noqa: ANN001
    tasks = {"A": 4, "B": 2}

    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await _connectors(client, **tasks)
        events: list = []
        workers = [Worker(client, G, member_id=f"w{i}", server_side=server_side, listener=Recorder(f"w{i}", events))
                   for i in range(2)]
        for w in workers:
            await w.start()
        await _until(lambda: _covered(workers, _everything(**tasks)))
        mark = len(events)
        newcomer = Worker(client, G, member_id="w2", server_side=server_side, listener=Recorder("w2", events))
        await newcomer.start()
        workers.append(newcomer)
        await _until(lambda: _covered(workers, _everything(**tasks)) and newcomer.owned)
        _check_history(events)
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

    _run(kafka_broker, unique_topic, scenario, server_assignment_interval_ms=0)


def test_a_revocation_is_acknowledged_at_once(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    # The heartbeat interval is 5 s: the coordinator learns of the revocation within a second of
    # on_revoked only if the worker acknowledges at once instead of waiting for its next beat.
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await _connectors(client, A=4)
        events: list = []
        first = Worker(client, G, member_id="w0", listener=Recorder("w0", events))
        await first.start()
        await _until(lambda: len(first.owned) == 5)
        second = Worker(client, G, member_id="w1")
        await second.start()
        await _until(lambda: any(e[2] == "revoked" for e in events), timeout=15)

        def acknowledged() -> bool:
            w0 = next(m for m in server.runtimes[0].coordinator.describe_group(G).members if m.member_id == "w0")
            return items_of(w0.assignment) == first.owned
        await _until(acknowledged, timeout=1.0)
        await first.stop()
        await second.stop()

    _run(kafka_broker, unique_topic, scenario, heartbeat_interval_ms=5_000, session_timeout_ms=30_000)


def test_fenced_worker_loses_everything_and_rejoins_with_the_same_id(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await _connectors(client, A=2)
        events: list = []
        worker = Worker(client, G, member_id="w0", listener=Recorder("w0", events))
        await worker.start()
        await _until(lambda: len(worker.owned) == 3)
        held = worker.owned
        await worker.stop(leave=False)  # a long pause: the session expires, the coordinator forgets it
        await _until(lambda: not server.runtimes[0].coordinator.state.groups[G].members, timeout=10)
        await worker.start()
        await _until(lambda: any(e[2] == "lost" for e in events))
        await _until(lambda: len(worker.owned) == 3 and worker.stable)
        kinds = [(e[2], e[3]) for e in sorted(events)]
        assert kinds == [("assigned", held), ("lost", held), ("assigned", held)]
        assert worker.member_id == "w0" and worker.metrics.failed_rebalance_total == 1
        await worker.stop()

    _run(kafka_broker, unique_topic, scenario, session_timeout_ms=400, heartbeat_interval_ms=100)


def test_static_member_bounce_within_the_session_timeout_keeps_its_work(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await _connectors(client, A=4, B=2)
        events: list = []
        workers = [Worker(client, G, member_id=f"w{i}", instance_id=f"host-{i}", listener=Recorder(f"w{i}", events))
                   for i in range(3)]
        for w in workers:
            await w.start()
        await _until(lambda: _covered(workers, _everything(A=4, B=2)))
        before = {w.instance_id: w.owned for w in workers}
        mark = len(events)
        await workers[1].stop()  # a static leave (-2): its work waits for it
        back = Worker(client, G, member_id="w1-restarted", instance_id="host-1", listener=Recorder("w1", events))
        await back.start()
        workers[1] = back
        await _until(lambda: _covered(workers, _everything(A=4, B=2)))
        assert {w.instance_id: w.owned for w in workers} == before
        # Nobody else was disturbed: the only callbacks are the bouncing worker's own.
        assert {e[1] for e in events[mark:]} == {"w1"}
        for w in workers:
            await w.stop()

    _run(kafka_broker, unique_topic, scenario, session_timeout_ms=5_000, scheduled_rebalance_max_delay_ms=60_000)


def test_a_listener_exception_does_not_corrupt_the_view(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: CoordinatorClient, server: CoordinatorServer) -> None:
        await _connectors(client, A=1)
        events: list = []
        worker = Worker(client, G, member_id="w0", listener=Recorder("w0", events, fail_on="assigned"))
        await worker.start()
        await _until(lambda: len(worker.owned) == 2 and worker.stable)
        assert len(worker.listener_errors) == 1 and worker.failure is None
        described = server.runtimes[0].coordinator.describe_group(G)
        assert items_of(described.members[0].assignment) == worker.owned
        await worker.stop()

    _run(kafka_broker, unique_topic, scenario)
