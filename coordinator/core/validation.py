"""Request validation: seed 000 "Request Validation", and seed 003 where it adds rules.

Each check raises `ProtocolError(INVALID_REQUEST, ...)` naming the field, before a handler looks at
the state; `validate_assignment` is seed 000's "Assignment Validation" of what an assignor answered.
"""

from __future__ import annotations

from records import ConnectorsAndTasks

from coordinator.core.assignors import GroupAssignment, GroupSpec
from coordinator.core.items import Item, configured_work, describe
from coordinator.core.protocol import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ErrorCode,
    HeartbeatRequest,
    InstallAssignmentRequest,
    ProtocolError,
    SetConfigRequest,
    SetConnectorsRequest,
)

MAX_TASKS_PER_CONNECTOR = 100_000


def _invalid(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_REQUEST, message)


def check_heartbeat(r: HeartbeatRequest) -> None:
    _check_member_ids(r.group_id, r.member_id)
    if r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid(f"MemberEpoch must be >= {LEAVE_GROUP_STATIC_MEMBER_EPOCH}, got {r.member_epoch}")
    if r.instance_id is not None and not r.instance_id:
        raise _invalid("InstanceId, if provided, must be non-empty")
    if r.rebalance_timeout_ms == 0 or r.rebalance_timeout_ms < -1:
        raise _invalid(f"RebalanceTimeoutMs must be -1 (unchanged) or larger than zero, got {r.rebalance_timeout_ms}")
    if r.server_assignor is not None and r.client_assignors:
        raise _invalid("ServerAssignor and ClientAssignors cannot be used together")
    if r.server_assignor is not None and not r.server_assignor:
        raise _invalid("ServerAssignor, if provided, must be non-empty")
    for a in r.client_assignors or ():
        if not a.name:
            raise _invalid("Assignor.Name must be non-empty")
        if a.minimum_version < -1:
            raise _invalid(f"Assignor.MinimumVersion must be >= -1 (assignor {a.name!r})")
        if a.maximum_version < 0 or a.maximum_version < a.minimum_version:
            raise _invalid(f"Assignor.MaximumVersion must be >= 0 and >= Assignor.MinimumVersion (assignor {a.name!r})")
        if not a.minimum_version <= a.version <= a.maximum_version:
            raise _invalid(f"Assignor.Version must be within [MinimumVersion, MaximumVersion] (assignor {a.name!r})")
    if r.client_assignors and len({a.name for a in r.client_assignors}) != len(r.client_assignors):
        raise _invalid("ClientAssignors must not name an assignor twice")
    if r.topic_partitions is not None:
        raise _invalid(
            "TopicPartitions and ConnectorsAndTasks cannot be used together: a connect member owns connectors and tasks"
        )
    if r.owned is not None:
        _check_items(r.owned, "ConnectorsAndTasks")


def check_member_request(group_id: str, member_id: str, member_epoch: int) -> None:
    """PrepareAssignment and InstallAssignment come from a member at its current epoch."""
    _check_member_ids(group_id, member_id)
    if member_epoch < 0:
        raise _invalid(f"MemberEpoch must be >= 0, got {member_epoch}")


def check_install(r: InstallAssignmentRequest) -> None:
    check_member_request(r.group_id, r.member_id, r.member_epoch)
    if r.group_epoch < 0:
        raise _invalid(f"GroupEpoch must be >= 0, got {r.group_epoch}")
    seen = set()
    for m in r.members:
        if not m.member_id:
            raise _invalid("Members[].MemberId must be non-empty")
        if m.member_id in seen:
            raise _invalid(f"member {m.member_id} is listed twice")
        seen.add(m.member_id)
        if m.topic_partitions is not None or m.connectors_and_tasks is None:
            raise _invalid(f"member {m.member_id}: ConnectorsAndTasks must be set, and Partitions must not be")
        _check_items(m.connectors_and_tasks, f"member {m.member_id}")
    if r.scheduled_rebalance_delay_ms is not None and r.scheduled_rebalance_delay_ms < 0:
        raise _invalid("ScheduledRebalanceDelayMs must be >= 0")
    if r.deferred is not None:
        _check_items(r.deferred, "Deferred")


