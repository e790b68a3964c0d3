"""The main jobs as a user runs them: `coordinator demo` (`make run`) and `coordinator demo --connect`
(`make run-connect`) as processes against the session broker, their exit codes, what they print and
their last line; a demo that fails says `PROBLEM:` and exits 1. And the fleet's scenario files."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import connect_java
import pytest

from coordinator.errors import CliError
from coordinator.sdk.demo import CONNECTORS
from coordinator.sdk.fleet import Event, parse_scenario
from tests.topics import create_topic

# A row of the fleet's table: `  worker-2   connect  epoch 6    orders-source, orders-source-1`.
ROW = re.compile(r"^  (worker-\d+)\s+(?:connect|classic)\s+epoch \d+\s+(.*)$")


def demo(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`coordinator demo ARGS` as a process, as `make run` starts it, in a session of its own: the demo
    says it stops all it started, so once it exited nothing of its session may be left (checked here),
    and a demo that overruns `timeout` is killed with its coordinators, gateway and JVMs, which a kill
    of the demo alone would leave running."""
    with subprocess.Popen(
        [sys.executable, "-m", "coordinator", "demo", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        finally:
            left = _kill_session(process.pid)
    assert not left, f"coordinator demo {' '.join(args)} left processes of its own running (killed now)"
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _kill_session(sid: int) -> bool:
    """SIGKILL to what is left of session `sid` (its process group); whether anything was."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def last_line(text: str) -> str:
    return text.rstrip("\n").rsplit("\n", 1)[-1]


def tables(out: str) -> dict[str, dict[str, set[str]]]:
    """Each step (`=== title ===`) of the story's output: the last table it printed, worker -> items."""
    steps: dict[str, dict[str, set[str]]] = {}
    title, table, rows_before = "", {}, False
    for line in out.splitlines():
        if line.startswith("=== "):
            title, table = line.strip("= "), {}
            steps[title] = table
            continue
        row = ROW.match(line)
        if row:
            if not rows_before:
                table.clear()  # a new table in the same step replaces the one before
            table[row[1]] = set(row[2].split(", ")) - {"nothing"}
        rows_before = bool(row)
    return steps


def step(steps: dict[str, dict[str, set[str]]], starts: str) -> dict[str, set[str]]:
    (title,) = [t for t in steps if t.startswith(starts)]
    return steps[title]


@pytest.mark.integration
def test_coordinator_demo_tells_the_story_and_exits_0(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """`make run`'s command (its CI timeouts, --fast): the story as printed, then its last line."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 4)
    run = demo(
        "--fast",
        "--workers",
        "4",
        "--bootstrap-servers",
        kafka_broker.bootstrap_servers,
        "--topic",
        unique_topic,
        timeout=240,
    )
    assert run.returncode == 0, (run.stdout[-4000:], run.stderr[-4000:])
    assert last_line(run.stdout) == (
        "The story is over: every task has exactly one live owner, the bounced worker got its own work back, "
        "and the new coordinator took over from the topic."
    )
    assert "Traceback" not in run.stderr and "PROBLEM" not in run.stderr
    # What the last line claims, read from the tables the story printed rather than taken on its word.
    steps = tables(run.stdout)
    before = step(steps, "one more worker scales out")
    after = step(steps, "worker-2 restarts and is back")
    assert before["worker-2"] and after["worker-2"] == before["worker-2"]  # its own work, not an empty share
    assert "worker-4   CRASHED" in run.stdout
    crashed = step(steps, "worker-4 crashes")
    assert "worker-4" not in crashed and sorted(crashed) == ["worker-1", "worker-2", "worker-3", "worker-5"]
    assert "a new coordinator loaded the topic" in run.stdout
    final = step(steps, "the coordinator is killed")
    owned = [item for items in final.values() for item in items]
    # Every connector and task once, orders-source grown to 4 tasks by the new coordinator.
    assert len(owned) == len(set(owned)) == sum(CONNECTORS.values()) + len(CONNECTORS) + 1
    assert "orders-source-3" in owned and "worker-4" not in final


@pytest.mark.integration
def test_coordinator_demo_on_a_topic_that_does_not_exist_says_problem_and_exits_1(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """`coordinator demo` run by hand without `make run`'s `coordinator topic create`: the story's first
    step fails, and the demo says why in one PROBLEM line (the coordinator's own error), not a traceback."""
    run = demo("--fast", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", unique_topic, timeout=120)
    assert run.returncode == 1, (run.stdout, run.stderr)
    problems = [line for line in run.stderr.splitlines() if line.startswith("PROBLEM: ")]
    assert len(problems) == 1, run.stderr
    assert problems[0].startswith("PROBLEM: the coordinator (http://127.0.0.1:") and (
        f"exited 1: coordinator serve: error: topic {unique_topic} does not exist" in problems[0]
    ), problems
    assert "Traceback" not in run.stderr + run.stdout
    assert "The story is over" not in run.stdout


@pytest.mark.integration
@pytest.mark.timeout(960)  # the demo's own timeout (900 s) fires first; three JVMs on 2 busy cores
def test_coordinator_demo_connect_runs_unmodified_kafka_connect_and_exits_0(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """`make run-connect`'s command: a coordinator with its Kafka listener, a gateway and three Kafka
    Connect 4.3.1 JVMs of its own (the story starts, stops and outlives them, so no other test's
    workers can stand in). Its exit code rests on its own checks, each printed: no task on two workers
    at any look, every task RUNNING after the failover, the group's replay timeline."""
    connect_java.require()
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 4)
    run = demo("--connect", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", unique_topic, timeout=900)
    assert run.returncode == 0, (run.stdout[-4000:], run.stderr[-4000:])
    assert last_line(run.stdout) == (
        "The story is over: every task ran on at most one worker at every look and ends RUNNING on exactly one; "
        "the workers are unmodified Kafka Connect, the coordinator and the history are ours."
    )
    assert "Traceback" not in run.stderr and "PROBLEM" not in run.stderr
    out = run.stdout
    # Each step was told, in order, with who runs what; the watch looked more than once.
    steps = [
        "two Kafka Connect workers run connector src (6 tasks) on our coordinator",
        "connect-3 joined: it took a share",
        "connect-2 stopped (SIGTERM): its work moved to the others",
        "the coordinator was killed with SIGKILL",
        "the workers carried on with the new coordinator\n",
        "coordinator replay timeline --group demo-real-connect",
    ]
    at = [out.find("== " + s) for s in steps]
    assert -1 not in at and at == sorted(at), dict(zip(steps, at))
    carried_on = out[at[4] : at[5]]
    rows = [line.split() for line in carried_on.splitlines() if line.startswith("   connect-")]
    # Two workers left (connect-2 was stopped), every task of src and the connector itself once.
    assert sorted(r[0] for r in rows) == ["connect-1", "connect-3"], carried_on
    held = [item.rstrip(",") for r in rows for item in r[3:]]
    assert sorted(held) == sorted(["src", *(f"src-{i}" for i in range(6))]), carried_on
    looks = re.search(r"\((\d+) looks at the group, twice a second\)", out)
    assert looks and int(looks[1]) > 1


def test_coordinator_demo_with_too_few_workers_for_its_story_is_a_usage_error() -> None:
    """The story bounces worker-2 and crashes worker-4: fewer than 3 workers is refused before anything
    starts (it was a KeyError's traceback once the story reached worker-4)."""
    run = demo("--workers", "2", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t", timeout=60)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        "coordinator demo: error: --workers 2: the story needs at least 3 (it bounces worker-2 and crashes "
        "worker-4, and one more scales out)"
    ]


def test_scenario_files() -> None:
    events = parse_scenario("""
        # at action args
        8   bounce   worker-2 1.5
        0   join     5
        12  connectors A=3 "B x=2"
        30  stop
    """)
    assert events == [
        Event(0, "join", ("5",)),
        Event(8, "bounce", ("worker-2", "1.5")),
        Event(12, "connectors", ("A=3", "B x=2")),
        Event(30, "stop", ()),
    ]
    for bad, line in (("x join 1", ":1:"), ("1 dance", ":1:"), ("0 join 1\n2", ":2:")):
        with pytest.raises(CliError, match=f"s{line}"):
            parse_scenario(bad, "s")
