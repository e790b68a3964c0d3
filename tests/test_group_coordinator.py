"""One test per rule and per error of seed 000 (and 003 where it adds rules), through the pure
state machine: no broker, a virtual clock."""

from __future__ import annotations

import msgspec
import orjson
import pytest

from records import (
    Assignor,
    ClassicGroupMetadataKey,
    ClassicGroupMetadataValue,
    ConnectorsAndTasks,
    Record,
    TaskId,
)

from coordinator.api import wire
from coordinator.core.assignors import ASSIGNORS, GroupAssignment, MemberAssignment
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.group_coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.core.items import connectors_and_tasks, items_of
from coordinator.core.protocol import (
    LEAVE_REASON_TEXT,
    ErrorCode,
    HeartbeatRequest,
    InstallAssignmentRequest,
    InstallMember,
    LeaveReason,
    PrepareAssignmentRequest,
    Timer,
    leave_reason_text,
)
from coordinator.core.state import CoordinatorState
from coordinator.core.states import MemberState

G = "g"
ICR = "incremental_cooperative"


def assignor(
    name: str = ICR, low: int = 0, high: int = 1, version: int | None = None, reason: int = 0, metadata: bytes = b""
) -> Assignor:
    return Assignor(name, low, high, reason, high if version is None else version, metadata)


def join(member: str = "W1", **fields) -> HeartbeatRequest:
    fields.setdefault("rebalance_timeout_ms", 5_000)
    return HeartbeatRequest(G, member, 0, **fields)


def group_of(d: Driver):  # noqa: ANN201
    return d.state.groups[G]


def started(connectors: dict[str, int] | None = None, workers: int = 2, **kw) -> tuple[Driver, list[SimWorker]]:
    """A converged group of `workers` client-side incremental cooperative workers."""
    d = Driver()
    d.set_config(G, session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=5_000)
    d.set_connectors(G, connectors or {"A": 2, "B": 1})
    ws = [SimWorker(d, G, f"W{i + 1}", **kw) for i in range(workers)]
    converge(ws)
    return d, ws


def assert_replay_equals_live(d: Driver) -> CoordinatorState:
    replayed = CoordinatorState()
    replayed.replay_all(d.log)
    assert replayed.slots() == d.state.slots()
    return replayed


# --- heartbeat request validation ----------------------------------------------------------------

INVALID_HEARTBEATS = {
    "GroupId must be non-empty": HeartbeatRequest("", "W1", 0, rebalance_timeout_ms=1),
    "MemberId must be non-empty": HeartbeatRequest(G, "", 0, rebalance_timeout_ms=1),
    "MemberEpoch must be >= -2": HeartbeatRequest(G, "W1", -3, rebalance_timeout_ms=1),
    "InstanceId, if provided, must be non-empty": join(instance_id=""),
    "RebalanceTimeoutMs must be larger than zero in the first heartbeat request": join(rebalance_timeout_ms=-1),
    "ServerAssignor and ClientAssignors cannot be used together": join(
        server_assignor=ICR, client_assignors=(assignor(),)
    ),
    "Assignor.Name must be non-empty": join(client_assignors=(assignor(""),)),
    "Assignor.MinimumVersion must be >= -1": join(client_assignors=(assignor(low=-2, high=0, version=0),)),
    "Assignor.MaximumVersion must be >= 0": join(client_assignors=(assignor(low=-1, high=-1, version=-1),)),
    "Assignor.MaximumVersion must be >= Assignor.MinimumVersion": join(client_assignors=(assignor(low=3, high=2),)),
    "Assignor.Version must be within the range (above)": join(client_assignors=(assignor(low=0, high=2, version=3),)),
    "Assignor.Version must be within the range (below)": join(client_assignors=(assignor(low=1, high=2, version=0),)),
    "TopicPartitions and ConnectorsAndTasks cannot be used together (seed 003)": join(topic_partitions=[("t", 0)]),
    "ServerAssignor, if provided, must be non-empty": join(server_assignor=""),
    "a task number is below 0": HeartbeatRequest(G, "W1", 3, owned=ConnectorsAndTasks((), (TaskId("A", -1),))),
}


@pytest.mark.parametrize("rule", INVALID_HEARTBEATS)
def test_heartbeat_rule_gives_invalid_request_and_writes_nothing(rule: str) -> None:
    d = Driver()
    result = d.coordinator.heartbeat(INVALID_HEARTBEATS[rule], 0)
    assert result.response.error_code == ErrorCode.INVALID_REQUEST
    assert result.response.error_message
    assert result.records == [] and result.timers == []


def test_rebalance_timeout_is_only_required_on_the_first_heartbeat() -> None:
    d, (w1, _) = started()
    response = d.heartbeat(HeartbeatRequest(G, "W1", w1.member_epoch, rebalance_timeout_ms=-1))
    assert response.error_code == ErrorCode.NONE


# --- UNSUPPORTED_ASSIGNOR ---------------------------------------------------------------------------


def test_unknown_server_assignor_is_unsupported() -> None:
    d = Driver()
    response = d.heartbeat(join(server_assignor="range"))
    assert response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert G not in d.state.groups


def test_client_assignor_with_nothing_in_common_is_unsupported() -> None:
    d = Driver()
    d.heartbeat(join("W1", client_assignors=(assignor("eager", 0, 0),)))
    response = d.heartbeat(join("W2", client_assignors=(assignor(ICR),)))
    assert response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert "W2" not in group_of(d).members and group_of(d).group_epoch == 1


def test_client_assignor_versions_must_overlap_the_other_members() -> None:
    d = Driver()
    d.heartbeat(join("W1", client_assignors=(assignor(ICR, 0, 1),)))
    response = d.heartbeat(join("W2", client_assignors=(assignor(ICR, 2, 3),)))
    assert response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert "overlap" in response.error_message


