"""Gateway benchmark (`make bench-gateway`): Kafka's binary protocol against the HTTP API, and bytes
through the gateway against straight to the broker (issue 28, item 10).

One `coordinator serve` (HTTP API and `--kafka-listener`, on a topic made for the run) and one
`coordinator gateway` in front of the broker it is given, both child processes; the clients run in
this process. Every figure has its baseline measured in the same run, the two sides interleaved
(each repeat runs both, in alternating order, so a busy machine slows them alike), and is printed as
the median over the repeats with the ratio to its baseline and the goal. Nothing is asserted:
timings vary with the machine (two cores here, shared by the broker, the coordinator, the gateway
and these clients).

1. Group round trips per second, the Kafka listener against the HTTP API, same coordinator process:
   (a) JoinGroup + SyncGroup: each client is the only member of its own group (Connect's `sessioned`
       protocol bytes, records/connect_protocol.py) and rejoins as its leader: JoinGroup with its
       member id (a new generation, written to the topic), then SyncGroup with its assignment;
   (b) Heartbeat: each client a member of its own stable group.
   One sequential client, and several concurrent ones (one connection each: the listener answers a
   connection's requests one at a time, as Kafka does, and HTTP/1.1 keep-alive likewise). Both
   clients are lean on purpose, so that the coordinator is what is measured: Kafka requests are
   encoded once with kafka-python and only their correlation id (and SyncGroup's generation) patched,
   answers read at fixed offsets (checked once against the library's decoding); HTTP requests are
   prepared bytes over a raw keep-alive connection, answers decoded with msgspec; every answer's error
   code is checked. The CPU per round trip of the coordinator and of these clients is shown beside
   each rate. Goal: listener/HTTP >= 1.0.
2. Bytes through the gateway against straight to the broker, with confluent_kafka (librdkafka), records
   of Connect's internal-topic sizes (config and status records: values of 200 B - 2 KB, keys as
   Connect names them): produce throughput (acks=all, the producer's own batching), fetch throughput
   (a consumer assigned to the partition, reading it all), MB/s of values and the ratio (goal >= 0.5);
   the added p99 latency of a produce (acks=all, one record at a time, from produce() to its delivery
   callback) and of a fetch round trip (one Fetch v12 of one record, max_wait_ms 0, over a raw socket to
   the broker's port, or to the gateway's port for that broker), with the gateway's CPU per MB.
3. The other option for KIP-951: rewriting the node endpoints of Fetch v16+ / Produce v10+ answers
   instead of capping those versions means decoding and re-encoding every such answer in Python.
   Measured with kafka-python's FetchResponse v16 / ProduceResponse v10 (the library the gateway
   uses): a 1 MiB Fetch answer (record batches of Connect-sized records), a small one (one record), an
   idle one (no partitions: an incremental fetch session with nothing new), a Produce answer; against
   the forwarding measured in 2.

`--quick` runs everything small and short, to check that it works.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import io
import os
import random
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_service import Serve, _children, _cleanup, cpu_seconds, create_topic, delete_topics

from records.connect_protocol import SESSIONED, WorkerAssignment, WorkerMetadata, encode_assignment, encode_metadata
from records.model import ConnectorsAndTasks, TaskId

from coordinator.api import kafka_protocol as kp
from coordinator.api import wire
from coordinator.core.protocol import (
    ClassicHeartbeatRequest,
    ClassicProtocol,
    ErrorResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.tools import devbroker

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.api_header import RequestHeader as LibRequestHeader
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.protocol.producer import ProduceResponse
    from kafka.record.memory_records import MemoryRecordsBuilder

PARTITIONS = 4
GROUPS = "^bench-gw-.*"
SESSION_MS = 600_000  # nobody is fenced while the other cells run
NONE, MEMBER_ID_REQUIRED = 0, 79


@dataclass
class Sizes:
    repeats: int = 5
    seconds: float = 2.0
    clients: int = 16
    records: int = 50_000  # per throughput run (~56 MB of values)
    latency_samples: int = 1_000  # per path
    decode_rounds: int = 20


QUICK = Sizes(repeats=1, seconds=0.5, clients=4, records=1_000, latency_samples=100, decode_rounds=3)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def goal(ratio: float, target: float) -> str:
    return f"goal >= {target:g}: {'met' if ratio >= target else 'not met'}"


# --- 1. group round trips -------------------------------------------------------------------------------


class KafkaConnection:
    """One connection to the listener; a request is sent as prepared bytes with its correlation id patched."""

    def __init__(self) -> None:
        self.correlation = 0

    async def open(self, address: tuple[str, int]) -> KafkaConnection:
        self.reader, self.writer = await asyncio.open_connection(*address)
        return self

    def close(self) -> None:
        self.writer.close()

    async def round_trip(self, frame: bytes) -> bytes:
        self.correlation += 1
        correlation = struct.pack(">i", self.correlation)
        # size (4), api key (2), api version (2), correlation id (4)
        self.writer.write(b"".join((frame[:8], correlation, frame[12:])))
        payload = await self.reader.readexactly(kp.frame_length(await self.reader.readexactly(4)))
        if payload[:4] != correlation:
            raise RuntimeError("an answer out of order")
        return payload


class HttpConnection:
    """One HTTP/1.1 keep-alive connection to `coordinator serve`, requests sent as prepared bytes."""

    async def open(self, port: int) -> HttpConnection:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        return self

    def close(self) -> None:
        self.writer.close()

    @staticmethod
    def request(path: str, body: bytes) -> bytes:
        return (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body

    async def round_trip(self, request: bytes) -> bytes:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        match = re.search(rb"\r\ncontent-length: *(\d+)", head, re.IGNORECASE)
        if match is None:
            raise RuntimeError(f"an answer without Content-Length: {head[:200]!r}")
        return await self.reader.readexactly(int(match.group(1)))


def _metadata(url: str) -> bytes:
    return encode_metadata(WorkerMetadata(url, 7, None), SESSIONED)


def _assignment(member: str, url: str) -> bytes:
    return encode_assignment(
        WorkerAssignment(
            member, url, 7, ConnectorsAndTasks(("source-a",), tuple(TaskId("source-a", i) for i in range(4)))
        ),
        SESSIONED,
    )


class KafkaMember:
    """The only member of its group, over the Kafka listener (JoinGroup v9, SyncGroup v5, Heartbeat v4)."""

    def __init__(self, connection: KafkaConnection, group: str) -> None:
        self.c, self.group, self.url = connection, group, f"http://{group}:8083/"
        self.member_id, self.generation = "", -1

    def _join_frame(self) -> bytes:
        cls = kp.request_class(kp.JOIN_GROUP, 9)
        return kp.encode_request(
            cls(
                group_id=self.group,
                session_timeout_ms=SESSION_MS,
                rebalance_timeout_ms=30_000,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="connect",
                protocols=[cls.JoinGroupRequestProtocol(name=SESSIONED, metadata=_metadata(self.url))],
                reason=None,
            ),
            9,
            0,
            "bench-kafka",
        )

    # The answers are read at fixed places, as the HTTP client's are decoded by msgspec: after the
    # response header v1 (correlation id, no tagged fields: checked), throttle_time_ms, error_code, then
    # JoinGroup's generation_id. `setup` checks this reading once against the library's decoding.

    async def join(self) -> None:
        payload = await self.c.round_trip(self.join_frame)
        error = struct.unpack_from(">h", payload, 9)[0]
        if payload[4] != 0 or error != NONE:
            raise RuntimeError(f"JoinGroup over Kafka: error {error}")
        self.generation = struct.unpack_from(">i", payload, 11)[0]

    def _sync_frame(self, generation: int) -> bytes:
        cls = kp.request_class(kp.SYNC_GROUP, 5)
        return kp.encode_request(
            cls(
                group_id=self.group,
                generation_id=generation,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="connect",
                protocol_name=SESSIONED,
                assignments=[cls.SyncGroupRequestAssignment(member_id=self.member_id, assignment=self.assignment)],
            ),
            5,
            0,
            "bench-kafka",
        )

    async def sync(self) -> None:
        # encoded once (`setup`); the generation patched in
        at = self.sync_generation_at
        frame = b"".join((self.sync_frame[:at], struct.pack(">i", self.generation), self.sync_frame[at + 4 :]))
        payload = await self.c.round_trip(frame)
        error = struct.unpack_from(">h", payload, 9)[0]
        if payload[4] != 0 or error != NONE:
            raise RuntimeError(f"SyncGroup over Kafka: error {error}")

    async def setup(self) -> None:
        self.join_frame = self._join_frame()
        _, first = kp.decode_response(kp.JOIN_GROUP, 9, await self.c.round_trip(self.join_frame))
        if first.error_code != MEMBER_ID_REQUIRED:
            raise RuntimeError(f"the first JoinGroup over Kafka: error {first.error_code}")
        self.member_id = first.member_id
        self.join_frame = self._join_frame()
        self.assignment = _assignment(self.member_id, self.url)
        self.sync_frame = self._sync_frame(0x7A5B3C1D)
        self.sync_generation_at = self.sync_frame.index(struct.pack(">i", 0x7A5B3C1D))
        payload = await self.c.round_trip(self.join_frame)
        _, joined = kp.decode_response(kp.JOIN_GROUP, 9, payload)
        if (joined.error_code, joined.generation_id) != struct.unpack_from(">hi", payload, 9) or joined.error_code:
            raise RuntimeError(f"JoinGroup over Kafka: {joined}")
        self.generation = joined.generation_id
        frame = self._sync_frame(self.generation)
        payload = await self.c.round_trip(frame)
        _, synced = kp.decode_response(kp.SYNC_GROUP, 5, payload)
        if (
            synced.error_code != struct.unpack_from(">h", payload, 9)[0]
            or synced.error_code
            or synced.assignment != self.assignment
        ):
            raise RuntimeError(f"SyncGroup over Kafka: {synced}")
        self._heartbeat_frame()
        # The heartbeat's answer is read at a fixed place: header v1 (correlation id, no tagged fields),
        # throttle_time_ms, error_code; checked once against the library's decoding.
        payload = await self.c.round_trip(self.heartbeat_frame)
        _, answer = kp.decode_response(kp.HEARTBEAT, 4, payload)
        if answer.error_code != NONE or payload[4] != 0 or struct.unpack_from(">h", payload, 9)[0] != NONE:
            raise RuntimeError(f"Heartbeat over Kafka: {answer}")

    def _heartbeat_frame(self) -> None:
        self.heartbeat_generation = self.generation
        self.heartbeat_frame = kp.encode_request(
            kp.request_class(kp.HEARTBEAT, 4)(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id, group_instance_id=None
            ),
            4,
            0,
            "bench-kafka",
        )

    async def join_sync(self) -> None:
        await self.join()
        await self.sync()

    async def heartbeat(self) -> None:
        if self.heartbeat_generation != self.generation:  # rejoined in (a): once per cell
            self._heartbeat_frame()
        payload = await self.c.round_trip(self.heartbeat_frame)
        if struct.unpack_from(">h", payload, 9)[0] != NONE:
            raise RuntimeError(f"Heartbeat over Kafka: error {struct.unpack_from('>h', payload, 9)[0]}")


class HttpMember:
    """The same over the HTTP API's classic routes (/v1/classic-group/*)."""

    def __init__(self, connection: HttpConnection, group: str) -> None:
        self.c, self.group, self.url = connection, group, f"http://{group}:8083/"
        self.member_id, self.generation = "", -1

    def _join_request(self) -> bytes:
        return HttpConnection.request(
            "/v1/classic-group/join",
            wire.encode(
                JoinGroupRequest(
                    group_id=self.group,
                    member_id=self.member_id,
                    protocol_type="connect",
                    protocols=[ClassicProtocol(name=SESSIONED, metadata=_metadata(self.url))],
                    session_timeout_ms=SESSION_MS,
                    rebalance_timeout_ms=30_000,
                )
            ),
        )

    async def join(self) -> None:
        answer = wire.decode(await self.c.round_trip(self.join_request), JoinGroupResponse)
        if answer.error_code != NONE:
            raise RuntimeError(f"JoinGroup over HTTP: error {answer.error_code} {answer.error_message}")
        self.generation = answer.generation_id

    async def sync(self) -> None:
        request = HttpConnection.request(
            "/v1/classic-group/sync",
            wire.encode(
                SyncGroupRequest(
                    group_id=self.group,
                    member_id=self.member_id,
                    generation_id=self.generation,
                    protocol_type="connect",
                    protocol_name=SESSIONED,
                    assignments=[SyncGroupAssignment(member_id=self.member_id, assignment=self.assignment)],
                )
            ),
        )
        answer = wire.decode(await self.c.round_trip(request), SyncGroupResponse)
        if answer.error_code != NONE:
            raise RuntimeError(f"SyncGroup over HTTP: error {answer.error_code} {answer.error_message}")

    async def setup(self) -> None:
        self.join_request = self._join_request()
        first = wire.decode(await self.c.round_trip(self.join_request), JoinGroupResponse)
        if first.error_code != MEMBER_ID_REQUIRED:
            raise RuntimeError(f"the first JoinGroup over HTTP: error {first.error_code} {first.error_message}")
        self.member_id = first.member_id
        self.join_request = self._join_request()
        self.assignment = _assignment(self.member_id, self.url)
        await self.join()
        await self.sync()
        self._heartbeat_request()
        await self.heartbeat()

    def _heartbeat_request(self) -> None:
        self.heartbeat_generation = self.generation
        self.heartbeat_request = HttpConnection.request(
            "/v1/classic-group/heartbeat",
            wire.encode(
                ClassicHeartbeatRequest(group_id=self.group, member_id=self.member_id, generation_id=self.generation)
            ),
        )

    async def join_sync(self) -> None:
        await self.join()
        await self.sync()

    async def heartbeat(self) -> None:
        if self.heartbeat_generation != self.generation:
            self._heartbeat_request()
        answer = wire.decode(await self.c.round_trip(self.heartbeat_request), ErrorResponse)
        if answer.error_code != NONE:
            raise RuntimeError(f"Heartbeat over HTTP: error {answer.error_code} {answer.error_message}")


