"""A shared Hive metastore in PostgreSQL (issue 31 item 3): while `coordinator audit` runs, another
Spark session queries its tables and views by name and sees the rows it adds.

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
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from replay_scenarios import random_story
from spark_cluster import free_port

from replay.source import read_topic
from tests.support import installed
from tests.support.spark_audit import Where, Writers, assert_every_record_once, make_topic

pytestmark = pytest.mark.integration

COORDINATOR = str(Path(sys.executable).with_name("coordinator"))


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


# A Spark session made with nothing but pyspark and the settings `coordinator spark-conf` printed: it
# waits for the records table to hold N rows (N on stdin, one per line), then says what the tables
# and views hold, by name.
_READER = """
import json, sys, time
from pyspark.sql import SparkSession
builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
for key, value in json.loads(sys.argv[1]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
for line in sys.stdin:
    want, deadline = int(line), time.monotonic() + 300
    while (n := spark.sql("SELECT count(*) FROM worker_coordinator.records").first()[0]) != want:
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


@pytest.mark.timeout(1200)
def test_a_second_session_reads_the_tables_by_name_while_the_audit_writes(
    capsys, kafka_broker, metastore, tmp_path
) -> None:  # noqa: ANN001
    topic = f"test-metastore-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_broker, topic)
    w = Writers(kafka_broker, topic)
    random_story(101, "shared-a", w.driver)
    here = Where(tmp_path / "warehouse")

    embedded = _spark_conf(here.warehouse)
    shared = _spark_conf(here.warehouse, "--metastore", metastore)
    assert embedded["spark.hadoop.javax.jdo.option.ConnectionURL"].startswith("jdbc:derby:")
    assert shared["spark.hadoop.javax.jdo.option.ConnectionURL"] == metastore
    assert "/postgresql-" in shared["spark.driver.extraClassPath"] and "spark.driver.extraClassPath" not in embedded

    # Their stderr to files: Spark's error lines fill a pipe nobody reads, and the JVM then stops.
    audit_err, reader_err = (tmp_path / "audit.err").open("w+"), (tmp_path / "reader.err").open("w+")
    audit = subprocess.Popen(
        [COORDINATOR, "audit", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", topic,
         *here.args(), "--metastore", metastore, "--trigger", "500ms"],
        stdout=subprocess.PIPE, stderr=audit_err, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    # The reader's JVM starts with the audit's; its session touches the metastore only at its first
    # query, which waits for a count on stdin, sent once the audit has made the metastore's schema
    # and its tables: two sessions creating the schema of an empty database at once would race.
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, json.dumps(shared)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=reader_err, text=True, cwd=tmp_path,
    )  # fmt: skip
    watchdog = threading.Timer(900, audit.kill)
    watchdog.start()
    try:
        first = audit.stdout.readline()
        assert first.startswith("batch 0:"), first + _tail(audit_err)
        seen = []
        for more in (True, False):
            total = len(list(read_topic(kafka_broker.client_config(), topic)))
            reader.stdin.write(f"{total}\n")
            reader.stdin.flush()
            line = reader.stdout.readline()
            assert line, _tail(reader_err)
            seen.append(json.loads(line))
            if more:  # new rows while both sessions run
                random_story(102, "shared-b", w.driver)
        w.close()
        reader.stdin.close()
        assert reader.wait(120) == 0, _tail(reader_err)
        audit.send_signal(signal.SIGTERM)
        assert audit.wait(120) == 0, _tail(audit_err)
    finally:
        watchdog.cancel()
        for process in (reader, audit):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
    before, after = seen
    assert {"records", "events", "rebalances", "ownership", "ownership_open"} <= set(before["names"])
    assert before["names"] == after["names"]
    assert 0 < before["records"] < after["records"]
    assert 0 < before["rebalances"] < after["rebalances"]
    assert before["ownership"] < after["ownership"] and before["events"] < after["events"]
    assert_every_record_once(capsys, kafka_broker, topic, here)


def test_a_bad_metastore_or_setting_is_one_line(capsys, tmp_path) -> None:  # noqa: ANN001
    from coordinator import cli

    code = cli.main(["spark-conf", "--warehouse", str(tmp_path), "--metastore", "mysql://db:3306/hive"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "jdbc:postgresql://" in err and "thrift://" in err
    code = cli.main(["audit", "--warehouse", str(tmp_path), "--conf", "spark.executor.memory"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "expected KEY=VALUE" in err
