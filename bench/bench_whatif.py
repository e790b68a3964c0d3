"""The group page's "what if" view under load (`make bench-whatif`, issue 32 item 6).

One `coordinator serve` holds two things: a big history (`bench_simulate`'s generated week of a
100-worker group, about 10,000 membership events, written to its partition before it starts) and
a steady fleet (members of a few groups heartbeating as fast as `concurrency` requests in flight
allow). Rounds alternate: heartbeats alone, then heartbeats while the view's simulations of the
week run back to back (`GET /ui/groups/connect-prod/whatif?delay=60s`, one after the other). Each
prints heartbeat p50/p99; at the end, their medians and the ratio of the loaded to the quiet ones
(the baseline, measured in the same run).

Goal: the simulations run in child processes, so heartbeat p99 does not move.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bench.bench_service import (  # noqa: E402
    HEARTBEAT,
    Serve,
    create_topic,
    delete_topics,
    drive_to_stable,
    heartbeat_body,
    member,
    put_connectors,
    run_loadgen,
)
from bench.bench_simulate import GROUP, write_week  # noqa: E402
from coordinator.core.items import connectors_and_tasks  # noqa: E402
from coordinator.core.protocol import HeartbeatRequest  # noqa: E402


def simulations(port: int, stop: threading.Event, times: list[float], failures: list[str], sizes: list[int]) -> None:
    """The view's simulation of the week, back to back until `stop`."""
    url = f"http://127.0.0.1:{port}/ui/groups/{GROUP}/whatif"
    while not stop.is_set():
        started = time.perf_counter()
        answer = requests.get(url, params={"delay": "60s"}, timeout=600)
        if answer.status_code == 200:
            times.append(time.perf_counter() - started)
            sizes.append(len(answer.content))
        else:
            failures.append(f"{answer.status_code}: {answer.text[-300:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:19092")
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--seconds",
        type=float,
        default=90.0,
        help="heartbeats measured per round (a simulation of the week lasts about that)",
    )
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--members", type=int, default=10, help="per group")
    parser.add_argument("--concurrency", type=int, default=16, help="heartbeats in flight")
    args = parser.parse_args()
    topic = f"bench-whatif-{uuid.uuid4().hex[:8]}"
    create_topic(args.bootstrap_servers, topic, 1)
    server = None
    try:
        started = time.perf_counter()
        records = write_week(args.bootstrap_servers, topic, args.workers, args.events)
        print(f"history: {records} records of {GROUP} written in {time.perf_counter() - started:.1f} s")
        server = Serve(
            args.bootstrap_servers, topic, Path(tempfile.mkdtemp(prefix="bench-whatif-")),
            "--whatif-timeout-s", "300",
        )  # fmt: skip
        server.start().wait_healthy(timeout=180)
        run(server, args)
    finally:
        if server is not None:
            server.stop()
        delete_topics(args.bootstrap_servers, [topic])


def run(server: Serve, args: argparse.Namespace) -> None:
    import asyncio

    groups = [f"steady-{g:02d}" for g in range(args.groups)]
    for g in groups:
        put_connectors(server.port, g, {f"conn-{c}": 8 for c in range(4)})
    members = [member(g, f"worker-{m:02d}.{g}") for m in range(args.members) for g in groups]
    asyncio.run(drive_to_stable(server.port, members, groups, timeout=240))
    bodies = [
        [heartbeat_body(HeartbeatRequest(m.group_id, m.member_id, m.member_epoch, owned=connectors_and_tasks(m.owned)))]
        for m in members
    ]
    sizes = SimpleNamespace(seconds=args.seconds, warmup=2.0, concurrency=args.concurrency)
    url = f"http://127.0.0.1:{server.port}{HEARTBEAT}"
    print(f"fleet: {len(members)} members in {len(groups)} groups; {args.concurrency} heartbeats in flight")
    quiet, loaded, sims, failures, pages = [], [], [], [], []
    for n in range(args.rounds):
        q = run_loadgen(url, bodies, sizes)
        quiet.append(q)
        stop = threading.Event()
        times: list[float] = []
        thread = threading.Thread(target=simulations, args=(server.port, stop, times, failures, pages))
        thread.start()
        time.sleep(3)  # the first child is running: interpreter up, records being read
        loaded_round = run_loadgen(url, bodies, sizes)
        stop.set()
        thread.join()
        loaded.append(loaded_round)
        sims += times
        print(
            f"round {n + 1}: quiet p50 {q['p50'] * 1000:.2f} ms p99 {q['p99'] * 1000:.2f} ms ({q['rate']:.0f}/s); "
            f"simulating p50 {loaded_round['p50'] * 1000:.2f} ms p99 {loaded_round['p99'] * 1000:.2f} ms "
            f"({loaded_round['rate']:.0f}/s); {len(times)} simulations done"
        )
    for name, key in (("p50", "p50"), ("p99", "p99"), ("rate", "rate")):
        a = statistics.median(r[key] for r in quiet)
        b = statistics.median(r[key] for r in loaded)
        scale, unit = (1000, " ms") if key != "rate" else (1, "/s")
        print(f"heartbeat {name}, median of {args.rounds}: quiet {a * scale:.2f}{unit}, while simulating "
              f"{b * scale:.2f}{unit}; ratio {b / a:.2f}")  # fmt: skip
    if sims:
        print(
            f"a simulation of the week through the view: median {statistics.median(sims):.1f} s ({len(sims)} done), "
            f"pages of {statistics.median(pages) / 1e6:.1f} MB"
        )
    for failure in failures[:3]:
        print(f"a simulation failed: {failure}")


if __name__ == "__main__":
    main()
