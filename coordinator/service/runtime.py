"""The runtime of one owned partition: the I/O shell around the state machine (DESIGN §6).

Rules it keeps:

- one serial event loop per partition: requests and timer events of its groups run one at a
  time, so the state machine needs no locks;
- the partition's log is handed to it (`log`: partition -> a `PartitionLog`, Kafka's unless
  told otherwise): it opens (fences), loads, writes and closes the log through that alone;
- a handler's records are applied (through `replay`) at once and appended to the open batch; the
  response waits until that batch is committed in one transaction of the log. One transaction is in
  flight at a time; a batch closes after a short linger, on size, or when the commit before it
  ends, so under load many heartbeats share one commit. Each record's Kafka timestamp is the `now`
  its handler ran as of (below), not when its batch was produced: a history read back
  (`coordinator replay`, its re-runs) has the coordinator's times, however long a commit took;
- a response that writes nothing is sent at once unless earlier writes are still in flight: then
  it waits for them, because it may describe state they created (nothing unacknowledged is ever
  shown as done);
- any write failure drops the partition's memory and loads it again from the topic; meanwhile,
  and for the requests of the failed batch, the answer is NOT_COORDINATOR: the log is the truth;
- a load that Kafka cannot serve now (brokers down, too few in-sync replicas, the transaction
  coordinator moving) is tried again with backoff until it succeeds or the partition is closed,
  answering COORDINATOR_LOAD_IN_PROGRESS meanwhile: a partition never stops serving for good
  because Kafka was away for a while;
- time is the state machine's input, and the loop gives it as a virtual clock would: a request is
  handled as of when it reached the partition (queued), not when its turn came, and a timer as of
  its deadline, before any request that arrived after it (a timer is an event in the same loop;
  timers are keyed, arming a key replaces its timer). Once a request has arrived, how long the
  loop, the event loop or a commit kept it or a timer waiting changes no decision: what the
  coordinator did follows from when requests arrived, which its records' timestamps say
  (`coordinator replay simulate` re-runs a history on a virtual clock and decides the same);
- a request the state machine answers later (a classic JoinGroup or SyncGroup, `Parked`) waits
  under its key until a later result delivers its answer, which is sent like a response: once
  that result's records are durable. A reload or a close answers every parked request
  NOT_COORDINATOR, and the member asks again where the group is served now.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Any

from records import Record

from coordinator.core.group_coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.core.protocol import ErrorCode, Parked, ParkKey, Result, Timer, TimerKey
from coordinator.core.state import CoordinatorState
from coordinator.service.events import Observer, Told
from coordinator.service.log import LoadResult, PartitionLog, UnreadableFormatLevel, kafka_logs
from coordinator.service.metrics import Metrics
from coordinator.service.standby import Standby
from coordinator.tools.logs import event
from coordinator.tools.partitions import LogError

log = logging.getLogger(__name__)


# A partition that cannot be loaded now tries again after this long, doubling up to the maximum.
LOAD_RETRY_MIN_S = 0.5
LOAD_RETRY_MAX_S = 10.0


class Status(Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    FENCED = "fenced"  # another coordinator took the partition over: closed, waiting to be revoked
    CLOSED = "closed"
    # At a record format level this release does not read (a rollback after the level was raised):
    # never served, never loaded again; an instance of a newer release must take it over.
    REFUSED = "refused"


class NotServing(Exception):
    """The partition cannot serve now: NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class PartitionRuntime:
    """One partition of the topic, owned by this process."""

    def __init__(
        self,
        kafka_config: Mapping[str, str],
        topic: str,
        partition: int,
        config: CoordinatorConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        linger_ms: float = 2.0,
        max_batch_records: int = 1_000,
        transactional_prefix: str = "worker-coordinator",
        metrics: Metrics | None = None,
        kafka_timeout_s: float = 30.0,
        log: Callable[[int], PartitionLog] | None = None,
        load_retry_s: float = LOAD_RETRY_MIN_S,
    ) -> None:
        self.kafka_config = dict(kafka_config)
        self.topic = topic
        self.partition = partition
        self.config = config or CoordinatorConfig()
        self.clock = clock
        self.linger_s = linger_ms / 1000
        self.max_batch_records = max_batch_records
        self.transactional_prefix = transactional_prefix
        self.metrics = metrics
        self.kafka_timeout_s = kafka_timeout_s  # each fence, commit or abort waits at most this long
        # A new handle on the partition's log for each attempt at loading it (a failed one is closed).
        self.logs = log or kafka_logs(self.kafka_config, topic, transactional_prefix, kafka_timeout_s)
        self.load_retry_s = load_retry_s  # the first wait before loading again; it doubles
        self.status = Status.LOADING
        self.coordinator = GroupCoordinator(CoordinatorState(), self.config)
        self.last_load: LoadResult | None = None
        self.refused: str | None = None  # why the partition is REFUSED
        # (when it arrived, the event, its answer); an event of None: a timer's deadline has passed.
        self._queue: asyncio.Queue[tuple[int, Callable[[int], Any] | None, asyncio.Future | None]] = asyncio.Queue()
        self._timers: dict[TimerKey, int] = {}  # each armed timer's deadline
        self._deadlines: list[tuple[int, TimerKey]] = []  # a heap; entries a re-arming replaced are skipped
        self._wake: asyncio.TimerHandle | None = None  # at the earliest deadline
        self._wake_at: int | None = None
        self._last_ms = 0  # the time the last event or timer was handled as of
        self._batch: list[Record] = []
        self._stamps: list[int] = []  # each batched record's time: the `now` its handler ran as of
        self._told: list[Told] = []  # what the open batch's changes mean, told once it is committed
        self.observer = Observer(
            partition, None if metrics is None else functools.partial(metrics.observe_rebalance, partition)
        )
        self._waiting: list[tuple[asyncio.Future, Any]] = []
        self._parked: dict[ParkKey, asyncio.Future] = {}
        self._commits = 0  # batches handed to the log and not yet confirmed
        self._log: PartitionLog | None = None  # the opened and loaded log, which batches are written to
        self._loop_task: asyncio.Task | None = None
        self._flush_task: asyncio.Task | None = None
        self._loading: asyncio.Task | None = None  # loading again after a failed attempt
        # The partition's blocking log calls (fence, load, commit) run on a thread of its own: the
        # default executor has min(32, cores + 4) threads, 6 on two cores, so with more partitions
        # than that, commits that Kafka would take in parallel waited for a free thread.
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"partition-{partition}")

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self, standby: Standby | None = None) -> None:
        """Fence the previous owner, load the partition, arm its timers, then serve.

        When Kafka cannot do that now (brokers down, too few in-sync replicas, the transaction
        coordinator moving), the partition goes on trying in the background, with backoff, and
        answers COORDINATOR_LOAD_IN_PROGRESS meanwhile, until it loads or is closed. It never gives
        up: its owner holds it, so nobody else would ever serve it.

        With `standby` (this instance's shadow copy of the partition, `coordinator.service.standby`),
        the first attempt promotes it instead of loading: after fencing, only the tail it has not
        seen is read. Any later attempt loads in full. The runtime closes the standby either way."""
        self.status = Status.LOADING
        try:
            await self._load(standby)
        except LogError as e:
            if self.status is Status.LOADING:
                self._loading = asyncio.create_task(self._keep_loading(e), name=f"loading-{self.partition}")
        finally:
            if standby is not None:
                await asyncio.to_thread(standby.close)

    async def _keep_loading(self, error: LogError) -> None:
        delay = self.load_retry_s
        while self.status is Status.LOADING:
            log.warning(
                "%s[%d] cannot be loaded now (%s); trying again in %.1f s", self.topic, self.partition, error, delay
            )
            await asyncio.sleep(delay)
            if self.status is not Status.LOADING:
                return
            try:
                await self._load()
                return
            except LogError as e:
                error = e
                delay = min(delay * 2, LOAD_RETRY_MAX_S)
            except Exception:  # not Kafka being unavailable (a configuration the client refuses, a bug)
                log.exception("%s[%d] cannot be loaded", self.topic, self.partition)
                self.status = Status.FAILED
                return

    async def _load(self, standby: Standby | None = None) -> None:
        """One attempt at what `start` does; LogError when Kafka cannot do it now."""
        self.coordinator = GroupCoordinator(CoordinatorState(), self.config)
        partition_log = self.logs(self.partition)
        promoted = None
        if standby is not None:
            standby.stop_soon()
        try:
            # Fence first (init_transactions): once it returns, the old owner can no longer commit,
            # so what we read next is everything it will ever have written.
            await self._blocking(partition_log.open)
            if self.status is Status.LOADING:  # else closed meanwhile, and its thread is gone
                promoted = None if standby is None else await self._blocking(standby.promote)
                if promoted is not None:  # the shadow state and the tail read after fencing
                    self.coordinator = GroupCoordinator(standby.state, self.config)
                    self.last_load = promoted
                else:
                    self.last_load = await self._blocking(partition_log.load, self.coordinator.state)
        except UnreadableFormatLevel as e:
            await asyncio.to_thread(partition_log.close)
            self.coordinator = GroupCoordinator(CoordinatorState(), self.config)  # nothing half-read is kept
            self.refused = str(e)
            self.status = Status.REFUSED
            event(
                log, "partition-refused", "%s", e, level=logging.ERROR, partition=self.partition, format_level=e.level
            )
            return
        except BaseException:
            await asyncio.to_thread(partition_log.close)  # a failed attempt's producer must not linger
            raise
        if self.status is not Status.LOADING:  # closed while loading: this log must not be written
            await asyncio.to_thread(partition_log.close)
            return
        self._log = partition_log
        self._loaded(promoted_from=standby if promoted is not None else None)
        self._arm(self.coordinator.timers(self.now_ms()))
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._run(), name=f"partition-{self.partition}")
        self.status = Status.ACTIVE

    def _loaded(self, promoted_from: Standby | None) -> None:
        """Say what loading (or promoting a standby) found: skipped records, sizes, metrics."""
        for corrupt in self.last_load.corrupt:
            event(
                log,
                "record-skipped",
                "%s[%d] offset %d skipped: %s",
                self.topic,
                self.partition,
                *corrupt,
                level=logging.ERROR,
                partition=self.partition,
                offset=corrupt[0],
            )
        state = self.coordinator.state
        how = "loaded" if promoted_from is None else "promoted from its standby, whose tail held"
        event(
            log,
            "partition-loaded",
            "%s[%d] %s: %d records in %.3f s",
            self.topic,
            self.partition,
            how,
            self.last_load.records,
            self.last_load.seconds,
            partition=self.partition,
            records=self.last_load.records,
            seconds=round(self.last_load.seconds, 6),
            groups=len(state.groups),
            members=sum(len(g.members) for g in state.groups.values()),
            standby_records=None if promoted_from is None else promoted_from.result.records,
        )
        self.observer.loaded(state, self.now_ms())
        if self.metrics is not None:
            self.metrics.observe_load(self.partition, self.last_load.seconds, self.last_load.records)

    async def close(self, status: Status = Status.CLOSED) -> None:
        """Stop serving (CLOSED: revoked or shutting down; FENCED: taken over by another owner)."""
        self.status = status
        if self._loading is not None:
            self._loading.cancel()
            self._loading = None
        self._disarm_all()
        if self._loop_task is not None:
            self._loop_task.cancel()
            self._loop_task = None
        self._fail_waiting(ErrorCode.NOT_COORDINATOR, "the coordinator is shutting down")
        if self._log is not None:
            partition_log, self._log = self._log, None
            await self._blocking(partition_log.close)
        self._io.shutdown(wait=False)

    def _blocking(self, function: Callable[..., Any], *args: Any) -> asyncio.Future:
        return asyncio.get_running_loop().run_in_executor(self._io, functools.partial(function, *args))

    # --- requests ------------------------------------------------------------------------------

    async def call(self, operation: Callable[[GroupCoordinator, int], Result]) -> Any:
        """Run `operation` (a handler of the coordinator, with `now`) in the partition's loop, and
        return its response once what it wrote is durable."""
        self._check_serving()
        future = asyncio.get_running_loop().create_future()
        # The coordinator is passed when it runs: a reload replaces it.
        await self._queue.put((self.now_ms(), lambda now: operation(self.coordinator, now), future))
        return await future

    async def query(self, read: Callable[[GroupCoordinator], Any]) -> Any:
        """Read the state in the partition's loop, answered once the writes it may show are durable
        (a describe must never show a change that a failed commit could still take back)."""
        self._check_serving()
        future = asyncio.get_running_loop().create_future()
        await self._queue.put((self.now_ms(), lambda now: Result(read(self.coordinator)), future))
        return await future

    def _check_serving(self) -> None:
        if self.status is Status.LOADING:
            raise NotServing(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"partition {self.partition} is loading")
        if self.status is Status.REFUSED:
            raise NotServing(ErrorCode.COORDINATOR_NOT_AVAILABLE, self.refused or "")
        if self.status is not Status.ACTIVE:
            raise NotServing(ErrorCode.NOT_COORDINATOR, f"partition {self.partition} is not served here")

    async def _run(self) -> None:
        while True:
            arrived, event, future = await self._queue.get()
            if self.status is not Status.ACTIVE:
                if future is not None and not future.done():
                    future.set_exception(NotServing(ErrorCode.NOT_COORDINATOR, "the partition is reloading"))
                continue
            if event is None:  # a deadline passed
                self._fire_due(arrived, at_deadline_too=True)
                continue
            # The timers due before it arrived first (at a tie the request: a virtual clock's order,
            # coordinator/core/driver/scripted.py's), then the request as of when it arrived.
            self._fire_due(arrived, at_deadline_too=False)
            self._handle(event, future, max(arrived, self._last_ms))

    def _handle(self, event: Callable[[int], Any], future: asyncio.Future | None, now: int) -> None:
        """Run one event as of `now`: apply its records, arm its timers, batch its writes, answer."""
        self._last_ms = now
        try:
            result = event(now)
        except Exception as e:  # a bug in a handler must not take the partition down
            log.exception("handler failed")
            if future is not None and not future.done():
                future.set_exception(e)
            return
        seen = self.observer.before(self.coordinator.state, result.records) if result.records else None
        self.coordinator.apply(result)
        if seen is not None:
            self._told += self.observer.after(self.coordinator.state, seen, self.now_ms())
        self._arm(result.timers)
        answers = [
            (parked, response)
            for key, response in result.deliveries
            if (parked := self._parked.pop(key, None)) is not None
        ]
        if isinstance(result.response, Parked):
            if future is not None:
                self._parked[result.response.key] = future
        elif future is not None:
            answers.append((future, result.response))
        if result.records:
            self._batch.extend(result.records)
            self._stamps.extend([now] * len(result.records))
            self._waiting.extend(answers)
            self._schedule_flush()
        elif answers:
            if self._batch or self._commits:
                self._waiting.extend(answers)  # they may describe what those writes changed
                self._schedule_flush()
            else:
                for answered, response in answers:
                    if not answered.done():
                        answered.set_result(response)

    # --- batches -------------------------------------------------------------------------------

    def _schedule_flush(self) -> None:
        if self._commits:
            return  # the commit in flight takes everything that gathered meanwhile when it ends
        if len(self._batch) >= self.max_batch_records:
            self._start_flush()
        elif self._flush_task is None:
            self._flush_task = asyncio.get_running_loop().call_later(self.linger_s, self._start_flush)

    def _start_flush(self) -> None:
        """Commit what gathered. One transaction at a time per partition: while one commits, the
        next batch grows, so under load a transaction carries many changes instead of one."""
        if self._flush_task is not None:
            self._flush_task.cancel()
            self._flush_task = None
        if self._commits or not (self._batch or self._waiting):
            return
        batch, self._batch = self._batch, []
        stamps, self._stamps = self._stamps, []
        waiting, self._waiting = self._waiting, []
        told, self._told = self._told, []
        self._commits += 1
        asyncio.create_task(self._commit(batch, stamps, waiting, told))

    async def _commit(
        self, batch: list[Record], stamps: list[int], waiting: list[tuple[asyncio.Future, Any]], told: list[Told]
    ) -> None:
        try:
            await self._write_batch(batch, stamps, waiting, told)
        finally:
            self._commits -= 1
        if self.status is Status.ACTIVE and (self._batch or self._waiting):
            self._start_flush()  # these waited a whole commit already: no linger

    async def _write_batch(
        self, batch: list[Record], stamps: list[int], waiting: list[tuple[asyncio.Future, Any]], told: list[Told]
    ) -> None:
        if self.status is not Status.ACTIVE or self._log is None:
            for future, _ in waiting:
                if not future.done():
                    future.set_exception(NotServing(ErrorCode.NOT_COORDINATOR, "the partition is reloading"))
            return
        try:
            if batch:
                started = time.perf_counter()
                await self._blocking(self._log.write, batch, self.coordinator.state.format_level, stamps)
                if self.metrics is not None:
                    self.metrics.observe_commit(self.partition, batch, time.perf_counter() - started)
        except Exception as failure:  # noqa: BLE001 - whatever failed, the batch is not known to be durable
            e = (
                failure
                if isinstance(failure, LogError)
                else LogError(f"writing to {self.topic}[{self.partition}] failed: {failure!r}")
            )
            if not isinstance(failure, LogError):
                log.exception("writing a batch failed")
            for future, _ in waiting:
                if not future.done():
                    future.set_exception(NotServing(ErrorCode.NOT_COORDINATOR, str(e)))
            if self.status in (Status.CLOSED, Status.FENCED):
                return  # revoked or shutting down while the batch was written: nothing to load again
            if e.fenced:
                # Another coordinator owns the partition now: loading it again would fence
                # that one in turn. Stop serving it.
                event(
                    log,
                    "partition-fenced",
                    "%s; partition %d was taken over, no longer serving it",
                    e,
                    self.partition,
                    level=logging.ERROR,
                    partition=self.partition,
                )
                await self.close(Status.FENCED)
                return
            event(
                log,
                "partition-reloading",
                "%s; dropping partition %d and loading it again",
                e,
                self.partition,
                level=logging.ERROR,
                partition=self.partition,
            )
            await self._reload()
            return
        self.observer.tell(told)
        for future, response in waiting:
            if not future.done():
                future.set_result(response)

    async def _reload(self) -> None:
        """The log is the truth: forget memory, fence, load again."""
        self.status = Status.LOADING
        self._disarm_all()
        self._fail_waiting(ErrorCode.NOT_COORDINATOR, "the partition is reloading")
        partition_log, self._log = self._log, None
        if partition_log is not None:
            await self._blocking(partition_log.close)
        try:
            await self.start()
        except Exception:  # not Kafka being unavailable, which start() keeps retrying
            log.exception("%s[%d] cannot be loaded again", self.topic, self.partition)
            self.status = Status.FAILED

    def _fail_waiting(self, code: ErrorCode, message: str) -> None:
        self._batch = []
        self._stamps = []
        self._told = []
        waiting, self._waiting = self._waiting, []
        parked, self._parked = self._parked, {}
        for future in [f for f, _ in waiting] + list(parked.values()):
            if not future.done():
                future.set_exception(NotServing(code, message))

    # --- timers --------------------------------------------------------------------------------

    def _arm(self, timers: list[Timer]) -> None:
        for timer in timers:
            if timer.deadline_ms is None:
                self._timers.pop(timer.key, None)
            else:
                self._timers[timer.key] = timer.deadline_ms
                heapq.heappush(self._deadlines, (timer.deadline_ms, timer.key))
        if len(self._deadlines) > 2 * len(self._timers) + 64:
            # Mostly replaced entries (every heartbeat re-arms its member's session): rebuilt from
            # the armed timers, so that the heap stays within twice their number.
            self._deadlines[:] = [(deadline, key) for key, deadline in self._timers.items()]  # in place:
            heapq.heapify(self._deadlines)  # `_fire_due` may be walking it
        self._schedule_wake()

    def _live(self, entry: tuple[int, TimerKey]) -> bool:
        return self._timers.get(entry[1]) == entry[0]

    def _fire_due(self, now: int, at_deadline_too: bool) -> None:
        """Every timer due before `now` (and at it, `at_deadline_too`), in the order of their
        deadlines (a virtual clock's: `Driver.advance`), each as of its deadline: however late the
        loop got to it, the state machine sees it fire on time. A timer's handler may arm another
        that is due already: it fires too."""
        heap = self._deadlines
        while heap and (heap[0][0] < now or (at_deadline_too and heap[0][0] == now)):
            entry = heapq.heappop(heap)
            if not self._live(entry):
                continue  # armed again (a heartbeat renewed the session) or disarmed since
            deadline, key = entry
            del self._timers[key]
            # The coordinator is read when it runs: a reload replaces it.
            self._handle(lambda at, key=key: self.coordinator.on_timer(key, at), None, max(deadline, self._last_ms))
        self._schedule_wake()

    def _schedule_wake(self) -> None:
        """One wake-up of the loop, at the earliest deadline armed."""
        heap = self._deadlines
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
        when = heap[0][0] if heap else None
        if when == self._wake_at:
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at = when
        self._wake = None
        if when is not None:
            delay = max(0.0, when / 1000 - self.clock())
            self._wake = asyncio.get_running_loop().call_later(delay, self._woken, when)

    def _woken(self, when: int) -> None:
        # The deadline is the event's time: the clock read here may be a millisecond short of it.
        self._wake = None
        self._queue.put_nowait((max(when, self.now_ms()), None, None))

    def _disarm_all(self) -> None:
        self._timers.clear()
        self._deadlines.clear()
        if self._wake is not None:
            self._wake.cancel()
        self._wake = self._wake_at = None
