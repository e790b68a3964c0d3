"""Read views of the state: what describe and list answer. They write nothing."""

from __future__ import annotations

from coordinator.core.config import CoordinatorConfig
from coordinator.core.items import EMPTY
from coordinator.core.protocol import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    GroupDescription,
    GroupListing,
    MemberDescription,
    MemberState,
)
from coordinator.core.selection import group_assignor
from coordinator.core.state import ConnectGroup, CoordinatorState


def group_state(group: ConnectGroup) -> str:
    """EMPTY, ASSIGNING (the target is behind the group epoch), RECONCILING or STABLE."""
    if not group.members:
        return "EMPTY"
    if group.group_epoch > group.assignment_epoch:
        return "ASSIGNING"
    epoch = group.assignment_epoch
    for member_id in group.members:
        current = group.current(member_id)
        if current.member_epoch not in (epoch, LEAVE_GROUP_STATIC_MEMBER_EPOCH) or current.state != MemberState.STABLE:
            return "RECONCILING"
    return "STABLE"


def describe_group(state: CoordinatorState, config: CoordinatorConfig, group_id: str) -> GroupDescription | None:
    group = state.groups.get(group_id)
    if group is None:
        return None
    members = []
    for member_id in sorted(group.members):
        m = group.members[member_id]
        current = group.current(member_id)
        target = group.targets.get(member_id)
        members.append(MemberDescription(
            member_id, m.instance_id, m.client_id, m.client_host, m.url, current.member_epoch, current.state,
            current.assignment, current.pending_revocation, target.assignment if target else EMPTY,
            m.server_assignor, m.client_assignors))
    meta = group.target_metadata
    chosen = group_assignor(group.members.values(), config.default_server_assignor)
    settings = config.for_group(group.config)
    return GroupDescription(
        group_id=group_id, group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
        state=group_state(group), assignor=chosen.name if chosen else None,
        assignor_kind=chosen.kind if chosen else None, connectors=group.connector_counts, members=tuple(members),
        deferred=meta.deferred if meta else EMPTY,
        scheduled_rebalance_at_ms=meta.scheduled_rebalance_at_ms if meta else None,
        assignment_error=meta.error if meta else 0, assignment_error_message=meta.error_message if meta else None,
        session_timeout_ms=settings.session_timeout_ms, heartbeat_interval_ms=settings.heartbeat_interval_ms,
        rebalance_timeout_ms=settings.rebalance_timeout_ms,
        scheduled_rebalance_max_delay_ms=settings.scheduled_rebalance_max_delay_ms,
        initial_assignment_delay_ms=settings.initial_assignment_delay_ms)


def list_groups(state: CoordinatorState) -> list[GroupListing]:
    return [GroupListing(g.group_id, g.group_epoch, group_state(g), len(g.members))
            for g in sorted(state.groups.values(), key=lambda g: g.group_id)]
