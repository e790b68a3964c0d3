"""A stateful property test of the coordinator: many workers, two groups, time, failures.

A Hypothesis `RuleBasedStateMachine` drives one `Driver` (the coordinator on a virtual clock, its
log and its timers, `coordinator.core.driver`) with two groups: `g`, where most of the action is, and
`h`, which is there to show that nothing done to one group touches the other. Workers are
`SimWorker`s that follow the protocol, plus the ways real workers misbehave: they forget to
acknowledge a revocation, go silent, lose a response, leave statically and come back as a new
member with the same InstanceId, bounce with the same member id, sit on COMPUTE_ASSIGNMENT, install
a stale or a broken assignment, or report an assignor error. The coordinator fails over to a
replay of its (possibly compacted) log. Timeouts are small (DESIGN §5) so that time matters.

What is checked
---------------
After every handler (every `Driver.run`: heartbeats, prepares, installs, timers, admin requests):

- a handler's records and timers are about one group only (isolation);
- replaying the log from an empty `CoordinatorState`, every record through encode/decode, gives
  exactly the live `slots()` (DESIGN §3);
- no connector or task is held (`assignment` ∪ `pending_revocation` of type 8) by two members,
  and the owners cache agrees;
- epochs: member epoch <= assignment epoch <= group epoch (member epoch -2 for a static member
  that left), group and assignment epochs never go back, a member's epoch never goes back while it
  stays the same member life (a heartbeat with epoch 0 starts a new life);
- the type 8 states mean what `coordinator.core.reconciliation` says: STABLE at the target epoch owns
  exactly its target, UNREVOKED has something pending, targets never overlap or overlap deferred work;
- after every heartbeat answered NONE/COMPUTE_ASSIGNMENT, the worker's epoch and what it owns are
  the coordinator's (type 8); a worker never revokes and gains in one response (SimWorker);
- a chosen worker that prepares and installs at once is never refused; a broken assignment is
  refused with INVALID_ASSIGNMENT and writes nothing.

After every step (`@invariant`): the compacted log (last value per key, tombstoned keys dropped, in
the order of each key's last offset) replays to the live slots; no item runs on two workers, the
coordinator's members or zombies (workers it removed that have not heard so, until they stop their
work a session after their last answer; `check_workers` says which zombies are left out), and each
member owns only what the coordinator says it holds; the timers that liveness depends on are armed.

Convergence: the `settle` rule (also run at the end of every example) stops changing inputs and
lets every live worker heartbeat round after round, the clock moving by less than any session or
rebalance timeout between rounds; within `SETTLE_ROUNDS` rounds every group must be STABLE at
assignment epoch == group epoch, every member owning exactly its target, every configured item
owned by exactly one member and nothing else, nothing deferred, no departed work remembered and no
scheduled rebalance pending, the assignment balanced as its assignor promises, and every live
worker's own view equal to the coordinator's.

Bugs the machine found are kept as plain scenarios at the end of this file.

Examples: 2,000 of up to 50 steps by default (CI, about 70 s on 2 cores). `STATEFUL_EXAMPLES=50000`
(and optionally `STATEFUL_STEPS`) runs more, as `make test-long` does; `STATEFUL_PROFILE=test-long`
selects the `test-long` profile registered below (50,000 examples, 50 steps).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace

import msgspec
import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from records import TaskId, decode, encode

from coordinator.core.assignors import ASSIGNORS, MemberAssignment
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.heartbeat import MIN_HEARTBEAT_INTERVAL_MS
from coordinator.core.items import connectors_and_tasks, items_of
from coordinator.core.protocol import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ErrorCode,
    HeartbeatRequest,
    InstallAssignmentRequest,
    InstallMember,
    LeaveReason,
    PrepareAssignmentRequest,
)
from coordinator.core.selection import SERVER, group_assignor
from coordinator.core.state import CoordinatorState
from coordinator.core.states import MemberState

# --- settings -------------------------------------------------------------------------------------

_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
settings.register_profile("stateful-ci", max_examples=2_000, stateful_step_count=50, **_COMMON)
settings.register_profile("test-long", max_examples=50_000, stateful_step_count=50, **_COMMON)
_PROFILE = settings.get_profile(os.environ.get("STATEFUL_PROFILE", "stateful-ci"))
EXAMPLES = int(os.environ.get("STATEFUL_EXAMPLES", _PROFILE.max_examples))
STEPS = int(os.environ.get("STATEFUL_STEPS", _PROFILE.stateful_step_count))

GROUPS = ("g", "h")
SETTLE_ROUNDS = 40
MAX_LIVE_WORKERS = 7  # per machine; more only slows each example down

# The coordinator's own defaults are minutes; these keep every example within seconds of virtual time.
COORDINATOR_CONFIG = CoordinatorConfig(assignor_error_backoff_ms=500)
INITIAL_CONFIG = dict(session_timeout_ms=1000, heartbeat_interval_ms=100, rebalance_timeout_ms=500)

CLIENT_ASSIGNORS = ("incremental_cooperative", "eager")
SERVER_ASSIGNORS = ("server:incremental_cooperative", "server:eager")
GROUP_ASSIGNORS = st.sampled_from(CLIENT_ASSIGNORS + SERVER_ASSIGNORS)
# Mostly the group's own assignor, so that most joins succeed; sometimes another, to mix kinds.
# "name@low-high": a client-side assignor offered with versions [low, high] only (Worker Selection).
JOIN_ASSIGNORS = st.sampled_from(
    (
        "default",
        "default",
        "default",
        *CLIENT_ASSIGNORS,
        *SERVER_ASSIGNORS,
        "incremental_cooperative@0-0",
        "incremental_cooperative@1-1",
    )
)
CONNECTORS = st.dictionaries(st.sampled_from("ABCD"), st.integers(0, 3), max_size=3)
GROUP = st.sampled_from(("g", "g", "g", "h"))
BREAKAGES = (
    "assign_twice",
    "drop_item",
    "unknown_member",
    "unconfigured_item",
    "defer_without_delay",
    "delay_beyond_max",
    "assigned_and_deferred",
)
CHOSEN_ACTIONS = (
    "compute_late",
    "compute_late",
    "prepare_only",
    "prepare_only",
    "prepare_only",
    "install_stale",
    "install_stale",
    "install_stale",
    "assignor_error",
    *(f"broken:{b}" for b in BREAKAGES),
)
WORKER_EVENTS = (
    "leave",
    "rejoin_after_leaving",
    "static_leave",
    "static_return",
    "static_return_same_id",
    "bounce",
    "go_silent",
    "revive",
    "revive",
    "response_lost",
    "response_lost",
    "second_instance",
    "assignor_reason_changes",
)

OK = (ErrorCode.NONE, ErrorCode.COMPUTE_ASSIGNMENT)
# What a live worker's heartbeat may be told. UNSUPPORTED_ASSIGNOR: a fenced worker rejoins a group
# whose assignor changed meanwhile. Never INVALID_REQUEST (SimWorker sends valid requests) and never
# UNRELEASED_INSTANCE_ID (one process per InstanceId).
HEARTBEAT_ANSWERS = (*OK, ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNSUPPORTED_ASSIGNOR)
# Prepare/Install by a worker that is not (or no longer) the chosen one, or whose epoch moved.
NOT_CHOSEN = (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.GROUP_ID_NOT_FOUND)


def item_key(item):  # noqa: ANN001, ANN201
    return (item, -1) if isinstance(item, str) else (item.connector, item.task)


def held(current) -> frozenset:  # noqa: ANN001
    return items_of(current.assignment) | items_of(current.pending_revocation)


def compact(log: list) -> list:
    """What compaction keeps: the last record of each key, tombstoned keys dropped, in offset order."""
    last = {}
    for offset, record in enumerate(log):
        last[record.key] = (offset, record)
    return [record for _, record in sorted(last.values(), key=lambda pair: pair[0]) if record.value is not None]


def roundtrip(record):  # noqa: ANN001, ANN201
    """The record as a coordinator that loads the topic reads it: fresh objects, through the codec."""
    return decode(*encode(record))


# --- the worker and the driver, instrumented ------------------------------------------------------


class Worker(SimWorker):
    """A SimWorker that can also misbehave: skip an acknowledgement, lose a response, sit on
    COMPUTE_ASSIGNMENT, and that remembers whether the coordinator removed it behind its back."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        # Removed by the coordinator while it believed it was a member: why (a LeaveReason), else None.
        self.zombie: str | None = None
        self.compute_pending = False  # told COMPUTE_ASSIGNMENT and did not compute yet
        self.prepared = None  # a PrepareAssignmentResponse kept for a later (maybe stale) install

    def heartbeat(self, *, compute: bool = True, ack: bool = True, lose_response: bool = False):  # noqa: ANN201
        member, now = self.member, self.driver.now
        full = member.full_request
        request = member.heartbeat(now)
        if not ack and not full:
            request = msgspec.structs.replace(request, owned=None)  # forgets to say what it owns (to acknowledge)
        response = self.driver.heartbeat(request)
        assert response.error_code in HEARTBEAT_ANSWERS, (request, response)
        if lose_response:
            self.carry_out(member.failed(now, "the response was lost"))
            return response
        self.carry_out(member.received(response, now, request), compute=False)
        if response.error_code in OK:
            # The answer is the coordinator's view of this member, and the worker now shares it.
            group = self.driver.state.groups[self.group_id]
            current = group.current(self.member_id)
            assert self.member_id in group.members, (request, response)
            assert response.member_epoch == current.member_epoch, (request, response, current)
            assert self.owned == items_of(current.assignment), (
                f"{self.member_id} owns {sorted(map(str, self.owned))} after {request} -> {response}, "
                f"the coordinator says {current}"
            )
            # The group's interval, or shorter (never below 100 ms) while a rebalance is under way.
            interval = self.driver.coordinator.settings(group).heartbeat_interval_ms
            assert min(interval, MIN_HEARTBEAT_INTERVAL_MS) <= response.heartbeat_interval_ms <= interval
            if request.member_epoch == 0:
                self.zombie = None  # a join starts a new life: the coordinator forgot the old one
            self.compute_pending = response.error_code == ErrorCode.COMPUTE_ASSIGNMENT
            if self.compute_pending and compute:
                self.compute_assignment()
        return response

    def lose_everything(self) -> None:
        super().lose_everything()
        self.zombie = None
        self.compute_pending = False
        self.prepared = None

    def prepare(self):  # noqa: ANN201
        return self.driver.run(
            self.driver.coordinator.prepare_assignment(
                PrepareAssignmentRequest(self.group_id, self.member_id, self.member_epoch), self.driver.now
            )
        )

    def compute_assignment(self):  # noqa: ANN201
        """PrepareAssignment, the group's assignor, InstallAssignment at once: the install must succeed."""
        self.compute_pending = False
        prepared = self.prepare()
        if prepared.error_code:
            assert prepared.error_code in NOT_CHOSEN, prepared
            return prepared
        result = ASSIGNORS[prepared.assignor_name].assign(prepared)
        response = self.install(prepared.group_epoch, result)
        assert response.error_code == ErrorCode.NONE, (
            f"{self.member_id} prepared and installed at once, the coordinator refused: {response}"
        )
        return response


