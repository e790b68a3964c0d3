"""A fleet of simulated workers in one process, driven by a timeline (`coordinator worker`).

Each worker is a real `Worker` of the SDK talking HTTP to the coordinator; the fleet only adds
names, a timeline of events, and a printout of who runs what as it changes:

    at  action      args
    0   join        5               # five workers join (worker-1 .. worker-5)
    4   scale-out   1               # one more
    8   bounce      worker-2 1.5    # leaves and comes back after 1.5 s (same instance id)
    12  crash       worker-4        # stops heartbeating, no leave
    16  connectors  A=3 B=2         # the group's connectors change
    20  scale-in    1               # the newest worker leaves
    24  join        2 classic       # two workers on the classic protocol (seed 004)
    26  upgrade     worker-6        # restarts on the connect protocol, same instance id
    28  downgrade   worker-6        # and back to the classic protocol
    30  stop                        # everyone leaves; the summary is printed

`#` starts a comment; times are seconds from the start. Workers speak `--protocol` (connect by
default) unless `join` names one; `upgrade` and `downgrade` are how a cluster migrates online
between the two (seed 000): the group changes type when its first connect worker joins and when
its last one leaves.

`--events FILE` writes what happened as JSON lines, one event per line with its wall-clock time
(`ts`, seconds since the epoch) and the worker's name: `assigned`, `revoked` and `lost` with the
`connectors` and `tasks` ("connector-N"), and `rebalance` when a worker's rebalance completed
(`latency_ms`, seed 001's measure). Processes on one machine can be put on one timeline that way.
SIGTERM stops the fleet as Ctrl-C does: every worker revokes its work and leaves. A second SIGTERM
or Ctrl-C during that leave (a coordinator gone makes each leave wait for its retries) stops at once:
the workers that have not left yet stop heartbeating, their sessions expire on the coordinator, and
the fleet exits 1 with one line saying so. A step the coordinator refuses (a scenario's `connectors`
line without the Alter ACL, HTTP 403) or that no coordinator answers ends the fleet the same graceful
way, with one line naming the step and exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO, TextIO

import aiohttp
import orjson

from records import ConnectorsAndTasks, ConnectorTaskCount

from coordinator.api import operations
from coordinator.core.assignors import ASSIGNORS
from coordinator.core.items import Item, describe, items_of
from coordinator.core.protocol import ErrorResponse, SetConnectorsRequest
from coordinator.errors import CliError
from coordinator.sdk.admin import connector_count
from coordinator.sdk.client import ApiError, CoordinatorClient, Unavailable
from coordinator.sdk.worker import RebalanceListener, RebalanceMetrics, Worker

ACTIONS = ("join", "scale-out", "scale-in", "bounce", "crash", "connectors", "upgrade", "downgrade", "stop")
# `coordinator worker --help` shows the scenario format: the module's own example (without its
# column heads, which are no line of a scenario) and the rules under it, as written.
_EXAMPLE, _RULES = __doc__.split("\n\n")[2:4]
SCENARIO_HELP = (
    "The scenario (--scenario FILE): one event per line, AT ACTION [ARGS], AT in seconds from the start.\n"
    "Actions: join N [connect|classic], scale-out N, scale-in N, bounce NAME SECONDS, crash NAME,\n"
    "connectors NAME=TASKS..., upgrade NAME, downgrade NAME, stop. For example:\n\n"
    + _EXAMPLE.split("\n", 1)[1]
    + "\n\n"
    + _RULES
)
PROTOCOLS = ("connect", "classic")


@dataclass(frozen=True)
class Event:
    at_s: float
    action: str
    args: tuple[str, ...]


def parse_scenario(text: str, source: str = "scenario") -> list[Event]:
    events = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = shlex.split(line)
        try:
            at = float(fields[0])
        except ValueError:
            raise CliError(f"{source}:{number}: a line starts with the time in seconds", exit_code=2) from None
        if len(fields) < 2 or fields[1] not in ACTIONS:
            raise CliError(f"{source}:{number}: expected an action ({', '.join(ACTIONS)})", exit_code=2)
        events.append(Event(at, fields[1], tuple(fields[2:])))
    return sorted(events, key=lambda e: e.at_s)


class _Printer(RebalanceListener):
    def __init__(self, fleet: Fleet, name: str) -> None:
        self.fleet, self.name = fleet, name

    def on_revoked(self, items: ConnectorsAndTasks) -> None:
        self.fleet.say(f"{self.name:<10} stops  {describe(items_of(items))}")
        self.fleet.record(self.name, "revoked", items)

    def on_assigned(self, items: ConnectorsAndTasks) -> None:
        self.fleet.say(f"{self.name:<10} starts {describe(items_of(items))}")
        self.fleet.record(self.name, "assigned", items)

    def on_lost(self, items: ConnectorsAndTasks) -> None:
        self.fleet.say(f"{self.name:<10} LOST   {describe(items_of(items))} (fenced; rejoining)")
        self.fleet.record(self.name, "lost", items)


class _RecordedMetrics(RebalanceMetrics):
    """The SDK's rebalance metrics, also writing each completed rebalance to the fleet's events."""

    def __init__(self, fleet: Fleet, name: str) -> None:
        super().__init__()
        self.fleet, self.name = fleet, name

    def quiet(self) -> None:
        started = self._started
        super().quiet()
        if started is not None:
            self.fleet.record(self.name, "rebalance", latency_ms=round((self.clock() - started) * 1000, 1))


class Fleet:
    """Named workers of one group, and the events that happen to them."""

    def __init__(
        self,
        client: CoordinatorClient,
        group_id: str,
        *,
        static: bool = True,
        server_side: bool = False,
        assignor_name: str = "incremental_cooperative",
        out: TextIO | None = None,
        quiet: bool = False,
        clock: Callable[[], float] = time.monotonic,
        events: BinaryIO | None = None,
        protocol: str = "connect",
        session_timeout_ms: int | None = None,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.static = static
        self.server_side = server_side
        self.assignor_name = assignor_name
        self.out = out
        self.quiet = quiet
        self.clock = clock
        self.events = events
        self.protocol = protocol
        # The workers' own session timeout (Worker's default if None): a group with a longer one than
        # the default needs it too, or its workers stop their work between two heartbeats.
        self.session_timeout_ms = session_timeout_ms
        self.protocols: dict[str, str] = {}  # each worker's, by name
        self.started = clock()
        self.workers: dict[str, Worker] = {}  # the live ones
        self.crashed: dict[str, Worker] = {}
        self._serial = 0

    def say(self, text: str) -> None:
        if not self.quiet:
            print(f"{self.clock() - self.started:7.2f}s  {text}", file=self.out or sys.stdout, flush=True)

    def record(self, name: str, event: str, items: ConnectorsAndTasks | None = None, **fields: object) -> None:
        """One line of `--events`, flushed at once (a process killed -9 keeps what it wrote)."""
        if self.events is None:
            return
        line: dict[str, object] = {"ts": round(time.time(), 3), "worker": name, "event": event}
        if items is not None:
            line["connectors"] = list(items.connectors)
            line["tasks"] = [f"{t.connector}-{t.task}" for t in items.tasks]
        self.events.write(orjson.dumps({**line, **fields}, option=orjson.OPT_APPEND_NEWLINE))
        self.events.flush()

    def _worker(self, name: str) -> Worker:
        protocol = self.protocols.setdefault(name, self.protocol)
        worker = Worker(
            self.client,
            self.group_id,
            protocol=protocol,
            instance_id=name if self.static else None,
            member_id=f"{name}-{os.getpid()}-{self._next()}",
            assignors=(self.assignor_name,),
            server_side=self.server_side and protocol == "connect",
            listener=_Printer(self, name),
            **({} if self.session_timeout_ms is None else {"session_timeout_ms": self.session_timeout_ms}),
        )
        worker.metrics = _RecordedMetrics(self, name)
        return worker

    def _next(self) -> int:
        self._serial += 1
        return self._serial

    async def join(self, count: int = 0, names: Sequence[str] = (), protocol: str | None = None) -> list[str]:
        """`count` new workers named worker-N, or workers of the given `names` (instance ids), on
        `protocol` (the fleet's by default)."""
        names = list(names)
        for _ in range(count):
            name = f"worker-{len(self.workers) + len(self.crashed) + len(names) + 1}"
            while name in self.workers or name in self.crashed or name in names:
                name = f"worker-{self._next()}"
            names.append(name)
        for name in names:
            if name in self.workers:
                raise CliError(f"a worker named {name} already runs", exit_code=2)
            self.protocols[name] = protocol or self.protocols.get(name, self.protocol)
            self.workers[name] = worker = self._worker(name)
            await worker.start()
        self.say(f"joined: {', '.join(names)}")
        return names

    async def leave(self, name: str) -> None:
        worker = self.workers[name]
        await worker.stop(leave=True)
        del self.workers[name]  # only now: a leave cut short (a second signal) still names it as not left
        self.say(f"{name:<10} left the group")

    async def scale_in(self, count: int) -> None:
        for name in list(self.workers)[-count:]:
            await self.leave(name)

    async def bounce(self, name: str, pause_s: float) -> None:
        """A restart: leave, then a new process (a new member id, the same instance id) joins."""
        await self.workers[name].stop(leave=True)
        self.say(f"{name:<10} restarting (back in {pause_s:g} s)")
        await asyncio.sleep(pause_s)
        self.workers[name] = worker = self._worker(name)
        await worker.start()
        self.say(f"{name:<10} is back")

    async def switch(self, name: str, protocol: str) -> None:
        """Restart `name` on `protocol` with the same instance id: one step of a rolling upgrade
        (connect) or downgrade (classic)."""
        if name not in self.workers:
            raise CliError(f"no worker named {name} runs", exit_code=2)
        await self.workers[name].stop(leave=True)
        self.protocols[name] = protocol
        self.workers[name] = worker = self._worker(name)
        await worker.start()
        self.say(f"{name:<10} restarted on the {protocol} protocol")

    async def crash(self, name: str) -> None:
        worker = self.workers.pop(name)
        await worker.stop(leave=False)
        self.crashed[name] = worker
        self.say(f"{name:<10} CRASHED (no leave; its session will expire)")

    async def set_connectors(self, counts: dict[str, int]) -> None:
        body = SetConnectorsRequest(tuple(ConnectorTaskCount(n, t) for n, t in counts.items()))
        try:
            answer = await self.client.call(
                self.group_id, *operations.route("setConnectors", group_id=self.group_id), ErrorResponse, body
            )
        except (ApiError, Unavailable) as e:  # a 403 without the Alter ACL, no coordinator: the caller's one line
            raise CliError(f"setting the connectors of group {self.group_id}: {e}") from None
        if answer.error_code:
            raise CliError(f"setting the connectors of group {self.group_id}: {answer.error_message}")
        self.say("connectors: " + ", ".join(f"{n} ({t} tasks)" for n, t in counts.items()))

    async def stop(self) -> None:
        for name in list(self.workers):
            await self.leave(name)

    def ownership(self) -> dict[str, frozenset[Item]]:
        return {name: w.owned for name, w in self.workers.items()}

    def stable(self) -> bool:
        return all(w.stable for w in self.workers.values())

    async def wait_stable(
        self, expected: frozenset[Item] | None = None, timeout: float = 60.0, settle_s: float = 0.0
    ) -> None:
        """Until every live worker is quiet (and, given `expected`, they run exactly it, once each)."""
        deadline = self.clock() + timeout
        while True:
            owned = [i for w in self.workers.values() for i in w.owned]
            if self.stable() and (expected is None or (len(owned) == len(set(owned)) and set(owned) == expected)):
                if settle_s <= 0:
                    return
                await asyncio.sleep(settle_s)
                settle_s = 0
                continue
            failed = [w for w in self.workers.values() if w.failure is not None]
            if failed:
                raise CliError(f"{failed[0].member_id} stopped: {failed[0].failure}")
            if self.clock() > deadline:
                raise TimeoutError(f"the fleet did not settle within {timeout:g}s")
            await asyncio.sleep(0.05)

    def table(self) -> str:
        rows = []
        for name, w in sorted(self.workers.items(), key=lambda kv: _natural(kv[0])):
            rows.append(
                f"  {name:<10} {self.protocols.get(name, self.protocol):<8} epoch {w.member_epoch:<4} "
                f"{describe(w.owned) or '-'}"
            )
        return "\n".join(rows)

    def summary(self) -> str:
        lines = ["summary:", self.table()]
        for name, w in sorted(self.workers.items(), key=lambda kv: _natural(kv[0])):
            m = w.metrics.snapshot()
            lines.append(
                f"  {name:<10} rebalances {m['rebalance-total']}, avg {m['rebalance-latency-avg']:.0f} ms, "
                f"max {m['rebalance-latency-max']:.0f} ms, failed {m['failed-rebalance-total']}"
            )
        return "\n".join(lines)

    async def play(self, events: list[Event]) -> None:
        for event in events:
            delay = event.at_s - (self.clock() - self.started)
            if delay > 0:
                await asyncio.sleep(delay)
            await self.apply(event)
            if event.action == "stop":
                return

    async def apply(self, event: Event) -> None:
        a = event.args
        if event.action in ("join", "scale-out"):
            protocol = a[1] if len(a) > 1 else None
            if protocol is not None and protocol not in PROTOCOLS:
                raise CliError(
                    f"{event.action}: protocol must be one of {', '.join(PROTOCOLS)}, not {protocol}", exit_code=2
                )
            await self.join(int(a[0]) if a else 1, protocol=protocol)
        elif event.action in ("upgrade", "downgrade"):
            if not a:
                raise CliError(f"{event.action} needs a worker's name", exit_code=2)
            await self.switch(a[0], "connect" if event.action == "upgrade" else "classic")
        elif event.action == "scale-in":
            await self.scale_in(int(a[0]) if a else 1)
        elif event.action == "bounce":
            # Checked here: a mistake in a task of its own would only be a logged traceback.
            self._named(event, a)
            asyncio.create_task(self.bounce(a[0], _number(event, a[1]) if len(a) > 1 else 1.0))
        elif event.action == "crash":
            await self.crash(self._named(event, a))
        elif event.action == "connectors":
            await self.set_connectors(_connector_counts(a))
        elif event.action == "stop":
            self.say("stopping")

    def _named(self, event: Event, args: tuple[str, ...]) -> str:
        if not args or args[0] not in self.workers:
            raise CliError(
                f"{event.action} at {event.at_s:g} s: "
                + (f"no worker named {args[0]} runs" if args else "needs a worker's name"),
                exit_code=2,
            )
        return args[0]


def _number(event: Event, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise CliError(f"{event.action} at {event.at_s:g} s: expected seconds, got {text!r}", exit_code=2) from None


def _natural(name: str) -> tuple:
    prefix, _, number = name.rpartition("-")
    return (prefix, int(number)) if number.isdigit() else (name, 0)


def _connector_counts(args: tuple[str, ...]) -> dict[str, int]:
    try:
        return dict(connector_count(arg) for arg in args)
    except argparse.ArgumentTypeError as e:
        raise CliError(str(e), exit_code=2) from None


# --- `coordinator worker` --------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "worker",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run N workers of a group in one process; a scenario file or flags drive events on a timeline.",
        epilog=SCENARIO_HELP,
    )
    parser.add_argument("--group", required=True)
    parser.add_argument(
        "--count",
        type=int,
        default=None,
        help="workers that join at the start, named worker-N, besides any of --names and the "
        "scenario's join lines (default 3; 0 with --names or --scenario: then they decide)",
    )
    parser.add_argument(
        "--names",
        nargs="+",
        default=(),
        metavar="NAME",
        help="workers of these names (their instance ids) join at the start; a process "
        "restarted with the same name is the same static member",
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("COORDINATOR_URL", "http://127.0.0.1:8400"),
        help="any coordinator instance (env COORDINATOR_URL)",
    )
    parser.add_argument("--token", default=os.environ.get("COORDINATOR_TOKEN"), help="(env COORDINATOR_TOKEN)")
    parser.add_argument("--dynamic", action="store_true", help="no static instance ids")
    parser.add_argument("--server-side", action="store_true", help="the coordinator runs the assignor")
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="connect",
        help="the workers' group protocol: connect (seed 000) or classic (seed 004, Kafka "
        "Connect's); a scenario's join, upgrade and downgrade choose per worker",
    )
    parser.add_argument("--assignor", choices=sorted(ASSIGNORS), default="incremental_cooperative")
    parser.add_argument(
        "--connectors", nargs="*", type=connector_count, metavar="NAME=TASKS", help="set the group's connectors first"
    )
    parser.add_argument("--scenario", metavar="FILE", help="a timeline of events (its format: below)")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: at the scenario's end, or on Ctrl-C)",
    )
    parser.add_argument(
        "--events",
        metavar="FILE",
        help="append every assignment, revocation, loss and completed rebalance to FILE as JSON "
        "lines with wall-clock times ('-': standard output)",
    )
    parser.add_argument("--quiet", action="store_true", help="print no running commentary")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve the workers' rebalance metrics (seed 001, and Kafka Connect's names) for "
        "Prometheus on http://0.0.0.0:PORT/metrics",
    )
    parser.set_defaults(func=run)


