"""Kafka's classic group coordinator, behaviour by behaviour, on the pure state machine (a virtual
clock, no broker): each test is named after the behaviour it reproduces and, where Kafka has a
test of that name, says which (`GroupMetadataManagerTest` or `GroupCoordinatorServiceTest`), with
the error codes Kafka's test expects. Every answer passes `connect_fatal`'s check: a test that
means a fatal answer says so (`allow_fatal`)."""

from __future__ import annotations

import argparse
import asyncio
import itertools

import pytest
from aiohttp.test_utils import TestClient, TestServer
from connect_fatal import allow_fatal, connect_survivable  # noqa: F401 - every answer here is checked

from records import ClassicGroupMember, ClassicGroupMetadataKey, ClassicGroupMetadataValue, Record

from coordinator.api import wire
from coordinator.cli import build_parser
from coordinator.core.config import KAFKA_CLASSIC_MIN_SESSION_TIMEOUT_MS
from coordinator.core.driver import Driver
from coordinator.core.group_coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.core.protocol import (
    ClassicHeartbeatRequest,
    ClassicProtocol,
    ErrorCode,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveMember,
    Parked,
    RequestContext,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from coordinator.core.state import CoordinatorState
from coordinator.core.states import ClassicGroupState
from coordinator.service.runtime import PartitionRuntime
from coordinator.service.server import CoordinatorServer

G = "connect-cluster"
P = ClassicProtocol("sessioned", b"meta")
_ids = itertools.count(1)


def driver(**settings: int) -> Driver:
    return Driver(CoordinatorConfig(**{"initial_assignment_delay_ms": 0, **settings}))


def ctx() -> RequestContext:
    return RequestContext("worker", "10.0.0.1", f"m{next(_ids)}")


def join(
    d: Driver,
    member_id: str = "",
    *,
    instance: str | None = None,
    session: int = 10_000,
    rebalance: int = 10_000,
    protocols: tuple[ClassicProtocol, ...] = (P,),
) -> JoinGroupResponse | Parked:
    return d.join_group(
        JoinGroupRequest(
            group_id=G,
            member_id=member_id,
            protocol_type="connect",
            protocols=protocols,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            instance_id=instance,
        ),
        ctx(),
    )


def dynamic(d: Driver, **options: object) -> tuple[str, JoinGroupResponse | Parked]:
    """A new dynamic member: MEMBER_ID_REQUIRED, then its join with the id given."""
    first = join(d, **options)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return first.member_id, join(d, first.member_id, **options)


def answered(d: Driver, response: JoinGroupResponse | Parked):
    return d.answer(response.key) if isinstance(response, Parked) else response


def sync(
    d: Driver,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    *,
    instance: str | None = None,
    protocol_name: str | None = None,
):
    given = tuple(SyncGroupAssignment(m, a) for m, a in (assignments or {}).items())
    return d.sync_group(
        SyncGroupRequest(G, member_id, generation, instance, protocol_name=protocol_name, assignments=given)
    )


def beat(d: Driver, member_id: str, generation: int, instance: str | None = None) -> int:
    return d.classic_heartbeat(ClassicHeartbeatRequest(G, member_id, generation, instance)).error_code


def group(d: Driver):
    return d.state.classic_groups[G]


def stable_pair(d: Driver) -> tuple[str, str]:
    """A stable generation 2 of dynamic members A (leader) and B."""
    a, joined = dynamic(d)
    assert joined.generation_id == 1
    sync(d, a, 1, {a: b"A"})
    b, parked = dynamic(d)
    assert answered(d, join(d, a)).generation_id == 2
    assert d.answer(parked.key).generation_id == 2
    waiting = sync(d, b, 2)
    sync(d, a, 2, {a: b"A", b: b"B"})
    assert d.answer(waiting.key).assignment == b"B" and group(d).state == ClassicGroupState.STABLE
    return a, b


def with_pending_member(d: Driver, pending_session: int = 10_000) -> tuple[str, str, str, Parked, Parked]:
    """Kafka's setupGroupWithPendingMember: a stable A and B; A joins again; a new member is given
    its id (pending); B joins again. Returns A, B, the pending id and A's and B's waiting joins."""
    a, b = stable_pair(d)
    a_waits = join(d, a)
    assert isinstance(a_waits, Parked) and group(d).state == ClassicGroupState.PREPARING_REBALANCE
    first = join(d, session=pending_session)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    b_waits = join(d, b)
    assert isinstance(b_waits, Parked), "every member joined, but the pending one holds the join up"
    assert group(d).state == ClassicGroupState.PREPARING_REBALANCE and group(d).pending == {first.member_id}
    return a, b, first.member_id, a_waits, b_waits


def static_pair(d: Driver, rebalance: int = 10_000, session: int = 10_000) -> tuple[str, str, int]:
    """Kafka's staticMembersJoinAndRebalance: static members leader-instance-id and
    follower-instance-id in one stable generation. Needs an initial delay (the driver's config)."""
    leader = join(d, instance="leader-instance-id", rebalance=rebalance, session=session)
    follower = join(d, instance="follower-instance-id", rebalance=rebalance, session=session)
    d.advance(d.coordinator.config.initial_assignment_delay_ms)
    leader, follower = d.answer(leader.key), d.answer(follower.key)
    assert leader.leader == leader.member_id and follower.generation_id == leader.generation_id
    waiting = sync(d, follower.member_id, follower.generation_id)
    sync(d, leader.member_id, leader.generation_id, {leader.member_id: b"L", follower.member_id: b"F"})
    assert d.answer(waiting.key).assignment == b"F" and group(d).state == ClassicGroupState.STABLE
    return leader.member_id, follower.member_id, leader.generation_id


# --- pending members (Kafka's pendingMembers) ----------------------------------------------------------


def test_join_group_completion_when_pending_member_joins() -> None:
    # Kafka: testJoinGroupCompletionWhenPendingMemberJoins (NONE; CompletingRebalance, 3 members, 0 pending)
    d = driver()
    a, b, c, a_waits, b_waits = with_pending_member(d)
    joined = join(d, c)
    assert joined.error_code == ErrorCode.NONE and group(d).state == ClassicGroupState.COMPLETING_REBALANCE
    assert set(group(d).members) == {a, b, c} and not group(d).pending
    # One generation for all three: the new member joined in the round its id was given in.
    assert joined.generation_id == 3 and d.answer(a_waits.key).generation_id == 3
    assert d.answer(b_waits.key).generation_id == 3


def test_join_group_completion_when_pending_member_times_out() -> None:
    # Kafka: testJoinGroupCompletionWhenPendingMemberTimesOut (CompletingRebalance, 2 members, 0 pending)
    d = driver()
    a, b, _, a_waits, _ = with_pending_member(d, pending_session=6_000)
    d.advance(6_000)
    assert (
        group(d).state == ClassicGroupState.COMPLETING_REBALANCE
        and set(group(d).members) == {a, b}
        and not group(d).pending
    )
    assert d.answer(a_waits.key).generation_id == 3


def test_pending_members_leave_group() -> None:
    # Kafka: testPendingMembersLeaveGroup (NONE for the pending member; CompletingRebalance, 2 members)
    d = driver()
    a, b, c, _, _ = with_pending_member(d)
    left = d.leave_group(LeaveGroupRequest(G, (LeaveMember(c),)))
    assert [(m.member_id, m.error_code) for m in left.members] == [(c, ErrorCode.NONE)]
    assert (
        group(d).state == ClassicGroupState.COMPLETING_REBALANCE
        and set(group(d).members) == {a, b}
        and not group(d).pending
    )


def test_heartbeat_expiration_should_remove_pending_member() -> None:
    # Kafka: testHeartbeatExpirationShouldRemovePendingMember (0 members, 1 pending, then 0 pending)
    d = driver()
    first = join(d, session=6_000)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and group(d).pending == {first.member_id}
    d.advance(6_000)
    assert not group(d).pending and not group(d).members


def test_pending_members_survive_the_completion_of_a_join_phase() -> None:
    # Kafka's completeClassicGroupJoin does not clear pendingMembers: an id handed out while the
    # phase ended by its timeout is still accepted.
    d = driver()
    a, _ = stable_pair(d)
    a_waits = join(d, a)
    c = join(d, session=30_000).member_id
    d.advance(10_000)  # the rebalance timeout: B never joined, C has not either
    assert d.answer(a_waits.key).generation_id == 3 and set(group(d).members) == {a}
    assert group(d).pending == {c}
    assert isinstance(join(d, c), Parked) and group(d).state == ClassicGroupState.PREPARING_REBALANCE


# --- generations, and the order of checks --------------------------------------------------------------


def test_heartbeat_illegal_generation() -> None:
    # Kafka: testHeartbeatIllegalGeneration (ILLEGAL_GENERATION for the generation + 1)
    d = driver()
    a, _ = stable_pair(d)
    assert beat(d, a, 3) == ErrorCode.ILLEGAL_GENERATION


def test_heartbeat_during_preparing_rebalance() -> None:
    # Kafka: testHeartbeatDuringPreparingRebalance (REBALANCE_IN_PROGRESS at the group's generation, 0)
    d = driver(initial_assignment_delay_ms=3_000)
    a, waits = dynamic(d)
    assert isinstance(waits, Parked) and group(d).state == ClassicGroupState.PREPARING_REBALANCE
    assert beat(d, a, 0) == ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_group_from_illegal_generation() -> None:
    # Kafka: testSyncGroupFromIllegalGeneration (ILLEGAL_GENERATION for the generation + 1)
    d = driver()
    joined = join(d, instance="leader-instance-id")
    assert group(d).state == ClassicGroupState.COMPLETING_REBALANCE
    answer = sync(d, joined.member_id, joined.generation_id + 1, instance="leader-instance-id")
    assert answer.error_code == ErrorCode.ILLEGAL_GENERATION


def test_a_stale_generation_during_preparing_rebalance_is_illegal_generation() -> None:
    # Kafka's validateClassicGroupHeartbeat and validateSyncGroup check the generation before the
    # state: REBALANCE_IN_PROGRESS is for members at the group's generation only.
    d = driver()
    a, b = stable_pair(d)
    join(d, a)  # generation 2 rebalances
    assert beat(d, b, 1) == ErrorCode.ILLEGAL_GENERATION
    assert sync(d, b, 1).error_code == ErrorCode.ILLEGAL_GENERATION
    assert beat(d, b, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    assert sync(d, b, 2).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_group_checks_the_member_then_the_generation_then_the_protocol_then_the_state() -> None:
    # Kafka's classicGroupSyncToClassicGroup: validateSyncGroup (validateMember, generation,
    # protocol type and name), then PreparingRebalance.
    d = driver(initial_assignment_delay_ms=100)
    leader, follower, generation = static_pair(d)
    join(d, leader, instance="leader-instance-id")  # the leader rebalances
    wrong = {"protocol_name": "default"}
    with allow_fatal(ErrorCode.FENCED_INSTANCE_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL):
        assert (
            sync(d, "zombie", 99, instance="follower-instance-id", **wrong).error_code == ErrorCode.FENCED_INSTANCE_ID
        )
        assert (
            sync(d, follower, 99, instance="follower-instance-id", **wrong).error_code == ErrorCode.ILLEGAL_GENERATION
        )
        assert sync(d, follower, generation, **wrong).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert sync(d, follower, generation).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_downgraded_group_tells_members_with_their_connect_epoch_to_join_again() -> None:
    # Ours (recorded decision): the downgrade writes the group in PreparingRebalance at a generation
    # one past the connect epoch, with no leader; its members carry their connect member epochs,
    # below that generation: they are told to join again, not fenced. Anything else is Kafka's.
    value = ClassicGroupMetadataValue(
        protocol_type="connect",
        generation=8,
        protocol=P.name,
        leader=None,
        current_state_timestamp_ms=0,
        members=tuple(
            ClassicGroupMember(m, None, "worker", "10.0.0.1", 10_000, 10_000, P.metadata, b"") for m in ("W1", "W2")
        ),
        state=ClassicGroupState.PREPARING_REBALANCE,
    )
    state = CoordinatorState()
    state.replay(Record(ClassicGroupMetadataKey(G), value))
    d = driver()
    d.coordinator = GroupCoordinator(state, d.coordinator.config)
    assert group(d).downgraded()
    assert beat(d, "W1", 7) == ErrorCode.REBALANCE_IN_PROGRESS
    assert sync(d, "W2", 5).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert beat(d, "W1", 9) == ErrorCode.ILLEGAL_GENERATION  # a generation the group never had
    w1 = join(d, "W1")
    assert isinstance(w1, Parked)
    assert answered(d, join(d, "W2")).generation_id == 9 and d.answer(w1.key).generation_id == 9
    assert not group(d).downgraded()
    assert beat(d, "W1", 7) == ErrorCode.ILLEGAL_GENERATION  # Kafka's answer, once the generation was given out


# --- SyncGroup ------------------------------------------------------------------------------------


def test_sync_group_as_leader_ignores_assignments_for_unknown_members() -> None:
    # Kafka's classicGroupSyncToClassicGroup takes the leader's assignments for the group's members
    # only (setAndPropagateAssignment); we refused INVALID_REQUEST, which Connect does not survive.
    d = driver()
    a, joined = dynamic(d)
    answer = sync(d, a, joined.generation_id, {a: b"x", "stranger": b"y"})
    assert (
        answer.error_code == ErrorCode.NONE and answer.assignment == b"x" and group(d).state == ClassicGroupState.STABLE
    )
    assert [m.member_id for m in d.log[-1].value.members] == [a]


def test_rebalance_times_out_when_sync_request_is_not_received_from_followers() -> None:
    # Kafka: testRebalanceTimesOutWhenSyncRequestIsNotReceivedFromFollowers (after the leader's
    # sync, Stable; at the rebalance timeout the followers are removed: REBALANCE_IN_PROGRESS for
    # the leader, UNKNOWN_MEMBER_ID for them, PreparingRebalance)
    d = driver(initial_assignment_delay_ms=100)
    joins = [dynamic(d, rebalance=10_000) for _ in range(3)]
    d.advance(100)
    answers = [d.answer(parked.key) for _, parked in joins]
    leader = next(r.member_id for r in answers if r.leader == r.member_id)
    followers = [r.member_id for r in answers if r.member_id != leader]
    d.advance(5_000)
    assert all(beat(d, r.member_id, 1) == ErrorCode.NONE for r in answers)
    assert sync(d, leader, 1).error_code == ErrorCode.NONE and group(d).state == ClassicGroupState.STABLE
    assert beat(d, leader, 1) == ErrorCode.NONE
    d.advance(5_000)
    assert beat(d, leader, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert [beat(d, f, 1) for f in followers] == [ErrorCode.UNKNOWN_MEMBER_ID] * 2
    assert group(d).state == ClassicGroupState.PREPARING_REBALANCE


def test_rebalance_does_not_time_out_when_all_sync_are_received() -> None:
    # Kafka: testRebalanceDoesNotTimeOutWhenAllSyncAreReceived (Stable, every member stays)
    d = driver(initial_assignment_delay_ms=100)
    joins = [dynamic(d, rebalance=10_000) for _ in range(3)]
    d.advance(100)
    answers = [d.answer(parked.key) for _, parked in joins]
    for r in sorted(answers, key=lambda r: r.leader == r.member_id):  # the followers wait for the leader
        sync(d, r.member_id, 1)
    assert group(d).state == ClassicGroupState.STABLE and not group(d).pending_sync
    d.advance(5_000)
    assert all(beat(d, r.member_id, 1) == ErrorCode.NONE for r in answers)
    d.advance(5_000)
    assert group(d).state == ClassicGroupState.STABLE and len(group(d).members) == 3


# --- static members ---------------------------------------------------------------------------------------


def test_static_member_heartbeat_leader_with_invalid_member_id() -> None:
    # Kafka: testStaticMemberHeartbeatLeaderWithInvalidMemberId (NONE, then FENCED_INSTANCE_ID)
    d = driver(initial_assignment_delay_ms=100)
    leader, _, generation = static_pair(d)
    assert beat(d, leader, generation) == ErrorCode.NONE
    with allow_fatal(ErrorCode.FENCED_INSTANCE_ID):
        assert beat(d, "invalid-member-id", generation, "leader-instance-id") == ErrorCode.FENCED_INSTANCE_ID


def test_static_member_sync_as_leader_with_invalid_member_id() -> None:
    # Kafka: testStaticMemberSyncAsLeaderWithInvalidMemberId (FENCED_INSTANCE_ID)
    d = driver(initial_assignment_delay_ms=100)
    _, _, generation = static_pair(d)
    with allow_fatal(ErrorCode.FENCED_INSTANCE_ID):
        answer = sync(d, "invalid-member-id", generation, instance="follower-instance-id")
    assert answer.error_code == ErrorCode.FENCED_INSTANCE_ID


def test_static_member_rejoin_as_follower_with_mismatched_instance_id() -> None:
    # Kafka: testStaticMemberRejoinAsFollowerWithMismatchedInstanceId (FENCED_INSTANCE_ID)
    d = driver(initial_assignment_delay_ms=100)
    _, follower, _ = static_pair(d)
    with allow_fatal(ErrorCode.FENCED_INSTANCE_ID):
        answer = join(d, follower, instance="leader-instance-id")
    assert answer.error_code == ErrorCode.FENCED_INSTANCE_ID


def test_leave_group_with_fenced_instance_id() -> None:
    # Kafka: testLeaveGroupWithFencedInstanceId (the member's FENCED_INSTANCE_ID, nothing written)
    d = driver()
    join(d, instance="group-instance-id")
    written = len(d.log)
    left = d.leave_group(LeaveGroupRequest(G, (LeaveMember("other-member-id", "group-instance-id"),)))
    assert [(m.member_id, m.instance_id, m.error_code) for m in left.members] == [
        ("other-member-id", "group-instance-id", ErrorCode.FENCED_INSTANCE_ID)
    ]
    assert len(d.log) == written


def test_static_member_rejoin_with_leader_id_and_unknown_member_id() -> None:
    # Kafka: testStaticMemberRejoinWithLeaderIdAndUnknownMemberId (NONE at the same generation,
    # the new id leads with SkipAssignment and every member, written; then the old id's JoinGroup
    # and SyncGroup FENCED_INSTANCE_ID, and its SyncGroup without the instance UNKNOWN_MEMBER_ID)
    d = driver(initial_assignment_delay_ms=100)
    leader, _, generation = static_pair(d)
    written = len(d.log)
    back = join(d, instance="leader-instance-id")
    assert back.error_code == ErrorCode.NONE and back.generation_id == generation
    assert back.leader == back.member_id != leader and back.skip_assignment
    assert sorted(m.instance_id for m in back.members) == ["follower-instance-id", "leader-instance-id"]
    assert JoinGroupMember(back.member_id, "leader-instance-id", P.metadata) in back.members
    assert group(d).state == ClassicGroupState.STABLE and len(d.log) == written + 1
    with allow_fatal(ErrorCode.FENCED_INSTANCE_ID):
        assert join(d, leader, instance="leader-instance-id").error_code == ErrorCode.FENCED_INSTANCE_ID
        assert sync(d, leader, generation, instance="leader-instance-id").error_code == ErrorCode.FENCED_INSTANCE_ID
    assert sync(d, leader, generation).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_follower_fail_to_rejoin_before_rebalance_timeout() -> None:
    # Kafka: testStaticMemberFollowerFailToRejoinBeforeRebalanceTimeout (the join completes at the
    # rebalance timeout; the follower that did not join stays: the leader is given 3 members)
    d = driver(initial_assignment_delay_ms=100)
    leader, follower, generation = static_pair(d, rebalance=10_000, session=15_000)
    new = join(d, instance="new-member-instance-id")
    assert isinstance(new, Parked) and group(d).state == ClassicGroupState.PREPARING_REBALANCE
    leader_waits = join(d, leader, instance="leader-instance-id")
    d.advance(10_000)
    led, newcomer = d.answer(leader_waits.key), d.answer(new.key)
    assert led.error_code == ErrorCode.NONE and led.generation_id == generation + 1 and led.leader == leader
    assert sorted(m.instance_id for m in led.members) == [
        "follower-instance-id",
        "leader-instance-id",
        "new-member-instance-id",
    ]
    assert newcomer.leader == leader and newcomer.members == () and newcomer.generation_id == generation + 1
    assert group(d).state == ClassicGroupState.COMPLETING_REBALANCE and follower in group(d).members


def test_group_stuck_in_rebalance_timeout_due_to_nonjoined_static_member() -> None:
    # Kafka: testGroupStuckInRebalanceTimeoutDueToNonjoinedStaticMember (the new dynamic member
    # leads 3 members at generation 2; after the follower leaves and the rebalance timeout, only the
    # static leader is left, and the group stays in PreparingRebalance at generation 2)
    d = driver(initial_assignment_delay_ms=100)
    leader, follower, generation = static_pair(d, rebalance=5_000, session=10_000)
    assert generation == 1
    new, waits = dynamic(d, rebalance=5_000, session=10_000)
    d.advance(5_000)
    joined = d.answer(waits.key)
    assert joined.error_code == ErrorCode.NONE and joined.leader == new and joined.generation_id == 2
    assert len(joined.members) == 3 and group(d).state == ClassicGroupState.COMPLETING_REBALANCE
    left = d.leave_group(LeaveGroupRequest(G, (LeaveMember(follower, "follower-instance-id"),)))
    assert left.members[0].error_code == ErrorCode.NONE and group(d).state == ClassicGroupState.PREPARING_REBALANCE
    d.advance(5_000)
    assert set(group(d).members) == {leader} and group(d).generation == 2
    assert group(d).state == ClassicGroupState.PREPARING_REBALANCE
    # Ours beyond Kafka's test: the static leader's session ends it, with an empty generation.
    d.advance(5_000)
    assert group(d).state == ClassicGroupState.EMPTY and group(d).generation == 3


def test_replace_static_member_in_completing_rebalance_state_triggers_rebalance() -> None:
    # Kafka: testReplaceStaticMemberInCompletingRebalanceStateTriggersRebalance (NONE, 1 member,
    # generation 2, CompletingRebalance)
    d = driver()
    first = join(d, instance="group-instance-id")
    assert first.generation_id == 1 and group(d).state == ClassicGroupState.COMPLETING_REBALANCE
    again = join(d, instance="group-instance-id")
    assert again.error_code == ErrorCode.NONE and again.generation_id == 2
    assert len(group(d).members) == 1 and group(d).state == ClassicGroupState.COMPLETING_REBALANCE


def test_a_static_member_back_after_a_failover_is_checked_against_the_others_protocols_only() -> None:
    # Ours (recorded decision): after a load a member offers only the chosen protocol (Kafka's too).
    # Kafka checks a returning static member against the member it replaces as well, so a worker
    # restarted with another connect.protocol was refused INCONSISTENT_GROUP_PROTOCOL (fatal to
    # Java) even alone in its group; we check it against the others only.
    offered = (
        ClassicProtocol("sessioned", b"s"),
        ClassicProtocol("compatible", b"c"),
        ClassicProtocol("default", b"d"),
    )
    d = driver(initial_assignment_delay_ms=100)
    w1 = join(d, instance="w1", protocols=offered)
    w2 = join(d, instance="w2", protocols=offered)
    d.advance(100)
    w1, w2 = d.answer(w1.key), d.answer(w2.key)
    waiting = sync(d, w2.member_id, w2.generation_id)
    sync(d, w1.member_id, w1.generation_id, {w1.member_id: b"1", w2.member_id: b"2"})
    assert d.answer(waiting.key).error_code == ErrorCode.NONE
    d.fail_over()
    assert [p.name for p in group(d).members[w1.member_id].protocols] == ["sessioned"]
    with allow_fatal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL):  # w2, loaded, offers sessioned only: Kafka's answer
        refused = join(d, instance="w1", protocols=offered[1:])
    assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    d.leave_group(LeaveGroupRequest(G, (LeaveMember(w2.member_id),)))
    back = answered(d, join(d, instance="w1", protocols=offered[1:]))
    assert back.error_code == ErrorCode.NONE and back.protocol_name == "compatible"


# --- new members, the group's size, the session's bounds --------------------------------------------------


def test_new_member_join_expiration() -> None:
    # Kafka: testNewMemberJoinExpiration (the new member's JoinGroup UNKNOWN_MEMBER_ID after the new
    # member join timeout; the first member alone is left)
    d = driver()
    timeout = d.coordinator.config.classic_new_member_join_timeout_ms
    first, joined = dynamic(d, session=5_000 + timeout, rebalance=2 * timeout)
    assert joined.leader == first
    assert not any(m.is_new for m in group(d).members.values())
    second, waits = dynamic(d, session=6_000, rebalance=5_000)
    assert isinstance(waits, Parked) and group(d).members[second].is_new
    d.advance(timeout)
    assert d.answer(waits.key).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert list(group(d).members) == [first]


def test_new_member_timeout_completion() -> None:
    # Kafka: testNewMemberTimeoutCompletion (once its join completes, the join timeout no longer
    # applies; its session does: Empty at generation 2)
    d = driver(initial_assignment_delay_ms=3_000)
    timeout = d.coordinator.config.classic_new_member_join_timeout_ms
    member, waits = dynamic(d, session=timeout + 5_000)
    d.advance(3_000)
    assert d.answer(waits.key).generation_id == 1 and not group(d).members[member].is_new
    assert sync(d, member, 1).error_code == ErrorCode.NONE
    d.advance(timeout)
    assert list(group(d).members) == [member]
    d.advance(5_000)
    assert group(d).state == ClassicGroupState.EMPTY and group(d).generation == 2


def test_join_group_should_receive_error_if_group_over_max_size() -> None:
    # Kafka: testJoinGroupShouldReceiveErrorIfGroupOverMaxSize (ErrorCode.GROUP_MAX_SIZE_REACHED for the 11th)
    d = driver(initial_assignment_delay_ms=3_000, classic_group_max_size=10)
    for _ in range(10):
        assert isinstance(dynamic(d)[1], Parked)
    with allow_fatal(ErrorCode.GROUP_MAX_SIZE_REACHED):
        refused = join(d)
    assert refused.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED == 81 and refused.member_id == ""
    assert len(group(d).members) == 10


def test_a_member_that_joined_is_accepted_again_at_max_size() -> None:
    # Kafka's acceptJoiningMember: a member of the group is always accepted once it has joined.
    d = driver(classic_group_max_size=1)
    member, joined = dynamic(d)
    assert joined.generation_id == 1
    assert sync(d, member, 1).error_code == ErrorCode.NONE
    assert join(d, member).generation_id == 2  # the leader rejoins: its own round, at max size
    with allow_fatal(ErrorCode.GROUP_MAX_SIZE_REACHED):
        assert join(d).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_join_group_invalid_session_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka: GroupCoordinatorServiceTest.testJoinGroupInvalidSessionTimeout (INVALID_SESSION_TIMEOUT
    # below group.min.session.timeout.ms, 6 s by default, and above the maximum)
    d = driver(classic_min_session_timeout_ms=KAFKA_CLASSIC_MIN_SESSION_TIMEOUT_MS)
    with allow_fatal(ErrorCode.INVALID_SESSION_TIMEOUT):
        assert join(d, session=5_999).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert join(d, session=1_800_001).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(d, session=6_000).error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert join(driver(), session=1_000).error_code == ErrorCode.MEMBER_ID_REQUIRED  # tests' and demos' 100 ms
    # `serve` enforces Kafka's 6 s unless told otherwise.
    monkeypatch.delenv("COORDINATOR_CLASSIC_MIN_SESSION_TIMEOUT_MS", raising=False)
    monkeypatch.delenv("COORDINATOR_CLASSIC_GROUP_MAX_SIZE", raising=False)
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    defaults = {a.dest: a.default for a in subcommands.choices["serve"]._actions}
    assert defaults["classic_min_session_timeout_ms"] == "6000"
    assert defaults["classic_group_max_size"] == str(2**31 - 1)


# --- a partition that loads -----------------------------------------------------------------------


def _while_loading(path: str, body: wire.Body) -> dict:
    async def run() -> dict:
        server = CoordinatorServer({"bootstrap.servers": "127.0.0.1:1"}, "coordinator-topic", 1, [], "http://x")
        server.runtimes[0] = PartitionRuntime(server.kafka_config, server.topic, 0, server.config)  # LOADING
        client = TestClient(TestServer(server.app()))
        await client.start_server()
        try:
            response = await client.post(path, data=wire.encode(body), headers={"Content-Type": "application/json"})
            assert response.status == 200
            return await response.json()
        finally:
            await client.close()
            await server.close()

    return asyncio.run(run())


def test_classic_requests_while_the_partition_loads_get_answers_a_java_member_survives() -> None:
    # Kafka: GroupCoordinatorServiceTest.testHeartbeatCoordinatorNotAvailableException (a heartbeat
    # while loading: NONE); GroupCoordinator.scala's handleSyncGroup (REBALANCE_IN_PROGRESS: "we
    # cannot return COORDINATOR_LOAD_IN_PROGRESS since older clients do not expect the error");
    # JoinGroup and LeaveGroup keep COORDINATOR_LOAD_IN_PROGRESS (Java's JoinGroup retries it).
    sync_answer = _while_loading(
        "/v1/classic-group/sync", SyncGroupRequest(group_id=G, member_id="W1", generation_id=3)
    )
    assert sync_answer["ErrorCode"] == ErrorCode.REBALANCE_IN_PROGRESS
    beat_answer = _while_loading(
        "/v1/classic-group/heartbeat", ClassicHeartbeatRequest(group_id=G, member_id="W1", generation_id=3)
    )
    assert beat_answer["ErrorCode"] == ErrorCode.NONE
    join_answer = _while_loading(
        "/v1/classic-group/join",
        JoinGroupRequest(
            group_id=G,
            protocol_type="connect",
            protocols=[ClassicProtocol(name=P.name, metadata=P.metadata)],
            session_timeout_ms=10_000,
        ),
    )
    assert join_answer["ErrorCode"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    leave_answer = _while_loading(
        "/v1/classic-group/leave", LeaveGroupRequest(group_id=G, members=[LeaveMember(member_id="W1")])
    )
    assert leave_answer["ErrorCode"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    # Each one a Java member survives (connect_fatal's rules).
    from connect_fatal import HEARTBEAT, JOIN, LEAVE, SYNC, assert_survivable

    for api, answer in ((SYNC, sync_answer), (HEARTBEAT, beat_answer), (JOIN, join_answer), (LEAVE, leave_answer)):
        assert_survivable(api, answer["ErrorCode"])
