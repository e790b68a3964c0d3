"""The session's Apache Kafka, and fixtures for tests that need a three-node cluster.

Where the session's broker comes from, first match wins:
1. $KAFKA_BOOTSTRAP_SERVERS: a running Apache Kafka cluster;
2. a Docker daemon: Apache Kafka in KRaft mode through testcontainers;
3. otherwise a local Apache Kafka from `coordinator.tools.devbroker` (one KRaft node), started for the
   session and stopped at its end.

The broker-failure tests need a cluster of their own, whose nodes they kill: `kafka_cluster3` is a
local three-node cluster (replication factor 3, min ISR 2), started on first use.
"""

from __future__ import annotations

import functools
import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from coordinator.tools import devbroker
from coordinator.tools.devbroker import jars

# Apache Kafka's own image at the version the repository pins (devbroker's pom.xml, kafka.version),
# the same Kafka the no-Docker path runs. (It was Confluent's cp-kafka 7.9, i.e. Kafka 3.9, because
# testcontainers' KafkaContainer only drives Confluent's startup scripts; the container is now
# configured here instead.)
KAFKA_IMAGE = os.environ.get("KAFKA_TEST_IMAGE", f"apache/kafka:{jars.kafka_version()}")

# The `coordinator serve` processes the tests start assign a new group as soon as its members join:
# the initial assignment delay (3 s by default) is tested on its own (test_initial_assignment_delay
# and the stateful test), and would only slow the tests about other things. A test that wants it
# passes --initial-assignment-delay-ms.
os.environ.setdefault("COORDINATOR_INITIAL_ASSIGNMENT_DELAY_MS", "0")
# Classic sessions of a few seconds keep the classic tests short; Kafka's minimum (6 s, serve's
# default) is tested on its own (test_classic_kafka_behaviours).
os.environ.setdefault("COORDINATOR_CLASSIC_MIN_SESSION_TIMEOUT_MS", "100")

# Every classic answer of every test that drives the coordinator is checked against what a real
# Kafka Connect worker survives (tests/connect_fatal.py). tests/scram_broker.py: the session's
# SCRAM (SASL_PLAINTEXT and SASL_SSL) broker, started on first use by the tests that need one.
pytest_plugins = ["connect_fatal", "scram_broker"]

# Hypothesis' per-example deadline (200 ms) and its too-slow health check are timings: on two busy
# cores an example that is correct can take longer, and the test failed for it (test_audit_runs, seen
# under load). Tests never assert timings; the examples' results are what is checked.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

# `make test TEST_PROCESSES=N` runs the suite on N processes (pytest-xdist; two by default, docs/testing.md
# says why). A test module is one unit of work, so that its module-scoped fixtures (a Connect cluster, a
# served coordinator) start once; the modules that share an expensive session fixture are one unit together
# (UNITS), so that a run starts one Spark driver and one SCRAM broker. Units are in two lanes: the units with
# integration tests (a broker, JVMs, processes, timers; `pytest.mark.integration`) run one after the other
# in the first process, never two side by side (on two cores that made tests that pass alone fail, and the
# run was not shorter); the other processes run the units without any, which need little but CPU, in the
# time the first one waits on brokers, JVMs and timers. The first process takes those too once its own
# lane is done. In each lane, units start longest first (their seconds in tests/durations.json, from a
# whole run's `--durations=0`; `python -m tests.durations LOG` rewrites it), so the last to start is short.
UNITS = {
    "spark_session": (
        "test_spark_audit",
        "test_spark_snapshot",
        "test_spark_compaction",
        "test_simulate_spark",
        "test_connect_ops",
    ),
    "scram_broker": ("test_gateway_security", "test_serve_sasl"),
}
DURATIONS = Path(__file__).with_name("durations.json")
INTEGRATION = "pytest.mark.integration"


def module_of(nodeid: str) -> str:
    """The test module (its file's stem) of a test's node id."""
    return Path(nodeid.split("::", 1)[0]).stem


def unit_of(module: str) -> str:
    """The unit of work (tests run in one process, in order) that the test module `module` belongs to."""
    return next((fixture for fixture, modules in UNITS.items() if module in modules), module)


