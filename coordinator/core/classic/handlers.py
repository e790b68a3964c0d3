"""The classic protocol's handlers (seed 004): JoinGroup, SyncGroup, Heartbeat and LeaveGroup,
sans-I/O like the connect protocol's, in the manner of Kafka's classic group coordinator
(`GroupMetadataManager`'s classic group handlers, whose rules and order of checks these follow).

Theory of operation
-------------------
A rebalance has two phases. In the join phase (`PreparingRebalance`) every member sends JoinGroup
and waits: its request is *parked* (`Parked`), and answered when every known member, and every
member id handed out with MEMBER_ID_REQUIRED, has joined, or the longest rebalance timeout has
passed, whichever comes first; dynamic members that did not join by then are removed, static ones
are kept (Kafka's). Completing the phase starts a new generation, chooses the protocol every member
supports by vote and a leader, writes the generation (seed 004's "generation metadata is
persisted") and answers the parked JoinGroups, the leader's with every member's metadata. In the
sync phase (`CompletingRebalance`) the leader sends everyone's assignment in its SyncGroup; the
others' SyncGroups wait for it. The assignments are written ("sync metadata is persisted") and the
group is `Stable`. A member that has not sent SyncGroup within the rebalance timeout of the join's
end is removed, in Stable too. Members heartbeat meanwhile; REBALANCE_IN_PROGRESS tells them to
join again.

What starts a rebalance: a new member, a member that joins again with other metadata (or the
leader, which joins to assign again), a departure (LeaveGroup, session timeout, a member that did
not sync in time), and a change of the group's connectors, which the coordinator knows here, where
Connect's leader reads them from its config topic.

Every handler returns the group as it leaves it in a volatile `ClassicGroupUpdate`, with the type
2 record when the change must survive a failover: a completed join, the leader's sync, a departure,
a static member replaced. A join that only starts a round writes nothing: after a failover the
members' parked requests fail and they join again (seed 004, coordinator failures, case 1).

Checks come in Kafka's order: for SyncGroup and Heartbeat the member (FENCED_INSTANCE_ID for a
stale member id with its instance id, else UNKNOWN_MEMBER_ID), then the generation
(ILLEGAL_GENERATION), then the group's state (REBALANCE_IN_PROGRESS). One exception, for the
downgrade: a group the downgrade made has never handed its generation out, and its members carry
their connect member epochs; an older generation there is told to join again (`ClassicGroup.downgraded`).

The handlers are here; the pending change they build is `change.ClassicChange`, the phases they start
and complete (and departures) are in `phases`, the deadlines that end them in `timers`.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec

from coordinator.core.classic.change import ClassicChange
from coordinator.core.classic.group import (
    ClassicGroup,
    ClassicMember,
)
from coordinator.core.classic.phases import (
    extend_initial_round,
    forget_pending,
    join_response,
    maybe_complete_join,
    prepare_rebalance,
    remove_members,
)
from coordinator.core.config import CoordinatorConfig
from coordinator.core.protocol import (
    CLASSIC_SESSION,
    CLASSIC_SYNC,
    JOIN,
    SYNC,
    ClassicHeartbeatRequest,
    ErrorCode,
    ErrorResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    Parked,
    ProtocolError,
    RequestContext,
    Result,
    SyncGroupRequest,
    SyncGroupResponse,
    Timer,
    timer_key,
)
from coordinator.core.state import CoordinatorState
from coordinator.core.states import ClassicGroupState

# Kafka's group.max.session.timeout.ms default: a member may not ask for a longer session.
MAX_SESSION_TIMEOUT_MS = 1_800_000


# --- JoinGroup --------------------------------------------------------------------------------


def join_group(
    state: CoordinatorState, config: CoordinatorConfig, request: JoinGroupRequest, now: int, context: RequestContext
) -> Result:
    g = request.group_id
    connect = state.groups.get(g)  # a connect group with members is `classic_translation`'s
    # A new classic group continues from the group's epoch (its connectors and configuration may
    # have written some): a group's version never goes back, whatever protocol it speaks.
    group = state.classic_groups.get(g) or ClassicGroup(g, generation=connect.group_epoch if connect else 0)
    settings = config.for_group(connect.config if connect is not None else None)
    change = ClassicChange(group, now, settings.initial_assignment_delay_ms)
    member_id = request.member_id
    if not _accepts(group, member_id, config.classic_group_max_size):
        # Kafka's acceptJoiningMember: the member (or the id handed out) is dropped and told so.
        _drop(change, member_id)
        return change.result(
            JoinGroupResponse(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"group {g} has its maximum of {config.classic_group_max_size} members",
            )
        )
    if group.members and request.protocol_type != group.protocol_type:
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"group {g} has ProtocolType {group.protocol_type!r}, not {request.protocol_type!r}",
        )
    # A static member back under a new id replaces its old self: the others must share a protocol
    # with it, its old self need not (after a failover a member offers only the chosen protocol).
    replaced = group.member_with_instance(request.instance_id) if not member_id and request.instance_id else None
    others = group.with_members({m: v for m, v in group.members.items() if m not in (member_id, replaced)})
    if others.members and not {p.name for p in request.protocols} & others.candidate_protocols():
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"none of the protocols offered ({', '.join(p.name for p in request.protocols)}) is "
            f"supported by every member of group {g}",
        )
    if not member_id:
        holder = group.member_with_instance(request.instance_id) if request.instance_id is not None else None
        if holder is not None:
            return _static_return(change, config, request, context, holder)
        if not context.fresh_id:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, "no member id could be made for this JoinGroup")
        member_id = context.fresh_id
        if request.instance_id is None:
            # Kafka's KIP-394: a dynamic member first learns its id, then joins with it, so that a
            # join whose answer is lost never leaves an unknown member behind. The id is pending
            # until then: a join phase waits for it, for at most its session timeout.
            change.group = replace(group, pending=group.pending | {member_id})
            change.timer(CLASSIC_SESSION, now + request.session_timeout_ms, member_id)
            return change.result(
                JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, "join again with this member id", member_id=member_id)
            )
    elif not (member_id in group.pending and member_id not in group.members and request.instance_id is None):
        _validate_member(group, member_id, request.instance_id)
    return _join(change, config, request, context, member_id)


def check_join(r: JoinGroupRequest, config: CoordinatorConfig) -> None:
    """What Kafka checks of a JoinGroup before it looks at the group (a classic group's, or a
    connect group's classic member alike)."""
    if not r.group_id:
        raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "GroupId must be non-empty")
    if r.instance_id is not None and not r.instance_id:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "GroupInstanceId, if provided, must be non-empty")
    low = config.classic_min_session_timeout_ms
    if not low <= r.session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
        raise ProtocolError(
            ErrorCode.INVALID_SESSION_TIMEOUT, f"SessionTimeoutMs must be within [{low}, {MAX_SESSION_TIMEOUT_MS}]"
        )
    if not r.protocol_type or not r.protocols:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "ProtocolType and Protocols must be non-empty")
    names = [p.name for p in r.protocols]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "Protocols must have distinct non-empty names")
    if r.rebalance_timeout_ms != -1 and r.rebalance_timeout_ms < config.min_timeout_ms:
        raise ProtocolError(
            ErrorCode.INVALID_REQUEST,
            f"RebalanceTimeoutMs must be -1 (the session timeout) or at least {config.min_timeout_ms}",
        )


