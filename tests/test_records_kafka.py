"""Records through a real broker: encoded keys, values and tombstones produced transactionally to a
partition of a topic made by `coordinator topic create`, read back read_committed, decoded."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from golden_cases import CASES

from records import (
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    CurrentMemberAssignmentKey,
    Record,
    decode,
    encode,
)

from tests.topics import create_topic

pytestmark = pytest.mark.integration


def _produce(broker, topic: str, partition: int, records: list[Record], *, commit: bool = True) -> None:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "transactional.id": f"{topic}-{partition}",
            "enable.idempotence": True,
            "acks": "all",
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for record in records:
        key, value = encode(record)
        producer.produce(topic, key=key, value=value, partition=partition)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)


def _read_committed(broker, topic: str, partition: int, timeout: float = 30.0) -> list[Record]:
    """Every committed record of the partition, from the start to the end offset, decoded."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"reader-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        start, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        out: list[Record] = []
        if end <= start:  # empty: no fetch would ever move the position
            return out
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            (position,) = consumer.position([TopicPartition(topic, partition)])
            if position.offset >= end:
                return out
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            out.append(decode(message.key(), message.value()))
        raise AssertionError(f"did not reach end offset {end} of {topic}-{partition} in {timeout}s")
    finally:
        consumer.close()


def test_records_round_trip_through_the_broker(kafka_broker, unique_topic) -> None:
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 3)
    records = [record for record, _ in CASES.values()]
    assert any(r.is_tombstone for r in records) and any(not r.is_tombstone for r in records)
    _produce(kafka_broker, unique_topic, 1, records)

    assert _read_committed(kafka_broker, unique_topic, 1) == records
    assert _read_committed(kafka_broker, unique_topic, 0) == []  # the partition we chose, no other


def test_aborted_records_are_not_read(kafka_broker, unique_topic) -> None:
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 3)
    kept = Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(1))
    _produce(kafka_broker, unique_topic, 0, [kept])
    _produce(kafka_broker, unique_topic, 0, [Record(CurrentMemberAssignmentKey("g", "m"), None)], commit=False)
    _produce(kafka_broker, unique_topic, 0, [Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(2))])

    assert [r.value for r in _read_committed(kafka_broker, unique_topic, 0)] == [
        ConnectGroupMetadataValue(1),
        ConnectGroupMetadataValue(2),
    ]
