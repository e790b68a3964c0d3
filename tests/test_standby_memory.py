"""Hot standbys on an in-memory log (`coordinator.service.standby`, `MemoryTopic.tail`), no broker:
a promoted standby holds what a fresh full load of the partition gives after the promotion, which
is what the old owner acknowledged, also when the old owner wrote during the promotion (a write
committed before the new owner's fencing is in the tail; one after it is fenced and never
acknowledged); a standby arms no timers and writes nothing, the promoted runtime arms them as a
load does; which partitions an instance stands by. tests/test_standby_kafka.py runs two serve
processes against the broker."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from coordinator.core.config import CoordinatorConfig
from coordinator.core.protocol import SESSION, ErrorCode, timer_key
from coordinator.core.state import CoordinatorState
from coordinator.service.log import LoadResult
from coordinator.service.memory_log import MemoryPartitionTail, MemoryTopic
from coordinator.service.runtime import NotServing, PartitionRuntime, Status
from coordinator.service.server import CoordinatorServer
from coordinator.service.standby import Standby, standby_partitions
from tests.support.metrics import exposed
from tests.support.runtime_memory import CONFIG, G, durable, join, run, runtime, set_connectors
from tests.support.waiting import until


class LaggingTail(MemoryPartitionTail):
    """A tail that stops reading while `lagging` (a standby behind the log), except to catch up."""

    lagging = False

    def poll(self, state: CoordinatorState, result: LoadResult, timeout_s: float) -> int:
        return 0 if self.lagging else super().poll(state, result, timeout_s)


def standby_of(topic: MemoryTopic, partition: int = 0) -> Standby:
    return Standby(partition, LaggingTail(topic, partition), poll_s=0.005).start()


def lag(standby: Standby) -> None:
    standby._tail.lagging = True


async def promoted(topic: MemoryTopic, standby: Standby, config: CoordinatorConfig = CONFIG) -> PartitionRuntime:
    rt = runtime(topic, config)
    await rt.start(standby)
    assert rt.status is Status.ACTIVE
    return rt


def test_a_promoted_standby_equals_a_full_load_and_reads_only_its_tail() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        owner = runtime(topic)
        await owner.start()
        standby = standby_of(topic)
        for i in range(5):
            assert (await owner.call(join(f"W{i}"))).error_code == ErrorCode.NONE
        assert (await owner.call(set_connectors(G, a=4))).error_code == ErrorCode.NONE
        await until(lambda: standby.next_offset == len(topic.records()))
        assert set(standby.state.groups[G].members) == {f"W{i}" for i in range(5)}
        lag(standby)
        seen = standby.next_offset
        assert (await owner.call(join("late"))).error_code == ErrorCode.NONE  # only in the tail
        acknowledged = durable(topic.load())
        loads = topic.loads

        new = await promoted(topic, standby)
        assert durable(new.coordinator.state) == acknowledged == durable(topic.load())
        assert new.last_load.end_offset == len(topic.records())
        assert "late" in new.coordinator.state.groups[G].members
        assert 0 < new.last_load.records == len(topic.records()) - seen  # the tail only, not the whole log
        assert topic.loads == loads  # nothing was loaded in full
        assert await refused_write(owner)  # the old owner was fenced by the promotion
        # The promoted runtime serves and writes on from there.
        assert (await new.call(join("after"))).error_code == ErrorCode.NONE
        assert "after" in topic.load().groups[G].members
        await new.close()
        await owner.close()

    run(scenario)


async def refused_write(rt: PartitionRuntime) -> bool:
    """Whether `rt` can no longer write: its next change is refused (fenced) and it stops serving."""
    try:
        await rt.call(join("from-the-old-owner"))
    except NotServing as e:
        return e.code == ErrorCode.NOT_COORDINATOR and rt.status is Status.FENCED
    return False


@pytest.mark.parametrize("commit", ["before-fencing", "after-fencing"])
def test_the_old_owners_write_during_a_promotion_counts_only_if_committed_before_fencing(commit: str) -> None:
    """The old owner writes while the standby is promoted: committed before the new owner's
    init_transactions, it is acknowledged and in the tail; held until after it, it is fenced, never
    acknowledged, and not in the promoted state. Either way the promoted state is a full load's."""
    topic = MemoryTopic()

    async def scenario() -> None:
        owner = runtime(topic)
        await owner.start()
        assert (await owner.call(set_connectors(G, a=2))).error_code == ErrorCode.NONE
        standby = standby_of(topic)
        await until(lambda: standby.next_offset == len(topic.records()))
        lag(standby)  # what the old owner writes now is read in the tail, if anywhere
        gate = topic.hold_next_write()
        write = asyncio.create_task(owner.call(join("during")))
        assert await asyncio.to_thread(gate.wait_reached)
        if commit == "before-fencing":
            gate.release()
            assert (await write).error_code == ErrorCode.NONE
            new = await promoted(topic, standby)
        else:
            new = await promoted(topic, standby)  # fences while the old owner's write is held
            gate.release()
            with pytest.raises(NotServing):
                await write
        members = new.coordinator.state.groups[G].members
        assert ("during" in members) is (commit == "before-fencing")
        assert durable(new.coordinator.state) == durable(topic.load())
        await new.close()
        await owner.close()

    run(scenario)


