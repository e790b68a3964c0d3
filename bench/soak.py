"""Soak (`make soak`): one `coordinator serve` for a long time under steady heartbeats and churn.

What runs: a fresh topic (`coordinator topic create`, a unique name) on the broker it is given, one
`coordinator serve` (a child process, `--allow-anonymous`, static ownership of every partition), or
with `--instances N` (N > 1) N of them sharing the partitions in group ownership (`--ownership
group`: the workers find each group's instance through find-coordinator at the first one), and, in
this process or in `--worker-processes K` processes of this script (bench/soak_fleet.py: each a K-th
of the groups and of the churn), `--groups` groups of `--workers` SDK workers each
(`coordinator.sdk.fleet`: real `Worker`s heartbeating over HTTP at the group's interval; even groups
run the assignor client-side, odd ones server-side). Each group has `--connectors` connectors of
`--tasks` tasks.

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
own processes' CPU is shown too (`workers CPU`, their sum, and each process's RSS), since on one machine
it competes with theirs; with several worker processes, p50 and p99 are over all of their heartbeats.

`make fleet` runs it at scale (issue 33): 100,000 workers in 5,000 groups against three instances,
heartbeats every 60 s (what fits 2 cores: the Makefile says why), in two worker processes, for 30
minutes (`FLEET_ARGS` to change any of it).

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
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve()
sys.path.insert(0, str(ROOT))

from bench.soak_fleet import Shard, ShardDied, WorkerProcess, clock, group_problems, rss_bytes, serve_shard  # noqa: E402
from coordinator.tools.process import ServeProcess  # noqa: E402

__all__ = ["group_problems", "main"]  # group_problems: the ownership check, tested through this script


# --- what the coordinator's process shows -------------------------------------------------------------


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
    workers_cpu_s: float  # the workers' processes (this one with --worker-processes 1)


def sample(serves: list[ServeProcess], started: float, workers_cpu_s: float) -> Sample:
    rss, fds, sockets, cpu, requests, rebalances = [], 0, 0, 0.0, 0.0, 0.0
    for serve in serves:
        pid = serve.process.pid
        sums = metric_sums(serve.url, (REQUESTS, REBALANCES))
        rss.append(rss_bytes(pid))
        f, s = open_fds(pid)
        fds, sockets, cpu = fds + f, sockets + s, cpu + cpu_seconds(pid)
        requests, rebalances = requests + sums[REQUESTS], rebalances + sums[REBALANCES]
    return Sample(clock() - started, rss, fds, sockets, cpu, requests, rebalances, workers_cpu_s)


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
    workers_rss: list[int]  # each worker process's (the soak's own with --worker-processes 1)
    churn: int

    def text(self) -> str:
        rss = "/".join(f"{r / 2**20:.1f}" for r in self.rss)
        return (
            f"minute {self.minute:5.2f}: RSS {rss} MiB  fds {self.fds:4d} "
            f"({self.sockets} sockets)  "
            f"heartbeat p50 {self.p50_ms:6.2f} ms  p99 {self.p99_ms:7.2f} ms  ({self.heartbeats:,} heartbeats; "
            f"workers' loop lag p99 {self.lag_p99_ms:.1f} ms, longest GC pause {self.gc_max_ms:.1f} ms)  "
            f"requests served {self.requests:,}  rebalances {self.rebalances:,}  "
            f"coordinator CPU {self.cpu * 100:3.0f}%  workers CPU {self.workers_cpu * 100:3.0f}% "
            f"(RSS {'/'.join(f'{r / 2**20:.0f}' for r in self.workers_rss)} MiB)  churn events {self.churn}"
        )


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


def line_between(a: Sample, b: Sample, taken: list[dict], churn: int) -> Line:
    """The line of figures from sample `a` to `b`, with the workers' processes' measures (`Shard.take`)."""
    latencies = [x for t in taken for x in t["latencies"]]
    lags = [x for t in taken for x in t["lags"]]
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
        max((x for t in taken for x in t["pauses"]), default=0.0) * 1e3,
        round(b.requests - a.requests),
        round(b.rebalances - a.rebalances),
        (b.cpu_s - a.cpu_s) / span,
        (b.workers_cpu_s - a.workers_cpu_s) / span,
        [t["rss"] for t in taken],
        churn,
    )


async def run(args: argparse.Namespace, serves: list[ServeProcess], argv: list[str]) -> int:
    """The soak's groups in this process, or in --worker-processes processes of this script."""
    main = asyncio.current_task()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    url, k = serves[0].url, args.worker_processes
    if k == 1:
        shards: list = [Shard(args, url)]
    else:
        shards = list(await asyncio.gather(*(WorkerProcess.spawn(SCRIPT, argv, url, i, k) for i in range(k))))
    try:
        return await _soak(args, serves, shards)
    except ShardDied as e:
        print(f"{e}: its groups are not measured, the soak stops", flush=True)
        return 1
    finally:
        await asyncio.shield(asyncio.gather(*(s.close() for s in shards), return_exceptions=True))


async def _each(shards: list, command: str) -> list[dict]:
    return list(await asyncio.gather(*(getattr(s, command)() for s in shards)))


