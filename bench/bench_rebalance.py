"""Rebalance benchmark (`make bench-rebalance`): real workers, a real coordinator, a real broker.

Each scenario runs once per assignor side: client-side (the workers run `incremental_cooperative`
themselves, on COMPUTE_ASSIGNMENT) and server-side (`Worker(server_side=True)`: the coordinator runs
it). Every run starts its own `coordinator serve` (a child process, `--allow-anonymous`) on a fresh
topic made by `coordinator topic create`, with short timeouts so that failure detection is short;
the workers are the SDK's, driven by a `Fleet` in this process.

Scenarios (issue text): scale out 10 -> 11 workers with 200 tasks; a rolling bounce of 10 workers;
one worker crash with a scheduled delay of 0 and with a delay; 100 workers joining an empty group;
a rolling bounce of 11 workers with the default 300 s delay, each away 2 s. Beyond it: a rolling
hard bounce (killed without a leave, back after 2.5 s with the same instance id), where failure
detection (the session timeout) is part of the outage; and, only with `--scenario bounce-dynamic`,
a worker without an instance id coming back under a new member id (the coordinator cannot know it
is the same worker: its work waits for the whole delay, as Kafka Connect's does).

Figures, all from the workers' own callbacks (a listener records, per item, the intervals each
worker ran it, on `time.monotonic`) and from counting the HTTP calls the workers make:

- converge: from the last change (a join, a worker's return; after a hard bounce the session
  expiry if later) until every configured item has exactly one owner and every worker is quiet
  (its last heartbeat changed nothing). For a crash, from the crash, against session timeout +
  delay + 3 heartbeats. "state final" is when the last ownership or epoch change happened; the
  workers see that it was the last one a heartbeat later;
- items moved: items that went to a worker other than the one that ran them before; "incl.
  returns" also counts items that stopped and came back to the same worker (a bounce);
- unowned task-s: the seconds each configured task had no owner, summed, over the scenario;
- heartbeats: heartbeat calls from the change until converged (and what the steady rate alone
  would have sent in that time);
- for bounces, per bounced worker: how long its tasks had no owner against how long the worker
  was really away (from stopping its tasks to its new process starting).

Each goal is printed next to its figure with PASS or MISS; nothing is asserted (timings vary).
Kafka Connect is not run here: its figure for the 300 s rolling bounce is the issue's model (each
bounced worker's tasks unowned for the whole delay), labelled as a model.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from records import ConnectorsAndTasks, ConnectorTaskCount, TaskId  # noqa: E402

from coordinator.core.config import CoordinatorConfig  # noqa: E402
from coordinator.core.items import Item, configured_work, items_of  # noqa: E402
from coordinator.sdk.client import CoordinatorClient  # noqa: E402
from coordinator.sdk.fleet import Fleet  # noqa: E402
from coordinator.sdk.worker import HEARTBEAT, RebalanceListener, RebalanceMetrics, Worker  # noqa: E402
from coordinator.tools.process import ServeProcess  # noqa: E402

SIDES = ("client-side", "server-side")
clock = time.monotonic


# --- recording ------------------------------------------------------------------------------------


class Tracker:
    """Who ran what, when: per item the intervals each worker (by name) ran it."""

    def __init__(self) -> None:
        self.running: dict[Item, dict[str, float]] = defaultdict(dict)  # item -> owner -> since
        self.closed: dict[Item, list[tuple[float, float, str]]] = defaultdict(list)
        self.assigned: list[tuple[float, Item, str]] = []  # every start, in time order
        self.last_event = 0.0  # the last ownership change, epoch change or rebalance end of any worker
        self.last_change = 0.0  # the last ownership or epoch change (the state is final from then on)
        self.stopped_at: dict[str, float] = {}  # worker name -> when it last stopped something
        self.born: dict[str, list[float]] = defaultdict(list)  # worker name -> when each process started

    def touch(self, change: bool) -> None:
        self.last_event = clock()
        if change:
            self.last_change = self.last_event

    def start(self, name: str, items: Iterable[Item]) -> None:
        now = clock()
        for item in items:
            self.running[item][name] = now
            self.assigned.append((now, item, name))
        self.last_event = self.last_change = now

    def stop(self, name: str, items: Iterable[Item]) -> None:
        now = clock()
        for item in items:
            since = self.running[item].pop(name, None)
            if since is not None:
                self.closed[item].append((since, now, name))
        self.stopped_at[name] = now
        self.last_event = self.last_change = now

    def owners(self) -> dict[Item, frozenset[str]]:
        return {item: frozenset(owners) for item, owners in self.running.items() if owners}

    def intervals(self, item: Item, a: float, b: float) -> list[tuple[float, float]]:
        now = clock()
        spans = [(s, e) for s, e, _ in self.closed.get(item, ())]
        spans += [(s, now) for s in self.running.get(item, {}).values()]
        return sorted((max(s, a), min(e, b)) for s, e in spans if e > a and s < b)

    def unowned_s(self, item: Item, a: float, b: float) -> float:
        """Seconds of [a, b] in which nobody ran the item."""
        covered, reach = 0.0, a
        for s, e in self.intervals(item, a, b):
            if e > reach:
                covered += e - max(s, reach)
                reach = e
        return (b - a) - covered

    def double_s(self, item: Item, a: float, b: float) -> float:
        """Seconds of [a, b] in which two workers ran the item at once (never, if the protocol holds)."""
        spans = self.intervals(item, a, b)
        events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
        depth, last, total = 0, a, 0.0
        for t, step in events:
            if depth >= 2:
                total += t - last
            depth += step
            last = t
        return total


class Recorder(RebalanceListener):
    def __init__(self, tracker: Tracker, name: str) -> None:
        self.tracker, self.name = tracker, name

    def on_assigned(self, items: ConnectorsAndTasks) -> None:
        self.tracker.start(self.name, items_of(items))

    def on_revoked(self, items: ConnectorsAndTasks) -> None:
        self.tracker.stop(self.name, items_of(items))

    def on_lost(self, items: ConnectorsAndTasks) -> None:
        self.tracker.stop(self.name, items_of(items))


class TracedMetrics(RebalanceMetrics):
    """The SDK's rebalance metrics, also noting when a worker's rebalance starts and ends."""

    def __init__(self, tracker: Tracker) -> None:
        super().__init__()
        self.tracker = tracker

    def changed(self) -> None:
        super().changed()
        self.tracker.touch(change=True)

    def quiet(self) -> None:
        if self._started is not None:
            self.tracker.touch(change=False)
        super().quiet()


class CountingClient(CoordinatorClient):
    """Counts the calls the workers make (a retried call counts once)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.heartbeats: list[float] = []
        self.other_calls: list[tuple[float, str]] = []

    async def call(self, group_id: str, method: str, path: str, answer: type, body: Any = None) -> Any:
        if (method, path) == HEARTBEAT:
            self.heartbeats.append(clock())
        else:
            self.other_calls.append((clock(), path))
        return await super().call(group_id, method, path, answer, body)

    def heartbeats_between(self, a: float, b: float) -> int:
        return sum(1 for t in self.heartbeats if a <= t <= b)

    def computations_between(self, a: float, b: float) -> int:
        return sum(1 for t, p in self.other_calls if a <= t <= b and p.endswith("/install-assignment"))


