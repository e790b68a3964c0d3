"""The Kafka listener's edge: kafka-python's request and response types (`coordinator.api.kafka_protocol`)
to the core's messages and back, in one place. The listener (`coordinator.service.kafka_listener`)
authorizes and calls the core; what each Kafka API version carries, and how Kafka spells an answer
(a refusal's placeholders, a group's state), is said here once."""

from __future__ import annotations

from typing import Any

from coordinator.core.protocol import (
    ClassicHeartbeatRequest,
    ClassicProtocol,
    ErrorCode,
    GroupDescription,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMember,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.core.states import ClassicGroupState, ConnectGroupState

# Kafka's group states as its tools spell them: the classic states, and the consumer group states
# (KIP-848) for our connect groups; a group that does not exist is Dead.
KAFKA_STATES = {
    **{state.described: state.value for state in ClassicGroupState},  # EMPTY -> Empty, ..., STABLE -> Stable
    ConnectGroupState.ASSIGNING: "Assigning",
    ConnectGroupState.RECONCILING: "Reconciling",
}
DEAD = "Dead"


def join_request(body: Any) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        protocol_type=body.protocol_type,
        protocols=tuple(ClassicProtocol(p.name, bytes(p.metadata)) for p in body.protocols),
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        instance_id=body.group_instance_id,
        reason=body.reason,
    )


def join_response(cls: type, version: int, answer: JoinGroupResponse) -> Any:
    """The core's answer as JoinGroup `version` spells it (ProtocolName nullable from v7)."""
    return cls(
        throttle_time_ms=0,
        error_code=answer.error_code,
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name if version >= 7 else answer.protocol_name or "",
        leader=answer.leader,
        skip_assignment=answer.skip_assignment,
        member_id=answer.member_id,
        members=[
            cls.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.instance_id, metadata=m.metadata)
            for m in answer.members
        ],
    )


def sync_request(body: Any, version: int) -> SyncGroupRequest:
    v5 = version >= 5  # ProtocolType and ProtocolName from v5
    return SyncGroupRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        generation_id=body.generation_id,
        instance_id=body.group_instance_id,
        protocol_type=body.protocol_type if v5 else None,
        protocol_name=body.protocol_name if v5 else None,
        assignments=tuple(SyncGroupAssignment(a.member_id, bytes(a.assignment)) for a in body.assignments),
    )


def sync_response(cls: type, answer: SyncGroupResponse) -> Any:
    return cls(
        throttle_time_ms=0,
        error_code=answer.error_code,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name,
        assignment=answer.assignment,
    )


def heartbeat_request(body: Any) -> ClassicHeartbeatRequest:
    return ClassicHeartbeatRequest(body.group_id, body.member_id, body.generation_id, body.group_instance_id)


def leave_request(body: Any, version: int) -> LeaveGroupRequest:
    """LeaveGroup: one member by id before v3, a batch from v3, each with its reason from v5."""
    if version < 3:
        return LeaveGroupRequest(body.group_id, (LeaveMember(body.member_id),))
    reason = version >= 5
    return LeaveGroupRequest(
        body.group_id,
        tuple(LeaveMember(m.member_id, m.group_instance_id, m.reason if reason else None) for m in body.members),
    )


def leave_response(cls: type, version: int, code: int, answer: LeaveGroupResponse | None) -> Any:
    """`code` is the refusal (or 0); `answer` the core's, None when refused."""
    if answer is not None:
        code = answer.error_code
        if version < 3 and not code and answer.members:  # one member: its outcome is the answer's (v0-v2)
            code = answer.members[0].error_code
    if version < 3:
        return cls(throttle_time_ms=0, error_code=code)
    return cls(
        throttle_time_ms=0,
        error_code=code,
        members=[
            cls.MemberResponse(member_id=m.member_id, group_instance_id=m.instance_id, error_code=m.error_code)
            for m in (answer.members if answer is not None else ())
        ],
    )


def described_group(
    cls: type, version: int, group_id: str, code: int, described: GroupDescription | None, raw: dict
) -> Any:
    """DescribeGroups' entry for one group: `code` a refusal (or 0), `described` the core's description
    (None: no such group), `raw` each classic member's (metadata, assignment) bytes."""
    if described is None:
        if not code and version >= 6:
            code = ErrorCode.GROUP_ID_NOT_FOUND  # v6 (KIP-1043); before, a Dead group without error
        return cls.DescribedGroup(
            error_code=code,
            group_id=group_id,
            group_state=DEAD if not code or code == ErrorCode.GROUP_ID_NOT_FOUND else "",
            protocol_type="",
            protocol_data="",
            members=[],
            authorized_operations=None,
        )
    state = KAFKA_STATES.get(described.state, described.state)
    # As Kafka's describeGroups: the chosen protocol and each member's metadata for it only when the
    # group is Stable; its assignment bytes always (empty until its SyncGroup).
    stable = state == ClassicGroupState.STABLE
    return cls.DescribedGroup(
        error_code=ErrorCode.NONE,
        group_id=group_id,
        group_state=state,
        protocol_type="connect",
        protocol_data=(described.protocol_name or "") if stable else "",
        members=[
            cls.DescribedGroup.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=raw.get(m.member_id, (b"", b""))[0] if stable else b"",
                member_assignment=raw.get(m.member_id, (b"", b""))[1],
            )
            for m in described.members
        ],
        authorized_operations=None,
    )
