"""The initial assignment delay (issue 16): an empty group that gets members waits for more before
its first target, so a join storm is assigned once and nothing moves afterwards. The state machine
alone, client-side and server-side, against the same storm without the delay."""

from __future__ import annotations

import pytest

from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.protocol import ErrorCode

WORKERS = 10
JOIN_EVERY_MS = 200  # a storm: ten workers within two seconds


def _storm(delay_ms: int, server_side: bool) -> tuple[int, Driver, list[SimWorker]]:
    """Ten workers join one by one, everyone heartbeating as they come; returns how many times an
    item changed owner after it first had one (moves), and the converged group."""
    driver = Driver(
        CoordinatorConfig(
            initial_assignment_delay_ms=delay_ms, server_assignment_interval_ms=0, session_timeout_ms=60_000
        )
    )
    driver.set_connectors("g", {"A": 20, "B": 10})
    kwargs = {"assignor": None, "server_assignor": "incremental_cooperative"} if server_side else {}
    workers: list[SimWorker] = []
    first_owner: dict = {}
    moves = 0

    def observe() -> None:
        nonlocal moves
        for w in workers:
            for item in w.owned:
                owner = first_owner.setdefault(item, w.member_id)
                if owner != w.member_id:
                    moves += 1
                    first_owner[item] = w.member_id

    for i in range(WORKERS):
        workers.append(SimWorker(driver, "g", f"w{i:02d}", rebalance_timeout_ms=60_000, **kwargs))
        for w in workers:
            w.heartbeat()
        observe()
        driver.advance(JOIN_EVERY_MS)
    for _ in range(100):
        driver.advance(250)
        for w in workers:
            w.heartbeat()
        observe()
    converge(workers, advance_ms=250)
    observe()
    return moves, driver, workers


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_a_join_storm_is_assigned_once_and_nothing_moves(server_side: bool) -> None:
    moves, driver, workers = _storm(3_000, server_side)
    assert moves == 0
    group = driver.state.groups["g"]
    assert group.assignment_epoch == group.group_epoch
    owned = [i for w in workers for i in w.owned]
    assert len(owned) == len(set(owned)) == 32 and all(w.owned for w in workers)


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_without_the_delay_the_same_storm_moves_work(server_side: bool) -> None:
    """The control: the early joiners are given everything, then it moves to the later ones."""
    moves, _, _ = _storm(0, server_side)
    assert moves > 0


def test_no_target_while_the_group_waits_and_each_join_extends_the_wait_up_to_a_bound() -> None:
    driver = Driver(CoordinatorConfig(initial_assignment_delay_ms=1_000, server_assignment_interval_ms=0))
    driver.set_connectors("g", {"A": 2})
    first = SimWorker(
        driver, "g", "w0", assignor=None, server_assignor="incremental_cooperative", rebalance_timeout_ms=2_500
    )
    first.heartbeat()
    first.heartbeat()
    assert not first.owned
    assert driver.state.groups["g"].assignment_epoch == 0 and driver.timers[("initial-assignment", "g")] == 1_000
    driver.advance(800)
    second = SimWorker(
        driver, "g", "w1", assignor=None, server_assignor="incremental_cooperative", rebalance_timeout_ms=2_500
    )
    second.heartbeat()
    assert driver.timers[("initial-assignment", "g")] == 1_800  # a join extends the wait ...
    for at in (1_600, 2_400):
        driver.advance(at - driver.now)
        SimWorker(
            driver, "g", f"w{at}", assignor=None, server_assignor="incremental_cooperative", rebalance_timeout_ms=2_500
        ).heartbeat()
    assert driver.timers[("initial-assignment", "g")] == 2_500  # ... up to a rebalance timeout after the first join
    assert driver.state.groups["g"].assignment_epoch == 0
    driver.advance(2_500 - driver.now)
    group = driver.state.groups["g"]
    assert group.assignment_epoch == group.group_epoch and group.initial_assignment_window is None


def test_the_delay_is_a_group_setting_persisted_like_the_others() -> None:
    driver = Driver(CoordinatorConfig(initial_assignment_delay_ms=3_000))
    assert driver.set_config("g", initial_assignment_delay_ms=0).error_code == ErrorCode.NONE
    assert driver.state.groups["g"].config.initial_assignment_delay_ms == 0
    assert driver.coordinator.describe_group("g").initial_assignment_delay_ms == 0
    assert driver.set_config("g", initial_assignment_delay_ms=-1).error_code == ErrorCode.INVALID_REQUEST
    driver.set_connectors("g", {"A": 1})
    w = SimWorker(driver, "g", "w0", assignor=None, server_assignor="incremental_cooperative")
    w.heartbeat()
    w.heartbeat()
    assert w.owned, "a group configured without the delay is assigned at once"
