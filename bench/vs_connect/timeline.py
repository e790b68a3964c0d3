"""Who ran which task when, for either system, and the figures the side-by-side table prints.

Both systems feed one kind of event, each with its wall-clock time (processes on one machine share
that clock): a worker started a task, stopped it, went down (killed, or its process exited: all it
ran stops), or completed a rebalance. Kafka Connect's come from its status topic (a task's RUNNING
or other state, written by the worker that ran it) and its log ("Joined group at generation");
ours from the fleet's `--events` lines. Events may arrive out of order (one file per process), so
every figure replays them sorted.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

START, STOP, DOWN, REBALANCE = "start", "stop", "down", "rebalance"


@dataclass(frozen=True, order=True)
class Event:
    t: float
    kind: str
    worker: str
    task: str = ""


class Timeline:
    """The events of one run; safe to feed from a reader thread while the scenario reads it."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def add(self, t: float, kind: str, worker: str, tasks: Iterable[str] = ("",)) -> None:
        with self._lock:
            self._events.extend(Event(t, kind, worker, task) for task in tasks)

    def events(self, until: float | None = None, before: float | None = None) -> list[Event]:
        """Sorted by time; up to `until` included, or up to `before` excluded."""
        with self._lock:
            events = sorted(self._events)
        if until is not None:
            events = [e for e in events if e.t <= until]
        return events if before is None else [e for e in events if e.t < before]

    def last_change(self) -> float:
        """When the last start, stop or departure happened (0 before any)."""
        return max((e.t for e in self.events() if e.kind != REBALANCE), default=0.0)

    def last_event(self) -> float:
        return max((e.t for e in self.events()), default=0.0)

    def owners(self, at: float | None = None, before: float | None = None) -> dict[str, frozenset[str]]:
        """task -> the workers running it at `at` (now by default), or just before `before`."""
        running: dict[str, set[str]] = defaultdict(set)
        for e in self.events(at, before):
            if e.kind == START:
                running[e.task].add(e.worker)
            elif e.kind == STOP:
                running[e.task].discard(e.worker)
            elif e.kind == DOWN:
                for workers in running.values():
                    workers.discard(e.worker)
        return {task: frozenset(w) for task, w in running.items() if w}

    def covered(self, expected: Iterable[str], at: float | None = None) -> bool:
        """Every expected task runs, on exactly one worker."""
        owners = self.owners(at)
        return all(len(owners.get(task, ())) == 1 for task in expected)

    def spans(self, until: float) -> dict[str, list[tuple[float, float, str]]]:
        """task -> (from, to, worker) for each time a worker ran it, open ones closed at `until`."""
        since: dict[tuple[str, str], float] = {}
        spans: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
        for e in self.events(until):
            if e.kind == START:
                since.setdefault((e.task, e.worker), e.t)
            elif e.kind == STOP:
                if (start := since.pop((e.task, e.worker), None)) is not None:
                    spans[e.task].append((start, e.t, e.worker))
            elif e.kind == DOWN:
                for key in [k for k in since if k[1] == e.worker]:
                    spans[key[0]].append((since.pop(key), e.t, e.worker))
        for (task, worker), start in since.items():
            spans[task].append((start, until, worker))
        return spans

    def figures(
        self, expected: Iterable[str], t0: float, t1: float, seen: float | None = None
    ) -> dict[str, float | int | None]:
        """The table's figures for the window [t0, t1]: what happened after the scenario's action at
        t0 until the group was stable again at t1. Rebalances count until `seen` (t1 by default): a
        worker sees its rebalance complete after the last change, at the heartbeat that changes
        nothing."""
        expected = sorted(expected)
        before = self.owners(before=t0)
        spans = self.spans(t1)
        moved = unowned = double = 0.0
        recovered = t0
        for task in expected:
            started = {w for s, _, w in spans.get(task, ()) if t0 < s <= t1}
            if len(set(before.get(task, ())) | started) > 1:
                moved += 1
            gaps, overlap = _gaps_and_overlap(
                [(max(s, t0), min(e, t1)) for s, e, _ in spans.get(task, ()) if e > t0 and s < t1], t0, t1
            )
            unowned += sum(b - a for a, b in gaps)
            double += overlap
            if gaps:
                recovered = max(recovered, gaps[-1][1])
        rebalances: dict[str, int] = defaultdict(int)
        for e in self.events(t1 if seen is None else max(seen, t1)):
            if e.kind == REBALANCE and e.t > t0:
                rebalances[e.worker] += 1
        return {
            "tasks": len(expected),
            "moved": int(moved),
            "unowned_task_s": round(unowned, 2),
            "recovered_s": round(recovered - t0, 2),
            "stable_s": round(t1 - t0, 2),
            "rebalances_max": max(rebalances.values(), default=0),
            "rebalances_total": sum(rebalances.values()),
            "double_owned_s": round(double, 3),
        }

    def double_owned_s(self, until: float) -> float:
        """Seconds, over the whole run, that some task ran on two workers at once (summed over tasks)."""
        return sum(
            _gaps_and_overlap([(s, e) for s, e, _ in spans], 0.0, until)[1] for spans in self.spans(until).values()
        )

    def to_json(self) -> list[dict[str, object]]:
        return [
            {"t": e.t, "kind": e.kind, "worker": e.worker, **({"task": e.task} if e.task else {})}
            for e in self.events()
        ]


def _gaps_and_overlap(spans: list[tuple[float, float]], a: float, b: float) -> tuple[list[tuple[float, float]], float]:
    """Within [a, b]: the intervals no span covers, and the seconds two or more spans cover."""
    edges = sorted([(s, 1) for s, e in spans if e > s] + [(e, -1) for s, e in spans if e > s])
    gaps: list[tuple[float, float]] = []
    overlap, depth, last = 0.0, 0, a
    for t, step in edges:
        t = min(max(t, a), b)
        if depth == 0 and t > last:
            gaps.append((last, t))
        elif depth >= 2:
            overlap += t - last
        depth += step
        last = t
    if depth == 0 and b > last:
        gaps.append((last, b))
    return gaps, overlap
