"""`coordinator replay timeline|state|diff|who-owned|verify` and `coordinator dump`.

Every subcommand reads the records from one source, the live topic (`--bootstrap-servers`,
`--topic`, `--partition`, Kafka settings as every command takes them) or a dump file (`--file`),
within an optional window (`--from-offset`, `--to-offset`, `--from-time`, `--to-time`), and replays
them through `replay.history.History`. A question about one group reads only the group's partition
of the topic (`coordinator.tools.partitions.partition_for`) and decodes only its records.

Output is a table for people, or JSON lines (`--format json`) for scripts; failures are one line on
stderr and a non-zero exit code. Corrupt records are reported and skipped; `--strict` stops at the
first one with exit code 1.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import orjson

import records
from records import TaskId

from coordinator.api import wire
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.items import Item, items_of
from coordinator.core.protocol import GroupDescription
from coordinator.errors import CliError
from coordinator.tools import kafka_config
from coordinator.tools.partitions import partition_for
from coordinator.tools.text import iso_time, table
from replay import events as ev
from replay.errors import ReplayError
from replay.history import History, Rebalance, interval_json, rebalance_json
from replay.invariants import Invariants
from replay.positions import Point, Position, Window, format_duration, format_time, parse_point, parse_time
from replay.progress import Progress
from replay.source import (
    DUMP_FORMATS,
    RawRecord,
    dump_header,
    read_dump,
    read_topic,
    write_dump,
)

_CORRUPT_SHOWN = 20
_MOVES_SHOWN = 12


def register(subparsers: argparse._SubParsersAction) -> None:
    replay = subparsers.add_parser(
        "replay",
        description="Replays the coordinator's records (the live topic or a dump file) through the coordinator's "
        "own replay and answers questions about what happened.",
    )
    commands = replay.add_subparsers(dest="replay_command", metavar="SUBCOMMAND", required=True)

    timeline = _command(
        commands, "timeline", _timeline, "every change of a group in the protocol's words, grouped into rebalances"
    )
    timeline.add_argument("--group", required=True, help="the group id")
    timeline.add_argument(
        "--plot",
        metavar="FILE.png|FILE.html",
        help="also draw who held which task over time: PNG, or a self-contained HTML page",
    )

    state = _command(commands, "state", _state, "a group's members, epochs, targets and assignments at a point")
    state.add_argument("--group", required=True, help="the group id")
    state.add_argument(
        "--at",
        type=_point,
        metavar="OFFSET|TIME",
        help="after the record at this offset, or the last record at or before this time "
        "(default: the end of the read)",
    )

    diff = _command(commands, "diff", _diff, "what changed in a group between two points")
    diff.add_argument("--group", required=True, help="the group id")
    diff.add_argument("--from", dest="from_point", type=_point, required=True, metavar="OFFSET|TIME")
    diff.add_argument("--to", dest="to_point", type=_point, metavar="OFFSET|TIME", help="default: the end of the read")

    who = _command(commands, "who-owned", _who_owned, "who held a connector or task, and when")
    who.add_argument("item", metavar="ITEM", help="a connector (A) or a task (A-0 or A:0)")
    who.add_argument("--group", help="only this group (default: every group; reads every partition)")
    who.add_argument("--at", type=_time, metavar="TIME", help="only the holder at this time")

    verify = _command(
        commands,
        "verify",
        _verify,
        "check the log's invariants: no item held twice, epochs never going back, valid targets",
    )
    verify.add_argument("--group", help="only this group (default: every group)")

    dump = subparsers.add_parser(
        "dump",
        description="Writes partition, offset, timestamp, key and value bytes of every record read, as JSON "
        "lines or a compact binary form; `coordinator replay --file` reads either. With --decode, "
        "prints each record (of the topic or a dump file) decoded instead, one line each, as Kafka's "
        "`kafka-dump-log --offsets-decoder` does: offset, time (ISO 8601, UTC), record type, key and "
        "value fields or tombstone; a corrupt record is printed as such, with why.",
    )
    _source_arguments(dump)
    dump.add_argument("--output", "-o", metavar="FILE", help="the dump file (default: standard output)")
    dump.add_argument(
        "--dump-format",
        choices=DUMP_FORMATS,
        help="the dump file's format; default: jsonl for a .jsonl/.json file or standard output, binary otherwise",
    )
    dump.add_argument(
        "--decode", action="store_true", help="print each record decoded, one line each, instead of writing a dump"
    )
    dump.add_argument(
        "--format",
        type=_dump_format_flag,
        metavar="{table,json}",
        help="with --decode: one line of text per record (default), or one JSON object per line "
        "(binary and jsonl: the former spelling of --dump-format, deprecated)",
    )
    dump.set_defaults(func=_errors_in_one_line(_dump))


def _command(
    commands: argparse._SubParsersAction, name: str, run: Callable[[argparse.Namespace], int], help: str
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help, description=help)
    _source_arguments(parser)
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="a table for people (default), or JSON lines for scripts",
    )
    parser.add_argument("--strict", action="store_true", help="stop at the first corrupt record (exit code 1)")
    parser.set_defaults(func=_errors_in_one_line(run))
    return parser


def _source_arguments(parser: argparse.ArgumentParser) -> None:
    kafka_config.add_arguments(parser)
    source = parser.add_argument_group("what to read")
    source.add_argument("--file", metavar="DUMP", help="a dump file written by `coordinator dump` (instead of Kafka)")
    source.add_argument(
        "--partition",
        type=_offset,
        action="append",
        metavar="N",
        help="only this partition (repeatable; default: the group's partition, or all)",
    )
    source.add_argument("--from-offset", type=_offset, metavar="OFFSET")
    source.add_argument("--to-offset", type=_offset, metavar="OFFSET", help="inclusive")
    source.add_argument("--from-time", type=_time, metavar="TIME", help="ISO 8601 (UTC unless it says) or epoch ms")
    source.add_argument("--to-time", type=_time, metavar="TIME", help="inclusive")
    source.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="wait this long for Kafka per request (default 30)",
    )
    source.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")


def _dump_format_flag(text: str) -> str:
    if text not in ("table", "json", *DUMP_FORMATS):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from 'table', 'json')")
    return text


def _offset(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def _time(text: str) -> int:
    try:
        return parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _point(text: str) -> Point:
    try:
        return parse_point(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _errors_in_one_line(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except BrokenPipeError:  # `... | head`: the reader has what it wanted
            # Python flushes stdout again at exit; point it where that cannot fail.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except OSError as e:
            raise CliError(f"{e.filename or 'output'}: {e.strerror}") from None
        except ReplayError as e:  # the replay's own failures, said at the command line's edge
            raise CliError(str(e), exit_code=2 if e.invalid_input else 1) from None

    return wrapper


# --- the source --------------------------------------------------------------------------------------


class _Read:
    """The records a command's arguments name, and the progress shown while reading them."""

    def __init__(self, args: argparse.Namespace, group_id: str | None = None) -> None:
        window = Window(args.from_offset, args.to_offset, args.from_time, args.to_time)
        if window.from_offset is not None and window.to_offset is not None and window.from_offset > window.to_offset:
            raise CliError("--from-offset is after --to-offset", exit_code=2)
        self.progress = Progress(f"reading {args.file or args.topic}", enabled=args.progress)
        if args.file:
            self.description = f"dump {args.file}"
            self.records: Iterable[RawRecord] = read_dump(
                args.file, partitions=args.partition, window=window, progress=self.progress
            )
            return
        if not args.bootstrap_servers:
            raise CliError(
                "nothing to read: pass --file DUMP, or --bootstrap-servers (or set "
                "KAFKA_BOOTSTRAP_SERVERS) for the topic",
                exit_code=2,
            )
        config = kafka_config.client_config(args)
        partitions: Any = args.partition
        if partitions is None and group_id is not None:
            partitions = lambda count: [partition_for(group_id, count)]  # noqa: E731 - the group's partition
        self.description = f"topic {args.topic}"
        self.records = read_topic(
            config, args.topic, partitions=partitions, window=window, timeout_s=args.timeout, progress=self.progress
        )

    def __iter__(self) -> Iterator[RawRecord]:
        try:
            yield from self.records
        finally:
            self.progress.close()


