"""Operating a real Kafka Connect cluster on our coordinator (issue 28, item 9): three unmodified
Kafka Connect 4.3.1 workers (`ConnectDistributed` JVMs) whose `bootstrap.servers` is the gateway run
a connector on our coordinator, on the local three-node Apache Kafka (`kafka_cluster3`; the
workers' internal topics and our topic with replication factor 3), while an operator:

(a) uses Kafka's own tools through the gateway's bootstrap port: `Admin.listGroups()` and
    kafka-tools' `GroupsCommand --list` (kafka-groups.sh) list our group, `describeClassicGroups`
    shows its three members, Stable, protocol sessioned; the DeleteGroups RPC (kafka-clients 4.3.1's
    `Admin.deleteConsumerGroups`, its one way to send it) is refused with NON_EMPTY_GROUP while the
    workers run and succeeds once they have stopped, after which our coordinator no longer has the
    group;
(b) kills the gateway (SIGKILL) and starts it again on the same ports: the workers carry on;
(c) kills the broker that leads the Connect config topic (SIGKILL) and starts it again: the workers
    carry on; and no connection of a worker's group member, internal-topic clients or shared admin
    reaches a broker's port directly, only the connectors' own clients (see
    `test_only_connector_clients_reach_a_broker_directly` for how that is known);
(d) audits the topic with `coordinator audit` (Spark, available-now): the tables tell this group's
    story: its members' joins, its generations, who ran which task when (checked against what
    Connect's own REST API said at moments recorded during the story).

One set of JVMs for the whole module (each start costs seconds on our 2-core machines): the tests
are steps of one story and run in file order; the last two stop the workers.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import connect_java
import orjson
import pytest
from confluent_kafka.admin import AdminClient
from connect_group import describe, settled_generation

from coordinator import cli
from coordinator.tools import maven
from coordinator.tools.connect_worker import CONNECT_LOG4J, ConnectWorker, http, source_connector, until
from coordinator.tools.devbroker import Cluster, free_port
from coordinator.tools.process import ServeProcess

pytestmark = pytest.mark.integration

TASKS = 6
JAVA = Path(__file__).resolve().parent / "java"
GROUPS_ADMIN = JAVA / "GroupsAdmin.java"
KAFKA_TOOLS_POM = JAVA / "kafka-tools-pom.xml"
GROUP_ID_NOT_FOUND = 69
RECOVERY_S = 150

# Every connection a Kafka client opens is logged by its NetworkClient at DEBUG, prefixed with the
# client's kind and id ("[Producer clientId=...] Initiating connection to node HOST:PORT (id: N ...)
# using address ..."). The workers log those lines, and only those, of NetworkClient's.
NETWORK_LOG4J = """
logger.network.name = org.apache.kafka.clients.NetworkClient
logger.network.level = DEBUG
logger.network.filter.connect.type = RegexFilter
logger.network.filter.connect.regex = .*Initiating connection to node.*
logger.network.filter.connect.onMatch = ACCEPT
logger.network.filter.connect.onMismatch = DENY
"""
INITIATED = re.compile(r"\[(\w+) clientId=([^,\]]+)[^\]]*\] Initiating connection to node ([^ ]+):(\d+) \(id: (-?\d+)")


class OpsWorker(ConnectWorker):
    """A ConnectWorker whose internal topics have three replicas, and whose log has every connection
    its Kafka clients open."""

    def __init__(self, run_dir: Path, name: str, gateway: str, brokers: str, group: str) -> None:
        super().__init__(run_dir, name, gateway, brokers, group)
        text = self.properties.read_text(encoding="utf-8")
        self.properties.write_text(re.sub(r"(storage\.replication\.factor)=1\n", r"\1=3\n", text), encoding="utf-8")
        self.log4j = run_dir / "connect-log4j2.properties"
        self.log4j.write_text(CONNECT_LOG4J.read_text(encoding="utf-8") + NETWORK_LOG4J, encoding="utf-8")

    def initiated(self) -> list[tuple[str, str, int, int]]:
        """(client kind, client id, port, node id) of every connection its Kafka clients opened (a
        bootstrap connection's node id is negative)."""
        return [(m[1], m[2], int(m[4]), int(m[5])) for m in INITIATED.finditer(self.log.read_text(errors="replace"))]


@dataclass
class Story:
    cluster: Cluster
    topic: str
    key: str
    run_dir: Path
    serve: ServeProcess | None = None
    gateway: subprocess.Popen | None = None
    listener: str = ""
    gateway_port: int = 0
    workers: list[OpsWorker] = field(default_factory=list)
    # (time in ms, {task: Connect's worker id}) whenever Connect's REST API was read with every task RUNNING
    seen: list[tuple[int, dict[int, str]]] = field(default_factory=list)
    generations: list[int] = field(default_factory=list)  # the generations the group settled at
    stopped: bool = False

    @property
    def brokers(self) -> str:
        return self.cluster.bootstrap_servers

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.gateway_port}"

    def gateway_ports(self) -> set[int]:
        return {self.gateway_port, self.gateway_port + 1} | {self.gateway_port + 2 + n.id for n in self.cluster.nodes}

    def start_gateway(self) -> None:
        log = (self.run_dir / "gateway.log").open("ab")
        self.gateway = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coordinator",
                "gateway",
                "--bootstrap-server",
                self.brokers,
                "--listen",
                self.bootstrap,
                "--groups",
                self.key,
                "--coordinator",
                self.listener,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        until(lambda: _answers(self.gateway_port + 1) or self.gateway.poll() is not None, 30, "the gateway listens")
        assert self.gateway.poll() is None, self.gateway_log()

    def gateway_log(self) -> str:
        return (self.run_dir / "gateway.log").read_text(errors="replace")

    def running(self, what: str) -> dict:
        """Every task RUNNING by Connect's REST API (asked of the first worker), recorded in `seen`."""
        status = until(lambda: self.workers[0].running("src", TASKS), RECOVERY_S, what)
        self.seen.append((int(time.time() * 1000), {t["id"]: t["worker_id"] for t in status["tasks"]}))
        return status

    def settled(self) -> int:
        """The generation the group settles at (Stable, unchanged for 3 s), recorded."""
        generation = until(lambda: settled_generation(self.serve.url, self.key), 60, "the group settled")
        self.generations.append(generation)
        return generation

    def described(self) -> dict:
        return describe(self.serve.url, self.key)

    def assert_one_group_each_task_once(self) -> dict:
        """Our coordinator's view: the three workers' URLs, and each source task in exactly one
        member's assignment (Connect's own bytes)."""
        described = self.described()
        assert {m["Url"] for m in described["Members"]} == {f"{w.url}/" for w in self.workers}, described
        held = sorted(
            t["Task"] for m in described["Members"] for t in m["Assignment"]["Tasks"] if t["Connector"] == "src"
        )
        assert held == list(range(TASKS)), described
        return described

    def stop_workers(self) -> None:
        """SIGTERM each worker: Connect stops its tasks and leaves the group."""
        if not self.stopped:
            for w in self.workers:
                w.stop()
            self.stopped = True


