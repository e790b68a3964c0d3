"""Waiting on a condition inside a test's event loop (the synchronous wait is
coordinator.tools.connect_worker.until, which the tools use too)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(condition: Callable[[], object], timeout: float = 15.0, what: str = "the condition") -> object:
    """`condition()`'s first truthy value, polled every 20 ms while the loop runs everything else, else an
    AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not reached within {timeout:g} s: {what}"
        await asyncio.sleep(0.02)
    return value
