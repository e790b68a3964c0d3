"""Classic members of a connect group: their JoinGroup, SyncGroup, Heartbeat and LeaveGroup,
translated into the connect protocol's steps (seed 000, "Migration To the New Protocol"; the rules
are in `coordinator.core.migration`'s docstring)."""

from __future__ import annotations

from records import ClassicMemberMetadata, CurrentMemberAssignmentValue, MemberMetadataValue
from records.connect_protocol import ConnectProtocolError, WorkerAssignment, decode_metadata, encode_assignment

from coordinator.core.config import CoordinatorConfig
from coordinator.core.heartbeat import connect_group_heartbeat
from coordinator.core.migration import CONNECT, is_classic, scratch_state, settled
from coordinator.core.protocol import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    NO_CONTEXT,
    SESSION,
    ClassicHeartbeatRequest,
    ErrorCode,
    ErrorResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ProtocolError,
    RequestContext,
    Result,
    SyncGroupRequest,
    SyncGroupResponse,
    Timer,
    timer_key,
)
from coordinator.core.state import ConnectGroup, CoordinatorState


def join_group(state: CoordinatorState, config: CoordinatorConfig, request: JoinGroupRequest, now: int,
               context: RequestContext) -> Result:
    """A classic member's JoinGroup in a connect group: a full heartbeat, answered at once."""
    group = state.groups[request.group_id]
    member_id = request.member_id or context.fresh_id
    if not member_id:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "no member id could be made for this JoinGroup")
    member = group.members.get(member_id)
    if member is not None and not is_classic(member):
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"member {member_id} speaks the connect protocol, not the classic one")
    if request.member_id and member is None:
        raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {request.group_id} has no member {member_id}")
    if member is not None and request.instance_id is not None and member.instance_id != request.instance_id:
        raise ProtocolError(ErrorCode.FENCED_INSTANCE_ID, f"member {member_id} is not instance {request.instance_id}")
    if request.protocol_type != CONNECT:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"group {request.group_id} is a connect group; ProtocolType must be connect")
    try:
        metadata = decode_metadata(request.protocols[0].metadata)
    except ConnectProtocolError as e:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"the metadata of protocol {request.protocols[0].name} cannot be read: {e}") from None
    epoch = group.current(member_id).member_epoch if member is not None else JOIN_GROUP_MEMBER_EPOCH
    heartbeat = HeartbeatRequest(
        request.group_id, member_id, epoch, instance_id=request.instance_id,
        rebalance_timeout_ms=request.session_timeout_ms if request.rebalance_timeout_ms == -1
        else request.rebalance_timeout_ms,
        client_assignors=() if member is None else None, owned=metadata.owned, url=metadata.url,
        classic=ClassicMemberMetadata(request.session_timeout_ms, request.protocols))
    try:
        result = connect_group_heartbeat(state, config, heartbeat, now, context)
    except ProtocolError as e:
        # The instance is still held by a connect member (it has not left or timed out yet): the
        # classic protocol has no UNRELEASED_INSTANCE_ID, so the member is told to join again later.
        if e.code == ErrorCode.UNRELEASED_INSTANCE_ID:
            raise ProtocolError(ErrorCode.REBALANCE_IN_PROGRESS, e.message) from None
        raise
    answer = result.response
    if answer.error_code not in (ErrorCode.NONE, ErrorCode.COMPUTE_ASSIGNMENT):
        result.response = JoinGroupResponse(answer.error_code, answer.error_message, member_id=member_id)
        return result
    result.response = JoinGroupResponse(
        ErrorCode.NONE, None, answer.member_epoch, CONNECT, request.protocols[0].name, leader=member_id,
        skip_assignment=True, member_id=member_id)
    return result


