"""The partition runtime on an in-memory log (`coordinator.service.memory_log`), no broker: batching
and linger, responses only once durable, a failed commit (reload, the log is the truth), fencing by a
new owner, loading again after Kafka could not be read, a refused format level, timers re-armed
after a load. tests/test_runtime_kafka.py runs the runtime against the broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from records import MAX_FORMAT_LEVEL, FormatLevelKey, FormatLevelValue, Record, encode

from coordinator.core.config import CoordinatorConfig
from coordinator.core.protocol import (
    SESSION,
    ClassicProtocol,
    ErrorCode,
    HeartbeatRequest,
    JoinGroupRequest,
    RequestContext,
    timer_key,
)
from coordinator.service.memory_log import MemoryTopic
from coordinator.service.runtime import NotServing, PartitionRuntime, Status
from coordinator.service.server import CoordinatorServer
from coordinator.tools.partitions import partition_for
from tests.support.runtime_memory import CONFIG, G, join, run, runtime, set_connectors
from tests.support.waiting import until


def connectors(runtime: PartitionRuntime, group: str = G) -> Awaitable[list[str]]:
    """The group's connectors, as a describe answers (once what it may show is durable)."""

    async def read() -> list[str]:
        described = await runtime.query(lambda coordinator: coordinator.describe_group(group))
        return [c.name for c in described.connectors] if described else []

    return read()


async def refused(call: Awaitable[Any]) -> ErrorCode:
    with pytest.raises(NotServing) as e:
        await call
    return e.value.code


def test_calls_made_while_a_batch_commits_share_the_next_transaction() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        rt = runtime(topic)
        await rt.start()
        gate = topic.hold_next_write()
        first = asyncio.create_task(rt.call(set_connectors("g0", a=1)))
        assert await asyncio.to_thread(gate.wait_reached)
        later = [asyncio.create_task(rt.call(set_connectors(f"g{i}", a=1))) for i in range(1, 6)]
        await until(lambda: len(rt.coordinator.state.groups) == 6)  # all applied, none durable
        await asyncio.sleep(0.02)  # many lingers: the next batch waits for the commit in flight
        assert not first.done() and not any(t.done() for t in later)
        assert len(topic.transactions()) == 0
        gate.release()
        answers = await asyncio.gather(first, *later)
        assert all(a.error_code == ErrorCode.NONE for a in answers)
        one = topic.transactions()[0]
        assert topic.transactions() == [one, 5 * one]  # the five calls in one transaction
        assert set(topic.load().groups) == {f"g{i}" for i in range(6)}
        await rt.close()

    run(scenario)


def test_a_batch_waits_its_linger_or_closes_on_size() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        rt = runtime(topic, linger_ms=60)
        await rt.start()
        started = time.monotonic()
        answers = await asyncio.gather(*(rt.call(set_connectors(f"g{i}", a=1)) for i in range(3)))
        assert time.monotonic() - started >= 0.06
        assert all(a.error_code == ErrorCode.NONE for a in answers)
        assert len(topic.transactions()) == 1  # three calls within one linger: one transaction
        await rt.close()

        sized = runtime(topic, linger_ms=60_000, max_batch_records=1)
        await sized.start()
        answer = await asyncio.wait_for(sized.call(set_connectors("g9", a=1)), 5)  # not a minute
        assert answer.error_code == ErrorCode.NONE
        await sized.close()

    run(scenario)


def test_a_response_waits_until_what_it_wrote_is_durable_and_so_does_a_describe() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        rt = runtime(topic)
        await rt.start()
        assert (await rt.call(set_connectors(G, a=1))).error_code == ErrorCode.NONE
        gate = topic.hold_next_write()
        put = asyncio.create_task(rt.call(set_connectors(G, a=1, b=1)))
        assert await asyncio.to_thread(gate.wait_reached)
        described = asyncio.create_task(connectors(rt))
        await asyncio.sleep(0.02)
        assert not put.done(), "answered before its write was durable"
        assert not described.done(), "a describe showed a change not yet durable"
        gate.release()
        assert (await put).error_code == ErrorCode.NONE
        assert await described == ["a", "b"]
        await rt.close()

    run(scenario)


def test_a_heartbeat_that_writes_nothing_is_answered_without_a_commit() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        rt = runtime(topic)
        await rt.start()
        joined = await rt.call(join("W1"))
        commits = len(topic.transactions())
        request = HeartbeatRequest(G, "W1", joined.member_epoch)
        for _ in range(20):
            steady = await rt.call(lambda coordinator, now: coordinator.heartbeat(request, now))
            assert steady.error_code == ErrorCode.NONE
        assert len(topic.transactions()) == commits
        await rt.close()

    run(scenario)


