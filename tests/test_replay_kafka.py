"""`replay` and `dump` against the session broker: a story written to a topic as the runtime writes
it (one transaction per handler, on the group's partition), then the live topic and a dump of it
must give the same answers, and those answers must be the state machine's."""

from __future__ import annotations

import uuid

import orjson
import pytest
from confluent_kafka import Producer
from replay_scenarios import GROUP, StampedDriver, WritingDriver, on_call_story, random_story

from coordinator import cli
from coordinator.service.log import PartitionWriter
from coordinator.tools.partitions import partition_for
from replay.history import History
from replay.positions import Point
from replay.source import read_dump, read_topic
from tests.support.cli import run

pytestmark = pytest.mark.integration

PARTITIONS = 4
OTHER = "connect-staging"


@pytest.fixture(scope="module")
def topic(kafka_broker):  # noqa: ANN001, ANN201
    """A topic holding the on-call story and another group's history, in different partitions."""
    name = f"test-replay-{uuid.uuid4().hex[:8]}"
    assert (
        cli.main(
            [
                "topic",
                "create",
                "--bootstrap-servers",
                kafka_broker.bootstrap_servers,
                "--topic",
                name,
                "--partitions",
                str(PARTITIONS),
                "--replication-factor",
                "1",
            ]
        )
        == 0
    )
    assert partition_for(GROUP, PARTITIONS) != partition_for(OTHER, PARTITIONS)
    config = kafka_broker.client_config()
    writers = {p: PartitionWriter(config, name, p) for p in {partition_for(g, PARTITIONS) for g in (GROUP, OTHER)}}
    for writer in writers.values():
        writer.open()
    d = WritingDriver(writers, PARTITIONS)
    story = on_call_story(GROUP, d)
    random_story(3, OTHER, d)
    for writer in writers.values():
        writer.close()
    return name, story, d


def kafka(broker, topic: str) -> list[str]:  # noqa: ANN001
    return ["--bootstrap-servers", broker.bootstrap_servers, "--topic", topic]


def test_the_live_topic_replays_to_the_state_machines_answers(kafka_broker, topic) -> None:  # noqa: ANN001
    name, story, d = topic
    raw = list(read_topic(kafka_broker.client_config(), name))
    assert len(raw) == len(d.log)
    assert {r.partition for r in raw} == {partition_for(g, PARTITIONS) for g in (GROUP, OTHER)}
    live = History(GROUP)
    live.run(raw)
    scripted = History(GROUP)
    scripted.run(story.raw())
    assert live.state.slots() == {k: v for k, v in d.state.slots().items() if k.group_id == GROUP}
    # Offsets (transaction markers take some) and times (the producer's clock) differ; what
    # happened does not.
    assert [(e.kind, e.member_id, e.epoch, e.gained, e.released) for e in live.events] == [
        (e.kind, e.member_id, e.epoch, e.gained, e.released) for e in scripted.events
    ]
    assert [(r.causes, r.moved, r.from_epoch, r.to_epoch) for r in live.all_rebalances()] == [
        (r.causes, r.moved, r.from_epoch, r.to_epoch) for r in scripted.all_rebalances()
    ]
    assert [(str(i.item), i.member_id, i.ended_by) for i in live.all_intervals()] == [
        (str(i.item), i.member_id, i.ended_by) for i in scripted.all_intervals()
    ]


