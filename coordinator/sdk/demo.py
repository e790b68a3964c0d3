"""`coordinator demo`: the main job. The whole system in one story, on a local broker.

A coordinator process serves the topic; a demo group gets three connectors; a fleet of workers
joins; one more scales out; one bounces and comes back within the delay (and gets its own work
back); one crashes (its work waits for the delay, then moves); the coordinator is killed with
SIGKILL and a new one takes over from the topic while the workers keep running. Every step prints
who runs what; the end checks that every task has exactly one live owner, and stops all it started.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from records import ConnectorTaskCount

from coordinator.core.items import Item, configured_work, describe
from coordinator.errors import CliError
from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.fleet import Fleet
from coordinator.tools import kafka_config
from coordinator.tools.process import NotHealthy, ServeProcess

CONNECTORS = {"orders-source": 3, "payments-sink": 4, "audit-mirror": 2}
BOUNCED, CRASHED = "worker-2", "worker-4"
# The story bounces worker-2 and crashes worker-4, and the worker that scales out is one more: three
# to begin with make worker-4 exist.
MIN_WORKERS = 3
# How long a coordinator may take to load the topic and answer /health. Generous: on 2 cores shared
# with other work, the new coordinator once needed more than ServeProcess's 30 s. The fleet's workers
# retry for as long (CoordinatorClient's retry_for_s below).
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Timing:
    """The story's timeouts: small, so that a minute shows every kind of rebalance."""

    heartbeat_interval_ms: int = 300
    session_timeout_ms: int = 3_000
    scheduled_rebalance_max_delay_ms: int = 6_000
    bounce_pause_s: float = 1.5


