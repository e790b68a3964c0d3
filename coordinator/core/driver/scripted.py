"""A group's membership script driven through the coordinator on a virtual clock, fast.

`run_script` is a pure function: a list of `Step`s (workers joining, leaving, crashing, the
connectors changing), the group's settings, and the assignor in, the records the coordinator wrote
and the virtual time of each out. No I/O; `coordinator replay simulate` builds the steps from a
recorded history and reads the records back as a history of their own.

Theory of operation
-------------------
The coordinator is `Driver`'s, with `SimWorker`s for the workers; what is new is who is stepped
when. `converge`/`step_all` heartbeat every worker at every step, which costs a heartbeat per
worker per event (about 6.5 ms an event with 100 workers). Here:

- an alive worker's heartbeats are taken as arriving in time: its session timer never fires (it is
  dropped as it is armed). A crashed worker is one that stopped heartbeating at the step's time: its
  session timer is armed from there, and fires on the virtual clock as the coordinator's would;
- a worker heartbeats only when the group has something for its next heartbeat (`_behind`): while
  the target is computed, the member asked to compute it (server-side: any, once the coordinator
  may compute again); then a worker behind the assignment epoch or with a revocation to make or
  acknowledge; a worker waiting for released work, when a revocation is acknowledged. It
  heartbeats when its `Member` says (`heartbeat_due`: its own phase, whole intervals after the
  last heartbeat it sent, at once to acknowledge a revocation), as the SDK's workers do, with the
  intervals the coordinator gives it (shorter while a target is computed or work waits). The
  heartbeats it would have sent in between change nothing and are not sent;
- timers (scheduled rebalances, the initial assignment delay, the server-side assignment
  interval, crashed workers' sessions) fire in order as the clock passes them, between steps.
"""

from __future__ import annotations

import heapq
import itertools

from records import Assignor

from coordinator.core.assignors import ASSIGNORS, ConnectAssignor
from coordinator.core.assignors.incremental_cooperative import IncrementalCooperativeAssignor
from coordinator.core.driver.script import Crash, Join, Leave, ScriptRun, ScriptSettings, SetConnectors, Step
from coordinator.core.driver.scripted_classic import ClassicRun
from coordinator.core.driver.simulation import Driver, SimWorker
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.protocol import SESSION, timer_key
from coordinator.core.states import MemberState

# The script's vocabulary (script.py) is this module's too: a script and its run come from here.
__all__ = ["Crash", "Join", "Leave", "ScriptRun", "ScriptSettings", "SetConnectors", "Step", "run_script"]

# --- the run ---------------------------------------------------------------------------------------

_LAST_HEARTBEATS = 3  # a revocation, its acknowledgement, the new work


class _QuietDriver(Driver):
    """A Driver whose alive workers' session timers never fire, and which stamps every record."""

    def __init__(self, config: CoordinatorConfig, now: int) -> None:
        super().__init__(config, now)
        self.alive: dict[str, SimWorker] = {}
        self.stamps: list[int] = []

    def run(self, result):  # noqa: ANN001, ANN201
        response = super().run(result)
        self.stamps.extend([self.now] * len(result.records))
        for timer in result.timers:
            key = timer.key
            if key[0] == SESSION and len(key) == 3 and key[2] in self.alive and timer.deadline_ms is not None:
                del self.timers[key]  # it heartbeats in time
        return response

    def next_timer(self) -> int | None:
        return min(self.timers.values(), default=None)


def run_script(
    group_id: str,
    steps: list[Step],
    settings: ScriptSettings,
    start_ms: int,
    until_ms: int,
    switch: tuple[int, ScriptSettings] | None = None,
) -> ScriptRun:
    """Drive `steps` (in time order) through a coordinator with `settings` from `start_ms`; after
    the last step, go on until the group is quiet or `until_ms`, whichever is later. `switch`
    (at, other settings): from then on the other settings hold, as an operator would change them
    (the group's configuration set; the workers restarted with the other assignor)."""
    config = CoordinatorConfig(
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        scheduled_rebalance_max_delay_ms=settings.scheduled_rebalance_max_delay_ms,
        initial_assignment_delay_ms=settings.initial_assignment_delay_ms,
        default_server_assignor=settings.assignor,
    )
    d = _QuietDriver(config, start_ms)
    run = ClassicRun(d, group_id, settings) if settings.protocol == "classic" else _Run(d, group_id, settings)
    if switch is not None and switch[1].protocol != settings.protocol:
        raise ValueError("a run cannot switch protocols midway: run the other protocol from the start")
    for step in steps:
        if switch is not None and switch[0] <= step.at_ms:
            run.until(switch[0])
            run.switch(switch[1])
            switch = None
        run.until(step.at_ms)
        run.apply(step)
    if switch is not None:
        run.until(switch[0])
        run.switch(switch[1])
    run.until(until_ms)
    run.settle()
    return ScriptRun(d.log, d.stamps, run.heartbeats, d.now, run.given_up)


