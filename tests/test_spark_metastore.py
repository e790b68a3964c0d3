"""A shared Hive metastore in PostgreSQL (issue 31 item 3): while `coordinator audit` runs, another
Spark session queries its tables and views by name and sees the rows it adds; the audit, killed (-9)
in the middle and started again, continues from its checkpoint with every record once, and the other
session's answers to docs/audit.md's queries are `coordinator sql`'s.

PostgreSQL is Debian's server (`make postgresql` installs it), run by the test in a directory of its
own on a free port, as the `postgres` user when the tests run as root (it refuses root). Both
sessions are processes of their own, each with its JVM, as two users' would be; the second knows
nothing of ours but what `coordinator spark-conf --metastore` prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from replay_scenarios import random_story
from spark_cluster import free_port

from replay.source import read_topic
from spark import tables as t
from tests.support import installed
from tests.support.spark_audit import (
    Where,
    Writers,
    assert_agrees_with_replay,
    assert_every_record_once,
    documented_queries,
    make_topic,
    sql,
)

pytestmark = pytest.mark.integration

COORDINATOR = str(Path(sys.executable).with_name("coordinator"))
KILLED_AFTER = 3  # the batch after whose line the first audit is killed (-9)
_FIRST_RUN_S = 300  # the first audit's bound to get there


def _as_postgres(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, as the postgres user the Debian package made."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@pytest.fixture(scope="module")
def metastore() -> Iterator[str]:
    """A PostgreSQL server with an empty database for the metastore: its JDBC URL."""
    bin_dir = installed.postgresql_bin()
    # Not under pytest's tmp_path: its parents are root's alone, and the server runs as postgres.
    data = Path(tempfile.mkdtemp(prefix="metastore-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(data, user.pw_uid, user.pw_gid)
    port = free_port()
    run = lambda *argv: subprocess.run(_as_postgres([*argv]), check=True, capture_output=True, timeout=120)  # noqa: E731
    try:
        run(str(bin_dir / "initdb"), "-D", str(data / "db"), "--auth=trust", "-U", "postgres")
        options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1"
        run(str(bin_dir / "pg_ctl"), "-D", str(data / "db"), "-l", str(data / "log"), "-o", options, "-w", "start")
        try:
            run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "metastore")
            yield f"jdbc:postgresql://127.0.0.1:{port}/metastore?user=postgres"
        finally:
            run(str(bin_dir / "pg_ctl"), "-D", str(data / "db"), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(data, ignore_errors=True)


# A Spark session made with nothing but pyspark and the settings `coordinator spark-conf` printed
# (argv[1]). Each line on stdin is either a number N: it waits for the records table to hold N rows,
# then says what the tables and views hold, by name; or a JSON list of queries: it answers each (the
# rows as `coordinator sql` prints them), with the tables it lists and the records it counts.
_READER = """
import json, sys, time
from pyspark.sql import SparkSession
builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
           .config("spark.sql.session.timeZone", "UTC")
           .config("spark.sql.jsonGenerator.ignoreNullFields", "false"))
for key, value in json.loads(sys.argv[1]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
count = lambda: spark.sql("SELECT count(*) FROM worker_coordinator.records").first()[0]
for line in sys.stdin:
    if line.startswith("["):
        spark.sql("USE worker_coordinator")
        rows = [[json.loads(r) for r in spark.sql(q).toJSON().collect()] for q in json.loads(line)]
        tables = [r.tableName for r in spark.sql("SHOW TABLES IN worker_coordinator").collect()]
        print(json.dumps({"tables": tables, "records": count(), "rows": rows}), flush=True)
        continue
    want, deadline = int(line), time.monotonic() + 300
    while (n := count()) != want:
        assert time.monotonic() < deadline, f"the records table holds {n} rows, not {want}"
        time.sleep(0.5)
    names = sorted(r.tableName for r in spark.sql("SHOW TABLES IN worker_coordinator").collect())
    views = {v: spark.sql(f"SELECT count(*) FROM worker_coordinator.{v}").first()[0]
             for v in ("rebalances", "ownership", "events")}
    print(json.dumps({"records": n, "names": names, **views}), flush=True)
"""


def _tail(file) -> str:  # noqa: ANN001
    file.seek(0)
    return file.read()[-3000:]


def _spark_conf(warehouse: Path, *extra: str) -> dict[str, str]:
    out = subprocess.run(
        [COORDINATOR, "spark-conf", "--warehouse", str(warehouse), *extra, "--format", "json"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    return json.loads(out)


class Reader:
    """The second session's process (`_READER`): one request a line, one JSON answer a line."""

    def __init__(self, conf: dict[str, str], cwd: Path) -> None:
        # Its stderr to a file: Spark's error lines fill a pipe nobody reads, and the JVM then stops.
        self.err = (cwd / "reader.err").open("w+")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _READER, json.dumps(conf)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, cwd=cwd,
        )  # fmt: skip

    def ask(self, request: object) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, _tail(self.err)
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(120) == 0, _tail(self.err)