class BenchFleet(Fleet):
    """The demo's fleet, with each worker's listener and metrics recording into the tracker."""

    def __init__(self, *args: Any, tracker: Tracker, **kwargs: Any) -> None:
        super().__init__(*args, quiet=True, **kwargs)
        self.tracker = tracker

    def _worker(self, name: str) -> Worker:
        worker = super()._worker(name)
        worker.listener = Recorder(self.tracker, name)
        worker.metrics = TracedMetrics(self.tracker)
        self.tracker.born[name].append(clock())
        return worker

    async def crash(self, name: str) -> None:
        owned = self.workers[name].owned
        await super().crash(name)
        self.tracker.stop(name, owned)  # the process is gone: so is everything it ran

    async def hard_bounce(self, name: str, pause_s: float) -> None:
        """A restart without a leave (kill -9, the process comes back): no leave heartbeat, so the
        coordinator only learns of it from the session timeout; the new process (a new member id,
        the same instance id) is refused with UNRELEASED_INSTANCE_ID until then."""
        worker = self.workers.pop(name)
        owned = worker.owned
        await worker.stop(leave=False)
        self.tracker.stop(name, owned)
        await asyncio.sleep(pause_s)
        self.workers[name] = worker = self._worker(name)
        await worker.start()

    async def halt(self) -> None:
        """End of a run: stop every worker without leaving (the coordinator goes away next)."""
        await asyncio.gather(*(w.stop(leave=False) for w in self.workers.values()))
        self.workers.clear()


# --- one run ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    heartbeat_ms: int
    session_ms: int
    server_interval_ms: int
    initial_delay_ms: int | None = None  # None: the coordinator's default

    @property
    def hb(self) -> float:
        return self.heartbeat_ms / 1000

    @property
    def join_goal_s(self) -> float:
        """A new group waits the initial assignment delay for more members, then converges."""
        delay = (
            CoordinatorConfig().initial_assignment_delay_ms if self.initial_delay_ms is None else self.initial_delay_ms
        )
        return delay / 1000 + self.converge_goal_s

    @property
    def converge_goal_s(self) -> float:
        return 3 * self.hb


