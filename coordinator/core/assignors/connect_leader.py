"""Kafka Connect's leader-side assignment for the classic protocol, as its leader computes it.

A classic Connect group elects a leader in JoinGroup; that worker's `WorkerCoordinator` turns every
member's metadata into the assignments it sends in SyncGroup (`onLeaderElected`). This module is
that computation, carried over from connect-runtime 4.3.1 (`WorkerCoordinator`, `EagerAssignor`,
`IncrementalCooperativeAssignor`) so that a classic worker of ours leads a group exactly as a Connect
worker would: same assignments, same revocations, same scheduled delays, round after round.
`tests/test_connect_leader_assignor.py` runs Connect's own classes next to it and compares.

Interface
---------
One `ConnectLeaderAssignor` per worker process (Connect keeps one `IncrementalCooperativeAssignor`
per `WorkerCoordinator`; a worker that restarts, or another worker that becomes leader, starts with
none of its memory). Each round the worker leads, it calls::

    assignor.assign(protocol, leader_id, members, config,
                    generation=..., last_completed_generation=..., now_ms=..., fresh_config=None)

- `protocol`: the group's protocol of this generation (`sessioned`, `compatible` or `default`);
  the assignor follows it round by round as `WorkerCoordinator.onLeaderElected` does.
- `members`: each member's `WorkerMetadata`, in the JoinGroup response's order, as decoded.
- `config`: the config topic snapshot the leader took when it joined (`ConfigSnapshot`: offset and
  each connector's task count); `fresh_config`: what it reads now, consulted only when the
  snapshot is behind a member (default: the same snapshot).
- `generation`: the generation being assigned; `last_completed_generation`: the generation of the
  leader's last completed join (-1 before any); `now_ms`: the clock.

It answers each member's `WorkerAssignment`: for `default` the whole assignment (v0), for the
others what to start (`assigned`, a delta), what to stop (`revoked`) and `delay_ms`, with the
protocol's version. `leader_state` then says what each member runs after the round (Connect's
`LeaderState`), or None after a round that could not assign.

Rules (in the order Connect applies them)
-----------------------------------------
Both assignors:

1. The assignment's config offset is the highest any member reported. A leader whose snapshot is
   behind it looks at the fresh config; still behind, every member gets `CONFIG_MISMATCH` with
   that offset and nothing else, so that the group joins again (`ensureLeaderConfig`). Fresh
   config that caught up is assigned from, and its offset is the assignment's.
2. The leader's URL is the one in the leader's own metadata.

`default` (`EagerAssignor`): connectors sorted, then every connector's tasks in order, dealt
round-robin over the members sorted by id, one iterator for both (a worker with a connector gets
the next task only after every other member had its turn).

`compatible` and `sessioned` (`IncrementalCooperativeAssignor.performTaskAssignment`, KIP-415):

1. The previous assignment (all the leader assigned last round, plus work lost then) is
   forgotten if it was computed for a generation other than the leader's last completed one.
   If last round's revocations did not happen (a member still runs something it was told to
   stop), the previous assignment becomes what members run now.
2. From configured C, previous P and active A (what members say they run): deleted = P - C,
   lost = P - A - deleted, created = C - P - A; deleted and duplicated items (on more than one
   member) are revoked from every member running them.
3. Lost work (`handleLostAssignments`): with no lost work and no revocation last round, any
   scheduled rebalance is cancelled. Otherwise, if no rebalance is scheduled and every member of
   the last round is still here, or if `scheduled.rebalance.max.delay.ms` is 0, lost work is
   reassigned as if new. If a scheduled rebalance is due, lost work goes round-robin to the
   members that were empty while it waited (those still here), or is reassigned as new if there
   are none; the schedule is cleared. Otherwise the rebalance is scheduled (or stays scheduled):
   empty members become candidates, the delay is the time left (or the whole maximum for a new
   schedule) and is sent to every member.
4. Balance (`performLoadBalancingRevocations`), only while no delay is active: with c configured
   items of a kind and w members, members above floor(c/w) shed their first items (in the order
   they reported them) down to it, except that the first c mod w of them in the leader's member
   order keep one more. Two revoking rounds in a row instead schedule a rebalance after an
   exponential backoff (1 ms, 40 ms, 1.6 s, ... capped at the maximum delay) and revoke nothing.
5. Created and reassigned lost work, connectors then tasks, each in sorted order, are dealt to
   the least loaded members (by count of that kind, then id), filling the lowest level first.
6. Each member gets what it will run that it does not run now, and its revocations.

Theory of operation
-------------------
The port keeps Connect's structure step by step, because which item lands where depends on more
than counts: on the order members are visited and the order a member's items are revoked in.
Those orders come from Java collections, and the port reproduces each one that matters:

- members are visited in the iteration order of the `HashMap` Connect fills from the JoinGroup
  response (`_java_hash_order`: bucket of `String.hashCode`, spread, for the table size reached
  after that many puts, then insertion order), and empty members become candidates in the order
  of a `HashSet` of their ids;
- a member's connectors and tasks keep the order of its metadata (Connect's `LinkedHashSet`s),
  so balancing revokes the first ones it reported; items assigned to it are appended;
- sorted sets (`TreeSet`) and sorting use `String.compareTo` (UTF-16 code units) and
  `ConnectorTaskId.compareTo` (connector, then task number): `_java_order`.

Python dicts serve as `LinkedHashSet`s. The state across rounds is the assignor's fields in
Connect: previous assignment, previous revocation, whether the last round revoked, candidate
workers, scheduled rebalance and delay, previous generation and members, successive revoking
rounds. The outputs are sorted (Connect's order is its collections'; the wire order carries no
meaning). Nothing reads a clock: `now_ms` is every time Connect would read `Time.milliseconds()`.

Not reproduced: a `HashMap` bucket holding nine or more member ids in a table of 64 or more (it
becomes a tree whose root iterates first); member ids are random UUIDs in Connect.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from records.connect_protocol import (
    CONFIG_MISMATCH,
    DEFAULT,
    NO_ERROR,
    VERSIONS,
    WorkerAssignment,
    WorkerMetadata,
    version_of,
)
from records.model import ConnectorsAndTasks, TaskId

__all__ = ["DEFAULT_MAX_DELAY_MS", "ConfigSnapshot", "ConnectLeaderAssignor"]

# DistributedConfig.SCHEDULED_REBALANCE_MAX_DELAY_MS_DEFAULT: five minutes.
DEFAULT_MAX_DELAY_MS = 300_000
# IncrementalCooperativeAssignor's backoff between successive revoking rebalances.
_BACKOFF_MULTIPLIER = 40


@dataclass(slots=True, frozen=True)
class ConfigSnapshot:
    """A worker's view of the config topic (Connect's `ClusterConfigState`, for assignment): the
    offset it has read to and each configured connector with its task count."""

    offset: int
    connectors: Mapping[str, int] = field(default_factory=dict)


class ConnectLeaderAssignor:
    """Connect's leader-side assignors of one worker: `EagerAssignor` for `default`, and the
    `IncrementalCooperativeAssignor` (with its memory across rounds) for `compatible` and
    `sessioned`. Not thread-safe, like Connect's."""

    def __init__(self, scheduled_rebalance_max_delay_ms: int = DEFAULT_MAX_DELAY_MS) -> None:
        if not 0 <= scheduled_rebalance_max_delay_ms <= 0x7FFFFFFF:
            raise ValueError(
                f"scheduled.rebalance.max.delay.ms must be an int >= 0, not {scheduled_rebalance_max_delay_ms}"
            )
        self._max_delay = scheduled_rebalance_max_delay_ms
        self._previous_assignment = _Items()
        self._previous_revocation = _Items()
        self._revoked_in_previous = False
        self._candidates: dict[str, None] = {}  # candidateWorkersForReassignment, a LinkedHashSet
        self._scheduled_rebalance = 0
        self._delay = 0
        self._previous_generation = -1
        self._previous_members: frozenset[str] = frozenset()
        self._successive_revoking_rebalances = 0
        self._backoff = _RevokingRebalanceBackoff(scheduled_rebalance_max_delay_ms)
        self.leader_state: dict[str, ConnectorsAndTasks] | None = None

    @property
    def scheduled_rebalance_max_delay_ms(self) -> int:
        return self._max_delay

    @property
    def scheduled_rebalance_ms(self) -> int:
        """When the scheduled rebalance is due (0: none is scheduled)."""
        return self._scheduled_rebalance

    def assign(
        self,
        protocol: str,
        leader_id: str,
        members: Mapping[str, WorkerMetadata],
        config: ConfigSnapshot,
        *,
        generation: int,
        last_completed_generation: int,
        now_ms: int,
        fresh_config: ConfigSnapshot | None = None,
    ) -> dict[str, WorkerAssignment]:
        """Every member's assignment for this round (`WorkerCoordinator.onLeaderElected`)."""
        version = version_of(protocol)
        if leader_id not in members:
            raise ValueError(f"the leader {leader_id!r} is not one of the members")
        for connector, tasks in config.connectors.items():
            if tasks < 0:
                raise ValueError(f"connector {connector!r} has {tasks} tasks")
        self.leader_state = None  # onJoinPrepare clears it before every join
        leader_url = members[leader_id].url
        # The newest config offset any member has read; members behind it wait for their config
        # to catch up before they use the assignment.
        max_offset = max(m.config_offset for m in members.values())
        usable = _ensure_leader_config(max_offset, config, fresh_config)
        if usable is None:
            return {
                member: WorkerAssignment(leader_id, leader_url, max_offset, error=CONFIG_MISMATCH, version=version)
                for member in members
            }
        snapshot, offset = usable
        if version == VERSIONS[DEFAULT]:
            return self._eager(leader_id, leader_url, offset, members, snapshot)
        return self._incremental(
            version, leader_id, leader_url, offset, members, snapshot, generation, last_completed_generation, now_ms
        )

    # --- EagerAssignor ------------------------------------------------------------------------------

    def _eager(
        self,
        leader_id: str,
        leader_url: str,
        offset: int,
        members: Mapping[str, WorkerMetadata],
        snapshot: ConfigSnapshot,
    ) -> dict[str, WorkerAssignment]:
        connectors = sorted(snapshot.connectors, key=_java_order)
        ring = sorted(members, key=_java_order)
        turn = 0  # one CircularIterator over the sorted members, first for connectors, then tasks
        owned_connectors: dict[str, list[str]] = {m: [] for m in members}
        owned_tasks: dict[str, list[TaskId]] = {m: [] for m in members}
        for connector in connectors:
            owned_connectors[ring[turn % len(ring)]].append(connector)
            turn += 1
        for connector in connectors:
            for task in range(snapshot.connectors[connector]):
                owned_tasks[ring[turn % len(ring)]].append(TaskId(connector, task))
                turn += 1
        self.leader_state = {m: _sorted_items(owned_connectors[m], owned_tasks[m]) for m in members}
        return {
            m: WorkerAssignment(leader_id, leader_url, offset, self.leader_state[m], version=VERSIONS[DEFAULT])
            for m in members
        }

    # --- IncrementalCooperativeAssignor -------------------------------------------------------------

    def _incremental(
        self,
        version: int,
        leader_id: str,
        leader_url: str,
        offset: int,
        members: Mapping[str, WorkerMetadata],
        snapshot: ConfigSnapshot,
        generation: int,
        last_completed_generation: int,
        now: int,
    ) -> dict[str, WorkerAssignment]:
        # memberConfigs is a HashMap filled in JoinGroup response order; every per-member pass of
        # the assignor visits members in its iteration order.
        member_assignments = {
            member: _Items(members[member].owned.connectors, members[member].owned.tasks)
            for member in _java_hash_order(members)
        }
        newly_assigned, revoked, all_assigned = self._perform_task_assignment(
            snapshot.connectors, last_completed_generation, generation, member_assignments, now
        )
        self.leader_state = {m: _sorted_items(i.connectors, i.tasks) for m, i in all_assigned.items()}
        empty = _Items()
        result = {}
        for member in members:
            assigned = newly_assigned.get(member, empty)
            stopped = revoked.get(member, empty)
            result[member] = WorkerAssignment(
                leader_id,
                leader_url,
                offset,
                _sorted_items(assigned.connectors, assigned.tasks),
                _sorted_items(stopped.connectors, stopped.tasks),
                self._delay,
                NO_ERROR,
                version,
            )
        return result

    def _perform_task_assignment(
        self,
        task_counts: Mapping[str, int],
        last_completed_generation: int,
        generation: int,
        member_assignments: dict[str, _Items],
        now: int,
    ) -> tuple[dict[str, _Items], dict[str, _Items], dict[str, _Items]]:
        """performTaskAssignment: (newly assigned, revoked, all assigned) by member."""
        if self._previous_generation != last_completed_generation:
            # The leader did not complete the generation it last assigned (its SyncGroup failed, or
            # another member led since): what it remembers may be stale.
            self._previous_assignment = _Items()

        configured = _Items(task_counts, (TaskId(c, t) for c, n in task_counts.items() for t in range(n)))
        active = _Items()
        for items in member_assignments.values():
            active.add_all(items)

        self._check_previous_revocation(active)

        previous = self._previous_assignment
        deleted = _difference(previous, configured)
        duplicated = _duplicated(member_assignments.values())
        lost = _difference(previous, active, deleted)
        created = _difference(configured, previous, active)

        # What each member runs now, but for deleted work: the base of its incremental assignment.
        current = {
            m: (items.connectors.keys() - deleted.connectors, items.tasks.keys() - deleted.tasks)
            for m, items in member_assignments.items()
        }

        to_revoke: dict[str, _Items] = {}
        deleted_to_revoke = _intersection(deleted, member_assignments)
        _add_all(to_revoke, deleted_to_revoke)
        duplicated_to_revoke = _intersection(duplicated, member_assignments)
        _add_all(to_revoke, duplicated_to_revoke)

        # The next assignment, by member; Connect's WorkerLoads share the members' sets.
        loads = [_Load(member, items) for member, items in member_assignments.items()]
        _remove_all(loads, deleted_to_revoke)
        _remove_all(loads, duplicated_to_revoke)

        lost_to_reassign = _Items()
        self._handle_lost_assignments(lost, lost_to_reassign, loads, now)

        self._revoke_to_balance(configured, loads, to_revoke, now)

        to_assign = _Items()
        to_assign.add_all(created)
        to_assign.add_all(lost_to_reassign)
        _deal(loads, list(to_assign.connectors), "connectors")
        _deal(loads, list(to_assign.tasks), "tasks")

        newly_assigned = {
            load.worker: _Items(
                (c for c in load.items.connectors if c not in current[load.worker][0]),
                (t for t in load.items.tasks if t not in current[load.worker][1]),
            )
            for load in loads
        }

        self._remember(loads, to_revoke, lost, generation, member_assignments)

        all_assigned = {}
        for load in loads:
            stopped = to_revoke.get(load.worker)
            kept = load.items.copy()
            if stopped is not None:
                kept.remove_all(stopped)
            all_assigned[load.worker] = kept
        return newly_assigned, to_revoke, all_assigned

    def _check_previous_revocation(self, active: _Items) -> None:
        """Last round's revocations did not take effect (members still run what they were told to
        give up): start again from what members run."""
        revocation = self._previous_revocation
        if not revocation.is_empty():
            if any(c in active.connectors for c in revocation.connectors) or any(
                t in active.tasks for t in revocation.tasks
            ):
                self._previous_assignment = active.copy()
            revocation.clear()

    def _revoke_to_balance(
        self, configured: _Items, loads: list[_Load], to_revoke: dict[str, _Items], now: int
    ) -> None:
        """The load-balancing revocations, into `to_revoke` and out of `loads`: none while a
        scheduled rebalance is pending, and after two revoking rounds in a row, a backoff first."""
        if self._delay == 0:
            balancing = self._load_balancing_revocations(len(configured.connectors), len(configured.tasks), loads)
            if self._revoked_in_previous and balancing:
                # Two revoking rounds in a row: wait (exponential backoff) before revoking again.
                self._successive_revoking_rebalances += 1
                self._delay = self._backoff(self._successive_revoking_rebalances)
                if self._delay != 0:
                    self._scheduled_rebalance = now + self._delay
                else:
                    _add_all(to_revoke, balancing)
                    _remove_all(loads, balancing)
            elif balancing:
                _add_all(to_revoke, balancing)
                _remove_all(loads, balancing)
                self._revoked_in_previous = True
            elif self._revoked_in_previous:
                # Balanced again: reset the backoff.
                self._revoked_in_previous = False
                self._successive_revoking_rebalances = 0
        else:
            self._revoked_in_previous = False

    def _remember(
        self,
        loads: list[_Load],
        to_revoke: dict[str, _Items],
        lost: _Items,
        generation: int,
        member_assignments: dict[str, _Items],
    ) -> None:
        """computePreviousAssignment: everything assigned, minus what is revoked, plus lost work
        (assigned now or still waiting); the revocations are remembered to check next round."""
        remembered = _Items()
        for load in loads:
            remembered.add_all(load.items)
        for items in to_revoke.values():
            remembered.remove_all(items)
            self._previous_revocation.add_all(items)
        remembered.add_all(lost)
        self._previous_assignment = remembered
        self._previous_generation = generation
        self._previous_members = frozenset(member_assignments)

    def _handle_lost_assignments(self, lost: _Items, to_reassign: _Items, loads: list[_Load], now: int) -> None:
        """handleLostAssignments: reassign lost work now, later, or to the members that waited."""
        if lost.is_empty() and not self._revoked_in_previous:
            self._reset_delay()
            return
        active_members = {load.worker for load in loads}
        if self._scheduled_rebalance <= 0 and self._previous_members <= active_members:
            # Nobody left: the work went missing in a failed round; reassign it as new.
            to_reassign.add_all(lost)
            return
        if self._max_delay == 0:
            to_reassign.add_all(lost)
            return
        if 0 < self._scheduled_rebalance <= now:
            # The delay is over: the members that were empty meanwhile get the lost work, dealt
            # round-robin (connectors, then tasks from the first candidate again).
            by_worker = {load.worker: load for load in loads}
            candidates = [by_worker[w] for w in self._candidates if w in by_worker]
            if candidates:
                for i, connector in enumerate(lost.connectors):
                    candidates[i % len(candidates)].items.connectors[connector] = None
                for i, task in enumerate(lost.tasks):
                    candidates[i % len(candidates)].items.tasks[task] = None
            else:
                to_reassign.add_all(lost)
            self._reset_delay()
            self._revoked_in_previous = False
        else:
            for worker in _java_hash_order(load.worker for load in loads if load.items.is_empty()):
                self._candidates.setdefault(worker)
            if now < self._scheduled_rebalance:
                # Still waiting: the delay is the time left.
                left = self._scheduled_rebalance - now
                self._delay = min(left, self._max_delay) if left > 0 else 0
            else:
                self._delay = self._max_delay
            self._scheduled_rebalance = now + self._delay

    def _reset_delay(self) -> None:
        self._candidates.clear()
        self._scheduled_rebalance = 0
        self._delay = 0

    @staticmethod
    def _load_balancing_revocations(connectors: int, tasks: int, loads: list[_Load]) -> dict[str, _Items]:
        """performLoadBalancingRevocations: what members above their share must stop."""
        if all(load.items.is_empty() for load in loads) or connectors == 0 and tasks == 0:
            return {}
        result: dict[str, _Items] = {}
        for worker, revoked in _shed(connectors, loads, "connectors").items():
            result.setdefault(worker, _Items()).connectors.update(dict.fromkeys(revoked))
        for worker, revoked in _shed(tasks, loads, "tasks").items():
            result.setdefault(worker, _Items()).tasks.update(dict.fromkeys(revoked))
        return result


