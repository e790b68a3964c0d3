"""Issue 27, item 2: a classic leader assigns exactly as Kafka Connect's leader does.

`coordinator/core/assignors/connect_leader.py` ports Connect's leader-side assignment. Here the same
rounds run through Connect's own code (connect-runtime 4.3.1: `WorkerCoordinator.onLeaderElected`,
hence `EagerAssignor` and `IncrementalCooperativeAssignor`, driven by
tests/java/org/apache/kafka/connect/runtime/distributed/AssignorDriver.java with a clock the test
moves) and through the port, and every member's assignment is compared, round by round.

A `Cluster` plays the workers: each sends Connect's JoinGroup metadata bytes (its URL, config
offset and the assignment it runs, `records.connect_protocol.encode_metadata`), the leader's
process assigns, and every worker applies what Connect's leader answered as
`WorkerCoordinator.onJoinComplete` does (stop the revoked, add the assigned, remember the rest), so
that the next round starts from what Connect would have. The leader's memory lives in its process:
a restarted worker, or another leader, starts with none.

Java and Maven are prerequisites (tests/connect_java.py): the Java driver is compiled once and one
JVM serves the whole module.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import select
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import connect_java
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from records.connect_protocol import (
    COMPATIBLE,
    CONFIG_MISMATCH,
    DEFAULT,
    NO_ERROR,
    SESSIONED,
    VERSIONS,
    WorkerAssignment,
    WorkerMetadata,
    decode_assignment,
    decode_metadata,
    encode_metadata,
)
from records.model import ConnectorsAndTasks, TaskId

from coordinator.core.assignors.connect_leader import (
    ConfigSnapshot,
    ConnectLeaderAssignor,
    _java_hash_order,
    _java_order,
    _java_string_hash,
)
from coordinator.tools import maven

HERE = Path(__file__).resolve().parent
DRIVER = [HERE / "java" / "org" / "apache" / "kafka" / "connect" / "runtime" / "distributed" / "AssignorDriver.java"]
MAIN = "org.apache.kafka.connect.runtime.distributed.AssignorDriver"
ANSWER_TIMEOUT_S = 60.0
MAX_DELAY = 300_000  # scheduled.rebalance.max.delay.ms, Connect's default


# --- the Java side ---------------------------------------------------------------------------------


class ConnectDriver:
    """One JVM running AssignorDriver: a JSON line in, a JSON line out."""

    def __init__(self) -> None:
        classes = connect_java.compiled(DRIVER)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (the JVM's stderr, closed in close())
        self._process = subprocess.Popen(
            [maven.java(), "-XX:TieredStopAtLevel=1", "-cp", connect_java.classpath(classes), MAIN],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
        )  # fmt: skip
        self._names = itertools.count(1)

    def scenario(self) -> str:
        """A prefix that keeps one test's coordinators apart from another's in the shared JVM."""
        return f"s{next(self._names)}"

    def ask(self, request: Mapping[str, object]) -> dict:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request).encode() + b"\n")
        self._process.stdin.flush()
        ready, _, _ = select.select([self._process.stdout], [], [], ANSWER_TIMEOUT_S)
        line = self._process.stdout.readline() if ready else b""
        if not line:
            self._stderr.seek(0)
            pytest.fail(
                f"the Java driver did not answer (exit {self._process.poll()}):\n"
                f"{self._stderr.read().decode(errors='replace')[-4000:]}"
            )
        answer = json.loads(line)
        if "error" in answer:
            pytest.fail(f"Connect's assignor failed:\n{answer['error']}")
        return answer

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()


@pytest.fixture(scope="module")
def connect() -> Iterator[ConnectDriver]:
    connect_java.require()
    driver = ConnectDriver()
    try:
        yield driver
    finally:
        driver.close()


# --- the cluster the tests play ------------------------------------------------------------------------


@dataclass
class Worker:
    name: str
    incarnation: int
    member_id: str
    offset: int
    snapshot: WorkerAssignment | None = None  # WorkerCoordinator.assignmentSnapshot
    last_completed: int = -1  # WorkerCoordinator.lastCompletedGenerationId

    @property
    def url(self) -> str:
        return f"http://{self.name}:8083/"

    @property
    def process(self) -> str:
        return f"{self.name}#{self.incarnation}"


def runs(assignment: WorkerAssignment | None) -> ConnectorsAndTasks:
    return assignment.assigned if assignment is not None else ConnectorsAndTasks()


def as_sets(a: WorkerAssignment) -> dict:
    """An assignment with its lists as multisets (Java's order is its collections', not meaningful)."""
    return {
        "error": a.error,
        "leader": a.leader,
        "leader_url": a.leader_url,
        "config_offset": a.config_offset,
        "version": a.version,
        "delay_ms": a.delay_ms,
        "assigned": (Counter(a.assigned.connectors), Counter(a.assigned.tasks)),
        "revoked": (Counter(a.revoked.connectors), Counter(a.revoked.tasks)),
    }


@dataclass
class Round:
    generation: int
    leader: str  # member id
    java: dict[str, WorkerAssignment]
    python: dict[str, WorkerAssignment]

    def delay(self) -> int:
        return next(iter(self.java.values())).delay_ms


@dataclass
class Cluster:
    """A Connect group at the classic protocol: workers joining, leaving, restarting; the config
    topic; the clock. Every `rebalance()` is one generation."""

    connect: ConnectDriver
    protocol: str = SESSIONED
    max_delay_ms: int = MAX_DELAY
    seed: int = 0
    connectors: dict[str, int] = field(default_factory=dict)
    config_offset: int = 0
    now: int = 0
    generation: int = 0
    workers: dict[str, Worker] = field(default_factory=dict)  # in join order
    leader: str | None = None  # the leading worker's name
    rounds: list[Round] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._scenario = self.connect.scenario()
        self._random = random.Random(self.seed)
        self._incarnations: Counter[str] = Counter()
        self._assignors: dict[str, ConnectLeaderAssignor] = {}
        self._history: dict[int, dict[str, int]] = {0: {}}  # the config topic's state at each offset

    # The scenario's moves.

    def configure(self, connectors: Mapping[str, int], *, lagging: tuple[str, ...] = ()) -> None:
        """A new config topic state (connectors and task counts); every worker reads it but `lagging`."""
        self.connectors = dict(connectors)
        self.config_offset += 1
        self._history[self.config_offset] = self.connectors
        for worker in self.workers.values():
            if worker.name not in lagging:
                worker.offset = self.config_offset

    def start(self, *names: str) -> None:
        """Workers (re)start: a new process, a new member id, nothing running."""
        for name in names:
            self._incarnations[name] += 1
            self.workers.pop(name, None)
            self.workers[name] = Worker(name, self._incarnations[name], self._member_id(name), self.config_offset)

    def stop(self, *names: str) -> None:
        for name in names:
            del self.workers[name]
            if self.leader == name:
                self.leader = None

    def rejoin(self, name: str) -> None:
        """The worker was fenced (its session expired) and joins again with a new member id, still
        running what it ran (cooperative workers keep their assignment until told to revoke)."""
        worker = self.workers.pop(name)
        worker.member_id = self._member_id(name)
        self.workers[name] = worker
        if self.leader == name:
            self.leader = None

    def advance(self, ms: int) -> None:
        self.now += ms

    def member(self, name: str) -> str:
        return self.workers[name].member_id

    def runs(self, name: str) -> ConnectorsAndTasks:
        return runs(self.workers[name].snapshot)

    # One generation.

    def rebalance(
        self,
        *,
        leader: str | None = None,
        protocol: str | None = None,
        fresh_config: bool = False,
        sync: bool = True,
        missed: tuple[str, ...] = (),
        order: list[str] | None = None,
    ) -> Round:
        """Every worker joins; the leader assigns through Connect and through the port; both must
        agree; every worker applies Connect's answer (unless the leader's sync fails: `sync=False`;
        or the workers in `missed` do not get it).
        `fresh_config`: the leader reads the config topic up to date when its snapshot is behind
        (else its snapshot is its own offset). `order`: the JoinGroup response's member order."""
        protocol = protocol or self.protocol
        self.generation += 1
        if leader is not None:
            self.leader = leader
        elif self.leader not in self.workers:
            self.leader = next(iter(self.workers))
        lead = self.workers[self.leader]
        names = order or list(self.workers)
        metadata = {
            self.workers[n].member_id: encode_metadata(
                WorkerMetadata(self.workers[n].url, self.workers[n].offset, self.workers[n].snapshot), protocol
            )
            for n in names
        }
        snapshot = {"offset": lead.offset, "connectors": self._history[lead.offset]}
        fresh = {"offset": self.config_offset, "connectors": self.connectors} if fresh_config else None
        process = f"{self._scenario}/{lead.process}"
        answer = self.connect.ask(
            {
                "coordinator": process,
                "max_delay_ms": self.max_delay_ms,
                "now_ms": self.now,
                "generation": self.generation,
                "last_completed_generation": lead.last_completed,
                "protocol": protocol,
                "leader": lead.member_id,
                "config": snapshot,
                "fresh_config": fresh,
                "members": [{"id": m, "metadata": base64.b64encode(data).decode()} for m, data in metadata.items()],
            }
        )["assignments"]
        java = {m: decode_assignment(base64.b64decode(data)) for m, data in answer.items()}

        assignor = self._assignors.setdefault(process, ConnectLeaderAssignor(self.max_delay_ms))
        python = assignor.assign(
            protocol,
            lead.member_id,
            {m: decode_metadata(data) for m, data in metadata.items()},
            ConfigSnapshot(snapshot["offset"], snapshot["connectors"]),
            generation=self.generation,
            last_completed_generation=lead.last_completed,
            now_ms=self.now,
            fresh_config=None if fresh is None else ConfigSnapshot(fresh["offset"], fresh["connectors"]),
        )
        where = f"generation {self.generation} ({protocol}, leader {self.leader}, t={self.now} ms)"
        assert python.keys() == java.keys(), where
        assert {m: as_sets(a) for m, a in python.items()} == {m: as_sets(a) for m, a in java.items()}, where
        for a in python.values():  # the port's own lists hold no duplicates and are sorted (Java's way)
            assert len(set(a.assigned.tasks)) == len(a.assigned.tasks)
            assert list(a.assigned.tasks) == sorted(a.assigned.tasks, key=lambda t: (_java_order(t.connector), t.task))

        round_ = Round(self.generation, lead.member_id, java, python)
        self.rounds.append(round_)
        if sync:
            synced = [w for w in self.workers.values() if w.name not in missed]
            for worker in synced:
                worker.snapshot = self._join_complete(worker.snapshot, java[worker.member_id], protocol)
                worker.last_completed = self.generation
            if java[lead.member_id].error == NO_ERROR:
                # The leader's state is what every member runs now.
                assert assignor.leader_state is not None
                assert {w.member_id: _sets(runs(w.snapshot)) for w in synced} == {
                    w.member_id: _sets(assignor.leader_state[w.member_id]) for w in synced
                }, where
        return round_

    @staticmethod
    def _join_complete(snapshot: WorkerAssignment | None, new: WorkerAssignment, protocol: str) -> WorkerAssignment:
        """WorkerCoordinator.onJoinComplete: cooperative workers stop the revoked items and keep
        the rest after the newly assigned ones; eager workers take the assignment whole."""
        if protocol == DEFAULT or snapshot is None:
            return new
        revoked_connectors, revoked_tasks = set(new.revoked.connectors), set(new.revoked.tasks)
        return replace(
            new,
            assigned=ConnectorsAndTasks(
                new.assigned.connectors + tuple(c for c in snapshot.assigned.connectors if c not in revoked_connectors),
                new.assigned.tasks + tuple(t for t in snapshot.assigned.tasks if t not in revoked_tasks),
            ),
        )

    def _member_id(self, name: str) -> str:
        return f"connect-{name}-{self._random.getrandbits(64):016x}"

    # What the group runs.

    def running(self) -> dict[str, tuple[set[str], set[TaskId]]]:
        return {name: _sets(runs(w.snapshot)) for name, w in self.workers.items()}

    def unassigned(self) -> tuple[set[str], set[TaskId]]:
        connectors = set(self.connectors)
        tasks = {TaskId(c, t) for c, n in self.connectors.items() for t in range(n)}
        for running_connectors, running_tasks in self.running().values():
            connectors -= running_connectors
            tasks -= running_tasks
        return connectors, tasks

    def loads(self) -> dict[str, tuple[int, int]]:
        return {name: (len(c), len(t)) for name, (c, t) in self.running().items()}


