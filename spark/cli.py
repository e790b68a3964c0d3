"""`coordinator audit`, `coordinator sql` and `coordinator audit-simulate`.

pyspark is imported only when one of them runs: it is an optional extra (`.[spark]`) and takes
seconds to load, which no other command should pay.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import orjson

from coordinator.errors import CliError
from coordinator.tools import extras, kafka_config
from coordinator.tools.text import table
from spark import DEFAULT_DATABASE

# A batch's records and history rows pass through the driver: this bounds its memory when the audit
# starts far behind (a new audit of a long topic) and costs nothing once it has caught up.
MAX_OFFSETS_PER_TRIGGER = 200_000


def register(subparsers: argparse._SubParsersAction) -> None:
    _register_audit(subparsers)
    _register_sql(subparsers)
    _register_simulate(subparsers)
    _register_spark_conf(subparsers)


def _register_audit(subparsers: argparse._SubParsersAction) -> None:
    audit = subparsers.add_parser(
        "audit",
        description="Reads the coordinator's topic with Spark Structured Streaming (Spark's Kafka source, "
        "read_committed) and appends every record and the rebalance and ownership history to Delta "
        "tables, registered with views in the warehouse's catalog under one database. Checkpointed: "
        "stopped or killed, it carries on where it stopped, without duplicates or gaps.",
    )
    kafka_config.add_arguments(audit)
    _warehouse(audit)
    audit.add_argument(
        "--trigger",
        default=os.environ.get("COORDINATOR_AUDIT_TRIGGER", "10s"),
        help="available-now (read what is there, then stop) or an interval like 10s, 500ms, 2m "
        "(default 10s; env COORDINATOR_AUDIT_TRIGGER)",
    )
    audit.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new audit starts: earliest (default), latest, or JSON "
        '{"<topic>": {"<partition>": offset}}; a restarted audit continues from its checkpoint',
    )
    audit.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        metavar="N",
        default=MAX_OFFSETS_PER_TRIGGER,
        help=f"at most N offsets per micro-batch (default {MAX_OFFSETS_PER_TRIGGER:,}: it bounds the "
        "driver's memory when the audit starts far behind)",
    )
    audit.add_argument(
        "--min-partitions",
        type=int,
        metavar="N",
        help="read each batch in at least N Spark tasks (default: one per Kafka partition)",
    )
    audit.add_argument(
        "--optimize-every",
        default="10m",
        metavar="INTERVAL",
        help="compact the tables' small files (OPTIMIZE) this often, e.g. 10m (default), 1h",
    )
    audit.add_argument(
        "--master",
        default=os.environ.get("COORDINATOR_SPARK_MASTER"),
        metavar="URL",
        help="Spark's master, any URL spark-submit takes: spark://HOST:7077, yarn, k8s://https://HOST:443 "
        "(this process is the driver; our code is shipped to the executors) (default local[*]; env "
        "COORDINATOR_SPARK_MASTER)",
    )
    audit.add_argument(
        "--conf",
        action="append",
        type=_spark_setting,
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.pyspark.python=/opt/audit-venv/bin/python for a cluster's "
        "executors (repeatable)",
    )
    _metastore(audit)
    # No default here: spark.audit's DEFAULT_SNAPSHOT_EVERY_RECORDS applies (importing it would load
    # pyarrow before any command runs).
    audit.add_argument(
        "--snapshot-every",
        type=_snapshot_every,
        metavar="N",
        help="records between snapshots of the audit's state beside its checkpoint; a restart reads the "
        "newest and replays at most about N records (default 500,000; 0: never)",
    )
    audit.add_argument("--quiet", action="store_true", help="no line per batch")
    audit.set_defaults(func=_audit)


def _register_sql(subparsers: argparse._SubParsersAction) -> None:
    sql = subparsers.add_parser(
        "sql",
        description="Runs a query over the audit's tables and views (records, events, rebalances_converged, "
        "ownership_ended, rebalances_open, ownership_open; group_epochs, target_assignments, "
        "current_assignments, rebalances, ownership, member_events), read from the warehouse by path: "
        "it works while coordinator audit runs.",
    )
    _warehouse(sql)
    sql.add_argument("query", metavar="SQL", help='e.g. "SELECT * FROM rebalances ORDER BY duration_ms DESC LIMIT 5"')
    sql.add_argument("--format", choices=("table", "json"), default="table", help="a table (default) or JSON lines")
    sql.set_defaults(func=_sql)


def _register_simulate(subparsers: argparse._SubParsersAction) -> None:
    """`coordinator replay simulate` on the audit's records table: the same flags, the same report
    (replay does not import spark, so the command that reads the warehouse is one of spark's)."""
    from replay.commands import simulate

    parser = subparsers.add_parser(
        "audit-simulate",
        description="coordinator replay simulate on the audit's tables: re-runs a group's history, read from "
        "the records table in the warehouse (by path: it works while coordinator audit runs), through the "
        "coordinator, as recorded and with other settings, side by side. For histories older than the "
        "topic's min.compaction.lag.ms, which the topic may no longer hold whole.",
    )
    _warehouse(parser)
    simulate.add_arguments(parser)
    parser.add_argument("--format", choices=("table", "json"), default="table", help="a table (default) or JSON lines")
    parser.add_argument("--strict", action="store_true", help="stop at the first corrupt record (exit code 1)")
    # What `simulate.check` and the report read of replay's source flags, which name no table.
    parser.set_defaults(func=_simulate, to_time=None, from_time=None, file=None)


def _simulate(args: argparse.Namespace) -> int:
    _require_spark()
    from replay.commands import simulate
    from replay.commands.reading import read_summary, report_corrupt
    from replay.errors import ReplayError
    from replay.simulate import simulate as simulate_history
    from spark import whatif
    from spark.tables import RECORDS, table_path

    try:
        simulate.check(args)
        warehouse = _warehouse_dir(args)
        path = table_path(warehouse, args.database, RECORDS)
        if not (path / "_delta_log").is_dir():
            raise CliError(
                f"no audit tables of database {args.database} in {warehouse}: run coordinator audit "
                f"--warehouse {warehouse} --database {args.database} first"
            )
        spark = _spark(warehouse, catalog=False)
        records = spark.read.format("delta").load(str(path))
        history, described = whatif.read_history(records, args.group, end=args.to_time, strict=args.strict)
        described += f" of database {args.database} in {warehouse}"
        report_corrupt(history, args)
        report = simulate_history(
            history,
            args.group,
            since=args.range_from,
            alternatives=simulate.alternatives(args),
            given=simulate.given(args),
            where=f"{simulate.between(args.range_from, args.to_time)} in {described}",
        )
        simulate.show(report, args, read_summary(history, described))
    except ReplayError as e:
        raise CliError(str(e), exit_code=2 if e.invalid_input else 1) from None
    return 0


def _register_spark_conf(subparsers: argparse._SubParsersAction) -> None:
    conf = subparsers.add_parser(
        "spark-conf",
        description="Prints the Spark settings under which any Spark session (spark-sql, pyspark, a notebook) finds "
        "the audit's tables by name: the connectors' jars, Delta's catalog and the warehouse's metastore.",
    )
    _warehouse(conf, database=False)
    _metastore(conf)
    conf.add_argument(
        "--as",
        dest="syntax",
        choices=("args", "properties"),
        default=None,
        help="as --conf KEY=VALUE arguments for spark-sql/pyspark (default), or spark-defaults.conf lines",
    )
    conf.add_argument(
        "--format",
        type=_conf_format,
        default="table",
        metavar="{table,json}",
        help="text for Spark as --as says (default), or JSON (args and properties: the former "
        "spelling of --as, deprecated)",
    )
    conf.set_defaults(func=_spark_conf)


def _metastore(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metastore",
        default=os.environ.get("COORDINATOR_METASTORE"),
        metavar="URL",
        help="a shared Hive metastore, so that other Spark sessions query the tables by name while the "
        "audit runs: jdbc:postgresql://HOST:PORT/DB?user=U&password=P, or thrift://HOST:9083 "
        "(default: Derby in the warehouse, one session at a time; env COORDINATOR_METASTORE)",
    )


def _spark_setting(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. spark.executor.memory=2g")
    return key.strip(), value


def _snapshot_every(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of records, 0 or more")
    return value


def _conf_format(text: str) -> str:
    if text not in ("table", "json", "args", "properties"):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from 'table', 'json')")
    return text


def _warehouse(parser: argparse.ArgumentParser, *, database: bool = True) -> None:
    parser.add_argument(
        "--warehouse",
        default=os.environ.get("COORDINATOR_WAREHOUSE"),
        metavar="DIR",
        help="the directory of the tables and their catalog (env COORDINATOR_WAREHOUSE)",
    )
    if database:
        parser.add_argument(
            "--database",
            default=os.environ.get("COORDINATOR_AUDIT_DATABASE", DEFAULT_DATABASE),
            help=f"the database of the audit's tables and views (env COORDINATOR_AUDIT_DATABASE, "
            f"default {DEFAULT_DATABASE})",
        )


def parse_trigger(text: str) -> dict:
    """`available-now`, or a processing-time interval like 10s, 500ms, 2m: DataStreamWriter.trigger's kwargs."""
    if text in ("available-now", "availableNow"):
        return {"availableNow": True}
    ms = parse_duration_ms(text, "--trigger", "available-now or an interval")
    return {"processingTime": f"{ms} milliseconds"}


def parse_duration_ms(text: str, flag: str, expected: str = "an interval") -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*", text)
    if match is None:
        raise CliError(f"{flag} {text!r}: expected {expected} like 10s, 500ms, 2m, 1h", exit_code=2)
    return int(float(match[1]) * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[match[2]])


def _warehouse_dir(args: argparse.Namespace) -> Path:
    if not args.warehouse:
        raise CliError("no warehouse: pass --warehouse DIR or set COORDINATOR_WAREHOUSE", exit_code=2)
    return Path(args.warehouse).resolve()


def _require_spark() -> None:
    """The `spark` extra, installed on first use (`coordinator.tools.extras`): one line on stderr says so."""
    extras.ensure("spark", ("pyspark", "pyarrow", "pandas"), "Spark (audit, sql, spark-conf)")


def _spark(warehouse: Path, *, catalog: bool, args: argparse.Namespace | None = None):  # noqa: ANN202 - a SparkSession
    """The command's session; `args` with --master, --metastore and --conf (the audit's)."""
    from spark.audit import SCRATCH
    from spark.session import session

    return session(
        warehouse / SCRATCH,
        warehouse=warehouse if catalog else None,
        master=getattr(args, "master", None),
        metastore=getattr(args, "metastore", None),
        conf=dict(getattr(args, "conf", None) or ()),
    )


def _audit(args: argparse.Namespace) -> int:
    _require_spark()
    from spark.audit import DATABASE_NAME, Audit, AuditError, BatchReport

    config = kafka_config.client_config(args)
    trigger = parse_trigger(args.trigger)  # bad flags are reported before Spark starts
    optimize_every_ms = parse_duration_ms(args.optimize_every, "--optimize-every")
    kafka_config.java_client_config(config)
    if not DATABASE_NAME.fullmatch(args.database):
        raise CliError(
            f"--database {args.database!r}: letters, digits and _ only, not starting with a digit", exit_code=2
        )
    warehouse = _warehouse_dir(args)
    _check_topic(config, args.topic)
    warehouse.mkdir(parents=True, exist_ok=True)
    spark = _spark(warehouse, catalog=True, args=args)
    from spark.audit import warehouse_of

    if warehouse_of(spark) != warehouse:  # only where a session was made before (tests, notebooks)
        raise CliError(f"this Spark session's catalog is in {warehouse_of(spark)}, not {warehouse}", exit_code=2)

    def report(r: BatchReport) -> None:
        if args.quiet:
            return
        lag = f"; newest record {r.newest_lag_ms / 1000:.1f}s old" if r.newest_lag_ms is not None else ""
        corrupt = f", {r.corrupt} corrupt" if r.corrupt else ""
        print(
            f"batch {r.batch_id}: {r.records} records{corrupt}, {r.rebalances} rebalances converged, "
            f"{r.intervals} holdings ended in {r.seconds:.2f}s{lag}",
            flush=True,
        )

    try:
        audit = Audit(
            spark,
            config,
            args.topic,
            database=args.database,
            starting_offsets=args.starting_offsets,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            min_partitions=args.min_partitions,
            optimize_every_ms=optimize_every_ms,
            report=report,
            **({} if args.snapshot_every is None else {"snapshot_every_records": args.snapshot_every}),
        )
        query = audit.start(trigger)
    except CliError:
        raise
    except AuditError as e:
        raise CliError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - Spark's errors (a bad option) come as many kinds
        raise CliError(_first_line(e)) from None
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:  # noqa: ARG001
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    print(
        f"auditing {args.topic} into {args.database} in {warehouse} (trigger {args.trigger})",
        file=sys.stderr,
        flush=True,
    )
    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(0.5)
        if query.isActive:
            query.stop()  # a batch cut short runs again when the audit restarts (see spark/audit.py)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    error = query.exception()  # stop() does not raise when the query failed
    if error is not None:
        raise CliError(f"the audit stopped: {_first_line(error)}")
    records = sum(r.records for r in audit.reports)
    print(f"{len(audit.reports)} batches, {records} records audited", file=sys.stderr)
    return 0


def _check_topic(config: dict[str, str], topic: str) -> None:
    """Kafka reachable and the topic there, in one line if not, before Spark takes seconds to start."""
    from replay.source import SourceError, open_consumer, partition_count

    try:
        consumer = open_consumer(config)
        try:
            partition_count(consumer, topic, 15.0, config)
        finally:
            consumer.close()
    except SourceError as e:  # the replay's own error, said at the command line's edge
        raise CliError(str(e), exit_code=2 if e.invalid_input else 1) from None


def _first_line(error: BaseException) -> str:
    """The gist of a Spark error: the innermost Python exception's message if there is one."""
    text = str(getattr(error, "desc", None) or error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):  # a Python traceback inside: its last line names the exception
        if "Error:" in line or "Exception:" in line:
            return line
    return lines[0] if lines else type(error).__name__


def _sql(args: argparse.Namespace) -> int:
    _require_spark()
    warehouse = _warehouse_dir(args)
    from spark.sql import register_views
    from spark.tables import RECORDS, table_path

    if not (table_path(warehouse, args.database, RECORDS) / "_delta_log").is_dir():
        raise CliError(
            f"no audit tables of database {args.database} in {warehouse}: run coordinator audit "
            f"--warehouse {warehouse} --database {args.database} first"
        )
    spark = _spark(warehouse, catalog=False)
    from spark.audit import AuditError

    try:
        register_views(spark, warehouse, args.database)
    except AuditError as e:
        raise CliError(str(e)) from None
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    try:
        df = spark.sql(args.query)
        # Times as UTC text, formatted by Spark: collected as datetimes they would be turned into
        # this machine's local time.
        fields = df.schema.fields
        df = df.toDF(*(f"c{i}" for i in range(len(fields))))  # a query may name two columns alike
        df = df.select(
            *(
                F.date_format(f"c{i}", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias(f.name)
                if isinstance(f.dataType, TimestampType)
                else F.col(f"c{i}").alias(f.name)
                for i, f in enumerate(fields)
            )
        )
        rows = df.collect()
    except Exception as e:  # noqa: BLE001 - parse and analysis errors: the user's query, in one line
        raise CliError(_first_line(e), exit_code=2) from None
    columns = df.columns
    if args.format == "json":
        for row in rows:
            print(orjson.dumps(dict(zip(columns, (_jsonable(v) for v in row)))).decode())
    else:
        print(table([[_cell(v) for v in row] for row in rows], columns))
        print(f"({len(rows)} rows)", file=sys.stderr)
    return 0


def _spark_conf(args: argparse.Namespace) -> int:
    _require_spark()
    from spark.session import catalog_conf

    if args.format in ("args", "properties"):  # before --format meant table|json everywhere
        if args.syntax is not None and args.syntax != args.format:
            raise CliError(f"--format {args.format} and --as {args.syntax} disagree", exit_code=2)
        print(f"warning: --format {args.format} is deprecated: use --as {args.format}", file=sys.stderr)
        args.syntax, args.format = args.format, "table"
    # The first use downloads jars and says so on stdout, which is for the settings alone here
    # (`spark-sql $(coordinator spark-conf ...)`, --format json).
    with contextlib.redirect_stdout(sys.stderr):
        conf = catalog_conf(_warehouse_dir(args), args.metastore)
    if args.format == "json":
        print(orjson.dumps(conf, option=orjson.OPT_INDENT_2).decode())
    elif args.syntax == "properties":
        for key, value in conf.items():
            print(f"{key} {value}")
    else:
        # For `spark-sql $(coordinator spark-conf ...)`: the shell splits a command substitution's
        # output into words and removes no quotes, so each word is printed bare (quoted, the metastore
        # URL reached Spark with its quotes, issue 29 item 10). A value with a space cannot be one word.
        spaced = [key for key, value in conf.items() if any(c.isspace() for c in f"{value}")]
        if spaced:
            raise CliError(
                f"{spaced[0]} holds a space (the warehouse's path?), which $(coordinator spark-conf) would split: "
                "use --as properties for spark-defaults.conf, or --format json"
            )
        print(" ".join(f"--conf {key}={value}" for key, value in conf.items()))
    return 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        import base64

        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if hasattr(value, "asDict"):
        return {k: _jsonable(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    if isinstance(value, (list, dict)) or hasattr(value, "asDict"):
        return orjson.dumps(_jsonable(value)).decode()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value
