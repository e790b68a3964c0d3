"""A classic worker over the HTTP API (seed 004): `Worker(..., protocol="classic")`.

The protocol is `coordinator.core.worker.classic.ClassicWorker`'s; this is its asyncio shell, as
`Worker` is `Member`'s: it sends what the state machine asks when it asks, hands back the answer or
the failure, and carries out the actions through the same `RebalanceListener`. JoinGroup and
SyncGroup wait at the coordinator for the other members, so they are sent with a timeout of the
rebalance timeout and a margin. The leader reads the group's connectors from the admin API before it
assigns (Connect's leader reads its config topic). `stop()` revokes everything, then leaves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from records import ConnectorsAndTasks
from records.connect_protocol import DEFAULT, SESSIONED

from coordinator.api import operations
from coordinator.core.assignors import ConnectAssignor
from coordinator.core.items import connectors_and_tasks
from coordinator.core.protocol import (
    ErrorCode,
    ErrorResponse,
    GroupDescription,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.core.worker.classic import ClassicWorker
from coordinator.sdk.client import ApiError, CoordinatorClient, Unavailable
from coordinator.sdk.shell import ListenerError, RebalanceListener, WorkerShell

log = logging.getLogger(__name__)

JOIN = operations.route("joinGroup")
SYNC = operations.route("syncGroup")
HEARTBEAT = operations.route("classicHeartbeat")
LEAVE = operations.route("leaveGroup")
# A waiting JoinGroup or SyncGroup is answered within the rebalance timeout; allow this much more.
WAIT_MARGIN_S = 5.0


class ClassicGroupWorker(WorkerShell):
    """One member of a classic group; the same life cycle and listener as `Worker`."""

    def __init__(
        self,
        client: CoordinatorClient,
        group_id: str,
        *,
        member_id: str | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        assignors: Sequence[str | ConnectAssignor] = ("incremental_cooperative",),
        server_side: bool = False,
        listener: RebalanceListener | None = None,
        rebalance_timeout_ms: int = 60_000,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        scheduled_rebalance_max_delay_ms: int = 300_000,
        url: str | None = None,
        connect_protocol: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if server_side:
            raise ValueError("a classic group's leader assigns: there is no server-side assignor")
        # The coordinator gives a classic member its id (MEMBER_ID_REQUIRED); `member_id` and
        # `rack_id` are the connect protocol's and are not sent.
        # Kafka Connect's connect.protocol: `sessioned` (which offers compatible and default too), or
        # `default` for a worker whose first assignor is the eager one, as Connect's eager workers.
        names = [a if isinstance(a, str) else a.name for a in assignors]
        if connect_protocol is None:
            connect_protocol = DEFAULT if names[:1] == ["eager"] else SESSIONED
        super().__init__(listener, clock)
        self.client = client
        self.classic = ClassicWorker(
            group_id,
            instance_id=instance_id,
            connect_protocol=connect_protocol,
            url=url,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            scheduled_rebalance_max_delay_ms=scheduled_rebalance_max_delay_ms,
        )
        self._generation_seen = self.classic.generation

    group_id = property(lambda self: self.classic.group_id)
    member_id = property(lambda self: self.classic.member_id)
    instance_id = property(lambda self: self.classic.instance_id)
    generation = property(lambda self: self.classic.generation)
    owned = property(lambda self: self.classic.owned)

    @property
    def member_epoch(self) -> int:
        return self.classic.generation

    @property
    def assignment(self) -> ConnectorsAndTasks:
        return connectors_and_tasks(self.owned)

    @property
    def stable(self) -> bool:
        """In a generation, heartbeating, and with no rejoin waiting."""
        c = self.classic
        return c.settled and c.due() is not None and not self.metrics.rebalancing

    # --- life cycle ----------------------------------------------------------------------------------

    async def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=f"classic-worker-{self.instance_id or id(self)}")

    async def stop(self, leave: bool = True) -> None:
        """With `leave`: revoke everything (the callbacks return), then LeaveGroup. Without: a crash."""
        await self._stop_task()
        if not leave:
            return
        actions, request = self.classic.leave()
        try:
            await self._carry_out(actions)
        except ListenerError:
            pass
        if request is not None:
            try:
                await self.client.call(self.group_id, *LEAVE, LeaveGroupResponse, request)
            except (Unavailable, ApiError) as e:
                log.warning("%s: leaving %s failed: %s", request.members[0].member_id, self.group_id, e)

    # --- the loop ------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        c = self.classic
        while not self._stopping:
            try:
                actions, request = c.poll(self._now())
                await self._carry_out(actions)
                if c.given_up is not None:
                    return
                if request is None:
                    due = c.due()
                    delay_s = 1.0 if due is None else max(0.0, (due - self._now()) / 1000)
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), delay_s)
                    except TimeoutError:
                        pass
                    continue
                await self._carry_out(await self._exchange(request))
                self._observe()
            except ListenerError as e:
                log.warning("%s: %s", c.member_id, e)
            except Exception as e:  # a bug here: stop the work visibly rather than run on unsupervised
                log.exception("%s: the classic worker's loop failed; it stops its work and gives up", c.member_id)
                self.failure = e
                await self._carry_out(c.refused(f"the worker failed: {e!r}"))
                return

    async def _exchange(self, request: object) -> list:
        c = self.classic
        wait_s = c.rebalance_timeout_ms / 1000 + WAIT_MARGIN_S
        try:
            if isinstance(request, JoinGroupRequest):
                answer = await self.client.call(
                    self.group_id,
                    *JOIN,
                    JoinGroupResponse,
                    request,
                    timeout_s=wait_s,
                )
                response = (
                    answer
                    if isinstance(answer, JoinGroupResponse)
                    else JoinGroupResponse(answer.error_code, answer.error_message)
                )
                connectors = (
                    await self._connectors()
                    if response.error_code == 0 and response.members and response.leader == response.member_id
                    else ()
                )
                return c.joined(response, self._now(), connectors or ())
            if isinstance(request, SyncGroupRequest):
                answer = await self.client.call(
                    self.group_id,
                    *SYNC,
                    SyncGroupResponse,
                    request,
                    timeout_s=wait_s,
                )
                response = (
                    answer
                    if isinstance(answer, SyncGroupResponse)
                    else SyncGroupResponse(answer.error_code, answer.error_message)
                )
                # Every worker knows the configuration (a Connect worker reads its config topic).
                configured = await self._connectors() if response.error_code == 0 else None
                return c.synced(response, self._now(), configured)
            answer = await self.client.call(self.group_id, *HEARTBEAT, ErrorResponse, request)
            return c.heartbeat_answered(answer, self._now())
        except (TimeoutError, Unavailable) as e:
            log.warning("%s: no answer: %s", c.member_id, e or "timed out")
            return c.failed(self._now(), str(e) or "timed out")
        except ApiError as e:  # 400, 401, 403, 413: no retry changes this
            return c.refused(str(e))

    async def _connectors(self) -> tuple | None:
        """The group's connectors, as a Connect worker reads them from its config topic (an empty
        group has none; None: they could not be read)."""
        try:
            answer = await self.client.call(
                self.group_id, *operations.route("describeGroup", group_id=self.group_id), GroupDescription
            )
        except (TimeoutError, Unavailable, ApiError) as e:
            log.warning("%s: reading the connectors failed: %s", self.member_id, e)
            return None
        if isinstance(answer, GroupDescription):
            return tuple(answer.connectors)
        if answer.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
            log.warning("%s: reading the connectors failed: %s", self.member_id, answer.error_message)
            return None
        return ()

    def _observe(self) -> None:
        """Seed 001's metrics: a rebalance starts with a new generation and ends once stable."""
        c = self.classic
        if c.generation != self._generation_seen:
            self._generation_seen = c.generation
            self.metrics.changed()
        elif c.settled:
            self.metrics.quiet()
