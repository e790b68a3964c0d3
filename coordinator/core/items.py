"""Connectors and tasks as one set of *items*.

The records keep connectors and tasks apart (`ConnectorsAndTasks`), as the seed's wire format
does. The protocol treats them alike: each is a unit of work that one member owns at a time.
Connectors are `str` and tasks are `TaskId` structs, two types that never compare equal, so one
Python set holds both and the reconciliation can use plain set algebra (current ∩ target ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple

from records import ConnectorsAndTasks, ConnectorTaskCount, TaskId

Item = str | TaskId

EMPTY = ConnectorsAndTasks()


def items_of(assignment: ConnectorsAndTasks) -> frozenset[Item]:
    """The items of an assignment, as one set."""
    if not assignment.connectors:
        return frozenset(assignment.tasks)
    return frozenset(assignment.connectors).union(assignment.tasks)


def connectors_and_tasks(items: Iterable[Item]) -> ConnectorsAndTasks:
    """An assignment holding `items`, sorted so that equal sets give equal records (and bytes)."""
    connectors = []
    tasks = []
    for item in items:
        if item.__class__ is str:
            connectors.append(item)
        else:
            tasks.append(item)
    if not connectors and not tasks:
        return EMPTY
    connectors.sort()
    tasks.sort()
    return ConnectorsAndTasks(tuple(connectors), tuple(tasks))


class ConfiguredWork(NamedTuple):
    """The items a group must run, per kind, sorted, and as sets for membership tests."""

    connectors: tuple[str, ...]
    tasks: tuple[TaskId, ...]
    connector_set: frozenset[str]
    task_set: frozenset[TaskId]

    @property
    def items(self) -> frozenset[Item]:
        return self.connector_set | self.task_set


def configured_work(connectors: Iterable[ConnectorTaskCount]) -> ConfiguredWork:
    """The items a group must run: each connector, and its tasks numbered from 0.

    Connectors sorted by name, tasks by (connector name, number): the order the config lists
    connectors in never changes an assignment, and slices of these tuples are sorted assignments
    as they are. A connector listed twice counts once, with its last task count.
    """
    counts = {connector.name: connector.tasks for connector in connectors}
    return _configured_work(tuple(sorted(counts.items())))


# The connectors change far less often than a group rebalances, and building 50,000 TaskIds is
# most of an assignment's garbage: keep the last few configurations. They are immutable, so
# sharing them between groups and calls is safe.
@lru_cache(maxsize=16)
def _configured_work(counts: tuple[tuple[str, int], ...]) -> ConfiguredWork:
    connectors = tuple(name for name, _ in counts)
    tasks: list[TaskId] = []
    for name, count in counts:
        tasks.extend(map(TaskId, repeat(name), range(count)))
    return ConfiguredWork(connectors, tuple(tasks), frozenset(connectors), frozenset(tasks))


def item_order(item: Item) -> tuple[str, int]:
    """Connector, then task number; a connector before its tasks (a sort key for mixed items)."""
    return (item, -1) if item.__class__ is str else (item.connector, item.task)  # type: ignore[union-attr]


def describe(items: Iterable[Item]) -> str:
    """Items for humans and error messages: `A, A-0, B-1`."""
    ordered = sorted(items, key=item_order)
    return ", ".join(str(item) for item in ordered) or "nothing"
