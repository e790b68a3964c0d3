"""`make soak` (bench/soak.py) made short: the harness, not the figures. It starts `coordinator serve`
and SDK workers on the session's broker, churns, prints one line of figures per interval and the
growth, and ends with every task of every group owned once; its ownership check catches an item
owned twice or by nobody. Timings are not asserted (two shared cores)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]

LINE = re.compile(
    r"^minute +(\d+\.\d\d): RSS ([\d./]+) MiB +fds +(\d+) \(\d+ sockets\) +heartbeat p50 +\d+\.\d\d ms +"
    r"p99 +\d+\.\d\d ms +\(([\d,]+) heartbeats; workers' loop lag p99 \d+\.\d ms, longest GC pause \d+\.\d ms\) +"
    r"requests served ([\d,]+) +rebalances ([\d,]+) +coordinator CPU +\d+% +workers CPU +\d+% "
    r"\(RSS ([\d/]+) MiB\) +churn events (\d+)$",
    re.MULTILINE,
)


def soak_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_soak", ROOT / "bench" / "soak.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_soak"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def run_soak(broker, *args: str) -> str:  # noqa: ANN001
    """bench/soak.py on the session's broker; its output, once it has exited 0."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--bootstrap-servers", broker.bootstrap_servers, *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def assert_every_10_s(minutes: list[str], count: int, out: str) -> None:
    """A line every 10 s: each printed a moment after its interval ends (the loop's wake-up and the
    sampling take some time on a busy machine), never before and never a whole interval late."""
    assert len(minutes) == count, out
    for i, minute in enumerate(minutes, 1):
        assert i * 10 / 60 - 0.005 <= float(minute) < (i + 1) * 10 / 60, out


GROWTH = (
    r"^growth from minute 0\.1\d to 0\.{last}\d: RSS \(largest instance\) [+-]\d+\.\d MiB \([+-]\d+\.\d%\), "
    r"fds [+-]\d+, heartbeat p99 [+-]\d+\.\d\d ms .*, rebalances a minute \d+ -> \d+$"
)


@pytest.mark.integration
def test_a_short_soak_prints_its_lines_and_ends_with_every_task_owned_once(kafka_broker) -> None:  # noqa: ANN001
    """One static instance. Two sharing the partitions in group ownership (the workers find each
    group's instance; a line shows each instance's memory): the next test."""
    out = run_soak(
        kafka_broker,
        *("--minutes", "0.5", "--report-every", "10", "--groups", "6", "--workers", "3", "--churn-every", "1"),
        *("--session-ms", "3000", "--delay-ms", "1000", "--partitions", "4", "--instances", "1"),
    )
    lines = LINE.findall(out)
    assert_every_10_s([m for m, *_ in lines], 3, out)
    for _, rss, fds, heartbeats, requests, _, workers_rss, churn in lines:
        assert len(rss.split("/")) == 1
        assert int(workers_rss) > 0  # one number: the workers run in the soak's own process
        # 18 workers at one heartbeat a second over 10 s, every one answered, and churn in every interval.
        assert int(fds) > 0 and int(heartbeats.replace(",", "")) > 50 and int(requests.replace(",", "")) > 50
        assert int(churn) > 0
    assert sum(int(r.replace(",", "")) for *_, r, _, _ in lines) > 0  # the churn rebalanced groups
    assert re.search(GROWTH.format(last="[45]"), out, re.MULTILINE), out
    assert re.search(r"^churn: \d+ events \(join \d+, kill \d+, leave \d+, tasks \d+\); 0 failed", out, re.MULTILINE), (
        out
    )
    assert re.search(
        r"^ownership: every task of every group owned by exactly one member \(6 groups, ", out, re.MULTILINE
    ), out


