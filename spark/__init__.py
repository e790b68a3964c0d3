"""The audit (Spark). What the command line needs before Spark is there lives here, so that
`coordinator audit --help` and the extra's install on first use (spark/cli.py) import no pyarrow."""

# The catalog database the audit's tables go to unless --database says another.
DEFAULT_DATABASE = "worker_coordinator"