def _sets(c: ConnectorsAndTasks) -> tuple[set[str], set[TaskId]]:
    return set(c.connectors), set(c.tasks)


def balanced(cluster: Cluster) -> bool:
    connectors = [c for c, _ in cluster.loads().values()]
    tasks = [t for _, t in cluster.loads().values()]
    return max(connectors) - min(connectors) <= 1 and max(tasks) - min(tasks) <= 1


def settle(cluster: Cluster, rounds: int = 4) -> None:
    """Rebalance while Connect asks for it: revocations are followed by the round that assigns them."""
    for _ in range(rounds):
        r = cluster.rebalance()
        if not any(a.revoked.connectors or a.revoked.tasks for a in r.java.values()) and r.delay() == 0:
            return


CONNECTORS = {"jdbc-source": 4, "s3-sink": 6, "mirror": 3, "files": 1, "http-sink": 5}


# --- scenarios -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [SESSIONED, COMPATIBLE])
@pytest.mark.parametrize("workers", [1, 2, 3, 4, 5])
def test_first_join(connect: ConnectDriver, workers: int, protocol: str) -> None:
    cluster = Cluster(connect, protocol=protocol, seed=workers)
    cluster.configure(CONNECTORS)
    cluster.start(*(f"w{i}" for i in range(1, workers + 1)))
    first = cluster.rebalance()
    assert all(a.version == VERSIONS[protocol] and a.delay_ms == 0 for a in first.java.values())
    assert cluster.unassigned() == (set(), set())
    assert balanced(cluster)
    steady = cluster.rebalance()  # nothing changed: nothing moves
    assert all(not a.assigned.connectors and not a.assigned.tasks and not a.revoked.tasks for a in steady.java.values())


