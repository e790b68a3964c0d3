"""The timeline's picture laid out: who held which item over time, before it is drawn.

One lane per worker (member id), one bar per ownership interval of each connector and task,
coloured per connector and labelled with the task. A "waiting" lane shows the work the target
assigns to nobody while the group waits for a departed member within its scheduled rebalance
delay (a crashed worker's tasks: from the target that deferred each item to the first target that
no longer does); an "unowned" lane shows the other gaps in which an item that had been held waited
for a new owner (a handoff between revoking and starting). Each rebalance is a shaded band from its
epoch bump to its convergence, with the epoch it reached and why.

`layout` lays the picture out once, in milliseconds and rows; the renderers (`replay.plot_png`,
`replay.plot_svg`) share the geometry below it and turn it into points or pixels.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

from coordinator.core.items import Item
from coordinator.core.protocol import leave_reason_text
from replay import events as ev
from replay.errors import ReplayError
from replay.history import History, Rebalance
from replay.positions import Position, format_clock, format_duration, format_time

UNOWNED = "(unowned)"
WAITING = "(waiting)"  # deferred: assigned to nobody within the scheduled rebalance delay
# Colour-blind-safe qualitative palette (Okabe-Ito, then Tableau's muted tones for more connectors).
PALETTE = [
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#4E79A7",
    "#F28E2B",
    "#59A14F",
    "#B07AA1",
    "#9C755F",
    "#EDC948",
    "#76B7B2",
    "#FF9DA7",
    "#BAB0AC",
]
UNOWNED_COLOUR = "#9a9a9a"
WAITING_LEGEND = "waiting: assigned to nobody within the scheduled rebalance delay"


@dataclass(slots=True)
class Bar:
    lane: str
    row: int  # within the lane
    start_ms: int
    end_ms: int
    label: str  # the item
    connector: str
    is_connector: bool
    still_held: bool  # the read ended while it was held
    tooltip: str


@dataclass(slots=True)
class Wait:
    """An item the target assigned to nobody while the group waited for a departed member."""

    item: Item
    member: str | None  # whose work it was (the departed member), when the log says
    start: Position  # the target that deferred it
    start_epoch: int | None
    deadline_ms: int | None  # when the scheduled rebalance was due (the latest deferring target's)
    end: Position | None = None  # the first target that no longer deferred it; None: still waiting
    end_epoch: int | None = None
    to: str | None = None  # whom that target gave it to
    ended: str = ""
    why: str = ""  # why that member left, where the log says


def waiting(history: History, group_id: str) -> list[Wait]:
    """Each stretch in which a target deferred an item (assigned it to nobody, waiting for a departed
    member within the scheduled rebalance delay), from the installed targets of the history."""
    whose: dict[Item, str] = {}  # item -> the member that last departed with it (or released it)
    why: dict[str, str] = {}  # member -> why it was removed (type 3 v1's reason)
    instances: dict[str, str] = {}
    open_: dict[Item, Wait] = {}
    out: list[Wait] = []

    def close(item: Item, e: ev.Event, to: str | None, ended: str) -> None:
        w = open_.pop(item)
        w.end, w.end_epoch, w.to, w.ended = e.at, e.epoch, to, ended
        out.append(w)

    for e in history.events:
        if e.group_id != group_id:
            continue
        if e.kind in (ev.MEMBER_JOINED, ev.CLASSIC_MEMBER_JOINED) and e.detail.get("instance_id"):
            instances[e.member_id] = e.detail["instance_id"]
        elif e.kind == ev.RELEASED and e.member_id is not None:
            whose.update(dict.fromkeys(e.released, e.member_id))
            if "reason" in e.detail:
                why[e.member_id] = leave_reason_text(e.detail["reason"])
        elif e.kind == ev.TARGET_UPDATED:
            for member, items in e.detail.get("departed", {}).items():
                whose.update(dict.fromkeys(items, member))
        elif e.kind == ev.TARGET_INSTALLED:
            deferred = e.detail["deferred"]
            due = e.detail["scheduled_rebalance_at_ms"]
            for item in deferred:
                if item in open_:
                    open_[item].deadline_ms = due
                else:
                    member = whose.get(item)
                    open_[item] = Wait(item, member, e.at, e.epoch, due, why=why.get(member, "") if member else "")
            owner_of = {item: m for m, items in e.detail["targets"].items() for item in items}
            for item in [i for i in open_ if i not in deferred]:
                w, to = open_[item], owner_of.get(item)
                same = to is not None and (
                    to == w.member or (w.member in instances and instances.get(to) == instances[w.member])
                )
                if to is None:
                    ended = f"target epoch {e.epoch} no longer defers it"
                elif same:
                    ended = f"target epoch {e.epoch} gives it back to {to}: it came back within the delay"
                else:
                    ended = f"target epoch {e.epoch} gives it to {to}"
                close(item, e, to, ended)
        elif e.kind == ev.GROUP_DELETED:
            for item in list(open_):
                close(item, e, None, "the group was deleted")
    out += open_.values()
    return sorted(out, key=lambda w: (w.start.offset, ev.item_order(w.item)))


def _minus(start: int, end: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) without the spans."""
    pieces = [(start, end)]
    for s0, s1 in spans:
        pieces = [piece for a, b in pieces for piece in ((a, min(b, s0)), (max(a, s1), b)) if piece[1] > piece[0]]
    return pieces


