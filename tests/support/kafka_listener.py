"""A coordinator's Kafka listener as the tests talk to it: a connection framing requests with
coordinator.api.kafka_protocol (`Client`, also through the gateway), a coordinator of partition 0 with its
listener in this process (`Coordinator`), and a Connect worker's JoinGroup protocols."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Self

from records.connect_protocol import SESSIONED, WorkerMetadata, encode_metadata

from coordinator.api import kafka_protocol as kp
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.service.auth import Authorizer
from coordinator.service.kafka_listener import KafkaListener
from coordinator.service.runtime import Status
from coordinator.service.server import CoordinatorServer
from coordinator.tools.partitions import partition_for

PARTITIONS = 2


G = next(f"connect-cluster-{i}" for i in range(100) if partition_for(f"connect-cluster-{i}", PARTITIONS) == 0)


MEMBER_ID_REQUIRED = 79


class Client:
    """One Kafka connection: requests framed with kafka_protocol, answers read in order."""

    def __init__(self, address: tuple[str, int], client_id: str) -> None:
        self.address, self.client_id = address, client_id
        self.correlation = 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> Self:
        self.reader, self.writer = await asyncio.open_connection(*self.address)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()

    def send(self, api_key: int, version: int, **fields: Any) -> tuple[int, int, int]:
        self.correlation += 1
        body = kp.request_class(api_key, version)(**fields)
        self.writer.write(kp.encode_request(body, version, self.correlation, self.client_id))
        return api_key, version, self.correlation

    async def receive(self, sent: tuple[int, int, int]) -> Any:
        api_key, version, correlation = sent
        # Bounded, so that a server that never answers fails the test instead of hanging it.
        size = kp.frame_length(await asyncio.wait_for(self.reader.readexactly(4), 30))
        got, body = kp.decode_response(api_key, version, await self.reader.readexactly(size))
        assert got == correlation
        return body

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        return await self.receive(self.send(api_key, version, **fields))

    async def closed(self, timeout: float = 10.0) -> bool:
        """Whether the server closed this connection (EOF) without answering."""
        return await asyncio.wait_for(self.reader.read(), timeout) == b""


def protocols(url: str) -> list[Any]:
    cls = kp.request_class(kp.JOIN_GROUP, 9)
    return [
        cls.JoinGroupRequestProtocol(name=SESSIONED, metadata=encode_metadata(WorkerMetadata(url, 7, None), SESSIONED))
    ]


class Coordinator:
    """A coordinator of partition 0 with its Kafka listener, in this process; `authorizer` and the
    listener's options (ssl, gateway_principals) for the security tests."""

    def __init__(
        self,
        broker: Any,
        topic: str,
        authorizer: Authorizer | None = None,
        initial_assignment_delay_ms: int = 0,
        **listener: Any,
    ) -> None:
        self.server = CoordinatorServer(
            broker.client_config(),
            topic,
            PARTITIONS,
            [0],
            "http://127.0.0.1:1",
            CoordinatorConfig(initial_assignment_delay_ms=initial_assignment_delay_ms),
            authorizer=authorizer,
        )
        self.listener = KafkaListener(self.server, **listener)

    async def __aenter__(self) -> Self:
        await self.server.start()
        # A topic just created may not have its leader yet: the load is retried in the background,
        # and until it succeeds every answer is COORDINATOR_LOAD_IN_PROGRESS.
        deadline = time.monotonic() + 60
        while self.server.runtimes[0].status is not Status.ACTIVE:
            assert time.monotonic() < deadline, "partition 0 not loaded within 60 s"
            await asyncio.sleep(0.05)
        self.address = await self.listener.start("127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.listener.close()
        await self.server.close()