def test_scale_out(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=11)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2")
    cluster.rebalance()
    for name in ("w3", "w4", "w5"):
        cluster.start(name)
        revoking = cluster.rebalance()
        assert any(a.revoked.tasks for a in revoking.java.values())  # balance first revokes ...
        cluster.rebalance()  # ... then assigns what was revoked
        assert cluster.unassigned() == (set(), set())
        assert balanced(cluster)


def test_two_workers_join_at_once_and_one_more_right_after(connect: ConnectDriver) -> None:
    """Two revoking rounds in a row: Connect waits an exponential backoff before revoking again."""
    cluster = Cluster(connect, seed=12)
    cluster.configure({"a": 12, "b": 12})
    cluster.start("w1")
    cluster.rebalance()
    cluster.start("w2", "w3")
    cluster.rebalance()  # revokes from w1
    cluster.start("w4")
    backoff = cluster.rebalance()  # the revoked are assigned; w4 wants some: a second revoking round
    assert backoff.delay() == 40  # ExponentialBackoff(1, 40, max delay): 40 ms after one successive round
    cluster.advance(10)
    waiting = cluster.rebalance()
    assert waiting.delay() == 30
    cluster.advance(30)
    settle(cluster)
    assert balanced(cluster)
    assert cluster.unassigned() == (set(), set())