# --- the pieces of Connect's algorithm -------------------------------------------------------------


class _Items:
    """ConnectorsAndTasks as Connect's builder makes it: two insertion-ordered sets."""

    __slots__ = ("connectors", "tasks")

    def __init__(self, connectors: Iterable[str] = (), tasks: Iterable[TaskId] = ()) -> None:
        self.connectors: dict[str, None] = dict.fromkeys(connectors)
        self.tasks: dict[TaskId, None] = dict.fromkeys(tasks)

    def is_empty(self) -> bool:
        return not self.connectors and not self.tasks

    def copy(self) -> _Items:
        return _Items(self.connectors, self.tasks)

    def clear(self) -> None:
        self.connectors.clear()
        self.tasks.clear()

    def add_all(self, other: _Items) -> None:
        self.connectors.update(dict.fromkeys(other.connectors))
        self.tasks.update(dict.fromkeys(other.tasks))

    def remove_all(self, other: _Items) -> None:
        for c in other.connectors:
            self.connectors.pop(c, None)
        for t in other.tasks:
            self.tasks.pop(t, None)


class _Load:
    """WorkerLoad: a member and the items it will run after the round."""

    __slots__ = ("items", "worker")

    def __init__(self, worker: str, items: _Items) -> None:
        self.worker = worker
        self.items = items