class _Run:
    def __init__(self, d: _QuietDriver, group_id: str, settings: ScriptSettings) -> None:
        self.d = d
        self.group_id = group_id
        self.settings = settings
        self.heartbeats = 0
        self.queue: list[tuple[int, int, str]] = []  # (when, order, member id): heartbeats due
        self.queued: set[str] = set()
        self.order = itertools.count()
        self.seen: tuple | None = None  # the group's epochs when the workers were last looked at
        self.waiting: set[str] = set()  # workers waiting for others to release their new work
        self.given_up: dict[str, str] = {}  # workers the coordinator refused for good, and why
        self.away: set[str] = set()  # static members that left for a while
        self.assignor_impl = _assignor_impl(settings)

    def switch(self, settings: ScriptSettings) -> None:
        """Other settings from now on: the group's timeouts as a configuration record, and the
        assignor on every worker (a change of it is a change of the members' metadata)."""
        d = self.d
        d.set_config(
            self.group_id,
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            scheduled_rebalance_max_delay_ms=settings.scheduled_rebalance_max_delay_ms,
            initial_assignment_delay_ms=settings.initial_assignment_delay_ms,
        )
        before = (self.settings.assignor, self.settings.server_side, self.settings.max_moves)
        self.settings = settings
        self.assignor_impl = _assignor_impl(settings)
        if (settings.assignor, settings.server_side, settings.max_moves) != before:
            for w in list(d.alive.values()):
                w.assignor_impl = self.assignor_impl
                server, client = _assignors(settings, self.assignor_impl)
                if server is None and w.member.server_assignor is None:
                    # The new one first, the old one still offered: the group keeps the old one
                    # until every member offers the new one, as in a rolling change.
                    client += tuple(a for a in w.member.client_assignors if a.name != client[0].name)
                w.member.set_assignors(server, client)
                self._heartbeat(w)
        self._changed()

    def apply(self, step: Step) -> None:
        d, alive = self.d, self.d.alive
        if isinstance(step, SetConnectors):
            d.set_connectors(self.group_id, step.connectors)
        elif isinstance(step, Join):
            self._join(step)
        elif step.member_id in alive:
            worker = alive.pop(step.member_id)
            if isinstance(step, Leave):
                worker.leave(static=step.static)
                if step.static:
                    self.away.add(step.member_id)
            else:
                alive[step.member_id] = worker  # alive until its last heartbeats are in
                for _ in range(_LAST_HEARTBEATS):
                    if step.held is None or worker.owned == step.held:
                        break
                    for w in [worker, *self._behind()]:  # the target may wait for another's heartbeat
                        self._heartbeat(w)
                del alive[step.member_id]
                worker.lose_everything()  # its last heartbeat was now: its session runs from here
                d.timers[timer_key(SESSION, self.group_id, step.member_id)] = d.now + self.settings.session_timeout_ms
        self._changed()

    def _join(self, step: Join) -> None:
        d, alive = self.d, self.d.alive
        old = alive.pop(step.member_id, None)
        if old is not None:
            old.lose_everything()  # a new process under the same member id: the old one is gone
        if step.instance_id is not None:  # a new member id for the instance: the old process is gone
            for member_id, w in list(alive.items()):
                if w.instance_id == step.instance_id:
                    del alive[member_id]
        client = self.assignor_impl is not None
        worker = SimWorker(
            d,
            self.group_id,
            step.member_id,
            instance_id=step.instance_id,
            assignor=self.settings.assignor if client else None,
            server_assignor=None if client else self.settings.assignor,
            assignor_impl=self.assignor_impl,
            rebalance_timeout_ms=step.rebalance_timeout_ms,
            session_timeout_ms=self.settings.session_timeout_ms,
        )
        alive[step.member_id] = worker
        self._heartbeat(worker)

    def _heartbeat(self, worker: SimWorker) -> None:
        if worker.member.given_up is not None:  # refused for good (run_script's `given_up` says why)
            self.d.alive.pop(worker.member_id, None)
            self.given_up.setdefault(worker.member_id, worker.member.given_up)
            return
        self.heartbeats += 1
        acknowledging = worker.member.acknowledgement_due  # a revocation: what it gave up is released now
        worker.heartbeat()
        group = self.d.state.groups.get(self.group_id)
        current = group.currents.get(worker.member_id) if group is not None else None
        if current is not None and current.state == MemberState.UNRELEASED:
            self.waiting.add(worker.member_id)
        else:
            self.waiting.discard(worker.member_id)
        self._changed(released=acknowledging or worker.member_id not in self.d.alive)
        if worker.member_id not in self.queued and _behind(worker, group, self.d.now):
            self._push(worker.member.heartbeat_due(), worker.member_id)

    def _push(self, when: int, member_id: str) -> None:
        heapq.heappush(self.queue, (max(when, self.d.now), next(self.order), member_id))
        self.queued.add(member_id)

    def _changed(self, released: bool = False) -> None:
        """Whether the group has something new for its workers: when its epochs move or the
        computation changes hands, each worker it has something for is due at its next heartbeat
        (its own phase: the last one it sent, plus whole intervals); when work is released, the
        workers waiting for released work are. (Whether the whole group has converged is not asked
        here: that walks every member; a converged group has nothing for any of them.)"""
        group = self.d.state.groups.get(self.group_id)
        if group is None:
            return
        computation = group.computation
        seen = (
            group.group_epoch,
            group.assignment_epoch,
            None if computation is None else computation.member_id,
            self.d.now >= group.server_assignment_not_before_ms,
        )
        if seen != self.seen:
            self.seen = seen
            candidates = list(self.d.alive.values())
        elif released and self.waiting:
            candidates = [self.d.alive[m] for m in self.waiting if m in self.d.alive]
        else:
            return
        now = self.d.now
        for w in candidates:
            if w.member_id in self.queued or not (_behind(w, group, now) or w.member_id in self.waiting):
                continue
            due, interval = w.member.heartbeat_due(), w.member.heartbeat_interval_ms
            if due < now:
                due += -(-(now - due) // interval) * interval
            self._push(due, w.member_id)

    def until(self, at_ms: int) -> None:
        """Run heartbeats and timers due before `at_ms` (what happens at it is the step's)."""
        d = self.d
        while True:
            timer = d.next_timer()
            beat = self.queue[0][0] if self.queue else None
            nxt = min(t for t in (timer, beat, at_ms) if t is not None)
            if nxt >= at_ms:
                break
            if timer is not None and timer == nxt:  # the coordinator's timers first, at a tie
                d.advance(timer - d.now)
                self._changed()
                continue
            d.advance(beat - d.now)
            _, _, member_id = heapq.heappop(self.queue)
            self.queued.discard(member_id)
            worker = d.alive.get(member_id)
            if worker is not None and (
                member_id in self.waiting or _behind(worker, d.state.groups.get(self.group_id), d.now)
            ):
                self._heartbeat(worker)
        d.advance(max(0, at_ms - d.now))

    def _behind(self) -> list[SimWorker]:
        group = self.d.state.groups.get(self.group_id)
        return [w for w in self.d.alive.values() if _behind(w, group, self.d.now) or w.member_id in self.waiting]

    def settle(self) -> None:
        """After the last step: on until no heartbeat is due and no timer is left (a crashed
        worker's session, a scheduled rebalance), the clock never running past a day of quiet. A
        static member that left for a while is not waited for: where the history ends, it may be back."""
        d = self.d
        horizon = d.now + 86_400_000
        while self.queue or any(not (k[0] == SESSION and len(k) == 3 and k[2] in self.away) for k in d.timers):
            nxt = min(t for t in (d.next_timer(), self.queue[0][0] if self.queue else None) if t is not None)
            if nxt > horizon:
                break
            self.until(nxt + 1)


def _assignor_impl(settings: ScriptSettings) -> ConnectAssignor | None:
    """The assignor the workers run (None: the coordinator runs it, server-side)."""
    if settings.max_moves is not None:
        return IncrementalCooperativeAssignor(max_moves=settings.max_moves)
    return None if settings.server_side else ASSIGNORS[settings.assignor]


def _assignors(settings: ScriptSettings, impl: ConnectAssignor | None) -> tuple[str | None, tuple[Assignor, ...]]:
    """What a member names: a server-side assignor, or its client-side one's version range."""
    if impl is None:
        return settings.assignor, ()
    return None, (Assignor(impl.name, impl.minimum_version, impl.maximum_version, 0, impl.maximum_version, b""),)


def _behind(worker: SimWorker, group, now: int) -> bool:  # noqa: ANN001 - a ConnectGroup
    """Whether the group has something for the worker's next heartbeat (in a converged group, none
    of these holds: every member is at the assignment epoch and stable). While the target is
    computed: the member asked to compute it (or any, until one is asked), or on a server-side
    assignor any, once the coordinator may compute again (before that, its timer computes).
    Then: a worker behind the assignment epoch, with a revocation to make or acknowledge. A worker
    waiting for others to release its new work is not: it is woken when a worker releases some."""
    if group is None:
        return False
    if group.group_epoch > group.assignment_epoch:
        computation = group.computation
        if computation is not None:
            return computation.member_id == worker.member_id
        if worker.member.server_assignor is not None:
            return now >= group.server_assignment_not_before_ms
        return True
    current = group.currents.get(worker.member_id)
    return (
        current is None
        or current.member_epoch != group.assignment_epoch
        or current.state == MemberState.UNREVOKED
        or worker.member.acknowledgement_due
    )
