"""Compaction on real Apache Kafka: a coordinator that loads the compacted topic serves exactly what
the coordinator that wrote it served (DESIGN §3: `replay(compact(log))` equals `replay(log)` for
every live key; tombstoned keys stay gone once the cleaner has removed the tombstones too).

The topic is cleaned as aggressively as Kafka allows: segments roll after 100 ms, any dirt (and any
record older than 100 ms, max.compaction.lag.ms) makes a log cleanable, no compaction lag,
tombstones kept 0.5 s. `coordinator serve` (server-side assignor) writes a long history over HTTP:
members join; one leaves (-1) and its work waits out the scheduled-rebalance deadline; a static
member leaves (-2) and its InstanceId comes back under a new member id; a member's session
expires, and a static member's after its -2; connectors and group configurations change; a group
is emptied and deleted; at the end a member leaves with a deadline ten minutes ahead, so the
deferred work and its deadline must survive the failover. The test then waits until the cleaner
has left exactly one record per live key of the story (no tombstone, nothing of a departed member
or the deleted group), stops the coordinator, starts a new one on the topic and demands the same
answers to GET /v1/groups and GET /v1/groups/{id}, nothing written on taking over, and a passing
`coordinator replay verify`.

Kafka never cleans the active segment, and a segment rolls only when something is appended after
segment.ms: while the test waits for the cleaner, each partition's "ticker" group has its
configuration set again and again (a harmless write), so the story's segments roll and get cleaned,
twice for the tombstones (the first pass stamps their delete horizon, a later one drops them).
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable

import msgspec
import pytest
from confluent_kafka import Consumer, TopicPartition
from serve_workers import items

from records import ConnectorTaskCount, decode

from coordinator import cli
from coordinator.core.protocol import HeartbeatResponse, SetConfigRequest, SetConnectorsRequest
from coordinator.core.state import CoordinatorState
from coordinator.core.worker.member import Member
from coordinator.tools.partitions import batches_to_end, partition_for
from coordinator.tools.process import ServeProcess

pytestmark = pytest.mark.integration

PARTITIONS = 2
TOPIC_CONFIGS = {
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "500",
    "max.compaction.lag.ms": "100",
}
FLAGS = (
    "--allow-anonymous",
    "--heartbeat-interval-ms",
    "200",
    "--session-timeout-ms",
    "60000",
    "--server-assignment-interval-ms",
    "0",
    "--scheduled-rebalance-max-delay-ms",
    "300000",
)

MAIN = "connect-main"  # joins, a leave with a deadline that passes, a static takeover, connectors change
EXPIRY = "connect-expiry"  # short sessions: a member and a static member expire
GONE = "connect-gone"  # emptied and deleted
TICKERS = tuple(
    next(f"ticker-{p}-{i}" for i in range(1000) if partition_for(f"ticker-{p}-{i}", PARTITIONS) == p)
    for p in range(PARTITIONS)
)


# --- a worker that follows the protocol over HTTP, one request at a time -----------------------------


class Worker:
    """The project's member state machine over http.client; every answer must be OK here."""

    def __init__(self, group: str, member_id: str, instance_id: str | None = None) -> None:
        self.member = Member(
            group,
            member_id,
            instance_id=instance_id,
            rebalance_timeout_ms=30_000,
            server_assignor="incremental_cooperative",
            session_timeout_ms=10**9,
        )

    group = property(lambda self: self.member.group_id)
    member_id = property(lambda self: self.member.member_id)
    epoch = property(lambda self: self.member.member_epoch)

    def items(self) -> frozenset:
        return self.member.owned

    def heartbeat(self, server: ServeProcess) -> dict:
        body = msgspec.to_builtins(self.member.heartbeat(0))
        status, r = server.request("POST", "/v1/connect-group/heartbeat", body, timeout=30)
        assert status == 200 and r["ErrorCode"] == 0, (self.member_id, r)
        self.member.received(msgspec.convert(r, HeartbeatResponse), 0)
        return r

    def leave(self, server: ServeProcess, static: bool = False) -> None:
        _, request = self.member.leave()
        epoch = -2 if static else -1
        assert request is not None and request.member_epoch == epoch, (self.member_id, request)
        status, r = server.request("POST", "/v1/connect-group/heartbeat", msgspec.to_builtins(request), timeout=30)
        assert status == 200 and (r["ErrorCode"], r["MemberEpoch"]) == (0, epoch), (self.member_id, r)