def _print_json(value: Any, default: Callable[[Any], Any] | None = None) -> None:
    sys.stdout.write(orjson.dumps(value, default=default).decode() + "\n")


def _report_corrupt(history: History, args: argparse.Namespace) -> None:
    """Corrupt records: JSON lines on stdout for scripts, else warnings on stderr."""
    for n, c in enumerate(history.corrupt):
        if args.format == "json":
            _print_json(
                {
                    "type": "corrupt",
                    "partition": c.at.partition,
                    "offset": c.at.offset,
                    "timestamp_ms": c.at.timestamp_ms,
                    "reason": c.reason,
                }
            )
        elif n < _CORRUPT_SHOWN:
            print(
                f"warning: skipped corrupt record at partition {c.at.partition} offset {c.at.offset}: {c.reason}",
                file=sys.stderr,
            )
    if args.format != "json" and len(history.corrupt) > _CORRUPT_SHOWN:
        print(f"warning: ... and {len(history.corrupt) - _CORRUPT_SHOWN} more corrupt records skipped", file=sys.stderr)


def _where(p: Position | None) -> str:
    return "-" if p is None else f"offset {p.offset} ({format_time(p.timestamp_ms)})"


def _read_summary(history: History, read: _Read) -> str:
    if history.first is None:
        return f"no records of the group in {read.description}"
    first, last = history.first, history.last
    return (
        f"{history.records} records from {read.description}, partition {first.partition}, offsets "
        f"{first.offset}-{last.offset}, {format_time(first.timestamp_ms)} to {format_time(last.timestamp_ms)} UTC"
    )


