"""The timeline's picture as a PNG, drawn with matplotlib (`coordinator replay timeline --plot FILE.png`).

matplotlib is the optional extra `plot` (pyproject.toml): the server image does not install it,
and this module imports it only when a PNG is drawn.
"""

from __future__ import annotations

from coordinator.errors import CliError
from coordinator.tools import extras
from replay.errors import ReplayError
from replay.plot_layout import (
    LANE_GAP,
    ROW,
    UNOWNED,
    UNOWNED_COLOUR,
    WAITING,
    WAITING_LEGEND,
    Bar,
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
from replay.positions import format_clock

_WIDTH_IN = 15.0
_DPI = 110
_LEFT_IN, _RIGHT_IN = 1.0, 0.3
_ROW_IN = 0.2
_LIST_LINE_IN = 0.17
_LEGEND_ROW_IN = 0.25
_LEGEND_CHAR_IN = 0.065  # 8 pt sans serif, a generous average character


def require_matplotlib() -> None:
    """matplotlib, the `plot` extra, installed on first use (`coordinator.tools.extras`, one line on
    stderr), or ReplayError in one line where it cannot be: checked before the log is read, so that it
    happens at once rather than after a long replay. An .html or .svg plot needs nothing."""
    try:
        extras.ensure("plot", ("matplotlib",), "a .png plot")
    except CliError as e:
        raise ReplayError(str(e)) from None


def png(picture: Layout, path: str) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    tops = lane_tops(picture)
    height = plot_height(picture)
    t0, t1 = picture.t0, picture.t1
    span_s = (t1 - t0) / 1000
    x_max = span_s * 1.01  # room for the bars that reach the end of the read
    widest = max((len(line) for name, _ in picture.lanes for line in picture.lane_label(name).splitlines()), default=8)
    left_in = max(_LEFT_IN, 0.3 + 0.08 * widest)  # 9 pt bold is about 0.08 in a character
    plot_w_in = _WIDTH_IN - left_in - _RIGHT_IN
    px_per_s = plot_w_in * _DPI / x_max
    levels = label_levels([(b.start_ms - t0) / 1000 * px_per_s for b in picture.bands], 42)
    header_in = 0.45 + 0.2 * (max(levels, default=0) + 1)
    plot_in = _ROW_IN * height + 0.1
    # Monospace 7.5 pt is 0.6 em a character: the list wraps inside the figure's right edge.
    lines = wrap_lines(rebalance_lines(picture), int((_WIDTH_IN - left_in - 0.15) / (7.5 * 0.6 / 72)))
    legend_rows = legend_in_rows(
        [label for label, _ in _png_legend_entries(picture)], _WIDTH_IN - left_in - 0.15, _LEGEND_CHAR_IN, 0.45
    )
    legend_in = _LEGEND_ROW_IN * len(legend_rows)
    footer_in = 0.55 + legend_in + 0.1 + (0.25 + _LIST_LINE_IN * len(lines) if lines else 0)
    fig_h = header_in + plot_in + footer_in
    fig = plt.figure(figsize=(_WIDTH_IN, fig_h), dpi=_DPI)
    ax = fig.add_axes((left_in / _WIDTH_IN, footer_in / fig_h, plot_w_in / _WIDTH_IN, plot_in / fig_h))
    ax.set_xlim(0, x_max)
    ax.set_ylim(height + 0.05, -0.05)
    _png_bands(ax, picture, levels, px_per_s)
    _png_bars(ax, picture, tops, px_per_s)
    _png_axes(ax, picture, tops)
    fig.text(0.01, 1 - 0.3 / fig_h, picture.title, fontsize=11, fontweight="bold", va="center")
    _png_legend(fig, picture, lines, legend_rows, left_in, footer_in, fig_h)
    fig.savefig(path)
    plt.close(fig)


def _png_bands(ax, picture: Layout, levels: list[int], px_per_s: float) -> None:  # noqa: ANN001 - matplotlib Axes
    """The rebalances: a shaded band from epoch bump to convergence, labelled with the epoch."""
    t0 = picture.t0
    for band, level in zip(picture.bands, levels):
        x0, x1 = (band.start_ms - t0) / 1000, (band.end_ms - t0) / 1000
        ax.axvspan(
            x0, max(x1, x0 + 2 / px_per_s), color="#d9d9d9" if band.converged else "#f4c7c3", alpha=0.5, lw=0, zorder=0
        )
        ax.axvline(x0, color="#666666", lw=0.7, ls="--", zorder=1)
        ax.annotate(
            f"e{band.epoch}",
            (x0, -0.05),
            xytext=(0, 4 + 14 * level),
            textcoords="offset points",
            fontsize=8,
            ha="center",
            va="bottom",
            color="#222222",
            annotation_clip=False,
            arrowprops={"arrowstyle": "-", "color": "#999999", "lw": 0.5} if level else None,
        )


def _png_bars(ax, picture: Layout, tops: dict[str, float], px_per_s: float) -> None:  # noqa: ANN001 - Axes
    """Who held what when: a bar per holding, lanes apart, and the time a static member was away."""
    t0 = picture.t0
    for name, _rows in picture.lanes[1:]:
        ax.axhline(tops[name] - LANE_GAP / 2, color="#bbbbbb", lw=0.6, zorder=1)
    places = label_places(picture, px_per_s / 1000, 5.6)
    for bar, place in zip(picture.bars, places):
        colour = UNOWNED_COLOUR if bar.lane == UNOWNED else picture.colours[bar.connector]
        if bar.is_connector and bar.lane != UNOWNED:
            colour = shade(colour, 0.65)
        y = tops[bar.lane] + bar.row * ROW
        x0 = (bar.start_ms - t0) / 1000
        width = max((bar.end_ms - bar.start_ms) / 1000, 1.5 / px_per_s)
        unowned = bar.lane == UNOWNED
        waits = bar.lane == WAITING
        if waits:  # the connector's colour, pale, dashed at its edge: assigned to nobody
            ax.barh(
                y + 0.5,
                width,
                left=x0,
                height=0.8,
                color=shade(colour, 1.7),
                edgecolor=colour,
                linewidth=0.9,
                linestyle="--",
                hatch="..",
                zorder=2,
            )
            colour = shade(colour, 1.7)
        else:
            ax.barh(
                y + 0.5,
                width,
                left=x0,
                height=0.8,
                color="#e4e4e4" if unowned else colour,
                edgecolor=UNOWNED_COLOUR if unowned else "white",
                linewidth=0 if unowned else 0.5,
                hatch="/////" if unowned else None,
                zorder=2,
            )
        _png_label(ax, bar, place, colour, x0, width, y, px_per_s)
    _png_away(ax, picture, tops, px_per_s)


def _png_label(
    ax, bar: Bar, place: str | None, colour: str, x0: float, width: float, y: float, px_per_s: float
) -> None:  # noqa: ANN001 - Axes
    """A bar's label: inside the bar, or just after it, as `label_places` said."""
    label = bar.label + (" ▸" if bar.still_held else "")
    unowned = bar.lane == UNOWNED
    if place == "in":
        ax.text(
            x0 + 4 / px_per_s,
            y + 0.52,
            label,
            fontsize=7.5,
            va="center",
            ha="left",
            zorder=3,
            color="black" if unowned or light(colour) else "white",
            clip_on=True,
            bbox={"facecolor": "#e4e4e4", "edgecolor": "none", "pad": 0.5} if unowned else None,
        )
    elif place == "out":
        ax.text(
            x0 + width + 3 / px_per_s,
            y + 0.52,
            label,
            fontsize=7.5,
            va="center",
            ha="left",
            zorder=3,
            color="#333333",
            clip_on=True,
        )


def _png_away(ax, picture: Layout, tops: dict[str, float], px_per_s: float) -> None:  # noqa: ANN001 - Axes
    """The time a static member was away, over its lane."""
    from matplotlib.patches import Rectangle  # loaded by png already

    t0 = picture.t0
    for a in picture.away:
        rows = dict(picture.lanes)[a.lane]
        ax.add_patch(
            Rectangle(
                ((a.start_ms - t0) / 1000, tops[a.lane]),
                max((a.end_ms - a.start_ms) / 1000, 1.5 / px_per_s),
                rows * ROW,
                facecolor="white",
                alpha=0.55,
                edgecolor="#555555",
                hatch="..",
                lw=0.6,
                zorder=4,
            )
        )


def _png_axes(ax, picture: Layout, tops: dict[str, float]) -> None:  # noqa: ANN001 - matplotlib Axes
    t0, t1 = picture.t0, picture.t1
    ax.set_yticks([tops[name] + rows * ROW / 2 for name, rows in picture.lanes])
    ax.set_yticklabels([picture.lane_label(name) for name, _ in picture.lanes], fontsize=9, fontweight="bold")
    ax.tick_params(axis="y", length=0)
    ticks = time_ticks(t0, t1)
    ax.set_xticks([(t - t0) / 1000 for t in ticks])
    ax.set_xticklabels([format_clock(t) for t in ticks], fontsize=8)
    ax.set_xlabel("time (UTC)", fontsize=9, labelpad=2)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.grid(axis="x", color="#eeeeee", lw=0.6, zorder=0)
    ax.set_axisbelow(True)


def _png_legend_entries(picture: Layout) -> list[tuple[str, dict]]:
    """The legend: each entry's label and its patch's settings."""
    return [
        *((name, {"color": c}) for name, c in picture.colours.items()),
        ("rebalance: epoch bump to convergence", {"facecolor": "#d9d9d9"}),
        *(
            [(WAITING_LEGEND, {"facecolor": "#f2f2f2", "edgecolor": "#555555", "linestyle": "--", "hatch": ".."})]
            if any(bar.lane == WAITING for bar in picture.bars)
            else []
        ),
        ("unowned", {"facecolor": "#e4e4e4", "edgecolor": UNOWNED_COLOUR, "hatch": "/////"}),
        *(
            [("kept for a static member away", {"facecolor": "white", "edgecolor": "#555555", "hatch": ".."})]
            if picture.away
            else []
        ),
        ("▸ still held at the end; darker: the connector itself", {"color": "white"}),
    ]


def _png_legend(
    fig,  # noqa: ANN001 - Figure
    picture: Layout,
    lines: list[str],
    legend_rows: list[list[int]],
    left_in: float,
    footer_in: float,
    fig_h: float,
) -> None:
    from matplotlib.patches import Patch  # loaded by png already

    entries = _png_legend_entries(picture)
    for n, row in enumerate(legend_rows):  # one legend per row, so that none runs off the right edge
        fig.legend(
            handles=[Patch(label=entries[i][0], **entries[i][1]) for i in row],
            loc="upper left",
            bbox_to_anchor=(left_in / _WIDTH_IN, (footer_in - 0.5 - _LEGEND_ROW_IN * n) / fig_h),
            ncol=len(row),
            fontsize=8,
            frameon=False,
            handlelength=1.2,
            columnspacing=1.2,
            borderaxespad=0,
        )
    if lines:
        fig.text(
            left_in / _WIDTH_IN,
            (footer_in - 0.7 - _LEGEND_ROW_IN * len(legend_rows)) / fig_h,
            "rebalances: epoch reached, start, duration, why\n" + "\n".join(lines),
            fontsize=7.5,
            family="monospace",
            va="top",
            ha="left",
            color="#222222",
        )
