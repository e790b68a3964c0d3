"""The worker SDK: a member of a connect group, over the HTTP API (DESIGN §8, seed 000, seed 001).

A `Worker` joins its group, heartbeats at the interval the coordinator gives, and reconciles what
it runs with what the coordinator says, in the protocol's order:

- items taken away: `on_revoked`, then an acknowledging heartbeat at once (the coordinator gives
  them to others only after that acknowledgement);
- items given: `on_assigned`. A response never does both (revoke before assign); if one ever
  did, revocation would still run first;
- FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: `on_lost` for everything, then rejoin at epoch 0 with
  the same member id;
- COMPUTE_ASSIGNMENT: PrepareAssignment, the configured assignor, InstallAssignment;
- NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, connection errors: backoff and rediscovery, in
  `coordinator.sdk.client`;
- `stop()` leaves the group (epoch -1, or -2 for a static member, whose work then waits for it).

Listener semantics are seed 001's: a callback is a notification. An exception in one is logged
and counted, the other callbacks still run, and the member's view changes as the coordinator said:
the coordinator's view is the truth, and a worker that refused a change would diverge from it.

Rebalance metrics are seed 001's (`RebalanceMetrics`): a rebalance, for a member, starts with the
first response that changes its epoch or assignment and ends at the first response after that
which changes nothing (the member has reached what the coordinator wants, as far as it can see).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from records import ConnectorsAndTasks

from coordinator.api import wire
from coordinator.core.assignors import ASSIGNORS, assignor
from coordinator.core.items import EMPTY, Item, connectors_and_tasks, describe, items_of
from coordinator.core.protocol import ErrorCode
from coordinator.sdk.client import ApiError, CoordinatorClient, Unavailable

log = logging.getLogger(__name__)

HEARTBEAT = "/v1/connect-group/heartbeat"
_HOUR_S = 3600.0
_UNRELEASED_RETRY_S = 0.2


class RebalanceListener:
    """Override what you need; each may be a plain or an async method."""

    def on_revoked(self, items: ConnectorsAndTasks) -> Awaitable[None] | None:
        """Stop these: another worker gets them once this returns and is acknowledged."""

    def on_assigned(self, items: ConnectorsAndTasks) -> Awaitable[None] | None:
        """Start these."""

    def on_lost(self, items: ConnectorsAndTasks) -> Awaitable[None] | None:
        """These may already run elsewhere (this worker was fenced or forgotten): stop at once."""


class WorkerError(Exception):
    """The coordinator refused this worker for good (bad request, not authorized, no common assignor)."""


@dataclass
class RebalanceMetrics:
    """Seed 001's rebalance metrics, from this member's point of view. Times in milliseconds."""

    clock: Callable[[], float] = time.monotonic
    rebalance_total: int = 0
    rebalance_latency_total: float = 0.0
    rebalance_latency_max: float = 0.0
    failed_rebalance_total: int = 0
    callback_latency: dict[str, list[float]] = field(default_factory=lambda: {"revoked": [], "assigned": [],
                                                                              "lost": []})
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
        self.callback_latency[kind].append(seconds * 1000)

    def _per_hour(self, events: deque) -> int:
        horizon = self.clock() - _HOUR_S
        while events and events[0] < horizon:
            events.popleft()
        return len(events)

    def snapshot(self) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {
            "rebalance-total": self.rebalance_total,
            "rebalance-rate-per-hour": self._per_hour(self._completed),
            "rebalance-latency-avg": self.rebalance_latency_total / self.rebalance_total if self.rebalance_total else 0.0,
            "rebalance-latency-max": self.rebalance_latency_max,
            "rebalance-latency-total": self.rebalance_latency_total,
            "failed-rebalance-total": self.failed_rebalance_total,
            "failed-rebalance-rate-per-hour": self._per_hour(self._failed),
            "last-rebalance-seconds-ago": None if self._last is None else self.clock() - self._last,
        }
        for kind, values in self.callback_latency.items():
            out[f"connectors-{kind}-latency-avg"] = sum(values) / len(values) if values else 0.0
            out[f"connectors-{kind}-latency-max"] = max(values, default=0.0)
        return out


class Worker:
    """One member of a connect group. `await start()`, later `await stop()`."""

    def __init__(self, client: CoordinatorClient, group_id: str, *, member_id: str | None = None,
                 instance_id: str | None = None, rack_id: str | None = None, assignor_name: str = "incremental_cooperative",
                 server_side: bool = False, listener: RebalanceListener | None = None,
                 rebalance_timeout_ms: int = 60_000, url: str | None = None) -> None:
        if assignor_name not in ASSIGNORS:
            raise ValueError(f"unknown assignor {assignor_name!r} (one of {', '.join(sorted(ASSIGNORS))})")
        self.client = client
        self.group_id = group_id
        self.member_id = member_id or uuid.uuid4().hex
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.assignor = assignor(assignor_name)
        self.server_side = server_side
        self.listener = listener or RebalanceListener()
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.url = url
        self.member_epoch = 0
        self.owned: frozenset[Item] = frozenset()
        self.heartbeat_interval_s = 1.0
        self.metrics = RebalanceMetrics()
        self.listener_errors: list[BaseException] = []
        self.failure: BaseException | None = None  # why the worker stopped on its own
        self._reported: frozenset[Item] | None = None  # what the coordinator last heard we own
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._stopping = False

    @property
    def assignment(self) -> ConnectorsAndTasks:
        return connectors_and_tasks(self.owned)

    @property
    def stable(self) -> bool:
        """In the group, and the last heartbeat changed nothing."""
        return self.member_epoch > 0 and not self.metrics.rebalancing

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=f"worker-{self.member_id}")

    async def stop(self, leave: bool = True) -> None:
        """Stop heartbeating; with `leave`, leave the group first (a static member's work waits
        for it: epoch -2; a dynamic member's is reassigned: epoch -1). Without, it is a crash."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        if leave and self.member_epoch > 0:
            epoch = -2 if self.instance_id else -1
            try:
                await self.client.call(self.group_id, "POST", HEARTBEAT, wire.HeartbeatResponse, self._body(epoch))
            except (Unavailable, ApiError) as e:
                log.warning("%s: leaving %s failed: %s", self.member_id, self.group_id, e)
            await self._notify("revoked", self.owned)
            self.owned, self.member_epoch, self._reported = frozenset(), 0, None

    # --- the heartbeat loop --------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                again_now = await self.heartbeat()
            except WorkerError as e:
                log.error("%s: %s; the worker stops", self.member_id, e)
                self.failure = e
                return
            except Unavailable as e:
                log.warning("%s: %s; trying again", self.member_id, e)
                again_now = False
            except Exception as e:  # a bug or a closed client: stop visibly rather than spin
                log.exception("%s: the heartbeat loop failed", self.member_id)
                self.failure = e
                return
            if not again_now:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), self.heartbeat_interval_s)
                except asyncio.TimeoutError:
                    pass

    def _body(self, epoch: int) -> wire.HeartbeatRequest:
        body = wire.HeartbeatRequest(group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                                     instance_id=self.instance_id)
        if epoch == 0:
            # A joining member sends everything (seed 000: nulls mean "unchanged", and there is
            # nothing yet to be unchanged from).
            body.rack_id, body.rebalance_timeout_ms, body.url = self.rack_id, self.rebalance_timeout_ms, self.url
            if self.server_side:
                body.server_assignor = self.assignor.name
            else:
                body.client_assignors = [wire.ClientAssignor(
                    name=self.assignor.name, minimum_version=self.assignor.minimum_version,
                    maximum_version=self.assignor.maximum_version, version=self.assignor.maximum_version)]
        if epoch == 0 or self._reported != self.owned:
            body.connectors_and_tasks = wire.ConnectorsAndTasks.of(connectors_and_tasks(self.owned))
        return body

    async def heartbeat(self) -> bool:
        """One heartbeat and what follows from its answer. True when the next one is due at once."""
        body = self._body(self.member_epoch)
        sent = self.owned
        try:
            r = await self.client.call(self.group_id, "POST", HEARTBEAT, wire.HeartbeatResponse, body)
        except ApiError as e:
            raise WorkerError(str(e)) from None
        code = r.error_code
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            log.warning("%s: %s; losing %s and joining again", self.member_id, r.error_message, describe(self.owned))
            self.metrics.failed()
            lost, self.owned, self.member_epoch, self._reported = self.owned, frozenset(), 0, None
            await self._notify("lost", lost)
            return True
        if code == ErrorCode.UNRELEASED_INSTANCE_ID:
            # The previous instance of this static member is still in the group until its session
            # ends: ask again soon (not after a whole interval), its work is waiting for us.
            await asyncio.sleep(min(_UNRELEASED_RETRY_S, self.heartbeat_interval_s))
            return True
        if code not in (ErrorCode.NONE, ErrorCode.COMPUTE_ASSIGNMENT) or isinstance(r, wire.ErrorResponse):
            raise WorkerError(f"heartbeat refused: {ErrorCode(code).name}: {r.error_message}")
        self._reported = sent
        self.heartbeat_interval_s = max(0.01, r.heartbeat_interval_ms / 1000)
        changed = r.member_epoch != self.member_epoch
        self.member_epoch = r.member_epoch
        revoked: frozenset[Item] = frozenset()
        if r.assignment is not None:
            given = frozenset(items_of(r.assignment.connectors_and_tasks.protocol()))
            revoked, added = self.owned - given, given - self.owned
            changed = changed or bool(revoked or added)
            if revoked:
                self.owned = self.owned - revoked
                await self._notify("revoked", revoked)
            if added:
                self.owned = self.owned | added
                await self._notify("assigned", added)
        if changed:
            self.metrics.changed()
        elif code == ErrorCode.NONE:
            self.metrics.quiet()
        if code == ErrorCode.COMPUTE_ASSIGNMENT:
            await self.compute_assignment()
        # A revocation is acknowledged at once: the items' next owner waits for it.
        return bool(revoked) or self.owned != self._reported

    async def compute_assignment(self) -> None:
        """COMPUTE_ASSIGNMENT: this worker was chosen to run the group's assignor."""
        prepared = await self.client.call(
            self.group_id, "POST", "/v1/connect-group/prepare-assignment", wire.PrepareAssignmentResponse,
            wire.PrepareAssignmentRequest(group_id=self.group_id, member_id=self.member_id,
                                          member_epoch=self.member_epoch))
        if prepared.error_code != 0:
            log.info("%s: prepare-assignment: %s", self.member_id, prepared.error_message)
            return
        spec = prepared.group_spec()
        chosen = assignor(prepared.assignor_name) if prepared.assignor_name in ASSIGNORS else self.assignor
        result = chosen.assign(spec)
        answer = await self.client.call(
            self.group_id, "POST", "/v1/connect-group/install-assignment", wire.ErrorResponse,
            wire.InstallAssignmentRequest.of(self.group_id, self.member_id, self.member_epoch, spec.group_epoch,
                                             result))
        if answer.error_code != 0:
            # INVALID_ASSIGNMENT or a stale epoch: the coordinator asks again when it needs to.
            log.info("%s: install-assignment: %s", self.member_id, answer.error_message)
            self.metrics.failed()

    async def _notify(self, kind: str, items: frozenset[Item] | ConnectorsAndTasks) -> None:
        if not items:
            return
        cat = items if isinstance(items, ConnectorsAndTasks) else connectors_and_tasks(items)
        if cat == EMPTY:
            return
        started = time.perf_counter()
        try:
            result = getattr(self.listener, f"on_{kind}")(cat)
            if inspect.isawaitable(result):
                await result
        except Exception as e:  # a notification: the view changes anyway (seed 001)
            log.exception("%s: on_%s(%s) failed", self.member_id, kind, describe(items_of(cat)))
            self.listener_errors.append(e)
        finally:
            self.metrics.callback(kind, time.perf_counter() - started)
