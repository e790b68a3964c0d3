"""A topic in memory, whose partitions' logs the runtime can be handed instead of Kafka's
(`PartitionRuntime(log=topic.log)`, `CoordinatorServer(log=topic.log)`): the runtime's batching,
fencing and reloading run without a broker, as the core runs without one under `driver.Driver`
(tests/test_runtime_memory.py).

It keeps what the runtime relies on Kafka for, and nothing more:

- a partition is a list of committed records, encoded at the format level they were written at
  and decoded when loaded, as from Kafka (a record that does not decode is skipped and reported, a
  format level this release does not read refuses the partition: `log.checked_record`);
- a write is one transaction: all of its records become visible to loads, or none;
- each `open` of a partition takes the next producer epoch, as `init_transactions` does, and a
  handle whose epoch is no longer the partition's fails its writes `fenced`;
- failures are injected on the topic, for whatever handle the runtime opens next: the next write
  fails (before or after it became durable, fenced or not), loads, opens or a standby's reads
  (`tail`) fail N times, a write waits at a gate until the test releases it.

Every call blocks as Kafka's would (the runtime makes them on the partition's own thread), so a
gate holds a write the way a slow commit does. Nothing here talks to Kafka.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from records import DEFAULT_FORMAT_LEVEL, Record, encode

from coordinator.core.state import CoordinatorState
from coordinator.service.log import LoadResult, checked_record
from coordinator.tools.partitions import LogError


class Gate:
    """Holds the write that reaches it until `release()`: `reached` is set once a write waits."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def wait_reached(self, timeout_s: float = 5.0) -> bool:
        return self.reached.wait(timeout_s)

    def _hold(self, timeout_s: float) -> None:
        self.reached.set()
        if not self._released.wait(timeout_s):
            raise LogError("a held write was never released")


@dataclass(slots=True)
class _WriteFailure:
    fenced: bool
    durable: bool  # the records were committed though the writer is told it failed (a commit timeout)


@dataclass(slots=True)
class _Partition:
    entries: list[tuple[bytes, bytes | None]] = field(default_factory=list)  # (key, value), committed
    transactions: list[int] = field(default_factory=list)  # the number of records of each commit
    epoch: int = 0  # the producer epoch of the latest open: older handles are fenced


class MemoryTopic:
    """The topic: its partitions' committed records, shared by every handle on them."""

    def __init__(self, name: str = "memory", hold_timeout_s: float = 30.0) -> None:
        self.name = name
        self.hold_timeout_s = hold_timeout_s  # a gate never released fails the write after this long
        self._lock = threading.Lock()
        self._partitions: dict[int, _Partition] = {}
        self._write_failures: list[_WriteFailure] = []
        self._gates: list[Gate] = []
        self._load_failures = 0
        self._open_failures = 0
        self._tail_failures = 0
        self.loads = 0  # attempts at loading, failed ones included
        self.opens = 0

    def log(self, partition: int) -> MemoryPartitionLog:
        """A new handle on `partition`, as `PartitionRuntime(log=...)` takes one."""
        return MemoryPartitionLog(self, partition)

    def tail(self, partition: int) -> MemoryPartitionTail:
        """A new reader of `partition` from its first record, as a `Standby` takes one."""
        return MemoryPartitionTail(self, partition)

    # --- what a test reads -------------------------------------------------------------------

    def records(self, partition: int = 0) -> list[tuple[bytes, bytes | None]]:
        """The partition's committed records, encoded, in order."""
        with self._lock:
            return list(self._part(partition).entries)

    def transactions(self, partition: int = 0) -> list[int]:
        """How many records each committed transaction of the partition carried, in order."""
        with self._lock:
            return list(self._part(partition).transactions)

    def load(self, partition: int = 0) -> CoordinatorState:
        """What a coordinator loading the partition now would hold (no failure injected applies)."""
        state = CoordinatorState()
        _replay(self.name, partition, self.records(partition), state)
        return state

    def append(self, partition: int, key: bytes, value: bytes | None) -> None:
        """Commit one encoded record as another producer would (what upgrade-format leaves, a corrupt record)."""
        with self._lock:
            part = self._part(partition)
            part.entries.append((key, value))
            part.transactions.append(1)

    # --- what a test injects -------------------------------------------------------------------

    def fail_next_write(self, *, fenced: bool = False, durable: bool = False) -> None:
        """The next write fails: with `fenced` as Kafka's would when another owner took over; with
        `durable`, after its records were committed (a commit whose outcome the writer never learnt)."""
        with self._lock:
            self._write_failures.append(_WriteFailure(fenced, durable))

    def fail_loads(self, times: int = 1) -> None:
        """The next `times` loads fail as when the brokers cannot be read (0: from now on, none)."""
        with self._lock:
            self._load_failures = times

    def fail_opens(self, times: int = 1) -> None:
        """The next `times` opens fail as when the transaction coordinator cannot be reached (0: none)."""
        with self._lock:
            self._open_failures = times

    def fail_tails(self, times: int = 1) -> None:
        """The next `times` reads of a standby's tail fail as when the brokers cannot be read (0: none)."""
        with self._lock:
            self._tail_failures = times

    def hold_next_write(self) -> Gate:
        """The next write waits at the returned gate, before its records are committed."""
        gate = Gate()
        with self._lock:
            self._gates.append(gate)
        return gate

    # --- what the handles do -------------------------------------------------------------------

    def _part(self, partition: int) -> _Partition:
        return self._partitions.setdefault(partition, _Partition())

    def _open(self, partition: int) -> int:
        with self._lock:
            self.opens += 1
            if self._open_failures:
                self._open_failures -= 1
                raise LogError(f"cannot start the transactions of {self.name}[{partition}] (injected)")
            part = self._part(partition)
            part.epoch += 1
            return part.epoch

    def _load(self, partition: int, state: CoordinatorState) -> LoadResult:
        with self._lock:
            self.loads += 1
            if self._load_failures:
                self._load_failures -= 1
                raise LogError(f"reading {self.name}[{partition}]: unavailable (injected)")
            entries = list(self._part(partition).entries)
        return _replay(self.name, partition, entries, state)

    def _read(self, partition: int, start: int) -> list[tuple[bytes, bytes | None]]:
        with self._lock:
            if self._tail_failures:
                self._tail_failures -= 1
                raise LogError(f"tailing {self.name}[{partition}]: unavailable (injected)")
            return self._part(partition).entries[start:]

    def _write(self, partition: int, epoch: int, entries: list[tuple[bytes, bytes | None]]) -> None:
        with self._lock:
            gate = self._gates.pop(0) if self._gates else None
        if gate is not None:
            gate._hold(self.hold_timeout_s)
        with self._lock:
            part = self._part(partition)
            where = f"writing to {self.name}[{partition}]"
            if part.epoch != epoch:
                raise LogError(f"{where}: fenced by a newer owner (epoch {part.epoch}, ours {epoch})", fenced=True)
            failure = self._write_failures.pop(0) if self._write_failures else None
            if failure is None or failure.durable:
                part.entries.extend(entries)
                part.transactions.append(len(entries))
            if failure is not None:
                raise LogError(f"{where}: failed (injected)", fenced=failure.fenced)