def _ok(server: ServeProcess, method: str, path: str, body: dict | None = None) -> dict:
    status, r = server.request(method, path, body, timeout=30)
    assert status == 200 and r["ErrorCode"] == 0, (method, path, r)
    return r


def _set_config(server: ServeProcess, group: str, **timeouts: int) -> None:
    _ok(server, "PUT", f"/v1/groups/{group}/config", msgspec.to_builtins(SetConfigRequest(**timeouts)))


def _set_connectors(server: ServeProcess, group: str, **tasks: int) -> None:
    _ok(
        server,
        "PUT",
        f"/v1/groups/{group}/connectors",
        msgspec.to_builtins(SetConnectorsRequest(connectors=[ConnectorTaskCount(n, t) for n, t in tasks.items()])),
    )


def _describe(server: ServeProcess, group: str) -> dict:
    return _ok(server, "GET", f"/v1/groups/{group}")


def _cat_items(cat: dict) -> frozenset:
    return items(cat)


def _converged(server: ServeProcess, group: str, members: list[Member], deferred: bool | None = False) -> bool:
    """The group is STABLE, every member described owns its target at the group's epoch, revokes
    nothing, and is one of `members` (which own what it says); `deferred`: whether work must be
    waiting (None: either)."""
    d = _describe(server, group)
    described = {m["MemberId"]: m for m in d["Members"]}
    if d["State"] != "STABLE" or set(described) != {m.member_id for m in members}:
        return False
    if deferred is not None and bool(_cat_items(d["Deferred"])) != deferred:
        return False
    for m in members:
        x = described[m.member_id]
        if x["MemberEpoch"] == -2:
            continue
        # At the group's epoch too: a member one heartbeat behind writes its new epoch later, which a
        # snapshot of the topic taken now would not hold (seen once in CI).
        if (
            _cat_items(x["Assignment"]) != _cat_items(x["Target"])
            or _cat_items(x["PendingRevocation"])
            or m.items() != _cat_items(x["Assignment"])
            or m.epoch != x["MemberEpoch"]
            or x["MemberEpoch"] != d["GroupEpoch"]
        ):
            return False
    return True


class Story:
    """The live members, heartbeated in rounds until a condition holds; and the ticker writes."""

    def __init__(self, server: ServeProcess) -> None:
        self.server = server
        self.live: list[Member] = []
        self.ticks = 0

    def join(self, *members: Member) -> None:
        self.live.extend(members)

    def drop(self, member: Member) -> None:
        self.live.remove(member)

    def members(self, group: str) -> list[Member]:
        return [m for m in self.live if m.group == group]

    def tick(self) -> None:
        """A harmless write to every partition: each ticker group's configuration changes."""
        self.ticks += 1
        for ticker in TICKERS:
            _set_config(self.server, ticker, scheduled_rebalance_max_delay_ms=1_000 + self.ticks)

    def until(
        self,
        condition: Callable[[], bool],
        what: str,
        timeout: float = 60,
        ticking: bool = False,
        check_every: float = 0.0,
    ) -> None:
        deadline = time.monotonic() + timeout
        next_check = 0.0
        while True:
            for m in list(self.live):
                m.heartbeat(self.server)
            if ticking:
                self.tick()
            if time.monotonic() >= next_check:
                if condition():
                    return
                next_check = time.monotonic() + check_every
            assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
            time.sleep(0.1)

    def converge(self, group: str, deferred: bool | None = False, timeout: float = 60) -> dict:
        self.until(
            lambda: _converged(self.server, group, self.members(group), deferred),
            f"{group} to converge (deferred={deferred})",
            timeout,
        )
        return _describe(self.server, group)


# --- reading the topic as Kafka holds it ---------------------------------------------------------