async def _soak(args: argparse.Namespace, serves: list[ServeProcess], shards: list) -> int:
    started = clock()
    joined = await _each(shards, "joined")
    problems = [p for j in joined for p in j["problems"]]
    if problems:
        print(f"the groups did not converge after joining within {args.converge_timeout:g} s:", flush=True)
        for p in problems[:20]:
            print(f"  {p}")
        return 1
    processes = f"{len(shards)} worker processes ({' + '.join(str(j['live']) for j in joined)} workers)"
    print(
        f"{sum(j['live'] for j in joined)} workers in {sum(j['groups'] for j in joined)} groups "
        f"joined and converged in {clock() - started:.1f} s"
        f"{' in ' + processes if len(shards) > 1 else ''}; "
        f"soaking for {args.minutes:g} min, a line every {args.report_every:g} s",
        flush=True,
    )

    lines: list[Line] = []
    soak_started = clock()
    taken = await _each(shards, "start")
    before = await asyncio.to_thread(sample, serves, soak_started, sum(t["cpu_s"] for t in taken))
    churn_before = 0
    end = soak_started + args.minutes * 60
    while True:
        next_at = soak_started + (len(lines) + 1) * args.report_every
        if next_at > end + 1e-6:
            break
        await asyncio.sleep(max(0.0, next_at - clock()))
        for serve in serves:
            if serve.process.poll() is not None:
                print(f"coordinator serve exited {serve.process.returncode}:\n{serve.log()}", flush=True)
                return 1
        taken = await _each(shards, "take")
        now = await asyncio.to_thread(sample, serves, soak_started, sum(t["cpu_s"] for t in taken))
        churned = sum(t["churned"] for t in taken)
        lines.append(line_between(before, now, taken, churned - churn_before))
        print(lines[-1].text(), flush=True)
        before, churn_before = now, churned

    if lines:
        print(growth(lines, args.report_every), flush=True)
    return report_end(await _each(shards, "finish"))


def report_end(finished: list[dict]) -> int:
    """The churn's totals and the ownership check over every worker process's groups."""
    churned = sum((Counter(f["churned"]) for f in finished), Counter())
    errors = [e for f in finished for e in f["errors"]]
    print(
        f"churn: {sum(churned.values())} events ({', '.join(f'{k} {n}' for k, n in sorted(churned.items()))}); "
        f"{len(errors)} failed{': ' + '; '.join(errors[:5]) if errors else ''}; "
        f"heartbeat exchanges that failed: {sum(f['failures'] for f in finished)}",
        flush=True,
    )
    took = max(f["took"] for f in finished)
    problems = [p for f in finished for p in f["problems"]]
    if problems:
        print(f"ownership: NOT converged {took:.1f} s after the churn stopped ({len(problems)} problems):", flush=True)
        for p in problems[:50]:
            print(f"  {p}")
        return 1
    groups, live, items = (sum(f[key] for f in finished) for key in ("groups", "live", "items"))
    print(
        f"ownership: every task of every group owned by exactly one member ({groups} groups, "
        f"{live} workers, {items} connectors and tasks), converged {took:.1f} s after the churn stopped",
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
        help="leave the joined workers to Python's collector (by default they are frozen out of it, gc.freeze, and"
        " the oldest generation is not collected during the soak)",
    )
    parser.add_argument("--keep-log", action="store_true", help="keep the coordinator's log (its path is printed)")
    parser.add_argument(
        "--worker-processes",
        type=int,
        default=1,
        metavar="K",
        help="run the workers in K processes, each a K-th of the groups and of the churn (one Python "
        "process's loop falls behind at about 50,000 workers at 30 s heartbeats)",
    )
    parser.add_argument("--shard", default=None, help=argparse.SUPPRESS)  # I/K: a worker process (soak_fleet)
    parser.add_argument("--coordinator-url", default=None, help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.converge_timeout is None:
        args.converge_timeout = 30 + 3 * (args.session_ms + args.delay_ms) / 1000
    if args.minutes <= 0 or args.report_every <= 0 or min(args.groups, args.workers, args.instances) < 1:
        parser.error("--minutes, --report-every, --instances, --groups and --workers must be positive")
    if args.instances > args.partitions:
        parser.error("--instances must not exceed --partitions (an instance without a partition serves nothing)")
    if not 1 <= args.worker_processes <= args.groups:
        parser.error("--worker-processes must be between 1 and --groups (a process without a group measures nothing)")
    if args.shard is not None:
        index, _, of = args.shard.partition("/")
        return asyncio.run(serve_shard(args, args.coordinator_url, int(index), int(of)))

    topic = f"soak-{os.getpid()}-{int(time.time())}"
    log_dir = Path(tempfile.mkdtemp(prefix="soak-"))
    print(
        f"soak: broker {args.bootstrap_servers}, topic {topic} ({args.partitions} partitions), "
        f"{args.instances} instance{'s' * (args.instances > 1)}, {args.groups} groups x "
        f"{args.workers} workers, {args.connectors} connectors x {args.tasks} tasks each; heartbeat "
        f"{args.heartbeat_ms} ms, session {args.session_ms} ms, delay {args.delay_ms} ms; a churn event every "
        f"{args.churn_every:g} s; {args.worker_processes} worker process{'es' * (args.worker_processes > 1)}; "
        f"{os.cpu_count()} cores",
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
        code = asyncio.run(run(args, start_instances(args, topic, log_dir), argv))
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