def test_worker_leaves_and_returns_within_the_delay(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=13)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    left = set(cluster.runs("w2").tasks)
    cluster.stop("w2")
    lost = cluster.rebalance()
    assert lost.delay() == MAX_DELAY  # the lost work waits for w2
    assert cluster.unassigned()[1] == left
    cluster.advance(20_000)
    cluster.start("w2")  # a new process: a new member id, nothing running
    back = cluster.rebalance()
    assert back.delay() == MAX_DELAY - 20_000
    assert not back.java[cluster.member("w2")].assigned.tasks  # nothing until the delay is over
    cluster.advance(MAX_DELAY - 20_000)
    due = cluster.rebalance()  # the rebalance the delay scheduled: w2 was empty, it takes the lost work
    assert set(due.java[cluster.member("w2")].assigned.tasks) == left
    assert due.delay() == 0
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


def test_fenced_worker_rejoins_still_running_its_work(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=14)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    kept = cluster.runs("w3")
    cluster.stop("w3")
    cluster.rebalance()
    cluster.start("w3")
    cluster.workers["w3"].snapshot = WorkerAssignment(assigned=kept)  # it comes back with its old work
    back = cluster.rebalance()
    assert back.delay() == 0  # nothing is lost any more: the delay is cancelled
    cluster.rejoin("w1")  # a session timeout: new member id, same work
    cluster.rebalance()
    assert cluster.unassigned() == (set(), set())


def test_worker_leaves_and_the_delay_expires(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=15)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2", "w3", "w4")
    settle(cluster)
    cluster.stop("w3")
    assert cluster.rebalance().delay() == MAX_DELAY
    cluster.advance(60_000)
    assert cluster.rebalance().delay() == MAX_DELAY - 60_000  # an unrelated rebalance: the deadline holds
    cluster.advance(MAX_DELAY)  # past the deadline
    due = cluster.rebalance()
    assert due.delay() == 0
    assert cluster.unassigned() == (set(), set())  # no candidate: the lost work is assigned as new
    settle(cluster)
    assert balanced(cluster)


