"""Records of the topic as rows: one Arrow schema, two decoders that give the same rows.

`SCHEMA` is the records table: the raw columns (partition, offset, timestamp, key and value bytes),
what the key says (type, group, member, tombstone) and the value as JSON in the schemas' field names
(`records.value_json`'s shape, the value's own version). The typed views (`spark.tables`) read their
fields from that JSON when queried: typed columns here would cost the audit more than they save.

- `decode_avro(df)`: in the JVM, with Spark's `from_avro`, one expression per record type and value
  version generated from `records/schemas` (the two-byte headers pick it). The audit uses this one:
  it needs no Python worker beside the driver's, which replays the History on the same cores.
  `make bench-audit` measures both decoders into the records table; on 2 cores they are within 30%
  of each other and two runs ranked them differently (58k vs 52k records/s, then 67k vs 86k).
- `decode_arrow(df)`: our Python decoder (`records.decode`, the coordinator's own) over Arrow
  batches with `mapInArrow`. It is the reference the JVM decoder is tested against, and what a
  reader uses who wants the records exactly as the coordinator reads them.

Both take a DataFrame of Spark's `format("kafka")` source (or anything with its `partition`,
`offset`, `timestamp`, `key` and `value` columns), so users' own jobs can decode the topic:

    raw = spark.readStream.format("kafka").option("subscribe", "__worker_offsets")...load()
    decoded = decode_avro(raw)

A record that does not decode is a row all the same, with `error` saying why and the decoded
columns null: the audit keeps everything the topic holds, and a reader finds corrupt records with
`WHERE error IS NOT NULL` instead of a failed query.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

import orjson
import pyarrow as pa

from records import RecordDecodeError, decode, value_json
from records.schema import RECORD_TYPES, load

TIMESTAMP = pa.timestamp("us", tz="UTC")

# The single definition of a decoded record row; Spark's schema is derived from it (`spark_schema`).
SCHEMA = pa.schema(
    [
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
    ]
)

# The raw columns every source provides; the rest is what decoding adds.
RAW_COLUMNS = ("partition", "offset", "timestamp", "key", "value")
_DECODED = [name for name in SCHEMA.names if name not in RAW_COLUMNS]
_NAMES = {t: spec.name for t, spec in RECORD_TYPES.items()}


def spark_schema(schema: pa.Schema = SCHEMA):  # noqa: ANN201 - a pyspark StructType
    """An Arrow schema (the records table's by default) as Spark's; pyspark is imported only here,
    where Spark runs."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


# --- the Python decoder ----------------------------------------------------------------------------


def decode_batch(
    partitions: list[int],
    offsets: list[int],
    timestamps_ms: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
) -> pa.RecordBatch:
    """Decode the records given column by column into one batch of `SCHEMA`."""
    columns: dict[str, list[Any]] = {name: [] for name in _DECODED}
    record_type, record_name, version = columns["record_type"], columns["record_name"], columns["version"]
    group_id, member_id, tombstone = columns["group_id"], columns["member_id"], columns["tombstone"]
    error, fields = columns["error"], columns["fields"]
    for key, value in zip(keys, values):
        tombstone.append(value is None)
        try:
            record = decode(key or b"", value)
        except RecordDecodeError as e:
            record_type.append(e.record_type)
            record_name.append(_NAMES.get(e.record_type))
            version.append(e.version)
            group_id.append(None)
            member_id.append(None)
            error.append(str(e))
            fields.append(None)
            continue
        rkey = record.key
        record_type.append(rkey.RECORD_TYPE)
        record_name.append(_NAMES[rkey.RECORD_TYPE])
        version.append(None if value is None else record.version)
        group_id.append(rkey.group_id)
        member_id.append(getattr(rkey, "member_id", None))
        error.append(None)
        fields.append(None if value is None else value_json(record).decode())
    arrays = [
        pa.array(partitions, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps_ms, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP),
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
    ]
    arrays += [pa.array(columns[name], SCHEMA.field(name).type) for name in _DECODED]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def _arrow_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`decode_batch` over Arrow batches holding the raw columns (the Kafka source's `timestamp` is a
    timestamp; int milliseconds also work)."""
    for batch in batches:
        ts = batch.column("timestamp")
        if pa.types.is_timestamp(ts.type):
            ts = ts.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
        yield decode_batch(
            batch.column("partition").to_pylist(),
            batch.column("offset").to_pylist(),
            ts.to_pylist(),
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
        )


def decode_arrow(df):  # noqa: ANN001, ANN201 - a pyspark DataFrame in and out
    """The decoded rows of a Kafka source's DataFrame, by the coordinator's own Python decoder."""
    return df.select(*RAW_COLUMNS).mapInArrow(_arrow_batches, spark_schema())


# --- the JVM decoder -------------------------------------------------------------------------------


def _schema_json(name: str) -> str:
    """A schema file as Avro JSON with its shared named types inlined (fastavro's bookkeeping keys out)."""

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: clean(v) for k, v in node.items() if not k.startswith("__")}
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    return orjson.dumps(clean(load(name))).decode()


def _decoded(struct, name: str, body):  # noqa: ANN001, ANN202
    """True where `struct` (null where the headers name another schema) decoded `body`. PERMISSIVE
    gives a struct of nulls for a body that does not decode; a field that no valid body leaves null
    tells the two apart, and a schema of nullable fields only is written back and compared."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    required = next(
        (f["name"] for f in load(name)["fields"] if not (isinstance(f["type"], list) and "null" in f["type"])), None
    )
    if required is not None:
        return struct[required].isNotNull()
    return F.when(struct.isNotNull(), to_avro(struct, _schema_json(name)) == body)


def _header(column):  # noqa: ANN001, ANN202
    """The big-endian int16 in a key's or value's first two bytes (null when shorter)."""
    from pyspark.sql import functions as F

    short = F.conv(F.hex(F.substring(column, 1, 2)), 16, 10).cast("int")
    return F.when(F.length(column) >= 2, F.when(short >= 32768, short - 65536).otherwise(short))


def decode_avro(df):  # noqa: ANN001, ANN201 - a pyspark DataFrame in and out
    """The decoded rows of a Kafka source's DataFrame, decoded in the JVM (`from_avro`)."""
    first, second, third = _avro_projections()
    return df.select(*first).select(*second).select(*third)


@cache
def _avro_projections() -> tuple[list, list, list]:
    """The three projections of `decode_avro`, built once: unresolved columns serve any DataFrame,
    and building them costs a third of a second of py4j calls.

    1. the headers, and each key and value decoded once: one struct column per key schema and per
       (record type, value version), null unless the headers name it;
    2. what `SCHEMA` needs from those, and the error;
    3. the key's fields and the value's JSON masked where the record does not decode.

    (One projection would repeat each `from_avro` and the error in every column that reads them,
    and Spark would plan and compile that for every micro-batch.)"""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    permissive = {"mode": "PERMISSIVE"}  # a body that is not valid Avro gives null, not a failed query
    t, version = F.col("record_type"), F.col("_version")
    key_body = F.substring(F.col("key"), 3, 1 << 30)
    value_body = F.substring(F.col("value"), 3, 1 << 30)
    names = F.create_map(*(F.lit(x) for type_, name in _NAMES.items() for x in (type_, name)))
    versions = F.create_map(
        *(c for type_, spec in RECORD_TYPES.items() for c in (F.lit(type_), F.array(*map(F.lit, spec.value_schemas))))
    )

    first = [*RAW_COLUMNS, _header(F.col("key")).alias("record_type"), _header(F.col("value")).alias("_version")]
    key_schemas = sorted({spec.key_schema for spec in RECORD_TYPES.values()})
    for name in key_schemas:
        types = [ty for ty, spec in RECORD_TYPES.items() if spec.key_schema == name]
        first.append(F.when(t.isin(*types), from_avro(key_body, _schema_json(name), permissive)).alias(name))
    values, value_names = [], []
    for type_, spec in RECORD_TYPES.items():
        for v, name in spec.value_schemas.items():
            values.append(f"_{type_}_{v}")
            value_names.append(name)
            this = (t == type_) & (version == v)
            first.append(F.when(this, from_avro(value_body, _schema_json(name), permissive)).alias(values[-1]))

    json_options = {"ignoreNullFields": "false"}  # every field, as records.value_json writes it
    tombstone = F.col("value").isNull()
    key_ok = F.greatest(*(_decoded(F.col(name), name, key_body) for name in key_schemas))
    value_ok = F.greatest(*(_decoded(F.col(column), name, value_body) for column, name in zip(values, value_names)))
    name = F.element_at(names, t)
    error = _error_column(t, version, name, versions, key_ok, value_ok, tombstone)
    second = [
        F.col("partition").cast("int").alias("partition"),
        "offset",
        "timestamp",
        "key",
        "value",
        t,
        name.alias("record_name"),
        F.when(~tombstone, version).alias("version"),
        F.coalesce(*(F.col(key)["GroupId"] for key in key_schemas)).alias("group_id"),
        F.col("GroupMemberKey")["MemberId"].alias("member_id"),
        tombstone.alias("tombstone"),
        error.alias("error"),
        F.coalesce(*(F.to_json(F.col(value), json_options) for value in values)).alias("fields"),
    ]
    ok = F.col("error").isNull()
    third = [
        F.when(ok, F.col(column)).alias(column) if column in ("group_id", "member_id", "fields") else column
        for column in SCHEMA.names
    ]
    return first, second, third


def _error_column(t, version, name, versions, key_ok, value_ok, tombstone):  # noqa: ANN001, ANN202 - pyspark Columns
    """Why a record does not decode (null when it does), in `records.decode`'s words."""
    from pyspark.sql import functions as F

    what = F.concat(F.lit("record type "), t.cast("string"), F.lit(" ("), name, F.lit(")"))
    return (
        F.when(t.isNull(), F.lit("cannot decode key of record: shorter than its two-byte record type"))
        .when(
            name.isNull(),
            F.concat(F.lit("cannot decode key of record type "), t.cast("string"), F.lit(": unknown record type")),
        )
        .when(~key_ok, F.concat(F.lit("cannot decode key of "), what, F.lit(": not valid Avro for its schema")))
        .when(tombstone, F.lit(None))
        .when(
            version.isNull(),
            F.concat(F.lit("cannot decode value of "), what, F.lit(": shorter than its two-byte version")),
        )
        .when(
            ~F.array_contains(F.element_at(versions, t), version),
            F.concat(
                F.lit("cannot decode value of "),
                what,
                F.lit(" value version "),
                version.cast("string"),
                F.lit(": unsupported version"),
            ),
        )
        .when(
            ~value_ok,
            F.concat(
                F.lit("cannot decode value of "),
                what,
                F.lit(" value version "),
                version.cast("string"),
                F.lit(": not valid Avro for this version"),
            ),
        )
    )
