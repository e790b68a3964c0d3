"""The audit's History snapshots (spark.audit's Bounded restarts): a restart reads the newest
snapshot of a batch before the one it runs and the records after it, and ends in exactly the tables
an audit that replays everything ends in, even when killed (-9) between a snapshot's write and the
history rows' commit of the same batch.

The killed audit runs in processes of its own (a kill -9 must kill a real process; its warehouse's
Derby catalog admits one JVM); the audit it is compared with runs in the test session's Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from replay_scenarios import random_story

import spark.audit as audit_module
from replay.history import History, interval_json, rebalance_json
from spark import tables as t
from spark.audit import Audit, warehouse_of
from tests.support.spark_audit import (
    Where,
    Writers,
    assert_agrees_with_replay,
    assert_every_record_once,
    make_topic,
    sql,
)

pytestmark = pytest.mark.integration

KILLED_AT = 3  # the batch whose snapshot is written and whose history rows are not
# maxOffsetsPerTrigger: the stories' 790 or so offsets in about 6 batches, 3 before the kill and some
# after it; each batch is a few Delta commits, in each of the three audits, so no more of them than that.
PER_TRIGGER = 150

# One run of the audit in its own process. With a batch to kill at: a snapshot after every odd
# batch only (so that the restart has a batch to replay after the snapshot it reads), the history
# table's write of that batch held back, and the process killed (-9) once its snapshot is on disk.
_AUDIT_PROCESS = """
import os, signal, sys, threading
from pathlib import Path
import orjson
from spark.audit import Audit
from spark.session import session

bootstrap, topic, warehouse, kill_at, per_trigger = sys.argv[1:6]
kill_at, warehouse = int(kill_at), Path(warehouse)
if kill_at >= 0:
    never = threading.Event()

    real_write = Audit._write

    def held(self, table, rows, batch_id, **options):
        if batch_id == kill_at and table != "records":
            never.wait()
        return real_write(self, table, rows, batch_id, **options)

    real_snapshot = Audit._write_snapshot

    def snapshot(self, history, batch_id):
        if batch_id % 2 == 0:
            return
        real_snapshot(self, history, batch_id)
        if batch_id == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    Audit._write, Audit._write_snapshot = held, snapshot
spark = session(warehouse.parent / "scratch", warehouse=warehouse)
audit = Audit(
    spark, {"bootstrap.servers": bootstrap}, topic, max_offsets_per_trigger=int(per_trigger),
    snapshot_every_records=1 if kill_at >= 0 else 0,
    report=lambda r: print(orjson.dumps({"batch": r.batch_id, "records": r.records}).decode(), flush=True),
)
query = audit.start({"availableNow": True})
query.awaitTermination()
print(orjson.dumps({"restored": audit.restored}).decode(), flush=True)
"""


def _audit_process(broker, topic: str, warehouse: Path, kill_at: int) -> subprocess.Popen:  # noqa: ANN001
    """The audit's process, started: `_ended` waits for it."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _AUDIT_PROCESS,
            broker.bootstrap_servers,
            topic,
            str(warehouse),
            str(kill_at),
            str(PER_TRIGGER),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _ended(process: subprocess.Popen) -> tuple[int, list[dict]]:
    """The process's exit code and JSON lines, once it ends (within 600 s, else it is killed)."""
    try:
        out, _ = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    lines = [orjson.loads(line) for line in out.splitlines() if line.startswith("{")]
    return process.returncode, lines


def _history_tables(capsys, where: Where) -> dict[str, list[bytes]]:  # noqa: ANN001
    """Every history table's rows without the batch that wrote them, in one order."""
    return {
        table: sorted(
            orjson.dumps({k: v for k, v in r.items() if k != "batch_id"}, option=orjson.OPT_SORT_KEYS)
            for r in sql(capsys, where, f"SELECT * FROM {table}")
        )
        for table in t.KINDS
    }


