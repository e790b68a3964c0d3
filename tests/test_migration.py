"""Online migration between the classic and the connect protocol (seed 000), through the pure
state machine: classic workers (Kafka Connect's WorkerCoordinator, `ClassicWorker`) and connect
workers (`Member`) in one group. Upgrade when the first connect worker joins, the classic members'
requests translated while the group is connect, downgrade when the last connect worker leaves, and
failovers in between. After every step no item is owned by two workers."""

from __future__ import annotations

from records import ClassicGroupMetadataKey

from coordinator.core.driver import Driver
from coordinator.core.protocol import ClassicHeartbeatRequest, ErrorCode, HeartbeatRequest
from coordinator.core.state import CoordinatorState
from coordinator.core.states import ClassicGroupState
from coordinator.core.worker.member import Lose
from tests.support.migration import CONNECTORS, G, Mixed


def assert_replay_equals_live(d: Driver) -> None:
    replayed = CoordinatorState()
    replayed.replay_all(d.log)
    assert replayed.slots() == d.state.slots()


def classic_fleet(names: list[str]) -> Mixed:
    d = Driver()
    d.set_connectors(G, CONNECTORS)
    m = Mixed(d)
    for name in names:
        m.add_classic(name)
    m.run(3_000)
    assert m.converged() and d.state.classic_groups[G].state == ClassicGroupState.STABLE
    return m


def test_the_first_connect_worker_converts_the_group_at_its_generation() -> None:
    m = classic_fleet(["c1", "c2", "c3"])
    d = m.d
    generation = d.state.classic_groups[G].generation
    before = m.owned()
    m.add_connect("n1").heartbeat(compute=False)  # joins: the group becomes a connect group in this request
    assert G not in d.state.classic_groups
    assert any(r.key == ClassicGroupMetadataKey(G) and r.value is None for r in d.log)
    group = d.state.groups[G]
    assert group.assignment_epoch == generation and group.group_epoch == generation + 1
    for name, w in m.classic.items():
        member = group.members[w.member_id]
        assert member.classic_member_metadata is not None and member.classic_member_metadata.session_timeout_ms == 3_000
        current = group.current(w.member_id)
        assert (
            current.member_epoch == generation
            and set(current.assignment.tasks) | set(current.assignment.connectors) == before[name]
        )  # what it ran is its current assignment
    description = d.coordinator.describe_group(G)
    assert {x.protocol for x in description.members} == {"classic", "connect"}
    m.run(6_000)
    assert m.converged() and m.connect["n1"].owned  # the connect worker got a share
    states = {x.member_id: (x.protocol, x.state) for x in d.coordinator.describe_group(G).members}
    assert set(states.values()) == {("classic", "STABLE"), ("connect", "STABLE")}
    assert_replay_equals_live(d)


def test_a_classic_member_of_a_connect_group_is_told_to_join_again_while_its_assignment_changes() -> None:
    m = classic_fleet(["c1", "c2"])
    d = m.d
    m.add_connect("n1").heartbeat()
    m.connect["n1"].heartbeat()  # computes the target (client-side, the only member that can)
    c1 = m.classic["c1"].worker
    group = d.state.groups[G]
    assert group.computation is None or group.computation.member_id == "n1"
    code = d.coordinator.classic_heartbeat(
        ClassicHeartbeatRequest(G, c1.member_id, c1.generation), d.now
    ).response.error_code
    assert code == ErrorCode.REBALANCE_IN_PROGRESS
    shown = {x.member_id: x.state for x in d.coordinator.describe_group(G).members}
    assert shown[c1.member_id] == "PREPARING_REBALANCE"  # seed 000's worker state: it must join again
    m.run(6_000)
    assert m.converged()
    # Settled: its heartbeats are quiet again.
    c1 = m.classic["c1"].worker
    assert (
        d.coordinator.classic_heartbeat(
            ClassicHeartbeatRequest(G, c1.member_id, c1.generation), d.now
        ).response.error_code
        == ErrorCode.NONE
    )


