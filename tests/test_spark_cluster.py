"""`coordinator audit --master spark://...` on a standalone cluster (issue 31 item 2).

A master and two workers, JVMs of their own started from pyspark's jars (tests/spark_cluster.py);
executors that run a Python without the project, so that our code reaches them only as the driver
ships it. The audit runs there as a driver process of its own, one worker's executor is killed while
it runs, and the tables must still hold every record once and agree with `coordinator replay`
(the local audit's checks, tests/test_spark_audit.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from replay_scenarios import random_story
from spark_cluster import executor_python, standalone_cluster

from replay.source import read_topic
from tests.support.spark_audit import Where, Writers, assert_agrees_with_replay, assert_every_record_once, make_topic

pytestmark = pytest.mark.integration

COORDINATOR = str(Path(sys.executable).with_name("coordinator"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):  # noqa: ANN001, ANN201
    python = executor_python()
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as c:
        c.python = python  # what spark.pyspark.python names for the executors
        yield c


@pytest.fixture(scope="module")
def topic(kafka_broker) -> str:  # noqa: ANN001
    """A topic with a few groups' histories: enough records for many small micro-batches."""
    name = f"test-cluster-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_broker, name)
    w = Writers(kafka_broker, name)
    for seed in range(91, 93):
        random_story(seed, f"cluster-{seed}", w.driver)
    w.close()
    return name


# A driver on the cluster that runs our Python decoder on the executors (mapInArrow): it needs the
# shipped code there, where the executors' Python has none of ours.
_SHIPPED = """
import json, sys
from pathlib import Path
from spark.session import session
from spark.audit import source_options
from spark.decode import decode_arrow

master, python, bootstrap, topic, scratch = sys.argv[1:]
spark = session(Path(scratch), master=master, conf={"spark.pyspark.python": python})
raw = spark.read.format("kafka").options(**source_options({"bootstrap.servers": bootstrap}, topic)).load()
rows = decode_arrow(raw).where("error IS NULL").count()

def where_from(_):
    import records, spark.decode
    yield records.__file__ + " " + spark.decode.__file__ + " " + sys.executable

origins = sorted(set(spark.sparkContext.parallelize(range(4), 4).mapPartitions(where_from).collect()))
print(json.dumps({"rows": rows, "origins": origins}))
"""


def test_the_executors_get_our_code_from_the_driver(cluster, kafka_broker, topic, tmp_path) -> None:  # noqa: ANN001
    done = subprocess.run(
        [sys.executable, "-c", _SHIPPED, cluster.url, str(cluster.python), kafka_broker.bootstrap_servers, topic,
         str(tmp_path / "scratch")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["rows"] == len(list(read_topic(kafka_broker.client_config(), topic)))
    assert answer["origins"]
    for origin in answer["origins"]:  # imported from the zip the driver shipped, by the executors' Python
        records, decode, python = origin.split()
        assert ".zip/records/" in records and ".zip/spark/" in decode and python == str(cluster.python)


@pytest.mark.timeout(1200)
def test_the_audit_on_a_cluster_survives_a_lost_executor(capsys, cluster, kafka_broker, topic, tmp_path) -> None:  # noqa: ANN001
    here = Where(tmp_path / "warehouse")
    # 80 offsets a batch: the topic's two stories (about 580 offsets with the transactions' markers)
    # take about 8 batches, so that the kill in batch 2 has batches after it; each batch here is
    # seconds of cluster work, so no more of them than that.
    command = [
        COORDINATOR, "audit", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", topic, *here.args(),
        "--master", cluster.url, "--conf", f"spark.pyspark.python={cluster.python}",
        "--trigger", "available-now", "--max-offsets-per-trigger", "80", "--min-partitions", "4",
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=tmp_path,
    )
    stderr: list[str] = []
    threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True).start()
    watchdog = threading.Timer(900, process.kill)
    watchdog.start()
    killed, batches = [], []
    try:
        for line in process.stdout:
            if line.startswith("batch "):
                batches.append(line)
            # After batch 1, the next one is already under way: kill worker 0's executor in it.
            if len(batches) == 2 and not killed:
                killed = cluster.executors(0)
                for pid in killed:
                    os.kill(pid, signal.SIGKILL)
        code = process.wait(60)
    finally:
        watchdog.cancel()
        process.kill()
    assert killed, "worker 0 ran no executor to kill"
    assert code == 0, "".join(stderr)[-3000:]
    assert len(batches) > 3, batches  # the kill fell among the audit's batches, not after them
    # The master saw the executor go and gave the application another on that worker.
    log = (cluster.root / "master.log").read_text()
    assert re.search(r"Removing executor app-\S+ because it is EXITED", log), log[-2000:]
    assert_every_record_once(capsys, kafka_broker, topic, here)
    assert_agrees_with_replay(capsys, kafka_broker, topic, here)
