"""The `coordinator` console script: one entry point, one subcommand per tool.

Subcommands are registered here by name, with the module that implements them and their one-line
help. A module exposes `register(subparsers)`, which adds its parsers and sets `func` (a callable
taking the parsed arguments and returning the exit code). Only the module of the subcommand that
runs is imported: `coordinator --help` or `coordinator serve` never loads Spark, the replay tool or
the worker SDK, and a coordinator that fails over does not pay for them at start-up.

Errors a user can cause (bad flags, an unreachable broker, a missing topic) are reported as one
clear line on stderr with a non-zero exit code, never as a traceback.

Flags mean one thing everywhere: `--format table|json` is always a table (or text) for people or
JSON for scripts; Kafka's connection flags are Kafka's (`--bootstrap-server`, `--command-config`).
`coordinator --version` prints the installed version; `coordinator completion bash|zsh` prints a
completion script generated from this very parser (shtab), every subcommand loaded.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from coordinator.errors import CliError


class Command(NamedTuple):
    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "serve": Command("coordinator.service.serve", "run the coordinator service"),
    "gateway": Command("coordinator.gateway.cli",
                       "proxy Kafka's protocol to the brokers, our groups to our coordinators' Kafka listeners"),
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
    "completion": Command("coordinator.cli", "print a shell completion script: eval \"$(coordinator completion bash)\""),
}

DISTRIBUTION = "worker-coordinator"


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
    parser.add_argument("--version", action=_Version, help="print the installed version and exit")
    actions = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = set(COMMANDS) if load is None else set(load) & set(COMMANDS)
    for module in dict.fromkeys(COMMANDS[name].module for name in COMMANDS if name in wanted):
        importlib.import_module(module).register(_Subcommands(actions))  # may add several subcommands
    for name, command in COMMANDS.items():
        if name not in actions.choices:
            actions.add_parser(name, help=command.help)
    return parser


class _Version(argparse.Action):
    """`--version`: the installed distribution's version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        try:
            version = importlib.metadata.version(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
            version = "unknown (not installed)"
        sys.stdout.write(f"{parser.prog} {version}\n")
        parser.exit()


def register(subparsers: _Subcommands) -> None:
    """`coordinator completion`: this module is its own subcommand's module."""
    completion = subparsers.add_parser(
        "completion", description="Prints a completion script for the shell, generated from the command line's "
                                  "own parser. bash: eval \"$(coordinator completion bash)\" in ~/.bashrc; zsh: "
                                  "coordinator completion zsh > \"${fpath[1]}/_coordinator\".")
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(func=_completion)


def _completion(args: argparse.Namespace) -> int:
    import shtab

    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0


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
