"""Security through the gateway (issue 28, item 4), on an Apache Kafka broker with a SASL listener
(SCRAM-SHA-256 users alice and bob) beside its plaintext one:

- clients authenticate to the gateway with the broker's own mechanism and credentials: the gateway
  passes SASL through to the broker, which decides; with --require-sasl a request before
  authentication closes the connection;
- the gateway logs in to the coordinator's Kafka listener as its own principal (SASL PLAIN, one of
  --kafka-gateway-principals) and forwards our groups' requests in Envelopes with the principal the
  broker accepted (`User:alice`), which our ACLs judge: alice's groups are listed to her and not to
  bob (librdkafka's ListGroups through the gateway), and an unmodified Kafka Connect 4.3.1 worker
  authenticated as alice runs a connector while one authenticated as bob is refused the group;
- TLS on the gateway's ports and on its connection to the coordinator.

One coordinator and one gateway for the module, on the session's SCRAM broker (tests/scram_broker.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import tls_files
from confluent_kafka.admin import AdminClient
from kafka_groups import groups_at
from scram_broker import JAAS, PASSWORDS, ScramBroker

from coordinator.api import kafka_protocol as kp
from coordinator.tools import devbroker
from coordinator.tools.connect_worker import ConnectWorker, http, source_connector, until
from coordinator.tools.devbroker import free_port
from coordinator.tools.process import ServeProcess
from tests.topics import create_topic

pytestmark = pytest.mark.integration

GROUP = "secure-connect"


@dataclass
class Secured:
    broker: devbroker.Cluster
    plain: str  # the broker's plaintext listener (setup only)
    sasl: str  # its SASL_PLAINTEXT listener
    topic: str
    serve: ServeProcess
    gateway: int  # the gateway's bootstrap port (TLS)
    tls: tls_files.TlsFiles
    run_dir: Path


@pytest.fixture(scope="module")
def secured(scram_broker: ScramBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    # The session's SCRAM broker (tests/scram_broker.py: users alice and bob), shared with
    # tests/test_serve_sasl.py; this module's coordinator, gateway and topic are its own.
    run_dir = tmp_path_factory.mktemp("secured")
    cluster = scram_broker.cluster
    processes: list[subprocess.Popen] = []
    serve = None
    try:
        plain = scram_broker.plain
        topic = "__worker_offsets_secured"
        create_topic(plain, topic, 2)
        (run_dir / "tokens").write_text("gateway-token gateway\nops-token ops\n")
        (run_dir / "acls").write_text(f"User:alice Read,Describe {GROUP}\nops All *\n")
        (run_dir / "gateway-password").write_text("gateway-token\n")
        files = tls_files.make(run_dir / "tls")
        listener = f"127.0.0.1:{free_port()}"
        serve = ServeProcess(
            plain,
            topic,
            run_dir,
            "--tokens",
            str(run_dir / "tokens"),
            "--acls",
            str(run_dir / "acls"),
            "--kafka-listener",
            listener,
            "--kafka-gateway-principals",
            "gateway",
            "--tls-cert",
            str(files.cert),
            "--tls-key",
            str(files.key),
        )
        serve.url = serve.url.replace("http://", "https://")
        serve.start(wait=False)
        gateway = free_port()
        log = (run_dir / "gateway.log").open("wb")
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "coordinator",
                    "gateway",
                    "--bootstrap-server",
                    scram_broker.sasl,
                    "--listen",
                    f"127.0.0.1:{gateway}",
                    "--groups",
                    GROUP,
                    "--coordinator",
                    listener,
                    "--require-sasl",
                    "--coordinator-user",
                    "gateway",
                    "--coordinator-password-file",
                    str(run_dir / "gateway-password"),
                    "--coordinator-tls-ca",
                    str(files.ca),
                    "--tls-cert",
                    str(files.cert),
                    "--tls-key",
                    str(files.key),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        until(
            lambda: _port_open(gateway) and _port_open(int(listener.rpartition(":")[2])),
            60,
            "the gateway and the coordinator's listener accept connections",
        )
        yield Secured(cluster, plain, scram_broker.sasl, topic, serve, gateway, files, run_dir)
    finally:
        for p in processes:
            p.kill()
            p.wait(timeout=30)
        if serve is not None:
            serve.kill()


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _client(s: Secured, user: str, password: str | None = None) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{s.gateway}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password or PASSWORDS[user],
        "ssl.ca.location": str(s.tls.ca),
    }


def _kafka_python(s: Secured, user: str) -> dict[str, object]:
    """kafka-python's settings for `user` through the gateway: its own network client, SCRAM and TLS
    (librdkafka's list_consumer_groups leaves out every group whose protocol type is not `consumer`)."""
    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user],
        "ssl_cafile": str(s.tls.ca),
    }


