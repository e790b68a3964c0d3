"""Re-runs of a group's history, and what each did (issue 32: "what if" replays).

`rerun` drives an `Extracted` script through the coordinator with some settings
(`coordinator.core.driver.scripted.run_script`) and replays what it wrote as a `History` of its own,
so that the recorded history and every re-run are measured by the same code (`measure`):

- **moves**: an item given to a worker other than the one that last held it (a worker is named by
  its instance id when it has one: a restarted static worker is the same worker). Work that waits
  for its worker and goes back to it did not move; new work given out for the first time did not
  either;
- **unowned task-seconds**: for each task, the time it was configured and nobody held it; the
  **longest wait** is the longest such stretch of one task;
- **rebalances**, and **time to stable after each happening**: from the happening to the end of
  the last rebalance that started before the next one.

`faithfulness` compares the recorded history with the re-run on its own settings: the moves of
each rebalance (that moved anything), in order; the totals within 5%. `differences` finds the
happenings where an alternative differs most. All pure: events in, numbers out.

`simulate` is the whole of it for one group's `History`, wherever its records were read (the
topic or a dump by `coordinator replay simulate`, the audit's records table by `spark.whatif`):
the settings the group had, its happenings, the re-runs and what each did, as one `Report`.
"""

from __future__ import annotations

import bisect
import gc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from records import TaskId

from coordinator.core.driver.scripted import Crash, Leave, ScriptRun, ScriptSettings, SetConnectors, run_script
from coordinator.core.items import Item
from replay import events as ev
from replay.errors import ReplayError
from replay.history import History, Interval, Rebalance
from replay.positions import Position
from replay.whatif import Alternatives, Extracted, Recorded, extract, own_runs, recorded_settings

TOLERANCE = 0.05  # the "within 5%"


@dataclass(frozen=True, slots=True)
class Move:
    at_ms: int
    offset: int
    item: Item
    source: str
    target: str


@dataclass(slots=True)
class Outcome:
    """What one history (recorded, or a re-run) did."""

    name: str
    rebalances: int = 0
    moves: list[Move] = field(default_factory=list)
    unowned_task_ms: int = 0
    longest_wait_ms: int = 0
    stable_after_ms: list[int | None] = field(default_factory=list)  # per happening
    rebalance_moves: list[frozenset] = field(default_factory=list)  # per rebalance that moved anything
    heartbeats: int = 0  # a re-run's, sent in all
    given_up: dict[str, str] = field(default_factory=dict)  # a re-run's workers refused for good, and why

    @property
    def tasks_moved(self) -> int:
        return sum(1 for m in self.moves if not isinstance(m.item, str))


@dataclass(slots=True)
class Report:
    """What `simulate` found: the recorded history's outcome (`base`) beside each re-run's
    (`outcomes`: the faithful re-run first, then the alternatives), and every history (for a plot)."""

    group_id: str
    extracted: Extracted
    recorded: Recorded
    own: ScriptSettings  # the group's own settings, the faithful re-run's
    base: Outcome
    outcomes: list[Outcome]
    histories: list[tuple[str, History]]  # ("recorded", the history read), then each re-run's
    since: int | None  # compared from here (the alternatives take over then)

    @property
    def recorded_history(self) -> History:
        return self.histories[0][1]


def simulate(
    history: History,
    group_id: str,
    *,
    since: int | None = None,
    alternatives: Alternatives | None = None,
    given: dict[str, int] | None = None,
    where: str = "",
) -> Report:
    """Re-run the group's `history` (read from its start: the re-runs start from what the group
    was at `since`, which the records before it say) with its own settings, then with each of
    `alternatives`. `given` (setting -> value) is what the topic does not hold, such as the flags
    the group's coordinator ran with; `where` ends the errors' sentence (" in dump FILE")."""
    if history.first is None:
        raise ReplayError(f"no records of group {group_id}{where}")
    recorded = recorded_settings(history.events, given)
    extracted = extract(history.events, group_id, recorded.settings)
    if not any(since is None or h.step.at_ms >= since for h in extracted.happenings):
        raise ReplayError(f"no membership events of group {group_id}{where}")
    own = own_settings(extracted, recorded)
    runs = [*own_runs(own), *(alternatives or Alternatives()).runs(own)]
    base, outcomes, reruns = _run_all(history, extracted, runs, since)
    histories = [("recorded", history), *zip([name for name, _ in runs], reruns)]
    return Report(group_id, extracted, recorded, own, base, outcomes, histories, since)


