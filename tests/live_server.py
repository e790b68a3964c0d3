"""A `CoordinatorServer` served over HTTP from this test process: its event loop in a thread of its
own, so that a test's plain blocking calls (requests, subprocesses) talk to it as a client would,
and a test's coroutines (SDK workers) run in the server's loop through `Served.run`."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.service.server import CoordinatorServer

T = TypeVar("T")


@dataclass
class Served:
    url: str
    server: CoordinatorServer
    app: web.Application
    loop: asyncio.AbstractEventLoop

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 60) -> T:
        """`coroutine` run in the server's loop, from the test's thread."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=timeout_s)


@contextmanager
def served(
    name: str,
    kafka_config: Mapping[str, str],
    topic: str,
    partitions: int,
    owned: Iterable[int],
    config: CoordinatorConfig,
    **kwargs: Any,
) -> Iterator[Served]:
    """A `CoordinatorServer` of these settings (`kwargs`: its keyword-only ones) started and listening
    on a free port of 127.0.0.1, its advertised url, and closed at the end. `name` names the loop's
    thread in a stack dump."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = CoordinatorServer(kafka_config, topic, partitions, owned, url, config, **kwargs)
    app = server.app()
    runner = web.AppRunner(app)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    it = Served(url, server, app, loop)

    async def start() -> None:
        await server.start()
        await runner.setup()
        await web.SockSite(runner, sock).start()

    async def stop() -> None:
        await runner.cleanup()
        await server.close()

    try:
        it.run(start())
        yield it
    finally:
        try:
            it.run(stop())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