async def _members(transport: str, count: int, prefix: str, serve: Serve, kafka_port: int) -> list[Any]:
    members = []
    for i in range(count):
        if transport == "kafka":
            member = KafkaMember(await KafkaConnection().open(("127.0.0.1", kafka_port)), f"{prefix}-k{i}")
        else:
            member = HttpMember(await HttpConnection().open(serve.port), f"{prefix}-h{i}")
        await member.setup()
        members.append(member)
    return members


async def _drive(members: list[Any], op: str, seconds: float) -> int:
    """Round trips completed by `members` (each one at a time) in `seconds`."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def loop(member: Any) -> None:
        nonlocal done
        step = getattr(member, op)
        while time.perf_counter() < deadline:
            await step()
            done += 1

    await asyncio.gather(*(loop(m) for m in members))
    return done


async def bench_round_trips(serve: Serve, kafka_port: int, sizes: Sizes) -> None:
    print(
        "1. group round trips per second, the coordinator's Kafka listener against its HTTP API "
        f"(same process; median of {sizes.repeats} x {sizes.seconds:g} s; one group per client)"
    )
    pid = serve.process.pid
    prefix = f"bench-gw-{uuid.uuid4().hex[:6]}"
    # One sequential client, and `clients` concurrent ones, per transport: their members made once.
    pools = {
        (t, n): await _members(t, n, f"{prefix}-{n}", serve, kafka_port)
        for n in (1, sizes.clients)
        for t in ("kafka", "http")
    }
    for op, title in (
        ("join_sync", "(a) JoinGroup + SyncGroup (a rejoin: a new generation each)"),
        ("heartbeat", "(b) Heartbeat"),
    ):
        print(f"  {title}")
        for n in (1, sizes.clients):
            rates: dict[str, list[float]] = {"kafka": [], "http": []}
            cpu: dict[str, list[float]] = {"kafka": [], "http": []}
            client_cpu: dict[str, list[float]] = {"kafka": [], "http": []}
            await _drive(pools["kafka", n] + pools["http", n], op, min(0.3, sizes.seconds))  # warm both
            for r in range(sizes.repeats):
                for t in ("kafka", "http") if r % 2 == 0 else ("http", "kafka"):
                    cpu_before, client_before, start = cpu_seconds(pid), time.process_time(), time.perf_counter()
                    done = await _drive(pools[t, n], op, sizes.seconds)
                    elapsed = time.perf_counter() - start
                    rates[t].append(done / elapsed)
                    cpu[t].append((cpu_seconds(pid) - cpu_before) / max(done, 1) * 1e6)
                    client_cpu[t].append((time.process_time() - client_before) / max(done, 1) * 1e6)
            k, h = median(rates["kafka"]), median(rates["http"])
            who = "1 sequential client " if n == 1 else f"{n} concurrent clients"
            print(
                f"    {who}: Kafka listener {k:7,.0f}/s   HTTP {h:7,.0f}/s   listener/HTTP {k / h:4.2f}  "
                f"({goal(k / h, 1.0)})"
            )
            print(
                f"      CPU per round trip, coordinator / these clients: Kafka {median(cpu['kafka']):5.0f} / "
                f"{median(client_cpu['kafka']):4.0f} us   HTTP {median(cpu['http']):5.0f} / "
                f"{median(client_cpu['http']):4.0f} us"
            )
    for pool in pools.values():
        for m in pool:
            m.c.close()


# --- 2. bytes through the gateway ---------------------------------------------------------------------


class GatewayProcess:
    def __init__(self, bootstrap: str, kafka_listener: str, log_dir: Path, node_ids: list[int]) -> None:
        self.port = devbroker.free_port_block(3 + max(node_ids))
        self.log_path = log_dir / f"gateway-{self.port}.log"
        self.args = [
            sys.executable,
            "-m",
            "coordinator",
            "gateway",
            "--bootstrap-server",
            bootstrap,
            "--listen",
            f"127.0.0.1:{self.port}",
            "--groups",
            GROUPS,
            "--coordinator",
            kafka_listener,
            "--log-level",
            "WARNING",
        ]

    def start(self) -> GatewayProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[1]
            )
        _children.append(self.process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"coordinator gateway exited {self.process.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"coordinator gateway not listening within 30 s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""


def connect_records(count: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """Keys and values as Connect writes its config and status topics: values of 200 B - 2 KB."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        key = (f"status-task-connector-{i % 50}-{i % 8}" if i % 2 else f"task-connector-{i % 50}-{i % 8}").encode()
        out.append((key, rng.randbytes(rng.randint(200, 2048))))
    return out


