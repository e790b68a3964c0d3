"""`coordinator dev-broker`: Apache Kafka on this machine, for development, tests and benchmarks.

`jars` resolves Kafka's jars from Maven Central once (the version is pinned in `pom.xml`), `cluster`
formats storage with Kafka's StorageTool and runs 1 or 3 KRaft nodes (broker and controller in one
JVM each) on 127.0.0.1, and `cli` is the subcommand. It is real Apache Kafka, with compaction,
transactions and consumer groups as in production; only its settings are for a laptop.
"""

from coordinator.tools.devbroker.cli import register
from coordinator.tools.devbroker.cluster import (
    DEFAULT_PORT,
    HOST,
    Cluster,
    Node,
    free_port,
    free_port_block,
    load,
    start,
    status,
    stop,
)

__all__ = [
    "DEFAULT_PORT",
    "HOST",
    "Cluster",
    "Node",
    "free_port",
    "free_port_block",
    "load",
    "register",
    "start",
    "status",
    "stop",
]
