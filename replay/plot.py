"""`coordinator replay timeline --plot FILE`: who held which item over time, as a picture.

One lane per worker (member id), one bar per ownership interval of each connector and task,
coloured per connector and labelled with the task. A "waiting" lane shows the work the target
assigns to nobody while the group waits for a departed member within its scheduled rebalance
delay (a crashed worker's tasks: from the target that deferred each item to the first target that
no longer does); an "unowned" lane shows the other gaps in which an item that had been held waited
for a new owner (a handoff between revoking and starting). Each rebalance is a shaded band from its
epoch bump to its convergence, with the epoch it reached and why.

The picture is laid out once (`replay.plot_layout`), then drawn either with matplotlib (`.png`,
`replay.plot_png`) or as a self-contained HTML page holding an SVG (`.html`, `.svg`: no
dependency, and every bar and band has a tooltip; `replay.plot_svg`).
"""

from __future__ import annotations

from pathlib import Path

from replay.errors import ReplayError
from replay.history import History
from replay.plot_layout import layout
from replay.plot_png import png
from replay.plot_svg import html_page, svg_element


def svg(history: History, group_id: str) -> str:
    """The picture as one SVG element, to put in a page (the coordinator's group page does)."""
    return svg_element(layout(history, group_id))


def write(path: str, history: History, group_id: str) -> None:
    suffix = Path(path).suffix.lower()
    picture = layout(history, group_id)
    if suffix == ".png":
        png(picture, path)
    elif suffix in (".html", ".htm", ".svg"):
        page = svg_element(picture) if suffix == ".svg" else html_page(picture)
        Path(path).write_text(page, encoding="utf-8")
    else:
        raise ReplayError(f"{path}: the picture is a .png, or an .html (or .svg) page", invalid_input=True)
