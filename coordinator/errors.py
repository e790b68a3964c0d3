"""Errors the command line reports to its user as one line, with an exit code."""

from __future__ import annotations


class CliError(Exception):
    """A failure the user can act on; `coordinator` prints it without a traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
