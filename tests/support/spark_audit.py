"""What the Spark audit's tests share (tests/test_spark_audit.py and the tests of the audit on a cluster,
with a metastore, of its snapshots, of its what-if): the audit's topic and its writers, where its tables are,
and the checks of the tables against the topic and against `coordinator replay`."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import orjson
from replay_scenarios import WritingDriver

from coordinator.service.log import PartitionWriter
from replay.history import History, interval_json, rebalance_json
from replay.source import read_topic
from tests.support.cli import run
from tests.topics import create_topic

PARTITIONS = 4
AUDIT_DOC = Path(__file__).resolve().parents[2] / "docs" / "audit.md"  # the ready queries


def make_topic(broker, name: str) -> None:  # noqa: ANN001
    """The audit's topic of PARTITIONS partitions (`coordinator topic create`), its report of the settings unprinted."""
    with contextlib.redirect_stdout(io.StringIO()):
        create_topic(broker.bootstrap_servers, name, PARTITIONS)


class Writers:
    """Writers for every partition of a topic, open until `close()`, and a WritingDriver over them.
    A group whose story must end alive gets a driver of its own (`driver()`): the clock of a shared
    one moves on through other groups' stories, and their members' sessions expire meanwhile."""

    def __init__(self, broker, topic: str) -> None:  # noqa: ANN001
        self.writers = {p: PartitionWriter(broker.client_config(), topic, p) for p in range(PARTITIONS)}
        for w in self.writers.values():
            w.open()
        self.driver = self.new_driver()

    def new_driver(self) -> WritingDriver:
        return WritingDriver(self.writers, PARTITIONS)

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


@dataclass(frozen=True)
class Where:
    """Where an audit's tables are: a warehouse and a database in its catalog."""

    warehouse: Path
    database: str = "worker_coordinator"

    def args(self) -> list[str]:
        return ["--warehouse", str(self.warehouse), "--database", self.database]


def sql(capsys, where: Where, query: str) -> list[dict]:  # noqa: ANN001
    code, out, err = run(capsys, "sql", *where.args(), "--format", "json", query)
    assert code == 0, err
    return [orjson.loads(line) for line in out.splitlines()]


def documented_queries() -> list[str]:
    """The ready queries of docs/audit.md."""
    return re.findall(r"```sql\n(.*?)```", AUDIT_DOC.read_text(), re.S)


def audit(capsys, broker, topic: str, where: Where, *extra: str) -> str:  # noqa: ANN001
    """`coordinator audit` of `topic` into `where` to the end of the topic (available-now); its output."""
    code, out, err = run(
        capsys,
        "audit",
        "--bootstrap-servers",
        broker.bootstrap_servers,
        "--topic",
        topic,
        *where.args(),
        "--trigger",
        "available-now",
        *extra,
    )
    assert code == 0, err
    return out


def replayed(broker, topic: str) -> History:  # noqa: ANN001
    history = History()
    history.run(read_topic(broker.client_config(), topic))
    return history


def assert_every_record_once(capsys, broker, topic: str, warehouse: Where) -> None:  # noqa: ANN001
    """The records table holds each record of the topic exactly once, with its bytes."""
    topic_records = {(r.partition, r.offset): (r.key, r.value) for r in read_topic(broker.client_config(), topic)}
    rows = sql(capsys, warehouse, "SELECT partition, offset, base64(key) AS k, base64(value) AS v FROM records")
    seen = [(r["partition"], r["offset"]) for r in rows]
    assert len(seen) == len(set(seen)), "a record was written twice"
    assert set(seen) == set(topic_records), "records missing or extra"
    import base64

    for r in rows:
        key, value = topic_records[(r["partition"], r["offset"])]
        assert base64.b64decode(r["k"]) == key
        assert (None if r["v"] is None else base64.b64decode(r["v"])) == value


def history_json(history: History) -> tuple[list[dict], list[dict]]:
    rebalances = [{k: v for k, v in rebalance_json(r).items() if k != "type"} for r in history.all_rebalances()]
    intervals = [{k: v for k, v in interval_json(i).items() if k != "type"} for i in history.all_intervals()]
    return rebalances, intervals


def tables_json(capsys, warehouse: Where, rebalance_keys, interval_keys) -> tuple[list[dict], list[dict]]:  # noqa: ANN001
    """The audit's rebalances and ownership in replay's JSON shapes, in replay's order."""
    rebalances = sql(capsys, warehouse, "SELECT * FROM rebalances")
    intervals = sql(capsys, warehouse, "SELECT * FROM ownership")
    for r in rebalances:
        r["moved"] = [{"item": m["item"], "from": m["from"], "to": m["to"]} for m in r["moved"]]
    rebalances = sorted(
        ({k: r[k] for k in rebalance_keys} for r in rebalances), key=lambda r: (r["group"], r["number"])
    )
    intervals = sorted(
        ({k: i[k] for k in interval_keys} for i in intervals),
        key=lambda i: (i["group"], i["item"], i["member"], i["partition"], i["from_offset"]),
    )
    return rebalances, intervals


def assert_tables_agree(capsys, where: Where, history: History) -> tuple[list[dict], list[dict]]:  # noqa: ANN001
    """The audit's rebalances and ownership are, field by field, what `history` reports (in replay's
    order); both returned."""
    want_rebalances, want_intervals = history_json(history)
    assert want_rebalances and want_intervals
    got_rebalances, got_intervals = tables_json(capsys, where, want_rebalances[0].keys(), want_intervals[0].keys())
    want_rebalances = sorted(want_rebalances, key=lambda r: (r["group"], r["number"]))
    want_intervals = sorted(
        want_intervals, key=lambda i: (i["group"], i["item"], i["member"], i["partition"], i["from_offset"])
    )
    assert got_rebalances == want_rebalances
    assert got_intervals == want_intervals
    return want_rebalances, want_intervals


def assert_agrees_with_replay(capsys, broker, topic: str, warehouse: Where) -> History:  # noqa: ANN001
    history = replayed(broker, topic)
    assert_tables_agree(capsys, warehouse, history)
    return history
