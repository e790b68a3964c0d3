"""The classic protocol's handlers (seed 004): JoinGroup, SyncGroup, Heartbeat and LeaveGroup,
sans-I/O like the connect protocol's, in the manner of Kafka's classic group coordinator.

Theory of operation
-------------------
A rebalance has two phases. In the join phase (`PreparingRebalance`) every member sends JoinGroup
and waits: its request is *parked* (`Parked`), and answered when every known member has joined or
the longest rebalance timeout has passed, whichever comes first; members that did not join by then
are removed. Completing the phase starts a new generation, chooses the protocol every member
supports by vote and a leader, writes the generation (seed 004's "generation metadata is
persisted") and answers the parked JoinGroups, the leader's with every member's metadata. In the
sync phase (`CompletingRebalance`) the leader sends everyone's assignment in its SyncGroup; the
others' SyncGroups wait for it. The assignments are written ("sync metadata is persisted") and the
group is `Stable`. Members heartbeat meanwhile; REBALANCE_IN_PROGRESS tells them to join again.

What starts a rebalance: a new member, a member that joins again with other metadata (or the
leader, which joins to assign again), a departure (LeaveGroup, session timeout, a leader that did
not sync in time), and a change of the group's connectors, which the coordinator knows here, where
Connect's leader reads them from its config topic.

Every handler returns the group as it leaves it in a volatile `ClassicGroupUpdate`, with the type
2 record when the change must survive a failover: a completed join, the leader's sync, a departure,
a static member replaced. A join that only starts a round writes nothing: after a failover the
members' parked requests fail and they join again (seed 004, coordinator failures, case 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from coordinator.core import record_helpers
from coordinator.core.classic_group import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    ClassicGroupUpdate,
    ClassicMember,
)
from coordinator.core.config import CoordinatorConfig
from coordinator.core.protocol import (
    CLASSIC_JOIN,
    CLASSIC_SESSION,
    CLASSIC_SYNC,
    JOIN,
    SYNC,
    ClassicHeartbeatRequest,
    ErrorCode,
    ErrorResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    Parked,
    ParkKey,
    ProtocolError,
    RequestContext,
    Result,
    SyncGroupRequest,
    SyncGroupResponse,
    Timer,
    timer_key,
)
from coordinator.core.state import CoordinatorState

# Kafka's group.max.session.timeout.ms default: a member may not ask for a longer session.
MAX_SESSION_TIMEOUT_MS = 1_800_000


@dataclass(slots=True)
class ClassicChange:
    """A handler's pending change to one classic group: the group as it will be, whether to write
    it, the timers and the answers to parked requests."""

    group: ClassicGroup
    now: int
    initial_delay_ms: int = 0  # the group's initial assignment delay (its type 9 record, else the server's)
    persist: bool = False
    timers: list[Timer] = field(default_factory=list)
    deliveries: list[tuple[ParkKey, object]] = field(default_factory=list)

    def result(self, response: object) -> Result:
        group = self.group
        records = []
        if self.persist:
            value = group.to_record(self.now)
            group = replace(group, record=value)
            records.append(record_helpers.classic_group(group.group_id, value))
        return Result(response, records, self.timers, [ClassicGroupUpdate(group.group_id, group)],
                      self.deliveries)

    def timer(self, kind: str, deadline_ms: int | None, member_id: str | None = None) -> None:
        self.timers.append(Timer(timer_key(kind, self.group.group_id, member_id), deadline_ms))

    def deliver(self, kind: str, member_id: str, response: object) -> None:
        self.deliveries.append(((kind, self.group.group_id, member_id), response))

    def answer_waiting(self, member: ClassicMember, code: ErrorCode, message: str, *, sync_only: bool = False
                       ) -> None:
        """Answer `member`'s JoinGroup and SyncGroup that still wait with an error."""
        if member.joined and not sync_only:
            self.deliver(JOIN, member.member_id, JoinGroupResponse(code, message, member_id=member.member_id))
        if member.synced:
            self.deliver(SYNC, member.member_id, SyncGroupResponse(code, message))

    def set_state(self, state: str, **changes: object) -> None:
        self.group = replace(self.group, state=state, **changes)

    def set_members(self, members: dict[str, ClassicMember], **changes: object) -> None:
        self.group = self.group.with_members(members, **changes)


