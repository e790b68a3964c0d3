"""`coordinator dev-broker`: each test runs its own Tansu on a free port with its own run dir."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from coordinator import cli, devbroker
from coordinator.errors import CliError

CONSOLE_SCRIPT = Path(sys.executable).with_name("coordinator")

pytestmark = pytest.mark.integration


@pytest.fixture
def port() -> int:
    return devbroker.free_port()


@pytest.fixture
def dev_broker(port, tmp_path, capsys):
    """Runs `coordinator dev-broker <action>` for the test's port and run dir; stops any broker left."""

    def dev_broker(action: str) -> tuple[int, str, str]:
        code = cli.main(["dev-broker", action, "--port", str(port), "--run-dir", str(tmp_path)])
        out, err = capsys.readouterr()
        return code, out, err

    yield dev_broker
    devbroker.stop(port, tmp_path)


def pid_file(run_dir: Path, port: int) -> Path:
    return run_dir / f"tansu-{port}.pid"


def alive(pid: int) -> bool:
    # A zombie (dead, not reaped yet) has an empty cmdline.
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() != b""
    except FileNotFoundError:
        return False


def test_up_is_idempotent_and_down_stops_the_broker(dev_broker, port, tmp_path):
    code, out, _ = dev_broker("up")
    assert code == 0
    assert out.startswith(f"tansu started on 127.0.0.1:{port} (pid ")
    pid = int(pid_file(tmp_path, port).read_text())
    assert (tmp_path / f"tansu-{port}.log").read_text().startswith("tansu broker")
    assert AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=5).brokers

    code, out, _ = dev_broker("up")
    assert code == 0
    assert out == f"tansu already running on 127.0.0.1:{port} (pid {pid}, log {tmp_path}/tansu-{port}.log)\n"

    status = f"tansu running on 127.0.0.1:{port} (pid {pid}, log {tmp_path}/tansu-{port}.log)\n"
    assert dev_broker("status") == (0, status, "")

    assert dev_broker("down") == (0, f"stopped tansu on port {port} (pid {pid})\n", "")
    assert not pid_file(tmp_path, port).exists()
    assert not alive(pid)
    assert dev_broker("status") == (1, f"no tansu running on port {port}\n", "")


def test_down_when_nothing_runs_is_a_no_op(dev_broker, port):
    assert dev_broker("down") == (0, f"no tansu running on port {port}\n", "")


def test_a_pid_file_of_a_dead_process_is_stale(dev_broker, port, tmp_path):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid_file(tmp_path, port).write_text(finished.stdout)
    code, out, _ = dev_broker("up")
    assert code == 0
    assert "tansu started" in out
    assert int(pid_file(tmp_path, port).read_text()) != int(finished.stdout)


def test_a_pid_file_naming_another_live_process_is_stale(dev_broker, port, tmp_path):
    # A recycled pid: the process lives, but it is not our Tansu; it must not be signalled.
    pid_file(tmp_path, port).write_text(f"{os.getpid()}\n")
    assert dev_broker("down") == (0, f"no tansu running on port {port}\n", "")
    assert not pid_file(tmp_path, port).exists()


def test_up_fails_clearly_when_the_port_is_taken(dev_broker, port, tmp_path):
    with socket.create_server(("127.0.0.1", port)):
        code, _, err = dev_broker("up")
    assert code == 1
    assert err.startswith("coordinator dev-broker: error: ")
    assert err.endswith(f"port {port} is already in use by another process; pick another --port\n")
    assert not pid_file(tmp_path, port).exists()


def test_a_broker_that_dies_at_start_is_reported_with_its_log(port, tmp_path, monkeypatch):
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'cannot open storage' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CALF_TANSU_BIN", str(fake))
    with pytest.raises(CliError, match=r"(?s)tansu exited with status 3 before answering.*cannot open storage"):
        devbroker.start(port, tmp_path)
    assert not pid_file(tmp_path, port).exists()


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
    assert down.stdout == f"stopped tansu on port {port} (pid {pid})\n"
    assert not alive(pid)