@dataclass
class Env:
    fleet: BenchFleet
    client: CountingClient
    tracker: Tracker
    timing: Timing
    expected: frozenset[Item]
    delay_ms: int
    side: str
    final_at: float = 0.0  # after `settle`: when the last ownership or epoch change happened

    async def settle(self, timeout: float) -> float:
        """Wait until the fleet converged and nothing changed for four heartbeat intervals;
        returns when it converged: when the last worker found its heartbeat changed nothing
        (`final_at` is when the state itself last changed, up to a heartbeat earlier)."""
        deadline = clock() + timeout
        quiet_s = 4 * self.timing.hb + self.timing.server_interval_ms / 1000
        while True:
            left = deadline - clock()
            if left <= 0:
                raise TimeoutError(f"not converged within {timeout:g} s")
            await self.fleet.wait_stable(self.expected, timeout=left)
            mark = self.tracker.last_event
            await asyncio.sleep(quiet_s)
            if self.tracker.last_event == mark and self.fleet.stable() and self.exactly_once():
                self.final_at = self.tracker.last_change
                return mark

    def exactly_once(self) -> bool:
        owned = [i for w in self.fleet.workers.values() for i in w.owned]
        return len(owned) == len(set(owned)) and set(owned) == self.expected

    def moves(self, before: dict[Item, frozenset[str]], a: float, b: float) -> tuple[int, int, dict[Item, list[str]]]:
        """(moved to another worker, moved incl. returns to the same worker, item -> new owners)."""
        starts: dict[Item, list[str]] = defaultdict(list)
        for t, item, name in self.tracker.assigned:
            if a <= t <= b:
                starts[item].append(name)
        moved = returned = 0
        for item, names in starts.items():
            previous = set(before.get(item, ()))
            if previous or len(names) > 1:
                returned += 1
            if len(previous | set(names)) > 1:
                moved += 1
        return moved, returned, starts

    def unowned(self, a: float, b: float, items: Iterable[Item] | None = None) -> tuple[float, float]:
        """(task-seconds, connector-seconds) without an owner in [a, b]."""
        tasks = connectors = 0.0
        for item in self.expected if items is None else items:
            s = self.tracker.unowned_s(item, a, b)
            if isinstance(item, TaskId):
                tasks += s
            else:
                connectors += s
        return tasks, connectors

    def double(self, a: float, b: float) -> float:
        return sum(self.tracker.double_s(item, a, b) for item in self.expected)

    def heartbeats(self, a: float, b: float, workers: int) -> tuple[int, int]:
        return self.client.heartbeats_between(a, b), round(workers * (b - a) / self.timing.hb)


@dataclass
class Scenario:
    key: str
    title: str
    delay_ms: int
    connectors: dict[str, int]
    run: Callable[[Env], Awaitable[dict[str, Any]]]
    report: Callable[[Scenario, Timing, dict[str, dict[str, Any]]], None]
    params: dict[str, Any] = field(default_factory=dict)
    default: bool = True  # run without --scenario