def produce_throughput(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    """MB/s of values produced, acks=all, with the producer's own batching, until all are acknowledged."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    # The connections, the metadata, the producer id and the partition's leader before the clock starts
    # (a first record: librdkafka sometimes takes 500 ms over it on a new topic, through either path).
    # (The topics are compacted, as Connect's: every record has a key.)
    outcome: list[Any] = []
    producer.produce(
        topic, b"warm-up", b"warm-up", partition=0, on_delivery=lambda error, _message: outcome.append(error)
    )
    producer.flush(30)
    if outcome != [None]:
        raise RuntimeError(f"produce through {bootstrap}: the first record was not acknowledged: {outcome}")
    failed: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    start = time.perf_counter()
    for key, value in records:
        producer.produce(topic, value, key, partition=0, on_delivery=delivered)
        producer.poll(0)
    if producer.flush(60) or failed:
        raise RuntimeError(f"produce through {bootstrap}: {len(failed)} failed ({failed[:1]})")
    elapsed = time.perf_counter() - start
    return sum(len(v) for _, v in records) / elapsed / 1e6


def fetch_throughput(bootstrap: str, topic: str, count: int, value_bytes: int) -> float:
    """MB/s of values read by a consumer assigned to partition 0, the `count` records after the first
    (produce_throughput's warm-up record, read before the clock starts: connections and offsets)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-fetch-not-ours",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            first = consumer.poll(1.0)
        if first is None or first.error() is not None or first.value() != b"warm-up":
            raise RuntimeError(
                f"fetch through {bootstrap}: the warm-up record was not read "
                f"({first and (first.error() or first.value()[:20])})"
            )
        start = time.perf_counter()
        got = 0
        deadline = time.monotonic() + 120
        while got < count and time.monotonic() < deadline:
            # consume() returns at `num_messages` or its timeout: ask for what is left, no more
            for message in consumer.consume(min(count - got, 100_000), 1.0):
                if message.error() is None:
                    got += 1
        elapsed = time.perf_counter() - start
        if got < count:
            raise RuntimeError(f"fetch through {bootstrap}: {got} of {count} records")
        return value_bytes / elapsed / 1e6
    finally:
        consumer.close()


def produce_latencies(bootstraps: dict[str, str], topic: str, samples: int) -> dict[str, list[float]]:
    """ms from produce() to the delivery callback, one record at a time (acks=all), the paths alternating."""
    from confluent_kafka import Producer

    records = connect_records(samples, seed=11)
    producers = {
        name: Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 0, "enable.idempotence": True})
        for name, b in bootstraps.items()
    }
    out: dict[str, list[float]] = {name: [] for name in bootstraps}
    for producer in producers.values():  # connections, metadata and a first record before measuring
        producer.produce(topic, b"warm", b"warm", partition=0)
        producer.flush(10)
    for i, (key, value) in enumerate(records):
        for name, producer in producers.items() if i % 2 == 0 else reversed(producers.items()):
            done: list[float] = []
            start = time.perf_counter()
            producer.produce(
                topic,
                value,
                key,
                partition=0,
                on_delivery=lambda error, _m, done=done: done.append(float("nan") if error else time.perf_counter()),
            )
            producer.flush(10)
            if not done or done[0] != done[0]:
                raise RuntimeError(f"a produce through {name} failed")
            out[name].append((done[0] - start) * 1e3)
    return out


