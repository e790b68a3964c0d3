"""The classic protocol (seed 004) through the pure state machine, transition by transition:
Empty -> PreparingRebalance -> CompletingRebalance -> Stable and back, the errors of each request,
the timers, protocol selection, static members, and a failover at every point (the new coordinator
replays the log and goes on where the old one was). No broker, a virtual clock."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from connect_fatal import allow_fatal, connect_survivable  # noqa: F401 - every answer here is checked

from records import ClassicGroupMetadataKey, Record

from coordinator.core.driver import Driver
from coordinator.core.group_coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.core.protocol import (
    ClassicHeartbeatRequest,
    ClassicProtocol,
    ErrorCode,
    HeartbeatRequest,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveMember,
    Parked,
    RequestContext,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.core.state import CoordinatorState
from coordinator.core.states import ClassicGroupState

G = "connect-cluster"
ICR = ClassicProtocol("incremental_cooperative", b"icr-meta")
EAGER = ClassicProtocol("eager", b"eager-meta")
_ids = itertools.count(1)


def ctx() -> RequestContext:
    return RequestContext("worker", "10.0.0.1", f"m{next(_ids)}")


def join_request(
    member_id: str = "",
    *protocols: ClassicProtocol,
    instance_id: str | None = None,
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=G,
        member_id=member_id,
        protocol_type="connect",
        protocols=protocols or (ICR, EAGER),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        instance_id=instance_id,
    )


def group(d: Driver):  # noqa: ANN201
    return d.state.classic_groups[G]


def assert_replay_equals_live(d: Driver) -> CoordinatorState:
    replayed = CoordinatorState()
    replayed.replay_all(d.log)
    assert replayed.slots() == d.state.slots()
    return replayed


def new_member(d: Driver, *protocols: ClassicProtocol, instance_id: str | None = None) -> tuple[str, object]:
    """A dynamic member's two JoinGroups (Kafka's MEMBER_ID_REQUIRED first); a static one's one."""
    first = d.join_group(join_request("", *protocols, instance_id=instance_id), ctx())
    if instance_id is not None:
        key = first.key if isinstance(first, Parked) else None
        return (first.member_id if key is None else key[2]), first
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    return first.member_id, d.join_group(join_request(first.member_id, *protocols), ctx())


def sync(d: Driver, member_id: str, generation: int, assignments: dict[str, bytes] | None = None):  # noqa: ANN201
    given = tuple(SyncGroupAssignment(m, a) for m, a in (assignments or {}).items())
    return d.sync_group(SyncGroupRequest(G, member_id, generation, assignments=given))


def beat(d: Driver, member_id: str, generation: int) -> int:
    return d.classic_heartbeat(ClassicHeartbeatRequest(G, member_id, generation)).error_code


