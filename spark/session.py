"""The SparkSession the audit, `coordinator sql` and the tests use (DESIGN §10).

Master. Local mode on this machine's cores unless told otherwise (`master`, else
$COORDINATOR_SPARK_MASTER), or whatever master spark-submit was given when it launched this Python.
Any master URL spark-submit takes works (spark://, yarn, k8s://): this process is then the driver in
client mode, and the executors run elsewhere with a Python of their own (`spark.pyspark.python`).
They get our code shipped (`ship_code`: the coordinator, records, replay and spark packages in a zip,
added with addPyFile), so only third-party libraries must be on them: Spark's Python workers run
only where a job uses Python on executors (`spark.decode.decode_arrow`); the audit itself decodes
in the JVM. In local mode Spark's Python workers run this interpreter (PYSPARK_PYTHON), where the
project is installed, and nothing is shipped.

A 4 GB driver unless $COORDINATOR_SPARK_DRIVER_MEMORY says otherwise. In local mode scratch space
(`spark.local.dir`, the JVM's java.io.tmpdir) goes under a directory the caller names, so a killed
run leaves its debris there and nowhere else; on a cluster the executors' scratch is the cluster's
own (SPARK_LOCAL_DIRS, YARN's directories), which a path on the driver's machine cannot be. Spark's
own logging is cut to errors: a command prints its own lines.

Jars. pyspark ships Spark without its Kafka source, its Avro functions and Delta Lake; `spark/pom.xml`
lists them and `connector_jars` resolves them from Maven Central once (the resolver the dev broker
uses, cached under ~/.cache), leaving out every transitive jar pyspark already has so that one
version of each class is loaded. They go on `spark.jars`: no Ivy, no network at session start, and
Spark serves them to a cluster's executors itself.

Catalog. `catalog_conf(warehouse, metastore)` is everything a Spark session needs to find the audit's
tables by name: Delta's SQL extension and catalog, Hive's catalog, the warehouse directory, and the
metastore. By default that is a Derby database inside the warehouse (the one Spark ships), which admits
one JVM at a time: a reader started while `coordinator audit` runs gets "Another instance of Derby
may have already booted the database"; `coordinator sql` reads the tables by path and so works at any
time. A shared metastore lifts that limit: `jdbc:postgresql://HOST:PORT/DB?user=U&password=P` keeps
the Hive metastore's tables in PostgreSQL (the JDBC driver from `metastore-pom.xml` on the driver's
class path; DataNucleus creates its tables on first use), `thrift://HOST:9083` uses a running Hive
metastore service.
`coordinator spark-conf` prints either for `spark-sql`, `pyspark` or a notebook.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import zipfile
from pathlib import Path

from coordinator.errors import CliError

_LOG4J = Path(__file__).with_name("log4j2.properties")
POM = Path(__file__).with_name("pom.xml")
METASTORE_POM = Path(__file__).with_name("metastore-pom.xml")
# What `ship_code` zips for a cluster's executors: every package of ours that spark/ imports.
SHIPPED_PACKAGES = ("coordinator", "records", "replay", "spark")
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


def catalog_conf(warehouse: Path, metastore: str | None = None) -> dict[str, str]:
    """The settings under which a Spark session finds the audit's tables in `warehouse` by name,
    with the metastore in the warehouse (Derby) or `metastore` (a JDBC or thrift URL)."""
    warehouse = Path(warehouse).resolve()
    conf = {
        **connectors_conf(),
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(warehouse),
    }
    if metastore is None:
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={warehouse}/metastore_db;create=true"
        )
        # Derby's log beside its database, not in whatever directory the reader started in.
        conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={warehouse}"
    elif metastore.startswith("jdbc:postgresql:"):
        from coordinator.tools import maven

        jdbc = maven.libs(METASTORE_POM, "postgresql-*.jar", "the PostgreSQL JDBC driver")
        conf.update(
            {
                # On the JVM's own class path, not spark.jars: DataNucleus finds the driver through
                # java.sql.DriverManager, which does not see jars added to Spark's class loader
                # ("No suitable driver found"). Only the driver talks to the metastore.
                "spark.driver.extraClassPath": ":".join(str(j) for j in sorted(jdbc.glob("*.jar"))),
                "spark.hadoop.javax.jdo.option.ConnectionURL": metastore,
                "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
                # An empty database gets the metastore's tables on first use; Spark's Hive client
                # writes no schema version Hive's own tools would check.
                "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
                "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
                # Not autoCreateAll, which adds foreign keys: DataNucleus makes a table on its first
                # use, and adding a key that names TBLS then waited, in a connection of its own, for
                # the uncommitted write to TBLS in another, which waited for it (seen at the
                # audit's first CREATE TABLE; PostgreSQL cannot see a wait in the client).
                "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
                "spark.hadoop.hive.metastore.schema.verification": "false",
            }
        )
    elif metastore.startswith("thrift://"):
        conf["spark.hadoop.hive.metastore.uris"] = metastore
    else:
        raise CliError(
            f"--metastore {metastore!r}: expected jdbc:postgresql://HOST:PORT/DB?user=U&password=P "
            "or thrift://HOST:PORT (a Hive metastore service)",
            exit_code=2,
        )
    return conf


def ship_code(scratch: Path) -> Path:
    """Our packages in a zip for addPyFile: a cluster's executors import them from it (the records
    package reads its schemas as resources, so it works there too)."""
    root = Path(__file__).resolve().parents[1]
    target = scratch / "worker-coordinator-code.zip"
    staging = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as z:
        for package in SHIPPED_PACKAGES:
            for path in sorted((root / package).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    z.write(path, path.relative_to(root))
    staging.replace(target)  # a session started meanwhile never ships half a zip
    return target


def _master(master: str | None) -> str | None:
    """The master asked for; None under spark-submit, which has set spark.master itself."""
    if master:
        return master
    if os.environ.get("COORDINATOR_SPARK_MASTER"):
        return os.environ["COORDINATOR_SPARK_MASTER"]
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[*]"


def session(  # noqa: ANN201 - a SparkSession
    scratch: Path,
    app: str = "worker-coordinator",
    *,
    warehouse: Path | None = None,
    master: str | None = None,
    metastore: str | None = None,
    conf: dict[str, str] | None = None,
):
    """A SparkSession with the connectors; with `warehouse`, its catalog too (`catalog_conf`);
    `conf` last, over everything else (`--conf KEY=VALUE`)."""
    master = _master(master)
    local = master is not None and master.startswith("local")
    # The Python that Spark's workers run: pyspark takes it from PYSPARK_PYTHON when it starts the JVM
    # itself, and only spark-submit reads spark.pyspark.python, so the setting is passed on here.
    python = (conf or {}).get("spark.pyspark.python") or (sys.executable if local else None)
    if python:
        os.environ["PYSPARK_PYTHON"] = python
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else the JVM warns the hostname is loopback
    scratch.mkdir(parents=True, exist_ok=True)
    from pyspark.sql import SparkSession

    java = f"-Djava.io.tmpdir={scratch} -Dlog4j2.configurationFile={_LOG4J.as_uri()}"
    # Without a catalog, Spark would still make an empty `spark-warehouse` in the working directory.
    settings = (
        {**connectors_conf(), "spark.sql.warehouse.dir": str(scratch / "spark-warehouse")}
        if warehouse is None
        else catalog_conf(warehouse, metastore)
    )
    settings["spark.driver.extraJavaOptions"] = f"{settings.get('spark.driver.extraJavaOptions', '')} {java}".strip()
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    if local:  # paths on this machine, which a cluster's executors may not have
        builder = builder.config("spark.local.dir", str(scratch)).config("spark.executor.extraJavaOptions", java)
    builder = (
        # The driver holds a micro-batch's records for the History and its rows for the history
        # tables; Spark's 1 GB default ran out at a million records in one batch.
        builder.config("spark.driver.memory", os.environ.get("COORDINATOR_SPARK_DRIVER_MEMORY", "4g"))
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
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not spark.sparkContext.master.startswith("local"):
        spark.sparkContext.addPyFile(str(ship_code(scratch)))
    # PySpark logs a failed query's whole Java stack as JSON; the commands report it in one line.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return spark
