"""Signals for the tests that stop a command the way a person at a terminal does (Ctrl-C)."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """A `preexec_fn`: SIGINT as Ctrl-C delivers it, even when the test run itself was started with
    SIGINT ignored (a background job of a shell without job control inherits SIG_IGN, and Python
    then installs no KeyboardInterrupt handler, so the command would never see the Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
