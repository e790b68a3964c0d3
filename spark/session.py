"""The SparkSession the audit, `coordinator sql` and the tests use (DESIGN §10).

Local mode on this machine's cores unless $COORDINATOR_SPARK_MASTER says otherwise, with a 4 GB
driver unless $COORDINATOR_SPARK_DRIVER_MEMORY says otherwise. Spark's Python
workers run this interpreter (PYSPARK_PYTHON), where the project is installed. Scratch space
(`spark.local.dir`, the JVM's java.io.tmpdir) goes under a directory the caller names, so a killed
run leaves its debris there and nowhere else. Spark's own logging is cut to errors: a command prints
its own lines.

Jars. pyspark ships Spark without its Kafka source, its Avro functions and Delta Lake; `spark/pom.xml`
lists them and `connector_jars` resolves them from Maven Central once (the resolver the dev broker
uses, cached under ~/.cache), leaving out every transitive jar pyspark already has so that one
version of each class is loaded. They go on `spark.jars`: no Ivy, no network at session start.

Catalog. `catalog_conf(warehouse)` is everything a Spark session needs to find the audit's tables by
name: Delta's SQL extension and catalog, Hive's catalog (a Derby metastore inside the warehouse, the
one Spark ships), and the warehouse directory. `coordinator spark-conf` prints it for `spark-sql`,
`pyspark` or a notebook. Derby's embedded metastore admits one JVM at a time: a reader started while
`coordinator audit` runs gets "Another instance of Derby may have already booted the database";
`coordinator sql` reads the tables by path and so works at any time. A shared metastore
(`spark.hadoop.javax.jdo.option.ConnectionURL` to a database server, or `hive.metastore.uris`) lifts
that limit; pass it with --conf.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

_LOG4J = Path(__file__).with_name("log4j2.properties")
POM = Path(__file__).with_name("pom.xml")
_VERSION = re.compile(r"-\d[\w.]*(-\d+)?\.jar$")  # artifact-1.2.3.jar, zstd-jni-1.5.7-3.jar


def _artifact(jar: str) -> str:
    return _VERSION.sub("", jar)


def connector_jars() -> list[Path]:
    """The Kafka, Avro and Delta connectors' jars that pyspark does not ship (resolved once)."""
    import pyspark

    from coordinator.tools import maven

    shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    libs = maven.libs(POM, "spark-sql-kafka-0-10_2.13-*.jar", "Spark's Kafka, Avro and Delta connectors")
    return sorted(j for j in libs.glob("*.jar") if _artifact(j.name) not in shipped)


def connectors_conf() -> dict[str, str]:
    """The settings that give a Spark session the connectors: format("kafka"), from_avro, Delta."""
    return {
        "spark.jars": ",".join(str(j) for j in connector_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }


def catalog_conf(warehouse: Path) -> dict[str, str]:
    """The settings under which a Spark session finds the audit's tables in `warehouse` by name."""
    warehouse = Path(warehouse).resolve()
    return {
        **connectors_conf(),
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={warehouse}/metastore_db;create=true",
        # Derby's log beside its database, not in whatever directory the reader started in.
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={warehouse}",
    }


def session(scratch: Path, app: str = "worker-coordinator", *, warehouse: Path | None = None):  # noqa: ANN201
    """A SparkSession with the connectors; with `warehouse`, its catalog too (`catalog_conf`)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else the JVM warns the hostname is loopback
    scratch.mkdir(parents=True, exist_ok=True)
    from pyspark.sql import SparkSession

    java = f"-Djava.io.tmpdir={scratch} -Dlog4j2.configurationFile={_LOG4J.as_uri()}"
    # Without a catalog, Spark would still make an empty `spark-warehouse` in the working directory.
    conf = (
        {**connectors_conf(), "spark.sql.warehouse.dir": str(scratch / "spark-warehouse")}
        if warehouse is None
        else catalog_conf(warehouse)
    )
    conf["spark.driver.extraJavaOptions"] = f"{conf.get('spark.driver.extraJavaOptions', '')} {java}".strip()
    builder = (
        SparkSession.builder.appName(app)
        .master(os.environ.get("COORDINATOR_SPARK_MASTER", "local[*]"))
        .config("spark.local.dir", str(scratch))
        # The driver holds a micro-batch's records for the History and its rows for the history
        # tables; Spark's 1 GB default ran out at a million records in one batch.
        .config("spark.driver.memory", os.environ.get("COORDINATOR_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.executor.extraJavaOptions", java)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # Parquet's standard timestamps, not Spark's legacy INT96, so any reader gets the unit right.
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.shuffle.partitions", str(os.cpu_count() or 2))
        # Delta rebuilds a table's state from its log in this many tasks (default 50): the
        # audit's tables are small per commit, and 50 tasks cost seconds a commit here.
        .config("spark.databricks.delta.snapshotPartitions", str(os.cpu_count() or 2))
        # A checksum file per commit only speeds up readers' checks; writing it costs each commit
        # a second pass over the table's state (measured: 0.9 -> 0.7 s a commit).
        .config("spark.databricks.delta.writeChecksumFile.enabled", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # PySpark logs a failed query's whole Java stack as JSON; the commands report it in one line.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return spark
