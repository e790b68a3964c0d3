"""`make bench-gateway` (bench/bench_gateway.py) made tiny: the harness, not the figures. It starts
`coordinator serve` with its Kafka listener and `coordinator gateway` on the session's broker, runs
JoinGroup+SyncGroup and Heartbeat over both transports (each answer's error code checked by the
bench itself), produces and fetches through the gateway and straight to the broker, and times the
KIP-951 rewrite, printing a line per figure. Timings are not asserted (two shared cores)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_a_tiny_gateway_run_prints_every_figure(kafka_broker) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_gateway.py"),
            "--bootstrap-servers",
            kafka_broker.bootstrap_servers,
            "--quick",
            "--seconds",
            "0.3",
            "--clients",
            "2",
            "--records",
            "300",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    rates = re.findall(
        r"^ +(1 sequential client|2 concurrent clients) ?: Kafka listener +[\d,]+/s +HTTP +[\d,]+/s +"
        r"listener/HTTP +\d+\.\d\d +\(goal >= 1: (?:met|not met)\)$",
        out,
        re.MULTILINE,
    )
    assert rates == ["1 sequential client", "2 concurrent clients"] * 2, out
    assert len(re.findall(r"CPU per round trip, coordinator / these clients: Kafka +\d+ / +\d+ us", out)) == 4, out
    throughput = re.findall(
        r"^ +(produce|fetch) throughput : broker +\d+\.\d MB/s +gateway +\d+\.\d MB/s +"
        r"gateway/broker +\d+\.\d\d",
        out,
        re.MULTILINE,
    )
    assert throughput == ["produce", "fetch"], out
    assert len(re.findall(r"p99: broker +\d+\.\d\d ms +gateway +\d+\.\d\d ms +added +[-+]\d+\.\d\d ms", out)) == 2, out
    assert len(re.findall(r"ms per MB \([\d,]+ MB/s of one core\)", out)) == 2, out
    assert "against 2.: the gateway forwards fetches at" in out and "per answer: the gateway spends" in out, out
