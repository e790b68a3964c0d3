"""Record format levels (issue 29): a writer uses no value version above its partition's level, the
level is raised by a type 10 record and never lowered, and a partition at a level this release
does not read is refused, never misread."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer

from records import (
    DEFAULT_FORMAT_LEVEL,
    FORMAT_LEVELS,
    MAX_FORMAT_LEVEL,
    RECORD_TYPES,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    ConnectorTaskCount,
    FormatLevelKey,
    FormatLevelValue,
    Record,
    RecordEncodeError,
    decode,
    encode,
    format_version,
)

from coordinator.core.config import CoordinatorConfig
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.protocol import ErrorCode, SetConnectorsRequest
from coordinator.core.state import CoordinatorState
from coordinator.service.metrics import Metrics
from coordinator.service.runtime import NotServing, PartitionRuntime, Status
from tests.topics import create_topic

LEVEL = Record(FormatLevelKey(FormatLevelKey.PARTITION), FormatLevelValue(1))


def test_every_level_names_a_version_of_every_group_record_type() -> None:
    for level, versions in FORMAT_LEVELS.items():
        for record_type, spec in RECORD_TYPES.items():
            if record_type == FormatLevelKey.RECORD_TYPE:
                assert record_type not in versions  # the level record is not subject to itself
                continue
            assert versions[record_type] in spec.value_schemas, (level, record_type)
    # Levels only add: a higher level never writes an older version of a type than a lower one.
    for low, high in zip(sorted(FORMAT_LEVELS), sorted(FORMAT_LEVELS)[1:]):
        assert all(FORMAT_LEVELS[high][t] >= v for t, v in FORMAT_LEVELS[low].items())


def test_level_1_is_what_the_first_release_wrote() -> None:
    """0.1.0 wrote every type at its latest version then; partitions without a type 10 record
    are read as level 1, so level 1 must stay exactly that."""
    assert DEFAULT_FORMAT_LEVEL == 1
    assert FORMAT_LEVELS[1] == {2: 1, 3: 1, 4: 0, 5: 2, 6: 1, 7: 0, 8: 0, 9: 1}


def test_a_writer_at_a_level_writes_that_levels_version() -> None:
    record = Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(3))
    for level in FORMAT_LEVELS:
        _, value = encode(record, level=level)
        assert int.from_bytes(value[:2], "big") == format_version(level, 3)
        assert decode(*encode(record, level=level)) == record
    with pytest.raises(RecordEncodeError, match="unknown record format level"):
        encode(record, level=MAX_FORMAT_LEVEL + 1)


def test_the_level_is_replayed_and_kept_by_compaction() -> None:
    state = CoordinatorState()
    assert state.format_level == DEFAULT_FORMAT_LEVEL
    assert FormatLevelKey(FormatLevelKey.PARTITION) not in state.slots()
    state.replay(Record(FormatLevelKey(FormatLevelKey.PARTITION), FormatLevelValue(7)))
    assert state.format_level == 7
    assert state.slots()[FormatLevelKey(FormatLevelKey.PARTITION)] == FormatLevelValue(7)
    assert not state.groups  # the record is about the partition, not a group named ""


def test_raising_the_level_is_one_record_and_never_lowers_it() -> None:
    coordinator = GroupCoordinator(CoordinatorState(), CoordinatorConfig())
    result = coordinator.raise_format_level(MAX_FORMAT_LEVEL, 0)
    assert result.response.error_code == ErrorCode.NONE
    assert result.records == [Record(FormatLevelKey(FormatLevelKey.PARTITION), FormatLevelValue(MAX_FORMAT_LEVEL))]
    coordinator.apply(result)
    assert coordinator.raise_format_level(MAX_FORMAT_LEVEL, 0).records == []  # already there: nothing written
    unknown = coordinator.raise_format_level(MAX_FORMAT_LEVEL + 1, 0)
    assert unknown.response.error_code == ErrorCode.UNSUPPORTED_VERSION and not unknown.records
    coordinator.state.replay(Record(FormatLevelKey(FormatLevelKey.PARTITION), FormatLevelValue(MAX_FORMAT_LEVEL + 5)))
    lower = coordinator.raise_format_level(MAX_FORMAT_LEVEL, 0)
    assert lower.response.error_code in (ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION)
    assert not lower.records


@pytest.mark.integration
def test_a_partition_at_an_unreadable_level_is_refused_not_misread(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """A rollback after the level was raised: the older release finds a level it does not read.
    It serves nothing of the partition (no group from it, a clear answer), says why in /health's
    status and the metric, and does not load it again and again."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    config = {"bootstrap.servers": kafka_broker.bootstrap_servers}

    async def story() -> None:
        writer = PartitionRuntime(config, unique_topic, 0)
        await writer.start()
        assert writer.status is Status.ACTIVE
        change = SetConnectorsRequest(group_id="g", connectors=(ConnectorTaskCount("a", 2),))
        answer = await writer.call(lambda coordinator, now: coordinator.set_connectors(change, now))
        assert answer.error_code == ErrorCode.NONE
        await writer.close()

        # What a newer release's upgrade-format leaves in the partition.
        producer = Producer({**config, "enable.idempotence": True})
        key, value = encode(Record(FormatLevelKey(FormatLevelKey.PARTITION), FormatLevelValue(MAX_FORMAT_LEVEL + 1)))
        producer.produce(unique_topic, key=key, value=value, partition=0)
        assert producer.flush(10) == 0

        metrics = Metrics()
        runtime = PartitionRuntime(config, unique_topic, 0, metrics=metrics)
        metrics.watch(lambda: {0: runtime})
        await runtime.start()
        assert runtime.status is Status.REFUSED
        assert not runtime.coordinator.state.groups  # nothing half-read is kept
        with pytest.raises(NotServing) as refused:
            await runtime.call(lambda coordinator, now: coordinator.set_connectors(change, now))
        assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert f"record format level {MAX_FORMAT_LEVEL + 1}" in str(refused.value)
        exposed = metrics.exposition().decode()
        assert 'coordinator_partition_status{partition="0",status="refused"} 1.0' in exposed
        await asyncio.sleep(1.5)  # a LogError would be retried after 1 s: a refusal is not
        assert runtime.status is Status.REFUSED
        await runtime.close()

    asyncio.run(story())


