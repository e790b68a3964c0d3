"""`coordinator audit`: a Structured Streaming job from the topic into Delta tables in a catalog.

Theory of operation
-------------------
The query reads the topic with Spark's own Kafka source (`format("kafka")`, read_committed) and
hands each micro-batch to `Audit.batch` (foreachBatch), which

1. caches the batch (read from Kafka once) and, while Spark decodes it in the JVM
   (`spark.decode.decode_avro`) and appends it to the `records` table (the one distributed write),
2. feeds its raw records, in offset order per partition, to a `replay.history.History` on the
   driver, the same object `coordinator replay` uses;
3. appends what the History reports (events, rebalances that converged, holdings that ended) to
   the `history_rows` table and, in the same commit, replaces what is still open when it changed;
4. every so often compacts the tables' small files (Delta's OPTIMIZE) and drops replaced snapshot
   files (VACUUM).

Tables and views live in the catalog under one database (`spark.tables`); a Spark session with
`spark.session.catalog_conf(warehouse)` queries them by name.

Exactly once. Spark's checkpoint (`<warehouse>/_audit/<database>/checkpoint`) records each batch's
offsets before the batch runs and its commit after; a batch that did not commit runs again with the
same offsets, so it reads the same records. Every write of batch N is a Delta transaction tagged
with (the audit's id, N) (`txnAppId`/`txnVersion`): Delta skips a write whose tag the table already
holds, so a batch that runs again after a crash writes to each table only what its first run did
not. The History a batch starts from is the state after batch N-1: the one in memory if this
process ran N-1, else rebuilt from the `records` table (the log; the tables are derived from it).

Bounded restarts. Rebuilding from the whole records table costs a replay of everything audited (27 s
a million records here), so every `snapshot_every_records` records the History after a batch is
kept beside the checkpoint (`<warehouse>/_audit/<database>/snapshots/<batch>.history`: a header
naming the batch, the audit's id and the code it was made by, then the pickled History). A restart
before batch N takes the newest snapshot of a batch S < N and replays the records table's rows of
batches S+1 .. N-1 only. Why S < N is enough: Spark commits batch N-1 in its checkpoint only after
`Audit.batch` returned, so every table holds every batch before N; a snapshot of N itself may be on
disk from a run killed before N's other writes committed, and is not used for N's rerun (its rows
come again from the same records). A snapshot made by other code (another release: the pickled
classes may differ) or another audit is passed over: the restart replays from further back, never
reads a state it cannot trust. This snapshots the audit's own records table, which keeps every
record, never the compacted topic (DESIGN §3: over a compacted log a snapshot would resurrect keys
whose tombstones compaction removed).

Kafka. The source's own handling is what we rely on: it reads each offset range until the consumer's
position passes its end, so offsets that compaction removed and transaction markers (which take an
offset and are never returned) are skipped, not waited for; with read_committed the end offsets it
plans with are the last stable offsets, so a batch never waits on an open transaction.
`failOnDataLoss` is false: on a compacted topic, records below a checkpointed offset disappearing
is normal, not a loss.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

import records as records_package

import coordinator.core
import replay as replay_package
from coordinator.tools.kafka_config import java_client_config
from replay.history import History
from replay.positions import RawRecord
from spark import DEFAULT_DATABASE
from spark import tables as t
from spark.decode import RAW_COLUMNS, decode_avro, spark_schema

SCRATCH = "_tmp"
AUDITS = "_audit"

# What `Audit.start` passes to DataStreamWriter.trigger unless told otherwise: a micro-batch every 10 s.
DEFAULT_TRIGGER = {"processingTime": "10000 milliseconds"}
DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a database name Spark SQL takes unquoted
# A restart replays at most about this many records from the records table (spark.audit's Bounded restarts).
DEFAULT_SNAPSHOT_EVERY_RECORDS = 500_000
# A restart reads the records table this many records at a time (whole batches): bounded driver memory.
RESTART_CHUNK_RECORDS = 1_000_000
SNAPSHOTS = "snapshots"
_SNAPSHOT_FORMAT = 1
_SNAPSHOTS_KEPT = 2  # the newest may be of a batch killed half written, and is then not the one used


class AuditError(Exception):
    """The audit cannot go on as asked (a database name, a checkpoint that does not match its tables);
    said in one line (`spark.cli` turns it into the command line's error)."""


@dataclass(frozen=True)
class BatchReport:
    batch_id: int
    records: int
    corrupt: int
    rebalances: int  # converged in this batch
    intervals: int  # holdings that ended in this batch
    seconds: float
    newest_lag_ms: int | None  # now minus the newest record's timestamp, when the batch was done
    oldest_lag_ms: int | None


def source_options(
    kafka: Mapping[str, str],
    topic: str,
    *,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    min_partitions: int | None = None,
) -> dict[str, str]:
    """Spark's Kafka source options for the topic, as `.options(**...)` takes them."""
    options = {f"kafka.{k}": v for k, v in java_client_config(kafka).items()}
    options.setdefault("kafka.max.poll.records", "10000")  # measured: 15% faster than 500 on small records
    options.update(
        {
            "subscribe": topic,
            "startingOffsets": starting_offsets,
            "failOnDataLoss": "false",
            "kafka.isolation.level": "read_committed",
            "includeHeaders": "false",
        }
    )
    if max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    if min_partitions:
        options["minPartitions"] = str(min_partitions)
    return options


def warehouse_of(spark) -> Path:  # noqa: ANN001
    """The warehouse directory of a session made by `spark.session.session(..., warehouse=...)`."""
    return Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))


