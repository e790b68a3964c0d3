"""`make bench-vs-connect` end to end, made small: real Kafka Connect workers (JVMs from Maven Central's
jars) on Kafka's coordinator, ours, and the same Connect workers on our coordinator through our
gateway, one scenario, on the benchmark's own dev broker. What it proves is the harness: the three
systems start, their tasks are seen running from their own records (Connect's status topic, our
fleet's events), the figures and the table come out, and no task ran on two workers; and the third
system's workers did find our coordinator through the gateway, and moved as many tasks as Connect on
Kafka's coordinator (Connect's leader runs the same assignor on both)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
# Longer than the run's own 600 s subprocess timeout below, so that a slow run fails with that
# timeout's message and the bench's output rather than pytest's 300 s default killing it first.
@pytest.mark.timeout(900)
def test_scale_out_side_by_side_with_real_kafka_connect(tmp_path: Path) -> None:
    out = tmp_path / "timelines.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_vs_connect.py"),
            "--fast",
            "--workers",
            "2",
            "--connectors",
            "A=3,B=2",
            "--scenario",
            "scale-out",
            "--run-dir",
            str(tmp_path / "run"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "side by side" in result.stdout and "tasks moved" in result.stdout and "Connect on ours" in result.stdout
    report = orjson.loads(out.read_bytes())
    runs = report["scenarios"]["scale-out"]
    for kind in ("connect", "ours", "connect-ours"):
        run = runs[kind]
        assert "error" not in run, run.get("error")
        figures = run["figures"]
        assert figures["tasks"] == 5 and figures["double_owned_s"] == 0 and run["double_owned_s"] == 0
        # Every task was seen running, on the workers of that system, and the third worker got some.
        started = {(e["worker"], e["task"]) for e in run["events"] if e["kind"] == "start"}
        assert {task for _, task in started} == {"A-0", "A-1", "A-2", "B-0", "B-1"}
        assert {worker for worker, _ in started} == {"w1", "w2", "w3"}, kind
        assert figures["moved"] >= 1 and any(e["kind"] == "rebalance" for e in run["events"]), (kind, figures)
    # Connect on ours: each worker's group member was sent to the gateway's coordinator node, never
    # to the broker's coordinator (whose workers find the broker's own port).
    on_ours, on_kafka = Path(runs["connect-ours"]["logs"]), Path(runs["connect"]["logs"])
    gateway_node = {
        line.split("Discovered group coordinator ")[1].split(" ")[0]
        for log in on_ours.glob("w*-*.log")
        for line in log.read_text().splitlines()
        if "Discovered group coordinator" in line
    }
    kafka_node = {
        line.split("Discovered group coordinator ")[1].split(" ")[0]
        for log in on_kafka.glob("w*-*.log")
        for line in log.read_text().splitlines()
        if "Discovered group coordinator" in line
    }
    assert len(gateway_node) == 1 and gateway_node.isdisjoint(kafka_node), (gateway_node, kafka_node)
    assert (on_ours / "gateway.log").exists()
    assert runs["connect-ours"]["figures"]["moved"] == runs["connect"]["figures"]["moved"]
