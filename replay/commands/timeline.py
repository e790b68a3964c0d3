"""`coordinator replay timeline`: every change of a group in the protocol's words, grouped into
rebalances (and, with --plot, the picture of who held what)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from coordinator.errors import CliError
from coordinator.tools.text import table
from replay import events as ev
from replay.commands.reading import Read, print_json, read_summary, report_corrupt
from replay.history import History, Rebalance, rebalance_json
from replay.positions import format_duration, format_time

_MOVES_SHOWN = 12


def run_timeline(args: argparse.Namespace) -> int:
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".html", ".htm", ".svg"):
        raise CliError(f"--plot {args.plot}: the picture is a .png, or an .html (or .svg) page", exit_code=2)
    if args.plot and Path(args.plot).suffix.lower() == ".png":
        from replay.plot_png import require_matplotlib

        require_matplotlib()  # the extra `plot`: said before the log is read, not after
    read = Read(args, args.group)
    history = History(args.group, strict=args.strict)
    history.run(read)
    report_corrupt(history, args)
    rebalances = history.all_rebalances()
    opened_at = {(r.start.partition, r.start.offset): r for r in rebalances}
    if args.format == "json":
        for e in history.events:
            rebalance = (
                opened_at.pop((e.at.partition, e.at.offset), None)
                if e.kind in (ev.GROUP_EPOCH, ev.CLASSIC_GROUP)
                else None
            )
            if rebalance is not None:
                print_json(rebalance_json(rebalance))
            print_json(ev.event_json(e))
    else:
        _print_timeline(history, read, rebalances)
    if args.plot:
        from replay import plot  # matplotlib (the extra `plot`) is imported only when a PNG is asked for

        plot.write(args.plot, history, args.group)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0


def _moves(r: Rebalance, so_far: bool = False) -> str:
    """What moved, as "moved X a -> b, ..." or "nothing moved" (not "moved nothing moved"); "so far" while open."""
    shown = [f"{item} {a or '(none)'} -> {b or '(none)'}" for item, a, b in r.moved[:_MOVES_SHOWN]]
    more = f", ... +{len(r.moved) - _MOVES_SHOWN} more" if len(r.moved) > _MOVES_SHOWN else ""
    if not shown:
        return "nothing moved so far" if so_far else "nothing moved"
    return ("so far moved " if so_far else "moved ") + ", ".join(shown) + more


def _counts(r: Rebalance) -> str:
    counts = [f"{r.revoked} revoked"] if r.revoked else []
    counts += [f"{r.released} released by members that left or joined again"] if r.released else []
    counts += [f"{r.assigned} assigned"] if r.assigned else []
    return ", ".join(counts) or "nothing revoked or assigned"


def _epoch_word(r: Rebalance) -> str:
    return "generation" if r.protocol == "classic" else "epoch"


def _print_timeline(history: History, read: Read, rebalances: list[Rebalance]) -> None:
    print(f"group {history.group_id}: {read_summary(history, read)}")
    if not history.events:
        return
    days = {format_time(e.at.timestamp_ms)[:10] for e in history.events}
    clock = (lambda ms: format_time(ms)) if len(days) > 1 else (lambda ms: format_time(ms)[11:])
    # Events and the rebalances' ends in log order: a rebalance opens just before the epoch bump
    # that starts it and closes just after the record it converged at (which may show no event).
    lines: list[tuple[tuple[int, int, int], Any]] = [((e.at.partition, e.at.offset, 1), e) for e in history.events]
    lines += [((r.start.partition, r.start.offset, 0), ("open", r)) for r in rebalances]
    lines += [((r.end.partition, r.end.offset, 2), ("close", r)) for r in rebalances if r.end is not None]
    lines.sort(key=lambda line: line[0])
    rows: list[list[Any]] = []
    inside = None
    for _, line in lines:
        if isinstance(line, ev.Event):
            rows.append([clock(line.at.timestamp_ms), line.at.offset, ("│ " if inside else "") + ev.text(line)])
        elif line[0] == "open":
            inside = line[1]
            rows.append(["", "", f"┌ rebalance {inside.number}: {', '.join(inside.causes) or 'cause not recorded'}"])
        else:
            r = line[1]
            rows.append(
                [
                    "",
                    "",
                    (
                        f"└ converged at {_epoch_word(r)} {r.to_epoch} after "
                        f"{format_duration(r.duration_ms)}: {_counts(r)}; {_moves(r)}"
                    ),
                ]
            )
            inside = None
    if inside is not None:
        rows.append(
            [
                "",
                "",
                (
                    f"└ not converged where the read ended ({_epoch_word(inside)} {inside.to_epoch}); "
                    f"{_moves(inside, so_far=True)}"
                ),
            ]
        )
    print()
    print(table(rows, ["TIME (UTC)", "OFFSET", "EVENT"]))
    done = [r for r in rebalances if r.end is not None]
    if done:
        total = sum(r.duration_ms for r in done)
        longest = max(done, key=lambda r: r.duration_ms)
        print(
            f"\n{len(done)} rebalances converged, {format_duration(total)} in all; the longest, rebalance "
            f"{longest.number} ({_epoch_word(longest)} {longest.from_epoch} -> {longest.to_epoch}), took "
            f"{format_duration(longest.duration_ms)}"
            + (f"; {len(rebalances) - len(done)} not converged" if len(done) < len(rebalances) else "")
        )