def test_new_workers_during_the_delay_take_the_lost_work(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=16)
    cluster.configure({"a": 2, "b": 9, "c": 4, "d": 1, "e": 3})
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    left = cluster.runs("w2")
    cluster.stop("w2")
    cluster.rebalance()
    cluster.start("w4", "w5")
    cluster.rebalance()
    cluster.advance(MAX_DELAY)
    due = cluster.rebalance()  # the candidates share the lost work round-robin, connectors then tasks
    given = [due.java[cluster.member(n)].assigned for n in ("w4", "w5")]
    assert {c for a in given for c in a.connectors} == set(left.connectors)
    assert {t for a in given for t in a.tasks} == set(left.tasks)
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


def test_the_leader_leaves(connect: ConnectDriver) -> None:
    """The next leader's process has no memory of the group: the departed leader's work is not lost
    to it but new, and is assigned at once."""
    cluster = Cluster(connect, seed=21)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    cluster.stop("w1")
    at_once = cluster.rebalance()
    assert at_once.delay() == 0
    assert cluster.unassigned() == (set(), set())


def test_two_departures_in_turn(connect: ConnectDriver) -> None:
    """Candidates are forgotten once a delay is over: the next departure's work goes to the next
    new worker only."""
    cluster = Cluster(connect, seed=22)
    cluster.configure({"a": 3, "b": 8, "c": 2})
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    cluster.stop("w2")
    cluster.rebalance()
    cluster.start("w4")
    cluster.rebalance()
    cluster.advance(MAX_DELAY)
    cluster.rebalance()
    settle(cluster)
    cluster.stop("w3")
    cluster.rebalance()
    cluster.start("w5")
    cluster.rebalance()
    cluster.advance(MAX_DELAY)
    due = cluster.rebalance()
    assert not due.java[cluster.member("w4")].assigned.tasks
    assert due.java[cluster.member("w5")].assigned.tasks
    settle(cluster)


def test_large_group(connect: ConnectDriver) -> None:
    """More than twelve members: Connect's member map has 32 buckets, its set of candidates 16, so
    the candidates are visited in an order of their own."""
    cluster = Cluster(connect, seed=23)
    cluster.configure({f"c{i}": i % 5 for i in range(17)})
    cluster.start(*(f"w{i:02}" for i in range(14)))
    settle(cluster)
    cluster.stop("w03", "w07", "w11")
    cluster.rebalance()
    cluster.start("n1", "n2", "n3", "n4", "n5")
    cluster.rebalance()
    cluster.advance(MAX_DELAY)
    cluster.rebalance()
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


def test_a_member_misses_its_revocation(connect: ConnectDriver) -> None:
    """A member does not get the assignment that revoked its work and reports it again: the
    leader starts over from what members run."""
    cluster = Cluster(connect, seed=24)
    cluster.configure({"a": 6, "b": 6})
    cluster.start("w1", "w2")
    settle(cluster)
    cluster.start("w3")
    revoking = cluster.rebalance(missed=("w2",))
    assert revoking.java[cluster.member("w2")].revoked.tasks
    cluster.rebalance()
    settle(cluster)
    assert cluster.unassigned() == (set(), set())
    assert balanced(cluster)


def test_lost_work_with_candidates_that_leave_before_the_deadline(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=17)
    cluster.configure({"a": 7, "b": 2})
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    cluster.stop("w2")
    cluster.rebalance()
    cluster.start("w4", "w5")
    cluster.rebalance()
    cluster.advance(100_000)
    cluster.stop("w4")
    cluster.rebalance()
    cluster.advance(MAX_DELAY)
    cluster.rebalance()
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


def test_connectors_added_removed_and_resized(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=18)
    cluster.configure({"a": 2, "b": 3})
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    cluster.configure({"a": 2, "b": 3, "c": 4, "d": 1})  # added
    cluster.rebalance()
    assert cluster.unassigned() == (set(), set())
    cluster.configure({"a": 5, "b": 1, "c": 4, "d": 1})  # task counts changed
    cluster.rebalance()
    cluster.configure({"a": 5, "c": 0, "e": 2})  # b, d removed; c has no tasks
    removed = cluster.rebalance()
    assert {c for a in removed.java.values() for c in a.revoked.connectors} >= {"b", "d"}
    settle(cluster)
    assert cluster.unassigned() == (set(), set())
    cluster.configure({})
    cluster.rebalance()
    assert all(c == (set(), set()) for c in cluster.running().values())


def test_rolling_restart(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=19)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    for name in ("w1", "w2", "w3"):  # w1 first: the leader restarts, another process leads
        cluster.stop(name)
        cluster.rebalance()
        cluster.advance(5_000)
        cluster.start(name)
        cluster.rebalance()
        cluster.advance(10_000)
    cluster.advance(MAX_DELAY)
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