def _accepts(group: ClassicGroup, member_id: str, max_size: int) -> bool:
    """Kafka's acceptJoiningMember: an empty group takes anyone; while members join, a member that
    has joined, else as long as fewer than `max_size` have; otherwise a member, else as long as the
    group has fewer than `max_size`."""
    if group.state == ClassicGroupState.EMPTY:
        return True
    member = group.members.get(member_id) if member_id else None
    if group.state == ClassicGroupState.PREPARING_REBALANCE:
        return (member is not None and member.joined) or sum(m.joined for m in group.members.values()) < max_size
    return member is not None or len(group.members) < max_size


def _drop(change: ClassicChange, member_id: str) -> None:
    """A member or pending member id refused by the group's maximum size leaves the group."""
    if member_id in change.group.members:
        remove_members(change, [member_id], "was refused: the group has its maximum size")
    elif member_id in change.group.pending:
        forget_pending(change, [member_id])


def _validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> None:
    """Kafka's ClassicGroup.validateMember: an instance id must be held by this very member id
    (FENCED_INSTANCE_ID if another holds it: this one is a zombie), and the member must exist."""
    if instance_id is not None:
        holder = group.member_with_instance(instance_id)
        if holder is None:
            raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group.group_id} has no instance {instance_id}")
        if holder != member_id:
            raise ProtocolError(
                ErrorCode.FENCED_INSTANCE_ID, f"instance {instance_id} is member {holder} now, not {member_id}"
            )
    if member_id not in group.members:
        raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group.group_id} has no member {member_id}")