# --- JoinGroup ----------------------------------------------------------------------------------


def join_group(state: CoordinatorState, config: CoordinatorConfig, request: JoinGroupRequest, now: int,
               context: RequestContext) -> Result:
    _check_join(request, config)
    g = request.group_id
    connect = state.groups.get(g)  # a connect group with members is `classic_translation`'s
    # A new classic group continues from the group's epoch (its connectors and configuration may
    # have written some): a group's version never goes back, whatever protocol it speaks.
    group = state.classic_groups.get(g) or ClassicGroup(g, generation=connect.group_epoch if connect else 0)
    if group.members and request.protocol_type != group.protocol_type:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"group {g} has ProtocolType {group.protocol_type!r}, not {request.protocol_type!r}")
    settings = config.for_group(connect.config if connect is not None else None)
    member_id = request.member_id
    others = group.with_members({m: v for m, v in group.members.items() if m != member_id})
    if others.members and not {p.name for p in request.protocols} & others.candidate_protocols():
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"none of the protocols offered ({', '.join(p.name for p in request.protocols)}) is "
                            f"supported by every member of group {g}")
    change = ClassicChange(group, now, settings.initial_assignment_delay_ms)
    if not member_id:
        holder = group.member_with_instance(request.instance_id) if request.instance_id is not None else None
        if holder is not None:
            return _static_return(change, request, context, holder)
        if not context.fresh_id:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, "no member id could be made for this JoinGroup")
        member_id = context.fresh_id
        if request.instance_id is None:
            # Kafka's KIP-394: a dynamic member first learns its id, then joins with it, so that
            # a join whose answer is lost never leaves an unknown member behind.
            change.group = replace(group, pending=group.pending | {member_id})
            return change.result(JoinGroupResponse(
                ErrorCode.MEMBER_ID_REQUIRED, "join again with this member id", member_id=member_id))
    elif member_id not in group.members:
        if member_id not in group.pending:
            raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {g} has no member {member_id}")
    else:
        _check_instance(group.members[member_id], request.instance_id)
    return _join(change, request, context, member_id)


def _check_join(r: JoinGroupRequest, config: CoordinatorConfig) -> None:
    if not r.group_id:
        raise ProtocolError(ErrorCode.INVALID_GROUP_ID, "GroupId must be non-empty")
    if r.instance_id is not None and not r.instance_id:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "GroupInstanceId, if provided, must be non-empty")
    if not r.protocol_type or not r.protocols:
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "ProtocolType and Protocols must be non-empty")
    names = [p.name for p in r.protocols]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "Protocols must have distinct non-empty names")
    if not config.min_timeout_ms <= r.session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
        raise ProtocolError(ErrorCode.INVALID_SESSION_TIMEOUT,
                            f"SessionTimeoutMs must be within [{config.min_timeout_ms}, {MAX_SESSION_TIMEOUT_MS}]")
    if r.rebalance_timeout_ms != -1 and r.rebalance_timeout_ms < config.min_timeout_ms:
        raise ProtocolError(ErrorCode.INVALID_REQUEST,
                            f"RebalanceTimeoutMs must be -1 (the session timeout) or at least {config.min_timeout_ms}")


def _check_instance(member: ClassicMember, instance_id: str | None) -> None:
    if instance_id is not None and member.instance_id != instance_id:
        raise ProtocolError(ErrorCode.FENCED_INSTANCE_ID,
                            f"member {member.member_id} is not instance {instance_id}")