def _ensure_leader_config(
    max_offset: int, config: ConfigSnapshot, fresh: ConfigSnapshot | None
) -> tuple[ConfigSnapshot, int] | None:
    """ensureLeaderConfig: the snapshot to assign from and the offset to send, or None when even
    the fresh config is behind a member (CONFIG_MISMATCH)."""
    if config.offset < max_offset:
        updated = fresh if fresh is not None else config
        if updated.offset < max_offset:
            return None
        return updated, updated.offset
    return config, max_offset


def _difference(base: _Items, *subtract: _Items) -> _Items:
    """Connect's diff of ConnectorsAndTasks: a TreeSet of base minus the others, so sorted."""
    connectors = set(base.connectors).difference(*(s.connectors for s in subtract))
    tasks = set(base.tasks).difference(*(s.tasks for s in subtract))
    return _Items(sorted(connectors, key=_java_order), sorted(tasks, key=_task_order))


def _duplicated(assignments: Iterable[_Items]) -> _Items:
    """duplicatedAssignments: the items more than one member runs."""
    seen = _Items()
    duplicated = _Items()
    for items in assignments:
        for c in items.connectors:
            if c in seen.connectors:
                duplicated.connectors[c] = None
            seen.connectors[c] = None
        for t in items.tasks:
            if t in seen.tasks:
                duplicated.tasks[t] = None
            seen.tasks[t] = None
    return duplicated