@functools.cache
def has_integration_tests(unit: str) -> bool:
    """Whether a test of the unit is marked integration (read from its modules' source: xdist's
    controller, which schedules, collects no items and so sees no marks)."""
    modules = UNITS.get(unit, (unit,))
    return any(INTEGRATION in Path(__file__).with_name(f"{m}.py").read_text(encoding="utf-8") for m in modules)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201 - xdist's types
    # xdist's own loadgroup reads marks into node ids, which pytest 9.2 no longer lets a plugin
    # rewrite (it split modules across processes here); this scheduler names the unit itself.
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(module_of(nodeid))

        def _assign_work_unit(self, node) -> None:  # noqa: ANN001 - xdist's WorkerController
            first = node is min(self.nodes, key=lambda n: n.gateway.id)  # gw0
            lanes = (True, False) if first else (False,)  # integration units: the first process only
            scope = next((s for lane in lanes for s in self.workqueue if has_integration_tests(s) == lane), None)
            if scope is None:  # nothing left in this process's lanes
                if not self._pending_of(self.assigned_work.get(node, {})):
                    node.shutdown()
                return
            self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    config.option.loadscopereorder = False  # the collection's order (below) is the one wanted
    return Lanes(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules = [module_of(item.nodeid) for item in items]
    units = [unit_of(module) for module in modules]
    for item, module, unit in zip(items, modules, units):
        for fixture in UNITS:
            if fixture in getattr(item, "fixturenames", ()) and unit != fixture:
                raise pytest.UsageError(f"{module} uses {fixture}: add it to UNITS[{fixture!r}] in tests/conftest.py")
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    weight: dict[str, float] = {}
    for module in set(modules):
        weight[unit_of(module)] = weight.get(unit_of(module), 0.0) + seconds.get(module, 0.0)
    first: dict[str, int] = {}
    for i, unit in enumerate(units):
        first.setdefault(unit, i)
    # A stable sort: the tests of a module keep their order (test_connect_stories' a2 follows a).
    ranked = sorted(zip(items, units), key=lambda pair: (-weight[pair[1]], first[pair[1]]))
    items[:] = [item for item, _ in ranked]


@dataclass(frozen=True)
class Broker:
    bootstrap_servers: str
    kind: str  # "external", "testcontainers" or "local"

    def client_config(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A confluent-kafka configuration for this broker, with `extra` settings on top."""
        return {"bootstrap.servers": self.bootstrap_servers, **(extra or {})}


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield Broker(external, "external")
    elif _docker_answers():
        yield from _testcontainers_kafka()
    else:
        yield from _local_kafka(tmp_path_factory.mktemp("kafka"), nodes=1)


@pytest.fixture(scope="session")
def kafka_cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devbroker.Cluster]:
    """A local three-node Apache Kafka cluster that tests may kill nodes of (and must restart)."""
    run_dir = tmp_path_factory.mktemp("kafka3")
    cluster = devbroker.start(devbroker.free_port_block(3), run_dir, nodes=3)
    try:
        yield cluster
    finally:
        cluster.stop()


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
    import time

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from testcontainers.core.container import DockerContainer

    # One KRaft node with the dev broker's one-node settings (devbroker.cluster.server_properties),
    # as the apache/kafka image takes them: KAFKA_<PROPERTY> with dots as underscores. The client
    # listener is on the same port inside and outside the container, so that the advertised address
    # (known before the start) is the one clients reach.
    port = devbroker.free_port_block(1)
    container = DockerContainer(KAFKA_IMAGE).with_bind_ports(port, port)
    host = container.get_docker_client().host()
    settings = {
        "NODE_ID": "1",
        "PROCESS_ROLES": "broker,controller",
        "LISTENERS": f"PLAINTEXT://0.0.0.0:{port},CONTROLLER://localhost:9093",
        "ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{port}",
        "LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        # One broker: the internal topics' default replication factor of 3 could never be met, and
        # every transactional producer would fail.
        "OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "AUTO_CREATE_TOPICS_ENABLE": "false",
        "GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        # The cleaner looks for work every 15 s by default; compaction tests should not wait that long.
        "LOG_CLEANER_BACKOFF_MS": "500",
    }
    for key, value in settings.items():
        container = container.with_env(f"KAFKA_{key}", value)
    container.start()
    try:
        bootstrap = f"{host}:{port}"
        # Ready when the broker answers a metadata request (no log line to match across versions).
        deadline = time.monotonic() + 120
        while True:
            try:
                AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=5)
                break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        yield Broker(bootstrap, "testcontainers")
    finally:
        container.stop()


def _local_kafka(run_dir: Path, nodes: int) -> Iterator[Broker]:
    cluster = devbroker.start(devbroker.free_port_block(nodes), run_dir, nodes=nodes)
    try:
        yield Broker(cluster.bootstrap_servers, "local")
    finally:
        cluster.stop()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test (or earlier run against the same cluster) uses."""
    test = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:100]
    return f"test-{test}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - a SparkSession
    """One SparkSession for every test that needs Spark (it takes seconds to start; DESIGN §10),
    with a catalog in a warehouse of its own: each test audits into a database of its own there."""
    from pyspark.sql import SparkSession

    from spark.session import session

    # A command run in this process before (`coordinator sql` through cli.main) leaves its session
    # active, and getOrCreate would hand it back without this warehouse's catalog: stopped first.
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    root = tmp_path_factory.mktemp("spark")
    spark = session(root / "scratch", warehouse=root / "warehouse")
    from spark.audit import warehouse_of

    assert warehouse_of(spark) == root / "warehouse", "getOrCreate handed back another session"
    yield spark
    spark.stop()
