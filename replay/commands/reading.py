"""What every replay command reads, and how it reports what it read.

`Read` is the records a command's arguments name (the topic, or a dump file, within a window),
with the progress shown while reading them; the rest says what was read and which records were
corrupt, for people (stderr) or scripts (JSON lines).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from coordinator.errors import CliError
from coordinator.tools import kafka_config
from coordinator.tools.partitions import partition_for
from replay.history import History
from replay.positions import Position, Window, format_time
from replay.progress import Progress
from replay.source import RawRecord, read_dump, read_topic

_CORRUPT_SHOWN = 20


class Read:
    """The records a command's arguments name, and the progress shown while reading them."""

    def __init__(
        self, args: argparse.Namespace, group_id: str | None = None, config: dict[str, str] | None = None
    ) -> None:
        """`config`: the Kafka client settings to read with, instead of those the arguments give (the
        group page's "what if" view reads with its server's)."""
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
        if config is None and not args.bootstrap_servers:
            raise CliError(
                "nothing to read: pass --file DUMP, or --bootstrap-servers (or set "
                "KAFKA_BOOTSTRAP_SERVERS) for the topic",
                exit_code=2,
            )
        config = config if config is not None else kafka_config.client_config(args)
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


def print_json(value: Any, default: Callable[[Any], Any] | None = None) -> None:
    sys.stdout.write(orjson.dumps(value, default=default).decode() + "\n")


def report_corrupt(history: History, args: argparse.Namespace) -> None:
    """Corrupt records: JSON lines on stdout for scripts, else warnings on stderr."""
    for n, c in enumerate(history.corrupt):
        if args.format == "json":
            print_json(
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


def where(p: Position | None) -> str:
    return "-" if p is None else f"offset {p.offset} ({format_time(p.timestamp_ms)})"


def read_summary(history: History, read: Read | str) -> str:
    """What was read (`read`, or the description of another source: the audit's records table)."""
    description = read if isinstance(read, str) else read.description
    if history.first is None:
        return f"no records of the group in {description}"
    first, last = history.first, history.last
    return (
        f"{history.records} records from {description}, partition {first.partition}, offsets "
        f"{first.offset}-{last.offset}, {format_time(first.timestamp_ms)} to {format_time(last.timestamp_ms)} UTC"
    )
