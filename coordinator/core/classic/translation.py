"""Classic members of a connect group: their JoinGroup, SyncGroup, Heartbeat and LeaveGroup,
translated into the connect protocol's steps (seed 000, "Migration To the New Protocol"; the rules
are in `coordinator.core.classic.migration`'s docstring)."""

from __future__ import annotations

from collections.abc import Iterable

from records import ClassicMemberMetadata, CurrentMemberAssignmentValue, MemberMetadataValue
from records.connect_protocol import (
    VERSIONS,
    ConnectProtocolError,
    WorkerAssignment,
    WorkerMetadata,
    decode_metadata,
    encode_assignment,
    version_of,
)

from coordinator.core.classic.holdings import worker_identity
from coordinator.core.classic.migration import CONNECT, is_classic, scratch_state, settled
from coordinator.core.config import CoordinatorConfig
from coordinator.core.heartbeat import connect_group_heartbeat
from coordinator.core.items import connectors_and_tasks, items_of
from coordinator.core.protocol import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    NO_CONTEXT,
    SESSION,
    ClassicHeartbeatRequest,
    ClassicJoinHeartbeat,
    ClassicProtocol,
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


def join_group(
    state: CoordinatorState, config: CoordinatorConfig, request: JoinGroupRequest, now: int, context: RequestContext
) -> Result:
    """A classic member's JoinGroup in a connect group: a full heartbeat, answered at once, as Kafka
    answers a classic consumer in a consumer group: a follower (no leader, no SkipAssignment, which
    Connect's onLeaderElected refuses), a dynamic member first given its id (MEMBER_ID_REQUIRED)."""
    group = state.groups[request.group_id]
    if request.protocol_type != CONNECT:
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"group {request.group_id} is a connect group; ProtocolType must be connect",
        )
    protocol = _chosen_protocol(request.protocols)
    if protocol is None:
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"group {request.group_id} is a connect group: none of the protocols offered "
            f"({', '.join(p.name for p in request.protocols)}) is Kafka Connect's",
        )
    member_id = request.member_id or context.fresh_id
    if not member_id:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "no member id could be made for this JoinGroup")
    if not request.member_id and request.instance_id is None:
        # KIP-394, as Kafka's classicGroupJoinToConsumerGroup: the id first, then the join proper.
        return Result(
            JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, "join again with this member id", member_id=member_id)
        )
    member = group.members.get(member_id)
    if member is not None and not is_classic(member):
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"member {member_id} speaks the connect protocol, not the classic one",
        )
    if member is not None and request.instance_id is not None and member.instance_id != request.instance_id:
        raise ProtocolError(ErrorCode.FENCED_INSTANCE_ID, f"member {member_id} is not instance {request.instance_id}")
    try:
        metadata = decode_metadata(next(p.metadata for p in request.protocols if p.name == protocol))
    except ConnectProtocolError as e:
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"the metadata of protocol {protocol} cannot be read: {e}"
        ) from None
    # A member id the group does not know (handed out above, or of a member since removed) joins
    # anew, as Kafka's getOrMaybeSubscribe does; a join resets what it owns to what it says it runs.
    epoch = group.current(member_id).member_epoch if member is not None else JOIN_GROUP_MEMBER_EPOCH
    heartbeat = ClassicJoinHeartbeat(
        request.group_id,
        member_id,
        epoch,
        instance_id=request.instance_id,
        rebalance_timeout_ms=request.session_timeout_ms
        if request.rebalance_timeout_ms == -1
        else request.rebalance_timeout_ms,
        client_assignors=() if member is None else None,
        owned=metadata.owned,
        url=metadata.url or None,
        classic=ClassicMemberMetadata(request.session_timeout_ms, request.protocols),
    )
    try:
        result = connect_group_heartbeat(state, config, heartbeat, now, context)
    except ProtocolError as e:
        raise ProtocolError(*_classic_error(e.code, e.message)) from None
    answer = result.response
    if answer.error_code not in (ErrorCode.NONE, ErrorCode.COMPUTE_ASSIGNMENT):
        code, message = _classic_error(answer.error_code, answer.error_message)
        result.response = JoinGroupResponse(code, message, member_id=member_id)
        return result
    result.response = JoinGroupResponse(
        ErrorCode.NONE,
        None,
        answer.member_epoch,
        CONNECT,
        protocol,
        leader="",
        skip_assignment=False,
        member_id=member_id,
    )
    return result


def _chosen_protocol(protocols: Iterable[ClassicProtocol]) -> str | None:
    """The member's first Kafka Connect protocol: in a connect group the coordinator assigns, so no
    vote is needed, and each member reads its assignment in its own protocol's bytes."""
    return next((p.name for p in protocols if p.name in VERSIONS), None)


def _classic_error(code: int, message: str | None) -> tuple[ErrorCode, str | None]:
    """A connect-protocol refusal as an answer a classic client survives. The instance still held by
    a connect member (it has not left or timed out yet) has no classic code: join again later."""
    if code in (ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.COMPUTE_ASSIGNMENT):
        return ErrorCode.REBALANCE_IN_PROGRESS, message
    if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
        return ErrorCode.UNKNOWN_MEMBER_ID, message
    if code in _CLASSIC_CODES:
        return ErrorCode(code), message
    return ErrorCode.UNKNOWN_MEMBER_ID, f"{_name(code)}: {message}"  # Connect joins again with a new id