def _member(old: ClassicMember | None, r: JoinGroupRequest, context: RequestContext, member_id: str) -> ClassicMember:
    return ClassicMember(
        member_id=member_id,
        instance_id=r.instance_id if r.instance_id is not None else (old.instance_id if old is not None else None),
        client_id=context.client_id or (old.client_id if old else ""),
        client_host=context.client_host or (old.client_host if old else ""),
        rebalance_timeout_ms=r.session_timeout_ms if r.rebalance_timeout_ms == -1 else r.rebalance_timeout_ms,
        session_timeout_ms=r.session_timeout_ms,
        protocols=r.protocols,
        assignment=old.assignment if old is not None else b"",
        joined=True,
        synced=old is not None and old.synced,
        is_new=old is None or old.is_new,
    )


def _join(
    change: ClassicChange, config: CoordinatorConfig, request: JoinGroupRequest, context: RequestContext, member_id: str
) -> Result:
    group = change.group
    old = group.members.get(member_id)
    member = _member(old, request, context, member_id)
    members = dict(group.members)
    members[member_id] = member
    change.set_members(
        members, pending=group.pending - {member_id}, protocol_type=group.protocol_type or request.protocol_type
    )
    # A member that joins again with what it had while the group waits for the leader's
    # assignments, or a follower in a stable group, gets this generation back (the leader's with
    # the members): nothing changed that needs a rebalance; it lost the answer, most likely.
    unchanged = (
        old is not None
        and old.protocols == member.protocols
        and (group.state == ClassicGroupState.COMPLETING_REBALANCE or group.leader != member_id)
    )
    if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE) and unchanged:
        members[member_id] = replace(member, joined=False)
        change.set_members(members)
        change.timer(CLASSIC_SESSION, change.now + member.session_timeout_ms, member_id)
        return change.result(join_response(change.group, member_id))
    if change.group.state != ClassicGroupState.PREPARING_REBALANCE:
        prepare_rebalance(change)
    else:
        extend_initial_round(change)
    if old is None:
        # Kafka's new member join timeout: a new member's waiting JoinGroup does not keep it alive
        # for longer than this (a client that gave up and joins again would leave it behind).
        change.timer(CLASSIC_SESSION, change.now + config.classic_new_member_join_timeout_ms, member_id)
    elif not member.is_new:
        # While its JoinGroup waits, the member does not heartbeat: its session waits too.
        change.timer(CLASSIC_SESSION, None, member_id)
    maybe_complete_join(change)
    if change.group.state == ClassicGroupState.PREPARING_REBALANCE:
        # A member asking again replaces its waiting request (which is told to join again).
        if old is not None and old.joined:
            change.deliver(
                JOIN,
                member_id,
                JoinGroupResponse(
                    ErrorCode.REBALANCE_IN_PROGRESS,
                    "replaced by a newer JoinGroup of the same member",
                    member_id=member_id,
                ),
            )
        return change.result(Parked((JOIN, change.group.group_id, member_id)))
    # The join completed with this request: its answer is among the deliveries (where it also
    # reaches an earlier JoinGroup of this member, if one still waits).
    key = (JOIN, change.group.group_id, member_id)
    return change.result(next(r for k, r in change.deliveries if k == key))


