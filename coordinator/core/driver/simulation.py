"""An in-memory driver for the state machine: no Kafka, no network, a virtual clock.

`Driver` does what the runtime does, minus the I/O: it applies each handler's result through
`replay`, keeps every record in a log (the topic), keeps the armed timers and fires them as the
virtual clock passes their deadlines. `SimWorker` is a worker whose protocol is `Member`'s, the one
every worker of the project drives (revoke, acknowledge, take new work; compute the assignment
when asked; rejoin after being fenced). Tests, benchmarks and scripted scenarios use them to drive
the coordinator exactly as the service will, and to produce logs to replay.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from records import Assignor, ConnectorsAndTasks, ConnectorTaskCount, Record

from coordinator.core.assignors import ASSIGNORS, ConnectAssignor
from coordinator.core.group_coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.core.items import connectors_and_tasks
from coordinator.core.protocol import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    NO_CONTEXT,
    ClassicHeartbeatRequest,
    DeleteGroupRequest,
    ErrorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallAssignmentRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    Parked,
    ParkKey,
    PrepareAssignmentRequest,
    RequestContext,
    Result,
    SetConfigRequest,
    SetConnectorsRequest,
    SyncGroupRequest,
    TimerKey,
)
from coordinator.core.state import CoordinatorState
from coordinator.core.worker.classic import ClassicWorker
from coordinator.core.worker.member import Action, Assign, ComputeAssignment, Member, Revoke


class Driver:
    """A coordinator, its log and its timers, on a virtual clock (milliseconds)."""

    def __init__(self, config: CoordinatorConfig | None = None, now: int = 0) -> None:
        # Without a config: the server's defaults, but no initial assignment delay, so that a
        # scripted scenario is assigned as soon as its members join (pass a config to model it).
        self.coordinator = GroupCoordinator(config=config or CoordinatorConfig(initial_assignment_delay_ms=0))
        self.log: list[Record] = []
        self.timers: dict[TimerKey, int] = {}
        self.now = now
        self.waiting: set[ParkKey] = set()  # parked requests not answered yet
        self.answers: dict[ParkKey, Any] = {}  # what parked requests were answered with

    def answer(self, key: ParkKey) -> Any:
        """The answer a parked request got (KeyError while it still waits)."""
        return self.answers.pop(key)

    @property
    def state(self):  # noqa: ANN201
        return self.coordinator.state

    def run(self, result: Result):  # noqa: ANN201
        """Apply a handler's result as the runtime would, and return its response."""
        self.coordinator.apply(result)
        self.log.extend(result.records)
        for key, response in result.deliveries:
            if key in self.waiting:  # a delivery for a request nobody waits on is dropped, as the runtime does
                self.waiting.discard(key)
                self.answers[key] = response
        if isinstance(result.response, Parked):
            self.waiting.add(result.response.key)
        for timer in result.timers:
            if timer.deadline_ms is None:
                self.timers.pop(timer.key, None)
            else:
                self.timers[timer.key] = timer.deadline_ms
        return result.response

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        return self.run(self.coordinator.heartbeat(request, self.now))

    def join_group(self, request: JoinGroupRequest, context: RequestContext = NO_CONTEXT) -> Any:
        return self.run(self.coordinator.join_group(request, self.now, context))

    def sync_group(self, request: SyncGroupRequest) -> Any:
        return self.run(self.coordinator.sync_group(request, self.now))

    def classic_heartbeat(self, request: ClassicHeartbeatRequest) -> ErrorResponse:
        return self.run(self.coordinator.classic_heartbeat(request, self.now))

    def leave_group(self, request: LeaveGroupRequest) -> Any:
        return self.run(self.coordinator.leave_group(request, self.now))

    def set_connectors(self, group_id: str, connectors: dict[str, int]) -> ErrorResponse:
        counts = tuple(ConnectorTaskCount(name, tasks) for name, tasks in connectors.items())
        return self.run(
            self.coordinator.set_connectors(SetConnectorsRequest(group_id=group_id, connectors=counts), self.now)
        )

    def set_config(self, group_id: str, **timeouts: int | None) -> ErrorResponse:
        return self.run(self.coordinator.set_config(SetConfigRequest(group_id, **timeouts), self.now))

    def delete_group(self, group_id: str) -> ErrorResponse:
        return self.run(self.coordinator.delete_group(DeleteGroupRequest(group_id), self.now))

    def fail_over(self, log: list[Record] | None = None) -> CoordinatorState:
        """The coordinator fails and a new one takes over from `log` (its own log by default): the
        state a replay gives, the timers a load arms. Requests that waited at the old one are
        forgotten (their workers: `SimClassicWorker.coordinator_gone`). Returns the new state."""
        replayed = CoordinatorState()
        replayed.replay_all(self.log if log is None else log)
        self.coordinator = GroupCoordinator(replayed, self.coordinator.config)
        self.timers = {t.key: t.deadline_ms for t in self.coordinator.timers(self.now)}
        self.waiting.clear()
        return replayed

    def advance(self, ms: int) -> list[TimerKey]:
        """Move the clock forward, firing every timer that falls due on the way, in order."""
        target = self.now + ms
        fired = []
        while True:
            due = [(deadline, key) for key, deadline in self.timers.items() if deadline <= target]
            if not due:
                break
            deadline, key = min(due)
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.run(self.coordinator.on_timer(key, self.now))
            fired.append(key)
        self.now = target
        return fired