@dataclass(slots=True)
class Band:
    start_ms: int
    end_ms: int
    epoch: int
    label: str
    converged: bool
    tooltip: str


@dataclass(slots=True)
class Away:
    """A static member gone (left with -2) while the coordinator keeps its assignment for it."""

    lane: str
    start_ms: int
    end_ms: int
    ended: str = ""  # how the wait ended: the member came back, or why it was removed


@dataclass
class Layout:
    title: str
    t0: int
    t1: int
    lanes: list[tuple[str, int]]  # (member, rows), top to bottom
    bars: list[Bar] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    colours: dict[str, str] = field(default_factory=dict)  # connector -> colour
    instances: dict[str, str] = field(default_factory=dict)  # member -> its static InstanceId
    away: list[Away] = field(default_factory=list)

    def lane_label(self, lane: str) -> str:
        instance = self.instances.get(lane)
        return lane if instance is None else f"{lane}\n(instance {instance})"


def _natural(name: str) -> list:
    """W2 before W10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


class _Lanes:
    """The bars of each lane, as `layout` adds them."""

    def __init__(self) -> None:
        self.bars: dict[str, list[Bar]] = {}

    def add(self, lane: str, item: Item, start: int, end: int, still: bool, tooltip: str) -> None:
        is_connector = isinstance(item, str)
        self.bars.setdefault(lane, []).append(
            Bar(lane, 0, start, end, str(item), item if is_connector else item.connector, is_connector, still, tooltip)
        )


def layout(history: History, group_id: str) -> Layout:
    intervals = [i for i in history.all_intervals() if i.group_id == group_id]
    rebalances = [r for r in history.all_rebalances() if r.group_id == group_id]
    if history.first is None:
        raise ReplayError(f"nothing to plot: no records of group {group_id}")
    t0, t1 = history.first.timestamp_ms, history.last.timestamp_ms
    t1 = max(t1, t0 + 1_000)
    connectors = sorted({i.item if isinstance(i.item, str) else i.item.connector for i in intervals})
    colours = {c: PALETTE[n % len(PALETTE)] for n, c in enumerate(connectors)}
    lanes = _Lanes()
    by_item = _holdings(lanes, intervals, t1)
    waited = _waits(lanes, waiting(history, group_id), t1)
    _unowned(lanes, by_item, waited)
    ordered = []
    bars = []
    for lane in sorted(lanes.bars, key=lambda name: ({WAITING: 1, UNOWNED: 2}.get(name, 0), _natural(name))):
        rows = _pack(lanes.bars[lane])
        ordered.append((lane, rows))
        bars.extend(lanes.bars[lane])
    # A static member that comes back under a new member id is the same worker: say so on its lane.
    instances = {
        e.member_id: e.detail["instance_id"]
        for e in history.events
        if e.kind in (ev.MEMBER_JOINED, ev.CLASSIC_MEMBER_JOINED) and e.group_id == group_id and e.detail["instance_id"]
    }
    away = [a for a in _away(history, group_id, t1) if a.lane in lanes.bars]
    bands = [_band(r, t1) for r in rebalances]
    title = (
        f"group {group_id}: who held what, {format_time(t0)} to {format_clock(t1)} UTC, {len(rebalances)} rebalances"
    )
    return Layout(title, t0, t1, ordered, bars, bands, colours, instances, away)


def _holdings(lanes: _Lanes, intervals: list, t1: int) -> dict:
    """A bar per holding on its member's lane; the holdings of each item, for the gaps between them."""
    by_item: dict = {}
    for i in intervals:
        end = i.end.timestamp_ms if i.end is not None else t1
        held = format_duration(end - i.start.timestamp_ms)
        tip = (
            f"{i.item} held by {i.member_id}\nfrom {format_time(i.start.timestamp_ms)} (offset {i.start.offset}, "
            f"epoch {i.start_epoch})\nto "
            + (
                f"{format_time(end)} (offset {i.end.offset}): {i.ended_by}"
                if i.end is not None
                else "the end of the read"
            )
            + f"\n{held}"
        )
        lanes.add(i.member_id, i.item, i.start.timestamp_ms, end, i.end is None, tip)
        by_item.setdefault(i.item, []).append(i)
    return by_item