# --- timeline ----------------------------------------------------------------------------------------


def _timeline(args: argparse.Namespace) -> int:
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".html", ".htm", ".svg"):
        raise CliError(f"--plot {args.plot}: the picture is a .png, or an .html (or .svg) page", exit_code=2)
    if args.plot and Path(args.plot).suffix.lower() == ".png":
        from replay.plot_png import require_matplotlib

        require_matplotlib()  # the extra `plot`: said before the log is read, not after
    read = _Read(args, args.group)
    history = History(args.group, strict=args.strict)
    history.run(read)
    _report_corrupt(history, args)
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
                _print_json(rebalance_json(rebalance))
            _print_json(ev.event_json(e))
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


def _print_timeline(history: History, read: _Read, rebalances: list[Rebalance]) -> None:
    print(f"group {history.group_id}: {_read_summary(history, read)}")
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


# --- state -------------------------------------------------------------------------------------------


def _state(args: argparse.Namespace) -> int:
    read = _Read(args, args.group)
    history = History(args.group, strict=args.strict, keep_events=False, intervals=False)
    history.run(read, until=args.at)
    _report_corrupt(history, args)
    description = GroupCoordinator(history.state).describe_group(args.group)
    point = f"at {args.at}" if args.at is not None else "at the end of the read"
    if description is None:
        raise CliError(f"group {args.group} does not exist {point} ({_read_summary(history, read)})")
    if args.format == "json":
        _print_json(
            {
                "type": "state",
                "group": args.group,
                "offset": history.last.offset,
                "timestamp_ms": history.last.timestamp_ms,
                "description": msgspec.to_builtins(wire.GroupDescription.of(description)),
            }
        )
        return 0
    print(f"group {args.group} {point}: after the record at {_where(history.last)}")
    _print_description(description, history)
    return 0


def _print_description(d: GroupDescription, history: History) -> None:
    if d.group_type == "classic":
        _print_classic_description(d)
        return
    print(
        f"group epoch {d.group_epoch}, assignment epoch {d.assignment_epoch}, {d.state}"
        + (f", assignor {d.assignor} ({d.assignor_kind}-side)" if d.assignor else "")
    )
    print("connectors: " + (", ".join(f"{c.name} ({c.tasks} tasks)" for c in d.connectors) or "none"))
    group = history.group()
    config = group.config if group is not None else None
    if config is not None:
        print(
            "timeouts: "
            + ", ".join(
                f"{name} {format_duration(value) if value is not None else 'server default'}"
                for name, value in (
                    ("session", config.session_timeout_ms),
                    ("heartbeat", config.heartbeat_interval_ms),
                    ("rebalance", config.rebalance_timeout_ms),
                    ("scheduled rebalance max delay", config.scheduled_rebalance_max_delay_ms),
                    ("initial assignment delay", config.initial_assignment_delay_ms),
                )
            )
        )
    if d.deferred.connectors or d.deferred.tasks:
        at = d.scheduled_rebalance_at_ms
        print(f"deferred: {ev.show(items_of(d.deferred))}" + (f" until {format_time(at)}" if at is not None else ""))
    if d.assignment_error:
        print(f"assignment error {d.assignment_error}: {d.assignment_error_message}")
    print()
    rows = [
        [
            m.member_id,
            m.instance_id,
            m.member_epoch,
            m.state,
            ev.show(items_of(m.assignment)),
            ev.show(items_of(m.pending_revocation))
            if m.pending_revocation.connectors or m.pending_revocation.tasks
            else "-",
            ev.show(items_of(m.target)),
        ]
        for m in d.members
    ]
    print(table(rows, ["MEMBER", "INSTANCE", "EPOCH", "STATE", "OWNS", "REVOKING", "TARGET"]) if rows else "no members")


