"""The coordinator's log against the session broker: batches written in transactions, a partition
loaded back through replay gives the state that wrote it, corrupt records are reported and skipped,
and a new writer of a partition fences the old one."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from records import ConnectGroupMetadataKey, ConnectGroupMetadataValue, Record, encode

from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.state import CoordinatorState
from coordinator.service.log import PartitionWriter, load_partition
from coordinator.tools.partitions import LogError, murmur2, partition_for
from tests.topics import create_topic

# Kafka's own test vectors for Utils.murmur2 (clients UtilsTest).
MURMUR2 = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize("text", MURMUR2)
def test_murmur2_is_kafkas(text: str) -> None:
    assert murmur2(text.encode()) == MURMUR2[text]


def test_partition_for_spreads_groups_and_is_stable() -> None:
    parts = [partition_for(f"connect-cluster-{i}", 16) for i in range(1_000)]
    assert all(0 <= p < 16 for p in parts) and len(set(parts)) == 16
    # Kafka's default partitioner, Utils.toPositive(murmur2(key)) % partitions, worked by hand from the
    # test vectors above (not from our murmur2): e.g. foobar, -790332482 & 0x7fffffff = 1357151166.
    assert [partition_for(key, 16) for key in ("21", "foobar", "a-little-bit-long-string", "abc")] == [12, 14, 0, 11]
    assert [partition_for(key, 7) for key in ("21", "foobar", "a-little-bit-long-string", "abc")] == [3, 0, 1, 4]


@pytest.mark.integration
def test_partition_for_is_where_a_kafka_producer_puts_the_key(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    """An independent implementation: librdkafka's "murmur2" partitioner (documented as Java
    producer compatible) picks the partition; partition_for must pick the same one."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 16)
    producer = Producer({**kafka_broker.client_config(), "partitioner": "murmur2"})
    keys = [f"connect-cluster-{i}" for i in range(200)] + ["g", "connect-\u00e9t\u00e9", "x" * 37]
    placed: dict[str, int] = {}

    def delivered(err, msg) -> None:  # noqa: ANN001
        assert err is None, err
        placed[msg.key().decode()] = msg.partition()

    for key in keys:
        producer.produce(unique_topic, key=key.encode(), value=b"", on_delivery=delivered)
    assert producer.flush(30) == 0
    assert placed == {key: partition_for(key, 16) for key in keys}


class WritingDriver(Driver):
    """A Driver whose every handler result is one transaction on the group's partition, written
    before the response is used: what the runtime does."""

    def __init__(self, writer: PartitionWriter) -> None:
        super().__init__()
        self.writer = writer

    def run(self, result):  # noqa: ANN001, ANN201
        if result.records:
            self.writer.write(result.records)
        return super().run(result)


@pytest.mark.integration
def test_a_loaded_partition_is_the_state_that_wrote_it(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 4)
    group = "connect-cluster"
    partition = partition_for(group, 4)
    writer = PartitionWriter(kafka_broker.client_config(), unique_topic, partition)
    writer.open()
    d = WritingDriver(writer)
    d.set_config(group, session_timeout_ms=2_000, heartbeat_interval_ms=500, scheduled_rebalance_max_delay_ms=3_000)
    d.set_connectors(group, {"A": 2, "B": 1})
    workers = [SimWorker(d, group, f"W{i}") for i in range(3)]
    converge(workers)
    workers[1].leave()
    converge([workers[0], workers[2]])
    d.advance(3_000)  # the departed work's delay passes
    converge([workers[0], workers[2]])
    writer.close()

    loaded = CoordinatorState()
    result = load_partition(kafka_broker.client_config(), unique_topic, partition, loaded)
    assert result.records == len(d.log) and not result.corrupt
    assert loaded.slots() == d.state.slots()
    # The other partitions hold nothing of it.
    other = CoordinatorState()
    assert load_partition(kafka_broker.client_config(), unique_topic, (partition + 1) % 4, other).records == 0
    assert other.slots() == {}


@pytest.mark.integration
def test_corrupt_records_are_reported_with_their_offset_and_skipped(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 1)
    good = Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(7))
    key, value = encode(good)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(unique_topic, key=key, value=b"\x00\x00\xff\xff\xff", partition=0)  # a broken body
    producer.produce(unique_topic, key=b"\x7f\x7f", value=b"", partition=0)  # an unknown record type
    producer.produce(unique_topic, key=key, value=value, partition=0)
    producer.flush(30)
    del producer
    state = CoordinatorState()
    result = load_partition(kafka_broker.client_config(), unique_topic, 0, state)
    assert result.records == 1
    assert [offset for offset, _ in result.corrupt] == [0, 1]
    assert "ConnectGroupMetadata" in result.corrupt[0][1] or "record type 3" in result.corrupt[0][1]
    assert state.groups["g"].group_epoch == 7


@pytest.mark.integration
def test_a_new_writer_of_the_partition_fences_the_old_one(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 1)
    record = Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(1))
    old = PartitionWriter(kafka_broker.client_config(), unique_topic, 0, timeout_s=10)
    old.open()
    old.write([record])
    new = PartitionWriter(kafka_broker.client_config(), unique_topic, 0, timeout_s=10)
    new.open()  # takes the partition over
    with pytest.raises(LogError) as fenced:
        old.write([Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(2))])
    assert fenced.value.fenced, fenced.value
    new.write([Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(3))])
    old.close()
    new.close()
    state = CoordinatorState()
    load_partition(kafka_broker.client_config(), unique_topic, 0, state)
    assert state.groups["g"].group_epoch == 3
