"""Soak (`make soak`): one `coordinator serve` for a long time under steady heartbeats and churn.

What runs: a fresh topic (`coordinator topic create`, a unique name) on the broker it is given, one
`coordinator serve` (a child process, `--allow-anonymous`, static ownership of every partition), or
with `--instances N` (N > 1) N of them sharing the partitions in group ownership (`--ownership
group`: the workers find each group's instance through find-coordinator at the first one), and, in
this process, `--groups` groups of `--workers` SDK workers each (`coordinator.sdk.fleet`:
real `Worker`s heartbeating over HTTP at the group's interval; even groups run the assignor
client-side, odd ones server-side). Each group has `--connectors` connectors of `--tasks` tasks.

Churn, one event every `--churn-every` seconds, in this cycle: a worker leaves (revokes, then
sends its leave), a worker joins, a connector's task count changes (one up or down), a worker is
killed (stops heartbeating without a leave: the coordinator finds out at its session timeout),
a worker joins. The number of live workers stays where it started.

Every `--report-every` seconds (a minute by default) one line: the elapsed minutes; each
coordinator's resident memory (VmRSS in /proc/PID/status) and open file descriptors (/proc/PID/fd,
and how many are sockets: the workers' HTTP connections, Kafka's); the heartbeats' p50 and p99
latency measured in the workers (one HTTP exchange, from sending the request to reading the
answer), over that interval; the requests the coordinator answered
(`coordinator_request_seconds_count` of its /metrics), the rebalances it started
(`coordinator_rebalances_total`), the CPU it used, and the churn events. At the end, the growth from
the first line to the last (RSS, descriptors, p99, rebalances a minute). With several instances the
memory is each one's, the descriptors, requests, rebalances and CPU the instances' sum; the workers'
own process's CPU is shown too (`workers CPU`), since on one machine it competes with theirs.

`make fleet` runs it at scale (issue 33): 100,000 workers in 5,000 groups against three instances,
heartbeats every 30 s, for 30 minutes (`FLEET_ARGS` to change any of it).

Then the churn stops and the groups are described through the HTTP API (GET /v1/groups/{id}) until
they converge (bounded by `--converge-timeout`): every configured connector and task of every
group is owned by exactly one member, none is revoking, every member is at the group's epoch, and
the live workers' own views agree with the coordinator's. If they do not converge in time, the
items owned twice, unowned or owned without being configured are printed and the exit status is 1.

Everything started here (the coordinator, the workers, the topic) is stopped or deleted on the way
out, also on Ctrl-C and SIGTERM. Timings depend on the machine; nothing but the ownership check is
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from coordinator.sdk.client import CoordinatorClient  # noqa: E402
from coordinator.sdk.fleet import Fleet  # noqa: E402
from coordinator.sdk.worker import HEARTBEAT  # noqa: E402
from coordinator.tools.process import ServeProcess  # noqa: E402

CHURN = ("leave", "join", "tasks", "kill", "join")
clock = time.monotonic


# --- what the workers measure -------------------------------------------------------------------------


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


# --- what the coordinator's process shows -------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def open_fds(pid: int) -> tuple[int, int]:
    """(open file descriptors, of which sockets)."""
    fds = sockets = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        fds += 1
        try:
            sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return fds, sockets


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric_sums(url: str, names: tuple[str, ...]) -> dict[str, float]:
    """Each metric of `names` summed over its labels, from the coordinator's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    sums = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            name = series.partition("{")[0]
            if name in sums:
                sums[name] += float(value)
    return sums


REQUESTS, REBALANCES = "coordinator_request_seconds_count", "coordinator_rebalances_total"


@dataclass
class Sample:
    at_s: float
    rss: list[int]  # each instance's
    fds: int  # the instances' sum, as the rest
    sockets: int
    cpu_s: float
    requests: float
    rebalances: float
    workers_cpu_s: float  # this process: the workers' side


def sample(serves: list[ServeProcess], started: float) -> Sample:
    rss, fds, sockets, cpu, requests, rebalances = [], 0, 0, 0.0, 0.0, 0.0
    for serve in serves:
        pid = serve.process.pid
        sums = metric_sums(serve.url, (REQUESTS, REBALANCES))
        rss.append(rss_bytes(pid))
        f, s = open_fds(pid)
        fds, sockets, cpu = fds + f, sockets + s, cpu + cpu_seconds(pid)
        requests, rebalances = requests + sums[REQUESTS], rebalances + sums[REBALANCES]
    own = os.times()
    return Sample(clock() - started, rss, fds, sockets, cpu, requests, rebalances, own.user + own.system)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@dataclass
