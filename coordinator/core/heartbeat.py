"""ConnectGroupHeartbeat (seed 000), as numbered steps in the manner of Kafka's
`GroupMetadataManager.consumerGroupHeartbeat`.

A heartbeat joins a member (epoch 0), keeps it alive and reconciles it towards its target, or
makes it leave (epoch -1, or -2 for a static member that will come back). Refusals found before
anything changes raise `ProtocolError`; fencing a member is an answer that writes records.
"""

from __future__ import annotations

from dataclasses import replace

from records import CurrentMemberAssignmentValue, MemberMetadataValue

from coordinator.core.assignors import ASSIGNORS, MemberAssignment
from coordinator.core.classic import migration
from coordinator.core.config import CoordinatorConfig, GroupSettings
from coordinator.core.group_change import GroupChange
from coordinator.core.items import EMPTY, items_of
from coordinator.core.protocol import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    REBALANCE,
    SESSION,
    ErrorCode,
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveReason,
    ProtocolError,
    RequestContext,
    Result,
    Timer,
    timer_key,
)
from coordinator.core.reconciliation import next_current
from coordinator.core.selection import assignor_conflict
from coordinator.core.state import NEW_MEMBER_CURRENT, ConnectGroup, CoordinatorState
from coordinator.core.states import MemberState
from coordinator.core.target_assignment import assign_if_needed, note_join, remove_member
from coordinator.core.validation import check_heartbeat


def connect_group_heartbeat(
    state: CoordinatorState, config: CoordinatorConfig, request: HeartbeatRequest, now: int, context: RequestContext
) -> Result[HeartbeatResponse]:
    group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
    # 1. The request is well formed. A classic group that a connect member joins becomes a
    #    connect group first, in this same result (seed 000's migration, `coordinator.core.classic.migration`).
    check_heartbeat(request)
    group, conversion = _group_of(state, request, now)
    # 2. A member that leaves takes its own path.
    if epoch < 0:
        return _leave(group, config, request, now)
    # 3. The group (a join creates it) and the member as the group knows it.
    if group is None:
        if epoch != JOIN_GROUP_MEMBER_EPOCH:
            raise _unknown_member(request)
        group = ConnectGroup(group_id)  # created by this heartbeat's records
    settings = config.for_group(group.config)
    member = group.members.get(member_id)
    current = group.current(member_id)
    if member is None and epoch == JOIN_GROUP_MEMBER_EPOCH and request.rebalance_timeout_ms <= 0:
        raise ProtocolError(
            ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be larger than zero in the first heartbeat request"
        )
    # 4. The steady heartbeat: nothing changed, nothing to reconcile. No records, no work.
    if _steady(group, member, current, request, context):
        return _steady_answer(group, settings, member, request, now)
    # 5. A join (perhaps a static member taking its instance back), the seed's lost response, or
    #    an epoch the member has left behind, which fences it. Epoch 0 is a join, except from a
    #    member still at epoch 0 (no target has included it yet): that is its ordinary heartbeat.
    change = GroupChange(group)
    joining = epoch == JOIN_GROUP_MEMBER_EPOCH and (member is None or current != NEW_MEMBER_CURRENT)
    takeover = _static_takeover(group, member, request) if joining else None
    lost_response = False
    if not joining:
        if member is None:
            raise _unknown_member(request)
        if epoch != current.member_epoch:
            lost_response = _lost_response(request, current)
            if not lost_response:
                return _fence(change, config, request, current.member_epoch, now)
    # 6. The member's metadata; a new member, new assignors, a new rack or a takeover is a new
    #    group epoch.
    _update_member(change, config, member, request, context, takeover, now)
    # 7. A new target assignment when the group epoch has moved past it. A static member back for
    #    the work that waited for it computes the target itself, in this response: else it would
    #    wait for the chosen member's next heartbeat to get back what is only its own.
    assign_if_needed(change, config, now, prefer=member_id if joining and _returning(change, request) else None)
    # 8. Reconcile towards the target, revoking before assigning. A (re)joining member owns
    #    nothing (seed 000: a fenced worker abandons everything and rejoins with epoch 0).
    reported = frozenset() if joining else None if request.owned is None else items_of(request.owned)
    updated = current if lost_response else _reconciled(change, member_id, current, joining, reported)
    if updated != current or member is None:
        change.set_current(member_id, updated)
    # 9. The session timer, and the deadline to revoke while the member has something to give up.
    _schedule(change, settings, member_id, current.state == MemberState.UNREVOKED and not joining, updated, now)
    # 10. The response: the assignment when it changed (or the member's report differs from it),
    #     COMPUTE_ASSIGNMENT to the member chosen to compute the target, and the session timeout
    #     step 9 armed, so that the member stops its work before the timer can give it away.
    assignment = _assignment_to_send(current, updated, joining or lost_response, reported)
    error_code, message = _compute_assignment(change, member_id)
    result = change.result(
        HeartbeatResponse(
            error_code,
            message,
            updated.member_epoch,
            _interval(change, settings, updated, now),
            assignment,
            settings.member_session_timeout_ms(change.member(member_id)),
        )
    )
    if conversion is not None:
        conversion.merge(result)
        conversion.response = result.response
        return conversion
    return result


