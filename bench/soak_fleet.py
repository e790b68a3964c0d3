"""The soak's workers (bench/soak.py): the groups of SDK workers one process runs, their churn, what
they measure, and the ownership check at the end.

With `--worker-processes K` the soak runs its groups in K processes of this script (`--shard I/K`, a
mode the soak starts by itself): one Python process's event loop, about half a millisecond of CPU per
heartbeat, fell behind at 50,000 workers. Shard I runs the groups whose index is I modulo K and a K-th
of the churn (an event every K x --churn-every seconds), and answers the soak over its standard input
and output, one command and one JSON line at a time (`Shard`'s methods); the soak merges the shards'
heartbeat latencies into one p50 and p99 and sums their CPU. With K = 1 the same `Shard` runs in the
soak's own process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.fleet import Fleet
from coordinator.sdk.worker import HEARTBEAT

CHURN = ("leave", "join", "tasks", "kill", "join")
clock = time.monotonic

# --- what the workers measure -------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    """A process's resident memory (VmRSS): the instances' in the soak's lines, and each worker process's own."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class TimedClient(CoordinatorClient):
    """The workers' client, timing each heartbeat exchange (not the retries' back-off)."""

    def __init__(self, *args: Any, connections: int = 100, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections = connections  # aiohttp's pool: a request beyond it waits for a free connection
        self.latencies: list[float] = []
        self.lags: list[float] = []  # the event loop's lateness, from `probe_loop`
        self.gc_pauses: list[float] = []  # the collector's pauses of this process, from `time_gc`
        self._gc_started = 0.0
        self.failures = 0

    def _http(self) -> Any:
        import aiohttp

        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.connections)
            self._session = aiohttp.ClientSession(timeout=self.timeout, connector=connector)
        return self._session

    async def probe_loop(self, every_s: float = 0.1) -> None:
        """How late this process's event loop wakes a sleeper: the part of the heartbeats' latency that
        is the workers' own side (their loop busy, or the process waiting for a core)."""
        while True:
            started = time.perf_counter()
            await asyncio.sleep(every_s)
            self.lags.append(time.perf_counter() - started - every_s)

    async def request(
        self,
        method: str,
        path: str,
        answer: type,
        body: Any = None,
        url: str | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        if (method, path) != HEARTBEAT:
            return await super().request(method, path, answer, body, url, timeout_s)
        started = time.perf_counter()
        try:
            got = await super().request(method, path, answer, body, url, timeout_s)
        except Exception:  # not CancelledError: a worker stopped by the churn mid-heartbeat failed nothing
            self.failures += 1
            raise
        self.latencies.append(time.perf_counter() - started)
        return got

    def time_gc(self, phase: str, info: dict) -> None:
        """gc.callbacks: a full collection walks every object of 10,000s of workers, stopping the loop."""
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_pauses.append(time.perf_counter() - self._gc_started)

    def take(self) -> tuple[list[float], list[float], list[float]]:
        """(heartbeat latencies, loop lags, collector pauses) since the last take."""
        taken, self.latencies, lags, self.lags = self.latencies, [], self.lags, []
        pauses, self.gc_pauses = self.gc_pauses, []
        return taken, lags, pauses


# --- the groups -----------------------------------------------------------------------------------------


@dataclass
class Soak:
    args: argparse.Namespace
    client: TimedClient
    fleets: list[Fleet]
    connectors: list[dict[str, int]]
    churn_every: float  # this process's share of the churn: --churn-every x the processes
    rng: random.Random = field(default_factory=lambda: random.Random(848))
    churned: Counter = field(default_factory=Counter)
    churn_errors: list[str] = field(default_factory=list)

    def live(self) -> int:
        return sum(len(f.workers) for f in self.fleets)

    def _by_size(self, largest: bool) -> Fleet:
        sizes = [len(f.workers) for f in self.fleets]
        extreme = max(sizes) if largest else min(sizes)
        return self.rng.choice([f for f, n in zip(self.fleets, sizes, strict=True) if n == extreme])

    async def churn_once(self, kind: str) -> None:
        if kind == "join":
            await self._by_size(largest=False).join(1)
        elif kind in ("leave", "kill"):
            fleet = self._by_size(largest=True)
            if not fleet.workers:
                return
            name = self.rng.choice(sorted(fleet.workers))
            await (fleet.leave(name) if kind == "leave" else fleet.crash(name))
        elif kind == "tasks":
            g = self.rng.randrange(len(self.fleets))
            counts = self.connectors[g]
            name = self.rng.choice(sorted(counts))
            base = self.args.tasks
            counts[name] = (
                base + 1
                if counts[name] <= base - 1
                else base - 1
                if counts[name] >= base + 1
                else self.rng.choice((base - 1, base + 1))
            )
            counts[name] = max(1, counts[name])
            await self.fleets[g].set_connectors(dict(counts))
        self.churned[kind] += 1

    async def churn(self, stop: asyncio.Event) -> None:
        i = 0
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.churn_every)
                return
            except TimeoutError:
                pass
            kind = CHURN[i % len(CHURN)]
            i += 1
            try:
                await asyncio.wait_for(self.churn_once(kind), 30)
            except Exception as e:  # noqa: BLE001 - counted and printed; the soak goes on
                self.churn_errors.append(f"{kind}: {type(e).__name__}: {e}")

    async def halt(self) -> None:
        """Stop every worker without a leave (the coordinator goes away next)."""
        workers = [w for f in self.fleets for w in list(f.workers.values()) + list(f.crashed.values())]
        await asyncio.gather(*(w.stop(leave=False) for w in workers), return_exceptions=True)
        for f in self.fleets:
            f.workers.clear()