def test_a_member_must_cover_every_version_in_use() -> None:
    # Seed: A [1-5], B [3-4], C [2-4] -> A can compute. Without A, B [3-4] and C [2-3] overlap but
    # a member [1-3] would leave nobody covering [1-4].
    d = Driver()
    d.heartbeat(join("B", client_assignors=(assignor(ICR, 3, 4),)))
    d.heartbeat(join("C", client_assignors=(assignor(ICR, 2, 4),)))
    response = d.heartbeat(join("D", client_assignors=(assignor(ICR, 1, 3),)))
    assert response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert d.heartbeat(join("A", client_assignors=(assignor(ICR, 1, 5),))).error_code != ErrorCode.UNSUPPORTED_ASSIGNOR


def test_worker_selection_picks_the_member_covering_all_versions() -> None:
    d = Driver()
    d.set_connectors(G, {"A": 1})
    d.heartbeat(join("B", client_assignors=(assignor(ICR, 3, 4),)))
    d.heartbeat(join("C", client_assignors=(assignor(ICR, 2, 4),)))
    d.heartbeat(join("A", client_assignors=(assignor(ICR, 1, 5),)))
    assert group_of(d).computation is None or group_of(d).computation.member_id in {"A", "B", "C"}
    d.heartbeat(HeartbeatRequest(G, "B", 0))
    assert group_of(d).computation.member_id == "A"  # the seed's example: A [1-5] covers everyone


def test_changing_assignors_to_an_unsupported_set_is_refused_and_keeps_the_old_ones() -> None:
    d, (w1, w2) = started()
    epoch = group_of(d).group_epoch
    response = d.heartbeat(HeartbeatRequest(G, "W2", w2.member_epoch, client_assignors=(assignor("eager", 0, 0),)))
    assert response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert group_of(d).members["W2"].client_assignors[0].name == ICR
    assert group_of(d).group_epoch == epoch


# --- member metadata changes bump the group epoch -------------------------------------------------------


@pytest.mark.parametrize("change", ["reason", "metadata", "version", "assignors", "server_assignor"])
def test_assignor_changes_bump_the_group_epoch(change: str) -> None:
    d, (w1, w2) = started()
    epoch = group_of(d).group_epoch
    new = {
        "reason": (assignor(reason=1),),
        "metadata": (assignor(metadata=b"x"),),
        "version": (assignor(version=0),),
        "assignors": (assignor(), assignor("eager", 0, 0)),
    }.get(change)
    fields = {"server_assignor": ICR} if change == "server_assignor" else {"client_assignors": new}
    response = d.heartbeat(HeartbeatRequest(G, "W1", w1.member_epoch, **fields))
    assert response.error_code in (ErrorCode.NONE, ErrorCode.COMPUTE_ASSIGNMENT)
    assert group_of(d).group_epoch == epoch + 1


def test_other_metadata_changes_are_written_without_a_rebalance() -> None:
    d, (w1, _) = started()
    epoch = group_of(d).group_epoch
    d.heartbeat(HeartbeatRequest(G, "W1", w1.member_epoch, url="http://w1:8083", rebalance_timeout_ms=9_000))
    member = group_of(d).members["W1"]
    assert member.url == "http://w1:8083" and member.rebalance_timeout_ms == 9_000
    assert group_of(d).group_epoch == epoch


def test_steady_heartbeat_writes_nothing_and_rearms_the_session() -> None:
    d, (w1, _) = started()
    result = d.coordinator.heartbeat(HeartbeatRequest(G, "W1", w1.member_epoch), 1234)
    assert result.records == []
    assert result.response.error_code == ErrorCode.NONE and result.response.assignment is None
    assert result.response.heartbeat_interval_ms == 1_000
    assert [(t.key, t.deadline_ms) for t in result.timers] == [(("session", G, "W1"), 1234 + 10_000)]


def test_a_member_waiting_for_released_work_is_asked_to_heartbeat_sooner() -> None:
    d, (w1, w2) = started({"A": 4, "B": 4})
    w3 = SimWorker(d, G, "W3")
    w3.heartbeat()  # joins; W1 computes the new target on its heartbeat
    w1.heartbeat()
    response = w3.heartbeat()  # its target holds work that W1 and W2 have not revoked yet
    assert group_of(d).currents["W3"].state == MemberState.UNRELEASED
    assert response.heartbeat_interval_ms == 100  # a tenth of the group's 1 s
    converge([w1, w2, w3])
    assert group_of(d).currents["W3"].state == MemberState.STABLE and w3.owned
    assert w3.heartbeat().heartbeat_interval_ms == 1_000
    assert w1.heartbeat().heartbeat_interval_ms == 1_000


def test_members_heartbeat_sooner_while_the_target_is_computed() -> None:
    d, (w1, w2) = started({"A": 4, "B": 4})
    w3 = SimWorker(d, G, "W3")
    assert w3.heartbeat().heartbeat_interval_ms == 100  # its join bumped the epoch; W1 computes
    assert w2.heartbeat().heartbeat_interval_ms == 100  # and W2 will get its new target soon
    w1.heartbeat()  # W1 computed and installed
    converge([w1, w2, w3])
    assert w2.heartbeat().heartbeat_interval_ms == 1_000


