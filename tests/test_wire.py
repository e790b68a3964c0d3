"""The worker's side of the JSON mapping is the exact inverse of the server's (no broker)."""

from __future__ import annotations

import orjson

from coordinator.api import wire
from coordinator.core.assignors import assignor
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.protocol import PrepareAssignmentRequest


def _prepared(driver: Driver, worker: SimWorker):  # noqa: ANN202
    return driver.run(driver.coordinator.prepare_assignment(
        PrepareAssignmentRequest("g", worker.member_id, worker.member_epoch), driver.now))


def test_a_prepare_answer_and_an_install_survive_the_wire() -> None:
    driver = Driver()
    driver.set_connectors("g", {"A": 3, "B": 1})
    workers = [SimWorker(driver, "g", f"w{i}", instance_id=f"i{i}") for i in range(3)]
    converge(workers)
    driver.set_config("g", scheduled_rebalance_max_delay_ms=60_000)
    workers[2].leave()  # departed work: the spec carries DepartedMembers and Deferred
    workers[0].heartbeat(compute=False)
    prepared = _prepared(driver, workers[0])
    assert prepared.group.departed, "the scenario should leave departed work"
    body = orjson.loads(orjson.dumps(wire.prepare_response(prepared)))
    spec = wire.group_spec(body)
    assert spec == prepared.group
    result = assignor(prepared.assignor_name).assign(spec)
    request = wire.install_request(orjson.loads(orjson.dumps(
        wire.install_body("g", "w0", workers[0].member_epoch, spec.group_epoch, result))))
    assert request.group_epoch == spec.group_epoch and request.deferred == result.deferred
    assert request.scheduled_rebalance_delay_ms == result.scheduled_rebalance_delay_ms
    assert {m.member_id: m.assignment for m in request.members} == \
        result.members
