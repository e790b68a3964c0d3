"""`coordinator topic`, against the session broker: in-process through `cli.main`, and a few runs of
the installed console script to prove the entry point."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.tools import devbroker
from tests.support.cli import run

CONSOLE_SCRIPT = Path(sys.executable).with_name("coordinator")


@pytest.fixture
def topic_cli(kafka_broker, unique_topic, capsys):
    """Runs `coordinator topic <command>` on the test's topic; returns (exit code, stdout, stderr)."""

    def topic(command: str, *options: str) -> tuple[int, str, str]:
        return run(
            capsys, "topic", command, "--bootstrap-servers", kafka_broker.bootstrap_servers,
            "--topic", unique_topic, "--timeout", "10", *options,
        )  # fmt: skip

    return topic


@pytest.fixture(scope="module")
def admin(kafka_broker) -> AdminClient:
    return AdminClient(kafka_broker.client_config())


def create_directly(admin: AdminClient, topic: str, partitions: int, config: dict[str, str]) -> None:
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(timeout=10)
    deadline = time.monotonic() + 10
    while topic not in admin.list_topics(timeout=10).topics:  # brokers learn of new topics a little late
        assert time.monotonic() < deadline, f"{topic} did not appear"
        time.sleep(0.1)


@pytest.mark.integration
def test_create_then_describe_shows_a_compacted_topic(topic_cli, unique_topic):
    code, out, _ = topic_cli("create", "--partitions", "3")
    assert code == 0
    assert f"created topic {unique_topic}: 3 partitions" in out
    assert "cleanup.policy=compact" in out

    code, out, _ = topic_cli("describe")
    assert code == 0
    assert f"topic: {unique_topic}" in out
    assert "partitions: 3" in out
    assert "  partition 2: leader " in out
    assert "cleanup.policy=compact (" in out
    assert out.splitlines()[-2] == "compacted: yes (cleanup.policy=compact)"
    # A new topic holds no type 10 record: level 1, as 0.1.0 wrote (issue 29).
    assert out.splitlines()[-1].startswith("record format level: 1 (this release reads 1-")

    code, out, _ = topic_cli("describe", "--format", "json")
    assert code == 0
    described = orjson.loads(out)
    assert described["topic"] == unique_topic
    assert described["partition_count"] == 3
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert described["configs"]["cleanup.policy"]["value"] == "compact"
    assert described["configs"]["min.compaction.lag.ms"]["value"] == "3600000"
    assert described["compacted"] is True
    assert described["format_levels"] == {"0": 1, "1": 1, "2": 1}


@pytest.mark.integration
def test_create_defaults_the_replication_factor_to_at_most_the_broker_count(topic_cli, admin):
    brokers = len(admin.list_topics(timeout=10).brokers)
    assert topic_cli("create", "--partitions", "1")[0] == 0
    code, out, _ = topic_cli("describe", "--format", "json")
    assert orjson.loads(out)["replication_factor"] == min(3, brokers)


@pytest.mark.integration
def test_create_applies_config_overrides(topic_cli):
    assert topic_cli("create", "--partitions", "1", "--config", "min.compaction.lag.ms=0")[0] == 0
    code, out, _ = topic_cli("describe", "--format", "json")
    assert orjson.loads(out)["configs"]["min.compaction.lag.ms"]["value"] == "0"


@pytest.mark.integration
def test_validate_passes_on_a_created_topic(topic_cli, unique_topic):
    topic_cli("create", "--partitions", "2")
    code, out, err = topic_cli("validate", "--partitions", "2")
    assert code == 0, err
    assert "ok: cleanup.policy=compact" in out
    assert "ok: 2 partitions, as expected" in out
    assert f"topic {unique_topic} is fit for the coordinator" in out


@pytest.mark.integration
@pytest.mark.parametrize("config", [{}, {"cleanup.policy": "delete"}, {"cleanup.policy": "compact,delete"}])
def test_validate_fails_on_a_topic_that_deletes_by_retention(topic_cli, admin, unique_topic, config):
    create_directly(admin, unique_topic, 2, config)
    code, out, err = topic_cli("validate")
    assert code == 1
    assert "problem: cleanup.policy=" in out
    assert "retention would delete records" in out
    assert f"topic {unique_topic} is not fit for the coordinator: 1 problem(s)" in err


