"""The session's Kafka broker, and fixtures for tests that need what only Apache Kafka does.

Where the broker comes from, first match wins:
1. $KAFKA_BOOTSTRAP_SERVERS: a running cluster, taken to be Apache Kafka unless
   $KAFKA_BROKER_KIND=tansu says otherwise;
2. a Docker daemon: Apache Kafka in KRaft mode through testcontainers;
3. otherwise Tansu from `coordinator.devbroker` (DESIGN §10), which never compacts and shows aborted
   transactions to read_committed readers. Tests that need either of those request
   `requires_compaction` or `requires_abort_filtering` and are skipped on Tansu with that reason.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from coordinator import devbroker

# Confluent's image, because testcontainers' KafkaContainer drives its startup scripts; 7.9 is
# Apache Kafka 3.9 and runs in KRaft mode.
KAFKA_IMAGE = os.environ.get("KAFKA_TEST_IMAGE", "confluentinc/cp-kafka:7.9.0")


@dataclass(frozen=True)
class Broker:
    bootstrap_servers: str
    kind: str  # "external", "testcontainers" or "tansu"
    compacts: bool
    filters_aborted: bool

    def client_config(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A confluent-kafka configuration for this broker, with `extra` settings on top."""
        return {"bootstrap.servers": self.bootstrap_servers, **(extra or {})}


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        apache = os.environ.get("KAFKA_BROKER_KIND", "kafka").lower() != "tansu"
        yield Broker(external, "external", compacts=apache, filters_aborted=apache)
    elif _docker_answers():
        yield from _testcontainers_kafka()
    else:
        yield from _tansu(tmp_path_factory.mktemp("tansu"))


def _docker_answers() -> bool:
    # docker-py leaks a socket when it finds no daemon, so first look for what it would connect to.
    if "DOCKER_HOST" not in os.environ and not Path("/var/run/docker.sock").exists():
        return False
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return client.ping()
        finally:
            client.close()
    except Exception:  # no client library, no socket, no daemon: all mean "no Docker"
        return False


def _testcontainers_kafka() -> Iterator[Broker]:
    from testcontainers.community.kafka import KafkaContainer

    container = (
        KafkaContainer(KAFKA_IMAGE)
        .with_kraft()
        # One broker: the transaction log's default replication factor of 3 could never be met,
        # and every transactional producer would fail.
        .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
        # The cleaner looks for work every 15 s by default; compaction tests should not wait that long.
        .with_env("KAFKA_LOG_CLEANER_BACKOFF_MS", "1000")
    )
    container.start(timeout=120)
    try:
        yield Broker(container.get_bootstrap_server(), "testcontainers", compacts=True, filters_aborted=True)
    finally:
        container.stop()


def _tansu(run_dir: Path) -> Iterator[Broker]:
    broker = devbroker.start(devbroker.free_port(), run_dir)
    try:
        yield Broker(broker.bootstrap_servers, "tansu", compacts=False, filters_aborted=False)
    finally:
        devbroker.stop(broker.port, run_dir)


@pytest.fixture
def requires_compaction(kafka_broker: Broker) -> None:
    if not kafka_broker.compacts:
        pytest.skip("needs Apache Kafka for real compaction; the session broker is Tansu")


@pytest.fixture
def requires_abort_filtering(kafka_broker: Broker) -> None:
    if not kafka_broker.filters_aborted:
        pytest.skip("needs Apache Kafka to hide aborted transactions from read_committed; the session broker is Tansu")


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test (or earlier run against the same cluster) uses."""
    test = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:100]
    return f"test-{test}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - a SparkSession
    """One SparkSession for every test that needs Spark (it takes seconds to start; DESIGN §10)."""
    from spark.session import session

    spark = session(tmp_path_factory.mktemp("spark"))
    yield spark
    spark.stop()