def test_restart_within_one_rebalance(connect: ConnectDriver) -> None:
    """A worker restarts so fast that the group sees a new member instead of the old one."""
    cluster = Cluster(connect, seed=20)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    cluster.start("w2")  # w2's old member is gone, its new one joins in the same round
    restarted = cluster.rebalance()
    assert restarted.delay() == MAX_DELAY
    cluster.advance(MAX_DELAY)
    due = cluster.rebalance()
    assert due.java[cluster.member("w2")].assigned.tasks  # the candidate gets its old work back
    settle(cluster)


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
def test_eager_default_protocol(connect: ConnectDriver, workers: int) -> None:
    cluster = Cluster(connect, protocol=DEFAULT, seed=30 + workers)
    cluster.configure(CONNECTORS)
    cluster.start(*(f"w{i}" for i in range(1, workers + 1)))
    first = cluster.rebalance()
    assert all(a.version == 0 for a in first.java.values())
    assert cluster.unassigned() == (set(), set())
    cluster.start("late")
    cluster.rebalance()
    cluster.stop("w1")
    cluster.rebalance()
    cluster.configure({"x": 2, "jdbc-source": 1})
    cluster.rebalance()
    assert cluster.unassigned() == (set(), set())


def test_protocol_changes_between_generations(connect: ConnectDriver) -> None:
    """The group's protocol is chosen per generation: a worker that offers less joins and leaves."""
    cluster = Cluster(connect, seed=40)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2")
    settle(cluster)
    cluster.start("old")
    cluster.rebalance(protocol=COMPATIBLE)
    cluster.rebalance(protocol=COMPATIBLE)
    cluster.rebalance(protocol=DEFAULT)
    cluster.stop("old")
    cluster.rebalance(protocol=SESSIONED)  # from an eager round: the leader's memory is stale
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


def test_leader_change(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=41)
    cluster.configure(CONNECTORS)
    cluster.start("w1", "w2", "w3", "w4")
    settle(cluster)
    cluster.stop("w4")
    cluster.rebalance(leader="w1")  # w1 schedules a rebalance for w4's work ...
    cluster.rebalance(leader="w2")  # ... w2 never saw w4 leave: its assignor has no memory
    cluster.advance(MAX_DELAY)
    cluster.rebalance(leader="w1")  # w1 again, with memory from two generations ago: cleared
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


def test_leader_sync_fails(connect: ConnectDriver) -> None:
    """The members never got the leader's assignment: its memory no longer matches a completed
    generation, and what went missing is reassigned as new."""
    cluster = Cluster(connect, seed=42)
    cluster.configure({"a": 4})
    cluster.start("w1")
    cluster.rebalance(sync=False)
    cluster.rebalance()
    cluster.start("w2")
    cluster.rebalance(sync=False)
    cluster.configure({"a": 4, "b": 2})
    cluster.rebalance()
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


def test_config_mismatch(connect: ConnectDriver) -> None:
    cluster = Cluster(connect, seed=43)
    cluster.configure({"a": 3})
    cluster.start("w1", "w2")
    settle(cluster)
    cluster.configure({"a": 3, "b": 3}, lagging=("w1",))  # the leader has not read the new config
    behind = cluster.rebalance()
    assert all(a.error == CONFIG_MISMATCH and a.config_offset == cluster.config_offset for a in behind.java.values())
    caught_up = cluster.rebalance(fresh_config=True)  # it reads the topic when assigning: no mismatch
    assert all(a.error == NO_ERROR for a in caught_up.java.values())
    cluster.workers["w1"].offset = cluster.config_offset
    cluster.configure({"a": 1, "b": 3}, lagging=("w2",))  # a member behind: it waits, the leader assigns
    ahead = cluster.rebalance()
    assert all(a.error == NO_ERROR and a.config_offset == cluster.config_offset for a in ahead.java.values())
    cluster.configure({"a": 1}, lagging=("w1",))
    eager = cluster.rebalance(protocol=DEFAULT)
    assert all(a.error == CONFIG_MISMATCH for a in eager.java.values())


def test_a_missed_revocation_during_the_delay(connect: ConnectDriver) -> None:
    """While lost work waits, a member misses the revocation of a deleted connector: Connect's
    leader then trusts what members run over its memory, forgets the lost work and assigns it as
    new at once."""
    cluster = Cluster(connect, seed=25)
    cluster.configure({"a": 3, "b": 4, "c": 2, "d": 5})
    cluster.start("w1", "w2", "w3", "w4")
    settle(cluster)
    cluster.stop("w2")
    assert cluster.rebalance().delay() == MAX_DELAY
    doomed = cluster.runs("w3").connectors[0]
    cluster.configure({c: n for c, n in cluster.connectors.items() if c != doomed})
    deleting = cluster.rebalance(missed=("w3",))
    assert doomed in deleting.java[cluster.member("w3")].revoked.connectors
    again = cluster.rebalance()
    assert again.delay() == 0
    assert cluster.unassigned() == (set(), set())