def test_a_static_member_back_for_its_departed_work_computes_the_target_itself() -> None:
    d, (w1, w2) = started({"A": 4, "B": 4}, instance_id=None)
    w3 = SimWorker(d, G, "W3", instance_id="i-3")
    converge([w1, w2, w3])
    its_work = w3.owned
    w3.leave()  # -1: its part of the target waits for instance i-3 (the 5 s delay)
    converge([w1, w2])
    back = SimWorker(d, G, "W3b", instance_id="i-3")
    response = back.heartbeat(compute=False)
    # Not W1, the sticky computer (seed 000's case studies): the returner, in its join response.
    assert response.error_code == ErrorCode.COMPUTE_ASSIGNMENT and group_of(d).computation.member_id == "W3b"
    back.compute_assignment()
    converge([w1, w2, back])
    assert back.owned == its_work
    # A member that is new to the group does not take the job over.
    w4 = SimWorker(d, G, "W4", instance_id="i-4")
    assert w4.heartbeat(compute=False).error_code == ErrorCode.NONE


def test_members_heartbeat_just_after_a_scheduled_rebalance_is_due() -> None:
    d, ws = started({"A": 4, "B": 4}, workers=3)
    ws[2].leave()
    converge(ws[:2])
    due = group_of(d).target_metadata.scheduled_rebalance_at_ms
    assert due == d.now + 5_000  # W3's work waits for it
    assert ws[0].heartbeat().heartbeat_interval_ms == 1_000
    d.advance(4_500)
    assert ws[0].heartbeat().heartbeat_interval_ms == 600  # at the deadline plus 100 ms


# --- UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH ------------------------------------------------------------


