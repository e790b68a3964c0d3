"""Stories of unmodified Kafka Connect 4.3.1 workers on our coordinator (issue 28, item 9), beside
test_connect_real's first ones: `ConnectDistributed` JVMs whose `bootstrap.servers` is the gateway,
in front of two `coordinator serve` instances in group ownership (each with its own Kafka listener,
the gateway given both).

(a) Three workers; a fourth added, one stopped (SIGTERM), one killed (SIGKILL): Connect's incremental
    cooperative rounds move only what the newcomer is given, never a task on two workers, and a
    killed worker's tasks (one that is not Connect's leader) wait `scheduled.rebalance.max.delay.ms`
    before they move.
(b) kill -9 of the coordinator instance that owns the workers' group: the workers find the other
    through the gateway and carry on in the one group; no worker exits, the real broker never has
    the group.
(c) `connect.protocol` eager (the whole cluster at once), then worker by worker up to compatible and
    to sessioned: the group's protocol follows and every task runs once throughout. (Worker by
    worker downwards, Connect itself runs tasks twice: KAFKA-13816, below.)

"Never a task on two workers" is looked at three ways, all the time (a `Watch`): our own view (the
coordinator's description of the group, read from Connect's assignment bytes), Connect's REST status
as every live worker reads it, and, after each story, the workers' own logs (when each started and
finished stopping each task, on one clock).

One cluster of JVMs for the module: each start costs seconds on our 2-core machines."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from kafka_groups import groups_at

from coordinator.tools.connect_worker import ConnectWorker, http, source_connector, until
from coordinator.tools.devbroker import free_port
from coordinator.tools.partitions import partition_for
from coordinator.tools.process import ServeProcess
from tests.support.require import require
from tests.topics import create_topic

pytestmark = pytest.mark.integration

TASKS = 6
DELAY_MS = 8_000  # scheduled.rebalance.max.delay.ms of every worker here
SESSION_MS = 6_000  # the workers' session.timeout.ms
PARTITIONS = 2
ITEMS = ["src", *(f"src-{i}" for i in range(TASKS))]


@dataclass
class Sample:
    """One look at the group: when (epoch ms), our description's holders, and Connect's status."""

    at_ms: int
    generation: int | None
    protocol: str | None
    holders: dict[str, set[str]]  # member URL -> items ("src", "src-0", ...)
    rest: dict[str, dict[str, str]]  # the worker asked (URL) -> task -> worker_id RUNNING it


@dataclass
class Cluster:
    broker: str
    topic: str
    group: str
    run_dir: Path
    serves: list[ServeProcess] = field(default_factory=list)
    workers: dict[str, ConnectWorker] = field(default_factory=dict)
    gateway: subprocess.Popen | None = None
    gateway_port: int = 0
    killed_ms: dict[str, int] = field(default_factory=dict)  # worker name -> when it was killed (-9)
    watch: Watch | None = None
    told: set[str] = field(default_factory=set)  # the stories told to the end in this cluster: "a", ...

    def worker(self, name: str, **settings: object) -> ConnectWorker:
        """A new worker (not started) named `name`, replacing any earlier one of that name."""
        w = ConnectWorker(
            self.run_dir,
            name,
            f"127.0.0.1:{self.gateway_port}",
            self.broker,
            self.group,
            session_ms=SESSION_MS,
            delay_ms=DELAY_MS,
            **settings,
        )
        self.workers[name] = w
        return w

    def live(self) -> list[ConnectWorker]:
        return [w for w in self.workers.values() if w.alive()]

    def url(self, w: ConnectWorker) -> str:
        return f"{w.url}/"

    def describe(self) -> dict | None:
        """Our description of the group (GET /v1/groups/G, what `groups describe` shows) from the
        live instance that serves it, or None while none does."""
        for s in self.serves:
            if s.process is None or s.process.poll() is not None:
                continue
            status, body = http("GET", f"{s.url}/v1/groups/{self.group}")
            if status == 200 and isinstance(body, dict) and "Members" in body:
                return body
        return None

    def describe_cli(self) -> dict:
        """`coordinator groups describe G --format json`, asked of a live instance."""
        url = next(s.url for s in self.serves if s.process is not None and s.process.poll() is None)
        out = subprocess.run(
            [sys.executable, "-m", "coordinator", "groups", "describe", self.group, "--url", url, "--format", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        return orjson.loads(out.stdout)

    def timeline(self) -> list[dict]:
        """`coordinator replay timeline --group G --format json`: the group's history from the topic."""
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "coordinator",
                "replay",
                "timeline",
                "--bootstrap-servers",
                self.broker,
                "--topic",
                self.topic,
                "--group",
                self.group,
                "--format",
                "json",
                "--no-progress",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        return [orjson.loads(line) for line in out.stdout.splitlines() if line.strip()]

    def running(self, tasks: int = TASKS) -> dict | None:
        """Connect's status of `src` when the connector and each of its `tasks` tasks are RUNNING on
        a live worker, asked of a live worker (a killed worker's tasks stay RUNNING in the status
        topic under its id until another worker runs them)."""
        live = {f"127.0.0.1:{w.port}" for w in self.live()}
        for w in self.live():
            status = w.running("src", tasks)
            if (
                status is not None
                and status["connector"]["worker_id"] in live
                and all(t["worker_id"] in live for t in status["tasks"])
            ):
                return status
        return None


