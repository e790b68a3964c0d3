"""Scripted histories for the replay tests: the state machine driven through a story, every record
stamped with the virtual time its handler ran at, as a coordinator's producer would stamp it.

`on_call_story()` is the night the on-call engineer asks about: three workers share three
connectors, a fourth joins, W2 crashes (its session times out and its work waits for it for the
scheduled rebalance delay, then moves), W3 bounces (leaves and is back within the delay, and gets
its own work back at once), and a connector gains tasks. `marks` names the offsets where each part
of the story happened, and `slots_at` keeps the coordinator's state at each of them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from records import Record, encode

from coordinator.core.driver import Driver, SimWorker
from coordinator.core.state import CoordinatorState
from coordinator.tools.partitions import partition_for
from replay.positions import RawRecord

T0 = 1_772_334_000_000  # 2026-03-01 03:00:00 UTC
GROUP = "connect-prod"
CONNECTORS = {"orders-sink": 4, "clicks-source": 3, "audit": 2}


class StampedDriver(Driver):
    """A Driver that remembers when each record was written."""

    def __init__(self, now: int = T0) -> None:
        super().__init__(now=now)
        self.stamps: list[int] = []

    def run(self, result):  # noqa: ANN001, ANN201
        response = super().run(result)
        self.stamps.extend([self.now] * len(result.records))
        return response


class WritingDriver(StampedDriver):
    """Each handler's records are one transaction on the group's partition, as the runtime writes
    them (`writers`: partition -> an open `coordinator.service.log.PartitionWriter`)."""

    def __init__(self, writers: dict, partitions: int) -> None:
        super().__init__()
        self.writers = writers
        self.partitions = partitions

    def run(self, result):  # noqa: ANN001, ANN201
        if result.records:
            group = result.records[0].key.group_id
            self.writers[partition_for(group, self.partitions)].write(result.records)
        return super().run(result)


def raw_records(log: list[Record], stamps: list[int], partition: int = 0, first_offset: int = 0) -> list[RawRecord]:
    """The log as the topic holds it: encoded, one offset per record."""
    return [
        RawRecord(partition, first_offset + n, stamp, *encode(record))
        for n, (record, stamp) in enumerate(zip(log, stamps, strict=True))
    ]


@dataclass
class Story:
    driver: StampedDriver
    marks: dict[str, int] = field(default_factory=dict)  # name -> offset of the last record before it
    slots_at: dict[str, dict] = field(default_factory=dict)  # name -> the state's slots there
    times: dict[str, int] = field(default_factory=dict)  # name -> the virtual time then

    @property
    def log(self) -> list[Record]:
        return self.driver.log

    def raw(self, partition: int = 0) -> list[RawRecord]:
        return raw_records(self.driver.log, self.driver.stamps, partition)

    def mark(self, name: str) -> None:
        self.marks[name] = len(self.driver.log) - 1
        self.times[name] = self.driver.now
        self.slots_at[name] = self.driver.state.slots()


def on_call_story(group: str = GROUP, driver: StampedDriver | None = None) -> Story:
    d = driver or StampedDriver()
    story = Story(d)
    d.set_config(group, session_timeout_ms=10_000, heartbeat_interval_ms=3_000, scheduled_rebalance_max_delay_ms=60_000)
    d.set_connectors(group, CONNECTORS)
    workers = {name: SimWorker(d, group, name) for name in ("W1", "W2", "W3")}
    live = dict(workers)

    def run(seconds: int) -> None:
        """Each live worker heartbeats every 3 s, on its own phase, while the clock moves."""
        for _ in range(seconds):
            d.advance(1_000)
            for phase, w in enumerate(live.values()):
                if (d.now // 1_000 + phase) % 3 == 0:
                    w.heartbeat()

    for w in live.values():
        w.heartbeat()
    run(30)
    story.mark("stable")

    live["W4"] = SimWorker(d, group, "W4")
    live["W4"].heartbeat()
    run(60)
    story.mark("scaled_out")

    crashed = live.pop("W2")  # stops heartbeating: the coordinator removes it when its session times out
    crashed.lose_everything()
    run(20)
    story.mark("w2_removed")
    run(60)  # the delay passes: W2's work moves to the others
    story.mark("w2_work_moved")

    bounced = live.pop("W3")
    bounced.lose_everything()
    run(15)  # removed after its session timeout; its work waits for it
    story.mark("w3_removed")
    w3 = SimWorker(d, group, "W3")
    live["W3"] = w3
    w3.heartbeat()
    run(30)  # back within the delay: it gets its own work back at once
    story.mark("w3_back")

    d.set_connectors(group, {**CONNECTORS, "audit": 4})
    run(40)
    story.mark("end")
    return story


def replayed(records: list[Record]) -> CoordinatorState:
    state = CoordinatorState()
    state.replay_all(records)
    return state


def random_story(
    seed: int,
    group: str = "connect-cluster",
    driver: StampedDriver | None = None,
    server_side: bool = False,
    assignor: str = "incremental_cooperative",
) -> StampedDriver:
    """A random history of one group: joins, leaves, crashes, static bounces, connector changes,
    the clock moving through session timeouts and scheduled rebalances."""
    rng = random.Random(seed)
    d = driver or StampedDriver()
    d.set_config(group, session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=20_000)
    d.set_connectors(group, {f"sink-{c}": rng.randint(1, 6) for c in range(rng.randint(1, 4))})
    kwargs = {"assignor": None, "server_assignor": assignor} if server_side else {"assignor": assignor}
    names = iter(range(10_000))

    def worker(static: str | None = None) -> SimWorker:
        return SimWorker(d, group, f"W{next(names)}", instance_id=static, **kwargs)

    live = [worker(f"i{n}" if n % 2 else None) for n in range(rng.randint(2, 5))]
    away: list[SimWorker] = []
    for _ in range(rng.randint(8, 20)):
        event = rng.random()
        if event < 0.2:
            live.append(worker())
        elif event < 0.35 and len(live) > 1:
            live.pop(rng.randrange(len(live))).leave()
        elif event < 0.5 and len(live) > 1:
            live.pop(rng.randrange(len(live))).lose_everything()  # crashed: its session times out
        elif event < 0.65 and len(live) > 1:
            w = live.pop(rng.randrange(len(live)))
            if w.instance_id is not None:  # a static member leaves for a while, and comes back as a new member id
                w.leave(static=True)
                away.append(w)
        elif event < 0.75 and away:
            gone = away.pop()
            live.append(SimWorker(d, group, f"W{next(names)}", instance_id=gone.instance_id, **kwargs))
        elif event < 0.85:
            d.set_connectors(group, {f"sink-{c}": rng.randint(1, 6) for c in range(rng.randint(1, 4))})
        for _ in range(rng.randint(2, 15)):
            d.advance(1_000)
            for w in live:
                if rng.random() < 0.9:
                    w.heartbeat()
    return d