def test_unknown_member_with_a_nonzero_epoch() -> None:
    d, _ = started()
    assert d.heartbeat(HeartbeatRequest(G, "W9", 3)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.heartbeat(HeartbeatRequest("nope", "W9", 3)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert "nope" not in d.state.groups


def test_wrong_epoch_fences_and_removes_the_member() -> None:
    d, (w1, w2) = started()
    epoch = group_of(d).group_epoch
    response = d.heartbeat(HeartbeatRequest(G, "W2", w2.member_epoch + 5))
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    g = group_of(d)
    assert "W2" not in g.members and "W2" not in g.targets and "W2" not in g.currents
    assert g.group_epoch == epoch + 1
    types = [(r.record_type, r.is_tombstone) for r in d.log[-5:]]
    assert {(5, True), (7, True), (8, True)} <= set(types)
    # The worker rejoins with epoch 0 and the same member id, and gets its work back.
    w2.lose_everything()
    converge([w1, w2])
    assert w1.owned | w2.owned == {"A", "B", TaskId("A", 0), TaskId("A", 1), TaskId("B", 0)}
    assert_replay_equals_live(d)


def _lost_transition() -> tuple[Driver, SimWorker, int]:
    """W1 at a non-zero epoch; a connector change gives it a new target; the response that moves
    it to the new epoch is lost (applied by the coordinator, never seen by the worker)."""
    d = Driver()
    d.set_connectors(G, {"A": 2})
    w1 = SimWorker(d, G, "W1", assignor=None, server_assignor=ICR)
    converge([w1])
    before = w1.member_epoch
    assert before > 0
    d.advance(1_000)  # past the server-side assignment interval: the change is assigned at once
    d.set_connectors(G, {"A": 3})
    d.run(d.coordinator.heartbeat(HeartbeatRequest(G, "W1", before), d.now))
    assert group_of(d).current("W1").member_epoch > before
    return d, w1, before


def test_lost_response_is_accepted_when_the_member_owns_a_subset_of_its_assignment() -> None:
    d, w1, before = _lost_transition()
    # It retries with the epoch it knows and everything it owns: accepted, and told again.
    response = d.heartbeat(HeartbeatRequest(G, "W1", before, owned=w1.assignment))
    assert response.error_code == ErrorCode.NONE
    assert response.member_epoch == group_of(d).current("W1").member_epoch > before
    assert items_of(response.assignment.assignment) == {"A", TaskId("A", 0), TaskId("A", 1), TaskId("A", 2)}


def test_lost_response_retry_claiming_more_than_it_was_given_is_fenced() -> None:
    d, w1, before = _lost_transition()
    response = d.heartbeat(HeartbeatRequest(G, "W1", before, owned=ConnectorsAndTasks(("Z",))))
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "W1" not in group_of(d).members


def test_lost_response_retry_that_does_not_say_what_it_owns_is_fenced() -> None:
    d, w1, before = _lost_transition()
    assert d.heartbeat(HeartbeatRequest(G, "W1", before)).error_code == ErrorCode.FENCED_MEMBER_EPOCH


# --- leaving, static membership ------------------------------------------------------------------------------


def test_leave_removes_the_member_and_bumps_the_epoch() -> None:
    d, (w1, w2) = started()
    epoch = group_of(d).group_epoch
    response = w2.leave()
    assert response.error_code == ErrorCode.NONE and response.member_epoch == -1
    assert "W2" not in group_of(d).members and group_of(d).group_epoch == epoch + 1
    assert d.heartbeat(HeartbeatRequest(G, "W2", -1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_leave_keeps_the_assignment_without_a_rebalance_and_the_instance_takes_it_back() -> None:
    d, ws = started(workers=2)
    d2 = Driver()
    d2.set_config(G, session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=5_000)
    d2.set_connectors(G, {"A": 2, "B": 1})
    w1 = SimWorker(d2, G, "W1", instance_id="i-1")
    w2 = SimWorker(d2, G, "W2", instance_id="i-2")
    converge([w1, w2])
    owned = set(w2.owned)
    epoch = group_of(d2).group_epoch
    response = w2.leave(static=True)
    assert response.member_epoch == -2
    c = group_of(d2).current("W2")
    assert c.member_epoch == -2 and set(items_of(c.assignment)) == owned
    assert group_of(d2).group_epoch == epoch  # no rebalance while it is away

    # The same instance comes back under a new member id: it takes over W2's assignment at once.
    back = SimWorker(d2, G, "W2-restarted", instance_id="i-2")
    back.heartbeat()
    g = group_of(d2)
    assert "W2" not in g.members and "W2-restarted" in g.members
    converge([w1, back])
    assert set(back.owned) == owned
    assert_replay_equals_live(d2)


def test_instance_still_held_by_an_active_member_is_refused() -> None:
    d = Driver()
    d.heartbeat(join("W1", instance_id="i-1"))
    response = d.heartbeat(join("W1b", instance_id="i-1"))
    assert response.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert "W1b" not in group_of(d).members


def test_static_member_that_does_not_return_times_out() -> None:
    d = Driver()
    d.set_config(G, session_timeout_ms=1_000, heartbeat_interval_ms=100)
    d.set_connectors(G, {"A": 1})
    w1 = SimWorker(d, G, "W1", instance_id="i-1")
    w2 = SimWorker(d, G, "W2", instance_id="i-2")
    converge([w1, w2])
    w2.leave(static=True)
    for _ in range(12):
        d.advance(100)
        w1.heartbeat()
    assert "W2" not in group_of(d).members


def test_rejoin_with_epoch_zero_resets_what_the_member_owns() -> None:
    d, (w1, w2) = started()
    owned = set(w2.owned)
    w2.lose_everything()  # the worker process restarted
    response = w2.heartbeat()
    assert response.error_code == ErrorCode.NONE
    assert set(items_of(response.assignment.assignment)) == owned  # nobody else held them


# --- timers -------------------------------------------------------------------------------------------


def test_session_timeout_fences_with_tombstones_and_an_epoch_bump() -> None:
    d, (w1, w2) = started()
    epoch = group_of(d).group_epoch
    for _ in range(11):
        d.advance(1_000)
        w1.heartbeat()
    assert "W2" not in group_of(d).members
    assert group_of(d).group_epoch == epoch + 1
    assert ("session", G, "W2") not in d.timers


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    d = Driver()
    d.set_config(G, session_timeout_ms=100_000, heartbeat_interval_ms=1_000)
    d.set_connectors(G, {"A": 3})
    w1 = SimWorker(d, G, "W1", rebalance_timeout_ms=2_000)
    converge([w1])
    w2 = SimWorker(d, G, "W2", rebalance_timeout_ms=2_000)
    w2.heartbeat()
    w1.heartbeat()  # computes the new target
    w1.heartbeat()  # told to revoke
    assert group_of(d).current("W1").state == MemberState.UNREVOKED
    assert ("rebalance", G, "W1") in d.timers
    epoch = group_of(d).group_epoch
    # W1 heartbeats but never acknowledges (it does not send what it owns).
    for _ in range(3):
        d.advance(1_000)
        d.heartbeat(HeartbeatRequest(G, "W1", w1.member_epoch))
    assert "W1" not in group_of(d).members
    assert group_of(d).group_epoch == epoch + 1


def test_assignment_timeout_gives_the_job_to_another_member() -> None:
    d = Driver()
    d.set_connectors(G, {"A": 1})
    w1 = SimWorker(d, G, "W1", rebalance_timeout_ms=1_000)
    w2 = SimWorker(d, G, "W2", rebalance_timeout_ms=1_000)
    w1.heartbeat(compute=False)
    w2.heartbeat(compute=False)
    chosen = group_of(d).computation.member_id
    other = w2 if chosen == "W1" else w1
    d.advance(1_001)
    assert group_of(d).computation.member_id == other.member_id
    assert other.heartbeat(compute=False).error_code == ErrorCode.COMPUTE_ASSIGNMENT
    # The member that lost the job cannot install any more.
    loser = w1 if other is w2 else w2
    assert loser.compute_assignment().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_timers_after_load_cover_sessions_deadlines_and_revocations() -> None:
    d, (w1, w2) = started()
    replayed = Driver()
    replayed.coordinator.state.replay_all(d.log)
    keys = {t.key for t in replayed.coordinator.timers(50)}
    assert ("session", G, "W1") in keys and ("session", G, "W2") in keys
    assert ("assignment", G) not in keys  # nothing to compute
    # A failover while a target is due: the new coordinator chooses who computes at once.
    SimWorker(d, G, "W3").heartbeat(compute=False)
    d.run(d.coordinator.on_timer(("assignment", G), d.now))  # nothing changes for the live one
    replayed = Driver()
    replayed.coordinator.state.replay_all(d.log)
    timers = {t.key: t.deadline_ms for t in replayed.coordinator.timers(50)}
    assert timers[("assignment", G)] == 50
    assert replayed.state.groups[G].computation is None  # volatile: not in the log
    replayed.run(replayed.coordinator.on_timer(("assignment", G), 50))
    assert replayed.state.groups[G].computation is not None


# --- PrepareAssignment / InstallAssignment ------------------------------------------------------------


def chosen_worker(
    connectors: dict[str, int] | None = None, workers: int = 2
) -> tuple[Driver, list[SimWorker], SimWorker]:
    d = Driver()
    d.set_connectors(G, connectors or {"A": 2, "B": 1})
    ws = [SimWorker(d, G, f"W{i + 1}") for i in range(workers)]
    for w in ws:
        w.heartbeat(compute=False)
    chosen = next(w for w in ws if w.member_id == group_of(d).computation.member_id)
    return d, ws, chosen


def prepare(d: Driver, w: SimWorker, **kw):  # noqa: ANN201
    fields = {"group_id": G, "member_id": w.member_id, "member_epoch": w.member_epoch} | kw
    return d.run(d.coordinator.prepare_assignment(PrepareAssignmentRequest(**fields), d.now))


def install(d: Driver, w: SimWorker, assignment: dict[str, set], *, group_epoch: int | None = None, **kw):  # noqa: ANN201
    fields = {
        "group_id": G,
        "member_id": w.member_id,
        "member_epoch": w.member_epoch,
        "group_epoch": group_of(d).group_epoch if group_epoch is None else group_epoch,
        "members": tuple(
            InstallMember.of(m, MemberAssignment(connectors_and_tasks(items))) for m, items in assignment.items()
        ),
    } | kw
    return d.run(d.coordinator.install_assignment(InstallAssignmentRequest(**fields), d.now))


A, A0, A1, B, B0 = "A", TaskId("A", 0), TaskId("A", 1), "B", TaskId("B", 0)


@pytest.mark.parametrize(
    "fields, message",
    [({"group_id": ""}, "GroupId"), ({"member_id": ""}, "MemberId"), ({"member_epoch": -1}, "MemberEpoch")],
)
def test_prepare_validation(fields: dict, message: str) -> None:
    d, _, w = chosen_worker()
    response = prepare(d, w, **fields)
    assert response.error_code == ErrorCode.INVALID_REQUEST and message in response.error_message


def test_prepare_errors_in_the_seed_order() -> None:
    d, ws, w = chosen_worker()
    other = next(x for x in ws if x is not w)
    assert prepare(d, w, group_id="nope").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert prepare(d, w, member_id="W9").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert prepare(d, w, member_epoch=w.member_epoch + 1).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert prepare(d, other).error_code == ErrorCode.UNKNOWN_MEMBER_ID  # not the chosen one
    response = prepare(d, w)
    assert response.error_code == ErrorCode.NONE
    assert response.assignor_name == ICR and response.group_epoch == group_of(d).group_epoch
    assert [m.member_id for m in response.members] == ["W1", "W2"]
    assert [(c.name, c.tasks) for c in response.connectors] == [("A", 2), ("B", 1)]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"group_id": ""}, "GroupId"),
        ({"member_id": ""}, "MemberId"),
        ({"member_epoch": -1}, "MemberEpoch"),
        ({"members": (InstallMember.of("W1", None),)}, "ConnectorsAndTasks must be set"),
        (
            {"members": (InstallMember.of("W1", MemberAssignment(ConnectorsAndTasks()), topic_partitions=[("t", 0)]),)},
            "Partitions",
        ),
        (
            {
                "members": (
                    InstallMember.of("W1", MemberAssignment(ConnectorsAndTasks())),
                    InstallMember.of("W1", MemberAssignment(ConnectorsAndTasks())),
                )
            },
            "twice",
        ),
        ({"members": (InstallMember.of("", MemberAssignment(ConnectorsAndTasks())),)}, "MemberId"),
        ({"scheduled_rebalance_delay_ms": -5}, "ScheduledRebalanceDelayMs"),
    ],
)
def test_install_validation(fields: dict, message: str) -> None:
    d, _, w = chosen_worker()
    response = install(d, w, {}, **fields)
    assert response.error_code == ErrorCode.INVALID_REQUEST and message in response.error_message