def test_a_dump_of_the_topic_gives_the_same_answers_as_the_topic(capsys, kafka_broker, topic, tmp_path) -> None:  # noqa: ANN001
    name, story, _ = topic
    dump = tmp_path / "worker_offsets.bin"
    code, _, err = run(capsys, "dump", *kafka(kafka_broker, name), "--output", str(dump))
    assert code == 0 and f"to {dump} (binary)" in err
    assert list(read_dump(dump)) == list(read_topic(kafka_broker.client_config(), name))

    partition = partition_for(GROUP, PARTITIONS)
    offsets = [r.offset for r in read_dump(dump) if r.partition == partition]
    middle = offsets[len(offsets) // 2]
    questions = [
        ["timeline", "--group", GROUP],
        ["state", "--group", GROUP, "--at", str(middle)],
        ["diff", "--group", GROUP, "--from", str(offsets[10]), "--to", str(middle)],
        ["who-owned", "orders-sink-3"],
        ["who-owned", "clicks-source:1", "--group", GROUP],
        ["verify"],
    ]
    for question in questions:
        for fmt in ("json", "table"):
            from_topic = run(capsys, "replay", *question, *kafka(kafka_broker, name), "--format", fmt)
            from_dump = run(capsys, "replay", *question, "--file", str(dump), "--format", fmt)
            assert from_topic[0] == from_dump[0] == 0, (question, from_topic[2], from_dump[2])
            if fmt == "json":
                assert from_topic[1] == from_dump[1] and from_topic[1], question
            else:  # the table names its source
                assert from_topic[1].replace(f"topic {name}", "SOURCE") == from_dump[1].replace(
                    f"dump {dump}", "SOURCE"
                ), question

    # A JSON-lines dump holds the same records.
    text_dump = tmp_path / "worker_offsets.jsonl"
    assert run(capsys, "dump", *kafka(kafka_broker, name), "--output", str(text_dump))[0] == 0
    assert list(read_dump(text_dump)) == list(read_dump(dump))


def test_windows_on_the_live_topic_are_exact(capsys, kafka_broker, topic) -> None:  # noqa: ANN001
    name, _, _ = topic
    everything = list(read_topic(kafka_broker.client_config(), name))
    partition = partition_for(GROUP, PARTITIONS)
    mine = [r for r in everything if r.partition == partition]
    t = mine[len(mine) // 3].timestamp_ms
    code, out, _ = run(
        capsys,
        "dump",
        *kafka(kafka_broker, name),
        "--partition",
        str(partition),
        "--from-time",
        str(t),
        "--to-offset",
        str(mine[-5].offset),
    )
    assert code == 0
    got = [orjson.loads(line) for line in out.splitlines()[1:]]
    expected = [r for r in mine if r.timestamp_ms >= t and r.offset <= mine[-5].offset]
    assert [(g["partition"], g["offset"]) for g in got] == [(r.partition, r.offset) for r in expected]


def test_corrupt_records_in_the_topic_are_reported_with_their_offsets(capsys, kafka_broker, unique_topic) -> None:  # noqa: ANN001
    assert (
        cli.main(
            [
                "topic",
                "create",
                "--bootstrap-servers",
                kafka_broker.bootstrap_servers,
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
    d = StampedDriver()
    writer = PartitionWriter(kafka_broker.client_config(), unique_topic, 0)
    writer.open()
    story = on_call_story(GROUP, d)
    writer.write(story.log[:40])
    writer.close()
    producer = Producer(kafka_broker.client_config())
    producer.produce(unique_topic, key=b"\x00\x05\x18connect-prod\x04W9", value=b"\x00\x01garbage", partition=0)
    producer.flush(10)
    writer = PartitionWriter(kafka_broker.client_config(), unique_topic, 0)
    writer.open()
    writer.write(story.log[40:])
    writer.close()
    bad = next(r.offset for r in read_topic(kafka_broker.client_config(), unique_topic) if r.key.endswith(b"W9"))
    code, out, err = run(capsys, "replay", "timeline", "--group", GROUP, *kafka(kafka_broker, unique_topic))
    assert code == 0 and "7 rebalances converged" in out
    assert f"warning: skipped corrupt record at partition 0 offset {bad}: cannot decode value of record type 5" in err
    code, _, err = run(capsys, "replay", "verify", "--strict", *kafka(kafka_broker, unique_topic))
    assert code == 1 and f"corrupt record at partition 0 offset {bad}" in err


def test_kafka_failures_are_one_line(capsys, kafka_broker) -> None:  # noqa: ANN001
    code, _, err = run(
        capsys,
        "replay",
        "verify",
        "--bootstrap-servers",
        kafka_broker.bootstrap_servers,
        "--topic",
        "no-such-topic-for-replay",
    )
    assert code == 1 and err == (
        "coordinator replay: error: topic no-such-topic-for-replay does not exist on "
        f"{kafka_broker.bootstrap_servers}\n"
    )
    code, _, err = run(
        capsys, "replay", "timeline", "--group", "g", "--bootstrap-servers", "127.0.0.1:1", "--timeout", "2"
    )
    assert code == 1 and err.startswith("coordinator replay: error: cannot reach Kafka at 127.0.0.1:1 within 2s")


def test_the_main_jobs_story_through_the_live_service_replays_to_what_its_workers_ran(
    capsys, kafka_broker, unique_topic, tmp_path
) -> None:  # noqa: ANN001
    """Workers over HTTP, a coordinator killed and replaced (coordinator.sdk.demo, shortened): the topic
    it leaves verifies, and the replayed ownership is what the workers themselves ran."""
    import asyncio

    from coordinator.sdk.demo import Timing, story

    assert (
        cli.main(
            [
                "topic",
                "create",
                "--bootstrap-servers",
                kafka_broker.bootstrap_servers,
                "--topic",
                unique_topic,
                "--partitions",
                "4",
                "--replication-factor",
                "1",
            ]
        )
        == 0
    )
    outcome = asyncio.run(
        story(kafka_broker.bootstrap_servers, unique_topic, "demo", 4, Timing(150, 1_500, 2_500, 0.5), tmp_path)
    )
    assert outcome.problems == []
    capsys.readouterr()
    code, out, err = run(capsys, "replay", "verify", *kafka(kafka_broker, unique_topic))
    assert code == 0 and "no violations" in out, err

    raw = list(read_topic(kafka_broker.client_config(), unique_topic, partitions=[partition_for("demo", 4)]))
    h = History("demo")
    h.run(raw)
    grown = max(e.at.offset for e in h.events if e.kind == "connectors")
    # Everyone leaves at the end, as static members (-2) keeping their assignment for a while.
    first_leave = min(e.at.offset for e in h.events if e.kind == "static-leave" and e.at.offset > grown)
    until_leaves = History("demo")
    until_leaves.run(raw, until=Point(offset=first_leave - 1))
    held: dict[str, set] = {}
    for item, member in until_leaves.owners().items():
        held.setdefault(member.rsplit("-", 2)[0], set()).add(item)  # member ids are NAME-PID-N
    assert held == {name: set(items) for name, items in outcome.ownership.items()}
    # The crashed worker left before the end, its work moved; the bounced one came back to its own.
    crashed = [
        e
        for e in h.events
        if e.kind == "member-left" and e.member_id.startswith(outcome.crashed + "-") and e.at.offset < grown
    ]
    assert len(crashed) == 1
    for item in outcome.bounced_before:
        holders = [
            i.member_id.rsplit("-", 2)[0] for i in h.all_intervals() if i.item == item and i.start.offset < first_leave
        ]
        assert holders[-1] == outcome.bounced
