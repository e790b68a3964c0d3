"""The eager assignor: a balanced assignment computed from scratch, as Kafka Connect's `eager` protocol.

Rule: every configured connector and task goes to exactly one member, members in member-id order,
connectors round-robin first and tasks round-robin continuing where the connectors stopped. So every
member's total differs from another's by at most one, and so does its number of connectors. The
assignor ignores what members target or own and what departed members held: it never defers work
and never asks for another rebalance. Stop-the-world in spirit (seed 002 "Motivation"), although
the coordinator still revokes before it assigns, so only the work that moves stops.

Theory of operation: the configured work is one sorted tuple per kind (connectors by name; tasks
by connector name, then number), built once per connector configuration. Member j of n takes
connectors j, j+n, ... and tasks starting at (j - number of connectors) mod n, in steps of n:
tuple slices, already sorted, so a 50,000-task group costs no Python code per item.

This module also holds what every Connect assignor here shares: the configured work
(`configured_work`) and the metadata version negotiation (`member_versions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from typing import NamedTuple

from coordinator.assignors import (
    AssignmentMember,
    ConnectAssignor,
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
)
from records import ConnectorsAndTasks, ConnectorTaskCount, TaskId

__all__ = ["ASSIGNOR_ERROR", "ConfiguredWork", "EagerAssignor", "by_member_id", "configured_work", "member_versions"]

# The `GroupAssignment.error` of an assignor that cannot compute an assignment (seed 000: "If the
# Connect assignor can't compute the assignment, then it would return an error which would result
# in retaining the current assignments").
ASSIGNOR_ERROR = 1

by_member_id = attrgetter("member_id")

# `TaskId(name, n)` runs the Python-level `__new__` namedtuple generates; building the tuple
# directly is the same object at half the cost, which shows at 50,000 tasks per assignment.
_new_tuple = tuple.__new__


class ConfiguredWork(NamedTuple):
    """The items a group must run, per kind, sorted, and as sets for membership tests."""

    connectors: tuple[str, ...]
    tasks: tuple[TaskId, ...]
    connector_set: frozenset[str]
    task_set: frozenset[TaskId]


def configured_work(connectors: Iterable[ConnectorTaskCount]) -> ConfiguredWork:
    """The items the group must run: connectors by name, tasks by (connector name, number).

    A connector listed twice counts once, with its last task count. Sorted order makes the
    assignment independent of the order the config topic lists connectors in, and makes slices of
    these tuples sorted assignments as they are.
    """
    counts = {connector.name: connector.tasks for connector in connectors}
    return _configured_work(tuple(sorted(counts.items())))


# The connectors change far less often than the group rebalances, and building 50,000 TaskIds
# is most of an assignment's garbage: keep the last few configurations. They are immutable, so
# sharing them between groups and calls is safe.
@lru_cache(maxsize=16)
def _configured_work(counts: tuple[tuple[str, int], ...]) -> ConfiguredWork:
    connectors = tuple(name for name, _ in counts)
    tasks: list[TaskId] = []
    for name, count in counts:
        tasks.extend(map(_new_tuple, repeat(TaskId), zip(repeat(name), range(count))))
    return ConfiguredWork(connectors, tuple(tasks), frozenset(connectors), frozenset(tasks))


def member_versions(assignor: ConnectAssignor, members: Sequence[AssignmentMember]) -> list[int] | GroupAssignment:
    """Each member's metadata version, or the assignor error if a member shares none with `assignor`.

    A member's version is the highest in both its range and the assignor's (seed 000 "Assignor":
    Minimum/MaximumVersion). The coordinator only picks a worker whose range covers everyone's
    (DESIGN §5), so an empty overlap means the spec is inconsistent: report it rather than raise.
    """
    versions = []
    for member in members:
        lowest = max(assignor.minimum_version, member.minimum_version)
        highest = min(assignor.maximum_version, member.maximum_version)
        if lowest > highest:
            return GroupAssignment(
                members={},
                error=ASSIGNOR_ERROR,
                error_message=(
                    f"member {member.member_id!r} supports versions [{member.minimum_version}, "
                    f"{member.maximum_version}] of assignor {assignor.name!r}, which supports "
                    f"[{assignor.minimum_version}, {assignor.maximum_version}]"
                ),
            )
        versions.append(highest)
    return versions


@dataclass(frozen=True, slots=True)
class EagerAssignor:
    """Round-robin over members in member-id order; ignores stickiness and departed work."""

    name = "eager"
    minimum_version = 0
    maximum_version = 0

    def assign(self, group: GroupSpec) -> GroupAssignment:
        members = sorted(group.members, key=by_member_id)
        versions = member_versions(self, members)
        if isinstance(versions, GroupAssignment):
            return versions
        work = configured_work(group.connectors)
        connectors, tasks = work.connectors, work.tasks
        count = len(members)
        # Tasks continue the round-robin where the connectors stopped: one round over both kinds
        # keeps every member's total within one of the others'.
        offset = len(connectors)
        return GroupAssignment(
            members={
                member.member_id: MemberAssignment(
                    ConnectorsAndTasks(connectors[j::count], tasks[(j - offset) % count :: count]),
                    version=version,
                )
                for j, (member, version) in enumerate(zip(members, versions))
            }
        )
