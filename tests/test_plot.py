"""`replay timeline --plot`: the waiting lane and a footnote that stays inside the picture.

The waiting lane holds the work a target assigns to nobody while the group waits for a departed
member within its scheduled rebalance delay (issue 29 item 10: docs/replay.md promises it). Its bars
are checked against the coordinator's own state, replayed record by record: an item waits exactly
while the installed target's `Deferred` holds it. No broker: the logs are the state machine's own
(`tests/replay_scenarios.py`).
"""

from __future__ import annotations

import re

import pytest
from replay_scenarios import GROUP, T0, StampedDriver, on_call_story, replayed

from records import TargetAssignmentMetadataKey

from coordinator.core.driver import SimWorker
from coordinator.core.items import items_of
from replay import plot, plot_layout, plot_svg
from replay.history import History


@pytest.fixture(scope="module")
def story():  # noqa: ANN201
    return on_call_story()


def history_of(raw: list) -> History:
    h = History(GROUP)
    h.run(raw)
    return h


def deferred_stretches(log: list, stamps: list[int]) -> list[tuple[str, int, int | None]]:
    """(item, from, to) for each stretch in which the installed target deferred the item, from the
    coordinator's state after each record (to None: still deferred at the end of the log)."""
    state = replayed([])
    since: dict[str, int] = {}
    out = []
    for record, stamp in zip(log, stamps, strict=True):
        state.replay(record)
        meta = state.slots().get(TargetAssignmentMetadataKey(GROUP))
        now = {str(i) for i in items_of(meta.deferred)} if meta is not None else set()
        for item in now - since.keys():
            since[item] = stamp
        for item in set(since) - now:
            out.append((item, since.pop(item), stamp))
    out += [(item, start, None) for item, start in since.items()]
    return sorted(out, key=lambda x: (x[1], x[0]))


def lane_bars(picture: plot_layout.Layout, lane: str) -> list[tuple[str, int, int]]:
    return sorted(((b.label, b.start_ms, b.end_ms) for b in picture.bars if b.lane == lane), key=lambda x: (x[1], x[0]))


def test_work_waiting_out_the_delay_has_its_lane_with_the_deferred_items_and_times(story) -> None:  # noqa: ANN001
    h = history_of(story.raw())
    picture = plot_layout.layout(h, GROUP)
    lanes = [name for name, _ in picture.lanes]
    assert lanes == ["W1", "W2", "W3", "W4", plot_layout.WAITING, plot_layout.UNOWNED]

    expected = deferred_stretches(story.log, story.driver.stamps)
    assert lane_bars(picture, plot_layout.WAITING) == [(item, a, b) for item, a, b in expected]
    # The story's two waits: W2 crashed and its work waited out the whole delay (60 s) before it
    # moved; W3 came back within the delay and got its own work back.
    w2 = {str(i) for i in items_of(story.slots_at["scaled_out"][_target_member("W2")].assignment)}
    w3 = {str(i) for i in items_of(story.slots_at["w2_work_moved"][_target_member("W3")].assignment)}
    first = [x for x in expected if x[1] < story.times["w2_removed"]]
    second = [x for x in expected if x[1] > story.times["w2_work_moved"]]
    assert {x[0] for x in first} == w2 and {x[0] for x in second} == w3 and len(expected) == len(w2) + len(w3)
    assert {(b - a) for _, a, b in first} == {60_000}
    assert all(story.times["w3_removed"] - 15_000 < a < b < story.times["w3_back"] for _, a, b in second)
    tips = {b.label: b.tooltip for b in picture.bars if b.lane == plot_layout.WAITING and b.start_ms == first[0][1]}
    assert all(
        "waiting for W2 (fenced: no heartbeat within its session timeout) within the scheduled" in t
        and "gives it to W" in t
        for t in tips.values()
    )
    tips = [b.tooltip for b in picture.bars if b.lane == plot_layout.WAITING and b.start_ms == second[0][1]]
    assert all("gives it back to W3: it came back within the delay" in t for t in tips), tips

    # The unowned lane keeps only the rest of each gap: no unowned bar overlaps a wait of its item.
    for item, a, b in lane_bars(picture, plot_layout.UNOWNED):
        assert not any(i == item and a < y and x < b for i, x, y in expected), (item, a, b)


def _target_member(member: str):  # noqa: ANN202
    from records import TargetAssignmentMemberKey

    return TargetAssignmentMemberKey(GROUP, member)


def test_work_still_waiting_where_the_read_ends_reaches_the_end(story) -> None:  # noqa: ANN001
    raw = story.raw()[: story.marks["w2_removed"] + 1]
    picture = plot_layout.layout(history_of(raw), GROUP)
    waiting = [b for b in picture.bars if b.lane == plot_layout.WAITING]
    w2 = {str(i) for i in items_of(story.slots_at["scaled_out"][_target_member("W2")].assignment)}
    assert {b.label for b in waiting} == w2
    assert all(b.still_held and b.end_ms == picture.t1 for b in waiting)
    assert all("the end of the read: still waiting" in b.tooltip for b in waiting)


