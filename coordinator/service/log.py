"""The coordinator's log: loading a partition, writing batches (which partition a group lives in,
and reading a partition to its end, are `coordinator.tools.partitions`).

The runtime sees a partition's log only through `PartitionLog` (open: fence the previous owner;
load; write a batch; close), as Kafka's `CoordinatorRuntime` sees it only through its
`PartitionWriter` and `CoordinatorLoader`. `KafkaPartitionLog` is the one it serves with;
`coordinator.service.memory_log` holds one in memory, for tests of the runtime without a broker.

DESIGN §6. The topic is the truth: a partition's state is whatever replaying it gives, so loading
is `read_committed` from the first offset to the end offset at the time of loading, every record
through `CoordinatorState.replay_all`, and writing is one Kafka transaction per batch from a
producer whose `transactional.id` names the partition, so that the coordinator that takes a
partition over fences the one it replaces (`init_transactions`).

This is the only module of the coordinator that talks to Kafka for the state; it knows nothing of
the protocol beyond records.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from records import (
    DEFAULT_FORMAT_LEVEL,
    FORMAT_LEVELS,
    MAX_FORMAT_LEVEL,
    FormatLevelKey,
    Record,
    RecordDecodeError,
    decode,
    encode,
)

from coordinator.core.state import CoordinatorState
from coordinator.tools.partitions import LogError, batches_to_end, reader_config
from coordinator.tools.topic import MAX_MESSAGE_BYTES

_FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def _fenced(e: KafkaException) -> bool:
    error = e.args[0] if e.args else None
    return isinstance(error, KafkaError) and (
        error.code() in _FENCED or error.fatal() and "fenc" in error.str().lower()
    )


class UnreadableFormatLevel(Exception):
    """The partition's records are at a format level newer than this release reads (a rollback
    after `coordinator topic upgrade-format`): it is refused, never misread. Not a LogError: trying
    again cannot help, only an instance of a release that reads the level can serve it."""

    def __init__(self, topic: str, partition: int, level: int, offset: int) -> None:
        self.partition = partition
        self.level = level
        super().__init__(
            f"{topic}[{partition}] is at record format level {level} (offset {offset}); this release reads "
            f"levels {DEFAULT_FORMAT_LEVEL}-{MAX_FORMAT_LEVEL}: serve it from an instance of a newer release"
        )


class PartitionLog(Protocol):
    """One owner's handle on a partition of the topic, as the runtime uses it; each call blocks
    (the runtime makes them on the partition's own thread) and a handle is opened once: after a
    failure the runtime closes it and takes a new one.

    - `open()`: fence the partition's previous owner, whose writes fail `fenced` from then on, so
      that what `load` reads next is everything it will ever have written; LogError if it cannot now.
    - `load(state)`: replay the partition's committed records into `state`; LogError when the log
      cannot be read now (try again later), UnreadableFormatLevel for a record format level this
      release does not read (trying again cannot help).
    - `write(records, level, timestamps)`: make `records` durable as one transaction, each
      with its timestamp (ms; the time the coordinator decided it, None: now), or raise LogError
      (`fenced`: another owner opened the partition since; this one must stop serving it).
    - `close()`: let go of the log; a closed handle does not write again."""

    def open(self) -> None: ...

    def load(self, state: CoordinatorState) -> LoadResult: ...

    def write(self, records: Sequence[Record], level: int, timestamps: Sequence[int] | None = None) -> None: ...

    def close(self) -> None: ...


@dataclass(slots=True)
class LoadResult:
    """What loading a partition found: how much, how long, and the records that did not decode."""

    partition: int
    records: int = 0
    end_offset: int = 0
    seconds: float = 0.0
    corrupt: list[tuple[int, str]] = field(default_factory=list)  # (offset, why), skipped


def load_partition(
    config: Mapping[str, str], topic: str, partition: int, state: CoordinatorState, timeout_s: float = 60.0
) -> LoadResult:
    """Replay partition `partition` of `topic` into `state`, read_committed, up to its end offset now.

    A record that does not decode is reported (offset and reason) and skipped: one corrupt record
    must not keep every other group of the partition from being served. A record format level this
    release does not read raises UnreadableFormatLevel: then every record may be one it would misread.

    A plain CoordinatorState is loaded through compaction's view (`LatestPerKey`): the same slots
    as replaying every record, decoding only the values that survive. A subclass of it (one that
    watches what `replay_all` is given) gets every record in topic order, as before that view."""
    started = time.monotonic()
    result = LoadResult(partition)
    compacted = state.__class__ is CoordinatorState
    consumer = Consumer(reader_config(config, f"worker-coordinator-load-{topic}", **_LOAD_DEFAULTS))
    try:
        tp = TopicPartition(topic, partition)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
        except KafkaException as e:
            raise LogError(f"cannot read the offsets of {topic}[{partition}]: {e}") from None
        result.end_offset = high
        if high > low:  # an empty partition is loaded; no fetch would ever move the position
            consumer.assign([TopicPartition(topic, partition, low)])
            if not compacted:
                state.replay_all(_records(consumer, tp, high, started + timeout_s, result))
            elif not _load_latest(consumer, tp, high, started + timeout_s, result, state):
                # Something in compaction's view is corrupt: read it again record by record, which
                # reports every corrupt record and keeps each slot's last value that decodes.
                result = LoadResult(partition, end_offset=high)
                consumer.assign([TopicPartition(topic, partition, low)])
                state.replay_all(_records(consumer, tp, high, started + timeout_s, result))
    except KafkaException as e:  # Kafka cannot be read now: the caller tries again later
        raise LogError(f"reading {topic}[{partition}]: {e}") from None
    finally:
        consumer.close()
    result.seconds = time.monotonic() - started
    return result


# A load reads one partition from start to end as fast as it can take it. librdkafka fetches again
# only when fewer than queued.min.messages (100,000) wait in its queue: with records this small,
# Python drained the queue and waited for the next fetch. At 1,000,000 the next one is on its way
# meanwhile (read alone, 500k records: 1.67 s -> 1.06 s, the same CPU); its byte bound
# (queued.max.messages.kbytes, 64 MiB) still caps the memory.
_LOAD_DEFAULTS = {"queued.min.messages": 1_000_000}


def rounds_to_end(
    consumer: Consumer, tp: TopicPartition, end: int, deadline: float, doing: str = "loading"
) -> Iterable[list[Message]]:
    """`batches_to_end`, bounded by `deadline` (time.monotonic()): LogError, saying what was being
    done (`doing` the partition) and where it stood, when another round is needed after it. Shared
    by a load and a standby's promotion, which reads the tail after fencing."""
    for round_, messages in enumerate(batches_to_end(consumer, tp, end)):
        if round_ and time.monotonic() > deadline:  # another round is needed, and the time is up
            (position,) = consumer.position([tp])
            raise LogError(
                f"{doing} {tp.topic}[{tp.partition}] did not reach offset {end} in time (at {position.offset})"
            )
        yield messages


def _records(consumer: Consumer, tp: TopicPartition, end: int, deadline: float, result: LoadResult) -> Iterable[Record]:
    for messages in rounds_to_end(consumer, tp, end, deadline):
        for message in messages:
            record = checked_record(tp.topic, tp.partition, message.offset(), message.key(), message.value(), result)
            if record is not None:
                yield record


def _load_latest(
    consumer: Consumer, tp: TopicPartition, end: int, deadline: float, result: LoadResult, state: CoordinatorState
) -> bool:
    """Load through compaction's view; False (and `state` untouched) if any of it is corrupt."""
    latest = LatestPerKey(tp.topic, tp.partition)
    # As in replay_all: the messages and records made here hold no cycles, and a collection would
    # only walk the growing set of them again and again.
    paused = gc.isenabled()
    gc.disable()
    try:
        for messages in rounds_to_end(consumer, tp, end, deadline):
            latest.add(messages)
        fresh = not (state.groups or state.classic_groups or state.format_level_record)
        records = latest.records(tombstones=not fresh)
    finally:
        if paused:
            gc.enable()
    if records is None:
        return False
    state.replay_all(records)
    result.records = latest.count
    return True


class LatestPerKey:
    """Compaction's view of a partition being read: the last record of each key, in the order of
    their offsets, each value decoded once the log has been read to its end.

    Why it equals replaying every record: replay puts a record's value into its key's slot (or
    empties it for a tombstone) and nothing else in the state depends on a value a later record of
    the same key replaced (DESIGN §3: `replay(compact(log))` equals `replay(log)`); volatile state is
    not in the log. One cache depends on the order across keys: which member a static instance id
    points to, the last to claim it. Replaying the keys in the order of their last records leaves it
    as a compaction of the log would, and as replaying every record does unless a superseded record
    claimed it (two live members claiming one id at once: the protocol replaces the old member). A last record that is a tombstone is
    replayed only into a state that already holds something: into an empty one it is a no-op.

    Two things a superseded record can do are still done:
    - a format level (type 10) this release does not read raises UnreadableFormatLevel even if a
      later record replaced it, as replaying every record does; each of its values is checked;
    - a corrupt record is reported. A corrupt key, or a corrupt last value, makes `records()`
      return None: the caller then replays every record, which reports each corrupt record and
      keeps in the slot the last value that decodes. What is not decoded is not reported: a corrupt
      value that a later record of its key replaces, and a corrupt key whose last record is a
      tombstone loaded into an empty state. Neither changes the state, and compaction drops both."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.count = 0
        self._last: dict[bytes, Message] = {}  # key bytes -> its last message so far

    def add(self, messages: Sequence[Message]) -> None:
        """The next messages of the partition, in offset order."""
        self.count += len(messages)
        keys = list(map(Message.key, messages))
        if _FORMAT_LEVEL_KEY in keys:  # rare: a level raised; check each, superseded or not
            for key, message in zip(keys, messages, strict=True):
                if key == _FORMAT_LEVEL_KEY:
                    checked_record(
                        self.topic, self.partition, message.offset(), key, message.value(), LoadResult(self.partition)
                    )
        # dict.update keeps the last message of each key, in C: with the read, most of the load's cost.
        self._last.update(zip(keys, messages))

    def records(self, tombstones: bool = True) -> list[Record] | None:
        """The last record of each key in offset order, decoded (without the tombstones if not
        `tombstones`); None if one does not decode."""
        records = []
        append = records.append
        try:
            for message in sorted(self._last.values(), key=Message.offset):
                value = message.value()
                if value is not None or tombstones:
                    append(decode(message.key(), value))
        except RecordDecodeError:
            return None
        return records


_FORMAT_LEVEL_KEY = encode(Record(FormatLevelKey(FormatLevelKey.PARTITION), None))[0]


def checked_record(
    topic: str, partition: int, offset: int, key: bytes, value: bytes | None, result: LoadResult
) -> Record | None:
    """The record at `offset` as loading takes it, for every `PartitionLog`: None (noted in
    `result.corrupt`) if it does not decode; UnreadableFormatLevel if it raises the partition to a
    level this release does not read; else the record, counted."""
    try:
        record = decode(key, value)
    except RecordDecodeError as e:
        result.corrupt.append((offset, str(e)))
        return None
    if record.key.__class__ is FormatLevelKey and record.value is not None:
        if record.value.level not in FORMAT_LEVELS:
            raise UnreadableFormatLevel(topic, partition, record.value.level, offset)
    result.records += 1
    return record


class PartitionWriter:
    """Writes a partition's batches, each in one Kafka transaction (acks=all, idempotent).

    `transactional.id = <prefix>-<topic>-<partition>`: `open()` calls `init_transactions`, which
    fences any other producer of that id, i.e. the coordinator that owned the partition before."""

    def __init__(
        self,
        config: Mapping[str, str],
        topic: str,
        partition: int,
        prefix: str = "worker-coordinator",
        timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.timeout_s = timeout_s
        self.transactional_id = f"{prefix}-{topic}-{partition}"
        # message.max.bytes: the batches of a large group's assignment records (the topic takes as much).
        self._producer = Producer(
            {
                "message.max.bytes": MAX_MESSAGE_BYTES,
                **config,
                "transactional.id": self.transactional_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 0,
                "allow.auto.create.topics": False,
            }
        )

    def open(self) -> None:
        try:
            self._producer.init_transactions(self.timeout_s)
        except KafkaException as e:
            raise LogError(f"cannot start the transactions of {self.transactional_id}: {e}") from None

    def write(
        self, records: Iterable[Record], level: int = DEFAULT_FORMAT_LEVEL, timestamps: Iterable[int] | None = None
    ) -> None:
        """Make `records` durable as one transaction, each value at the version record format
        `level` allows for its type, each with its timestamp (CreateTime, ms; without
        `timestamps`, librdkafka's clock when produced); raises LogError if they may not be."""
        records = list(records)
        stamps = [0] * len(records) if timestamps is None else list(timestamps)  # 0: librdkafka's now
        if len(stamps) != len(records):
            raise ValueError(f"{len(records)} records with {len(stamps)} timestamps")
        try:
            self._producer.begin_transaction()
            for record, stamp in zip(records, stamps):
                key, value = encode(record, level=level)
                self._producer.produce(self.topic, key=key, value=value, partition=self.partition, timestamp=stamp)
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


class KafkaPartitionLog:
    """The `PartitionLog` of a partition of a Kafka topic: `PartitionWriter` writes and fences
    (its `transactional.id` names the partition), `load_partition` loads."""

    def __init__(
        self,
        config: Mapping[str, str],
        topic: str,
        partition: int,
        prefix: str = "worker-coordinator",
        timeout_s: float = 30.0,
    ) -> None:
        self.config = config
        self.topic = topic
        self.partition = partition
        self.writer = PartitionWriter(config, topic, partition, prefix, timeout_s=timeout_s)

    def open(self) -> None:
        self.writer.open()

    def load(self, state: CoordinatorState) -> LoadResult:
        return load_partition(self.config, self.topic, self.partition, state)

    def write(
        self, records: Sequence[Record], level: int = DEFAULT_FORMAT_LEVEL, timestamps: Sequence[int] | None = None
    ) -> None:
        self.writer.write(records, level, timestamps)

    def close(self) -> None:
        self.writer.close()


def kafka_logs(
    config: Mapping[str, str], topic: str, prefix: str = "worker-coordinator", timeout_s: float = 30.0
) -> Callable[[int], KafkaPartitionLog]:
    """The logs of `topic`'s partitions, as `PartitionRuntime` takes them: partition -> a new handle."""
    config = dict(config)
    return lambda partition: KafkaPartitionLog(config, topic, partition, prefix, timeout_s)
