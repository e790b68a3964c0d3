"""The Connect-style status of a connector (`coordinator.core.views.connector_status`), pure: on the
in-memory driver, what a group's members own, revoke and wait for becomes ASSIGNED, REVOKING or
UNASSIGNED (deferred: until the scheduled rebalance), and never more than the coordinator knows.
Over HTTP against the real broker: `tests/test_openapi_http.py` (the client-side story) and
`tests/test_pages.py`."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson

from records import TaskId

from coordinator.api import wire
from coordinator.core import views
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.protocol import ConnectorStatus, ErrorCode, ErrorResponse
from coordinator.core.states import TaskStatus

G = "status-group"


def _started(**connectors: int) -> tuple[Driver, list[SimWorker]]:
    d = Driver()
    d.set_config(G, session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=5_000)
    d.set_connectors(G, connectors)
    workers = [SimWorker(d, G, "W1"), SimWorker(d, G, "W2", instance_id="i-2")]
    converge(workers)
    return d, workers


def _status(d: Driver, connector: str) -> ConnectorStatus | ErrorResponse:
    return d.coordinator.connector_status(G, connector)


def _places(status: ConnectorStatus) -> dict:
    return {status.name: status.connector, **{TaskId(status.name, n): s for n, s in status.tasks}}


def test_each_item_is_assigned_to_the_member_that_owns_it() -> None:
    d, workers = _started(A=3, B=1)
    owner = {item: w for w in workers for item in w.owned}
    for name, count in (("A", 3), ("B", 1)):
        status = _status(d, name)
        assert isinstance(status, ConnectorStatus) and [n for n, _ in status.tasks] == list(range(count))
        for item, place in _places(status).items():
            assert place.state == TaskStatus.ASSIGNED and place.member_id == owner[item].member_id
            assert place.instance_id == owner[item].instance_id and place.deferred_until_ms is None
    assert {p.instance_id for s in (_status(d, "A"), _status(d, "B")) for p in _places(s).values()} == {None, "i-2"}


def test_an_item_its_owner_gives_up_is_revoking_until_the_new_owner_has_it() -> None:
    d, workers = _started(A=4)
    newcomer = SimWorker(d, G, "W3")
    workers.append(newcomer)
    seen_revoking = False
    for _ in range(20):
        for w in workers:
            w.heartbeat()
            status = _status(d, "A")
            group = d.state.groups[G]
            revoking = {
                item: m
                for m in group.members
                for item in (
                    *group.current(m).pending_revocation.connectors,
                    *group.current(m).pending_revocation.tasks,
                )
            }
            for item, place in _places(status).items():
                if item in revoking:
                    seen_revoking = True
                    assert place.state == TaskStatus.REVOKING and place.member_id == revoking[item], (item, place)
                elif place.state == TaskStatus.REVOKING:
                    raise AssertionError(f"{item} is REVOKING but no member revokes it")
    assert seen_revoking
    converge(workers)
    assert {p.state for p in _places(_status(d, "A")).values()} == {TaskStatus.ASSIGNED}
    assert any(p.member_id == "W3" for p in _places(_status(d, "A")).values())


def test_deferred_work_is_unassigned_until_the_scheduled_rebalance() -> None:
    d, (w1, w2) = _started(A=2, B=2)
    gone = set(w2.owned)
    w2.leave()
    converge([w1])
    meta = d.state.groups[G].target_metadata
    assert meta.scheduled_rebalance_at_ms is not None and gone
    for name in ("A", "B"):
        for item, place in _places(_status(d, name)).items():
            if item in gone:
                assert (place.state, place.member_id, place.deferred_until_ms) == (
                    TaskStatus.UNASSIGNED,
                    None,
                    meta.scheduled_rebalance_at_ms,
                ), (item, place)
            else:
                assert (place.state, place.member_id) == (TaskStatus.ASSIGNED, "W1")
    d.advance(6_000)  # the scheduled rebalance gives the deferred work to W1
    converge([w1])
    assert {(p.state, p.member_id) for n in ("A", "B") for p in _places(_status(d, n)).values()} == {
        (TaskStatus.ASSIGNED, "W1")
    }


def test_a_connector_with_no_member_yet_is_unassigned_and_not_deferred() -> None:
    d = Driver()
    d.set_connectors(G, {"A": 2})
    status = _status(d, "A")
    assert isinstance(status, ConnectorStatus)
    assert [(n, p.state, p.member_id, p.deferred_until_ms) for n, p in status.tasks] == [
        (0, TaskStatus.UNASSIGNED, None, None),
        (1, TaskStatus.UNASSIGNED, None, None),
    ]
    assert status.connector.state == TaskStatus.UNASSIGNED


def test_a_task_still_held_beyond_the_configured_count_is_shown() -> None:
    d, workers = _started(A=3)
    holder = next(w for w in workers if TaskId("A", 2) in w.owned)
    d.set_connectors(G, {"A": 2})
    for _ in range(5):  # the new target, then the holder is told to revoke A-2, which it still owns
        for w in workers:
            w.heartbeat()
        status = _status(d, "A")
        if dict(status.tasks)[2].state == TaskStatus.REVOKING:
            break
    assert [n for n, _ in status.tasks] == [0, 1, 2]
    assert dict(status.tasks)[2].state == TaskStatus.REVOKING and dict(status.tasks)[2].member_id == holder.member_id
    converge(workers)
    assert [n for n, _ in _status(d, "A").tasks] == [0, 1]


def test_unknown_group_and_unknown_connector_are_protocol_errors() -> None:
    d, _ = _started(A=1)
    missing = views.connector_status(d.state, d.coordinator.config, "no-such-group", "A")
    assert isinstance(missing, ErrorResponse) and missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    unknown = _status(d, "Z")
    assert isinstance(unknown, ErrorResponse) and unknown.error_code == ErrorCode.UNKNOWN_CONNECTOR
    assert "Z" in unknown.error_message


def test_the_wire_shape_is_kafka_connects() -> None:
    d, (w1, w2) = _started(A=3)
    w2.leave()
    converge([w1])
    body = orjson.loads(wire.encode(wire.ConnectorStatus.of(_status(d, "A"))))
    assert set(body) == {"ErrorCode", "name", "connector", "tasks", "type"} and body["type"] == "unknown"
    assert set(body["connector"]) == {"state", "worker_id", "instance_id", "deferred_until"}
    assert [set(t) for t in body["tasks"]] == [{"id", "state", "worker_id", "instance_id", "deferred_until"}] * 3
    places = [body["connector"], *body["tasks"]]
    assert all(p["state"] in ("ASSIGNED", "UNASSIGNED") for p in places)  # never RUNNING or FAILED
    deferred = [p for p in places if p["state"] == "UNASSIGNED"]
    # ISO 8601 in UTC, to the millisecond, from the target's scheduled rebalance.
    at = d.state.groups[G].target_metadata.scheduled_rebalance_at_ms
    iso = datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at % 1000:03d}Z"
    assert deferred and all(p["deferred_until"] == iso for p in deferred)