def test_a_failed_commit_answers_not_coordinator_and_the_partition_serves_what_is_durable() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        rt = runtime(topic)
        await rt.start()
        assert (await rt.call(set_connectors(G, a=1))).error_code == ErrorCode.NONE
        gate = topic.hold_next_write()
        topic.fail_next_write()
        failing = asyncio.create_task(rt.call(set_connectors(G, a=1, b=1)))
        assert await asyncio.to_thread(gate.wait_reached)
        # Waiting behind the failing commit: a change of the next batch, a describe.
        behind = asyncio.create_task(rt.call(set_connectors("other", c=1)))
        described = asyncio.create_task(connectors(rt))
        await until(lambda: "other" in rt.coordinator.state.groups)
        gate.release()
        for task in (failing, behind, described):
            assert await refused(task) == ErrorCode.NOT_COORDINATOR
        await until(lambda: rt.status is Status.ACTIVE)
        assert topic.opens == 2  # the partition was opened (fenced) and loaded again
        assert await connectors(rt) == ["a"]  # memory was dropped: b and "other" were never durable
        assert "other" not in rt.coordinator.state.groups
        assert (await rt.call(set_connectors(G, a=2))).error_code == ErrorCode.NONE
        await rt.close()

    run(scenario)


def test_a_commit_that_failed_after_it_was_durable_is_served_after_the_reload() -> None:
    """The writer cannot tell (a commit's answer lost): the requests hear NOT_COORDINATOR, and the
    reloaded partition serves the change, because the log is the truth."""
    topic = MemoryTopic()

    async def scenario() -> None:
        rt = runtime(topic)
        await rt.start()
        topic.fail_next_write(durable=True)
        assert await refused(rt.call(set_connectors(G, a=1))) == ErrorCode.NOT_COORDINATOR
        await until(lambda: rt.status is Status.ACTIVE)
        assert await connectors(rt) == ["a"]
        await rt.close()

    run(scenario)


def test_a_new_owner_fences_the_old_one_which_stops_serving() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        first = runtime(topic)
        await first.start()
        assert (await first.call(set_connectors(G, a=1))).error_code == ErrorCode.NONE
        second = runtime(topic)
        await second.start()
        assert second.coordinator.state.slots() == first.coordinator.state.slots()

        assert await refused(first.call(set_connectors(G, a=1, b=1))) == ErrorCode.NOT_COORDINATOR
        assert first.status is Status.FENCED
        assert await refused(first.call(set_connectors(G, a=2))) == ErrorCode.NOT_COORDINATOR
        assert await refused(connectors(first)) == ErrorCode.NOT_COORDINATOR
        assert topic.opens == 2  # a fenced owner does not load again (it would fence the new one)
        assert [c.name for c in topic.load().groups[G].connectors.connectors] == ["a"]

        assert (await second.call(set_connectors(G, a=1, c=1))).error_code == ErrorCode.NONE
        assert await connectors(second) == ["a", "c"]
        await first.close()
        await second.close()

    run(scenario)


def test_a_write_refused_as_fenced_stops_the_partition_without_loading_it_again() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        rt = runtime(topic)
        await rt.start()
        topic.fail_next_write(fenced=True)
        assert await refused(rt.call(set_connectors(G, a=1))) == ErrorCode.NOT_COORDINATOR
        assert rt.status is Status.FENCED
        await asyncio.sleep(0.05)  # several load retries' worth
        assert (topic.opens, topic.loads) == (1, 1)
        await rt.close()

    run(scenario)


def test_a_partition_that_cannot_be_loaded_tries_again_and_answers_load_in_progress() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        topic.fail_loads(2)
        topic.fail_opens(1)
        rt = runtime(topic, load_retry_s=0.02)
        started = time.monotonic()
        await rt.start()
        assert rt.status is Status.LOADING
        assert await refused(rt.call(set_connectors(G, a=1))) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await until(lambda: rt.status is Status.ACTIVE)
        assert time.monotonic() - started >= 0.02 + 0.04 + 0.08  # three failures, backing off
        assert (topic.opens, topic.loads) == (4, 3)
        assert (await rt.call(set_connectors(G, a=1))).error_code == ErrorCode.NONE

        # After a failed commit, the reload that cannot read the log now keeps trying too.
        topic.fail_next_write()
        topic.fail_loads(1_000)
        assert await refused(rt.call(set_connectors(G, a=1, b=1))) == ErrorCode.NOT_COORDINATOR
        assert await refused(rt.call(set_connectors(G, a=2))) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        topic.fail_loads(0)  # Kafka is back
        await until(lambda: rt.status is Status.ACTIVE)
        assert await connectors(rt) == ["a"]
        await rt.close()

    run(scenario)


def test_a_closed_partition_stops_trying_to_load() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        topic.fail_loads(1_000)
        rt = runtime(topic)
        await rt.start()
        await until(lambda: topic.loads >= 2)
        await rt.close()
        tried = topic.loads
        await asyncio.sleep(0.1)
        assert topic.loads == tried and rt.status is Status.CLOSED

    run(scenario)