def _waits(lanes: _Lanes, waits: list[Wait], t1: int) -> dict:
    """A bar per wait on the waiting lane; each item's waits, which its unowned gaps leave out."""
    waited: dict = {}
    for w in waits:
        end = w.end.timestamp_ms if w.end is not None else t1
        waited.setdefault(w.item, []).append((w.start.timestamp_ms, end))
        due = f", until {format_clock(w.deadline_ms)}" if w.deadline_ms is not None else ""
        lanes.add(
            WAITING,
            w.item,
            w.start.timestamp_ms,
            end,
            w.end is None,
            f"{w.item} assigned to nobody for {format_duration(end - w.start.timestamp_ms)}, waiting for "
            f"{w.member or 'a departed member'}{f' ({w.why})' if w.why else ''} within the scheduled rebalance "
            "delay\n"
            f"from {format_time(w.start.timestamp_ms)} (offset {w.start.offset}: target epoch {w.start_epoch} "
            f"deferred it{due})\nto "
            + (
                f"{format_time(end)} (offset {w.end.offset}): {w.ended}"
                if w.end is not None
                else "the end of the read: still waiting"
            ),
        )
    return waited


def _unowned(lanes: _Lanes, by_item: dict, waited: dict) -> None:
    """A bar on the unowned lane per gap between two holdings of an item, but for its waits."""
    for item, held in by_item.items():
        held.sort(key=lambda i: i.start.offset)
        for a, b in zip(held, held[1:]):
            if a.end is not None and b.start.offset > a.end.offset and b.start.timestamp_ms > a.end.timestamp_ms:
                # The part of the gap the item waited out the delay for is on the waiting lane.
                for start, end in _minus(a.end.timestamp_ms, b.start.timestamp_ms, waited.get(item, [])):
                    after = (
                        f"{a.member_id}: {a.ended_by}"
                        if start == a.end.timestamp_ms
                        else "its wait for a departed member ended"
                    )
                    lanes.add(
                        UNOWNED,
                        item,
                        start,
                        end,
                        False,
                        f"{item} unowned for {format_duration(end - start)}\n"
                        f"from {format_time(start)} ({after})\n"
                        f"to {format_time(end)} (given to {b.member_id})",
                    )


def _away(history: History, group_id: str, t1: int) -> list[Away]:
    """Each time a static member was gone (left with -2) while the coordinator kept its assignment."""
    away = []
    gone: dict[str, int] = {}
    for e in history.events:
        if e.group_id != group_id or e.member_id is None:
            continue
        if e.kind == ev.STATIC_LEAVE:
            gone.setdefault(e.member_id, e.at.timestamp_ms)
        elif e.member_id in gone and e.kind in (ev.MEMBER_EPOCH, ev.REVOKING, ev.RELEASED, ev.MEMBER_LEFT):
            # Back, or removed: a member-left event's text says why (its reason is filled in
            # from the epoch record that follows it, read by now).
            ended = ev.text(e) if e.kind == ev.MEMBER_LEFT else "it came back"
            away.append(Away(e.member_id, gone.pop(e.member_id), e.at.timestamp_ms, ended))
    return away + [Away(member, start, t1) for member, start in gone.items()]


def _band(r: Rebalance, t1: int) -> Band:
    end = r.end.timestamp_ms if r.end is not None else t1
    why = ", ".join(r.causes) or "cause not recorded"
    moved = ", ".join(f"{item} {a or '-'} -> {b or '-'}" for item, a, b in r.moved[:15])
    if len(r.moved) > 15:
        moved += f", ... +{len(r.moved) - 15} more"
    state = f"converged in {format_duration(r.duration_ms)}" if r.end is not None else "not converged"
    return Band(
        r.start.timestamp_ms,
        end,
        r.to_epoch,
        why,
        r.end is not None,
        f"rebalance {r.number}: {'generation' if r.protocol == 'classic' else 'epoch'} "
        f"{r.from_epoch} -> {r.to_epoch}, {state}\n"
        f"{format_time(r.start.timestamp_ms)} (offset {r.start.offset})\n{why}\n"
        f"moved: {moved or 'nothing'}",
    )


def _pack(bars: list[Bar]) -> int:
    """Give each bar a row of its lane: an item keeps its row when it can, else the first free one."""
    ends: list[int] = []
    item_row: dict[str, int] = {}
    for bar in sorted(bars, key=lambda b: (b.start_ms, _item_key(b))):
        preferred = item_row.get(bar.label)
        candidates = ([preferred] if preferred is not None else []) + list(range(len(ends)))
        row = next((r for r in candidates if ends[r] <= bar.start_ms), None)
        if row is None:
            row = len(ends)
            ends.append(0)
        ends[row] = bar.end_ms
        bar.row = row
        item_row[bar.label] = row
    return max(1, len(ends))