def _audit(broker, topic: str, here: Where, metastore: str, *extra: str, cwd: Path) -> tuple[subprocess.Popen, object]:  # noqa: ANN001
    """`coordinator audit` of `topic` into `here` with the shared metastore, running: the process
    (its stdout a pipe, one line a batch) and its stderr's file."""
    err = (cwd / "audit.err").open("a+")
    process = subprocess.Popen(
        [COORDINATOR, "audit", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
         *here.args(), "--metastore", metastore, *extra],
        stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    return process, err


def _kill_after_batch(process: subprocess.Popen, err, batch: int) -> None:  # noqa: ANN001
    """SIGKILL once the audit has printed `batch`'s line; if it never does, it is killed after
    _FIRST_RUN_S (its stdout then closes) and the test fails with that said."""
    watchdog = threading.Timer(_FIRST_RUN_S, process.kill)
    watchdog.start()
    reached = False
    try:
        for line in process.stdout:
            if line.startswith(f"batch {batch}:"):
                reached = True
                break
        process.send_signal(signal.SIGKILL)
    finally:
        watchdog.cancel()
        process.kill()
        process.wait(30)
    assert reached, f"the first audit did not reach batch {batch} within {_FIRST_RUN_S} s: {_tail(err)}"


@pytest.mark.timeout(1800)
def test_a_killed_audit_resumes_and_a_second_session_reads_its_tables_by_name_while_it_writes(
    capsys, kafka_broker, metastore, tmp_path
) -> None:  # noqa: ANN001
    """`coordinator audit` killed (-9) in the middle and started again continues from its checkpoint,
    every record once; meanwhile a plain Spark session that knows only `coordinator spark-conf
    --metastore` reads the tables and views by name, sees the rows the audit adds, and at the end
    runs every query of docs/audit.md by name and gets what `coordinator sql` gets. (A kill -9 with
    the default Derby catalog: tests/test_spark_snapshot.py.)"""
    topic = f"test-metastore-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_broker, topic)
    w = Writers(kafka_broker, topic)
    for seed in range(41, 44):
        random_story(seed, f"killed-{seed}", w.driver)
    here = Where(tmp_path / "warehouse")

    embedded = _spark_conf(here.warehouse)
    shared = _spark_conf(here.warehouse, "--metastore", metastore)
    assert embedded["spark.hadoop.javax.jdo.option.ConnectionURL"].startswith("jdbc:derby:")
    assert shared["spark.hadoop.javax.jdo.option.ConnectionURL"] == metastore
    assert "/postgresql-" in shared["spark.driver.extraClassPath"] and "spark.driver.extraClassPath" not in embedded

    # The reader's JVM starts with the first audit's; its session touches the metastore only at its
    # first request, sent once an audit has made the metastore's schema and its tables: two sessions
    # creating the schema of an empty database at once would race.
    first, err = _audit(kafka_broker, topic, here, metastore, "--trigger", "200ms", "--max-offsets-per-trigger", "40",
                        cwd=tmp_path)  # fmt: skip
    reader = Reader(shared, tmp_path)
    audit = None
    try:
        _kill_after_batch(first, err, KILLED_AFTER)
        audit, err = _audit(kafka_broker, topic, here, metastore, "--trigger", "500ms", cwd=tmp_path)
        watchdog = threading.Timer(900, audit.kill)
        watchdog.start()
        resumed = audit.stdout.readline()
        # Batch KILLED_AFTER again (its checkpoint commit may not have been made) or the next one.
        assert (m := re.match(r"batch (\d+):", resumed)) and int(m[1]) >= KILLED_AFTER, resumed + _tail(err)
        seen = []
        for more in (True, False):
            seen.append(reader.ask(len(list(read_topic(kafka_broker.client_config(), topic)))))
            if more:  # new rows while both sessions run
                random_story(102, "shared-b", w.driver)
        w.close()
        audit.send_signal(signal.SIGTERM)
        assert audit.wait(120) == 0, _tail(err)
        queries = documented_queries()
        answers = reader.ask(queries)
        reader.close()
    finally:
        if audit is not None:
            watchdog.cancel()
        for process in (reader.process, first, audit):
            with contextlib.suppress(ProcessLookupError, AttributeError):
                process.kill()
    before, after = seen
    assert {"records", "events", "rebalances", "ownership", "ownership_open"} <= set(before["names"])
    assert before["names"] == after["names"]
    assert 0 < before["records"] < after["records"]
    assert 0 < before["rebalances"] < after["rebalances"]
    assert before["ownership"] < after["ownership"] and before["events"] < after["events"]
    assert_every_record_once(capsys, kafka_broker, topic, here)
    assert_agrees_with_replay(capsys, kafka_broker, topic, here)
    assert set(answers["tables"]) == set(t.TABLES) | set(t.VIEWS)
    assert answers["records"] == after["records"]
    assert len(answers["rows"]) == len(queries)  # zip below would stop at the shorter
    for query, rows in zip(queries, answers["rows"]):  # in any order where ORDER BY has ties
        assert sorted(map(orjson.dumps, rows)) == sorted(map(orjson.dumps, sql(capsys, here, query))), query


def test_a_bad_metastore_or_setting_is_one_line(capsys, tmp_path) -> None:  # noqa: ANN001
    from coordinator import cli

    code = cli.main(["spark-conf", "--warehouse", str(tmp_path), "--metastore", "mysql://db:3306/hive"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "jdbc:postgresql://" in err and "thrift://" in err
    code = cli.main(["audit", "--warehouse", str(tmp_path), "--conf", "spark.executor.memory"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "expected KEY=VALUE" in err
