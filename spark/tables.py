"""The audit's tables and views: their schemas, how each is derived, and the SQL of the views.

    name                  kind   one row per                                  from
    --------------------  -----  -------------------------------------------  --------------------
    records               table  record of the topic (corrupt ones too)       spark.decode
    history_rows          table  row of one of the five views below           replay.history
    events                view   change `coordinator replay timeline` shows    history
    rebalances_converged  view   converged rebalance                          history
    ownership_ended       view   ended holding of an item by a member         history
    rebalances_open       view   rebalance not converged yet (latest batch)   history
    ownership_open        view   holding not ended yet (latest batch)         history
    group_epochs          view   group epoch record (3)                       records
    target_assignments    view   item of a member's target (7)                records
    current_assignments   view   item a member owns or is revoking (8)        records
    rebalances            view   rebalance, converged or open                 the two views
    ownership             view   holding, ended or not                        the two views
    member_events         view   event about a member, with why it left        events

Tables are Delta tables with a `batch_id` column (the micro-batch that wrote the row), each write
idempotent per micro-batch (spark.audit). What the History reports goes into one table, `history_rows`,
partitioned by `kind` (the name of the view that shows the row) with one struct column per shape
(`event`, `rebalance`, `holding`): one Delta commit a batch instead of one per view (a commit costs
about half a second whatever its size, and a batch of a processing-time trigger holds few rows). A
batch appends the events, converged rebalances and ended holdings, and when what is open changed
replaces the `_open` kinds in the same commit (their partitions only). The views are SQL over the
tables, rendered twice from one definition (`view_sql`): as persistent views in the catalog, for any
Spark session, and over table paths for `coordinator sql`; every view reads the names and columns
the tables of those names had. The typed views read their fields from the records' JSON when
queried, so that the audit's hot path decodes each record once, into one column. `rebalances` and
`ownership` answer what `coordinator replay` answers at the end of the same log.

The history rows are `replay.history`'s own JSON shapes (`rebalance_json`, `interval_json`,
`events.event_json`) plus columns for SQL (timestamps, counts, connector and task): the audit and
`coordinator replay` are one interpretation of the log, not two. Classic groups are in them too:
who runs what is read from their type 2 records' Kafka Connect bytes on the driver, by the rule
`coordinator.core.classic.holdings` states once (events of kind `classic-member-joined`,
`classic-member` and `classic-member-left`, the worker's `url` and `config_offset` in `detail`;
holdings in `ownership`; a classic rebalance's epochs are generations). No UDF: the JVM decoder's
`records` rows keep the bytes, and the History that reads them runs in Python anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from coordinator.core.items import Item
from replay import events as ev
from replay.events import Event
from replay.history import Interval, Rebalance, interval_json, rebalance_json
from spark.decode import SCHEMA, TIMESTAMP

# Tables.
RECORDS = "records"
HISTORY = "history_rows"  # not `history`: Delta's SQL reads `DESCRIBE DETAIL db.history` as DESCRIBE HISTORY
# Views of the history table: one per kind of its rows.
EVENTS = "events"
REBALANCES_CONVERGED = "rebalances_converged"
OWNERSHIP_ENDED = "ownership_ended"
REBALANCES_OPEN = "rebalances_open"
OWNERSHIP_OPEN = "ownership_open"
# Views.
GROUP_EPOCHS = "group_epochs"
TARGET_ASSIGNMENTS = "target_assignments"
CURRENT_ASSIGNMENTS = "current_assignments"
REBALANCES = "rebalances"
OWNERSHIP = "ownership"
MEMBER_EVENTS = "member_events"

_ITEM = [("item", pa.string()), ("connector", pa.string()), ("task", pa.int32())]

# The tables' and the history's views' schemas (without the `batch_id` every table adds); the records
# table's is spark.decode's.
SCHEMAS: dict[str, pa.Schema] = {
    RECORDS: SCHEMA,
    EVENTS: pa.schema(
        [
            ("group", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp_ms", pa.int64()),
            ("timestamp", TIMESTAMP),
            ("kind", pa.string()),
            ("member", pa.string()),
            ("epoch", pa.int32()),
            ("previous_epoch", pa.int32()),
            ("gained", pa.list_(pa.string())),
            ("released", pa.list_(pa.string())),
            ("detail", pa.string()),
            ("text", pa.string()),
            ("reason", pa.string()),
        ]
    ),  # why the member left (LeaveReason), on member-left events
    REBALANCES_CONVERGED: pa.schema(
        [
            ("group", pa.string()),
            ("number", pa.int32()),
            ("from_epoch", pa.int32()),
            ("to_epoch", pa.int32()),
            ("causes", pa.list_(pa.string())),
            ("trigger", pa.string()),
            ("partition", pa.int32()),
            ("start_offset", pa.int64()),
            ("start_timestamp_ms", pa.int64()),
            ("started_at", TIMESTAMP),
            ("installed_offset", pa.int64()),
            ("installed_timestamp_ms", pa.int64()),
            ("target_installed_at", TIMESTAMP),
            ("end_offset", pa.int64()),
            ("end_timestamp_ms", pa.int64()),
            ("converged_at", TIMESTAMP),
            ("duration_ms", pa.int64()),
            ("converged", pa.bool_()),
            ("members", pa.int32()),
            ("deferred", pa.int32()),
            ("items_deferred", pa.int32()),
            ("revoked", pa.int32()),
            ("released", pa.int32()),
            ("assigned", pa.int32()),
            ("items_moved", pa.int32()),
            ("moved", pa.list_(pa.struct([*_ITEM, ("from", pa.string()), ("to", pa.string())]))),
        ]
    ),
    OWNERSHIP_ENDED: pa.schema(
        [
            ("group", pa.string()),
            *_ITEM,
            ("member", pa.string()),
            ("partition", pa.int32()),
            ("from_offset", pa.int64()),
            ("from_timestamp_ms", pa.int64()),
            ("since", TIMESTAMP),
            ("to_offset", pa.int64()),
            ("to_timestamp_ms", pa.int64()),
            ("until", TIMESTAMP),
            ("given_at_epoch", pa.int32()),
            ("ended_by", pa.string()),
        ]
    ),
}
SCHEMAS[REBALANCES_OPEN] = SCHEMAS[REBALANCES_CONVERGED]
SCHEMAS[OWNERSHIP_OPEN] = SCHEMAS[OWNERSHIP_ENDED]

APPENDED = (EVENTS, REBALANCES_CONVERGED, OWNERSHIP_ENDED)  # history rows added by each batch
REPLACED = (REBALANCES_OPEN, OWNERSHIP_OPEN)  # a snapshot, replaced by each batch that changes it
KINDS = (*APPENDED, *REPLACED)  # the history table's `kind`s, each the view that shows it
# Each kind's struct column in the history table.
SHAPES = {EVENTS: "event", REBALANCES_CONVERGED: "rebalance", OWNERSHIP_ENDED: "holding"}
SHAPES |= {REBALANCES_OPEN: "rebalance", OWNERSHIP_OPEN: "holding"}
SCHEMAS[HISTORY] = pa.schema(
    [("kind", pa.string())] + [(shape, pa.struct(list(SCHEMAS[kind]))) for kind, shape in list(SHAPES.items())[:3]]
)
TABLES = (RECORDS, HISTORY)
PARTITIONED = {HISTORY: "kind"}
VIEWS = (*KINDS, GROUP_EPOCHS, TARGET_ASSIGNMENTS, CURRENT_ASSIGNMENTS, REBALANCES, OWNERSHIP, MEMBER_EVENTS)


# --- views ----------------------------------------------------------------------------------------

_ITEMS_TYPE = "STRUCT<Connectors: ARRAY<STRING>, Tasks: ARRAY<STRUCT<Connector: STRING, Task: INT>>>"


def _items_sql(struct: str) -> str:
    """A ConnectorsAndTasks struct as a list of {item, connector, task}, `item` as replay names it."""
    return (
        f"concat(transform({struct}.Connectors, c -> named_struct('item', c, 'connector', c, "
        f"'task', CAST(NULL AS INT))), transform({struct}.Tasks, t -> named_struct('item', "
        f"concat(t.Connector, '-', t.Task), 'connector', t.Connector, 'task', t.Task)))"
    )


_WHERE_SQL = "partition, offset, timestamp, batch_id"

# Each view's SQL, `{name}` standing for a table. Rows of corrupt records are left out of the typed
# views (the records table has them, with the reason).
_VIEWS: dict[str, str] = {
    **{kind: f"SELECT {SHAPES[kind]}.*, batch_id FROM {{{HISTORY}}} WHERE kind = '{kind}'" for kind in KINDS},
    GROUP_EPOCHS: f"""
        SELECT group_id, CAST(get_json_object(fields, '$.GroupEpoch') AS INT) AS group_epoch,
               tombstone AS deleted, {_WHERE_SQL}
        FROM {{records}} WHERE record_type = 3 AND error IS NULL""",
    TARGET_ASSIGNMENTS: f"""
        SELECT group_id, member_id, i.item, i.connector, i.task, tombstone AS removed, {_WHERE_SQL}
        FROM (SELECT *, from_json(fields, 'Assignment {_ITEMS_TYPE}') AS v
              FROM {{records}} WHERE record_type = 7 AND error IS NULL)
        LATERAL VIEW OUTER explode({_items_sql("v.Assignment")}) AS i""",
    CURRENT_ASSIGNMENTS: f"""
        WITH current AS (
            SELECT *, from_json(fields, 'MemberEpoch INT, PreviousMemberEpoch INT, State STRING,
                                          Assignment {_ITEMS_TYPE}, PendingRevocation {_ITEMS_TYPE}') AS v
            FROM {{records}} WHERE record_type = 8 AND error IS NULL)
        SELECT group_id, member_id, v.MemberEpoch AS member_epoch, v.PreviousMemberEpoch AS previous_member_epoch,
               v.State AS member_state, i.item, i.connector, i.task, false AS pending_revocation,
               tombstone AS removed, {_WHERE_SQL}
        FROM current LATERAL VIEW OUTER explode({_items_sql("v.Assignment")}) AS i
        UNION ALL
        SELECT group_id, member_id, v.MemberEpoch, v.PreviousMemberEpoch, v.State, i.item, i.connector, i.task,
               true, tombstone, {_WHERE_SQL}
        FROM current LATERAL VIEW explode({_items_sql("v.PendingRevocation")}) AS i""",
    REBALANCES: "SELECT * FROM {rebalances_converged} UNION ALL SELECT * FROM {rebalances_open}",
    OWNERSHIP: "SELECT * FROM {ownership_ended} UNION ALL SELECT * FROM {ownership_open}",
    MEMBER_EVENTS: "SELECT * FROM {events} WHERE member IS NOT NULL",
}


def table_path(warehouse: Path, database: str, table: str) -> Path:
    """Where Spark keeps a managed table of `database` (its default location under the warehouse)."""
    return Path(warehouse) / f"{database.lower()}.db" / table


def view_sql(view: str, table_ref: Callable[[str], str]) -> str:
    """The SELECT of `view`, each table or view it reads named by `table_ref(name)` (a catalog name,
    or the temporary view over a table's path). A view reads only views before it in `VIEWS`."""
    return _VIEWS[view].format(**{name: table_ref(name) for name in (*TABLES, *VIEWS)})


def history_rows(parts: dict[str, pa.Table]) -> pa.Table:
    """One batch's rows of the history table from each kind's rows (`event_rows`, ...)."""
    schema = SCHEMAS[HISTORY]
    tables = []
    for kind, rows in parts.items():
        n = rows.num_rows
        if not n:
            continue
        columns = [pa.repeat(pa.scalar(kind), n)]
        for field in schema.remove(0):
            if field.name == SHAPES[kind]:
                columns.append(rows.combine_chunks().to_struct_array().cast(field.type))
            else:
                columns.append(pa.nulls(n, field.type))
        tables.append(pa.Table.from_arrays(columns, schema=schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


# --- history tables, from what replay.history kept -------------------------------------------------


def _ts(ms: int | None) -> int | None:
    return None if ms is None else ms * 1000


def _item_parts(item: Item) -> tuple[str, int | None]:
    return (item, None) if isinstance(item, str) else (item.connector, item.task)


def _table(rows: Iterable[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows as a table of `schema`, built a column at a time in one pass over them (a missing key
    is null): measured 3.6x faster than `pa.Table.from_pylist`, which reads each dict row by row."""
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    appends = [(name, columns[name].append) for name in schema.names]
    for row in rows:
        get = row.get
        for name, append in appends:
            append(get(name))
    return pa.Table.from_arrays([pa.array(columns[f.name], f.type) for f in schema], schema=schema)


def rebalance_rows(rebalances: Iterable[Rebalance]) -> pa.Table:
    return _table(map(_rebalance_row, rebalances), SCHEMAS[REBALANCES_CONVERGED])


def _rebalance_row(r: Rebalance) -> dict[str, Any]:
    row: dict[str, Any] = rebalance_json(r)
    row.update(
        trigger="; ".join(r.causes) or None,
        started_at=_ts(row["start_timestamp_ms"]),
        target_installed_at=_ts(row["installed_timestamp_ms"]),
        converged_at=_ts(row["end_timestamp_ms"]),
        items_deferred=r.deferred,
        items_moved=len(r.moved),
    )
    for move, (item, _, _) in zip(row["moved"], r.moved):
        move["connector"], move["task"] = _item_parts(item)
    return row


def ownership_rows(intervals: Iterable[Interval]) -> pa.Table:
    return _table(map(_ownership_row, intervals), SCHEMAS[OWNERSHIP_ENDED])


def _ownership_row(i: Interval) -> dict[str, Any]:
    row: dict[str, Any] = interval_json(i)
    row["connector"], row["task"] = _item_parts(i.item)
    row.update(since=_ts(row["from_timestamp_ms"]), until=_ts(row["to_timestamp_ms"]))
    return row


def event_rows(events: Iterable[Event]) -> pa.Table:
    return _table(map(_event_row, events), SCHEMAS[EVENTS])


def _event_row(e: Event) -> dict[str, Any]:
    row: dict[str, Any] = ev.event_json(e)
    row.update(
        detail=orjson.dumps(row["detail"]).decode(),
        timestamp=_ts(row["timestamp_ms"]),
        reason=e.detail.get("reason") if e.kind == ev.MEMBER_LEFT else None,
    )
    return row
