"""The audit's tables and views as temporary views of one Spark session (`coordinator sql`).

Each table is read from its Delta directory under the warehouse, by path, not through the catalog:
`coordinator sql` works while `coordinator audit` holds the catalog's embedded metastore, and needs
nothing of it. The views are the same SQL the audit registers in the catalog (`spark.tables`), over
these temporary views.
"""

from __future__ import annotations

from pathlib import Path

from spark import tables as t
from spark.audit import AuditError


def register_views(spark, warehouse: Path, database: str) -> list[str]:  # noqa: ANN001
    """Register every table and view of `database` in `warehouse`; returns their names."""
    for table in t.TABLES:
        path = t.table_path(warehouse, database, table)
        if not (path / "_delta_log").is_dir():
            raise AuditError(
                f"no audit table {table} in {path.parent}: run coordinator audit --warehouse {warehouse} "
                f"--database {database} first"
            )
        spark.read.format("delta").load(str(path)).createOrReplaceTempView(table)
    for view in t.VIEWS:
        spark.sql(t.view_sql(view, lambda table: table)).createOrReplaceTempView(view)
    return [*t.TABLES, *t.VIEWS]
