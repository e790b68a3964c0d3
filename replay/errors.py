"""What goes wrong reading or replaying a group's history, said in one line.

The replay's modules raise `ReplayError` (or a kind of it: `replay.source.SourceError`,
`replay.history.CorruptRecordError`); they know nothing of a command line. Its edge, `replay.cli`,
turns them into `coordinator.errors.CliError` (exit code 2 when what was asked for cannot work as
given, else 1); the coordinator's group page (`coordinator.service.pages`) says them on the page.
"""

from __future__ import annotations


class ReplayError(Exception):
    """A failure its user can act on: a dump file that is not one, a topic that is not there, a
    corrupt record in strict mode, nothing to draw. `invalid_input`: what was asked for cannot work
    as given (a Kafka client setting, a picture's file type), rather than what was found."""

    def __init__(self, message: str, *, invalid_input: bool = False) -> None:
        super().__init__(message)
        self.invalid_input = invalid_input
