"""The admin messages: a group's connectors and timeouts, its deletion, and what describe and list
answer. The status of one connector (`ConnectorStatus`) is the core's answer; over HTTP it takes Kafka
Connect's REST shape (`coordinator.api.wire.ConnectorStatus`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from records import ConnectorsAndTasks, ConnectorTaskCount, Departure
from records.constraints import Int8, Int32, Int64, doc

from coordinator.core.protocol.common import Message, leave_reason_text
from coordinator.core.states import ClassicGroupState, ClassicMemberState, ConnectGroupState, MemberState

__all__ = [
    "ConnectorStatus",
    "DeleteGroupRequest",
    "DescribedDeparture",
    "GroupDescription",
    "GroupListing",
    "GroupState",
    "ItemStatus",
    "MemberDescription",
    "SetConfigRequest",
    "SetConnectorsRequest",
]

_TIMEOUT = (
    "Milliseconds; null restores the server's default. Values below the server's minimum are "
    "INVALID_REQUEST (HTTP 200)."
)
_PATH_GROUP = "The group identifier: the path's; the server sets it, whatever the body says."


class SetConnectorsRequest(Message, omit_defaults=True):
    """The connectors the group runs. Creates the group if needed; bumps the group epoch when the set
    changes."""

    connectors: Annotated[tuple[ConnectorTaskCount, ...], doc("Every connector, with its task count.")]
    # The path names the group (PUT /v1/groups/{group_id}/connectors): the transport sets it. Last,
    # so that the body the SDK sends is Connectors alone.
    group_id: Annotated[str, doc(_PATH_GROUP)] = ""


class SetConfigRequest(Message, omit_defaults=True):
    """The group's timeouts; absent or null restores the server's default. HeartbeatIntervalMs must stay
    below SessionTimeoutMs (else INVALID_REQUEST at HTTP 200). Creates the group if needed."""

    # The path names the group (PUT /v1/groups/{group_id}/config): the transport sets it.
    group_id: Annotated[str, doc(_PATH_GROUP)] = ""
    session_timeout_ms: Annotated[Int32 | None, doc(f"The session timeout. {_TIMEOUT}")] = None
    heartbeat_interval_ms: Annotated[Int32 | None, doc(f"The heartbeat interval. {_TIMEOUT}")] = None
    rebalance_timeout_ms: Annotated[
        Int32 | None, doc(f"The rebalance timeout for every member (null: each member's own). {_TIMEOUT}")
    ] = None
    scheduled_rebalance_max_delay_ms: Annotated[
        Int32 | None,
        doc(
            "How long departed work waits for its owner (>= 0, else INVALID_REQUEST at HTTP 200); null restores the "
            "server's default."
        ),
    ] = None
    initial_assignment_delay_ms: Annotated[
        Int32 | None,
        doc(
            "How long an empty group that gets members waits for more before its first target, each join "
            "extending the wait up to a rebalance timeout (>= 0, else INVALID_REQUEST at HTTP 200; Kafka's "
            "group.initial.rebalance.delay.ms); null restores the server's default."
        ),
    ] = None


class DeleteGroupRequest(Message):
    group_id: str


# The state names on the wire are the enums' (`coordinator.core.states`), named there once.
_GROUP_STATES = tuple(dict.fromkeys([*(s.value for s in ConnectGroupState), *(s.described for s in ClassicGroupState)]))
_MEMBER_STATES = tuple(dict.fromkeys([*(s.value for s in MemberState), *(s.value for s in ClassicMemberState)]))

GroupState = Annotated[
    Literal[_GROUP_STATES],
    doc(
        "EMPTY: no members; ASSIGNING: the group epoch is ahead of the assignment epoch; RECONCILING: a member is "
        "not at its target yet; STABLE: every member owns its target at the assignment epoch. A classic group "
        "(seed 004) is EMPTY, PREPARING_REBALANCE (waiting for JoinGroups), COMPLETING_REBALANCE (waiting for the "
        "leader's SyncGroup) or STABLE."
    ),
]


class GroupListing(Message):
    """A group."""

    group_id: Annotated[str, doc("The group identifier.")]
    group_epoch: Annotated[Int32, doc("The group epoch.")]
    state: GroupState
    members: Annotated[Int32, doc("How many members it has.")]


class MemberDescription(Message):
    """A member of the group."""

    member_id: Annotated[str, doc("The member ID.")]
    instance_id: Annotated[str | None, doc("The member instance ID, or null.")]
    client_id: Annotated[
        str,
        doc(
            "The client id its heartbeats came with: the Client-Id header (the SDK sends its client's), Kafka's "
            "client.id over the Kafka listener, else the authenticated principal."
        ),
    ]
    client_host: Annotated[str, doc("The address its heartbeats came from.")]
    url: Annotated[str | None, doc("Where the worker's REST API listens, or null.")]
    member_epoch: Annotated[Int32, doc("The member epoch (a classic member: the group's generation).")]
    state: Annotated[
        Literal[_MEMBER_STATES],
        doc(
            "STABLE: owns its whole target; UNREVOKED: must give up PendingRevocation first; UNRELEASED: waits for "
            "others to release the rest of its target. A classic member is in seed 000's worker states: UNJOINED, "
            "PREPARING_REBALANCE (its JoinGroup waits), COMPLETING_REBALANCE (joined, waiting for its assignment) "
            "or STABLE."
        ),
    ]
    assignment: Annotated[ConnectorsAndTasks, doc("What it owns now (its current assignment).")]
    pending_revocation: Annotated[ConnectorsAndTasks, doc("What it must revoke before it moves on.")]
    target: Annotated[ConnectorsAndTasks, doc("Its part of the target assignment.")]
    protocol: Annotated[Literal["connect", "classic"], doc("The protocol the member speaks.")] = "connect"
    config_offset: Annotated[
        Int64 | None,
        doc(
            "A classic member's Kafka Connect config topic offset, as its JoinGroup metadata says; null for connect "
            "members and where the metadata cannot be read."
        ),
    ] = None
    note: Annotated[
        str | None, doc("Why what a classic member runs is not known (its bytes are not Kafka Connect's), else null.")
    ] = None


class DescribedDeparture(Departure):
    """A member the change that wrote the group epoch removed, and why, with the reason in words."""

    reason_text: Annotated[str, doc("The reason in words.")]

    @classmethod
    def of(cls, d: Departure) -> DescribedDeparture:
        return cls(d.member_id, d.instance_id, d.reason, leave_reason_text(d.reason))


class GroupDescription(Message):
    """A group: epochs, assignor, connectors, members and timeouts."""

    group_id: Annotated[str, doc("The group identifier.")]
    group_epoch: Annotated[Int32, doc("The group epoch.")]
    assignment_epoch: Annotated[Int32, doc("The epoch of the current target assignment.")]
    state: GroupState
    assignor: Annotated[
        str | None, doc("The assignor the group uses, or null when its members share no client-side assignor.")
    ]
    assignor_kind: Annotated[Literal["server", "client"] | None, doc("Where the assignor runs, or null.")]
    connectors: Annotated[tuple[ConnectorTaskCount, ...], doc("The connectors the group runs, and their task counts.")]
    members: Annotated[tuple[MemberDescription, ...], doc("By member id.")]
    deferred: Annotated[ConnectorsAndTasks, doc("Items the current target deferred.")]
    scheduled_rebalance_at_ms: Annotated[
        Int64 | None, doc("When the coordinator rebalances for the deferred items (ms since the epoch), or null.")
    ]
    assignment_error: Annotated[Int8, doc("The error of the last installed assignment (the assignor's), 0 for none.")]
    assignment_error_message: Annotated[str | None, doc("Its message, or null.")]
    session_timeout_ms: Annotated[Int32, doc("The group's session timeout.")]
    heartbeat_interval_ms: Annotated[Int32, doc("The group's heartbeat interval.")]
    rebalance_timeout_ms: Annotated[
        Int32 | None, doc("The group's rebalance timeout, or null: each member's own RebalanceTimeoutMs.")
    ]
    scheduled_rebalance_max_delay_ms: Annotated[Int32, doc("How long departed work waits for its owner.")]
    initial_assignment_delay_ms: Annotated[
        Int32, doc("How long an empty group that gets members waits for more before its first target.")
    ]
    group_type: Annotated[Literal["connect", "classic"], doc("The protocol the group runs.")] = "connect"
    generation: Annotated[Int32 | None, doc("A classic group's generation, else null.")] = None
    protocol_name: Annotated[str | None, doc("The protocol a classic group chose, else null.")] = None
    leader: Annotated[str | None, doc("A classic group's leader, else null.")] = None
    # Who the change that wrote `group_epoch` removed, and why (type 3 v1): the departures the
    # state holds. Earlier ones went with the epoch records after them (`coordinator replay`).
    departures: Annotated[
        tuple[DescribedDeparture, ...],
        doc(
            "The members the change that wrote GroupEpoch removed, and why; empty when it removed none (a join, new "
            "connectors, a scheduled rebalance). Earlier departures: `coordinator replay timeline`."
        ),
    ] = ()
    rebalancing_since_ms: Annotated[
        int | None,
        doc(
            "While the group rebalances, when the rebalance began (ms since the epoch), from its epoch record at "
            "record format level 2 and above; null otherwise."
        ),
    ] = None
    # Where it is served: filled by the transport that answers (the core does not know its URL).
    coordinator: Annotated[
        str | None,
        doc("The base URL of the coordinator serving the group (the one that answered), or null where unknown."),
    ] = None
    partition: Annotated[
        Int32 | None,
        doc("The partition of the topic the group lives in (murmur2(GroupId) % partitions), or null where unknown."),
    ] = None
    # Only describe's HTTP answer is ever an error: 0 here, the error alone otherwise.
    error_code: Annotated[Literal[0], doc("0: no error.")] = 0


@dataclass(slots=True, frozen=True)
class ItemStatus:
    """A connector's or a task's place: its state, the member holding it (None when UNASSIGNED),
    that member's instance id, and when the coordinator rebalances for it if it is deferred."""

    state: str
    member_id: str | None = None
    instance_id: str | None = None
    deferred_until_ms: int | None = None


@dataclass(slots=True, frozen=True)
class ConnectorStatus:
    """A connector of a group and its tasks (by task number), as Kafka Connect's status shows them."""

    group_id: str
    name: str
    connector: ItemStatus
    tasks: tuple[tuple[int, ItemStatus], ...]
