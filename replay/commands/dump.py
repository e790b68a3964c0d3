"""`coordinator dump`: the records read, copied to a dump file (JSON lines or binary) that
`coordinator replay --file` reads, or printed decoded, one line each (--decode)."""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path
from typing import Any

import orjson

import records

from coordinator.errors import CliError
from coordinator.tools.text import iso_time
from replay.commands.reading import Read, print_json
from replay.source import DUMP_FORMATS, dump_header, write_dump


def run_dump(args: argparse.Namespace) -> int:
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
    read = Read(args)
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
    read = Read(args)
    count = corrupt = 0
    out = sys.stdout
    for raw in read:
        count += 1
        try:
            record = records.decode(raw.key, raw.value)
        except records.RecordDecodeError as e:
            corrupt += 1
            if args.format == "json":
                print_json(
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
            print_json(
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
