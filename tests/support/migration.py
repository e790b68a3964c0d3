"""A group of classic and connect workers on one driver, stepped together and checked after each step
(`Mixed`): the migration tests' group, which the replay tests also record and replay."""

from __future__ import annotations

from collections import Counter

from records import ConnectorTaskCount

from coordinator.core.driver import Driver, SimClassicWorker, SimWorker, step_all
from coordinator.core.items import configured_work

G = "connect-cluster"


CONNECTORS = {"A": 4, "B": 3}


OPTIONS = {
    "session_timeout_ms": 3_000,
    "rebalance_timeout_ms": 5_000,
    "heartbeat_interval_ms": 500,
    "scheduled_rebalance_max_delay_ms": 2_000,
}


def every_item() -> frozenset:
    return configured_work(tuple(ConnectorTaskCount(n, t) for n, t in CONNECTORS.items())).items


class Mixed:
    """Classic and connect workers of one group on one driver, stepped together."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.classic: dict[str, SimClassicWorker] = {}
        self.connect: dict[str, SimWorker] = {}

    def add_classic(self, name: str) -> SimClassicWorker:
        self.classic[name] = w = SimClassicWorker(self.d, G, name, instance_id=name, **OPTIONS)
        return w

    def add_connect(self, name: str) -> SimWorker:
        self.connect[name] = w = SimWorker(self.d, G, name, instance_id=name, session_timeout_ms=3_000)
        return w

    def owned(self) -> dict[str, frozenset]:
        return {**{n: w.owned for n, w in self.classic.items()}, **{n: w.owned for n, w in self.connect.items()}}

    def check(self) -> None:
        counts = Counter(item for items in self.owned().values() for item in items)
        doubled = sorted(str(i) for i, n in counts.items() if n > 1)
        assert not doubled, f"owned twice: {doubled} ({self.owned()})"

    def run(self, ms: int, tick_ms: int = 100) -> None:
        for _ in range(ms // tick_ms):
            step_all(self.classic.values(), self.connect.values(), self.check)
            self.d.advance(tick_ms)

    def converged(self) -> bool:
        owned = [i for items in self.owned().values() for i in items]
        return len(owned) == len(set(owned)) and set(owned) == every_item()
