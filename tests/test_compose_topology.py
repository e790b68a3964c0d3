"""docker/compose.yaml's deployment, without Docker, on the local three-node cluster.

The compose file is read, not copied: topic-init's `coordinator topic create ... --if-not-exists`
and `coordinator topic validate ...` command lines run as written, and the two coordinator services
run with their command lines and environment (the image's ENV, then the service's), the token and
ACL files they mount (docker/tokens.example, docker/acls.example). Only what depends on where it
runs is adapted: the broker addresses (each `kafka-N:9092` is local node N), the listen address and
advertised URL (both coordinators on one host), the mounted files' paths, and the topic's name
(one of this test's own: the session's cluster is shared).

The gateway service runs too, with its command line as written, adapted the same way (the
brokers, its listen port and the host its answers name, the coordinators' Kafka listeners, which
the coordinators serve on ports of this test's choosing, each advertising its own). So do the two
Kafka Connect services, as Kafka Connect 4.3.1 JVMs (test_connect_real's jars): with the properties
their command line gives connect-distributed.sh (the mounted file and the appended REST host), the
gateway's, the brokers' and their REST addresses adapted, and their internal topics named for this
run; the group id is as written (it lives in this run's coordinator topic, never at the brokers).

What it holds to: the local cluster has the compose brokers' durability settings; the topic is
as topic-init makes it (replication 3, min ISR 2, compacted, the partition count it validates);
both coordinators serve, sharing the partitions without overlap, as the consumer group describes
them; the image's health check passes against each; authentication and every ACL of the example
files are enforced as the files say (anonymous requests as ANONYMOUS: anonymous access is on for
the Kafka listener); a Kafka client (confluent-kafka's AdminClient) reaches the brokers through the
gateway and sees only its ports; a member of the Connect workers' group, by hand, joins through it
onto the coordinator that owns the group while a sink connector's `connect-<name>` group is left to
the brokers; both Connect workers join that group there and run a source connector's tasks; a
worker with the example worker token joins through find-coordinator asked of either instance; and
the coordinator that owns both groups, killed with SIGKILL, hands its partitions to the other,
which serves the SDK group's members exactly as they were acknowledged, and where the Connect
workers carry on through the gateway, none of them exiting, every task running.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from confluent_kafka.admin import AdminClient
from serve_workers import GONE, Ledger, Worker, converge, items, served, wait_for

from records import TaskId
from records.connect_protocol import SESSIONED, WorkerMetadata, encode_metadata

from coordinator.api import kafka_protocol as kp
from coordinator.cli import main as coordinator
from coordinator.gateway.rules import COORDINATOR_NODE_ID, parse_address
from coordinator.service import auth
from coordinator.service.ownership import owner_client_id
from coordinator.tools.connect_worker import ConnectWorker, http, source_connector, until
from coordinator.tools.devbroker import Cluster, free_port, free_port_block
from coordinator.tools.partitions import partition_for
from coordinator.tools.process import ServeProcess
from tests.support.compose import (
    COMPOSE,
    DOCKER,
    OUR_ENV,
    SINK_GROUP_NAMES,
    brokers,
    connect_properties,
    connect_workers,
    coordinator_services,
    environment,
    gateway_service,
    healthcheck_code,
    interpolate,
    mounted_files,
    option,
    run_healthcheck,
    setting,
    stages,
    topic_init_commands,
)
from tests.support.kafka_listener import MEMBER_ID_REQUIRED, Client

pytestmark = pytest.mark.integration

# Broker settings that say where a node runs (addresses, paths, listener names), not how durable it is.
WHERE_IT_RUNS = {
    "listeners",
    "advertised.listeners",
    "controller.quorum.voters",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "log.dirs",
}
OPERATIONS = ("Describe", "Alter", "Read", "Delete")
CONNECT_TASKS = 2
TIMEOUT_S = 120  # a consumer group forming, partitions loading, a session expiring: seconds on a busy machine


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()))


def broker_addresses(compose: dict[str, Any], cluster: Cluster) -> dict[str, str]:
    """Each compose broker's internal address (kafka-N:9092) -> the local node with its node id."""
    addresses = {}
    for _name, service in brokers(compose).items():
        env = environment(service)
        internal = next(a for a in env["KAFKA_ADVERTISED_LISTENERS"].split(",") if a.startswith("INTERNAL://"))
        addresses[internal.removeprefix("INTERNAL://")] = cluster.node(int(env["KAFKA_NODE_ID"])).address
    return addresses