def test_a_partition_at_an_unreadable_level_is_refused_and_not_loaded_again() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        writer = runtime(topic)
        await writer.start()
        assert (await writer.call(set_connectors(G, a=1))).error_code == ErrorCode.NONE
        await writer.close()
        level = Record(FormatLevelKey(FormatLevelKey.PARTITION), FormatLevelValue(MAX_FORMAT_LEVEL + 1))
        topic.append(0, *encode(level))

        rt = runtime(topic)
        await rt.start()
        assert rt.status is Status.REFUSED
        assert not rt.coordinator.state.groups  # nothing half-read is kept
        with pytest.raises(NotServing) as e:
            await rt.call(set_connectors(G, a=2))
        assert e.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert f"record format level {MAX_FORMAT_LEVEL + 1}" in str(e.value)
        await asyncio.sleep(0.05)  # several load retries' worth: a refusal is not retried
        assert rt.status is Status.REFUSED and topic.loads == 2
        await rt.close()

    run(scenario)


def test_a_corrupt_record_is_skipped_and_reported() -> None:
    topic = MemoryTopic()

    async def scenario() -> None:
        topic.append(0, b"\xff\xffnot a key", b"not a value")
        rt = runtime(topic)
        await rt.start()
        assert rt.status is Status.ACTIVE
        assert [offset for offset, _ in rt.last_load.corrupt] == [0]
        assert (await rt.call(set_connectors(G, a=1))).error_code == ErrorCode.NONE
        await rt.close()

    run(scenario)


def test_timers_are_armed_from_the_loaded_state() -> None:
    """Timers are never written: a member's session is re-armed by the coordinator that loads the
    partition, and expires there."""
    topic = MemoryTopic()
    # Sessions of 10 s where W1 joins, of 150 ms where the partition is loaded again.
    config = CoordinatorConfig(server_assignment_interval_ms=0, initial_assignment_delay_ms=0, session_timeout_ms=150)

    async def scenario() -> None:
        first = runtime(topic)
        await first.start()
        assert (await first.call(join("W1"))).error_code == ErrorCode.NONE
        await first.close()

        second = runtime(topic, config)
        await second.start()
        assert timer_key(SESSION, G, "W1") in second._timers
        await until(lambda: G not in topic.load().groups or "W1" not in topic.load().groups[G].members)
        await until(lambda: second._commits == 0)
        group = second.coordinator.state.groups.get(G)
        assert group is None or "W1" not in group.members  # what is served is what is durable
        await second.close()

    run(scenario)


def test_a_parked_join_is_answered_not_coordinator_when_the_partition_reloads() -> None:
    """A classic JoinGroup waiting for the others (`Parked`) is not in any batch: a reload answers
    it NOT_COORDINATOR, and the member asks again where the group is served now."""
    topic = MemoryTopic()

    def classic_join(member_id: str, fresh_id: str) -> Callable:
        request = JoinGroupRequest(
            group_id="classic",
            member_id=member_id,
            protocol_type="connect",
            protocols=(ClassicProtocol("sessioned", b"meta"),),
            session_timeout_ms=10_000,
        )
        context = RequestContext("worker", "10.0.0.1", fresh_id)  # fresh_id: the member id a first join is given
        return lambda coordinator, now: coordinator.join_group(request, now, context)

    async def joined(rt: PartitionRuntime, fresh_id: str) -> str:
        first = await rt.call(classic_join("", fresh_id))
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        return first.member_id

    async def scenario() -> None:
        rt = runtime(topic)
        await rt.start()
        a = await joined(rt, "A")
        assert (await rt.call(classic_join(a, "A"))).generation_id == 1
        b = await joined(rt, "B")
        parked = asyncio.create_task(rt.call(classic_join(b, "B")))  # waits for A to join again
        await until(lambda: bool(rt._parked))
        topic.fail_next_write()
        assert await refused(rt.call(set_connectors(G, a=1))) == ErrorCode.NOT_COORDINATOR
        assert await refused(parked) == ErrorCode.NOT_COORDINATOR
        await until(lambda: rt.status is Status.ACTIVE)
        await rt.close()

    run(scenario)


def test_a_server_handed_an_in_memory_topic_serves_without_a_broker() -> None:
    """`CoordinatorServer(log=...)` hands each partition's runtime its log; a PUT is answered once
    its partition's write is durable, in the partition the group lives in."""
    topic = MemoryTopic()

    async def scenario() -> None:
        server = CoordinatorServer({}, topic.name, 2, [0, 1], "http://127.0.0.1:0", CONFIG, log=topic.log)
        await server.start()
        client = TestClient(TestServer(server.app()))
        await client.start_server()
        try:
            gate = topic.hold_next_write()
            put = asyncio.create_task(
                client.put(f"/v1/groups/{G}/connectors", json={"Connectors": [{"Name": "A", "Tasks": 2}]})
            )
            assert await asyncio.to_thread(gate.wait_reached)
            assert not put.done()
            gate.release()
            assert (await put).status == 200
            described = await (await client.get(f"/v1/groups/{G}")).json()
            assert [c["Name"] for c in described["Connectors"]] == ["A"]
            partition = partition_for(G, 2)
            assert G in topic.load(partition).groups and not topic.records(1 - partition)
        finally:
            await client.close()
            await server.close()

    run(scenario)
