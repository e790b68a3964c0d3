"""The topic's documented settings, read back from the broker (issue 29, item 11).

The table of docs/operations.md's "The topic" (the README's until issue 30 item 7) is the promise:
every setting it lists, at the value it says. The tests read that table (not `topic_configs`, which
the other topic tests compare with), create the topic with `coordinator topic create` and read each
setting back with AdminClient.describe_configs: the documented value, set on the topic itself (so a
broker default changed later cannot change it). Then every one of them drifts to another value, set
on the topic as an operator or an old release would, and `coordinator topic alter` brings each back,
showing each change. (tests/test_topic_alter.py covers settings that are missing from an old topic;
these are set, to the wrong value.)

`min.insync.replicas` is documented as 2 when the replication factor is above 1: the session broker
has one node, so that row is read back from the three-node cluster of the broker-failure tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from coordinator import cli
from coordinator.tools.connect_worker import until
from coordinator.tools.topic import topic_configs

pytestmark = pytest.mark.integration

OPERATIONS = Path(__file__).resolve().parent.parent / "docs" / "operations.md"  # its section "The topic"
_UNITS = {"hour": 3_600_000, "hours": 3_600_000, "day": 86_400_000, "days": 86_400_000, "MiB": 1 << 20}
# The topic's settings when drifted: each a valid value other than the documented one.
DRIFTED = {
    "cleanup.policy": "compact,delete",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.5",
    "segment.bytes": "1048576",
    "max.message.bytes": "1048588",
    "unclean.leader.election.enable": "true",
}


def documented() -> dict[str, str]:
    """The table of the topic's settings in docs/operations.md, as the broker states them: name -> value. The row of
    min.insync.replicas ("2 (when RF > 1)") is kept as its text."""
    text = OPERATIONS.read_text()
    table = text[text.index("| setting | value | why |") :].split("\n\n", 1)[0].splitlines()[2:]
    out = {}
    for row in table:
        name, value = (cell.strip().strip("`") for cell in row.strip("|").split("|")[:2])
        if m := re.fullmatch(r"(\d+(?:\.\d+)?) (\w+)", value):
            if m[2] in _UNITS:
                value = str(int(m[1]) * _UNITS[m[2]])
        out[name] = value
    return out


def read_back(admin: AdminClient, topic: str) -> dict[str, tuple[str, int]]:
    """Every config of `topic` as the broker describes it: name -> (value, source)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=10)[resource].result()
    return {name: (e.value, e.source) for name, e in entries.items()}


SET_ON_TOPIC = 1  # ConfigSource.DYNAMIC_TOPIC_CONFIG


def create(capsys: pytest.CaptureFixture[str], bootstrap: str, topic: str, replication_factor: int) -> str:
    code = cli.main(
        [
            "topic",
            "create",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            "2",
            "--replication-factor",
            str(replication_factor),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_operations_doc_lists_what_create_sets() -> None:
    doc = documented()
    assert doc["min.insync.replicas"] == "2 (when RF > 1)"
    assert set(doc) == set(topic_configs(3)), "docs/operations.md's table and the settings create makes differ"
    assert {n: v for n, v in doc.items() if n != "min.insync.replicas"} == topic_configs(1)


def test_create_sets_every_documented_setting_and_alter_corrects_each_drifted_one(
    kafka_broker,
    unique_topic,
    capsys,  # noqa: ANN001
) -> None:
    admin = AdminClient(kafka_broker.client_config())
    doc = documented()
    expected = {n: v for n, v in doc.items() if n != "min.insync.replicas"}
    create(capsys, kafka_broker.bootstrap_servers, unique_topic, 1)
    configs = read_back(admin, unique_topic)
    assert {n: configs[n] for n in expected} == {n: (v, SET_ON_TOPIC) for n, v in expected.items()}
    # One copy: min.insync.replicas is not set on the topic (the broker's 1 holds), as documented.
    value, source = configs["min.insync.replicas"]
    assert value == "1" and source != SET_ON_TOPIC, configs["min.insync.replicas"]

    # Every documented setting drifts to another value, set on the topic.
    assert set(DRIFTED) == set(expected) and all(DRIFTED[n] != v for n, v in expected.items())
    resource = ConfigResource(
        ResourceType.TOPIC,
        unique_topic,
        incremental_configs=[
            ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET) for n, v in DRIFTED.items()
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=10)[resource].result()
    until(
        lambda: {n: v for n, (v, _) in read_back(admin, unique_topic).items() if n in DRIFTED} == DRIFTED,
        10,
        "the drift took",
    )

    code = cli.main(["topic", "alter", "--bootstrap-server", kafka_broker.bootstrap_servers, "--topic", unique_topic])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), out
    lines = out.splitlines()
    assert lines[0] == f"topic {unique_topic}: changing {len(expected)} setting(s)", out
    assert sorted(lines[1:-1]) == sorted(f"  {n}: {DRIFTED[n]} -> {v}" for n, v in expected.items()), out
    configs = read_back(admin, unique_topic)
    assert {n: configs[n] for n in expected} == {n: (v, SET_ON_TOPIC) for n, v in expected.items()}


def test_min_insync_replicas_is_two_with_replicas(kafka_cluster3, unique_topic, capsys) -> None:  # noqa: ANN001
    admin = AdminClient({"bootstrap.servers": kafka_cluster3.bootstrap_servers})
    doc = documented()
    assert doc["min.insync.replicas"].startswith("2 ")
    out = create(capsys, kafka_cluster3.bootstrap_servers, unique_topic, 3)
    assert "replication factor 3" in out
    configs = read_back(admin, unique_topic)
    assert configs["min.insync.replicas"] == ("2", SET_ON_TOPIC)
    expected = {n: v for n, v in doc.items() if n != "min.insync.replicas"}
    assert {n: configs[n] for n in expected} == {n: (v, SET_ON_TOPIC) for n, v in expected.items()}
    # Drifted to 1 (acks=all met by one copy): alter sets it back to 2.
    resource = ConfigResource(
        ResourceType.TOPIC,
        unique_topic,
        incremental_configs=[ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource], request_timeout=10)[resource].result()
    until(lambda: read_back(admin, unique_topic)["min.insync.replicas"][0] == "1", 10, "the drift took")
    code = cli.main(["topic", "alter", "--bootstrap-server", kafka_cluster3.bootstrap_servers, "--topic", unique_topic])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), out
    assert out.splitlines()[1:-1] == ["  min.insync.replicas: 1 -> 2"], out
    # The controller has committed the change when alter returns; the broker that answers
    # DescribeConfigs may apply it a moment later (metadata propagates), as with the drift above.
    until(
        lambda: read_back(admin, unique_topic)["min.insync.replicas"] == ("2", SET_ON_TOPIC),
        10,
        "min.insync.replicas read back as 2, set on the topic",
    )
