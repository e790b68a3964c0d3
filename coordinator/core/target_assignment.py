"""The target assignment: when it is needed, who computes it, and installing it (seed 000
"Target Assignment"; DESIGN §5 for departed and deferred work).

A new target is needed whenever the group epoch is ahead of the assignment epoch. A server-side
assignor computes it here, inside the handler that bumped the epoch (at most once per
`server_assignment_interval_ms`); otherwise a member is chosen to compute it, and the heartbeat
tells it so. Every function adds to a `GroupChange`; none touches the state.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec

from records import DepartedMember, MemberMetadataValue, TargetAssignmentMetadataValue

from coordinator.core.assignors import (
    ASSIGNORS,
    NO_ENTRY,
    AssignmentMember,
    AssignorEntry,
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
)
from coordinator.core.config import CoordinatorConfig
from coordinator.core.group_change import GroupChange
from coordinator.core.items import EMPTY, connectors_and_tasks, items_of
from coordinator.core.protocol import (
    ASSIGNMENT,
    ASSIGNMENT_RETRY,
    INITIAL_ASSIGNMENT,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    SCHEDULED_REBALANCE,
    SERVER_ASSIGNMENT,
    Timer,
    timer_key,
)
from coordinator.core.selection import CLIENT, SERVER, GroupAssignor, choose_member, entry, group_assignor
from coordinator.core.state import AssignmentComputation


def remove_member(change: GroupChange, member_id: str, now: int, reason: str) -> None:
    """A member leaves or is fenced (`reason`, a `LeaveReason`): tombstones for types 5, 7 and 8,
    and a new group epoch that says who left and why. Its part of the target is remembered as
    departed work, so that it may wait for its return."""
    member = change.member(member_id)
    target = change.target(member_id)
    change.remove_member(member_id, reason)
    if target is not None and (target.assignment.connectors or target.assignment.tasks):
        meta = change.target_meta() or TargetAssignmentMetadataValue(assignment_epoch=0)
        departed = tuple(d for d in meta.departed_members if d.member_id != member_id)
        instance_id = member.instance_id if member is not None else None
        departed += (DepartedMember(member_id, instance_id, target.assignment, now),)
        change.target_metadata = replace(meta, departed_members=departed)


def note_join(change: GroupChange, config: CoordinatorConfig, member: MemberMetadataValue, now: int) -> None:
    """A new member joins. An empty group starts waiting for more (the initial assignment delay);
    one still waiting waits a delay longer, but never longer in all than the joiner's rebalance
    timeout after the first join (Kafka's group.initial.rebalance.delay.ms, the same way)."""
    settings = config.for_group(change.group.config)
    delay = settings.initial_assignment_delay_ms
    if delay <= 0:
        return
    window = change.current_initial_window()
    if not change.group.members:
        change.initial_window = (now, now + delay)
    elif window is not None and now < window[1]:
        started = window[0]
        change.initial_window = (started, min(now + delay, started + settings.member_rebalance_timeout_ms(member)))


def assign_if_needed(change: GroupChange, config: CoordinatorConfig, now: int, prefer: str | None = None) -> None:
    """Group epoch ahead of the assignment epoch: compute the target here (server-side
    assignor) or make sure a member has been chosen to compute it (client-side); unless the group
    just got its first members and waits for more (`note_join`)."""
    if change.group_epoch <= change.assignment_epoch:
        return
    members = change.all_members()
    if not members:
        return  # nobody to assign to; the first member to join triggers the computation
    window = change.current_initial_window()
    if window is not None:
        if now < window[1]:
            change.timers.append(Timer(timer_key(INITIAL_ASSIGNMENT, change.group.group_id), window[1]))
            return
        change.initial_window = None
    chosen = group_assignor(members.values(), config.default_server_assignor)
    if chosen is None:
        return  # members disagree; the one that broke the group was refused, so this is transient
    if chosen.kind != SERVER:
        _ensure_computation(change, config, chosen.name, now, prefer)
        return
    if change.current_computation() is not None:
        # The group switched from a client-side assignor: nobody computes for it any more.
        change.computation = None
        change.timers.append(Timer(timer_key(ASSIGNMENT, change.group.group_id), None))
    not_before = change.server_assignment_not_before()
    if now < not_before:
        change.timers.append(Timer(timer_key(SERVER_ASSIGNMENT, change.group.group_id), not_before))
        return
    spec = group_spec(change, config, now, chosen)
    install(
        change, config, spec, ASSIGNORS[chosen.name].assign(spec), installed_by=None, assignor_name=chosen.name, now=now
    )
    if config.server_assignment_interval_ms:
        change.server_window = now + config.server_assignment_interval_ms


def _ensure_computation(
    change: GroupChange, config: CoordinatorConfig, name: str, now: int, prefer: str | None = None
) -> None:
    computation = change.current_computation()
    if computation is None:
        choose(change, config, name, frozenset(), prefer=prefer, now=now)
        return
    # The chosen member keeps the job while it still qualifies: members that joined since may
    # have widened the version ranges in use beyond what it can read.
    members = change.all_members()
    if (
        computation.member_id in members
        and choose_member(members, name, [computation.member_id], [computation.member_id]) == computation.member_id
    ):
        return
    choose(change, config, name, computation.excluded, prefer=computation.member_id, now=now)


def choose(
    change: GroupChange, config: CoordinatorConfig, name: str, excluded: frozenset[str], prefer: str | None, now: int
) -> None:
    """Choose the member that computes the target with the client-side assignor `name`, leaving
    out `excluded` (members that already failed to) unless nobody else can."""
    members = change.all_members()
    present = [m for m in members if change.current(m).member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH]
    meta = change.target_meta()
    preferred = (prefer, meta.installed_by if meta is not None else None)
    chosen = choose_member(members, name, [m for m in present if m not in excluded], preferred)
    if chosen is None and excluded:
        excluded = frozenset()  # everyone had a go: start over rather than never assign
        chosen = choose_member(members, name, present, preferred)
    key = timer_key(ASSIGNMENT, change.group.group_id)
    if chosen is None:
        change.computation = None
        change.timers.append(Timer(key, None))
        return
    settings = config.for_group(change.group.config)
    deadline = now + settings.member_rebalance_timeout_ms(members[chosen])
    change.computation = AssignmentComputation(chosen, deadline, excluded)
    change.timers.append(Timer(key, deadline))


def group_spec(change: GroupChange, config: CoordinatorConfig, now: int, assignor: GroupAssignor) -> GroupSpec:
    """The assignor's input: the group metadata at the change's group epoch and the current target."""
    spec_members = []
    members = change.all_members()
    for member_id in sorted(members):
        member = members[member_id]
        target = change.target(member_id)
        current = change.current(member_id)
        a = entry(member, assignor.name) if assignor.kind == CLIENT else None
        spec_members.append(
            AssignmentMember(
                member_id=member_id,
                instance_id=member.instance_id,
                member_epoch=current.member_epoch,
                target=target.assignment if target is not None else EMPTY,
                owned=current.assignment,
                assignor=AssignorEntry(a.minimum_version, a.maximum_version, a.version, a.reason, a.metadata)
                if a
                else NO_ENTRY,
            )
        )
    meta = change.target_meta()
    return GroupSpec(
        group_id=change.group.group_id,
        group_epoch=change.group_epoch,
        connectors=change.connector_counts(),
        members=tuple(spec_members),
        departed=meta.departed_members if meta is not None else (),
        deferred=meta.deferred if meta is not None else EMPTY,
        scheduled_rebalance_at_ms=meta.scheduled_rebalance_at_ms if meta is not None else None,
        scheduled_rebalance_max_delay_ms=config.for_group(change.group.config).scheduled_rebalance_max_delay_ms,
        now_ms=now,
    )


def install(
    change: GroupChange,
    config: CoordinatorConfig,
    spec: GroupSpec,
    assignment: GroupAssignment,
    installed_by: str | None,
    assignor_name: str,
    now: int,
) -> None:
    """Write a target assignment computed from `spec` (already validated)."""
    group_id = change.group.group_id
    meta = change.target_meta() or TargetAssignmentMetadataValue(assignment_epoch=0)
    change.timers.append(Timer(timer_key(ASSIGNMENT, group_id), None))
    change.timers.append(Timer(timer_key(SERVER_ASSIGNMENT, group_id), None))
    if change.current_computation() is not None:
        change.computation = None
    if assignment.error:
        # DESIGN §5: an assignor error keeps every member's assignment: the previous target is
        # stamped with the new epoch and the error, and the coordinator asks again later.
        change.target_metadata = replace(
            meta,
            assignment_epoch=spec.group_epoch,
            error=assignment.error,
            error_message=assignment.error_message,
            assignor_name=assignor_name,
            installed_by=installed_by,
        )
        change.timers.append(Timer(timer_key(ASSIGNMENT_RETRY, group_id), now + config.assignor_error_backoff_ms))
        return
    for member_id in change.all_members():
        given = assignment.members.get(member_id)
        value = given if given is not None else MemberAssignment(EMPTY)
        if change.target(member_id) != value:
            change.set_target(member_id, value)
    deferred = items_of(assignment.deferred)
    spec_departed = {(d.member_id, d.departed_at_ms) for d in spec.departed}
    departed = []
    for d in meta.departed_members:
        if (d.member_id, d.departed_at_ms) not in spec_departed:
            departed.append(d)  # left after the spec was taken: the assignor has not seen it
        elif still := items_of(d.assignment) & deferred:
            departed.append(msgspec.structs.replace(d, assignment=connectors_and_tasks(still)))
    delay = assignment.scheduled_rebalance_delay_ms
    at = now + delay if delay else None
    change.target_metadata = TargetAssignmentMetadataValue(
        assignment_epoch=spec.group_epoch,
        error=0,
        error_message=None,
        assignor_name=assignor_name,
        installed_by=installed_by,
        scheduled_rebalance_at_ms=at,
        deferred=assignment.deferred,
        departed_members=tuple(departed),
    )
    change.timers.append(Timer(timer_key(SCHEDULED_REBALANCE, group_id), at))
    change.timers.append(Timer(timer_key(ASSIGNMENT_RETRY, group_id), None))
