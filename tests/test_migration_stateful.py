"""A stateful property test of mixed groups (seed 000's migration, seed 004's classic protocol):
classic workers (`ClassicWorker`, Kafka Connect's WorkerCoordinator) and connect workers (`Member`)
join, leave, crash, and switch protocol with the same instance id (a rolling upgrade or downgrade
step), the group's connectors change, time passes, and the coordinator fails over to a replay of its
log (or of its compacted form). The group changes type both ways as the first connect worker joins
and the last one leaves.

Checked after every step:
- no connector or task runs on two live workers (what the workers themselves run);
- replaying the log, and its compacted form, gives exactly the live state;
- the group's version never goes back: its epoch while connect, its generation while classic, a
  conversion continuing from the other (upgrade at the generation, downgrade past the epoch);
and at the end (`settle`): once nothing changes but time, every configured item runs on exactly
one live worker, and the group is stable.

Examples: 300 of up to 30 steps by default; `STATEFUL_EXAMPLES` and `STATEFUL_STEPS` run more
(`make test-long`).
"""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from records import ConnectorTaskCount

from coordinator.core.driver import Driver, SimClassicWorker, SimWorker, step_all
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.items import configured_work
from coordinator.core.state import CoordinatorState

G = "mixed"
EXAMPLES = int(os.environ.get("STATEFUL_EXAMPLES", 300))
STEPS = int(os.environ.get("STATEFUL_STEPS", 30))
TICK_MS = 100
TIMEOUTS = {
    "session_timeout_ms": 1_000,
    "rebalance_timeout_ms": 1_000,
    "heartbeat_interval_ms": 200,
    "scheduled_rebalance_max_delay_ms": 600,
}
NAMES = ("w1", "w2", "w3", "w4", "w5")
CONNECTORS = st.dictionaries(st.sampled_from("ABC"), st.integers(0, 3), min_size=1, max_size=3)


def compact(log: list) -> list:
    last = {}
    for offset, record in enumerate(log):
        last[record.key] = (offset, record)
    return [record for _, record in sorted(last.values(), key=lambda v: v[0]) if record.value is not None]


class MixedMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.d = Driver(
            CoordinatorConfig(
                session_timeout_ms=TIMEOUTS["session_timeout_ms"],
                heartbeat_interval_ms=TIMEOUTS["heartbeat_interval_ms"],
                scheduled_rebalance_max_delay_ms=TIMEOUTS["scheduled_rebalance_max_delay_ms"],
                initial_assignment_delay_ms=0,
                assignor_error_backoff_ms=500,
            )
        )
        self.connectors = {"A": 2, "B": 1}
        self.d.set_connectors(G, self.connectors)
        self.classic: dict[str, SimClassicWorker] = {}
        self.connect: dict[str, SimWorker] = {}
        self.version = 0
        self.serial = 0
        self.eager: bool | None = None

    # --- the fleet --------------------------------------------------------------------------------

    def start(self, name: str, protocol: str, connect_protocol: str = "sessioned") -> None:
        self.serial += 1
        if protocol == "classic":
            # What a real Kafka Connect worker sends: its protocols by connect.protocol, its REST URL
            # and config offset, its allocation, in Connect's bytes.
            self.classic[name] = SimClassicWorker(
                self.d,
                G,
                f"{name}.{self.serial}",
                instance_id=name,
                connect_protocol=connect_protocol,
                url=f"http://{name}:8083/",
                config_offset=self.serial,
                **TIMEOUTS,
            )
        else:
            self.connect[name] = SimWorker(
                self.d,
                G,
                f"{name}.{self.serial}",
                instance_id=name,
                rebalance_timeout_ms=TIMEOUTS["rebalance_timeout_ms"],
                session_timeout_ms=TIMEOUTS["session_timeout_ms"],
            )

    def running(self) -> dict[str, frozenset]:
        return {**{n: w.owned for n, w in self.classic.items()}, **{n: w.owned for n, w in self.connect.items()}}

    def tick(self) -> None:
        step_all(self.classic.values(), self.connect.values(), self.check_running, rounds=50)
        self.d.advance(TICK_MS)

    def check_running(self) -> None:
        counts = Counter(item for items in self.running().values() for item in items)
        doubled = sorted(str(i) for i, n in counts.items() if n > 1)
        assert not doubled, f"running on two workers: {doubled}: {self.running()}"

    # --- rules -------------------------------------------------------------------------------------

    @precondition(lambda self: len(self.classic) + len(self.connect) < len(NAMES))
    @rule(protocol=st.sampled_from(("classic", "classic", "connect")), data=st.data())
    def join(self, protocol: str, data: st.DataObject) -> None:
        free = [n for n in NAMES if n not in self.classic and n not in self.connect]
        name = data.draw(st.sampled_from(free))
        # One family per example, as Connect advises (eager and cooperative workers in one group can, in
        # Connect too, run a task twice in the round that turns the group eager): `default` alone, or
        # the cooperative ones mixed.
        if self.eager is None:
            self.eager = data.draw(st.sampled_from((False, False, True)))
        connect_protocol = "default" if self.eager else data.draw(st.sampled_from(("sessioned", "compatible")))
        note(f"{name} starts on the {protocol} protocol" + (f" ({connect_protocol})" if protocol == "classic" else ""))
        self.start(name, protocol, connect_protocol)

    @precondition(lambda self: self.classic or self.connect)
    @rule(data=st.data(), how=st.sampled_from(("leave", "crash", "switch", "switch", "static_switch")))
    def stop(self, data: st.DataObject, how: str) -> None:
        name = data.draw(st.sampled_from(sorted([*self.classic, *self.connect])))
        protocol = "classic" if name in self.classic else "connect"
        note(f"{name} ({protocol}): {how}")
        worker = self.classic.pop(name, None) or self.connect.pop(name)
        if how == "crash":
            return  # the process is gone: it runs nothing, its session expires
        if how == "static_switch" and protocol == "connect":
            worker.leave(static=True)  # the connect SDK's stop: its instance waits for it (-2)
        else:
            worker.leave()
        if how in ("switch", "static_switch"):  # a rolling step: the same instance, the other protocol
            self.start(
                name, "connect" if protocol == "classic" else "classic", "default" if self.eager else "sessioned"
            )

    @rule(connectors=CONNECTORS)
    def set_connectors(self, connectors: dict) -> None:
        note(f"connectors {connectors}")
        self.connectors = connectors
        self.d.set_connectors(G, connectors)

    @rule(ms=st.integers(100, 2_000))
    def time_passes(self, ms: int) -> None:
        for _ in range(ms // TICK_MS):
            self.tick()

    @rule(compacted=st.booleans())
    def failover(self, compacted: bool) -> None:
        note(f"failover ({'compacted' if compacted else 'whole'} log)")
        self.d.fail_over(compact(self.d.log) if compacted else None)
        for w in self.classic.values():  # a request waiting at the old coordinator fails
            w.coordinator_gone()

    # --- invariants ------------------------------------------------------------------------------

    @invariant()
    def nothing_runs_twice(self) -> None:
        self.check_running()

    @invariant()
    def replay_and_compacted_replay_give_the_live_state(self) -> None:
        live = self.d.state.slots()
        for log in (self.d.log, compact(self.d.log)):
            replayed = CoordinatorState()
            replayed.replay_all(log)
            assert replayed.slots() == live

    @invariant()
    def the_group_never_goes_back(self) -> None:
        classic = self.d.state.classic_groups.get(G)
        group = self.d.state.groups.get(G)
        version = classic.generation if classic is not None else group.group_epoch if group is not None else 0
        assert version >= self.version, f"went back from {self.version} to {version}"
        self.version = version

    def teardown(self) -> None:
        if not (self.classic or self.connect):
            return
        expected = configured_work(tuple(ConnectorTaskCount(n, t) for n, t in self.connectors.items())).items
        # Nothing changes but time: sessions of crashed workers expire, deferred work is given out.
        for _ in range(200):
            self.tick()
            owned = [i for items in self.running().values() for i in items]
            if len(owned) == len(set(owned)) and set(owned) == expected:
                break
        owned = [i for items in self.running().values() for i in items]
        assert set(owned) == expected and len(owned) == len(set(owned)), (
            f"not converged: {self.running()}, expected {sorted(map(str, expected))}"
        )


def test_mixed_groups_convert_both_ways_and_never_run_an_item_twice() -> None:
    run_state_machine_as_test(
        MixedMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
