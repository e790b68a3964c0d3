"""The admin command line.

- `coordinator groups describe` against a stand-in coordinator: one HTTP endpoint that names itself
  the group's coordinator and answers describe with what the state machine describes (departures).
- The Kafka-shaped CLI (issue 19 item 5) against two `coordinator serve` instances in group mode on
  the session's Apache Kafka and a fleet of workers: Kafka's flag names and `--command-config`,
  `--group`, describe's `--members [--verbose]`, `--state` and `--tasks`, ISO times, `--watch`,
  `groups list` across instances, `dump --decode`, `--format` everywhere, `--version`, completion
  and the scenario format in `worker --help`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import orjson
import pytest
from confluent_kafka import Producer
from serve_workers import served, wait_for

import records

from coordinator.cli import build_parser
from coordinator.cli import main as coordinator
from coordinator.core.views import connector_status
from coordinator.sdk.fleet import parse_scenario
from coordinator.tools.partitions import partition_for
from coordinator.tools.process import ServeProcess
from tests.signals import default_sigint
from tests.support.admin import G, serving, static_member_crashed

# Most tests here drive the admin commands against a fleet of `coordinator serve` processes on the
# session broker; the others read a state machine's answers in memory.
pytestmark = pytest.mark.integration


def test_describe_shows_who_left_and_why_in_the_table_and_the_json(capsys: pytest.CaptureFixture) -> None:
    d = static_member_crashed()
    epoch = d.state.groups[G].group_epoch
    with serving(d.coordinator) as url:
        assert coordinator(["groups", "describe", G, "--url", url]) == 0
        out = capsys.readouterr().out
        assert coordinator(["groups", "describe", G, "--url", url, "--format", "json"]) == 0
        described = orjson.loads(capsys.readouterr().out)
    departures = out[out.index(f"removed by the change to group epoch {epoch}:") :].splitlines()[1:]
    assert [line.split(None, 2) for line in departures] == [
        ["MEMBER", "INSTANCE", "WHY"],
        ["S2", "i-2", "fenced: no heartbeat within its session timeout"],
    ]
    assert described["GroupEpoch"] == epoch and described["Departures"] == [
        {
            "MemberId": "S2",
            "InstanceId": "i-2",
            "Reason": "session-timeout",
            "ReasonText": "fenced: no heartbeat within its session timeout",
        }
    ]


def test_describe_tasks_speaks_the_status_endpoints_words_and_shows_the_timeouts(capsys: pytest.CaptureFixture) -> None:
    """Issue 29 item 6: one vocabulary for where a task is. The coordinator knows what it assigned,
    never that a task runs: describe --tasks (table and JSON) says what the status endpoint
    (views.connector_status) says, item by item. The default view shows the group's timeouts."""
    d = static_member_crashed()  # W1 holds A and A-0; S2's A-1 is deferred until the scheduled rebalance
    status = connector_status(d.state, d.coordinator.config, G, "A")
    want = {("A", None): status.connector, **{("A", n): s for n, s in status.tasks}}
    with serving(d.coordinator) as url:
        assert coordinator(["groups", "describe", G, "--url", url, "--tasks", "--format", "json"]) == 0
        rows = orjson.loads(capsys.readouterr().out)
        assert coordinator(["groups", "describe", G, "--url", url, "--tasks"]) == 0
        tasks = capsys.readouterr().out
        assert coordinator(["groups", "describe", G, "--url", url]) == 0
        default = capsys.readouterr().out
    got = {(r["Connector"], r["Task"]): (r["Status"], r["Member"] or r["Revoking"], r["DeferredUntilMs"]) for r in rows}
    assert got == {k: (s.state, s.member_id, s.deferred_until_ms) for k, s in want.items()}
    assert {r["Status"] for r in rows} == {"ASSIGNED", "UNASSIGNED"} and [r["Deferred"] for r in rows] == [
        False,
        False,
        True,
    ]
    at = d.coordinator.describe_group(G).scheduled_rebalance_at_ms
    until = datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at % 1000:03d}Z"
    assert [line.split() for line in tasks.splitlines()] == [
        ["CONNECTOR", "TASK", "STATUS", "MEMBER", "REVOKING", "TARGET", "DEFERRED-UNTIL"],
        ["A", "-", "ASSIGNED", "W1", "-", "W1", "-"],
        ["A", "0", "ASSIGNED", "W1", "-", "W1", "-"],
        ["A", "1", "UNASSIGNED", "-", "-", "-", until],
    ]
    assert "running" not in tasks + default and f"deferred: A-1 unassigned until {until}" in default
    assert (
        "timeouts: session timeout 10000 ms, heartbeat interval 1000 ms, rebalance timeout each member's own, "
        "scheduled rebalance max delay "
        f"{d.coordinator.config.scheduled_rebalance_max_delay_ms} ms, initial assignment delay"
    ) in default