def test_install_errors_in_the_seed_order() -> None:
    d, ws, w = chosen_worker()
    other = next(x for x in ws if x is not w)
    ok = {"W1": {A, A0, A1}, "W2": {B, B0}}
    assert install(d, w, ok, group_id="nope").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert install(d, w, ok, member_id="W9").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert install(d, w, ok, member_epoch=7).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert install(d, other, ok).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert install(d, w, ok, group_epoch=group_of(d).group_epoch + 1).error_code == ErrorCode.INVALID_REQUEST
    assert install(d, w, ok).error_code == ErrorCode.NONE
    assert group_of(d).assignment_epoch == group_of(d).group_epoch
    assert group_of(d).target_metadata.installed_by == w.member_id


@pytest.mark.parametrize(
    "members, extra, message",
    [
        ({"W1": {A, A0, A1}, "W2": {B}}, {}, "not assigned: B-0"),
        ({"W1": {A, A0, A1, B}, "W2": {B, B0}}, {}, "assigned twice"),
        ({"W1": {A, A0, A1}, "W9": {B, B0}}, {}, "W9 were not in the group"),
        ({"W1": {A, A0, A1, "Z"}, "W2": {B, B0}}, {}, "not configured"),
        ({"W1": {A, A0, A1}, "W2": {B}}, {"deferred": ConnectorsAndTasks((), (B0,))}, "ScheduledRebalanceDelayMs > 0"),
        (
            {"W1": {A, A0, A1}, "W2": {B}},
            {"deferred": ConnectorsAndTasks((), (B0,)), "scheduled_rebalance_delay_ms": 10**9},
            "exceeds",
        ),
        (
            {"W1": {A, A0, A1}, "W2": {B, B0}},
            {"deferred": ConnectorsAndTasks(("B",)), "scheduled_rebalance_delay_ms": 5},
            "both assigned",
        ),
    ],
)
def test_invalid_assignment_is_rejected_and_changes_nothing(members: dict, extra: dict, message: str) -> None:
    d, _, w = chosen_worker()
    log = len(d.log)
    response = install(d, w, members, **extra)
    assert response.error_code == ErrorCode.INVALID_ASSIGNMENT
    assert message in response.error_message
    assert len(d.log) == log and group_of(d).assignment_epoch < group_of(d).group_epoch
    # The chosen member is asked to compute again on its next heartbeat.
    assert w.heartbeat(compute=False).error_code == ErrorCode.COMPUTE_ASSIGNMENT


def test_deferred_items_with_a_delay_are_valid_and_the_deadline_is_persisted() -> None:
    d, _, w = chosen_worker()
    response = install(
        d, w, {"W1": {A, A0, A1}, "W2": {B}}, deferred=ConnectorsAndTasks((), (B0,)), scheduled_rebalance_delay_ms=2_000
    )
    assert response.error_code == ErrorCode.NONE
    meta = group_of(d).target_metadata
    assert meta.scheduled_rebalance_at_ms == d.now + 2_000 and set(items_of(meta.deferred)) == {B0}
    epoch = group_of(d).group_epoch
    d.advance(2_000)
    assert group_of(d).group_epoch == epoch + 1  # the deadline bumped the epoch
    assert group_of(d).target_metadata.scheduled_rebalance_at_ms is None


