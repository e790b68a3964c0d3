"""A group's membership script driven through the coordinator's classic protocol, on a virtual clock.

`run_script` (scripted.py) comes here for `ScriptSettings.protocol == "classic"`: the workers are
Kafka Connect workers on the classic protocol (`SimClassicWorker`, a `ClassicWorker` acting as
Connect's `WorkerCoordinator`), so the group's leader computes the assignments with Connect's own
rules (`coordinator.core.assignors.connect_leader`, the port of Connect's EagerAssignor and
IncrementalCooperativeAssignor) for the workers' `connect.protocol`, and the coordinator runs the
classic join and sync rounds. This is the faithful re-run of a classic group's history, and the
classic alternative of any group.

Theory of operation
-------------------
Unlike the connect protocol's run, every alive worker really heartbeats (at its
heartbeat.interval.ms): a classic member hears of a rebalance only in a heartbeat's answer
(REBALANCE_IN_PROGRESS), so when each one joins again is part of what is re-run. Between the
script's steps the clock jumps to the next thing due: a worker's request (`ClassicWorker.due`), or
a coordinator timer (a join phase's end, a session, the initial delay); at each instant the
workers step until none has anything more to do (`step_all`).

Each worker joins with the member id the script gives it (the coordinator hands a classic member
its id: the driver's `fresh_id` is the recorded one), so that the re-run's members are the
recorded members, and Connect's leader visits them in the recorded order (it sorts them, or walks
a Java HashMap of them: both depend on the ids).
"""

from __future__ import annotations

from typing import Any

from coordinator.core.assignors.connect_leader import ConnectLeaderAssignor
from coordinator.core.driver.script import Crash, Join, Leave, ScriptSettings, SetConnectors, Step
from coordinator.core.driver.simulation import Driver, SimClassicWorker, step_all
from coordinator.core.protocol import (
    CLASSIC_SESSION,
    ClassicHeartbeatRequest,
    JoinGroupRequest,
    RequestContext,
    timer_key,
)
from coordinator.core.states import ClassicGroupState

_DAY_MS = 86_400_000


class ScriptedClassicWorker(SimClassicWorker):
    """A `SimClassicWorker` named `name` whose first JoinGroup is handed `fresh_id` (the recorded
    member id; a process joining again under an id used before, as a static member's of a connect
    group does, gets it with a suffix: a classic member id is never handed out twice)."""

    def __init__(self, driver: Driver, group_id: str, name: str, fresh_id: str, **options: Any) -> None:
        super().__init__(driver, group_id, name, **options)
        self.recorded_id = fresh_id

        self.heartbeats = 0

    def context(self, request: JoinGroupRequest) -> RequestContext:
        return RequestContext(self.name, "sim", self.recorded_id)

    def send(self, request: Any) -> Any:
        self.heartbeats += isinstance(request, ClassicHeartbeatRequest)
        return super().send(request)