def _intersection(items: _Items, assignments: Mapping[str, _Items]) -> dict[str, _Items]:
    """For every member, what it runs of `items`."""
    return {
        member: _Items(
            (c for c in owned.connectors if c in items.connectors), (t for t in owned.tasks if t in items.tasks)
        )
        for member, owned in assignments.items()
    }


def _add_all(base: dict[str, _Items], more: Mapping[str, _Items]) -> None:
    for member, items in more.items():
        base.setdefault(member, _Items()).add_all(items)


def _remove_all(loads: list[_Load], remove: Mapping[str, _Items]) -> None:
    for load in loads:
        items = remove.get(load.worker)
        if items is not None:
            load.items.remove_all(items)


def _shed(total: int, loads: list[_Load], kind: str) -> dict[str, list]:
    """loadBalancingRevocations for one kind: walking the members in order, the first `total % n`
    above the floor may keep floor + 1, the rest keep the floor; each sheds its first items."""
    n = len(loads)
    floor, extra = divmod(total, n)
    sizes = [len(getattr(load.items, kind)) for load in loads]
    at_floor = sizes.count(floor)
    one_above = sizes.count(floor + 1)
    if one_above == extra and at_floor + one_above == n:
        return {}  # balanced already (counting the work about to be created)
    result: dict[str, list] = {}
    extras_given = 0
    for load, size in zip(loads, sizes, strict=True):
        if size <= floor:
            continue
        if extras_given < extra:
            extras_given += 1
            if size == floor + 1:
                continue
            keep = floor + 1
        else:
            keep = floor
        result[load.worker] = list(getattr(load.items, kind))[: size - keep]
    return result