class CheckedDriver(Driver):
    """A Driver that checks the per-handler invariants after every handler it runs."""

    def __init__(self, machine: CoordinatorMachine, now: int = 0) -> None:
        super().__init__(COORDINATOR_CONFIG, now)
        self.machine = machine
        self.joining: tuple[str, str] | None = None

    def heartbeat(self, request: HeartbeatRequest):  # noqa: ANN201
        self.joining = (request.group_id, request.member_id) if request.member_epoch == 0 else None
        try:
            return super().heartbeat(request)
        finally:
            self.joining = None

    def run(self, result):  # noqa: ANN001, ANN201
        response = super().run(result)
        self.machine.after_handler(self, result)
        return response


@dataclass
class Proc:
    """A worker process. Its SimWorker is replaced when it comes back as a new member (takeover)."""

    label: str
    group: str
    assignor: str
    static: bool
    rebalance_timeout_ms: int
    worker: Worker
    status: str = "active"  # active, silent, away (left with -2), gone (left with -1), rejected

    def __repr__(self) -> str:
        return f"<{self.label} {self.worker.member_id} {self.status}>"


def step(function):  # noqa: ANN001, ANN201
    """Marks the machine as mid-step, so that teardown does not settle after a failure."""

    @functools.wraps(function)
    def wrapper(self, **kwargs):  # noqa: ANN001, ANN003, ANN202
        self.clean = False
        result = function(self, **kwargs)
        self.clean = True
        return result

    return wrapper


