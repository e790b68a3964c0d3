"""`coordinator replay verify`: the log's invariants (`replay.invariants`): no item held twice,
epochs never going back, valid targets."""

from __future__ import annotations

import argparse

from coordinator.errors import CliError
from replay.commands.reading import Read, print_json, report_corrupt
from replay.history import History
from replay.invariants import Invariants
from replay.positions import format_time


def run_verify(args: argparse.Namespace) -> int:
    read = Read(args, args.group)
    # A window that starts later than the log holds part of each group's history (replay.invariants).
    checker = Invariants(partial=args.from_offset is not None or args.from_time is not None)
    history = History(args.group, strict=args.strict, keep_events=False, intervals=False, checker=checker)
    history.run(read)
    report_corrupt(history, args)
    violations = checker.violations
    groups = history.groups_seen
    if args.format == "json":
        for v in violations:
            print_json(
                {
                    "type": "violation",
                    "rule": v.rule,
                    "group": v.group_id,
                    "partition": v.at.partition,
                    "offsets": list(v.offsets),
                    "timestamp_ms": v.at.timestamp_ms,
                    "message": v.message,
                }
            )
        print_json(
            {
                "type": "summary",
                "records": history.records,
                "groups": groups,
                "violations": len(violations),
                "corrupt": len(history.corrupt),
            }
        )
    else:
        for v in violations:
            print(
                f"partition {v.at.partition} offset {v.at.offset} ({format_time(v.at.timestamp_ms)}) group "
                f"{v.group_id}: [{v.rule}] {v.message}"
            )
        print(
            f"verified {history.records} records of {groups} group{'s' if groups != 1 else ''} from "
            f"{read.description}: "
            f"{len(violations) or 'no'} violations"
            + (f", {len(history.corrupt)} corrupt records skipped" if history.corrupt else "")
        )
    if violations:
        offsets = sorted({(v.at.partition, o) for v in violations for o in v.offsets})
        shown = ", ".join(f"{p}:{o}" for p, o in offsets[:20]) + (" ..." if len(offsets) > 20 else "")
        raise CliError(f"{len(violations)} invariant violations; records at fault (partition:offset): {shown}")
    return 0
