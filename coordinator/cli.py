"""The `coordinator` console script: one entry point, one subcommand per tool.

Subcommands are registered here by name, with the module that implements them and their one-line
help. A module exposes `register(subparsers)`, which adds its parsers and sets `func` (a callable
taking the parsed arguments and returning the exit code). Only the module of the subcommand that
runs is imported: `coordinator --help` or `coordinator serve` never loads Spark, the replay tool or
the worker SDK, and a coordinator that fails over does not pay for them at start-up.

Errors a user can cause (bad flags, an unreachable broker, a missing topic) are reported as one
clear line on stderr with a non-zero exit code, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from coordinator.errors import CliError


class Command(NamedTuple):
    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "serve": Command("coordinator.service.serve", "run the coordinator service"),
    "groups": Command("coordinator.sdk.admin", "list or describe connect groups"),
    "connectors": Command("coordinator.sdk.admin", "set the connectors a group runs"),
    "config": Command("coordinator.sdk.admin", "set a group's timeouts"),
    "worker": Command("coordinator.sdk.fleet", "run a fleet of simulated workers"),
    "demo": Command("coordinator.sdk.demo", "the main job: a coordinator, a worker fleet and a scripted story"),
    "topic": Command("coordinator.tools.topic", "create, describe or validate the coordinator's compacted topic"),
    "dev-broker": Command("coordinator.tools.devbroker",
                          "start, stop or inspect a local Apache Kafka (1 or 3 KRaft nodes)"),
    "replay": Command("replay.cli",
                      "a group's history from the topic or a dump: timeline, state, diff, who-owned, verify"),
    "dump": Command("replay.cli", "copy the topic's records (or another dump) to a file for `coordinator replay --file`"),
    "audit": Command("spark.cli", "stream the topic into Delta history tables in a catalog (Spark Structured Streaming)"),
    "sql": Command("spark.cli", "query the audit's tables with Spark SQL"),
    "spark-conf": Command("spark.cli", "print the Spark settings that find the audit's tables by name"),
}


class _Subcommands:
    """What a module's `register` sees: `add_parser` with the help registered above."""

    def __init__(self, actions: argparse._SubParsersAction) -> None:
        self._actions = actions

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return self._actions.add_parser(name, help=COMMANDS[name].help, **kwargs)


def build_parser(load: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser with the subcommands `load` (None: every one) complete; the others are listed
    with their help only, so that `--help` and a typo's error name them all."""
    parser = argparse.ArgumentParser(
        prog="coordinator",
        description="Event-sourced group coordinator for Kafka Connect-style worker groups.",
    )
    actions = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = set(COMMANDS) if load is None else set(load) & set(COMMANDS)
    for module in dict.fromkeys(COMMANDS[name].module for name in COMMANDS if name in wanted):
        importlib.import_module(module).register(_Subcommands(actions))  # may add several subcommands
    for name, command in COMMANDS.items():
        if name not in actions.choices:
            actions.add_parser(name, help=command.help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The top-level parser has no option that takes a value: the first word is the subcommand.
    command = next((word for word in argv if not word.startswith("-")), None)
    args = build_parser([command] if command else []).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        print(f"coordinator {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