def _fetch_frame(topic: str) -> bytes:
    cls = FetchRequest[12]
    body = cls(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            cls.FetchTopic(
                topic=topic,
                partitions=[
                    cls.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=4096,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    head = LibRequestHeader(
        request_api_key=1, request_api_version=12, correlation_id=0, client_id="bench-fetch"
    ).encode(flexible=True)
    return kp.frame(head + body.encode(version=12))


def fetch_latencies(
    addresses: dict[str, tuple[str, int]], topic: str, samples: int, gateway_pid: int
) -> tuple[dict[str, list[float]], float]:
    """ms of one Fetch v12 round trip (max_wait_ms 0, the first record of the partition, fetch_offset 0),
    over a raw socket to the broker's port or the gateway's port for that broker, the paths alternating;
    and the gateway's CPU seconds per Fetch it forwarded."""
    frame = _fetch_frame(topic)
    sockets = {name: socket.create_connection(address, 10) for name, address in addresses.items()}
    for s in sockets.values():
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out: dict[str, list[float]] = {name: [] for name in addresses}

    def recv_exactly(s: socket.socket, n: int) -> bytes:
        buffer = bytearray()
        while len(buffer) < n:
            chunk = s.recv(n - len(buffer))
            if not chunk:
                raise RuntimeError("the connection closed")
            buffer += chunk
        return bytes(buffer)

    cpu_before = cpu_seconds(gateway_pid)
    try:
        for i in range(samples + 10):  # the first 10 are a warm-up
            for name in addresses if i % 2 == 0 else reversed(list(addresses)):
                s = sockets[name]
                correlation = struct.pack(">i", i + 1)
                start = time.perf_counter()
                s.sendall(frame[:8] + correlation + frame[12:])
                payload = recv_exactly(s, struct.unpack(">i", recv_exactly(s, 4))[0])
                elapsed = time.perf_counter() - start
                if payload[:4] != correlation:
                    raise RuntimeError(f"fetch through {name}: an answer out of order")
                if i == 0:
                    _, answer = _decode_fetch_12(payload)
                    partition = answer.responses[0].partitions[0]
                    if partition.error_code != 0 or not partition.records:
                        raise RuntimeError(f"fetch through {name}: error {partition.error_code}")
                if i >= 10:
                    out[name].append(elapsed * 1e3)
    finally:
        for s in sockets.values():
            s.close()
    return out, (cpu_seconds(gateway_pid) - cpu_before) / (samples + 10)


def _decode_fetch_12(payload: bytes) -> tuple[int, Any]:
    stream = io.BytesIO(payload)
    correlation = struct.unpack(">i", stream.read(4))[0]
    stream.read(1)  # the response header's tagged fields: none
    return correlation, FetchResponse.decode(memoryview(payload)[5:], version=12)


def broker_nodes(bootstrap: str) -> dict[int, tuple[str, int]]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {b.id: (b.host, b.port) for b in metadata.brokers.values()}


def bench_bytes(bootstrap: str, gateway: GatewayProcess, topic: str, sizes: Sizes) -> dict[str, float]:
    print(
        f"2. bytes through the gateway against straight to the broker (confluent_kafka; values of 200 B - 2 KB, "
        f"{sizes.records:,} records per run; median of {sizes.repeats})"
    )
    gateway_bootstrap = f"127.0.0.1:{gateway.port}"
    paths = {"broker": bootstrap, "gateway": gateway_bootstrap}
    records = connect_records(sizes.records)
    value_bytes = sum(len(v) for _, v in records)
    produced = {name: [] for name in paths}
    fetched = {name: [] for name in paths}
    # The gateway's CPU seconds over all its runs (Linux counts them in 10 ms ticks: summed, not per run).
    gateway_cpu = {"produce": 0.0, "fetch": 0.0}
    for r in range(sizes.repeats):
        for name in paths if r % 2 == 0 else reversed(list(paths)):
            run_topic = f"{topic}-{r}-{name}"  # a fresh partition per run: every fetch reads exactly its records
            create_topic(bootstrap, run_topic, 1)
            before = cpu_seconds(gateway.process.pid)
            produced[name].append(produce_throughput(paths[name], run_topic, records))
            middle = cpu_seconds(gateway.process.pid)
            fetched[name].append(fetch_throughput(paths[name], run_topic, len(records), value_bytes))
            after = cpu_seconds(gateway.process.pid)
            if name == "gateway":
                gateway_cpu["produce"] += middle - before
                gateway_cpu["fetch"] += after - middle
            delete_topics(bootstrap, [run_topic])  # the next run's bytes need not sit beside these
    figures: dict[str, float] = {}
    for what, results in (("produce", produced), ("fetch", fetched)):
        b, g = median(results["broker"]), median(results["gateway"])
        figures[what] = g
        print(
            f"  {what} throughput : broker {b:7.1f} MB/s   gateway {g:7.1f} MB/s   gateway/broker {g / b:4.2f}  "
            f"({goal(g / b, 0.5)})"
        )
    mb = len(produced["gateway"]) * value_bytes / 1e6
    figures["fetch_cpu_ms_per_mb"] = gateway_cpu["fetch"] * 1e3 / mb
    print(
        f"  the gateway's CPU per MB of values (over its {len(produced['gateway'])} runs, {mb:.0f} MB each way): "
        f"produce {gateway_cpu['produce'] * 1e3 / mb:5.2f} ms, fetch {figures['fetch_cpu_ms_per_mb']:5.2f} ms"
    )

    latency_topic = f"{topic}-latency"
    create_topic(bootstrap, latency_topic, 1)
    produce_ms = produce_latencies(paths, latency_topic, sizes.latency_samples)
    nodes = broker_nodes(bootstrap)
    leader = _leader(bootstrap, latency_topic)
    fetch_ms, fetch_cpu = fetch_latencies(
        {"broker": nodes[leader], "gateway": ("127.0.0.1", gateway.port + 2 + leader)},
        latency_topic,
        sizes.latency_samples,
        gateway.process.pid,
    )
    for what, samples in (
        ("produce (acks=all, one at a time, to its delivery callback)", produce_ms),
        ("fetch round trip (Fetch v12, one record, max_wait_ms 0)", fetch_ms),
    ):
        b50, g50 = percentile(samples["broker"], 0.5), percentile(samples["gateway"], 0.5)
        b99, g99 = percentile(samples["broker"], 0.99), percentile(samples["gateway"], 0.99)
        print(f"  {what}, {len(samples['broker'])} each:")
        print(f"    p50: broker {b50:6.2f} ms   gateway {g50:6.2f} ms   added {g50 - b50:+6.2f} ms")
        print(f"    p99: broker {b99:6.2f} ms   gateway {g99:6.2f} ms   added {g99 - b99:+6.2f} ms")
    print(f"  the gateway's CPU per forwarded Fetch of one record: {fetch_cpu * 1e6:.0f} us")
    figures["fetch_cpu_us_each"] = fetch_cpu * 1e6
    delete_topics(bootstrap, [latency_topic])
    return figures


def _leader(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return metadata.topics[topic].partitions[0].leader


# --- 3. what rewriting KIP-951's node endpoints would cost ------------------------------------------------


def record_batches(total_bytes: int, batch_bytes: int = 16_384, seed: int = 3) -> bytes:
    """Record batches (magic 2, uncompressed) of Connect-sized records, as a producer's batching writes them."""
    rng = random.Random(seed)
    out = bytearray()
    offset = 0
    while len(out) < total_bytes:
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=batch_bytes, offset=offset)
        while True:
            value = rng.randbytes(rng.randint(200, 2048))
            if builder.append(timestamp=0, key=b"status-task-connector-1-0", value=value, headers=[]) is None:
                break
            offset += 1
        builder.close()
        out += builder.buffer()
    return bytes(out)


def fetch_response(records_by_partition: list[bytes | None]) -> bytes:
    """A Fetch v16 answer body: one topic, a partition per entry (None: absent), one node endpoint."""
    cls = FetchResponse[16]
    partition = cls.FetchableTopicResponse.PartitionData
    partitions = [
        partition(
            partition_index=i,
            error_code=0,
            high_watermark=1000,
            last_stable_offset=1000,
            log_start_offset=0,
            aborted_transactions=[],
            preferred_read_replica=-1,
            records=records,
        )
        for i, records in enumerate(records_by_partition)
        if records is not None
    ]
    body = cls(
        throttle_time_ms=0,
        error_code=0,
        session_id=12345,
        responses=[cls.FetchableTopicResponse(topic_id=uuid.uuid4(), partitions=partitions)] if partitions else [],
        node_endpoints=[cls.NodeEndpoint(node_id=1, host="broker-1.kafka.internal", port=9092, rack=None)],
    )
    return body.encode(version=16)


def produce_response() -> bytes:
    cls = ProduceResponse[10]
    body = cls(
        responses=[
            cls.TopicProduceResponse(
                name="connect-status",
                partition_responses=[
                    cls.TopicProduceResponse.PartitionProduceResponse(
                        index=0,
                        error_code=0,
                        base_offset=1234,
                        log_append_time_ms=-1,
                        log_start_offset=0,
                        record_errors=[],
                        error_message=None,
                    )
                ],
            )
        ],
        throttle_time_ms=0,
        node_endpoints=[cls.NodeEndpoint(node_id=1, host="broker-1.kafka.internal", port=9092, rack=None)],
    )
    return body.encode(version=10)


def rewrite(cls: Any, version: int, raw: bytes) -> bytes:
    """What the gateway would do to each answer: decode, replace the node endpoints' addresses, encode."""
    body = cls.decode(memoryview(raw), version=version)
    for slot in ("_header", "_min_version", "_max_version"):  # as kafka_protocol._encodable
        if not hasattr(body, slot):
            setattr(body, slot, None)
    for endpoint in body.node_endpoints:
        endpoint.host, endpoint.port = "127.0.0.1", 40000 + endpoint.node_id
    return body.encode(version=version)


def bench_rewrite(figures: dict[str, float] | None, sizes: Sizes) -> None:
    print(
        "3. the other option for KIP-951: decoding and re-encoding every Fetch v16 / Produce v10 answer in Python "
        f"(kafka-python; median of {sizes.decode_rounds} rounds)"
    )
    one_mib = record_batches(1 << 20)
    small = record_batches(1, batch_bytes=64)  # one batch of one record
    cases = [
        ("Fetch, 1 MiB of records in one partition", FetchResponse, 16, fetch_response([one_mib])),
        (
            "Fetch, 1 MiB over 16 partitions",
            FetchResponse,
            16,
            fetch_response([record_batches(1 << 16, seed=s) for s in range(16)]),
        ),
        ("Fetch, one record (a status update)", FetchResponse, 16, fetch_response([small])),
        ("Fetch, nothing new (incremental session)", FetchResponse, 16, fetch_response([])),
        ("Produce answer, one partition", ProduceResponse, 10, produce_response()),
    ]
    per_mb_ms = None
    small_us = None
    for name, cls, version, raw in cases:
        assert len(rewrite(cls, version, raw)) > 0
        calls = 20 if len(raw) > 100_000 else 2_000
        times = []
        for _ in range(sizes.decode_rounds):
            start = time.perf_counter()
            for _ in range(calls):
                rewrite(cls, version, raw)
            times.append((time.perf_counter() - start) / calls)
        seconds = median(times)
        line = f"  {name:44s} {len(raw):>9,} B: {seconds * 1e6:8.1f} us each"
        if len(raw) > 100_000:
            mb_ms = seconds * 1e3 / (len(raw) / 1e6)
            per_mb_ms = mb_ms if per_mb_ms is None else per_mb_ms
            line += f" = {mb_ms:5.2f} ms per MB ({1e3 / mb_ms:,.0f} MB/s of one core)"
        if name.startswith("Fetch, one record"):
            small_us = seconds * 1e6
        print(line)
    if figures and per_mb_ms is not None:
        forward = figures["fetch"]
        cpu = figures["fetch_cpu_ms_per_mb"]
        slowed = 1 / (1 / forward + per_mb_ms / 1e3)
        print(
            f"  against 2.: the gateway forwards fetches at {forward:.1f} MB/s, spending {cpu:.2f} ms of CPU per MB; "
            f"rewriting would add {per_mb_ms:.2f} ms per MB ({per_mb_ms / cpu if cpu > 0 else float('nan'):.2f}x its "
            f"forwarding CPU), about {slowed:.1f} MB/s if nothing else overlapped"
        )
        print(
            f"  per answer: the gateway spends {figures['fetch_cpu_us_each']:.0f} us of CPU forwarding a one-record "
            f"Fetch; rewriting it would add {small_us:.0f} us "
            f"({small_us / figures['fetch_cpu_us_each'] if figures['fetch_cpu_us_each'] else float('nan'):.2f}x), "
            "on every Fetch and Produce answer (most fetches of Connect's internal topics are small or empty)"
        )


# --- main ------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:19092")
    parser.add_argument("--quick", action="store_true", help="small and short: check that it works")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--clients", type=int)
    parser.add_argument("--records", type=int)
    parser.add_argument("--skip", default="", help="comma-separated parts not to run: 1,2,3")
    args = parser.parse_args()
    sizes = QUICK if args.quick else Sizes()
    for name in ("repeats", "seconds", "clients", "records"):
        if getattr(args, name) is not None:
            setattr(sizes, name, getattr(args, name))
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    atexit.register(_cleanup)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    atexit.register(shutil.rmtree, log_dir, True)
    run = uuid.uuid4().hex[:8]
    topic = f"__bench_gateway_{run}"
    create_topic(args.bootstrap_servers, topic, PARTITIONS)
    figures = None
    print(
        "load average at the start (1, 5, 15 min): {:.1f} {:.1f} {:.1f} on {} cores".format(
            *os.getloadavg(), os.cpu_count()
        )
    )
    try:
        kafka_port = devbroker.free_port_block(1)
        serve = Serve(
            args.bootstrap_servers,
            topic,
            log_dir,
            "--kafka-listener",
            f"127.0.0.1:{kafka_port}",
            "--initial-assignment-delay-ms",
            "0",
        )
        serve.args[serve.args.index("--log-level") + 1] = "WARNING"
        serve.start().wait_healthy()
        if "1" not in skip:
            asyncio.run(bench_round_trips(serve, kafka_port, sizes))
        if "2" not in skip:
            gateway = GatewayProcess(
                args.bootstrap_servers, f"127.0.0.1:{kafka_port}", log_dir, list(broker_nodes(args.bootstrap_servers))
            ).start()
            figures = bench_bytes(args.bootstrap_servers, gateway, f"bench-gw-data-{run}", sizes)
        if "3" not in skip:
            bench_rewrite(figures, sizes)
    finally:
        _cleanup()
        delete_topics(args.bootstrap_servers, [topic])
    print("load average at the end: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
