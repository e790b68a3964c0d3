"""State machine benchmark (`make bench-state`): the pure coordinator, no I/O, one core.

Figures are medians over several rounds, each with a baseline measured in the same run:

- steady heartbeats: members of a converged group heartbeating with nothing to change (no
  records); baseline: building the same number of request objects. Goal >= 100,000/s.
- join storm: 1,000 workers join a group running 10,000 tasks and heartbeat until every one owns
  its target; heartbeats, records written and wall time, client-side and server-side assignor.
  Goal < 2 s.
- replay: decode + apply 1,000,000 records from bytes (a history the state machine itself wrote,
  many groups); baseline: decode alone. Goal >= 200,000 records/s.
- incremental_cooperative with 1,000 workers and 50,000 tasks: a fresh group, and a steady group
  that one worker joins; baseline: eager on the same input. Goal <= 100 ms per assignment.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from records import ConnectorTaskCount, Record, decode, encode  # noqa: E402

from coordinator.core.assignors import ASSIGNORS, AssignmentMember, AssignorEntry, GroupSpec  # noqa: E402
from coordinator.core.driver import Driver, SimWorker, converge  # noqa: E402
from coordinator.core.protocol import HeartbeatRequest  # noqa: E402
from coordinator.core.state import CoordinatorState  # noqa: E402


def median_seconds(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def connectors(total_tasks: int, per_connector: int) -> dict[str, int]:
    return {f"conn-{c:04d}": per_connector for c in range(total_tasks // per_connector)}


# --- steady heartbeats ------------------------------------------------------------------------------


def bench_steady(rounds: int) -> None:
    d = Driver()
    d.set_config("g", session_timeout_ms=60_000, heartbeat_interval_ms=3_000)
    d.set_connectors("g", connectors(2_000, 20))
    workers = [SimWorker(d, "g", f"worker-{i}") for i in range(100)]
    converge(workers, rounds=100)
    requests = [HeartbeatRequest("g", w.member_id, w.member_epoch) for w in workers] * 500
    heartbeat = d.coordinator.heartbeat

    def run() -> None:
        for request in requests:
            result = heartbeat(request, 1_000)
            if result.records:
                raise AssertionError("a steady heartbeat wrote records")

    def baseline() -> None:
        for w in workers * 500:
            HeartbeatRequest("g", w.member_id, w.member_epoch)

    seconds = median_seconds(run, rounds)
    base = median_seconds(baseline, rounds)
    rate = len(requests) / seconds
    print(
        f"steady heartbeats        : {rate:12,.0f} /s  ({seconds / base:.1f}x the time of building the requests); "
        f"goal >= 100,000/s -> {'met' if rate >= 100_000 else 'NOT met'}"
    )


# --- join storm -------------------------------------------------------------------------------------


def join_storm(workers: int, tasks: int, server_side: bool) -> tuple[float, int, int, int]:
    d = Driver()
    d.set_config("g", session_timeout_ms=600_000, heartbeat_interval_ms=3_000)
    d.set_connectors("g", connectors(tasks, 100))
    kwargs = {"assignor": None, "server_assignor": "incremental_cooperative"} if server_side else {}
    fleet = [SimWorker(d, "g", f"worker-{i:04d}", **kwargs) for i in range(workers)]
    counted = [0]
    original = d.heartbeat

    def heartbeat(request):  # noqa: ANN001, ANN202
        counted[0] += 1
        return original(request)

    d.heartbeat = heartbeat  # count every heartbeat the storm takes
    start = time.perf_counter()
    for w in fleet:
        w.heartbeat()
    rounds = converge(fleet, rounds=100, advance_ms=3_000)
    seconds = time.perf_counter() - start
    owned = sum(len(w.owned) for w in fleet)
    configured = tasks + len(connectors(tasks, 100))
    if owned != configured:
        raise AssertionError(f"storm ended with {owned} items owned, {configured} configured")
    return seconds, counted[0], len(d.log), rounds


def bench_storm(rounds: int) -> None:
    for server_side in (False, True):
        runs = [join_storm(1_000, 10_000, server_side) for _ in range(max(1, rounds // 2))]
        seconds = statistics.median(r[0] for r in runs)
        _, heartbeats, records, conv = runs[0]
        kind = "server-side" if server_side else "client-side"
        print(
            f"join storm ({kind:11}) : {seconds * 1000:9,.0f} ms  1,000 workers, 10,000 tasks: {heartbeats:,} heartbeats, "
            f"{records:,} records, {conv} rounds after the joins; goal < 2 s -> {'met' if seconds < 2 else 'NOT met'}"
        )


# --- replay -----------------------------------------------------------------------------------------


def scenario(rng: random.Random, group: str) -> list[Record]:
    """One group's history as the state machine writes it: joins, leaves, bounces, crashes,
    connector changes, scheduled rebalances."""
    d = Driver()
    d.set_config(group, session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=20_000)
    d.set_connectors(group, {f"sink-{c}": rng.randint(2, 12) for c in range(rng.randint(2, 6))})
    live = [SimWorker(d, group, f"worker-{i}.{group}:8083") for i in range(rng.randint(3, 8))]
    converge(live)
    next_id = len(live)
    for _ in range(rng.randint(10, 25)):
        event = rng.random()
        if event < 0.25:
            live.append(SimWorker(d, group, f"worker-{next_id}.{group}:8083"))
            next_id += 1
        elif event < 0.45 and len(live) > 2:
            live.pop(rng.randrange(len(live))).leave()
        elif event < 0.65 and len(live) > 2:  # a crash: it stops heartbeating; its session times out
            crashed = live.pop(rng.randrange(len(live)))
            crashed.lose_everything()
        elif event < 0.8:
            d.set_connectors(group, {f"sink-{c}": rng.randint(2, 12) for c in range(rng.randint(2, 6))})
        for _ in range(rng.randint(2, 12)):
            d.advance(1_000)
            for w in live:
                w.heartbeat()
    return d.log


def bench_replay(count: int, rounds: int) -> None:
    """Loading a partition: `replay_all` over records decoded from bytes, as the runtime does."""
    rng = random.Random(848)
    templates = [scenario(rng, "template") for _ in range(8)]
    encoded: list[tuple[bytes, bytes | None]] = []
    group = 0
    while len(encoded) < count:
        log = templates[group % len(templates)]
        name = f"connect-cluster-{group}"
        keys: dict = {}
        for record in log:
            key = keys.get(record.key)
            if key is None:
                key = keys[record.key] = encode(Record(replace(record.key, group_id=name), None))[0]
            encoded.append((key, None if record.value is None else encode(record)[1]))
        group += 1
    encoded = encoded[:count]

    def run_replay() -> None:
        CoordinatorState().replay_all(decode(key, value) for key, value in encoded)

    def run_decode() -> None:
        for key, value in encoded:
            decode(key, value)

    run_decode()
    seconds = median_seconds(run_replay, rounds)
    base = median_seconds(run_decode, rounds)
    rate = len(encoded) / seconds
    print(
        f"replay {len(encoded):,} records : {rate:12,.0f} records/s  (decode alone {len(encoded) / base:,.0f}/s; "
        f"apply adds {(seconds - base) / len(encoded) * 1e6:.2f} µs/record); "
        f"goal >= 200,000/s -> {'met' if rate >= 200_000 else 'NOT met'}"
    )


# --- the assignor -------------------------------------------------------------------------------------


def bench_assignor(rounds: int) -> None:
    counts = tuple(ConnectorTaskCount(f"conn-{c:03d}", 100) for c in range(500))
    members = tuple(
        AssignmentMember(f"worker-{i:04d}", assignor=AssignorEntry(maximum_version=1)) for i in range(1_000)
    )
    fresh = GroupSpec("g", 1, counts, members)
    icr = ASSIGNORS["incremental_cooperative"]
    first = icr.assign(fresh)
    settled = tuple(
        msgspec.structs.replace(
            m, target=first.members[m.member_id].assignment, owned=first.members[m.member_id].assignment
        )
        for m in members
    )
    joined = GroupSpec(
        "g", 2, counts, (*settled, AssignmentMember("worker-new", assignor=AssignorEntry(maximum_version=1)))
    )
    for label, spec in (("fresh group", fresh), ("one worker joins", joined)):
        seconds = median_seconds(lambda s=spec: icr.assign(s), rounds)
        base = median_seconds(lambda s=spec: ASSIGNORS["eager"].assign(s), rounds)
        print(
            f"incremental_cooperative  : {seconds * 1000:9,.1f} ms  1,000 workers, 50,000 tasks, {label} "
            f"(eager {base * 1000:.1f} ms); goal <= 100 ms -> {'met' if seconds <= 0.1 else 'NOT met'}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--replay-records", type=int, default=1_000_000)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the goals are per core
    print(f"state machine benchmark, one core, median of {args.rounds} rounds")
    bench_steady(args.rounds)
    bench_assignor(args.rounds)
    bench_storm(args.rounds)
    bench_replay(args.replay_records, max(3, args.rounds // 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
