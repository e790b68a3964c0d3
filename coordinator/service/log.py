"""The coordinator's log: which partition a group lives in, loading a partition, writing batches.

DESIGN §6. The topic is the truth: a partition's state is whatever replaying it gives, so loading
is `read_committed` from the first offset to the end offset at the time of loading, every record
through `CoordinatorState.replay_all`, and writing is one Kafka transaction per batch from a
producer whose `transactional.id` names the partition, so that the coordinator that takes a
partition over fences the one it replaces (`init_transactions`).

This is the only module of the coordinator that talks to Kafka for the state; it knows nothing of
the protocol beyond records.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from records import Record, RecordDecodeError, decode, encode

from coordinator.core.state import CoordinatorState
from coordinator.tools.topic import MAX_MESSAGE_BYTES

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


_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
           KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


def _fenced(e: KafkaException) -> bool:
    error = e.args[0] if e.args else None
    return isinstance(error, KafkaError) and (error.code() in _FENCED or error.fatal() and "fenc" in error.str().lower())


# Settings for reading a partition from start to end, which the user's configuration may override.
# One partition is read at a time, so librdkafka's 1 MiB per partition and fetch made a round trip
# per MiB: 16 MiB doubled the load of a 500,000-record partition (109,000 -> 220,000 records/s).
READ_DEFAULTS = {"max.partition.fetch.bytes": 16 * 1024 * 1024}


def reader_config(config: Mapping[str, str], group_id: str, **settings: object) -> dict:
    """A consumer's settings for reading partitions as the coordinator loads them: read_committed,
    assigned (nothing committed, no group membership), no topic created by asking. `settings` go
    between READ_DEFAULTS and the user's `config`; the read's own rules win over both. Loading,
    `coordinator replay` and the group page read so."""
    return {**READ_DEFAULTS, **settings, **config, "group.id": group_id, "enable.auto.commit": False,
            "isolation.level": "read_committed", "allow.auto.create.topics": False, "enable.partition.eof": False}


@dataclass(slots=True)
class LoadResult:
    """What loading a partition found: how much, how long, and the records that did not decode."""

    partition: int
    records: int = 0
    end_offset: int = 0
    seconds: float = 0.0
    corrupt: list[tuple[int, str]] = field(default_factory=list)  # (offset, why), skipped


def load_partition(config: Mapping[str, str], topic: str, partition: int, state: CoordinatorState,
                   timeout_s: float = 60.0) -> LoadResult:
    """Replay partition `partition` of `topic` into `state`, read_committed, up to its end offset now.

    A record that does not decode is reported (offset and reason) and skipped: one corrupt record
    must not keep every other group of the partition from being served."""
    started = time.monotonic()
    result = LoadResult(partition)
    consumer = Consumer(reader_config(config, f"worker-coordinator-load-{topic}"))
    try:
        tp = TopicPartition(topic, partition)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
        except KafkaException as e:
            raise LogError(f"cannot read the offsets of {topic}[{partition}]: {e}") from None
        result.end_offset = high
        if high > low:  # an empty partition is loaded; no fetch would ever move the position
            consumer.assign([TopicPartition(topic, partition, low)])
            state.replay_all(_records(consumer, tp, high, started + timeout_s, result))
    except KafkaException as e:  # Kafka cannot be read now: the caller tries again later
        raise LogError(f"reading {topic}[{partition}]: {e}") from None
    finally:
        consumer.close()
    result.seconds = time.monotonic() - started
    return result


def _records(consumer: Consumer, tp: TopicPartition, end: int, deadline: float, result: LoadResult) -> Iterable[Record]:
    for round_, messages in enumerate(batches_to_end(consumer, tp, end)):
        if round_ and time.monotonic() > deadline:  # another round is needed, and the time is up
            (position,) = consumer.position([tp])
            raise LogError(f"loading {tp.topic}[{tp.partition}] did not reach offset {end} in time "
                           f"(at {position.offset})")
        for message in messages:
            try:
                record = decode(message.key(), message.value())
            except RecordDecodeError as e:
                result.corrupt.append((message.offset(), str(e)))
                continue
            result.records += 1
            yield record


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


def read_range(consumer: Consumer, topic: str, partition: int, start: int, end: int, stall_s: float
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
                raise LogError(f"reading {topic}[{partition}] stalled at offset {position.offset} "
                               f"for {stall_s:g}s before its end offset {end}")
    finally:
        consumer.unassign()


class PartitionWriter:
    """Writes a partition's batches, each in one Kafka transaction (acks=all, idempotent).

    `transactional.id = <prefix>-<topic>-<partition>`: `open()` calls `init_transactions`, which
    fences any other producer of that id, i.e. the coordinator that owned the partition before."""

    def __init__(self, config: Mapping[str, str], topic: str, partition: int, prefix: str = "worker-coordinator",
                 timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.partition = partition
        self.timeout_s = timeout_s
        self.transactional_id = f"{prefix}-{topic}-{partition}"
        # message.max.bytes: the batches of a large group's assignment records (the topic takes as much).
        self._producer = Producer({"message.max.bytes": MAX_MESSAGE_BYTES, **config,
                                   "transactional.id": self.transactional_id, "enable.idempotence": True,
                                   "acks": "all", "linger.ms": 0, "allow.auto.create.topics": False})

    def open(self) -> None:
        try:
            self._producer.init_transactions(self.timeout_s)
        except KafkaException as e:
            raise LogError(f"cannot start the transactions of {self.transactional_id}: {e}") from None

    def write(self, records: Iterable[Record]) -> None:
        """Make `records` durable as one transaction; raises LogError if they may not be."""
        try:
            self._producer.begin_transaction()
            for record in records:
                key, value = encode(record)
                self._producer.produce(self.topic, key=key, value=value, partition=self.partition)
            self._producer.commit_transaction(self.timeout_s)
        except (KafkaException, BufferError) as e:  # BufferError: librdkafka's queue is full
            try:
                self._producer.abort_transaction(self.timeout_s)
            except KafkaException:
                pass  # fenced or gone: the partition is dropped and loaded again either way
            raise LogError(f"writing to {self.topic}[{self.partition}]: {e}", fenced=_fenced(e)) from None

    def close(self) -> None:
        """Flush and let go of the producer (librdkafka's threads end when it is freed)."""
        if self._producer is not None:
            self._producer.flush(self.timeout_s)
            self._producer = None