def serve_metrics(fleet: Fleet, port: int) -> None:
    """The live workers' rebalance metrics at http://0.0.0.0:`port`/metrics (a thread of prometheus-client)."""
    from prometheus_client import CollectorRegistry, start_http_server

    from coordinator.sdk.metrics import WorkerMetrics

    registry = CollectorRegistry()
    registry.register(WorkerMetrics(lambda: list(fleet.workers.values())))
    try:
        start_http_server(port, registry=registry)
    except OSError as e:
        raise CliError(f"--metrics-port {port}: {e.strerror}", exit_code=2) from None


def run(args: argparse.Namespace) -> int:
    # With a scenario, its own `join` lines say who joins: 3 more by default would make docs/sdk.md's
    # `0 join 5` start 8 workers.
    count = args.count if args.count is not None else 0 if args.names or args.scenario else 3
    if count < 0:
        raise CliError("--count must not be negative", exit_code=2)
    events = [Event(0.0, "join", (str(count),))] if count else []
    if args.scenario:
        try:
            text = open(args.scenario, encoding="utf-8").read()
        except OSError as e:
            raise CliError(f"cannot read {args.scenario}: {e.strerror}", exit_code=2) from None
        events += parse_scenario(text, args.scenario)
    if args.duration is not None:
        events.append(Event(args.duration, "stop", ()))
    return asyncio.run(_run(args, sorted(events, key=lambda e: e.at_s)))


