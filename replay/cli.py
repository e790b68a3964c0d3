"""`coordinator replay timeline|state|diff|who-owned|verify` and `coordinator dump`.

Every subcommand reads the records from one source, the live topic (`--bootstrap-servers`,
`--topic`, `--partition`, Kafka settings as every command takes them) or a dump file (`--file`),
within an optional window (`--from-offset`, `--to-offset`, `--from-time`, `--to-time`), and replays
them through `replay.history.History`. A question about one group reads only the group's partition
of the topic (`coordinator.tools.partitions.partition_for`) and decodes only its records.

Output is a table for people, or JSON lines (`--format json`) for scripts; failures are one line on
stderr and a non-zero exit code. Corrupt records are reported and skipped; `--strict` stops at the
first one with exit code 1.

This module is the command line's edge: the parsers, and `_errors_in_one_line`, which turns the
replay's own errors (`replay.errors.ReplayError`) into `CliError`. Each subcommand runs in a module
of `replay.commands`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from coordinator.errors import CliError
from coordinator.tools import kafka_config
from replay.commands import simulate
from replay.commands.dump import run_dump
from replay.commands.state import run_diff, run_state
from replay.commands.timeline import run_timeline
from replay.commands.verify import run_verify
from replay.commands.who_owned import run_who_owned
from replay.errors import ReplayError
from replay.positions import Point, parse_point, parse_time
from replay.source import DUMP_FORMATS


def register(subparsers: argparse._SubParsersAction) -> None:
    replay = subparsers.add_parser(
        "replay",
        description="Replays the coordinator's records (the live topic or a dump file) through the coordinator's "
        "own replay and answers questions about what happened.",
    )
    commands = replay.add_subparsers(dest="replay_command", metavar="SUBCOMMAND", required=True)

    timeline = _command(
        commands, "timeline", run_timeline, "every change of a group in the protocol's words, grouped into rebalances"
    )
    timeline.add_argument("--group", required=True, help="the group id")
    timeline.add_argument(
        "--plot",
        metavar="FILE.png|FILE.html",
        help="also draw who held which task over time: PNG, or a self-contained HTML page",
    )

    state = _command(commands, "state", run_state, "a group's members, epochs, targets and assignments at a point")
    state.add_argument("--group", required=True, help="the group id")
    state.add_argument(
        "--at",
        type=_point,
        metavar="OFFSET|TIME",
        help="after the record at this offset, or the last record at or before this time "
        "(default: the end of the read)",
    )

    diff = _command(commands, "diff", run_diff, "what changed in a group between two points")
    diff.add_argument("--group", required=True, help="the group id")
    diff.add_argument("--from", dest="from_point", type=_point, required=True, metavar="OFFSET|TIME")
    diff.add_argument("--to", dest="to_point", type=_point, metavar="OFFSET|TIME", help="default: the end of the read")

    who = _command(commands, "who-owned", run_who_owned, "who held a connector or task, and when")
    who.add_argument("item", metavar="ITEM", help="a connector (A) or a task (A-0 or A:0)")
    who.add_argument("--group", help="only this group (default: every group; reads every partition)")
    who.add_argument("--at", type=_time, metavar="TIME", help="only the holder at this time")

    verify = _command(
        commands,
        "verify",
        run_verify,
        "check the log's invariants: no item held twice, epochs never going back, valid targets",
    )
    verify.add_argument("--group", help="only this group (default: every group)")

    simulate.add_arguments(
        _command(
            commands,
            "simulate",
            simulate.run_simulate,
            "re-run a group's history through the coordinator, as recorded and with other settings",
        )
    )

    _register_dump(subparsers)


def _register_dump(subparsers: argparse._SubParsersAction) -> None:
    """`coordinator dump`: the records read, as bytes to replay later or decoded to read."""
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
    dump.set_defaults(func=_errors_in_one_line(run_dump))


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