def create_topic(bootstrap: str, topic: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "topic",
            "create",
            "--bootstrap-servers",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            "1",
            "--replication-factor",
            "1",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def delete_topic(bootstrap: str, topic: str) -> None:
    """Best effort: the run's own topic only (the broker may be shared with other runs)."""
    from confluent_kafka.admin import AdminClient

    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        for future in admin.delete_topics([topic], operation_timeout=10).values():
            future.result(timeout=15)
    except Exception as e:  # a leftover topic is harmless
        print(f"  (could not delete topic {topic}: {e})", flush=True)


async def run_one(
    scenario: Scenario, side: str, timing: Timing, bootstrap: str, log_dir: Path, serial: int
) -> dict[str, Any]:
    topic = f"bench-rebalance-{os.getpid()}-{serial}"
    await asyncio.to_thread(create_topic, bootstrap, topic)
    flags = [
        "--allow-anonymous",
        "--log-level",
        "WARNING",
        "--heartbeat-interval-ms",
        str(timing.heartbeat_ms),
        "--session-timeout-ms",
        str(timing.session_ms),
        "--scheduled-rebalance-max-delay-ms",
        str(scenario.delay_ms),
        "--server-assignment-interval-ms",
        str(timing.server_interval_ms),
    ]
    if timing.initial_delay_ms is not None:
        flags += ["--initial-assignment-delay-ms", str(timing.initial_delay_ms)]
    serve = ServeProcess(bootstrap, topic, log_dir, *flags)
    await asyncio.to_thread(serve.start)
    started = clock()
    try:
        async with CountingClient(serve.url, retry_for_s=60) as client:
            tracker = Tracker()
            fleet = BenchFleet(
                client,
                f"bench-{scenario.key}",
                server_side=side == "server-side",
                tracker=tracker,
                static=scenario.params.get("static", True),
            )
            await fleet.set_connectors(scenario.connectors)
            expected = configured_work(tuple(ConnectorTaskCount(n, t) for n, t in scenario.connectors.items())).items
            env = Env(fleet, client, tracker, timing, expected, scenario.delay_ms, side)
            try:
                figures = await scenario.run(env)
            except TimeoutError as e:
                figures = {"error": str(e)}
            except Exception as e:  # a worker stopped, or the coordinator failed: report, go on
                figures = {"error": f"{type(e).__name__}: {e}"}
            await fleet.halt()
            for w in fleet.crashed.values():
                await w.stop(leave=False)
    finally:
        code = await asyncio.to_thread(serve.stop)
        await asyncio.to_thread(delete_topic, bootstrap, topic)
    figures["wall_s"] = clock() - started
    if "error" in figures:
        figures["serve_log"] = serve.log()[-1500:]
    elif code not in (0, None):
        figures["note"] = f"coordinator serve exited {code}"
    return figures


# --- scenarios --------------------------------------------------------------------------------------


async def scale_out(env: Env, workers: int) -> dict[str, Any]:
    await env.fleet.join(workers)
    await env.settle(timeout=60)
    before = env.tracker.owners()
    t0 = clock()
    [new] = await env.fleet.join(1)
    converged = await env.settle(timeout=60)
    t1 = clock()
    moved, incl_returns, starts = env.moves(before, t0, t1)
    share = len(env.fleet.workers[new].owned)
    elsewhere = sum(1 for names in starts.values() if any(n != new for n in names))
    hb, steady = env.heartbeats(t0, converged, workers + 1)
    tasks_s, connectors_s = env.unowned(t0, t1)
    return dict(
        converge_s=converged - t0,
        final_s=env.final_at - t0,
        moved=moved,
        moved_incl_returns=incl_returns,
        share=share,
        moved_elsewhere=elsewhere,
        unowned_task_s=tasks_s,
        unowned_connector_s=connectors_s,
        heartbeats=hb,
        heartbeats_steady=steady,
        computations=env.client.computations_between(t0, converged),
        double_s=env.double(t0, t1),
    )


async def rolling_bounce(
    env: Env, workers: int, away_s: float, hard: bool = False, count: int | None = None
) -> dict[str, Any]:
    await env.fleet.join(workers)
    await env.settle(timeout=60)
    before = env.tracker.owners()
    t0 = clock()
    bounces = []
    timeout = 30 + away_s + env.timing.session_ms / 1000
    for name in sorted(env.fleet.workers, key=_natural)[:count]:
        mine = env.fleet.workers[name].owned
        tb = clock()
        await (env.fleet.hard_bounce if hard else env.fleet.bounce)(name, away_s)
        back = env.tracker.born[name][-1]
        stopped = env.tracker.stopped_at.get(name, tb)
        try:
            converged = await env.settle(timeout=timeout)
        except TimeoutError:
            bounces.append(dict(name=name, error=f"not converged {timeout:g} s after its return"))
            break
        end = clock()
        # The last change: its return, or after a hard bounce the session expiry, if later (the
        # coordinator cannot know earlier that the old process is gone).
        last_change = max(back, stopped + env.timing.session_ms / 1000) if hard else back
        unowned = [env.tracker.unowned_s(item, tb, end) for item in mine]
        tasks = [item for item in mine if isinstance(item, TaskId)]
        bounces.append(
            dict(
                name=name,
                tasks=len(tasks),
                items=len(mine),
                away_s=back - stopped,
                unowned_max_s=max(unowned, default=0.0),
                converge_s=converged - last_change,
                final_s=env.final_at - last_change,
                got_own_back=env.fleet.workers[name].owned == mine,
            )
        )
    t1 = clock()
    moved, incl_returns, _ = env.moves(before, t0, t1)
    tasks_s, connectors_s = env.unowned(t0, t1)
    done = [b for b in bounces if "error" not in b]
    hb, steady = env.heartbeats(t0, t1, workers)
    return dict(
        bounces=bounces,
        moved=moved,
        moved_incl_returns=incl_returns,
        unowned_task_s=tasks_s,
        unowned_connector_s=connectors_s,
        heartbeats=hb,
        heartbeats_steady=steady,
        computations=env.client.computations_between(t0, t1),
        double_s=env.double(t0, t1),
        converge_max_s=max((b["converge_s"] for b in done), default=None),
        converge_median_s=statistics.median([b["converge_s"] for b in done]) if done else None,
        final_max_s=max((b["final_s"] for b in done), default=None),
        final_median_s=statistics.median([b["final_s"] for b in done]) if done else None,
        bounced_tasks=sum(b["tasks"] for b in done),
        bounced_items=sum(b["items"] for b in done),
        incomplete=len(done) < (count or workers),
        window_s=t1 - t0,
    )


async def crash(env: Env, workers: int, victim: str) -> dict[str, Any]:
    await env.fleet.join(workers)
    await env.settle(timeout=60)
    before = env.tracker.owners()
    mine = env.fleet.workers[victim].owned
    t0 = clock()
    await env.fleet.crash(victim)
    acts_after = (env.timing.session_ms + env.delay_ms) / 1000  # when the coordinator can act, at the latest
    converged = await env.settle(timeout=acts_after + 60)
    t1 = clock()
    moved, incl_returns, starts = env.moves(before, t0, t1)
    foreign = sum(1 for item, names in starts.items() if item not in mine)
    tasks_s, connectors_s = env.unowned(t0, t1)
    hb, steady = env.heartbeats(t0, converged, workers - 1)
    tasks = sum(1 for item in mine if isinstance(item, TaskId))
    return dict(
        converge_s=converged - t0,
        final_s=env.final_at - t0,
        acts_after_s=acts_after,
        moved=moved,
        moved_incl_returns=incl_returns,
        victim_items=len(mine),
        victim_tasks=tasks,
        moved_not_victims=foreign,
        unowned_task_s=tasks_s,
        unowned_connector_s=connectors_s,
        model_task_s=tasks * acts_after,
        heartbeats=hb,
        heartbeats_steady=steady,
        computations=env.client.computations_between(t0, converged),
        double_s=env.double(t0, t1),
    )


async def join_storm(env: Env, workers: int) -> dict[str, Any]:
    t0 = clock()
    await env.fleet.join(workers)
    last_join = clock()
    converged = await env.settle(timeout=120)
    t1 = clock()
    moved, incl_returns, _ = env.moves({}, t0, t1)
    tasks_s, connectors_s = env.unowned(t0, t1)
    hb, steady = env.heartbeats(t0, converged, workers)
    assigned = sum(1 for t, _, _ in env.tracker.assigned if t0 <= t <= t1)
    return dict(
        converge_s=converged - last_join,
        final_s=env.final_at - last_join,
        since_first_s=converged - t0,
        joins_s=last_join - t0,
        moved=moved,
        moved_incl_returns=incl_returns,
        assignments=assigned,
        unowned_task_s=tasks_s,
        unowned_connector_s=connectors_s,
        heartbeats=hb,
        heartbeats_steady=steady,
        computations=env.client.computations_between(t0, converged),
        double_s=env.double(t0, t1),
    )


def _natural(name: str) -> tuple:
    prefix, _, number = name.rpartition("-")
    return (prefix, int(number)) if number.isdigit() else (name, 0)


# --- reporting --------------------------------------------------------------------------------------


def verdict(ok: bool | None) -> str:
    return "" if ok is None else ("PASS" if ok else "MISS")


def table(title: str, rows: list[tuple[str, str, dict[str, tuple[str, bool | None]]]]) -> None:
    """rows: (figure, goal, side -> (value, judgement))."""
    print(f"\n== {title} ==")
    head = ["figure", "goal", *SIDES]
    body = [
        [
            figure,
            goal,
            *[
                (cells[s][0] + (f"  {verdict(cells[s][1])}" if cells[s][1] is not None else "")) if s in cells else "-"
                for s in SIDES
            ],
        ]
        for figure, goal, cells in rows
    ]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *body]:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def errors(results: dict[str, dict[str, Any]]) -> bool:
    bad = False
    for side, f in results.items():
        if "error" in f:
            bad = True
            print(f"  {side}: FAILED: {f['error']}")
            if f.get("serve_log"):
                tail = "\n".join("      " + line for line in f["serve_log"].splitlines())
                print("    coordinator log tail:\n" + tail)
    return bad


