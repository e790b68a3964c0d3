"""Audit benchmark (`make bench-audit`): `coordinator audit` (Spark) reading the topic from a broker.

Every run makes its own topics (unique names, 16 partitions) on the broker it is given and fills
them with realistic records (bench_replay.build: histories the state machine itself wrote, many
groups, each group on the partition Kafka's partitioner gives it), with a plain idempotent
producer. One SparkSession (local mode, every core) serves the whole run; scratch space and the
warehouses live in a temporary directory. Figures are medians over several rounds, each with its
baseline measured in the same run; nothing is asserted (two cores here, shared by Spark, its
Python workers, the producer and the broker).

1. Fill: N records (default 1,000,000) produced to a fresh topic; records/s.
2. Baseline: a Structured Streaming query, Spark's Kafka source (`format("kafka")`, the audit's
   options) with an available-now trigger into a Delta sink, the raw columns only (partition,
   offset, timestamp, key, value), nothing decoded; records/s from query start to termination
   (fresh checkpoint and table each round). Ratios below are against it.
3. Raw table: the same query writing the records table's rows: decoded in the JVM
   (`spark.decode.decode_avro`, what the audit uses) and, for the comparison the issue asked for,
   by our Python decoder over Arrow batches (`decode_arrow`, mapInArrow). The progress reports'
   numInputRows must add up to N. Goal (issue 31): >= 0.9 of the baseline with the decoder the audit
   uses (the JVM's); the Python decoder's figure is for comparison.
4. Full audit: spark.audit.Audit, available-now, a fresh database each round: the records table
   and the history tables; records/s, the BatchReports' record count, and where a batch's time
   goes. Goal: >= 50,000 records/s.
5. End-to-end lag: an Audit with a processing-time trigger (default 1s) on an empty topic while
   records are produced at a steady rate (default 2,000/s for 30 s, sent every 50 ms); per batch,
   the newest and oldest record's age when the batch had written every table (Kafka timestamps are
   the producer's create time), and batch durations. Goal: newest record's lag median <= 2 s, max
   <= 4 s.

6. Restart (`--restart`, on its own, no broker): how long a new Audit takes to rebuild the History
   a batch starts from, after N records (default 1,000,000 and 10,000,000, generated as in 1.) in
   the records table in batches of coordinator audit's maxOffsetsPerTrigger: from the newest
   snapshot and the records after it (spark.audit's Bounded restarts) against replaying every
   record (what every restart did before snapshots). The two Histories must agree.

`--quick` runs everything small and short, to check that it works.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_replay import PARTITIONS, build  # noqa: E402  (this directory is on sys.path)
from bench_service import create_topic, delete_topics  # noqa: E402

from replay.positions import RawRecord  # noqa: E402

RAW_RATIO_GOAL = 0.9  # of the no-decoding baseline, with the decoder the audit uses
AUDIT_GOAL = 50_000  # records/s, every table
LAG_GOALS_MS = (2_000, 4_000)  # newest record's lag: median, max
LAG_TICK_S = 0.05  # the lag measurement's producer sends what is due this often
# The phases (audit_phases' labels) that are the driver's own Python, one core whatever Spark has.
HISTORY_RUN = "History.run (decode + replay, Python)"
OPEN_STATE = "open rebalances/holdings (whole state)"
HISTORY_ROWS = "history rows (replay JSON shapes into Arrow columns)"
RAW_LIST = "records -> RawRecord list"
DRIVER_PYTHON = (HISTORY_RUN, OPEN_STATE, HISTORY_ROWS, RAW_LIST)


@dataclass
class Sizes:
    records: int = 1_000_000
    rounds: int = 3
    lag_rate: int = 2_000
    lag_seconds: float = 30.0
    lag_trigger: str = "1s"


QUICK = Sizes(records=100_000, rounds=2, lag_seconds=10.0)

LEGEND = """\
what the figures mean:
  fill          records/s a plain idempotent producer (linger, batching) writes into the fresh topic
  baseline      records/s from the start of an available-now query (Spark's Kafka source) to its end, writing
                the raw columns to a Delta table, nothing decoded
  raw table     the same query writing the records table's rows, decoded in the JVM (from_avro) or by our
                Python decoder (mapInArrow)
  audit         records/s of `coordinator audit --trigger available-now`: the records and history tables
  lag           per micro-batch of an audit with a processing-time trigger while records arrive at a steady
                rate: now minus the newest / oldest record's create time when the batch had written every table"""


# --- records and the producer -------------------------------------------------------------------------------


def records_for(count: int) -> list[RawRecord]:
    """Exactly `count` realistic records, in an order that writes every partition at once: each
    partition's records keep their order (and offsets), partitions interleave in proportion to size."""
    raws, _, _ = build(count)
    sizes = Counter(r.partition for r in raws)
    ordered = sorted(raws, key=lambda r: (r.offset + 0.5) / sizes[r.partition])
    return ordered[:count]


class Writer:
    """A plain confluent-kafka producer: idempotent, not transactional, batching with linger."""

    def __init__(self, bootstrap: str, linger_ms: int) -> None:
        from confluent_kafka import Producer

        self.failed = 0
        self.error: str | None = None
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": linger_ms,
                "queue.buffering.max.messages": 1_000_000,
                "queue.buffering.max.kbytes": 1_048_576,
                "on_delivery": self._delivered,
            }
        )

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failed += 1
            self.error = str(error)

    def produce(self, topic: str, records: list[RawRecord]) -> None:
        produce, poll = self.producer.produce, self.producer.poll
        for r in records:
            while True:
                try:
                    produce(topic, r.value, r.key, partition=r.partition)
                    break
                except BufferError:
                    poll(0.05)
        poll(0)

    def flush(self, timeout: float = 120.0) -> None:
        left = self.producer.flush(timeout)
        if left or self.failed:
            raise RuntimeError(f"producer: {left} records undelivered, {self.failed} failed ({self.error})")


