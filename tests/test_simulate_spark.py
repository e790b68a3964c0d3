"""What if on the audit's tables (issue 32 item 5): `spark.whatif.simulate` and `coordinator
audit-simulate` re-run a group's history read from the audit's records table, and say what
`coordinator replay simulate` says when it reads the same history from the topic.

The topic holds the on-call story (tests/replay_scenarios.py) and another group's random history,
produced with the stamps the state machine wrote them at (so the story's minutes are the records'
times), and is audited once into a database of the test session's Spark.
"""

from __future__ import annotations

import re
import uuid

import orjson
import pytest
from confluent_kafka import Producer
from replay_scenarios import GROUP, StampedDriver, on_call_story, random_story, raw_records

from coordinator import cli
from coordinator.tools.partitions import partition_for
from replay.commands.simulate import report_json, report_text
from replay.errors import ReplayError
from replay.positions import format_time
from replay.whatif import Alternatives
from spark import tables as t
from spark.audit import warehouse_of
from spark.whatif import figures, group_records, group_rows, simulate
from tests.support.cli import run
from tests.support.spark_audit import PARTITIONS, Where, make_topic

pytestmark = pytest.mark.integration

OTHER = "connect-staging"


@pytest.fixture(scope="module")
def audited(kafka_broker, spark_session):  # noqa: ANN001, ANN201
    """The topic (each group on its partition, each record at its stamp) audited with available-now."""
    topic = f"test-whatif-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_broker, topic)
    story = on_call_story(GROUP)
    other = random_story(7, OTHER, StampedDriver())
    producer = Producer(kafka_broker.client_config())
    for group, records in ((GROUP, story.raw()), (OTHER, raw_records(other.log, other.stamps))):
        for r in records:
            producer.produce(
                topic, key=r.key, value=r.value, partition=partition_for(group, PARTITIONS), timestamp=r.timestamp_ms
            )
    assert producer.flush(30) == 0
    where = Where(warehouse_of(spark_session), f"whatif_{uuid.uuid4().hex[:8]}")
    code = cli.main(
        ["audit", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", topic, *where.args()]
        + ["--trigger", "available-now", "--quiet"]
    )
    assert code == 0
    return topic, where, story


def from_topic(capsys, broker, topic: str, *argv: str) -> str:  # noqa: ANN001
    """`coordinator replay simulate` of the on-call group, reading the topic."""
    code, out, err = run(
        capsys,
        "replay",
        "simulate",
        "--bootstrap-servers",
        broker.bootstrap_servers,
        "--topic",
        topic,
        "--no-progress",
        "--group",
        GROUP,
        *argv,
    )
    assert code == 0, err
    return out


def test_the_tables_simulation_is_the_topics(capsys, kafka_broker, spark_session, audited) -> None:  # noqa: ANN001
    topic, where, story = audited
    want = [
        orjson.loads(line)
        for line in from_topic(capsys, kafka_broker, topic, "--scheduled-delay", "0", "--format", "json").splitlines()
    ]
    report = simulate(spark_session, GROUP, database=where.database, alternatives=Alternatives(scheduled_delay_ms=(0,)))
    assert report_json(report) == want
    faithful = want[-1]
    assert faithful["same_moves"] and faithful["matched_moves"] == faithful["recorded_moves"] > 0
    # The delay of 0 moves what the recorded delay kept waiting: the report says where.
    text = report_text(report)
    assert "with delay 0 ms" in text and "W3's crash" in text

    # The command line, reading the warehouse by path, prints what the topic's command prints
    # but for the line that says what was read.
    code, out, err = run(capsys, "audit-simulate", *where.args(), "--group", GROUP, "--scheduled-delay", "0")
    assert code == 0, err
    topic_out = from_topic(capsys, kafka_broker, topic, "--scheduled-delay", "0")
    assert out.splitlines()[1:] == topic_out.splitlines()[1:]
    assert f"records from the audit's records table of database {where.database}" in out.splitlines()[0]

    # Only the group's rows reach the driver: as many as the topic holds of it, filtered where the
    # table's files are read (the scan's pushed filters), not after.
    records = spark_session.table(f"{where.database}.{t.RECORDS}")
    mine = group_records(records, GROUP)
    assert len(mine) == report.histories[0][1].records == len(on_call_story(GROUP).raw())
    spark_session.conf.set("spark.sql.maxMetadataStringLength", "10000")  # the scan's filters in full
    try:
        plan = group_rows(records, GROUP, end_ms=story.times["end"])._jdf.queryExecution().executedPlan().toString()
    finally:
        spark_session.conf.unset("spark.sql.maxMetadataStringLength")
    pushed = re.search(r"PushedFilters: \[([^\]]*)\]", plan)
    assert pushed and f"EqualTo(group_id,{GROUP})" in pushed[1] and "LessThanOrEqual(timestamp," in pushed[1], plan


def test_a_time_range_restricts_it(capsys, kafka_broker, spark_session, audited) -> None:  # noqa: ANN001
    """From W4's scale-out to just before the connectors' change: the comparison starts there (the
    group as it was then: W4's share moved before), and the change is neither read nor re-run."""
    topic, where, story = audited
    start, end = story.times["scaled_out"], story.times["w3_back"] - 1
    ranged = simulate(spark_session, GROUP, start=start, end=format_time(end), database=where.database)
    want = from_topic(capsys, kafka_broker, topic, "--from", str(start), "--to", str(end), "--format", "json")
    assert report_json(ranged) == [orjson.loads(line) for line in want.splitlines()]
    whole = simulate(spark_session, GROUP, database=where.database)
    assert len(ranged.extracted.happenings) < len(whole.extracted.happenings)
    assert max(h.step.at_ms for h in ranged.extracted.happenings) <= end
    assert ranged.base.moves and all(start <= m.at_ms <= end for m in ranged.base.moves)
    assert len(ranged.base.moves) < len(whole.base.moves)

    # The side-by-side figures as a DataFrame, for Spark SQL.
    figures(spark_session, ranged).createOrReplaceTempView("what_if")
    rows = spark_session.sql("SELECT name, items_moved, unowned_task_ms FROM what_if").collect()
    assert [(r.name, r.items_moved, r.unowned_task_ms) for r in rows] == [
        (o.name, len(o.moves), o.unowned_task_ms) for o in [ranged.base, *ranged.outcomes]
    ]


def test_an_unknown_group_and_an_empty_range_are_one_line(capsys, spark_session, audited) -> None:  # noqa: ANN001
    _, where, _ = audited
    with pytest.raises(ReplayError, match=f"^no records of group nope in the audit's table {where.database}.records$"):
        simulate(spark_session, "nope", database=where.database)
    with pytest.raises(ReplayError, match=f"^no membership events of group {GROUP} between 2030-01-01"):
        simulate(spark_session, GROUP, start="2030-01-01T00:00Z", database=where.database)
    with pytest.raises(ReplayError, match="^no audit table no_such_db.records in this Spark session's catalog$"):
        simulate(spark_session, GROUP, database="no_such_db")
    for argv, said, exit_code in (
        (["--group", "nope"], "no records of group nope in the audit's records table of database", 1),
        (["--group", GROUP, "--from", "2030-01-01T00:00Z"], f"no membership events of group {GROUP} between", 1),
        (["--group", GROUP, "--max-moves", "0"], "--max-moves must be at least 1, not 0", 2),
        (["--group", GROUP, "--from", "2030-01-02", "--to", "2030-01-01"], "--from is after --to", 2),
    ):
        code, out, err = run(capsys, "audit-simulate", *where.args(), *argv)
        assert code == exit_code, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], err
        assert not out
    code, _, err = run(capsys, "audit-simulate", *Where(where.warehouse, "no_such_db").args(), "--group", GROUP)
    assert code == 1 and "no audit tables of database no_such_db" in err and len(err.strip().splitlines()) == 1