def _run_all(
    history: History, extracted: Extracted, runs: list[tuple[str, ScriptSettings]], since: int | None
) -> tuple[Outcome, list[Outcome], list[History]]:
    """Each run from the start; an alternative takes over at `since` (before it, the group as it
    was), but for one on the other protocol: a group does not change protocol midway, so that one
    runs from the start (measured from `since` as well)."""
    end = history.last.timestamp_ms
    reruns = []
    own = runs[0][1]
    for n, (name, settings) in enumerate(runs):
        if since is None or n == 0 or settings.protocol != own.protocol:
            simulated, run = rerun(extracted, settings, end)
        else:
            simulated, run = rerun(extracted, own, end, switch=(since, settings))
        reruns.append((name, simulated, run))
    end = max([end, *(h.last.timestamp_ms for _, h, _ in reruns if h.last is not None)])
    recorded = measure("recorded", history, extracted, end, since)
    outcomes = []
    for name, simulated, run in reruns:
        outcome = measure(name, simulated, extracted, end, since)
        outcome.heartbeats, outcome.given_up = run.heartbeats, run.given_up
        outcomes.append(outcome)
    return recorded, outcomes, [h for _, h, _ in reruns]


def rerun(
    extracted: Extracted, settings: ScriptSettings, until_ms: int, switch: tuple[int, ScriptSettings] | None = None
) -> tuple[History, ScriptRun]:
    """The script through the coordinator with `settings` (and from `switch`'s time on, its
    settings): its history, and the run (its records, heartbeats, workers refused for good)."""
    steps = [h.step for h in extracted.happenings]
    with _collector_paused():
        run = run_script(extracted.group_id, steps, settings, extracted.start_ms, until_ms, switch)
        history = History(extracted.group_id)
        for n, (record, stamp) in enumerate(zip(run.log, run.stamps)):
            history.apply(record, Position(0, n, stamp))  # no encoding and decoding: the records are at hand
    return history, run


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic collector paused, as `History.run` pauses it: what a run builds stays alive (the
    coordinator's state, the log, the history), so a collection only walks it again; on a week of a
    100-worker group the collections took a tenth of the time."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def own_settings(extracted: Extracted, recorded: Recorded) -> ScriptSettings:
    """The settings the group had, for its faithful re-run: as recorded, with the assignor its
    members named."""
    return replace(recorded.settings, server_side=extracted.server_side, assignor=extracted.assignor)


def measure(name: str, history: History, extracted: Extracted, end_ms: int, from_ms: int | None = None) -> Outcome:
    """The history's numbers over [`from_ms` (default: its start), `end_ms`] (a holding open at
    its end ends there); the history before `from_ms` is only what the group was by then."""
    with _collector_paused():
        return _measure(name, history, extracted, end_ms, extracted.start_ms if from_ms is None else from_ms)


def _measure(name: str, history: History, extracted: Extracted, end_ms: int, start: int) -> Outcome:
    workers = _worker_names(history.events)
    intervals = history.all_intervals()
    rebalances = [r for r in history.all_rebalances() if r.start.timestamp_ms >= start]
    out = Outcome(name, rebalances=len(rebalances))
    by_item: dict[Item, list[Interval]] = {}
    for i in intervals:
        by_item.setdefault(i.item, []).append(i)
    for item, held in by_item.items():
        last = None
        for i in held:
            holder = workers.get(i.member_id, i.member_id)
            if last is not None and holder != last and i.start.timestamp_ms >= start:
                out.moves.append(Move(i.start.timestamp_ms, i.start.offset, item, last, holder))
            last = holder
    out.moves.sort(key=lambda m: (m.offset, ev.item_order(m.item)))
    out.rebalance_moves = _per_rebalance(out.moves, rebalances)
    _unowned(out, _configured(history.events, extracted), by_item, start, end_ms)
    out.stable_after_ms = [
        None if h.step.at_ms < start else t for h, t in zip(extracted.happenings, _stable_after(extracted, rebalances))
    ]
    return out


def _worker_names(events: list[ev.Event]) -> dict[str, str]:
    """Member id -> its instance id, where it has one."""
    return {
        e.member_id: e.detail["instance_id"]
        for e in events
        if e.kind in (ev.MEMBER_JOINED, ev.CLASSIC_MEMBER_JOINED) and e.detail.get("instance_id")
    }


def _per_rebalance(moves: list[Move], rebalances: list[Rebalance]) -> list[frozenset]:
    """The moves grouped by the rebalance whose records made them (by offset), in order."""
    starts = [r.start.offset for r in rebalances]
    groups: dict[int, set] = {}
    for m in moves:
        n = bisect.bisect_right(starts, m.offset) - 1
        groups.setdefault(n, set()).add((m.item, m.source, m.target))
    return [frozenset(groups[n]) for n in sorted(groups)]


def _configured(events: list[ev.Event], extracted: Extracted) -> list[tuple[int, dict[str, int]]]:
    """The connectors over time: the history's connectors records, else (a classic group of real
    Connect workers has none) what the extraction read from its members' assignments."""
    changes = [(e.at.timestamp_ms, e.detail["connectors"]) for e in events if e.kind == ev.CONNECTORS]
    return changes or [
        (h.step.at_ms, h.step.connectors) for h in extracted.happenings if isinstance(h.step, SetConnectors)
    ]


def _unowned(
    out: Outcome,
    changes: list[tuple[int, dict[str, int]]],
    by_item: dict[Item, list[Interval]],
    start_ms: int,
    end_ms: int,
) -> None:
    """Each task's configured time minus its held time within [start_ms, end_ms], and its longest
    unheld stretch."""
    configured: dict[Item, list[list[int]]] = {}  # task -> [since, until] periods
    current: set[Item] = set()
    for at, connectors in changes:
        now = {ev_task for name, n in connectors.items() for ev_task in _tasks(name, n)}
        for task in current - now:
            configured[task][-1][1] = at
        for task in now - current:
            configured.setdefault(task, []).append([at, end_ms])
        current = now
    for task, periods in configured.items():
        held = sorted(
            (i.start.timestamp_ms, end_ms if i.end is None else i.end.timestamp_ms) for i in by_item.get(task, ())
        )
        for since, until in periods:
            cursor = max(since, start_ms)
            for start, end in held:
                if end <= cursor or start >= until:
                    continue
                if start > cursor:
                    _wait(out, start - cursor)
                cursor = max(cursor, end)
            if until > cursor:
                _wait(out, until - cursor)


def _wait(out: Outcome, ms: int) -> None:
    out.unowned_task_ms += ms
    out.longest_wait_ms = max(out.longest_wait_ms, ms)


def _tasks(connector: str, n: int) -> list[Item]:
    return [TaskId(connector, t) for t in range(n)]


def _stable_after(extracted: Extracted, rebalances: list[Rebalance]) -> list[int | None]:
    times = [h.step.at_ms for h in extracted.happenings]
    by_start = sorted(rebalances, key=lambda r: r.start.timestamp_ms)
    starts = [r.start.timestamp_ms for r in by_start]
    out: list[int | None] = []
    for n, at in enumerate(times):
        first = bisect.bisect_left(starts, at)
        last = bisect.bisect_left(starts, times[n + 1]) if n + 1 < len(times) else len(starts)
        ends = [r.end.timestamp_ms if r.end is not None else None for r in by_start[first:last]]
        out.append(None if not ends or None in ends else max(ends) - at)
    return out


# --- comparing ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Faithfulness:
    same_moves: bool  # the same items to the same workers, rebalance after rebalance
    matched_moves: int  # moves of the recorded history the re-run made too
    recorded_moves: int
    first_difference: str | None
    items_moved_off: float  # relative difference of the items moved
    unowned_off: float  # relative difference of the unowned task-seconds

    @property
    def within_tolerance(self) -> bool:
        return self.items_moved_off <= TOLERANCE and self.unowned_off <= TOLERANCE


def faithfulness(recorded: Outcome, rerun_: Outcome) -> Faithfulness:
    a = Counter((m.item, m.source, m.target) for m in recorded.moves)
    b = Counter((m.item, m.source, m.target) for m in rerun_.moves)
    first = None
    for n, (x, y) in enumerate(zip(recorded.rebalance_moves, rerun_.rebalance_moves), 1):
        if x != y:
            first = f"the {_ordinal(n)} rebalance that moved work: recorded {_show(x)}, re-run {_show(y)}"
            break
    else:
        if len(recorded.rebalance_moves) != len(rerun_.rebalance_moves):
            n = min(len(recorded.rebalance_moves), len(rerun_.rebalance_moves)) + 1
            first = (
                f"{len(recorded.rebalance_moves)} rebalances moved work as recorded, "
                f"{len(rerun_.rebalance_moves)} in the re-run (from the {_ordinal(n)} on)"
            )
    return Faithfulness(
        first is None,
        sum((a & b).values()),
        sum(a.values()),
        first,
        _off(len(recorded.moves), len(rerun_.moves)),
        _off(recorded.unowned_task_ms, rerun_.unowned_task_ms),
    )


def _off(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _show(moves: frozenset) -> str:
    shown = sorted(moves, key=lambda m: ev.item_order(m[0]))
    text = ", ".join(f"{item} {a} -> {b}" for item, a, b in shown[:6])
    return text + (f", ... +{len(shown) - 6} more" if len(shown) > 6 else "")


@dataclass(frozen=True, slots=True)
class Difference:
    index: int  # the happening's
    at_ms: int
    what: str
    base_moved: int
    base_last_ms: int | None  # when the last of them moved
    other_moved: int
    other_last_ms: int | None
    score: float


def differences(
    extracted: Extracted, base: Outcome, other: Outcome, shown: int = 3, from_ms: int | None = None
) -> list[Difference]:
    """The happenings whose moves differ most between `base` and `other`: how many items moved
    for each, and when the last of them did. A move of a worker's work after it crashed or left is
    that departure's doing (work a crash deferred and moved minutes later is the crash's); else the
    latest happening to the worker it left or went to (a join) is, else the latest one before it."""
    times = [h.step.at_ms for h in extracted.happenings]
    first = 0 if from_ms is None else bisect.bisect_left(times, from_ms)  # the happenings compared
    a, b = _attributed(extracted, base.moves, first), _attributed(extracted, other.moves, first)
    out = []
    for n, h in enumerate(extracted.happenings):
        mine_a, mine_b = a.get(n, []), b.get(n, [])
        a_last = max((m.at_ms for m in mine_a), default=None)
        b_last = max((m.at_ms for m in mine_b), default=None)
        score = abs(len(mine_a) - len(mine_b)) * 1_000_000 + abs((a_last or times[n]) - (b_last or times[n]))
        if score:
            out.append(Difference(n, times[n], h.text, len(mine_a), a_last, len(mine_b), b_last, score))
    return sorted(out, key=lambda d: -d.score)[:shown]


def _attributed(extracted: Extracted, moves: list[Move], first: int) -> dict[int, list[Move]]:
    times = [h.step.at_ms for h in extracted.happenings]
    out: dict[int, list[Move]] = {}
    for m in moves:
        last = bisect.bisect_right(times, m.at_ms) - 1
        if last < first:
            continue
        happenings = extracted.happenings
        source = next((k for k in range(last, first - 1, -1) if happenings[k].worker == m.source), None)
        if source is not None and isinstance(happenings[source].step, (Crash, Leave)):
            n = source  # work of a worker that was gone
        else:
            n = next((k for k in range(last, first - 1, -1) if happenings[k].worker in (m.source, m.target)), last)
        out.setdefault(n, []).append(m)
    return out