def test_a_timer_that_fires_early_is_armed_again_not_dropped() -> None:
    # The runtime's timers run on a monotonic clock, `now` is wall time: after a step back of the
    # wall clock a timer fires "early". Dropping it would leave deferred work unassigned forever.
    d, _, w = chosen_worker()
    install(
        d, w, {"W1": {A, A0, A1}, "W2": {B}}, deferred=ConnectorsAndTasks((), (B0,)), scheduled_rebalance_delay_ms=2_000
    )
    deadline = group_of(d).target_metadata.scheduled_rebalance_at_ms
    key = ("scheduled-rebalance", group_of(d).group_id)
    early = d.coordinator.on_timer(key, deadline - 200)
    assert early.records == [] and early.timers == [Timer(key, deadline)]
    on_time = d.coordinator.on_timer(key, deadline)
    assert on_time.records  # the epoch bump that resolves the deferred work


def test_stale_install_is_rejected() -> None:
    d, ws, w = chosen_worker()
    ok = {"W1": {A, A0, A1}, "W2": {B, B0}}
    epoch = group_of(d).group_epoch
    assert install(d, w, ok).error_code == ErrorCode.NONE
    # A second install for the same (now installed) epoch is stale.
    d.run(d.coordinator.heartbeat(HeartbeatRequest(G, w.member_id, w.member_epoch), d.now))
    response = install(d, w, ok, group_epoch=epoch)
    assert response.error_code in (
        ErrorCode.INVALID_ASSIGNMENT,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_MEMBER_EPOCH,
    )


def test_install_for_an_epoch_the_group_left_is_installed_from_what_was_prepared() -> None:
    d, ws, w = chosen_worker()
    prepared = prepare(d, w)
    # A third worker joins while W computes: the group moves on to a new epoch.
    SimWorker(d, G, "W3").heartbeat(compute=False)
    assert group_of(d).group_epoch == prepared.group_epoch + 1
    result = ASSIGNORS[ICR].assign(prepared)
    assert w.install(prepared.group_epoch, result).error_code == ErrorCode.NONE
    g = group_of(d)
    assert g.assignment_epoch == prepared.group_epoch < g.group_epoch  # progress, and another round is due
    assert "W3" in g.targets and not items_of(g.targets["W3"].assignment)
    # Without a PrepareAssignment for an old epoch there is nothing to check the install against.
    d2, _, w2 = chosen_worker()
    old = group_of(d2).group_epoch
    SimWorker(d2, G, "W3").heartbeat(compute=False)
    response = install(d2, w2, {"W1": {A, A0, A1}, "W2": {B, B0}}, group_epoch=old)
    assert response.error_code == ErrorCode.INVALID_ASSIGNMENT and "prepare again" in response.error_message


def test_assignor_error_keeps_every_assignment_and_asks_again_later() -> None:
    d, ws = started()
    before = {w.member_id: set(w.owned) for w in ws}
    SimWorker(d, G, "W3").heartbeat(compute=False)
    g = group_of(d)
    chosen = next(w for w in ws if w.member_id == g.computation.member_id)
    chosen.heartbeat(compute=False)
    spec = prepare(d, chosen)
    response = chosen.install(spec.group_epoch, GroupAssignment(members={}, error=3, error_message="no capacity"))
    assert response.error_code == ErrorCode.NONE
    meta = group_of(d).target_metadata
    assert meta.error == 3 and meta.error_message == "no capacity" and meta.assignment_epoch == spec.group_epoch
    for w in ws:
        assert set(items_of(group_of(d).targets[w.member_id].assignment)) == before[w.member_id]
    assert ("assignment-retry", G) in d.timers
    epoch = group_of(d).group_epoch
    d.advance(CoordinatorConfig().assignor_error_backoff_ms)
    assert group_of(d).group_epoch == epoch + 1  # asked again, not in a busy loop


# --- server-side assignors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_server_side_assignor_computes_inside_the_heartbeat(name: str) -> None:
    d = Driver()
    d.set_connectors(G, {"A": 2, "B": 1})
    w1 = SimWorker(d, G, "W1", assignor=None, server_assignor=name)
    response = w1.heartbeat()
    assert response.error_code == ErrorCode.NONE
    assert group_of(d).assignment_epoch == group_of(d).group_epoch
    assert group_of(d).target_metadata.installed_by is None
    assert group_of(d).target_metadata.assignor_name == name
    assert w1.owned == {A, A0, A1, B, B0}
    w2 = SimWorker(d, G, "W2", assignor=None, server_assignor=name)
    w2.heartbeat()
    assert group_of(d).assignment_epoch < group_of(d).group_epoch  # within the assignment interval
    assert ("server-assignment", G) in d.timers
    converge([w1, w2], advance_ms=500)
    assert w1.owned and w2.owned and not w1.owned & w2.owned
    assert_replay_equals_live(d)


def test_group_without_any_assignor_uses_the_server_default() -> None:
    d = Driver()
    d.set_connectors(G, {"A": 1})
    response = d.heartbeat(join("W1"))
    assert response.error_code == ErrorCode.NONE
    assert group_of(d).target_metadata.assignor_name == CoordinatorConfig().default_server_assignor


# --- admin ----------------------------------------------------------------------------------------------


def test_set_connectors_creates_the_group_and_bumps_only_on_change() -> None:
    d = Driver()
    assert d.set_connectors(G, {"A": 2}).error_code == ErrorCode.NONE
    assert group_of(d).group_epoch == 1
    log = len(d.log)
    d.set_connectors(G, {"A": 2})
    assert len(d.log) == log
    d.set_connectors(G, {"A": 3})
    assert group_of(d).group_epoch == 2


