"""The classic group's phases (seed 004, `handlers` has the theory of operation): a join phase
started (`prepare_rebalance`) and completed (`complete_join`: a new generation, the parked JoinGroups
answered), and departures (`remove_members`, `forget_pending`), which start the next one or empty the
group. Shared by the handlers and the timers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from coordinator.core.classic.change import ClassicChange
from coordinator.core.classic.group import ClassicGroup, ClassicMember
from coordinator.core.protocol import (
    CLASSIC_JOIN,
    CLASSIC_SESSION,
    CLASSIC_SYNC,
    JOIN,
    ErrorCode,
    JoinGroupMember,
    JoinGroupResponse,
)
from coordinator.core.states import ClassicGroupState


def join_response(group: ClassicGroup, member_id: str) -> JoinGroupResponse:
    leader = group.leader == member_id
    members = (
        tuple(
            JoinGroupMember(m.member_id, m.instance_id, m.metadata(group.protocol))
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        )
        if leader
        else ()
    )
    return JoinGroupResponse(
        ErrorCode.NONE,
        None,
        group.generation,
        group.protocol_type,
        group.protocol,
        group.leader or "",
        False,
        member_id,
        members,
    )


def prepare_rebalance(change: ClassicChange) -> None:
    """Start a join phase. SyncGroups waiting for the leader are told to join again."""
    group = change.group
    if group.state == ClassicGroupState.COMPLETING_REBALANCE:
        for member in group.members.values():
            change.answer_waiting(
                member, ErrorCode.REBALANCE_IN_PROGRESS, "the group is rebalancing again: join again", sync_only=True
            )
    change.timer(CLASSIC_SYNC, None)
    members = {m: replace(v, synced=False) for m, v in group.members.items()}
    timeout = change.group.rebalance_timeout_ms()
    if group.state == ClassicGroupState.EMPTY:
        delay = change.initial_delay_ms
        deadline = change.now + min(delay, timeout)
        change.set_members(members, initial_round_started_ms=change.now if delay else None)
    else:
        deadline = change.now + timeout
        change.set_members(members, initial_round_started_ms=None)
    change.set_state(ClassicGroupState.PREPARING_REBALANCE, join_deadline_ms=deadline, pending_sync=frozenset())
    change.timer(CLASSIC_JOIN, deadline)


def extend_initial_round(change: ClassicChange) -> None:
    """A join during an empty group's first round waits for more, up to the rebalance timeout."""
    group = change.group
    started = group.initial_round_started_ms
    if started is None or group.join_deadline_ms is None:
        return
    deadline = min(change.now + change.initial_delay_ms, started + group.rebalance_timeout_ms())
    if deadline > group.join_deadline_ms:
        change.group = replace(group, join_deadline_ms=deadline)
        change.timer(CLASSIC_JOIN, deadline)


def maybe_complete_join(change: ClassicChange) -> None:
    """The join phase ends as soon as every member, and every id handed out, has joined, except in
    an empty group's first round, which waits out its delay for members not known yet."""
    group = change.group
    if (
        group.state == ClassicGroupState.PREPARING_REBALANCE
        and group.all_joined()
        and group.initial_round_started_ms is None
    ):
        complete_join(change)


def _successor(leader: str | None, members: Mapping[str, ClassicMember]) -> str | None:
    """The leader once members left (Kafka's ClassicGroup.remove): the same, or the first member
    left if it went. No leader stays none (a downgraded group's)."""
    if leader is None or leader in members:
        return leader
    return next(iter(members), None)


def complete_join(change: ClassicChange) -> None:
    """A new generation of whoever joined. Dynamic members that did not join are removed; static
    ones stay, with their metadata (Kafka's). If only static members that did not join are left,
    there is nobody to lead a generation: the phase waits another rebalance timeout (Kafka's)."""
    group = change.group
    change.timer(CLASSIC_JOIN, None)
    gone = [m for m, v in group.members.items() if not v.joined and v.instance_id is None]
    for member_id in gone:
        change.timer(CLASSIC_SESSION, None, member_id)
    kept = {m: v for m, v in group.members.items() if m not in gone}
    if kept and not any(v.joined for v in kept.values()):
        deadline = change.now + group.with_members(kept).rebalance_timeout_ms()
        change.set_members(
            kept, leader=_successor(group.leader, kept), join_deadline_ms=deadline, initial_round_started_ms=None
        )
        change.timer(CLASSIC_JOIN, deadline)
        change.persist = change.persist or bool(gone)
        return
    change.persist = True
    generation = group.generation + 1
    if not kept:
        change.timer(CLASSIC_SYNC, None)
        change.set_members(
            {},
            generation=generation,
            protocol=None,
            leader=None,
            join_deadline_ms=None,
            initial_round_started_ms=None,
            pending_sync=frozenset(),
        )
        change.set_state(ClassicGroupState.EMPTY)
        return
    if group.leader in kept and kept[group.leader].joined:
        leader = group.leader
    else:
        leader = next(m for m, v in kept.items() if v.joined)
    members = {m: replace(v, joined=False, synced=False, assignment=b"", is_new=False) for m, v in kept.items()}
    change.set_members(
        members,
        generation=generation,
        protocol=group.with_members(members).select_protocol(),
        leader=leader,
        join_deadline_ms=None,
        initial_round_started_ms=None,
        pending_sync=frozenset(members),
    )
    change.set_state(ClassicGroupState.COMPLETING_REBALANCE)
    for member_id, member in members.items():
        if kept[member_id].joined:
            change.deliver(JOIN, member_id, join_response(change.group, member_id))
        change.timer(CLASSIC_SESSION, change.now + member.session_timeout_ms, member_id)
    change.timer(CLASSIC_SYNC, change.now + change.group.rebalance_timeout_ms())


def forget_pending(change: ClassicChange, member_ids: Iterable[str]) -> None:
    """Ids handed out with MEMBER_ID_REQUIRED that will not join: the join phase stops waiting."""
    gone = frozenset(member_ids)
    change.group = replace(change.group, pending=change.group.pending - gone)
    for member_id in gone:
        change.timer(CLASSIC_SESSION, None, member_id)
    maybe_complete_join(change)


def remove_members(change: ClassicChange, member_ids: Iterable[str], why: str) -> None:
    """Members leave (or are removed): their waiting requests are answered, and the group
    rebalances, or becomes empty. Written, so that a failover does not bring them back."""
    group = change.group
    members = dict(group.members)
    removed = set()
    for member_id in member_ids:
        member = members.pop(member_id, None)
        if member is None:
            continue
        removed.add(member_id)
        change.timer(CLASSIC_SESSION, None, member_id)
        change.answer_waiting(member, ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} {why}")
    change.set_members(members, leader=_successor(group.leader, members), pending_sync=group.pending_sync - removed)
    change.persist = True
    if not members:
        # An empty generation (Kafka's): nobody left to wait for. As Kafka's, through
        # PreparingRebalance: a Stable group never becomes Empty directly.
        if group.state != ClassicGroupState.PREPARING_REBALANCE:
            change.set_state(ClassicGroupState.PREPARING_REBALANCE)
        complete_join(change)
        return
    if group.state != ClassicGroupState.PREPARING_REBALANCE:
        prepare_rebalance(change)
    maybe_complete_join(change)


def rebalance(change: ClassicChange) -> None:
    """The group's work changed (its connectors): every member joins again, the leader assigns.
    Written: nobody else would ask for this rebalance again after a failover."""
    if change.group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
        prepare_rebalance(change)
        change.persist = True