class SimWorker:
    """A worker on the in-memory driver: a `Member` (the protocol's worker side) whose requests go
    straight to the coordinator, and which carries out its actions at once."""

    def __init__(
        self,
        driver: Driver,
        group_id: str,
        member_id: str,
        *,
        instance_id: str | None = None,
        assignor: str | None = "incremental_cooperative",
        server_assignor: str | None = None,
        rebalance_timeout_ms: int = 60_000,
        assignor_impl: ConnectAssignor | None = None,
        versions: tuple[int, int] | None = None,
        session_timeout_ms: int | None = None,
    ) -> None:
        self.driver = driver
        self.assignor_impl = assignor_impl or (ASSIGNORS[assignor] if assignor else None)
        client_assignors: tuple[Assignor, ...] = ()
        if assignor is not None and server_assignor is None:
            impl = self.assignor_impl
            low, high = versions or (impl.minimum_version, impl.maximum_version)
            client_assignors = (Assignor(assignor, low, high, 0, high, b""),)
        self.member = Member(
            group_id,
            member_id,
            instance_id=instance_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            server_assignor=server_assignor,
            client_assignors=client_assignors,
            session_timeout_ms=session_timeout_ms or driver.coordinator.config.session_timeout_ms,
        )
        self.last: HeartbeatResponse | None = None
        self.computations = 0

    # The member's view, read through.
    group_id = property(lambda self: self.member.group_id)
    member_id = property(lambda self: self.member.member_id)
    instance_id = property(lambda self: self.member.instance_id)
    member_epoch = property(lambda self: self.member.member_epoch)
    owned = property(lambda self: self.member.owned)
    joined = property(lambda self: self.member.joined)
    client_assignors = property(lambda self: self.member.client_assignors)
    server_assignor = property(lambda self: self.member.server_assignor)

    def heartbeat(self, *, compute: bool = True) -> HeartbeatResponse:
        request = self.member.heartbeat(self.driver.now)
        response = self.driver.heartbeat(request)
        self.last = response
        self.carry_out(self.member.received(response, self.driver.now), compute)
        return response

    def carry_out(self, actions: list[Action], compute: bool = True) -> None:
        """Revocations, assignments and losses are instant here; COMPUTE_ASSIGNMENT runs at once
        unless `compute` is False; a refusal is kept in `member.given_up` for the caller to read."""
        if any(isinstance(a, Revoke) for a in actions) and any(isinstance(a, Assign) for a in actions):
            raise AssertionError(f"{self.member_id} was revoked and given work in one response: {actions}")
        for action in actions:
            if isinstance(action, ComputeAssignment) and compute:
                self.compute_assignment()

    def compute_assignment(self) -> ErrorResponse | None:
        """PrepareAssignment -> assignor -> InstallAssignment."""
        c = self.driver.coordinator
        prepared = self.driver.run(
            c.prepare_assignment(
                PrepareAssignmentRequest(self.group_id, self.member_id, self.member_epoch), self.driver.now
            )
        )
        if prepared.error_code:
            return ErrorResponse(prepared.error_code, prepared.error_message)
        self.computations += 1
        result = self.assignor_impl.assign(prepared)
        return self.install(prepared.group_epoch, result)

    def install(self, group_epoch: int, result) -> ErrorResponse:  # noqa: ANN001 - a GroupAssignment
        return self.driver.run(
            self.driver.coordinator.install_assignment(
                InstallAssignmentRequest.of(self.group_id, self.member_id, self.member_epoch, group_epoch, result),
                self.driver.now,
            )
        )

    def leave(self, static: bool = False) -> HeartbeatResponse:
        """Leave: revoke everything, then the leave heartbeat (-2 when `static`, else -1)."""
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if static else LEAVE_GROUP_MEMBER_EPOCH
        self.member.leave()
        return self.driver.heartbeat(HeartbeatRequest(self.group_id, self.member_id, epoch))

    def lose_everything(self) -> None:
        """Crashed (the process restarted): everything stops; the next heartbeat joins with epoch 0."""
        self.member.lose("the worker restarted")

    @property
    def assignment(self) -> ConnectorsAndTasks:
        return connectors_and_tasks(self.owned)