@pytest.mark.integration
def test_validate_fails_on_a_partition_count_mismatch(topic_cli):
    topic_cli("create", "--partitions", "2")
    code, out, err = topic_cli("validate", "--partitions", "4")
    assert code == 1
    assert "problem: 2 partitions, expected 4" in out
    assert "1 problem(s)" in err


@pytest.mark.integration
def test_validate_and_describe_fail_on_a_missing_topic(topic_cli, unique_topic, admin):
    for command in ("validate", "describe"):
        code, out, err = topic_cli(command)
        assert code == 1
        assert err == f"coordinator topic: error: topic {unique_topic} does not exist\n"
    # Looking the topic up must not have created it (a broker with auto.create.topics.enable creates it on a metadata request).
    assert unique_topic not in admin.list_topics(timeout=10).topics


@pytest.mark.integration
def test_create_if_not_exists_validates_the_existing_topic(topic_cli, unique_topic):
    topic_cli("create", "--partitions", "2")
    code, out, _ = topic_cli("create", "--partitions", "2", "--if-not-exists")
    assert code == 0
    assert f"topic {unique_topic} already exists; validating it" in out
    assert "ok: 2 partitions, as expected" in out


@pytest.mark.integration
def test_create_if_not_exists_returns_the_validation_failure(topic_cli, admin, unique_topic):
    create_directly(admin, unique_topic, 2, {"cleanup.policy": "delete"})
    code, out, _ = topic_cli("create", "--if-not-exists")
    assert code == 1
    assert "problem: cleanup.policy=delete" in out


@pytest.mark.integration
def test_create_fails_on_an_existing_topic(topic_cli, unique_topic):
    topic_cli("create", "--partitions", "1")
    code, _, err = topic_cli("create", "--partitions", "1")
    assert code == 1
    assert f"topic {unique_topic} already exists (pass --if-not-exists" in err


@pytest.mark.integration
def test_kafka_client_settings_pass_through(topic_cli, tmp_path):
    topic_cli("create", "--partitions", "1")
    assert topic_cli("validate", "--kafka-config", "client.id=topic-cli-test")[0] == 0
    properties = tmp_path / "client.properties"
    properties.write_text("# a comment\nclient.id: from-a-file\nsocket.keepalive.enable=true\n")
    assert topic_cli("validate", "--kafka-config-file", str(properties))[0] == 0


@pytest.mark.integration
def test_an_unknown_client_property_is_a_clear_error(topic_cli):
    code, _, err = topic_cli("describe", "--kafka-config", "no.such.property=1")
    assert code == 2
    assert err == (
        "coordinator topic: error: invalid Kafka client configuration: "
        'No such configuration property: "no.such.property"\n'
    )


@pytest.mark.integration
def test_an_unreadable_client_config_file_is_a_clear_error(topic_cli, tmp_path):
    code, _, err = topic_cli("describe", "--kafka-config-file", str(tmp_path / "missing.properties"))
    assert code == 2
    assert "cannot read Kafka config file" in err


def test_an_unreachable_broker_is_reported_within_the_timeout(capsys):
    closed = f"127.0.0.1:{devbroker.free_port()}"
    started = time.monotonic()
    code, _, err = run(capsys, "topic", "validate", "--bootstrap-servers", closed, "--timeout", "1")
    assert time.monotonic() - started < 5
    assert code == 1
    assert err.startswith(f"coordinator topic: error: cannot reach Kafka at {closed} within 1s (last error: ")
    assert "Connection refused" in err
    assert err.count("\n") == 1


@pytest.mark.integration
def test_the_console_script_creates_and_describes(kafka_broker, unique_topic):
    connection = ["--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", unique_topic]
    created = subprocess.run(
        [CONSOLE_SCRIPT, "topic", "create", *connection, "--partitions", "2"], capture_output=True, text=True
    )
    assert created.returncode == 0, created.stderr
    described = subprocess.run(
        [CONSOLE_SCRIPT, "topic", "describe", *connection, "--format", "json"], capture_output=True, text=True
    )
    assert described.returncode == 0, described.stderr
    assert orjson.loads(described.stdout)["compacted"] is True


def test_the_console_script_reports_an_unreachable_broker_without_a_traceback():
    closed = f"127.0.0.1:{devbroker.free_port()}"
    result = subprocess.run(
        [CONSOLE_SCRIPT, "topic", "describe", "--bootstrap-servers", closed, "--timeout", "1"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    # Nothing else: librdkafka's own log lines of refused connections must not reach stderr either.
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(f"coordinator topic: error: cannot reach Kafka at {closed} within 1s")
