"""Records of the topic as rows: one Arrow schema, one decoder, for every way Spark reads them.

`decode_batch` turns raw records (partition, offset, timestamp, key and value bytes) into an Arrow
`RecordBatch` of `SCHEMA`: the raw columns, what the key says (type, group, member, tombstone), the
value as JSON in the schemas' field names (`records.to_json`'s shape), and the fields the typed
tables need as typed columns. It runs inside the data source's `read()` (DESIGN §10: decoding there
beat a separate `mapInArrow` step), and `decode_kafka` applies the same function to a DataFrame of
the official `format("kafka")` source for users who have that connector.

A record that does not decode is a row all the same, with `error` saying why and the decoded
columns null: the audit keeps everything the topic holds, and a reader finds corrupt records with
`WHERE error IS NOT NULL` instead of a failed query.

Items (connectors and tasks) are `{connector, task}` structs, `task` null for a connector, plus the
item's name as `coordinator replay` prints it (`orders`, `orders-3`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from records import ConnectorsAndTasks, RecordDecodeError, decode, value_json
from records.schema import RECORD_TYPES

ITEM = pa.struct([("item", pa.string()), ("connector", pa.string()), ("task", pa.int32())])
ITEMS = pa.list_(ITEM)
TIMESTAMP = pa.timestamp("us", tz="UTC")

# The single definition of a decoded record row; Spark's schema is derived from it (`spark_schema`).
SCHEMA = pa.schema([
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", TIMESTAMP),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("record_type", pa.int32()),
    ("record_name", pa.string()),
    ("version", pa.int32()),
    ("group_id", pa.string()),
    ("member_id", pa.string()),
    ("tombstone", pa.bool_()),
    ("error", pa.string()),
    ("fields", pa.string()),  # the value as JSON (Avro field names); null for a tombstone
    # Typed fields, null where the record type has no such field.
    ("group_epoch", pa.int32()),  # 3: the group epoch; 5: the epoch at which the member last changed
    ("assignment_epoch", pa.int32()),  # 6
    ("member_epoch", pa.int32()),  # 8
    ("previous_member_epoch", pa.int32()),  # 8
    ("member_state", pa.string()),  # 8
    ("instance_id", pa.string()),  # 5
    ("assignor_name", pa.string()),  # 6
    ("installed_by", pa.string()),  # 6
    ("assignment", ITEMS),  # 7: the member's target; 8: what it owns
    ("pending_revocation", ITEMS),  # 8
    ("deferred", ITEMS),  # 6
])

# The raw columns every source provides; the rest is what decoding adds.
RAW_COLUMNS = ("partition", "offset", "timestamp", "key", "value")
_DECODED = [name for name in SCHEMA.names if name not in RAW_COLUMNS]
_TYPED = _DECODED[_DECODED.index("group_epoch"):]
_NAMES = {t: spec.name for t, spec in RECORD_TYPES.items()}


def spark_schema():  # noqa: ANN201 - a pyspark StructType; pyspark is imported only where Spark runs
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(SCHEMA)


def _items(assignment: ConnectorsAndTasks) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"item": c, "connector": c, "task": None} for c in assignment.connectors]
    out += [{"item": f"{t.connector}-{t.task}", "connector": t.connector, "task": t.task} for t in assignment.tasks]
    return out


# Per record type: the typed columns its value fills. One function per type, as in replay.events.
def _group_metadata(v: Any) -> dict[str, Any]:
    return {"group_epoch": v.group_epoch}


def _member_metadata(v: Any) -> dict[str, Any]:
    return {"group_epoch": v.group_epoch, "instance_id": v.instance_id}


def _target_metadata(v: Any) -> dict[str, Any]:
    return {"assignment_epoch": v.assignment_epoch, "assignor_name": v.assignor_name,
            "installed_by": v.installed_by, "deferred": _items(v.deferred)}


def _target_member(v: Any) -> dict[str, Any]:
    return {"assignment": _items(v.assignment)}


def _current_member(v: Any) -> dict[str, Any]:
    return {"member_epoch": v.member_epoch, "previous_member_epoch": v.previous_member_epoch,
            "member_state": v.state, "assignment": _items(v.assignment),
            "pending_revocation": _items(v.pending_revocation)}


_TYPED_FIELDS = {3: _group_metadata, 5: _member_metadata, 6: _target_metadata, 7: _target_member,
                 8: _current_member}


def decode_batch(partitions: list[int], offsets: list[int], timestamps_ms: list[int], keys: list[bytes | None],
                 values: list[bytes | None]) -> pa.RecordBatch:
    """Decode the records given column by column into one batch of `SCHEMA`."""
    columns: dict[str, list[Any]] = {name: [] for name in _DECODED}
    typed = [columns[name] for name in _TYPED]
    record_type, record_name, version = columns["record_type"], columns["record_name"], columns["version"]
    group_id, member_id, tombstone = columns["group_id"], columns["member_id"], columns["tombstone"]
    error, fields = columns["error"], columns["fields"]
    for key, value in zip(keys, values):
        tombstone.append(value is None)
        try:
            record = decode(key or b"", value)
        except RecordDecodeError as e:
            t = e.record_type
            record_type.append(t)
            record_name.append(_NAMES.get(t))
            version.append(e.version)
            group_id.append(None)
            member_id.append(None)
            error.append(str(e))
            fields.append(None)
            for column in typed:
                column.append(None)
            continue
        rkey = record.key
        t = rkey.RECORD_TYPE
        record_type.append(t)
        record_name.append(_NAMES[t])
        version.append(record.version)
        group_id.append(rkey.group_id)
        member_id.append(getattr(rkey, "member_id", None))
        error.append(None)
        v = record.value
        if v is None:
            fields.append(None)
            for column in typed:
                column.append(None)
            continue
        fields.append(value_json(record).decode())
        extract = _TYPED_FIELDS.get(t)
        filled = extract(v) if extract is not None else {}
        for name, column in zip(_TYPED, typed):
            column.append(filled.get(name))
    arrays = [
        pa.array(partitions, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps_ms, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP),
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
    ]
    arrays += [pa.array(columns[name], SCHEMA.field(name).type) for name in _DECODED]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def decode_arrow(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`decode_batch` over Arrow batches holding the raw columns (any Kafka source's shape: the
    official connector's `timestamp` is a timestamp, ours is one too; int milliseconds also work)."""
    for batch in batches:
        ts = batch.column("timestamp")
        if pa.types.is_timestamp(ts.type):
            ts = ts.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        yield decode_batch(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(),
                           ts.to_pylist(), batch.column("key").to_pylist(), batch.column("value").to_pylist())


def decode_kafka(df):  # noqa: ANN001, ANN201 - a pyspark DataFrame in and out
    """The decoded rows of a DataFrame read with the official `format("kafka")` source (or anything
    with its `partition`, `offset`, `timestamp`, `key` and `value` columns): the same rows the
    `worker_offsets` source gives.

        raw = spark.readStream.format("kafka").option("subscribe", "__worker_offsets")...load()
        decoded = decode_kafka(raw.where("topic = '__worker_offsets'"))
    """
    return df.select(*RAW_COLUMNS).mapInArrow(decode_arrow, spark_schema())