class SimClassicWorker:
    """A classic worker on the in-memory driver: a `ClassicWorker` whose requests go to the
    coordinator; a parked request waits until the driver has its answer. `step()` does what is
    due now; the leader reads the group's connectors from the coordinator's state, as the SDK's
    leader reads them from the admin API."""

    def __init__(self, driver: Driver, group_id: str, name: str, **options: Any) -> None:
        self.driver = driver
        self.name = name
        self.worker = ClassicWorker(group_id, **options)
        self.waiting: tuple[ParkKey, str] | None = None  # (key, "join" or "sync")
        self.log: list[Action] = []

    owned = property(lambda self: self.worker.owned)
    member_id = property(lambda self: self.worker.member_id)

    def step(self) -> bool:
        """Send what is due, or take a parked request's answer; whether anything happened."""
        d, w = self.driver, self.worker
        if self.waiting is not None:
            key, kind = self.waiting
            if key not in d.answers:
                return False
            self.waiting = None
            return self._answered(kind, d.answer(key))
        actions, request = w.poll(d.now)
        self._carry_out(actions)
        if request is None:
            return bool(actions)
        response, kind = self.send(request)
        if isinstance(response, Parked):
            self.waiting = (response.key, kind)
            return True
        self._answered(kind, response)
        return True

    def send(self, request: Any) -> tuple[Any, str]:
        """The request to the coordinator: its answer (or Parked), and its kind."""
        d = self.driver
        if isinstance(request, JoinGroupRequest):
            return d.join_group(request, self.context(request)), "join"
        if isinstance(request, SyncGroupRequest):
            return d.sync_group(request), "sync"
        return d.classic_heartbeat(request), "heartbeat"

    def context(self, request: JoinGroupRequest) -> RequestContext:
        """Who sends the JoinGroup; its `fresh_id` is the member id a new member is handed."""
        return RequestContext(self.name, "sim", f"{self.name}-{next(_fresh)}")

    def _answered(self, kind: str, response: Any) -> bool:
        d, w = self.driver, self.worker
        if kind == "join":
            group = d.state.groups.get(w.group_id)
            self._carry_out(w.joined(response, d.now, group.connector_counts if group is not None else ()))
        elif kind == "sync":
            group = d.state.groups.get(w.group_id)
            self._carry_out(w.synced(response, d.now, group.connector_counts if group is not None else ()))
        else:
            self._carry_out(w.heartbeat_answered(response, d.now))
        return True

    def coordinator_gone(self) -> None:
        """The coordinator failed over: a request waiting there gets no answer; ask again."""
        if self.waiting is not None:
            self.waiting = None
            self._carry_out(self.worker.failed(self.driver.now, "the coordinator went away"))

    def leave(self) -> Any:
        actions, request = self.worker.leave()
        self._carry_out(actions)
        self.waiting = None
        return None if request is None else self.driver.leave_group(request)

    def _carry_out(self, actions: list[Action]) -> None:
        if any(isinstance(a, Revoke) for a in actions) and any(isinstance(a, Assign) for a in actions):
            assert [type(a) for a in actions].index(Revoke) < [type(a) for a in actions].index(Assign), actions
        self.log.extend(actions)


_fresh = itertools.count(1)


def step_all(
    classic: Iterable[SimClassicWorker],
    connect: Iterable[SimWorker] = (),
    after: Callable[[], None] | None = None,
    rounds: int = 1_000,
) -> None:
    """Every worker does what is due now, the clock standing still: classic workers step, round
    after round (at most `rounds`), until none has anything more to do; then connect workers whose
    heartbeat is due send it. `after` runs after every step that did something (a check)."""
    classic = list(classic)
    for _ in range(rounds):
        progress = False
        for w in classic:
            if w.step():
                progress = True
                if after is not None:
                    after()
        if not progress:
            break
    for w in connect:
        if w.member.heartbeat_due() <= w.driver.now:
            w.heartbeat()
            if after is not None:
                after()


def converge(workers: Iterable[SimWorker], rounds: int = 50, advance_ms: int = 0) -> int:
    """Heartbeat every worker, round after round (the clock moving `advance_ms` before each), until
    a round changes nothing and every group has its target for its epoch; returns the rounds."""
    workers = list(workers)
    if not workers:
        return 0
    driver = workers[0].driver
    groups = {w.group_id for w in workers}
    for round_ in range(1, rounds + 1):
        if advance_ms:
            driver.advance(advance_ms)
        before = [(w.member_epoch, w.owned) for w in workers]
        log_size = len(driver.log)
        for w in workers:
            w.heartbeat()
        settled = all(
            g not in driver.state.groups
            or driver.state.groups[g].group_epoch == driver.state.groups[g].assignment_epoch
            for g in groups
        )
        if settled and before == [(w.member_epoch, w.owned) for w in workers] and len(driver.log) == log_size:
            return round_
    raise AssertionError(f"no convergence within {rounds} rounds")