def _item_key(bar: Bar) -> tuple:
    task = bar.label[len(bar.connector) + 1 :] if not bar.is_connector else ""
    return (bar.connector, -1 if bar.is_connector else int(task) if task.isdigit() else 0)


# --- geometry shared by both renderers ---------------------------------------------------------------

ROW = 1.0  # one row of bars, in lane units
LANE_GAP = 0.6


def lane_tops(picture: Layout) -> dict[str, float]:
    """Each lane's top, in rows from the top of the plot."""
    tops = {}
    y = 0.0
    for name, rows in picture.lanes:
        tops[name] = y
        y += rows * ROW + LANE_GAP
    return tops


def plot_height(picture: Layout) -> float:
    return sum(rows * ROW + LANE_GAP for _, rows in picture.lanes) - LANE_GAP


def time_ticks(t0: int, t1: int, wanted: int = 10) -> list[int]:
    span = max(1, t1 - t0)
    steps = [
        1_000,
        2_000,
        5_000,
        10_000,
        15_000,
        30_000,
        60_000,
        120_000,
        300_000,
        600_000,
        900_000,
        1_800_000,
        3_600_000,
        7_200_000,
        10_800_000,
        21_600_000,
        43_200_000,
        86_400_000,
    ]
    step = next((s for s in steps if span / s <= wanted), steps[-1])
    first = (t0 + step - 1) // step * step
    return list(range(first, t1 + 1, step))


def label_places(picture: Layout, px_per_ms: float, char_px: float) -> list[str | None]:
    """Where each bar's label goes: "in" the bar, "out" just after it (when the row is free there),
    or None (no room: the colour and, in HTML, the tooltip tell)."""
    following: dict[int, int] = {}
    rows: dict[tuple[str, int], list[int]] = {}
    for n, bar in enumerate(picture.bars):
        rows.setdefault((bar.lane, bar.row), []).append(n)
    for members in rows.values():
        members.sort(key=lambda n: picture.bars[n].start_ms)
        for a, b in zip(members, members[1:]):
            following[a] = picture.bars[b].start_ms
    places: list[str | None] = []
    for n, bar in enumerate(picture.bars):
        needed = char_px * len(bar.label + (" ▸" if bar.still_held else "")) + 8
        if (bar.end_ms - bar.start_ms) * px_per_ms > needed:
            places.append("in")
        elif (following.get(n, picture.t1 + (picture.t1 - picture.t0) // 100) - bar.end_ms) * px_per_ms > needed + 6:
            places.append("out")
        else:
            places.append(None)
    return places


def shade(colour: str, factor: float) -> str:
    """The colour darkened (factor < 1) or lightened (> 1)."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    if factor < 1:
        r, g, b = (int(c * factor) for c in (r, g, b))
    else:
        r, g, b = (int(c + (255 - c) * (factor - 1)) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


LISTED = 24  # rebalances listed under the picture; the timeline has them all


def rebalance_lines(picture: Layout) -> list[str]:
    lines = [
        f"e{b.epoch:<5} {format_clock(b.start_ms)}  "
        f"{format_duration(b.end_ms - b.start_ms) if b.converged else 'not converged':<13} {b.label}"
        for b in picture.bands[:LISTED]
    ]
    if len(picture.bands) > LISTED:
        lines.append(f"... and {len(picture.bands) - LISTED} more rebalances: see `coordinator replay timeline`")
    return lines


def wrap_lines(lines: list[str], chars: int) -> list[str]:
    """The rebalance list wrapped to `chars` columns, continuations indented under the why, so that
    no line runs off the picture's right edge."""
    out = []
    indent = " " * 29  # "e{epoch:<5} {clock}  {duration:<13} " is 6 + 1 + 8 + 2 + 13 - 1 characters
    for line in lines:
        out += textwrap.wrap(
            line,
            max(40, chars),
            subsequent_indent=indent if len(indent) < chars - 20 else "  ",
            break_on_hyphens=False,
        ) or [""]
    return out


def legend_in_rows(entries: list[str], room: float, char: float, handle: float) -> list[list[int]]:
    """The legend's entries, by index, in rows that fit `room`: entry n takes handle + char * len."""
    rows: list[list[int]] = [[]]
    used = 0.0
    for n, text in enumerate(entries):
        wide = handle + char * len(text)
        if rows[-1] and used + wide > room:
            rows.append([])
            used = 0.0
        rows[-1].append(n)
        used += wide
    return rows


def label_levels(xs: list[float], min_gap: float) -> list[int]:
    """Stagger labels at positions `xs` over levels so that neighbours on one level keep apart."""
    last: list[float] = []
    levels = []
    for x in xs:
        level = next((n for n, end in enumerate(last) if x - end >= min_gap), len(last))
        if level == len(last):
            last.append(x)
        last[level] = x
        levels.append(level)
    return levels


def light(colour: str) -> bool:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b > 150
