"""The audit's tables: their schemas, and how each is derived from a batch of records.

    table                 one row per                                 from
    --------------------  ------------------------------------------  ---------------------------
    records               record of the topic (corrupt ones too)      spark.decode, in read()
    group_epochs          group epoch record (3)                      records
    target_assignments    item of a member's target (7)               records
    current_assignments   item a member owns or is revoking (8)       records
    events                change `coordinator replay timeline` shows   replay.history
    rebalances            converged rebalance                         replay.history
    ownership             ended holding of an item by a member        replay.history
    rebalances_open       rebalance not converged yet (latest batch)  replay.history
    ownership_open        holding not ended yet (latest batch)        replay.history

Every table lives in `<warehouse>/<table>/batch_id=<N>/`: a micro-batch writes its own directory and
only that one, so a batch that runs again after a crash replaces what it wrote the first time and
no row is ever written twice (the "append-only" tables are append-only per batch). The `_open`
tables are snapshots: each batch that changes them writes a new one and removes the older, and
`coordinator sql`'s `rebalances` and `ownership` views add the latest snapshot to the closed rows,
so they answer what `coordinator replay` answers at the end of the same log.

The history rows are `replay.history`'s own JSON shapes (`rebalance_json`, `interval_json`,
`events.event_json`) plus columns for SQL (timestamps, counts, connector and task): the audit and
`coordinator replay` are one interpretation of the log, not two.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from coordinator.core.items import Item
from replay import events as ev
from replay.events import Event
from replay.history import Interval, Rebalance, interval_json, rebalance_json
from spark.decode import TIMESTAMP

RECORDS = "records"
GROUP_EPOCHS = "group_epochs"
TARGET_ASSIGNMENTS = "target_assignments"
CURRENT_ASSIGNMENTS = "current_assignments"
EVENTS = "events"
REBALANCES = "rebalances"
OWNERSHIP = "ownership"
REBALANCES_OPEN = "rebalances_open"
OWNERSHIP_OPEN = "ownership_open"

_WHERE = [("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", TIMESTAMP)]
_ITEM = [("item", pa.string()), ("connector", pa.string()), ("task", pa.int32())]

SCHEMAS: dict[str, pa.Schema] = {
    GROUP_EPOCHS: pa.schema([("group_id", pa.string()), ("group_epoch", pa.int32()), ("deleted", pa.bool_()),
                             *_WHERE]),
    TARGET_ASSIGNMENTS: pa.schema([("group_id", pa.string()), ("member_id", pa.string()), *_ITEM,
                                   ("removed", pa.bool_()), *_WHERE]),
    CURRENT_ASSIGNMENTS: pa.schema([("group_id", pa.string()), ("member_id", pa.string()),
                                    ("member_epoch", pa.int32()), ("previous_member_epoch", pa.int32()),
                                    ("member_state", pa.string()), *_ITEM, ("pending_revocation", pa.bool_()),
                                    ("removed", pa.bool_()), *_WHERE]),
    EVENTS: pa.schema([
        ("group", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp_ms", pa.int64()),
        ("timestamp", TIMESTAMP), ("kind", pa.string()), ("member", pa.string()), ("epoch", pa.int32()),
        ("previous_epoch", pa.int32()), ("gained", pa.list_(pa.string())), ("released", pa.list_(pa.string())),
        ("detail", pa.string()), ("text", pa.string())]),
    REBALANCES: pa.schema([
        ("group", pa.string()), ("number", pa.int32()), ("from_epoch", pa.int32()), ("to_epoch", pa.int32()),
        ("causes", pa.list_(pa.string())), ("trigger", pa.string()), ("partition", pa.int32()),
        ("start_offset", pa.int64()), ("start_timestamp_ms", pa.int64()), ("started_at", TIMESTAMP),
        ("installed_offset", pa.int64()), ("installed_timestamp_ms", pa.int64()),
        ("target_installed_at", TIMESTAMP), ("end_offset", pa.int64()), ("end_timestamp_ms", pa.int64()),
        ("converged_at", TIMESTAMP), ("duration_ms", pa.int64()), ("converged", pa.bool_()),
        ("members", pa.int32()), ("deferred", pa.int32()), ("items_deferred", pa.int32()),
        ("revoked", pa.int32()), ("released", pa.int32()), ("assigned", pa.int32()), ("items_moved", pa.int32()),
        ("moved", pa.list_(pa.struct([*_ITEM, ("from", pa.string()), ("to", pa.string())])))]),
    OWNERSHIP: pa.schema([
        ("group", pa.string()), *_ITEM, ("member", pa.string()), ("partition", pa.int32()),
        ("from_offset", pa.int64()), ("from_timestamp_ms", pa.int64()), ("since", TIMESTAMP),
        ("to_offset", pa.int64()), ("to_timestamp_ms", pa.int64()), ("until", TIMESTAMP),
        ("given_at_epoch", pa.int32()), ("ended_by", pa.string())]),
}
SCHEMAS[REBALANCES_OPEN] = SCHEMAS[REBALANCES]
SCHEMAS[OWNERSHIP_OPEN] = SCHEMAS[OWNERSHIP]

TYPED_TABLES = (GROUP_EPOCHS, TARGET_ASSIGNMENTS, CURRENT_ASSIGNMENTS)
HISTORY_TABLES = (EVENTS, REBALANCES, OWNERSHIP)
SNAPSHOT_TABLES = (REBALANCES_OPEN, OWNERSHIP_OPEN)
ALL_TABLES = (RECORDS, *TYPED_TABLES, *HISTORY_TABLES, *SNAPSHOT_TABLES)


# --- typed tables, from a batch of decoded records (Arrow, vectorised) ------------------------------


def _explode(table: pa.Table, column: str) -> tuple[pa.Table, pa.StructArray]:
    """One row per element of the list `column`, in row order; a row whose list is empty or null
    keeps one row with a null element (a member that owns nothing still has a row)."""
    lists = table.column(column).combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(lists)
    empties = np.flatnonzero(lengths == 0)
    rows = np.concatenate([pc.list_parent_indices(lists).to_numpy(zero_copy_only=False), empties])
    order = np.argsort(rows, kind="stable")
    items = pa.concat_arrays([values, pa.nulls(len(empties), values.type)]).take(pa.array(order))
    return table.take(pa.array(rows[order])), items


def _where(table: pa.Table) -> list[pa.ChunkedArray]:
    return [table.column("partition"), table.column("offset"), table.column("timestamp")]


def typed_tables(records: pa.Table) -> dict[str, pa.Table]:
    """The typed tables' rows for a batch of `spark.decode.SCHEMA` records (corrupt ones skipped)."""
    ok = records.filter(pc.is_null(records.column("error")))
    types = ok.column("record_type")
    out = {}

    epochs = ok.filter(pc.equal(types, 3))
    out[GROUP_EPOCHS] = pa.Table.from_arrays(
        [epochs.column("group_id"), epochs.column("group_epoch"), epochs.column("tombstone"), *_where(epochs)],
        schema=SCHEMAS[GROUP_EPOCHS])

    targets, items = _explode(ok.filter(pc.equal(types, 7)), "assignment")
    out[TARGET_ASSIGNMENTS] = pa.Table.from_arrays(
        [targets.column("group_id"), targets.column("member_id"), *_item_columns(items), targets.column("tombstone"),
         *_where(targets)], schema=SCHEMAS[TARGET_ASSIGNMENTS])

    currents = ok.filter(pc.equal(types, 8))
    owned, owned_items = _explode(currents, "assignment")
    revoking = currents.filter(pc.greater(pc.fill_null(pc.list_value_length(currents.column("pending_revocation")), 0), 0))
    revoking, revoking_items = _explode(revoking, "pending_revocation")
    parts = []
    for rows, its, pending in ((owned, owned_items, False), (revoking, revoking_items, True)):
        parts.append(pa.Table.from_arrays(
            [rows.column("group_id"), rows.column("member_id"), rows.column("member_epoch"),
             rows.column("previous_member_epoch"), rows.column("member_state"), *_item_columns(its),
             pa.array([pending] * rows.num_rows, pa.bool_()), rows.column("tombstone"), *_where(rows)],
            schema=SCHEMAS[CURRENT_ASSIGNMENTS]))
    out[CURRENT_ASSIGNMENTS] = pa.concat_tables(parts)
    return out