# --- the machine ----------------------------------------------------------------------------------


class CoordinatorMachine(RuleBasedStateMachine):
    workers = Bundle("workers")

    def __init__(self) -> None:
        super().__init__()
        self.driver = CheckedDriver(self)
        self.shadow = CoordinatorState()
        self.shadow_offset = 0
        self.procs: list[Proc] = []
        self.default_assignor = dict.fromkeys(GROUPS, "incremental_cooperative")
        self.epochs: dict[str, tuple[int, int]] = {}
        self.lives: dict[tuple[str, str], int] = {}
        self.members_seen: dict[str, set[str]] = {g: set() for g in GROUPS}
        self.by_member: dict[tuple[str, str], Worker] = {}
        self.next_id = 0
        self.clean = True
        # Workers that a coordinator loaded while they believed a longer session than their group's
        # (a SetConfig shortened it and they had not heard): check_workers says why they are left out.
        self.unheard_at_load: set[SimWorker] = set()

    # --- plumbing ----------------------------------------------------------------------------------

    @property
    def state(self) -> CoordinatorState:
        return self.driver.state

    def group(self, group_id: str):  # noqa: ANN201
        return self.state.groups.get(group_id)

    def new_worker(
        self, proc_group: str, assignor: str, static: bool, rebalance_timeout_ms: int, instance_id: str | None
    ) -> Worker:
        self.next_id += 1
        member_id = f"{proc_group}-m{self.next_id}"
        if assignor.startswith("server:"):
            worker = Worker(
                self.driver,
                proc_group,
                member_id,
                instance_id=instance_id,
                assignor=None,
                server_assignor=assignor.removeprefix("server:"),
                rebalance_timeout_ms=rebalance_timeout_ms,
            )
        else:
            name, _, versions = assignor.partition("@")  # "incremental_cooperative@1-1": versions [1, 1]
            low_high = tuple(map(int, versions.split("-"))) if versions else None
            worker = Worker(
                self.driver,
                proc_group,
                member_id,
                instance_id=instance_id,
                assignor=name,
                rebalance_timeout_ms=rebalance_timeout_ms,
                versions=low_high,
            )
        self.by_member[(proc_group, member_id)] = worker
        return worker

    def live(self) -> list[Proc]:
        return [p for p in self.procs if p.status in ("active", "silent", "away")]

    def join_response(self, proc: Proc, response) -> None:  # noqa: ANN001
        if response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR:
            proc.status = "rejected"  # a real worker would stop with a configuration error
        note(
            f"{proc.label} ({proc.worker.member_id}): {ErrorCode(response.error_code).name}, "
            f"epoch {response.member_epoch}, owns {sorted(map(str, proc.worker.owned))}"
        )

    def heartbeat(self, proc: Proc, **kwargs) -> None:  # noqa: ANN003
        response = proc.worker.heartbeat(**kwargs)
        if response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR:
            proc.status = "rejected"

    # --- checks after every handler -------------------------------------------------------------

    def after_handler(self, driver: CheckedDriver, result) -> None:  # noqa: ANN001
        touched = {r.key.group_id for r in result.records}
        touched |= {t.key[1] for t in result.timers}
        touched |= {u.group_id for u in result.volatile}
        assert len(touched) <= 1, f"one handler changed several groups: {touched}"

        log = driver.log
        replay = self.shadow.replay
        for record in log[self.shadow_offset :]:
            replay(roundtrip(record))
        self.shadow_offset = len(log)
        if result.records:
            assert self.shadow.slots() == driver.state.slots(), "replaying the log does not give the live state"

        removed = {
            (r.key.group_id, d.member_id): d.reason for r in result.records for d in getattr(r.value, "departures", ())
        }
        for group_id in GROUPS:
            self.check_group(driver, group_id, removed)

    def check_group(self, driver: CheckedDriver, group_id: str, removed: dict[tuple[str, str], str]) -> None:
        group = driver.state.groups.get(group_id)
        if group is None:
            assert self.epochs.get(group_id, (0, 0)) == (0, 0), f"group {group_id} vanished"
            return
        group_epoch, assignment_epoch = group.group_epoch, group.assignment_epoch
        assert assignment_epoch <= group_epoch, (group_id, group_epoch, assignment_epoch)
        last_group, last_assignment = self.epochs.get(group_id, (0, 0))
        assert group_epoch >= last_group, f"{group_id}: group epoch went back {last_group} -> {group_epoch}"
        assert assignment_epoch >= last_assignment, (
            f"{group_id}: assignment epoch went back {last_assignment} -> {assignment_epoch}"
        )
        self.epochs[group_id] = (group_epoch, assignment_epoch)

        members = group.members
        assert set(group.currents) == set(members), (
            f"{group_id}: members {sorted(members)} but current assignments for {sorted(group.currents)}"
        )
        assert set(group.targets) <= set(members), (
            f"{group_id}: targets of non-members {set(group.targets) - set(members)}"
        )

        holder: dict = {}
        for member_id, current in group.currents.items():
            epoch = current.member_epoch
            owned = items_of(current.assignment)
            pending = items_of(current.pending_revocation)
            where = f"{group_id}/{member_id} {current}"
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                assert members[member_id].instance_id is not None, f"dynamic member at epoch -2: {where}"
            else:
                assert 0 <= epoch <= assignment_epoch, f"member epoch out of [0, {assignment_epoch}]: {where}"
                assert current.previous_member_epoch < epoch or epoch == 0, f"previous epoch not below: {where}"
            assert not owned & pending, f"owned and pending revocation at once: {where}"
            if current.state == MemberState.UNREVOKED:
                assert pending, f"UNREVOKED with nothing to revoke: {where}"
            else:
                assert not pending, f"{current.state} with pending revocations: {where}"
            if epoch == assignment_epoch and epoch >= 0 and current.state != MemberState.UNREVOKED:
                target = group.targets.get(member_id)
                wanted = items_of(target.assignment) if target is not None else frozenset()
                if current.state == MemberState.STABLE:
                    assert owned == wanted, f"STABLE at the target epoch but not owning its target {wanted}: {where}"
                else:
                    assert owned < wanted, f"UNRELEASED not owning a strict part of its target {wanted}: {where}"
            for item in owned | pending:
                assert item not in holder, f"{group_id}: {item} held by {holder[item]} and {member_id}"
                holder[item] = member_id
            # member epochs never go back within one member life
            key = (group_id, member_id)
            last = self.lives.get(key)
            if last is not None and driver.joining != key:
                if epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    assert last != LEAVE_GROUP_STATIC_MEMBER_EPOCH, (
                        f"{group_id}/{member_id} left statically (-2) and is back at {epoch} without rejoining"
                    )
                    assert epoch >= last, f"{group_id}/{member_id}: member epoch went back {last} -> {epoch}"
            self.lives[key] = epoch
        assert group.owners() == holder, f"{group_id}: the owners cache disagrees with the current assignments"
        for key in [k for k in self.lives if k[0] == group_id and k[1] not in group.currents]:
            del self.lives[key]

        # targets: each item in at most one target, never both targeted and deferred
        meta = group.target_metadata
        targeted: dict = {}
        for member_id, target in group.targets.items():
            for item in items_of(target.assignment):
                assert item not in targeted, f"{group_id}: {item} in the targets of {targeted[item]} and {member_id}"
                targeted[item] = member_id
        if meta is not None:
            both = items_of(meta.deferred) & set(targeted)
            assert not both, f"{group_id}: deferred and targeted at once: {both}"
            if meta.deferred.connectors or meta.deferred.tasks:
                # pending: the scheduled rebalance, the target it asked for, or the retry after an
                # assignor error (which keeps the previous target, deferred work included)
                assert meta.scheduled_rebalance_at_ms is not None or group_epoch > assignment_epoch or meta.error, (
                    f"{group_id}: deferred work {meta.deferred} with no rebalance pending"
                )

        # static membership: one member per InstanceId, and the lookup agrees
        instances = {}
        for member_id, member in members.items():
            if member.instance_id is not None:
                assert member.instance_id not in instances, (
                    f"{group_id}: instance {member.instance_id} held by {instances[member.instance_id]} and {member_id}"
                )
                instances[member.instance_id] = member_id
                assert group.member_with_instance(member.instance_id) == member_id

        # which workers the coordinator removed while they still believed they were members
        now_members = set(members)
        for member_id in self.members_seen[group_id] - now_members:
            worker = self.by_member.get((group_id, member_id))
            if worker is not None and worker.joined:
                worker.zombie = removed.get((group_id, member_id), "not said")
        self.members_seen[group_id] = now_members

    # --- invariants after every step ------------------------------------------------------------

    def check_invariants(self, *args) -> None:  # noqa: ANN002
        self.clean = False
        super().check_invariants(*args)
        self.clean = True

    @invariant()
    def compacted_log_replays_to_live_state(self) -> None:
        replayed = CoordinatorState()
        replayed.replay_all(compact(self.driver.log))
        assert replayed.slots() == self.state.slots(), "replaying the compacted log does not give the live state"

    @invariant()
    def no_two_member_workers_own_the_same_item(self) -> None:
        self.check_workers()

    def check_workers(self) -> None:
        """No item runs on two workers, zombies included. A zombie (removed by the coordinator while
        it still believes it is a member) runs its work until it learns so, at its next heartbeat,
        or until it stops the work itself: a session timeout after its last answered heartbeat was
        sent (`Member.poll`, which the SDK's worker calls as time passes; SimWorker carries out only
        what answers say, so that deadline is applied here). The coordinator's session timer starts
        no earlier, so a worker removed for its session has stopped before its work goes to another.

        One kind of zombie is left out, a gap of the protocol as Kafka defines it: a member fenced
        for not acknowledging a revocation within its rebalance timeout (REBALANCE_TIMEOUT) while it
        still heartbeats. Its whole assignment is given out at once, also what it was not asked to
        revoke and still runs until its next heartbeat tells it (a worker whose `on_revoked` outlasts
        the rebalance timeout is the same case). Counting it fails this check.

        A second gap, of the records: a member's session timer after a failover. A SetConfig that
        shortens a group's session reaches a member with its next answer; one that cannot hear
        (silent) keeps the longer session it was told. The live coordinator's timer keeps it too,
        but a coordinator that loads the group arms every session timer with the group's current
        value, because no record says what each member was told, and gives the silent member's
        work away while it still runs it. Such a zombie (`unheard_at_load`) is left out until the
        records carry it (its own issue)."""
        owner: dict = {}
        now = self.driver.now
        for proc in self.procs:
            w = proc.worker
            if not w.joined:
                continue  # owns nothing
            if w.zombie == LeaveReason.REBALANCE_TIMEOUT:
                continue
            if w.zombie == LeaveReason.SESSION_TIMEOUT and w in self.unheard_at_load:
                continue
            if w.zombie is None:
                group = self.group(w.group_id)
                assert group is not None and w.member_id in group.members, f"{proc} is not a member and was not removed"
                current = group.current(w.member_id)
                extra = w.owned - held(current)
                assert not extra, f"{proc} owns {extra}, which the coordinator does not count as its: {current}"
            deadline = w.member.fence_deadline()
            if deadline is not None and now >= deadline:
                continue  # no heartbeat answered for a whole session: it has stopped its work
            for item in w.owned:
                key = (w.group_id, item)
                assert key not in owner, f"{item} runs on workers {owner[key]} and {proc}" + (
                    f" (removed by the coordinator: {w.zombie}; it has not heard yet)" if w.zombie else ""
                )
                owner[key] = proc

    @invariant()
    def timers_that_liveness_needs_are_armed(self) -> None:
        timers = self.driver.timers
        coordinator = self.driver.coordinator
        for group_id, group in self.state.groups.items():
            for member_id, current in group.currents.items():
                assert ("session", group_id, member_id) in timers, f"no session timer for {group_id}/{member_id}"
                if current.state == MemberState.UNREVOKED:
                    assert ("rebalance", group_id, member_id) in timers, (
                        f"no rebalance timer for UNREVOKED {group_id}/{member_id}"
                    )
            meta = group.target_metadata
            if meta is not None and meta.scheduled_rebalance_at_ms is not None:
                assert timers.get(("scheduled-rebalance", group_id)) == meta.scheduled_rebalance_at_ms, (
                    f"{group_id}: scheduled rebalance at {meta.scheduled_rebalance_at_ms} but the timer is "
                    f"{timers.get(('scheduled-rebalance', group_id))}"
                )
            if meta is not None and meta.error and group.group_epoch == group.assignment_epoch:
                assert ("assignment-retry", group_id) in timers, f"{group_id}: assignor error and no retry armed"
            if group.group_epoch > group.assignment_epoch and group.members:
                chosen = group_assignor(group.members.values(), coordinator.config.default_server_assignor)
                computation = group.computation
                window = group.initial_assignment_window
                if window is not None and window[1] > self.driver.now:
                    # a new group waiting for more members: its first target when the wait ends
                    assert timers.get(("initial-assignment", group_id)) == window[1], (
                        f"{group_id}: waits until {window[1]} for more members, timer "
                        f"{timers.get(('initial-assignment', group_id))}"
                    )
                elif chosen is not None and chosen.kind == SERVER:
                    # the end of the server-side interval, or (after a failover) "compute at once"
                    assert ("server-assignment", group_id) in timers or ("assignment", group_id) in timers, (
                        f"{group_id}: server-side target due and no timer"
                    )
                elif computation is not None:
                    assert timers.get(("assignment", group_id)) == computation.deadline_ms, (
                        f"{group_id}: {computation.member_id} computes until {computation.deadline_ms}, timer "
                        f"{timers.get(('assignment', group_id))}"
                    )

    # --- setup -------------------------------------------------------------------------------------

    @initialize(
        target=workers,
        assignor_g=GROUP_ASSIGNORS,
        assignor_h=GROUP_ASSIGNORS,
        delay=st.sampled_from((0, 200, 1000)),
        connectors_g=CONNECTORS,
        connectors_h=CONNECTORS,
        static_g=st.lists(st.booleans(), min_size=1, max_size=4),
        static_h=st.lists(st.booleans(), max_size=2),
    )
    @step
    def setup(
        self,
        assignor_g: str,
        assignor_h: str,
        delay: int,
        connectors_g: dict,
        connectors_h: dict,
        static_g: list[bool],
        static_h: list[bool],
    ):  # noqa: ANN201
        """Both groups get small timeouts and connectors; `static_*`: how many workers start, which are static."""
        self.default_assignor = {"g": assignor_g, "h": assignor_h}
        for group_id, connectors in (("g", connectors_g), ("h", connectors_h)):
            response = self.driver.set_config(group_id, **INITIAL_CONFIG, scheduled_rebalance_max_delay_ms=delay)
            assert response.error_code == ErrorCode.NONE, response
            response = self.driver.set_connectors(group_id, connectors)
            assert response.error_code == ErrorCode.NONE, response
        procs = [
            self.start(group_id, self.default_assignor[group_id], static, 1000)
            for group_id, flags in (("g", static_g), ("h", static_h))
            for static in flags
        ]
        return multiple(*procs)

    def start(self, group: str, assignor: str, static: bool, rebalance_timeout_ms: int) -> Proc:
        label = f"{group}-p{len(self.procs)}"
        worker = self.new_worker(
            group, assignor, static, rebalance_timeout_ms, instance_id=f"{label}-instance" if static else None
        )
        proc = Proc(label, group, assignor, static, rebalance_timeout_ms, worker)
        self.procs.append(proc)
        self.join_response(proc, worker.heartbeat())
        return proc

    # --- membership ------------------------------------------------------------------------------

    @precondition(lambda self: len(self.live()) < MAX_LIVE_WORKERS)
    @rule(
        target=workers,
        group=GROUP,
        assignor=JOIN_ASSIGNORS,
        static=st.booleans(),
        rebalance_timeout_ms=st.sampled_from((300, 1000, 5000)),
    )
    @step
    def join(self, group: str, assignor: str, static: bool, rebalance_timeout_ms: int):  # noqa: ANN201
        """A new worker process joins (epoch 0) with a new member id."""
        return self.start(
            group, self.default_assignor[group] if assignor == "default" else assignor, static, rebalance_timeout_ms
        )

    @rule(proc=workers, event=st.sampled_from(WORKER_EVENTS))
    @step
    def worker_event(self, proc: Proc, event: str) -> None:
        """Something happens to one worker process; a no-op when it does not apply to the process's status.

        leave: epoch -1, for good. rejoin_after_leaving: a worker that left starts again with the same
        member id. static_leave: epoch -2, its assignment waits for its InstanceId. static_return: back
        after a static leave as a NEW member id with the same InstanceId (takeover). bounce: restarts
        with the same member id (loses everything, epoch 0). go_silent: stops heartbeating (crash,
        partition); the session timeout should fence it. revive: a silent worker heartbeats again with
        the epoch it had. response_lost: the coordinator handles a heartbeat whose answer never
        arrives. second_instance: another process claims an InstanceId whose member has not left.
        """
        getattr(self, f"event_{event}")(proc)

    def event_leave(self, proc: Proc) -> None:
        if proc.status not in ("active", "silent"):
            return
        response = proc.worker.leave()
        assert response.error_code in (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID), response
        proc.status = "gone"

    def event_rejoin_after_leaving(self, proc: Proc) -> None:
        if proc.status != "gone" or len(self.live()) >= MAX_LIVE_WORKERS:
            return
        proc.status = "active"
        self.join_response(proc, proc.worker.heartbeat())

    def event_static_leave(self, proc: Proc) -> None:
        if proc.status != "active" or not proc.static:
            return
        response = proc.worker.leave(static=True)
        assert response.error_code in (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID), response
        proc.status = "away"

    def event_static_return(self, proc: Proc) -> None:
        if proc.status != "away":
            return
        old = proc.worker
        proc.worker = self.new_worker(proc.group, proc.assignor, True, proc.rebalance_timeout_ms, old.instance_id)
        proc.status = "active"
        group = self.group(proc.group)
        holder = group.member_with_instance(old.instance_id) if group is not None else None
        note(f"{proc.label}: {old.member_id} -> {proc.worker.member_id}, instance held by {holder}")
        response = proc.worker.heartbeat()
        self.join_response(proc, response)
        if response.error_code in OK:
            assert old.member_id not in self.group(proc.group).members, "the static member was not taken over"

    def event_static_return_same_id(self, proc: Proc) -> None:
        """Back after a static leave with the member id it had (epoch 0)."""
        if proc.status != "away":
            return
        proc.status = "active"
        self.join_response(proc, proc.worker.heartbeat())

    def event_second_instance(self, proc: Proc) -> None:
        if proc.status != "active" or not proc.static:
            return
        group = self.group(proc.group)
        holder = group.member_with_instance(proc.worker.instance_id) if group is not None else None
        if holder is None or group.current(holder).member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return
        log_size = len(self.driver.log)
        intruder = SimWorker(
            self.driver,
            proc.group,
            f"{proc.group}-intruder",
            instance_id=proc.worker.instance_id,
            assignor=None,
            server_assignor="incremental_cooperative",
        )
        response = intruder.heartbeat()
        assert response.error_code == ErrorCode.UNRELEASED_INSTANCE_ID, response
        assert len(self.driver.log) == log_size

    def event_bounce(self, proc: Proc) -> None:
        if proc.status not in ("active", "silent"):
            return
        proc.status = "active"
        proc.worker.lose_everything()
        self.join_response(proc, proc.worker.heartbeat())

    def event_go_silent(self, proc: Proc) -> None:
        if proc.status == "active":
            proc.status = "silent"

    def event_revive(self, proc: Proc) -> None:
        if proc.status != "silent":
            return
        proc.status = "active"
        self.heartbeat(proc)

    def event_assignor_reason_changes(self, proc: Proc) -> None:
        """A client-side member's assignor Reason changes (seed 000: that asks for a new target)."""
        w = proc.worker
        if proc.status != "active" or not w.joined or not w.client_assignors:
            return
        w.member.set_assignors(None, tuple(msgspec.structs.replace(a, reason=a.reason + 1) for a in w.client_assignors))
        epoch = self.group(proc.group).group_epoch
        response = w.heartbeat()
        if response.error_code in OK:
            assert self.group(proc.group).group_epoch > epoch, "a new assignor Reason did not bump the group epoch"
        elif response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR:
            # It had been removed (its session expired before any target) and this was a rejoin,
            # into a group that uses another assignor by now: a real worker stops, refused.
            proc.status = "rejected"

    def event_response_lost(self, proc: Proc) -> None:
        if proc.status == "active":
            self.heartbeat(proc, lose_response=True)

    # --- heartbeats --------------------------------------------------------------------------------

    @rule(proc=workers, ack=st.booleans(), compute=st.booleans())
    @step
    def heartbeat_once(self, proc: Proc, ack: bool, compute: bool) -> None:
        """ack=False: does not say what it owns even if it revoked something (forgets to acknowledge);
        compute=False: sits on COMPUTE_ASSIGNMENT (`chosen_worker_acts(action='compute_late')` does it later)."""
        if proc.status == "active":
            self.heartbeat(proc, ack=ack, compute=compute)

    @rule(ack=st.booleans(), compute=st.booleans())
    @step
    def heartbeat_round(self, ack: bool, compute: bool) -> None:
        """Every active worker heartbeats once, in order."""
        for proc in self.procs:
            if proc.status == "active":
                self.heartbeat(proc, ack=ack, compute=compute)

    # --- the chosen worker -------------------------------------------------------------------------

    @rule(group=GROUP, action=st.sampled_from(CHOSEN_ACTIONS))
    @step
    def chosen_worker_acts(self, group: str, action: str) -> None:
        """What the worker the coordinator chose to compute the target does (no-op if there is none).

        compute_late: prepares and installs now, after sitting on COMPUTE_ASSIGNMENT. prepare_only:
        PrepareAssignment, keeping the answer. install_stale: installs the kept answer, however old
        (any worker of the group that kept one). broken:<how>: installs an assignment that breaks seed
        000's validation: refused with INVALID_ASSIGNMENT, nothing changes. assignor_error: installs
        Error != 0: every target is kept, the epoch is stamped, a retry is armed.
        """
        if action == "install_stale":
            procs = [p for p in self.procs if p.group == group and p.status == "active" and p.worker.prepared]
            if procs:
                self.install_stale(procs[0])
            return
        state = self.group(group)
        chosen = state.computation.member_id if state is not None and state.computation is not None else None
        procs = [p for p in self.procs if p.status == "active" and p.worker.member_id == chosen and p.group == group]
        if not procs:
            return
        proc = procs[0]
        note(f"chosen: {proc}")
        if action == "compute_late":
            proc.worker.compute_assignment()
        elif action == "prepare_only":
            prepared = proc.worker.prepare()
            if prepared.error_code:
                assert prepared.error_code in NOT_CHOSEN, prepared
            else:
                proc.worker.prepared = prepared
        elif action == "assignor_error":
            self.install_assignor_error(proc)
        else:
            self.install_broken(proc, action.removeprefix("broken:"))

    def install_stale(self, proc: Proc) -> None:
        w = proc.worker
        prepared, w.prepared = w.prepared, None
        result = ASSIGNORS[prepared.assignor_name].assign(prepared)
        response = w.install(prepared.group_epoch, result)
        note(
            f"{proc.label} installs for group epoch {prepared.group_epoch}: {ErrorCode(response.error_code).name} "
            f"{response.error_message or ''}"
        )
        assert response.error_code in (ErrorCode.NONE, ErrorCode.INVALID_ASSIGNMENT, *NOT_CHOSEN), response

    def install_broken(self, proc: Proc, breakage: str) -> None:
        w = proc.worker
        prepared = w.prepare()
        if prepared.error_code:
            assert prepared.error_code in NOT_CHOSEN, prepared
            return
        spec = prepared
        result = ASSIGNORS[prepared.assignor_name].assign(spec)
        members = {m: set(items_of(a.assignment)) for m, a in result.members.items()}
        deferred = set(items_of(result.deferred))
        delay = result.scheduled_rebalance_delay_ms
        assigned = sorted(((item_key(i), m, i) for m, items in members.items() for i in items), key=lambda t: t[:2])
        if breakage == "assign_twice":
            if not assigned or len(members) < 2:
                return
            _, owner, item = assigned[0]
            members[min(m for m in members if m != owner)].add(item)
        elif breakage == "drop_item":
            if not assigned:
                return
            _, owner, item = assigned[0]
            members[owner].discard(item)
        elif breakage == "unknown_member":
            members["nobody"] = set()
        elif breakage == "unconfigured_item":
            members[min(members)].add(TaskId("not-configured", 0))
        elif breakage in ("defer_without_delay", "delay_beyond_max"):
            if not assigned:
                return
            _, owner, item = assigned[0]
            members[owner].discard(item)
            deferred.add(item)
            delay = None if breakage == "defer_without_delay" else spec.scheduled_rebalance_max_delay_ms + 1
        elif breakage == "assigned_and_deferred":
            if not assigned:
                return
            deferred.add(assigned[0][2])
            delay = max(1, min(spec.scheduled_rebalance_max_delay_ms, delay or 1))
        else:
            raise AssertionError(breakage)
        request = InstallAssignmentRequest(
            w.group_id,
            w.member_id,
            w.member_epoch,
            prepared.group_epoch,
            tuple(
                InstallMember.of(m, MemberAssignment(connectors_and_tasks(items)))
                for m, items in sorted(members.items())
            ),
            deferred=connectors_and_tasks(deferred),
            scheduled_rebalance_delay_ms=delay,
        )
        slots, timers = self.state.slots(), dict(self.driver.timers)
        computation = self.group(w.group_id).computation
        result = self.driver.coordinator.install_assignment(request, self.driver.now)
        assert result.response.error_code == ErrorCode.INVALID_ASSIGNMENT, (breakage, result.response)
        assert not result.records and not result.timers, result
        # The only change: the chosen member is asked to compute again on its next heartbeat.
        assert all(u.computation is not None and u.computation.prepared is None for u in result.volatile), result
        self.driver.run(result)
        assert self.state.slots() == slots and self.driver.timers == timers
        assert self.group(w.group_id).computation == replace(computation, prepared=None)

    def install_assignor_error(self, proc: Proc) -> None:
        w = proc.worker
        prepared = w.prepare()
        if prepared.error_code:
            assert prepared.error_code in NOT_CHOSEN, prepared
            return
        targets = dict(self.group(w.group_id).targets)
        response = self.driver.run(
            self.driver.coordinator.install_assignment(
                InstallAssignmentRequest(
                    w.group_id,
                    w.member_id,
                    w.member_epoch,
                    prepared.group_epoch,
                    (),
                    error=1,
                    error_message="the assignor failed",
                ),
                self.driver.now,
            )
        )
        assert response.error_code == ErrorCode.NONE, response
        group = self.group(w.group_id)
        assert group.targets == targets, "an assignor error changed the target"
        assert group.assignment_epoch == prepared.group_epoch and group.target_metadata.error == 1

    # --- group inputs ------------------------------------------------------------------------------

    @rule(group=GROUP, connectors=CONNECTORS)
    @step
    def set_connectors(self, group: str, connectors: dict) -> None:
        response = self.driver.set_connectors(group, connectors)
        assert response.error_code == ErrorCode.NONE, response

    @rule(
        group=GROUP,
        session=st.sampled_from((600, 1000, 2000)),
        interval=st.sampled_from((100, 200, 500)),
        rebalance=st.sampled_from((None, 300, 500, 1500)),
        delay=st.sampled_from((0, 200, 1000)),
    )
    @step
    def set_config(self, group: str, session: int, interval: int, rebalance: int | None, delay: int) -> None:
        response = self.driver.set_config(
            group,
            session_timeout_ms=session,
            heartbeat_interval_ms=interval,
            rebalance_timeout_ms=rebalance,
            scheduled_rebalance_max_delay_ms=delay,
        )
        assert response.error_code == ErrorCode.NONE, response

    @rule(ms=st.integers(1, 3000))
    @step
    def advance_time(self, ms: int) -> None:
        """The virtual clock moves; every timer that falls due fires, in order."""
        fired = self.driver.advance(ms)
        if fired:
            note(f"t={self.driver.now}: fired {fired}")

    @rule(compacted=st.booleans())
    @step
    def failover(self, compacted: bool) -> None:
        """Another coordinator loads the (compacted) topic, re-arms timers from state, and serves."""
        old = self.driver
        new = CheckedDriver(self, old.now)
        new.log = old.log
        records = compact(old.log) if compacted else old.log
        new.state.replay_all(roundtrip(r) for r in records)
        assert new.state.slots() == old.state.slots()
        new.timers = {t.key: t.deadline_ms for t in new.coordinator.timers(old.now)}
        self.driver = new
        for proc in self.procs:
            w = proc.worker
            w.driver = new
            group = self.group(w.group_id)
            if (
                w.joined
                and group is not None
                and w.member.fence_timeout_ms > new.coordinator.settings(group).session_timeout_ms
            ):
                self.unheard_at_load.add(w)

    # --- convergence -------------------------------------------------------------------------------

    @rule(revive=st.booleans())
    @step
    def settle(self, revive: bool) -> None:
        self.converge(revive)

    def teardown(self) -> None:
        if self.clean and self.procs:
            self.converge(revive=False)
            replayed = CoordinatorState()
            replayed.replay_all(self.driver.log)
            assert replayed.slots() == self.state.slots()

    def safe_step(self) -> int:
        """Less than any session or rebalance timeout: heartbeating workers survive it."""
        limits = []
        coordinator = self.driver.coordinator
        for group in self.state.groups.values():
            settings = coordinator.settings(group)
            limits.append(settings.session_timeout_ms)
            limits.extend(settings.member_rebalance_timeout_ms(m) for m in group.members.values())
        return max(1, min(limits, default=1000) * 3 // 4)

    def converge(self, revive: bool) -> None:
        for proc in self.procs:
            if revive and proc.status == "silent":
                proc.status = "active"
        for round_ in range(1, SETTLE_ROUNDS + 1):
            for proc in self.procs:
                if proc.status == "active":
                    self.heartbeat(proc)
            self.check_workers()
            if all(self.converged(g) for g in GROUPS):
                note(f"settled in {round_} rounds at t={self.driver.now}")
                return
            self.driver.advance(self.safe_step())
        lines = [f"no convergence within {SETTLE_ROUNDS} rounds, t={self.driver.now}"]
        for group_id in GROUPS:
            group = self.group(group_id)
            if group is None:
                continue
            lines.append(
                f"{group_id}: epoch {group.group_epoch}, assignment epoch {group.assignment_epoch}, "
                f"computation {group.computation}, target metadata {group.target_metadata}"
            )
            lines += [f"  {m}: {group.members[m]}\n    {c}" for m, c in group.currents.items()]
        lines += [f"  {p}: joined={p.worker.joined} epoch={p.worker.member_epoch}" for p in self.procs]
        lines.append(f"timers: {self.driver.timers}")
        raise AssertionError("\n".join(lines))

    def converged(self, group_id: str) -> bool:
        group = self.group(group_id)
        if group is None:
            return True
        procs = [p for p in self.procs if p.group == group_id and p.status == "active"]
        if not group.members:
            return not procs
        meta = group.target_metadata
        if group.assignment_epoch != group.group_epoch or meta is None or meta.error:
            return False
        if meta.scheduled_rebalance_at_ms is not None or meta.deferred.connectors or meta.deferred.tasks:
            return False
        owned: set = set()
        for member_id, current in group.currents.items():
            if current.member_epoch != group.group_epoch or current.state != MemberState.STABLE:
                return False
            target = group.targets.get(member_id)
            if items_of(current.assignment) != (items_of(target.assignment) if target else frozenset()):
                return False
            owned |= items_of(current.assignment)
        for proc in procs:
            w = proc.worker
            if not w.joined or w.member_id not in group.members:
                return False
            current = group.current(w.member_id)
            if w.member_epoch != current.member_epoch or w.owned != items_of(current.assignment):
                return False
        # Stable at the current epoch with nothing pending: this is final, so it must be complete.
        assert not meta.departed_members, f"{group_id} is stable but still remembers departed work: {meta}"
        description = self.driver.coordinator.describe_group(group_id)
        assert description.state == "STABLE" and description.group_epoch == group.group_epoch, description
        # ... and balanced as its assignor promises (seed 002; assignors/*.py "Rule")
        counts = [(len(c.assignment.connectors), len(c.assignment.tasks)) for c in group.currents.values()]
        spread = [max(kind) - min(kind) for kind in zip(*counts)]
        total = max(map(sum, counts)) - min(map(sum, counts))
        if meta.assignor_name == "eager":
            assert spread[0] <= 1 and total <= 1, f"{group_id}: eager assignment not balanced: {counts}"
        elif meta.assignor_name == "incremental_cooperative":
            assert max(spread) <= 1, f"{group_id}: incremental_cooperative assignment not balanced per kind: {counts}"
        configured = group.configured()
        assert owned == configured, (
            f"{group_id} is stable at epoch {group.group_epoch} but runs {sorted(map(str, owned - configured))} "
            f"that is not configured and misses {sorted(map(str, configured - owned))}"
        )
        return True


@pytest.mark.timeout(0 if EXAMPLES > 2_000 else 600)
def test_coordinator_state_machine() -> None:
    run_state_machine_as_test(
        CoordinatorMachine, settings=settings(max_examples=EXAMPLES, stateful_step_count=STEPS, **_COMMON)
    )


# --- regressions: what this machine found, as plain scenarios -------------------------------------


def test_member_at_epoch_0_rejoins_after_its_session_expired() -> None:
    """Found by the machine: a worker whose join answer said epoch 0 (no target includes it yet)
    and whose session then expired sent epoch 0 with RebalanceTimeoutMs -1 and was refused with
    INVALID_REQUEST forever; it never rejoined. (Fixed in SimWorker: every field while at epoch 0.)"""
    driver = Driver()
    driver.set_config("g", session_timeout_ms=1000, heartbeat_interval_ms=100, rebalance_timeout_ms=500)
    worker = SimWorker(driver, "g", "a")
    assert worker.heartbeat(compute=False).member_epoch == 0
    driver.advance(1000)  # the session expires: "a" is removed
    assert "a" not in driver.state.groups["g"].members
    worker.heartbeat()
    assert worker.last.error_code in OK, worker.last
    assert "a" in driver.state.groups["g"].members


def test_client_assignors_that_share_nothing_under_a_server_assignor() -> None:
    """Found by the machine: while a server-side member was present, client-side members that
    share no assignor (eager, incremental_cooperative) were all admitted; once the server-side
    member left, `group_assignor` was None and nothing was ever assigned again."""
    driver = Driver()
    driver.set_config("g", scheduled_rebalance_max_delay_ms=0)  # the departed work is not waited for
    driver.set_connectors("g", {"A": 2})
    server = SimWorker(driver, "g", "s", assignor=None, server_assignor="incremental_cooperative")
    server.heartbeat()
    a = SimWorker(driver, "g", "a", assignor="incremental_cooperative")
    b = SimWorker(driver, "g", "b", assignor="eager")
    assert a.heartbeat().error_code == ErrorCode.NONE
    assert b.heartbeat().error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    server.leave()
    converge([a])
    group = driver.state.groups["g"]
    assert group.group_epoch == group.assignment_epoch
    assert a.owned == group.configured()


def test_server_side_interval_after_the_group_switched_assignor_kind() -> None:
    """Found by the machine: one ASSIGNMENT timer served both the chosen member's deadline and the
    server-side interval. A client-side group chose `a` (deadline 500); a server-side member joined
    inside the interval and the timer was re-armed for its end (1000) with `a`'s computation left
    in place; when it fired, `on_timer` dropped the stale computation and computed nothing, so the
    group sat at group epoch > assignment epoch with no timer armed (and `a` was told
    COMPUTE_ASSIGNMENT for a server-side group)."""
    driver = Driver()
    driver.set_config("g", session_timeout_ms=5000, heartbeat_interval_ms=100, rebalance_timeout_ms=500)
    driver.set_connectors("g", {"A": 1})
    SimWorker(driver, "g", "a").heartbeat()  # client-side; computes at once
    b = SimWorker(driver, "g", "b", assignor=None, server_assignor="incremental_cooperative")
    b.heartbeat()  # server-side: computed at t=0, the next server computation not before t=1000
    b.leave()  # client-side again: a is chosen, deadline 500
    SimWorker(driver, "g", "c", assignor=None, server_assignor="incremental_cooperative").heartbeat()
    driver.advance(1000)  # the end of the interval: no heartbeat needed for the target
    group = driver.state.groups["g"]
    assert group.group_epoch == group.assignment_epoch
