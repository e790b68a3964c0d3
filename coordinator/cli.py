"""The `coordinator` console script: one entry point, one subcommand per tool.

Subcommands are registered here by name, with the module that implements them and their one-line
help. A module exposes `register(subparsers)`, which adds its parsers and sets `func` (a callable
taking the parsed arguments and returning the exit code). Only the module of the subcommand that
runs is imported: `coordinator --help` or `coordinator serve` never loads Spark, the replay tool or
the worker SDK, and a coordinator that fails over does not pay for them at start-up.

Errors a user can cause (bad flags, an unreachable broker, a missing topic) are reported as one
clear line on stderr with a non-zero exit code, never as a traceback, by `main` alone: a
subcommand raises `CliError` (exit code 2 for a bad or conflicting flag), and every parser here is
a `_Parser`, whose errors (an unknown flag, a bad value, a missing argument) are `UsageError`s
instead of argparse's usage text and message on two lines. A subcommand with `--log-format`
(serve, gateway) registers `error_line` (`coordinator.tools.logs.error_line`) as a parser default;
where its logs would be JSON (`--log-format json`, COORDINATOR_LOG_FORMAT=json, or `auto` off a
terminal), its errors are one JSON object line too, with `level`, `message` and `event`
(`usage-error`, `command-failed`, or `command-crashed` with the traceback in `exception`).

Flags mean one thing everywhere: `--format table|json` is always a table (or text) for people or
JSON for scripts; Kafka's connection flags are Kafka's (`--bootstrap-server`, `--command-config`).
`coordinator --version` prints the installed version; `coordinator completion bash|zsh` prints a
completion script generated from this very parser (shtab), every subcommand loaded.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, NoReturn

from coordinator.errors import CliError, UsageError


class Command(NamedTuple):
    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "serve": Command("coordinator.service.serve", "run the coordinator service"),
    "gateway": Command(
        "coordinator.gateway.cli",
        "proxy Kafka's protocol to the brokers, our groups to our coordinators' Kafka listeners",
    ),
    "groups": Command("coordinator.sdk.admin", "list or describe connect groups"),
    "connectors": Command("coordinator.sdk.admin", "set the connectors a group runs"),
    "config": Command("coordinator.sdk.admin", "set a group's timeouts"),
    "worker": Command("coordinator.sdk.fleet", "run a fleet of simulated workers"),
    "demo": Command("coordinator.sdk.demo", "the main job: a coordinator, a worker fleet and a scripted story"),
    "topic": Command(
        "coordinator.tools.topic",
        "create, describe, validate or alter the coordinator's compacted topic, or raise its record format level",
    ),
    "dev-broker": Command(
        "coordinator.tools.devbroker", "start, stop or inspect a local Apache Kafka (1 or 3 KRaft nodes)"
    ),
    "replay": Command(
        "replay.cli", "a group's history from the topic or a dump: timeline, state, diff, who-owned, verify"
    ),
    "dump": Command(
        "replay.cli", "copy the topic's records (or another dump) to a file for `coordinator replay --file`"
    ),
    "audit": Command(
        "spark.cli", "stream the topic into Delta history tables in a catalog (Spark Structured Streaming)"
    ),
    "sql": Command("spark.cli", "query the audit's tables with Spark SQL"),
    "audit-simulate": Command(
        "spark.cli", "replay simulate on the audit's tables: a group's history re-run with other settings"
    ),
    "spark-conf": Command("spark.cli", "print the Spark settings that find the audit's tables by name"),
    "completion": Command("coordinator.cli", 'print a shell completion script: eval "$(coordinator completion bash)"'),
}


class _Subcommands:
    """What a module's `register` sees: `add_parser` with the help registered above."""

    def __init__(self, actions: argparse._SubParsersAction) -> None:
        self._actions = actions

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return self._actions.add_parser(name, help=COMMANDS[name].help, **kwargs)


