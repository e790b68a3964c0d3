"""The classic protocol's timers (seed 004): a member's session, the end of the join phase, the
deadline for SyncGroup; and the timers of a partition just loaded."""

from __future__ import annotations

from coordinator.core.classic.change import ClassicChange
from coordinator.core.classic.phases import complete_join, forget_pending, remove_members
from coordinator.core.config import CoordinatorConfig
from coordinator.core.protocol import (
    CLASSIC_JOIN,
    CLASSIC_SESSION,
    CLASSIC_SYNC,
    Result,
    Timer,
    timer_key,
)
from coordinator.core.state import CoordinatorState
from coordinator.core.states import ClassicGroupState


def on_timer(state: CoordinatorState, config: CoordinatorConfig, key: tuple[str, ...], now: int) -> Result[None]:
    group = state.classic_groups.get(key[1])
    if group is None:
        return Result(None)
    change = ClassicChange(group, now)
    kind = key[0]
    if kind == CLASSIC_SESSION:
        member = group.members.get(key[2])
        if member is None:
            if key[2] not in group.pending:
                return Result(None)
            forget_pending(change, [key[2]])  # handed an id, never joined with it
            return change.result(None)
        if not member.is_new and (
            (group.state == ClassicGroupState.PREPARING_REBALANCE and member.joined)
            or (group.state == ClassicGroupState.COMPLETING_REBALANCE and member.synced)
        ):
            return Result(None)  # it waits for our answer; its session starts again with it
        if member.is_new:
            remove_members(change, [member.member_id], "did not complete its join within the new member join timeout")
        else:
            remove_members(change, [member.member_id], "timed out: no heartbeat within its session")
    elif kind == CLASSIC_JOIN:
        if group.state != ClassicGroupState.PREPARING_REBALANCE:
            return Result(None)
        if group.join_deadline_ms is not None and group.join_deadline_ms > now:
            return Result(None, timers=[Timer(key, group.join_deadline_ms)])  # extended, or early
        complete_join(change)
    elif kind == CLASSIC_SYNC:
        if (
            group.state not in (ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE)
            or not group.pending_sync
        ):
            return Result(None)
        # Members that did not send SyncGroup within the rebalance timeout of the join's end (the
        # leader among them, if it did not assign) are removed, and the others join again.
        remove_members(change, sorted(group.pending_sync), "did not send SyncGroup within the rebalance timeout")
    else:
        return Result(None)
    return change.result(None)


def after_load(state: CoordinatorState, config: CoordinatorConfig, now: int) -> list[Timer]:
    """Timers of the classic groups of a partition just loaded: every member's session, and the
    end of the phase the group was in."""
    timers = []
    for group in state.classic_groups.values():
        g = group.group_id
        for member_id, member in group.members.items():
            timers.append(Timer(timer_key(CLASSIC_SESSION, g, member_id), now + member.session_timeout_ms))
        if group.state == ClassicGroupState.PREPARING_REBALANCE:
            timers.append(Timer(timer_key(CLASSIC_JOIN, g), now + group.rebalance_timeout_ms()))
        elif group.state == ClassicGroupState.COMPLETING_REBALANCE:
            timers.append(Timer(timer_key(CLASSIC_SYNC, g), now + group.rebalance_timeout_ms()))
    return timers