def _history_state(history: History) -> bytes:
    return orjson.dumps(
        [[rebalance_json(r) for r in history.all_rebalances()], [interval_json(i) for i in history.all_intervals()]]
    )


def _assert_a_restart_without_snapshots_reads_in_runs(monkeypatch, spark, broker, audit: Audit) -> None:  # noqa: ANN001
    """A restart with no snapshot reads the records table a run of whole batches at a time (bounded
    driver memory; at most one batch a run here) and rebuilds the History the audit holds."""
    monkeypatch.setattr(audit_module, "RESTART_CHUNK_RECORDS", PER_TRIGGER)
    runs = []
    real = audit_module.raw_records
    monkeypatch.setattr(audit_module, "raw_records", lambda records: runs.append(records.num_rows) or real(records))
    restarted = Audit(spark, broker.client_config(), audit.topic, database=audit.database, snapshot_every_records=0)
    restarted.prepare()
    last = audit._history_batch
    history = restarted._history_before(last + 1)
    assert len(runs) > 2 and all(0 < n <= PER_TRIGGER for n in runs), runs  # several runs, none over the limit
    assert restarted.restored == (-1, sum(runs))
    assert _history_state(history) == _history_state(audit._history)


@pytest.mark.timeout(1500)
def test_a_restart_from_a_snapshot_killed_after_it_gives_the_tables_of_a_full_replay(
    capsys, kafka_broker, spark_session, unique_topic, tmp_path, monkeypatch
) -> None:  # noqa: ANN001
    make_topic(kafka_broker, unique_topic)
    w = Writers(kafka_broker, unique_topic)
    for seed in range(51, 54):
        random_story(seed, f"snapshot-{seed}", w.driver)
    w.close()

    # The killed audit's process starts first: while its JVM starts and it runs, the audit it is
    # compared with runs in the test session's Spark (another JVM, another warehouse).
    killed = Where(tmp_path / "warehouse")
    process = _audit_process(kafka_broker, unique_topic, killed.warehouse, KILLED_AT)
    try:
        full = Where(warehouse_of(spark_session), f"t_full_{unique_topic[-8:]}")
        audit = Audit(
            spark_session,
            kafka_broker.client_config(),
            unique_topic,
            database=full.database,
            max_offsets_per_trigger=PER_TRIGGER,
            snapshot_every_records=0,
        )
        query = audit.start({"availableNow": True})
        query.awaitTermination(600)
        assert query.exception() is None
        _assert_a_restart_without_snapshots_reads_in_runs(monkeypatch, spark_session, kafka_broker, audit)
    except BaseException:
        process.kill()
        process.wait()
        raise
    code, lines = _ended(process)
    assert code == -9, f"the audit was to be killed in batch {KILLED_AT}; it ended with {code}"
    done = {line["batch"]: line["records"] for line in lines if "batch" in line}
    assert sorted(done) == list(range(KILLED_AT)), "batches before the killed one ran whole"
    snapshots = sorted(p.name for p in (killed.warehouse / "_audit" / killed.database / "snapshots").iterdir())
    assert snapshots == [f"{b:012d}.history" for b in (KILLED_AT - 2, KILLED_AT)]
    # Killed in between: batch 3's snapshot is written, none of its history rows.
    assert sql(capsys, killed, f"SELECT count(*) AS n FROM history_rows WHERE batch_id = {KILLED_AT}") == [{"n": 0}]

    code, lines = _ended(_audit_process(kafka_broker, unique_topic, killed.warehouse, -1))
    assert code == 0
    resumed = [line["batch"] for line in lines if "batch" in line]
    assert resumed[0] == KILLED_AT
    # Not batch 3's own snapshot (its tables had not committed): batch 1's, then batch 2's records.
    assert lines[-1]["restored"] == [KILLED_AT - 2, done[KILLED_AT - 1]]

    assert _history_tables(capsys, killed) == _history_tables(capsys, full)
    assert_every_record_once(capsys, kafka_broker, unique_topic, killed)
    assert_agrees_with_replay(capsys, kafka_broker, unique_topic, killed)
