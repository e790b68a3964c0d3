"""Replay benchmark (`make bench-replay`): questions about one group from a big dump file.

A dump of 1,000,000 records of many groups is written once (histories the state machine itself
wrote: joins, leaves, crashes, connector changes, scheduled rebalances; 16 partitions, groups
placed as Kafka places them, records of a partition's groups interleaved in time), in both dump
formats. Then, medians over several rounds, in-process and through the console script:

- reading the dump alone (the floor under every question);
- `replay timeline --group G`, G in the last partition of the file;
- `replay state --group G --at T`, T near the end of G's partition;
- `replay verify` over everything (every record decoded and replayed; for reference).

Goal: timeline and state <= 10 s each on the binary dump of 1,000,000 records.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The same group histories and timing as bench_state's replay benchmark (this directory is on sys.path).
from bench_state import median_seconds, scenario  # noqa: E402

from records import Record, encode  # noqa: E402

from coordinator import cli  # noqa: E402
from coordinator.tools.partitions import partition_for  # noqa: E402
from replay.history import group_key_prefix  # noqa: E402
from replay.positions import RawRecord  # noqa: E402
from replay.source import dump_header, read_dump, write_dump  # noqa: E402

PARTITIONS = 16
T0 = 1_772_334_000_000  # 2026-03-01 03:00:00 UTC
GOAL_S = 10.0


def build(count: int) -> tuple[list[RawRecord], str, int]:
    """At least `count` records of many groups (whole histories) as the topic would hold them; returns
    them, the busiest group of the last partition, and an offset near the end of that partition."""
    rng = random.Random(848)
    templates = [scenario(rng, "template") for _ in range(8)]
    groups: dict[int, list[list[tuple[bytes, bytes | None]]]] = {}
    total = 0
    n = 0
    while total < count:
        name = f"connect-cluster-{n}"
        log = templates[n % len(templates)]
        keys: dict = {}
        encoded = []
        for record in log:
            key = keys.get(record.key)
            if key is None:
                key = keys[record.key] = encode(Record(replace(record.key, group_id=name), None))[0]
            encoded.append((key, None if record.value is None else encode(record)[1]))
        groups.setdefault(partition_for(name, PARTITIONS), []).append(encoded)
        total += len(encoded)
        n += 1
    raws: list[RawRecord] = []
    for partition in sorted(groups):
        # The groups of a partition write at the same time: their records interleave.
        streams = [iter(log) for log in groups[partition]]
        offset = 0
        while streams:
            for stream in list(streams):
                for _ in range(rng.randint(1, 6)):
                    record = next(stream, None)
                    if record is None:
                        streams.remove(stream)
                        break
                    raws.append(RawRecord(partition, offset, T0 + len(raws) * 5, *record))
                    offset += 1
    last = raws[-1].partition
    sizes = {
        f"connect-cluster-{i}": len(templates[i % len(templates)])
        for i in range(n)
        if partition_for(f"connect-cluster-{i}", PARTITIONS) == last
    }
    group = max(sizes, key=sizes.get)  # the busiest group of the partition read last
    end = sum(1 for r in raws if r.partition == last)
    return raws, group, int(end * 0.95)


def run_cli(*argv: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(list(argv))
    if code:
        raise AssertionError(f"coordinator {' '.join(argv)} exited {code}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the goal is per core
    started = time.perf_counter()
    raws, group, at = build(args.records)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        files = {}
        for fmt in ("binary", "jsonl"):
            path = Path(tmp) / f"dump.{'bin' if fmt == 'binary' else 'jsonl'}"
            with path.open("wb") as out:
                write_dump(out, raws, fmt, dump_header("bench", "__worker_offsets", range(PARTITIONS)))
            files[fmt] = path
        prefix = group_key_prefix(group)
        group_records = sum(1 for r in raws if r.key.startswith(prefix, 2))
        print(
            f"replay benchmark, one core, median of {args.rounds} rounds: {len(raws):,} records, "
            f"{PARTITIONS} partitions, group {group} ({group_records:,} records, partition {raws[-1].partition}); "
            f"built in {time.perf_counter() - started:.0f} s"
        )
        for fmt, path in files.items():
            size = path.stat().st_size / 2**20
            read = median_seconds(lambda p=path: sum(1 for _ in read_dump(p)), args.rounds)
            timeline = median_seconds(
                lambda p=path: run_cli("replay", "timeline", "--group", group, "--file", str(p), "--no-progress"),
                args.rounds,
            )
            state = median_seconds(
                lambda p=path: run_cli(
                    "replay", "state", "--group", group, "--file", str(p), "--at", str(at), "--no-progress"
                ),
                args.rounds,
            )
            print(f"{fmt:6} dump ({size:5.0f} MiB)  read alone {read:6.2f} s ({len(raws) / read:,.0f} records/s)")
            for label, seconds in (("timeline --group", timeline), (f"state --at {at}", state)):
                print(
                    f"  {label:22}: {seconds:6.2f} s; goal <= {GOAL_S:g} s -> "
                    f"{'met' if seconds <= GOAL_S else 'NOT met'}"
                )
        path = files["binary"]
        verify = median_seconds(lambda: run_cli("replay", "verify", "--file", str(path), "--no-progress"), 1)
        print(
            f"verify (every record decoded and replayed, binary dump): {verify:.1f} s "
            f"({len(raws) / verify:,.0f} records/s)"
        )
        # The whole command as an on-call engineer runs it: interpreter start-up and imports included.
        script = Path(sys.executable).with_name("coordinator")
        for label, extra in (("timeline", []), ("state --at", ["--at", str(at)])):
            command = [
                str(script),
                "replay",
                label.split()[0],
                "--group",
                group,
                "--file",
                str(path),
                "--no-progress",
                *extra,
            ]
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            print(
                f"console script `coordinator replay {label}` (binary), wall time: {time.perf_counter() - start:.2f} s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