@pytest.mark.parametrize("connectors, message", [({"": 1}, "non-empty"), ({"A": -1}, "Tasks"), ({"A": 10**6}, "Tasks")])
def test_set_connectors_validation(connectors: dict, message: str) -> None:
    response = Driver().set_connectors(G, connectors)
    assert response.error_code == ErrorCode.INVALID_REQUEST and message in response.error_message


def test_connector_changes_reach_the_workers() -> None:
    d, ws = started()
    d.set_connectors(G, {"A": 1, "C": 2})
    converge(ws)
    owned = set().union(*(w.owned for w in ws))
    assert owned == {A, A0, "C", TaskId("C", 0), TaskId("C", 1)}


@pytest.mark.parametrize(
    "timeouts, message",
    [
        ({"session_timeout_ms": 50}, "SessionTimeoutMs must be >= 100"),
        ({"heartbeat_interval_ms": 5_000, "session_timeout_ms": 1_000}, "smaller than"),
        ({"scheduled_rebalance_max_delay_ms": -1}, ">= 0"),
    ],
)
def test_set_config_validation(timeouts: dict, message: str) -> None:
    response = Driver().set_config(G, **timeouts)
    assert response.error_code == ErrorCode.INVALID_REQUEST and message in response.error_message


def test_delete_group() -> None:
    d, ws = started()
    assert d.delete_group(G).error_code == ErrorCode.NON_EMPTY_GROUP
    for w in ws:
        w.leave()
    assert d.delete_group(G).error_code == ErrorCode.NONE
    assert G not in d.state.groups
    assert d.delete_group(G).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert_replay_equals_live(d)


def test_describe_and_list() -> None:
    d, ws = started()
    description = d.coordinator.describe_group(G)
    assert description.state == "STABLE" and [m.member_id for m in description.members] == ["W1", "W2"]
    assert description.assignor == ICR and description.assignor_kind == "client"
    listing = d.coordinator.list_groups()
    assert [(g.group_id, g.members, g.state) for g in listing] == [(G, 2, "STABLE")]
    assert d.coordinator.describe_group("nope") is None


def test_a_connect_heartbeat_that_is_not_a_join_is_unknown_to_a_classic_group() -> None:
    d = Driver()
    d.state.replay(Record(ClassicGroupMetadataKey("legacy"), ClassicGroupMetadataValue("connect", 3, None, None, -1)))
    response = d.heartbeat(msgspec.structs.replace(join(), group_id="legacy", member_epoch=4))
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID and "legacy" in d.state.classic_groups
    # A join takes the (empty) classic group over: tests/test_migration.py.
    assert d.heartbeat(msgspec.structs.replace(join(), group_id="legacy")).error_code == ErrorCode.NONE
    assert "legacy" not in d.state.classic_groups and d.state.groups["legacy"].group_epoch == 4


# --- replay ------------------------------------------------------------------------------------------------


def test_replay_tolerates_a_compacted_log_and_unseen_tombstones() -> None:
    d, ws = started(workers=3)
    ws[2].leave()
    converge(ws[:2])
    last: dict = {}
    for offset, record in enumerate(d.log):
        last[record.key] = (offset, record)
    compacted = [r for _, r in sorted(last.values(), key=lambda x: x[0]) if not r.is_tombstone]
    state = CoordinatorState()
    state.replay_all(compacted)
    assert state.slots() == d.state.slots()
    # Tombstones for keys never seen are no-ops.
    state.replay_all([r for r in d.log if r.is_tombstone])
    assert G in state.groups


def test_assignment_response_never_revokes_and_assigns_at_once() -> None:
    # SimWorker raises if a response both revokes and assigns; grow and shrink a group a few times.
    d, ws = started({"A": 6, "B": 5, "C": 3}, workers=3)
    ws.append(SimWorker(d, G, "W4"))
    converge(ws)
    ws[0].leave()
    converge(ws[1:])
    d.set_connectors(G, {"A": 2, "D": 7})
    converge(ws[1:])
    d.advance(5_000)  # W1's work waited for its return; the delay passes
    converge(ws[1:])
    owned = [w.owned for w in ws[1:]]
    configured = {"A", TaskId("A", 0), TaskId("A", 1), "D", *(TaskId("D", t) for t in range(7))}
    assert set().union(*owned) == configured
    assert sum(len(o) for o in owned) == len(configured)  # nobody owns an item twice


def test_lost_response_retry_is_answered_with_what_was_lost_before_anything_else() -> None:
    # Found by the stateful test: the target moved on between the lost response and the retry;
    # reconciling in the retry's answer looked to the worker like a revocation and an assignment.
    d, w1, before = _lost_transition()
    lost = group_of(d).current("W1")
    d.advance(1_000)
    d.set_connectors(G, {"A": 1})  # the new target takes away again
    response = d.heartbeat(HeartbeatRequest(G, "W1", before, owned=w1.assignment))
    assert response.member_epoch == lost.member_epoch
    assert response.assignment.assignment == lost.assignment  # only adds to what W1 owns
    assert items_of(w1.assignment) <= items_of(response.assignment.assignment)
    # Its next heartbeat (now at the right epoch, owning what it was told) starts the revocation.
    told = response.assignment.assignment
    response = d.heartbeat(HeartbeatRequest(G, "W1", lost.member_epoch, owned=told))
    assert items_of(response.assignment.assignment) == {"A", TaskId("A", 0)}
    assert group_of(d).current("W1").state == MemberState.UNREVOKED


# --- why a member left (type 3 v1 departures) ------------------------------------------------------


def _departures(d: Driver) -> list[tuple[str, str | None, str]]:
    epoch = next(r for r in reversed(d.log) if r.key.RECORD_TYPE == 3 and r.value is not None)
    return [(x.member_id, x.instance_id, x.reason) for x in epoch.value.departures]