@dataclass
class Outcome:
    ownership: dict[str, frozenset[Item]] = field(default_factory=dict)
    bounced: str = ""
    bounced_before: frozenset[Item] = frozenset()
    bounced_after: frozenset[Item] = frozenset()  # what it ran once the group settled after its return
    crashed: str = ""
    problems: list[str] = field(default_factory=list)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", description=__doc__)
    kafka_config.add_arguments(parser)
    parser.add_argument(
        "--workers", type=int, default=5, help=f"workers that join first (at least {MIN_WORKERS}; one more scales out)"
    )
    parser.add_argument("--group", default="demo-connect-cluster")
    parser.add_argument("--fast", action="store_true", help="shorter timeouts (the CI version of the story)")
    parser.add_argument(
        "--connect",
        action="store_true",
        help="the second main job: three unmodified Kafka Connect 4.3.1 workers through a gateway "
        "on our coordinator (coordinator.sdk.demo_connect)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = kafka_config.client_config(args)
    if not args.connect and args.workers < MIN_WORKERS:
        raise CliError(
            f"--workers {args.workers}: the story needs at least {MIN_WORKERS} (it bounces {BOUNCED} and crashes "
            f"{CRASHED}, and one more scales out)",
            exit_code=2,
        )
    if args.connect:
        from coordinator.sdk import demo_connect

        return demo_connect.run(config["bootstrap.servers"], args.topic)
    timing = Timing(150, 1_500, 2_500, 0.5) if args.fast else Timing()
    with tempfile.TemporaryDirectory(prefix="coordinator-demo-") as logs:
        outcome = asyncio.run(
            story(
                config["bootstrap.servers"],
                args.topic,
                args.group,
                args.workers,
                timing,
                Path(logs),
                kafka_args=_kafka_flags(args),
            )
        )
    if outcome.problems:
        for problem in outcome.problems:
            print(f"PROBLEM: {problem}", file=sys.stderr)
        return 1
    print(
        "\nThe story is over: every task has exactly one live owner, the bounced worker got its own work "
        "back, and the new coordinator took over from the topic."
    )
    return 0


def _kafka_flags(args: argparse.Namespace) -> list[str]:
    flags = [f for k, v in args.kafka_config for f in ("--kafka-config", f"{k}={v}")]
    if args.kafka_config_file:
        flags += ["--kafka-config-file", args.kafka_config_file]
    return flags


def _items(counts: dict[str, int]) -> frozenset[Item]:
    return configured_work(tuple(ConnectorTaskCount(n, t) for n, t in counts.items())).items


def _step(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def _serve_flags(timing: Timing, kafka_args: list[str]) -> list[str]:
    """`coordinator serve`'s flags for the story: its timing, the Kafka settings it was given."""
    return [
        "--allow-anonymous",
        # Text, not the JSON that `auto` picks off a terminal: its last line is what the user is told
        # when the coordinator does not start (start_coordinator).
        "--log-format",
        "text",
        "--heartbeat-interval-ms",
        str(timing.heartbeat_interval_ms),
        "--session-timeout-ms",
        str(timing.session_timeout_ms),
        "--scheduled-rebalance-max-delay-ms",
        str(timing.scheduled_rebalance_max_delay_ms),
        *kafka_args,
    ]


def start_coordinator(serve: ServeProcess, which: str) -> ServeProcess:
    """Starts `serve` and waits until it is healthy. One that exits (a topic that does not exist, a
    broker it cannot reach) or never answers is the story's problem, told in one line: the
    coordinator's own last word, not the whole log."""
    try:
        serve.start(wait=False)
        serve.wait_healthy(timeout=START_TIMEOUT_S)
    except NotHealthy as e:
        raise CliError(f"{which} ({serve.url}) {e.summary}") from None
    return serve


async def story(
    bootstrap: str, topic: str, group: str, workers: int, timing: Timing, log_dir: Path, kafka_args: list[str] = ()
) -> Outcome:
    flags = _serve_flags(timing, kafka_args)
    first = ServeProcess(bootstrap, topic, log_dir, *flags)
    second = ServeProcess(bootstrap, topic, log_dir, *flags, port=first.port)
    outcome = Outcome()
    everything = _items(CONNECTORS)
    try:
        _step(f"a coordinator serves {topic} at {first.url}")
        await asyncio.to_thread(start_coordinator, first, "the coordinator")
        async with CoordinatorClient(first.url, retry_for_s=START_TIMEOUT_S) as client:
            fleet = Fleet(client, group)
            await fleet.set_connectors(dict(CONNECTORS))

            _step(f"{workers} workers join")
            await fleet.join(workers)
            await fleet.wait_stable(everything)
            print(fleet.table(), flush=True)

            _step("one more worker scales out: only its share moves")
            await fleet.join(1)
            await fleet.wait_stable(everything)
            print(fleet.table(), flush=True)

            bounced = outcome.bounced = BOUNCED
            outcome.bounced_before = fleet.workers[bounced].owned
            _step(
                f"{bounced} restarts and is back within {timing.scheduled_rebalance_max_delay_ms / 1000:g} s: "
                "its work waits for it"
            )
            await fleet.bounce(bounced, timing.bounce_pause_s)
            await fleet.wait_stable(everything)
            print(fleet.table(), flush=True)
            outcome.bounced_after = fleet.workers[bounced].owned
            if outcome.bounced_after != outcome.bounced_before:
                outcome.problems.append(
                    f"{bounced} came back to {describe(fleet.workers[bounced].owned)}, "
                    f"not its own {describe(outcome.bounced_before)}"
                )

            crashed = outcome.crashed = CRASHED
            _step(
                f"{crashed} crashes: after its session ({timing.session_timeout_ms / 1000:g} s) its work is "
                f"deferred for {timing.scheduled_rebalance_max_delay_ms / 1000:g} s, then spread"
            )
            await fleet.crash(crashed)
            await fleet.wait_stable(everything, timeout=60)
            print(fleet.table(), flush=True)

            _step("the coordinator is killed (SIGKILL); a new one takes over from the topic")
            await asyncio.to_thread(first.kill)
            fleet.say("coordinator killed; the workers keep running what they own and retry")
            await asyncio.to_thread(start_coordinator, second, "the new coordinator")
            fleet.say(f"a new coordinator loaded the topic and serves at {second.url}")
            grown = dict(CONNECTORS, **{"orders-source": 4})
            fleet.say("orders-source grows to 4 tasks: the first change the new coordinator acknowledges")
            await fleet.set_connectors(grown)
            everything = _items(grown)
            await fleet.wait_stable(everything, timeout=60, settle_s=timing.heartbeat_interval_ms / 1000 * 3)
            print(fleet.table(), flush=True)

            outcome.ownership = fleet.ownership()
            owned = [i for items in outcome.ownership.values() for i in items]
            if len(owned) != len(set(owned)) or set(owned) != everything:
                outcome.problems.append("the final assignment does not cover every task exactly once")
            print("\n" + fleet.summary(), flush=True)
            _step("everyone leaves")
            await fleet.stop()
    except (TimeoutError, CliError) as e:
        outcome.problems.append(str(e))
    finally:
        await asyncio.to_thread(first.stop)
        await asyncio.to_thread(second.stop)
    return outcome
