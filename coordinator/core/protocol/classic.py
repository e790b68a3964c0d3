"""The classic protocol (seed 004): JoinGroup, SyncGroup, Heartbeat and LeaveGroup, as Kafka's
classic group coordinator speaks them. Kafka's GroupInstanceId is `instance_id` here, as in the
connect protocol."""

from __future__ import annotations

from typing import Annotated

from msgspec import field

from records import ClassicMemberProtocol
from records.constraints import Base64, Int32, doc

from coordinator.core.protocol.common import ErrorCode, Message

__all__ = [
    "UNKNOWN_GENERATION",
    "ClassicHeartbeatRequest",
    "ClassicProtocol",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeaveMember",
    "LeaveMemberResponse",
    "SyncGroupAssignment",
    "SyncGroupRequest",
    "SyncGroupResponse",
]

UNKNOWN_GENERATION = -1

_INSTANCE = "The group instance id of a static member (Kafka's GroupInstanceId), null for a dynamic one."


def _instance_id(default: object = None) -> object:
    """The `instance_id` field, under Kafka's name on the wire."""
    return field(default=default, name="GroupInstanceId")


# One entry of a JoinGroup's Protocols: a name (for Connect, the assignor) and its metadata. The
# record's class, since a classic member of a connect group keeps them in its metadata (type 5 v2).
ClassicProtocol = ClassicMemberProtocol


class JoinGroupRequest(Message, omit_defaults=True, kw_only=True):
    """JoinGroup. Answered once the join phase completes: the request waits up to the group's rebalance
    timeout (the longest of its members'). `member_id` is empty on a member's first join (the coordinator
    gives it one); `protocols` by preference. RebalanceTimeoutMs -1 means the session timeout (Kafka's v0)."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[
        str, doc("The member id the coordinator gave; empty on the first join (MEMBER_ID_REQUIRED answers with one).")
    ] = ""
    protocol_type: Annotated[str, doc("The protocol type, the same for every member (Connect: connect).")]
    protocols: Annotated[tuple[ClassicProtocol, ...], doc("The protocols the member supports, by preference.")]
    session_timeout_ms: Annotated[Int32, doc("The member's session timeout in milliseconds.")]
    rebalance_timeout_ms: Annotated[
        Int32, doc("How long the coordinator waits for every member to join when rebalancing; -1: the session timeout.")
    ] = -1
    instance_id: Annotated[str | None, doc(_INSTANCE)] = _instance_id()
    reason: Annotated[str | None, doc("Why the member joins, for the logs.")] = None


class JoinGroupMember(Message):
    member_id: Annotated[str, doc("The member id.")]
    instance_id: Annotated[str | None, doc(_INSTANCE)] = _instance_id()
    metadata: Annotated[Base64, doc("Its metadata for the chosen protocol.")] = b""


class JoinGroupResponse(Message):
    """JoinGroup response: the generation, its protocol and leader; the members for the leader only.
    SkipAssignment: a static leader that came back to a stable group is leader again but must not
    assign."""

    error_code: Annotated[int, doc("The error code, or 0 if there was no error.")] = ErrorCode.NONE
    error_message: Annotated[str | None, doc("The error message, or null if there was no error.")] = None
    generation_id: Annotated[Int32, doc("The generation of the group; -1 with an error.")] = UNKNOWN_GENERATION
    protocol_type: Annotated[str | None, doc("The group's protocol type.")] = None
    protocol_name: Annotated[str | None, doc("The protocol the coordinator chose.")] = None
    leader: Annotated[str, doc("The leader's member id.")] = ""
    skip_assignment: Annotated[
        bool, doc("The leader must not compute assignments: a static leader came back to a stable group.")
    ] = False
    member_id: Annotated[str, doc("The member's id (with MEMBER_ID_REQUIRED: the one to join with).")] = ""
    members: Annotated[
        tuple[JoinGroupMember, ...], doc("Every member with its metadata, for the leader; empty for the others.")
    ] = ()


class SyncGroupAssignment(Message):
    member_id: Annotated[str, doc("The member id.")]
    assignment: Annotated[Base64, doc("Its assignment.")]


class SyncGroupRequest(Message, omit_defaults=True):
    """SyncGroup. The leader's carries every member's assignment; the others' wait for it."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[str, doc("The member id.")]
    generation_id: Annotated[Int32, doc("The generation the member joined.")]
    instance_id: Annotated[str | None, doc(_INSTANCE)] = _instance_id()
    protocol_type: Annotated[str | None, doc("The protocol type, checked when given.")] = None
    protocol_name: Annotated[str | None, doc("The protocol name, checked when given.")] = None
    assignments: Annotated[tuple[SyncGroupAssignment, ...], doc("The leader's assignments; empty for the others.")] = ()


class SyncGroupResponse(Message):
    """SyncGroup response: the member's assignment for the generation."""

    error_code: Annotated[int, doc("The error code, or 0 if there was no error.")] = ErrorCode.NONE
    error_message: Annotated[str | None, doc("The error message, or null if there was no error.")] = None
    protocol_type: Annotated[str | None, doc("The group's protocol type.")] = None
    protocol_name: Annotated[str | None, doc("The group's protocol.")] = None
    assignment: Annotated[Base64, doc("The member's assignment.")] = b""


class ClassicHeartbeatRequest(Message, omit_defaults=True):
    """Heartbeat of a classic member: REBALANCE_IN_PROGRESS tells it to join again."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[str, doc("The member id.")]
    generation_id: Annotated[Int32, doc("The generation the member is in.")]
    instance_id: Annotated[str | None, doc(_INSTANCE)] = _instance_id()


class LeaveMember(Message, omit_defaults=True):
    """One member leaving: by member id, or by instance id alone (Kafka's LeaveGroup v3+)."""

    member_id: Annotated[str, doc("The member id; empty to name a static member by its instance id.")] = ""
    instance_id: Annotated[str | None, doc(_INSTANCE)] = _instance_id()
    reason: Annotated[str | None, doc("Why it leaves, for the logs.")] = None


class LeaveGroupRequest(Message):
    """LeaveGroup: members leave at once (Kafka's v3+ batch)."""

    group_id: Annotated[str, doc("The group identifier.")]
    members: Annotated[tuple[LeaveMember, ...], doc("The members leaving.")]


class LeaveMemberResponse(Message):
    member_id: Annotated[str, doc("The member id.")]
    instance_id: Annotated[str | None, doc(_INSTANCE)] = _instance_id()
    error_code: Annotated[int, doc("This member's error code, or 0.")] = ErrorCode.NONE
    error_message: Annotated[str | None, doc("This member's error message, or null.")] = None


class LeaveGroupResponse(Message):
    error_code: Annotated[int, doc("The top-level error code, or 0 if there was no error.")] = ErrorCode.NONE
    error_message: Annotated[str | None, doc("The top-level error message, or null if there was no error.")] = None
    members: Annotated[tuple[LeaveMemberResponse, ...], doc("Each member's outcome.")] = ()
