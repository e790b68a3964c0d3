"""What the SDK's workers share, whichever protocol they speak (`Worker`, `ClassicGroupWorker`):
the listener and the order of its callbacks (seed 001), the rebalance metrics, and how a worker
that gives up says why."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from records import ConnectorsAndTasks

from coordinator.core.items import describe, items_of
from coordinator.core.worker.member import Action, Assign, GiveUp, Lose, Revoke

log = logging.getLogger(__name__)

_HOUR_S = 3600.0
_KEPT_ERRORS = 100


class RebalanceListener:
    """Override what you need; each may be a plain or an async method."""

    def on_revoked(self, items: ConnectorsAndTasks) -> Awaitable[None] | None:
        """Stop these: another worker gets them once this returns and is acknowledged."""

    def on_assigned(self, items: ConnectorsAndTasks) -> Awaitable[None] | None:
        """Start these."""

    def on_lost(self, items: ConnectorsAndTasks) -> Awaitable[None] | None:
        """These may already run elsewhere (this worker was fenced, forgotten or cut off): stop them
        at once. By default the same as `on_revoked` (seed 001: a listener that only knows revoked
        and assigned still stops lost work)."""
        return self.on_revoked(items)


class WorkerError(Exception):
    """The coordinator refused this worker for good (bad request, not authorized, no common assignor)."""


class ListenerError(Exception):
    """A listener callback raised; the other callbacks of the same step ran first (seed 001)."""


@dataclass
class _Latency:
    """A callback's latency without keeping every sample: count, sum and max."""

    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0

    def add(self, ms: float) -> None:
        self.count += 1
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)


@dataclass
class RebalanceMetrics:
    """Seed 001's rebalance metrics, from this member's point of view. Times in milliseconds."""

    clock: Callable[[], float] = time.monotonic
    rebalance_total: int = 0
    rebalance_latency_total: float = 0.0
    rebalance_latency_max: float = 0.0
    failed_rebalance_total: int = 0
    callback_latency: dict[str, _Latency] = field(
        default_factory=lambda: {k: _Latency() for k in ("revoked", "assigned", "lost")}
    )
    _started: float | None = None
    _completed: deque = field(default_factory=deque)
    _failed: deque = field(default_factory=deque)
    _last: float | None = None

    @property
    def rebalancing(self) -> bool:
        """A change was seen and no quiet heartbeat has followed yet."""
        return self._started is not None

    def changed(self) -> None:
        if self._started is None:
            self._started = self.clock()

    def quiet(self) -> None:
        if self._started is not None:
            now = self.clock()
            latency = (now - self._started) * 1000
            self.rebalance_total += 1
            self.rebalance_latency_total += latency
            self.rebalance_latency_max = max(self.rebalance_latency_max, latency)
            self._completed.append(now)
            self._last, self._started = now, None

    def failed(self) -> None:
        now = self.clock()
        self.failed_rebalance_total += 1
        self._failed.append(now)
        self._started = None

    def callback(self, kind: str, seconds: float) -> None:
        self.callback_latency[kind].add(seconds * 1000)

    def _per_hour(self, events: deque) -> int:
        horizon = self.clock() - _HOUR_S
        while events and events[0] < horizon:
            events.popleft()
        return len(events)

    def snapshot(self) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {
            "rebalance-total": self.rebalance_total,
            "rebalance-rate-per-hour": self._per_hour(self._completed),
            "rebalance-latency-avg": (
                self.rebalance_latency_total / self.rebalance_total if self.rebalance_total else 0.0
            ),
            "rebalance-latency-max": self.rebalance_latency_max,
            "rebalance-latency-total": self.rebalance_latency_total,
            "failed-rebalance-total": self.failed_rebalance_total,
            "failed-rebalance-rate-per-hour": self._per_hour(self._failed),
            "last-rebalance-seconds-ago": None if self._last is None else self.clock() - self._last,
        }
        for kind, latency in self.callback_latency.items():
            out[f"connectors-{kind}-latency-avg"] = latency.total_ms / latency.count if latency.count else 0.0
            out[f"connectors-{kind}-latency-max"] = latency.max_ms
        return out


class WorkerShell:
    """What the SDK's workers share, whichever protocol they speak: the listener and the order of
    its callbacks (seed 001), the rebalance metrics, and the worker's failure when it gives up."""

    def __init__(self, listener: RebalanceListener | None, clock: Callable[[], float]) -> None:
        self.listener = listener or RebalanceListener()
        self.metrics = RebalanceMetrics()
        self.listener_errors: deque[BaseException] = deque(maxlen=_KEPT_ERRORS)
        self.failure: BaseException | None = None  # why the worker stopped on its own
        self._clock = clock
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._stopping = False

    def _now(self) -> int:
        return int(self._clock() * 1000)

    async def _carry_out(self, actions: list[Action]) -> None:
        """The actions in order; a listener's error does not stop the others, and the first is
        raised at the end (seed 001)."""
        first: BaseException | None = None
        for action in actions:
            try:
                await self._act(action)
            except ListenerError as e:
                first = first or e
        if first is not None:
            raise first

    async def _act(self, action: Action) -> None:
        if isinstance(action, Revoke):
            await self._notify("revoked", action.items)
        elif isinstance(action, Assign):
            await self._notify("assigned", action.items)
        elif isinstance(action, Lose):
            log.warning("%s: losing %s: %s", self.member_id, describe(items_of(action.items)), action.reason)
            self.metrics.failed()
            await self._notify("lost", action.items)
        elif isinstance(action, GiveUp):
            log.error("%s: %s; the worker stops", self.member_id, action.reason)
            self.failure = self.failure or WorkerError(action.reason)

    async def _notify(self, kind: str, items: ConnectorsAndTasks) -> None:
        if not (items.connectors or items.tasks):
            return
        started = time.perf_counter()
        try:
            result = getattr(self.listener, f"on_{kind}")(items)
            if inspect.isawaitable(result):
                await result
        except Exception as e:  # a notification: the view changes anyway (seed 001)
            log.exception("%s: on_%s(%s) failed", self.member_id, kind, describe(items_of(items)))
            self.listener_errors.append(e)
            raise ListenerError(f"on_{kind} failed: {e!r}") from e
        finally:
            self.metrics.callback(kind, time.perf_counter() - started)

    async def _stop_task(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