def common_rows(
    results: dict[str, dict[str, Any]], t: Timing, window: str, heartbeat_window: str = "change to converged"
) -> list:
    ok = {s: f for s, f in results.items() if "error" not in f}
    return [
        (
            f"unowned connector-s ({window})",
            "(no goal)",
            {s: (f"{f['unowned_connector_s']:.2f}", None) for s, f in ok.items()},
        ),
        (
            f"heartbeats ({heartbeat_window})",
            "(no goal)",
            {s: (f"{f['heartbeats']} (steady rate alone {f['heartbeats_steady']})", None) for s, f in ok.items()},
        ),
        ("assignments installed by workers", "(no goal)", {s: (str(f["computations"]), None) for s, f in ok.items()}),
        ("item-s owned twice at once", "0", {s: (f"{f['double_s']:.3f}", f["double_s"] == 0) for s, f in ok.items()}),
        ("wall time of the run", "", {s: (f"{f['wall_s']:.1f} s", None) for s, f in results.items()}),
    ]


def report_scale_out(sc: Scenario, t: Timing, results: dict[str, dict[str, Any]]) -> None:
    ok = {s: f for s, f in results.items() if "error" not in f}
    table(
        sc.title,
        [
            (
                "converge after the join",
                f"<= {t.converge_goal_s:.2f} s (3 heartbeats)",
                {
                    s: (
                        f"{f['converge_s']:.2f} s (state final {f['final_s']:.2f} s)",
                        f["converge_s"] <= t.converge_goal_s,
                    )
                    for s, f in ok.items()
                },
            ),
            (
                "items moved",
                "= the new worker's share",
                {
                    s: (
                        f"{f['moved']} (share {f['share']}, moved elsewhere {f['moved_elsewhere']})",
                        f["moved"] == f["share"] and f["moved_elsewhere"] == 0,
                    )
                    for s, f in ok.items()
                },
            ),
            (
                "items moved incl. returns",
                "(no goal)",
                {s: (str(f["moved_incl_returns"]), None) for s, f in ok.items()},
            ),
            (
                "unowned task-s (join to converged)",
                "(no goal)",
                {s: (f"{f['unowned_task_s']:.2f}", None) for s, f in ok.items()},
            ),
            *common_rows(results, t, "join to converged"),
        ],
    )
    errors(results)


