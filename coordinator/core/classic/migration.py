"""Online migration between the classic protocol and the connect protocol (seed 000, "Migration To
the New Protocol"), in the manner of Kafka's KIP-848 consumer group migration.

Upgrade. When the first worker speaking the connect protocol joins a classic group that has
members, and the coordinator knows the group's connectors (a real Connect cluster keeps them in its
config topic: they must be set for it first), the group becomes a connect group in that same request: the type 2 record is deleted and
the classic members are written as connect members (types 5, 7, 8) at a group epoch, target
assignment epoch and member epochs equal to the classic generation. What each classic member runs
becomes its current assignment and its target, so the group starts out stable, and the joiner's
epoch bump asks for the first connect target at once. Requests of classic members that were
waiting (a join or sync phase in progress) are answered REBALANCE_IN_PROGRESS: they join again,
now into the connect group.

Classic members of a connect group keep speaking the classic protocol; their requests are
translated into the connect protocol's steps (`join_group` and the rest below):

- JoinGroup is a full heartbeat: it says what the member runs (its allocation, in Connect's
  metadata), moves it one reconciliation step, and is answered at once with its member epoch as the
  generation, as a follower (no leader, no SkipAssignment: Connect's leader would refuse that), a
  dynamic member first getting its id with MEMBER_ID_REQUIRED, as Kafka answers a classic consumer;
- SyncGroup answers its assignment in Connect's bytes for its protocol (`Assigned` a difference
  from what it said it runs for `compatible` and `sessioned`, `Revoked`, the delay until deferred
  work), naming one classic member as leader;
- Heartbeat answers REBALANCE_IN_PROGRESS while its assignment must still change (a new target, a
  revocation not yet acknowledged, work waiting to be released), which makes it join again: that
  rejoin is how it acknowledges a revocation and how it receives new work, revoke-before-assign
  holding for it as for everyone;
- LeaveGroup is a leave heartbeat (-1); a static member back with a new member id takes its
  instance's place (the connect protocol's static leave and takeover);
- its session is its own (its JoinGroup's SessionTimeoutMs, kept in its metadata, type 5 v2).

Downgrade. When the last connect-protocol member leaves (or is fenced) and classic members remain,
the group becomes classic again in that same result: the connect members' records are deleted and a
type 2 record holds the classic members, each with what it owns as its assignment, in state
PreparingRebalance at a generation one above the group epoch: the members are told to join again
and a classic leader assigns from what their JoinGroups say they run.

Decisions where seed 000 says "Need to add more details", taken from Kafka's migration
(docs/classic-and-migration.md, "Decisions where the seeds are silent"): conversion in the request
that triggers it; epochs continue from the
generation; waiting classic requests answered REBALANCE_IN_PROGRESS; classic members are never chosen
to compute a target (they cannot run PrepareAssignment); a classic member's JoinGroup is answered at
once rather than held until it has reconciled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from records import (
    ClassicMemberMetadata,
    ConnectorsAndTasks,
    CurrentMemberAssignmentValue,
    MemberMetadataKey,
    MemberMetadataValue,
    Record,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
)
from records.connect_protocol import (
    DEFAULT,
    WorkerAssignment,
    encode_assignment,
)

from coordinator.core import record_helpers
from coordinator.core.classic.change import ClassicChange
from coordinator.core.classic.group import (
    ClassicGroup,
    ClassicGroupUpdate,
    ClassicMember,
)
from coordinator.core.classic.holdings import ClassicHoldings, live_member_holdings
from coordinator.core.items import Item, connectors_and_tasks, items_of
from coordinator.core.protocol import (
    CLASSIC_JOIN,
    CLASSIC_SESSION,
    CLASSIC_SYNC,
    REBALANCE,
    SESSION,
    ErrorCode,
    ProtocolError,
    Result,
    Timer,
    timer_key,
)
from coordinator.core.state import ConnectGroup, CoordinatorState
from coordinator.core.states import ClassicGroupState, MemberState

CONNECT = "connect"
CLASSIC = "classic"


def is_classic(member: MemberMetadataValue | None) -> bool:
    return member is not None and member.classic_member_metadata is not None


def settled(group: ConnectGroup, member_id: str) -> bool:
    """Whether a classic member of a connect group owns its target at the assignment epoch: until
    then its heartbeats tell it to join again (seed 000's worker state PREPARING_REBALANCE, as
    describe shows it; STABLE once settled)."""
    current = group.current(member_id)
    target = group.targets.get(member_id)
    return (
        current.state == MemberState.STABLE
        and current.member_epoch == group.assignment_epoch
        and (target is None or items_of(target.assignment) == items_of(current.assignment))
    )


# --- upgrade --------------------------------------------------------------------------------------


def upgrade(state: CoordinatorState, classic: ClassicGroup, now: int) -> tuple[ConnectGroup, Result[None]]:
    """The connect group a classic group becomes, and the result that writes it (type 2 deleted,
    the members written at the generation) and answers the classic requests still waiting."""
    g = classic.group_id
    if classic.members and classic.protocol_type != CONNECT:
        raise ProtocolError(
            ErrorCode.INVALID_GROUP_ID,
            f"group {g} is a classic group of protocol type "
            f"{classic.protocol_type!r}, not connect: it cannot be upgraded online",
        )
    live = state.groups.get(g)
    if classic.members and (live is None or not live.connector_counts):
        # A real Connect cluster keeps its connectors in its own config topic; without them the first
        # connect target would hold no work and revoke everything the classic members run.
        raise ProtocolError(
            ErrorCode.INVALID_GROUP_ID,
            f"group {g} cannot be upgraded to the connect protocol "
            f"before the coordinator knows its connectors and task counts: set them first "
            f"(coordinator connectors set --group {g} ...); the classic members are left as they are",
        )
    records: list[Record] = []
    if classic.record is not None:
        records.append(record_helpers.classic_group(g, None))
    # The epochs start at the generation (seed 000), or past it if the group's connectors or
    # configuration moved its epoch meanwhile: a group's version never goes back.
    generation = max(classic.generation, live.group_epoch if live is not None else 0)
    held: dict[Item, str] = {}
    for member_id in sorted(classic.members):
        m = classic.members[member_id]
        worker = _held(classic, m)
        owned = items_of(worker.runs)
        mine = frozenset(i for i in owned if held.setdefault(i, member_id) == member_id)
        # An item two members claim stays with the first; the other is told to revoke it.
        revoking = owned - mine
        metadata = MemberMetadataValue(
            group_epoch=generation,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            url=worker.url or None,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            server_assignor=None,
            client_assignors=(),
            classic_member_metadata=ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
        )
        records.append(record_helpers.member_metadata(g, member_id, metadata))
        records.append(
            record_helpers.target_member(g, member_id, TargetAssignmentMemberValue(connectors_and_tasks(mine)))
        )
        records.append(
            record_helpers.current_assignment(
                g,
                member_id,
                CurrentMemberAssignmentValue(
                    member_epoch=generation,
                    previous_member_epoch=-1,
                    state=MemberState.UNREVOKED if revoking else MemberState.STABLE,
                    assignment=connectors_and_tasks(mine),
                    pending_revocation=connectors_and_tasks(revoking),
                ),
            )
        )
    records.append(record_helpers.target_metadata(g, TargetAssignmentMetadataValue(assignment_epoch=generation)))
    records.append(record_helpers.group_epoch(g, generation))
    group = scratch_state(live, g, records).groups[g]
    waiting = ClassicChange(classic, now)
    for m in classic.members.values():
        waiting.answer_waiting(
            m, ErrorCode.REBALANCE_IN_PROGRESS, f"group {g} moved to the connect protocol: join again"
        )
        # Their sessions go on as connect sessions, each still its own length.
        waiting.timer(CLASSIC_SESSION, None, m.member_id)
        waiting.timer(SESSION, now + m.session_timeout_ms, m.member_id)
    waiting.timer(CLASSIC_JOIN, None)
    waiting.timer(CLASSIC_SYNC, None)
    return group, Result(None, records, waiting.timers, [ClassicGroupUpdate(g, None)], waiting.deliveries)


def _held(classic: ClassicGroup, m: ClassicMember) -> ClassicHoldings:
    """What a classic member runs, and who it is, by Connect's rule over the live member
    (`live_member_holdings`). Bytes that cannot be read, or a protocol that is not Connect's (the
    previous release's dialect, some of whose bytes would read as a worker that runs nothing), refuse
    the upgrade (as Kafka does): taking the member for idle could give its work to another while it
    still runs it."""
    if classic.protocol is None and not m.protocols:
        return ClassicHoldings(ConnectorsAndTasks(), None, None)  # no generation has assigned it anything
    held = live_member_holdings(classic, m)
    if held.note is not None:
        raise ProtocolError(
            ErrorCode.INVALID_GROUP_ID,
            f"group {classic.group_id} cannot be upgraded online: what member {m.member_id} runs "
            f"cannot be read ({held.note})",
        )
    return held


def scratch_state(live: ConnectGroup | None, group_id: str, then: Iterable[Record] = ()) -> CoordinatorState:
    """A state of its own holding a copy of the live group (its slots replayed), and `then`'s
    records of that group replayed on top: to look ahead or change freely, the live state untouched."""
    scratch = CoordinatorState()
    if live is not None:
        scratch.replay_all(Record(key, value) for key, value in live.slots())
    scratch.replay_all(r for r in then if r.key.group_id == group_id)
    return scratch


# --- downgrade ------------------------------------------------------------------------------------


def downgrade_if_only_classic(state: CoordinatorState, group_id: str, result: Result, now: int) -> Result:
    """After `result`, a group whose members all speak the classic protocol becomes classic again
    (in the same result). `result` is returned, extended when that happens."""
    # Only a member's removal (its type 5 tombstone) can leave classic members alone; checking
    # that first keeps every other heartbeat, the steady ones above all, from walking the members.
    if not any(r.value is None and r.key.__class__ is MemberMetadataKey for r in result.records):
        return result
    live = state.groups.get(group_id)
    if live is None or not any(is_classic(m) for m in live.members.values()):
        return result
    group = scratch_state(live, group_id, result.records).groups.get(group_id)
    if group is None or not group.members or not all(is_classic(m) for m in group.members.values()):
        return result
    records = record_helpers.group_tombstones(
        group_id, list(group.members), list(group.targets), list(group.currents), keep_work=True
    )
    present = {key for key, _ in group.slots()}
    records = [r for r in records if r.key in present]
    members = {}
    for member_id, m in group.members.items():
        meta = m.classic_member_metadata
        assert meta is not None
        current = group.current(member_id)
        runs = connectors_and_tasks(items_of(current.assignment) | items_of(current.pending_revocation))
        members[member_id] = ClassicMember(
            member_id=member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=meta.session_timeout_ms,
            # Only for the record (the members join again before any leader assigns): the whole of what
            # it runs, in `default`'s bytes, whose Assigned is a whole assignment, not a difference.
            protocols=meta.protocols,
            assignment=encode_assignment(WorkerAssignment(assigned=runs), DEFAULT),
        )
    protocol = ClassicGroup(group_id).with_members(members).select_protocol()
    classic = ClassicGroup(
        group_id,
        state=ClassicGroupState.PREPARING_REBALANCE,
        generation=group.group_epoch + 1,
        protocol_type=CONNECT,
        protocol=protocol,
        leader=None,
        join_deadline_ms=now + max(m.rebalance_timeout_ms for m in members.values()),
    )
    classic = classic.with_members(members)
    value = classic.to_record(now)
    classic = replace(classic, record=value)
    records.append(record_helpers.classic_group(group_id, value))
    result.records.extend(records)
    result.volatile.append(ClassicGroupUpdate(group_id, classic))
    for member_id, m in members.items():
        result.timers.append(Timer(timer_key(SESSION, group_id, member_id), None))
        result.timers.append(Timer(timer_key(REBALANCE, group_id, member_id), None))
        result.timers.append(Timer(timer_key(CLASSIC_SESSION, group_id, member_id), now + m.session_timeout_ms))
    result.timers.append(Timer(timer_key(CLASSIC_JOIN, group_id), classic.join_deadline_ms))
    return result


__all__ = ["CLASSIC", "CONNECT", "downgrade_if_only_classic", "is_classic", "scratch_state", "upgrade"]