def _print_classic_description(d: GroupDescription) -> None:
    """A classic group: its generation, and who each worker is and what it runs by Kafka Connect's
    rule over its bytes (coordinator.core.classic_holdings)."""
    print(f"classic group, generation {d.generation}, {d.state}, protocol {d.protocol_name}, leader {d.leader or '-'}")
    print("connectors: " + (", ".join(f"{c.name} ({c.tasks} tasks)" for c in d.connectors) or "none"))
    print()
    rows = [
        [m.member_id, m.instance_id, m.url, getattr(m, "config_offset", None), m.state, ev.show(items_of(m.assignment))]
        for m in d.members
    ]
    print(table(rows, ["MEMBER", "INSTANCE", "URL", "CONFIG-OFFSET", "STATE", "RUNS"]) if rows else "no members")
    for m in d.members:
        if getattr(m, "note", None):
            print(f"{m.member_id}: {m.note}")


# --- diff --------------------------------------------------------------------------------------------


def _diff(args: argparse.Namespace) -> int:
    a, b = args.from_point, args.to_point
    if b is not None and (
        (a.offset is not None and b.offset is not None and a.offset > b.offset)
        or (a.time_ms is not None and b.time_ms is not None and a.time_ms > b.time_ms)
    ):
        raise CliError("--from is after --to", exit_code=2)
    read = _Read(args, args.group)
    history = History(args.group, strict=args.strict, intervals=False)
    records = iter(read)
    pending = history.run(records, until=args.from_point)
    start = _Snapshot(history, args.group)
    events_before = len(history.events)
    rebalances_before = len(history.rebalances)
    if pending is not None:
        records = itertools.chain([pending], records)
    history.run(records, until=args.to_point)
    end = _Snapshot(history, args.group)
    _report_corrupt(history, args)
    changes = _changes(start, end)
    events = len(history.events) - events_before
    rebalances = history.rebalances[rebalances_before:]
    if args.format == "json":
        _print_json(
            {
                "type": "diff",
                "group": args.group,
                "from": start.json(),
                "to": end.json(),
                "events": events,
                "rebalances": [rebalance_json(r) for r in rebalances],
                **changes,
            }
        )
        return 0
    print(
        f"group {args.group} from {_where(start.at)} to {_where(end.at)}: {events} events, "
        f"{len(rebalances)} rebalances converged"
    )
    for label, (a, b) in changes["epochs"].items():
        print(f"{label}: {a} -> {b}" if a != b else f"{label}: {a} (unchanged)")
    if changes["connectors"]:
        print("connectors: " + "; ".join(changes["connectors"]))
    joined, left = changes["members_joined"], changes["members_left"]
    print(f"members joined: {', '.join(joined) or 'none'}; left: {', '.join(left) or 'none'}")
    rows = []
    for m in changes["members"]:
        rows.append(
            [
                m["member"],
                f"{_dash(m['epoch'][0])} -> {_dash(m['epoch'][1])}",
                _plus_minus(m["owns_gained"], m["owns_lost"]),
                _plus_minus(m["target_gained"], m["target_lost"]),
            ]
        )
    if rows:
        print()
        print(table(rows, ["MEMBER", "EPOCH", "OWNS", "TARGET"]))
    if changes["moved"]:
        print()
        print(
            table(
                [[m["item"], m["from"] or "(none)", m["to"] or "(none)"] for m in changes["moved"]],
                ["ITEM", "HELD BY THEN", "HELD BY NOW"],
            )
        )
    return 0


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _plus_minus(gained: list[str], lost: list[str]) -> str:
    parts = ([f"+[{', '.join(gained)}]"] if gained else []) + ([f"-[{', '.join(lost)}]"] if lost else [])
    return " ".join(parts) or "same"


