"""The SparkSession the audit, `coordinator sql` and the tests use (DESIGN §10).

Local mode on this machine's cores unless $COORDINATOR_SPARK_MASTER says otherwise. Spark's Python
workers run this interpreter (PYSPARK_PYTHON), where the project is installed, so they import
`spark.source`. Scratch space (`spark.local.dir`, the JVM's java.io.tmpdir) goes under a directory
the caller names, so a killed run leaves its debris there and nowhere else. Spark's own logging is
cut to errors: a command prints its own lines.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

_LOG4J = Path(__file__).with_name("log4j2.properties")


def session(scratch: Path, app: str = "worker-coordinator"):  # noqa: ANN201 - a SparkSession
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else the JVM warns the hostname is loopback
    scratch.mkdir(parents=True, exist_ok=True)
    from pyspark.sql import SparkSession

    from spark.source import WorkerOffsetsDataSource

    java = f"-Djava.io.tmpdir={scratch} -Dlog4j2.configurationFile={_LOG4J.as_uri()}"
    spark = (SparkSession.builder.appName(app)
             .master(os.environ.get("COORDINATOR_SPARK_MASTER", "local[*]"))
             .config("spark.local.dir", str(scratch))
             .config("spark.driver.extraJavaOptions", java)
             .config("spark.executor.extraJavaOptions", java)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             # Parquet's standard timestamps, not Spark's legacy INT96, so any reader gets the unit right.
             .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
             .config("spark.sql.shuffle.partitions", str(os.cpu_count() or 2))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # PySpark logs a failed query's whole Java stack as JSON; the commands report it in one line.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    spark.dataSource.register(WorkerOffsetsDataSource)
    return spark