def test_a_standby_arms_no_timers_and_the_promoted_runtime_arms_them_as_a_load_does() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        owner = runtime(topic)
        await owner.start()
        standby = standby_of(topic)
        assert (await owner.call(join("W1"))).error_code == ErrorCode.NONE
        await until(lambda: standby.next_offset == len(topic.records()))
        assert "W1" in standby.state.groups[G].members
        writes = len(topic.transactions())
        await asyncio.sleep(0.05)
        assert len(topic.transactions()) == writes and topic.opens == 1  # the standby never opened nor wrote
        # Sessions of 150 ms where the partition is promoted: W1's session is armed there, expires,
        # and its removal is written by the new owner.
        short = CoordinatorConfig(
            server_assignment_interval_ms=0, initial_assignment_delay_ms=0, session_timeout_ms=150
        )
        new = await promoted(topic, standby, short)
        assert timer_key(SESSION, G, "W1") in new._timers
        await until(lambda: G not in topic.load().groups or "W1" not in topic.load().groups[G].members)
        await new.close()
        await owner.close()

    run(scenario)


def test_a_standby_whose_tailing_failed_is_loaded_in_full() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        owner = runtime(topic)
        await owner.start()
        assert (await owner.call(join("W1"))).error_code == ErrorCode.NONE
        topic.fail_tails()  # Kafka cannot be read: the standby stops, its shadow is not trusted
        standby = standby_of(topic)
        await until(lambda: standby.failed is not None)
        assert (await owner.call(join("W2"))).error_code == ErrorCode.NONE
        loads = topic.loads
        new = await promoted(topic, standby)
        assert topic.loads == loads + 1  # loaded in full instead
        assert {"W1", "W2"} <= set(new.coordinator.state.groups[G].members)
        assert durable(new.coordinator.state) == durable(topic.load())
        await new.close()
        await owner.close()

    run(scenario)


def test_corrupt_records_seen_by_the_standby_are_reported_at_promotion() -> None:
    topic = MemoryTopic()
    topic.append(0, b"\xff\xffnot a key", b"not a value")

    async def scenario() -> None:
        standby = standby_of(topic)
        await until(lambda: standby.next_offset == 1)
        new = await promoted(topic, standby)
        assert [offset for offset, _ in new.last_load.corrupt] == [0]
        await new.close()

    run(scenario)


