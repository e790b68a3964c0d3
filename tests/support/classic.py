"""Classic (eager and cooperative) groups of Connect workers as the coordinator writes them: Connect's bytes
(metadata, assignments), classic records made of them and a log of a whole group (`classic_log`), and a group
driven through JoinGroup and SyncGroup and then upgraded to the connect protocol (`migrated`). Shared by the
classic views' tests and the replay, audit and page tests that read such a group."""

from __future__ import annotations

from records import (
    ClassicGroupMember,
    ClassicGroupMetadataKey,
    ClassicGroupMetadataValue,
    ConnectorsAndTasks,
    Record,
    TaskId,
    encode,
)
from records.connect_protocol import WorkerAssignment, WorkerMetadata, encode_assignment, encode_metadata

from coordinator.core.driver import Driver
from coordinator.core.protocol import (
    ClassicProtocol,
    ErrorCode,
    JoinGroupRequest,
    JoinGroupResponse,
    Parked,
    RequestContext,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from coordinator.core.state import CoordinatorState
from replay.positions import RawRecord

G = "connect-classic"


T0 = 1_772_334_000_000  # 2026-03-01 03:00:00 UTC


LEADER = "W1"


def cat(*items: str | tuple[str, int]) -> ConnectorsAndTasks:
    """`cat("A", ("A", 0))`: connector A and its task 0."""
    return ConnectorsAndTasks(
        tuple(i for i in items if isinstance(i, str)), tuple(TaskId(*i) for i in items if not isinstance(i, str))
    )


def url(member_id: str) -> str:
    return f"http://{member_id.lower()}.example:8083"


def metadata(member_id: str, protocol: str, owned: ConnectorsAndTasks | None = None, offset: int = 12) -> bytes:
    """A worker's JoinGroup metadata: `owned` is what it runs (v1/v2; None: never assigned yet)."""
    allocation = None if owned is None else WorkerAssignment(LEADER, url(LEADER), offset, owned)
    return encode_metadata(WorkerMetadata(url(member_id), offset, allocation), protocol)


def assignment(
    protocol: str, assigned: ConnectorsAndTasks | None = None, revoked: ConnectorsAndTasks | None = None
) -> bytes:
    """The leader's SyncGroup bytes for a member (v0: everything it runs; v1/v2: what changes)."""
    return encode_assignment(WorkerAssignment(LEADER, url(LEADER), 12, assigned or cat(), revoked or cat()), protocol)


def member(member_id: str, subscription: bytes, given: bytes = b"", instance: str | None = None) -> ClassicGroupMember:
    return ClassicGroupMember(member_id, instance, "worker", "10.0.0.1", 60_000, 10_000, subscription, given)


def classic(generation: int, state: str, protocol: str, *members: ClassicGroupMember, group: str = G) -> Record:
    return Record(
        ClassicGroupMetadataKey(group),
        ClassicGroupMetadataValue("connect", generation, protocol, LEADER, T0, tuple(members), state),
    )


def raw(log: list[Record], partition: int = 0, step_ms: int = 1_000) -> list[RawRecord]:
    """The log as the topic holds it, a record a second from T0."""
    return [RawRecord(partition, n, T0 + n * step_ms, *encode(r)) for n, r in enumerate(log)]


def classic_log(protocol: str = "sessioned", group: str = G) -> list[Record]:
    """A cooperative (v1/v2) classic group of Connect workers, record by record, as the coordinator
    writes it. Connector A has 3 tasks.

    0  generation 1 joined: W1, W2, never assigned
    1  generation 1 synced: W1 gets A, A-0; W2 gets A-1, A-2
    2  generation 2 joined: W3 new; W1 and W2 report what they run
    3  generation 2 synced: W2 revokes A-2
    4  generation 3 joined: W2 reports A-1 only
    5  generation 3 synced: W3 gets A-2
    6  W2 leaves: PreparingRebalance at generation 3, without W2 (it ran A-1)
    """
    w1, w2 = cat("A", ("A", 0)), cat(("A", 1), ("A", 2))
    m = lambda mid, owned=None: metadata(mid, protocol, owned)  # noqa: E731
    a = lambda assigned=None, revoked=None: assignment(protocol, assigned, revoked)  # noqa: E731
    return [
        classic(1, "CompletingRebalance", protocol, member("W1", m("W1")), member("W2", m("W2")), group=group),
        classic(1, "Stable", protocol, member("W1", m("W1"), a(w1)), member("W2", m("W2"), a(w2)), group=group),
        classic(
            2,
            "CompletingRebalance",
            protocol,
            member("W1", m("W1", w1)),
            member("W2", m("W2", w2)),
            member("W3", m("W3")),
            group=group,
        ),
        classic(
            2,
            "Stable",
            protocol,
            member("W1", m("W1", w1), a()),
            member("W2", m("W2", w2), a(revoked=cat(("A", 2)))),
            member("W3", m("W3"), a()),
            group=group,
        ),
        classic(
            3,
            "CompletingRebalance",
            protocol,
            member("W1", m("W1", w1)),
            member("W2", m("W2", cat(("A", 1)))),
            member("W3", m("W3")),
            group=group,
        ),
        classic(
            3,
            "Stable",
            protocol,
            member("W1", m("W1", w1), a()),
            member("W2", m("W2", cat(("A", 1))), a()),
            member("W3", m("W3"), a(cat(("A", 2)))),
            group=group,
        ),
        classic(
            3,
            "PreparingRebalance",
            protocol,
            member("W1", m("W1", w1), a()),
            member("W3", m("W3"), a(cat(("A", 2)))),
            group=group,
        ),
    ]


def replayed_state(log: list[Record]) -> CoordinatorState:
    state = CoordinatorState()
    state.replay_all(log)
    return state


def classic_join(d: Driver, member_id: str, sub: bytes, protocol: str, fresh_id: str = "") -> object:
    """A classic JoinGroup of Connect's protocol `protocol` to the driver's coordinator: its response."""
    return d.join_group(
        JoinGroupRequest(
            group_id=G,
            member_id=member_id,
            protocol_type="connect",
            protocols=(ClassicProtocol(protocol, sub),),
            session_timeout_ms=10_000,
            rebalance_timeout_ms=30_000,
        ),
        RequestContext("worker", "10.0.0.9", fresh_id),
    )


def classic_new(d: Driver, name: str, sub: bytes, protocol: str):  # noqa: ANN202
    """A new classic member: the join that asks for a member id, then the join with it (its id, the answer)."""
    first = classic_join(d, "", sub, protocol, f"{name}-1")
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return first.member_id, classic_join(d, first.member_id, sub, protocol)


def migrated(d: Driver, protocol: str = "sessioned", *, downgrade: bool = True) -> tuple[str, str]:
    """Two workers on the classic protocol run A, A-0, A-1 and B, B-0; a connect worker n1 joins
    (the group is upgraded) and, with `downgrade`, leaves at once. Their classic member ids."""
    from coordinator.core.driver import SimWorker

    d.set_connectors(G, {"A": 2, "B": 1})
    c1, joined = classic_new(d, "c1", metadata("C1", protocol), protocol)
    c2, parked = classic_new(d, "c2", metadata("C2", protocol), protocol)
    if isinstance(joined, JoinGroupResponse) and isinstance(parked, Parked):  # c1 alone was generation 1
        joined = classic_join(d, c1, metadata("C1", protocol), protocol)
    generation = joined.generation_id
    given = {c1: assignment(protocol, cat("A", ("A", 0), ("A", 1))), c2: assignment(protocol, cat("B", ("B", 0)))}
    d.sync_group(
        SyncGroupRequest(G, c1, generation, assignments=tuple(SyncGroupAssignment(m, x) for m, x in given.items()))
    )
    assert d.state.classic_groups[G].state == "Stable"
    n1 = SimWorker(d, G, "n1")
    n1.heartbeat()
    assert G not in d.state.classic_groups and {c1, c2, "n1"} <= set(d.state.groups[G].members)
    if not downgrade:
        return c1, c2
    d.advance(100)
    n1.leave()
    assert d.state.classic_groups[G].members.keys() == {c1, c2}
    return c1, c2