def test_a_history_without_waiting_has_no_waiting_lane(story) -> None:  # noqa: ANN001
    raw = story.raw()[: story.marks["scaled_out"] + 1]  # joins only: nobody departed
    picture = plot_layout.layout(history_of(raw), GROUP)
    assert plot_layout.WAITING not in [name for name, _ in picture.lanes]
    assert deferred_stretches(story.log[: len(raw)], story.driver.stamps[: len(raw)]) == []
    page = plot_svg.html_page(picture)
    assert f">{plot_layout.WAITING}</text>" not in page and plot_layout.WAITING_LEGEND not in page


def test_the_html_and_svg_draw_the_waiting_lane(story, tmp_path) -> None:  # noqa: ANN001
    h = history_of(story.raw())
    for name in ("story.html", "story.svg"):
        plot.write(str(tmp_path / name), h, GROUP)
        page = (tmp_path / name).read_text()
        assert f">{plot_layout.WAITING}</text>" in page and plot_layout.WAITING_LEGEND in page
        # A bar per wait, with its tooltip, dashed in its connector's colour.
        tips = re.findall(r"<title>([^<]*assigned to nobody[^<]*)</title><rect[^>]*stroke-dasharray", page)
        assert len(tips) == len(deferred_stretches(story.log, story.driver.stamps))


def long_causes_history() -> History:
    """Twenty workers with long names joining at once: the rebalance's why is a very long line."""
    d = StampedDriver()
    d.set_config(GROUP, session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=5_000)
    d.set_connectors(GROUP, {"orders-sink": 8})
    workers = [SimWorker(d, GROUP, f"worker-with-a-rather-long-member-id-{n}") for n in range(20)]
    for _ in range(8):
        d.advance(1_000)
        for w in workers:
            w.heartbeat()
    from replay_scenarios import raw_records

    h = History(GROUP)
    h.run(raw_records(d.log, d.stamps))
    assert h.first.timestamp_ms >= T0
    return h


def test_the_rebalance_footnote_and_the_legend_stay_inside_the_svg() -> None:
    h = long_causes_history()
    picture = plot_layout.layout(h, GROUP)
    assert max(len(line) for line in plot_layout.rebalance_lines(picture)) > 300  # would run off the edge unwrapped
    page = plot_svg.svg_element(picture)
    width = int(re.search(r'viewBox="0 0 (\d+) (\d+)"', page).group(1))
    height = int(re.search(r'viewBox="0 0 (\d+) (\d+)"', page).group(2))
    lines = re.findall(r'<tspan x="([\d.]+)" dy="\d+" xml:space="preserve">([^<]*)</tspan>', page)
    assert len(lines) > 3
    for x, text in lines:  # monospace 11 px: at most 0.61 em (6.7 px) a character
        assert float(x) + 6.7 * len(text.replace("&amp;", "&").replace("&gt;", ">")) <= width, text
    joined = " ".join(text.strip() for _, text in lines)
    assert "worker-with-a-rather-long-member-id-19 joined" in joined  # wrapped, not cut
    ys = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" font-family="monospace"', page)]
    assert ys and ys[0] + 14 * (len(lines) - 1) + 4 <= height  # the last baseline, and its descent


def test_the_rebalance_footnote_and_the_legend_stay_inside_the_png(story, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import matplotlib.pyplot as plt

    figures, outside = [], []
    close = plt.close

    def measured_close(fig) -> None:  # noqa: ANN001
        """Every text and legend's extent against the figure's, while the figure can still render."""
        renderer = fig.canvas.get_renderer()
        box = fig.bbox
        for artist in [*fig.texts, *fig.legends]:
            e = artist.get_window_extent(renderer)
            if not (box.x0 <= e.x0 and e.x1 <= box.x1 and box.y0 <= e.y0 and e.y1 <= box.y1):
                outside.append((artist, e, box))
        figures.append(fig)
        close(fig)

    monkeypatch.setattr(plt, "close", measured_close)
    for h in (long_causes_history(), history_of(story.raw())):
        path = tmp_path / "picture.png"
        plot.write(str(path), h, GROUP)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    long_one, waiting_one = figures
    assert outside == []
    footnote = next(t.get_text() for t in long_one.texts if t.get_text().startswith("rebalances:"))
    assert "worker-with-a-rather-long-member-id-19 joined" in " ".join(footnote.split())
    (ax,) = waiting_one.axes
    assert plot_layout.WAITING in [t.get_text() for t in ax.get_yticklabels()]
    labels = [t.get_text() for legend in waiting_one.legends for t in legend.get_texts()]
    assert plot_layout.WAITING_LEGEND in labels
    (ax,) = long_one.axes
    assert plot_layout.WAITING not in [t.get_text() for t in ax.get_yticklabels()]