def _replay(
    topic: str, partition: int, entries: list[tuple[bytes, bytes | None]], state: CoordinatorState
) -> LoadResult:
    result = LoadResult(partition, end_offset=len(entries))
    state.replay_all(
        record
        for offset, (key, value) in enumerate(entries)
        if (record := checked_record(topic, partition, offset, key, value, result)) is not None
    )
    return result


class MemoryPartitionLog:
    """One owner's handle on a partition of a `MemoryTopic`: the `PartitionLog` the runtime uses."""

    def __init__(self, topic: MemoryTopic, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.epoch: int | None = None  # set by open
        self.closed = False

    def open(self) -> None:
        self.epoch = self.topic._open(self.partition)

    def load(self, state: CoordinatorState) -> LoadResult:
        return self.topic._load(self.partition, state)

    def write(
        self, records: Sequence[Record], level: int = DEFAULT_FORMAT_LEVEL, timestamps: Sequence[int] | None = None
    ) -> None:
        # `timestamps` are not kept: nothing reads a memory topic's times.
        if self.epoch is None or self.closed:
            raise LogError(f"writing to {self.topic.name}[{self.partition}]: the log is not open")
        entries = [encode(record, level=level) for record in records]  # as Kafka's: refused if it cannot be
        self.topic._write(self.partition, self.epoch, entries)

    def close(self) -> None:
        self.closed = True


class MemoryPartitionTail:
    """A reader of a `MemoryTopic`'s partition onward (the `PartitionTail` a `Standby` follows):
    every committed record from the first, as a read_committed consumer sees them."""

    def __init__(self, topic: MemoryTopic, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.next_offset = 0
        self.closed = False
        self._closing = threading.Event()

    def poll(self, state: CoordinatorState, result: LoadResult, timeout_s: float) -> int:
        read = self._replay(state, result)
        if not read:
            self._closing.wait(min(timeout_s, 0.01))  # as a consumer waits for records to arrive
        return read

    def catch_up(self, state: CoordinatorState, result: LoadResult, timeout_s: float) -> None:
        self._replay(state, result)

    def _replay(self, state: CoordinatorState, result: LoadResult) -> int:
        entries = self.topic._read(self.partition, self.next_offset)
        start, self.next_offset = self.next_offset, self.next_offset + len(entries)
        state.replay_all(
            record
            for offset, (key, value) in enumerate(entries, start)
            if (record := checked_record(self.topic.name, self.partition, offset, key, value, result)) is not None
        )
        return len(entries)

    def close(self) -> None:
        self.closed = True
        self._closing.set()