def stable_pair(d: Driver | None = None) -> tuple[Driver, str, str]:
    """A stable generation 2 of two members: A (leader) and B."""
    d = d or Driver()
    a, joined = new_member(d)
    assert isinstance(joined, JoinGroupResponse) and joined.generation_id == 1 and joined.leader == a
    assert sync(d, a, 1, {a: b"A1"}).assignment == b"A1"
    b, parked = new_member(d)
    assert isinstance(parked, Parked) and group(d).state == ClassicGroupState.PREPARING_REBALANCE
    assert beat(d, a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = d.join_group(join_request(a), ctx())
    assert rejoined.generation_id == 2 and rejoined.leader == a
    assert {m.member_id for m in rejoined.members} == {a, b}
    assert d.answer(parked.key).generation_id == 2
    parked_sync = sync(d, b, 2)
    assert isinstance(parked_sync, Parked)
    assert sync(d, a, 2, {a: b"A2", b: b"B2"}).assignment == b"A2"
    assert d.answer(parked_sync.key).assignment == b"B2"
    assert group(d).state == ClassicGroupState.STABLE
    return d, a, b


# --- Empty -> PreparingRebalance -> CompletingRebalance -> Stable ---------------------------------------


def test_a_first_join_without_a_member_id_gets_one_and_writes_nothing() -> None:
    d = Driver()
    response = d.join_group(join_request(), RequestContext(fresh_id="worker-1-abc"))
    assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED and response.member_id == "worker-1-abc"
    assert d.log == [] and group(d).state == ClassicGroupState.EMPTY
    # An id the coordinator never handed out is refused.
    assert d.join_group(join_request("made-up"), ctx()).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_the_first_member_completes_the_join_leads_and_assigns_in_sync_group() -> None:
    d = Driver()
    a, joined = new_member(d)
    assert joined.error_code == ErrorCode.NONE and joined.generation_id == 1 and joined.leader == a
    assert joined.protocol_type == "connect" and joined.protocol_name == ICR.name
    assert [(m.member_id, m.metadata) for m in joined.members] == [(a, b"icr-meta")]
    assert group(d).state == ClassicGroupState.COMPLETING_REBALANCE
    # Seed 004: "generation metadata is persisted" when the join phase completes.
    written = d.log[-1].value
    assert d.log[-1].key == ClassicGroupMetadataKey(G) and written.state == ClassicGroupState.COMPLETING_REBALANCE
    assert written.generation == 1 and written.leader == a and written.members[0].subscription == b"icr-meta"
    answer = sync(d, a, 1, {a: b"assigned"})
    assert answer == SyncGroupResponse(ErrorCode.NONE, None, "connect", ICR.name, b"assigned")
    assert group(d).state == ClassicGroupState.STABLE and d.log[-1].value.members[0].assignment == b"assigned"
    assert_replay_equals_live(d)


def test_a_new_member_starts_a_rebalance_that_every_member_joins() -> None:
    d, a, b = stable_pair()
    assert [r.value.state for r in d.log] == [
        ClassicGroupState.COMPLETING_REBALANCE,
        ClassicGroupState.STABLE,
        ClassicGroupState.COMPLETING_REBALANCE,
        ClassicGroupState.STABLE,
    ]
    assert beat(d, a, 2) == ErrorCode.NONE and beat(d, b, 2) == ErrorCode.NONE
    assert_replay_equals_live(d)


def test_a_follower_that_syncs_first_waits_for_the_leader() -> None:
    d, a, b = stable_pair()  # checked inside: B's SyncGroup was parked, and answered by A's
    assert group(d).members[b].assignment == b"B2"


def test_sync_group_in_a_stable_group_answers_at_once() -> None:
    d, a, b = stable_pair()
    assert sync(d, b, 2).assignment == b"B2"
    assert sync(d, a, 2, {a: b"other"}).assignment == b"A2"  # the generation's assignments stand


def test_a_follower_joining_again_unchanged_gets_the_current_generation_without_a_rebalance() -> None:
    d, a, b = stable_pair()
    records = len(d.log)
    response = d.join_group(join_request(b), ctx())
    assert response.generation_id == 2 and response.leader == a and response.members == ()
    assert group(d).state == ClassicGroupState.STABLE and len(d.log) == records


def test_the_leader_joining_again_starts_a_rebalance() -> None:
    d, a, b = stable_pair()
    assert isinstance(d.join_group(join_request(a), ctx()), Parked)
    assert group(d).state == ClassicGroupState.PREPARING_REBALANCE
    assert beat(d, b, 2) == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_join_asked_again_replaces_the_waiting_one() -> None:
    d, a, b = stable_pair()
    first = d.join_group(join_request(a), ctx())
    second = d.join_group(join_request(a), ctx())
    assert first == second  # the same key: the member's latest request waits
    assert d.answer(first.key).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    d.join_group(join_request(b), ctx())
    assert d.answer(second.key).generation_id == 3


# --- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (
            JoinGroupRequest(
                group_id="", member_id="", protocol_type="connect", protocols=(ICR,), session_timeout_ms=10_000
            ),
            ErrorCode.INVALID_GROUP_ID,
        ),
        (
            JoinGroupRequest(group_id=G, member_id="", protocol_type="", protocols=(ICR,), session_timeout_ms=10_000),
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            JoinGroupRequest(
                group_id=G, member_id="", protocol_type="connect", protocols=(), session_timeout_ms=10_000
            ),
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            JoinGroupRequest(
                group_id=G, member_id="", protocol_type="connect", protocols=(ICR, ICR), session_timeout_ms=10_000
            ),
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ),
        (
            JoinGroupRequest(
                group_id=G, member_id="", protocol_type="connect", protocols=(ICR,), session_timeout_ms=10
            ),
            ErrorCode.INVALID_SESSION_TIMEOUT,
        ),
        (
            JoinGroupRequest(
                group_id=G, member_id="", protocol_type="connect", protocols=(ICR,), session_timeout_ms=3_600_000
            ),
            ErrorCode.INVALID_SESSION_TIMEOUT,
        ),
        (
            JoinGroupRequest(
                group_id=G,
                member_id="",
                protocol_type="connect",
                protocols=(ICR,),
                session_timeout_ms=10_000,
                rebalance_timeout_ms=5,
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            JoinGroupRequest(
                group_id=G,
                member_id="",
                protocol_type="connect",
                protocols=(ICR,),
                session_timeout_ms=10_000,
                instance_id="",
            ),
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_join_validation(request_: JoinGroupRequest, code: ErrorCode) -> None:
    d = Driver()
    with allow_fatal(code):  # each is fatal to a Java member, as in Kafka
        assert d.join_group(request_, ctx()).error_code == code
    assert d.log == []


def test_a_member_with_no_protocol_in_common_or_another_protocol_type_is_refused() -> None:
    d, a, b = stable_pair()
    with allow_fatal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL):
        refused = d.join_group(join_request("", ClassicProtocol("range")), ctx())
        other_type = d.join_group(
            JoinGroupRequest(
                group_id=G, member_id="", protocol_type="consumer", protocols=(ICR,), session_timeout_ms=10_000
            ),
            ctx(),
        )
    assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert other_type.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert group(d).state == ClassicGroupState.STABLE


def test_sync_and_heartbeat_errors() -> None:
    d, a, b = stable_pair()
    assert beat(d, a, 1) == ErrorCode.ILLEGAL_GENERATION
    assert beat(d, "nobody", 2) == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.classic_heartbeat(ClassicHeartbeatRequest("other", a, 2)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert sync(d, a, 3).error_code == ErrorCode.ILLEGAL_GENERATION
    with allow_fatal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL):
        wrong = d.sync_group(SyncGroupRequest(G, a, 2, protocol_name="eager"))
    assert wrong.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    d.join_group(join_request(a), ctx())  # a rebalance starts
    assert sync(d, b, 2).error_code == ErrorCode.REBALANCE_IN_PROGRESS  # generation 2 is still the group's


def test_a_classic_join_to_a_connect_group_needs_connect_metadata() -> None:
    d = Driver()
    d.heartbeat(HeartbeatRequest("connect-group", "C1", 0, rebalance_timeout_ms=1_000))
    # Translated into the connect protocol (tests/test_migration.py): the coordinator must be able
    # to read what the member runs, so another protocol type or unreadable metadata is refused.
    with allow_fatal(ErrorCode.INCONSISTENT_GROUP_PROTOCOL):
        refused = d.join_group(
            JoinGroupRequest(
                group_id="connect-group",
                member_id="",
                protocol_type="connect",
                protocols=(ICR,),
                session_timeout_ms=10_000,
            ),
            ctx(),
        )
        other = d.join_group(
            JoinGroupRequest(
                group_id="connect-group",
                member_id="",
                protocol_type="consumer",
                protocols=(ICR,),
                session_timeout_ms=10_000,
            ),
            ctx(),
        )
    assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


# --- protocol selection -------------------------------------------------------------------------------


def test_the_protocol_every_member_supports_is_chosen_by_preference() -> None:
    d = Driver()
    a, first = new_member(d, EAGER)
    assert first.protocol_name == "eager"
    sync(d, a, 1, {a: b""})
    b, parked = new_member(d, ICR, EAGER)
    d.join_group(join_request(a, EAGER), ctx())
    assert d.answer(parked.key).protocol_name == "eager"  # A still speaks eager only
    sync(d, a, 2, {})
    # A restarts with both, preferring the new one: every member votes incremental_cooperative.
    d.join_group(join_request(a, ICR, EAGER), ctx())
    parked = d.join_group(join_request(b, ICR, EAGER), ctx())
    response = parked if isinstance(parked, JoinGroupResponse) else d.answer(parked.key)
    assert response.protocol_name == ICR.name and group(d).protocol == ICR.name


def test_votes_decide_between_common_protocols() -> None:
    d = Driver()
    a, _ = new_member(d, EAGER, ICR)
    sync(d, a, 1, {})
    new_member(d, ICR, EAGER)
    new_member(d, ICR, EAGER)
    d.join_group(join_request(a, EAGER, ICR), ctx())
    assert group(d).protocol == ICR.name  # two votes to one


# --- departures and timeouts ------------------------------------------------------------------------------


def test_leave_group_rebalances_the_rest_and_is_written() -> None:
    d, a, b = stable_pair()
    response = d.leave_group(LeaveGroupRequest(G, (LeaveMember(b),)))
    assert response.error_code == ErrorCode.NONE and response.members[0].error_code == ErrorCode.NONE
    assert group(d).state == ClassicGroupState.PREPARING_REBALANCE and b not in group(d).members
    assert d.log[-1].value.state == ClassicGroupState.PREPARING_REBALANCE and [
        m.member_id for m in d.log[-1].value.members
    ] == [a]
    assert beat(d, a, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    assert d.join_group(join_request(a), ctx()).generation_id == 3
    unknown = d.leave_group(LeaveGroupRequest(G, (LeaveMember("ghost"),)))
    assert unknown.members[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_the_last_member_leaving_empties_the_group_with_a_new_generation() -> None:
    d = Driver()
    a, _ = new_member(d)
    sync(d, a, 1, {a: b"x"})
    d.leave_group(LeaveGroupRequest(G, (LeaveMember(a),)))
    assert group(d).state == ClassicGroupState.EMPTY and group(d).generation == 2 and not group(d).members
    assert d.log[-1].value.state == ClassicGroupState.EMPTY
    assert_replay_equals_live(d)


def test_a_session_timeout_removes_the_member_and_rebalances() -> None:
    d, a, b = stable_pair()
    d.advance(6_000)
    assert beat(d, a, 2) == ErrorCode.NONE  # A heartbeats, B does not
    d.advance(6_000)
    assert b not in group(d).members and group(d).state == ClassicGroupState.PREPARING_REBALANCE
    assert beat(d, a, 2) == ErrorCode.REBALANCE_IN_PROGRESS


def test_members_that_do_not_join_in_time_are_left_out_of_the_next_generation() -> None:
    d, a, b = stable_pair()
    parked = d.join_group(join_request(a), ctx())
    for _ in range(9):  # B heartbeats (and is told to join) but never joins
        d.advance(3_000)
        assert beat(d, b, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    d.advance(3_001)  # the rebalance timeout (30 s) has passed
    response = d.answer(parked.key)
    assert response.generation_id == 3 and [m.member_id for m in response.members] == [a]
    assert b not in group(d).members


def test_a_waiting_join_keeps_the_member_alive() -> None:
    d, a, b = stable_pair()
    parked = d.join_group(join_request(a), ctx())
    d.advance(12_000)  # longer than A's session, but A waits for our answer
    assert a in group(d).members
    d.join_group(join_request(b), ctx())
    assert d.answer(parked.key).generation_id == 3


def test_a_leader_that_never_syncs_is_removed_and_the_others_join_again() -> None:
    d, a, b = stable_pair()
    d.join_group(join_request(a), ctx())
    assert d.join_group(join_request(b), ctx()).generation_id == 3  # B's join completes the round
    waiting = sync(d, b, 3)
    assert isinstance(waiting, Parked)
    for _ in range(9):  # A, the leader, heartbeats but does not sync within the rebalance timeout
        d.advance(3_000)
        assert beat(d, a, 3) == ErrorCode.NONE
    d.advance(3_000)
    assert d.answer(waiting.key).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert a not in group(d).members and group(d).state == ClassicGroupState.PREPARING_REBALANCE


def test_the_initial_delay_gathers_a_storm_of_joins_into_one_generation() -> None:
    d = Driver(CoordinatorConfig(initial_assignment_delay_ms=3_000))
    joins = [new_member(d) for _ in range(3)]
    d.advance(1_000)
    joins.append(new_member(d))  # extends the wait by another 3 s
    d.advance(2_500)
    assert group(d).state == ClassicGroupState.PREPARING_REBALANCE
    d.advance(600)
    answers = [d.answer(parked.key) for _, parked in joins]
    assert {r.generation_id for r in answers} == {1}
    assert sum(1 for r in answers if r.members) == 1  # one leader, with all four members
    assert len(next(r for r in answers if r.members).members) == 4


# --- static members ---------------------------------------------------------------------------------------


def test_a_static_member_back_with_the_same_metadata_takes_its_place_without_a_rebalance() -> None:
    d = Driver()
    a, joined = new_member(d, instance_id="host-a")
    assert joined.generation_id == 1  # a static member needs no MEMBER_ID_REQUIRED round
    sync(d, a, 1, {a: b"mine"})
    back = d.join_group(join_request("", instance_id="host-a"), RequestContext(fresh_id="a-2"))
    assert back.member_id == "a-2" and back.generation_id == 1 and back.leader == "a-2"
    # It leads, but must not assign; Kafka gives it the members all the same.
    assert back.skip_assignment and back.members == (JoinGroupMember("a-2", "host-a", b"icr-meta"),)
    assert group(d).state == ClassicGroupState.STABLE and sync(d, "a-2", 1).assignment == b"mine"
    assert beat(d, a, 1) == ErrorCode.UNKNOWN_MEMBER_ID  # the old member id is gone
    assert d.log[-1].value.members[0].member_id == "a-2"
    with allow_fatal(ErrorCode.FENCED_INSTANCE_ID):  # the old process, still running, is fenced
        fenced = d.classic_heartbeat(ClassicHeartbeatRequest(G, a, 1, instance_id="host-a"))
    assert fenced.error_code == ErrorCode.FENCED_INSTANCE_ID
    unknown = d.classic_heartbeat(ClassicHeartbeatRequest(G, "a-2", 1, instance_id="host-b"))
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID  # nobody is instance host-b


def test_a_static_member_back_with_other_metadata_rebalances() -> None:
    d, a, b = stable_pair()
    c, parked = new_member(d, instance_id="host-c")
    d.join_group(join_request(a), ctx())
    d.join_group(join_request(b), ctx())
    gen = d.answer(parked.key).generation_id
    sync(d, a, gen, {a: b"", b: b"", c: b"c"})
    back = d.join_group(
        join_request("", ClassicProtocol(ICR.name, b"new"), EAGER, instance_id="host-c"), RequestContext(fresh_id="c-2")
    )
    assert isinstance(back, Parked) and group(d).state == ClassicGroupState.PREPARING_REBALANCE


# --- failover: the next coordinator replays the log -------------------------------------------------------


def failover(d: Driver) -> Driver:
    """A new coordinator that loaded the old one's log, with the timers it arms after a load."""
    new = Driver(now=d.now)
    new.coordinator = GroupCoordinator(assert_replay_equals_live(d), d.coordinator.config)
    new.log = list(d.log)
    for timer in new.coordinator.timers(new.now):
        new.timers[timer.key] = timer.deadline_ms
    return new


def test_failover_in_a_stable_group_needs_no_rejoin() -> None:
    d, a, b = stable_pair()
    new = failover(d)
    assert group(new).state == ClassicGroupState.STABLE and group(new).leader == a
    assert beat(new, a, 2) == ErrorCode.NONE and beat(new, b, 2) == ErrorCode.NONE
    assert sync(new, b, 2).assignment == b"B2"
    new.advance(11_000)  # sessions run from the load: members that stop heartbeating go
    assert group(new).state == ClassicGroupState.EMPTY and group(new).generation == 3


def test_failover_while_the_leader_computes_accepts_its_sync() -> None:
    d, a, b = stable_pair()
    d.join_group(join_request(a), ctx())
    d.join_group(join_request(b), ctx())  # generation 3 written; nobody has synced
    new = failover(d)
    assert group(new).state == ClassicGroupState.COMPLETING_REBALANCE and group(new).generation == 3
    waiting = sync(new, b, 3)
    assert sync(new, a, 3, {a: b"A3", b: b"B3"}).assignment == b"A3"
    assert new.answer(waiting.key).assignment == b"B3"
    assert_replay_equals_live(new)


def test_failover_after_a_departure_resumes_the_rebalance() -> None:
    d, a, b = stable_pair()
    d.leave_group(LeaveGroupRequest(G, (LeaveMember(b),)))
    new = failover(d)
    assert group(new).state == ClassicGroupState.PREPARING_REBALANCE and b not in group(new).members
    assert beat(new, a, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    assert new.join_group(join_request(a), ctx()).generation_id == 3


def test_failover_before_a_join_phase_is_written_keeps_the_last_generation() -> None:
    d, a, b = stable_pair()
    d.join_group(join_request(a), ctx())  # PreparingRebalance, not written (seed 004 case 1)
    new = failover(d)
    assert group(new).state == ClassicGroupState.STABLE and group(new).generation == 2
    # The members' parked requests failed with the old coordinator; they join again.
    parked = new.join_group(join_request(a), ctx())
    assert new.join_group(join_request(b), ctx()).generation_id == 3
    assert new.answer(parked.key).generation_id == 3


def test_a_v0_record_is_read_as_stable_with_members() -> None:
    d, _, _ = stable_pair()
    old = d.log[-1].value
    state = CoordinatorState()
    state.replay(Record(ClassicGroupMetadataKey(G), replace(old, state=None)))
    assert state.classic_groups[G].state == ClassicGroupState.STABLE


# --- admin on a classic group -------------------------------------------------------------------------


def test_new_connectors_make_a_stable_classic_group_join_again() -> None:
    d, a, b = stable_pair()
    assert d.set_connectors(G, {"A": 2}).error_code == ErrorCode.NONE
    assert d.state.groups[G].connector_counts[0].name == "A" and not d.state.groups[G].members
    assert group(d).state == ClassicGroupState.PREPARING_REBALANCE
    assert beat(d, b, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    assert_replay_equals_live(d)


def test_delete_group_refuses_members_and_tombstones_an_empty_classic_group() -> None:
    d, a, b = stable_pair()
    assert d.delete_group(G).error_code == ErrorCode.NON_EMPTY_GROUP
    d.leave_group(LeaveGroupRequest(G, (LeaveMember(a), LeaveMember("", instance_id=None), LeaveMember(b))))
    assert group(d).state == ClassicGroupState.EMPTY
    d.set_connectors(G, {"A": 1})
    assert d.delete_group(G).error_code == ErrorCode.NONE
    assert G not in d.state.classic_groups and G not in d.state.groups
    assert d.log[-1].value is None and assert_replay_equals_live(d).slots() == {}


def test_describe_and_list_show_a_classic_group_in_kafkas_words() -> None:
    d, a, b = stable_pair()
    d.set_connectors(G, {"A": 1})  # a rebalance starts
    description = d.coordinator.describe_group(G)
    assert description.group_type == "classic" and description.state == "PREPARING_REBALANCE"
    assert description.generation == 2 and description.leader == a and description.protocol_name == ICR.name
    assert [m.protocol for m in description.members] == ["classic", "classic"]
    assert {m.state for m in description.members} == {"UNJOINED"}  # nobody has joined the new round yet
    d.join_group(join_request(a), ctx())
    states = {m.member_id: m.state for m in d.coordinator.describe_group(G).members}
    assert states == {a: "PREPARING_REBALANCE", b: "UNJOINED"}
    listing = d.coordinator.list_groups()
    assert [(g.group_id, g.state, g.members) for g in listing] == [(G, "PREPARING_REBALANCE", 2)]