def _member(old: ClassicMember | None, r: JoinGroupRequest, context: RequestContext, member_id: str) -> ClassicMember:
    return ClassicMember(
        member_id=member_id, instance_id=r.instance_id if r.instance_id is not None else (
            old.instance_id if old is not None else None),
        client_id=context.principal or (old.client_id if old else ""),
        client_host=context.client_host or (old.client_host if old else ""),
        rebalance_timeout_ms=r.session_timeout_ms if r.rebalance_timeout_ms == -1 else r.rebalance_timeout_ms,
        session_timeout_ms=r.session_timeout_ms, protocols=r.protocols,
        assignment=old.assignment if old is not None else b"", joined=True)


def _join(change: ClassicChange, request: JoinGroupRequest, context: RequestContext, member_id: str) -> Result:
    group = change.group
    old = group.members.get(member_id)
    member = _member(old, request, context, member_id)
    members = dict(group.members)
    members[member_id] = member
    change.set_members(members, pending=group.pending - {member_id},
                       protocol_type=group.protocol_type or request.protocol_type)
    # A follower that joins again with what it had in a stable group (or one waiting for the
    # leader's assignments) gets this generation back: nothing changed that needs a rebalance.
    unchanged = old is not None and old.protocols == member.protocols and group.leader != member_id
    if group.state in (STABLE, COMPLETING_REBALANCE) and unchanged:
        members[member_id] = replace(member, joined=False)
        change.set_members(members)
        change.timer(CLASSIC_SESSION, change.now + member.session_timeout_ms, member_id)
        return change.result(_join_response(change.group, member_id))
    if change.group.state != PREPARING_REBALANCE:
        _prepare_rebalance(change)
    else:
        _extend_initial_round(change)
    # While its JoinGroup waits, the member does not heartbeat: its session waits too.
    change.timer(CLASSIC_SESSION, None, member_id)
    _maybe_complete_join(change)
    if change.group.state == PREPARING_REBALANCE:
        # A member asking again replaces its waiting request (which is told to join again).
        if old is not None and old.joined:
            change.deliver(JOIN, member_id, JoinGroupResponse(
                ErrorCode.REBALANCE_IN_PROGRESS, "replaced by a newer JoinGroup of the same member",
                member_id=member_id))
        return change.result(Parked((JOIN, change.group.group_id, member_id)))
    # The join completed with this request: its answer is among the deliveries (where it also
    # reaches an earlier JoinGroup of this member, if one still waits).
    key = (JOIN, change.group.group_id, member_id)
    return change.result(next(r for k, r in change.deliveries if k == key))


def _static_return(change: ClassicChange, request: JoinGroupRequest, context: RequestContext, holder: str) -> Result:
    """A static member comes back with a new member id (Kafka's static membership, KIP-345): it
    takes the old member's place. The old id is fenced; its waiting requests are answered so."""
    group = change.group
    new_id = context.fresh_id
    if not new_id:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "no member id could be made for this JoinGroup")
    old = group.members[holder]
    members = {m: v for m, v in group.members.items() if m != holder}
    members[new_id] = replace(old, member_id=new_id, joined=False, synced=False)
    leader = new_id if group.leader == holder else group.leader
    change.set_members(members, leader=leader)
    change.timer(CLASSIC_SESSION, None, holder)
    change.answer_waiting(old, ErrorCode.FENCED_INSTANCE_ID,
                          f"instance {old.instance_id} joined again as member {new_id}")
    offered = {p.name: p.metadata for p in request.protocols}
    if group.state == STABLE and offered.get(group.protocol or "") == old.metadata(group.protocol):
        # Back with the same metadata in a stable group: no rebalance. It keeps its assignment,
        # and if it led the group it is told so but must not assign (SkipAssignment).
        change.persist = True
        change.timer(CLASSIC_SESSION, change.now + old.session_timeout_ms, new_id)
        response = _join_response(change.group, new_id)
        return change.result(replace(response, members=(), skip_assignment=leader == new_id))
    request = replace(request, member_id=new_id)
    return _join(change, request, context, new_id)