class Read:
    """Both partitions, read_committed, from the log start to the end offset at the read's start."""

    def __init__(self, broker, topic: str) -> None:  # noqa: ANN001
        consumer = Consumer(
            broker.client_config(
                {
                    "group.id": f"compaction-reader-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": False,
                }
            )
        )
        self.ends: dict[int, int] = {}
        self.records: dict[int, list] = {}  # partition -> [(offset, Record)]
        try:
            for p in range(PARTITIONS):
                tp = TopicPartition(topic, p)
                low, high = consumer.get_watermark_offsets(tp, timeout=30)
                self.ends[p] = high
                got = self.records[p] = []
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, p, low)])
                deadline = time.monotonic() + 60
                for messages in batches_to_end(consumer, tp, high):
                    got += [(m.offset(), decode(m.key(), m.value())) for m in messages if m.offset() < high]
                    assert time.monotonic() < deadline, f"{topic}[{p}] not read to {high} in time"
                consumer.unassign()
        finally:
            consumer.close()

    def all(self) -> list:
        return [(p, offset, record) for p, rs in self.records.items() for offset, record in rs]

    def story(self) -> list:
        """The records of every group but the tickers."""
        return [(p, o, r) for p, o, r in self.all() if r.key.group_id not in TICKERS]

    def slots(self) -> dict:
        state = CoordinatorState()
        for p in range(PARTITIONS):
            state.replay_all(r for _, r in self.records[p])
        return {k: v for k, v in state.slots().items() if k.group_id not in TICKERS}


def _departed(key, departed: set[tuple[str, str]]) -> bool:  # noqa: ANN001 - a RecordKey
    """Whether `key` belongs to the deleted group or to a member that left."""
    return key.group_id == GONE or (key.group_id, getattr(key, "member_id", None)) in departed


def _served(server: ServeProcess) -> dict:
    """Everything the coordinator serves about its groups: the list, and each group described (but
    `Coordinator`, the URL of the instance answering, which is another one after a failover)."""
    listed = _ok(server, "GET", "/v1/groups")
    described = {g["GroupId"]: _describe(server, g["GroupId"]) for g in listed["Groups"]}
    for d in described.values():
        assert d.pop("Coordinator") == server.url
    return {"list": listed, "groups": described}


def _records_loaded(server: ServeProcess) -> dict[int, int]:
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    loaded = {}
    for line in text.splitlines():
        if line.startswith("coordinator_partition_records_loaded{"):
            labels, value = line.rsplit(" ", 1)
            loaded[int(labels.split('partition="')[1].split('"')[0])] = int(float(value))
    return loaded


# --- the test ------------------------------------------------------------------------------------


