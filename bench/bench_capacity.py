"""Capacity (`make bench-capacity`): what one `coordinator serve` answers, for docs/capacity.md.

1. Steady heartbeats at a fixed offered rate (open loop, as workers send them: each at its time,
   whether or not earlier answers came back), rising step by step: 5,000 members in 200 groups
   (server-side `incremental_cooperative`, 2 connectors x 4 tasks each) driven to a stable state,
   then each request the next member's steady heartbeat exactly as the SDK sends it (GroupId,
   MemberId, MemberEpoch; nothing changed, so nothing is written). Per step: the rate answered,
   p50/p99/p99.9 latency from each request's due time (so a client that falls behind counts as
   latency, not as a lower rate), and the CPU of `coordinator serve` and of the whole machine.
   The capacity is the highest step whose p99 stays under `--p99-ms` with every request answered.
   The ladder runs on 64 connections and again on 5,000, one per member, as a fleet holds them.
   The load generator is another process with plain asyncio streams (keep-alive HTTP/1.1 on
   `--connections` connections, all opened and used once before the clock starts, as a fleet's
   workers hold theirs): far cheaper per request than an HTTP library, so that on two cores it is
   not what gives out first.
2. Memory: the coordinator's RSS before the members joined and after, per member.
3. Writes: join/leave churn (every request a durable change) on a topic of ONE partition, closed
   loop: the changes per second one partition commits, its commits per second and changes per
   commit (`bench_service.bench_churn`, the same churn as `make bench-service` runs over 16).

Every figure is from this machine (two cores shared by the server, the load generator and the
broker); docs/capacity.md derives the fleet sizes from them and says which numbers are extrapolated.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_service as svc  # noqa: E402  (this directory is on sys.path; it puts the project there too)
from soak import rss_bytes  # noqa: E402

HEARTBEAT = svc.HEARTBEAT


# --- the open-loop load generator (a process of its own) ----------------------------------------------


def open_loop_process(
    port: int,
    bodies: list[bytes],
    rate: float,
    seconds: float,
    warmup: float,
    connections: int,
    results: multiprocessing.Queue,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which stops this process
    try:
        results.put(asyncio.run(_open_loop(port, bodies, rate, seconds, warmup, connections)))
    except BaseException as e:  # noqa: BLE001 - reported by the parent
        results.put({"failed": repr(e)})


async def _open_loop(
    port: int, bodies: list[bytes], rate: float, seconds: float, warmup: float, connections: int
) -> dict:
    """Request i is due at start + i / rate and goes on connection i % connections; its latency runs
    from its due time to the end of its answer."""
    requests = [
        b"POST " + HEARTBEAT.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(b)).encode() + b"\r\n\r\n" + b
        for b in bodies
    ]
    n = len(requests)
    total = int(rate * (warmup + seconds))
    start = measure_from = 0.0
    latencies: list[float] = []
    errors = 0
    late_sends = 0
    opened = 0
    all_open = asyncio.Event()

    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bytes:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        body = await reader.readexactly(length)
        return body if head.startswith(b"HTTP/1.1 200") else b""

    async def connection(k: int) -> None:
        nonlocal errors, late_sends, opened, start, measure_from
        # As a fleet's workers do, every connection is open (and has been used) before the clock starts:
        # connection set-up is not what is measured.
        for attempt in range(50):
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.1 * (attempt + 1))
        await exchange(reader, writer, requests[k % n])
        opened += 1
        if opened == connections:
            start = time.perf_counter() + 0.2
            measure_from = start + warmup
            all_open.set()
        await all_open.wait()
        perf = time.perf_counter
        try:
            for i in range(k, total, connections):
                due = start + i / rate
                wait = due - perf()
                if wait > 0:
                    await asyncio.sleep(wait)
                elif wait < -0.005:
                    late_sends += 1
                body = await exchange(reader, writer, requests[i % n])
                done = perf()
                if b'"ErrorCode":0' not in body:
                    errors += 1
                if due >= measure_from:
                    latencies.append(done - due)
        finally:
            writer.close()

    await asyncio.gather(*(connection(k) for k in range(connections)))
    latencies.sort()
    count = len(latencies)

    def q(x: float) -> float:
        return latencies[min(count - 1, int(count * x))] if count else float("nan")

    return {
        "count": count,
        "rate": count / seconds,
        "p50": q(0.5),
        "p99": q(0.99),
        "p999": q(0.999),
        "errors": errors,
        "late_sends": late_sends,
    }


def run_open_loop(port: int, bodies: list[bytes], rate: float, seconds: float, warmup: float, connections: int) -> dict:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(
        target=open_loop_process, daemon=True, args=(port, bodies, rate, seconds, warmup, connections, results)
    )
    process.start()
    svc._children.append(process)
    try:
        result = results.get(timeout=seconds + warmup + 120)
    finally:
        process.join(10)
    if "failed" in result:
        raise RuntimeError(f"the load generator failed: {result['failed']}")
    return result


# --- 1. and 2.: steady heartbeats, memory -------------------------------------------------------------


def steady(server: svc.Serve, args: argparse.Namespace) -> None:
    groups = [f"capacity-{g:03d}" for g in range(args.groups)]
    empty_rss = rss_bytes(server.process.pid)
    for g in groups:
        svc.put_connectors(server.port, g, {"source": 4, "sink": 4})
    members = [svc.member(g, f"worker-{m:02d}.{g}") for m in range(args.members) for g in groups]
    rounds, seconds = asyncio.run(svc.drive_to_stable(server.port, members, groups, timeout=300))
    rss = rss_bytes(server.process.pid)
    print(
        f"  {len(members):,} members in {len(groups)} groups stable after {rounds} rounds ({seconds:.1f} s); "
        f"coordinator RSS {empty_rss / 2**20:.0f} MiB empty, {rss / 2**20:.0f} MiB with them: "
        f"{(rss - empty_rss) / len(members) / 1024:.1f} KiB per member (2 connectors x 4 tasks per group)"
    )
    # The SDK's steady heartbeat: nothing changed since the last, so only who is asking.
    bodies = [svc.heartbeat_body(m.heartbeat(0)) for m in members]
    status, sample = svc.http_request(server.port, "POST", HEARTBEAT, svc.orjson.loads(bodies[0]))
    if status != 200 or sample["ErrorCode"] != 0 or sample["Assignment"] is not None:
        raise RuntimeError(f"a steady heartbeat was answered {status} {sample}")
    print(
        f"  request body {len(bodies[0])} bytes ({bodies[0].decode()[:90]}...); each step {args.seconds:g} s "
        f"after {args.warmup:g} s of warm-up; bound p99 <= {args.p99_ms:g} ms"
    )
    for connections in args.connections:
        ladder(server, bodies, connections, args)


def ladder(server: svc.Serve, bodies: list[bytes], connections: int, args: argparse.Namespace) -> None:
    print(
        f"  on {connections:,} connections{' (one per member, as a fleet holds them)' if connections == len(bodies) else ''}:"
    )
    print(
        f"  {'offered/s':>10} {'answered/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'serve CPU':>9} "
        f"{'machine CPU':>11}  {'CPU us/hb':>9} {'RSS MiB':>7}"
    )
    best = None
    over = False
    for rate in args.rates:
        before = server.metrics()
        cpu0, busy0, t0 = svc.cpu_seconds(server.process.pid), svc.machine_busy_seconds(), time.perf_counter()
        r = run_open_loop(server.port, bodies, rate, args.seconds, args.warmup, connections)
        wall = time.perf_counter() - t0
        serve_cores = (svc.cpu_seconds(server.process.pid) - cpu0) / wall
        machine = (svc.machine_busy_seconds() - busy0) / wall
        after = server.metrics()
        commits = svc.metric_sum(after, "coordinator_batch_records_count") - svc.metric_sum(
            before, "coordinator_batch_records_count"
        )
        served = svc.metric_sum(after, "coordinator_request_seconds_count") - svc.metric_sum(
            before, "coordinator_request_seconds_count"
        )
        per_hb_us = serve_cores * wall / max(1, served) * 1e6
        ok = r["errors"] == 0 and r["rate"] >= 0.98 * rate and r["p99"] * 1e3 <= args.p99_ms
        notes = ["ok" if ok else "OVER the bound"]
        if r["errors"]:
            notes.append(f"errors {r['errors']}")
        if commits:
            notes.append(f"{commits:.0f} commits")
        if r["late_sends"]:
            notes.append(f"{r['late_sends']:,} sent >5 ms late")
        print(
            f"  {rate:>10,.0f} {r['rate']:>10,.0f} {r['p50'] * 1e3:>8.2f} {r['p99'] * 1e3:>8.2f} "
            f"{r['p999'] * 1e3:>9.2f} {serve_cores:>8.2f}c {machine:>8.2f}/{os.cpu_count()}c  {per_hb_us:>9.0f} "
            f"{rss_bytes(server.process.pid) / 2**20:>7.0f}  {'; '.join(notes)}",
            flush=True,
        )
        if ok and not over:
            best = (rate, r, serve_cores, per_hb_us)
        over = over or not ok
        if r["p99"] * 1e3 > 4 * args.p99_ms or r["rate"] < 0.9 * rate:
            break
    if best is None:
        print("  -> no step met the bound")
        return
    rate, r, cores, per_hb = best
    print(
        f"  -> on {connections:,} connections one instance answers {rate:,.0f} steady heartbeats/s with p99 "
        f"{r['p99'] * 1e3:.1f} ms <= {args.p99_ms:g} ms (the highest step before one over the bound), at {cores:.2f} cores of coordinator serve ({per_hb:.0f} us of CPU per heartbeat, "
        f"HTTP included)"
    )


# --- 3. writes: one partition -------------------------------------------------------------------------


def one_partition_churn(bootstrap: str, topic: str, log_dir: Path, args: argparse.Namespace) -> None:
    svc.create_topic(bootstrap, topic, 1)
    server = svc.Serve(bootstrap, topic, log_dir, "--log-level", "WARNING").start()
    server.wait_healthy()
    sizes = replace(svc.Sizes(), churn_groups=50, churn_members=20, seconds=args.seconds, warmup=args.warmup)
    try:
        svc.bench_churn(server, sizes, 1)
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:19092"))
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--members", type=int, default=25, help="members per group")
    parser.add_argument(
        "--rates",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[500, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 10000],
        help="offered heartbeats/s, step by step (comma-separated)",
    )
    parser.add_argument("--seconds", type=float, default=6.0, help="each step's measured length")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument(
        "--connections",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[64, 5000],
        help="the load generator's connections, one ladder per value (comma-separated; a fleet holds one per worker)",
    )
    parser.add_argument("--p99-ms", type=float, default=50.0, help="the latency bound of a step")
    parser.add_argument("--partitions", type=int, default=16, help="partitions of the steady phase's topic")
    parser.add_argument("--skip-churn", action="store_true", help="skip 3., the one-partition churn")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    run_id = f"{os.getpid()}-{int(time.time())}"
    names = [f"bench-capacity-{run_id}", f"bench-capacity-{run_id}-one"]
    topics: list[str] = []  # those created, deleted at the end
    log_dir = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    print(f"capacity: broker {args.bootstrap_servers}, {os.cpu_count()} cores (shared: figures are noisy)", flush=True)
    try:
        svc.create_topic(args.bootstrap_servers, names[0], args.partitions)
        topics.append(names[0])
        server = svc.Serve(args.bootstrap_servers, names[0], log_dir, "--log-level", "WARNING").start()
        server.wait_healthy()
        print(
            f"1.+2. steady heartbeats, open loop ({args.groups} groups x {args.members} members, "
            f"{args.partitions} partitions)",
            flush=True,
        )
        steady(server, args)
        server.stop()
        if not args.skip_churn:
            print("3. writes: join/leave churn on a topic of one partition (closed loop, 64 in flight)", flush=True)
            topics.append(names[1])
            one_partition_churn(args.bootstrap_servers, names[1], log_dir, args)
    except KeyboardInterrupt:
        print("interrupted: stopping the processes started here")
        return 130
    finally:
        svc._cleanup()
        if topics:
            svc.delete_topics(args.bootstrap_servers, topics)
        shutil.rmtree(log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
