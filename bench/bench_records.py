"""Records benchmark (`make bench-records`): decode and encode throughput over a realistic mix.

The mix is what a coordinator writes while groups live: groups of workers running connectors
with tasks, members joining, leaving and bouncing, each rebalance writing a group epoch, member
metadata, a target assignment (type 6 + one type 7 per member) and two current-assignment steps
per member (revoke, then assign), tombstones for departures. Against it, in the same run, the
baseline: the same key and value bodies through bare `fastavro.schemaless_reader`, which is the
floor any Avro decoder in Python pays. Figures are medians over several rounds, on one core.

Goal (issue 2): decode >= 250,000 records/s and within 1.3x of bare fastavro.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastavro import schemaless_reader  # noqa: E402

from records import (  # noqa: E402
    RECORD_TYPES,
    Assignor,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    ConnectorsAndTasks,
    ConnectorsTasksMetadataKey,
    ConnectorsTasksMetadataValue,
    ConnectorTaskCount,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    GroupConfigurationKey,
    GroupConfigurationValue,
    MemberMetadataKey,
    MemberMetadataValue,
    Record,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataKey,
    TargetAssignmentMetadataValue,
    TaskId,
    decode,
    encode,
)
from records.codec import _KEY_CACHE  # noqa: E402
from records.schema import load  # noqa: E402


def _split(items: list, n: int) -> list[list]:
    return [items[i::n] for i in range(n)]


def group_history(rng: random.Random, group: str, rebalances: int) -> Iterator[Record]:
    """The records one group writes over a number of rebalances."""
    connectors = [ConnectorTaskCount(f"{group}-sink-{c}", rng.randint(2, 12)) for c in range(rng.randint(2, 6))]
    work_connectors = [c.name for c in connectors]
    work_tasks = [TaskId(c.name, t) for c in connectors for t in range(c.tasks)]
    yield Record(GroupConfigurationKey(group), GroupConfigurationValue(10_000, 3_000, 60_000, 300_000))
    yield Record(ConnectorsTasksMetadataKey(group), ConnectorsTasksMetadataValue(tuple(connectors)))
    members = [f"worker-{i}.{group}.svc:8083" for i in range(rng.randint(3, 12))]
    epoch = 0
    for _ in range(rebalances):
        epoch += 1
        event = rng.random()
        if event < 0.15 and len(members) > 2:
            gone = members.pop(rng.randrange(len(members)))
            for key in (MemberMetadataKey, TargetAssignmentMemberKey, CurrentMemberAssignmentKey):
                yield Record(key(group, gone), None)
        else:
            member = members[rng.randrange(len(members))] if event < 0.6 else f"worker-{epoch + 100}.{group}.svc:8083"
            if member not in members:
                members.append(member)
            yield Record(
                MemberMetadataKey(group, member),
                MemberMetadataValue(
                    epoch,
                    None,
                    f"connect-{member}",
                    "10.0.0.1",
                    f"http://{member}",
                    60_000,
                    None,
                    (Assignor("incremental_cooperative", 0, 2, 0, 2, b"\x00\x02"),),
                ),
            )
        yield Record(ConnectGroupMetadataKey(group), ConnectGroupMetadataValue(epoch))
        yield Record(
            TargetAssignmentMetadataKey(group),
            TargetAssignmentMetadataValue(
                epoch, 0, None, "incremental_cooperative", members[0], None, ConnectorsAndTasks()
            ),
        )
        shares = list(
            zip(members, _split(work_connectors, len(members)), _split(work_tasks, len(members)), strict=True)
        )
        for member, conns, tasks in shares:
            assigned = ConnectorsAndTasks(tuple(conns), tuple(tasks))
            yield Record(TargetAssignmentMemberKey(group, member), TargetAssignmentMemberValue(assigned, 0, 2, b""))
            revoking = ConnectorsAndTasks((), tuple(tasks[:1]))
            yield Record(
                CurrentMemberAssignmentKey(group, member),
                CurrentMemberAssignmentValue(epoch - 1, epoch - 2, "UNREVOKED", assigned, revoking, 0, 2, b""),
            )
            yield Record(
                CurrentMemberAssignmentKey(group, member),
                CurrentMemberAssignmentValue(epoch, epoch - 1, "STABLE", assigned, ConnectorsAndTasks(), 0, 2, b""),
            )


def realistic_mix(count: int, seed: int = 848) -> list[Record]:
    rng = random.Random(seed)
    out: list[Record] = []
    group = 0
    while len(out) < count:
        out.extend(group_history(rng, f"connect-cluster-{group}", rng.randint(5, 40)))
        group += 1
    return out[:count]


def median_rate(fn: Callable[[], int], rounds: int) -> tuple[float, float]:
    """Median records/s and median seconds per round of `fn` (which returns its record count)."""
    times, count = [], 0
    for _ in range(rounds):
        start = time.perf_counter()
        count = fn()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return count / seconds, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the goal is per core

    records = realistic_mix(args.records)
    encoded = [encode(r) for r in records]
    # The baseline's inputs: the Avro bodies (headers stripped) with their schemas looked up.
    bodies = []
    for (key, value), record in zip(encoded, records, strict=True):
        spec = RECORD_TYPES[record.record_type]
        value_body = None if value is None else (value[2:], load(spec.value_schemas[spec.latest_version]))
        bodies.append((key[2:], load(spec.key_schema), value_body))

    def run_decode() -> int:
        for key, value in encoded:
            decode(key, value)
        return len(encoded)

    def run_decode_cold() -> int:
        # Every key decoded afresh: the figure for a topic whose keys never repeat.
        for key, value in encoded:
            _KEY_CACHE.clear()
            decode(key, value)
        return len(encoded)

    def run_bare() -> int:
        for key, key_schema, value in bodies:
            schemaless_reader(BytesIO(key), key_schema, None)
            if value is not None:
                schemaless_reader(BytesIO(value[0]), value[1], None)
        return len(bodies)

    def run_encode() -> int:
        for record in records:
            encode(record)
        return len(records)

    mix = Counter(RECORD_TYPES[r.record_type].name + (" (tombstone)" if r.value is None else "") for r in records)
    size = sum(len(k) + len(v or b"") for k, v in encoded) / len(encoded)
    print(f"records: {len(records):,} (avg {size:.0f} bytes key+value), rounds: {args.rounds}, one core")
    for name, n in sorted(mix.items(), key=lambda kv: -kv[1]):
        print(f"  {n / len(records):6.1%}  {name}")

    run_decode()  # warm up caches and the generated readers
    bare_rate, bare_s = median_rate(run_bare, args.rounds)
    decode_rate, decode_s = median_rate(run_decode, args.rounds)
    cold_rate, cold_s = median_rate(run_decode_cold, args.rounds)
    encode_rate, _ = median_rate(run_encode, args.rounds)
    ratio = decode_s / bare_s
    print(f"bare fastavro.schemaless_reader : {bare_rate:12,.0f} records/s (baseline)")
    print(f"records.decode                  : {decode_rate:12,.0f} records/s  ({ratio:.2f}x the baseline's time)")
    print(f"records.decode, no key cache    : {cold_rate:12,.0f} records/s  ({cold_s / bare_s:.2f}x)")
    print(f"records.encode                  : {encode_rate:12,.0f} records/s")
    print(
        f"goal: decode >= 250,000 records/s -> {'met' if decode_rate >= 250_000 else 'NOT met'}; "
        f"within 1.3x of bare fastavro -> {'met' if ratio <= 1.3 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