def _static_return(
    change: ClassicChange, config: CoordinatorConfig, request: JoinGroupRequest, context: RequestContext, holder: str
) -> Result:
    """A static member comes back with a new member id (Kafka's static membership, KIP-345): it
    takes the old member's place. The old id is fenced; its waiting requests are answered so."""
    group = change.group
    new_id = context.fresh_id
    if not new_id:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "no member id could be made for this JoinGroup")
    old = group.members[holder]
    members = {m: v for m, v in group.members.items() if m != holder}
    members[new_id] = replace(old, member_id=new_id, joined=False, synced=False)
    leader = new_id if group.leader == holder else group.leader
    pending_sync = group.pending_sync - {holder} | ({new_id} if holder in group.pending_sync else set())
    change.set_members(members, leader=leader, pending_sync=frozenset(pending_sync))
    change.timer(CLASSIC_SESSION, None, holder)
    change.answer_waiting(
        old, ErrorCode.FENCED_INSTANCE_ID, f"instance {old.instance_id} joined again as member {new_id}"
    )
    offered = {p.name: p.metadata for p in request.protocols}
    if group.state == ClassicGroupState.STABLE and offered.get(group.protocol or "") == old.metadata(group.protocol):
        # Back with the same metadata in a stable group: no rebalance. It keeps its assignment and
        # takes its request's protocols and timeouts; if it led the group it is told so, with the
        # members as Kafka gives them, but must not assign (SkipAssignment).
        member = replace(_member(old, request, context, new_id), joined=False, is_new=False)
        members[new_id] = member
        change.set_members(members)
        change.persist = True
        change.timer(CLASSIC_SESSION, change.now + member.session_timeout_ms, new_id)
        return change.result(
            msgspec.structs.replace(join_response(change.group, new_id), skip_assignment=leader == new_id)
        )
    if group.state == ClassicGroupState.COMPLETING_REBALANCE:
        # The leader may be assigning to the old member id: everyone joins again (Kafka's).
        prepare_rebalance(change)
    return _join(change, config, msgspec.structs.replace(request, member_id=new_id), context, new_id)


# --- SyncGroup --------------------------------------------------------------------------------


def sync_group(state: CoordinatorState, config: CoordinatorConfig, request: SyncGroupRequest, now: int) -> Result:
    group = _known_group(state, request.group_id)
    _validate_member(group, request.member_id, request.instance_id)
    _check_generation(group, request.generation_id)
    if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
        request.protocol_name is not None and request.protocol_name != group.protocol
    ):
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"group {group.group_id} uses {group.protocol_type}/{group.protocol}"
        )
    if group.state == ClassicGroupState.PREPARING_REBALANCE:
        raise ProtocolError(ErrorCode.REBALANCE_IN_PROGRESS, "the group is rebalancing: join again")
    change = ClassicChange(group, now)
    _synced(change, request.member_id)
    member = group.members[request.member_id]
    if group.state == ClassicGroupState.STABLE:
        return change.result(_sync_response(group, member))
    # CompletingRebalance: the leader's SyncGroup completes the generation; the others wait for it.
    members = dict(change.group.members)
    if request.member_id != group.leader:
        members[request.member_id] = replace(member, synced=True)
        change.set_members(members)
        return change.result(Parked((SYNC, group.group_id, request.member_id)))
    # Assignments for members not in the generation are ignored, members without one get none
    # (Kafka's).
    given = {a.member_id: a.assignment for a in request.assignments}
    members = {m: replace(v, assignment=given.get(m, b""), synced=False) for m, v in members.items()}
    change.set_members(members)
    change.set_state(ClassicGroupState.STABLE)
    change.persist = True
    for member_id, was in group.members.items():
        if was.synced:
            change.deliver(SYNC, member_id, _sync_response(change.group, members[member_id]))
    return change.result(_sync_response(change.group, members[request.member_id]))


