"""SDK workers' groups as the SDK tests drive them (tests/test_worker_sdk.py, and tests/test_classic_http.py's
mixed groups): a listener recording every callback in one order, and the check that no item was assigned to a
worker while another still ran it."""

from __future__ import annotations

import asyncio
import itertools

from records import ConnectorTaskCount, TaskId

from coordinator.core.items import items_of
from coordinator.core.protocol import ErrorResponse, SetConnectorsRequest
from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.worker import RebalanceListener

G = "sdk-group"


_sequence = itertools.count()


class Recorder(RebalanceListener):
    """Every callback of every worker, in one global order."""

    def __init__(self, name: str, events: list, fail_on: str | None = None) -> None:
        self.name, self.events, self.fail_on = name, events, fail_on

    def _record(self, kind: str, items) -> None:  # noqa: ANN001
        self.events.append((next(_sequence), self.name, kind, frozenset(items_of(items))))
        if kind == self.fail_on:
            raise RuntimeError(f"{self.name} refuses to {kind}")

    def on_revoked(self, items) -> None:  # noqa: ANN001
        self._record("revoked", items)

    async def on_assigned(self, items) -> None:  # noqa: ANN001
        await asyncio.sleep(0)  # async listeners are awaited
        self._record("assigned", items)

    def on_lost(self, items) -> None:  # noqa: ANN001
        self._record("lost", items)


async def set_connectors(client: CoordinatorClient, **tasks: int) -> None:
    body = SetConnectorsRequest(connectors=[ConnectorTaskCount(n, t) for n, t in tasks.items()])
    answer = await client.call(G, "PUT", f"/v1/groups/{G}/connectors", ErrorResponse, body)
    assert answer.error_code == 0


def everything(**tasks: int) -> frozenset:
    return frozenset(list(tasks) + [TaskId(c, t) for c, n in tasks.items() for t in range(n)])


def check_history(events: list) -> None:
    """No item is assigned to a worker while another still runs it; each callback is a change."""
    owner: dict = {}
    for _, worker, kind, items in sorted(events):
        assert items, f"{worker}: on_{kind} with nothing"
        for item in items:
            if kind == "assigned":
                assert item not in owner, f"{item} assigned to {worker} while {owner[item]} runs it"
                owner[item] = worker
            else:
                assert owner.get(item) == worker, f"{worker} {kind} {item} it did not run"
                del owner[item]
