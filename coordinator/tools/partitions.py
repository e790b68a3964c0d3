"""The topic's partitions, as every reader of it needs them: which partition a group lives in, and
a partition's committed records up to an end offset.

The coordinator loads a partition with these (`coordinator.service.log`), `coordinator replay` and
`dump` read with them (`replay.source`), and so does the group page: they all read the way a
coordinator loading the partition does, read_committed, so what they show is what it would hold.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

from confluent_kafka import Consumer, Message, TopicPartition

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    full = length - length % 4
    for i in range(0, full, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[full + 2] << 16
    if rest >= 2:
        h ^= data[full + 1] << 8
    if rest >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The partition of the topic a group lives in: Kafka's default partitioner on the UTF-8 group id
    (murmur2, made positive, modulo the partition count), so any Kafka client can compute it too."""
    return (murmur2(group_id.encode()) & 0x7FFFFFFF) % partitions


class LogError(Exception):
    """The log could not be read or written; the partition must be dropped and loaded again.

    `fenced`: another coordinator took the partition over; this one must stop serving it."""

    def __init__(self, message: str, fenced: bool = False) -> None:
        super().__init__(message)
        self.fenced = fenced


# Settings for reading a partition from start to end, which the user's configuration may override.
# One partition is read at a time, so librdkafka's 1 MiB per partition and fetch made a round trip
# per MiB: 16 MiB doubled the load of a 500,000-record partition (109,000 -> 220,000 records/s).
READ_DEFAULTS = {"max.partition.fetch.bytes": 16 * 1024 * 1024}


def reader_config(config: Mapping[str, str], group_id: str, **settings: object) -> dict:
    """A consumer's settings for reading partitions as the coordinator loads them: read_committed,
    assigned (nothing committed, no group membership), no topic created by asking. `settings` go
    between READ_DEFAULTS and the user's `config`; the read's own rules win over both. Loading,
    `coordinator replay` and the group page read so."""
    return {
        **READ_DEFAULTS,
        **settings,
        **config,
        "group.id": group_id,
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "allow.auto.create.topics": False,
        "enable.partition.eof": False,
    }


def batches_to_end(consumer: Consumer, tp: TopicPartition, end: int) -> Iterator[list[Message]]:
    """The messages of the assigned partition `tp`, batch by batch, until its end offset `end`
    (captured before reading; the last batch may hold later messages). An empty batch is a round in
    which nothing arrived: how long to wait is the caller's business. A message carrying an error
    raises LogError. Shared by loading a partition and by `coordinator replay`."""
    while True:
        # consume() returns when it has num_messages or when the timeout ends, so the last call of
        # a read always sits out the timeout: keep it short (at 0.2 s it was 40% of a failover's load).
        messages = consumer.consume(num_messages=10_000, timeout=0.03)
        for message in messages:
            if message.error():
                raise LogError(f"reading {tp.topic}[{tp.partition}]: {message.error().str()}")
        if messages:
            yield messages
            if messages[-1].offset() >= end - 1:
                return
        (position,) = consumer.position([tp])
        if position.offset >= end:  # transaction markers end the partition without a message
            return
        if not messages:
            yield messages


def read_range(
    consumer: Consumer, topic: str, partition: int, start: int, end: int, stall_s: float
) -> Iterator[Message]:
    """The messages of `topic[partition]` from offset `start` to before `end` (captured by the caller),
    as the consumer reads them (`reader_config`: read_committed). LogError when nothing arrives for
    `stall_s` before the end. The partition is assigned for the read and unassigned after it, also
    when the caller stops early. Shared by `coordinator replay` and the group page."""
    tp = TopicPartition(topic, partition)
    consumer.assign([TopicPartition(topic, partition, start)])
    try:
        last_progress = time.monotonic()
        for messages in batches_to_end(consumer, tp, end):
            for message in messages:
                if message.offset() >= end:
                    return
                yield message
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > stall_s:
                (position,) = consumer.position([tp])
                raise LogError(
                    f"reading {topic}[{partition}] stalled at offset {position.offset} "
                    f"for {stall_s:g}s before its end offset {end}"
                )
    finally:
        consumer.unassign()
