"""A local Apache Kafka cluster of 1 or 3 nodes on loopback, each a KRaft broker and controller in one JVM.

Theory of operation. A cluster is known by its first node's port P and a run directory:

    <run dir>/kafka-P/cluster.json          cluster id, and each node's id, port and controller port
    <run dir>/kafka-P/node-<id>/server.properties, data/, server.log, pid

Node i listens on P+i-1 for clients; controller ports are picked free when the cluster is created and
kept in cluster.json, so a node restarted later rejoins its quorum on the same ports. `start` on a
cluster that is not running formats new storage (a new cluster id): the dev broker keeps nothing
from one `up` to the next, as an empty test broker should. A node killed and started again
(`Cluster.kill`, `Cluster.start_node`) keeps its data, which is what the broker-failure tests need.

A pid file is trusted only while that pid is still a `kafka.Kafka` started with exactly that node's
server.properties (its /proc/<pid>/cmdline says so); anything else (the process is gone, the kernel
recycled the pid) makes the file stale. Brokers run in their own session, so they outlive the
`make` or shell that started them; the pytest fixtures use the same functions and stop their
cluster at the end of the session.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from base64 import urlsafe_b64encode
from dataclasses import dataclass, replace
from pathlib import Path

from confluent_kafka.admin import AdminClient

from coordinator.errors import CliError
from coordinator.tools.devbroker import jars

HOST = "127.0.0.1"
DEFAULT_PORT = 19092
DEFAULT_RUN_DIR = Path(".run")
STOP_TIMEOUT = 15.0
START_TIMEOUT = 60.0
_LOG_TAIL_LINES = 15

# What a JVM per node may use: the dev cluster shares a 2-core machine with the coordinators and the
# tests. The G1 settings are those of Kafka's own kafka-run-class.sh.
JVM_OPTIONS = (
    "-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)  # fmt: skip

# Processes this process started. Reaping them avoids zombies, and Popen warns when it is
# garbage-collected while its child still runs (the pytest fixture's case).
_started: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class Node:
    id: int
    port: int
    controller_port: int
    dir: Path

    @property
    def properties(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"

    @property
    def pid_file(self) -> Path:
        return self.dir / "pid"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def pid(self) -> int | None:
        """This node's pid if it runs; a stale pid file is removed."""
        try:
            text = self.pid_file.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        if text.isdigit() and _is_node(int(text), self.properties):
            return int(text)
        self.pid_file.unlink(missing_ok=True)
        return None