# --- ownership through the HTTP API --------------------------------------------------------------------


def _items(assignment: dict) -> list[str]:
    return [f"connector {c}" for c in assignment["Connectors"]] + [
        f"task {t['Connector']}-{t['Task']}" for t in assignment["Tasks"]
    ]


def group_problems(description: dict, fleet: Fleet) -> list[str]:
    """Why `description` (GET /v1/groups/{id}) is not converged with every item owned once; [] if it is."""
    g = description["GroupId"]
    configured = [f"connector {c['Name']}" for c in description["Connectors"]] + [
        f"task {c['Name']}-{t}" for c in description["Connectors"] for t in range(c["Tasks"])
    ]
    owners: dict[str, list[str]] = {item: [] for item in configured}
    problems = []
    for m in description["Members"]:
        for item in _items(m["Assignment"]):
            owners.setdefault(item, []).append(m["MemberId"])
        if _items(m["PendingRevocation"]):
            problems.append(f"{g}: {m['MemberId']} still revoking {', '.join(_items(m['PendingRevocation']))}")
        if m["MemberEpoch"] != description["GroupEpoch"]:
            problems.append(
                f"{g}: {m['MemberId']} at epoch {m['MemberEpoch']}, the group at {description['GroupEpoch']}"
            )
    configured_set = set(configured)
    for item, who in owners.items():
        if len(who) > 1:
            problems.append(f"{g}: {item} owned {len(who)} times ({', '.join(who)})")
        elif not who:
            problems.append(f"{g}: {item} unowned")
        elif item not in configured_set:
            problems.append(f"{g}: {item} owned by {who[0]} but not configured")
    members = {m["MemberId"]: set(_items(m["Assignment"])) for m in description["Members"]}
    workers = {w.member_id: {_item_text(i) for i in w.owned} for w in fleet.workers.values()}
    if set(members) != set(workers):
        problems.append(f"{g}: members {sorted(set(members) ^ set(workers))} are not both in the group and live")
    for member_id, owned in workers.items():
        if member_id in members and owned != members[member_id]:
            problems.append(f"{g}: {member_id} runs {sorted(owned)}, the coordinator says {sorted(members[member_id])}")
    return problems


def _item_text(item: Any) -> str:
    return f"connector {item}" if isinstance(item, str) else f"task {item.connector}-{item.task}"


async def describe_all(client: TimedClient, groups: list[str]) -> list[dict]:
    """Each group's description from its own coordinator (found as the workers find it)."""
    import aiohttp

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        limit = asyncio.Semaphore(16)

        async def one(g: str) -> dict:
            async with limit:
                url = await client.coordinator_of(g)
                async with session.get(f"{url}/v1/groups/{g}") as response:
                    return orjson.loads(await response.read())

        return await asyncio.gather(*(one(g) for g in groups))