@pytest.mark.integration
def test_two_instances_and_two_worker_processes_merge_their_lines_and_check_both_shares_of_groups(kafka_broker) -> None:  # noqa: ANN001
    """Two instances sharing the partitions in group ownership (the workers find each group's
    instance; a line shows each instance's memory), and --worker-processes 2: each child process runs
    half the groups; the soak's lines merge their heartbeats, and the ownership check at the end
    covers the groups of both."""
    out = run_soak(
        kafka_broker,
        *("--minutes", "0.34", "--report-every", "10", "--groups", "5", "--workers", "3"),
        *("--churn-every", "1", "--session-ms", "3000", "--delay-ms", "1000", "--partitions", "4"),
        *("--instances", "2", "--worker-processes", "2"),
    )
    # Groups 0, 2, 4 in one process, 1 and 3 in the other.
    assert re.search(
        r"^15 workers in 5 groups joined and converged in [\d.]+ s in 2 worker processes \(9 \+ 6 workers\)",
        out,
        re.MULTILINE,
    ), out
    lines = LINE.findall(out)
    assert_every_10_s([m for m, *_ in lines], 2, out)
    for _, rss, _, heartbeats, requests, _, workers_rss, churn in lines:
        assert len(rss.split("/")) == 2  # each instance's
        assert int(heartbeats.replace(",", "")) > 50 and int(requests.replace(",", "")) > 50
        assert len(workers_rss.split("/")) == 2 and all(int(r) > 0 for r in workers_rss.split("/"))  # each process's
        assert int(churn) > 0  # each process churns its share
    assert re.search(GROWTH.format(last="3"), out, re.MULTILINE), out
    assert re.search(r"^churn: \d+ events \(join \d+, kill \d+, leave \d+, tasks \d+\); 0 failed", out, re.MULTILINE), (
        out
    )
    assert re.search(
        r"^ownership: every task of every group owned by exactly one member \(5 groups, ", out, re.MULTILINE
    ), out


def test_a_line_merges_the_worker_processes_measures() -> None:
    """The heartbeats of every process count, p99 is over all of them, the CPU is their sum, and each
    process's memory is shown."""
    soak = soak_module()
    a = soak.Sample(0.0, [1], 0, 0, 0.0, 0.0, 0.0, workers_cpu_s=1.0)
    b = soak.Sample(10.0, [1], 0, 0, 0.0, 0.0, 0.0, workers_cpu_s=6.0)
    fast = {"latencies": [0.001] * 90, "lags": [0.0], "pauses": [0.002], "rss": 300 << 20}
    slow = {"latencies": [0.5] * 10, "lags": [0.3], "pauses": [], "rss": 200 << 20}
    line = soak.line_between(a, b, [fast, slow], churn=3)
    assert line.heartbeats == 100
    assert line.p50_ms == 1.0 and line.p99_ms == 500.0  # the slow process's tail shows
    assert line.lag_p99_ms == 300.0 and line.gc_max_ms == 2.0
    assert line.workers_cpu == 0.5
    assert line.workers_rss == [300 << 20, 200 << 20] and "workers CPU  50% (RSS 300/200 MiB)" in line.text()


def _description(members: list[tuple[str, list[str], list[int]]], tasks: int = 2) -> dict:
    """A GET /v1/groups/{id} answer of group g with connector A of `tasks` tasks."""
    return {
        "GroupId": "g",
        "GroupEpoch": 5,
        "Connectors": [{"Name": "A", "Tasks": tasks}],
        "Members": [
            {
                "MemberId": m,
                "MemberEpoch": 5,
                "Assignment": {"Connectors": cs, "Tasks": [{"Connector": "A", "Task": t} for t in ts]},
                "PendingRevocation": {"Connectors": [], "Tasks": []},
            }
            for m, cs, ts in members
        ],
    }


def test_the_ownership_check_finds_an_item_owned_twice_or_by_nobody() -> None:
    soak = soak_module()
    from records import TaskId

    fleet = SimpleNamespace(
        workers={
            "w1": SimpleNamespace(member_id="m1", owned=frozenset({"A", TaskId("A", 0)})),
            "w2": SimpleNamespace(member_id="m2", owned=frozenset({TaskId("A", 1)})),
        }
    )
    assert soak.group_problems(_description([("m1", ["A"], [0]), ("m2", [], [1])]), fleet) == []
    twice = soak.group_problems(_description([("m1", ["A"], [0, 1]), ("m2", [], [1])]), fleet)
    assert "g: task A-1 owned 2 times (m1, m2)" in twice
    unowned = soak.group_problems(_description([("m1", ["A"], [0]), ("m2", [], [])]), fleet)
    assert "g: task A-1 unowned" in unowned
    assert any("runs" in p for p in unowned)  # the worker's own view disagrees with the coordinator's
    extra = soak.group_problems(_description([("m1", ["A"], [0]), ("m2", [], [1])], tasks=1), fleet)
    assert "g: task A-1 owned by m2 but not configured" in extra
