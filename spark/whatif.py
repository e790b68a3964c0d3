"""What if, on the audit's tables (issue 32 item 5): `coordinator replay simulate` for a group and a
time range, read from the `records` table where a week's history lives, not from the topic (which
keeps every record only for min.compaction.lag.ms).

The simulation is `replay.simulate.simulate`, the command's own: it takes a group's `History`,
extracts what the group lived through, re-runs it and measures the recorded history and each re-run
by the same code. So what is read here is what that History reads, the records' bytes in offset
order, not the `events` view: the recorded history's numbers (holdings, rebalances, moves) come
from the History, which the views are rows of anyway. Only the group's rows reach the driver: the
filter on `group_id` (and on `timestamp` for the end of the range) is pushed down to Delta's file
statistics and Parquet's row groups, so Spark skips the files and row groups of other groups and
later times. The range's start is not pushed down: the re-runs start from what the group was then,
which the records before it say (as the command reads the topic from the group's start).

    from spark.whatif import simulate, figures
    from replay.commands.simulate import report_text
    from replay.whatif import Alternatives

    report = simulate(spark, "connect-prod", start="2026-11-20T03:00Z",
                      alternatives=Alternatives(scheduled_delay_ms=(0, 60_000)))
    print(report_text(report))
    figures(spark, report).createOrReplaceTempView("what_if")   # Spark SQL over the side-by-side figures
"""

from __future__ import annotations

import statistics

from replay.commands.simulate import between
from replay.errors import ReplayError
from replay.history import History
from replay.positions import RawRecord, parse_time
from replay.simulate import Outcome, Report
from replay.simulate import simulate as simulate_history
from replay.whatif import Alternatives
from spark import tables as t
from spark.audit import DATABASE_NAME, DEFAULT_DATABASE, raw_records
from spark.decode import RAW_COLUMNS

# One row per history of a report (the recorded one, the faithful re-run, each alternative).
FIGURES_SCHEMA = (
    "group STRING, name STRING, rebalances INT, items_moved INT, tasks_moved INT, unowned_task_ms BIGINT, "
    "longest_wait_ms BIGINT, stable_median_ms BIGINT, stable_longest_ms BIGINT"
)


def group_rows(records, group_id: str, *, end_ms: int | None = None):  # noqa: ANN001, ANN201 - DataFrames
    """The group's rows of the records table `records` (a DataFrame: the catalog's table, or the
    Delta directory read by path) up to `end_ms`: the raw columns, filtered where Spark reads."""
    from pyspark.sql import functions as F

    rows = records.where(F.col("group_id") == group_id)
    if end_ms is not None:
        rows = rows.where(F.col("timestamp") <= F.timestamp_millis(F.lit(end_ms)))
    return rows.select(*RAW_COLUMNS)


def group_records(records, group_id: str, *, end_ms: int | None = None) -> list[RawRecord]:  # noqa: ANN001 - a DataFrame
    """`group_rows` on the driver, raw, in offset order within each partition."""
    return raw_records(group_rows(records, group_id, end_ms=end_ms).toArrow())


def simulate(
    source,  # noqa: ANN001 - a SparkSession (the catalog's `database.records`) or the records table's DataFrame
    group_id: str,
    *,
    start: int | str | None = None,
    end: int | str | None = None,
    alternatives: Alternatives | None = None,
    given: dict[str, int] | None = None,
    database: str = DEFAULT_DATABASE,
    strict: bool = False,
) -> Report:
    """The group's history up to `end` re-run with its own settings and each of `alternatives`,
    compared from `start` (epoch ms, or a time as the command takes it: ISO 8601, UTC unless it
    says). `given`: settings the topic does not hold (`heartbeat_interval_ms`, `session_timeout_ms`).
    Raises ReplayError (one line) for an unknown group, a range with no membership events, a
    setting out of range."""
    since, until = _ms(start, "start"), _ms(end, "end")
    if since is not None and until is not None and since > until:
        raise ReplayError("start is after end", invalid_input=True)
    history, described = read_history(source, group_id, end=until, database=database, strict=strict)
    return simulate_history(
        history,
        group_id,
        since=since,
        alternatives=alternatives,
        given=given,
        where=f"{between(since, until)} in {described}",
    )


def read_history(
    source,  # noqa: ANN001
    group_id: str,
    *,
    end: int | str | None = None,
    database: str = DEFAULT_DATABASE,
    strict: bool = False,
) -> tuple[History, str]:
    """The group's History from its start up to `end`, and what was read, as the report says it."""
    from pyspark.sql import SparkSession

    if isinstance(source, SparkSession):  # the table by name in its catalog
        described = f"the audit's table {database}.{t.RECORDS}"
        if not DATABASE_NAME.fullmatch(database) or not source.catalog.tableExists(f"{database}.{t.RECORDS}"):
            raise ReplayError(f"no audit table {database}.{t.RECORDS} in this Spark session's catalog")
        source = source.table(f"{database}.{t.RECORDS}")
    else:
        described = "the audit's records table"
    history = History(group_id, strict=strict)
    history.run(group_records(source, group_id, end_ms=_ms(end, "end")))
    return history, described


def _ms(value: int | str | None, name: str) -> int | None:
    if value is None or isinstance(value, int):
        return value
    try:
        return parse_time(value)
    except ValueError as e:
        raise ReplayError(f"{name} {value!r}: {e}", invalid_input=True) from None


def figures(spark, report: Report):  # noqa: ANN001, ANN201 - a SparkSession; a DataFrame
    """The report's side-by-side figures as a DataFrame (`FIGURES_SCHEMA`), one row per history,
    to query with Spark SQL or keep in a table beside the audit's."""
    return spark.createDataFrame(
        [_figures(report.group_id, o) for o in [report.base, *report.outcomes]], FIGURES_SCHEMA
    )


def _figures(group_id: str, o: Outcome) -> tuple:
    known = [ms for ms in o.stable_after_ms if ms is not None]
    return (
        group_id,
        o.name,
        o.rebalances,
        len(o.moves),
        o.tasks_moved,
        o.unowned_task_ms,
        o.longest_wait_ms,
        round(statistics.median(known)) if known else None,
        max(known) if known else None,
    )