def _deal(loads: list[_Load], items: list, kind: str) -> None:
    """assignConnectors / assignTasks: sort the members by their count of this kind, then id; then
    hand one item to each member whose count equals the first member's, again and again (the
    first member's count grows by one per pass, so the level rises one step at a time)."""
    if not items:
        # Connect sorts the members either way, but the order of `loads` no longer matters.
        return
    loads.sort(key=lambda load: (len(getattr(load.items, kind)), _java_order(load.worker)))
    first = getattr(loads[0].items, kind)
    pending = iter(items)
    left = len(items)
    while left:
        level = len(first)
        up_to = next((i for i, load in enumerate(loads) if len(getattr(load.items, kind)) > level), len(loads))
        for load in loads[:up_to]:
            getattr(load.items, kind)[next(pending)] = None
            left -= 1
            if not left:
                break


class _RevokingRebalanceBackoff:
    """The ExponentialBackoff Connect's assignor builds for successive revoking rebalances: initial
    interval 1 ms (0 if the maximum delay is 0), multiplier 40, capped at the maximum, no jitter."""

    __slots__ = ("_exp_max", "_initial", "_max")

    def __init__(self, max_delay: int) -> None:
        self._max = max_delay
        self._initial = min(max_delay, 0 if max_delay == 0 else 1)
        self._exp_max = (
            math.log(max_delay / max(self._initial, 1)) / math.log(_BACKOFF_MULTIPLIER)
            if max_delay > self._initial
            else 0.0
        )

    def __call__(self, attempts: int) -> int:
        if self._exp_max == 0:
            return self._initial
        term = self._initial * math.pow(_BACKOFF_MULTIPLIER, min(float(attempts), self._exp_max))
        return min(int(term), self._max)  # Java's (long) cast truncates


