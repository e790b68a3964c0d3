"""Timers: what each kind does when it fires, and which to arm after a partition loads.

The runtime owns the clocks and only tells the coordinator which key fired, with `now`. A timer's
condition is checked again when it fires: the state may have moved on since it was armed. Timers
are never persisted (DESIGN §6): after a load, `after_load` arms them again from the state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from coordinator.core.config import CoordinatorConfig
from coordinator.core.group_change import GroupChange
from coordinator.core.protocol import (
    ASSIGNMENT,
    ASSIGNMENT_RETRY,
    INITIAL_ASSIGNMENT,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    REBALANCE,
    SCHEDULED_REBALANCE,
    SERVER_ASSIGNMENT,
    SESSION,
    LeaveReason,
    Result,
    Timer,
    TimerKey,
    timer_key,
)
from coordinator.core.selection import CLIENT, group_assignor
from coordinator.core.state import CoordinatorState
from coordinator.core.states import MemberState
from coordinator.core.target_assignment import assign_if_needed, choose, remove_member


def on_timer(state: CoordinatorState, config: CoordinatorConfig, key: TimerKey, now: int) -> Result[None]:
    group = state.groups.get(key[1])
    if group is None:
        return Result(None)
    fired = FIRED.get(key[0])
    if fired is None:
        return Result(None)  # not a kind this code arms (a timer of a newer version, say)
    change = GroupChange(group)
    early = fired(change, config, key, now)
    if early is not None:
        return early
    return change.result(None)


# Each returns a Result of its own when it changes nothing (or re-arms itself), else None with
# its changes in `change`.
Fired = Callable[[GroupChange, CoordinatorConfig, TimerKey, int], Result[None] | None]


def _member_expired(change: GroupChange, config: CoordinatorConfig, key: TimerKey, now: int) -> Result[None] | None:
    """SESSION (no heartbeat in time) or REBALANCE (did not revoke in time): the member is fenced."""
    group, member_id = change.group, key[2]
    if member_id not in group.members:
        return Result(None)
    if key[0] == REBALANCE and group.current(member_id).state != MemberState.UNREVOKED:
        return Result(None)
    if key[0] == REBALANCE:
        reason = LeaveReason.REBALANCE_TIMEOUT
    elif group.current(member_id).member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        reason = LeaveReason.STATIC_LEAVE  # it said it was going (-2) and did not come back in time
    else:
        reason = LeaveReason.SESSION_TIMEOUT
    remove_member(change, member_id, now, reason)
    assign_if_needed(change, config, now)
    return None


def _assign_now(change: GroupChange, config: CoordinatorConfig, key: TimerKey, now: int) -> None:
    """SERVER_ASSIGNMENT (the server-side assignor's interval has passed) and INITIAL_ASSIGNMENT (a
    new group has waited for more members long enough): the target, if it is still needed."""
    assign_if_needed(change, config, now)


def _assignment_deadline(
    change: GroupChange, config: CoordinatorConfig, key: TimerKey, now: int
) -> Result[None] | None:
    """The chosen member did not install in time (or, after a failover, nobody is chosen yet)."""
    group = change.group
    computation = group.computation
    if computation is None:  # after a failover: choose who computes
        assign_if_needed(change, config, now)
        return None
    if group.group_epoch <= group.assignment_epoch:
        return Result(None)
    if computation.deadline_ms > now:
        # Early: the runtime's timers run on a monotonic clock and `now` is wall time, which
        # may have stepped back. Dropping the timer would leave the job with this member forever.
        return Result(None, timers=[Timer(key, computation.deadline_ms)])
    chosen = group_assignor(group.members.values(), config.default_server_assignor)
    if chosen is None or chosen.kind != CLIENT:
        change.computation = None
    else:  # another member gets the job
        choose(change, config, chosen.name, computation.excluded | {computation.member_id}, None, now)
    return None


def _scheduled_rebalance(
    change: GroupChange, config: CoordinatorConfig, key: TimerKey, now: int
) -> Result[None] | None:
    """Deferred work is given out: a new group epoch, so a new target."""
    meta = change.group.target_metadata
    if meta is None or meta.scheduled_rebalance_at_ms is None:
        return Result(None)
    if meta.scheduled_rebalance_at_ms > now:  # early (see above): deferred work must not wait forever
        return Result(None, timers=[Timer(key, meta.scheduled_rebalance_at_ms)])
    change.target_metadata = replace(meta, scheduled_rebalance_at_ms=None)
    change.bump()
    assign_if_needed(change, config, now)
    return None


def _assignment_retry(change: GroupChange, config: CoordinatorConfig, key: TimerKey, now: int) -> Result[None] | None:
    """After an assignor error: ask again, with a new group epoch."""
    group = change.group
    meta = group.target_metadata
    if meta is None or not meta.error or group.group_epoch != group.assignment_epoch:
        return Result(None)
    change.bump()
    assign_if_needed(change, config, now)
    return None


FIRED: dict[str, Fired] = {
    SESSION: _member_expired,
    REBALANCE: _member_expired,
    SERVER_ASSIGNMENT: _assign_now,
    INITIAL_ASSIGNMENT: _assign_now,
    ASSIGNMENT: _assignment_deadline,
    SCHEDULED_REBALANCE: _scheduled_rebalance,
    ASSIGNMENT_RETRY: _assignment_retry,
}


def after_load(state: CoordinatorState, config: CoordinatorConfig, now: int) -> list[Timer]:
    """The timers to arm after loading a partition."""
    timers = []
    for group in state.groups.values():
        g = group.group_id
        settings = config.for_group(group.config)
        for member_id, member in group.members.items():
            timers.append(Timer(timer_key(SESSION, g, member_id), now + settings.member_session_timeout_ms(member)))
            if group.current(member_id).state == MemberState.UNREVOKED:
                timers.append(
                    Timer(timer_key(REBALANCE, g, member_id), now + settings.member_rebalance_timeout_ms(member))
                )
        meta = group.target_metadata
        if meta is not None and meta.scheduled_rebalance_at_ms is not None:
            timers.append(Timer(timer_key(SCHEDULED_REBALANCE, g), meta.scheduled_rebalance_at_ms))
        if meta is not None and meta.error and group.group_epoch == group.assignment_epoch:
            timers.append(Timer(timer_key(ASSIGNMENT_RETRY, g), now + config.assignor_error_backoff_ms))
        if group.members and group.group_epoch > group.assignment_epoch:
            timers.append(Timer(timer_key(ASSIGNMENT, g), now))  # compute, or choose who computes
    return timers
