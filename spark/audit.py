"""`coordinator audit`: a Structured Streaming job from the topic into the warehouse's tables.

Theory of operation
-------------------
The query reads the topic with the `worker_offsets` source (records decoded on Spark's workers)
and hands each micro-batch to `Audit.batch` (foreachBatch), which

1. writes the batch's records to `records/batch_id=N` with Spark (the one distributed write: every
   record, decoded in parallel);
2. reads that directory back with pyarrow on the driver and derives the typed tables from it,
   vectorised (`spark.tables.typed_tables`);
3. feeds the records, in offset order per partition, to a `replay.history.History`, the same
   object `coordinator replay` uses, and writes what it reports: events, rebalances that
   converged, holdings that ended, and snapshots of what is still open;
4. every so often pickles the History to `_history/<N>.pickle`, the state after batch N.

Restarts and crashes. Spark's checkpoint (`_checkpoint/`) records each batch's offsets before the
batch runs and its commit after; a batch that did not commit runs again with the same offsets,
so it reads the same records. Every table's rows of batch N live in its own `batch_id=N`
directory, which a rerun replaces: nothing is written twice and nothing is skipped. The History a
batch needs is the state after batch N-1: the one in memory if this process ran N-1, else the
newest snapshot before N plus the `records` of the batches after it, replayed from the warehouse
(the records table is the log; the snapshot only saves replaying all of it).
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from coordinator.errors import CliError
from replay.history import History
from replay.source import RawRecord
from spark import tables as t
from spark.source import reader_options

CHECKPOINT = "_checkpoint"
SNAPSHOTS = "_history"
SCRATCH = "_tmp"
_SNAPSHOT_EVERY_S = 10.0
_SNAPSHOTS_KEPT = 2
_SNAPSHOT_VERSION = 1  # bumped when History's pickled shape changes: older snapshots are then replayed past


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


def parse_trigger(text: str) -> dict:
    """`available-now`, or a processing-time interval like 10s, 500ms, 2m: DataStreamWriter.trigger's kwargs."""
    if text in ("available-now", "availableNow"):
        return {"availableNow": True}
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m)\s*", text)
    if match is None:
        raise CliError(f"--trigger {text!r}: expected available-now or an interval like 10s, 500ms, 2m", exit_code=2)
    ms = float(match[1]) * {"ms": 1, "s": 1000, "m": 60_000}[match[2]]
    return {"processingTime": f"{int(ms)} milliseconds"}