def test_deferred_work_without_a_rebalance_time_is_said_plainly(capsys: pytest.CaptureFixture) -> None:
    """Deferred with no time set (the scheduled rebalance has run; the status endpoint says null):
    it waits for the next target assignment, and describe says so rather than "a time not yet set"."""
    d = static_member_crashed()

    class NoTime:
        def describe_group(self, group_id: str):  # noqa: ANN201
            return msgspec.structs.replace(d.coordinator.describe_group(group_id), scheduled_rebalance_at_ms=None)

    with serving(NoTime()) as url:
        assert coordinator(["groups", "describe", G, "--url", url, "--tasks"]) == 0
        tasks = capsys.readouterr().out
        assert coordinator(["groups", "describe", G, "--url", url, "--tasks", "--format", "json"]) == 0
        rows = orjson.loads(capsys.readouterr().out)
        assert coordinator(["groups", "describe", G, "--url", url]) == 0
        default = capsys.readouterr().out
    assert tasks.splitlines()[3].split() == ["A", "1", "UNASSIGNED", "-", "-", "-", "next-target"]
    assert "next-target: deferred, no rebalance time is set: it goes out with the next target assignment" in tasks
    assert rows[2]["Deferred"] is True and rows[2]["DeferredUntilMs"] is None and rows[2]["Status"] == "UNASSIGNED"
    assert "deferred: A-1 unassigned until the next target assignment (no rebalance time is set)" in default
    assert "not yet set" not in tasks + default


def test_connectors_set_and_config_set_say_what_they_set(capsys: pytest.CaptureFixture) -> None:
    puts: list = []
    with serving(static_member_crashed().coordinator, puts) as url:
        assert coordinator(["connectors", "set", G, "A=2", "B=1", "--url", url]) == 0
        assert capsys.readouterr().out == f"group {G}: connectors set to A (2 tasks), B (1 task)\n"
        assert coordinator(["connectors", "set", G, "--url", url]) == 0
        assert capsys.readouterr().out == f"group {G}: connectors set to none (every connector removed)\n"
        assert (
            coordinator(
                ["config", "set", G, "--session-timeout-ms", "7000", "--heartbeat-interval-ms", "700", "--url", url]
            )
            == 0
        )
        assert capsys.readouterr().out == (
            f"group {G}: config set: session timeout 7000 ms, heartbeat interval 700 ms; the server's default for "
            "rebalance timeout, scheduled rebalance max delay, initial assignment delay\n"
        )
        assert coordinator(["config", "set", G, "--session-timeout-ms", "7000", "--url", url, "--format", "json"]) == 0
        assert orjson.loads(capsys.readouterr().out)["SessionTimeoutMs"] == 7000
    assert [path for path, _ in puts] == [f"/v1/groups/{G}/connectors"] * 2 + [f"/v1/groups/{G}/config"] * 2
    assert puts[0][1] == {"Connectors": [{"Name": "A", "Tasks": 2}, {"Name": "B", "Tasks": 1}]}


def test_describe_says_nothing_of_departures_when_the_last_change_removed_nobody(capsys: pytest.CaptureFixture) -> None:
    d = static_member_crashed()
    d.set_connectors(G, {"A": 3})  # a new epoch, written by a change that removed nobody
    with serving(d.coordinator) as url:
        assert coordinator(["groups", "describe", G, "--url", url]) == 0
        out = capsys.readouterr().out
        assert coordinator(["groups", "describe", G, "--url", url, "--format", "json"]) == 0
        described = orjson.loads(capsys.readouterr().out)
    assert "removed by" not in out and "WHY" not in out
    assert described["Departures"] == []


# --- the Kafka-shaped CLI (issue 19 item 5), against two `coordinator serve` instances in group mode ---
# on the session's Apache Kafka: --group, describe's views, --watch, groups list across instances,
# dump --decode, --format, --version, completion and worker --help.

PARTITIONS = 4
CONSOLE = [sys.executable, "-m", "coordinator"]
WATCHED = "watched-group"


@dataclass
class Fleet:
    """Two coordinator instances sharing the topic's partitions, and a fleet of workers of WATCHED."""

    a: ServeProcess
    b: ServeProcess
    topic: str
    bootstrap: str
    workers: subprocess.Popen
    log_dir: Path


