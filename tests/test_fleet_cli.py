"""`coordinator worker` as a process, as the side-by-side benchmark and a service manager run it: named
workers (static members), the `--events` log, SIGTERM as a graceful stop, and a restart under the same
name taking its work back. Against a `coordinator serve` on the session's Apache Kafka."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from coordinator.cli import main as coordinator
from coordinator.tools.process import ServeProcess

pytestmark = pytest.mark.integration

FLAGS = ("--allow-anonymous", "--heartbeat-interval-ms", "200", "--session-timeout-ms", "20000",
         "--initial-assignment-delay-ms", "0", "--scheduled-rebalance-max-delay-ms", "60000")
WORK = {"A", "A-0", "A-1", "A-2", "B", "B-0", "B-1"}


def _events(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def _owned(events: list[dict]) -> dict[str, set[str]]:
    owned: dict[str, set[str]] = defaultdict(set)
    for e in events:
        items = set(e.get("connectors", ())) | set(e.get("tasks", ()))
        if e["event"] == "assigned":
            owned[e["worker"]] |= items
        elif e["event"] in ("revoked", "lost"):
            owned[e["worker"]] -= items
    return owned


def _fleet(serve: ServeProcess, events: Path, *names: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "coordinator", "worker", "--group", "fleet", "--url", serve.url,
                             "--names", *names, "--events", str(events), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait_for(events: Path, done, timeout: float = 30.0) -> list[dict]:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = _events(events)
        if done(seen):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"not seen within {timeout} s: {_events(events)}")


def test_named_workers_log_events_stop_on_sigterm_and_come_back_as_the_same_members(
        kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    assert coordinator(["topic", "create", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic",
                        unique_topic, "--partitions", "1", "--replication-factor", "1"]) == 0
    serve = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *FLAGS).start()
    events = tmp_path / "events.jsonl"
    try:
        status, _ = serve.request("PUT", "/v1/groups/fleet/connectors",
                                  {"Connectors": [{"Name": "A", "Tasks": 3}, {"Name": "B", "Tasks": 2}]})
        assert status == 200

        def settled(seen: list[dict]) -> bool:
            owned = _owned(seen)
            return (set().union(*owned.values()) == WORK if owned else False) and \
                {e["worker"] for e in seen if e["event"] == "rebalance"} >= {"alpha", "beta"}

        fleet = _fleet(serve, events, "alpha", "beta")
        first = _wait_for(events, settled)
        before = _owned(first)
        assert before["alpha"] and before["beta"] and not before["alpha"] & before["beta"]
        assert all(isinstance(e["ts"], float) and e["ts"] > 1e9 for e in first)  # wall-clock seconds
        assert all(e["latency_ms"] >= 0 for e in first if e["event"] == "rebalance")

        # SIGTERM: every worker revokes what it ran (the events say so) and the process exits 0.
        fleet.send_signal(signal.SIGTERM)
        output = fleet.communicate(timeout=30)[0].decode()
        assert fleet.returncode == 0, output
        assert "Traceback" not in output
        after_stop = _events(events)
        assert not any(_owned(after_stop).values()), "a worker exited with work it never revoked"
        gone = len(after_stop)

        # The same names again: the static members come back to their own work, nothing moves.
        again = _fleet(serve, events, "alpha", "beta")
        try:
            back = _wait_for(events, lambda seen: settled(seen[gone:]))
            assert _owned(back[gone:]) == before
        finally:
            again.send_signal(signal.SIGTERM)
            again.communicate(timeout=30)
        assert again.returncode == 0
    finally:
        serve.stop()


def test_a_taken_name_and_a_bad_events_path_are_clear_errors(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "coordinator", "worker", "--group", "g", "--url",
                             "http://127.0.0.1:9", "--names", "a", "--events", str(tmp_path / "no" / "such" / "f")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--events" in result.stderr and "Traceback" not in result.stderr
    result = subprocess.run([sys.executable, "-m", "coordinator", "worker", "--group", "g", "--count", "-1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--count" in result.stderr and "Traceback" not in result.stderr
