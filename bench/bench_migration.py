"""Migration benchmark (`make bench-migration`, issue 17): a rolling upgrade of classic workers to
the connect protocol, against a rolling restart that stays classic, in the same run.

Both run on the pure state machine (`coordinator.core.driver`) on a virtual clock, with Kafka
Connect's classic workers (`ClassicWorker`: Connect's `sessioned` protocol and bytes, the leader
assigning in SyncGroup) and connect workers (`Member`), so time is exact and the figures repeat:

- **restart (baseline)**: each of N classic workers in turn stops (LeaveGroup) and a new classic
  process with the same instance id starts `--pause` seconds later; the next waits until the group
  has converged again;
- **upgrade**: the same, but the new process speaks the connect protocol: the group converts to the
  connect type with the first one and its classic members are translated until the last goes.

Measured for each: tasks moved (an item whose next owner is another instance), unowned
task-seconds, time until converged after the last restart, and double ownership (any instant an
item is held by two workers; the goal is never). Medians over `--rounds` runs whose restart moments
are jittered, and the ratio upgrade / restart. Goal: the upgrade costs no more than the restart.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from records import ConnectorTaskCount  # noqa: E402

from coordinator.core.driver import Driver, SimClassicWorker, SimWorker, step_all  # noqa: E402
from coordinator.core.group_coordinator import CoordinatorConfig  # noqa: E402
from coordinator.core.items import configured_work  # noqa: E402

G = "connect-cluster"
TICK_MS = 50


class Run:
    """One rolling pass over a fleet on a virtual clock, with the figures kept as it goes."""

    def __init__(self, workers: int, connectors: dict[str, int], timeouts: dict[str, int], seed: int) -> None:
        self.d = Driver(
            CoordinatorConfig(
                session_timeout_ms=timeouts["session_timeout_ms"],
                heartbeat_interval_ms=timeouts["heartbeat_interval_ms"],
                scheduled_rebalance_max_delay_ms=timeouts["scheduled_rebalance_max_delay_ms"],
                initial_assignment_delay_ms=0,
            )
        )
        self.d.set_connectors(G, connectors)
        self.every = configured_work(tuple(ConnectorTaskCount(n, t) for n, t in connectors.items())).items
        self.timeouts = timeouts
        self.rng = random.Random(seed)
        self.names = [f"w{i + 1}" for i in range(workers)]
        self.classic: dict[str, SimClassicWorker] = {}
        self.connect: dict[str, SimWorker] = {}
        self.last_owner: dict = {}
        self.moved = 0
        self.unowned_ms = 0
        self.double_ms = 0
        for name in self.names:
            self.start(name, "classic")
        self.run_until_converged()
        self.moved = 0
        self.unowned_ms = 0

    def start(self, name: str, protocol: str) -> None:
        t = self.timeouts
        if protocol == "classic":
            self.classic[name] = SimClassicWorker(
                self.d,
                G,
                name,
                instance_id=name,
                session_timeout_ms=t["session_timeout_ms"],
                rebalance_timeout_ms=t["rebalance_timeout_ms"],
                heartbeat_interval_ms=t["heartbeat_interval_ms"],
                scheduled_rebalance_max_delay_ms=t["scheduled_rebalance_max_delay_ms"],
            )
        else:
            self.connect[name] = SimWorker(
                self.d,
                G,
                name,
                instance_id=name,
                rebalance_timeout_ms=t["rebalance_timeout_ms"],
                session_timeout_ms=t["session_timeout_ms"],
            )

    def stop(self, name: str) -> None:
        if name in self.classic:
            self.classic.pop(name).leave()
        else:
            self.connect.pop(name).leave()

    def owners(self) -> dict[str, frozenset]:
        return {**{n: w.owned for n, w in self.classic.items()}, **{n: w.owned for n, w in self.connect.items()}}

    def tick(self) -> None:
        step_all(self.classic.values(), self.connect.values())
        owners = self.owners()
        held = Counter(item for items in owners.values() for item in items)
        if any(n > 1 for n in held.values()):
            self.double_ms += TICK_MS
        self.unowned_ms += len(self.every - held.keys()) * TICK_MS
        for name, items in owners.items():
            for item in items:
                if self.last_owner.get(item, name) != name:
                    self.moved += 1
                self.last_owner[item] = name
        self.d.advance(TICK_MS)

    def converged(self) -> bool:
        owned = [i for items in self.owners().values() for i in items]
        return len(owned) == len(set(owned)) and set(owned) == self.every

    def run_until_converged(self, limit_ms: int = 120_000) -> int:
        started = self.d.now
        while not self.converged():
            if self.d.now - started > limit_ms:
                raise RuntimeError(f"no convergence within {limit_ms} ms")
            self.tick()
        return self.d.now - started

    def rolling(self, protocol: str, pause_ms: int) -> int:
        """Restart every worker in turn on `protocol`; ms to converge after the last one."""
        converge_ms = 0
        for name in self.names:
            self.stop(name)
            for _ in range((pause_ms + self.rng.randrange(0, 500)) // TICK_MS):
                self.tick()
            self.start(name, protocol)
            converge_ms = self.run_until_converged()
        return converge_ms


def measure(args: argparse.Namespace, protocol: str, seed: int) -> dict[str, float]:
    timeouts = {
        "session_timeout_ms": args.session_ms,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "rebalance_timeout_ms": args.rebalance_ms,
        "scheduled_rebalance_max_delay_ms": args.delay_ms,
    }
    run = Run(args.workers, dict(args.connectors), timeouts, seed)
    converge_ms = run.rolling(protocol, args.pause_ms)
    return {
        "moved": run.moved,
        "unowned_task_s": run.unowned_ms / 1000,
        "converge_s": converge_ms / 1000,
        "double_owned_s": run.double_ms / 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument(
        "--connectors",
        nargs="+",
        default=[("A", 20), ("B", 20), ("C", 20)],
        type=lambda s: (s.split("=")[0], int(s.split("=")[1])),
        metavar="NAME=TASKS",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pause-ms", type=int, default=1_000, help="between a worker's stop and its new process")
    parser.add_argument("--session-ms", type=int, default=10_000)
    parser.add_argument("--heartbeat-ms", type=int, default=3_000)
    parser.add_argument("--rebalance-ms", type=int, default=60_000)
    parser.add_argument("--delay-ms", type=int, default=300_000, help="scheduled.rebalance.max.delay.ms")
    args = parser.parse_args()
    tasks = sum(t for _, t in args.connectors)
    print(
        f"bench-migration: {args.workers} workers, {len(args.connectors)} connectors, {tasks} tasks; session "
        f"{args.session_ms} ms, heartbeat {args.heartbeat_ms} ms, delay {args.delay_ms} ms; "
        f"pause {args.pause_ms} ms; {args.rounds} rounds (virtual clock)"
    )
    results: dict[str, list[dict[str, float]]] = {"classic": [], "connect": []}
    for seed in range(args.rounds):
        for protocol in ("classic", "connect"):
            results[protocol].append(measure(args, protocol, seed))
    rows = (
        ("moved", "tasks moved"),
        ("unowned_task_s", "unowned task-s"),
        ("converge_s", "converged after last, s"),
        ("double_owned_s", "double-owned task-s"),
    )
    print(f"{'':30}{'restart (classic)':>20}{'upgrade (connect)':>20}{'ratio':>10}")
    failed = False
    for key, label in rows:
        base = statistics.median(r[key] for r in results["classic"])
        new = statistics.median(r[key] for r in results["connect"])
        ratio = "-" if base == 0 else f"{new / base:.3g}"
        print(f"  {label:28}{base:>20.2f}{new:>20.2f}{ratio:>10}")
    worst_double = max(r["double_owned_s"] for rs in results.values() for r in rs)
    for key in ("moved", "unowned_task_s"):
        base = statistics.median(r[key] for r in results["classic"])
        new = statistics.median(r[key] for r in results["connect"])
        ok = new <= base
        failed |= not ok
        print(f"  goal: upgrade {key} <= restart's: {'PASS' if ok else 'MISS'}")
    print(f"  goal: never an item on two workers: {'PASS' if worst_double == 0 else 'FAIL'}")
    return 1 if worst_double else 0


if __name__ == "__main__":
    sys.exit(main())
