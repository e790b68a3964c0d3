"""The coordinator's Kafka listener (`coordinator/service/kafka_listener.py`) on Apache Kafka: a
client sending real frames over TCP (built with `coordinator.api.kafka_protocol`, whose bytes
tests/test_kafka_protocol.py ties to kafka-clients 4.3.1) runs a whole classic round for two members
with Kafka Connect's own protocol bytes; FindCoordinator names the listener; DescribeGroups and
ListGroups show the group in Kafka's spellings; a group of a partition this instance does not own is
NOT_COORDINATOR; requests on one connection are answered in order; bad frames close only their own
connection. Every JoinGroup, SyncGroup and Heartbeat answer is checked against what a Connect worker
survives (tests/connect_fatal.py). `coordinator serve --kafka-listener` serves it too."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import connect_fatal
import pytest
from serve_workers import served, wait_for

from records import ConnectorTaskCount
from records.connect_protocol import SESSIONED, WorkerAssignment, encode_assignment
from records.model import ConnectorsAndTasks, TaskId

from coordinator.api import kafka_protocol as kp
from coordinator.api import openapi
from coordinator.cli import main as coordinator
from coordinator.core.protocol import SetConnectorsRequest
from coordinator.service.kafka_listener import _HANDLERS, KafkaListener, node_id
from coordinator.service.ownership import Owner, owner_client_id, parse_owner
from coordinator.service.runtime import PartitionRuntime
from coordinator.service.server import CoordinatorServer
from coordinator.tools.devbroker import free_port
from coordinator.tools.partitions import partition_for
from coordinator.tools.process import ServeProcess
from tests.support.kafka_listener import MEMBER_ID_REQUIRED, PARTITIONS, Client, Coordinator, G, protocols
from tests.support.metrics import exposed
from tests.topics import create_topic

pytestmark = pytest.mark.integration

NOBODY = next(f"nobody-{i}" for i in range(100) if partition_for(f"nobody-{i}", PARTITIONS) == 0)
HTTP_GROUP = next(f"http-{i}" for i in range(100) if partition_for(f"http-{i}", PARTITIONS) == 0)
ELSEWHERE = next(f"other-{i}" for i in range(100) if partition_for(f"other-{i}", PARTITIONS) == 1)
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
GOLDEN = Path(__file__).resolve().parent / "golden" / "kafka_frames.json"


async def join(client: Client, member_id: str, url: str) -> Any:
    answer = await client.call(
        kp.JOIN_GROUP,
        9,
        group_id=G,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="connect",
        protocols=protocols(url),
        reason=None,
    )
    connect_fatal.assert_survivable(connect_fatal.JOIN, answer, protocol_type="connect")
    return answer


async def sync(client: Client, member_id: str, generation: int, assignments: list[tuple[str, bytes]]) -> Any:
    cls = kp.request_class(kp.SYNC_GROUP, 5)
    answer = await client.call(
        kp.SYNC_GROUP,
        5,
        group_id=G,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="connect",
        protocol_name=SESSIONED,
        assignments=[cls.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments],
    )
    connect_fatal.assert_survivable(connect_fatal.SYNC, answer, protocol_type="connect", protocol_name=SESSIONED)
    return answer


async def heartbeat(client: Client, member_id: str, generation: int, version: int = 4) -> Any:
    answer = await client.call(
        kp.HEARTBEAT, version, group_id=G, generation_id=generation, member_id=member_id, group_instance_id=None
    )
    connect_fatal.assert_survivable(connect_fatal.HEARTBEAT, answer)
    return answer


def test_the_kafka_apis_are_declared_beside_the_http_operations():
    # OffsetCommit and OffsetFetch have no HTTP operation: the listener answers them with an error
    no_offsets = {kp.OFFSET_COMMIT, kp.OFFSET_FETCH}
    # and the connection's own APIs: versions, authentication, a gateway's forwarding
    connection = {kp.API_VERSIONS, kp.SASL_HANDSHAKE, kp.SASL_AUTHENTICATE, kp.ENVELOPE}
    assert set(openapi.KAFKA_APIS.values()) | connection | no_offsets == set(kp.SUPPORTED)
    assert set(_HANDLERS) == set(openapi.KAFKA_APIS.values()) | no_offsets


def test_a_classic_round_over_the_kafka_protocol(kafka_broker, unique_topic, caplog):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    caplog.set_level(logging.INFO, logger="coordinator.service.kafka_listener")

    async def run() -> None:
        async with (
            # The two workers' joins are sent together, and the initial delay is what gathers them into
            # one generation (Kafka's group.initial.rebalance.delay.ms): with none, the first join's
            # generation ends as of its arrival, and the second lands in it or the next by the millisecond.
            Coordinator(kafka_broker, unique_topic, initial_assignment_delay_ms=1000) as c,
            Client(c.address, "connect-1") as w1,
            Client(c.address, "connect-2") as w2,
            Client(c.address, "admin") as admin,
        ):
            versions = await admin.call(kp.API_VERSIONS, 3, client_software_name="test", client_software_version="1")
            assert versions.error_code == 0
            assert {(k.api_key, k.min_version, k.max_version) for k in versions.api_keys} == {
                (k, lo, hi) for k, (lo, hi) in kp.SUPPORTED.items()
            }

            # FindCoordinator names the listener; a group of a partition served nowhere: not available.
            found = await admin.call(kp.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[G, ELSEWHERE])
            mine, other = found.coordinators
            assert (mine.key, mine.error_code, mine.host, mine.port) == (G, 0, *c.address)
            assert mine.node_id >= 0
            assert (other.key, other.error_code) == (ELSEWHERE, COORDINATOR_NOT_AVAILABLE)
            old = await admin.call(kp.FIND_COORDINATOR, 0, key=G)
            assert (old.error_code, old.host, old.port) == (0, *c.address)

            # The first joins are given member ids (KIP-394) made of the client id.
            first = await asyncio.gather(join(w1, "", "http://w1:8083/"), join(w2, "", "http://w2:8083/"))
            assert [a.error_code for a in first] == [MEMBER_ID_REQUIRED] * 2
            m1, m2 = (a.member_id for a in first)
            assert m1.startswith("connect-1-") and m2.startswith("connect-2-")

            # Both join the same generation; the leader gets both members' metadata.
            j1, j2 = await asyncio.gather(join(w1, m1, "http://w1:8083/"), join(w2, m2, "http://w2:8083/"))
            assert j1.error_code == j2.error_code == 0
            assert j1.generation_id == j2.generation_id >= 1 and j1.protocol_name == SESSIONED
            assert j1.leader == j2.leader in (m1, m2)
            generation, leader = j1.generation_id, j1.leader
            leading, following = (j1, j2) if leader == m1 else (j2, j1)
            assert {m.member_id for m in leading.members} == {m1, m2} and following.members == []

            a1 = encode_assignment(
                WorkerAssignment(leader, "http://w1:8083/", 7, ConnectorsAndTasks(("A",), (TaskId("A", 0),))), SESSIONED
            )
            a2 = encode_assignment(
                WorkerAssignment(leader, "http://w1:8083/", 7, ConnectorsAndTasks((), (TaskId("A", 1),))), SESSIONED
            )
            assignments = [(m1, a1), (m2, a2)]
            s1, s2 = await asyncio.gather(
                sync(w1, m1, generation, assignments if leader == m1 else []),
                sync(w2, m2, generation, assignments if leader == m2 else []),
            )
            assert (s1.error_code, s1.assignment, s2.error_code, s2.assignment) == (0, a1, 0, a2)
            assert s1.protocol_type == "connect" and s1.protocol_name == SESSIONED
            assert (await heartbeat(w1, m1, generation)).error_code == 0
            assert (await heartbeat(w2, m2, generation, version=0)).error_code == 0

            described = await admin.call(kp.DESCRIBE_GROUPS, 5, groups=[G, NOBODY], include_authorized_operations=False)
            group, nobody = described.groups
            assert (group.error_code, group.group_state, group.protocol_type, group.protocol_data) == (
                0,
                "Stable",
                "connect",
                SESSIONED,
            )
            # Each member's JoinGroup metadata for the chosen protocol and its assignment, as Kafka
            # gives them (kafka-consumer-groups --describe --members --verbose reads them).
            assert {
                (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in group.members
            } == {
                (m1, "connect-1", "127.0.0.1", protocols("http://w1:8083/")[0].metadata, a1),
                (m2, "connect-2", "127.0.0.1", protocols("http://w2:8083/")[0].metadata, a2),
            }
            assert (nobody.error_code, nobody.group_state) == (0, "Dead")
            v6 = await admin.call(kp.DESCRIBE_GROUPS, 6, groups=[NOBODY], include_authorized_operations=False)
            assert v6.groups[0].error_code == 69  # GROUP_ID_NOT_FOUND, from v6 on

            # A group of our connect protocol (HTTP) beside the classic one, on the same partition.
            await c.server.runtime_for(HTTP_GROUP).call(
                lambda coordinator, now: coordinator.set_connectors(
                    SetConnectorsRequest(group_id=HTTP_GROUP, connectors=(ConnectorTaskCount("B", 1),)), now
                )
            )
            listed = await admin.call(kp.LIST_GROUPS, 5, states_filter=[], types_filter=[])
            assert [(g.group_id, g.group_state, g.protocol_type, g.group_type) for g in listed.groups] == [
                (G, "Stable", "connect", "classic"),
                (HTTP_GROUP, "Empty", "connect", "connect"),
            ]

            async def listed_ids(version: int, **filters: list[str]) -> list[str]:
                return [g.group_id for g in (await admin.call(kp.LIST_GROUPS, version, **filters)).groups]

            assert await listed_ids(4, states_filter=["Empty"]) == [HTTP_GROUP]
            assert await listed_ids(4, states_filter=[" stable"]) == [G]
            assert await listed_ids(5, states_filter=[], types_filter=["Classic"]) == [G]
            assert await listed_ids(5, states_filter=[], types_filter=["connect"]) == [HTTP_GROUP]
            # A type Kafka does not know here (or at all) matches nothing, as Kafka's UNKNOWN does.
            assert await listed_ids(5, states_filter=[], types_filter=["consumer", "no-such-type"]) == []
            assert await listed_ids(5, states_filter=["Stable"], types_filter=["connect"]) == []

            # A group whose partition this instance does not own.
            elsewhere = await admin.call(
                kp.JOIN_GROUP,
                9,
                group_id=ELSEWHERE,
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                member_id="",
                group_instance_id=None,
                protocol_type="connect",
                protocols=protocols("http://x:8083/"),
                reason=None,
            )
            assert elsewhere.error_code == NOT_COORDINATOR
            connect_fatal.assert_survivable(connect_fatal.JOIN, elsewhere)
            beat = await admin.call(
                kp.HEARTBEAT, 4, group_id=ELSEWHERE, generation_id=1, member_id="x", group_instance_id=None
            )
            assert beat.error_code == NOT_COORDINATOR
            connect_fatal.assert_survivable(connect_fatal.HEARTBEAT, beat)
            described = await admin.call(kp.DESCRIBE_GROUPS, 0, groups=[ELSEWHERE])
            assert described.groups[0].error_code == NOT_COORDINATOR

            # The second member leaves; the first is told to join again at its next heartbeat.
            leave_cls = kp.request_class(kp.LEAVE_GROUP, 5)
            left = await w2.call(
                kp.LEAVE_GROUP,
                5,
                group_id=G,
                members=[leave_cls.MemberIdentity(member_id=m2, group_instance_id=None, reason="stopping")],
            )
            assert left.error_code == 0 and [(m.member_id, m.error_code) for m in left.members] == [(m2, 0)]
            assert (await heartbeat(w1, m1, generation)).error_code == 27  # REBALANCE_IN_PROGRESS
            rebalancing = (
                await admin.call(kp.DESCRIBE_GROUPS, 5, groups=[G], include_authorized_operations=False)
            ).groups[0]
            # Not Stable: no protocol and no member metadata, as Kafka's describeNoMetadata.
            assert (rebalancing.group_state, rebalancing.protocol_data) == ("PreparingRebalance", "")
            assert [(m.member_id, m.member_metadata) for m in rebalancing.members] == [(m1, b"")]
            rejoined = await join(w1, m1, "http://w1:8083/")
            assert rejoined.error_code == 0 and rejoined.leader == m1 and rejoined.generation_id > generation
            # One kafka-member-joined event per member (not per rejoin), naming its client id and host.
            joined = [
                r.coordinator_fields
                for r in caplog.records
                if getattr(r, "coordinator_fields", {}).get("event") == "kafka-member-joined"
            ]
            assert sorted(
                (e["group"], e["member"], e["client_id"], e["host"], e["generation"]) for e in joined
            ) == sorted([(G, m1, "connect-1", "127.0.0.1", generation), (G, m2, "connect-2", "127.0.0.1", generation)])
            old_leave = await w1.call(kp.LEAVE_GROUP, 0, group_id=G, member_id="unknown-member")
            assert old_leave.error_code == 25  # UNKNOWN_MEMBER_ID, as Kafka's v0-v2 answer it

    asyncio.run(asyncio.wait_for(run(), 120))


def test_answers_come_in_request_order_and_bad_input_closes_only_its_connection(kafka_broker, unique_topic):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)

    async def run() -> None:
        async with Coordinator(kafka_broker, unique_topic) as c, Client(c.address, "steady") as steady:
            # Pipelined: sent together, answered one at a time in order.
            sent = [
                steady.send(kp.DESCRIBE_GROUPS, 5, groups=[G], include_authorized_operations=False),
                steady.send(kp.API_VERSIONS, 0),
                steady.send(kp.HEARTBEAT, 4, group_id=G, generation_id=1, member_id="nobody", group_instance_id=None),
                steady.send(kp.LIST_GROUPS, 3),
                steady.send(kp.FIND_COORDINATOR, 6, key_type=0, coordinator_keys=[G]),
            ]
            answers = [await steady.receive(s) for s in sent]  # receive() checks each correlation id
            assert answers[2].error_code == 25  # UNKNOWN_MEMBER_ID
            assert answers[4].coordinators[0].port == c.address[1]
            # Counted per Kafka API, with each failure code named; the open connection is counted.
            samples = exposed(c.server.metrics.exposition())
            for api in ("DescribeGroups", "ApiVersions", "Heartbeat", "ListGroups", "FindCoordinator"):
                assert samples[f'coordinator_kafka_requests_total{{api="{api}"}}'] == 1, api
            assert samples['coordinator_kafka_errors_total{api="Heartbeat",error="UNKNOWN_MEMBER_ID"}'] == 1
            assert [k for k in samples if k.startswith("coordinator_kafka_errors_total")] == [
                'coordinator_kafka_errors_total{api="Heartbeat",error="UNKNOWN_MEMBER_ID"}'
            ]
            assert samples["coordinator_kafka_connections"] == 1

            # Tagged fields no schema knows (kafka-clients wrote them: the golden file) end nothing.
            golden = next(
                g
                for g in json.loads(GOLDEN.read_text())["cases"]
                if g["name"] == "join_group_v9_unknown_tags" and g["kind"] == "request"
            )
            steady.writer.write(bytes.fromhex(golden["hex"]))
            size = kp.frame_length(await steady.reader.readexactly(4))
            correlation, body = kp.decode_response(kp.JOIN_GROUP, 9, await steady.reader.readexactly(size))
            assert correlation == golden["correlation_id"]
            connect_fatal.assert_survivable(connect_fatal.JOIN, body)

            # ApiVersions at a version we do not know: Kafka's v0 answer with UNSUPPORTED_VERSION.
            async with Client(c.address, "newer") as newer:
                newer.writer.write(kp.frame(struct.pack(">hhih", kp.API_VERSIONS, 99, 5, 1) + b"x" + b"\x00" * 8))
                size = kp.frame_length(await newer.reader.readexactly(4))
                correlation, body = kp.decode_response(kp.API_VERSIONS, 0, await newer.reader.readexactly(size))
                assert (correlation, body.error_code) == (5, 35)

            heartbeat_frame = kp.encode_request(
                kp.request_class(kp.HEARTBEAT, 4)(group_id=G, generation_id=1, member_id="m", group_instance_id=None),
                4,
                1,
                "bad",
            )
            bad = {
                "a size of 2 GB": struct.pack(">i", 2**31 - 1) + b"\x00" * 16,
                "a negative size": struct.pack(">i", -5),
                "garbage": b"\x00\x00\x00\x06garbag",
                "an unknown API key": kp.frame(struct.pack(">hhih", 999, 0, 1, 1) + b"x"),
                "an unknown version": kp.frame(struct.pack(">hhih", kp.JOIN_GROUP, 3, 1, 1) + b"x" + b"\x00" * 40),
                "a truncated request": kp.frame(heartbeat_frame[4:-6]),
            }
            before = c.server.metrics.kafka_bad_input._metrics.copy()
            for name, data in bad.items():
                async with Client(c.address, "bad") as client:
                    client.writer.write(data)
                    assert await client.closed(), name
            # a connection that ends inside a frame
            async with Client(c.address, "cut") as client:
                client.writer.write(heartbeat_frame[:10])
                client.writer.close()
            assert before == {}
            total = sum(m._value.get() for m in c.server.metrics.kafka_bad_input._metrics.values())
            deadline = time.monotonic() + 5
            while total < len(bad) + 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                total = sum(m._value.get() for m in c.server.metrics.kafka_bad_input._metrics.values())
            assert total == len(bad) + 1
            assert b'coordinator_kafka_bad_input_total{reason="frame-size"} 2.0' in c.server.metrics.exposition()

            # The steady connection never noticed.
            answer = await steady.call(
                kp.HEARTBEAT, 4, group_id=G, generation_id=1, member_id="nobody", group_instance_id=None
            )
            assert answer.error_code == 25
            # Every closed connection was uncounted: only the steady one is open.
            assert exposed(c.server.metrics.exposition())["coordinator_kafka_connections"] == 1
            assert exposed(c.server.metrics.exposition())['coordinator_kafka_requests_total{api="ApiVersions"}'] == 2
            assert (
                exposed(c.server.metrics.exposition())[
                    'coordinator_kafka_errors_total{api="ApiVersions",error="UNSUPPORTED_VERSION"}'
                ]
                == 1
            )

    asyncio.run(asyncio.wait_for(run(), 120))


def test_serve_with_a_kafka_listener(kafka_broker, unique_topic, tmp_path, capsys):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    port = free_port()
    serve = ServeProcess(
        kafka_broker.bootstrap_servers,
        unique_topic,
        tmp_path,
        "--allow-anonymous",
        "--kafka-listener",
        f"127.0.0.1:{port}",
        "--kafka-advertised",
        f"localhost:{port}",
        "--initial-assignment-delay-ms",
        "0",
    )
    serve.start()
    try:
        serve.wait_healthy(partitions=PARTITIONS)

        async def run() -> None:
            async with Client(("127.0.0.1", port), "probe") as client:
                found = await client.call(kp.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[G])
                assert (found.coordinators[0].error_code, found.coordinators[0].host, found.coordinators[0].port) == (
                    0,
                    "localhost",
                    port,
                )
                answer = await client.call(
                    kp.JOIN_GROUP,
                    9,
                    group_id=G,
                    session_timeout_ms=10_000,
                    rebalance_timeout_ms=10_000,
                    member_id="",
                    group_instance_id=None,
                    protocol_type="connect",
                    protocols=protocols("http://p:8083/"),
                    reason=None,
                )
                assert answer.error_code == MEMBER_ID_REQUIRED and answer.member_id.startswith("probe-")
                joined = await client.call(
                    kp.JOIN_GROUP,
                    9,
                    group_id=G,
                    session_timeout_ms=10_000,
                    rebalance_timeout_ms=10_000,
                    member_id=answer.member_id,
                    group_instance_id=None,
                    protocol_type="connect",
                    protocols=protocols("http://p:8083/"),
                    reason=None,
                )
                assert joined.error_code == 0
                return joined.member_id

        member = asyncio.run(asyncio.wait_for(run(), 60))
        # `groups describe` shows the member joined over Kafka's protocol with its Kafka client id
        # and the socket's host.
        capsys.readouterr()
        assert (
            coordinator(["groups", "describe", "--group", G, "--members", "--format", "json", "--url", serve.url]) == 0
        )
        described = json.loads(capsys.readouterr().out)
        assert [(m["MemberId"], m["ClientId"], m["ClientHost"]) for m in described] == [(member, "probe", "127.0.0.1")]
        capsys.readouterr()
        assert coordinator(["groups", "describe", "--group", G, "--members", "--url", serve.url]) == 0
        row = capsys.readouterr().out.splitlines()[1].split()
        assert row[:2] == [member, "-"] and row[2:4] == ["probe", "127.0.0.1"]
    finally:
        serve.stop()


def test_while_the_partition_loads_the_answers_are_those_a_java_member_survives():
    # The same answers as the HTTP routes give (test_classic_kafka_behaviours), from the same calls.
    async def run() -> None:
        server = CoordinatorServer({"bootstrap.servers": "127.0.0.1:1"}, "coordinator-topic", 1, [], "http://x")
        server.runtimes[0] = PartitionRuntime(server.kafka_config, server.topic, 0, server.config)  # LOADING
        listener = KafkaListener(server)
        address = await listener.start("127.0.0.1", 0)
        try:
            async with Client(address, "connect-1") as w:
                found = await w.call(kp.FIND_COORDINATOR, 6, key_type=0, coordinator_keys=[G])
                assert (found.coordinators[0].error_code, found.coordinators[0].port) == (0, address[1])
                joined = await w.call(
                    kp.JOIN_GROUP,
                    9,
                    group_id=G,
                    session_timeout_ms=10_000,
                    rebalance_timeout_ms=10_000,
                    member_id="",
                    group_instance_id=None,
                    protocol_type="connect",
                    protocols=protocols("http://w:8083/"),
                    reason=None,
                )
                assert joined.error_code == 14  # COORDINATOR_LOAD_IN_PROGRESS: Java's JoinGroup retries it
                connect_fatal.assert_survivable(connect_fatal.JOIN, joined)
                synced = await sync(w, "W1", 3, [])
                assert synced.error_code == 27  # REBALANCE_IN_PROGRESS, as Kafka answers while loading
                assert (await heartbeat(w, "W1", 3)).error_code == 0
                left = await w.call(kp.LEAVE_GROUP, 2, group_id=G, member_id="W1")
                assert left.error_code == 14
                described = await w.call(kp.DESCRIBE_GROUPS, 5, groups=[G], include_authorized_operations=False)
                assert described.groups[0].error_code == 14
                deleted = await w.call(kp.DELETE_GROUPS, 2, groups_names=[G])
                assert [(r.group_id, r.error_code) for r in deleted.results] == [(G, 14)]
        finally:
            await listener.close()
            await server.close()

    asyncio.run(asyncio.wait_for(run(), 30))


def test_delete_groups(kafka_broker, unique_topic):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)

    async def run() -> None:
        async with (
            Coordinator(kafka_broker, unique_topic) as c,
            Client(c.address, "connect-1") as w,
            Client(c.address, "admin") as admin,
        ):
            member = (await join(w, "", "http://w:8083/")).member_id
            joined = await join(w, member, "http://w:8083/")
            assert joined.error_code == 0
            deleted = await admin.call(kp.DELETE_GROUPS, 2, groups_names=[G, NOBODY, ELSEWHERE])
            assert [(r.group_id, r.error_code) for r in deleted.results] == [
                (G, 68),
                (NOBODY, 69),
                (ELSEWHERE, NOT_COORDINATOR),
            ]  # NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND
            left = await w.call(
                kp.LEAVE_GROUP,
                3,
                group_id=G,
                members=[kp.request_class(kp.LEAVE_GROUP, 3).MemberIdentity(member_id=member, group_instance_id=None)],
            )
            assert left.error_code == 0
            deleted = await admin.call(kp.DELETE_GROUPS, 0, groups_names=[G])
            assert [(r.group_id, r.error_code) for r in deleted.results] == [(G, 0)]
            described = await admin.call(kp.DESCRIBE_GROUPS, 0, groups=[G])
            assert described.groups[0].group_state == "Dead"

    asyncio.run(asyncio.wait_for(run(), 60))


def test_offset_commit_and_fetch_are_answered_with_invalid_request_and_logged(kafka_broker, unique_topic, caplog):
    """We keep no offsets: every partition of an OffsetCommit, and OffsetFetch's group (v8+) or top
    level and partitions (v1-v7), gets INVALID_REQUEST (42), at every served version, for a group
    with members too; the connection stays open, one log line per request, counted once each."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    caplog.set_level(logging.INFO, logger="coordinator.service.kafka_listener")
    invalid = 42

    async def run() -> None:
        async with (
            Coordinator(kafka_broker, unique_topic) as c,
            Client(c.address, "connect-1") as w,
            Client(c.address, "consumer") as client,
        ):
            member = (await join(w, "", "http://w:8083/")).member_id
            joined = await join(w, member, "http://w:8083/")
            assert joined.error_code == 0
            caplog.clear()
            low, high = kp.SUPPORTED[kp.OFFSET_COMMIT]
            for v in range(low, high + 1):
                cls = kp.request_class(kp.OFFSET_COMMIT, v)
                topic = {"topic_id": uuid.UUID(int=7)} if v >= 10 else {"name": "t"}
                answer = await client.call(
                    kp.OFFSET_COMMIT,
                    v,
                    group_id=G,
                    generation_id_or_member_epoch=1,
                    member_id=member,
                    group_instance_id=None,
                    retention_time_ms=-1,
                    topics=[
                        cls.OffsetCommitRequestTopic(
                            **topic,
                            partitions=[
                                cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                    partition_index=i,
                                    committed_offset=5,
                                    committed_leader_epoch=-1,
                                    committed_metadata=None,
                                )
                                for i in (0, 4)
                            ],
                        )
                    ],
                )
                assert [
                    (t.topic_id if v >= 10 else t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                    for t in answer.topics
                ] == [(topic.popitem()[1], [(0, invalid), (4, invalid)])], v
            low, high = kp.SUPPORTED[kp.OFFSET_FETCH]
            for v in range(low, high + 1):
                cls = kp.request_class(kp.OFFSET_FETCH, v)
                if v >= 8:
                    answer = await client.call(
                        kp.OFFSET_FETCH,
                        v,
                        require_stable=True,
                        groups=[
                            cls.OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1, topics=None)
                            for g in (G, NOBODY)
                        ],
                    )
                    assert [(g.group_id, g.error_code, list(g.topics)) for g in answer.groups] == [
                        (G, invalid, []),
                        (NOBODY, invalid, []),
                    ], v
                    continue
                answer = await client.call(
                    kp.OFFSET_FETCH,
                    v,
                    group_id=G,
                    require_stable=False,
                    topics=[cls.OffsetFetchRequestTopic(name="t", partition_indexes=[1, 2])],
                )
                assert [
                    (t.name, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
                    for t in answer.topics
                ] == [("t", [(1, -1, invalid), (2, -1, invalid)])], v
                if v >= 2:
                    assert answer.error_code == invalid, v
                    everything = await client.call(kp.OFFSET_FETCH, v, group_id=G, require_stable=False, topics=None)
                    assert everything.error_code == invalid and list(everything.topics) == [], v
            # the connection stays open: the group's member still heartbeats, the client still asks
            assert (await heartbeat(w, member, joined.generation_id)).error_code == 0
            assert (await client.call(kp.API_VERSIONS, 0)).error_code == 0
            commits, fetches = 9, 10 + 6  # v2-v7 asked twice
            lines = [r.getMessage() for r in caplog.records if "keeps no offsets" in r.getMessage()]
            assert len(lines) == commits + fetches
            assert (
                f"OffsetCommit v10 for group(s) {G} from 127.0.0.1 (client id consumer) answered with error 42"
                in lines[commits - 1]
            )
            samples = exposed(c.server.metrics.exposition())
            assert samples['coordinator_kafka_errors_total{api="OffsetCommit",error="INVALID_REQUEST"}'] == commits
            assert (
                samples['coordinator_kafka_errors_total{api="OffsetFetch",error="INVALID_REQUEST"}']
                == 1 + 6 * 2 + 3 * 2
            )
            assert samples['coordinator_kafka_requests_total{api="OffsetFetch"}'] == fetches

    asyncio.run(asyncio.wait_for(run(), 60))


def test_the_ownership_client_id_carries_the_kafka_listener():
    assert owner_client_id("http://a:8400", None) == "http://a:8400"
    assert parse_owner("http://a:8400") == Owner("http://a:8400")
    assert owner_client_id("http://a:8400", ("a", 9092)) == "http://a:8400 kafka=a:9092"
    assert parse_owner("http://a:8400 kafka=a:9092") == Owner("http://a:8400", ("a", 9092))
    assert parse_owner("http://a:8400 kafka=[::1]:9092") == Owner("http://a:8400", ("::1", 9092))
    assert parse_owner("http://a:8400 kafka=nonsense") == Owner("http://a:8400")
    # Node ids: stable per advertised address, distinct, and above the small ids of brokers.
    assert node_id("a", 9092) == node_id("a", 9092) != node_id("a", 9093)
    assert all(1 << 30 <= node_id("127.0.0.1", p) < 1 << 31 for p in range(9000, 9100))


def test_any_instance_in_group_ownership_names_the_owners_kafka_listener(kafka_broker, unique_topic, tmp_path):
    # Two instances in group ownership, neither told of the other: each learns the other's Kafka
    # listener from the ownership consumer group (its client.id), so FindCoordinator at either
    # names the owner's listener; the group requests themselves are the owner's alone.
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    ports = [free_port(), free_port()]
    a, b = (
        ServeProcess(
            kafka_broker.bootstrap_servers,
            unique_topic,
            tmp_path,
            "--allow-anonymous",
            "--ownership",
            "group",
            "--ownership-session-timeout-ms",
            "6000",
            "--kafka-listener",
            f"127.0.0.1:{port}",
        )
        for port in ports
    )
    try:
        a.start()
        b.start()
        wait_for(
            lambda: len(served(a)) == len(served(b)) == 1 and served(a) | served(b) == {0, 1},
            60,
            "the two partitions to be shared",
        )
        listener = {p: ports[0] if p in served(a) else ports[1] for p in (0, 1)}
        expected = {G: listener[0], ELSEWHERE: listener[1]}

        async def found_at(port: int) -> dict[str, tuple[int, int, str, int]]:
            async with Client(("127.0.0.1", port), "admin") as client:
                answer = await client.call(kp.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[G, ELSEWHERE])
                return {c.key: (c.error_code, c.node_id, c.host, c.port) for c in answer.coordinators}

        want = {key: (0, node_id("127.0.0.1", port), "127.0.0.1", port) for key, port in expected.items()}
        assert want[G][1] != want[ELSEWHERE][1]
        for port in ports:
            wait_for(
                lambda port=port: asyncio.run(found_at(port)) == want,
                30,
                f"FindCoordinator at {port} to name both owners' listeners",
            )
            old = asyncio.run(_call(port, kp.FIND_COORDINATOR, 0, key=ELSEWHERE))
            assert (old.error_code, old.node_id, old.host, old.port) == want[ELSEWHERE]

        # A group request at the instance that does not own the group: NOT_COORDINATOR, as before.
        join = {
            "group_id": G,
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "connect",
            "protocols": protocols("http://w:8083/"),
            "reason": None,
        }
        assert asyncio.run(_call(listener[1], kp.JOIN_GROUP, 9, **join)).error_code == NOT_COORDINATOR
        assert asyncio.run(_call(listener[0], kp.JOIN_GROUP, 9, **join)).error_code == MEMBER_ID_REQUIRED

        # kill -9 of the owner of G's partition: the survivor takes it and names itself for both.
        owner, survivor = (a, b) if 0 in served(a) else (b, a)
        survivor_port = listener[1]
        owner.kill()
        wait_for(lambda: served(survivor) == {0, 1}, 60, "the survivor to take both partitions")
        mine = (0, node_id("127.0.0.1", survivor_port), "127.0.0.1", survivor_port)
        wait_for(
            lambda: asyncio.run(found_at(survivor_port)) == {G: mine, ELSEWHERE: mine},
            30,
            "FindCoordinator at the survivor to name itself",
        )
        assert asyncio.run(_call(survivor_port, kp.JOIN_GROUP, 9, **join)).error_code == MEMBER_ID_REQUIRED
    finally:
        a.stop()
        b.stop()


async def _call(port: int, api_key: int, version: int, **fields: Any) -> Any:
    async with Client(("127.0.0.1", port), "probe") as client:
        return await client.call(api_key, version, **fields)