def _join_response(group: ClassicGroup, member_id: str) -> JoinGroupResponse:
    leader = group.leader == member_id
    members = tuple(JoinGroupMember(m.member_id, m.instance_id, m.metadata(group.protocol))
                    for m in sorted(group.members.values(), key=lambda m: m.member_id)) if leader else ()
    return JoinGroupResponse(ErrorCode.NONE, None, group.generation, group.protocol_type, group.protocol,
                             group.leader or "", False, member_id, members)


def _prepare_rebalance(change: ClassicChange) -> None:
    """Start a join phase. SyncGroups waiting for the leader are told to join again."""
    group = change.group
    if group.state == COMPLETING_REBALANCE:
        for member in group.members.values():
            change.answer_waiting(member, ErrorCode.REBALANCE_IN_PROGRESS, "the group is rebalancing again: join again",
                                  sync_only=True)
        change.timer(CLASSIC_SYNC, None)
    members = {m: replace(v, synced=False) for m, v in group.members.items()}
    timeout = change.group.rebalance_timeout_ms()
    if group.state == EMPTY:
        delay = change.initial_delay_ms
        deadline = change.now + min(delay, timeout)
        change.set_members(members, initial_round_started_ms=change.now if delay else None)
    else:
        deadline = change.now + timeout
        change.set_members(members, initial_round_started_ms=None)
    change.set_state(PREPARING_REBALANCE, join_deadline_ms=deadline)
    change.timer(CLASSIC_JOIN, deadline)


def _extend_initial_round(change: ClassicChange) -> None:
    """A join during an empty group's first round waits for more, up to the rebalance timeout."""
    group = change.group
    started = group.initial_round_started_ms
    if started is None or group.join_deadline_ms is None:
        return
    deadline = min(change.now + change.initial_delay_ms, started + group.rebalance_timeout_ms())
    if deadline > group.join_deadline_ms:
        change.group = replace(group, join_deadline_ms=deadline)
        change.timer(CLASSIC_JOIN, deadline)


def _maybe_complete_join(change: ClassicChange) -> None:
    """The join phase ends as soon as every member has joined, except in an empty group's first
    round, which waits out its delay for members not known yet."""
    group = change.group
    if group.state == PREPARING_REBALANCE and group.all_joined() and group.initial_round_started_ms is None:
        _complete_join(change)


def _complete_join(change: ClassicChange) -> None:
    """A new generation of whoever joined; members that did not are removed."""
    group = change.group
    gone = [m for m, v in group.members.items() if not v.joined]
    for member_id in gone:
        change.timer(CLASSIC_SESSION, None, member_id)
    members = {m: replace(v, joined=False, synced=False, assignment=b"")
               for m, v in group.members.items() if v.joined}
    change.timer(CLASSIC_JOIN, None)
    change.persist = True
    generation = group.generation + 1
    if not members:
        change.set_members({}, generation=generation, protocol=None, leader=None, join_deadline_ms=None,
                           initial_round_started_ms=None, pending=frozenset())
        change.set_state(EMPTY)
        return
    leader = group.leader if group.leader in members else next(iter(members))
    joined = group.with_members(members)
    change.set_members(members, generation=generation, protocol=joined.select_protocol(), leader=leader,
                       join_deadline_ms=None, initial_round_started_ms=None, pending=frozenset())
    change.set_state(COMPLETING_REBALANCE)
    for member_id, member in members.items():
        change.deliver(JOIN, member_id, _join_response(change.group, member_id))
        change.timer(CLASSIC_SESSION, change.now + member.session_timeout_ms, member_id)
    change.timer(CLASSIC_SYNC, change.now + change.group.rebalance_timeout_ms())


# --- SyncGroup ------------------------------------------------------------------------------------


