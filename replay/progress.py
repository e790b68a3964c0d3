"""Progress of a long read, on stderr: a bar redrawn in place on a terminal, otherwise a plain line
every few seconds (a log file or CI output stays readable). Reads that end within a second show
nothing, so scripts and tests see a clean stderr."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_QUIET_FOR_S = 1.0
_BAR_EVERY_S = 0.1
_LINE_EVERY_S = 10.0
_WIDTH = 30


class Progress:
    """Called with (done, total) as a read goes (`replay.source.ProgressFn`); `close()` at the end."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.started = time.monotonic()
        self.shown = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        elapsed = now - self.started
        if elapsed < _QUIET_FOR_S or now - self.shown < (_BAR_EVERY_S if self.tty else _LINE_EVERY_S):
            return
        self.shown = now
        fraction = min(1.0, done / total) if total else 1.0
        if self.tty:
            filled = int(fraction * _WIDTH)
            self.stream.write(
                f"\r{self.label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {fraction:4.0%} {elapsed:5.1f}s"
            )
            self.drawn = True
        else:
            self.stream.write(f"{self.label}: {fraction:.0%} after {elapsed:.0f}s\n")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r" + " " * (len(self.label) + _WIDTH + 18) + "\r")
            self.stream.flush()
            self.drawn = False
