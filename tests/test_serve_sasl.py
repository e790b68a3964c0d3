"""`coordinator serve` on a SASL/TLS broker (issue 29, item 11): the coordinator talks to Kafka only
through the session's SCRAM broker (tests/scram_broker.py), whose SASL listeners refuse a client
that does not authenticate.

The topic is created over SASL_SSL with a Java properties file as Kafka's tools take it
(`--command-config`: sasl.jaas.config, a PEM truststore); `serve` runs over SASL_SSL with
librdkafka settings (`--kafka-config`); workers join and converge; their records are committed in
the topic, read back over SASL_SSL; `serve` stops (SIGTERM, exit 0) and a new one, over
SASL_PLAINTEXT with the properties file, replays the group as acknowledged, and the workers carry
on at their epochs. A wrong password is refused in one line, no traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from scram_broker import JAAS, PASSWORDS, ScramBroker
from serve_workers import Ledger, Worker, converge

from records import MemberMetadataKey, TaskId, decode

from coordinator.cli import main as coordinator
from coordinator.tools.devbroker import free_port
from coordinator.tools.process import ServeProcess

pytestmark = pytest.mark.integration

G = "sasl-group"
EVERYTHING = frozenset(["A", TaskId("A", 0), TaskId("A", 1), TaskId("A", 2)])


def _librdkafka(broker: ScramBroker, user: str = "alice", password: str | None = None) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password or PASSWORDS[user],
        "ssl.ca.location": str(broker.tls.ca),
    }


def _flags(settings: dict[str, str]) -> list[str]:
    return [arg for key, value in settings.items() for arg in ("--kafka-config", f"{key}={value}")]


def _properties(path: Path, broker: ScramBroker, protocol: str) -> Path:
    """A client.properties as Kafka's own tools take it, for alice."""
    lines = [
        f"security.protocol={protocol}",
        "sasl.mechanism=SCRAM-SHA-256",
        f"sasl.jaas.config={JAAS.format('alice', PASSWORDS['alice'])}",
    ]
    if protocol == "SASL_SSL":
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={broker.tls.ca}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _group(server: ServeProcess) -> dict:
    status, d = server.request("GET", f"/v1/groups/{G}", timeout=30)
    assert status == 200 and d["ErrorCode"] == 0, d
    return {
        "GroupEpoch": d["GroupEpoch"],
        "AssignmentEpoch": d["AssignmentEpoch"],
        "Connectors": d["Connectors"],
        "Members": sorted(
            (m["MemberId"], m["MemberEpoch"], m["State"], str(m["Assignment"]), str(m["Target"])) for m in d["Members"]
        ),
    }


def _committed_members(broker: ScramBroker, topic: str) -> set[str]:
    """The members with a member record committed in `topic`, read over SASL_SSL."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.sasl_ssl,
            **_librdkafka(broker),
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        members: set[str] = set()
        quiet_since, deadline = time.monotonic(), time.monotonic() + 60
        while time.monotonic() - quiet_since < 3.0 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            quiet_since = time.monotonic()
            record = decode(message.key(), message.value())
            if isinstance(record.key, MemberMetadataKey) and record.value is not None:
                members.add(record.key.member_id)
        return members
    finally:
        consumer.close()


def test_serve_on_a_sasl_tls_broker_and_a_restart_replays_it(
    scram_broker: ScramBroker, unique_topic: str, tmp_path: Path
) -> None:
    ssl_file = _properties(tmp_path / "sasl-ssl.properties", scram_broker, "SASL_SSL")
    assert (
        coordinator(
            [
                "topic",
                "create",
                "--bootstrap-server",
                scram_broker.sasl_ssl,
                "--command-config",
                str(ssl_file),
                "--topic",
                unique_topic,
                "--partitions",
                "1",
                "--replication-factor",
                "1",
            ]
        )
        == 0
    )
    flags = ("--allow-anonymous", "--session-timeout-ms", "60000", "--server-assignment-interval-ms", "0")
    first = ServeProcess(
        scram_broker.sasl_ssl, unique_topic, tmp_path, *flags, *_flags(_librdkafka(scram_broker))
    ).start()
    try:
        status, body = first.request("PUT", f"/v1/groups/{G}/connectors", {"Connectors": [{"Name": "A", "Tasks": 3}]})
        assert (status, body["ErrorCode"]) == (200, 0), body
        ledger = Ledger()
        workers = [Worker(G, f"w{i}", ledger, timeout=30) for i in range(2)]
        converge(first, workers, EVERYTHING)
        acknowledged = _group(first)
    finally:
        assert first.stop() == 0, first.log()
    assert "Traceback" not in first.log(), first.log()
    assert _committed_members(scram_broker, unique_topic) == {"w0", "w1"}

    plain_file = _properties(tmp_path / "sasl.properties", scram_broker, "SASL_PLAINTEXT")
    second = ServeProcess(
        scram_broker.sasl, unique_topic, tmp_path, *flags, "--command-config", str(plain_file)
    ).start()
    try:
        assert _group(second) == acknowledged
        for w in workers:
            epoch, owned = w.epoch, w.owned
            assert w.heartbeat(second) == 0, w.unexpected
            assert (w.epoch, w.owned) == (epoch, owned)
        assert not ledger.violations, ledger.violations
    finally:
        assert second.stop() == 0, second.log()


def test_a_wrong_password_is_one_line(scram_broker: ScramBroker, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "serve",
            "--bootstrap-server",
            scram_broker.sasl_ssl,
            "--allow-anonymous",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--connect-timeout",
            "5",
            *_flags(_librdkafka(scram_broker, password="wrong")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    assert "Authentication failed" in result.stderr or "authentication" in result.stderr.lower(), result.stderr
