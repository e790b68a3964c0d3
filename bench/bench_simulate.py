"""`coordinator replay simulate` benchmark (`make bench-simulate`): a week of a 100-worker group.

A week of one group's history is generated (workers crashing and coming back, restarting within
the delay, leaving and being replaced, connectors changing: about 10,000 membership events, and
the coordinator's own records for them, written by the state machine through
`coordinator.core.driver.scripted`). Then, medians over several rounds, what `replay simulate`
does with it, in-process: replay the records into a history, extract the happenings, re-run them
with the group's own settings, and measure both histories.

Baseline, measured in the same run: the driver stepping every worker at every event (the way
`coordinator.core.driver.simulation.converge` does) over the first events of the same script,
per event, times the script's events.

Goal: the week in <= 5 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from records import encode  # noqa: E402

from coordinator.core.driver import Driver, SimWorker, converge  # noqa: E402
from coordinator.core.driver.scripted import (  # noqa: E402
    Crash,
    Join,
    Leave,
    ScriptSettings,
    SetConnectors,
    Step,
    run_script,
)
from coordinator.core.group_coordinator import CoordinatorConfig  # noqa: E402
from replay.history import History  # noqa: E402
from replay.positions import RawRecord  # noqa: E402
from replay.simulate import faithfulness, measure, own_settings, rerun  # noqa: E402
from replay.whatif import extract, recorded_settings  # noqa: E402

T0 = 1_772_334_000_000
WEEK_MS = 7 * 86_400_000
GROUP = "connect-prod"
GOAL_S = 5.0
SETTINGS = ScriptSettings(
    session_timeout_ms=10_000,
    heartbeat_interval_ms=3_000,
    scheduled_rebalance_max_delay_ms=300_000,
    initial_assignment_delay_ms=3_000,
)


def week(workers: int, events: int, seed: int = 32) -> list[Step]:
    """`events` membership events spread over a week, about `workers` workers alive throughout."""
    rng = random.Random(seed)
    connectors = {f"conn-{c}": rng.randint(4, 16) for c in range(workers // 4)}
    steps: list[Step] = [SetConnectors(T0, dict(connectors))]
    alive = [f"worker-{n}" for n in range(workers)]
    steps += [Join(T0 + n * 100, name, name) for n, name in enumerate(alive)]
    down: list[tuple[int, str]] = []  # (when it comes back, name)
    gap = WEEK_MS // events
    t = T0 + 600_000
    while len(steps) < events:
        t += rng.randint(gap // 2, gap * 3 // 2)
        back = [name for at, name in down if at <= t]
        down = [(at, name) for at, name in down if at > t]
        for name in back:
            steps.append(Join(t, name, name))
            alive.append(name)
            t += 1_000
        roll = rng.random()
        if roll < 0.1:
            connectors[rng.choice(list(connectors))] = rng.randint(4, 16)
            steps.append(SetConnectors(t, dict(connectors)))
        elif len(alive) > workers // 2:
            name = alive.pop(rng.randrange(len(alive)))
            if roll < 0.45:  # crashes, back in minutes (maybe after the delay)
                steps.append(Crash(t, name))
                down.append((t + rng.randint(60_000, 600_000), name))
            elif roll < 0.8:  # a restart within the delay (a static member away for a while)
                steps.append(Leave(t, name, static=True))
                down.append((t + rng.randint(5_000, 60_000), name))
            else:  # leaves for good; a new worker replaces it later
                steps.append(Leave(t, name))
                down.append((t + rng.randint(60_000, 1_200_000), f"{name}-r{len(steps)}"))
    return sorted(steps, key=lambda s: s.at_ms)


def recorded(steps: list[Step]) -> list[RawRecord]:
    run = run_script(GROUP, steps, SETTINGS, T0, steps[-1].at_ms)
    return [RawRecord(0, n, stamp, *encode(r)) for n, (r, stamp) in enumerate(zip(run.log, run.stamps))]


def write_week(bootstrap: str, topic: str, workers: int, events: int, group: str = GROUP) -> int:
    """The generated week (`week`) of `group` into partition 0 of `topic`, re-run to end a minute ago
    (its records' own times with it: a deferral's deadline is as far from its record as it was), so
    that a coordinator loading it sees a group whose members have just stopped. Returns the records."""
    steps = week(workers, events)
    shift = int(time.time() * 1000) - 60_000 - steps[-1].at_ms
    steps = [replace(step, at_ms=step.at_ms + shift) for step in steps]
    run = run_script(group, steps, SETTINGS, T0 + shift, steps[-1].at_ms)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for record, stamp in zip(run.log, run.stamps):
        key, value = encode(record)
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=0, timestamp=stamp)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return len(run.log)


def simulate_once(raw: list[RawRecord]) -> tuple[float, dict]:
    started = time.perf_counter()
    history = History(GROUP)
    history.run(raw)
    # The generator's interval, as `--recorded-heartbeat-interval` gives it: the topic does not hold
    # it, and the measured one is rough (a few percent off moves the re-run's timing, and with it
    # which changes fall into one rebalance).
    settings = recorded_settings(history.events, {"heartbeat_interval_ms": SETTINGS.heartbeat_interval_ms})
    extracted = extract(history.events, GROUP, settings.settings)
    simulated, run = rerun(extracted, own_settings(extracted, settings), history.last.timestamp_ms)
    end = max(history.last.timestamp_ms, simulated.last.timestamp_ms)
    a = measure("recorded", history, extracted, end)
    b = measure("re-run", simulated, extracted, end)
    elapsed = time.perf_counter() - started
    f = faithfulness(a, b)
    return elapsed, {
        "records": history.records,
        "happenings": len(extracted.happenings),
        "heartbeats": run.heartbeats,
        "moves": f"{f.matched_moves}/{f.recorded_moves}",
        "same": f.same_moves,
        "unowned_off": f.unowned_off,
    }


def every_worker_per_event(steps: list[Step], events: int) -> float:
    """The baseline: seconds per event when every worker heartbeats at every event, round after
    round until the group settles (`converge`)."""
    config = CoordinatorConfig(
        session_timeout_ms=SETTINGS.session_timeout_ms,
        heartbeat_interval_ms=SETTINGS.heartbeat_interval_ms,
        scheduled_rebalance_max_delay_ms=SETTINGS.scheduled_rebalance_max_delay_ms,
        initial_assignment_delay_ms=0,
    )
    d = Driver(config, now=T0)
    alive: dict[str, SimWorker] = {}
    started = None
    done = 0
    for step in steps:
        d.advance(max(0, step.at_ms - d.now))
        if isinstance(step, SetConnectors):
            d.set_connectors(GROUP, step.connectors)
        elif isinstance(step, Join):
            alive[step.member_id] = SimWorker(d, GROUP, step.member_id, instance_id=step.instance_id)
        elif step.member_id in alive:
            w = alive.pop(step.member_id)
            w.leave(static=step.static) if isinstance(step, Leave) else w.lose_everything()
        if started is None and len(alive) >= 100:
            started = time.perf_counter()  # the group is full: measure from here
        converge(alive.values())
        if started is not None:
            done += 1
            if done >= events:
                break
    return (time.perf_counter() - started) / max(1, done)


def profile(raw: list[RawRecord], top: int) -> None:
    """Where a simulation's time goes: cProfile's top functions, by time spent in them (self)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(simulate_once, raw)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-events", type=int, default=100)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="also print the re-run's top N functions")
    args = parser.parse_args()
    steps = week(args.workers, args.events)
    started = time.perf_counter()
    raw = recorded(steps)
    print(f"generated: {len(steps)} membership events, {len(raw)} records, in {time.perf_counter() - started:.1f} s")
    times = []
    for _ in range(args.rounds):
        elapsed, facts = simulate_once(raw)
        times.append(elapsed)
    median = statistics.median(times)
    print(f"simulate (replay + extract + re-run + measure), median of {args.rounds}: {median:.2f} s; {facts}")
    if args.profile:
        profile(raw, args.profile)
    per_event = every_worker_per_event(steps, args.baseline_events)
    baseline = per_event * len(steps)
    print(
        f"baseline, every worker stepped at every event: {per_event * 1000:.2f} ms an event, "
        f"{baseline:.0f} s for the week; ratio {baseline / median:.1f}x"
    )
    per_step = median / len(steps)
    print(
        f"simulate: {per_step * 1000:.2f} ms a membership event, {median:.1f} s for {len(steps)} "
        f"(goal <= {GOAL_S:g} s for 10,000 events: {'met' if per_step * 10_000 <= GOAL_S else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