def report_bounce(sc: Scenario, t: Timing, results: dict[str, dict[str, Any]]) -> None:
    ok = {s: f for s, f in results.items() if "error" not in f}
    excess_goal = 3 * t.hb
    delay_s = sc.delay_ms / 1000
    fd = t.session_ms / 1000 if sc.params.get("hard") else 0.0  # failure detection: none after a leave
    for f in ok.values():
        for b in f["bounces"]:
            if "error" not in b:
                b["excess_s"] = b["unowned_max_s"] - max(b["away_s"], fd)
    away = "max(away, session)" if fd else "away"
    after = "return or session expiry, the later" if fd else "return"
    rows = [
        (
            f"converge after each {after}, median",
            f"<= {t.converge_goal_s:.2f} s (3 heartbeats)",
            {
                s: (
                    f"{_s(f['converge_median_s'])} (state final {_s(f['final_median_s'])})",
                    f["converge_median_s"] is not None and f["converge_median_s"] <= t.converge_goal_s,
                )
                for s, f in ok.items()
            },
        ),
        (
            f"converge after each {after}, max",
            f"<= {t.converge_goal_s:.2f} s (3 heartbeats)",
            {
                s: (
                    f"{_s(f['converge_max_s'])} (state final {_s(f['final_max_s'])})",
                    f["converge_max_s"] is not None
                    and f["converge_max_s"] <= t.converge_goal_s
                    and not f["incomplete"],
                )
                for s, f in ok.items()
            },
        ),
        ("items moved", "0 (nothing moves)", {s: (str(f["moved"]), f["moved"] == 0) for s, f in ok.items()}),
        (
            "items moved incl. returns",
            "(the bounced workers' items)",
            {s: (f"{f['moved_incl_returns']} (bounced {f['bounced_items']})", None) for s, f in ok.items()},
        ),
        (
            f"unowned - {away}, per bounced worker, max",
            f"<= {excess_goal:.2f} s (3 heartbeats), never the delay ({delay_s:g} s)",
            {
                s: (
                    _s(_max_excess(f)),
                    _max_excess(f) is not None and _max_excess(f) <= excess_goal and not f["incomplete"],
                )
                for s, f in ok.items()
            },
        ),
        (
            "unowned task-s (whole rolling bounce)",
            f"~ bounced tasks x {away} (+ join latency)",
            {s: (f"{f['unowned_task_s']:.1f} (tasks x {away} = {_tasks_away(f):.1f})", None) for s, f in ok.items()},
        ),
    ]
    if sc.params.get("connect_model"):
        rows.append(
            (
                "  Kafka Connect's assignor (MODEL, not run)",
                f"bounced tasks x {delay_s:g} s delay",
                {s: (f"{f['bounced_tasks'] * delay_s:,.0f} task-s (MODEL)", None) for s, f in ok.items()},
            )
        )
        rows.append(
            (
                "  ours / Connect model",
                "",
                {
                    s: (f"{f['unowned_task_s'] / max(1e-9, f['bounced_tasks'] * delay_s):.4f}", None)
                    for s, f in ok.items()
                },
            )
        )
    table(sc.title, rows + common_rows(results, t, "whole rolling bounce", "whole rolling bounce"))
    for side, f in ok.items():
        print(f"  {side} per bounced worker: away -> tasks unowned (max over its items), c = converge after {after}")
        line = []
        for b in f["bounces"]:
            if "error" in b:
                line.append(f"{b['name']}: {b['error']}")
            else:
                flag = "" if b["excess_s"] <= excess_goal else " MISS"
                own = "" if b["got_own_back"] else " (NOT its own work back)"
                line.append(
                    f"{b['name']} {b['away_s']:.2f}->{b['unowned_max_s']:.2f}s c{b['converge_s']:.2f}{flag}{own}"
                )
        for i in range(0, len(line), 4):
            print("    " + "; ".join(line[i : i + 4]))
    errors(results)


