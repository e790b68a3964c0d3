"""Hot standbys: shadow copies of partitions this instance does not own (issue 33 item 1).

In group ownership with `--standby-partitions N`, an instance follows N partitions it does not own
(`standby_partitions` says which), as Kafka Streams keeps `num.standby.replicas` of a task's state:
a `Standby` tails the partition read_committed and replays every committed record into a shadow
`CoordinatorState`. The shadow is never served, never written, and arms no timers: only the state
machine's `replay` touches it, as loading does.

When the consumer group moves the partition here, the runtime promotes the standby instead of
loading: it fences the previous owner first (the log's `open`: init_transactions), then reads only
the tail it has not seen, from the standby's next offset to the end offset after fencing
(`promote`), and serves. Fencing decides what counts: the old owner's writes committed before
init_transactions returned are in that tail; any after it fail `fenced` and were never
acknowledged. What the promoted state holds is therefore what a full load would have given.

A `PartitionTail` is one log's way of reading onward from an offset: `KafkaPartitionTail` here (one
read_committed consumer per standby, assigned and never in a group), `MemoryPartitionTail` in
`memory_log` for tests without a broker. A standby whose reading failed (Kafka away, a record
format level this release does not read) is not promoted: the runtime loads in full, which
retries and refuses as loading does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from records import Record

from coordinator.core.state import CoordinatorState
from coordinator.service.log import LoadResult, checked_record, rounds_to_end
from coordinator.tools.logs import event
from coordinator.tools.partitions import LogError, reader_config

log = logging.getLogger(__name__)

# How long one round of tailing waits for new records: also how long stopping a standby may take.
POLL_S = 0.1


class PartitionTail(Protocol):
    """Reading one partition onward, read_committed, from its first offset; each call blocks.

    - `poll(state, result, timeout_s)`: replay the committed records that arrived (waiting at most
      `timeout_s` for some) into `state`, noting them in `result`; the number of records read.
    - `catch_up(state, result, timeout_s)`: replay everything up to the partition's end offset now;
      called after fencing, so that end is all the previous owner will ever have written.
    - `next_offset`: the offset of the next record to read.
    - `close()`: let go of the partition."""

    next_offset: int

    def poll(self, state: CoordinatorState, result: LoadResult, timeout_s: float) -> int: ...

    def catch_up(self, state: CoordinatorState, result: LoadResult, timeout_s: float) -> None: ...

    def close(self) -> None: ...


def standby_partitions(owned: Collection[int], partitions: int, count: int) -> list[int]:
    """Which `count` partitions an instance owning `owned` (of `partitions`) keeps standbys of: the
    ones after each of its own in turn (p+1 of each, then p+2 of each, ...), so that the standbys
    of instances owning neighbouring ranges cover each other; an instance owning nothing takes them
    from partition 0. All the others when `count` >= what it does not own."""
    starts = sorted(set(owned)) or [-1]
    chosen: list[int] = []
    for step in range(1, partitions + 1):
        for start in starts:
            candidate = (start + step) % partitions
            if len(chosen) < count and candidate not in owned and candidate not in chosen:
                chosen.append(candidate)
    return sorted(chosen)


class Standby:
    """A shadow copy of one partition, kept current by a thread of its own until promoted or closed."""

    def __init__(self, partition: int, tail: PartitionTail, *, poll_s: float = POLL_S) -> None:
        self.partition = partition
        self.state = CoordinatorState()
        self.result = LoadResult(partition)  # what the shadow has read: records, the corrupt ones skipped
        self.failed: BaseException | None = None  # why tailing stopped, if it did: then it is not promoted
        self.caught_up = threading.Event()  # set once a round found nothing new (for tests and logs)
        self._tail = tail
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"standby-{partition}", daemon=True)

    def start(self) -> Standby:
        self._thread.start()
        return self

    @property
    def next_offset(self) -> int:
        return self._tail.next_offset

    @property
    def status(self) -> str:
        """As /health and coordinator_standby_status name it: catching-up, following or failed."""
        if self.failed is not None:
            return "failed"
        return "following" if self.caught_up.is_set() else "catching-up"

    def _follow(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._tail.poll(self.state, self.result, self._poll_s) and not self.caught_up.is_set():
                    self.caught_up.set()
                    event(
                        log,
                        "standby-caught-up",
                        "standby of partition %d caught up at offset %d (%d records)",
                        self.partition,
                        self._tail.next_offset,
                        self.result.records,
                        partition=self.partition,
                        offset=self._tail.next_offset,
                        records=self.result.records,
                    )
        except Exception as e:  # noqa: BLE001 - whatever stopped it, a promotion must load in full instead
            self.failed = e
            log.warning(
                "the standby of partition %d stopped: %s; taking it over will load it in full", self.partition, e
            )

    def stop_soon(self) -> None:
        """Let the tailing end its round now (it does not wait), so that `promote` finds it ended:
        called before fencing, the round ends while the fencing runs."""
        self._stop.set()

    def promote(self, timeout_s: float = 60.0) -> LoadResult | None:
        """Stop tailing and read the rest, up to the end offset now; call it after fencing. The
        result counts the tail's records only (the corrupt ones of the whole shadow are listed);
        None when the shadow is unusable (tailing failed), and the caller loads in full. LogError
        or UnreadableFormatLevel as loading raises them."""
        started = time.monotonic()
        self._stop_following()
        if self.failed is not None:
            return None
        result = LoadResult(self.partition, corrupt=self.result.corrupt)
        self._tail.catch_up(self.state, result, timeout_s)
        result.end_offset = self._tail.next_offset
        result.seconds = time.monotonic() - started
        return result

    def close(self) -> None:
        """Stop tailing and let go of the partition (blocks up to a poll's length)."""
        self._stop_following()
        self._tail.close()

    def _stop_following(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()


class KafkaPartitionTail:
    """A `PartitionTail` on a partition of a Kafka topic: one consumer, assigned (no group),
    read_committed, reading from the partition's first offset onward.

    The end offset is asked through a second consumer, connected at the first poll: the reading
    consumer's connection to the leader always carries a fetch the broker holds until data arrives
    (fetch.wait.max.ms, 500 ms), and a request sent behind it waits as long (measured: 0.39 s
    of a 0.53 s promotion)."""

    def __init__(self, config: Mapping[str, str], topic: str, partition: int) -> None:
        self.tp = TopicPartition(topic, partition)
        self.next_offset = 0
        settings = reader_config(config, f"worker-coordinator-standby-{topic}")
        self._consumer = Consumer(settings)
        self._consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        self._offsets = Consumer(settings)
        self._offsets_ready = False

    def poll(self, state: CoordinatorState, result: LoadResult, timeout_s: float) -> int:
        try:
            if not self._offsets_ready:  # connect it now, not when the partition is taken over
                self._offsets.get_watermark_offsets(self.tp, timeout=30)
                self._offsets_ready = True
            messages = self._consumer.consume(num_messages=10_000, timeout=timeout_s)
        except KafkaException as e:
            raise LogError(f"tailing {self.tp.topic}[{self.tp.partition}]: {e}") from None
        for message in messages:
            if message.error():
                raise LogError(f"tailing {self.tp.topic}[{self.tp.partition}]: {message.error().str()}")
        state.replay_all(self._records(messages, result))
        return len(messages)

    def catch_up(self, state: CoordinatorState, result: LoadResult, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        try:
            low, end = self._offsets.get_watermark_offsets(self.tp, timeout=timeout_s)
            (position,) = self._consumer.position([self.tp])
            # Nothing to read when the standby is at the end (then a consume would only sit out its
            # timeout: 30 ms of a takeover), or the partition is empty (no fetch moves the position).
            if end > low and position.offset < end:
                for messages in rounds_to_end(self._consumer, self.tp, end, deadline, "reading the tail of"):
                    state.replay_all(self._records(messages, result))
        except KafkaException as e:
            raise LogError(f"reading the tail of {self.tp.topic}[{self.tp.partition}]: {e}") from None
        self.next_offset = max(self.next_offset, end)

    def _records(self, messages: list, result: LoadResult) -> list[Record]:
        records = []
        for message in messages:
            offset = message.offset()
            record = checked_record(self.tp.topic, self.tp.partition, offset, message.key(), message.value(), result)
            if record is not None:
                records.append(record)
            self.next_offset = offset + 1
        return records

    def close(self) -> None:
        self._consumer.close()
        self._offsets.close()


def kafka_tails(config: Mapping[str, str], topic: str) -> Callable[[int], KafkaPartitionTail]:
    """The tails of `topic`'s partitions, as `CoordinatorServer` takes them: partition -> a new one."""
    config = dict(config)
    return lambda partition: KafkaPartitionTail(config, topic, partition)