class Audit:
    """The audit of one topic into one warehouse directory."""

    def __init__(self, spark, warehouse: Path, kafka: dict[str, str], topic: str, *,  # noqa: ANN001
                 starting_offsets: str = "earliest", max_offsets_per_trigger: int | None = None,
                 min_partitions: int | None = None, report: Callable[[BatchReport], None] | None = None) -> None:
        self.spark = spark
        self.warehouse = Path(warehouse)
        self.topic = topic
        self.options = reader_options(kafka, topic, starting_offsets=starting_offsets,
                                      max_offsets_per_trigger=max_offsets_per_trigger, min_partitions=min_partitions)
        self.report = report
        self.reports: list[BatchReport] = []
        self._history: History | None = None
        self._history_batch = -1  # the batch after which self._history is the state
        self._snapshot_at = time.monotonic()
        self._open_written: dict[str, pa.Table] = {}

    # --- the query -----------------------------------------------------------------------------------

    def start(self, trigger: str = "10s"):  # noqa: ANN201 - a StreamingQuery
        stream = self.spark.readStream.format("worker_offsets").options(**self.options).load()
        return (stream.writeStream.queryName(f"audit-{self.topic}")
                .option("checkpointLocation", str(self.warehouse / CHECKPOINT))
                .foreachBatch(self.batch)
                .trigger(**parse_trigger(trigger))
                .start())

    # --- one micro-batch -------------------------------------------------------------------------------

    def batch(self, df, batch_id: int) -> None:  # noqa: ANN001 - the micro-batch's DataFrame
        started = time.monotonic()
        records_dir = self._dir(t.RECORDS, batch_id)
        df.write.mode("overwrite").parquet(str(records_dir))
        records = _read_dir(records_dir).combine_chunks()  # one chunk: filters and takes are several times faster
        for name, rows in t.typed_tables(records).items():
            self._write(name, batch_id, rows)

        history = self._history_before(batch_id)
        try:
            history.run(_raw(records))
            events, rebalances, intervals = history.take()  # corrupt records: the records table has them
            self._write(t.EVENTS, batch_id, t.event_rows(events))
            self._write(t.REBALANCES, batch_id, t.rebalance_rows(rebalances))
            self._write(t.OWNERSHIP, batch_id, t.ownership_rows(intervals))
            self._write_open(t.REBALANCES_OPEN, batch_id, t.rebalance_rows(history.all_rebalances()))
            self._write_open(t.OWNERSHIP_OPEN, batch_id, t.ownership_rows(history.open_intervals()))
        except BaseException:
            self._history = None  # half applied: the next batch starts again from the warehouse
            raise
        self._history_batch = batch_id
        if records.num_rows and time.monotonic() - self._snapshot_at >= _SNAPSHOT_EVERY_S:
            self.snapshot()

        report = self._report(batch_id, records, len(rebalances), len(intervals), time.monotonic() - started)
        self.reports.append(report)
        if self.report is not None:
            self.report(report)

    def snapshot(self) -> None:
        """Pickle the History (the state after the last batch) so a restart replays less."""
        if self._history is None:
            return
        directory = self.warehouse / SNAPSHOTS
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self._history_batch}.pickle"
        tmp = directory / f".{path.name}.{uuid.uuid4().hex}"
        with open(tmp, "wb") as f:
            pickle.dump((_SNAPSHOT_VERSION, self._history), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        self._snapshot_at = time.monotonic()
        for old in sorted(_snapshot_ids(directory))[:-_SNAPSHOTS_KEPT]:
            (directory / f"{old}.pickle").unlink(missing_ok=True)

    # --- the History a batch starts from ------------------------------------------------------------------

    def _history_before(self, batch_id: int) -> History:
        if self._history is not None and self._history_batch == batch_id - 1:
            return self._history
        history, after = self._load_snapshot(batch_id)
        records_dir = self.warehouse / t.RECORDS
        if after < batch_id - 1 and records_dir.exists():
            dataset = ds.dataset(records_dir, format="parquet", partitioning="hive")
            past = dataset.to_table(columns=["partition", "offset", "timestamp", "key", "value"],
                                    filter=(ds.field("batch_id") > after) & (ds.field("batch_id") < batch_id))
            history.run(_raw(past))
            history.take()  # written when those batches ran
        self._history, self._history_batch = history, batch_id - 1
        return history

    def _load_snapshot(self, batch_id: int) -> tuple[History, int]:
        directory = self.warehouse / SNAPSHOTS
        for found in sorted((i for i in _snapshot_ids(directory) if i < batch_id), reverse=True):
            try:
                with open(directory / f"{found}.pickle", "rb") as f:
                    version, history = pickle.load(f)
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, TypeError):
                continue  # unreadable (another version of the code): replay further back instead
            if version == _SNAPSHOT_VERSION and isinstance(history, History):
                return history, found
        return History(), -1

    # --- writing ---------------------------------------------------------------------------------------

    def _dir(self, table: str, batch_id: int) -> Path:
        return self.warehouse / table / f"batch_id={batch_id}"

    def _write(self, table: str, batch_id: int, rows: pa.Table) -> None:
        """The batch's rows of `table`, replacing whatever an earlier run of this batch wrote."""
        directory = self._dir(table, batch_id)
        if rows.num_rows:
            _replace_dir(directory, rows)
        elif directory.exists():
            shutil.rmtree(directory)

    def _write_open(self, table: str, batch_id: int, rows: pa.Table) -> None:
        """A new snapshot of what is still open, when it changed; older snapshots are removed after."""
        if table in self._open_written and self._open_written[table].equals(rows):
            return
        directory = self._dir(table, batch_id)
        _replace_dir(directory, rows)  # even with nothing open: it replaces the older snapshots
        self._open_written[table] = rows
        for old in (self.warehouse / table).glob("batch_id=*"):
            if old != directory:
                shutil.rmtree(old, ignore_errors=True)

    def _report(self, batch_id: int, records: pa.Table, rebalances: int, intervals: int,
                seconds: float) -> BatchReport:
        newest = oldest = None
        if records.num_rows:
            now_us = time.time() * 1e6
            bounds = pc.min_max(records.column("timestamp"))
            newest = int((now_us - bounds["max"].value) / 1000)
            oldest = int((now_us - bounds["min"].value) / 1000)
        corrupt = records.num_rows - pc.sum(pc.is_null(records.column("error"))).as_py() if records.num_rows else 0
        return BatchReport(batch_id, records.num_rows, corrupt, rebalances, intervals, seconds, newest, oldest)


def _replace_dir(directory: Path, rows: pa.Table) -> None:
    """`directory` holding just `rows` in one Parquet file. The file is written under a hidden name
    and renamed: readers (Spark, pyarrow) skip names starting with "."."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    tmp = directory / f".part-0.parquet.{uuid.uuid4().hex}"
    pq.write_table(rows, tmp)
    os.replace(tmp, directory / "part-0.parquet")


def _read_dir(directory: Path) -> pa.Table:
    from spark.decode import SCHEMA

    if not any(directory.glob("*.parquet")):
        return SCHEMA.empty_table()
    return pq.read_table(directory, schema=SCHEMA)


def _raw(records: pa.Table) -> list[RawRecord]:
    """The records as `replay.history` reads them, in offset order within each partition."""
    records = records.sort_by([("partition", "ascending"), ("offset", "ascending")])
    millis = records.column("timestamp").cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    return [RawRecord(p, o, ts, k, v) for p, o, ts, k, v in zip(
        records.column("partition").to_pylist(), records.column("offset").to_pylist(), millis,
        records.column("key").to_pylist(), records.column("value").to_pylist())]


def _snapshot_ids(directory: Path) -> list[int]:
    if not directory.exists():
        return []
    return [int(p.stem) for p in directory.glob("*.pickle") if p.stem.isdigit()]
