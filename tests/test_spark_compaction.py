"""`coordinator audit` across a real compaction: the history tables keep what Kafka's log cleaner
erased from the topic (docs/audit.md), which is what the audit is for.

A topic of small segments (`segment.ms` 100) holds a story of superseded records: members join one by
one, connectors change, a member leaves, and every rebalance rewrites the same member metadata,
target and current assignment keys; another group's random history beside it, in the other
partition. The coordinator's own compaction lag (an hour) keeps the cleaner off while the audit
reads it all; then the lag is cut to 2 s and the test waits until the cleaner has erased every
superseded record (read on the topic: exactly the latest record of each key is left). Kafka never
cleans the active segment, so a harmless write ("tick": a new group's configuration, a key of its own
that nothing supersedes) rolls each partition's segment while the test waits. The lag is then set back,
so nothing written afterwards is erased before it is read, and the story goes on (a member joins, a
connector goes).

Then:
- the same audit, from its checkpoint, reads only what is new, and its `records` table holds every
  record ever written once, the erased ones byte for byte as they were; its rebalances and ownership
  are `replay.history` over the whole log, not over the compacted topic;
- a new audit of the compacted topic holds only the records left, and less history: the rebalances
  and holdings that the compacted topic can no longer tell;
- `coordinator replay state` of the compacted topic agrees with the first audit's latest state: who
  owns what now, each member's latest epoch and assignment, the group epoch.
"""

from __future__ import annotations

import base64
import itertools
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator

import orjson
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from replay_scenarios import WritingDriver, random_story
from serve_workers import items

from coordinator.core.driver import SimWorker
from coordinator.service.log import PartitionWriter
from coordinator.tools.connect_worker import until
from coordinator.tools.partitions import partition_for
from replay.history import History, interval_json
from replay.positions import RawRecord
from replay.source import read_topic
from spark.audit import warehouse_of
from tests.support.cli import run
from tests.support.spark_audit import Where, assert_tables_agree, audit, sql

pytestmark = pytest.mark.integration

PARTITIONS = 2
GROUP = "connect-prod"  # the story, in partition 1
OTHER = "connect-staging"  # a random history, in partition 0
# Segments roll 100 ms after their first record (at the next write), and any superseded record makes
# a partition worth cleaning. Not the compaction lag: `topic create` sets the coordinator's hour.
SMALL_SEGMENTS = ("--config", "segment.ms=100", "--config", "min.cleanable.dirty.ratio=0.01")
# A short lag for the cleaner's turn: records 2 s old may go. What is written right after the lag is
# set back to the hour is younger than that while the broker takes the change in.
SHORT_LAG_MS = 2_000
HOUR_MS = 3_600_000  # the lag `topic create` and `topic alter` set


def tick_groups(partition: int) -> Iterator[str]:
    """Names of new groups whose records go to `partition`."""
    for n in itertools.count():
        if partition_for(name := f"tick-{partition}-{n}", PARTITIONS) == partition:
            yield name


class Story:
    """Members of GROUP joining, leaving and following connector changes, each heartbeating every
    second of the driver's clock; every rebalance rewrites their assignment keys."""

    def __init__(self, driver: WritingDriver) -> None:
        self.d = driver
        self.live: dict[str, SimWorker] = {}
        driver.set_config(
            GROUP, session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=5_000
        )

    def run(self, seconds: int) -> None:
        for _ in range(seconds):
            self.d.advance(1_000)
            for w in self.live.values():
                w.heartbeat()

    def join(self, name: str) -> None:
        self.live[name] = SimWorker(self.d, GROUP, name)
        self.run(5)

    def connectors(self, connectors: dict[str, int]) -> None:
        self.d.set_connectors(GROUP, connectors)
        self.run(5)

    def before_compaction(self) -> None:
        self.d.set_connectors(GROUP, {"orders-sink": 4, "clicks-source": 3})
        for name in ("W1", "W2", "W3", "W4"):
            self.join(name)
        self.connectors({"orders-sink": 4, "clicks-source": 3, "audit": 2})
        self.live.pop("W2").leave()  # its work waits out the 5 s delay, then moves
        self.run(10)
        self.connectors({"orders-sink": 6, "clicks-source": 3, "audit": 2})

    def after_compaction(self) -> None:
        self.join("W5")
        self.connectors({"orders-sink": 6, "audit": 2})


