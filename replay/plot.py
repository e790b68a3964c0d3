"""`coordinator replay timeline --plot FILE`: who held which item over time, as a picture.

One lane per worker (member id), one bar per ownership interval of each connector and task,
coloured per connector and labelled with the task. A "waiting" lane shows the work the target
assigns to nobody while the group waits for a departed member within its scheduled rebalance
delay (a crashed worker's tasks: from the target that deferred each item to the first target that
no longer does); an "unowned" lane shows the other gaps in which an item that had been held waited
for a new owner (a handoff between revoking and starting). Each rebalance is a shaded band from its
epoch bump to its convergence, with the epoch it reached and why.

The picture is laid out once (`layout`), then drawn either with matplotlib (`.png`) or as a
self-contained HTML page holding an SVG (`.html`, `.svg`: no dependency, and every bar and band has
a tooltip).
"""

from __future__ import annotations

import html
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.core.items import Item
from coordinator.core.protocol import leave_reason_text
from replay import events as ev
from replay.errors import ReplayError
from replay.history import History
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


def layout(history: History, group_id: str) -> Layout:
    intervals = [i for i in history.all_intervals() if i.group_id == group_id]
    rebalances = [r for r in history.all_rebalances() if r.group_id == group_id]
    if history.first is None:
        raise ReplayError(f"nothing to plot: no records of group {group_id}")
    t0, t1 = history.first.timestamp_ms, history.last.timestamp_ms
    t1 = max(t1, t0 + 1_000)
    connectors = sorted({i.item if isinstance(i.item, str) else i.item.connector for i in intervals})
    colours = {c: PALETTE[n % len(PALETTE)] for n, c in enumerate(connectors)}
    bars_by_lane: dict[str, list[Bar]] = {}

    def add(lane: str, item, start: int, end: int, still: bool, tooltip: str) -> None:  # noqa: ANN001
        is_connector = isinstance(item, str)
        bars_by_lane.setdefault(lane, []).append(
            Bar(lane, 0, start, end, str(item), item if is_connector else item.connector, is_connector, still, tooltip)
        )

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
        add(i.member_id, i.item, i.start.timestamp_ms, end, i.end is None, tip)
        by_item.setdefault(i.item, []).append(i)
    waits = waiting(history, group_id)
    waited: dict = {}
    for w in waits:
        end = w.end.timestamp_ms if w.end is not None else t1
        waited.setdefault(w.item, []).append((w.start.timestamp_ms, end))
        due = f", until {format_clock(w.deadline_ms)}" if w.deadline_ms is not None else ""
        add(
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
                    add(
                        UNOWNED,
                        item,
                        start,
                        end,
                        False,
                        f"{item} unowned for {format_duration(end - start)}\n"
                        f"from {format_time(start)} ({after})\n"
                        f"to {format_time(end)} (given to {b.member_id})",
                    )

    lanes = []
    bars = []
    for lane in sorted(bars_by_lane, key=lambda name: ({WAITING: 1, UNOWNED: 2}.get(name, 0), _natural(name))):
        rows = _pack(bars_by_lane[lane])
        lanes.append((lane, rows))
        bars.extend(bars_by_lane[lane])
    # A static member that comes back under a new member id is the same worker: say so on its lane.
    instances = {
        e.member_id: e.detail["instance_id"]
        for e in history.events
        if e.kind in (ev.MEMBER_JOINED, ev.CLASSIC_MEMBER_JOINED) and e.group_id == group_id and e.detail["instance_id"]
    }
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
    away += [Away(member, start, t1) for member, start in gone.items()]

    bands = []
    for r in rebalances:
        end = r.end.timestamp_ms if r.end is not None else t1
        why = ", ".join(r.causes) or "cause not recorded"
        moved = ", ".join(f"{item} {a or '-'} -> {b or '-'}" for item, a, b in r.moved[:15])
        if len(r.moved) > 15:
            moved += f", ... +{len(r.moved) - 15} more"
        state = f"converged in {format_duration(r.duration_ms)}" if r.end is not None else "not converged"
        bands.append(
            Band(
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
        )
    title = (
        f"group {group_id}: who held what, {format_time(t0)} to {format_clock(t1)} UTC, {len(rebalances)} rebalances"
    )
    return Layout(title, t0, t1, lanes, bars, bands, colours, instances, [a for a in away if a.lane in bars_by_lane])


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


def svg(history: History, group_id: str) -> str:
    """The picture as one SVG element, to put in a page (the coordinator's group page does)."""
    return _svg(layout(history, group_id))


def write(path: str, history: History, group_id: str) -> None:
    suffix = Path(path).suffix.lower()
    picture = layout(history, group_id)
    if suffix == ".png":
        _png(picture, path)
    elif suffix in (".html", ".htm", ".svg"):
        page = _svg(picture) if suffix == ".svg" else _html(picture)
        Path(path).write_text(page, encoding="utf-8")
    else:
        raise ReplayError(f"{path}: the picture is a .png, or an .html (or .svg) page", invalid_input=True)


# --- geometry shared by both renderers ---------------------------------------------------------------

ROW = 1.0  # one row of bars, in lane units
LANE_GAP = 0.6


def _lane_tops(picture: Layout) -> dict[str, float]:
    """Each lane's top, in rows from the top of the plot."""
    tops = {}
    y = 0.0
    for name, rows in picture.lanes:
        tops[name] = y
        y += rows * ROW + LANE_GAP
    return tops


def _height(picture: Layout) -> float:
    return sum(rows * ROW + LANE_GAP for _, rows in picture.lanes) - LANE_GAP


def _ticks(t0: int, t1: int, wanted: int = 10) -> list[int]:
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


def _label_places(picture: Layout, px_per_ms: float, char_px: float) -> list[str | None]:
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


def _shade(colour: str, factor: float) -> str:
    """The colour darkened (factor < 1) or lightened (> 1)."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    if factor < 1:
        r, g, b = (int(c * factor) for c in (r, g, b))
    else:
        r, g, b = (int(c + (255 - c) * (factor - 1)) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


# --- PNG (matplotlib) --------------------------------------------------------------------------------

_WIDTH_IN = 15.0
_DPI = 110
_LEFT_IN, _RIGHT_IN = 1.0, 0.3
_ROW_IN = 0.2
_LIST_LINE_IN = 0.17
_LISTED = 24  # rebalances listed under the picture; the timeline has them all
_LEGEND_ROW_IN = 0.25
_LEGEND_CHAR_IN = 0.065  # 8 pt sans serif, a generous average character


def _rebalance_lines(picture: Layout) -> list[str]:
    lines = [
        f"e{b.epoch:<5} {format_clock(b.start_ms)}  "
        f"{format_duration(b.end_ms - b.start_ms) if b.converged else 'not converged':<13} {b.label}"
        for b in picture.bands[:_LISTED]
    ]
    if len(picture.bands) > _LISTED:
        lines.append(f"... and {len(picture.bands) - _LISTED} more rebalances: see `coordinator replay timeline`")
    return lines


def _wrap(lines: list[str], chars: int) -> list[str]:
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


def _legend_rows(entries: list[str], room: float, char: float, handle: float) -> list[list[int]]:
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


def _label_levels(xs: list[float], min_gap: float) -> list[int]:
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


# matplotlib is the optional extra `plot` (pyproject.toml): the server image does not install it.
PNG_NEEDS_MATPLOTLIB = (
    "a .png plot needs matplotlib: pip install 'worker-coordinator[plot]' (an .html or .svg plot needs nothing)"
)


def require_matplotlib() -> None:
    """ReplayError in one line unless matplotlib imports: checked before the log is read, so a missing
    extra is said at once rather than after a long replay."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ReplayError(PNG_NEEDS_MATPLOTLIB) from None


def _png(picture: Layout, path: str) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    tops = _lane_tops(picture)
    height = _height(picture)
    t0, t1 = picture.t0, picture.t1
    span_s = (t1 - t0) / 1000
    x_max = span_s * 1.01  # room for the bars that reach the end of the read
    widest = max((len(line) for name, _ in picture.lanes for line in picture.lane_label(name).splitlines()), default=8)
    left_in = max(_LEFT_IN, 0.3 + 0.08 * widest)  # 9 pt bold is about 0.08 in a character
    plot_w_in = _WIDTH_IN - left_in - _RIGHT_IN
    px_per_s = plot_w_in * _DPI / x_max
    levels = _label_levels([(b.start_ms - t0) / 1000 * px_per_s for b in picture.bands], 42)
    header_in = 0.45 + 0.2 * (max(levels, default=0) + 1)
    plot_in = _ROW_IN * height + 0.1
    # Monospace 7.5 pt is 0.6 em a character: the list wraps inside the figure's right edge.
    lines = _wrap(_rebalance_lines(picture), int((_WIDTH_IN - left_in - 0.15) / (7.5 * 0.6 / 72)))
    legend_rows = _legend_rows(
        [label for label, _ in _png_legend_entries(picture)], _WIDTH_IN - left_in - 0.15, _LEGEND_CHAR_IN, 0.45
    )
    legend_in = _LEGEND_ROW_IN * len(legend_rows)
    footer_in = 0.55 + legend_in + 0.1 + (0.25 + _LIST_LINE_IN * len(lines) if lines else 0)
    fig_h = header_in + plot_in + footer_in
    fig = plt.figure(figsize=(_WIDTH_IN, fig_h), dpi=_DPI)
    ax = fig.add_axes((left_in / _WIDTH_IN, footer_in / fig_h, plot_w_in / _WIDTH_IN, plot_in / fig_h))
    ax.set_xlim(0, x_max)
    ax.set_ylim(height + 0.05, -0.05)
    _png_bands(ax, picture, levels, px_per_s)
    _png_bars(ax, picture, tops, px_per_s)
    _png_axes(ax, picture, tops)
    fig.text(0.01, 1 - 0.3 / fig_h, picture.title, fontsize=11, fontweight="bold", va="center")
    _png_legend(fig, picture, lines, legend_rows, left_in, footer_in, fig_h)
    fig.savefig(path)
    plt.close(fig)


def _png_bands(ax, picture: Layout, levels: list[int], px_per_s: float) -> None:  # noqa: ANN001 - matplotlib Axes
    """The rebalances: a shaded band from epoch bump to convergence, labelled with the epoch."""
    t0 = picture.t0
    for band, level in zip(picture.bands, levels):
        x0, x1 = (band.start_ms - t0) / 1000, (band.end_ms - t0) / 1000
        ax.axvspan(
            x0, max(x1, x0 + 2 / px_per_s), color="#d9d9d9" if band.converged else "#f4c7c3", alpha=0.5, lw=0, zorder=0
        )
        ax.axvline(x0, color="#666666", lw=0.7, ls="--", zorder=1)
        ax.annotate(
            f"e{band.epoch}",
            (x0, -0.05),
            xytext=(0, 4 + 14 * level),
            textcoords="offset points",
            fontsize=8,
            ha="center",
            va="bottom",
            color="#222222",
            annotation_clip=False,
            arrowprops={"arrowstyle": "-", "color": "#999999", "lw": 0.5} if level else None,
        )


def _png_bars(ax, picture: Layout, tops: dict[str, float], px_per_s: float) -> None:  # noqa: ANN001 - Axes
    """Who held what when: a bar per holding, lanes apart, and the time a static member was away."""
    from matplotlib.patches import Rectangle  # loaded by _png already

    t0 = picture.t0
    for name, _rows in picture.lanes[1:]:
        ax.axhline(tops[name] - LANE_GAP / 2, color="#bbbbbb", lw=0.6, zorder=1)
    places = _label_places(picture, px_per_s / 1000, 5.6)
    for bar, place in zip(picture.bars, places):
        colour = UNOWNED_COLOUR if bar.lane == UNOWNED else picture.colours[bar.connector]
        if bar.is_connector and bar.lane != UNOWNED:
            colour = _shade(colour, 0.65)
        y = tops[bar.lane] + bar.row * ROW
        x0 = (bar.start_ms - t0) / 1000
        width = max((bar.end_ms - bar.start_ms) / 1000, 1.5 / px_per_s)
        unowned = bar.lane == UNOWNED
        waits = bar.lane == WAITING
        if waits:  # the connector's colour, pale, dashed at its edge: assigned to nobody
            ax.barh(
                y + 0.5,
                width,
                left=x0,
                height=0.8,
                color=_shade(colour, 1.7),
                edgecolor=colour,
                linewidth=0.9,
                linestyle="--",
                hatch="..",
                zorder=2,
            )
            colour = _shade(colour, 1.7)
        else:
            ax.barh(
                y + 0.5,
                width,
                left=x0,
                height=0.8,
                color="#e4e4e4" if unowned else colour,
                edgecolor=UNOWNED_COLOUR if unowned else "white",
                linewidth=0 if unowned else 0.5,
                hatch="/////" if unowned else None,
                zorder=2,
            )
        label = bar.label + (" ▸" if bar.still_held else "")
        if place == "in":
            ax.text(
                x0 + 4 / px_per_s,
                y + 0.52,
                label,
                fontsize=7.5,
                va="center",
                ha="left",
                zorder=3,
                color="black" if unowned or _light(colour) else "white",
                clip_on=True,
                bbox={"facecolor": "#e4e4e4", "edgecolor": "none", "pad": 0.5} if unowned else None,
            )
        elif place == "out":
            ax.text(
                x0 + width + 3 / px_per_s,
                y + 0.52,
                label,
                fontsize=7.5,
                va="center",
                ha="left",
                zorder=3,
                color="#333333",
                clip_on=True,
            )

    for a in picture.away:
        rows = dict(picture.lanes)[a.lane]
        ax.add_patch(
            Rectangle(
                ((a.start_ms - t0) / 1000, tops[a.lane]),
                max((a.end_ms - a.start_ms) / 1000, 1.5 / px_per_s),
                rows * ROW,
                facecolor="white",
                alpha=0.55,
                edgecolor="#555555",
                hatch="..",
                lw=0.6,
                zorder=4,
            )
        )


def _png_axes(ax, picture: Layout, tops: dict[str, float]) -> None:  # noqa: ANN001 - matplotlib Axes
    t0, t1 = picture.t0, picture.t1
    ax.set_yticks([tops[name] + rows * ROW / 2 for name, rows in picture.lanes])
    ax.set_yticklabels([picture.lane_label(name) for name, _ in picture.lanes], fontsize=9, fontweight="bold")
    ax.tick_params(axis="y", length=0)
    ticks = _ticks(t0, t1)
    ax.set_xticks([(t - t0) / 1000 for t in ticks])
    ax.set_xticklabels([format_clock(t) for t in ticks], fontsize=8)
    ax.set_xlabel("time (UTC)", fontsize=9, labelpad=2)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.grid(axis="x", color="#eeeeee", lw=0.6, zorder=0)
    ax.set_axisbelow(True)


def _png_legend_entries(picture: Layout) -> list[tuple[str, dict]]:
    """The legend: each entry's label and its patch's settings."""
    return [
        *((name, {"color": c}) for name, c in picture.colours.items()),
        ("rebalance: epoch bump to convergence", {"facecolor": "#d9d9d9"}),
        *(
            [(WAITING_LEGEND, {"facecolor": "#f2f2f2", "edgecolor": "#555555", "linestyle": "--", "hatch": ".."})]
            if any(bar.lane == WAITING for bar in picture.bars)
            else []
        ),
        ("unowned", {"facecolor": "#e4e4e4", "edgecolor": UNOWNED_COLOUR, "hatch": "/////"}),
        *(
            [("kept for a static member away", {"facecolor": "white", "edgecolor": "#555555", "hatch": ".."})]
            if picture.away
            else []
        ),
        ("▸ still held at the end; darker: the connector itself", {"color": "white"}),
    ]


def _png_legend(
    fig,  # noqa: ANN001 - Figure
    picture: Layout,
    lines: list[str],
    legend_rows: list[list[int]],
    left_in: float,
    footer_in: float,
    fig_h: float,
) -> None:
    from matplotlib.patches import Patch  # loaded by _png already

    entries = _png_legend_entries(picture)
    for n, row in enumerate(legend_rows):  # one legend per row, so that none runs off the right edge
        fig.legend(
            handles=[Patch(label=entries[i][0], **entries[i][1]) for i in row],
            loc="upper left",
            bbox_to_anchor=(left_in / _WIDTH_IN, (footer_in - 0.5 - _LEGEND_ROW_IN * n) / fig_h),
            ncol=len(row),
            fontsize=8,
            frameon=False,
            handlelength=1.2,
            columnspacing=1.2,
            borderaxespad=0,
        )
    if lines:
        fig.text(
            left_in / _WIDTH_IN,
            (footer_in - 0.7 - _LEGEND_ROW_IN * len(legend_rows)) / fig_h,
            "rebalances: epoch reached, start, duration, why\n" + "\n".join(lines),
            fontsize=7.5,
            family="monospace",
            va="top",
            ha="left",
            color="#222222",
        )


def _light(colour: str) -> bool:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b > 150


# --- HTML / SVG --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _SvgFrame:
    """Where things go in the SVG: margins, lane tops, and time to x."""

    picture: Layout
    left: float
    right: float
    width: int
    row_px: int
    tops: dict[str, float]
    plot_h: float
    top_margin: float
    scale: float  # px per ms

    def x(self, ms: int) -> float:
        return self.left + (ms - self.picture.t0) * self.scale


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _svg(picture: Layout) -> str:
    widest = max((len(name) for name, _ in picture.lanes), default=8)
    left, right = max(120, int(7.5 * widest) + 20), 20  # 11 px bold is about 7.5 px a character
    width = 1400
    t0, t1 = picture.t0, picture.t1
    scale = (width - left - right) / ((t1 - t0) * 1.01)  # room for the bars that reach the end of the read
    levels = _label_levels([(b.start_ms - t0) * scale for b in picture.bands], 34)
    row_px = 18
    frame = _SvgFrame(
        picture,
        left,
        right,
        width,
        row_px,
        _lane_tops(picture),
        _height(picture) * row_px,
        50 + 15 * (max(levels, default=0) + 1),
        scale,
    )
    # Monospace 11 px is about 6.7 px a character: the list wraps inside the picture's right edge.
    lines = _wrap(_rebalance_lines(picture), int((width - right - left) / 6.7))
    legend_rows = _legend_rows([name for name, _ in _svg_legend_entries(picture)], width - right - left, 6.5, 28)
    height = int(
        frame.top_margin + frame.plot_h + 70 + 20 * (len(legend_rows) - 1) + (24 + 14 * len(lines) if lines else 0)
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
        '<defs><pattern id="unowned" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#e4e4e4"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="{UNOWNED_COLOUR}" stroke-width="3"/></pattern>'
        '<pattern id="away" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" '
        'fill="white" fill-opacity="0.55"/><circle cx="2.5" cy="2.5" r="0.8" fill="#555"/></pattern></defs>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">{_esc(picture.title)}</text>',
    ]
    out += _svg_time_axis(frame)
    out += _svg_bands(frame, levels)
    out += _svg_lanes(frame)
    out += _svg_bars(frame)
    out += _svg_legend(frame, lines, legend_rows)
    out.append("</svg>")
    return "\n".join(out)


def _svg_time_axis(f: _SvgFrame) -> list[str]:
    bottom = f.top_margin + f.plot_h
    out = [
        f'<line x1="{f.x(tick):.1f}" y1="{f.top_margin}" x2="{f.x(tick):.1f}" y2="{bottom}" '
        f'stroke="#eeeeee"/><text x="{f.x(tick):.1f}" y="{bottom + 16}" text-anchor="middle" '
        f'fill="#444">{format_clock(tick)}</text>'
        for tick in _ticks(f.picture.t0, f.picture.t1)
    ]
    out.append(
        f'<text x="{(f.left + f.width - f.right) / 2}" y="{bottom + 34}" text-anchor="middle" '
        'fill="#444">time (UTC)</text>'
    )
    return out


def _svg_bands(f: _SvgFrame, levels: list[int]) -> list[str]:
    """The rebalances: a shaded band from epoch bump to convergence, labelled with the epoch."""
    out = []
    for band, level in zip(f.picture.bands, levels):
        x0, x1 = f.x(band.start_ms), max(f.x(band.end_ms), f.x(band.start_ms) + 2)
        fill = "#d9d9d9" if band.converged else "#f4c7c3"
        label_y = f.top_margin - 6 - 15 * level
        out.append(
            f'<g><title>{_esc(band.tooltip)}</title><rect x="{x0:.1f}" y="{f.top_margin}" '
            f'width="{x1 - x0:.1f}" height="{f.plot_h}" fill="{fill}" opacity="0.5"/><line x1="{x0:.1f}" '
            f'y1="{label_y + 3}" x2="{x0:.1f}" y2="{f.top_margin + f.plot_h}" stroke="#555" '
            f'stroke-dasharray="4 3"/><text x="{x0:.1f}" y="{label_y}" text-anchor="middle" font-size="10" '
            f'fill="#222">e{band.epoch}</text></g>'
        )
    return out


def _svg_lanes(f: _SvgFrame) -> list[str]:
    out = []
    for n, (name, rows) in enumerate(f.picture.lanes):
        y0 = f.top_margin + f.tops[name] * f.row_px
        if n:
            out.append(
                f'<line x1="10" y1="{y0 - LANE_GAP * f.row_px / 2:.1f}" x2="{f.width - f.right}" '
                f'y2="{y0 - LANE_GAP * f.row_px / 2:.1f}" stroke="#bbb"/>'
            )
        label_y = y0 + rows * f.row_px / 2 + 4
        out.append(f'<text x="{f.left - 8}" y="{label_y:.1f}" text-anchor="end" font-weight="bold">{_esc(name)}</text>')
        if name in f.picture.instances:
            out.append(
                f'<text x="{f.left - 8}" y="{label_y + 13:.1f}" text-anchor="end" fill="#555" '
                f'font-size="10">instance {_esc(f.picture.instances[name])}</text>'
            )
    return out


def _svg_bars(f: _SvgFrame) -> list[str]:
    """Who held what when: a bar per holding, and the time a static member was away."""
    picture, row_px, out = f.picture, f.row_px, []
    for bar, place in zip(picture.bars, _label_places(picture, f.scale, 6.0)):
        colour = UNOWNED_COLOUR if bar.lane == UNOWNED else picture.colours[bar.connector]
        if bar.is_connector and bar.lane != UNOWNED:
            colour = _shade(colour, 0.65)
        fill = "url(#unowned)" if bar.lane == UNOWNED else colour
        stroke = 'stroke="white" stroke-width="0.5"'
        if bar.lane == WAITING:  # the connector's colour, pale, dashed at its edge: assigned to nobody
            fill, stroke = _shade(colour, 1.7), f'stroke="{colour}" stroke-width="1.2" stroke-dasharray="4 2"'
            colour = fill
        y = f.top_margin + (f.tops[bar.lane] + bar.row * ROW) * row_px
        x0 = f.x(bar.start_ms)
        w = max(f.x(bar.end_ms) - x0, 1.5)
        label = _esc(bar.label + (" ▸" if bar.still_held else ""))
        text = ""
        if place == "in":
            ink = "black" if bar.lane == UNOWNED or _light(colour) else "white"
            text = f'<text x="{x0 + 4:.1f}" y="{y + row_px * 0.62:.1f}" fill="{ink}" font-size="10">{label}</text>'
        elif place == "out":
            text = f'<text x="{x0 + w + 3:.1f}" y="{y + row_px * 0.62:.1f}" fill="#333" font-size="10">{label}</text>'
        out.append(
            f'<g><title>{_esc(bar.tooltip)}</title><rect x="{x0:.1f}" y="{y + 1.5:.1f}" width="{w:.1f}" '
            f'height="{row_px - 3}" rx="2" fill="{fill}" {stroke}/>{text}</g>'
        )
    for a in picture.away:
        rows = dict(picture.lanes)[a.lane]
        x0 = f.x(a.start_ms)
        until = f"{format_time(a.end_ms)}: {a.ended}" if a.ended else format_time(a.end_ms)
        out.append(
            f"<g><title>{_esc(a.lane)} left as a static member at {format_time(a.start_ms)}; the "
            f'coordinator kept its assignment until {_esc(until)}</title><rect x="{x0:.1f}" '
            f'y="{f.top_margin + f.tops[a.lane] * row_px:.1f}" width="{max(f.x(a.end_ms) - x0, 1.5):.1f}" '
            f'height="{rows * row_px}" fill="url(#away)" stroke="#555" stroke-width="0.6"/></g>'
        )
    return out


def _svg_legend_entries(picture: Layout) -> list[tuple[str, str | None]]:
    """The legend: each entry's label and its swatch's fill (None: text alone)."""
    return [
        *picture.colours.items(),
        ("rebalance: epoch bump to convergence", "#d9d9d9"),
        *([(WAITING_LEGEND, "#f2f2f2")] if any(bar.lane == WAITING for bar in picture.bars) else []),
        ("unowned", "url(#unowned)"),
        *([("kept for a static member away", "url(#away)")] if picture.away else []),
        ("▸ still held at the end; darker: the connector itself", None),
    ]


def _svg_legend(f: _SvgFrame, lines: list[str], legend_rows: list[list[int]]) -> list[str]:
    entries = _svg_legend_entries(f.picture)
    out = []
    legend_y = f.top_margin + f.plot_h + 54
    for n, row in enumerate(legend_rows):  # rows that fit the width: nothing runs off the right edge
        lx = f.left
        y = legend_y + 20 * n
        for i in row:
            name, colour = entries[i]
            if colour is None:
                out.append(f'<text x="{lx}" y="{y}">{_esc(name)}</text>')
            else:
                stroke = ' stroke="#555" stroke-dasharray="3 2"' if name == WAITING_LEGEND else ""
                out.append(
                    f'<rect x="{lx}" y="{y - 10}" width="12" height="12" fill="{colour}"{stroke}/>'
                    f'<text x="{lx + 16}" y="{y}">{_esc(name)}</text>'
                )
            lx += 28 + 6.5 * len(name)
    if lines:
        top = legend_y + 20 * (len(legend_rows) - 1) + 28
        out.append(f'<text x="{f.left}" y="{top}" font-family="monospace" font-size="11" fill="#222">')
        for n, line in enumerate(["rebalances: epoch reached, start, duration, why", *lines]):
            out.append(f'<tspan x="{f.left}" dy="{0 if n == 0 else 14}" xml:space="preserve">{_esc(line)}</tspan>')
        out.append("</text>")
    return out


def _html(picture: Layout) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(picture.title)}'
        "</title><style>body{margin:16px;font-family:Helvetica,Arial,sans-serif}svg{max-width:100%;height:auto}"
        "p{color:#555;font-size:13px}</style></head><body>\n"
        + _svg(picture)
        + "\n<p>One lane per worker; a bar per connector (darker) and task held; ▸: still held where the read "
        "ended. The waiting lane: work the target assigned to nobody while the group waited for a departed member "
        "within its scheduled rebalance delay; the unowned lane: other gaps between two holders. Grey bands: rebalances, from the group epoch bump to convergence (red: not converged). "
        "Hover over a bar or a band for its offsets, epochs, what moved and why.</p>\n</body></html>\n"
    )