class Line:
    minute: float
    rss: list[int]
    fds: int
    sockets: int
    p50_ms: float
    p99_ms: float
    heartbeats: int
    lag_p99_ms: float
    gc_max_ms: float
    requests: int
    rebalances: int
    cpu: float  # cores
    workers_cpu: float
    churn: int

    def text(self) -> str:
        rss = "/".join(f"{r / 2**20:.1f}" for r in self.rss)
        return (
            f"minute {self.minute:5.2f}: RSS {rss} MiB  fds {self.fds:4d} "
            f"({self.sockets} sockets)  "
            f"heartbeat p50 {self.p50_ms:6.2f} ms  p99 {self.p99_ms:7.2f} ms  ({self.heartbeats:,} heartbeats; "
            f"workers' loop lag p99 {self.lag_p99_ms:.1f} ms, longest GC pause {self.gc_max_ms:.1f} ms)  "
            f"requests served {self.requests:,}  rebalances {self.rebalances:,}  "
            f"coordinator CPU {self.cpu * 100:3.0f}%  workers CPU {self.workers_cpu * 100:3.0f}%  "
            f"churn events {self.churn}"
        )


# --- the groups -----------------------------------------------------------------------------------------


@dataclass
class Soak:
    args: argparse.Namespace
    client: TimedClient
    fleets: list[Fleet]
    connectors: list[dict[str, int]]
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
                await asyncio.wait_for(stop.wait(), self.args.churn_every)
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
    while True:
        descriptions = await describe_all(soak.client, [f.group_id for f in soak.fleets])
        problems = [
            p for d, f in zip(descriptions, soak.fleets, strict=True) for p in described_problems(d, f, soak.client)
        ]
        if not problems:
            return clock() - started, []
        if clock() - started > timeout:
            return clock() - started, problems
        await asyncio.sleep(0.5)


# --- the run --------------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "topic",
            "create",
            "--bootstrap-servers",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"coordinator topic create failed: {result.stderr.strip()}")


def delete_topic(bootstrap: str, topic: str) -> None:
    """Best effort: the broker may be shared, and keeps what it holds."""
    from confluent_kafka.admin import AdminClient

    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        for future in admin.delete_topics([topic], operation_timeout=10).values():
            future.result(15)
    except Exception as e:  # noqa: BLE001 - a leftover topic is harmless
        print(f"(could not delete topic {topic}: {e})", flush=True)


def line_between(a: Sample, b: Sample, taken: tuple[list[float], list[float], list[float]], churn: int) -> Line:
    latencies, lags, pauses = taken
    span = max(1e-9, b.at_s - a.at_s)
    return Line(
        b.at_s / 60,
        b.rss,
        b.fds,
        b.sockets,
        percentile(latencies, 0.5) * 1e3,
        percentile(latencies, 0.99) * 1e3,
        len(latencies),
        percentile(lags, 0.99) * 1e3,
        max(pauses, default=0.0) * 1e3,
        round(b.requests - a.requests),
        round(b.rebalances - a.rebalances),
        (b.cpu_s - a.cpu_s) / span,
        (b.workers_cpu_s - a.workers_cpu_s) / span,
        churn,
    )


async def run(args: argparse.Namespace, serves: list[ServeProcess]) -> int:
    main = asyncio.current_task()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    async with TimedClient(serves[0].url, retry_for_s=60, connections=args.connections) as client:
        probe = asyncio.create_task(client.probe_loop())
        gc.callbacks.append(client.time_gc)
        fleets = [
            Fleet(
                client,
                f"soak-{g:03d}",
                static=False,
                server_side=g % 2 == 1,
                quiet=True,
                session_timeout_ms=args.session_ms,
            )
            for g in range(args.groups)
        ]
        connectors = [{f"conn-{c}": args.tasks for c in range(args.connectors)} for _ in fleets]
        soak = Soak(args, client, fleets, connectors)
        try:
            return await _soak(args, serves, soak)
        finally:
            probe.cancel()
            await asyncio.shield(soak.halt())