@dataclass(frozen=True)
class Cluster:
    port: int
    dir: Path
    cluster_id: str
    nodes: tuple[Node, ...]
    already_running: bool = False

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.address for node in self.nodes)

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise CliError(f"the cluster on port {self.port} has no node {node_id}")

    def pids(self) -> dict[int, int | None]:
        return {node.id: node.pid() for node in self.nodes}

    def kill(self, node_id: int, sig: signal.Signals = signal.SIGKILL, timeout: float = STOP_TIMEOUT) -> None:
        """Stop one node with `sig` (kill -9 by default) and wait until it is gone."""
        node = self.node(node_id)
        pid = node.pid()
        if pid is not None:
            _stop_pid(pid, node, sig, timeout)
            node.pid_file.unlink(missing_ok=True)

    def start_node(self, node_id: int, timeout: float = START_TIMEOUT) -> None:
        """Start one stopped node on its existing storage and wait until the cluster lists it again."""
        node = self.node(node_id)
        if node.pid() is None:
            process = _spawn(node)
            _wait_ready(self, {node.id: process}, timeout)

    def stop(self, timeout: float = STOP_TIMEOUT) -> list[int]:
        """Stop every node (SIGTERM, then SIGKILL after `timeout`); the pids that ran."""
        running = [(node, pid) for node in self.nodes if (pid := node.pid()) is not None]
        # All at once: a node stopped alone waits for a controlled shutdown the others must grant.
        for _node, pid in running:
            _signal(pid, signal.SIGTERM)
        for node, pid in running:
            _stop_pid(pid, node, signal.SIGTERM, timeout)
            node.pid_file.unlink(missing_ok=True)
        return [pid for _, pid in running]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the ephemeral range (a
    server restarted on it cannot find it taken by a client's self-connection; `free_port_block`)."""
    return free_port_block(1)


def start(
    port: int,
    run_dir: Path | str,
    nodes: int = 1,
    timeout: float = START_TIMEOUT,
    settings: dict[str, object] | None = None,
) -> Cluster:
    """Start a cluster of `nodes` nodes whose first listens on `port`, and wait until all answer.

    `settings` override server.properties of a new cluster (a benchmark that needs Kafka's own
    defaults back, say). A no-op when that cluster already runs; nodes of it that stopped are
    started again."""
    if nodes not in (1, 3):
        raise CliError(f"--nodes must be 1 or 3, got {nodes}")
    run_dir = Path(run_dir)
    existing = load(port, run_dir)
    if existing is not None and any(pid is not None for pid in existing.pids().values()):
        if len(existing.nodes) != nodes:
            raise CliError(
                f"a {len(existing.nodes)}-node cluster already runs on port {port}; "
                f"stop it with `coordinator dev-broker down` first"
            )
        spawned = {node.id: _spawn(node) for node in existing.nodes if node.pid() is None}
        _wait_ready(existing, spawned, timeout)
        return replace(existing, already_running=not spawned)

    cluster = _create(port, run_dir, nodes, settings or {})
    lib = jars.libs()
    _format(cluster, lib)
    spawned = {node.id: _spawn(node, lib) for node in cluster.nodes}
    try:
        _wait_ready(cluster, spawned, timeout)
    except CliError:
        cluster.stop(timeout=5.0)
        raise
    return cluster


def stop(port: int, run_dir: Path | str, timeout: float = STOP_TIMEOUT) -> list[int]:
    """Stop the cluster on `port`; the pids that ran (empty if none did)."""
    cluster = load(port, Path(run_dir))
    return [] if cluster is None else cluster.stop(timeout)


def status(port: int, run_dir: Path | str) -> Cluster | None:
    """The cluster on `port` if at least one of its nodes runs, else None."""
    cluster = load(port, Path(run_dir))
    if cluster is None or all(pid is None for pid in cluster.pids().values()):
        return None
    return replace(cluster, already_running=True)


def load(port: int, run_dir: Path) -> Cluster | None:
    """The cluster created on `port` in `run_dir`, running or not, from its cluster.json."""
    directory = run_dir / f"kafka-{port}"
    try:
        spec = json.loads((directory / "cluster.json").read_text(encoding="utf-8"))
        nodes = tuple(
            Node(n["id"], n["port"], n["controller_port"], directory / f"node-{n['id']}") for n in spec["nodes"]
        )
        return Cluster(port, directory, spec["cluster_id"], nodes)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _create(port: int, run_dir: Path, count: int, settings: dict[str, object]) -> Cluster:
    ports = [port + i for i in range(count)]
    for p in ports:
        if _port_in_use(p):
            raise CliError(f"port {p} is already in use by another process; pick another --port")
    directory = run_dir / f"kafka-{port}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    controller_ports = _free_ports(count, exclude=set(ports))
    cluster_id = _random_cluster_id()
    nodes = tuple(Node(i + 1, ports[i], controller_ports[i], directory / f"node-{i + 1}") for i in range(count))
    cluster = Cluster(port, directory, cluster_id, nodes)
    spec = {
        "cluster_id": cluster_id,
        "kafka_version": jars.kafka_version(),
        "nodes": [{"id": n.id, "port": n.port, "controller_port": n.controller_port} for n in nodes],
    }
    for node in nodes:
        node.dir.mkdir()
        node.properties.write_text(server_properties(cluster, node, settings), encoding="utf-8")
    (directory / "cluster.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return cluster


def _random_cluster_id() -> str:
    """A KRaft cluster id: a UUID in URL-safe base64 without padding, as `random-uuid` prints. Like
    Kafka's Uuid.randomUuid, never one starting with '-', which StorageTool would read as an option
    (1 start in 64 failed with "argument --cluster-id/-t: expected one argument")."""
    while True:
        cluster_id = urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def server_properties(cluster: Cluster, node: Node, overrides: dict[str, object] | None = None) -> str:
    """The node's server.properties: development settings, with durability set as in production.
    In an override's text, `{port}` and `{controller_port}` are the node's (a second listener, say
    SASL beside PLAINTEXT, names the node's controller port in `listeners`)."""
    replicas = len(cluster.nodes)
    min_isr = min(2, replicas)
    voters = ",".join(f"{n.id}@{HOST}:{n.controller_port}" for n in cluster.nodes)
    settings = {
        "process.roles": "broker,controller",
        "node.id": node.id,
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": node.dir / "data",
        # Every topic, internal ones included, on every node, with two in-sync copies for a write
        # when there are three nodes (docker/compose.yaml's settings); one node has one of each.
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        "unclean.leader.election.enable": "false",
        # A coordinator must never get an auto-created, uncompacted topic.
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        # Fewer internal partitions than the defaults (50): each is a log to create at first use.
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.num.partitions": 10,
        # Development: a consumer group forms at once, and the cleaner looks for work every half second
        # (15 s by default), with a small dedupe buffer for a small heap (128 MiB by default).
        "group.initial.rebalance.delay.ms": 0,
        "log.cleaner.backoff.ms": 500,
        "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
        **{
            key: value.format(port=node.port, controller_port=node.controller_port) if isinstance(value, str) else value
            for key, value in (overrides or {}).items()
        },
    }
    header = f"# Node {node.id} of the dev cluster {cluster.cluster_id} (written by `coordinator dev-broker up`)\n"
    return header + "".join(f"{key}={value}\n" for key, value in settings.items())


def _format(cluster: Cluster, lib: Path) -> None:
    # One JVM per node, all at once: each takes about two seconds to start.
    formats = [
        (node, subprocess.Popen(
            [jars.java(), "-cp", f"{lib}/*", f"-Dlog4j2.configurationFile={jars.LOG4J_CONFIG}",
             "kafka.tools.StorageTool", "format", "--cluster-id", cluster.cluster_id,
             "--config", str(node.properties)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        ))
        for node in cluster.nodes
    ]  # fmt: skip
    for node, process in formats:
        output, _ = process.communicate()
        if process.returncode != 0:
            text = output.decode("utf-8", "replace").strip().splitlines()[-_LOG_TAIL_LINES:]
            raise CliError(f"formatting node {node.id}'s storage failed:\n" + "\n".join(f"  {x}" for x in text))


def _spawn(node: Node, lib: Path | None = None) -> subprocess.Popen[bytes]:
    lib = lib or jars.libs()
    with node.log_file.open("ab") as log:
        process = subprocess.Popen(
            [jars.java(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile={jars.LOG4J_CONFIG}",
             "-cp", f"{lib}/*", "kafka.Kafka", str(node.properties)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    _started[process.pid] = process
    node.pid_file.write_text(f"{process.pid}\n", encoding="ascii")
    return process


def _wait_ready(cluster: Cluster, spawned: dict[int, subprocess.Popen[bytes]], timeout: float) -> None:
    """Until describe_cluster lists every node; a spawned node that exits first fails with its log."""
    deadline = time.monotonic() + timeout
    while True:
        for node_id, process in spawned.items():
            if process.poll() is not None:
                node = cluster.node(node_id)
                node.pid_file.unlink(missing_ok=True)
                raise CliError(
                    f"Apache Kafka node {node_id} exited with status {process.returncode} before answering"
                    f"{_log_tail(node.log_file)}"
                )
        if _registered(cluster) == len(cluster.nodes):
            return
        if time.monotonic() > deadline:
            waiting = min(spawned) if spawned else cluster.nodes[0].id
            raise CliError(
                f"Apache Kafka did not list all {len(cluster.nodes)} nodes within {timeout:g}s"
                f"{_log_tail(cluster.node(waiting).log_file)}"
            )
        time.sleep(0.2)


def _registered(cluster: Cluster) -> int:
    """How many brokers the cluster's metadata lists, asking any node that answers (0 if none does)."""
    for node in cluster.nodes:
        try:
            # Waiting for the port first keeps librdkafka from logging each refused connection.
            socket.create_connection((HOST, node.port), timeout=0.5).close()
        except OSError:
            continue
        admin = AdminClient({"bootstrap.servers": node.address, "log_level": 0})
        try:
            return len(admin.describe_cluster(request_timeout=2).result(timeout=3).nodes)
        except Exception:  # noqa: BLE001 - a timeout, a refused request, a node going away: all "not yet"
            continue
    return 0


def _free_ports(count: int, exclude: set[int]) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        p = free_port()
        if p not in exclude and p not in ports:
            ports.append(p)
    return ports


def _is_node(pid: int, properties: Path) -> bool:
    # A zombie has an empty cmdline, so a node that died but was not reaped yet counts as gone.
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return False
    return len(args) >= 2 and args[-2] == b"kafka.Kafka" and args[-1] == os.fsencode(properties)


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        # Connections of an earlier broker still in TIME_WAIT must not count as "in use".
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def _log_tail(log_file: Path) -> str:
    try:
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    except OSError:
        return ""
    if not lines:
        return f" (its log {log_file} is empty)"
    return f"; last lines of {log_file}:\n" + "\n".join(f"  {line}" for line in lines)


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _stop_pid(pid: int, node: Node, sig: signal.Signals, timeout: float) -> None:
    """Send `sig` and wait; SIGKILL when it outlives `timeout`."""
    _signal(pid, sig)
    if not _wait_gone(pid, node, timeout):
        _signal(pid, signal.SIGKILL)
        if not _wait_gone(pid, node, 5.0):
            raise CliError(f"Apache Kafka node {node.id} (pid {pid}) survived SIGKILL")
    child = _started.pop(pid, None)
    if child is not None:
        child.wait()


def _wait_gone(pid: int, node: Node, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _is_node(pid, node.properties):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def free_port_block(count: int, attempts: int = 200) -> int:
    """A port P such that P .. P+count-1 are all free right now, for a node's listeners.

    Taken below the kernel's ephemeral range: while a node is down, a client retrying to connect to
    its port can be given that very port as its own source port and connect to itself (TCP
    simultaneous open), and the restarted node then fails with "Address already in use"."""
    low = _ephemeral_low()
    for _ in range(attempts):
        first = random.randrange(10_000, low - count)
        if not any(_port_in_use(first + i) for i in range(count)):
            return first
    raise CliError(f"found no {count} consecutive free ports on {HOST} below {low}")


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low, 10_100)