def test_a_rolling_upgrade_then_a_rolling_downgrade() -> None:
    m = classic_fleet(["w1", "w2", "w3"])
    d = m.d
    every_classic = list(m.classic.values())
    # Upgrade: each classic worker stops (leaves) and comes back on the connect protocol.
    for name in ["w1", "w2", "w3"]:
        m.classic.pop(name).leave()
        m.add_connect(name)
        m.run(4_000)
        assert m.converged(), (name, m.owned())
    assert G not in d.state.classic_groups
    assert all(not (x.classic_member_metadata) for x in d.state.groups[G].members.values())
    # Downgrade: each connect worker leaves and comes back on the classic protocol; the last
    # connect worker's leave turns the group classic again.
    for name in ["w1", "w2", "w3"]:
        m.connect.pop(name).leave()
        every_classic.append(m.add_classic(name))
        m.run(5_000)
        assert m.converged(), (name, m.owned())
    classic = d.state.classic_groups[G]
    assert classic.state == ClassicGroupState.STABLE and not d.state.groups[G].members
    assert not [a for w in every_classic for a in w.log if isinstance(a, Lose)]  # no worker lost work on the way
    assert_replay_equals_live(d)


def test_the_last_connect_worker_leaving_turns_the_group_classic_and_the_rest_rejoin() -> None:
    m = classic_fleet(["c1", "c2"])
    d = m.d
    m.add_connect("n1")
    m.run(4_000)
    assert m.converged() and m.connect["n1"].owned
    epoch = d.state.groups[G].group_epoch
    m.connect.pop("n1").leave()
    classic = d.state.classic_groups[G]
    assert classic.state == ClassicGroupState.PREPARING_REBALANCE and classic.generation > epoch
    # Their heartbeats carry their connect-era generation: they are told to join, not fenced.
    for w in m.classic.values():
        answer = d.classic_heartbeat(ClassicHeartbeatRequest(G, w.member_id, w.worker.generation))
        assert answer.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert (
        d.log[-1].key == ClassicGroupMetadataKey(G) and d.log[-1].value.state == ClassicGroupState.PREPARING_REBALANCE
    )
    assert not d.state.groups[G].members and d.state.groups[G].connector_counts  # the work stays
    m.run(6_000)
    assert m.converged() and d.state.classic_groups[G].state == ClassicGroupState.STABLE
    assert not [a for w in m.classic.values() for a in w.log if isinstance(a, Lose)]  # nothing was lost on the way


def test_failovers_during_a_migration_resume_it() -> None:
    m = classic_fleet(["c1", "c2", "c3"])
    d = m.d
    m.add_connect("n1")
    for _ in range(12):  # a failover every 500 ms while the group converts and converges
        m.run(500)
        live = d.state.slots()
        assert d.fail_over().slots() == live
        for w in m.classic.values():
            w.coordinator_gone()
    m.run(6_000)
    assert m.converged()


def test_a_connect_member_cannot_heartbeat_into_a_classic_group_without_joining() -> None:
    m = classic_fleet(["c1"])
    answer = m.d.heartbeat(HeartbeatRequest(G, "n1", 5))
    assert answer.error_code == ErrorCode.UNKNOWN_MEMBER_ID and G in m.d.state.classic_groups


def test_a_classic_worker_taking_over_the_last_connect_workers_instance_turns_the_group_classic() -> None:
    """The connect SDK leaves with -2 as a static member: its instance waits for it. A classic
    process with that instance id takes it over, and no connect member is left."""
    m = classic_fleet(["c1"])
    d = m.d
    n1 = m.add_connect("n1")
    m.run(3_000)
    assert m.converged() and n1.owned
    m.connect.pop("n1").leave(static=True)
    m.add_classic("n1")
    m.run(4_000)
    assert G in d.state.classic_groups and not d.state.groups[G].members
    assert m.converged() and d.state.classic_groups[G].state == ClassicGroupState.STABLE


