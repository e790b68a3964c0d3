"""Which coordinator instance serves which partition (DESIGN §6).

- `static`: the process serves the partitions it is told to (`CoordinatorServer.start`).
- `group`: instances form a Kafka consumer group over the topic. The group protocol decides who
  owns what; an assigned partition is taken (fencing its previous owner through
  `init_transactions`, then loading it), a revoked or lost one stops serving before the callback
  returns. The consumer never reads records: it pauses every partition it is given, so it costs
  the brokers nothing but the membership.

Finding the owner of a partition served elsewhere (`Locator`): in group mode, the consumer
group's description (each instance's `client.id` names its advertised URL, and its Kafka listener's
advertised address when it has one: `<url> kafka=<host>:<port>`, see `owner_client_id`; the
description lists each member's assigned partitions); in static mode there is no group to describe,
so the owners are the `/health` of the other instances given with `--peer` (`PeerHealth`), which
names their URLs only: FindCoordinator over Kafka's protocol knows other instances' Kafka listeners
in group ownership only.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import NamedTuple

import aiohttp
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from coordinator.service.server import CoordinatorServer
from coordinator.service.standby import standby_partitions

log = logging.getLogger(__name__)

_LOCATE_CACHE_S = 1.0
_KAFKA = " kafka="


class Owner(NamedTuple):
    """An instance serving a partition: its advertised URL, and its Kafka listener's advertised
    (host, port) when it runs one and says so."""

    url: str
    kafka: tuple[str, int] | None = None


def owner_client_id(url: str, kafka: tuple[str, int] | None) -> str:
    """The ownership consumer's `client.id`: what the other instances learn of this one from the
    consumer group's description. The advertised URL alone without a Kafka listener (as before
    there was one), else `<url> kafka=<host>:<port>`; a URL has no space, so the two part cleanly."""
    return url if kafka is None else f"{url}{_KAFKA}{kafka[0]}:{kafka[1]}"


def parse_owner(client_id: str) -> Owner:
    """`owner_client_id` read back; a Kafka address that does not parse is left out (the URL stays)."""
    url, _, kafka = client_id.partition(_KAFKA)
    host, colon, port = kafka.rpartition(":")
    if not colon or not host or not port.isdigit():
        return Owner(url)
    return Owner(url, (host.strip("[]"), int(port)))


class GroupOwnership:
    """Shares the topic's partitions among instances through a Kafka consumer group."""

    def __init__(
        self,
        server: CoordinatorServer,
        kafka_config: Mapping[str, str],
        group_id: str,
        *,
        session_timeout_ms: int = 10_000,
        kafka_advertised: tuple[str, int] | None = None,
        standby_partitions: int = 0,
    ) -> None:
        self.server = server
        self.group_id = group_id
        # How many partitions not owned here to keep standbys of (`coordinator.service.standby`).
        self.standby_count = standby_partitions
        self._owned: set[int] = set()  # the partitions the consumer group assigned us, as it says
        self.locate = Locator(lambda: asyncio.to_thread(self._described_owners))
        self._config = {
            **kafka_config,
            "group.id": group_id,
            "client.id": owner_client_id(server.advertised_url, kafka_advertised),
            # Only what must move moves: a new instance takes its share without stopping the others.
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": max(100, session_timeout_ms // 10),
            # Also the rebalance timeout (JoinGroup's): how long a rebalance waits for every member to
            # rejoin before it goes on without the late ones. The poll loop never blocks, so a member
            # is late only while its revocation callback closes partitions; this bounds how long one
            # slow instance holds up the partitions of a rebalance (librdkafka's default: 5 minutes).
            # librdkafka refuses a value below session.timeout.ms.
            "max.poll.interval.ms": max(session_timeout_ms, 10_000),
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "allow.auto.create.topics": False,
        }
        # One client for every find-coordinator lookup, not a new connection per lookup.
        self._admin = AdminClient(dict(kafka_config))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.server.locate = self.locate
        self.server.locate_kafka = self.locate.kafka_listener
        self._thread = threading.Thread(target=self._poll, name="ownership", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    # --- the consumer group (its own thread: librdkafka calls back from poll) -------------------

    def _poll(self) -> None:
        consumer = Consumer(self._config)
        consumer.subscribe(
            [self.server.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke
        )
        paused: set[int] = set()
        try:
            while not self._stopping.is_set():
                consumer.poll(0.2)  # there is nothing to read: every partition is paused
                assignment = consumer.assignment()
                unpaused = [tp for tp in assignment if tp.partition not in paused]
                if unpaused:
                    consumer.pause(unpaused)
                paused = {tp.partition for tp in assignment}
        except KafkaException as e:
            log.error("the ownership consumer failed: %s", e)
        finally:
            # Leaving the group revokes our partitions (on_revoke) and hands them over at once.
            consumer.close()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        taken = sorted(tp.partition for tp in partitions)
        if taken:
            log.info("consumer group %s assigned partitions %s", self.group_id, taken)
            self._owned.update(taken)
            # Not waited for: loading may take seconds, and the partition answers
            # COORDINATOR_LOAD_IN_PROGRESS meanwhile. A standby of a taken partition is promoted
            # (assign takes it before keep_standbys, scheduled after it, can run).
            asyncio.run_coroutine_threadsafe(self.server.assign(taken), self._loop)
        self._follow_assignment()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lost = sorted(tp.partition for tp in partitions)
        if lost:
            log.info("consumer group %s revoked partitions %s", self.group_id, lost)
            self._owned.difference_update(lost)
            # Waited for: the partitions must stop serving before another instance takes them.
            asyncio.run_coroutine_threadsafe(self.server.revoke(lost), self._loop).result()
            self._follow_assignment()

    def _follow_assignment(self) -> None:
        """Keep the standbys the assignment now calls for (none without --standby-partitions)."""
        if self.standby_count and not self._stopping.is_set():  # not on the way out
            wanted = standby_partitions(self._owned, self.server.partitions, self.standby_count)
            asyncio.run_coroutine_threadsafe(self.server.keep_standbys(wanted), self._loop)

    def _described_owners(self) -> dict[int, Owner]:
        try:
            futures = self._admin.describe_consumer_groups([self.group_id], request_timeout=5)
            description = futures[self.group_id].result()
        except KafkaException as e:
            log.warning("cannot describe consumer group %s: %s", self.group_id, e)
            return {}
        owners = {}
        for member in description.members:
            for tp in member.assignment.topic_partitions if member.assignment else ():
                if tp.topic == self.server.topic:
                    owners[tp.partition] = parse_owner(member.client_id)
        return owners


class Locator:
    """Where a partition not served here is served, from `owners()` (partition -> advertised URL,
    or an `Owner`): the consumer group's description in group mode, the peers' `/health` in static
    mode. Answers are cached for a second, so a burst of find-coordinator calls costs one lookup."""

    def __init__(self, owners: Callable[[], Awaitable[Mapping[int, str | Owner]]]) -> None:
        self.owners = owners
        self._owners: dict[int, Owner] = {}
        self._owners_at = 0.0

    async def owner(self, partition: int) -> Owner | None:
        if time.monotonic() - self._owners_at > _LOCATE_CACHE_S or partition not in self._owners:
            found = await self.owners()
            self._owners = {p: o if isinstance(o, Owner) else Owner(o) for p, o in found.items()}
            self._owners_at = time.monotonic()
        return self._owners.get(partition)

    async def __call__(self, partition: int) -> str | None:
        owner = await self.owner(partition)
        return owner.url if owner is not None else None

    async def kafka_listener(self, partition: int) -> tuple[str, str, int] | None:
        """The URL of the instance serving `partition` and its Kafka listener's advertised host and
        port; None when no instance serves it or its owner names no Kafka listener."""
        owner = await self.owner(partition)
        if owner is None or owner.kafka is None:
            return None
        return owner.url, *owner.kafka


class PeerHealth:
    """Static ownership: who serves what, from the `/health` of the other instances (`--peer`).
    Each instance's `/health` lists the partitions it serves and the URL it advertises."""

    def __init__(self, server: CoordinatorServer, peers: Iterable[str]) -> None:
        own = server.advertised_url.rstrip("/")
        self.peers = [p.rstrip("/") for p in peers if p.rstrip("/") != own]

    async def __call__(self) -> dict[int, str]:
        owners: dict[int, str] = {}
        timeout = aiohttp.ClientTimeout(total=2)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for peer in self.peers:
                try:
                    async with session.get(f"{peer}/health") as response:
                        body = await response.json()
                except (aiohttp.ClientError, TimeoutError, ValueError) as e:
                    log.warning("peer %s did not answer: %s", peer, e)
                    continue
                for partition, status in (body.get("Partitions") or {}).items():
                    if status in ("active", "loading"):
                        owners[int(partition)] = body.get("Url") or peer
        return owners