class _Parser(argparse.ArgumentParser):
    """The parser of `coordinator` and of every subcommand (add_subparsers makes its parsers of the
    class of the parser it is called on). Its errors are `UsageError`s, reported by `main` as every
    other error is: one line, exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, prog=self.prog)

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        # Checked by each parser, so that an unknown flag is refused by the subcommand it was given to
        # (`coordinator connectors set: error: ...`), not by `coordinator` after every subparser ran.
        # Nothing here wants the leftovers: a subcommand's parser takes every word after its name.
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        self._check_environment_choices(namespace)
        return namespace, extras

    def _check_environment_choices(self, namespace: argparse.Namespace) -> None:
        """argparse checks `choices` only for values on the command line: a default taken from the
        environment (COORDINATOR_LOG_FORMAT=yaml, COORDINATOR_OWNERSHIP=grop) would reach the
        subcommand unchecked, as a traceback or as another choice silently. Refused here instead."""
        for action in self._actions:
            value = getattr(namespace, action.dest, None)
            if (
                action.choices is None
                or not action.option_strings
                or not isinstance(action.default, str)
                or value is not action.default
                or value in action.choices
            ):
                continue
            variable = getattr(value, "variable", None)  # serve's defaults remember their variable
            source = f"from {variable}" if variable else "its default, from the environment"
            self.error(
                f"argument {'/'.join(action.option_strings)}: invalid choice: {value!r} ({source}; "
                f"choose from {', '.join(map(repr, action.choices))})"
            )


def build_parser(load: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser with the subcommands `load` (None: every one) complete; the others are listed
    with their help only, so that `--help` and a typo's error name them all."""
    parser = _Parser(
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
        from coordinator.tools.release import release

        version = release()
        if version == "unknown":
            version = "unknown (not installed)"  # a source tree that was never installed
        sys.stdout.write(f"{parser.prog} {version}\n")
        parser.exit()


def register(subparsers: _Subcommands) -> None:
    """`coordinator completion`: this module is its own subcommand's module."""
    completion = subparsers.add_parser(
        "completion",
        description="Prints a completion script for the shell, generated from the command line's "
        'own parser. bash: eval "$(coordinator completion bash)" in ~/.bashrc; zsh: '
        'coordinator completion zsh > "${fpath[1]}/_coordinator".',
    )
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
    parser = build_parser([command] if command else [])
    args = None
    try:
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except CliError as e:
        _report(e, parser, command, argv, args)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        # A bug: its traceback is how it gets fixed. Where the logs are JSON it goes inside one
        # JSON line (as a logged exception does), so that the log pipeline keeps it.
        line = _json_line(
            parser,
            command,
            argv,
            args,
            f"{type(e).__name__}: {e}",
            "command-crashed",
            exception=traceback.format_exc(),
            exit_code=1,
        )
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 1


def _report(
    error: CliError,
    parser: argparse.ArgumentParser,
    command: str | None,
    argv: list[str],
    args: argparse.Namespace | None,
) -> None:
    """The one place an error reaches the user: one line on stderr, JSON where the logs are."""
    usage = isinstance(error, UsageError)
    name = args.command if args is not None else command
    prog = (error.prog if usage else None) or ("coordinator " + name if name else "coordinator")
    event = "usage-error" if error.exit_code == 2 else "command-failed"
    line = _json_line(
        parser,
        command,
        argv,
        args,
        str(error),
        event,
        command=prog.removeprefix("coordinator").strip() or None,
        exit_code=error.exit_code,
    )
    if line is None:
        line = f"{prog}: error: {error}" + (f"; see {prog} --help" if usage else "")
    print(line, file=sys.stderr)


def _json_line(
    parser: argparse.ArgumentParser,
    word: str | None,
    argv: list[str],
    args: argparse.Namespace | None,
    message: str,
    event: str,
    **fields: Any,
) -> str | None:
    """The error as the subcommand's logs would carry it, or None where they are text (or where
    the subcommand has no --log-format). Before the arguments are parsed (a usage error), the
    format is the last --log-format on the command line, else that flag's default (its variable)."""
    subcommands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    sub = subcommands.choices.get(word) if subcommands and word else None
    writer: Callable[..., str | None] | None = sub.get_default("error_line") if sub else None
    if writer is None:
        return None
    if args is not None and hasattr(args, "log_format"):
        fmt = args.log_format
    else:
        action = sub._option_string_actions.get("--log-format")
        fmt = action.default if action is not None else "auto"
        for i, arg in enumerate(argv):
            if arg == "--log-format" and i + 1 < len(argv):
                fmt = argv[i + 1]
            elif arg.startswith("--log-format="):
                fmt = arg.partition("=")[2]
    return writer(message, str(fmt), event, logger="coordinator.cli", **fields)