def described_problems(description: dict, fleet: Fleet, client: TimedClient) -> list[str]:
    if "GroupId" not in description:  # NOT_COORDINATOR while ownership moves: asked again next round
        client._coordinators.pop(fleet.group_id, None)
        return [f"{fleet.group_id}: not described: {description.get('ErrorMessage') or description}"]
    return group_problems(description, fleet)


async def converge(soak: Soak, timeout: float) -> tuple[float, list[str]]:
    """(seconds until every group converged, []) or (timeout, the problems left)."""
    started = clock()
    pending = soak.fleets
    while True:
        # Only the groups not yet converged are described again (describing thousands of groups every
        # half second competed with their heartbeats); once none is left, every group once more.
        descriptions = await describe_all(soak.client, [f.group_id for f in pending])
        problems: dict[Fleet, list[str]] = {}
        for d, f in zip(descriptions, pending, strict=True):
            if found := described_problems(d, f, soak.client):
                problems[f] = found
        if not problems and len(pending) == len(soak.fleets):
            return clock() - started, []
        if clock() - started > timeout:
            return clock() - started, [p for found in problems.values() for p in found]
        pending = list(problems) or soak.fleets
        if problems:
            await asyncio.sleep(0.5)


# --- a shard: the groups one process runs ---------------------------------------------------------------


class ShardDied(Exception):
    """A worker process exited or stopped answering: the soak's figures would miss its groups."""


class Shard:
    """The groups of index `index` modulo `of`, run in this process; each method is one of the soak's
    commands and answers with plain data (a worker process sends it as a JSON line)."""

    def __init__(self, args: argparse.Namespace, url: str, index: int = 0, of: int = 1) -> None:
        self.args = args
        self.client = TimedClient(url, retry_for_s=60, connections=args.connections)
        fleets = [
            Fleet(
                self.client,
                f"soak-{g:03d}",
                static=False,
                server_side=g % 2 == 1,
                quiet=True,
                session_timeout_ms=args.session_ms,
            )
            for g in range(index, args.groups, of)
        ]
        connectors = [{f"conn-{c}": args.tasks for c in range(args.connectors)} for _ in fleets]
        self.soak = Soak(args, self.client, fleets, connectors, args.churn_every * of, random.Random(848 + index))
        self.probe: asyncio.Task | None = None
        self.churn: asyncio.Task | None = None
        self.stop_churn = asyncio.Event()

    async def joined(self) -> dict:
        """Join the groups one after another over --join-over and wait until they converge."""
        self.probe = asyncio.create_task(self.client.probe_loop())
        gc.callbacks.append(self.client.time_gc)
        args, soak = self.args, self.soak
        # Joins spread over --join-over (one heartbeat interval by default), so that the heartbeats stay
        # spread and the joins' writes stay under what the partitions commit: 50,000 workers joining within
        # 30 s (1,700 joins/s, each a few records) outran the commits, and the heartbeats waiting behind them
        # went unanswered for a session. Every process spreads its own groups over the same span.
        pause = (args.join_over or args.heartbeat_ms / 1000) / max(1, len(soak.fleets))
        for fleet, counts in zip(soak.fleets, soak.connectors, strict=True):
            await fleet.set_connectors(dict(counts))
            await fleet.join(args.workers)
            if not args.no_gc_freeze:
                gc.freeze()  # as in `start`, group by group: O(1), and a collection during the joins walks only the newest
            await asyncio.sleep(pause)
        _, problems = await converge(soak, args.converge_timeout)
        return {"groups": len(soak.fleets), "live": soak.live(), "problems": problems}

    async def start(self) -> dict:
        """The soak begins: the churn starts and the measures are taken from now on."""
        if not self.args.no_gc_freeze:
            # The workers joined are long-lived: out of the collector's way, a full collection no longer
            # walks all of them (with 10,000s of workers it stopped this loop for long enough to delay
            # heartbeats). The load generator's own cost, not the coordinator's.
            gc.collect()
            gc.freeze()
            # And the oldest generation is no longer collected by itself: what the churn adds to it
            # (workers that join later, aiohttp's connections) grows by the minute, and collecting it
            # stopped the loop for 3-5 s at 50,000 workers. The young generations, where a heartbeat's
            # garbage dies, are still collected; a cycle that outlives them stays until the soak ends.
            young, middle, _ = gc.get_threshold()
            gc.set_threshold(young, middle, 1_000_000)
        self.churn = asyncio.create_task(self.soak.churn(self.stop_churn))
        self.client.take()
        return await self.take()

    async def take(self) -> dict:
        """The heartbeats' latencies, the loop's lags and the collector's pauses since the last take,
        this process's CPU seconds so far, its resident memory now and its churn events so far."""
        latencies, lags, pauses = self.client.take()
        own = os.times()
        return {
            "latencies": latencies,
            "lags": lags,
            "pauses": pauses,
            "cpu_s": own.user + own.system,
            "rss": rss_bytes(os.getpid()),
            "churned": sum(self.soak.churned.values()),
        }

    async def finish(self) -> dict:
        """Stop the churn and wait until every group converges (bounded by --converge-timeout)."""
        self.stop_churn.set()
        if self.churn is not None:
            await self.churn
        soak = self.soak
        took, problems = await converge(soak, self.args.converge_timeout)
        return {
            "churned": dict(soak.churned),
            "errors": soak.churn_errors,
            "failures": self.client.failures,
            "took": took,
            "problems": problems,
            "groups": len(soak.fleets),
            "live": soak.live(),
            "items": sum(len(c) + sum(c.values()) for c in soak.connectors),
        }

    async def close(self) -> None:
        self.stop_churn.set()
        for task in (self.probe, self.churn):
            if task is not None:
                task.cancel()
        await self.soak.halt()
        await self.client.close()


