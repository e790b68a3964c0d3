"""Connectors and tasks as one set of *items*.

The records keep connectors and tasks apart (`ConnectorsAndTasks`), as the seed's wire format
does. The protocol treats them alike: each is a unit of work that one member owns at a time.
Connectors are `str` and tasks are `TaskId` tuples, two types that never compare equal, so one
Python set holds both and the reconciliation can use plain set algebra (current ∩ target ...).
"""

from __future__ import annotations

from collections.abc import Iterable

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


def configured_items(connectors: Iterable[ConnectorTaskCount]) -> list[Item]:
    """Every item a group must run: each connector, and its tasks numbered from 0."""
    items: list[Item] = []
    for connector in connectors:
        items.append(connector.name)
        items.extend(TaskId(connector.name, task) for task in range(connector.tasks))
    return items


def describe(items: Iterable[Item]) -> str:
    """Items for humans and error messages: `A, A-0, B-1`."""
    ordered = sorted(items, key=lambda item: (item, -1) if item.__class__ is str else item)
    return ", ".join(str(item) for item in ordered) or "nothing"