def _synced(change: ClassicChange, member_id: str) -> None:
    """`member_id` sent its SyncGroup for this generation; once all have, no deadline is left."""
    pending = change.group.pending_sync - {member_id}
    change.group = replace(change.group, pending_sync=pending)
    if not pending:
        change.timer(CLASSIC_SYNC, None)


def _sync_response(group: ClassicGroup, member: ClassicMember) -> SyncGroupResponse:
    return SyncGroupResponse(ErrorCode.NONE, None, group.protocol_type, group.protocol, member.assignment)


def _known_group(state: CoordinatorState, group_id: str) -> ClassicGroup:
    group = state.classic_groups.get(group_id)
    if group is None or not group.members:
        raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no members")
    return group


def _check_generation(group: ClassicGroup, generation_id: int) -> None:
    if generation_id == group.generation:
        return
    if group.downgraded() and generation_id < group.generation:
        raise ProtocolError(
            ErrorCode.REBALANCE_IN_PROGRESS, f"group {group.group_id} is back on the classic protocol: join again"
        )
    raise ProtocolError(
        ErrorCode.ILLEGAL_GENERATION, f"generation {generation_id} is not the group's ({group.generation})"
    )


# --- Heartbeat --------------------------------------------------------------------------------


def heartbeat(state: CoordinatorState, config: CoordinatorConfig, request: ClassicHeartbeatRequest, now: int) -> Result:
    group = _known_group(state, request.group_id)
    _validate_member(group, request.member_id, request.instance_id)
    member = group.members[request.member_id]
    timers = [Timer(timer_key(CLASSIC_SESSION, group.group_id, member.member_id), now + member.session_timeout_ms)]
    try:
        _check_generation(group, request.generation_id)
    except ProtocolError as e:
        if e.code != ErrorCode.REBALANCE_IN_PROGRESS:
            raise
        return Result(ErrorResponse(e.code, e.message), timers=timers)
    if group.state == ClassicGroupState.PREPARING_REBALANCE:
        return Result(
            ErrorResponse(ErrorCode.REBALANCE_IN_PROGRESS, "the group is rebalancing: join again"), timers=timers
        )
    return Result(ErrorResponse(), timers=timers)


# --- LeaveGroup -------------------------------------------------------------------------------


def leave_group(state: CoordinatorState, config: CoordinatorConfig, request: LeaveGroupRequest, now: int) -> Result:
    """Kafka's classicGroupLeave: each member by member id (an id handed out but not joined yet
    leaves at once), or by instance id alone; FENCED_INSTANCE_ID for a member id whose instance
    another member holds now. An unknown group answers UNKNOWN_MEMBER_ID for every member."""
    if not request.members:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "LeaveGroup names no member")
    group = state.classic_groups.get(request.group_id) or ClassicGroup(request.group_id)
    answers = []
    leaving: list[str] = []
    pending: list[str] = []
    for m in request.members:
        try:
            if not m.member_id:
                holder = group.member_with_instance(m.instance_id) if m.instance_id is not None else None
                if holder is None:
                    raise ProtocolError(
                        ErrorCode.UNKNOWN_MEMBER_ID, f"group {group.group_id} has no instance {m.instance_id}"
                    )
                leaving.append(holder)
            elif m.member_id in group.pending and m.member_id not in group.members:
                pending.append(m.member_id)
            else:
                _validate_member(group, m.member_id, m.instance_id)
                leaving.append(m.member_id)
            answers.append(LeaveMemberResponse(m.member_id, m.instance_id))
        except ProtocolError as e:
            answers.append(LeaveMemberResponse(m.member_id, m.instance_id, e.code, e.message))
    change = ClassicChange(group, now)
    if pending:
        forget_pending(change, pending)
    if leaving:
        remove_members(change, leaving, "left the group")
    if not (pending or leaving):
        return Result(LeaveGroupResponse(members=tuple(answers)))
    return change.result(LeaveGroupResponse(members=tuple(answers)))
