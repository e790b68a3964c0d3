"""The group page's "what if" simulation, in a process of its own (`python -m
coordinator.service.whatif_child`), started by `coordinator.service.whatif.WhatIf`.

It reads one request as JSON on stdin (the server's Kafka client settings travel there, not on a
command line that `ps` shows), bounds its own address space (`RLIMIT_AS`), lowers its CPU
priority so the server's heartbeats come first on a busy machine, and runs `replay simulate`
itself: the arguments are parsed by the command's own parser, the records read as the command
reads them (with the server's Kafka settings), and `replay.commands.simulate.simulation` does the
work, so the page shows what the command line prints. The memory bound is on the simulation, over
what the process held once the records were read (see `simulate`). One JSON answer goes to
stdout: a line `{"ok": true}` then the report as the page shows it (`coordinator.service.whatif.
report`'s HTML), or the one-line error (`error`: `input` for what cannot work as asked, `nothing`
for nothing to re-run, `memory` for the bound, `failed` else).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import sys
from typing import Any

import orjson

_bounded = False  # the address space is bounded from here on


def bound(mb: int) -> None:
    """The address space bounded to `mb`: an allocation beyond it is a MemoryError here, never the
    server's or the machine's trouble."""
    global _bounded
    limit = mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _bounded = True


def arguments(request: dict[str, Any]) -> argparse.Namespace:
    """`coordinator replay simulate`'s arguments for the request, parsed by the command's parser."""
    from replay import cli

    parser = argparse.ArgumentParser(prog="coordinator")
    cli.register(parser.add_subparsers(dest="command"))
    argv = [
        "replay",
        "simulate",
        f"--group={request['group']}",
        f"--topic={request['topic']}",
        f"--scheduled-delay={request['delay_ms']}ms",
        "--no-progress",
    ]
    argv += [f"--from={request['from_ms']}"] if request.get("from_ms") is not None else []
    argv += [f"--to={request['to_ms']}"] if request.get("to_ms") is not None else []
    return parser.parse_args(argv)


def simulate(request: dict[str, Any]) -> dict[str, Any]:
    from replay import plot
    from replay.commands import simulate as command
    from replay.commands.reading import Read, read_summary

    args = arguments(request)
    command.check(args)
    # The records first, with the bound at what the code loaded took: librdkafka's threads do not
    # survive an address-space limit (a failed thread is an abort), so the bound comes after the
    # read, on the simulation's work: the history, the re-runs, the pictures.
    read = Read(args, args.group, dict(request["kafka"]))
    read.records = list(read)
    bound(address_space_mb() + int(request["memory_mb"]))
    warnings = io.StringIO()  # what the command says on stderr (an old range's compaction warning)
    with contextlib.redirect_stderr(warnings):
        report, read = command.simulation(args, read)
    header, rows = command.report_table(report)
    return {
        "summary": read_summary(report.recorded_history, read),
        "settings": command.settings_line(report),
        "header": header,
        "rows": [[str(cell) for cell in row] for row in rows],
        "notes": [line for line in warnings.getvalue().splitlines() if line.strip()] + command.report_notes(report),
        "plots": [(name, plot.svg(h, args.group)) for name, h in report.histories if h.first is not None],
    }


def answer(request: dict[str, Any]) -> dict[str, Any]:
    from coordinator.errors import CliError
    from replay.errors import ReplayError

    try:
        return simulate(request)
    except ReplayError as e:
        return {"error": "input" if e.invalid_input else "nothing", "message": str(e)}
    except CliError as e:
        return {"error": "input" if e.exit_code == 2 else "failed", "message": str(e)}


def address_space_mb(field: str = "VmSize") -> int:
    """This process's address space now (VmSize), or the most it had (VmPeak), in MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        kb = next((line.split()[1] for line in status if line.startswith(field + ":")), "0")
    return int(kb) // 1024


def main() -> int:
    # Niceness 10 first, so that every thread (librdkafka's are made by the read) has it: on a busy
    # machine a simulation waits for the server's CPU, not the other way round.
    with contextlib.suppress(OSError):
        os.nice(10)
    # Imported here, niced, and before the memory bound: the page's HTML and the exit code the server reads.
    from coordinator.service.whatif import MEMORY_EXIT, report

    request = orjson.loads(sys.stdin.buffer.read())
    try:
        result = answer(request)
        if "error" not in result:
            result["peak_mb"] = address_space_mb("VmPeak")
            page = report(result).encode()
    except (MemoryError, SystemError):
        # Under the bound a C extension's failed allocation is sometimes a SystemError ("error
        # return without exception set", measured: one run in three of the test's) rather than a
        # MemoryError. Before the bound, it is what it says.
        if not _bounded:
            raise
        result = None
    if result is None:  # out of the handler: what the failed allocation held is free again
        sys.stdout.buffer.write(orjson.dumps({"error": "memory", "message": "out of memory"}))
        return MEMORY_EXIT
    if "error" in result:
        sys.stdout.buffer.write(orjson.dumps(result))
        return 0
    # A line that says it worked, then the report's HTML as it goes on the page: the server splices
    # the bytes in and parses nothing (a week's timelines are megabytes of SVG; parsing them would
    # hold the server's event loop, and its heartbeats, for as long).
    sys.stdout.buffer.write(orjson.dumps({"ok": True}) + b"\n" + page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