def sync_group(state: CoordinatorState, config: CoordinatorConfig, request: SyncGroupRequest, now: int) -> Result:
    group = _group_member(state, request.group_id, request.member_id, request.instance_id)
    if group.state == PREPARING_REBALANCE:
        raise ProtocolError(ErrorCode.REBALANCE_IN_PROGRESS, "the group is rebalancing: join again")
    if request.generation_id != group.generation:
        raise ProtocolError(ErrorCode.ILLEGAL_GENERATION,
                            f"generation {request.generation_id} is not the group's ({group.generation})")
    if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol):
        raise ProtocolError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"group {group.group_id} uses {group.protocol_type}/{group.protocol}")
    member = group.members[request.member_id]
    if group.state == STABLE:
        return Result(_sync_response(group, member))
    # CompletingRebalance: the leader's SyncGroup completes the generation; the others wait for it.
    change = ClassicChange(group, now)
    members = dict(group.members)
    if request.member_id != group.leader:
        members[request.member_id] = replace(member, synced=True)
        change.set_members(members)
        return change.result(Parked((SYNC, group.group_id, request.member_id)))
    given = {a.member_id: a.assignment for a in request.assignments}
    unknown = sorted(set(given) - set(members))
    if unknown:
        raise ProtocolError(ErrorCode.INVALID_REQUEST,
                            f"assignments for members not in generation {group.generation}: {', '.join(unknown)}")
    members = {m: replace(v, assignment=given.get(m, b""), synced=False) for m, v in members.items()}
    change.set_members(members)
    change.set_state(STABLE)
    change.persist = True
    change.timer(CLASSIC_SYNC, None)
    for member_id, was in group.members.items():
        if was.synced:
            change.deliver(SYNC, member_id, _sync_response(change.group, members[member_id]))
    return change.result(_sync_response(change.group, members[request.member_id]))


def _sync_response(group: ClassicGroup, member: ClassicMember) -> SyncGroupResponse:
    return SyncGroupResponse(ErrorCode.NONE, None, group.protocol_type, group.protocol, member.assignment)


def _group_member(state: CoordinatorState, group_id: str, member_id: str, instance_id: str | None) -> ClassicGroup:
    group = state.classic_groups.get(group_id)
    if group is None or group.state == EMPTY or member_id not in group.members:
        raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
    _check_instance(group.members[member_id], instance_id)
    return group


# --- Heartbeat ------------------------------------------------------------------------------------


def heartbeat(state: CoordinatorState, config: CoordinatorConfig, request: ClassicHeartbeatRequest, now: int
              ) -> Result:
    group = _group_member(state, request.group_id, request.member_id, request.instance_id)
    member = group.members[request.member_id]
    timers = [Timer(timer_key(CLASSIC_SESSION, group.group_id, member.member_id), now + member.session_timeout_ms)]
    # While the group rebalances a member's generation does not matter: it joins again, and keeps
    # its work meanwhile (a member that a downgrade brought back, say, has its connect epoch).
    if group.state == PREPARING_REBALANCE:
        return Result(ErrorResponse(ErrorCode.REBALANCE_IN_PROGRESS, "the group is rebalancing: join again"),
                      timers=timers)
    if request.generation_id != group.generation:
        raise ProtocolError(ErrorCode.ILLEGAL_GENERATION,
                            f"generation {request.generation_id} is not the group's ({group.generation})")
    return Result(ErrorResponse(), timers=timers)


# --- LeaveGroup and departures ----------------------------------------------------------------


def leave_group(state: CoordinatorState, config: CoordinatorConfig, request: LeaveGroupRequest, now: int) -> Result:
    if not request.members:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "LeaveGroup names no member")
    group = state.classic_groups.get(request.group_id)
    if group is None or group.state == EMPTY:
        raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {request.group_id} has no members")
    answers = []
    leaving = []
    for m in request.members:
        member_id = m.member_id or (group.member_with_instance(m.instance_id) if m.instance_id else None) or ""
        member = group.members.get(member_id)
        if member is None:
            answers.append(LeaveMemberResponse(m.member_id, m.instance_id, ErrorCode.UNKNOWN_MEMBER_ID,
                                               f"group {group.group_id} has no member {m.member_id or m.instance_id}"))
        elif m.instance_id is not None and member.instance_id != m.instance_id:
            answers.append(LeaveMemberResponse(m.member_id, m.instance_id, ErrorCode.FENCED_INSTANCE_ID,
                                               f"member {member_id} is not instance {m.instance_id}"))
        else:
            answers.append(LeaveMemberResponse(member_id, m.instance_id))
            leaving.append(member_id)
    change = ClassicChange(group, now)
    if leaving:
        remove_members(change, leaving, "left the group")
    return change.result(LeaveGroupResponse(members=tuple(answers)))


