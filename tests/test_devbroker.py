"""`coordinator dev-broker`: Apache Kafka on loopback. Each test runs its own cluster on free ports
with its own run dir (the session's broker is not touched)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from coordinator import cli
from coordinator.errors import CliError
from coordinator.tools import devbroker
from coordinator.tools.devbroker import jars

CONSOLE_SCRIPT = Path(sys.executable).with_name("coordinator")
VERSION = jars.kafka_version()

pytestmark = pytest.mark.integration


@pytest.fixture
def port() -> int:
    return devbroker.free_port_block(1)


@pytest.fixture
def dev_broker(port, tmp_path, capsys):
    """Runs `coordinator dev-broker <action>` for the test's port and run dir; stops any broker left."""

    def dev_broker(action: str, *extra: str) -> tuple[int, str, str]:
        code = cli.main(["dev-broker", action, "--port", str(port), "--run-dir", str(tmp_path), *extra])
        out, err = capsys.readouterr()
        return code, out, err

    yield dev_broker
    devbroker.stop(port, tmp_path)


def pid_file(run_dir: Path, port: int, node: int = 1) -> Path:
    return run_dir / f"kafka-{port}" / f"node-{node}" / "pid"


def alive(pid: int) -> bool:
    # A zombie (dead, not reaped yet) has an empty cmdline.
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() != b""
    except FileNotFoundError:
        return False