# What a connect-protocol handler may refuse with that means the same to a classic client.
_CLASSIC_CODES = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.INVALID_GROUP_ID,
    }
)


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _classic_member(
    state: CoordinatorState, group_id: str, member_id: str, instance_id: str | None, generation: int
) -> tuple[ConnectGroup, MemberMetadataValue, CurrentMemberAssignmentValue]:
    group = state.groups[group_id]
    member = group.members.get(member_id)
    if member is None:
        raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
    if instance_id is not None and member.instance_id != instance_id:
        raise ProtocolError(ErrorCode.FENCED_INSTANCE_ID, f"member {member_id} is not instance {instance_id}")
    if not is_classic(member):
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"member {member_id} speaks the connect protocol, not the classic one",
        )
    current = group.current(member_id)
    if generation != current.member_epoch:
        raise ProtocolError(
            ErrorCode.ILLEGAL_GENERATION,
            f"generation {generation} is not member {member_id}'s epoch ({current.member_epoch})",
        )
    return group, member, current


def sync_group(state: CoordinatorState, config: CoordinatorConfig, request: SyncGroupRequest, now: int) -> Result:
    """A classic member's SyncGroup in a connect group: its assignment in Connect's bytes for its
    protocol. On `default` that is everything it may run (an eager worker stopped all before it
    joined); on `compatible` and `sessioned` it is a difference from what its JoinGroup said it
    runs: `Revoked` what it must stop, `Assigned` what it may start (onJoinComplete adds it). The
    leader it is told of is one classic member, stable while it stays, because Connect's herder
    forwards REST writes to its leader and the leader writes the session keys; the config offset is
    the highest any member reported, so no worker finds itself ahead of its leader."""
    group, member, current = _classic_member(
        state, request.group_id, request.member_id, request.instance_id, request.generation_id
    )
    settings = config.for_group(group.config)
    meta = member.classic_member_metadata
    assert meta is not None
    protocol = request.protocol_name if request.protocol_name in VERSIONS else _chosen_protocol(meta.protocols)
    if protocol is None:
        raise ProtocolError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"member {request.member_id} offered none of Kafka Connect's protocols",
        )
    runs = items_of(current.assignment)
    reported = items_of(_metadata(meta.protocols, protocol).owned)
    leader, leader_url = _leader(group)
    scheduled = group.target_metadata.scheduled_rebalance_at_ms if group.target_metadata is not None else None
    full = version_of(protocol) == 0
    assignment = encode_assignment(
        WorkerAssignment(
            leader=leader,
            leader_url=leader_url,
            config_offset=_config_offset(group),
            assigned=connectors_and_tasks(runs if full else runs - reported),
            revoked=connectors_and_tasks(frozenset() if full else reported - runs),
            delay_ms=max(0, scheduled - now) if scheduled is not None else 0,
        ),
        protocol,
    )
    return Result(
        SyncGroupResponse(ErrorCode.NONE, None, CONNECT, protocol, assignment),
        timers=[
            Timer(
                timer_key(SESSION, group.group_id, request.member_id), now + settings.member_session_timeout_ms(member)
            )
        ],
    )


def _metadata(protocols: Iterable[ClassicProtocol], protocol: str) -> WorkerMetadata:
    try:
        return decode_metadata(next(p.metadata for p in protocols if p.name == protocol))
    except (StopIteration, ConnectProtocolError):
        return WorkerMetadata()


def _classic_members(group: ConnectGroup) -> list[tuple[str, MemberMetadataValue]]:
    return sorted((m, v) for m, v in group.members.items() if is_classic(v))


def _leader(group: ConnectGroup) -> tuple[str, str]:
    """The classic member Connect workers take for their leader: the lowest member id among them,
    which stays the leader while it stays in the group (until a member with a lower id joins)."""
    members = _classic_members(group)
    if not members:
        return "", ""
    member_id, member = members[0]
    return member_id, member.url or ""


def _config_offset(group: ConnectGroup) -> int:
    """The highest config offset a classic member's last JoinGroup reported (-1: none)."""
    offsets = [-1]
    for _, member in _classic_members(group):
        protocols = member.classic_member_metadata.protocols
        offset = worker_identity(protocols[0].metadata)[1] if protocols else None
        if offset is not None:
            offsets.append(offset)
    return max(offsets)


def heartbeat(
    state: CoordinatorState, config: CoordinatorConfig, request: ClassicHeartbeatRequest, now: int
) -> Result[ErrorResponse]:
    """A classic member's Heartbeat in a connect group: REBALANCE_IN_PROGRESS while its assignment
    must still change, so that it joins again (which is how it moves a step)."""
    group, member, _ = _classic_member(
        state, request.group_id, request.member_id, request.instance_id, request.generation_id
    )
    settings = config.for_group(group.config)
    timers = [
        Timer(timer_key(SESSION, group.group_id, request.member_id), now + settings.member_session_timeout_ms(member))
    ]
    if settled(group, request.member_id):
        return Result(ErrorResponse(), timers=timers)
    return Result(ErrorResponse(ErrorCode.REBALANCE_IN_PROGRESS, "your assignment changes: join again"), timers=timers)


def leave_group(
    state: CoordinatorState, config: CoordinatorConfig, request: LeaveGroupRequest, now: int
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
            answers.append(
                LeaveMemberResponse(
                    m.member_id,
                    m.instance_id,
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"group {g} has no member {m.member_id or m.instance_id}",
                )
            )
            continue
        if m.instance_id is not None and member.instance_id != m.instance_id:
            answers.append(
                LeaveMemberResponse(
                    m.member_id,
                    m.instance_id,
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"member {member_id} is not instance {m.instance_id}",
                )
            )
            continue
        result = connect_group_heartbeat(
            scratch, config, HeartbeatRequest(g, member_id, LEAVE_GROUP_MEMBER_EPOCH), now, NO_CONTEXT
        )
        for record in result.records:
            scratch.replay(record)
        for update in result.volatile:
            scratch.replay(update)
        merged.merge(result)
        answers.append(LeaveMemberResponse(member_id, m.instance_id))
    merged.response = LeaveGroupResponse(members=tuple(answers))
    return merged
