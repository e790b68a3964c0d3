"""Read views of the state: what describe and list answer. They write nothing."""

from __future__ import annotations

from records import TaskId

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.classic.holdings import live_member_holdings, worker_identity
from coordinator.core.classic.migration import settled
from coordinator.core.config import CoordinatorConfig
from coordinator.core.items import EMPTY
from coordinator.core.protocol import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConnectorStatus,
    DescribedDeparture,
    ErrorCode,
    ErrorResponse,
    GroupDescription,
    GroupListing,
    ItemStatus,
    MemberDescription,
)
from coordinator.core.selection import group_assignor
from coordinator.core.state import ConnectGroup, CoordinatorState
from coordinator.core.states import ClassicMemberState, ConnectGroupState, MemberState, TaskStatus


def group_state(group: ConnectGroup) -> ConnectGroupState:
    """EMPTY, ASSIGNING (the target is behind the group epoch), RECONCILING or STABLE."""
    if not group.members:
        return ConnectGroupState.EMPTY
    if group.group_epoch > group.assignment_epoch:
        return ConnectGroupState.ASSIGNING
    epoch = group.assignment_epoch
    for member_id in group.members:
        current = group.current(member_id)
        if current.member_epoch not in (epoch, LEAVE_GROUP_STATIC_MEMBER_EPOCH) or current.state != MemberState.STABLE:
            return ConnectGroupState.RECONCILING
    return ConnectGroupState.STABLE


def rebalance_converged(group: ConnectGroup | None) -> bool:
    """Whether a rebalance of the group (from an epoch bump) has ended: the group is STABLE, or
    empty with nobody still holding work, or gone. The one definition of the live
    `coordinator_rebalance_duration_seconds` and of `replay.history`'s rebalances, so the two agree."""
    if group is None:
        return True
    state = group_state(group)
    return state is ConnectGroupState.STABLE or (state is ConnectGroupState.EMPTY and not group.currents)


def describe_group(state: CoordinatorState, config: CoordinatorConfig, group_id: str) -> GroupDescription | None:
    group = state.groups.get(group_id)
    classic = state.classic_groups.get(group_id)
    if classic is not None and (group is None or not group.members):
        return _describe_classic(classic, group, config)
    if group is None:
        return None
    members = []
    for member_id in sorted(group.members):
        m = group.members[member_id]
        current = group.current(member_id)
        target = group.targets.get(member_id)
        # A classic member (seed 000's migration) shows its worker state: joining again or stable.
        state = (
            current.state
            if m.classic_member_metadata is None
            else (ClassicMemberState.STABLE if settled(group, member_id) else ClassicMemberState.PREPARING_REBALANCE)
        )
        fields = (
            member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.url,
            current.member_epoch,
            state,
            current.assignment,
            current.pending_revocation,
            target.assignment if target else EMPTY,
        )
        if m.classic_member_metadata is None:
            members.append(MemberDescription(*fields, "connect"))
            continue
        # A translated member: what it runs is its current assignment, as for everyone; who it is
        # (URL, config offset) its last JoinGroup said.
        protocols = m.classic_member_metadata.protocols
        url, config_offset = worker_identity(protocols[0].metadata) if protocols else (None, None)
        members.append(
            MemberDescription(*fields[:4], m.url or url, *fields[5:], "classic", config_offset=config_offset)
        )
    meta = group.target_metadata
    chosen = group_assignor(group.members.values(), config.default_server_assignor)
    settings = config.for_group(group.config)
    return GroupDescription(
        group_id=group_id,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        state=group_state(group),
        assignor=chosen.name if chosen else None,
        assignor_kind=chosen.kind if chosen else None,
        connectors=group.connector_counts,
        members=tuple(members),
        deferred=meta.deferred if meta else EMPTY,
        scheduled_rebalance_at_ms=meta.scheduled_rebalance_at_ms if meta else None,
        assignment_error=meta.error if meta else 0,
        assignment_error_message=meta.error_message if meta else None,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        rebalance_timeout_ms=settings.rebalance_timeout_ms,
        scheduled_rebalance_max_delay_ms=settings.scheduled_rebalance_max_delay_ms,
        initial_assignment_delay_ms=settings.initial_assignment_delay_ms,
        departures=tuple(map(DescribedDeparture.of, group.metadata.departures)) if group.metadata is not None else (),
        rebalancing_since_ms=(
            None if group.metadata is None or rebalance_converged(group) else group.metadata.rebalance_started_ms
        ),
    )