def test_a_coordinator_loading_the_compacted_topic_serves_exactly_what_the_old_one_served(
    kafka_broker, unique_topic, tmp_path, capsys
) -> None:  # noqa: ANN001
    started = time.monotonic()
    configs = [arg for key, value in TOPIC_CONFIGS.items() for arg in ("--config", f"{key}={value}")]
    assert (
        cli.main(
            [
                "topic",
                "create",
                "--bootstrap-servers",
                kafka_broker.bootstrap_servers,
                "--topic",
                unique_topic,
                "--partitions",
                str(PARTITIONS),
                "--replication-factor",
                "1",
                *configs,
            ]
        )
        == 0
    )
    # The story's groups live in both partitions (so both are compacted and loaded with history).
    assert {partition_for(g, PARTITIONS) for g in (MAIN, EXPIRY, GONE)} == set(range(PARTITIONS))

    old = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *FLAGS).start()
    new = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *FLAGS)
    try:
        story = Story(old)
        # --- everyone joins ---------------------------------------------------------------------
        _set_config(old, MAIN, scheduled_rebalance_max_delay_ms=3_000)
        _set_connectors(old, MAIN, A=4, B=2)
        _set_config(
            old, EXPIRY, session_timeout_ms=3_000, heartbeat_interval_ms=200, scheduled_rebalance_max_delay_ms=1_000
        )
        _set_connectors(old, EXPIRY, X=5)
        _set_connectors(old, GONE, Z=2)
        w1, w2, w3, w4 = (Worker(MAIN, f"w{i}") for i in range(1, 5))
        s1 = Worker(MAIN, "s1", instance_id="host-s1")
        e1, e2, e3 = (Worker(EXPIRY, f"e{i}") for i in range(1, 4))
        es = Worker(EXPIRY, "es", instance_id="host-es")
        g1, g2 = Worker(GONE, "g1"), Worker(GONE, "g2")
        for m in (w1, w2, w3):
            story.join(m)
            story.converge(MAIN)
        story.join(w4, s1, e1, e2, e3, es, g1, g2)
        for group in (MAIN, EXPIRY, GONE):
            story.converge(group)
        assert all(m.items() for m in story.live), [(m.member_id, m.items()) for m in story.live]
        # Every key that is about to be tombstoned has a value in the log now; remember where.
        before = Read(kafka_broker, unique_topic)
        departed = {(MAIN, "w4"), (MAIN, "s1"), (MAIN, "w3"), (EXPIRY, "e3"), (EXPIRY, "es")}
        doomed = [(p, o) for p, o, r in before.all() if _departed(r.key, departed)]
        assert {
            (r.key.group_id, getattr(r.key, "member_id", None))
            for _, _, r in before.all()
            if _departed(r.key, departed)
        } >= departed | {(GONE, "g1"), (GONE, "g2"), (GONE, None)}

        # --- a graceful leave: the work waits for the deadline, which passes ----------------------
        epoch = _describe(old, MAIN)["GroupEpoch"]
        w4.leave(old)
        story.drop(w4)
        waiting = story.converge(MAIN, deferred=True)
        assert waiting["ScheduledRebalanceAtMs"] is not None and waiting["GroupEpoch"] == epoch + 1
        after = story.converge(MAIN, deferred=False)  # the deadline passed: the epoch moved again
        assert after["ScheduledRebalanceAtMs"] is None and after["GroupEpoch"] == epoch + 2

        # --- a static member leaves (-2) and its instance comes back as a new member id ------------
        held = s1.items()
        s1.leave(old, static=True)
        story.drop(s1)
        described = {m["MemberId"]: m for m in _describe(old, MAIN)["Members"]}
        assert described["s1"]["MemberEpoch"] == -2 and _cat_items(described["s1"]["Assignment"]) == held
        s1b = Worker(MAIN, "s1b", instance_id="host-s1")
        story.join(s1b)
        story.converge(MAIN)
        assert s1b.items() == held  # took its instance's work over

        # --- the connectors change -----------------------------------------------------------------
        _set_connectors(old, MAIN, A=3, C=2)
        story.converge(MAIN)

        # --- a session expires; a static member leaves and its session expires too ------------------
        story.drop(e3)  # stops heartbeating
        story.until(
            lambda: "e3" not in {m["MemberId"] for m in _describe(old, EXPIRY)["Members"]}, "e3's session to expire"
        )
        story.converge(EXPIRY)  # its work waited out the 1 s deadline
        es.leave(old, static=True)
        story.drop(es)
        story.until(
            lambda: "es" not in {m["MemberId"] for m in _describe(old, EXPIRY)["Members"]},
            "the static member's session to expire",
        )
        story.converge(EXPIRY)
        # Long sessions from now on: the members may stop heartbeating once the old coordinator stops.
        _set_config(
            old, EXPIRY, session_timeout_ms=120_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=1_000
        )
        story.converge(EXPIRY)

        # --- a group is emptied and deleted --------------------------------------------------------
        for m in (g1, g2):
            m.leave(old)
            story.drop(m)
        _ok(old, "DELETE", f"/v1/groups/{GONE}")
        assert old.request("GET", f"/v1/groups/{GONE}")[1]["ErrorCode"] == 69  # GROUP_ID_NOT_FOUND

        # --- at the end a member leaves with a deadline far ahead: the failover must keep it --------
        _set_config(old, MAIN, scheduled_rebalance_max_delay_ms=600_000)
        w3_held = w3.items()  # a leaving worker stops its work; the coordinator keeps it for w3
        w3.leave(old)
        story.drop(w3)
        pending = story.converge(MAIN, deferred=True)
        assert pending["ScheduledRebalanceAtMs"] > time.time() * 1000 + 500_000
        story_done = time.monotonic()

        # --- the cleaner at work ---------------------------------------------------------------------
        expected = Read(kafka_broker, unique_topic).slots()  # whatever was cleaned so far changes nothing
        assert not any(_departed(k, departed) for k in expected)
        story_keys = set(expected)
        late: list[Read] = []

        def cleaned() -> bool:
            read = Read(kafka_broker, unique_topic)
            late[:] = [read]
            records = read.story()
            keys = Counter(r.key for _, _, r in records)
            # Every story key once, with its latest value; no tombstone, no departed key left.
            return (
                set(keys) == story_keys and max(keys.values()) == 1 and all(r.value is not None for _, _, r in records)
            )

        story.until(
            cleaned,
            "the cleaner to leave one record per live key and no tombstones",
            timeout=120,
            ticking=True,
            check_every=1.0,
        )
        compacted = late[0]
        cleaned_after = time.monotonic() - story_done

        # What the cleaner removed, shown on the log itself.
        assert compacted.slots() == expected
        present = {(p, o) for p, o, _ in compacted.all()}
        assert not [(p, o) for p, o in doomed if (p, o) in present], "records of departed keys are still there"
        assert not [r for _, _, r in compacted.all() if _departed(r.key, departed)]
        removed_before = [(p, o) for p, o, _ in before.all() if (p, o) not in present]
        for p in range(PARTITIONS):
            offsets = [o for o, _ in compacted.records[p]]
            assert len(offsets) < compacted.ends[p] and offsets[0] > 0, (p, offsets[:5], compacted.ends[p])
        assert len(removed_before) > len(before.all()) // 2, (len(removed_before), len(before.all()))

        # --- the old coordinator's view, then a new coordinator on the compacted topic ---------------
        ends = Read(kafka_broker, unique_topic).ends  # nothing may be written from here on
        served = _served(old)
        assert set(served["groups"]) == {MAIN, EXPIRY, *TICKERS}
        assert {m["MemberId"] for m in served["groups"][MAIN]["Members"]} == {"w1", "w2", "s1b"}
        assert {m["MemberId"] for m in served["groups"][EXPIRY]["Members"]} == {"e1", "e2"}
        assert _cat_items(served["groups"][MAIN]["Deferred"]) == w3_held  # w3's work waits for w3
        assert old.stop() == 0
        new.start()
        new.wait_healthy(60, partitions=PARTITIONS)
        reloaded = _served(new)
        assert reloaded == served
        assert new.request("GET", f"/v1/groups/{GONE}")[1]["ErrorCode"] == 69
        # It loaded the compacted partitions, nothing else, and nothing was written since the old
        # coordinator was asked: neither by it, nor by the new one taking over.
        final = Read(kafka_broker, unique_topic)
        assert final.ends == ends
        # The cleaner may still drop superseded ticker records while the new coordinator loads, so
        # what it replayed lies between the story's live keys plus a ticker record, and the last read.
        loaded = _records_loaded(new)
        for p in range(PARTITIONS):
            story_records = sum(1 for q, _, _ in compacted.story() if q == p)
            assert story_records + 1 <= loaded[p] <= len(compacted.records[p]) < ends[p], (p, loaded)
        assert final.slots() == expected
        # The members carry on at their epochs, as if nothing had happened.
        for m in story.live:
            assert m.heartbeat(new)["MemberEpoch"] == m.epoch
        assert _served(new) == served
        assert Read(kafka_broker, unique_topic).ends == ends

        # --- replay verify on the compacted topic ------------------------------------------------------
        capsys.readouterr()
        code = cli.main(
            ["replay", "verify", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", unique_topic]
        )
        out, err = capsys.readouterr()
        assert code == 0 and "no violations" in out, (out, err)

        with capsys.disabled():
            total = sum(compacted.ends.values())
            print(
                f"\ncompaction: {total} offsets, {len(compacted.all())} records left "
                f"({len(compacted.story())} of the story, one per live key); {len(removed_before)} of the "
                f"{len(before.all())} records read before the departures removed, {len(doomed)} of them of "
                f"departed keys; cleaned {cleaned_after:.1f}s after the story ({story.ticks} ticks); "
                f"loaded {loaded}; {time.monotonic() - started:.1f}s in all"
            )
    finally:
        old.stop()
        new.stop()
