"""The admin messages: a group's connectors and timeouts, its deletion, and what describe, list and
a connector's status answer."""

from __future__ import annotations

from dataclasses import dataclass

from records import Assignor, ConnectorsAndTasks, ConnectorTaskCount, Departure

__all__ = [
    "ConnectorStatus",
    "DeleteGroupRequest",
    "GroupDescription",
    "GroupListing",
    "ItemStatus",
    "MemberDescription",
    "SetConfigRequest",
    "SetConnectorsRequest",
]


@dataclass(slots=True, frozen=True)
class SetConnectorsRequest:
    group_id: str
    connectors: tuple[ConnectorTaskCount, ...]


@dataclass(slots=True, frozen=True)
class SetConfigRequest:
    """Per-group timeouts; None restores the server's default."""

    group_id: str
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    rebalance_timeout_ms: int | None = None
    scheduled_rebalance_max_delay_ms: int | None = None
    initial_assignment_delay_ms: int | None = None


@dataclass(slots=True, frozen=True)
class DeleteGroupRequest:
    group_id: str


@dataclass(slots=True, frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    url: str | None
    member_epoch: int
    state: str
    assignment: ConnectorsAndTasks
    pending_revocation: ConnectorsAndTasks
    target: ConnectorsAndTasks
    server_assignor: str | None
    client_assignors: tuple[Assignor, ...]
    protocol: str = "connect"  # or "classic": the protocol this member speaks


@dataclass(slots=True, frozen=True)
class GroupDescription:
    group_id: str
    group_epoch: int
    assignment_epoch: int
    state: str  # EMPTY, ASSIGNING, RECONCILING or STABLE
    assignor: str | None
    assignor_kind: str | None  # "server" or "client"
    connectors: tuple[ConnectorTaskCount, ...]
    members: tuple[MemberDescription, ...]
    deferred: ConnectorsAndTasks
    scheduled_rebalance_at_ms: int | None
    assignment_error: int
    assignment_error_message: str | None
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int | None
    scheduled_rebalance_max_delay_ms: int
    initial_assignment_delay_ms: int
    group_type: str = "connect"  # or "classic" (seed 004)
    generation: int | None = None  # a classic group's generation
    protocol_name: str | None = None  # the protocol a classic group chose
    leader: str | None = None  # a classic group's leader
    # Who the change that wrote `group_epoch` removed, and why (type 3 v1): the departures the
    # state holds. Earlier ones went with the epoch records after them (`coordinator replay`).
    departures: tuple[Departure, ...] = ()
    # While the group rebalances: since when (type 3 v2, record format level 2; None below it, or
    # when the group is not rebalancing).
    rebalancing_since_ms: int | None = None


@dataclass(slots=True, frozen=True)
class GroupListing:
    group_id: str
    group_epoch: int
    state: str
    members: int


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