def _describe_classic(classic: ClassicGroup, group: ConnectGroup | None, config: CoordinatorConfig) -> GroupDescription:
    """A classic group: its generation and leader, each member in seed 000's worker states, and
    what it runs by Connect's rule (`classic_holdings`): its URL and config offset from its
    metadata. A worker runs what it runs: nothing is shown as being revoked, and its target is
    what it runs."""
    members = []
    for member_id in sorted(classic.members):
        m = classic.members[member_id]
        held = live_member_holdings(classic, m)
        members.append(
            MemberDescription(
                member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                held.url,
                classic.generation,
                classic.member_state(member_id),
                held.runs,
                EMPTY,
                held.runs,
                protocol="classic",
                config_offset=held.config_offset,
                note=held.note,
            )
        )
    settings = config.for_group(group.config if group is not None else None)
    return GroupDescription(
        group_id=classic.group_id,
        group_epoch=classic.generation,
        assignment_epoch=classic.generation,
        state=classic.state.described,
        assignor=classic.protocol,
        assignor_kind="client" if classic.protocol else None,
        connectors=group.connector_counts if group is not None else (),
        members=tuple(members),
        deferred=EMPTY,
        scheduled_rebalance_at_ms=None,
        assignment_error=0,
        assignment_error_message=None,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        rebalance_timeout_ms=settings.rebalance_timeout_ms,
        scheduled_rebalance_max_delay_ms=settings.scheduled_rebalance_max_delay_ms,
        initial_assignment_delay_ms=settings.initial_assignment_delay_ms,
        group_type="classic",
        generation=classic.generation,
        protocol_name=classic.protocol,
        leader=classic.leader,
    )


def list_groups(state: CoordinatorState) -> list[GroupListing]:
    listed = {
        g.group_id: GroupListing(g.group_id, g.group_epoch, group_state(g), len(g.members))
        for g in state.groups.values()
    }
    for g in state.classic_groups.values():
        connect = state.groups.get(g.group_id)
        if connect is None or not connect.members:
            listed[g.group_id] = GroupListing(g.group_id, g.generation, g.state.described, len(g.members))
    return [listed[g] for g in sorted(listed)]


def connector_status(
    state: CoordinatorState, config: CoordinatorConfig, group_id: str, connector: str
) -> ConnectorStatus | ErrorResponse:
    """Where a connector of the group and each of its tasks is (`protocol.ConnectorStatus`), from
    describe's view of the group, so a classic group answers too: ASSIGNED to the member that owns
    it, REVOKING while its owner gives it up and nobody else holds it, else UNASSIGNED, with the
    time of the scheduled rebalance when the target deferred it. The tasks are the configured ones,
    and any a member still holds or revokes beyond them. GROUP_ID_NOT_FOUND, or UNKNOWN_CONNECTOR
    when the group neither runs nor holds the connector."""
    described = describe_group(state, config, group_id)
    if described is None:
        return ErrorResponse(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
    owned: dict = {}
    revoking: dict = {}
    for m in described.members:
        for items, into in ((m.assignment, owned), (m.pending_revocation, revoking)):
            for item in (*items.connectors, *items.tasks):
                into.setdefault(item, m)
    tasks = {t.task for held in (owned, revoking) for t in held if not isinstance(t, str) and t.connector == connector}
    configured = next((c.tasks for c in described.connectors if c.name == connector), None)
    if configured is None and connector not in owned and connector not in revoking and not tasks:
        return ErrorResponse(ErrorCode.UNKNOWN_CONNECTOR, f"group {group_id} runs no connector {connector}")
    deferred = set(described.deferred.connectors) | set(described.deferred.tasks)

    def place(item: object) -> ItemStatus:
        for held, status in ((owned, TaskStatus.ASSIGNED), (revoking, TaskStatus.REVOKING)):
            m = held.get(item)
            if m is not None:
                return ItemStatus(status, m.member_id, m.instance_id)
        return ItemStatus(
            TaskStatus.UNASSIGNED, deferred_until_ms=described.scheduled_rebalance_at_ms if item in deferred else None
        )

    numbers = sorted(tasks | set(range(configured or 0)))
    return ConnectorStatus(
        group_id, connector, place(connector), tuple((n, place(TaskId(connector, n))) for n in numbers)
    )