def _group_of(
    state: CoordinatorState, request: HeartbeatRequest, now: int
) -> tuple[ConnectGroup | None, Result | None]:
    """The connect group the heartbeat is for (None: none yet), and, when a connect member joins a
    classic group, the group converted to a connect group and the conversion's result."""
    group = state.groups.get(request.group_id)
    classic = state.classic_groups.get(request.group_id)
    if classic is None:
        return group, None
    if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
        raise _unknown_member(request)
    return migration.upgrade(state, classic, now)


def _steady_answer(
    group: ConnectGroup,
    settings: GroupSettings,
    member: MemberMetadataValue | None,
    request: HeartbeatRequest,
    now: int,
) -> Result[HeartbeatResponse]:
    """Step 4's answer: the member's epoch again and its session timer armed again."""
    session_ms = settings.member_session_timeout_ms(member)
    return Result(
        HeartbeatResponse(
            ErrorCode.NONE,
            None,
            request.member_epoch,
            _steady_interval(group, settings, now),
            session_timeout_ms=session_ms,
        ),
        timers=[Timer(timer_key(SESSION, request.group_id, request.member_id), now + session_ms)],
    )


def _reconciled(
    change: GroupChange,
    member_id: str,
    current: CurrentMemberAssignmentValue,
    joining: bool,
    reported: frozenset | None,
) -> CurrentMemberAssignmentValue:
    """Step 8's next current assignment, from nothing for a (re)joining member. (After a lost
    response the member is told again what it said, and nothing more: it holds only part of that,
    so a reconciliation step now could look to it like a revocation and an assignment at once. The
    next heartbeat reconciles.)"""
    return next_current(
        NEW_MEMBER_CURRENT if joining else current,
        change.assignment_epoch,
        change.target(member_id),
        lambda item: change.held_by_other(item, member_id),
        reported,
    )


def _assignment_to_send(
    current: CurrentMemberAssignmentValue,
    updated: CurrentMemberAssignmentValue,
    always: bool,
    reported: frozenset | None,
) -> MemberAssignment | None:
    """Step 10's assignment: sent when it changed, when the member's report differs from it, and
    `always` (a join, a lost response); else None."""
    send = (
        always
        or updated.assignment != current.assignment
        or (reported is not None and reported != items_of(updated.assignment))
    )
    return MemberAssignment(updated.assignment, updated.error, updated.version, updated.metadata) if send else None


# While its assignment is about to change, a member heartbeats this many times more often.
RECONCILING_INTERVAL_DIVISOR = 10
MIN_HEARTBEAT_INTERVAL_MS = 100