def _at_level(level: int) -> GroupCoordinator:
    coordinator = GroupCoordinator(CoordinatorState(), CoordinatorConfig())
    if level != DEFAULT_FORMAT_LEVEL:
        coordinator.apply(coordinator.raise_format_level(level, 0))
    return coordinator


def _epoch_record(result) -> ConnectGroupMetadataValue:  # noqa: ANN001
    (value,) = [r.value for r in result.records if r.key.__class__ is ConnectGroupMetadataKey]
    return value


def test_at_level_2_each_epoch_says_when_it_was_bumped_and_since_when_the_group_rebalances() -> None:
    """Item 3: a bump while the rebalance is open keeps its start; one after convergence starts a
    new one; the partition's records are then written as type 3 v2, and describe and a coordinator
    that loads the partition (the observer) see the start."""
    from coordinator.core.protocol import HeartbeatRequest
    from coordinator.service.events import Observer

    coordinator = _at_level(2)
    join = coordinator.heartbeat(
        HeartbeatRequest("g", "m1", 0, rebalance_timeout_ms=60_000, server_assignor="incremental_cooperative"), 1_000
    )
    first = _epoch_record(join)
    assert (first.epoch_bumped_ms, first.rebalance_started_ms) == (1_000, 1_000)
    assert decode(*encode(join.records[0], level=2)) == join.records[0]
    coordinator.apply(join)
    change = SetConnectorsRequest(group_id="g", connectors=(ConnectorTaskCount("a", 2),))
    second = coordinator.set_connectors(change, 5_000)
    assert (_epoch_record(second).epoch_bumped_ms, _epoch_record(second).rebalance_started_ms) == (5_000, 1_000)
    coordinator.apply(second)
    assert coordinator.describe_group("g").rebalancing_since_ms == 1_000
    key, value = encode(next(r for r in second.records if r.key.__class__ is ConnectGroupMetadataKey), level=2)
    assert int.from_bytes(value[:2], "big") == 2

    observer = Observer(0)
    observer.loaded(coordinator.state, 9_000)  # a coordinator loading the partition now
    assert observer.open["g"].started_ms == 1_000 and observer.open["g"].known_start
    assert observer.in_progress(9_000) == {"g": 8.0}

    # Converged (no members left: a leave), a later bump starts a new rebalance at its own time.
    leave = coordinator.heartbeat(HeartbeatRequest("g", "m1", -1), 6_000)
    coordinator.apply(leave)
    assert coordinator.describe_group("g").rebalancing_since_ms is None
    third = coordinator.set_connectors(
        SetConnectorsRequest(group_id="g", connectors=(ConnectorTaskCount("a", 3),)), 7_000
    )
    assert (_epoch_record(third).epoch_bumped_ms, _epoch_record(third).rebalance_started_ms) == (7_000, 7_000)


def test_at_level_1_no_epoch_carries_a_time_and_the_records_stay_what_0_1_0_reads() -> None:
    from coordinator.core.protocol import HeartbeatRequest

    coordinator = _at_level(1)
    join = coordinator.heartbeat(
        HeartbeatRequest("g", "m1", 0, rebalance_timeout_ms=60_000, server_assignor="incremental_cooperative"), 1_000
    )
    value = _epoch_record(join)
    assert value.epoch_bumped_ms is None and value.rebalance_started_ms is None
    for record in join.records:
        encode(record, level=1)  # no field a level 1 version cannot hold
    key, raw = encode(next(r for r in join.records if r.key.__class__ is ConnectGroupMetadataKey), level=1)
    assert int.from_bytes(raw[:2], "big") == 1
    coordinator.apply(join)
    assert coordinator.describe_group("g").rebalancing_since_ms is None


@pytest.mark.integration
def test_upgrade_format_is_refused_while_a_partition_has_no_instance(kafka_broker, unique_topic, tmp_path) -> None:  # noqa: ANN001
    """Raising the level only where instances serve would leave the rest behind: refused, nothing
    written; an instance that does not answer is one clear line, never a traceback."""
    import subprocess
    import sys

    from coordinator.tools.process import ServeProcess

    create_topic(kafka_broker.bootstrap_servers, unique_topic, 2)
    server = ServeProcess(
        kafka_broker.bootstrap_servers, unique_topic, tmp_path, "--allow-anonymous", "--partitions", "0"
    ).start()
    try:

        def upgrade(url: str) -> subprocess.CompletedProcess:
            command = [sys.executable, "-m", "coordinator", "topic", "upgrade-format", "--url", url]
            return subprocess.run(command, capture_output=True, text=True, timeout=60)

        refused = upgrade(server.url)
        assert refused.returncode == 1, refused
        assert "refused: partitions 1 are served by no instance" in refused.stderr
        _, health = server.request("GET", "/health")
        assert health["FormatLevels"] == {"0": DEFAULT_FORMAT_LEVEL}  # nothing was written
        gone = upgrade("http://127.0.0.1:9")  # nothing listens on the discard port
        assert gone.returncode == 1 and "cannot reach the coordinator at" in gone.stderr
        assert "Traceback" not in refused.stderr + gone.stderr
    finally:
        server.stop()