def _cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = coordinator(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def fleet(kafka_broker, tmp_path_factory) -> Iterator[Fleet]:
    log_dir = tmp_path_factory.mktemp("admin-cli")
    topic = f"test-admin-cli-{uuid.uuid4().hex[:8]}"
    # Kafka's spelling of the flag; --bootstrap-servers (the instances' ServeProcess) is its alias.
    assert (
        coordinator(
            [
                "topic",
                "create",
                "--bootstrap-server",
                kafka_broker.bootstrap_servers,
                "--topic",
                topic,
                "--partitions",
                str(PARTITIONS),
                "--replication-factor",
                "1",
            ]
        )
        == 0
    )
    a, b = (
        ServeProcess(
            kafka_broker.bootstrap_servers,
            topic,
            log_dir,
            "--allow-anonymous",
            "--ownership",
            "group",
            "--ownership-session-timeout-ms",
            "6000",
        )
        for _ in range(2)
    )
    workers = None
    try:
        a.start()
        wait_for(lambda: served(a) == set(range(PARTITIONS)), 60, "the first instance to take every partition")
        b.start()
        wait_for(
            lambda: served(a) | served(b) == set(range(PARTITIONS)) and served(b) and not served(a) & served(b),
            60,
            "the partitions to be shared",
        )
        # WATCHED: two workers (the client-side incremental cooperative assignor), worker-2 crashes at 4 s:
        # its session (2 s) ends and its work waits, deferred, for the scheduled rebalance (2 min away).
        assert (
            coordinator(
                [
                    "config",
                    "set",
                    "--group",
                    WATCHED,
                    "--session-timeout-ms",
                    "2000",
                    "--heartbeat-interval-ms",
                    "300",
                    "--scheduled-rebalance-max-delay-ms",
                    "120000",
                    "--url",
                    a.url,
                ]
            )
            == 0
        )
        assert coordinator(["connectors", "set", "--group", WATCHED, "A=2", "B=1", "--url", b.url]) == 0
        scenario = log_dir / "scenario.txt"
        scenario.write_text("4 crash worker-2\n600 stop\n")
        workers = subprocess.Popen(
            [
                *CONSOLE,
                "worker",
                "--group",
                WATCHED,
                "--count",
                "2",
                "--url",
                a.url,
                "--scenario",
                str(scenario),
                "--quiet",
            ],
            stdout=(log_dir / "workers.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        yield Fleet(a, b, topic, kafka_broker.bootstrap_servers, workers, log_dir)
    finally:
        if workers is not None:
            workers.terminate()
            try:
                workers.wait(15)
            except subprocess.TimeoutExpired:
                workers.kill()
        a.stop()
        b.stop()


def _described(fleet: Fleet) -> dict:
    _, body = fleet.a.request("POST", "/v1/find-coordinator", {"GroupId": WATCHED})
    return ServeProcess.request(fleet.a if body["Url"] == fleet.a.url else fleet.b, "GET", f"/v1/groups/{WATCHED}")[1]


def _deferred(fleet: Fleet) -> dict:
    """WATCHED once worker-2's work is deferred (worker-1 runs the rest)."""
    wait_for(
        lambda: (
            (d := _described(fleet)).get("Deferred", {}).get("Tasks")
            and len(d["Members"]) == 1
            and d["State"] == "STABLE"
        ),
        60,
        "worker-2's work to be deferred",
    )
    return _described(fleet)


def test_group_is_a_flag_or_the_first_argument_never_both(fleet: Fleet, capsys: pytest.CaptureFixture) -> None:
    url = ["--url", fleet.a.url]
    # `connectors set --group G A=2`: with the flag, every word is a connector.
    assert _cli(capsys, "connectors", "set", "--group", "flagged", "A=2", "B=1", *url)[0] == 0
    assert _cli(capsys, "connectors", "set", "positional", "A=1", *url)[0] == 0
    assert _cli(capsys, "config", "set", "--group", "flagged", "--session-timeout-ms", "7000", *url)[0] == 0
    code, out, _ = _cli(capsys, "groups", "describe", "--group", "flagged", "--format", "json", *url)
    described = orjson.loads(out)
    assert code == 0 and described["Connectors"] == [{"Name": "A", "Tasks": 2}, {"Name": "B", "Tasks": 1}]
    assert described["SessionTimeoutMs"] == 7000
    code, out, _ = _cli(capsys, "groups", "describe", "positional", "--format", "json", *url)
    assert code == 0 and orjson.loads(out)["Connectors"] == [{"Name": "A", "Tasks": 1}]
    for argv, says in (
        (["groups", "describe", "flagged", "--group", "flagged"], "the group is given twice"),
        (["config", "set", "x", "--group", "y"], "the group is given twice"),
        (["groups", "describe"], "which group? pass --group GROUP"),
        (["connectors", "set", "--group", "g", "nonsense"], "every argument is a connector"),
        (["groups", "describe", "--group", "flagged", "--members", "--tasks"], "one view at a time"),
        (["groups", "describe", "--group", "flagged", "--verbose"], "--verbose goes with --members"),
    ):
        code, _, err = _cli(capsys, *argv, *url)
        assert code == 2 and says in err and len(err.splitlines()) == 1 and "Traceback" not in err, (argv, err)


def test_describe_members_state_and_tasks(fleet: Fleet, capsys: pytest.CaptureFixture) -> None:
    d = _deferred(fleet)
    url = ["--url", fleet.b.url]  # any instance: find-coordinator leads to the group's
    (member,) = d["Members"]
    owner = fleet.a if _described(fleet)["Coordinator"] == fleet.a.url else fleet.b
    assert d["Coordinator"] == owner.url and d["Partition"] == partition_for(WATCHED, PARTITIONS)
    assert partition_for(WATCHED, PARTITIONS) in served(owner)

    code, out, _ = _cli(capsys, "groups", "describe", "--group", WATCHED, "--members", *url)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["MEMBER", "INSTANCE", "CLIENT", "HOST", "PROTOCOL", "EPOCH", "STATE"]
    assert lines[1].split() == [
        member["MemberId"],
        "worker-1",
        "coordinator-worker",  # the fleet's client id (Client-Id), not the principal
        "127.0.0.1",
        "connect",
        str(member["MemberEpoch"]),
        "STABLE",
    ]
    code, out, _ = _cli(capsys, "groups", "describe", "--group", WATCHED, "--members", "--verbose", *url)
    lines = out.splitlines()
    assert lines[0].split()[-3:] == ["ASSIGNED", "REVOKING", "TARGET"]
    owns = ",".join(
        [*member["Assignment"]["Connectors"], *(f"{t['Connector']}-{t['Task']}" for t in member["Assignment"]["Tasks"])]
    )
    assert lines[1].split()[-3:] == [owns, "-", owns]
    code, out, _ = _cli(capsys, "groups", "describe", "--group", WATCHED, "--members", "--format", "json", *url)
    assert [m["ClientHost"] for m in orjson.loads(out)] == ["127.0.0.1"]

    code, out, _ = _cli(capsys, "groups", "describe", "--group", WATCHED, "--state", *url)
    header, row = out.splitlines()
    assert header.split() == [
        "GROUP",
        "COORDINATOR",
        "PARTITION",
        "ASSIGNOR",
        "STATE",
        "GROUP-EPOCH",
        "ASSIGNMENT-EPOCH",
        "MEMBERS",
    ]
    assert row.split() == [
        WATCHED,
        owner.url,
        str(partition_for(WATCHED, PARTITIONS)),
        "incremental_cooperative",
        "(client)",
        "STABLE",
        str(d["GroupEpoch"]),
        str(d["AssignmentEpoch"]),
        "1",
    ]
    code, out, _ = _cli(capsys, "groups", "describe", "--group", WATCHED, "--state", "--format", "json", *url)
    assert orjson.loads(out) == {
        "GroupId": WATCHED,
        "GroupType": "connect",
        "Coordinator": owner.url,
        "Partition": partition_for(WATCHED, PARTITIONS),
        "Assignor": "incremental_cooperative",
        "AssignorKind": "client",
        "State": "STABLE",
        "GroupEpoch": d["GroupEpoch"],
        "AssignmentEpoch": d["AssignmentEpoch"],
        "Members": 1,
    }

    # --tasks: one row per connector and task; what worker-2 ran is deferred until the scheduled
    # rebalance, shown as ISO 8601 (UTC, milliseconds), never as epoch milliseconds.
    at = d["ScheduledRebalanceAtMs"]
    until = datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at % 1000:03d}Z"
    deferred = {("-" if "Task" not in t else str(t["Task"])) for t in d["Deferred"]["Tasks"]}
    code, out, _ = _cli(capsys, "groups", "describe", "--group", WATCHED, "--tasks", *url)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "CONNECTOR",
        "TASK",
        "STATUS",
        "MEMBER",
        "REVOKING",
        "TARGET",
        "DEFERRED-UNTIL",
    ]
    rows = {(line.split()[0], line.split()[1]): line.split(None, 2)[2] for line in lines[1:]}
    assert set(rows) == {("A", "-"), ("A", "0"), ("A", "1"), ("B", "-"), ("B", "0")}
    items = {
        *member["Assignment"]["Connectors"],
        *(f"{t['Connector']}-{t['Task']}" for t in member["Assignment"]["Tasks"]),
    }
    for (connector, task), rest in rows.items():
        item = connector if task == "-" else f"{connector}-{task}"
        if item in items:
            assert rest.split() == ["ASSIGNED", member["MemberId"], "-", member["MemberId"], "-"]
        else:
            assert rest.split() == ["UNASSIGNED", "-", "-", "-", until], (item, rest)
    assert len(rows) - len(items) == len(d["Deferred"]["Tasks"]) + len(d["Deferred"]["Connectors"]) > 0
    assert deferred
    code, out, _ = _cli(capsys, "groups", "describe", "--group", WATCHED, "--tasks", "--format", "json", *url)
    statuses = {(r["Connector"], r["Task"]): (r["Status"], r["DeferredUntilMs"]) for r in orjson.loads(out)}
    assert {s for s, _ in statuses.values()} == {"ASSIGNED", "UNASSIGNED"}  # the status endpoint's words
    assert {u for s, u in statuses.values() if s == "UNASSIGNED"} == {at}  # JSON keeps the number

    # The default view keeps its shape; its deferred line gives the time as ISO text too.
    code, out, _ = _cli(capsys, "groups", "describe", WATCHED, *url)
    assert out.startswith(f"group {WATCHED}: STABLE, group epoch {d['GroupEpoch']}")
    assert f" until {until}" in out and str(at) not in out


def _frames(process: subprocess.Popen, count: int, is_frame: Callable[[str], bool]) -> list[str]:
    """The first `count` lines of the watch's output that `is_frame` picks, read as they come."""
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while len([line for line in seen if is_frame(line)]) < count:
        assert time.monotonic() < deadline and process.poll() is None, seen
        line = process.stdout.readline()
        if line:
            seen.append(line.rstrip("\n"))
    return seen


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_watch_redraws_until_ctrl_c_and_exits_0(fleet: Fleet, fmt: str) -> None:
    process = subprocess.Popen(
        [
            *CONSOLE,
            "groups",
            "describe",
            "--group",
            WATCHED,
            "--state",
            "--watch",
            "0.3",
            "--url",
            fleet.a.url,
            "--format",
            fmt,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        if fmt == "table":
            # Not a terminal: frames are separated by a blank line and start with the time.
            lines = _frames(process, 2, lambda line: line.startswith("every 0.3s:"))
            first, second = (i for i, line in enumerate(lines) if line.startswith("every 0.3s:"))
            assert re.fullmatch(
                rf"every 0\.3s: group {WATCHED} at \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}Z", lines[first]
            )
            assert lines[first + 1] == "" and lines[first + 2].split()[0] == "GROUP"
            assert lines[first + 3].split()[0] == WATCHED and lines[second - 1] == ""
        else:  # one JSON object per redraw
            lines = _frames(process, 2, lambda line: line.startswith("{"))
            assert [orjson.loads(line)["GroupId"] for line in lines[:2]] == [WATCHED, WATCHED]
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0
        assert "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_watch_on_a_terminal_clears_the_screen_for_each_frame(fleet: Fleet) -> None:
    main, child = pty.openpty()
    process = subprocess.Popen(
        [*CONSOLE, "groups", "describe", "--group", WATCHED, "--state", "--watch", "0.3", "--url", fleet.a.url],
        stdout=child,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )
    os.close(child)
    try:
        seen = b""
        deadline = time.monotonic() + 60
        while seen.count(b"\x1b[H\x1b[2J") < 2:
            assert time.monotonic() < deadline and process.poll() is None, seen
            if select.select([main], [], [], 1)[0]:
                seen += os.read(main, 4096)
        frame = seen.split(b"\x1b[H\x1b[2J")[1].decode()
        assert frame.startswith(f"every 0.3s: group {WATCHED} at ") and WATCHED in frame.splitlines()[-1]
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(main)


def test_a_group_page_asked_of_another_instance_redirects_to_the_one_serving_it(fleet: Fleet) -> None:
    import requests

    owner_url = _described(fleet)["Coordinator"]
    other = fleet.b if owner_url == fleet.a.url else fleet.a
    moved = requests.get(f"{other.url}/ui/groups/{WATCHED}", timeout=30, allow_redirects=False)
    assert moved.status_code == 307 and moved.headers["Location"] == f"{owner_url}/ui/groups/{WATCHED}"
    assert owner_url in moved.text  # the body says where, for a client that does not follow
    page = requests.get(f"{other.url}/ui/groups/{WATCHED}", timeout=30)  # a browser follows it
    assert page.status_code == 200 and page.url == f"{owner_url}/ui/groups/{WATCHED}"
    assert WATCHED in page.text and "<svg" in page.text


def test_groups_list_asks_every_instance(fleet: Fleet, capsys: pytest.CaptureFixture) -> None:
    groups = {
        p: next(f"listed-{i}" for i in range(10_000) if partition_for(f"listed-{i}", PARTITIONS) == p)
        for p in range(PARTITIONS)
    }
    for group in groups.values():
        assert _cli(capsys, "connectors", "set", "--group", group, "A=1", "--url", fleet.a.url)[0] == 0
    # Each instance alone serves some partitions only; listing from either gives every group.
    assert served(fleet.a) != set(range(PARTITIONS)) and served(fleet.b) != set(range(PARTITIONS))
    _, owners = fleet.b.request("GET", "/v1/partitions")
    assert owners["Url"] == fleet.b.url and {p["Partition"]: p["Url"] for p in owners["Partitions"]} == {
        p: fleet.a.url if p in served(fleet.a) else fleet.b.url for p in range(PARTITIONS)
    }
    for asked in (fleet.a, fleet.b):
        code, out, err = _cli(capsys, "groups", "list", "--url", asked.url)
        listed = [line.split()[0] for line in out.splitlines()[1:]]
        assert code == 0 and set(groups.values()) <= set(listed) and WATCHED in listed and not err
        assert len(listed) == len(set(listed))
        code, out, _ = _cli(capsys, "groups", "list", "--url", asked.url, "--format", "json")
        assert set(groups.values()) <= {g["GroupId"] for g in orjson.loads(out)}
    # An instance that stops answering: the list says which partitions nobody answered for.
    gone = served(fleet.b)
    fleet.b.kill()
    code, out, err = _cli(capsys, "groups", "list", "--url", fleet.a.url)
    listed = {line.split()[0] for line in out.splitlines()[1:]}
    assert code == 0 and {groups[p] for p in set(range(PARTITIONS)) - gone} <= listed
    if not served(fleet.a) >= gone:  # not taken over yet (the ownership session is 6 s): named as unanswered
        assert f"no coordinator answered for partitions {', '.join(map(str, sorted(gone)))}" in err, err
    fleet.b.start()


def test_dump_decode_prints_each_record_of_the_topic(
    fleet: Fleet, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    assert _cli(capsys, "connectors", "set", "--group", "short-lived", "A=1", "--url", fleet.a.url)[0] == 0

    def deleted() -> bool:  # asked of its coordinator, which may be moving (test_groups_list restarted b)
        _, found = fleet.a.request("POST", "/v1/find-coordinator", {"GroupId": "short-lived"})
        owner = fleet.a if found.get("Url") == fleet.a.url else fleet.b
        return owner.request("DELETE", "/v1/groups/short-lived")[1]["ErrorCode"] in (0, 69)  # 69: gone already

    wait_for(deleted, 60, "the group to be deleted")
    partition = str(partition_for("short-lived", PARTITIONS))
    # Kafka's flags, the client settings in a Java properties file as Kafka's tools take them.
    config = tmp_path / "client.properties"
    config.write_text("client.id=dump-decode\nssl.endpoint.identification.algorithm=\n")
    kafka = [
        "--bootstrap-server",
        fleet.bootstrap,
        "--topic",
        fleet.topic,
        "--command-config",
        str(config),
        "--partition",
        partition,
        "--no-progress",
    ]
    code, out, err = _cli(capsys, "dump", *kafka, "--decode")
    lines = [line for line in out.splitlines() if '"GroupId":"short-lived"' in line]
    assert code == 0 and "Traceback" not in err
    iso = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    assert re.fullmatch(
        rf"partition: {partition} offset: \d+ time: {iso} type: ConnectorsTasksMetadata\(4\) "
        r'key: \{"GroupId":"short-lived"\} value\(v0\): \{"Connectors":\[\{"Name":"A","Tasks":1\}\]\}',
        lines[0],
    ), lines[0]
    assert lines[-1].endswith("tombstone")  # the deleted group's records end in tombstones
    code, out, _ = _cli(capsys, "dump", *kafka, "--decode", "--format", "json")
    decoded = [orjson.loads(line) for line in out.splitlines()]
    mine = [r for r in decoded if r.get("key", {}).get("GroupId") == "short-lived"]
    assert mine[0]["name"] == "ConnectorsTasksMetadata" and mine[0]["type"] == 4
    assert mine[0]["value"] == {"Connectors": [{"Name": "A", "Tasks": 1}]} and isinstance(mine[0]["timestamp_ms"], int)
    assert mine[-1]["tombstone"] is True and mine[-1]["value"] is None
    assert [r["offset"] for r in decoded] == sorted(r["offset"] for r in decoded)


def test_dump_decode_prints_a_corrupt_record_as_such(
    kafka_broker, unique_topic: str, capsys: pytest.CaptureFixture
) -> None:
    assert (
        _cli(
            capsys,
            "topic",
            "create",
            "--bootstrap-server",
            kafka_broker.bootstrap_servers,
            "--topic",
            unique_topic,
            "--partitions",
            "1",
            "--replication-factor",
            "1",
        )[0]
        == 0
    )
    producer = Producer(kafka_broker.client_config())
    key, value = records.encode(
        records.Record(records.ConnectGroupMetadataKey("g"), records.ConnectGroupMetadataValue(3))
    )
    producer.produce(unique_topic, value, key)
    producer.produce(unique_topic, b"\x00\x03\xff\xff", key)  # a value that is not a type-3 value
    producer.produce(unique_topic, None, b"\x7f\x7f")  # a key of no known record type
    producer.produce(unique_topic, None, key)
    assert producer.flush(30) == 0
    kafka = ["--bootstrap-server", kafka_broker.bootstrap_servers, "--topic", unique_topic, "--no-progress", "--decode"]
    code, out, err = _cli(capsys, "dump", *kafka)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4 and "Traceback" not in err
    assert 'type: ConnectGroupMetadata(3) key: {"GroupId":"g"} value(v' in lines[0]
    assert "offset: 1 " in lines[1] and "corrupt: cannot decode value of record type 3" in lines[1]
    assert "offset: 2 " in lines[2] and "corrupt: cannot decode key" in lines[2]
    assert lines[3].endswith('type: ConnectGroupMetadata(3) key: {"GroupId":"g"} tombstone')
    assert "decoded 2 records from topic" in err and "2 corrupt" in err
    code, out, _ = _cli(capsys, "dump", *kafka, "--format", "json")
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert [("corrupt" in r, r.get("tombstone")) for r in rows] == [
        (False, False),
        (True, None),
        (True, None),
        (False, True),
    ]
    assert rows[1]["value"] == "AAP//w==" and rows[1]["corrupt"].startswith("cannot decode value")


def test_kafka_flag_names_and_command_config(
    kafka_broker, unique_topic: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    good = tmp_path / "good.properties"
    # As a file written for kafka-topics.sh would say it: Java's empty "no host name check".
    good.write_text("client.id=kafka-shaped\nssl.endpoint.identification.algorithm=\n")
    assert (
        _cli(
            capsys,
            "topic",
            "create",
            "--bootstrap-server",
            kafka_broker.bootstrap_servers,
            "--topic",
            unique_topic,
            "--partitions",
            "1",
            "--replication-factor",
            "1",
            "--command-config",
            str(good),
        )[0]
        == 0
    )
    for spelling in ("--bootstrap-server", "--bootstrap-servers"):
        code, out, _ = _cli(
            capsys,
            "topic",
            "describe",
            spelling,
            kafka_broker.bootstrap_servers,
            "--topic",
            unique_topic,
            "--command-config",
            str(good),
            "--format",
            "json",
        )
        assert code == 0 and len(orjson.loads(out)["partitions"]) == 1
    jks = tmp_path / "jks.properties"
    jks.write_text("security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n")
    kerberos = tmp_path / "kerberos.properties"
    kerberos.write_text("sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;\n")
    java_only = tmp_path / "java.properties"
    java_only.write_text("ssl.enabled.protocols=TLSv1.3\n")
    bad_escape = tmp_path / "escape.properties"
    bad_escape.write_text("client.id=\\u12g4\n")
    for file, says in (
        (tmp_path / "missing.properties", "cannot read Kafka config file"),
        (jks, "ssl.truststore.location: librdkafka reads no JKS truststore"),
        (kerberos, "sasl.jaas.config: only a PlainLoginModule or ScramLoginModule"),
        (java_only, "ssl.enabled.protocols: a Java client setting librdkafka has no counterpart for"),
        (bad_escape, "Invalid \\u escape"),
    ):
        for command in (["topic", "describe"], ["dump", "--decode", "--no-progress"]):
            code, _, err = _cli(
                capsys,
                *command,
                "--bootstrap-server",
                kafka_broker.bootstrap_servers,
                "--topic",
                unique_topic,
                "--command-config",
                str(file),
            )
            assert code == 2 and says in err and len(err.splitlines()) == 1 and "Traceback" not in err, (file, err)


def test_format_means_table_or_json_everywhere() -> None:
    parser = build_parser()
    found = []

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))
            elif "--format" in action.option_strings:
                found.append(path)
                shown = action.choices or action.metavar
                assert set(shown if action.choices else shown.strip("{}").split(",")) == {"table", "json"}, path
                for value in ("table", "json"):
                    assert (action.type or str)(value) == value, path
                assert action.default in (None, "table"), path

    walk(parser, ())
    assert {
        ("groups", "describe"),
        ("groups", "list"),
        ("topic", "describe"),
        ("dump",),
        ("replay", "timeline"),
        ("sql",),
        ("spark-conf",),
    } <= set(found)


def test_former_format_spellings_still_work(
    kafka_broker, unique_topic: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert (
        _cli(
            capsys,
            "topic",
            "create",
            "--bootstrap-servers",
            kafka_broker.bootstrap_servers,
            "--topic",
            unique_topic,
            "--partitions",
            "1",
            "--replication-factor",
            "1",
        )[0]
        == 0
    )
    kafka = ["--bootstrap-server", kafka_broker.bootstrap_servers, "--topic", unique_topic]
    assert (
        _cli(capsys, "topic", "describe", *kafka, "--format", "text")[1] == _cli(capsys, "topic", "describe", *kafka)[1]
    )
    code, out, err = _cli(capsys, "dump", *kafka, "--no-progress", "--format", "jsonl")
    assert code == 0 and "--format jsonl is deprecated: use --dump-format jsonl" in err
    assert orjson.loads(out.splitlines()[0])["dump"] == "worker-coordinator"
    code, _, err = _cli(capsys, "dump", *kafka, "--no-progress", "--format", "json")
    assert code == 2 and "goes with --decode" in err
    code, _, err = _cli(capsys, "dump", *kafka, "--no-progress", "--decode", "--output", str(tmp_path / "x"))
    assert code == 2 and "--decode prints to standard output" in err


def test_version_completion_and_worker_help(tmp_path: Path) -> None:
    version = subprocess.run([*CONSOLE, "--version"], capture_output=True, text=True, check=True).stdout
    assert version == f"coordinator {importlib.metadata.version('worker-coordinator')}\n"
    bash = subprocess.run([*CONSOLE, "completion", "bash"], capture_output=True, text=True, check=True).stdout
    for word in ("groups", "describe", "--members", "--bootstrap-server", "--command-config", "--decode", "completion"):
        assert word in bash, word
    (tmp_path / "coordinator.bash").write_text(bash)
    subprocess.run(["bash", "-n", str(tmp_path / "coordinator.bash")], check=True)
    # The script completes: the subcommands after `coordinator `, the flags after `groups describe --`.
    probe = (
        f"source {tmp_path / 'coordinator.bash'}\n"
        'COMP_WORDS=(coordinator gro); COMP_CWORD=1; _shtab_coordinator; echo "${COMPREPLY[@]}"\n'
        "COMP_WORDS=(coordinator groups describe --mem); COMP_CWORD=3; _shtab_coordinator; "
        'echo "${COMPREPLY[@]}"\n'
    )
    completed = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.splitlines()
    assert completed[0].split() == ["groups"] and completed[1].split() == ["--members"]
    zsh = subprocess.run([*CONSOLE, "completion", "zsh"], capture_output=True, text=True, check=True).stdout
    assert zsh.startswith("#compdef coordinator") and "--watch" in zsh
    bad = subprocess.run([*CONSOLE, "completion", "fish"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr

    helped = subprocess.run([*CONSOLE, "worker", "--help"], capture_output=True, text=True, check=True).stdout
    example = helped[helped.index("For example:") :].split("\n\n")[1]
    assert "    0   join        5 " in example and "crash       worker-4" in example
    assert [e.action for e in parse_scenario(example)] == [
        "join",
        "scale-out",
        "bounce",
        "crash",
        "connectors",
        "scale-in",
        "join",
        "upgrade",
        "downgrade",
        "stop",
    ]
    assert "`#` starts a comment" in helped
