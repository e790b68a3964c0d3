"""The timeline's picture as one SVG element, or a self-contained HTML page holding it: no
dependency, and every bar and band has a tooltip (`--plot FILE.html|FILE.svg`, the group page).
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.tools.text import escape
from replay.plot_layout import (
    LANE_GAP,
    ROW,
    UNOWNED,
    UNOWNED_COLOUR,
    WAITING,
    WAITING_LEGEND,
    Layout,
    label_levels,
    label_places,
    lane_tops,
    legend_in_rows,
    light,
    plot_height,
    rebalance_lines,
    shade,
    time_ticks,
    wrap_lines,
)
from replay.positions import format_clock, format_time


@dataclass(slots=True)
class _SvgFrame:
    """Where things go in the SVG: margins, lane tops, and time to x."""

    picture: Layout
    left: float
    right: float
    width: int
    row_px: int
    tops: dict[str, float]
    plot_h: float
    top_margin: float
    scale: float  # px per ms

    def x(self, ms: int) -> float:
        return self.left + (ms - self.picture.t0) * self.scale


def svg_element(picture: Layout) -> str:
    widest = max((len(name) for name, _ in picture.lanes), default=8)
    left, right = max(120, int(7.5 * widest) + 20), 20  # 11 px bold is about 7.5 px a character
    width = 1400
    t0, t1 = picture.t0, picture.t1
    scale = (width - left - right) / ((t1 - t0) * 1.01)  # room for the bars that reach the end of the read
    levels = label_levels([(b.start_ms - t0) * scale for b in picture.bands], 34)
    row_px = 18
    frame = _SvgFrame(
        picture,
        left,
        right,
        width,
        row_px,
        lane_tops(picture),
        plot_height(picture) * row_px,
        50 + 15 * (max(levels, default=0) + 1),
        scale,
    )
    # Monospace 11 px is about 6.7 px a character: the list wraps inside the picture's right edge.
    lines = wrap_lines(rebalance_lines(picture), int((width - right - left) / 6.7))
    legend_rows = legend_in_rows([name for name, _ in _svg_legend_entries(picture)], width - right - left, 6.5, 28)
    height = int(
        frame.top_margin + frame.plot_h + 70 + 20 * (len(legend_rows) - 1) + (24 + 14 * len(lines) if lines else 0)
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
        '<defs><pattern id="unowned" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#e4e4e4"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="{UNOWNED_COLOUR}" stroke-width="3"/></pattern>'
        '<pattern id="away" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" '
        'fill="white" fill-opacity="0.55"/><circle cx="2.5" cy="2.5" r="0.8" fill="#555"/></pattern></defs>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">{escape(picture.title)}</text>',
    ]
    out += _svg_time_axis(frame)
    out += _svg_bands(frame, levels)
    out += _svg_lanes(frame)
    out += _svg_bars(frame)
    out += _svg_legend(frame, lines, legend_rows)
    out.append("</svg>")
    return "\n".join(out)


def _svg_time_axis(f: _SvgFrame) -> list[str]:
    bottom = f.top_margin + f.plot_h
    out = [
        f'<line x1="{f.x(tick):.1f}" y1="{f.top_margin}" x2="{f.x(tick):.1f}" y2="{bottom}" '
        f'stroke="#eeeeee"/><text x="{f.x(tick):.1f}" y="{bottom + 16}" text-anchor="middle" '
        f'fill="#444">{format_clock(tick)}</text>'
        for tick in time_ticks(f.picture.t0, f.picture.t1)
    ]
    out.append(
        f'<text x="{(f.left + f.width - f.right) / 2}" y="{bottom + 34}" text-anchor="middle" '
        'fill="#444">time (UTC)</text>'
    )
    return out


def _svg_bands(f: _SvgFrame, levels: list[int]) -> list[str]:
    """The rebalances: a shaded band from epoch bump to convergence, labelled with the epoch."""
    out = []
    for band, level in zip(f.picture.bands, levels):
        x0, x1 = f.x(band.start_ms), max(f.x(band.end_ms), f.x(band.start_ms) + 2)
        fill = "#d9d9d9" if band.converged else "#f4c7c3"
        label_y = f.top_margin - 6 - 15 * level
        out.append(
            f'<g><title>{escape(band.tooltip)}</title><rect x="{x0:.1f}" y="{f.top_margin}" '
            f'width="{x1 - x0:.1f}" height="{f.plot_h}" fill="{fill}" opacity="0.5"/><line x1="{x0:.1f}" '
            f'y1="{label_y + 3}" x2="{x0:.1f}" y2="{f.top_margin + f.plot_h}" stroke="#555" '
            f'stroke-dasharray="4 3"/><text x="{x0:.1f}" y="{label_y}" text-anchor="middle" font-size="10" '
            f'fill="#222">e{band.epoch}</text></g>'
        )
    return out


def _svg_lanes(f: _SvgFrame) -> list[str]:
    out = []
    for n, (name, rows) in enumerate(f.picture.lanes):
        y0 = f.top_margin + f.tops[name] * f.row_px
        if n:
            out.append(
                f'<line x1="10" y1="{y0 - LANE_GAP * f.row_px / 2:.1f}" x2="{f.width - f.right}" '
                f'y2="{y0 - LANE_GAP * f.row_px / 2:.1f}" stroke="#bbb"/>'
            )
        label_y = y0 + rows * f.row_px / 2 + 4
        out.append(
            f'<text x="{f.left - 8}" y="{label_y:.1f}" text-anchor="end" font-weight="bold">{escape(name)}</text>'
        )
        if name in f.picture.instances:
            out.append(
                f'<text x="{f.left - 8}" y="{label_y + 13:.1f}" text-anchor="end" fill="#555" '
                f'font-size="10">instance {escape(f.picture.instances[name])}</text>'
            )
    return out


def _svg_bars(f: _SvgFrame) -> list[str]:
    """Who held what when: a bar per holding, and the time a static member was away."""
    picture, row_px, out = f.picture, f.row_px, []
    for bar, place in zip(picture.bars, label_places(picture, f.scale, 6.0)):
        colour = UNOWNED_COLOUR if bar.lane == UNOWNED else picture.colours[bar.connector]
        if bar.is_connector and bar.lane != UNOWNED:
            colour = shade(colour, 0.65)
        fill = "url(#unowned)" if bar.lane == UNOWNED else colour
        stroke = 'stroke="white" stroke-width="0.5"'
        if bar.lane == WAITING:  # the connector's colour, pale, dashed at its edge: assigned to nobody
            fill, stroke = shade(colour, 1.7), f'stroke="{colour}" stroke-width="1.2" stroke-dasharray="4 2"'
            colour = fill
        y = f.top_margin + (f.tops[bar.lane] + bar.row * ROW) * row_px
        x0 = f.x(bar.start_ms)
        w = max(f.x(bar.end_ms) - x0, 1.5)
        label = escape(bar.label + (" ▸" if bar.still_held else ""))
        text = ""
        if place == "in":
            ink = "black" if bar.lane == UNOWNED or light(colour) else "white"
            text = f'<text x="{x0 + 4:.1f}" y="{y + row_px * 0.62:.1f}" fill="{ink}" font-size="10">{label}</text>'
        elif place == "out":
            text = f'<text x="{x0 + w + 3:.1f}" y="{y + row_px * 0.62:.1f}" fill="#333" font-size="10">{label}</text>'
        out.append(
            f'<g><title>{escape(bar.tooltip)}</title><rect x="{x0:.1f}" y="{y + 1.5:.1f}" width="{w:.1f}" '
            f'height="{row_px - 3}" rx="2" fill="{fill}" {stroke}/>{text}</g>'
        )
    for a in picture.away:
        rows = dict(picture.lanes)[a.lane]
        x0 = f.x(a.start_ms)
        until = f"{format_time(a.end_ms)}: {a.ended}" if a.ended else format_time(a.end_ms)
        out.append(
            f"<g><title>{escape(a.lane)} left as a static member at {format_time(a.start_ms)}; the "
            f'coordinator kept its assignment until {escape(until)}</title><rect x="{x0:.1f}" '
            f'y="{f.top_margin + f.tops[a.lane] * row_px:.1f}" width="{max(f.x(a.end_ms) - x0, 1.5):.1f}" '
            f'height="{rows * row_px}" fill="url(#away)" stroke="#555" stroke-width="0.6"/></g>'
        )
    return out


def _svg_legend_entries(picture: Layout) -> list[tuple[str, str | None]]:
    """The legend: each entry's label and its swatch's fill (None: text alone)."""
    return [
        *picture.colours.items(),
        ("rebalance: epoch bump to convergence", "#d9d9d9"),
        *([(WAITING_LEGEND, "#f2f2f2")] if any(bar.lane == WAITING for bar in picture.bars) else []),
        ("unowned", "url(#unowned)"),
        *([("kept for a static member away", "url(#away)")] if picture.away else []),
        ("▸ still held at the end; darker: the connector itself", None),
    ]


def _svg_legend(f: _SvgFrame, lines: list[str], legend_rows: list[list[int]]) -> list[str]:
    entries = _svg_legend_entries(f.picture)
    out = []
    legend_y = f.top_margin + f.plot_h + 54
    for n, row in enumerate(legend_rows):  # rows that fit the width: nothing runs off the right edge
        lx = f.left
        y = legend_y + 20 * n
        for i in row:
            name, colour = entries[i]
            if colour is None:
                out.append(f'<text x="{lx}" y="{y}">{escape(name)}</text>')
            else:
                stroke = ' stroke="#555" stroke-dasharray="3 2"' if name == WAITING_LEGEND else ""
                out.append(
                    f'<rect x="{lx}" y="{y - 10}" width="12" height="12" fill="{colour}"{stroke}/>'
                    f'<text x="{lx + 16}" y="{y}">{escape(name)}</text>'
                )
            lx += 28 + 6.5 * len(name)
    if lines:
        top = legend_y + 20 * (len(legend_rows) - 1) + 28
        out.append(f'<text x="{f.left}" y="{top}" font-family="monospace" font-size="11" fill="#222">')
        for n, line in enumerate(["rebalances: epoch reached, start, duration, why", *lines]):
            out.append(f'<tspan x="{f.left}" dy="{0 if n == 0 else 14}" xml:space="preserve">{escape(line)}</tspan>')
        out.append("</text>")
    return out


def html_page(picture: Layout) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(picture.title)}'
        "</title><style>body{margin:16px;font-family:Helvetica,Arial,sans-serif}svg{max-width:100%;height:auto}"
        "p{color:#555;font-size:13px}</style></head><body>\n"
        + svg_element(picture)
        + "\n<p>One lane per worker; a bar per connector (darker) and task held; ▸: still held where the read "
        "ended. The waiting lane: work the target assigned to nobody while the group waited for a departed member "
        "within its scheduled rebalance delay; the unowned lane: other gaps between two holders. Grey bands: rebalances, from the group epoch bump to convergence (red: not converged). "
        "Hover over a bar or a band for its offsets, epochs, what moved and why.</p>\n</body></html>\n"
    )