@pytest.fixture(scope="module")
def story(kafka_cluster3, tmp_path_factory):
    connect_java.require()
    run_dir = tmp_path_factory.mktemp("connect-ops")
    suffix = os.urandom(4).hex()
    s = Story(kafka_cluster3, f"test-connect-ops-{suffix}", f"connect-ops-{suffix}", run_dir)
    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            cli.main(
                [
                    "topic",
                    "create",
                    "--bootstrap-servers",
                    s.brokers,
                    "--topic",
                    s.topic,
                    "--partitions",
                    "4",
                    "--replication-factor",
                    "3",
                ]
            )
            == 0
        )
    s.listener = f"127.0.0.1:{free_port()}"
    s.serve = ServeProcess(s.brokers, s.topic, run_dir, "--allow-anonymous", "--kafka-listener", s.listener).start()
    s.gateway_port = free_port()
    try:
        s.start_gateway()
        s.workers = [OpsWorker(run_dir, f"w{i}", s.bootstrap, s.brokers, s.key).start() for i in (1, 2, 3)]
        until(lambda: all(w.up() for w in s.workers), 180, "the workers' REST APIs answer")
        config = {**source_connector(f"{s.key}-data", TASKS), "topic.creation.default.replication.factor": "3"}
        until(
            lambda: http("PUT", f"{s.workers[0].url}/connectors/src/config", config)[0] in (200, 201),
            60,
            "the connector is created (409 while the group rebalances)",
        )
        s.running("every task RUNNING")
        s.settled()
        yield s
    finally:
        for w in s.workers:
            w.kill()
        if s.gateway is not None and s.gateway.poll() is None:
            s.gateway.kill()
            s.gateway.wait(timeout=30)
        s.serve.kill()
        for node in s.cluster.nodes:  # the cluster is the session's: every node runs again
            if node.pid() is None:
                s.cluster.start_node(node.id, timeout=120)


