"""`coordinator topic alter` against the session broker (issue 29, item 5): a topic created with old
settings is brought to the ones `create` sets, each change shown as old -> new; `--dry-run` changes
nothing; a topic compaction would lose records from is refused; bad input is one line and an exit
code, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from coordinator import cli
from coordinator.tools import devbroker
from coordinator.tools.topic import MAX_MESSAGE_BYTES, topic_configs

pytestmark = pytest.mark.integration

CONSOLE_SCRIPT = Path(sys.executable).with_name("coordinator")
# A topic of the coordinator's as an earlier release created it: compacted, Kafka's 1 MiB records.
OLD = {"cleanup.policy": "compact", "max.message.bytes": "1048588", "min.compaction.lag.ms": "3600000"}


@pytest.fixture(scope="module")
def admin(kafka_broker) -> AdminClient:  # noqa: ANN001
    return AdminClient(kafka_broker.client_config())


def create_directly(admin: AdminClient, topic: str, config: dict[str, str]) -> None:
    admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(timeout=10)
    deadline = time.monotonic() + 10
    while topic not in admin.list_topics(timeout=10).topics:  # brokers learn of new topics a little late
        assert time.monotonic() < deadline, f"{topic} did not appear"
        time.sleep(0.1)


def set_on_topic(admin: AdminClient, topic: str) -> dict[str, str]:
    """The configs set on the topic itself (not the broker's or Kafka's defaults)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=10)[resource].result()
    return {name: e.value for name, e in entries.items() if e.source == 1}  # DYNAMIC_TOPIC_CONFIG


def alter(capsys: pytest.CaptureFixture[str], bootstrap: str, topic: str, *options: str) -> tuple[int, str, str]:
    code = cli.main(["topic", "alter", "--bootstrap-server", bootstrap, "--topic", topic, "--timeout", "10", *options])
    out, err = capsys.readouterr()
    return code, out, err


def test_alter_brings_an_old_topic_to_the_documented_settings(  # noqa: ANN001
    kafka_broker, admin, unique_topic, capsys
) -> None:
    create_directly(admin, unique_topic, OLD)

    code, out, err = alter(capsys, kafka_broker.bootstrap_servers, unique_topic, "--dry-run")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"topic {unique_topic}: would change 6 setting(s)"
    assert "  max.message.bytes: 1048588 -> 16777216" in lines  # set on the topic: its value alone
    assert "  delete.retention.ms: 86400000 (default_config) -> 604800000" in lines  # Kafka's default: said so
    (unclean,) = [line for line in lines if "unclean.leader.election.enable" in line]  # the broker's false, pinned
    assert unclean.endswith(") -> false (set on the topic)"), unclean
    assert not [line for line in lines if "min.compaction.lag.ms" in line or "cleanup.policy" in line]
    assert lines[-1] == "dry run: nothing changed (run without --dry-run to apply)"
    assert set_on_topic(admin, unique_topic) == OLD  # the dry run changed nothing

    code, out, err = alter(capsys, kafka_broker.bootstrap_servers, unique_topic)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"topic {unique_topic}: changing 6 setting(s)"
    assert out.splitlines()[1:-1] == lines[1:-1]  # the same changes as the dry run showed
    assert out.splitlines()[-1] == f"altered topic {unique_topic}: 6 setting(s) changed"
    documented = topic_configs(replication_factor=1)
    assert set_on_topic(admin, unique_topic) == documented
    assert documented["max.message.bytes"] == str(MAX_MESSAGE_BYTES)

    code, out, _ = alter(capsys, kafka_broker.bootstrap_servers, unique_topic)
    assert (code, out) == (0, f"topic {unique_topic} already has the coordinator's settings; nothing to change\n")


def test_config_overrides_win_as_in_create(kafka_broker, admin, unique_topic, capsys) -> None:  # noqa: ANN001
    create_directly(admin, unique_topic, topic_configs(1))
    code, out, err = alter(capsys, kafka_broker.bootstrap_servers, unique_topic, "--config", "segment.bytes=52428800")
    assert code == 0, err
    assert out.splitlines()[1:-1] == ["  segment.bytes: 104857600 -> 52428800"], out
    assert set_on_topic(admin, unique_topic)["segment.bytes"] == "52428800"


def test_a_delete_topic_of_keyed_records_is_made_compact(  # noqa: ANN001
    kafka_broker, admin, unique_topic, capsys
) -> None:
    create_directly(admin, unique_topic, {"cleanup.policy": "delete"})
    producer = Producer(kafka_broker.client_config())
    producer.produce(unique_topic, key=b"k", value=b"v", partition=1)
    assert producer.flush(10) == 0
    code, out, err = alter(capsys, kafka_broker.bootstrap_servers, unique_topic)
    assert (code, err) == (0, ""), out
    assert "  cleanup.policy: delete -> compact" in out.splitlines()
    assert set_on_topic(admin, unique_topic)["cleanup.policy"] == "compact"


def test_a_topic_compaction_would_lose_records_from_is_refused(  # noqa: ANN001
    kafka_broker, admin, unique_topic, capsys
) -> None:
    create_directly(admin, unique_topic, {"cleanup.policy": "delete", "max.message.bytes": "1048588"})
    producer = Producer(kafka_broker.client_config())
    producer.produce(unique_topic, key=b"k", value=b"v", partition=1)
    producer.produce(unique_topic, value=b"no key", partition=1)
    assert producer.flush(10) == 0
    code, out, err = alter(capsys, kafka_broker.bootstrap_servers, unique_topic)
    assert code == 1 and out == ""
    assert err == (
        f"coordinator topic: error: topic {unique_topic} cannot be made compact: partition 1 has a "
        "record without a key at offset 1, which compaction would delete (is --topic the "
        "coordinator's topic?)\n"
    )
    assert set_on_topic(admin, unique_topic) == {"cleanup.policy": "delete", "max.message.bytes": "1048588"}


def test_an_unknown_topic_is_one_line(kafka_broker, unique_topic, capsys) -> None:  # noqa: ANN001
    code, out, err = alter(capsys, kafka_broker.bootstrap_servers, unique_topic)
    assert (code, out) == (1, "")
    assert err == (
        f"coordinator topic: error: topic {unique_topic} does not exist (`coordinator topic create` makes it)\n"
    )


def test_no_broker_is_one_line_from_the_console_script_without_a_traceback() -> None:
    closed = f"127.0.0.1:{devbroker.free_port()}"
    result = subprocess.run(
        [CONSOLE_SCRIPT, "topic", "alter", "--bootstrap-server", closed, "--timeout", "1", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"coordinator topic: error: cannot reach Kafka at {closed} within 1s")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_a_bad_config_is_a_usage_error(capsys) -> None:  # noqa: ANN001
    code = cli.main(["topic", "alter", "--bootstrap-server", "127.0.0.1:1", "--config", "no-equals-sign"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
