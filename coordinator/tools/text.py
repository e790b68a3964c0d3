"""How times and tables are written for people: the one ISO 8601 form of every CLI table, log
line, page and wire field that shows a time, and the one plain-text table of the commands."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def iso_time(ms: int) -> str:
    """`2026-03-01T03:12:00.250Z`: a time in milliseconds since the epoch, UTC, to the millisecond."""
    return (
        datetime.fromtimestamp(ms // 1000, UTC)
        .replace(microsecond=ms % 1000 * 1000)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def table(rows: list[list[Any]], header: list[str]) -> str:
    """Columns padded to their widest cell, `-` for None: what `kafka-consumer-groups` prints."""
    cells = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells)