def _max_excess(f: dict[str, Any]) -> float | None:
    done = [b for b in f["bounces"] if "error" not in b]
    return max((b["excess_s"] for b in done), default=None)


def _tasks_away(f: dict[str, Any]) -> float:
    return sum(b["tasks"] * (b["unowned_max_s"] - b["excess_s"]) for b in f["bounces"] if "error" not in b)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def report_crash(sc: Scenario, t: Timing, results: dict[str, dict[str, Any]]) -> None:
    ok = {s: f for s, f in results.items() if "error" not in f}
    acts = (t.session_ms + sc.delay_ms) / 1000
    table(
        sc.title,
        [
            (
                "converge after the crash",
                f"<= session + delay + 3 heartbeats = {acts + t.converge_goal_s:.2f} s",
                {
                    s: (
                        f"{f['converge_s']:.2f} s (state final {f['final_s']:.2f} s)",
                        f["converge_s"] <= acts + t.converge_goal_s,
                    )
                    for s, f in ok.items()
                },
            ),
            (
                "items moved",
                "= the crashed worker's items",
                {
                    s: (
                        f"{f['moved']} (crashed worker had {f['victim_items']}; others moved {f['moved_not_victims']})",
                        f["moved"] == f["victim_items"] and f["moved_not_victims"] == 0,
                    )
                    for s, f in ok.items()
                },
            ),
            (
                "items moved incl. returns",
                "(no goal)",
                {s: (str(f["moved_incl_returns"]), None) for s, f in ok.items()},
            ),
            (
                "unowned task-s (crash to converged)",
                f"~ its tasks x (session + delay) = its tasks x {acts:g} s",
                {s: (f"{f['unowned_task_s']:.1f} (model {f['model_task_s']:.1f})", None) for s, f in ok.items()},
            ),
            *common_rows(results, t, "crash to converged"),
        ],
    )
    errors(results)


def report_join(sc: Scenario, t: Timing, results: dict[str, dict[str, Any]]) -> None:
    ok = {s: f for s, f in results.items() if "error" not in f}
    table(
        sc.title,
        [
            (
                "converge after the last join",
                f"<= {t.join_goal_s:.2f} s (initial assignment delay + 3 heartbeats)",
                {
                    s: (
                        f"{f['converge_s']:.2f} s (state final {f['final_s']:.2f} s; joins took {f['joins_s']:.2f} s)",
                        f["converge_s"] <= t.join_goal_s,
                    )
                    for s, f in ok.items()
                },
            ),
            (
                "items moved after their first owner",
                "(no goal)",
                {
                    s: (f"{f['moved']} ({f['assignments']} assignments for {len(_expected(sc))} items)", None)
                    for s, f in ok.items()
                },
            ),
            (
                "unowned task-s (first join to converged)",
                "(no goal)",
                {s: (f"{f['unowned_task_s']:.1f}", None) for s, f in ok.items()},
            ),
            *common_rows(results, t, "first join to converged"),
        ],
    )
    errors(results)


def _expected(sc: Scenario) -> frozenset[Item]:
    return configured_work(tuple(ConnectorTaskCount(n, c) for n, c in sc.connectors.items())).items


# --- main -------------------------------------------------------------------------------------------


