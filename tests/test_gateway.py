"""The gateway (`coordinator gateway`, `coordinator/gateway/proxy.py`) in front of Apache Kafka:
confluent-kafka's Producer and Consumer (their own group, not ours) work end to end through it and
see only gateway ports; ApiVersions is capped (Produce v9, Fetch v15, no API whose answers carry
addresses it does not rewrite); FindCoordinator names the gateway's coordinator node for our groups
(listed in Metadata) and the real broker's gateway port for the others; a classic round over the
coordinator node reaches `coordinator serve --kafka-listener`; a request for our group never
reaches the broker; bad frames close only their own connection."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, Self

import connect_fatal
import pytest
from confluent_kafka import Consumer, Producer

from records.connect_protocol import SESSIONED, WorkerMetadata, encode_metadata

from coordinator.api import kafka_protocol as kp
from coordinator.cli import main as coordinator
from coordinator.gateway.proxy import Gateway, GatewayConfig
from coordinator.gateway.rules import ALLOWED, COORDINATOR_NODE_ID, parse_address
from coordinator.tools.devbroker import free_port, free_port_block
from coordinator.tools.partitions import partition_for
from coordinator.tools.process import ServeProcess
from tests.support.kafka_listener import MEMBER_ID_REQUIRED, Client
from tests.support.metrics import exposed
from tests.topics import create_topic

pytestmark = pytest.mark.integration

PARTITIONS = 2
OURS = r"cluster-[a-z0-9]+"


class RunningGateway:
    """A Gateway on a loop of its own in a thread (the confluent-kafka clients are blocking)."""

    def __init__(self, bootstrap: str, coordinators: list[tuple[str, int]]) -> None:
        self.port = free_port_block(12)
        self.config = GatewayConfig(
            bootstrap=[parse_address(a) for a in bootstrap.split(",")],
            listen=("127.0.0.1", self.port),
            groups=OURS,
            coordinators=coordinators,
        )
        self.gateway = Gateway(self.config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.gateway.start(), self.loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.gateway.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def gateway(kafka_broker) -> Iterator[RunningGateway]:
    with RunningGateway(kafka_broker.bootstrap_servers, [("127.0.0.1", 1)]) as running:
        yield running


def _ports(metadata: Any) -> set[int]:
    return {b.port for b in metadata.brokers.values()}


def test_a_producer_and_a_consumer_work_through_the_gateway_and_see_only_its_ports(kafka_broker, gateway, unique_topic):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 3)
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(unique_topic, key=str(i).encode(), value=f"value-{i}".encode())
    assert producer.flush(30) == 0
    lazy = Producer({"bootstrap.servers": gateway.bootstrap, "acks": 0})  # no answer comes: never waited for
    for i in range(30, 40):
        lazy.produce(unique_topic, key=str(i).encode(), value=f"value-{i}".encode())
    assert lazy.flush(30) == 0
    metadata = producer.list_topics(unique_topic, timeout=10)
    assert COORDINATOR_NODE_ID in metadata.brokers
    assert all(b.host == "127.0.0.1" for b in metadata.brokers.values())
    assert _ports(metadata) <= {gateway.port + 1} | {gateway.port + 2 + n for n in gateway.gateway.brokers}
    assert not _ports(metadata) & {parse_address(a)[1] for a in kafka_broker.bootstrap_servers.split(",")}

    consumer = Consumer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "group.id": f"plain-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([unique_topic])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(seen) < 40 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.add(message.value())
        assert seen == {f"value-{i}".encode() for i in range(40)}
        consumer.commit(asynchronous=False)  # OffsetCommit through the gateway to the broker's coordinator
        assert _ports(consumer.list_topics(unique_topic, timeout=10)) == _ports(metadata)
    finally:
        consumer.close()


def test_api_versions_are_capped(gateway):
    async def run() -> None:
        async with Client(("127.0.0.1", gateway.port), "probe") as client:
            answer = await client.call(kp.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
            assert answer.error_code == 0
            versions = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
            assert versions[kp.PRODUCE][1] == 9 and versions[kp.FETCH][1] == 15
            assert versions[kp.JOIN_GROUP] == kp.SUPPORTED[kp.JOIN_GROUP]
            assert set(versions) <= set(ALLOWED)
            for left_out in (55, 68, 69, 76, 77, 78, 79):  # DescribeQuorum, KIP-848 and share groups
                assert left_out not in versions
            # A version the gateway cannot read: Kafka's v0 answer, UNSUPPORTED_VERSION and the same table.
            client.writer.write(kp.frame(struct.pack(">hhih", kp.API_VERSIONS, 99, 77, 1) + b"c\x00\x00"))
            size = kp.frame_length(await client.reader.readexactly(4))
            correlation, fallback = kp.decode_response(kp.API_VERSIONS, 0, await client.reader.readexactly(size))
            assert (correlation, fallback.error_code) == (77, 35)
            assert {a.api_key: (a.min_version, a.max_version) for a in fallback.api_keys} == versions

    asyncio.run(run())


def test_find_coordinator_names_the_gateway_node_for_ours_and_the_brokers_port_for_others(gateway):
    async def run() -> None:
        async with Client(("127.0.0.1", gateway.port), "probe") as client:
            metadata = await client.call(
                kp.METADATA, 12, topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
            nodes = {b.node_id: (b.host, b.port) for b in metadata.brokers}
            assert nodes[COORDINATOR_NODE_ID] == ("127.0.0.1", gateway.port + 1)
            brokers = {n: p for n, (_, p) in nodes.items() if n != COORDINATOR_NODE_ID}
            assert brokers == {n: gateway.port + 2 + n for n in brokers}
            for version in (1, 3):
                found = await client.call(kp.FIND_COORDINATOR, version, key="cluster-a1", key_type=0)
                assert (found.error_code, found.node_id, found.port) == (0, COORDINATOR_NODE_ID, gateway.port + 1)
            found = await client.call(
                kp.FIND_COORDINATOR,
                6,
                key_type=0,
                coordinator_keys=["cluster-b2", "connect-sink", "other", "my-cluster-b2"],
            )
            by_key = {c.key: c for c in found.coordinators}
            assert (by_key["cluster-b2"].node_id, by_key["cluster-b2"].port) == (COORDINATOR_NODE_ID, gateway.port + 1)
            for key in ("connect-sink", "other", "my-cluster-b2"):  # --groups matches the whole group id
                assert by_key[key].node_id != COORDINATOR_NODE_ID
                entry = by_key[key]
                if entry.error_code == 0:
                    assert entry.node_id in brokers and entry.port == gateway.port + 2 + entry.node_id
                    assert entry.host == "127.0.0.1"
            cluster = await client.call(60, 0, include_cluster_authorized_operations=False)
            assert {b.port for b in cluster.brokers} == set(brokers.values())
        # A request for our group on a broker's port never reaches the broker: no coordinator owns
        # it here (the only --coordinator answers nothing), so the connection closes.
        async with Client(("127.0.0.1", gateway.port), "probe") as client:
            cls = kp.request_class(kp.JOIN_GROUP, 9)
            client.correlation += 1
            body = cls(
                group_id="cluster-a1",
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                member_id="",
                group_instance_id=None,
                protocol_type="connect",
                protocols=[],
                reason=None,
            )
            client.writer.write(kp.encode_request(body, 9, client.correlation, "probe"))
            assert await client.closed()

    asyncio.run(run())


def test_bad_frames_close_only_their_connection(gateway):
    async def run() -> None:
        async with Client(("127.0.0.1", gateway.port), "good") as good:
            for bad in (
                struct.pack(">i", 2**31 - 1),
                struct.pack(">i", -4),
                kp.frame(b"\x00\x01"),
                kp.frame(struct.pack(">hhih", 9999, 0, 1, -1)),
                kp.frame(struct.pack(">hhih", 1, 99, 1, -1)),
            ):
                async with Client(("127.0.0.1", gateway.port), "bad") as client:
                    client.writer.write(bad)
                    assert await client.closed()
            async with Client(("127.0.0.1", gateway.port), "truncated") as client:
                client.writer.write(struct.pack(">i", 100) + b"\x00" * 10)
                client.writer.write_eof()
                assert await client.closed()
            answer = await good.call(kp.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
            assert answer.error_code == 0
        await asyncio.sleep(0.2)
        assert not gateway.gateway._connections

    asyncio.run(run())
    assert gateway.gateway.bad_input >= 6
    samples = exposed(gateway.gateway.metrics.exposition())
    assert samples['coordinator_gateway_closed_connections_total{reason="bad-input"}'] >= 6
    assert samples['coordinator_gateway_connections{port="bootstrap"}'] == 0  # every one closed and counted down


def test_a_classic_round_over_the_gateway_reaches_the_coordinators_kafka_listener(kafka_broker, unique_topic, tmp_path):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    port = free_port()
    serve = ServeProcess(
        kafka_broker.bootstrap_servers,
        unique_topic,
        tmp_path,
        "--allow-anonymous",
        "--kafka-listener",
        f"127.0.0.1:{port}",
    )
    serve.start()
    group = f"cluster-{uuid.uuid4().hex[:8]}"
    try:
        serve.wait_healthy(partitions=PARTITIONS)
        with RunningGateway(kafka_broker.bootstrap_servers, [("127.0.0.1", 1), ("127.0.0.1", port)]) as gw:
            # The gateway once knew another owner, now gone: the connection that meets it closes, the
            # owner is asked again, and the next connection reaches the real one.
            gw.loop.call_soon_threadsafe(gw.gateway._owners.__setitem__, group, ("127.0.0.1", 1))

            async def run() -> None:
                async with Client(("127.0.0.1", gw.port + 1), "connect-1") as stale:
                    stale.correlation += 1
                    body = kp.request_class(kp.HEARTBEAT, 4)(
                        group_id=group, generation_id=1, member_id="m", group_instance_id=None
                    )
                    stale.writer.write(kp.encode_request(body, 4, stale.correlation, "connect-1"))
                    assert await stale.closed()
                assert group not in gw.gateway._owners
                async with Client(("127.0.0.1", gw.port), "connect-1") as boot:
                    found = await boot.call(kp.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[group])
                    node = found.coordinators[0]
                    assert (node.error_code, node.node_id, node.port) == (0, COORDINATOR_NODE_ID, gw.port + 1)
                async with Client((node.host, node.port), "connect-1") as member:
                    metadata = await member.call(
                        kp.METADATA,
                        12,
                        topics=[],
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    )
                    assert COORDINATOR_NODE_ID in {b.node_id for b in metadata.brokers}
                    cls = kp.request_class(kp.JOIN_GROUP, 9)
                    protocols = [
                        cls.JoinGroupRequestProtocol(
                            name=SESSIONED,
                            metadata=encode_metadata(WorkerMetadata("http://w1:8083/", 7, None), SESSIONED),
                        )
                    ]
                    fields = {
                        "group_id": group,
                        "session_timeout_ms": 10_000,
                        "rebalance_timeout_ms": 10_000,
                        "group_instance_id": None,
                        "protocol_type": "connect",
                        "protocols": protocols,
                        "reason": None,
                    }
                    first = await member.call(kp.JOIN_GROUP, 9, member_id="", **fields)
                    connect_fatal.assert_survivable(connect_fatal.JOIN, first, protocol_type="connect")
                    assert first.error_code == MEMBER_ID_REQUIRED and first.member_id.startswith("connect-1-")
                    joined = await member.call(kp.JOIN_GROUP, 9, member_id=first.member_id, **fields)
                    connect_fatal.assert_survivable(connect_fatal.JOIN, joined, protocol_type="connect")
                    assert joined.error_code == 0 and joined.leader == first.member_id
                    sync_cls = kp.request_class(kp.SYNC_GROUP, 5)
                    synced = await member.call(
                        kp.SYNC_GROUP,
                        5,
                        group_id=group,
                        generation_id=joined.generation_id,
                        member_id=joined.member_id,
                        group_instance_id=None,
                        protocol_type="connect",
                        protocol_name=SESSIONED,
                        assignments=[sync_cls.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"")],
                    )
                    connect_fatal.assert_survivable(
                        connect_fatal.SYNC, synced, protocol_type="connect", protocol_name=SESSIONED
                    )
                    beat = await member.call(
                        kp.HEARTBEAT,
                        4,
                        group_id=group,
                        generation_id=joined.generation_id,
                        member_id=joined.member_id,
                        group_instance_id=None,
                    )
                    connect_fatal.assert_survivable(connect_fatal.HEARTBEAT, beat)
                    assert beat.error_code == 0
                    described = await member.call(
                        kp.DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=False
                    )
                    assert described.groups[0].protocol_type == "connect"
                    assert [m.member_id for m in described.groups[0].members] == [joined.member_id]
                    listed = await member.call(kp.LIST_GROUPS, 4, states_filter=[])
                    assert group in {g.group_id for g in listed.groups}
                    # Offsets for our group reach our coordinator too, which answers INVALID_REQUEST (it
                    # keeps none) on a connection that stays open.
                    commit_cls = kp.request_class(kp.OFFSET_COMMIT, 9)
                    committed = await member.call(
                        kp.OFFSET_COMMIT,
                        9,
                        group_id=group,
                        generation_id_or_member_epoch=joined.generation_id,
                        member_id=joined.member_id,
                        group_instance_id=None,
                        topics=[
                            commit_cls.OffsetCommitRequestTopic(
                                name="t",
                                partitions=[
                                    commit_cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                        partition_index=0,
                                        committed_offset=1,
                                        committed_leader_epoch=-1,
                                        committed_metadata="",
                                    )
                                ],
                            )
                        ],
                    )
                    assert [p.error_code for t in committed.topics for p in t.partitions] == [42]
                    fetch_cls = kp.request_class(kp.OFFSET_FETCH, 9)
                    fetched = await member.call(
                        kp.OFFSET_FETCH,
                        9,
                        require_stable=True,
                        groups=[
                            fetch_cls.OffsetFetchRequestGroup(
                                group_id=group, member_id=None, member_epoch=-1, topics=None
                            )
                        ],
                    )
                    assert [(g.group_id, g.error_code) for g in fetched.groups] == [(group, 42)]
                    beat = await member.call(
                        kp.HEARTBEAT,
                        4,
                        group_id=group,
                        generation_id=joined.generation_id,
                        member_id=joined.member_id,
                        group_instance_id=None,
                    )
                    assert beat.error_code == 0
                # The broker never heard of the group.
                async with Client(parse_address(kafka_broker.bootstrap_servers.split(",")[0]), "check") as direct:
                    found = await direct.call(kp.FIND_COORDINATOR, 3, key=group, key_type=0)
                    async with Client((found.host, found.port), "check") as broker:
                        described = await broker.call(
                            kp.DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=False
                        )
                        assert described.groups[0].group_state == "Dead"

            asyncio.run(asyncio.wait_for(run(), 90))
            # The gateway's metrics: where the requests went, our coordinator's failure codes (the
            # offsets' INVALID_REQUEST; MEMBER_ID_REQUIRED is a step, not counted), the closed connection
            samples = exposed(gw.gateway.metrics.exposition())
            assert samples['coordinator_gateway_requests_total{api="JoinGroup",upstream="coordinator"}'] == 2
            assert (
                samples['coordinator_gateway_requests_total{api="Heartbeat",upstream="coordinator"}'] == 2
            )  # not the stale one
            assert samples['coordinator_gateway_requests_total{api="Metadata",upstream="broker"}'] >= 1
            assert (
                samples['coordinator_gateway_coordinator_errors_total{api="OffsetCommit",error="INVALID_REQUEST"}'] == 1
            )
            assert not any("MEMBER_ID_REQUIRED" in name for name in samples)
            assert samples['coordinator_gateway_closed_connections_total{reason="upstream"}'] == 1
            assert samples['coordinator_gateway_upstream_failures_total{upstream="coordinator"}'] >= 1
    finally:
        serve.stop()
    assert partition_for(group, PARTITIONS) in range(PARTITIONS)


def test_the_gateway_command(kafka_broker, tmp_path):
    import subprocess
    import sys

    from confluent_kafka.admin import AdminClient

    port = free_port_block(12)
    log = (tmp_path / "gateway.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator",
            "gateway",
            "--bootstrap-server",
            kafka_broker.bootstrap_servers,
            "--listen",
            f"127.0.0.1:{port}",
            "--groups",
            OURS,
            "--coordinator",
            "127.0.0.1:1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        metadata = None
        while metadata is None and time.monotonic() < deadline:
            try:
                metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=2)
            except Exception:  # noqa: BLE001 (not listening yet)
                time.sleep(0.2)
        assert metadata is not None, (tmp_path / "gateway.log").read_text()
        assert {b.id: b.port for b in metadata.brokers.values()}[COORDINATOR_NODE_ID] == port + 1
        assert all(b.port == port + 2 + b.id for b in metadata.brokers.values() if b.id != COORDINATOR_NODE_ID)
    finally:
        process.terminate()
        assert process.wait(10) == 0
        log.close()
    assert (
        coordinator(
            ["gateway", "--listen", "127.0.0.1:1", "--groups", "(", "--bootstrap-server", "x:1", "--coordinator", "y:1"]
        )
        != 0
    )


def test_our_groups_reach_the_coordinator_that_owns_them_and_list_groups_merges_them(
    kafka_broker, unique_topic, tmp_path
):
    # Two coordinators, one partition each: the gateway asks each in turn which owns a group.
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    ports = [free_port(), free_port()]
    serves = [
        ServeProcess(
            kafka_broker.bootstrap_servers,
            unique_topic,
            tmp_path,
            "--allow-anonymous",
            "--partitions",
            str(partition),
            "--kafka-listener",
            f"127.0.0.1:{ports[partition]}",
        )
        for partition in range(PARTITIONS)
    ]
    groups = [
        next(
            g
            for g in (f"cluster-{uuid.uuid4().hex[:8]}" for _ in range(1000))
            if partition_for(g, PARTITIONS) == partition
        )
        for partition in range(PARTITIONS)
    ]
    for serve in serves:
        serve.start()
    try:
        for serve in serves:
            serve.wait_healthy(partitions=1)
        coordinators = [("127.0.0.1", port) for port in ports]
        with RunningGateway(kafka_broker.bootstrap_servers, coordinators) as gw:

            async def run() -> None:
                cls = kp.request_class(kp.JOIN_GROUP, 9)
                protocols = [
                    cls.JoinGroupRequestProtocol(
                        name=SESSIONED, metadata=encode_metadata(WorkerMetadata("http://w:8083/", 7, None), SESSIONED)
                    )
                ]
                async with Client(("127.0.0.1", gw.port + 1), "connect-1") as member:
                    for group in groups:
                        first = await member.call(
                            kp.JOIN_GROUP,
                            9,
                            group_id=group,
                            session_timeout_ms=10_000,
                            rebalance_timeout_ms=10_000,
                            member_id="",
                            group_instance_id=None,
                            protocol_type="connect",
                            protocols=protocols,
                            reason=None,
                        )
                        connect_fatal.assert_survivable(connect_fatal.JOIN, first, protocol_type="connect")
                        assert first.error_code == MEMBER_ID_REQUIRED
                        joined = await member.call(
                            kp.JOIN_GROUP,
                            9,
                            group_id=group,
                            session_timeout_ms=10_000,
                            rebalance_timeout_ms=10_000,
                            member_id=first.member_id,
                            group_instance_id=None,
                            protocol_type="connect",
                            protocols=protocols,
                            reason=None,
                        )
                        assert joined.error_code == 0, group
                    assert [gw.gateway._owners[g] for g in groups] == coordinators
                    listed = await member.call(kp.LIST_GROUPS, 4, states_filter=[])
                    assert set(groups) <= {g.group_id for g in listed.groups}

            asyncio.run(asyncio.wait_for(run(), 90))
    finally:
        for serve in serves:
            serve.stop()