def _listed(s: Secured, user: str) -> set[str]:
    return set(groups_at(f"127.0.0.1:{s.gateway}", **_kafka_python(s, user)))


def test_the_principal_the_broker_accepted_is_the_one_our_acls_judge(secured):
    s = secured
    # Through the gateway (TLS, SCRAM passed to the broker): the broker's topics, and the listing of
    # our groups follows our ACLs for each principal.
    admin = AdminClient(_client(s, "alice"))
    assert s.topic in admin.list_topics(timeout=30).topics
    # A group of ours appears once it has a member; the coordinator's HTTP API (ops) sets one up
    worker = _connect_worker(s, "w-alice", "alice")
    try:
        until(lambda: GROUP in _listed(s, "alice"), 180, "alice's worker's group listed to alice")
        assert GROUP not in _listed(s, "bob")  # bob may not describe it: left out, as Kafka does
        # A wrong password: the broker refuses it, through the gateway
        errors: list = []
        wrong = AdminClient({**_client(s, "alice", "wrong"), "error_cb": errors.append})
        with pytest.raises(Exception):  # noqa: B017 (librdkafka's: no metadata without a broker)
            wrong.list_topics(timeout=10)
        wrong.poll(2)  # serves the error callback
        assert any("Authentication failed" in e.str() for e in errors), (
            errors,
            (s.run_dir / "gateway.log").read_text()[-2000:],
        )  # noqa: E501
        # Without SASL (--require-sasl): the connection is closed at its first request
        with socket.create_connection(("127.0.0.1", s.gateway), timeout=10) as raw:
            import ssl

            context = ssl.create_default_context(cafile=str(s.tls.ca))
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls_socket:
                body = kp.request_class(kp.METADATA, 12)(
                    topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
                )
                tls_socket.sendall(kp.encode_request(body, 12, 1, "no-sasl"))
                assert tls_socket.recv(4) == b""
        assert "before SASL authentication" in (s.run_dir / "gateway.log").read_text()
        _worker_story(s, worker)
    finally:
        worker.kill()


def _connect_worker(s: Secured, name: str, user: str) -> ConnectWorker:
    worker = ConnectWorker(s.run_dir, name, f"127.0.0.1:{s.gateway}", s.sasl, GROUP)
    jaas = JAAS.format(user, PASSWORDS[user])
    extra = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": jaas,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(s.tls.ca),
    }
    # connector clients go straight to the broker's SASL listener (no TLS there)
    for prefix in ("producer.", "consumer.", "admin."):
        extra |= {
            f"{prefix}security.protocol": "SASL_PLAINTEXT",
            f"{prefix}sasl.mechanism": "SCRAM-SHA-256",
            f"{prefix}sasl.jaas.config": jaas,
        }
    worker.properties.write_text(worker.properties.read_text() + "".join(f"{k}={v}\n" for k, v in extra.items()))
    return worker.start()


def _worker_story(s: Secured, alice: ConnectWorker) -> None:
    """alice's worker runs a connector on our coordinator; bob's, as well authenticated at the broker,
    is refused the group by our ACL and never becomes a member."""
    until(alice.up, 180, "alice's worker's REST API")
    config = source_connector(f"{GROUP}-data", 2)
    until(
        lambda: http("PUT", f"{alice.url}/connectors/src/config", config)[0] in (200, 201),
        90,
        "the connector is created",
    )
    until(lambda: alice.running("src", 2), 120, "both tasks RUNNING on alice's worker")
    bob = _connect_worker(s, "w-bob", "bob")
    try:
        until(
            lambda: (
                "GroupAuthorizationException" in bob.log.read_text()
                or "Not authorized to access group" in bob.log.read_text()
            ),
            120,
            "bob's worker refused the group",
        )
        described = orjson.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "coordinator",
                    "groups",
                    "describe",
                    GROUP,
                    "--url",
                    s.serve.url,
                    "--format",
                    "json",
                    "--token",
                    "ops-token",
                    "--ca-file",
                    str(s.tls.ca),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
        )
        assert [m["Url"] for m in described["Members"]] == [f"{alice.url}/"]
        assert alice.running("src", 2)
    finally:
        bob.kill()
