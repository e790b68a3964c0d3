"""`coordinator replay who-owned`: who held a connector or task, and when."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from records import TaskId

from coordinator.core.items import Item
from coordinator.tools.text import table
from replay.commands.reading import Read, print_json, report_corrupt, where
from replay.history import History, interval_json
from replay.positions import format_duration, format_time


def parse_item(text: str) -> Callable[[Item], bool]:
    """ITEM as typed: `A` is connector A, `A:0` task 0 of A, and `A-0` either task 0 of A or a
    connector named `A-0` (connector names may contain dashes): both are looked for."""
    name, colon, number = text.rpartition(":")
    if colon and number.isdigit() and name:
        task = TaskId(name, int(number))
        return lambda item: item == task
    name, dash, number = text.rpartition("-")
    if dash and number.isdigit() and name:
        task = TaskId(name, int(number))
        return lambda item: item == task or item == text
    return lambda item: item == text


def run_who_owned(args: argparse.Namespace) -> int:
    matches = parse_item(args.item)
    read = Read(args, args.group)
    history = History(args.group, strict=args.strict, keep_events=False, intervals=matches)
    history.run(read)
    report_corrupt(history, args)
    everything = history.all_intervals()
    intervals = everything
    if args.at is not None:
        intervals = [
            i for i in everything if i.start.timestamp_ms <= args.at and (i.end is None or i.end.timestamp_ms > args.at)
        ]
    if args.format == "json":
        for i in intervals:
            print_json(interval_json(i))
        return 0
    when = f" at {format_time(args.at)}" if args.at is not None else ""
    if not intervals:
        print(f"nobody held {args.item}{when} in the {history.records} records read from {read.description}")
        if args.at is not None:
            # Unowned then: say who had it last, and who got it next.
            before = [i for i in everything if i.end is not None and i.end.timestamp_ms <= args.at]
            after = [i for i in everything if i.start.timestamp_ms > args.at]
            if before:
                i = max(before, key=lambda i: i.end.timestamp_ms)
                print(
                    f"  before: {i.member_id} held {i.item} until {format_time(i.end.timestamp_ms)} "
                    f"(offset {i.end.offset}, {i.ended_by})"
                )
            if after:
                i = min(after, key=lambda i: i.start.timestamp_ms)
                print(
                    f"  after: {i.member_id} was given {i.item} at {format_time(i.start.timestamp_ms)} "
                    f"(offset {i.start.offset}, epoch {i.start_epoch})"
                )
        return 0
    end = history.last
    rows = [
        [
            i.group_id,
            str(i.item),
            i.member_id,
            where(i.start),
            where(i.end) if i.end else "still held",
            format_duration((i.end or end).timestamp_ms - i.start.timestamp_ms) + ("" if i.end else "+"),
            f"at epoch {i.start_epoch}",
            i.ended_by or "-",
        ]
        for i in intervals
    ]
    print(f"who held {args.item}{when}:")
    print(table(rows, ["GROUP", "ITEM", "MEMBER", "FROM", "TO", "FOR", "GIVEN", "ENDED"]))
    return 0