def scenarios(quick: bool) -> list[Scenario]:
    def connectors(count: int, tasks: int) -> dict[str, int]:
        return {f"conn-{c:02d}": tasks for c in range(count)}

    n, work = (4, connectors(4, 10)) if quick else (10, connectors(10, 20))
    bounce_n, storm_n = (3, 20) if quick else (10, 100)
    big_n = 4 if quick else 11
    hard_n = 2 if quick else 5
    delay = 3_000 if quick else 5_000
    ntasks = sum(work.values())
    out = [
        Scenario(
            "scale-out",
            f"scale out {n} -> {n + 1} workers, {len(work)} connectors / {ntasks} tasks",
            300_000,
            work,
            lambda env: scale_out(env, n),
            report_scale_out,
        ),
        Scenario(
            "rolling-bounce",
            f"rolling bounce of {bounce_n} workers, each away 1 s, delay 10 s, {len(work)} connectors / {ntasks} tasks",
            10_000,
            work,
            lambda env: rolling_bounce(env, bounce_n, 1.0),
            report_bounce,
        ),
        Scenario(
            "crash-0",
            f"one worker of {n} crashes, delay 0, {ntasks} tasks",
            0,
            work,
            lambda env: crash(env, n, "worker-3"),
            report_crash,
        ),
        Scenario(
            "crash-delay",
            f"one worker of {n} crashes, delay {delay / 1000:g} s, {ntasks} tasks",
            delay,
            work,
            lambda env: crash(env, n, "worker-3"),
            report_crash,
        ),
        Scenario(
            "join",
            f"{storm_n} workers join an empty group, {ntasks} tasks",
            300_000,
            work,
            lambda env: join_storm(env, storm_n),
            report_join,
        ),
        Scenario(
            "rolling-bounce-300",
            f"rolling bounce of {big_n} workers, each away 2 s, default delay 300 s, {ntasks} tasks",
            300_000,
            work,
            lambda env: rolling_bounce(env, big_n, 2.0),
            report_bounce,
            params={"connect_model": True},
        ),
        Scenario(
            "hard-bounce",
            f"rolling hard bounce (kill, no leave; back after 2.5 s, same instance id) of "
            f"{hard_n} of {n} workers, default delay 300 s, {ntasks} tasks",
            300_000,
            work,
            lambda env: rolling_bounce(env, n, 2.5, hard=True, count=hard_n),
            report_bounce,
            params={"hard": True},
        ),
        # Not run by default: a dynamic worker (no instance id) restarting with a new member id is,
        # to the coordinator, a new worker; its predecessor's work waits for the whole delay.
        Scenario(
            "bounce-dynamic",
            f"bounce of 1 dynamic worker of {n} (new member id, no instance id), away 1 s, delay {delay / 1000:g} s",
            delay,
            work,
            lambda env: rolling_bounce(env, n, 1.0, count=1),
            report_bounce,
            params={"static": False},
            default=False,
        ),
    ]
    return out


async def amain(args: argparse.Namespace) -> int:
    timing = Timing(args.heartbeat_ms, args.session_ms, args.server_interval_ms, args.initial_delay_ms)
    chosen = [s for s in scenarios(args.quick) if (s.key in args.scenario if args.scenario else s.default)]
    print(
        f"rebalance benchmark: real coordinator (`coordinator serve`), SDK workers, broker {args.bootstrap_servers}; "
        f"heartbeat {timing.heartbeat_ms} ms, session {timing.session_ms} ms, server-side assignor at most every "
        f"{timing.server_interval_ms} ms; initial assignment delay "
        f"{'the default' if timing.initial_delay_ms is None else f'{timing.initial_delay_ms} ms'}; "
        "assignor incremental_cooperative, client-side and server-side" + ("; --quick" if args.quick else ""),
        flush=True,
    )
    started = clock()
    serial = 0
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as logs:
        for sc in chosen:
            results = {}
            for side in SIDES:
                serial += 1
                print(f"  running {sc.key} ({side}) ...", flush=True)
                results[side] = await run_one(sc, side, timing, args.bootstrap_servers, Path(logs), serial)
            sc.report(sc, timing, results)
            sys.stdout.flush()
    print(f"\ntotal wall time {clock() - started:.0f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:19092"))
    parser.add_argument("--quick", action="store_true", help="fewer workers and tasks: a smoke test")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=[s.key for s in scenarios(False)],
        help="run only this scenario (repeatable)",
    )
    parser.add_argument("--heartbeat-ms", type=int, default=250)
    parser.add_argument("--session-ms", type=int, default=3_000)
    parser.add_argument("--server-interval-ms", type=int, default=100)
    parser.add_argument(
        "--initial-delay-ms",
        type=int,
        default=None,
        help="the coordinator's initial assignment delay (default: its own default)",
    )
    return asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
