"""`coordinator dev-broker up|down|status`: the subcommand around `cluster`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from coordinator.tools.devbroker import cluster, jars


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dev-broker",
        description=(
            "Run Apache Kafka on 127.0.0.1 for development and tests: 1 or 3 nodes, each broker and "
            "controller in one JVM. The first `up` downloads Kafka's jars from Maven Central with Maven "
            "(Java 17+ and mvn on PATH). Each `up` of a stopped cluster starts with empty storage."
        ),
    )
    parser.add_argument(
        "action",
        choices=("up", "down", "status"),
        help="up: start (no-op if running); down: stop (no-op if not); status: exit 0 if running, else 1",
    )
    # String defaults go through type=, so a bad $BROKER_PORT or $BROKER_NODES is a usage error.
    parser.add_argument(
        "--port",
        type=_port,
        default=os.environ.get("BROKER_PORT", str(cluster.DEFAULT_PORT)),
        help=f"client port of the first node; node i uses PORT+i-1 (env BROKER_PORT, default {cluster.DEFAULT_PORT})",
    )
    parser.add_argument(
        "--nodes",
        type=_nodes,
        default=os.environ.get("BROKER_NODES", "1"),
        help="1, or 3 for a cluster with replication factor 3 and min ISR 2 (env BROKER_NODES, default 1)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=cluster.DEFAULT_RUN_DIR,
        help=f"directory for each node's storage, log and pid file (default {cluster.DEFAULT_RUN_DIR})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=cluster.START_TIMEOUT,
        help=f"seconds `up` waits for every node to answer (default {cluster.START_TIMEOUT:g})",
    )
    parser.set_defaults(func=_run)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= port <= 65533:
        raise argparse.ArgumentTypeError(f"expected a port between 1 and 65533, got {port}")
    return port


def _nodes(text: str) -> int:
    if text.strip() not in ("1", "3"):
        raise argparse.ArgumentTypeError(f"expected 1 or 3, got {text!r}")
    return int(text)


def _describe(c: cluster.Cluster) -> str:
    pids = c.pids()
    nodes = ", ".join(f"node {n.id} on {n.address} pid {pids[n.id] or 'stopped'}" for n in c.nodes)
    return f"{c.bootstrap_servers} ({nodes}; logs in {c.dir})"


def _run(args: argparse.Namespace) -> int:
    name = f"Apache Kafka {jars.kafka_version()}"
    if args.action == "up":
        started = cluster.start(args.port, args.run_dir, args.nodes, args.timeout)
        print(f"{name} {'already running' if started.already_running else 'started'} on {_describe(started)}")
        return 0
    if args.action == "down":
        pids = cluster.stop(args.port, args.run_dir)
        if pids:
            print(f"stopped {name} on port {args.port} (pid {', '.join(map(str, pids))})")
        else:
            print(f"no Apache Kafka running on port {args.port}")
        return 0
    running = cluster.status(args.port, args.run_dir)
    if running is None:
        print(f"no Apache Kafka running on port {args.port}")
        return 1
    print(f"{name} running on {_describe(running)}")
    return 0
