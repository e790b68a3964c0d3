"""The `coordinator` console script: one entry point, one subcommand per tool.

Each subcommand lives in its own module, which exposes `register(subparsers)`; that function adds
its parser and sets `func`, a callable taking the parsed arguments and returning the exit code.
Errors a user can cause (bad flags, an unreachable broker, a missing topic) are reported as one
clear line on stderr with a non-zero exit code, never as a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from coordinator import admin, demo, devbroker, fleet, serve, topic
from coordinator.errors import CliError
from replay import cli as replay
from spark import cli as spark

_COMMANDS = (serve, admin, fleet, demo, topic, devbroker, replay, spark)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coordinator",
        description="Event-sourced group coordinator for Kafka Connect-style worker groups.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in _COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        print(f"coordinator {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
