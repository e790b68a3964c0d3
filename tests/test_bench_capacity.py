"""`make bench-capacity` (bench/bench_capacity.py) made tiny: the harness, not the figures. It starts
`coordinator serve` on the session's broker, drives members to a stable state, runs the open-loop
ladder on two connection counts and the one-partition churn, and prints a row per step and a
verdict per ladder. Timings are not asserted (two shared cores)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_a_tiny_capacity_run_prints_its_ladders_and_the_churn(kafka_broker) -> None:  # noqa: ANN001
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_capacity.py"),
            "--bootstrap-servers",
            kafka_broker.bootstrap_servers,
            "--groups",
            "4",
            "--members",
            "5",
            "--rates",
            "100,200",
            "--connections",
            "4,20",
            "--seconds",
            "1",
            "--warmup",
            "0.3",
            "--partitions",
            "4",
            # A latency bound no answer misses (ten minutes: the run times out first). A step is then
            # over it only for an error (its answered/s is its schedule's: every request is sent and
            # awaited), and no step may have one, so the verdicts below are determined.
            "--p99-ms",
            "600000",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "20 members in 4 groups stable" in out and "KiB per member" in out
    assert "on 4 connections:" in out and "on 20 connections (one per member, as a fleet holds them):" in out
    rows = re.findall(r"^ +(100|200) +(\d[\d,]*) +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d +\d+\.\d\dc", out, re.MULTILINE)
    assert [offered for offered, _ in rows] == ["100", "200", "100", "200"], out
    # The answered/s column is not asserted: the generator awaits an answer to each request it sends,
    # so it equals offered/s by construction (an unanswered request hangs the generator until its
    # timeout, and the run exits non-zero: the returncode check above). What can fail: a step's note
    # says "errors N" when an answer lacked ErrorCode 0, and "N commits" when the coordinator wrote to
    # its topic during the step; a steady heartbeat changes nothing, so nothing may be written.
    ladders = out.partition("3. writes")[0]
    assert "errors" not in ladders and "commits" not in ladders, out
    # Every step met the bound, so each ladder's verdict is its highest step, 200/s.
    verdicts = re.findall(r"-> on (\d+) connections one instance answers ([\d,]+) steady heartbeats/s", out)
    assert verdicts == [("4", "200"), ("20", "200")], out
    assert re.search(r"acknowledged changes +: +[\d,]+ /s .* errors 0", out), out
    # The churn did write: the coordinator's own counts (its metrics), not the load generator's.
    server = re.search(r"server side .*: ([\d,]+) heartbeats in ([\d,]+) transactions", out)
    assert server and int(server[1].replace(",", "")) > 0 and int(server[2].replace(",", "")) > 0, out