def brokers(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer arrives
    return len(admin.describe_cluster(request_timeout=10).result().nodes)


def test_up_is_idempotent_and_down_stops_the_broker(dev_broker, port, tmp_path):
    code, out, _ = dev_broker("up")
    assert code == 0
    assert out.startswith(f"Apache Kafka {VERSION} started on 127.0.0.1:{port} (node 1 on 127.0.0.1:{port} pid ")
    pid = int(pid_file(tmp_path, port).read_text())
    log = (tmp_path / f"kafka-{port}" / "node-1" / "server.log").read_text()
    # Our log4j2 configuration is in effect: without the SLF4J binding the broker logs nothing.
    assert f"Kafka version: {VERSION}" in log and "Kafka Server started" in log
    assert brokers(f"127.0.0.1:{port}") == 1
    properties = (tmp_path / f"kafka-{port}" / "node-1" / "server.properties").read_text()
    assert "process.roles=broker,controller" in properties and "auto.create.topics.enable=false" in properties

    code, out, _ = dev_broker("up")
    assert code == 0
    assert out.startswith(
        f"Apache Kafka {VERSION} already running on 127.0.0.1:{port} (node 1 on 127.0.0.1:{port} pid {pid};"
    )
    code, out, _ = dev_broker("status")
    assert code == 0 and f"pid {pid};" in out

    assert dev_broker("down") == (0, f"stopped Apache Kafka {VERSION} on port {port} (pid {pid})\n", "")
    assert not pid_file(tmp_path, port).exists()
    assert not alive(pid)
    assert dev_broker("status") == (1, f"no Apache Kafka running on port {port}\n", "")


def test_down_when_nothing_runs_is_a_no_op(dev_broker, port):
    assert dev_broker("down") == (0, f"no Apache Kafka running on port {port}\n", "")


def test_a_pid_file_of_a_dead_process_is_stale(dev_broker, port, tmp_path):
    assert dev_broker("up")[0] == 0
    pid = int(pid_file(tmp_path, port).read_text())
    devbroker.load(port, tmp_path).kill(1)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid_file(tmp_path, port).write_text(finished.stdout)
    assert dev_broker("status") == (1, f"no Apache Kafka running on port {port}\n", "")
    code, out, _ = dev_broker("up")
    assert code == 0 and "started" in out
    assert int(pid_file(tmp_path, port).read_text()) not in (pid, int(finished.stdout))


def test_a_pid_file_naming_another_live_process_is_stale(dev_broker, port, tmp_path):
    # A recycled pid: the process lives, but it is not our broker; it must not be signalled.
    assert dev_broker("up")[0] == 0
    devbroker.load(port, tmp_path).kill(1)
    pid_file(tmp_path, port).write_text(f"{os.getpid()}\n")
    assert dev_broker("down") == (0, f"no Apache Kafka running on port {port}\n", "")
    assert not pid_file(tmp_path, port).exists()


def test_up_fails_clearly_when_the_port_is_taken(dev_broker, port, tmp_path):
    with socket.create_server(("127.0.0.1", port)):
        code, _, err = dev_broker("up")
    assert code == 1
    assert (
        err == f"coordinator dev-broker: error: port {port} is already in use by another process; pick another --port\n"
    )
    assert not pid_file(tmp_path, port).exists()


def test_bad_flags_and_environment_are_usage_errors(tmp_path):
    for env in ({"BROKER_NODES": "2"}, {"BROKER_PORT": "abc"}, {"BROKER_PORT": "70000"}):
        done = subprocess.run(
            [CONSOLE_SCRIPT, "dev-broker", "status", "--run-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
        assert done.returncode == 2, (env, done.stderr)
        assert "Traceback" not in done.stderr and ("--nodes" in done.stderr or "--port" in done.stderr)


def test_a_broker_that_dies_at_start_is_reported_with_its_log(port, tmp_path, monkeypatch):
    # A java that formats storage as the real one does but cannot run the broker.
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text(
        f"#!/bin/sh\ncase \"$*\" in *kafka.Kafka*) echo 'Error: could not reserve the heap' >&2; exit 3;; esac\n"
        f'exec {jars.java()} "$@"\n'
    )
    (java_home / "bin" / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    with pytest.raises(CliError, match=r"(?s)node 1 exited with status 3 before answering.*could not reserve the heap"):
        devbroker.start(port, tmp_path)
    assert not pid_file(tmp_path, port).exists()


def test_without_maven_the_first_run_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CliError, match=r"Maven \(mvn\) is not on PATH"):
        jars.libs()


def test_the_broker_outlives_the_console_script_that_started_it(port, tmp_path):
    options = ["--port", str(port), "--run-dir", str(tmp_path)]
    try:
        up = subprocess.run([CONSOLE_SCRIPT, "dev-broker", "up", *options], capture_output=True, text=True)
        assert up.returncode == 0, up.stderr
        status = subprocess.run([CONSOLE_SCRIPT, "dev-broker", "status", *options], capture_output=True, text=True)
        assert status.returncode == 0
        pid = int(pid_file(tmp_path, port).read_text())
        assert os.getsid(pid) == pid  # its own session: Ctrl-C in the shell that ran make does not reach it
    finally:
        down = subprocess.run([CONSOLE_SCRIPT, "dev-broker", "down", *options], capture_output=True, text=True)
    assert down.stdout == f"stopped Apache Kafka {VERSION} on port {port} (pid {pid})\n"
    assert not alive(pid)


def test_three_nodes_a_killed_node_restarts_on_its_own_storage(kafka_cluster3):
    assert [n.port for n in kafka_cluster3.nodes] == [kafka_cluster3.port + i for i in range(3)]
    properties = kafka_cluster3.node(2).properties.read_text()
    assert "default.replication.factor=3" in properties and "min.insync.replicas=2" in properties
    assert "transaction.state.log.min.isr=2" in properties
    assert brokers(kafka_cluster3.bootstrap_servers) == 3
    meta = (kafka_cluster3.node(2).dir / "data" / "meta.properties").read_text()
    kafka_cluster3.kill(2)
    assert kafka_cluster3.pids()[2] is None
    # The fenced node leaves the metadata after its session; a client may meanwhile still pick it as
    # the node to ask (describe_cluster then times out), which is also "not yet".
    deadline = time.monotonic() + 60
    while True:
        try:
            if brokers(kafka_cluster3.node(1).address) == 2:
                break
        except KafkaException:
            pass
        assert time.monotonic() < deadline, "the cluster still lists the killed node"
        time.sleep(0.5)
    kafka_cluster3.start_node(2)
    assert brokers(kafka_cluster3.bootstrap_servers) == 3
    assert (kafka_cluster3.node(2).dir / "data" / "meta.properties").read_text() == meta  # not formatted again


def test_cluster_ids_never_start_with_a_dash():
    # StorageTool reads an id starting with '-' as an option; 1 id in 64 would fail to format.
    from coordinator.tools.devbroker import cluster

    ids = [cluster._random_cluster_id() for _ in range(5_000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids) and len(set(ids)) == len(ids)