class _Snapshot:
    """A group at one point: its description and who held what."""

    def __init__(self, history: History, group_id: str) -> None:
        self.at = history.last
        self.description = GroupCoordinator(history.state).describe_group(group_id)
        self.owners = history.owners(group_id)

    def json(self) -> dict[str, Any]:
        return {
            "offset": self.at.offset if self.at else None,
            "timestamp_ms": self.at.timestamp_ms if self.at else None,
            "group_epoch": self.description.group_epoch if self.description else None,
        }


def _changes(a: _Snapshot, b: _Snapshot) -> dict[str, Any]:
    da, db = a.description, b.description
    epochs = {
        "group epoch": (da.group_epoch if da else None, db.group_epoch if db else None),
        "assignment epoch": (da.assignment_epoch if da else None, db.assignment_epoch if db else None),
        "state": (da.state if da else "absent", db.state if db else "absent"),
    }
    ca = {c.name: c.tasks for c in da.connectors} if da else {}
    cb = {c.name: c.tasks for c in db.connectors} if db else {}
    connectors = [f"added {n} ({t} tasks)" for n, t in sorted(cb.items()) if n not in ca]
    connectors += [f"removed {n}" for n in sorted(ca) if n not in cb]
    connectors += [f"{n} {ca[n]} -> {t} tasks" for n, t in sorted(cb.items()) if n in ca and ca[n] != t]
    ma = {m.member_id: m for m in da.members} if da else {}
    mb = {m.member_id: m for m in db.members} if db else {}
    members = []
    for member_id in sorted(ma.keys() | mb.keys()):
        x, y = ma.get(member_id), mb.get(member_id)
        owns_x = _held(x)
        owns_y = _held(y)
        target_x = items_of(x.target) if x else frozenset()
        target_y = items_of(y.target) if y else frozenset()
        epoch = (x.member_epoch if x else None, y.member_epoch if y else None)
        if epoch[0] == epoch[1] and owns_x == owns_y and target_x == target_y:
            continue
        members.append(
            {
                "member": member_id,
                "epoch": list(epoch),
                "owns_gained": ev.item_names(owns_y - owns_x),
                "owns_lost": ev.item_names(owns_x - owns_y),
                "target_gained": ev.item_names(target_y - target_x),
                "target_lost": ev.item_names(target_x - target_y),
            }
        )
    moved = [
        {"item": str(item), "from": a.owners.get(item), "to": b.owners.get(item)}
        for item in sorted(a.owners.keys() | b.owners.keys(), key=ev.item_order)
        if a.owners.get(item) != b.owners.get(item)
    ]
    return {
        "epochs": epochs,
        "connectors": connectors,
        "members_joined": sorted(mb.keys() - ma.keys()),
        "members_left": sorted(ma.keys() - mb.keys()),
        "members": members,
        "moved": moved,
    }


def _held(m: Any) -> frozenset[Item]:
    return items_of(m.assignment) | items_of(m.pending_revocation) if m is not None else frozenset()


# --- who-owned ---------------------------------------------------------------------------------------


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


def _who_owned(args: argparse.Namespace) -> int:
    matches = parse_item(args.item)
    read = _Read(args, args.group)
    history = History(args.group, strict=args.strict, keep_events=False, intervals=matches)
    history.run(read)
    _report_corrupt(history, args)
    everything = history.all_intervals()
    intervals = everything
    if args.at is not None:
        intervals = [
            i for i in everything if i.start.timestamp_ms <= args.at and (i.end is None or i.end.timestamp_ms > args.at)
        ]
    if args.format == "json":
        for i in intervals:
            _print_json(interval_json(i))
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
            _where(i.start),
            _where(i.end) if i.end else "still held",
            format_duration((i.end or end).timestamp_ms - i.start.timestamp_ms) + ("" if i.end else "+"),
            f"at epoch {i.start_epoch}",
            i.ended_by or "-",
        ]
        for i in intervals
    ]
    print(f"who held {args.item}{when}:")
    print(table(rows, ["GROUP", "ITEM", "MEMBER", "FROM", "TO", "FOR", "GIVEN", "ENDED"]))
    return 0