def holders_of(description: dict | None) -> dict[str, set[str]]:
    """member URL -> the items it runs, from our description."""
    if description is None:
        return {}
    return {
        m.get("Url") or m["MemberId"]: {
            *m["Assignment"]["Connectors"],
            *(f"{t['Connector']}-{t['Task']}" for t in m["Assignment"]["Tasks"]),
        }
        for m in description["Members"]
    }


def owner_of(holders: dict[str, set[str]]) -> dict[str, str]:
    return {item: url for url, items in holders.items() for item in items}


class Watch:
    """Looks at the group about three times a second, from the test's first worker to its end."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.samples: list[Sample] = []
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch", daemon=True)
        self._rest_twice: dict[str, int] = {}

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def since(self, at_ms: int) -> list[Sample]:
        return [s for s in list(self.samples) if s.at_ms >= at_ms]

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            try:
                self._look()
            except Exception as e:  # noqa: BLE001 - a look that fails is reported, the watch goes on
                self.problems.append(f"the watch failed: {e!r}")

    def _look(self) -> None:
        at = int(time.time() * 1000)
        description = self.cluster.describe()
        holders = holders_of(description)
        twice = sorted(item for item, n in Counter(i for items in holders.values() for i in items).items() if n > 1)
        if twice:
            self.problems.append(f"{at}: our description has {twice} on two workers: {holders}")
        rest: dict[str, dict[str, str]] = {}
        for w in self.cluster.live():
            status, body = http("GET", f"{w.url}/connectors/src/status")
            if status == 200 and isinstance(body, dict):
                rest[w.url] = {f"src-{t['id']}": t["worker_id"] for t in body["tasks"] if t["state"] == "RUNNING"}
        # Connect's REST status: each worker answers from its own reading of the status topic. A task
        # RUNNING under two worker ids in one look is two runners, unless one worker has not read
        # the topic to its end yet: that passes within a look or two, so only a disagreement that
        # lasts three looks in a row is counted.
        runners: dict[str, set[str]] = defaultdict(set)
        for view in rest.values():
            for task, worker_id in view.items():
                runners[task].add(worker_id)
        for task in {f"src-{i}" for i in range(TASKS)}:
            if len(runners.get(task, ())) > 1:
                self._rest_twice[task] = self._rest_twice.get(task, 0) + 1
                if self._rest_twice[task] == 3:
                    self.problems.append(
                        f"{at}: Connect's REST status has {task} RUNNING on "
                        f"{sorted(runners[task])} for three looks: {rest}"
                    )
            else:
                self._rest_twice[task] = 0
        self.samples.append(
            Sample(
                at,
                description and description.get("Generation"),
                description and description.get("ProtocolName"),
                holders,
                rest,
            )
        )


_LOG_LINE = re.compile(r"^(\d{13}) ")


def task_intervals(cluster: Cluster) -> dict[str, list[tuple[int, int, str]]]:
    """task -> [(from ms, to ms, worker)]: when each worker ran each task, from the workers' own logs
    (one clock: the log4j pattern writes epoch ms). From the herder's "Starting task" to the end of
    its stop: its producer closed, or the herder "Finished stopping tasks" (a revocation), or the
    worker stopped (SIGTERM); a killed worker ran its tasks until it was killed, a live one until now."""
    now = int(time.time() * 1000)
    out: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for name, w in cluster.workers.items():
        if not w.log.exists():
            continue
        open_: dict[str, int] = {}
        stopping: set[str] = set()

        def close(task: str, at: int, name: str = name, open_: dict[str, int] = open_) -> None:
            if task in open_:
                out[task].append((open_.pop(task), at, name))

        for line in w.log.read_text(errors="replace").splitlines():
            m = _LOG_LINE.match(line)
            if not m:
                continue
            at = int(m.group(1))
            if (s := re.search(r"Starting task (src-\d+)", line)) and "DistributedHerder" in line:
                open_[s.group(1)] = at
            elif s := re.search(r"Stopping task (src-\d+)", line):
                stopping.add(s.group(1))
            elif (
                s := re.search(r"App info kafka.producer for connector-producer-(src-\d+) unregistered", line)
            ) and s.group(1) in stopping:
                stopping.discard(s.group(1))
                close(s.group(1), at)
            elif "Finished stopping tasks" in line or "Worker stopped" in line or "Kafka Connect stopped" in line:
                for task in stopping:
                    close(task, at)
                stopping.clear()
        for task in list(open_):
            close(task, cluster.killed_ms.get(name, now))
    return out


def overlaps(cluster: Cluster) -> list[str]:
    """Two workers running one task at once, by their logs."""
    problems = []
    for task, spans in task_intervals(cluster).items():
        spans.sort()
        for (_a0, a1, wa), (b0, _b1, wb) in itertools.pairwise(spans):
            if wa != wb and b0 < a1:
                problems.append(f"{task} ran on {wa} until {a1} and on {wb} from {b0}")
    return problems


def settled(cluster: Cluster, members: int, tasks: int = TASKS) -> dict | None:
    """Our description when the group is Stable with `members` members running every item once (of
    `src` with `tasks` tasks), at one generation for 2 s, and Connect says every task RUNNING on a
    live worker; else None."""
    before = cluster.describe()
    if before is None or before["State"].upper() != "STABLE" or len(before["Members"]) != members:
        return None
    if sorted(i for items in holders_of(before).values() for i in items) != sorted(
        ["src", *(f"src-{i}" for i in range(tasks))]
    ):
        return None
    time.sleep(2.0)
    after = cluster.describe()
    if after is None or after["Generation"] != before["Generation"] or after["State"].upper() != "STABLE":
        return None
    if cluster.running(tasks) is None:
        return None
    return after


def served(s: ServeProcess) -> set[int]:
    try:
        status, body = s.request("GET", "/health")
    except OSError:
        return set()
    return {int(p) for p in body.get("Partitions", {})} if status in (200, 503) else set()


@pytest.fixture(scope="module")
def cluster(kafka_broker, tmp_path_factory) -> Iterator[Cluster]:
    broker = kafka_broker.bootstrap_servers
    run_dir = tmp_path_factory.mktemp("connect-stories")
    tag = uuid.uuid4().hex[:8]
    c = Cluster(broker, f"test-connect-stories-{tag}", f"stories-{tag}", run_dir)
    create_topic(broker, c.topic, PARTITIONS)
    listeners = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    c.serves = [
        ServeProcess(
            broker,
            c.topic,
            run_dir,
            "--allow-anonymous",
            "--ownership",
            "group",
            "--ownership-session-timeout-ms",
            "6000",
            "--kafka-listener",
            listener,
        )
        for listener in listeners
    ]
    c.gateway_port = free_port()
    gateway_log = (run_dir / "gateway.log").open("wb")
    watch = c.watch = Watch(c)
    try:
        for s in c.serves:
            s.start(wait=False)
        until(
            lambda: (
                len(served(c.serves[0])) == len(served(c.serves[1])) == 1
                and served(c.serves[0]) | served(c.serves[1]) == set(range(PARTITIONS))
            ),
            90,
            "the two instances to share the partitions",
        )
        c.gateway = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coordinator",
                "gateway",
                "--bootstrap-server",
                broker,
                "--listen",
                f"127.0.0.1:{c.gateway_port}",
                "--groups",
                c.group,
                "--coordinator",
                ",".join(listeners),
            ],
            stdout=gateway_log,
            stderr=subprocess.STDOUT,
        )
        time.sleep(1.0)
        assert c.gateway.poll() is None, (run_dir / "gateway.log").read_text()
        for name in ("w1", "w2", "w3"):
            c.worker(name).start()
        until(lambda: all(w.up() for w in c.live()), 180, "the workers' REST APIs answer")
        watch.start()
        first = c.workers["w1"]
        until(
            lambda: (
                http("PUT", f"{first.url}/connectors/src/config", source_connector(f"{c.group}-data", TASKS))[0]
                in (200, 201)
            ),
            60,
            "the connector is created (409 while the group rebalances)",
        )
        until(lambda: settled(c, 3), 120, "every task RUNNING, the group settled")
        yield c
    finally:
        watch.stop()
        for w in c.workers.values():
            w.kill()
        if c.gateway is not None:
            c.gateway.kill()
            c.gateway.wait(timeout=30)
        gateway_log.close()
        for s in c.serves:
            if s.process is not None and s.process.poll() is None:
                s.kill()


def _no_task_on_two_workers(c: Cluster, since_ms: int) -> None:
    watch = c.watch
    assert not watch.problems, watch.problems
    assert len(watch.since(since_ms)) > 10, "the watch looked at the group"
    assert not overlaps(c), overlaps(c)


def test_a_worker_added_stopped_and_killed_moves_only_what_it_must(cluster: Cluster) -> None:
    c = cluster
    watch = c.watch
    start_ms = int(time.time() * 1000)
    before = owner_of(holders_of(until(lambda: settled(c, 3), 120, "the group settled")))
    assert set(before) == {"src", *(f"src-{i}" for i in range(TASKS))}
    olds = {c.url(c.workers[n]) for n in ("w1", "w2", "w3")}

    # A fourth worker: Connect's incremental cooperative rounds revoke from the others only what the
    # newcomer is given; what stays on a worker that stays is never revoked or moved elsewhere.
    added_ms = int(time.time() * 1000)
    w4 = c.worker("w4").start()
    until(w4.up, 180, "w4's REST API answers")
    after = owner_of(holders_of(until(lambda: settled(c, 4), 120, "the group settled with w4")))
    joined_ms = int(time.time() * 1000)
    new = c.url(w4)
    moved = {item for item, url in after.items() if url != before[item]}
    assert moved and all(after[item] == new for item in moved), (before, after)
    assert {item for item, url in after.items() if url == new} == moved
    for s in watch.since(added_ms):  # every look in between: an item is where it was, or on w4, or nowhere
        for item, url in owner_of(s.holders).items():
            assert url in (before[item], new), f"{item} on {url} at {s.at_ms}: was on {before[item]}"
    assert set(after.values()) == olds | {new}

    # w2 stopped gracefully: it leaves the group; its work waits the delay, then runs elsewhere.
    w2 = c.workers["w2"]
    gone = c.url(w2)
    stopped_ms = int(time.time() * 1000)
    w2.stop()
    assert w2.process.returncode == 0 or w2.process.returncode == 143, w2.log.read_text()[-3000:]
    after_stop = owner_of(holders_of(until(lambda: settled(c, 3), 120, "the group settled without w2")))
    assert gone not in after_stop.values()
    for item, url in after.items():
        if url != gone:
            assert after_stop[item] == url, f"{item} moved from {url} to {after_stop[item]} when w2 left"
    for s in watch.since(stopped_ms):
        for item, url in owner_of(s.holders).items():
            assert url in (after[item], after_stop[item]), f"{item} on {url} at {s.at_ms}"

    # kill -9 of a worker: after its session it is gone from the group, and its work waits
    # scheduled.rebalance.max.delay.ms before it runs elsewhere. Connect's leader keeps that delay
    # (and the assignment it compares with) in memory: a new leader treats the departed worker's
    # work as never assigned and hands it out at once, on Kafka's coordinator as on ours. So the
    # worker killed is one that is not the leader (our describe names the leader).
    described = c.describe()
    leader = next(m["Url"] for m in described["Members"] if m["MemberId"] == described["Leader"])
    victim = next(w for w in c.live() if c.url(w) != leader and c.url(w) in after_stop.values())
    dead = c.url(victim)
    its = {item for item, url in after_stop.items() if url == dead}
    killed_ms = int(time.time() * 1000)
    victim.kill()
    c.killed_ms[victim.name] = killed_ms
    final = owner_of(holders_of(until(lambda: settled(c, 2), 120, f"the group settled without {victim.name}")))
    assert set(final) == set(before) and dead not in final.values()
    looks = watch.since(killed_ms)
    left_ms = next(s.at_ms for s in looks if s.holders and dead not in s.holders)
    moved_ms = next(s.at_ms for s in looks if its <= set(owner_of(s.holders)) and dead not in s.holders)
    # The leader starts the delay in the round that drops the victim, which our look saw at
    # left_ms (up to one look late).
    assert moved_ms - left_ms >= DELAY_MS - 1_500, (killed_ms, left_ms, moved_ms)
    for s in looks:
        if s.at_ms < left_ms + DELAY_MS - 1_500:
            assert not its & {i for url, items in s.holders.items() if url != dead for i in items}, s

    # The same story in the group's history, replayed from the topic: Connect's rounds after w4
    # joined revoked only what w4 was then given (an item left its owner for nobody, then went from
    # nobody to w4, never to another worker that stays), and the victim's work, released in the
    # round that dropped it, was given out again no sooner than the delay after.
    rebalances = [e for e in c.timeline() if e["type"] == "rebalance"]
    port = {c.url(w): str(w.port) for w in c.workers.values()}

    def worker(member: str | None) -> str | None:
        return None if member is None else next(u for u, p in port.items() if f"127.0.0.1:{p}-" in member)

    rounds = [r for r in rebalances if added_ms <= r["start_timestamp_ms"] <= joined_ms]
    moves = [(m["item"], worker(m["from"]), worker(m["to"])) for r in rounds for m in r["moved"]]
    assert moves and all(a in (None, before[i]) and b in (None, new) for i, a, b in moves), moves
    assert sorted(i for i, a, _ in moves if a is not None) == sorted(moved), moves
    assert sum(r["revoked"] for r in rounds) == len(moved), rounds
    released = next(
        r
        for r in rebalances
        if r["start_timestamp_ms"] >= killed_ms and {m["item"] for m in r["moved"] if worker(m["from"]) == dead} == its
    )
    given = next(
        r
        for r in rebalances
        if r["number"] > released["number"] and its & {m["item"] for m in r["moved"] if m["to"] is not None}
    )
    assert given["start_timestamp_ms"] - released["start_timestamp_ms"] >= DELAY_MS - 500, (released, given)
    assert {m["item"] for m in given["moved"] if m["to"] is not None} >= its, given
    _no_task_on_two_workers(c, start_ms)
    c.told.add("a")


def test_a2_the_story_re_runs_faithfully_on_the_classic_protocol(cluster: Cluster) -> None:
    """Story (a) and a task count change (6 to 4 and back) in the group's history, re-run by
    `replay simulate --protocol classic` from the topic: Connect's leader (the port) on the classic
    protocol, with the workers' heartbeat.interval.ms and scheduled.rebalance.max.delay.ms given
    (the topic does not hold them), makes every recorded move, to the same workers, rebalance after
    rebalance (the newcomer's share, the stopped worker's, the killed one's after the delay, the
    balancing after the change: Connect revokes the task a worker was given last); the connect
    re-run answers too. Not asserted, as they are timing: unowned task-seconds come out 7-18% more
    than recorded on this short story, since a classic join is recorded when its join phase ends
    and the re-run's workers learn of each rebalance at their next heartbeat (1 s); and a round
    Connect ran that moved nothing may be missing (12 rebalances against 13 once)."""
    c = cluster
    # Story (a) deselected (-k), or failed and reported: this test re-runs its history. A skip only outside CI:
    # under CI's switch (tests/support/require.py) no story of the module may be missing, so this fails too.
    require("a" in c.told, "re-runs story (a)'s history, which was not told to the end in this module's cluster")
    members = len(c.live())
    first = c.live()[0]
    for tasks in (TASKS - 2, TASKS):
        until(
            lambda tasks=tasks: (
                http("PUT", f"{first.url}/connectors/src/config", source_connector(f"{c.group}-data", tasks))[0]
                in (200, 201)
            ),
            60,
            f"the connector is given {tasks} tasks",
        )
        until(lambda tasks=tasks: settled(c, members, tasks), 120, f"the group settled with {tasks} tasks")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "replay",
            "simulate",
            "--bootstrap-servers",
            c.broker,
            "--topic",
            c.topic,
            "--group",
            c.group,
            "--protocol",
            "classic",
            "--recorded-heartbeat-interval",
            "1s",
            "--recorded-scheduled-delay",
            f"{DELAY_MS}ms",
            "--no-progress",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = [orjson.loads(line) for line in out.stdout.splitlines()]
    outcomes = {x["name"]: x for x in lines if x["type"] == "outcome"}
    assert list(outcomes) == ["recorded", "re-run", "protocol connect"]
    f = next(x for x in lines if x["type"] == "faithfulness")
    assert f["settings"]["protocol"] == "classic" and f["settings"]["connect_protocol"] == "sessioned"
    assert f["settings_how"]["session_timeout_ms"] == "configured" and f["settings"]["session_timeout_ms"] == SESSION_MS
    recorded = outcomes["recorded"]
    assert recorded["items_moved"] >= 3, recorded  # the stopped worker's two tasks at least, and the killed one's
    assert f["same_moves"] and f["matched_moves"] == f["recorded_moves"] == recorded["items_moved"], f
    again = [(m["item"], m["from"], m["to"]) for m in outcomes["re-run"]["moves"]]
    assert again == [(m["item"], m["from"], m["to"]) for m in recorded["moves"]]
    connect = outcomes["protocol connect"]
    assert connect["rebalances"] > 0 and connect["moves"], connect


def test_b_kill_9_of_the_instance_that_owns_the_group_the_workers_carry_on_at_the_other(cluster: Cluster) -> None:
    c = cluster
    start_ms = int(time.time() * 1000)
    workers = c.live()
    assert len(workers) >= 2
    before = until(lambda: settled(c, len(workers)), 120, "the group settled")
    partition = partition_for(c.group, PARTITIONS)
    owner = next(s for s in c.serves if s.process.poll() is None and partition in served(s))
    survivor = next(s for s in c.serves if s is not owner and s.process.poll() is None)
    assert partition not in served(survivor)
    owner.kill()
    until(lambda: partition in served(survivor), 60, "the survivor takes the group's partition over")
    # Longer than the workers' session: their heartbeats (through the gateway, which asks the
    # survivor now) are what keeps them in the group the survivor loaded from the topic.
    beats = _heartbeats(survivor)
    time.sleep(SESSION_MS / 1000 + 3)
    assert _heartbeats(survivor) > beats
    after = until(lambda: settled(c, len(workers)), 120, "the group settled at the survivor")
    assert after["Coordinator"].rstrip("/") == survivor.url
    assert all(w.alive() for w in workers), [w.name for w in workers if not w.alive()]
    # One group: every live worker is a member of it at the survivor, nothing else is, and the
    # real broker's coordinator never had it.
    assert {m["Url"] for m in after["Members"]} == {c.url(w) for w in workers}
    assert owner_of(holders_of(after)).keys() == set(ITEMS)
    assert after["Generation"] >= before["Generation"]
    status, listed = http("GET", f"{survivor.url}/v1/groups")
    assert status == 200 and [g["GroupId"] for g in listed["Groups"]].count(c.group) == 1, listed
    assert c.group not in groups_at(c.broker)
    _no_task_on_two_workers(c, start_ms)


def _heartbeats(s: ServeProcess) -> float:
    """coordinator_kafka_requests_total{api="Heartbeat"} of instance `s`."""
    with urllib.request.urlopen(f"{s.url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(r'^coordinator_kafka_requests_total\{api="Heartbeat"\} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


# The rolling change of story (c), upwards, as Kafka's upgrade notes have it: (the worker replaced,
# its successor, its connect.protocol, the group's protocol once it has joined). Downwards, worker by
# worker, Connect itself runs tasks twice (KAFKA-13816, on Kafka's own coordinator too): a
# cooperative worker keeps its tasks when it rejoins, the round's protocol turns out eager, and the
# eager leader hands them to another worker without revoking them; so the cluster goes to eager all
# at once.
ROLLING = [
    ("e1", "c1", "compatible", "default"),  # one still eager
    ("e2", "c2", "compatible", "compatible"),
    ("c1", "s1", "sessioned", "compatible"),  # the highest both offer
    ("c2", "s2", "sessioned", "sessioned"),
]
VERSION = {"default": 0, "compatible": 1, "sessioned": 2}  # Connect's protocol versions, as its log says


def test_c_connect_protocol_eager_compatible_sessioned_and_a_rolling_change(cluster: Cluster) -> None:
    c = cluster
    start_ms = int(time.time() * 1000)
    assert len(c.live()) == 2, "story (a) leaves two workers"
    until(lambda: settled(c, 2), 120, "the group settled")
    assert c.describe_cli()["ProtocolName"] == "sessioned"  # Connect's default, connect.protocol=sessioned

    # The whole cluster to eager (connect.protocol=eager: protocol `default`, Connect's v0).
    for w in c.live():
        w.stop()
    eager = [c.worker(name, extra={"connect.protocol": "eager"}).start() for name in ("e1", "e2")]
    until(lambda: all(w.up() for w in eager), 180, "the eager workers answer")
    _step(c, eager, "default")

    # Worker by worker, up to compatible, then to sessioned.
    for old, new, protocol, expected in ROLLING:
        c.workers[old].stop()
        w = c.worker(new, extra={"connect.protocol": protocol}).start()
        until(w.up, 180, f"{new} answers")
        _step(c, [w], expected)
    _no_task_on_two_workers(c, start_ms)


def _step(c: Cluster, started: list[ConnectWorker], expected: str) -> None:
    """The group settled with the workers now live, at protocol `expected` by our describe, every
    item run once, and the workers just started joined at that protocol's version by their logs."""
    described = until(lambda: settled(c, 2), 120, f"the group settled at {expected}")
    assert {m["Url"] for m in described["Members"]} == {c.url(x) for x in c.live()}
    cli = c.describe_cli()
    assert cli["ProtocolName"] == expected, cli
    assert sorted(i for items in holders_of(cli).values() for i in items) == sorted(ITEMS)
    for w in started:
        log = w.log.read_text(errors="replace")
        assert f"with protocol version {VERSION[expected]}" in log, log[-3000:]