class Audit:
    """The audit of one topic into one database of the warehouse's catalog."""

    def __init__(
        self,
        spark,
        kafka: dict[str, str],
        topic: str,
        *,  # noqa: ANN001 - a catalog session
        database: str = DEFAULT_DATABASE,
        starting_offsets: str = "earliest",
        max_offsets_per_trigger: int | None = None,
        min_partitions: int | None = None,
        optimize_every_ms: int = 600_000,
        snapshot_every_records: int = DEFAULT_SNAPSHOT_EVERY_RECORDS,
        report: Callable[[BatchReport], None] | None = None,
    ) -> None:
        if not DATABASE_NAME.fullmatch(database):
            raise AuditError(f"database {database!r}: letters, digits and _ only, not starting with a digit")
        self.spark = spark
        self.warehouse = warehouse_of(spark)
        self.database = database
        self.topic = topic
        self.directory = self.warehouse / AUDITS / database
        self.options = source_options(
            kafka,
            topic,
            starting_offsets=starting_offsets,
            max_offsets_per_trigger=max_offsets_per_trigger,
            min_partitions=min_partitions,
        )
        self.optimize_every_ms = optimize_every_ms
        self.snapshot_every_records = snapshot_every_records  # 0: never (a restart replays every batch)
        self.report = report
        self.reports: list[BatchReport] = []
        self.app_id: str | None = None
        self._locations: dict[str, str] = {}
        self._history: History | None = None
        self._history_batch = -1  # the batch after which self._history is the state
        self._since_snapshot = 0  # records the History replayed since its last snapshot (or restart)
        # How the last restart rebuilt the History: (the snapshot's batch or -1, records replayed after it).
        self.restored: tuple[int, int] | None = None
        self._optimized_at = time.monotonic()
        self._open_written: dict[str, pa.Table] = {}
        self._pool = ThreadPoolExecutor(len(t.TABLES) + 1, thread_name_prefix="audit-write")  # and a snapshot

    def name(self, table: str) -> str:
        return f"{self.database}.{table}"

    # --- the query -----------------------------------------------------------------------------------

    def start(self, trigger: Mapping[str, object] = DEFAULT_TRIGGER):  # noqa: ANN201 - a StreamingQuery
        """Start the query; `trigger` is DataStreamWriter.trigger's keyword arguments:
        {"availableNow": True} (what the topic holds, then stop) or {"processingTime": "500 milliseconds"}."""
        self.prepare()
        stream = self.spark.readStream.format("kafka").options(**self.options).load()
        return (
            stream.writeStream.queryName(f"audit-{self.database}")
            .option("checkpointLocation", str(self.directory / "checkpoint"))
            .foreachBatch(self.batch)
            .trigger(**trigger)
            .start()
        )

    def prepare(self) -> None:
        """The database, its tables and views (created when missing), and the audit's id."""
        spark = self.spark
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {self.database}")
        for view in t.VIEWS:
            if (
                spark.catalog.tableExists(self.name(view))
                and spark.catalog.getTable(self.name(view)).tableType != "VIEW"
            ):
                raise AuditError(
                    f"{self.name(view)} is a table: the database was written by an earlier release of the "
                    "audit (one table per view); audit into another --database"
                )
        created = []
        for table in t.TABLES:
            if not spark.catalog.tableExists(self.name(table)):
                self._create(table)
                created.append(table)
        for view in t.VIEWS:
            spark.sql(f"CREATE OR REPLACE VIEW {self.name(view)} AS {t.view_sql(view, self.name)}")
        # The history's one commit a batch both appends and replaces the `_open` kinds: Delta's
        # replaceWhere would otherwise refuse rows outside its condition (the appended kinds).
        spark.conf.set("spark.databricks.delta.replaceWhere.constraintCheck.enabled", "false")
        checkpoint = self.directory / "checkpoint"
        id_file = self.directory / "id"
        if checkpoint.exists() and t.RECORDS in created:
            raise AuditError(
                f"the audit's checkpoint {checkpoint} belongs to tables that are gone: remove "
                f"{self.directory} to audit the topic again from the start"
            )
        if not checkpoint.exists() and t.RECORDS not in created and not spark.table(self.name(t.RECORDS)).isEmpty():
            raise AuditError(
                f"{self.name(t.RECORDS)} holds records but the audit's checkpoint ({checkpoint}) is gone: "
                f"drop the database (DROP DATABASE {self.database} CASCADE) to start again, or "
                "audit into another --database"
            )
        if not checkpoint.exists() or not id_file.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            id_file.write_text(f"coordinator-audit-{uuid.uuid4()}")
            for stale in (self.directory / SNAPSHOTS).glob("*"):  # another audit's states
                stale.unlink()
        self.app_id = id_file.read_text().strip()
        self._locations = {
            table: spark.sql(f"DESCRIBE DETAIL {self.name(table)}").first()["location"] for table in t.TABLES
        }

    def _create(self, table: str) -> None:
        from pyspark.sql import functions as F

        schema = spark_schema(t.SCHEMAS[table].append(pa.field("batch_id", pa.int64())))
        properties = (
            {"delta.appendOnly": "true"}
            if table == t.RECORDS
            else {
                # Replaced snapshots of what is open are worth keeping an hour, for readers still on an older one.
                "delta.deletedFileRetentionDuration": "interval 1 hours"
            }
        )
        writer = self.spark.createDataFrame([], schema=schema).writeTo(self.name(table)).using("delta")
        for key, value in properties.items():
            writer = writer.tableProperty(key, value)
        if table in t.PARTITIONED:
            writer = writer.partitionedBy(F.col(t.PARTITIONED[table]))
        writer.create()

    # --- one micro-batch -------------------------------------------------------------------------------

    def batch(self, df, batch_id: int) -> None:  # noqa: ANN001 - the micro-batch's DataFrame
        # The cyclic collector is paused for the batch, as `History.run` pauses it for the replay:
        # the History's state lives on, so each collection the batch's rows triggered walked all of
        # it again (measured: the history rows built 2-3x slower with it on).
        with _gc_paused():
            self._batch(df, batch_id)

    def _batch(self, df, batch_id: int) -> None:  # noqa: ANN001 - the micro-batch's DataFrame
        started = time.monotonic()
        # Read from Kafka once: cached, the batch's raw records go to the History on the driver while
        # Spark decodes and writes them to the records table.
        df.persist()
        try:
            records = df.select(*RAW_COLUMNS).toArrow()
            # Each table's write is one commit, mostly waiting (on the log, on a small job): they go
            # at once. The history's may commit before the records': the rows of a batch that did
            # not commit come again from the same records when it runs again, and a restart rebuilds
            # the History from the batches that did (spark.audit's Exactly once).
            writes = [self._pool.submit(self._write, t.RECORDS, decode_avro(df), batch_id)]
            try:
                history = self._history_before(batch_id)
                history.run(raw_records(records))
                corrupt = len(history.corrupt)
                events, rebalances, intervals = history.take()  # corrupt records: the records table has them
                kinds = {
                    t.EVENTS: t.event_rows(events),
                    t.REBALANCES_CONVERGED: t.rebalance_rows(rebalances),
                    t.OWNERSHIP_ENDED: t.ownership_rows(intervals),
                }
                still_open = {
                    t.REBALANCES_OPEN: t.rebalance_rows(history.all_rebalances()),
                    t.OWNERSHIP_OPEN: t.ownership_rows(history.open_intervals()),
                }
                writes.append(self._pool.submit(self._write_history, kinds, still_open, batch_id))
                self._since_snapshot += records.num_rows
                if self.snapshot_every_records and self._since_snapshot >= self.snapshot_every_records:
                    writes.append(self._pool.submit(self._write_snapshot, history, batch_id))
                    self._since_snapshot = 0
            finally:
                wait(writes)  # none left running into the next batch, or past a failure
            for write in writes:
                write.result()
        except BaseException:
            self._history = None  # half applied: the next batch starts again from the tables
            raise
        finally:
            df.unpersist()
        self._history_batch = batch_id
        if time.monotonic() - self._optimized_at >= self.optimize_every_ms / 1000:
            self.optimize()

        report = self._report(batch_id, records, corrupt, len(rebalances), len(intervals), time.monotonic() - started)
        self.reports.append(report)
        if self.report is not None:
            self.report(report)

    def optimize(self) -> None:
        """Compact the tables' small files (one per batch) and drop snapshot files replaced long ago."""
        for table in t.TABLES:
            self.spark.sql(f"OPTIMIZE {self.name(table)}")
        self.spark.sql(f"VACUUM {self.name(t.HISTORY)}")  # replaced snapshots of what was open
        self._optimized_at = time.monotonic()

    # --- the History a batch starts from ------------------------------------------------------------------

    def _history_before(self, batch_id: int) -> History:
        if self._history is not None and self._history_batch == batch_id - 1:
            return self._history
        snapshot_batch, history = self._read_snapshot(batch_id)
        replayed = 0
        for records in self._records_between(snapshot_batch, batch_id):
            history.run(raw_records(records))
            history.take()  # written when those batches ran
            replayed += records.num_rows
        self._history, self._history_batch = history, batch_id - 1
        self._since_snapshot = replayed
        self.restored = (snapshot_batch, replayed)
        return history

    def _records_between(self, after: int, before: int) -> Iterator[pa.Table]:
        """The raw records of the batches after `after` and before `before`, from the records table,
        a run of whole batches at a time of at most about RESTART_CHUNK_RECORDS records: a restart
        without a usable snapshot may have millions, more than the driver may collect at once
        (spark.driver.maxResultSize). Whole batches keep each partition's offset order across runs;
        batch_id is in each file's statistics, so Delta reads only the files of a run's batches."""
        from pyspark.sql import functions as F

        if before <= after + 1:
            return  # no batch in between (a new audit's first batch): not even a query of the table
        batch = F.col("batch_id")
        rows = self.spark.table(self.name(t.RECORDS)).where((batch > after) & (batch < before))
        counts = rows.groupBy("batch_id").count().orderBy("batch_id").collect()
        for first, last in _runs([(row["batch_id"], row["count"]) for row in counts], RESTART_CHUNK_RECORDS):
            yield rows.where((batch >= first) & (batch <= last)).select(*RAW_COLUMNS).toArrow()

    # --- the History's snapshots ------------------------------------------------------------------------

    def _snapshot_header(self, batch_id: int) -> bytes:
        return f"{_SNAPSHOT_FORMAT} {batch_id} {self.app_id} {_code_version()}\n".encode()

    def _write_snapshot(self, history: History, batch_id: int) -> None:
        """The History after `batch_id`, written whole under a temporary name and renamed: a reader
        finds a complete snapshot or none."""
        directory = self.directory / SNAPSHOTS
        directory.mkdir(exist_ok=True)
        path = directory / f"{batch_id:012d}.history"
        partial = path.with_suffix(".partial")
        with partial.open("wb") as f:
            f.write(self._snapshot_header(batch_id))
            pickle.dump(history, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        partial.replace(path)
        for old in sorted(directory.glob("*.history"))[:-_SNAPSHOTS_KEPT]:
            old.unlink(missing_ok=True)

    def _read_snapshot(self, batch_id: int) -> tuple[int, History]:
        """The newest usable snapshot of a batch before `batch_id` as (its batch, its History);
        (-1, an empty History) when there is none."""
        for path in sorted((self.directory / SNAPSHOTS).glob("*.history"), reverse=True):
            snapshot_batch = int(path.stem)
            if snapshot_batch >= batch_id:
                continue  # written by a run of that batch that did not commit: its records come again
            with path.open("rb") as f:
                if f.readline() != self._snapshot_header(snapshot_batch):
                    continue  # another audit's, or other code's
                try:
                    return snapshot_batch, _unpickle(f)
                except Exception:  # noqa: BLE001 - unreadable is as good as absent: replay further back
                    continue
        return -1, History()

    # --- writing ---------------------------------------------------------------------------------------

    def _write(self, table: str, rows, batch_id: int, replace_where: str | None = None) -> None:  # noqa: ANN001 - a DataFrame
        """One Delta transaction tagged (audit id, batch): skipped when the table already holds it.
        With `replace_where`, the rows it selects are replaced by the rows written (all of them).
        Written by path: the catalog's entry does not change, and an overwrite through the catalog
        would have the Hive metastore check (and refuse to record) the unchanged schema."""
        from pyspark.sql import functions as F

        writer = (
            rows.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
            .write.format("delta")
            .mode("append")
            .option("txnAppId", self.app_id)
            .option("txnVersion", batch_id)
        )
        if replace_where is not None:
            writer = writer.mode("overwrite").option("replaceWhere", replace_where)
        writer.save(self._locations[table])

    def _write_history(self, kinds: dict[str, pa.Table], still_open: dict[str, pa.Table], batch_id: int) -> None:
        """The batch's history rows in one commit: the new events, converged rebalances and ended
        holdings, and what is open now in place of what was, when that changed."""
        changed = any(
            kind not in self._open_written or not self._open_written[kind].equals(rows)
            for kind, rows in still_open.items()
        )
        rows = t.history_rows({**kinds, **still_open} if changed else kinds)
        if changed:
            replaced = ", ".join(f"'{kind}'" for kind in t.REPLACED)
            self._write(t.HISTORY, self._frame(rows), batch_id, replace_where=f"kind IN ({replaced})")
            self._open_written = still_open
        elif rows.num_rows:
            self._write(t.HISTORY, self._frame(rows), batch_id)

    def _frame(self, rows: pa.Table):  # noqa: ANN202 - a DataFrame
        if rows.num_rows:
            return self.spark.createDataFrame(rows)
        return self.spark.createDataFrame([], schema=spark_schema(rows.schema))

    def _report(
        self, batch_id: int, records: pa.Table, corrupt: int, rebalances: int, intervals: int, seconds: float
    ) -> BatchReport:
        newest = oldest = None
        if records.num_rows:
            now_us = time.time() * 1e6
            bounds = pc.min_max(records.column("timestamp").cast(pa.timestamp("us", tz="UTC")))
            newest = int((now_us - bounds["max"].value) / 1000)
            oldest = int((now_us - bounds["min"].value) / 1000)
        return BatchReport(batch_id, records.num_rows, corrupt, rebalances, intervals, seconds, newest, oldest)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic collector off (then as it was): while objects that stay alive are made, each
    collection would walk them, and the History's whole state, again and again."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _unpickle(f: BinaryIO) -> History:
    """A pickled History, the collector paused: every object loaded stays alive (measured 3-5x faster)."""
    with _gc_paused():
        return pickle.load(f)


_CODE_PACKAGES = (coordinator.core, records_package, replay_package)  # what a pickled History is made of


@cache
def _code_version() -> str:
    """A digest of the code that defines a History's state: a snapshot is read only by the code
    that wrote it (a release that changed a pickled class would read it wrong, or not at all)."""
    digest = hashlib.sha256()
    for package in _CODE_PACKAGES:
        root = Path(package.__file__).parent
        for source in sorted(root.rglob("*.py")):
            digest.update(str(source.relative_to(root)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def _runs(counts: list[tuple[int, int]], limit: int) -> Iterator[tuple[int, int]]:
    """(first, last) batch ids of consecutive runs of `counts` ((batch id, records), in batch order),
    each as long as it stays within `limit` records, and at least one batch."""
    first, previous, total = None, -1, 0
    for batch_id, count in counts:
        if first is not None and total + count > limit:
            yield first, previous
            first, total = None, 0
        if first is None:
            first = batch_id
        total += count
        previous = batch_id
    if first is not None:
        yield first, previous


def raw_records(records: pa.Table) -> list[RawRecord]:
    """The records as `replay.history` reads them, in offset order within each partition."""
    records = records.sort_by([("partition", "ascending"), ("offset", "ascending")])
    millis = records.column("timestamp").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    return [
        RawRecord(p, o, ts, k, v)
        for p, o, ts, k, v in zip(
            records.column("partition").to_pylist(),
            records.column("offset").to_pylist(),
            millis,
            records.column("key").to_pylist(),
            records.column("value").to_pylist(),
        )
    ]