def test_the_server_promotes_its_standby_and_follows_the_wanted_set() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        writer = PartitionRuntime({}, topic.name, 1, CONFIG, log=topic.log, linger_ms=1.0)
        await writer.start()
        assert (await writer.call(set_connectors("g1", a=1))).error_code == ErrorCode.NONE
        server = CoordinatorServer({}, topic.name, 3, [], "http://127.0.0.1:1", CONFIG, log=topic.log, tail=topic.tail)
        await server.keep_standbys([1, 2])
        assert sorted(server.standbys) == [1, 2]
        await asyncio.to_thread(server.standbys[1].caught_up.wait, 5)
        await server.assign([1])
        assert server.runtimes[1].status is Status.ACTIVE and 1 not in server.standbys
        assert topic.loads == 1  # the writer's load only: the server promoted its standby
        assert durable(server.runtimes[1].coordinator.state) == durable(topic.load(1))
        assert "g1" in server.runtimes[1].coordinator.state.groups
        await server.keep_standbys([0, 1])  # 1 is served here: no standby of it
        assert sorted(server.standbys) == [0]
        await server.close()
        assert not server.standbys and not server.runtimes
        await writer.close()

    run(scenario)


def test_health_and_metrics_show_each_standby_and_a_failed_one_is_started_again() -> None:
    """Operators see the standbys (/health, coordinator_standby_*): how far each has read, and one
    whose tailing failed, which a takeover would load in full; the next keep_standbys replaces it."""
    topic = MemoryTopic()

    async def standbys_health(server: CoordinatorServer) -> dict[str, Any]:
        response = await server.health(None)
        return orjson.loads(response.body)["Standbys"]

    def standby_series(server: CoordinatorServer) -> dict[str, float]:
        return {k: v for k, v in exposed(server.metrics.exposition()).items() if k.startswith("coordinator_standby_")}

    async def scenario() -> None:
        writer = PartitionRuntime({}, topic.name, 1, CONFIG, log=topic.log, linger_ms=1.0)
        await writer.start()
        assert (await writer.call(set_connectors("g1", a=1))).error_code == ErrorCode.NONE
        server = CoordinatorServer({}, topic.name, 3, [], "http://127.0.0.1:1", CONFIG, log=topic.log, tail=topic.tail)
        await server.keep_standbys([1])
        await asyncio.to_thread(server.standbys[1].caught_up.wait, 5)
        end = len(topic.records(1))
        assert end > 0
        assert await standbys_health(server) == {"1": {"Status": "following", "NextOffset": end, "Records": end}}
        series = standby_series(server)
        assert series['coordinator_standby_status{partition="1",status="following"}'] == 1.0
        assert series['coordinator_standby_status{partition="1",status="failed"}'] == 0.0
        assert series['coordinator_standby_next_offset{partition="1"}'] == end
        assert (await server.health(None)).status == 200  # a standby is not served: no effect on status

        topic.fail_tails()
        assert (await writer.call(set_connectors("g1", a=2))).error_code == ErrorCode.NONE
        failed = server.standbys[1]
        await until(lambda: failed.failed is not None)
        assert (await standbys_health(server))["1"]["Status"] == "failed"
        assert standby_series(server)['coordinator_standby_status{partition="1",status="failed"}'] == 1.0

        await server.keep_standbys([1])  # the next change of assignment: a new standby from the start
        assert server.standbys[1] is not failed
        await asyncio.to_thread(server.standbys[1].caught_up.wait, 5)
        assert (await standbys_health(server))["1"] == {
            "Status": "following",
            "NextOffset": len(topic.records(1)),
            "Records": len(topic.records(1)),
        }
        await server.close()
        assert await standbys_health(server) == {}
        await writer.close()

    run(scenario)


@pytest.mark.parametrize(
    ("owned", "partitions", "count", "expected"),
    [
        ({0}, 2, 1, [1]),
        ({1}, 2, 1, [0]),
        ({0, 5}, 10, 2, [1, 6]),  # the next of each owned partition first
        ({0, 5}, 10, 3, [1, 2, 6]),
        ({0, 1}, 4, 9, [2, 3]),  # all the others when count is at least their number
        (set(), 3, 2, [0, 1]),  # owning nothing: from partition 0
        ({0, 1, 2}, 3, 1, []),  # owning all: nothing to stand by
        ({3}, 4, 1, [0]),  # wraps around
    ],
)
def test_which_partitions_an_instance_stands_by(
    owned: set[int], partitions: int, count: int, expected: list[int]
) -> None:
    assert standby_partitions(owned, partitions, count) == expected
