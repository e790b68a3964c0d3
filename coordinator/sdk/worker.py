"""The worker SDK: a member of a connect group, over the HTTP API (DESIGN §8, seeds 000 and 001).

The protocol is `coordinator.core.worker.member.Member`'s, the one state machine every worker of the
project drives; this module is its asyncio shell. It sends the heartbeat the member asks for when
the member asks, hands it back the answer or the failure, and carries out the actions it returns,
in their order, through the `RebalanceListener`:

- `Revoke`: `on_revoked`; the acknowledging heartbeat goes as soon as the callback returned (the
  coordinator gives the items to others only after that acknowledgement);
- `Assign`: `on_assigned`;
- `Lose` (fenced, unknown, or cut off from the coordinator for a session timeout): `on_lost`, which
  defaults to `on_revoked` (seed 001); the member then rejoins with epoch 0;
- `ComputeAssignment`: PrepareAssignment, the assignor, InstallAssignment;
- `GiveUp` (a refusal no retry can change, or a bug in this process): everything was lost first;
  `failure` says why and the worker stops. Never a silent stop with work still running.

`stop()` revokes everything (the callbacks return) before it sends the leave heartbeat (epoch -1,
or -2 for a static member, whose work then waits for it), so no item ever runs on two workers.

Listener semantics are seed 001's: a callback is a notification, and the member's view changes as
the coordinator said. When one raises, the others of the same step still run, and then the first
error is surfaced: `heartbeat()` raises `ListenerError`, the background loop logs it and keeps it in
`listener_errors`.

Rebalance metrics are seed 001's (`RebalanceMetrics`): a rebalance, for a member, starts with the
first answer that changes its epoch or assignment and ends at the first answer after that which
changes nothing (the member has reached what the coordinator wants, as far as it can see).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence

import msgspec

from records import Assignor, ConnectorsAndTasks

from coordinator.api import operations
from coordinator.core.assignors import ConnectAssignor, assignor
from coordinator.core.items import connectors_and_tasks
from coordinator.core.protocol import (
    ErrorCode,
    ErrorResponse,
    HeartbeatResponse,
    InstallAssignmentRequest,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
)
from coordinator.core.worker.member import Action, ComputeAssignment, Member
from coordinator.sdk.client import ApiError, CoordinatorClient, Unavailable
from coordinator.sdk.shell import ListenerError, RebalanceListener, RebalanceMetrics, WorkerError, WorkerShell

log = logging.getLogger(__name__)

HEARTBEAT = operations.route("heartbeat")
PREPARE = operations.route("prepareAssignment")
INSTALL = operations.route("installAssignment")


def _assignor(value: str | ConnectAssignor) -> ConnectAssignor:
    return assignor(value) if isinstance(value, str) else value


class Worker(WorkerShell):
    """One member of a connect group. `await start()`, later `await stop()`.

    `assignors` is a priority list (names of shipped assignors, or assignor objects such as
    `IncrementalCooperativeAssignor(max_moves=10)`): the group uses the first one every member
    offers, which is how an assignor change rolls through a cluster (seed 000, seed 004). With
    `server_side`, the first is named as the coordinator's assignor instead. Cut off from the
    coordinator for `session_timeout_ms`, or for the group's session timeout if the coordinator said
    a shorter one (`SessionTimeoutMs` in its heartbeat answers), the worker stops its work.

    `protocol="classic"` makes a classic worker instead (`coordinator.sdk.classic.ClassicGroupWorker`,
    seed 004): the same listener and life cycle, JoinGroup and SyncGroup underneath, the leader
    running the first assignor both sides support.
    """

    def __new__(cls, *args: object, protocol: str = "connect", **kwargs: object) -> Worker:
        if protocol == "classic":
            from coordinator.sdk.classic import ClassicGroupWorker

            return ClassicGroupWorker(*args, **kwargs)  # type: ignore[return-value]
        if protocol != "connect":
            raise ValueError(f"protocol must be connect or classic, not {protocol!r}")
        return super().__new__(cls)

    def __init__(
        self,
        client: CoordinatorClient,
        group_id: str,
        *,
        protocol: str = "connect",
        member_id: str | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        assignors: Sequence[str | ConnectAssignor] = ("incremental_cooperative",),
        server_side: bool = False,
        listener: RebalanceListener | None = None,
        rebalance_timeout_ms: int = 60_000,
        session_timeout_ms: int = 10_000,
        url: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not assignors:
            raise ValueError("a worker needs at least one assignor")
        self.assignors = [_assignor(a) for a in assignors]
        offered = (
            ()
            if server_side
            else tuple(
                Assignor(a.name, a.minimum_version, a.maximum_version, 0, a.maximum_version) for a in self.assignors
            )
        )
        self.member = Member(
            group_id,
            member_id or uuid.uuid4().hex,
            instance_id=instance_id,
            rack_id=rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            url=url,
            server_assignor=self.assignors[0].name if server_side else None,
            client_assignors=offered,
            session_timeout_ms=session_timeout_ms,
        )
        super().__init__(listener, clock)
        self.client = client

    group_id = property(lambda self: self.member.group_id)
    member_id = property(lambda self: self.member.member_id)
    instance_id = property(lambda self: self.member.instance_id)
    member_epoch = property(lambda self: self.member.member_epoch)
    owned = property(lambda self: self.member.owned)

    @property
    def assignment(self) -> ConnectorsAndTasks:
        return connectors_and_tasks(self.owned)

    @property
    def stable(self) -> bool:
        """In the group, and the last heartbeat changed nothing."""
        return self.member.in_group and not self.metrics.rebalancing

    # --- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=f"worker-{self.member_id}")

    async def stop(self, leave: bool = True) -> None:
        """Stop heartbeating; with `leave`, revoke everything (the callbacks return) and then leave
        the group. Without, it is a crash: nothing is revoked and the session will expire."""
        await self._stop_task()
        if not leave:
            return
        actions, request = self.member.leave()
        try:
            await self._carry_out(actions)
        except ListenerError:
            pass  # logged; the work is stopped as far as this worker can tell, and it leaves anyway
        if request is not None:
            try:
                await self.client.call(self.group_id, *HEARTBEAT, HeartbeatResponse, request)
            except (Unavailable, ApiError) as e:
                log.warning("%s: leaving %s failed: %s", self.member_id, self.group_id, e)

    def request_rebalance(self, reason: int = 1, metadata: bytes | None = None) -> None:
        """Ask for a new target assignment (seed 000's assignor Reason): the next heartbeat carries
        the client-side assignors with `reason` (and new `metadata`, if given), which the coordinator
        takes as a change of the group's metadata. A server-side member has no assignor entry to
        change: this raises ValueError for it."""
        member = self.member
        if not member.client_assignors:
            raise ValueError("a server-side member has no assignor Reason to send")
        member.set_assignors(
            None,
            tuple(
                msgspec.structs.replace(a, reason=reason, metadata=a.metadata if metadata is None else metadata)
                for a in member.client_assignors
            ),
        )
        self._wake.set()

    # --- the heartbeat loop --------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self._carry_out(self.member.poll(self._now()))
                if self.member.given_up is not None:
                    return
                # Wake for the next heartbeat, or for the self-fence if that comes first (after a
                # failure the next heartbeat may be due past it).
                wake_at = self.member.heartbeat_due()
                deadline = self.member.fence_deadline()
                if deadline is not None:
                    wake_at = min(wake_at, deadline)
                delay_s = (wake_at - self._now()) / 1000
                if delay_s > 0:
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), delay_s)
                    except TimeoutError:
                        pass
                    continue  # the time may have come to stop the work first (poll)
                await self.heartbeat()
            except ListenerError as e:
                log.warning("%s: %s", self.member_id, e)
            except Exception as e:  # a bug here: stop the work visibly rather than run on unsupervised
                log.exception("%s: the heartbeat loop failed; the worker stops its work and gives up", self.member_id)
                self.failure = e
                await self._carry_out(self.member.refused(f"the worker failed: {e!r}"))
                return

    async def heartbeat(self) -> None:
        """One heartbeat and what follows from its answer (ListenerError if a callback raised)."""
        request = self.member.heartbeat(self._now())
        epoch, owned = self.member.member_epoch, self.member.owned
        try:
            answer = await asyncio.wait_for(
                self.client.call(self.group_id, *HEARTBEAT, HeartbeatResponse, request),
                self._answer_within_s(),
            )
        except (TimeoutError, Unavailable) as e:
            log.warning("%s: no answer to a heartbeat: %s", self.member_id, e or "timed out")
            actions = self.member.failed(self._now(), str(e) or "timed out")
        except ApiError as e:  # 400, 401, 403, 413: this body will never be taken
            actions = self.member.refused(str(e))
        else:
            response = (
                answer
                if isinstance(answer, HeartbeatResponse)
                else HeartbeatResponse(answer.error_code, answer.error_message)
            )
            actions = self.member.received(response, self._now())
            if response.error_code in (ErrorCode.NONE, ErrorCode.COMPUTE_ASSIGNMENT):
                if epoch != self.member.member_epoch or owned != self.member.owned:
                    self.metrics.changed()
                elif response.error_code == ErrorCode.NONE:
                    self.metrics.quiet()
        await self._carry_out(actions)

    def _answer_within_s(self) -> float | None:
        """How long a heartbeat may wait for its answer: until the member must stop its work."""
        deadline = self.member.fence_deadline()
        return None if deadline is None else max(0.05, (deadline - self._now()) / 1000)

    async def _act(self, action: Action) -> None:
        if isinstance(action, ComputeAssignment):
            await self.compute_assignment()
        else:
            await super()._act(action)

    async def compute_assignment(self) -> None:
        """COMPUTE_ASSIGNMENT: this worker was chosen to run the group's assignor."""
        try:
            prepared = await self.client.call(
                self.group_id,
                *PREPARE,
                PrepareAssignmentResponse,
                PrepareAssignmentRequest(self.group_id, self.member_id, self.member_epoch),
            )
            if prepared.error_code != 0:
                log.info("%s: prepare-assignment: %s", self.member_id, prepared.error_message)
                return
            spec = prepared  # the GroupSpec the assignor takes, as it came
            chosen = next((a for a in self.assignors if a.name == prepared.assignor_name), None) or assignor(
                prepared.assignor_name
            )
            result = chosen.assign(spec)
            answer = await self.client.call(
                self.group_id,
                *INSTALL,
                ErrorResponse,
                InstallAssignmentRequest.of(self.group_id, self.member_id, self.member_epoch, spec.group_epoch, result),
            )
        except (Unavailable, ApiError, LookupError) as e:
            # The coordinator gives the job to another member after the deadline; this one goes on.
            log.warning("%s: computing the assignment failed: %s", self.member_id, e)
            self.metrics.failed()
            return
        if answer.error_code != 0:
            # INVALID_ASSIGNMENT or a stale epoch: the coordinator asks again when it needs to.
            log.info("%s: install-assignment: %s", self.member_id, answer.error_message)
            self.metrics.failed()


__all__ = ["ListenerError", "RebalanceListener", "RebalanceMetrics", "Worker", "WorkerError"]