def _told_everywhere(d: Driver, member: str, reason: str) -> None:
    """The reason reaches `coordinator replay timeline` and the audit's events table (both read the
    records the coordinator wrote)."""
    from replay_scenarios import raw_records

    from replay import events as ev
    from replay.history import History
    from spark.tables import event_rows

    history = History()
    history.run(raw_records(d.log, list(range(len(d.log)))))
    left = [e for e in history.events if e.kind == ev.MEMBER_LEFT and e.member_id == member]
    assert left and left[-1].detail.get("reason") == reason
    # A static instance whose session expired has its own words for the same reason.
    words = "expired after it left" if reason == LeaveReason.STATIC_LEAVE else leave_reason_text(reason)
    assert words in ev.text(left[-1])
    rows = [r for r in event_rows(history.events).to_pylist() if r["kind"] == ev.MEMBER_LEFT and r["member"] == member]
    assert rows[-1]["reason"] == reason


def test_every_way_of_leaving_is_written_with_its_reason() -> None:
    d, (w1, w2) = started({"A": 2, "B": 2})
    w2.leave()
    assert _departures(d) == [("W2", None, "leave")]
    _told_everywhere(d, "W2", "leave")

    d, (w1, w2) = started({"A": 2, "B": 2})
    d.advance(6_000)
    w1.heartbeat()
    d.advance(5_000)  # W2 sent nothing for 11 s: session 10 s
    assert _departures(d) == [("W2", None, "session-timeout")]
    _told_everywhere(d, "W2", "session-timeout")

    d, (w1, w2) = started({"A": 2, "B": 2})
    d.heartbeat(HeartbeatRequest(G, "W2", w2.member_epoch + 5))
    assert _departures(d) == [("W2", None, "fenced-epoch")]
    _told_everywhere(d, "W2", "fenced-epoch")

    d, (w1, w2) = started({"A": 4, "B": 4}, rebalance_timeout_ms=2_000)
    w3 = SimWorker(d, G, "W3")
    w3.heartbeat()
    w1.heartbeat()  # W1 computes: W1 and W2 must revoke a share
    d.heartbeat(HeartbeatRequest(G, "W2", w2.member_epoch))  # told to revoke; it never acknowledges
    assert group_of(d).currents["W2"].state == MemberState.UNREVOKED
    for _ in range(3):  # W2 does not revoke; W1 and W3 go on; its rebalance timeout is 2 s
        d.advance(1_000)
        w1.heartbeat()
        w3.heartbeat()
    assert _departures(d) == [("W2", None, "rebalance-timeout")]
    _told_everywhere(d, "W2", "rebalance-timeout")

    d, (w1, w2) = started({"A": 2}, instance_id=None)
    s = SimWorker(d, G, "S1", instance_id="i-1")
    converge([w1, w2, s])
    s.leave(static=True)  # -2: nothing removed, the instance waits; its epoch record is type 8
    assert group_of(d).current("S1").member_epoch == -2
    SimWorker(d, G, "S1b", instance_id="i-1").heartbeat()
    assert _departures(d) == [("S1", "i-1", "replaced")]
    _told_everywhere(d, "S1", "replaced")
    # An epoch bumped by something else carries no departures.
    d.set_connectors(G, {"A": 3})
    assert _departures(d) == []

    # A static member that left with -2 and whose instance does not return within its session is
    # removed for its static leave, not as if it had crashed.
    d, (w1, w2) = started({"A": 2}, instance_id=None)
    s = SimWorker(d, G, "S1", instance_id="i-1")
    converge([w1, w2, s])
    s.leave(static=True)
    for _ in range(11):  # session 10 s; the others keep heartbeating
        d.advance(1_000)
        w1.heartbeat()
        w2.heartbeat()
    assert "S1" not in group_of(d).members
    assert _departures(d) == [("S1", "i-1", "static-leave")]
    _told_everywhere(d, "S1", "static-leave")
    assert_replay_equals_live(d)


def test_every_leave_reason_has_its_words_and_an_unknown_one_is_shown_as_it_is() -> None:
    reasons = {v for k, v in vars(LeaveReason).items() if k.isupper()}
    assert reasons == set(LEAVE_REASON_TEXT) and len(set(LEAVE_REASON_TEXT.values())) == len(reasons)
    assert leave_reason_text(LeaveReason.SESSION_TIMEOUT) == "fenced: no heartbeat within its session timeout"
    assert leave_reason_text("evicted-by-a-newer-version") == "evicted-by-a-newer-version"


def test_describe_says_who_the_change_to_the_current_epoch_removed_and_why() -> None:
    d, (w1, _) = started({"A": 2, "B": 2}, instance_id=None)
    assert d.coordinator.describe_group(G).departures == ()
    d.advance(6_000)
    w1.heartbeat()
    d.advance(5_000)  # W2's session (10 s) ends
    description = d.coordinator.describe_group(G)
    assert [(x.member_id, x.instance_id, x.reason) for x in description.departures] == [("W2", None, "session-timeout")]
    # The HTTP answer (and `groups describe --format json`) has the reason in words too.
    (answer,) = orjson.loads(wire.encode(description))["Departures"]
    assert answer == {
        "MemberId": "W2",
        "InstanceId": None,
        "Reason": "session-timeout",
        "ReasonText": "fenced: no heartbeat within its session timeout",
    }
    # A coordinator that loads the log says the same: the departures are the epoch record's.
    assert GroupCoordinator(assert_replay_equals_live(d)).describe_group(G).departures == description.departures
    # The next epoch's change removed nobody.
    SimWorker(d, G, "W3").heartbeat()
    assert d.coordinator.describe_group(G).departures == ()
