"""The warehouse's tables as Spark SQL views (`coordinator sql`).

Each table directory becomes a view of the same name, read with its declared schema (so a table
no batch has written yet is an empty view, not an error), with the `batch_id` that wrote each row.
Three views combine tables:

- `rebalances`: converged rebalances and, from the latest snapshot, those still open
  (`converged` false, `converged_at` null);
- `ownership`: ended holdings and, from the latest snapshot, those still held (`until` null);
- `member_events`: the `events` about a member (joins, leaves, epochs, revocations).

So `rebalances` and `ownership` answer what `coordinator replay` answers at the end of the log the
audit has read.
"""

from __future__ import annotations

from pathlib import Path

from spark import tables as t

_COMBINED = {t.REBALANCES: t.REBALANCES_OPEN, t.OWNERSHIP: t.OWNERSHIP_OPEN}


def _schema(table: str):  # noqa: ANN202 - a StructType
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import IntegerType, StructField

    from spark.decode import SCHEMA

    arrow = SCHEMA if table == t.RECORDS else t.SCHEMAS[table]
    return from_arrow_schema(arrow).add(StructField("batch_id", IntegerType()))


def read_table(spark, warehouse: Path, table: str):  # noqa: ANN001, ANN201 - a DataFrame
    """One table of the warehouse as written (the `_open` ones: their latest snapshot)."""
    from pyspark.sql import functions as F

    schema = _schema(table)
    directory = Path(warehouse) / table
    if not any(directory.glob("batch_id=*")):
        return spark.createDataFrame([], schema)
    df = spark.read.schema(schema).parquet(str(directory))
    if table in _COMBINED.values():
        # The audit removes older snapshots after writing a new one; a read in between sees both.
        newest = df.agg(F.max("batch_id"))
        df = df.join(newest, df.batch_id == newest[0], "left_semi")
    return df


def register_views(spark, warehouse: Path) -> list[str]:  # noqa: ANN001
    """Register every table (and the combined views) of `warehouse`; returns the view names."""
    warehouse = Path(warehouse)
    names = []
    for table in t.ALL_TABLES:
        df = read_table(spark, warehouse, table)
        if table in _COMBINED:
            df = df.unionByName(read_table(spark, warehouse, _COMBINED[table]))
        df.createOrReplaceTempView(table)
        names.append(table)
    spark.sql("SELECT * FROM events WHERE member IS NOT NULL").createOrReplaceTempView("member_events")
    names.append("member_events")
    return names