def local_bootstrap(value: str, addresses: dict[str, str]) -> str:
    return ",".join(addresses[a] for a in value.split(","))


def node_properties(path: Path) -> dict[str, str]:
    pairs = (line.partition("=") for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {key: value for key, _, value in pairs}


def with_option(argv: list[str], name: str, value: str) -> list[str]:
    argv = list(argv)
    argv[argv.index(name) + 1] = value
    return argv


def image_environment() -> dict[str, str]:
    """Our variables among the final image stage's ENV (COORDINATOR_LISTEN...)."""
    env = {}
    for instruction, arguments in stages()[-1]:
        if instruction == "ENV":
            env.update(item.partition("=")[::2] for item in shlex.split(arguments))
    return {k: v for k, v in env.items() if OUR_ENV.match(k)}


class Deployment:
    """The compose deployment's topic and coordinators, run locally."""

    def __init__(self, compose: dict[str, Any], cluster: Cluster, tmp_path: Path) -> None:
        self.compose = compose
        self.cluster = cluster
        self.tmp_path = tmp_path
        self.addresses = broker_addresses(compose, cluster)
        self.topic = f"compose-{uuid.uuid4().hex[:8]}"
        (self.create,) = [c for c in topic_init_commands(compose) if c[:2] == ["topic", "create"]]
        (self.validate,) = [c for c in topic_init_commands(compose) if c[:2] == ["topic", "validate"]]
        self.compose_topic = option(self.create, "--topic")
        self.partitions = int(option(self.create, "--partitions"))
        self.servers: dict[str, ServeProcess] = {}
        self.kafka_listeners: dict[str, str] = {}  # coordinator service -> its Kafka listener here
        self.gateway: subprocess.Popen | None = None
        self.gateway_port = 0
        self.gateway_log = tmp_path / "gateway.log"
        self.connect: dict[str, ConnectWorker] = {}

    def topic_init(self, argv: list[str]) -> list[str]:
        argv = with_option(
            argv, "--bootstrap-servers", local_bootstrap(option(argv, "--bootstrap-servers"), self.addresses)
        )
        return with_option(argv, "--topic", self.topic)

    def coordinator(self, name: str) -> ServeProcess:
        """The compose service `name` as a local process: its command line and environment, with
        addresses, paths and the topic name adapted to this machine."""
        service = coordinator_services(self.compose)[name]
        env = {**image_environment(), **environment(service)}
        mounts = {target: str(source) for target, source in mounted_files(service).items()}
        assert env.get("WORKER_OFFSETS_TOPIC") == self.compose_topic, "the coordinators serve topic-init's topic"
        port = free_port()
        env.update({k: mounts[v] for k, v in env.items() if v in mounts})
        env["KAFKA_BOOTSTRAP_SERVERS"] = local_bootstrap(env["KAFKA_BOOTSTRAP_SERVERS"], self.addresses)
        env["WORKER_OFFSETS_TOPIC"] = self.topic
        env["COORDINATOR_LISTEN"] = f"127.0.0.1:{port}"
        command = with_option(service["command"], "--advertised-url", f"http://127.0.0.1:{port}")
        # Its Kafka listener on a port of its own here (in compose both use 9400, on their own hosts),
        # advertised as what this host dials, as compose advertises each by its service name.
        kafka = f"127.0.0.1:{free_port()}"
        command = with_option(with_option(command, "--kafka-listener", kafka), "--kafka-advertised", kafka)
        self.kafka_listeners[name] = kafka
        server = ServeProcess(self.cluster.bootstrap_servers, self.topic, self.tmp_path, port=port)
        server.args = [sys.executable, "-m", "coordinator", *command]
        # The container's environment: the image's and the service's variables, none of the test run's.
        server.env = {**{k: v for k, v in os.environ.items() if not OUR_ENV.match(k)}, **env}
        self.servers[name] = server
        return server

    def start_gateway(self) -> subprocess.Popen:
        """The gateway service as a local process: its command line, with the brokers, its listen
        port, the host its answers name and the coordinators' Kafka listeners adapted."""
        _, service = gateway_service(self.compose)
        command = service["command"]
        self.gateway_port = free_port_block(12)  # the gateway's bootstrap port, then its coordinator and broker ports
        coordinators = dict(
            zip(
                [option(s["command"], "--kafka-advertised") for s in coordinator_services(self.compose).values()],
                [self.kafka_listeners[n] for n in coordinator_services(self.compose)],
                strict=True,
            )
        )
        command = with_option(
            command, "--bootstrap-server", local_bootstrap(option(command, "--bootstrap-server"), self.addresses)
        )
        command = with_option(command, "--listen", f"127.0.0.1:{self.gateway_port}")
        command = with_option(command, "--advertised-host", "127.0.0.1")
        command = with_option(
            command, "--coordinator", ",".join(coordinators[a] for a in option(command, "--coordinator").split(","))
        )
        env = {
            **{k: v for k, v in os.environ.items() if not OUR_ENV.match(k)},
            **image_environment(),
            **environment(service),
        }
        with self.gateway_log.open("ab") as log:
            self.gateway = subprocess.Popen(
                [sys.executable, "-m", "coordinator", *command], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        return self.gateway

    def connect_worker(self, name: str) -> ConnectWorker:
        """The Connect service `name` as a local JVM (Kafka Connect 4.3.1, as test_connect_real runs):
        the properties its command line gives connect-distributed.sh, with the gateway's and the
        brokers' addresses, its REST listener and advertised host, and its internal topics' names
        (this run's own: the session's cluster is shared) adapted. The group id is as written: the
        group lives in this run's own coordinator topic and never reaches the brokers."""
        _, gateway = gateway_service(self.compose)
        props = connect_properties(self.compose, name)
        group = props["group.id"]
        assert (
            props["bootstrap.servers"] == f"{option(gateway['command'], '--advertised-host')}:"
            f"{option(gateway['command'], '--listen').rpartition(':')[2]}"
        )
        worker = ConnectWorker(self.tmp_path, name, "unused", "unused", group)  # its settings replaced below
        props["bootstrap.servers"] = f"127.0.0.1:{self.gateway_port}"
        for prefix in ("producer", "consumer", "admin"):
            key = f"{prefix}.bootstrap.servers"
            props[key] = local_bootstrap(props[key], self.addresses)
        for key in ("config.storage.topic", "offset.storage.topic", "status.storage.topic"):
            props[key] = f"{props[key]}-{self.topic}"
        assert props["rest.advertised.host.name"] == name
        props.update(
            {
                "listeners": f"http://127.0.0.1:{worker.port}",
                "rest.advertised.host.name": "127.0.0.1",
                "rest.advertised.port": str(worker.port),
            }
        )
        worker.properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        self.connect[name] = worker
        return worker

    def stop_gateway(self) -> None:
        if self.gateway is not None and self.gateway.poll() is None:
            self.gateway.terminate()
            assert self.gateway.wait(30) == 0, self.gateway_log.read_text()

    def settings(self, name: str) -> dict[str, str]:
        return self.servers[name].env

    def ownership_group(self) -> str:
        groups = {
            env.get("COORDINATOR_GROUP_ID") or f"worker-coordinator-{self.topic}"
            for env in map(self.settings, self.servers)
        }
        (group,) = groups
        return group

    def owners(self) -> dict[str, set[int]]:
        return {name: served(server) for name, server in self.servers.items()}

    def owner(self, partition: int) -> str | None:
        return next((name for name, parts in self.owners().items() if partition in parts), None)


def described_owners(cluster: Cluster, group: str, topic: str) -> dict[str, set[int]]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    description = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    return {
        m.client_id: {
            tp.partition for tp in (m.assignment.topic_partitions if m.assignment else ()) if tp.topic == topic
        }
        for m in description.members
    }


def expected_allowed(acls: list[auth.Acl], principal: str, operation: str, group: str) -> bool:
    """acls.example's rule, as its header states it: an ACL line names a principal (or *), some of
    Read, Describe, Alter, Delete, All, and a glob over group ids; Describe is implied by any."""
    for acl in acls:
        operations = {o.value for o in acl.operations}
        if (
            acl.principal in ("*", principal)
            and fnmatch.fnmatchcase(group, acl.group_pattern)
            and ("All" in operations or operation in operations or operation == "Describe")
        ):
            return True
    return False


def attempt(server: ServeProcess, operation: str, group: str, token: str | None) -> tuple[int, dict]:
    """The request of `operation` on `group`, as its principal would send it."""
    if operation == "Describe":
        return server.request("GET", f"/v1/groups/{group}", token=token)
    if operation == "Alter":
        return server.request(
            "PUT", f"/v1/groups/{group}/connectors", {"Connectors": [{"Name": "acl", "Tasks": 1}]}, token=token
        )
    if operation == "Read":
        return server.request(
            "POST",
            "/v1/connect-group/heartbeat",
            {
                "GroupId": group,
                "MemberId": f"acl-{uuid.uuid4().hex[:6]}",
                "MemberEpoch": 0,
                "RebalanceTimeoutMs": 5000,
                "ServerAssignor": "incremental_cooperative",
            },
            token=token,
        )
    assert operation == "Delete"
    return server.request("DELETE", f"/v1/groups/{group}", token=token)


@pytest.fixture
def deployment(compose, kafka_cluster3, tmp_path):  # noqa: ANN001, ANN201
    d = Deployment(compose, kafka_cluster3, tmp_path)
    try:
        yield d
    finally:
        for worker in d.connect.values():
            worker.stop()
        d.stop_gateway()
        for server in d.servers.values():
            server.stop()
        text = d.gateway_log.read_text(errors="replace") if d.gateway_log.exists() else ""
        assert "Traceback" not in text, text
        for server in d.servers.values():
            text = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
            assert "Traceback" not in text and "unexpected failure" not in text, server.log()


def test_the_compose_deployment_runs_locally(deployment: Deployment, capsys) -> None:  # noqa: ANN001
    d = deployment
    cluster = d.cluster

    # --- the brokers: the local nodes have the compose brokers' settings, where they say how durable
    for name, service in brokers(d.compose).items():
        env = environment(service)
        local = node_properties(cluster.node(int(env["KAFKA_NODE_ID"])).properties)
        for key, value in env.items():
            prop = key.removeprefix("KAFKA_").lower().replace("_", ".")
            if key.startswith("KAFKA_") and prop not in WHERE_IT_RUNS and prop in local:
                assert local[prop] == value, (name, prop, local[prop], value)
        for prop in (
            "default.replication.factor",
            "min.insync.replicas",
            "transaction.state.log.min.isr",
            "unclean.leader.election.enable",
        ):
            assert prop in local and f"KAFKA_{prop.upper().replace('.', '_')}" in env, prop

    # --- topic-init: create (or, the second time, find and validate), then validate
    create, validate = d.topic_init(d.create), d.topic_init(d.validate)
    assert coordinator(create) == 0
    assert coordinator(create) == 0  # every `compose up` runs it again: --if-not-exists validates instead
    assert "already exists" in capsys.readouterr().out
    assert coordinator(validate) == 0
    assert "is fit for the coordinator" in capsys.readouterr().out
    assert (
        coordinator(
            [
                "topic",
                "describe",
                "--format",
                "json",
                "--bootstrap-servers",
                option(create, "--bootstrap-servers"),
                "--topic",
                d.topic,
            ]
        )
        == 0
    )
    described = orjson.loads(capsys.readouterr().out)
    assert described["partition_count"] == d.partitions == int(option(d.validate, "--partitions"))
    assert described["replication_factor"] == int(option(d.create, "--replication-factor")) == 3
    assert described["configs"]["min.insync.replicas"]["value"] == "2"
    assert described["compacted"]

    # --- both coordinators serve, sharing the partitions without overlap
    names = sorted(coordinator_services(d.compose))
    assert len(names) == 2, names
    first, second = (d.coordinator(name) for name in names)
    for name, server in d.servers.items():
        assert setting(server.args[3:], server.env, "--ownership", "COORDINATOR_OWNERSHIP") == "group", name
    first.start(wait=False)
    wait_for(lambda: served(first) == set(range(d.partitions)), TIMEOUT_S, f"{names[0]} to serve every partition")
    second.start(wait=False)

    def shared() -> bool:
        owners = d.owners()
        together = set().union(*owners.values())
        return all(owners.values()) and together == set(range(d.partitions)) and not owners[names[0]] & owners[names[1]]

    wait_for(shared, TIMEOUT_S, "the partitions to be shared without overlap")
    group_id = d.ownership_group()
    # Each member's client id: its advertised URL and Kafka listener (what find-coordinator names).
    wait_for(
        lambda: (
            described_owners(cluster, group_id, d.topic)
            == {owner_client_id(s.url, parse_address(d.kafka_listeners[n])): served(s) for n, s in d.servers.items()}
        ),
        TIMEOUT_S,
        "the ownership consumer group to describe who serves what",
    )
    for server in (first, second):
        assert server.process.poll() is None
        assert run_healthcheck(d.settings(server_name(d, server))["COORDINATOR_LISTEN"]) == 0, healthcheck_code()

    # --- authentication and the example ACLs
    service = coordinator_services(d.compose)[names[0]]
    files = mounted_files(service)
    tokens = auth.parse_tokens(files[environment(service)["COORDINATOR_TOKENS_FILE"]].read_text(), "tokens")
    acls = auth.parse_acls(files[environment(service)["COORDINATOR_ACLS_FILE"]].read_text(), "acls")
    assert files[environment(service)["COORDINATOR_TOKENS_FILE"]] == DOCKER / "tokens.example"
    assert files[environment(service)["COORDINATOR_ACLS_FILE"]] == DOCKER / "acls.example"
    token_of = {principal: token for token, principal in tokens.items()}
    # A group for each pattern the ACLs name, and one that only a `*` pattern matches.
    groups = {acl.group_pattern.replace("*", "x").replace("?", "x") for acl in acls}
    groups.add(f"unmatched-{uuid.uuid4().hex[:6]}")
    assert all(
        any(fnmatch.fnmatchcase(g, acl.group_pattern) for acl in acls) or g.startswith("unmatched") for g in groups
    )
    for server in (first, second):
        status, body = server.request("GET", "/v1/groups", token="not-a-token")
        assert (status, body["ErrorCode"]) == (401, 30), body
        assert server.request("GET", "/health")[0] == 200  # open
    # Anonymous access is on (the Kafka listener's requests act as ANONYMOUS): a request without a
    # token is ANONYMOUS, held to the ACLs like every principal.
    assert all(
        setting(s.args[3:], s.env, "--allow-anonymous", "COORDINATOR_ALLOW_ANONYMOUS") == "true"
        for s in (first, second)
    )
    token_of[auth.ANONYMOUS] = None
    outcomes = {}
    for group in sorted(groups):
        for principal in sorted(token_of):
            for operation in OPERATIONS:
                server = (first, second)[len(outcomes) % 2]  # either instance: both enforce the same files
                status, body = attempt(server, operation, group, token_of[principal])
                allowed = expected_allowed(acls, principal, operation, group)
                outcomes[(principal, operation, group)] = allowed
                if allowed:
                    # Let in; the answer is the protocol's (maybe NOT_COORDINATOR from the other instance).
                    assert status == 200, (principal, operation, group, status, body)
                else:
                    assert (status, body["ErrorCode"]) == (403, 30), (principal, operation, group, status, body)
    # The examples grant and refuse something each: the matrix above checked both ways.
    assert any(outcomes.values()) and not all(outcomes.values())

    # --- the gateway: Kafka clients through it, the Connect workers' group to our coordinators
    connect_group = connect_properties(d.compose, next(iter(connect_workers(d.compose))))["group.id"]
    # The SDK workers' group (below), in the Connect workers' group's partition, so that the SIGKILL
    # below moves both.
    group = next(
        g
        for g in (f"connect-compose-{i}" for i in range(10_000))
        if partition_for(g, d.partitions) == partition_for(connect_group, d.partitions)
    )
    admin_token = token_of[next(p for p in token_of if expected_allowed(acls, p, "Alter", group))]
    d.start_gateway()
    metadata = until(lambda: gateway_metadata(d), TIMEOUT_S, "the gateway to answer Metadata")
    node_ids = sorted(int(environment(s)["KAFKA_NODE_ID"]) for s in brokers(d.compose).values())
    ports = {b.id: b.port for b in metadata.brokers.values()}
    assert ports == {COORDINATOR_NODE_ID: d.gateway_port + 1, **{n: d.gateway_port + 2 + n for n in node_ids}}
    assert all(b.host == "127.0.0.1" for b in metadata.brokers.values())
    assert d.topic in metadata.topics and len(metadata.topics[d.topic].partitions) == d.partitions
    # A member of the workers' group, by hand: FindCoordinator, JoinGroup, SyncGroup, Heartbeat through
    # the gateway land on the coordinator that owns the group; then it leaves.
    connect_owner = d.owner(partition_for(connect_group, d.partitions))
    member = asyncio.run(
        asyncio.wait_for(join_through_gateway(d, connect_group, d.servers[connect_owner], admin_token), TIMEOUT_S)
    )

    # --- the two Kafka Connect workers, with the compose file's properties
    for name in sorted(connect_workers(d.compose)):
        d.connect_worker(name).start()
    until(lambda: all(w.up() for w in d.connect.values()), TIMEOUT_S, "the Connect workers' REST APIs")
    urls = {w.url.rstrip("/") for w in d.connect.values()}
    until(
        lambda: connect_members(d.servers[connect_owner], connect_group, admin_token) == urls,
        TIMEOUT_S,
        f"both Connect workers in group {connect_group} at {connect_owner}",
    )
    assert member not in connect_members(d.servers[connect_owner], connect_group, admin_token)
    first_worker = next(iter(d.connect.values()))
    # A source connector: its producer goes to the brokers directly (producer.bootstrap.servers);
    # replication 3, as the brokers' min ISR 2 wants for acks=all.
    connector = {
        **source_connector(f"{connect_group}-data-{d.topic}", CONNECT_TASKS),
        "topic.creation.default.replication.factor": "3",
    }
    status, body = http("PUT", f"{first_worker.url}/connectors/source/config", connector)
    assert status in (200, 201), body
    until(lambda: first_worker.running("source", CONNECT_TASKS), TIMEOUT_S, "the connector's tasks RUNNING")

    # --- a worker joins through find-coordinator, asked of either instance
    worker_principal = next(
        p
        for p in token_of
        if token_of[p] and expected_allowed(acls, p, "Read", group) and not expected_allowed(acls, p, "Alter", group)
    )
    admin_principal = next(p for p in token_of if expected_allowed(acls, p, "Alter", group))
    for server in (first, second):
        status, found = server.request(
            "POST", "/v1/find-coordinator", {"GroupId": group}, token=token_of[worker_principal]
        )
        assert (status, found["ErrorCode"]) == (200, 0), found
        partition, url = found["Partition"], found["Url"]
        owner = d.owner(partition)
        assert owner is not None and url == d.servers[owner].url, (found, d.owners())
    owner_server = d.servers[owner]
    status, body = owner_server.request(
        "PUT",
        f"/v1/groups/{group}/connectors",
        {"Connectors": [{"Name": "A", "Tasks": 3}, {"Name": "B", "Tasks": 1}]},
        token=token_of[admin_principal],
    )
    assert (status, body["ErrorCode"]) == (200, 0), body
    everything = frozenset(["A", "B", TaskId("A", 0), TaskId("A", 1), TaskId("A", 2), TaskId("B", 0)])
    ledger = Ledger()
    workers = [Worker(group, f"worker-{i}", ledger, token=token_of[worker_principal]) for i in range(3)]
    converge(owner_server, workers, everything, timeout=TIMEOUT_S)
    assert not ledger.violations and not any(w.unexpected for w in workers)
    acknowledged = {w.member_id: w.last for w in workers}

    # --- SIGKILL the group's coordinator: the other takes its partitions over
    survivor = next(s for n, s in d.servers.items() if n != owner)
    taken = served(owner_server)
    owner_server.kill()
    wait_for(
        lambda: served(survivor) == set(range(d.partitions)),
        TIMEOUT_S,
        f"the surviving coordinator to take over partitions {sorted(taken)}",
    )
    status, found = survivor.request(
        "POST", "/v1/find-coordinator", {"GroupId": group}, token=token_of[worker_principal]
    )
    assert (status, found["ErrorCode"], found["Url"]) == (200, 0, survivor.url), found
    status, body = survivor.request("GET", f"/v1/groups/{group}", token=token_of[worker_principal])
    assert (status, body["ErrorCode"]) == (200, 0), body
    loaded = {m["MemberId"]: ("member", m["MemberEpoch"], items(m["Assignment"])) for m in body["Members"]}
    assert loaded == {m: s for m, s in acknowledged.items() if s != GONE}, (loaded, acknowledged)
    for w in workers:
        assert w.heartbeat(survivor) == 0 and w.last == acknowledged[w.member_id], w
    converge(survivor, workers, everything, timeout=TIMEOUT_S)
    assert not ledger.violations and not any(w.unexpected for w in workers)

    # The Connect workers' group was in the killed coordinator's partition too: the gateway follows it
    # to the survivor, where both workers carry on (no worker process exits) and every task runs.
    until(
        lambda: connect_members(survivor, connect_group, admin_token) == urls,
        TIMEOUT_S,
        f"both Connect workers in group {connect_group} at the survivor",
    )
    until(lambda: first_worker.running("source", CONNECT_TASKS), TIMEOUT_S, "the connector's tasks RUNNING")
    assert all(w.alive() for w in d.connect.values())
    assert d.gateway.poll() is None


def server_name(d: Deployment, server: ServeProcess) -> str:
    return next(name for name, s in d.servers.items() if s is server)


def gateway_metadata(d: Deployment) -> Any:
    """Metadata through the gateway's bootstrap port (None until it answers)."""
    assert d.gateway is not None and d.gateway.poll() is None, d.gateway_log.read_text()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{d.gateway_port}", "log_level": 0})
        return admin.list_topics(timeout=5)
    except Exception:  # noqa: BLE001 (not listening yet: KafkaException)
        return None


async def join_through_gateway(d: Deployment, group: str, owner: ServeProcess, token: str) -> str:
    """A Connect worker's first steps on the gateway, by hand: FindCoordinator at the bootstrap port
    names the gateway's coordinator node for the worker group (and a broker's gateway port for a sink
    connector's group); JoinGroup there (twice: MEMBER_ID_REQUIRED, then in), SyncGroup, Heartbeat;
    `owner` (over HTTP) has the member; then LeaveGroup. The member's id."""
    async with Client(("127.0.0.1", d.gateway_port), "connect-1") as boot:
        found = await boot.call(
            kp.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[group, *(f"connect-{n}" for n in SINK_GROUP_NAMES)]
        )
        nodes = {c.key: c for c in found.coordinators}
        assert (nodes[group].error_code, nodes[group].node_id, nodes[group].port) == (
            0,
            COORDINATOR_NODE_ID,
            d.gateway_port + 1,
        ), nodes[group]
        for name in SINK_GROUP_NAMES:  # sink connectors' groups: the brokers' own coordinator
            node = nodes[f"connect-{name}"]
            if node.error_code == 0:
                assert node.node_id != COORDINATOR_NODE_ID and node.port == d.gateway_port + 2 + node.node_id, node
            else:
                assert node.error_code == 15, node  # COORDINATOR_NOT_AVAILABLE while the broker loads it
    cls = kp.request_class(kp.JOIN_GROUP, 9)
    protocols = [
        cls.JoinGroupRequestProtocol(
            name=SESSIONED, metadata=encode_metadata(WorkerMetadata("http://connect-1:8083/", -1, None), SESSIONED)
        )
    ]
    fields = {
        "group_id": group,
        "session_timeout_ms": 60_000,
        "rebalance_timeout_ms": 60_000,
        "group_instance_id": None,
        "protocol_type": "connect",
        "protocols": protocols,
        "reason": None,
    }
    async with Client((nodes[group].host, nodes[group].port), "connect-1") as member:
        first = await member.call(kp.JOIN_GROUP, 9, member_id="", **fields)
        assert first.error_code == MEMBER_ID_REQUIRED, first
        joined = await member.call(kp.JOIN_GROUP, 9, member_id=first.member_id, **fields)
        assert joined.error_code == 0 and joined.leader == first.member_id, joined
        sync_cls = kp.request_class(kp.SYNC_GROUP, 5)
        synced = await member.call(
            kp.SYNC_GROUP,
            5,
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
            protocol_type="connect",
            protocol_name=SESSIONED,
            assignments=[sync_cls.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"")],
        )
        assert synced.error_code == 0, synced
        beat = await member.call(
            kp.HEARTBEAT,
            4,
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
        )
        assert beat.error_code == 0, beat
        assert joined.member_id in connect_members(owner, group, token, key="MemberId")
        leave_cls = kp.request_class(kp.LEAVE_GROUP, 5)
        left = await member.call(
            kp.LEAVE_GROUP,
            5,
            group_id=group,
            members=[
                leave_cls.MemberIdentity(member_id=joined.member_id, group_instance_id=None, reason="compose test")
            ],
        )
        assert left.error_code == 0 and [m.error_code for m in left.members] == [0], left
    return joined.member_id


def connect_members(server: ServeProcess, group: str, token: str, key: str = "Url") -> set[str]:
    """The members of `group` as `server` describes it: their URLs (a Connect worker's is its REST
    URL), or another field of each."""
    status, body = server.request("GET", f"/v1/groups/{group}", token=token)
    if status != 200 or body.get("ErrorCode"):
        return set()
    return {(m.get(key) or "").rstrip("/") for m in body["Members"]}