class ClassicRun:
    """The workers of one classic re-run; `apply` a step, `until` a time, `settle` at the end.
    The steps of one instant are applied together, then the workers step."""

    def __init__(self, d: Driver, group_id: str, settings: ScriptSettings) -> None:
        self.d = d
        self.group_id = group_id
        self.settings = settings
        self.alive: dict[str, ScriptedClassicWorker] = {}  # the script's member id -> its worker
        self.given_up: dict[str, str] = {}
        self.everyone: list[ScriptedClassicWorker] = []  # every worker the run started

    @property
    def heartbeats(self) -> int:
        return sum(w.heartbeats for w in self.everyone)

    def switch(self, settings: ScriptSettings) -> None:
        """Other settings from now on: the coordinator's (the initial delay), and each worker's own
        (session, heartbeat interval, scheduled.rebalance.max.delay.ms), as a rolling restart with
        the new worker configuration would give them: a leader's memory starts afresh."""
        self.d.set_config(self.group_id, initial_assignment_delay_ms=settings.initial_assignment_delay_ms)
        self.settings = settings
        for w in self.alive.values():
            worker = w.worker
            worker.session_timeout_ms = settings.session_timeout_ms
            worker.heartbeat_interval_ms = settings.heartbeat_interval_ms
            if worker.assignor.scheduled_rebalance_max_delay_ms != settings.scheduled_rebalance_max_delay_ms:
                worker.assignor = ConnectLeaderAssignor(settings.scheduled_rebalance_max_delay_ms)
        self._step()

    def apply(self, step: Step) -> None:
        if isinstance(step, SetConnectors):
            self.d.set_connectors(self.group_id, step.connectors)
        elif isinstance(step, Join):
            self.alive.pop(step.member_id, None)  # a new process under the same id: the old one is gone
            s = self.settings
            again = sum(w.name == step.member_id for w in self.everyone)
            self.alive[step.member_id] = worker = ScriptedClassicWorker(
                self.d,
                self.group_id,
                step.member_id,
                f"{step.member_id}-{again}" if again else step.member_id,
                instance_id=step.instance_id,
                connect_protocol=s.connect_protocol,
                session_timeout_ms=s.session_timeout_ms,
                rebalance_timeout_ms=step.rebalance_timeout_ms,
                heartbeat_interval_ms=s.heartbeat_interval_ms,
                scheduled_rebalance_max_delay_ms=s.scheduled_rebalance_max_delay_ms,
            )
            self.everyone.append(worker)
        elif isinstance(step, Leave):
            worker = self.alive.pop(step.member_id, None)
            if worker is not None:
                worker.leave()
        elif isinstance(step, Crash):
            self.alive.pop(step.member_id, None)  # silent from now: its session ends at the coordinator

    def _step(self) -> None:
        """Every alive worker does what is due now, until none has anything more to do."""
        step_all(self.alive.values())
        for member_id, w in list(self.alive.items()):
            if w.worker.given_up is not None:
                self.given_up.setdefault(member_id, w.worker.given_up)
                del self.alive[member_id]

    def _next(self) -> int | None:
        times = [t for t in (w.worker.due() for w in self.alive.values() if w.waiting is None) if t is not None]
        timer = min(self.d.timers.values(), default=None)
        if timer is not None:
            times.append(timer)
        return min(times, default=None)

    def _skip_quiet(self, at_ms: int) -> None:
        """In a stable group whose workers are all settled, a heartbeat only re-arms its member's
        session (no record, no news): the heartbeats due before `at_ms`, or before the first other
        timer (a crashed worker's session, a scheduled rebalance), are taken as sent, each worker's
        clocks and the coordinator's session timers moved as they would have, without sending them."""
        d = self.d
        group = d.state.classic_groups.get(self.group_id)
        if group is None or group.state is not ClassicGroupState.STABLE:
            return
        if any(w.waiting is not None or not w.worker.settled for w in self.alive.values()):
            return
        sessions = {timer_key(CLASSIC_SESSION, self.group_id, w.member_id): w for w in self.alive.values()}
        others = [t for k, t in d.timers.items() if k not in sessions]
        until = min([at_ms, *others])
        for key, w in sessions.items():
            member = group.members.get(w.member_id)
            if member is None:
                continue
            count, last = w.worker.heartbeats_answered_before(until)
            if count:
                w.heartbeats += count
                d.timers[key] = last + member.session_timeout_ms

    def until(self, at_ms: int) -> None:
        """Run what falls due before `at_ms` (what happens at it is the step's)."""
        d = self.d
        if at_ms <= d.now:
            return  # steps at one instant are applied together (joins recorded in one join phase)
        self._step()
        while True:
            self._skip_quiet(at_ms)
            nxt = self._next()
            if nxt is None or nxt >= at_ms:
                break
            d.advance(max(0, nxt - d.now))
            self._step()
            if nxt <= d.now and self._next() == nxt:
                d.advance(1)  # nothing could be done at that instant: do not spin on it
        d.advance(max(0, at_ms - d.now))

    def settle(self) -> None:
        """After the last step: on until the group is stable and no worker waits for a delay (a
        scheduled rebalance), at most a day of quiet; heartbeats alone do not keep it going."""
        horizon = self.d.now + _DAY_MS
        self._step()
        while self.d.now < horizon and not self._quiet():
            nxt = self._next()
            if nxt is None:
                break
            self.until(min(max(nxt, self.d.now) + 1, horizon))

    def _quiet(self) -> bool:
        """Every worker settled in its generation, none with a rejoin pending, no join phase open."""
        group = self.d.state.classic_groups.get(self.group_id)
        if group is not None and not _stable(group):
            return False
        return all(w.waiting is None and w.worker.settled for w in self.alive.values())


def _stable(group: Any) -> bool:  # a ClassicGroup
    return group.state in (ClassicGroupState.STABLE, ClassicGroupState.EMPTY)