def check_group_id(group_id: str) -> None:
    """An admin request names a group (or one to create). Connectors and configuration are the
    same records for a classic group as for a connect group: both protocols read them."""
    if not group_id:
        raise _invalid("GroupId must be non-empty")


def check_set_connectors(r: SetConnectorsRequest) -> None:
    names = [c.name for c in r.connectors]
    if any(not n for n in names):
        raise _invalid("connector names must be non-empty")
    if len(set(names)) != len(names):
        raise _invalid("a connector is listed twice")
    for c in r.connectors:
        if not 0 <= c.tasks <= MAX_TASKS_PER_CONNECTOR:
            raise _invalid(f"connector {c.name}: Tasks must be within [0, {MAX_TASKS_PER_CONNECTOR}]")


def check_set_config(r: SetConfigRequest, min_timeout_ms: int) -> None:
    """The timeouts themselves; whether they fit together is checked against the defaults they
    fall back to (`GroupCoordinator.set_config`)."""
    for wire_name, value in (
        ("SessionTimeoutMs", r.session_timeout_ms),
        ("HeartbeatIntervalMs", r.heartbeat_interval_ms),
        ("RebalanceTimeoutMs", r.rebalance_timeout_ms),
    ):
        if value is not None and value < min_timeout_ms:
            raise _invalid(f"{wire_name} must be >= {min_timeout_ms} ms")
    for wire_name, delay in (
        ("ScheduledRebalanceMaxDelayMs", r.scheduled_rebalance_max_delay_ms),
        ("InitialAssignmentDelayMs", r.initial_assignment_delay_ms),
    ):
        if delay is not None and delay < 0:
            raise _invalid(f"{wire_name} must be >= 0")


def _check_member_ids(group_id: str, member_id: str) -> None:
    if not group_id:
        raise _invalid("GroupId must be non-empty")
    if not member_id:
        raise _invalid("MemberId must be non-empty")


def _check_items(value: ConnectorsAndTasks, field: str) -> None:
    if any(not c for c in value.connectors) or any(not t.connector for t in value.tasks):
        raise _invalid(f"{field}: connector names must be non-empty")
    if any(t.task < 0 for t in value.tasks):
        raise _invalid(f"{field}: task numbers start at 0")
    if len(set(value.connectors)) != len(value.connectors) or len(set(value.tasks)) != len(value.tasks):
        raise _invalid(f"{field} lists an item twice")


def validate_assignment(spec: GroupSpec, assignment: GroupAssignment) -> str | None:
    """Seed 000 "Assignment Validation", against the metadata the assignment was computed from:
    every configured item assigned exactly once (or deferred, DESIGN §5), only to members that
    existed, and a deferral always comes with a delay no longer than the group allows.

    Returns what is wrong (None: nothing): an invalid assignment is not a refused request, since
    answering it changes the state (the chosen member is asked again)."""
    members = {m.member_id for m in spec.members}
    unknown = sorted(set(assignment.members) - members)
    if unknown:
        return f"members {', '.join(unknown)} were not in the group at epoch {spec.group_epoch}"
    configured = configured_work(spec.connectors).items
    seen: dict[Item, str] = {}
    for member_id, given in assignment.members.items():
        for item in (*given.assignment.connectors, *given.assignment.tasks):
            if item in seen:
                return f"{item} is assigned twice (to {seen[item]} and {member_id})"
            seen[item] = member_id
    for item in (*assignment.deferred.connectors, *assignment.deferred.tasks):
        if item in seen:
            return f"{item} is both assigned (to {seen[item]}) and deferred"
        seen[item] = "deferred"
    extra = set(seen) - configured
    if extra:
        return f"not configured in the group: {describe(extra)}"
    missing = configured - set(seen)
    if missing and members:
        return f"not assigned: {describe(missing)}"
    delay = assignment.scheduled_rebalance_delay_ms
    deferred = assignment.deferred.connectors or assignment.deferred.tasks
    if deferred and not delay:
        return "deferred items need a ScheduledRebalanceDelayMs > 0"
    if delay and delay > spec.scheduled_rebalance_max_delay_ms:
        return (
            f"ScheduledRebalanceDelayMs {delay} exceeds the group's scheduled rebalance max delay "
            f"({spec.scheduled_rebalance_max_delay_ms} ms)"
        )
    return None