def topic_size(bootstrap: str, topic: str) -> int:
    from confluent_kafka import TopicPartition

    from replay.source import open_consumer

    consumer = open_consumer({"bootstrap.servers": bootstrap})
    try:
        return sum(
            high - low
            for low, high in (
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in range(PARTITIONS)
            )
        )
    finally:
        consumer.close()


def fill(bootstrap: str, topic: str, records: list[RawRecord]) -> float:
    """Produce `records` (not transactional); returns the seconds until all were acknowledged."""
    started = time.perf_counter()
    writer = Writer(bootstrap, linger_ms=20)
    writer.produce(topic, records)
    writer.flush()
    seconds = time.perf_counter() - started
    stored = topic_size(bootstrap, topic)
    if stored != len(records):
        raise RuntimeError(f"topic {topic} holds {stored:,} records by its watermarks, {len(records):,} were produced")
    return seconds


# --- where the audit's time goes ----------------------------------------------------------------------------


class Phases:
    """Wraps functions and methods to add up the time spent in each (exclusive of wrapped calls
    inside it), by label. Installed only while an audit runs (sections 4 and 5); restored after."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self._local = threading.local()
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = vars(owner)[name]

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                inner = stack.pop()
                self.seconds[label] += elapsed - inner
                if stack:
                    stack[-1] += elapsed

        self._undo.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()


@contextmanager
def audit_phases() -> Iterator[Phases]:
    import spark.audit as audit_module
    from replay.history import History
    from spark import tables
    from spark.audit import Audit

    phases = Phases()
    phases.wrap(Audit, "batch", "foreachBatch itself (Kafka read into the cache; waits on the writes)")
    phases.wrap(Audit, "_write", "Delta writes (records: read + decode + write; history tables)")
    phases.wrap(audit_module, "raw_records", RAW_LIST)
    phases.wrap(Audit, "_write_snapshot", "History snapshot (pickle, fsync)")
    # What a restart spends besides History.run and the RawRecord list: reading the records table back.
    phases.wrap(Audit, "_history_before", "restart: records read back from the records table")
    phases.wrap(History, "run", HISTORY_RUN)
    phases.wrap(History, "all_rebalances", OPEN_STATE)
    phases.wrap(History, "open_intervals", OPEN_STATE)
    for name in ("event_rows", "rebalance_rows", "ownership_rows", "history_rows"):
        phases.wrap(tables, name, HISTORY_ROWS)
    try:
        yield phases
    finally:
        phases.restore()


# --- the measurements ---------------------------------------------------------------------------------------


def stream_round(spark: Any, options: dict[str, str], directory: Path, decode: Any) -> tuple[float, int, int, Counter]:
    """An available-now query from the topic into a Delta table of `decode(df)`'s rows:
    (seconds, rows the progress reports counted, rows in the table, durationMs summed by phase)."""
    out = directory / "table"
    stream = decode(spark.readStream.format("kafka").options(**options).load())
    started = time.perf_counter()
    query = (
        stream.writeStream.format("delta")
        .queryName(f"raw-{directory.name}")
        .option("path", str(out))
        .option("checkpointLocation", str(directory / "_checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    progress = query.recentProgress
    durations: Counter = Counter()
    for p in progress:
        durations.update(p["durationMs"])
    rows = sum(p["numInputRows"] for p in progress)
    return seconds, rows, spark.read.format("delta").load(str(out)).count(), durations


def bench_stream(
    spark: Any, options: dict[str, str], scratch: Path, count: int, rounds: int, label: str, decode: Any
) -> float:
    """Median records/s of `rounds` stream rounds (after one warm-up round that is not counted)."""
    stream_round(spark, options, scratch / f"{label}-warm-up", decode)
    times = []
    for i in range(rounds):
        seconds, progressed, stored, durations = stream_round(spark, options, scratch / f"{label}-{i}", decode)
        if progressed != count or stored != count:
            print(
                f"  !! round {i + 1}: progress reports counted {progressed:,} rows, the table holds {stored:,}; "
                f"the topic holds {count:,}"
            )
        times.append(seconds)
        trigger = durations.get("triggerExecution", 0) / 1000
        print(
            f"    round {i + 1}: {seconds:6.2f} s ({count / seconds:9,.0f} records/s); addBatch "
            f"{durations.get('addBatch', 0) / 1000:.2f} s of {trigger:.2f} s in triggers"
        )
    seconds = statistics.median(times)
    return count / seconds


def audit_round(
    spark: Any, bootstrap: str, topic: str, database: str, min_partitions: int | None, max_offsets: int | None
) -> tuple[float, list]:
    from spark.audit import Audit

    audit = Audit(
        spark,
        {"bootstrap.servers": bootstrap},
        topic,
        database=database,
        min_partitions=min_partitions,
        max_offsets_per_trigger=max_offsets,
    )
    started = time.perf_counter()
    query = audit.start({"availableNow": True})
    query.awaitTermination()
    seconds = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(f"the audit failed: {query.exception()}")
    return seconds, audit.reports


def bench_full_audit(
    spark: Any,
    bootstrap: str,
    topic: str,
    run_id: str,
    count: int,
    base_rate: float,
    rounds: int,
    min_partitions: int | None,
    max_offsets: int | None,
) -> None:
    times, batch_seconds = [], []
    with audit_phases() as phases:
        for i in range(rounds):
            seconds, reports = audit_round(spark, bootstrap, topic, f"bench_{run_id}_{i}", min_partitions, max_offsets)
            audited = sum(r.records for r in reports)
            corrupt = sum(r.corrupt for r in reports)
            check = "= the topic" if audited == count else f"!! the topic holds {count:,}"
            in_batches = sum(r.seconds for r in reports)
            batch_seconds.append(in_batches)
            print(
                f"  round {i + 1}: {seconds:6.2f} s ({count / seconds:9,.0f} records/s); {len(reports)} batch(es), "
                f"{audited:,} records ({check}), {corrupt} corrupt, {sum(r.rebalances for r in reports):,} "
                f"rebalances, {sum(r.intervals for r in reports):,} holdings ended; "
                f"{in_batches:.2f} s in foreachBatch"
            )
            times.append(seconds)
    seconds = statistics.median(times)
    rate = count / seconds
    print(
        f"  audit          : {rate:12,.0f} records/s  ({seconds:.2f} s, median of {rounds}; "
        f"{rate / base_rate:.2f}x the baseline); goal >= {AUDIT_GOAL:,}/s -> {_met(rate >= AUDIT_GOAL)}"
    )
    print_phases(phases, f"all {rounds} rounds", rounds, "round")
    outside = statistics.median(times) - statistics.median(batch_seconds)
    print(f"    {'outside foreachBatch (query start, offsets, planning)':58}: {outside:7.2f} s (median round)")
    # The History runs on the driver, one Python thread: its share alone bounds the audit's rate.
    driver = sum(phases.seconds[label] for label in DRIVER_PYTHON) / rounds
    print(
        f"  the driver's Python (the History and its rows): {driver:.2f} s per round, "
        f"{driver / seconds:.0%} of the audit's time; alone it caps the audit at {count / driver:,.0f} records/s"
    )


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def print_phases(phases: Phases, what: str, count: int, unit: str) -> None:
    total = sum(phases.seconds.values())
    print(f"  where foreachBatch's time goes ({what}, {total:.1f} s):")
    for label, seconds in phases.seconds.most_common():
        print(f"    {label:58}: {seconds / count:7.2f} s per {unit} ({seconds / total:4.0%})")


def bench_lag(
    spark: Any,
    bootstrap: str,
    topic: str,
    database: str,
    sizes: Sizes,
    min_partitions: int | None,
    max_offsets: int | None,
) -> None:
    from spark.audit import Audit
    from spark.cli import parse_trigger

    total = int(sizes.lag_rate * sizes.lag_seconds)
    records = records_for(total)
    audit = Audit(
        spark,
        {"bootstrap.servers": bootstrap},
        topic,
        database=database,
        min_partitions=min_partitions,
        max_offsets_per_trigger=max_offsets,
    )
    with audit_phases() as phases:
        query = audit.start(parse_trigger(sizes.lag_trigger))
        try:
            deadline = time.monotonic() + 120
            while query.isActive and query.status["message"].startswith("Initializing") and time.monotonic() < deadline:
                time.sleep(0.1)
            # What is due every LAG_TICK_S, acknowledged before the next tick.
            writer = Writer(bootstrap, linger_ms=5)
            started = time.monotonic()
            produced = 0
            while produced < total:
                due = min(total, int((time.monotonic() - started) * sizes.lag_rate))
                if due > produced:
                    writer.produce(topic, records[produced:due])
                    writer.flush()
                    produced = due
                time.sleep(max(0.0, LAG_TICK_S - (time.monotonic() - started) % LAG_TICK_S))
            producing = time.monotonic() - started
            deadline = time.monotonic() + max(120.0, sizes.lag_seconds * 4)
            while query.isActive and sum(r.records for r in audit.reports) < total and time.monotonic() < deadline:
                time.sleep(0.1)
            caught_up = time.monotonic() - started
            progress = [p for p in query.recentProgress if p["numInputRows"]]
        finally:
            query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the audit failed: {query.exception()}")
    reports = [r for r in audit.reports if r.records]
    audited = sum(r.records for r in reports)
    print(
        f"  produced {total:,} records in {producing:.1f} s ({total / producing:,.0f}/s); the audit had all "
        f"{audited:,} {caught_up - producing:.1f} s after the last was sent"
        + ("" if audited == total else f" !! {audited:,} of {total:,} audited")
    )
    if not reports:
        print("  !! no batch with records")
        return
    newest = [r.newest_lag_ms for r in reports]
    oldest = [r.oldest_lag_ms for r in reports]
    seconds = [r.seconds for r in reports]
    rows = [r.records for r in reports]
    print(
        f"  {len(reports)} batches with records (trigger {sizes.lag_trigger}), records per batch median "
        f"{statistics.median(rows):,.0f}, max {max(rows):,}"
    )
    lag_ok = statistics.median(newest) <= LAG_GOALS_MS[0] and max(newest) <= LAG_GOALS_MS[1]
    print(
        f"  newest record's lag : median {statistics.median(newest):7,.0f} ms, max {max(newest):7,} ms; goal median "
        f"<= {LAG_GOALS_MS[0]:,}, max <= {LAG_GOALS_MS[1]:,} -> {_met(lag_ok)}"
    )
    print(f"  oldest record's lag : median {statistics.median(oldest):7,.0f} ms, max {max(oldest):7,} ms")
    print(
        f"  batch duration      : median {statistics.median(seconds) * 1000:7,.0f} ms, "
        f"max {max(seconds) * 1000:7,.0f} ms (foreachBatch: every table written)"
    )
    if progress:
        names = ("triggerExecution", "addBatch", "latestOffset", "queryPlanning", "walCommit", "commitOffsets")
        medians = {k: statistics.median(p["durationMs"].get(k, 0) for p in progress) for k in names}
        print("  Spark per trigger with records, median ms: " + ", ".join(f"{k} {v:,.0f}" for k, v in medians.items()))
    print_phases(phases, f"{len(reports)} batches with records", len(reports), "batch")


def bench_restart(spark: Any, counts: list[int], every: int) -> None:
    """Section 6: the restart of an audit of `count` records, from a snapshot and from nothing."""
    import pyarrow as pa

    from replay.history import History, interval_json, rebalance_json
    from spark import tables as t
    from spark.audit import SNAPSHOTS, Audit
    from spark.cli import MAX_OFFSETS_PER_TRIGGER
    from spark.decode import SCHEMA

    def audit(database: str) -> Any:
        # No query runs: the broker is never asked.
        a = Audit(
            spark, {"bootstrap.servers": "127.0.0.1:9"}, "restart", database=database, snapshot_every_records=every
        )
        a.prepare()
        return a

    def state(history: History) -> bytes:
        import orjson

        return orjson.dumps(
            [[rebalance_json(r) for r in history.all_rebalances()], [interval_json(i) for i in history.all_intervals()]]
        )

    for count in counts:
        t0 = time.perf_counter()
        records = records_for(count)
        database = f"restart_{count}_{os.getpid()}"
        writer = audit(database)
        # As after a query's first batch: the audit's id stays (without a checkpoint, prepare() makes
        # a new one and drops the snapshots, another audit's).
        (writer.directory / "checkpoint").mkdir()
        history, since, batches = History(), 0, 0
        for start in range(0, count, MAX_OFFSETS_PER_TRIGGER):
            chunk = sorted(records[start : start + MAX_OFFSETS_PER_TRIGGER], key=lambda r: (r.partition, r.offset))
            # The raw columns as the audit writes them; the decoded ones null (a restart reads only the raw).
            columns = {
                "partition": pa.array([r.partition for r in chunk], pa.int32()),
                "offset": pa.array([r.offset for r in chunk], pa.int64()),
                "timestamp": pa.array([r.timestamp_ms * 1000 for r in chunk], SCHEMA.field("timestamp").type),
                "key": pa.array([r.key for r in chunk], pa.binary()),
                "value": pa.array([r.value for r in chunk], pa.binary()),
            }
            rows = pa.table([columns.get(f.name, pa.nulls(len(chunk), f.type)) for f in SCHEMA], schema=SCHEMA)
            writer._write(t.RECORDS, spark.createDataFrame(rows), batches)
            history.run(chunk)
            history.take()
            since += len(chunk)
            if since >= every:
                # Only the newest snapshot is read; the earlier ones are the audit's cost, not the
                # restart's: pickled only when it is the last one (10,000,000 records: 20 pickles).
                if count - start - len(chunk) < every:
                    writer._write_snapshot(history, batches)
                since = 0
            batches += 1
        del records
        print(f"  {count:,} records in {batches} batches written in {time.perf_counter() - t0:.0f} s")
        snapshots = writer.directory / SNAPSHOTS
        hidden = snapshots.with_name("snapshots-hidden")
        snapshots.rename(hidden)
        t0 = time.perf_counter()
        full = audit(database)._history_before(batches)
        full_s = time.perf_counter() - t0
        hidden.rename(snapshots)
        t0 = time.perf_counter()
        restarted = audit(database)
        from_snapshot = restarted._history_before(batches)
        snapshot_s = time.perf_counter() - t0
        after, replayed = restarted.restored
        same = "the same History" if state(full) == state(from_snapshot) else "!! the Histories differ"
        print(
            f"  restart after {count:,}: replay everything {full_s:7.1f} s; from the snapshot of batch {after} "
            f"and {replayed:,} records after it {snapshot_s:7.1f} s ({full_s / snapshot_s:.1f}x faster; {same})"
        )
        spark.sql(f"DROP DATABASE {database} CASCADE")


# --- main ---------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:19092"))
    parser.add_argument("--quick", action="store_true", help="small and short: check that it works")
    parser.add_argument("--records", type=int, help="records in the topic (default 1,000,000; --quick 100,000)")
    parser.add_argument("--rounds", type=int, help="rounds of each measurement (default 3; --quick 2)")
    parser.add_argument("--min-partitions", type=int, help="the source's minPartitions (default: not set)")
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, help="the source's maxOffsetsPerTrigger (default: not set)"
    )
    parser.add_argument("--lag-trigger", help="processing-time trigger of the lag measurement (default 1s)")
    parser.add_argument("--lag-rate", type=int, help="records/s produced during the lag measurement (default 2,000)")
    parser.add_argument("--lag-seconds", type=float, help="how long records are produced (default 30; --quick 10)")
    parser.add_argument("--restart", action="store_true", help="only section 6, restart times (no broker)")
    parser.add_argument(
        "--restart-records",
        default="1000000,10000000",
        help="records before the restart, comma-separated (default 1,000,000 and 10,000,000)",
    )
    args = parser.parse_args()
    if args.restart:
        return restart_main(args)
    sizes = replace(QUICK) if args.quick else Sizes()
    for name in ("records", "rounds", "lag_trigger", "lag_rate", "lag_seconds"):
        if getattr(args, name) is not None:
            setattr(sizes, name, getattr(args, name))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    bootstrap = args.bootstrap_servers
    run_id = f"{os.getpid()}-{int(time.time())}"
    topic, lag_topic = f"bench-audit-{run_id}", f"bench-audit-{run_id}-lag"
    topics: list[str] = []
    started = time.monotonic()
    print(
        f"audit benchmark{' (--quick)' if args.quick else ''}: broker {bootstrap}, {os.cpu_count()} cores, "
        f"topics {topic} and {lag_topic} ({PARTITIONS} partitions), median of {sizes.rounds} rounds"
    )
    print(LEGEND)
    spark = None
    try:
        with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
            scratch = Path(tmp)
            t = time.perf_counter()
            records = records_for(sizes.records)
            built = time.perf_counter() - t
            groups = len({r.key[2:] for r in records if r.key[:2] == b"\x00\x03"})
            print(f"1. fill: {len(records):,} records ({groups:,}+ groups) built in {built:.0f} s")
            for name in (topic, lag_topic):
                create_topic(bootstrap, name, PARTITIONS)
                topics.append(name)
            seconds = fill(bootstrap, topic, records)
            count = len(records)
            megabytes = sum(len(r.key) + len(r.value or b"") for r in records) / 2**20
            del records
            print(
                f"  fill           : {count / seconds:12,.0f} records/s  ({seconds:.1f} s, {megabytes:.0f} MiB of "
                f"keys and values; idempotent producer, linger.ms=20)"
            )

            t = time.perf_counter()
            from spark.audit import source_options
            from spark.decode import decode_arrow, decode_avro
            from spark.session import session

            spark = session(scratch / "spark", warehouse=scratch / "warehouse")
            print(
                f"Spark {spark.version} started in {time.perf_counter() - t:.1f} s: master "
                f"{spark.sparkContext.master}, {spark.sparkContext.defaultParallelism} cores; source options "
                f"minPartitions={args.min_partitions or 'not set'}, maxOffsetsPerTrigger="
                f"{args.max_offsets_per_trigger or 'not set'}; each figure after one round not counted"
            )
            options = source_options(
                {"bootstrap.servers": bootstrap},
                topic,
                min_partitions=args.min_partitions,
                max_offsets_per_trigger=args.max_offsets_per_trigger,
            )
            raw_columns = ("partition", "offset", "timestamp", "key", "value")

            print("2. baseline: Spark's Kafka source -> Delta, the raw columns, nothing decoded")
            base_rate = bench_stream(
                spark, options, scratch, count, sizes.rounds, "baseline", lambda df: df.select(*raw_columns)
            )
            print(f"  baseline       : {base_rate:12,.0f} records/s  (median of {sizes.rounds})")

            print("3. raw table: Spark's Kafka source -> Delta, the records table's rows")
            rates = {}
            for label, decode in (("JVM (from_avro)", decode_avro), ("Python (mapInArrow)", decode_arrow)):
                print(f"  decoded in {label}:")
                rates[label] = bench_stream(spark, options, scratch, count, sizes.rounds, label.split()[0], decode)
            for label, rate in rates.items():
                goal = (
                    f"goal >= {RAW_RATIO_GOAL}x -> {_met(rate / base_rate >= RAW_RATIO_GOAL)}"
                    if label.startswith("JVM")  # spark.decode: the one the audit uses
                    else "(comparison)"
                )
                print(
                    f"  raw table, {label:20}: {rate:10,.0f} records/s (median of {sizes.rounds}; "
                    f"{rate / base_rate:.2f}x the baseline); {goal}"
                )

            from spark.cli import MAX_OFFSETS_PER_TRIGGER

            audit_max = args.max_offsets_per_trigger or MAX_OFFSETS_PER_TRIGGER
            print(
                f"4. full audit (spark.audit.Audit, available-now, a fresh database each round, "
                f"maxOffsetsPerTrigger {audit_max:,} as coordinator audit's default)"
            )
            bench_full_audit(
                spark,
                bootstrap,
                topic,
                run_id.replace("-", "_"),
                count,
                base_rate,
                sizes.rounds,
                args.min_partitions,
                audit_max,
            )

            print(
                f"5. end-to-end lag: audit with trigger {sizes.lag_trigger} while {sizes.lag_rate:,} records/s "
                f"arrive for {sizes.lag_seconds:g} s"
            )
            bench_lag(
                spark,
                bootstrap,
                lag_topic,
                f"bench_{run_id.replace('-', '_')}_lag",
                sizes,
                args.min_partitions,
                args.max_offsets_per_trigger,
            )
            spark.stop()
            spark = None
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    finally:
        if spark is not None:
            for query in spark.streams.active:
                query.stop()
            spark.stop()
        if topics:
            delete_topics(bootstrap, topics)
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0


def restart_main(args: argparse.Namespace) -> int:
    from spark.audit import DEFAULT_SNAPSHOT_EVERY_RECORDS
    from spark.session import session

    try:
        counts = [int(n.replace("_", "")) for n in args.restart_records.split(",")]
    except ValueError:
        print(f"--restart-records {args.restart_records!r}: comma-separated record counts", file=sys.stderr)
        return 2
    every = DEFAULT_SNAPSHOT_EVERY_RECORDS
    if min(counts) < every:
        print(f"--restart-records: at least {every:,} (a snapshot is written every {every:,} records)", file=sys.stderr)
        return 2
    print(f"6. restart: the History a new Audit starts from, snapshot every {every:,} records (the default)")
    with tempfile.TemporaryDirectory(prefix="bench-audit-restart-") as tmp:
        spark = session(Path(tmp) / "spark", warehouse=Path(tmp) / "warehouse")
        try:
            bench_restart(spark, counts, every)
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