COMMANDS = ("joined", "start", "take", "finish")


async def serve_shard(args: argparse.Namespace, url: str, index: int, of: int) -> int:
    """A worker process: one command a line on standard input, one JSON line of answer on the standard
    output it was given (anything else printed goes to standard error); it stops at the end of its input
    (the soak closed the pipe, or died) or on SIGTERM or Ctrl-C, halting its workers."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not break a JSON line
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, main.cancel)
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    shard = Shard(args, url, index, of)
    try:
        while command := (await commands.readline()).decode().strip():
            if command not in COMMANDS:
                raise SystemExit(f"unknown shard command {command!r}")
            answers.write(orjson.dumps(await getattr(shard, command)(), option=orjson.OPT_APPEND_NEWLINE))
            answers.flush()
    except asyncio.CancelledError:
        return 130
    finally:
        try:
            await asyncio.shield(shard.close())
        except asyncio.CancelledError:
            pass  # the soak's SIGTERM after its wait: what is not halted yet stops with the process
    return 0


class WorkerProcess:
    """The soak's side of a worker process (`serve_shard`): the same methods as `Shard`."""

    def __init__(self, process: asyncio.subprocess.Process, index: int) -> None:
        self.process = process
        self.index = index

    @classmethod
    async def spawn(cls, script: Path, argv: list[str], url: str, index: int, of: int) -> WorkerProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            *argv,
            "--shard",
            f"{index}/{of}",
            "--coordinator-url",
            url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**28,  # a minute of heartbeats' latencies is one line of a few MB
        )
        return cls(process, index)

    async def _ask(self, command: str) -> dict:
        try:
            self.process.stdin.write(command.encode() + b"\n")
            await self.process.stdin.drain()
            line = await self.process.stdout.readline()
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        if not line:
            code = await self.process.wait()
            raise ShardDied(f"worker process {self.index} (pid {self.process.pid}) exited {code} during {command!r}")
        return orjson.loads(line)

    async def joined(self) -> dict:
        return await self._ask("joined")

    async def start(self) -> dict:
        return await self._ask("start")

    async def take(self) -> dict:
        return await self._ask("take")

    async def finish(self) -> dict:
        return await self._ask("finish")

    async def close(self) -> None:
        """End of input: the process halts its workers and exits; SIGTERM, then SIGKILL, if it does not."""
        if self.process.returncode is not None:
            return
        try:
            self.process.stdin.close()
        except OSError:
            pass
        for stop in (None, self.process.terminate, self.process.kill):
            if stop is not None:
                try:
                    stop()
                except ProcessLookupError:
                    return
            try:  # halting 10,000s of workers on a busy machine took more than 15 s
                await asyncio.wait_for(self.process.wait(), 60 if stop is None else 15)
                return
            except TimeoutError:
                continue