def test_duplicated_assignments(connect: ConnectDriver) -> None:
    """Two members say they run the same work (a zombie): Connect revokes it from both."""
    cluster = Cluster(connect, seed=44)
    cluster.configure({"a": 4, "b": 2})
    cluster.start("w1", "w2", "w3")
    settle(cluster)
    both = cluster.runs("w1")
    mixed = ConnectorsAndTasks(both.connectors, both.tasks + cluster.runs("w2").tasks[:1])
    cluster.workers["w2"].snapshot = WorkerAssignment(
        assigned=ConnectorsAndTasks(
            cluster.runs("w2").connectors + both.connectors, cluster.runs("w2").tasks + both.tasks[:2]
        )
    )
    cluster.workers["w3"].snapshot = WorkerAssignment(assigned=mixed)
    duplicated = cluster.rebalance()
    assert duplicated.java[cluster.member("w1")].revoked.tasks
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


@pytest.mark.parametrize("protocol", [SESSIONED, DEFAULT])
def test_names_outside_the_basic_plane(connect: ConnectDriver, protocol: str) -> None:
    """Java sorts strings by UTF-16 code unit: an emoji (a surrogate pair, 0xD83D...) comes before
    U+FFFD, which Python's code point order puts the other way round."""
    cluster = Cluster(connect, protocol=protocol, seed=26)
    cluster.configure({"\U0001f600": 3, "\ufffd": 2, "\uff21": 1, "\U00010400x": 4, "z": 1})
    cluster.start("\ufffd", "\U0001f600", "\u00e9t\u00e9")
    settle(cluster)
    cluster.start("\U0001d11e")
    settle(cluster)
    cluster.configure({"\U0001f600": 1, "\ufffd": 5, "\U0001f601": 2, "\U00010400x": 4, "z": 1})
    settle(cluster)
    assert cluster.unassigned() == (set(), set())


@pytest.mark.parametrize("max_delay", [0, 1, 40, 10_000])
def test_small_scheduled_rebalance_delays(connect: ConnectDriver, max_delay: int) -> None:
    cluster = Cluster(connect, max_delay_ms=max_delay, seed=45 + max_delay)
    cluster.configure({"a": 9, "b": 4})
    cluster.start("w1")
    cluster.rebalance()
    cluster.start("w2", "w3")
    cluster.rebalance()
    cluster.start("w4")
    cluster.rebalance()
    cluster.stop("w2")
    cluster.rebalance()
    cluster.advance(max_delay)
    settle(cluster, rounds=6)
    cluster.advance(max_delay)
    settle(cluster, rounds=6)


@pytest.mark.parametrize(
    "max_delay",
    [0, 1, 2, 39, 40, 41, 1599, 1600, 1601, 64_000, 299_999, 300_000, 2_560_000, 2**31 - 1, *range(60_000, 60_050)],
)
def test_successive_revocation_backoff(connect: ConnectDriver, max_delay: int) -> None:
    """The delay after successive revoking rebalances, floating point included."""
    attempts = list(range(12))
    java = connect.ask({"backoff": {"max_delay_ms": max_delay, "attempts": attempts}})["backoff"]
    python = [ConnectLeaderAssignor(max_delay)._backoff(a) for a in attempts]
    assert python == java


def _spread(key: str) -> int:
    """HashMap.hash of a string."""
    h = _java_string_hash(key)
    return h ^ (h >> 16)


# Eight strings with equal String.hashCode ("Aa" and "BB" collide).
COLLIDING = ["".join(p) for p in itertools.product(["Aa", "BB"], repeat=3)]
# Nine member ids in one bucket of a 16-bucket table but not of a 32-bucket one: the ninth put
# makes HashMap.treeifyBin resize the small table.
CROWDED = [k for k in (f"m{i}" for i in range(2_000)) if _spread(k) % 16 == 5][:9]


