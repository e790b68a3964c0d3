"""The partition runtime against the session broker: responses only after the batch is committed,
what was acknowledged is in the topic, a new owner fences the old one, which stops serving."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from records import ConnectorTaskCount

from coordinator.core.items import connectors_and_tasks, items_of
from coordinator.core.protocol import ErrorCode, HeartbeatRequest, SetConnectorsRequest
from coordinator.core.state import CoordinatorState
from coordinator.service.log import load_partition
from coordinator.service.runtime import NotServing, PartitionRuntime, Status
from tests.topics import create_topic

pytestmark = pytest.mark.integration

G = "connect-cluster"


def heartbeat(request: HeartbeatRequest) -> Callable:
    """The heartbeat handler on `request`, as `PartitionRuntime.call` takes it."""
    return lambda coordinator, now: coordinator.heartbeat(request, now)


def set_connectors(request: SetConnectorsRequest) -> Callable:
    """The set-connectors handler on `request`, as `PartitionRuntime.call` takes it."""
    return lambda coordinator, now: coordinator.set_connectors(request, now)


async def _join_and_settle(runtime: PartitionRuntime, members: list[str]) -> dict[str, tuple[int, frozenset]]:
    """Server-side assignor members join and heartbeat until nothing changes; what each was told."""
    told: dict[str, tuple[int, frozenset]] = {}
    for m in members:
        r = await runtime.call(
            heartbeat(HeartbeatRequest(G, m, 0, rebalance_timeout_ms=5_000, server_assignor="incremental_cooperative"))
        )
        assert r.error_code == ErrorCode.NONE, r
        told[m] = (r.member_epoch, items_of(r.assignment.assignment))
    for _ in range(20):
        changed = False
        await asyncio.sleep(0.3)  # past the server-side assignment interval below
        for m in members:
            epoch, owned = told[m]
            r = await runtime.call(heartbeat(HeartbeatRequest(G, m, epoch, owned=connectors_and_tasks(owned))))
            assert r.error_code == ErrorCode.NONE, r
            new = (r.member_epoch, items_of(r.assignment.assignment) if r.assignment else owned)
            changed |= new != told[m]
            told[m] = new
        group = runtime.coordinator.state.groups[G]
        if not changed and group.group_epoch == group.assignment_epoch:
            return told
    raise AssertionError("no convergence")


def test_acknowledged_changes_are_in_the_topic_and_a_new_owner_fences_the_old(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    from coordinator.core.group_coordinator import CoordinatorConfig

    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    config = CoordinatorConfig(server_assignment_interval_ms=200)

    async def scenario() -> None:
        first = PartitionRuntime(kafka_broker.client_config(), unique_topic, 0, config)
        await first.start()
        assert first.status is Status.ACTIVE
        response = await first.call(
            set_connectors(
                SetConnectorsRequest(group_id=G, connectors=(ConnectorTaskCount("A", 4), ConnectorTaskCount("B", 2)))
            )
        )
        assert response.error_code == ErrorCode.NONE
        told = await _join_and_settle(first, ["W1", "W2", "W3"])
        owned = [items for _, items in told.values()]
        assert sum(len(o) for o in owned) == len(frozenset().union(*owned)) == 8  # each item once

        # Everything acknowledged is durable: the topic replays to the state that was served.
        loaded = CoordinatorState()
        await asyncio.to_thread(load_partition, kafka_broker.client_config(), unique_topic, 0, loaded)
        assert loaded.slots() == first.coordinator.state.slots()

        # A second coordinator takes the partition over: it loads the same state and serves.
        second = PartitionRuntime(kafka_broker.client_config(), unique_topic, 0, config)
        await second.start()
        assert second.coordinator.state.slots() == first.coordinator.state.slots()
        epoch = told["W1"][0]
        r = await second.call(heartbeat(HeartbeatRequest(G, "W1", epoch)))
        assert r.error_code == ErrorCode.NONE and r.member_epoch == epoch

        # The old owner is fenced: its next write fails, it answers NOT_COORDINATOR and stops serving.
        with pytest.raises(NotServing) as refused:
            await first.call(heartbeat(HeartbeatRequest(G, "W4", 0, rebalance_timeout_ms=5_000)))
        assert refused.value.code == ErrorCode.NOT_COORDINATOR
        assert first.status is Status.FENCED
        with pytest.raises(NotServing):
            await first.call(heartbeat(HeartbeatRequest(G, "W1", epoch)))
        # Nothing the fenced owner tried to write is durable: a fresh load of the topic, after the
        # fenced write, is the state the new owner serves and has no W4. (The new owner's memory was
        # loaded before that write, so it could not show W4 whatever had reached the topic.)
        after = CoordinatorState()
        await asyncio.to_thread(load_partition, kafka_broker.client_config(), unique_topic, 0, after)
        assert "W4" not in after.groups[G].members
        assert set(after.groups[G].members) == {"W1", "W2", "W3"}
        assert after.slots() == second.coordinator.state.slots()
        # The control: the same join through the owner that serves is in a fresh load, so W4's
        # absence above is the fence's doing, not a load that misses what was written last.
        r = await second.call(heartbeat(HeartbeatRequest(G, "W4", 0, rebalance_timeout_ms=5_000)))
        assert r.error_code == ErrorCode.NONE, r
        control = CoordinatorState()
        await asyncio.to_thread(load_partition, kafka_broker.client_config(), unique_topic, 0, control)
        assert "W4" in control.groups[G].members
        await second.close()

    asyncio.run(scenario())


def test_a_heartbeat_that_writes_nothing_is_answered_without_a_commit(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic)

    async def scenario() -> None:
        runtime = PartitionRuntime(kafka_broker.client_config(), unique_topic, 0)
        await runtime.start()
        r = await runtime.call(
            heartbeat(
                HeartbeatRequest(G, "W1", 0, rebalance_timeout_ms=5_000, server_assignor="incremental_cooperative")
            )
        )
        end = runtime.last_load.end_offset
        writes = []
        original = runtime._log.write

        def counting(records, *level):  # noqa: ANN001, ANN002, ANN202
            writes.append(len(records))
            return original(records, *level)

        runtime._log.write = counting
        for _ in range(20):
            steady = await runtime.call(heartbeat(HeartbeatRequest(G, "W1", r.member_epoch)))
            assert steady.error_code == ErrorCode.NONE
        assert writes == [] and end == 0
        await runtime.close()

    asyncio.run(scenario())