def remove_members(change: ClassicChange, member_ids: Iterable[str], why: str) -> None:
    """Members leave (or are removed): their waiting requests are answered, and the group
    rebalances, or becomes empty. Written, so that a failover does not bring them back."""
    group = change.group
    members = dict(group.members)
    for member_id in member_ids:
        member = members.pop(member_id, None)
        if member is None:
            continue
        change.timer(CLASSIC_SESSION, None, member_id)
        change.answer_waiting(member, ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} {why}")
    change.set_members(members, leader=group.leader if group.leader in members else None)
    change.persist = True
    if not members:
        _complete_join(change)  # an empty generation (Kafka's): nobody left to wait for
        return
    if group.state != PREPARING_REBALANCE:
        _prepare_rebalance(change)
    _maybe_complete_join(change)


def rebalance(change: ClassicChange) -> None:
    """The group's work changed (its connectors): every member joins again, the leader assigns.
    Written: nobody else would ask for this rebalance again after a failover."""
    if change.group.state in (STABLE, COMPLETING_REBALANCE):
        _prepare_rebalance(change)
        change.persist = True


# --- timers ---------------------------------------------------------------------------------------


def on_timer(state: CoordinatorState, config: CoordinatorConfig, key: tuple[str, ...], now: int) -> Result[None]:
    group = state.classic_groups.get(key[1])
    if group is None:
        return Result(None)
    change = ClassicChange(group, now)
    kind = key[0]
    if kind == CLASSIC_SESSION:
        member = group.members.get(key[2])
        if member is None:
            return Result(None)
        if (group.state == PREPARING_REBALANCE and member.joined) or (
                group.state == COMPLETING_REBALANCE and member.synced):
            return Result(None)  # it waits for our answer; its session starts again with it
        remove_members(change, [member.member_id], "timed out: no heartbeat within its session")
    elif kind == CLASSIC_JOIN:
        if group.state != PREPARING_REBALANCE:
            return Result(None)
        if group.join_deadline_ms is not None and group.join_deadline_ms > now:
            return Result(None, timers=[Timer(key, group.join_deadline_ms)])  # extended, or early
        _complete_join(change)
    elif kind == CLASSIC_SYNC:
        if group.state != COMPLETING_REBALANCE:
            return Result(None)
        # The leader did not send the assignments in time: members that did not sync are removed
        # (the leader among them), and the others join again.
        late = [m for m, v in group.members.items() if not v.synced]
        remove_members(change, late, "did not send SyncGroup within the rebalance timeout")
    else:
        return Result(None)
    return change.result(None)


def after_load(state: CoordinatorState, config: CoordinatorConfig, now: int) -> list[Timer]:
    """Timers of the classic groups of a partition just loaded: every member's session, and the
    end of the phase the group was in."""
    timers = []
    for group in state.classic_groups.values():
        g = group.group_id
        for member_id, member in group.members.items():
            timers.append(Timer(timer_key(CLASSIC_SESSION, g, member_id), now + member.session_timeout_ms))
        if group.state == PREPARING_REBALANCE:
            timers.append(Timer(timer_key(CLASSIC_JOIN, g), now + group.rebalance_timeout_ms()))
        elif group.state == COMPLETING_REBALANCE:
            timers.append(Timer(timer_key(CLASSIC_SYNC, g), now + group.rebalance_timeout_ms()))
    return timers
