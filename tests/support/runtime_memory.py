"""A partition runtime over an in-memory topic (coordinator.service.memory_log): the runtime with short
waits, the requests the tests make of it, what a state durably holds; shared by the runtime's and the
standby's in-memory tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from records import ConnectorTaskCount

from coordinator.core.config import CoordinatorConfig
from coordinator.core.protocol import (
    HeartbeatRequest,
    SetConnectorsRequest,
)
from coordinator.core.state import CoordinatorState
from coordinator.service.memory_log import MemoryTopic
from coordinator.service.runtime import PartitionRuntime

G = "connect-cluster"


CONFIG = CoordinatorConfig(server_assignment_interval_ms=0, initial_assignment_delay_ms=0)


def runtime(topic: MemoryTopic, config: CoordinatorConfig = CONFIG, **options: Any) -> PartitionRuntime:
    """A runtime of partition 0 of `topic`: a short linger and a short first wait before loading again."""
    options = {"linger_ms": 1.0, "load_retry_s": 0.01, **options}
    return PartitionRuntime({}, topic.name, 0, config, log=topic.log, **options)


def set_connectors(group: str, **tasks: int) -> Callable:
    request = SetConnectorsRequest(
        group_id=group, connectors=tuple(ConnectorTaskCount(name, n) for name, n in tasks.items())
    )
    return lambda coordinator, now: coordinator.set_connectors(request, now)


def join(member: str) -> Callable:
    request = HeartbeatRequest(G, member, 0, rebalance_timeout_ms=5_000, server_assignor="incremental_cooperative")
    return lambda coordinator, now: coordinator.heartbeat(request, now)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))


def durable(state: CoordinatorState) -> dict[str, Any]:
    """What records put in a state (not the volatile computations a handler adds in memory): the
    slots of every connect group, every classic group, and the format level."""
    slots = ("metadata", "connectors", "config", "target_metadata", "members", "targets", "currents")
    return {
        "groups": {g: {s: getattr(group, s) for s in slots} for g, group in state.groups.items()},
        "classic": dict(state.classic_groups),
        "format_level": state.format_level_record,
    }