def _interval(change: GroupChange, settings: GroupSettings, updated: CurrentMemberAssignmentValue, now: int) -> int:
    """The heartbeat interval to give the member: the group's, but shorter while what the member
    owns is about to change. A member learns of a new target, or of items others have released,
    only on a heartbeat; at the group's interval each of those steps costs up to an interval of
    unowned work (bench-vs-connect's scale-out measured 6.4 s to every task running, against Kafka
    Connect's 3.4 s, with 3 s heartbeats; Connect's members rejoin at once instead). So a member
    comes back sooner while it waits for released items (UNRELEASED) or while the group's target
    is being computed, and no later than a scheduled rebalance. The cost is heartbeats that change
    nothing, and only while a rebalance is under way."""
    interval = settings.heartbeat_interval_ms
    if updated.state == MemberState.UNRELEASED or change.group_epoch > change.assignment_epoch:
        return min(interval, max(MIN_HEARTBEAT_INTERVAL_MS, interval // RECONCILING_INTERVAL_DIVISOR))
    meta = change.target_meta()
    return _until_scheduled(interval, meta.scheduled_rebalance_at_ms if meta is not None else None, now)


def _steady_interval(group: ConnectGroup, settings: GroupSettings, now: int) -> int:
    meta = group.target_metadata
    return _until_scheduled(settings.heartbeat_interval_ms, meta.scheduled_rebalance_at_ms if meta else None, now)


def _until_scheduled(interval: int, scheduled_at_ms: int | None, now: int) -> int:
    """Deferred work is given out at `scheduled_at_ms`: be there just after it, not an interval later."""
    if scheduled_at_ms is None:
        return interval
    return min(interval, max(MIN_HEARTBEAT_INTERVAL_MS, scheduled_at_ms - now + MIN_HEARTBEAT_INTERVAL_MS))


def _returning(change: GroupChange, request: HeartbeatRequest) -> bool:
    """Whether a joining member's instance has departed work waiting for it (a static return)."""
    instance_id = request.instance_id
    meta = change.target_meta()
    return (
        instance_id is not None
        and meta is not None
        and any(d.instance_id == instance_id for d in meta.departed_members)
    )


def _unknown_member(request: HeartbeatRequest) -> ProtocolError:
    return ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {request.group_id} has no member {request.member_id}")


def _steady(
    group: ConnectGroup,
    member: MemberMetadataValue | None,
    current: CurrentMemberAssignmentValue,
    request: HeartbeatRequest,
    context: RequestContext,
) -> bool:
    """Whether the heartbeat changes nothing: a stable member at the group's epoch, reporting what it owns."""
    epoch = request.member_epoch
    return (
        member is not None
        and epoch == current.member_epoch
        and epoch != JOIN_GROUP_MEMBER_EPOCH
        and current.state == MemberState.STABLE
        and epoch == group.assignment_epoch
        and group.group_epoch == epoch
        and _unchanged(member, request, context)
        and (request.owned is None or request.owned == current.assignment)
    )


def _static_takeover(group: ConnectGroup, member: MemberMetadataValue | None, request: HeartbeatRequest) -> str | None:
    """The member whose InstanceId this join takes back, if another member holds it."""
    instance_id = (
        request.instance_id if request.instance_id is not None else (member.instance_id if member is not None else None)
    )
    holder = group.member_with_instance(instance_id) if instance_id is not None else None
    if holder is None or holder == request.member_id:
        return None
    # A classic static member comes back with a new member id and replaces the old one at once,
    # as Kafka's classic static membership does; a connect member must have left with -2 first.
    if group.current(holder).member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not (
        request.classic is not None and migration.is_classic(group.members.get(holder))
    ):
        raise ProtocolError(
            ErrorCode.UNRELEASED_INSTANCE_ID,
            f"instance {instance_id} is still held by member {holder}: it must leave (epoch -2) or "
            "let its session time out first",
        )
    return holder


def _lost_response(request: HeartbeatRequest, current: CurrentMemberAssignmentValue) -> bool:
    """Seed 000's edge case: the response that moved the member to its new epoch was lost. Safe
    to move it again when it owns nothing beyond what it was given."""
    return (
        request.member_epoch == current.previous_member_epoch
        and current.member_epoch >= 0
        and request.owned is not None
        and items_of(request.owned) <= items_of(current.assignment)
    )


def _fence(
    change: GroupChange, config: CoordinatorConfig, request: HeartbeatRequest, at_epoch: int, now: int
) -> Result[HeartbeatResponse]:
    remove_member(change, request.member_id, now, LeaveReason.FENCED_EPOCH)
    assign_if_needed(change, config, now)
    return change.result(
        HeartbeatResponse(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"member {request.member_id} sent epoch {request.member_epoch} but is at epoch {at_epoch}; it has been "
            "removed from the group and must rejoin with epoch 0",
        )
    )


def _update_member(
    change: GroupChange,
    config: CoordinatorConfig,
    member: MemberMetadataValue | None,
    request: HeartbeatRequest,
    context: RequestContext,
    takeover: str | None,
    now: int,
) -> None:
    member_id = request.member_id
    updated = _updated_metadata(member, request, context, change.group_epoch)
    assignors_changed = member is None or _assignors(member) != _assignors(updated)
    if assignors_changed:
        _check_assignors(change.group, member_id, updated, exclude=takeover)
    if takeover is not None:
        # Static membership: the returning instance takes over the old member's target; the
        # old member id is gone. The member set changed, so the group epoch moves.
        old_target = change.target(takeover)
        change.remove_member(takeover, LeaveReason.REPLACED)
        if old_target is not None:
            change.set_target(member_id, old_target)
    if member is None or assignors_changed or takeover is not None or member.rack_id != updated.rack_id:
        change.bump()
    if updated != member:
        change.set_member(member_id, replace(updated, group_epoch=change.group_epoch))
    if member is None:
        note_join(change, config, updated, now)


def _schedule(
    change: GroupChange,
    settings: GroupSettings,
    member_id: str,
    was_revoking: bool,
    updated: CurrentMemberAssignmentValue,
    now: int,
) -> None:
    group_id = change.group.group_id
    change.timers.append(
        Timer(
            timer_key(SESSION, group_id, member_id), now + settings.member_session_timeout_ms(change.member(member_id))
        )
    )
    revoking = updated.state == MemberState.UNREVOKED
    if revoking and not was_revoking:
        deadline = now + settings.member_rebalance_timeout_ms(change.member(member_id))
        change.timers.append(Timer(timer_key(REBALANCE, group_id, member_id), deadline))
    elif was_revoking and not revoking:
        change.timers.append(Timer(timer_key(REBALANCE, group_id, member_id), None))


def _compute_assignment(change: GroupChange, member_id: str) -> tuple[int, str | None]:
    """COMPUTE_ASSIGNMENT for the chosen member while the target is behind and it has not prepared."""
    computation = change.current_computation()
    if (
        computation is not None
        and computation.member_id == member_id
        and change.group_epoch > change.assignment_epoch
        and (computation.prepared is None or computation.prepared.group_epoch < change.group_epoch)
    ):
        return ErrorCode.COMPUTE_ASSIGNMENT, f"compute the target assignment for group epoch {change.group_epoch}"
    return ErrorCode.NONE, None


def _leave(
    group: ConnectGroup | None, config: CoordinatorConfig, request: HeartbeatRequest, now: int
) -> Result[HeartbeatResponse]:
    member_id = request.member_id
    if group is None or member_id not in group.members:
        raise _unknown_member(request)
    settings = config.for_group(group.config)
    change = GroupChange(group)
    # Only a member that joined with an InstanceId can be taken back by it; -2 from any other
    # member is an ordinary leave.
    if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and group.members[member_id].instance_id is not None:
        # A static member leaves for a while: its assignment waits for its InstanceId, and the
        # group does not rebalance unless the session times out (DESIGN §5).
        current = group.current(member_id)
        change.set_current(
            member_id,
            replace(
                current,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=current.member_epoch,
                state=MemberState.STABLE,
                pending_revocation=EMPTY,
            ),
        )
        change.timers.append(Timer(timer_key(REBALANCE, group.group_id, member_id), None))
        change.timers.append(
            Timer(
                timer_key(SESSION, group.group_id, member_id),
                now + settings.member_session_timeout_ms(group.members[member_id]),
            )
        )
        change.release_computation(member_id)
        return change.result(
            HeartbeatResponse(
                ErrorCode.NONE,
                None,
                LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                settings.heartbeat_interval_ms,
                session_timeout_ms=settings.session_timeout_ms,
            )
        )
    remove_member(change, member_id, now, LeaveReason.LEAVE)
    assign_if_needed(change, config, now)
    return change.result(
        HeartbeatResponse(
            ErrorCode.NONE,
            None,
            request.member_epoch,
            settings.heartbeat_interval_ms,
            session_timeout_ms=settings.session_timeout_ms,
        )
    )


def _check_assignors(group: ConnectGroup, member_id: str, updated: MemberMetadataValue, exclude: str | None) -> None:
    if updated.server_assignor is not None and updated.server_assignor not in ASSIGNORS:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"server-side assignor {updated.server_assignor!r} is not supported; this coordinator has "
            f"{', '.join(sorted(ASSIGNORS))}",
        )
    members = group.members if exclude is None else {m: v for m, v in group.members.items() if m != exclude}
    problem = assignor_conflict(members, member_id, updated)
    if problem is not None:
        raise ProtocolError(ErrorCode.UNSUPPORTED_ASSIGNOR, problem)


def _assignors(member: MemberMetadataValue) -> tuple:
    return member.server_assignor, member.client_assignors


def _unchanged(member: MemberMetadataValue, r: HeartbeatRequest, context: RequestContext) -> bool:
    """Whether a heartbeat's optional fields leave the member's metadata as it is."""
    return (
        (r.instance_id is None or r.instance_id == member.instance_id)
        and (r.rack_id is None or r.rack_id == member.rack_id)
        and (r.rebalance_timeout_ms == -1 or r.rebalance_timeout_ms == member.rebalance_timeout_ms)
        and (r.server_assignor is None or r.server_assignor == member.server_assignor)
        and (r.client_assignors is None or r.client_assignors == member.client_assignors)
        and (r.url is None or r.url == member.url)
        and (r.classic is None or r.classic == member.classic_member_metadata)
        and (not context.client_id or context.client_id == member.client_id)
        and (not context.client_host or context.client_host == member.client_host)
    )


def _updated_metadata(
    member: MemberMetadataValue | None, r: HeartbeatRequest, context: RequestContext, group_epoch: int
) -> MemberMetadataValue:
    """The member's metadata after this heartbeat: null request fields keep what we had."""
    if member is None:
        return MemberMetadataValue(
            group_epoch=group_epoch,
            instance_id=r.instance_id,
            client_id=context.client_id,
            client_host=context.client_host,
            url=r.url,
            rebalance_timeout_ms=r.rebalance_timeout_ms,
            server_assignor=r.server_assignor,
            client_assignors=r.client_assignors or (),
            rack_id=r.rack_id,
            classic_member_metadata=r.classic,
        )
    if _unchanged(member, r, context):
        return member
    server, client = member.server_assignor, member.client_assignors
    if r.server_assignor is not None:  # a member names one kind of assignor at a time
        server, client = r.server_assignor, ()
    elif r.client_assignors is not None:
        server, client = None, r.client_assignors
    return MemberMetadataValue(
        group_epoch=member.group_epoch,
        instance_id=r.instance_id if r.instance_id is not None else member.instance_id,
        client_id=context.client_id or member.client_id,
        client_host=context.client_host or member.client_host,
        url=r.url if r.url is not None else member.url,
        rebalance_timeout_ms=r.rebalance_timeout_ms if r.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
        server_assignor=server,
        client_assignors=client,
        rack_id=r.rack_id if r.rack_id is not None else member.rack_id,
        classic_member_metadata=r.classic if r.classic is not None else member.classic_member_metadata,
    )