# --- Java's orders ---------------------------------------------------------------------------------


def _utf16_units(s: str) -> Iterable[int]:
    if s.isascii():
        return s.encode()
    data = s.encode("utf-16-be", "surrogatepass")
    return (data[i] << 8 | data[i + 1] for i in range(0, len(data), 2))


def _java_string_hash(s: str) -> int:
    """String.hashCode, as an unsigned 32-bit number."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _java_order(s: str) -> str:
    """A key that sorts strings as String.compareTo does (by UTF-16 code unit), which differs from
    Python's order only for characters outside the BMP."""
    if s.isascii() or all(ord(c) < 0x10000 for c in s):
        return s
    return "".join(map(chr, _utf16_units(s)))


def _task_order(t: TaskId) -> tuple[str, int]:
    """ConnectorTaskId.compareTo: connector, then task number."""
    return _java_order(t.connector), t.task


def _java_hash_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a java.util.HashMap (or HashSet) of strings, put one at a time in the
    given order into a new, default-sized map: by bucket, the spread hash masked by the final table
    size, then by insertion (a resize splits each bucket keeping its order). A bucket reaching nine
    entries doubles a table smaller than 64, as HashMap.treeifyBin does; a treeified bin's order is
    not reproduced (see the module docstring)."""
    keys = list(dict.fromkeys(keys))
    hashes = []
    for key in keys:
        h = _java_string_hash(key)
        hashes.append(h ^ (h >> 16))  # HashMap.hash spreads the high bits down
    capacity = 16
    buckets: dict[int, int] = {}  # entries per bucket at the current capacity

    def resize(size: int) -> None:
        nonlocal capacity
        capacity *= 2
        buckets.clear()
        for h in hashes[:size]:
            buckets[h & (capacity - 1)] = buckets.get(h & (capacity - 1), 0) + 1

    for size, h in enumerate(hashes, start=1):
        bucket = h & (capacity - 1)
        crowded = buckets.get(bucket, 0) >= 8  # putVal calls treeifyBin, which resizes a small table
        buckets[bucket] = buckets.get(bucket, 0) + 1
        if crowded and capacity < 64:
            resize(size)
        if size > capacity * 3 // 4:  # load factor 0.75
            resize(size)
    mask = capacity - 1
    return [key for _, key in sorted(zip((h & mask for h in hashes), keys, strict=True), key=lambda p: p[0])]


def _sorted_items(connectors: Collection[str], tasks: Collection[TaskId]) -> ConnectorsAndTasks:
    return ConnectorsAndTasks(tuple(sorted(connectors, key=_java_order)), tuple(sorted(tasks, key=_task_order)))