def _classic_member(state: CoordinatorState, group_id: str, member_id: str, instance_id: str | None,
                    generation: int) -> tuple[ConnectGroup, MemberMetadataValue, CurrentMemberAssignmentValue]:
    group = state.groups[group_id]
    member = group.members.get(member_id)
    if member is None:
        raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
    if instance_id is not None and member.instance_id != instance_id:
        raise ProtocolError(ErrorCode.FENCED_INSTANCE_ID, f"member {member_id} is not instance {instance_id}")
    if not is_classic(member):
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"member {member_id} speaks the connect protocol, not the classic one")
    current = group.current(member_id)
    if generation != current.member_epoch:
        raise ProtocolError(ErrorCode.ILLEGAL_GENERATION,
                            f"generation {generation} is not member {member_id}'s epoch ({current.member_epoch})")
    return group, member, current


def sync_group(state: CoordinatorState, config: CoordinatorConfig, request: SyncGroupRequest, now: int) -> Result:
    """A classic member's SyncGroup in a connect group: what it owns now, and what to revoke."""
    group, member, current = _classic_member(state, request.group_id, request.member_id, request.instance_id,
                                             request.generation_id)
    settings = config.for_group(group.config)
    assignment = encode_assignment(WorkerAssignment(
        leader=request.member_id, assigned=current.assignment, revoked=current.pending_revocation))
    protocol = member.classic_member_metadata.protocols[0].name if member.classic_member_metadata.protocols else None
    return Result(SyncGroupResponse(ErrorCode.NONE, None, CONNECT, request.protocol_name or protocol, assignment),
                  timers=[Timer(timer_key(SESSION, group.group_id, request.member_id),
                                now + settings.member_session_timeout_ms(member))])


def heartbeat(state: CoordinatorState, config: CoordinatorConfig, request: ClassicHeartbeatRequest, now: int
              ) -> Result[ErrorResponse]:
    """A classic member's Heartbeat in a connect group: REBALANCE_IN_PROGRESS while its assignment
    must still change, so that it joins again (which is how it moves a step)."""
    group, member, current = _classic_member(state, request.group_id, request.member_id, request.instance_id,
                                             request.generation_id)
    settings = config.for_group(group.config)
    timers = [Timer(timer_key(SESSION, group.group_id, request.member_id),
                    now + settings.member_session_timeout_ms(member))]
    if settled(group, request.member_id):
        return Result(ErrorResponse(), timers=timers)
    return Result(ErrorResponse(ErrorCode.REBALANCE_IN_PROGRESS, "your assignment changes: join again"),
                  timers=timers)


def leave_group(state: CoordinatorState, config: CoordinatorConfig, request: LeaveGroupRequest, now: int
                ) -> Result[LeaveGroupResponse]:
    """Classic members leave a connect group: each a leave heartbeat (-1), one after the other."""
    g = request.group_id
    scratch = scratch_state(state.groups[g], g)
    merged: Result = Result(None)
    answers = []
    for m in request.members:
        group = scratch.groups.get(g)
        member_id = m.member_id or (group.member_with_instance(m.instance_id) if group and m.instance_id else None)
        member = group.members.get(member_id) if group is not None and member_id else None
        if member is None:
            answers.append(LeaveMemberResponse(m.member_id, m.instance_id, ErrorCode.UNKNOWN_MEMBER_ID,
                                               f"group {g} has no member {m.member_id or m.instance_id}"))
            continue
        if m.instance_id is not None and member.instance_id != m.instance_id:
            answers.append(LeaveMemberResponse(m.member_id, m.instance_id, ErrorCode.FENCED_INSTANCE_ID,
                                               f"member {member_id} is not instance {m.instance_id}"))
            continue
        result = connect_group_heartbeat(scratch, config, HeartbeatRequest(g, member_id, LEAVE_GROUP_MEMBER_EPOCH),
                                         now, NO_CONTEXT)
        for record in result.records:
            scratch.replay(record)
        for update in result.volatile:
            scratch.replay(update)
        merged.merge(result)
        answers.append(LeaveMemberResponse(member_id, m.instance_id))
    merged.response = LeaveGroupResponse(members=tuple(answers))
    return merged