async def _soak(args: argparse.Namespace, serves: list[ServeProcess], soak: Soak) -> int:
    started = clock()
    # Joins spread over --join-over (one heartbeat interval by default), so that the heartbeats stay
    # spread and the joins' writes stay under what the partitions commit: 50,000 workers joining within
    # 30 s (1,700 joins/s, each a few records) outran the commits, and the heartbeats waiting behind them
    # went unanswered for a session.
    pause = (args.join_over or args.heartbeat_ms / 1000) / len(soak.fleets)
    for fleet, counts in zip(soak.fleets, soak.connectors, strict=True):
        await fleet.set_connectors(dict(counts))
        await fleet.join(args.workers)
        if not args.no_gc_freeze:
            gc.freeze()  # as below, group by group: O(1), and a collection during the joins walks only the newest
        await asyncio.sleep(pause)
    took, problems = await converge(soak, args.converge_timeout)
    if problems:
        print(f"the groups did not converge after joining within {args.converge_timeout:g} s:", flush=True)
        for p in problems[:20]:
            print(f"  {p}")
        return 1
    print(
        f"{soak.live()} workers in {len(soak.fleets)} groups joined and converged in {clock() - started:.1f} s; "
        f"soaking for {args.minutes:g} min, a line every {args.report_every:g} s",
        flush=True,
    )
    if not args.no_gc_freeze:
        # The workers joined are long-lived: out of the collector's way, a full collection no longer
        # walks all of them (with 10,000s of workers it stopped this loop for long enough to delay
        # heartbeats). The load generator's own cost, not the coordinator's.
        gc.collect()
        gc.freeze()

    stop = asyncio.Event()
    churn = asyncio.create_task(soak.churn(stop))
    lines: list[Line] = []
    soak_started = clock()
    soak.client.take()
    before = await asyncio.to_thread(sample, serves, soak_started)
    churn_before = 0
    end = soak_started + args.minutes * 60
    try:
        while True:
            next_at = soak_started + (len(lines) + 1) * args.report_every
            if next_at > end + 1e-6:
                break
            await asyncio.sleep(max(0.0, next_at - clock()))
            for serve in serves:
                if serve.process.poll() is not None:
                    print(f"coordinator serve exited {serve.process.returncode}:\n{serve.log()}", flush=True)
                    return 1
            now = await asyncio.to_thread(sample, serves, soak_started)
            churned = sum(soak.churned.values())
            lines.append(line_between(before, now, soak.client.take(), churned - churn_before))
            print(lines[-1].text(), flush=True)
            before, churn_before = now, churned
    finally:
        stop.set()
        await churn

    if lines:
        print(growth(lines, args.report_every), flush=True)
    print(
        f"churn: {sum(soak.churned.values())} events ({', '.join(f'{k} {n}' for k, n in sorted(soak.churned.items()))}); "
        f"{len(soak.churn_errors)} failed{': ' + '; '.join(soak.churn_errors[:5]) if soak.churn_errors else ''}; "
        f"heartbeat exchanges that failed: {soak.client.failures}",
        flush=True,
    )

    took, problems = await converge(soak, args.converge_timeout)
    items = sum(len(c) + sum(c.values()) for c in soak.connectors)
    if problems:
        print(f"ownership: NOT converged {took:.1f} s after the churn stopped ({len(problems)} problems):", flush=True)
        for p in problems[:50]:
            print(f"  {p}")
        return 1
    print(
        f"ownership: every task of every group owned by exactly one member ({len(soak.fleets)} groups, "
        f"{soak.live()} workers, {items} connectors and tasks), converged {took:.1f} s after the churn stopped",
        flush=True,
    )
    return 0


def growth(lines: list[Line], report_every_s: float) -> str:
    """From the first line to the last: memory (the largest instance's), descriptors, p99, rebalances a minute."""
    first, last = lines[0], lines[-1]
    a, b = max(first.rss), max(last.rss)
    per_minute = 60 / report_every_s
    return (
        f"growth from minute {first.minute:.2f} to {last.minute:.2f}: RSS (largest instance) {(b - a) / 2**20:+.1f} MiB "
        f"({(b / a - 1) * 100:+.1f}%), fds {last.fds - first.fds:+d}, heartbeat p99 "
        f"{last.p99_ms - first.p99_ms:+.2f} ms ({first.p99_ms:.2f} -> {last.p99_ms:.2f} ms), rebalances a minute "
        f"{first.rebalances * per_minute:.0f} -> {last.rebalances * per_minute:.0f}"
    )


