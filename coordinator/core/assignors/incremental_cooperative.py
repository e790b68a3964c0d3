"""The incremental cooperative assignor: sticky, balanced, and patient with departed work.

Seed 002 Design II (deferred resolution of imbalance) with an optional Design III limit (incremental
resolution), for Kafka Connect's connectors and tasks, as a declarative KIP-848 assignor (seed 000):
it says what each member should own; the coordinator revokes before it assigns.

Rule
----
The configured work C is every connector of the spec and its tasks 0..n-1; anything else is dropped.

1. Sticky. Each member keeps its target ∩ C. An item two targets claim stays with the first member
   in member-id order. An item of C that a member owns and no target holds stays with its owner
   (it is running there; moving it would stop it for nothing).
2. Departed work (seed 002 "b) a member left the group"). For each departed entry, its items ∩ C
   that nobody keeps:
   a. go back at once to a current member with the entry's member id or, if it has one, instance
      id. Kafka Connect leaves the work unowned for the whole delay even when the worker is back;
      here the rebalance its return triggers hands the work back ("Member bounces": D' gets T4);
   b. else wait, assigned to nobody (`deferred`), while now < departed_at + the group's
      `scheduled.rebalance.max.delay.ms`; a new, unknown member does not take them (it would lose
      them again when the departed member returns), a delay of 0 never defers, and no work waits
      longer than the delay from now (a departure stamped later than now counts as now);
   c. else join the unassigned pool, like work of new connectors.
3. Balance, connectors and tasks separately as Kafka Connect does. For each kind, with m members
   and t items that are not deferred, every member ends with floor(t/m) or ceil(t/m) of them.
   Movement is minimal: a member above the ceiling sheds down to the ceiling; if the pool then
   cannot lift every member to the floor, just enough members at the ceiling (the last in
   member-id order) shed one each; nothing else moves, so no item goes from one member within
   quota to another. The pool (unassigned items, then shed ones) is handed out one item at a
   time to the least-loaded member, ties by member id.
4. Design III: with `max_moves`, at most that many items per assignment are taken from members
   (shedding for balance; assigning pool, expired or returned work is free). Connectors shed first,
   then tasks. A round the limit cut short asks for a follow-up rebalance after
   `follow_up_delay_ms`, and the coordinator's next round moves the next batch.

The answer has an entry for every member, the deferred items, and `scheduled_rebalance_delay_ms`:
the time until the earliest deferred entry's deadline (at least 1 ms), or the follow-up delay if
that is sooner, or None when nothing waits. Without members nothing can be assigned: the answer is
the deferred work alone.

Versions and metadata
---------------------
Metadata versions 0 and 1. A member gets the highest version both it and this assignor support;
none in common is an assignor error (`GroupAssignment.error`), not an exception. Version 0
carries no metadata. Version 1 carries the scheduled delay, the seed's `ScheduledRebalanceTimeout`:
a big-endian int32, in milliseconds, capped at 2**31 - 1, or -1 when no rebalance is scheduled.

Theory of operation
-------------------
Everything is set algebra on the items of one kind at a time, so that a 1,000-member,
50,000-task group costs a few C-level passes over the items rather than Python code per item.
C, sorted and as a set, is built once per connector configuration (`items.configured_work`);
targets and departed assignments are intersected with C and subtracted from the claimed set
(iterating the small side), the pool is C filtered by the claimed set, and a member's new items
are a slice of the pool. Counts decide the rest: how much each member sheds, then a water-filling
pass over the sorted loads gives each member its number of pool items. Determinism never depends
on set order (string hashes differ between processes, and two workers must compute the same
answer): C is sorted, a member sheds the greatest of its items, and outputs are sorted, which
costs little because each is a sorted target plus sorted runs of pool items.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, filterfalse
from operator import attrgetter

from records import ConnectorsAndTasks

from coordinator.core.assignors import (
    AssignmentMember,
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    by_member_id,
    member_versions,
    reporting_errors,
)
from coordinator.core.items import Item, configured_work

__all__ = ["IncrementalCooperativeAssignor"]

_INT32_MAX = 2**31 - 1

# One kind of work, read from a `ConnectorsAndTasks`; every step below runs once per kind.
Part = Callable[[ConnectorsAndTasks], Sequence[Item]]
_CONNECTORS: Part = attrgetter("connectors")
_TASKS: Part = attrgetter("tasks")


@dataclass(frozen=True, slots=True)
class IncrementalCooperativeAssignor:
    """Sticky, balanced per kind, departed work deferred or returned (seed 002 Designs II and III)."""

    name = "incremental_cooperative"
    minimum_version = 0
    maximum_version = 1

    # Design III: the most items one assignment may take from running members; None: no limit.
    max_moves: int | None = None
    # How soon a round that `max_moves` cut short asks for the next one.
    follow_up_delay_ms: int = 1000

    def __post_init__(self) -> None:
        # A limit of 0 could never make progress and would ask for follow-ups forever.
        if self.max_moves is not None and self.max_moves < 1:
            raise ValueError(f"max_moves must be at least 1 or None, not {self.max_moves}")
        if self.follow_up_delay_ms < 1:
            raise ValueError(f"follow_up_delay_ms must be at least 1, not {self.follow_up_delay_ms}")

    @reporting_errors
    def assign(self, group: GroupSpec) -> GroupAssignment:
        members = sorted(group.members, key=by_member_id)
        versions = member_versions(self, members)
        work = configured_work(group.connectors)
        round_ = _Round(group, members, self.max_moves)
        member_connectors, deferred_connectors = round_.place(_CONNECTORS, work.connectors, work.connector_set)
        member_tasks, deferred_tasks = round_.place(_TASKS, work.tasks, work.task_set)

        delay = None
        if round_.deadlines:
            delay = max(1, min(round_.deadlines) - group.now_ms)
        if round_.cut_short:
            delay = self.follow_up_delay_ms if delay is None else min(delay, self.follow_up_delay_ms)
        metadata = struct.pack(">i", -1 if delay is None else min(delay, _INT32_MAX))

        return GroupAssignment(
            members={
                member.member_id: MemberAssignment(
                    ConnectorsAndTasks(tuple(member_connectors[i]), tuple(member_tasks[i])),
                    version=version,
                    metadata=metadata if version >= 1 else b"",
                )
                for i, (member, version) in enumerate(zip(members, versions))
            },
            deferred=ConnectorsAndTasks(tuple(deferred_connectors), tuple(deferred_tasks)),
            scheduled_rebalance_delay_ms=delay,
        )


class _Round:
    """One `assign` call: what both kinds share (where departed work goes, the move budget)."""

    __slots__ = ("cut_short", "deadlines", "departures", "members", "moves_left")

    def __init__(self, group: GroupSpec, members: list[AssignmentMember], max_moves: int | None) -> None:
        self.members = members
        self.moves_left = max_moves
        # Whether `max_moves` stopped shedding that balance needed (Design III follow-up).
        self.cut_short = False
        # The deadlines of the departed entries whose work this round defers.
        self.deadlines: list[int] = []

        by_id = {member.member_id: i for i, member in enumerate(members)}
        by_instance: dict[str, int] = {}
        for i, member in enumerate(members):
            if member.instance_id is not None:
                by_instance.setdefault(member.instance_id, i)
        max_delay = group.scheduled_rebalance_max_delay_ms
        # Per departed entry: the index of the member it came back as (rule 2a), or None; and its
        # deadline while its work may still wait (rule 2b), or None.
        self.departures: list[tuple[ConnectorsAndTasks, int | None, int | None]] = []
        for departed in group.departed:
            back = by_id.get(departed.member_id)
            if back is None and departed.instance_id is not None:
                back = by_instance.get(departed.instance_id)
            # A departure stamped after `now` (by another coordinator's clock, after a failover)
            # still waits no longer than the max delay from now.
            deadline = min(departed.departed_at_ms, group.now_ms) + max_delay
            waiting = max_delay > 0 and group.now_ms < deadline
            self.departures.append((departed.assignment, back, deadline if waiting else None))

    def place(
        self, part: Part, configured: Sequence[Item], universe: frozenset[Item]
    ) -> tuple[list[list[Item]], list[Item]]:
        """Each member's items of one kind, and the deferred ones, all sorted.

        `configured` is the kind's configured work, sorted; `universe` is the same as a set.
        """
        members = self.members
        count = len(members)
        claimed: set[Item] = set()
        # What each member ends with, and, in sorted runs, what it gets beyond its target.
        kept: list[set[Item]] = []
        gained: list[list[Item]] = [[] for _ in range(count)]

        # Rule 1: targets, then owned work no target holds; first claim in member-id order wins.
        for member in members:
            mine = _unclaimed(universe, part(member.target), claimed)
            claimed |= mine
            kept.append(mine)
        for i, member in enumerate(members):
            owned = part(member.owned)
            if owned and owned != part(member.target):
                running = _unclaimed(universe, owned, claimed)
                if running:
                    self._give(kept, gained, i, sorted(running))
                    claimed |= running

        # Rule 2: departed work goes back, waits, or (left unclaimed) joins the pool.
        deferred: set[Item] = set()
        for assignment, back, deadline in self.departures:
            lost = _unclaimed(universe, part(assignment), claimed)
            if not lost:
                continue
            if back is not None:
                self._give(kept, gained, back, sorted(lost))
            elif deadline is not None:
                deferred |= lost
                self.deadlines.append(deadline)
            else:
                continue  # rule 2c: left unclaimed, the pool picks it up
            claimed |= lost

        if count:
            self._balance(part, configured, claimed, len(configured) - len(deferred), kept, gained)
        return [_ordered(kept[i], part(member.target), gained[i]) for i, member in enumerate(members)], sorted(deferred)

    def _balance(
        self,
        part: Part,
        configured: Sequence[Item],
        claimed: set[Item],
        total: int,
        kept: list[set[Item]],
        gained: list[list[Item]],
    ) -> None:
        """Rule 3 (and 4): shed what balance needs, within the budget, then hand out the pool."""
        count = len(kept)
        floor, extra = divmod(total, count)
        ceiling = floor + (extra > 0)
        loads = [len(mine) for mine in kept]
        # Unassigned work in configured (sorted) order; shed items are appended after it.
        pool = list(filterfalse(claimed.__contains__, configured))

        # The most loaded shed first, so that a move budget goes where imbalance is worst.
        for i in sorted((i for i in range(count) if loads[i] > ceiling), key=lambda i: (-loads[i], i)):
            pool += self._shed(part, kept, gained, loads, i, loads[i] - ceiling)
        # Everyone is at most at the ceiling now (unless the budget ran out). Only `extra` members
        # may stay there; if more are, the pool is short by exactly that many items of lifting
        # everyone to the floor, so the surplus members at the ceiling, the last in member-id
        # order, shed one each. (With extra == 0 the ceiling is the floor and this never runs.)
        if extra:
            at_ceiling = [i for i in range(count) if loads[i] == ceiling]
            for i in at_ceiling[extra:]:
                pool += self._shed(part, kept, gained, loads, i, 1)

        start = 0
        for i, grant in _grants(loads, len(pool)):
            if grant:
                self._give(kept, gained, i, pool[start : start + grant])
                start += grant

    def _shed(
        self, part: Part, kept: list[set[Item]], gained: list[list[Item]], loads: list[int], i: int, wanted: int
    ) -> list[Item]:
        """Take up to `wanted` items from member i, the greatest ones, within the move budget."""
        moves = wanted
        if self.moves_left is not None:
            moves = min(wanted, self.moves_left)
            self.moves_left -= moves
            if moves < wanted:
                self.cut_short = True
        if not moves:
            return []
        taken = _ordered(kept[i], part(self.members[i].target), gained[i])[-moves:]
        kept[i].difference_update(taken)
        loads[i] -= moves
        return taken

    @staticmethod
    def _give(kept: list[set[Item]], gained: list[list[Item]], i: int, items: list[Item]) -> None:
        """Member i gets `items` (sorted), on top of what it kept of its target."""
        kept[i].update(items)
        gained[i] += items


def _unclaimed(universe: frozenset[Item], items: Iterable[Item], claimed: set[Item]) -> set[Item]:
    """The configured `items` nobody has claimed yet, as a new set.

    Each test iterates the small side (these items), never the group's 50,000 tasks, and the
    common case (all configured, none claimed) allocates nothing but the set itself.
    """
    mine = set(items)
    if not universe.issuperset(mine):  # a connector was deleted or its tasks reduced
        mine &= universe
    if not claimed.isdisjoint(mine):
        mine = mine.difference(claimed)
    return mine


def _grants(loads: list[int], pool: int) -> list[tuple[int, int]]:
    """(member, how many) for `pool` items handed one at a time to the least loaded, ties by member id.

    Water-filling instead of a heap: raise the lowest loads together to a common level, then the
    remainder (fewer than the members at that level) goes one each to the first by member id.
    The answer lists the members the least loaded first, the order in which they take their items.
    """
    count = len(loads)
    order = sorted(range(count), key=loads.__getitem__)  # stable: equal loads stay in member-id order
    level = loads[order[0]]
    left = pool
    raised = 0  # members order[:raised] are at `level`
    while True:
        while raised < count and loads[order[raised]] <= level:
            raised += 1
        step = left // raised
        if raised < count:
            step = min(step, loads[order[raised]] - level)
        level += step
        left -= step * raised
        if raised == count or level < loads[order[raised]]:
            break
    lifted = order[:raised]
    topped_up = set(sorted(lifted)[:left])
    return [(i, level - loads[i] + (i in topped_up)) for i in lifted]


def _ordered(kept: set[Item], target: Sequence[Item], gained: list[Item]) -> list[Item]:
    """The items of `kept`, sorted.

    Sorting a set of 50,000 tasks costs about 25 ms; sorting the target (already sorted) followed
    by the sorted runs the member gained is a linear merge for timsort.
    """
    if not gained and len(kept) == len(target):
        # Kept is a subset of the target, as large: it is the target (the common, steady case).
        ordered = list(target)
    else:
        ordered = list(filter(kept.__contains__, chain(target, gained)))
        if len(ordered) != len(kept):  # an item listed twice (a malformed target, or won back): start over
            ordered = list(kept)
    ordered.sort()
    return ordered