# --- verify ------------------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    read = _Read(args, args.group)
    # A window that starts later than the log holds part of each group's history (replay.invariants).
    checker = Invariants(partial=args.from_offset is not None or args.from_time is not None)
    history = History(args.group, strict=args.strict, keep_events=False, intervals=False, checker=checker)
    history.run(read)
    _report_corrupt(history, args)
    violations = checker.violations
    groups = history.groups_seen
    if args.format == "json":
        for v in violations:
            _print_json(
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
        _print_json(
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


# --- dump --------------------------------------------------------------------------------------------


def _dump(args: argparse.Namespace) -> int:
    if args.format in DUMP_FORMATS:  # before --format meant table|json everywhere
        if args.dump_format is not None and args.dump_format != args.format:
            raise CliError(f"--format {args.format} and --dump-format {args.dump_format} disagree", exit_code=2)
        print(f"warning: --format {args.format} is deprecated: use --dump-format {args.format}", file=sys.stderr)
        args.dump_format, args.format = args.format, None
    if args.decode:
        if args.output is not None or args.dump_format is not None:
            raise CliError("--decode prints to standard output: no --output or --dump-format", exit_code=2)
        return _decode(args)
    if args.format is not None:
        raise CliError(f"--format {args.format} goes with --decode; a dump file's format is --dump-format", exit_code=2)
    output = args.output
    fmt = args.dump_format or ("jsonl" if output is None or Path(output).suffix in (".jsonl", ".json") else "binary")
    if output is None and fmt == "binary" and sys.stdout.isatty():
        raise CliError("a binary dump is not for a terminal: pass --output FILE, or --dump-format jsonl", exit_code=2)
    args.strict = False
    read = _Read(args)
    header = dump_header(read.description, None if args.file else args.topic, args.partition)
    if output is None:
        count = write_dump(sys.stdout.buffer, read, fmt, header)
        sys.stdout.buffer.flush()
    else:
        # Written aside and renamed: a failed dump never leaves a file that looks complete.
        partial = Path(output).with_name(Path(output).name + ".partial")
        try:
            with partial.open("wb") as out:
                count = write_dump(out, read, fmt, header)
            os.replace(partial, output)
        finally:
            partial.unlink(missing_ok=True)
    print(f"dumped {count} records from {read.description} to {output or 'standard output'} ({fmt})", file=sys.stderr)
    return 0


def _decode(args: argparse.Namespace) -> int:
    """`dump --decode`: each record read, decoded through the records package, one line each."""
    read = _Read(args)
    count = corrupt = 0
    out = sys.stdout
    for raw in read:
        count += 1
        try:
            record = records.decode(raw.key, raw.value)
        except records.RecordDecodeError as e:
            corrupt += 1
            if args.format == "json":
                _print_json(
                    {
                        "partition": raw.partition,
                        "offset": raw.offset,
                        "timestamp_ms": raw.timestamp_ms,
                        "corrupt": str(e),
                        "key": _b64(raw.key),
                        "value": _b64(raw.value),
                    }
                )
            else:
                out.write(
                    f"partition: {raw.partition} offset: {raw.offset} time: {iso_time(raw.timestamp_ms)} corrupt: {e}\n"
                )
            continue
        d = records.to_dict(record)
        if args.format == "json":
            _print_json(
                {
                    "partition": raw.partition,
                    "offset": raw.offset,
                    "timestamp_ms": raw.timestamp_ms,
                    "type": d["RecordType"],
                    "name": d["Name"],
                    "version": d["Version"],
                    "key": d["Key"],
                    "value": d["Value"],
                    "tombstone": d["Value"] is None,
                },
                default=_bytes_b64,
            )
        else:
            value = (
                "tombstone"
                if d["Value"] is None
                else (f"value(v{d['Version']}): " + orjson.dumps(d["Value"], default=_bytes_b64).decode())
            )
            out.write(
                f"partition: {raw.partition} offset: {raw.offset} time: {iso_time(raw.timestamp_ms)} "
                f"type: {d['Name']}({d['RecordType']}) key: {orjson.dumps(d['Key'], default=_bytes_b64).decode()} "
                f"{value}\n"
            )
    out.flush()
    print(
        f"decoded {count - corrupt} records from {read.description}" + (f", {corrupt} corrupt" if corrupt else ""),
        file=sys.stderr,
    )
    return 0


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _bytes_b64(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


__all__ = ["interval_json", "parse_item", "rebalance_json", "register"]