def start_instances(args: argparse.Namespace, topic: str, log_dir: Path) -> list[ServeProcess]:
    """One static instance, or `--instances` in group ownership, waited for until every partition is served."""
    ownership = ("--ownership", "group") if args.instances > 1 else ()
    serves = [
        ServeProcess(
            args.bootstrap_servers,
            topic,
            log_dir,
            "--allow-anonymous",
            "--log-level",
            "WARNING",
            *ownership,
            "--heartbeat-interval-ms",
            str(args.heartbeat_ms),
            "--session-timeout-ms",
            str(args.session_ms),
            "--scheduled-rebalance-max-delay-ms",
            str(args.delay_ms),
            "--initial-assignment-delay-ms",
            "0",
        )
        for _ in range(args.instances)
    ]
    for serve in serves:
        _started.append(serve)
        serve.start(wait=False)
    for serve in serves:
        serve.wait_healthy(timeout=60)
    deadline = clock() + 120
    while True:
        served = [len(serve.request("GET", "/health")[1].get("Partitions", ())) for serve in serves]
        if sum(served) == args.partitions and all(served):
            break
        if clock() > deadline:
            raise RuntimeError(f"the instances serve {served} of {args.partitions} partitions after 120 s")
        time.sleep(0.2)
    for serve, n in zip(serves, served, strict=True):
        print(f"coordinator serve pid {serve.process.pid} at {serve.url}: {n} partitions", flush=True)
    return serves


_started: list[ServeProcess] = []


def _cleanup() -> None:
    for serve in _started:
        serve.stop()
    _started.clear()


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:19092"))
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the soak runs (fractions allowed)")
    parser.add_argument(
        "--report-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a line of figures every so many seconds (default: every minute)",
    )
    parser.add_argument(
        "--instances",
        type=int,
        default=1,
        help="coordinator serve instances: 1 static, more in group ownership (--ownership group)",
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=100,
        help="the workers' shared HTTP connection pool (aiohttp's limit; 0: no limit)",
    )
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--workers", type=int, default=4, help="workers per group")
    parser.add_argument("--connectors", type=int, default=2, help="connectors per group")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per connector (churn moves it one up or down)")
    parser.add_argument(
        "--churn-every",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="one churn event (leave, join, task count, kill, join in turn) every so often",
    )
    parser.add_argument("--heartbeat-ms", type=int, default=1_000, help="the groups' heartbeat interval")
    parser.add_argument(
        "--session-ms",
        type=int,
        default=5_000,
        help="the groups' session timeout (a killed worker is removed after it)",
    )
    parser.add_argument(
        "--delay-ms",
        type=int,
        default=2_000,
        help="scheduled.rebalance.max.delay.ms: how long a departed worker's work waits",
    )
    parser.add_argument(
        "--join-over",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long the groups take to join, one after another (default: one heartbeat interval)",
    )
    parser.add_argument("--partitions", type=int, default=16, help="partitions of the soak's topic")
    parser.add_argument(
        "--converge-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long the groups may take to converge (default: 30 s + 3 x (session + delay))",
    )
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="leave the joined workers to Python's collector (by default they are frozen out of it, gc.freeze)",
    )
    parser.add_argument("--keep-log", action="store_true", help="keep the coordinator's log (its path is printed)")
    args = parser.parse_args(argv)
    if args.converge_timeout is None:
        args.converge_timeout = 30 + 3 * (args.session_ms + args.delay_ms) / 1000
    if args.minutes <= 0 or args.report_every <= 0 or min(args.groups, args.workers, args.instances) < 1:
        parser.error("--minutes, --report-every, --instances, --groups and --workers must be positive")
    if args.instances > args.partitions:
        parser.error("--instances must not exceed --partitions (an instance without a partition serves nothing)")

    topic = f"soak-{os.getpid()}-{int(time.time())}"
    log_dir = Path(tempfile.mkdtemp(prefix="soak-"))
    print(
        f"soak: broker {args.bootstrap_servers}, topic {topic} ({args.partitions} partitions), "
        f"{args.instances} instance{'s' * (args.instances > 1)}, {args.groups} groups x "
        f"{args.workers} workers, {args.connectors} connectors x {args.tasks} tasks each; heartbeat "
        f"{args.heartbeat_ms} ms, session {args.session_ms} ms, delay {args.delay_ms} ms; a churn event every "
        f"{args.churn_every:g} s; {os.cpu_count()} cores",
        flush=True,
    )
    atexit.register(_cleanup)
    signal.signal(signal.SIGTERM, _interrupt)  # as Ctrl-C (inside the event loop: `run` cancels itself)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    created = False
    code = 1
    try:
        create_topic(args.bootstrap_servers, topic, args.partitions)
        created = True
        code = asyncio.run(run(args, start_instances(args, topic, log_dir)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted: stopping what was started here", flush=True)
        code = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        _cleanup()
        if created:
            delete_topic(args.bootstrap_servers, topic)
        if args.keep_log:
            print(f"coordinator log: {log_dir}", flush=True)
        else:
            shutil.rmtree(log_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
