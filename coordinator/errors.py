"""Errors the command line reports to its user as one line, with an exit code.

`coordinator.cli.main` is the one place that reports them: as `coordinator COMMAND: error: ...` on
stderr, or, where the subcommand logs JSON (`--log-format json`), as one JSON object line shaped as
its logs are. A subcommand refuses a bad or conflicting flag with `CliError(..., exit_code=2)` (or
`UsageError`); argparse's own errors (an unknown flag, a bad value, a missing argument) become a
`UsageError` too, instead of argparse's two lines (usage, then the error) and a SystemExit."""

from __future__ import annotations


class CliError(Exception):
    """A failure the user can act on; `coordinator` prints it without a traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(CliError):
    """A command line that cannot run as given (exit code 2, argparse's). `prog` is the parser that
    refused it (`coordinator topic create`), so that the line names the subcommand and its --help."""

    def __init__(self, message: str, prog: str | None = None) -> None:
        super().__init__(message, exit_code=2)
        self.prog = prog