def _join_twice(d: Driver, protocol_type: str, protocol, fresh_id: str) -> None:  # noqa: ANN001
    """A classic member's first JoinGroup (MEMBER_ID_REQUIRED hands it an id) and its second, with it."""
    from coordinator.core.protocol import JoinGroupRequest, RequestContext

    def join(member_id: str, context=None):  # noqa: ANN001, ANN202
        request = JoinGroupRequest(
            group_id=G,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=(protocol,),
            session_timeout_ms=10_000,
        )
        return d.join_group(request) if context is None else d.join_group(request, context)

    join(join("", RequestContext(fresh_id=fresh_id)).member_id)


def test_a_classic_group_that_is_not_connects_or_whose_bytes_cannot_be_read_is_not_upgraded() -> None:
    from coordinator.core.protocol import ClassicProtocol

    d = Driver()
    _join_twice(d, "consumer", ClassicProtocol("range", b"x"), "k1")
    answer = d.heartbeat(HeartbeatRequest(G, "n1", 0, rebalance_timeout_ms=1_000))
    assert answer.error_code == ErrorCode.INVALID_GROUP_ID and "protocol type 'consumer'" in answer.error_message
    assert G in d.state.classic_groups  # nothing changed

    d = Driver()
    d.set_connectors(G, CONNECTORS)
    _join_twice(d, "connect", ClassicProtocol("default", b"junk"), "c1")
    answer = d.heartbeat(HeartbeatRequest(G, "n1", 0, rebalance_timeout_ms=1_000))
    assert answer.error_code == ErrorCode.INVALID_GROUP_ID and "cannot be read" in answer.error_message


def test_a_classic_group_whose_connectors_the_coordinator_does_not_know_is_not_upgraded() -> None:
    """A real Connect cluster keeps its connectors in its own config topic: without them the first
    connect target would hold no work and revoke everything. The connect joiner is refused, with what
    to do; the classic members go on untouched."""
    d = Driver()
    m = Mixed(d)
    for name in ("c1", "c2"):
        m.add_classic(name)
    m.run(3_000)
    before = {n: w.owned for n, w in m.classic.items()}
    classic = d.state.classic_groups[G]
    assert classic.state == ClassicGroupState.STABLE
    answer = d.heartbeat(HeartbeatRequest(G, "n1", 0, rebalance_timeout_ms=1_000))
    assert answer.error_code == ErrorCode.INVALID_GROUP_ID and "connectors set" in answer.error_message
    assert d.state.classic_groups[G] is classic
    assert G not in d.state.groups or not d.state.groups[G].members
    m.run(2_000)
    assert {n: w.owned for n, w in m.classic.items()} == before
    d.set_connectors(G, CONNECTORS)  # now it can
    m.add_connect("n1")
    m.run(6_000)
    assert m.converged() and G not in d.state.classic_groups


def test_a_classic_group_of_the_previous_releases_dialect_is_not_upgraded() -> None:
    """The previous release's classic workers offered `incremental_cooperative` and `eager` with Avro
    bodies; some of those bytes read as a Connect worker that runs nothing. The group's protocol name
    refuses the upgrade, so no running work is taken for idle."""
    from coordinator.core.protocol import ClassicProtocol, JoinGroupRequest, RequestContext

    d = Driver()
    d.set_connectors(G, CONNECTORS)
    old = b"\x00\x00\x00\x01\x00\x00"  # int16 0, then an Avro body with a null Url: reads as `default` bytes
    first = d.join_group(
        JoinGroupRequest(
            group_id=G,
            member_id="",
            protocol_type="connect",
            protocols=(ClassicProtocol("eager", old),),
            session_timeout_ms=10_000,
        ),
        RequestContext(fresh_id="c1"),
    )
    d.join_group(
        JoinGroupRequest(
            group_id=G,
            member_id=first.member_id,
            protocol_type="connect",
            protocols=(ClassicProtocol("eager", old),),
            session_timeout_ms=10_000,
        )
    )
    answer = d.heartbeat(HeartbeatRequest(G, "n1", 0, rebalance_timeout_ms=1_000))
    assert (
        answer.error_code == ErrorCode.INVALID_GROUP_ID
        and "'eager' is not a Kafka Connect protocol" in answer.error_message
    )
    assert G in d.state.classic_groups