def _open_events(path: str | None) -> BinaryIO | None:
    if path is None:
        return None
    if path == "-":
        return sys.stdout.buffer
    try:
        return open(path, "ab")
    except OSError as e:
        raise CliError(f"--events {path}: {e.strerror}", exit_code=2) from None


async def _run(args: argparse.Namespace, events: list[Event]) -> int:
    # SIGTERM (a service manager's or Kubernetes' stop) and Ctrl-C end the fleet gracefully: work
    # revoked, leave sent. A second one while the workers leave abandons the leave (with the
    # coordinator gone, each leave retries for the client's retry_for_s) and exits at once.
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    phase = {"now": "running", "leaving": None}

    def on_signal() -> None:
        if phase["now"] == "running":
            phase["now"] = "stopping"
            main.cancel()
        elif phase["now"] == "stopping":
            phase["now"] = "abandoned"
            leaving = phase["leaving"]
            if leaving is not None and not leaving.done():
                leaving.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    failed: CliError | None = None
    async with CoordinatorClient(args.url, token=args.token, client_id="coordinator-worker") as client:
        fleet = Fleet(
            client,
            args.group,
            static=not args.dynamic,
            server_side=args.server_side,
            assignor_name=args.assignor,
            quiet=args.quiet,
            events=_open_events(args.events),
            protocol=args.protocol,
        )
        if args.metrics_port is not None:
            serve_metrics(fleet, args.metrics_port)
        try:
            if args.connectors:
                await fleet.set_connectors(dict(args.connectors))
            if args.names:
                await fleet.join(names=args.names)
            await fleet.play(events)
            if not any(e.action == "stop" for e in events):
                await asyncio.Event().wait()  # until Ctrl-C or SIGTERM
        except asyncio.CancelledError:
            pass
        except CliError as e:  # a refused or failed step: the workers still leave, then the one line
            failed = e
        except (ApiError, Unavailable) as e:
            failed = CliError(str(e))
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            failed = CliError(f"cannot reach the coordinator at {args.url}: {type(e).__name__}: {e}")
        if phase["now"] == "running":
            phase["now"] = "stopping"  # a signal from here on abandons the leave
        if not args.quiet:
            print(fleet.summary(), flush=True)
        leaving = phase["leaving"] = asyncio.ensure_future(fleet.stop())
        try:
            if phase["now"] == "abandoned":
                leaving.cancel()
            await leaving
        except asyncio.CancelledError:
            for worker in list(fleet.workers.values()):
                await worker.stop(leave=False)  # no network: heartbeats stop, sessions expire
            left = ", ".join(fleet.workers) or "none"
            raise CliError(
                f"stopped again while the workers were leaving: {left} did not leave; their sessions "
                "will expire on the coordinator" + (f" (before that: {failed})" if failed else "")
            ) from None
    if failed is not None:
        raise failed
    return 0
