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

from coordinator.tools.process import ServeProcess
from tests.topics import create_topic

pytestmark = pytest.mark.integration

FLAGS = (
    "--allow-anonymous",
    "--heartbeat-interval-ms",
    "200",
    "--session-timeout-ms",
    "20000",
    "--initial-assignment-delay-ms",
    "0",
    "--scheduled-rebalance-max-delay-ms",
    "60000",
)
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
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator",
            "worker",
            "--group",
            "fleet",
            "--url",
            serve.url,
            "--names",
            *names,
            "--events",
            str(events),
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _wait_for(events: Path, done, timeout: float = 30.0) -> list[dict]:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = _events(events)
        if done(seen):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"not seen within {timeout} s: {_events(events)}")


def test_named_workers_log_events_stop_on_sigterm_and_come_back_as_the_same_members(
    kafka_broker, unique_topic, tmp_path: Path
) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    serve = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *FLAGS).start()
    events = tmp_path / "events.jsonl"
    try:
        status, _ = serve.request(
            "PUT", "/v1/groups/fleet/connectors", {"Connectors": [{"Name": "A", "Tasks": 3}, {"Name": "B", "Tasks": 2}]}
        )
        assert status == 200

        def settled(seen: list[dict]) -> bool:
            owned = _owned(seen)
            return (set().union(*owned.values()) == WORK if owned else False) and {
                e["worker"] for e in seen if e["event"] == "rebalance"
            } >= {"alpha", "beta"}

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
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "worker",
            "--group",
            "g",
            "--url",
            "http://127.0.0.1:9",
            "--names",
            "a",
            "--events",
            str(tmp_path / "no" / "such" / "f"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--events" in result.stderr and "Traceback" not in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "coordinator", "worker", "--group", "g", "--count", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--count" in result.stderr and "Traceback" not in result.stderr


DOCKER = Path(__file__).resolve().parent.parent / "docker"
WORKER_TOKEN = "REPLACE-ME-example-worker-token-7f3c9a"  # User:connect-workers in docker/tokens.example
OPS_TOKEN = "REPLACE-ME-example-ops-token-2b8e41"  # User:ops


def test_a_refused_scenario_line_is_one_line_and_a_clean_non_zero_exit(
    kafka_broker, unique_topic, tmp_path: Path
) -> None:  # noqa: ANN001
    """Issue 29, the newcomer's findings: with the example ACLs the workers may Read their group but
    not Alter it, so a scenario's `connectors` line is answered 403. The fleet says so in one line,
    its workers leave, and it exits 1, without a traceback. The scenario alone decides how many
    workers join (its `0 join 2`, not 3 more from --count's default)."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    serve = ServeProcess(
        kafka_broker.bootstrap_servers,
        unique_topic,
        tmp_path,
        "--tokens",
        str(DOCKER / "tokens.example"),
        "--acls",
        str(DOCKER / "acls.example"),
        *FLAGS[1:],
    ).start()
    events, scenario = tmp_path / "events.jsonl", tmp_path / "scenario.txt"
    scenario.write_text("0 join 2\n3 connectors A=2\n60 stop\n")
    try:
        status, _ = serve.request(
            "PUT", "/v1/groups/connect-acl/connectors", {"Connectors": [{"Name": "A", "Tasks": 1}]}, token=OPS_TOKEN
        )
        assert status == 200
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "coordinator",
                "worker",
                "--group",
                "connect-acl",
                "--url",
                serve.url,
                "--token",
                WORKER_TOKEN,
                "--scenario",
                str(scenario),
                "--events",
                str(events),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert result.returncode == 1, result
        assert "Traceback" not in result.stderr + result.stdout, result.stderr
        errors = [line for line in result.stderr.splitlines() if "error" in line]
        assert errors == [
            line
            for line in errors
            if line.startswith("coordinator worker: error: setting the connectors of group connect-acl: HTTP 403")
        ]
        assert len(errors) == 1, result.stderr
        seen = _events(events)
        assert {e["worker"] for e in seen} == {"worker-1", "worker-2"}  # the scenario's two, no more
        assert set().union(*_owned(seen).values()) == set() and any(e["event"] == "revoked" for e in seen)
        assert "joined: worker-1, worker-2" in result.stdout and "worker-3" not in result.stdout
    finally:
        serve.stop()


def test_a_second_sigterm_while_leaving_a_gone_coordinator_exits_at_once_without_a_traceback(
    kafka_broker, unique_topic, tmp_path: Path
) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    serve = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *FLAGS).start()
    events = tmp_path / "events.jsonl"
    fleet = None
    try:
        status, _ = serve.request("PUT", "/v1/groups/fleet/connectors", {"Connectors": [{"Name": "A", "Tasks": 2}]})
        assert status == 200
        fleet = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coordinator",
                "worker",
                "--group",
                "fleet",
                "--url",
                serve.url,
                "--names",
                "alpha",
                "beta",
                "--events",
                str(events),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for(events, lambda seen: set().union(*_owned(seen).values()) == {"A", "A-0", "A-1"})
        serve.kill()  # the coordinator is gone: each leave now retries for the client's 30 s
        fleet.send_signal(signal.SIGTERM)
        time.sleep(1.5)
        assert fleet.poll() is None, "the first SIGTERM should have started a graceful leave that waits"
        started = time.monotonic()
        fleet.send_signal(signal.SIGTERM)
        out, err = fleet.communicate(timeout=20)
        assert time.monotonic() - started < 10, "the second SIGTERM did not cut the leave short"
        assert fleet.returncode == 1, (out, err)
        assert "Traceback" not in out + err and "CancelledError" not in out + err, err
        (line,) = [x for x in err.splitlines() if x.startswith("coordinator worker: error:")]
        assert "stopped again while the workers were leaving" in line and "alpha" in line
        assert "summary:" in out
    finally:
        if fleet is not None and fleet.poll() is None:
            fleet.kill()
            fleet.communicate()
        serve.stop()
