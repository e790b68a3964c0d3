"""What the tests of `coordinator audit` share: where an audit's tables are, the audit and `coordinator
sql` run in-process, and replay's rebalances and ownership in the shapes the tables hold them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from coordinator import cli
from replay.history import History, interval_json, rebalance_json

# The order both sides of a comparison are put in: rebalances by group and number, holdings by
# group, item, member and where they began.
REBALANCE_ORDER = ("group", "number")
INTERVAL_ORDER = ("group", "item", "member", "partition", "from_offset")


@dataclass(frozen=True)
class Where:
    """Where an audit's tables are: a warehouse and a database in its catalog."""

    warehouse: Path
    database: str = "worker_coordinator"

    def args(self) -> list[str]:
        return ["--warehouse", str(self.warehouse), "--database", self.database]


def run(capsys, *argv: str) -> tuple[int, str, str]:  # noqa: ANN001
    """`coordinator ARGV...` in this process: its exit code, stdout and stderr."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def audit(capsys, broker, topic: str, where: Where, *extra: str) -> str:  # noqa: ANN001
    """`coordinator audit --trigger available-now` into `where`; its output (a line per batch)."""
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


def sql(capsys, where: Where, query: str) -> list[dict]:  # noqa: ANN001
    """`coordinator sql --format json QUERY`: its rows."""
    code, out, err = run(capsys, "sql", *where.args(), "--format", "json", query)
    assert code == 0, err
    return [orjson.loads(line) for line in out.splitlines()]


def _ordered(rows: Iterable[dict], keys: tuple[str, ...]) -> list[dict]:
    return sorted(rows, key=lambda r: tuple((r[k] is not None, r[k]) for k in keys))


def history_json(history: History) -> tuple[list[dict], list[dict]]:
    """replay's rebalances and ownership intervals as `coordinator replay --format json` prints them
    (without the `type`), in REBALANCE_ORDER and INTERVAL_ORDER."""
    rebalances = [{k: v for k, v in rebalance_json(r).items() if k != "type"} for r in history.all_rebalances()]
    intervals = [{k: v for k, v in interval_json(i).items() if k != "type"} for i in history.all_intervals()]
    return _ordered(rebalances, REBALANCE_ORDER), _ordered(intervals, INTERVAL_ORDER)


def tables_json(capsys, where: Where, rebalance_keys, interval_keys) -> tuple[list[dict], list[dict]]:  # noqa: ANN001
    """The audit's `rebalances` and `ownership` with replay's JSON keys, in replay's order."""
    rebalances = sql(capsys, where, "SELECT * FROM rebalances")
    intervals = sql(capsys, where, "SELECT * FROM ownership")
    for r in rebalances:
        r["moved"] = [{"item": m["item"], "from": m["from"], "to": m["to"]} for m in r["moved"]]
    return (
        _ordered(({k: r[k] for k in rebalance_keys} for r in rebalances), REBALANCE_ORDER),
        _ordered(({k: i[k] for k in interval_keys} for i in intervals), INTERVAL_ORDER),
    )


def assert_tables_agree(capsys, where: Where, history: History) -> tuple[list[dict], list[dict]]:  # noqa: ANN001
    """The audit's rebalances and ownership are, field by field, what `history` reports; both returned."""
    want_rebalances, want_intervals = history_json(history)
    assert want_rebalances and want_intervals
    got_rebalances, got_intervals = tables_json(capsys, where, want_rebalances[0].keys(), want_intervals[0].keys())
    assert got_rebalances == want_rebalances
    assert got_intervals == want_intervals
    return want_rebalances, want_intervals