@pytest.mark.parametrize(
    "keys",
    [
        ["b", "a", "c"],
        ["q", "a"],  # 'a' 97 and 'q' 113: the same bucket of 16, so insertion order
        [f"k{i}" for i in range(13)],  # 13 puts resize 16 buckets to 32
        [f"connect-{i}-{i * 7919:08x}" for i in range(60)],
        [*COLLIDING, "Ab", "a"],  # 8 in one bucket, then a 9th elsewhere
        [*COLLIDING, "BBBBBBx", "AaBBAb"],
        CROWDED,
        ["x", *CROWDED, "y", "z"],
    ],
    ids=lambda keys: f"{len(keys)}-keys",
)
def test_java_hash_map_order(connect: ConnectDriver, keys: list[str]) -> None:
    """The iteration order of Connect's HashMap of member ids, which decides who sheds and who keeps
    an extra item: bucket of String.hashCode at the table size the puts reach, then insertion."""
    assert _java_hash_order(keys) == connect.ask({"hash_order": keys})["hash_order"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.text(min_size=1, max_size=12), max_size=40, unique=True))
def test_java_hash_map_order_of_any_strings(connect: ConnectDriver, keys: list[str]) -> None:
    assert _java_hash_order(keys) == connect.ask({"hash_order": keys})["hash_order"]


# --- random sequences -------------------------------------------------------------------------------


NAMES = ["w1", "w2", "w3", "w4", "w5", "w6", "w7"]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, int, list[tuple]]:
    protocol = draw(st.sampled_from([SESSIONED, SESSIONED, COMPATIBLE, DEFAULT]))
    max_delay = draw(st.sampled_from([0, 1, 50, 1_000, MAX_DELAY]))
    action = st.one_of(
        st.tuples(st.just("start"), st.sampled_from(NAMES)),
        st.tuples(st.just("start"), st.sampled_from(NAMES)),
        st.tuples(st.just("stop"), st.integers(0, 6)),
        st.tuples(st.just("stop"), st.integers(0, 6)),
        st.tuples(st.just("rejoin"), st.integers(0, 6)),
        # Clock steps, some of them around the scheduled delay (-1, exactly, +1) and the backoffs.
        st.tuples(st.just("advance"), st.sampled_from([1, 10, 39, 40, 41, 500, 60_000, MAX_DELAY])),
        st.tuples(st.just("advance_delay"), st.sampled_from([-1, 0, 1])),
        st.tuples(
            st.just("configure"),
            st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "f"]), st.integers(0, 9), max_size=5),
            st.lists(st.integers(0, 6), max_size=2),
        ),
        st.tuples(st.just("nothing")),
    )
    # Each action, then (usually) a rebalance.
    steps = draw(st.lists(st.tuples(action, st.booleans() | st.just(True)), min_size=1, max_size=30))
    return protocol, max_delay, steps


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenario=scenarios(), seed=st.integers(0, 2**32 - 1))
def test_random_sequences(connect: ConnectDriver, scenario: tuple[str, int, list[tuple]], seed: int) -> None:
    """Random joins, leaves, restarts, fencing, clock steps and config changes (some workers left
    behind); the leader is now and then another member, the JoinGroup response in any order, the
    protocol sometimes another, a sync sometimes fails. Every round of Connect and of the port
    must agree."""
    protocol, max_delay, steps = scenario
    cluster = Cluster(connect, protocol=protocol, max_delay_ms=max_delay, seed=seed)
    cluster.configure({"a": 3, "b": 5, "c": 1})
    cluster.start("w1", "w2")
    rng = random.Random(seed)
    for action, then_rebalance in [*steps, (("nothing",), True)]:
        kind = action[0]
        if kind == "start":
            cluster.start(action[1])
        elif kind in ("stop", "rejoin") and len(cluster.workers) > 1:
            name = list(cluster.workers)[action[1] % len(cluster.workers)]
            if kind == "stop":
                cluster.stop(name)
            else:
                cluster.rejoin(name)
        elif kind == "advance":
            cluster.advance(action[1])
        elif kind == "advance_delay":
            cluster.advance(max(max_delay + action[1], 0))
        elif kind == "configure":
            names = list(cluster.workers)
            cluster.configure(action[1], lagging=tuple(names[i % len(names)] for i in action[2]))
        if then_rebalance:
            names = list(cluster.workers)
            cluster.rebalance(
                leader=rng.choice(names) if rng.random() < 0.2 else None,
                protocol=rng.choice([SESSIONED, COMPATIBLE, DEFAULT]) if rng.random() < 0.1 else None,
                order=rng.sample(names, len(names)),
                fresh_config=rng.random() < 0.5,
                sync=rng.random() < 0.9,
                missed=tuple(n for n in names if n != cluster.leader and rng.random() < 0.05),
            )
