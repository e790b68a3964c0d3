"""The side-by-side benchmark's figures (bench/vs_connect/timeline.py), from timelines written by hand:
both systems are judged by this code, so what it counts must be right."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.vs_connect.timeline import DOWN, REBALANCE, START, STOP, Timeline  # noqa: E402

TASKS = ["A-0", "A-1", "B-0"]


def stable(timeline: Timeline) -> Timeline:
    """w1 runs A-0 and A-1, w2 runs B-0, from t=0."""
    timeline.add(0.0, START, "w1", ["A-0", "A-1"])
    timeline.add(0.0, START, "w2", ["B-0"])
    return timeline


def test_a_move_with_a_gap_counts_once_and_its_unowned_seconds() -> None:
    t = stable(Timeline())
    t.add(10.0, STOP, "w1", ["A-1"])
    t.add(12.5, START, "w3", ["A-1"])
    t.add(12.6, REBALANCE, "w3")
    t.add(11.0, REBALANCE, "w1")  # out of order: every figure sorts
    f = t.figures(TASKS, 9.0, 13.0)
    assert f["moved"] == 1
    assert f["unowned_task_s"] == pytest.approx(2.5)
    assert f["recovered_s"] == pytest.approx(3.5)  # from 9 until A-1 ran again at 12.5
    assert f["rebalances_max"] == 1 and f["rebalances_total"] == 2
    assert f["double_owned_s"] == 0
    assert t.covered(TASKS) and t.owners()["A-1"] == {"w3"}
    assert t.last_change() == 12.5 and t.last_event() == 12.6


def test_a_return_to_the_same_worker_is_no_move_but_its_gap_counts() -> None:
    t = stable(Timeline())
    t.add(5.0, STOP, "w2", ["B-0"])
    t.add(6.0, DOWN, "w2")
    t.add(7.0, START, "w2", ["B-0"])
    f = t.figures(TASKS, 4.0, 8.0)
    assert f["moved"] == 0 and f["unowned_task_s"] == pytest.approx(2.0)
    t.add(7.3, REBALANCE, "w2")  # the heartbeat after the last change: seen, if the window reaches it
    assert t.figures(TASKS, 4.0, 8.0)["rebalances_total"] == 1
    assert t.figures(TASKS, 4.0, 7.0)["rebalances_total"] == 0
    assert t.figures(TASKS, 4.0, 7.0, seen=7.5)["rebalances_total"] == 1


def test_a_killed_worker_stops_everything_it_ran() -> None:
    t = stable(Timeline())
    t.add(3.0, DOWN, "w1")  # its status still said RUNNING: the process is gone all the same
    assert not t.covered(TASKS)
    assert t.owners(2.9)["A-0"] == {"w1"} and "A-0" not in t.owners()
    t.add(20.0, START, "w2", ["A-0", "A-1"])
    f = t.figures(TASKS, 3.0, 20.0)
    assert f["moved"] == 2 and f["unowned_task_s"] == pytest.approx(34.0) and f["recovered_s"] == pytest.approx(17.0)


def test_two_owners_at_once_are_seen() -> None:
    t = stable(Timeline())
    t.add(4.0, START, "w2", ["A-0"])  # w1 never stopped it
    t.add(5.5, STOP, "w1", ["A-0"])
    f = t.figures(TASKS, 3.0, 6.0)
    assert f["double_owned_s"] == pytest.approx(1.5)
    assert t.double_owned_s(10.0) == pytest.approx(1.5)
    assert not t.covered(TASKS, at=5.0) and t.covered(TASKS, at=6.0)


def test_a_storm_counts_tasks_started_on_two_workers() -> None:
    t = Timeline()
    t.add(1.0, START, "w1", TASKS)
    t.add(2.0, STOP, "w1", ["B-0"])
    t.add(2.2, START, "w2", ["B-0"])
    f = t.figures(TASKS, 0.0, 3.0)
    assert f["moved"] == 1  # started once, B-0 twice
    assert f["unowned_task_s"] == pytest.approx(3 * 1.0 + 0.2)
    assert f["recovered_s"] == pytest.approx(2.2)


def test_the_events_round_trip_as_json() -> None:
    t = stable(Timeline())
    t.add(1.0, REBALANCE, "w1")
    assert t.to_json()[0] == {"t": 0.0, "kind": START, "worker": "w1", "task": "A-0"}
    assert {"t": 1.0, "kind": REBALANCE, "worker": "w1"} in t.to_json()