def topic_command(capsys, broker, verb: str, topic: str, *args: str) -> None:  # noqa: ANN001
    code, _, err = run(capsys, "topic", verb, "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, *args)
    assert code == 0, err


def by_position(records) -> dict[tuple[int, int], RawRecord]:  # noqa: ANN001
    return {(r.partition, r.offset): r for r in records}


def compaction_lag_ms(admin: AdminClient, topic: str) -> int:
    """The topic's min.compaction.lag.ms as the broker answers it."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return int(admin.describe_configs([resource], request_timeout=10)[resource].result()["min.compaction.lag.ms"].value)


def names(assignment: dict) -> frozenset[str]:
    """The items of a ConnectorsAndTasks body as the tables name them (`orders-sink`, `orders-sink-2`)."""
    return frozenset(map(str, items(assignment)))


def latest_state(capsys, where: Where) -> dict[str, dict]:  # noqa: ANN001
    """Per group, what the audit's tables say is the latest: the group epoch, each member's (epoch,
    owned items, items being revoked, target items) from its latest current assignment and target
    records (a member whose latest is a tombstone is gone), and the open holdings (item, member)."""
    state: dict[str, dict] = defaultdict(lambda: {"members": {}, "held": set()})
    for r in sql(capsys, where, "SELECT group_id, max_by(group_epoch, offset) AS epoch FROM group_epochs GROUP BY 1"):
        state[r["group_id"]]["epoch"] = r["epoch"]
    latest = "SELECT * FROM (SELECT *, max(offset) OVER (PARTITION BY group_id, member_id) AS latest FROM {}) WHERE offset = latest AND NOT removed"
    currents = defaultdict(lambda: [None, set(), set()])
    for r in sql(capsys, where, latest.format("current_assignments")):
        current = currents[(r["group_id"], r["member_id"])]
        current[0] = r["member_epoch"]
        if r["item"] is not None:
            current[2 if r["pending_revocation"] else 1].add(r["item"])
    targets = defaultdict(set)
    for r in sql(capsys, where, latest.format("target_assignments")):
        if r["item"] is not None:
            targets[(r["group_id"], r["member_id"])].add(r["item"])
    for (group, member), (epoch, owned, revoking) in currents.items():
        state[group]["members"][member] = (epoch, owned, revoking, targets[(group, member)])
    for r in sql(capsys, where, "SELECT `group`, item, member FROM ownership WHERE until IS NULL"):
        state[r["group"]]["held"].add((r["item"], r["member"]))
    return state


def records_table(capsys, where: Where) -> list[tuple[int, int, int, bytes, bytes | None]]:  # noqa: ANN001
    """The audit's records table: (partition, offset, timestamp in ms, key, value), in table order."""
    rows = sql(
        capsys,
        where,
        "SELECT partition, offset, unix_millis(timestamp) AS ts, base64(key) AS k, base64(value) AS v FROM records",
    )
    return [
        (
            r["partition"],
            r["offset"],
            r["ts"],
            base64.b64decode(r["k"]),
            None if r["v"] is None else base64.b64decode(r["v"]),
        )
        for r in rows
    ]


def assert_holds_exactly(rows: list[tuple], records: dict[tuple[int, int], RawRecord]) -> None:
    """`rows` (records_table) are `records`, each once, byte for byte."""
    positions = [(p, o) for p, o, *_ in rows]
    assert len(positions) == len(set(positions)), "a record is in the table twice"
    assert set(positions) == set(records), (
        f"missing {sorted(set(records) - set(positions))[:10]}, extra {sorted(set(positions) - set(records))[:10]}"
    )
    for p, o, ts, key, value in rows:
        r = records[(p, o)]
        assert (ts, key, value) == (r.timestamp_ms, r.key, r.value), (p, o)


def replay_of(records: dict[tuple[int, int], RawRecord]) -> History:
    """replay.history over `records`, each partition in offset order."""
    history = History()
    history.run(records[k] for k in sorted(records))
    return history


def batches(out: str) -> dict[int, int]:
    """batch id -> records read, from the audit's output."""
    return {int(b): int(n) for b, n in re.findall(r"^batch (\d+): (\d+) records", out, re.M)}


def superseded(records: dict[tuple[int, int], RawRecord]) -> set[tuple[int, int]]:
    """The positions of records a later record of the same key replaces (in the same partition)."""
    latest: dict[tuple[int, bytes], int] = {}
    for p, o in sorted(records):
        latest[(p, records[(p, o)].key)] = o
    return {(p, o) for (p, o), r in records.items() if latest[(p, r.key)] != o}


# Three audits and a Spark session that may start here: more than pytest's 300 s on a busy machine.
@pytest.mark.timeout(1200)
def test_the_audit_keeps_what_the_cleaner_erased(capsys, kafka_broker, spark_session, unique_topic) -> None:  # noqa: ANN001
    started = time.monotonic()
    config = kafka_broker.client_config()
    admin = AdminClient(config)
    topic = unique_topic
    assert {partition_for(GROUP, PARTITIONS), partition_for(OTHER, PARTITIONS)} == {0, 1}
    topic_command(
        capsys,
        kafka_broker,
        "create",
        topic,
        "--partitions",
        str(PARTITIONS),
        "--replication-factor",
        "1",
        *SMALL_SEGMENTS,
    )
    writers = {p: PartitionWriter(config, topic, p) for p in range(PARTITIONS)}
    for w in writers.values():
        w.open()
    try:
        story = Story(WritingDriver(writers, PARTITIONS))
        story.before_compaction()
        other = random_story(7, OTHER, WritingDriver(writers, PARTITIONS))
        written = by_position(read_topic(config, topic))
        assert len(written) == len(story.d.log) + len(other.log)

        assert compaction_lag_ms(admin, topic) == HOUR_MS  # the cleaner may not touch what was just written
        # --- the first audit, before the cleaner may touch anything ----------------------------------------
        first = Where(warehouse_of(spark_session), f"compaction_first_{uuid.uuid4().hex[:8]}")
        out = audit(capsys, kafka_broker, topic, first)
        first_batches = batches(out)
        assert sum(first_batches.values()) == len(written)
        assert_holds_exactly(records_table(capsys, first), written)

        # --- the cleaner erases every superseded record -----------------------------------------------------
        doomed = superseded(written)
        assert {p for p, _ in doomed} == {0, 1} and len(doomed) > len(written) // 2, (len(doomed), len(written))
        topic_command(
            capsys, kafka_broker, "alter", topic, *SMALL_SEGMENTS, "--config", f"min.compaction.lag.ms={SHORT_LAG_MS}"
        )
        cut = time.monotonic()
        ticker = WritingDriver(writers, PARTITIONS)
        ticks = {p: tick_groups(p) for p in range(PARTITIONS)}

        def cleaned() -> dict | None:
            for p in range(PARTITIONS):
                ticker.set_config(next(ticks[p]), scheduled_rebalance_max_delay_ms=1_000)  # rolls the segment
            present = by_position(read_topic(config, topic))
            return present if not doomed & set(present) else None

        compacted = until(cleaned, 120, "the cleaner to erase every superseded record of the story")
        cleaned_after = time.monotonic() - cut
        topic_command(capsys, kafka_broker, "alter", topic, *SMALL_SEGMENTS)  # the hour's lag again
        until(lambda: compaction_lag_ms(admin, topic) == HOUR_MS, 30, "the broker to take the hour's lag in")
        # Exactly the latest record of each key is left of what was written (the tombstones too:
        # delete.retention.ms is the coordinator's 7 days).
        assert {k for k in written if k in compacted} == set(written) - doomed
        erased = set(written) - set(compacted)
        assert erased == doomed

        # --- the story goes on ----------------------------------------------------------------------------------
        told = len(story.d.log)
        story.after_compaction()
        continued = len(story.d.log) - told
    finally:
        for w in writers.values():
            w.close()
    now = by_position(read_topic(config, topic))
    ends = {p: max(o for q, o in written if q == p) for p in range(PARTITIONS)}
    new = {k: r for k, r in now.items() if k[1] > ends[k[0]]}
    # Nothing written since the first audit was erased: the ticks' keys are each their own, and the
    # story's last records were written under the hour's lag.
    assert continued and len(new) == len(ticker.log) + continued

    # --- the same audit, from its checkpoint -------------------------------------------------------------------
    out = audit(capsys, kafka_broker, topic, first)
    resumed = batches(out)
    assert min(resumed) == max(first_batches) + 1, "the audit did not continue from its checkpoint"
    assert sum(resumed.values()) == len(new), "the audit read again what it had read"
    whole = {**written, **new}
    assert_holds_exactly(records_table(capsys, first), whole)
    full = replay_of(whole)
    first_rebalances, first_intervals = assert_tables_agree(capsys, first, full)

    # --- a new audit of the compacted topic --------------------------------------------------------------------
    fresh = Where(first.warehouse, f"compaction_fresh_{uuid.uuid4().hex[:8]}")
    audit(capsys, kafka_broker, topic, fresh)
    assert_holds_exactly(records_table(capsys, fresh), now)
    short = replay_of(now)
    fresh_rebalances, fresh_intervals = assert_tables_agree(capsys, fresh, short)
    # The first audit's tables tell what the compacted topic no longer can.
    for group in (GROUP, OTHER):
        told = [r for r in first_rebalances if r["group"] == group and r["converged"]]
        left = [r for r in fresh_rebalances if r["group"] == group and r["converged"]]
        assert len(told) > len(left), (group, len(told), len(left))
        ended = [i for i in first_intervals if i["group"] == group and i["to_offset"] is not None]
        assert len(ended) > sum(1 for i in fresh_intervals if i["group"] == group and i["to_offset"] is not None)
        # Rebalances whose records the cleaner erased: the first audit tells them, the topic cannot.
        assert [r for r in told if (r["partition"], r["start_offset"]) in erased], group

    # --- coordinator replay of the compacted topic, and the first audit's latest state -------------------------
    latest = latest_state(capsys, first)
    for group in (GROUP, OTHER):
        code, out, err = run(
            capsys,
            "replay",
            "state",
            "--group",
            group,
            "--bootstrap-servers",
            kafka_broker.bootstrap_servers,
            "--topic",
            topic,
            "--format",
            "json",
        )
        assert code == 0, err
        described = orjson.loads(out)["description"]
        assert latest[group]["epoch"] == described["GroupEpoch"]
        members = {
            m["MemberId"]: (m["MemberEpoch"], names(m["Assignment"]), names(m["PendingRevocation"]), names(m["Target"]))
            for m in described["Members"]
        }
        assert members and latest[group]["members"] == members
        # Who holds what: the first audit's open holdings, the state's (owned or being revoked) and
        # replay.history's over the compacted topic.
        held = {(item, m) for m, (_, owned, revoking, _) in members.items() for item in owned | revoking}
        assert held and latest[group]["held"] == held
        assert {
            (i["item"], i["member"]) for i in map(interval_json, short.open_intervals()) if i["group"] == group
        } == held

    with capsys.disabled():
        print(
            f"\naudit across compaction: {len(written)} records written, {len(erased)} erased by the cleaner "
            f"{cleaned_after:.1f}s after the lag's cut, {len(new)} written after; rebalances told {len(first_rebalances)} "
            f"vs {len(fresh_rebalances)} by the compacted topic; {time.monotonic() - started:.1f}s"
        )