# --- (a) Kafka's own tools through the gateway --------------------------------------------------


def groups_admin(*args: str) -> list[dict]:
    out = connect_java.run([GROUPS_ADMIN], "GroupsAdmin", args, timeout=120)
    return [orjson.loads(line) for line in out.splitlines() if line.startswith("{")]


def kafka_groups_list(bootstrap: str) -> str:
    """kafka-groups.sh --list: kafka-tools' GroupsCommand (its jars from Maven Central)."""
    tools = maven.libs(KAFKA_TOOLS_POM, "kafka-tools-*.jar", "Kafka tools")
    done = subprocess.run(
        [
            maven.java(),
            "-XX:TieredStopAtLevel=1",
            "-cp",
            f"{tools}/*",
            "org.apache.kafka.tools.GroupsCommand",
            "--bootstrap-server",
            bootstrap,
            "--list",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_kafka_tools_list_and_describe_our_group_and_refuse_to_delete_it_while_it_runs(story: Story) -> None:
    listed = {g["group"]: g for g in groups_admin("list", story.bootstrap)}
    assert listed.get(story.key) == {"group": story.key, "type": "Classic", "protocol": "connect", "state": "Stable"}, (
        listed
    )
    rows = [line.split() for line in kafka_groups_list(story.bootstrap).splitlines()]
    assert [story.key, "Classic", "connect"] in rows, rows

    (described,) = groups_admin("describe", story.bootstrap, story.key)
    assert described["state"] == "Stable" and described["protocolData"] == "sessioned", described
    assert described["coordinator"] == 2_000_000_000  # the gateway's coordinator node
    workers = {f"connect-127.0.0.1:{w.port}" for w in story.workers}
    assert {m["clientId"] for m in described["members"]} == workers, described
    assert all(m["memberId"].startswith(f"{m['clientId']}-") for m in described["members"]), described

    (refused,) = groups_admin("delete", story.bootstrap, story.key)
    assert refused["error"] == "GroupNotEmptyException", refused  # NON_EMPTY_GROUP, Kafka's answer
    story.assert_one_group_each_task_once()
    assert all(w.alive() for w in story.workers)


# --- (b) a gateway restart ----------------------------------------------------------------------


def test_a_gateway_restart_leaves_the_workers_running(story: Story) -> None:
    """The gateway is the workers' only way to our coordinator: the same member ids more than a
    session (10 s) after the kill mean their heartbeats went on through the new gateway process and
    no worker lost its membership. A rebalance of those same members may follow (seen once in a CI
    run under load: generation 4 to 5, no member changed; its trigger is not known yet), so the
    generation is only checked not to go back."""
    story.settled()  # the snapshot is of a settled group
    before = story.described()
    killed = time.monotonic()
    story.gateway.kill()
    story.gateway.wait(timeout=30)
    story.start_gateway()  # the same ports
    time.sleep(8.0)  # several heartbeats through the new gateway process
    assert all(w.alive() for w in story.workers)
    story.running("every task RUNNING after the gateway's restart")
    generation = story.settled()
    assert time.monotonic() - killed > 10.0
    after = story.assert_one_group_each_task_once()
    assert after["GroupId"] == before["GroupId"] == story.key and after["ProtocolName"] == "sessioned"
    assert generation >= before["Generation"]
    assert {m["MemberId"] for m in after["Members"]} == {m["MemberId"] for m in before["Members"]}
    assert "Traceback" not in story.gateway_log()


# --- (c) a broker restart, and who reaches the brokers directly -----------------------------------


def test_a_restart_of_the_broker_leading_the_config_topic_leaves_the_workers_running(story: Story) -> None:
    admin = AdminClient({"bootstrap.servers": story.brokers, "log_level": 0})
    config_topic = f"{story.key}-configs"

    def leader() -> int:
        try:
            return admin.list_topics(config_topic, timeout=10).topics[config_topic].partitions[0].leader
        except Exception:  # noqa: BLE001 (a metadata timeout while a node is down: ask again)
            return -1

    node = until(lambda: leader() if leader() >= 0 else None, 60, "the config topic's leader")
    story.cluster.kill(node)
    try:
        until(lambda: leader() not in (node, -1), RECOVERY_S, "another replica leads the config topic")
        time.sleep(5.0)
        assert all(w.alive() for w in story.workers)
        story.running("every task RUNNING while the config topic's leader is down")
    finally:
        story.cluster.start_node(node, timeout=120)

    def in_sync() -> bool:  # every topic's: the cluster is the session's, and others kill nodes too
        try:
            topics = admin.list_topics(timeout=10).topics.values()
            return all(len(p.isrs) == len(p.replicas) and p.leader >= 0 for t in topics for p in t.partitions.values())
        except Exception:  # noqa: BLE001
            return False

    until(in_sync, RECOVERY_S, "every replica in sync again")
    time.sleep(5.0)
    assert all(w.alive() for w in story.workers)
    story.running("every task RUNNING after the broker's restart")
    story.settled()
    story.assert_one_group_each_task_once()
    # Connect's config topic still takes writes: a change of the connector's config reaches every task.
    config = {
        **source_connector(f"{story.key}-data", TASKS),
        "topic.creation.default.replication.factor": "3",
        "throughput": "2",
    }
    until(
        lambda: http("PUT", f"{story.workers[0].url}/connectors/src/config", config)[0] == 200,
        60,
        "the connector's config is changed",
    )
    until(lambda: _config_of(story.workers[1]).get("throughput") == "2", 60, "another worker reads the new config")
    story.running("every task RUNNING with the new config")
    story.settled()
    story.assert_one_group_each_task_once()


def test_only_connector_clients_reach_a_broker_directly(story: Story) -> None:
    """Two views, over the whole story so far (start, gateway restart, broker restart):

    1. The Kafka clients' own: every Kafka client in a worker (its group member, the config, offset
       and status topics' producers and consumers, the shared admin, the connectors' producers and
       admins) opens its connections through kafka-clients' NetworkClient, which logs each one with
       the client's id and the address it dials (DEBUG, kept by a RegexFilter in the workers'
       log4j2 configuration). Every connection to a broker's own port comes from a connector client
       (`connector-...`: `producer.`/`admin.bootstrap.servers` are the brokers, by configuration);
       the worker's own clients dial only the gateway's ports, and each of them is seen doing so.
    2. The kernel's: the worker JVM's established TCP connections (its socket inodes in
       /proc/<pid>/fd, matched in /proc/<pid>/net/tcp and tcp6) to a broker's port are no more than
       the (connector client, broker port, node id) connections view 1 saw (a client keeps at most
       one connection per node id, its bootstrap connections having negative ids): a connection that
       no Kafka client logged (opened outside NetworkClient) would show here as one too many.
    """
    broker_ports = {n.port for n in story.cluster.nodes}
    gateway_ports = story.gateway_ports()
    for w in story.workers:
        initiated = w.initiated()
        assert initiated, f"{w.name}: no connection logged; is the log4j2 filter in place?"
        direct = {(client, port, node) for _, client, port, node in initiated if port in broker_ports}
        through = {(kind, client) for kind, client, port, _ in initiated if port in gateway_ports}
        assert all(client.startswith("connector-") for client, _, _ in direct), sorted(direct)
        assert {c for c, _, _ in direct} >= {f"connector-producer-src-{t}" for t in _tasks_of(story, w)}, sorted(direct)
        clients = {c for _, c in through}
        worker_clients = {
            f"connect-127.0.0.1:{w.port}",
            f"{story.key}-configs",
            f"{story.key}-offsets",
            f"{story.key}-statuses",
            f"{story.key}-shared-admin",
        }
        assert worker_clients <= clients, (sorted(through), sorted(worker_clients - clients))
        assert not [i for i in initiated if i[2] not in broker_ports | gateway_ports], initiated
        sockets = _established_ports(w.process.pid)
        to_brokers = [p for p in sockets if p in broker_ports]
        assert len(to_brokers) <= len(direct), (w.name, sorted(to_brokers), sorted(direct))
        assert any(p in gateway_ports for p in sockets), (w.name, sockets)


def _config_of(worker: OpsWorker) -> dict:
    status, body = http("GET", f"{worker.url}/connectors/src/config")
    return body if status == 200 else {}


def _tasks_of(story: Story, worker: OpsWorker) -> set[int]:
    """The source tasks Connect's REST API ever said ran on `worker`."""
    return {task for _, seen in story.seen for task, owner in seen.items() if owner == f"127.0.0.1:{worker.port}"}


def _established_ports(pid: int) -> list[int]:
    """The remote ports of `pid`'s established TCP connections (IPv4 and IPv6 sockets)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and fields[9] in inodes:  # ESTABLISHED
                ports.append(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


# --- (a) deleteGroups once the workers have stopped ----------------------------------------------


def test_deleting_the_group_once_its_workers_stopped(story: Story) -> None:
    story.stop_workers()
    until(lambda: story.described()["State"].upper() == "EMPTY", 60, "the group is empty")
    (deleted,) = groups_admin("delete", story.bootstrap, story.key)
    assert deleted == {"deleted": True}, deleted
    status, body = story.serve.request("GET", f"/v1/groups/{story.key}")
    assert body["ErrorCode"] == GROUP_ID_NOT_FOUND, (status, body)
    assert story.key not in {g["group"] for g in groups_admin("list", story.bootstrap)}


# --- (d) the Spark audit's tables -----------------------------------------------------------------


def test_the_audit_tells_the_story_of_the_real_group(story: Story, spark_session, capsys) -> None:
    from spark.audit import warehouse_of

    story.stop_workers()
    where = ["--warehouse", str(warehouse_of(spark_session)), "--database", f"ops_{story.key[-8:]}"]
    assert (
        cli.main(
            [
                "audit",
                "--bootstrap-servers",
                story.brokers,
                "--topic",
                story.topic,
                *where,
                "--trigger",
                "available-now",
                "--quiet",
            ]
        )
        == 0
    )
    capsys.readouterr()

    def sql(query: str) -> list[dict]:
        code = cli.main(["sql", *where, "--format", "json", query])
        out, err = capsys.readouterr()
        assert code == 0, err
        return [orjson.loads(line) for line in out.splitlines()]

    group = story.key
    member_of = {f"127.0.0.1:{w.port}": f"connect-127.0.0.1:{w.port}-" for w in story.workers}
    # Joins: each worker's group member joined, named by its client id.
    joined = sql(f"SELECT member, timestamp FROM events WHERE `group` = '{group}' AND kind = 'classic-member-joined'")
    for prefix in member_of.values():
        assert any(r["member"].startswith(prefix) for r in joined), (prefix, joined)
    # Generations: the classic rebalances, numbered in order, each to a higher generation.
    rebalances = sql(
        f"SELECT number, from_epoch, to_epoch, members FROM rebalances WHERE `group` = '{group}' ORDER BY number"
    )
    assert rebalances and [r["number"] for r in rebalances] == list(range(1, len(rebalances) + 1)), rebalances
    assert all(a["to_epoch"] < b["to_epoch"] for a, b in itertools.pairwise(rebalances)), rebalances
    assert max(r["members"] for r in rebalances) == 3, rebalances
    assert set(story.generations) <= {r["to_epoch"] for r in rebalances}, (story.generations, rebalances)
    # Who ran which task when: at every moment Connect's REST API was read during the story, the
    # ownership table names, for each task, the worker Connect named; and no task was ever held by
    # two members at once.
    ownership = sql(
        f"SELECT item, member, from_timestamp_ms AS since, to_timestamp_ms AS until FROM ownership "
        f"WHERE `group` = '{group}' AND connector = 'src' AND task IS NOT NULL"
    )
    assert {r["item"] for r in ownership} == {f"src-{t}" for t in range(TASKS)}, ownership
    assert len(story.seen) >= 4
    for at, seen in story.seen:
        for task, worker in seen.items():
            holders = [
                r["member"]
                for r in ownership
                if r["item"] == f"src-{task}" and r["since"] <= at and (r["until"] is None or r["until"] > at)
            ]
            assert len(holders) == 1 and holders[0].startswith(member_of[worker]), (at, task, worker, holders)
    for item in {r["item"] for r in ownership}:
        spans = sorted(
            (r["since"], r["until"] if r["until"] is not None else 2**62) for r in ownership if r["item"] == item
        )
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), (item, spans)
    # The workers stopped at the end: nothing is held any more.
    assert not [r for r in ownership if r["until"] is None], ownership


# --- helpers ----------------------------------------------------------------------------------------


def _answers(port: int) -> bool:
    import socket

    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False
