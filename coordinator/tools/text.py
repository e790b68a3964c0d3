"""How times and tables are written for people: the one ISO 8601 form of every CLI table, log
line, page and wire field that shows a time, the one plain-text table of the commands, and the one
HTML escaping and group address of the pages."""

from __future__ import annotations

import html
import urllib.parse
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


def escape(text: object) -> str:
    """Any value as HTML text or attribute value (quotes escaped): the pages' and plots' one escaping."""
    return html.escape(str(text), quote=True)


def group_path(group_id: str) -> str:
    """`/ui/groups/{group}`: a group's page, its id quoted whole (a `/` in it stays in the one segment)."""
    return "/ui/groups/" + urllib.parse.quote(group_id, safe="")


def table(rows: list[list[Any]], header: list[str]) -> str:
    """Columns padded to their widest cell, `-` for None: what `kafka-consumer-groups` prints."""
    cells = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells)