def _item_columns(items: pa.StructArray) -> list[pa.Array]:
    return [items.field("item"), items.field("connector"), items.field("task")]


# --- history tables, from what replay.history kept -------------------------------------------------


def _ts(ms: int | None) -> int | None:
    return None if ms is None else ms * 1000


def _item_parts(item: Item) -> tuple[str, int | None]:
    return (item, None) if isinstance(item, str) else (item.connector, item.task)


def rebalance_rows(rebalances: Iterable[Rebalance]) -> pa.Table:
    rows = []
    for r in rebalances:
        row: dict[str, Any] = rebalance_json(r)
        del row["type"]
        row.update(trigger="; ".join(r.causes) or None, started_at=_ts(row["start_timestamp_ms"]),
                   target_installed_at=_ts(row["installed_timestamp_ms"]), converged_at=_ts(row["end_timestamp_ms"]),
                   items_deferred=r.deferred, items_moved=len(r.moved))
        for move, (item, _, _) in zip(row["moved"], r.moved):
            move["connector"], move["task"] = _item_parts(item)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=SCHEMAS[REBALANCES])


def ownership_rows(intervals: Iterable[Interval]) -> pa.Table:
    rows = []
    for i in intervals:
        row: dict[str, Any] = interval_json(i)
        del row["type"]
        row["connector"], row["task"] = _item_parts(i.item)
        row.update(since=_ts(row["from_timestamp_ms"]), until=_ts(row["to_timestamp_ms"]))
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=SCHEMAS[OWNERSHIP])


def event_rows(events: Iterable[Event]) -> pa.Table:
    rows = []
    for e in events:
        row: dict[str, Any] = ev.event_json(e)
        del row["type"]
        row.update(detail=orjson.dumps(row["detail"]).decode(), timestamp=_ts(row["timestamp_ms"]))
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=SCHEMAS[EVENTS])
