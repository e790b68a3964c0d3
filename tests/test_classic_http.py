"""Classic groups end to end (seed 004): SDK workers on `protocol="classic"` against a coordinator
on Apache Kafka. Their JoinGroup and SyncGroup wait at the coordinator for the others; the leader
assigns in SyncGroup; no item ever runs on two workers (every callback checked in one global
order); and a coordinator that takes over the partition keeps the group without a rejoin (seed 004,
coordinator failures with persistence), answering the members' heartbeats at the same generation."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from aiohttp.test_utils import TestServer

from records import ConnectorsAndTasks
from records.connect_protocol import (
    VERSIONS,
    WorkerAssignment,
    WorkerMetadata,
    decode_assignment,
    encode_metadata,
    holdings,
)

from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.protocol import (
    ClassicHeartbeatRequest,
    ClassicProtocol,
    ErrorResponse,
    GroupDescription,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.worker import Worker
from coordinator.service.server import CoordinatorServer
from coordinator.tools.devbroker import free_port
from coordinator.tools.process import ServeProcess
from tests.support.waiting import until
from tests.support.worker_sdk import G, Recorder, check_history, everything, set_connectors
from tests.topics import create_topic

pytestmark = pytest.mark.integration

TIMEOUTS = {
    "session_timeout_ms": 3_000,
    "rebalance_timeout_ms": 3_000,
    "heartbeat_interval_ms": 200,
    "scheduled_rebalance_max_delay_ms": 2_000,
}


def _worker(client: CoordinatorClient, name: str, events: list, **options: object) -> Worker:
    return Worker(
        client,
        G,
        protocol="classic",
        instance_id=name,
        listener=Recorder(name, events),
        url=f"http://{name}:8083",
        **{**TIMEOUTS, **options},
    )


def _converged(workers: list, expected: frozenset) -> bool:
    owned = [i for w in workers for i in w.owned]
    return len(owned) == len(set(owned)) and set(owned) == expected and all(w.stable for w in workers)


class Coordinators:
    """Coordinator processes, one at a time, on one port: a failover the workers cannot tell."""

    def __init__(self, broker, topic: str) -> None:
        self.broker, self.topic, self.port = broker, topic, free_port()
        self.server: CoordinatorServer | None = None
        self.http: TestServer | None = None

    async def start(self) -> CoordinatorServer:
        self.server = CoordinatorServer(
            self.broker.client_config(),
            self.topic,
            1,
            [0],
            f"http://127.0.0.1:{self.port}",
            CoordinatorConfig(initial_assignment_delay_ms=0),
        )
        await self.server.start()
        self.http = TestServer(self.server.app(), host="127.0.0.1", port=self.port)
        await self.http.start_server()
        return self.server

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.close()
        if self.server is not None:
            await self.server.close()

    def group(self):
        return self.server.runtimes[0].coordinator.state.classic_groups[G]


def _scenario(broker, topic: str, body) -> None:
    create_topic(broker.bootstrap_servers, topic)

    async def run() -> None:
        coordinators = Coordinators(broker, topic)
        await coordinators.start()
        try:
            async with CoordinatorClient(f"http://127.0.0.1:{coordinators.port}", retry_for_s=20) as client:
                await body(client, coordinators)
        finally:
            await coordinators.stop()

    asyncio.run(asyncio.wait_for(run(), 120))


def test_classic_workers_share_the_work_and_a_failover_needs_no_rejoin(kafka_broker, unique_topic) -> None:
    async def body(client: CoordinatorClient, coordinators: Coordinators) -> None:
        events: list = []
        await set_connectors(client, A=4, B=3)
        expected = everything(A=4, B=3)
        workers = [_worker(client, f"w{i}", events) for i in (1, 2, 3)]
        for w in workers:
            await w.start()
        await until(lambda: _converged(workers, expected), timeout=30)
        group = coordinators.group()
        assert group.state == "Stable" and group.protocol == "sessioned"
        assert {w.member_id for w in workers} == set(group.members)
        generation = group.generation
        assert all(w.generation == generation for w in workers)

        # The coordinator goes; another loads the partition from the topic and serves the group
        # at the same generation: the members' heartbeats go on, nobody joins again.
        await coordinators.stop()
        await coordinators.start()
        assert coordinators.group().generation == generation and coordinators.group().state == "Stable"
        await asyncio.sleep(1.0)  # five heartbeat intervals against the new coordinator
        assert coordinators.group().generation == generation
        assert _converged(workers, expected) and all(w.generation == generation for w in workers)

        # A fourth worker: the leader hands it a share in two rounds, revoking first.
        workers.append(_worker(client, "w4", events))
        await workers[-1].start()
        await until(lambda: _converged(workers, expected) and bool(workers[-1].owned), timeout=30)
        for w in workers:
            await w.stop()
        check_history(events)

    _scenario(kafka_broker, unique_topic, body)


def test_a_join_waits_for_the_other_members_over_http(kafka_broker, unique_topic) -> None:
    async def join(client: CoordinatorClient, member_id: str = "", instance: str | None = None) -> JoinGroupResponse:
        body = JoinGroupRequest(
            group_id=G,
            member_id=member_id,
            instance_id=instance,
            protocol_type="connect",
            protocols=[ClassicProtocol(name="default", metadata=b"m")],
            session_timeout_ms=5_000,
            rebalance_timeout_ms=5_000,
        )
        return await client.call(G, "POST", "/v1/classic-group/join", JoinGroupResponse, body, timeout_s=10)

    async def body(client: CoordinatorClient, coordinators: Coordinators) -> None:
        first = await join(client, instance="a")
        assert first.error_code == 0 and first.generation_id == 1 and first.leader == first.member_id
        sync = SyncGroupRequest(
            group_id=G,
            member_id=first.member_id,
            generation_id=1,
            assignments=[SyncGroupAssignment(member_id=first.member_id, assignment=b"mine")],
        )
        synced = await client.call(G, "POST", "/v1/classic-group/sync", SyncGroupResponse, sync)
        assert synced.assignment == b"mine"
        # A second member's JoinGroup waits until the first joins again (told by its heartbeat).
        second = asyncio.create_task(join(client, instance="b"))
        await asyncio.sleep(0.5)
        assert not second.done()
        beat = ClassicHeartbeatRequest(group_id=G, member_id=first.member_id, generation_id=1)
        told = await client.call(G, "POST", "/v1/classic-group/heartbeat", ErrorResponse, beat)
        assert told.error_code == 27  # REBALANCE_IN_PROGRESS
        again = await join(client, first.member_id, "a")
        answered = await second
        assert again.generation_id == answered.generation_id == 2
        assert len(again.members) == 2 and answered.members == ()
        bad = SyncGroupRequest(group_id=G, member_id=answered.member_id, generation_id=1)
        wrong = await client.call(G, "POST", "/v1/classic-group/sync", ErrorResponse, bad)
        assert wrong.error_code == 22  # ILLEGAL_GENERATION

    _scenario(kafka_broker, unique_topic, body)


# A new worker's JoinGroup metadata for each protocol, as connect-runtime's serializers wrote it.
_GOLDEN = {
    c["name"]: c
    for c in orjson.loads((Path(__file__).parent / "golden" / "connect_protocol.json").read_bytes())["cases"]
}
FIRST_JOIN = {
    p: bytes.fromhex(_GOLDEN[f"metadata/{p}/first-join"]["hex"]) for p in ("sessioned", "compatible", "default")
}
GOLDEN_URL = _GOLDEN["metadata/sessioned/first-join"]["input"]["url"]


class ConnectBytesMember:
    """A member that sends over HTTP exactly what a Kafka Connect 4.3.1 worker sends, and reads its
    answers as WorkerCoordinator does: Connect's protocols by preference, their metadata in Connect's
    bytes (the first join's allocation null), the assignment applied by Connect's rule (`holdings`),
    a rejoin when something was revoked or a heartbeat says REBALANCE_IN_PROGRESS."""

    def __init__(self, client: CoordinatorClient, offered: tuple[str, ...]) -> None:
        self.client, self.url, self.offered = client, GOLDEN_URL, offered
        self.member_id, self.generation, self.protocol = "", -1, ""
        self.snapshot: WorkerAssignment | None = None
        self.answers: list[tuple[str, object]] = []  # (api, the answer, or its ErrorCode) of every answer

    def _metadata(self, protocol: str) -> bytes:
        """The first join's bytes exactly as connect-runtime 4.3.1 wrote them (the golden file);
        later ones in our writer's bytes, which the golden test proves equal to Java's."""
        if self.snapshot is None:
            return FIRST_JOIN[protocol]
        return encode_metadata(WorkerMetadata(self.url, -1, self.snapshot), protocol)

    @property
    def runs(self) -> frozenset:
        s = self.snapshot
        return frozenset() if s is None else frozenset([*s.assigned.connectors, *s.assigned.tasks])

    async def join(self) -> None:
        while True:
            body = JoinGroupRequest(
                group_id=G,
                member_id=self.member_id,
                protocol_type="connect",
                session_timeout_ms=3_000,
                rebalance_timeout_ms=3_000,
                protocols=[ClassicProtocol(name=p, metadata=self._metadata(p)) for p in self.offered],
            )
            answer = await self.client.call(G, "POST", "/v1/classic-group/join", JoinGroupResponse, body, timeout_s=10)
            self.answers.append(("JoinGroup", answer))  # leader, SkipAssignment, members checked too
            if answer.error_code == 79:  # MEMBER_ID_REQUIRED
                self.member_id = answer.member_id
                continue
            if answer.error_code == 27:
                continue
            assert answer.error_code == 0, answer
            assert answer.leader != self.member_id  # our leader assigns; it is a follower
            self.generation, self.protocol = answer.generation_id, answer.protocol_name
            sync = SyncGroupRequest(
                group_id=G,
                member_id=self.member_id,
                generation_id=self.generation,
                protocol_type="connect",
                protocol_name=self.protocol,
            )
            synced = await self.client.call(G, "POST", "/v1/classic-group/sync", SyncGroupResponse, sync, timeout_s=10)
            self.answers.append(("SyncGroup", synced))
            if synced.error_code == 27:
                continue
            assert synced.error_code == 0, synced
            given = decode_assignment(synced.assignment)
            assert given.version == VERSIONS[self.protocol] and given.leader and given.error == 0
            reported = self.snapshot.assigned if self.snapshot is not None else ConnectorsAndTasks()
            self.snapshot = replace(given, assigned=holdings(reported, given))
            if not (given.revoked.connectors or given.revoked.tasks):
                return

    async def heartbeat(self) -> int:
        beat = ClassicHeartbeatRequest(group_id=G, member_id=self.member_id, generation_id=self.generation)
        answer = await self.client.call(G, "POST", "/v1/classic-group/heartbeat", ErrorResponse, beat)
        self.answers.append(("Heartbeat", answer.error_code))
        return answer.error_code

    async def run_until(self, condition, timeout: float = 30.0) -> None:
        """Heartbeat every 200 ms, joining again when told, until `condition()`."""
        for _ in range(int(timeout / 0.2)):
            if condition():
                return
            if await self.heartbeat() == 27:
                await self.join()
            await asyncio.sleep(0.2)
        raise AssertionError("condition not reached")


@pytest.mark.parametrize(
    "offered",
    [("sessioned", "compatible", "default"), ("compatible", "default"), ("default",)],
    ids=["sessioned", "compatible", "default"],
)
def test_a_member_sending_a_real_connect_workers_bytes_joins_beside_our_classic_worker(
    kafka_broker, unique_topic, offered
) -> None:
    """Connect's protocol names and bytes in a classic group led by our classic worker: the member is
    accepted, gets work in Connect's assignment format for the protocol the group chose, and the
    group's description shows its URL. No answer is one Connect's coordinator does not survive."""
    from connect_fatal import assert_survivable

    async def body(client: CoordinatorClient, coordinators: Coordinators) -> None:
        events: list = []
        await set_connectors(client, A=4, B=3)
        expected = everything(A=4, B=3)
        ours = _worker(client, "w1", events, connect_protocol=offered[0])
        await ours.start()
        await until(lambda: _converged([ours], expected), timeout=30)
        real = ConnectBytesMember(client, offered)
        await real.join()
        await real.run_until(
            lambda: (
                bool(real.runs)
                and ours.stable
                and not (real.runs & frozenset(ours.owned))
                and real.runs | frozenset(ours.owned) == expected
            )
        )
        group = coordinators.group()
        assert group.protocol == offered[0] and set(group.members) == {ours.member_id, real.member_id}
        described = await client.call(G, "GET", f"/v1/groups/{G}", GroupDescription)
        assert GOLDEN_URL in {m.url for m in described.members}
        for api, code in real.answers:
            assert_survivable(api, code)
        await ours.stop()

    _scenario(kafka_broker, unique_topic, body)


def test_rolling_upgrade_and_downgrade_with_the_coordinator_killed_in_each(
    kafka_broker, unique_topic, tmp_path
) -> None:
    """Four classic workers move to the connect protocol one at a time, work running throughout, then
    back; in the middle of each the coordinator process is killed with SIGKILL and another takes the
    partition over. Every callback of every worker, in one order: nothing ever runs on two workers,
    and each phase ends converged with every task owned once."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    flags = (
        "--allow-anonymous",
        "--session-timeout-ms",
        "3000",
        "--heartbeat-interval-ms",
        "300",
        "--scheduled-rebalance-max-delay-ms",
        "2000",
        "--initial-assignment-delay-ms",
        "0",
    )
    first = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *flags).start()
    servers = [first]

    def failover() -> None:
        servers[-1].kill()
        servers.append(
            ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *flags, port=first.port).start()
        )

    async def scenario() -> None:
        events: list = []
        async with CoordinatorClient(first.url, retry_for_s=30) as client:
            await set_connectors(client, A=4, B=4)
            expected = everything(A=4, B=4)
            names = ["w1", "w2", "w3", "w4"]
            workers = {n: _worker(client, n, events) for n in names}
            for w in workers.values():
                await w.start()
            await until(lambda: _converged(list(workers.values()), expected), timeout=30)

            async def switch(name: str, protocol: str) -> None:
                await workers[name].stop()
                options = {**TIMEOUTS} if protocol == "classic" else {"session_timeout_ms": 3_000}
                if protocol == "classic":
                    workers[name] = _worker(client, name, events)
                else:
                    workers[name] = Worker(
                        client,
                        G,
                        instance_id=name,
                        listener=Recorder(name, events),
                        url=f"http://{name}:8083",
                        **options,
                    )
                await workers[name].start()
                await until(lambda: _converged(list(workers.values()), expected), timeout=40)

            for phase in ("connect", "classic"):
                for i, name in enumerate(names):
                    if i == 2:
                        await asyncio.to_thread(failover)
                    await switch(name, phase)
                group = await client.call(G, "GET", f"/v1/groups/{G}", GroupDescription)
                assert group.group_type == phase and {m.protocol for m in group.members} == {phase}
            for w in workers.values():
                await w.stop()
        check_history(events)

    try:
        asyncio.run(asyncio.wait_for(scenario(), 240))
    finally:
        for server in servers:
            server.kill()
