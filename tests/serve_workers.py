"""Protocol-following workers for tests that run `coordinator serve` as a process and break things
around it (tests/test_broker_failures.py, tests/test_compose_topology.py).

A `Worker` heartbeats over HTTP with the server-side assignor, as tests/test_serve_process.py's
minimal worker does, and also records what the coordinator acknowledged: `acked` is every state an
OK (or a definitive rejection) told it, in order; `last` the latest of them; `uncertain` that a
request after it ended without a definitive answer (a retriable error code or a transport error:
the change may or may not have been made durable). Workers that share a `Ledger` check, under its
lock, after every answer, that no item is owned by two of them.

An item is given up before the heartbeat that reports it gone is sent (revocation answered by the
coordinator is applied at once), and taken only from an OK answer: so what `owned` says is what a
real worker would be running at that moment.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec

from records import ConnectorsAndTasks

from coordinator.core.items import connectors_and_tasks, describe, items_of
from coordinator.core.protocol import HeartbeatRequest, HeartbeatResponse
from coordinator.core.worker.member import Member
from coordinator.tools.partitions import partition_for
from coordinator.tools.process import ServeProcess

# Answers that say "not now, ask again (maybe elsewhere)": the request may or may not have taken effect.
RETRIABLE = {
    7,
    14,
    15,
    16,
}  # REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
GONE = ("gone",)  # an acknowledged state: not a member of the group


def items(cat: dict | None) -> frozenset:
    """The items of a ConnectorsAndTasks body (a dict, as these raw HTTP workers keep it)."""
    return frozenset() if not cat else items_of(msgspec.convert(cat, ConnectorsAndTasks))


def cat(owned: Iterable) -> dict:
    """The ConnectorsAndTasks body of `owned`, as a dict."""
    return msgspec.to_builtins(ConnectorsAndTasks.of(connectors_and_tasks(owned)))


def wait_for(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(interval)


def served(server: ServeProcess) -> set[int]:
    """The partitions `server` serves (active) right now; empty when it does not answer."""
    try:
        _, body = server.request("GET", "/health", timeout=5)
    except (OSError, http.client.HTTPException, ValueError):
        return set()
    return {int(p) for p, s in (body.get("Partitions") or {}).items() if s == "active"}


def ownership_instance(broker, topic: str, tmp_path, session_ms: int, *flags: str) -> ServeProcess:  # noqa: ANN001
    """A `coordinator serve` in group ownership with an ownership session of `session_ms`, for
    handover tests: the workers' own session (60 s) outlasts a handover, which they spend without an
    answer; heartbeats every 500 ms; the server-side assignor at once."""
    return ServeProcess(
        broker.bootstrap_servers,
        topic,
        tmp_path,
        "--allow-anonymous",
        "--ownership",
        "group",
        "--ownership-session-timeout-ms",
        str(session_ms),
        *flags,
        "--session-timeout-ms",
        "60000",
        "--heartbeat-interval-ms",
        "500",
        "--server-assignment-interval-ms",
        "0",
    )


def acknowledged(server: ServeProcess, group: str) -> dict:
    """The group as `server` describes it: what was committed (a describe waits for the writes it shows)."""
    status, d = server.request("GET", f"/v1/groups/{group}", timeout=30)
    assert status == 200 and d["ErrorCode"] == 0, d
    return {
        "GroupEpoch": d["GroupEpoch"],
        "AssignmentEpoch": d["AssignmentEpoch"],
        "Connectors": d["Connectors"],
        "Members": sorted(
            (m["MemberId"], m["MemberEpoch"], m["State"], str(m["Assignment"]), str(m["Target"])) for m in d["Members"]
        ),
    }


def group_on_partition(partition: int, partitions: int, prefix: str = "group") -> str:
    return next(f"{prefix}-{i}" for i in range(10_000) if partition_for(f"{prefix}-{i}", partitions) == partition)


@dataclass
class Ledger:
    """What the workers of one group run, checked for double ownership after every answer."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    workers: list[Worker] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def check(self) -> None:  # called with the lock held
        seen: dict = {}
        for w in self.workers:
            for item in w.owned:
                if item in seen:
                    self.violations.append(f"{item} owned by {seen[item]} and {w.member_id} at once")
                seen[item] = w.member_id


class Worker:
    """A worker of the tests that drive a `coordinator serve` over plain HTTP, from threads: the
    project's member state machine (`Member`) with a blocking transport, and a record of every
    state the coordinator acknowledged (`acked`), for the tests that compare it with the topic."""

    def __init__(
        self,
        group_id: str,
        member_id: str,
        ledger: Ledger,
        *,
        timeout: float = 90.0,
        token: str | None = None,
        rebalance_timeout_ms: int = 30_000,
        session_timeout_ms: int = 60_000,
    ) -> None:
        self.member = Member(
            group_id,
            member_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            server_assignor="incremental_cooperative",
            session_timeout_ms=session_timeout_ms,
        )
        self.ledger = ledger
        self.timeout = timeout
        self.token = token
        self.acked: list[tuple] = []  # ("member", epoch, owned) or GONE, as answered, in order
        self.uncertain = False  # a request after acked[-1] was not answered definitively
        self.unanswered = 0  # transport errors (the request may or may not have been handled)
        self.retriable: dict[int, int] = {}  # retriable error code -> how often
        self.unexpected: list[str] = []  # HTTP statuses other than 200, error codes that make no sense here
        self.slowest = 0.0  # the longest a request took to be answered, in seconds (for the reports)
        ledger.workers.append(self)

    group_id = property(lambda self: self.member.group_id)
    member_id = property(lambda self: self.member.member_id)
    epoch = property(lambda self: self.member.member_epoch)
    owned = property(lambda self: self.member.owned)

    @property
    def last(self) -> tuple | None:
        return self.acked[-1] if self.acked else None

    def _post(self, server: ServeProcess, request: HeartbeatRequest) -> dict | None:
        started = time.monotonic()
        try:
            status, answer = server.request(
                "POST",
                "/v1/connect-group/heartbeat",
                msgspec.to_builtins(request),
                token=self.token,
                timeout=self.timeout,
            )
        except (OSError, http.client.HTTPException, ValueError):
            self.unanswered += 1  # never acknowledged: it may or may not have happened
            self.uncertain = True
            return None
        finally:
            self.slowest = max(self.slowest, time.monotonic() - started)
        if status != 200:
            self.unexpected.append(f"HTTP {status}: {answer}")
            self.uncertain = True
            return None
        code = answer["ErrorCode"]
        if code in RETRIABLE:
            self.retriable[code] = self.retriable.get(code, 0) + 1
            self.uncertain = True
            return None
        return answer

    def heartbeat(self, server: ServeProcess) -> int | None:
        """One heartbeat (a join at epoch 0); the error code answered, None when there was no answer."""
        answer = self._post(server, self.member.heartbeat(_now_ms()))
        with self.ledger.lock:
            if answer is None:
                self.member.failed(_now_ms(), "no answer")  # may stop the work after a session timeout
                self.ledger.check()
                return None
            code = answer["ErrorCode"]
            if code in (0, 1000):  # NONE, COMPUTE_ASSIGNMENT (never, server-side)
                self.member.received(msgspec.convert(answer, HeartbeatResponse), _now_ms())
                self._ack(("member", self.epoch, self.owned))
            elif code in (25, 110):  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: it is out of the group
                self.member.received(HeartbeatResponse(code, answer.get("ErrorMessage")), _now_ms())
                self._ack(GONE)
            else:
                self.unexpected.append(f"heartbeat answered {code}: {answer.get('ErrorMessage')}")
            self.ledger.check()
        return code

    def leave(self, server: ServeProcess) -> int | None:
        """Stop everything, then leave (epoch -1). Whatever the answer, the worker is out: a later
        join (epoch 0) resets the member if the leave never took effect."""
        with self.ledger.lock:
            epoch = self.epoch
            _, request = self.member.leave()
        if request is None:
            return None
        answer = self._post(server, request)
        if answer is None:
            return None
        with self.ledger.lock:
            if answer["ErrorCode"] in (0, 25):  # left, or was not a member (any more)
                self._ack(GONE)
            else:
                self.unexpected.append(
                    f"leave at epoch {epoch} answered {answer['ErrorCode']}: {answer.get('ErrorMessage')}"
                )
        return answer["ErrorCode"]

    def _ack(self, state: tuple) -> None:
        self.uncertain = False
        if not self.acked or self.acked[-1] != state:
            self.acked.append(state)

    def __repr__(self) -> str:
        return f"{self.member_id}@{self.epoch}[{describe(self.owned)}]"


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def converged(workers: Iterable[Worker], everything: frozenset) -> bool:
    """Every item owned exactly once, and every worker at the same epoch."""
    workers = list(workers)
    owned = [i for w in workers for i in w.owned]
    return len(owned) == len(everything) and set(owned) == everything and len({w.epoch for w in workers}) == 1


def settled(server: ServeProcess, workers: list[Worker]) -> bool:
    """The coordinator agrees that the group is done: its target is computed for the group epoch,
    no work waits (deferred), and every member is STABLE at that epoch owning its target, which is
    what its worker runs. (A server-side assignor runs at most once per interval, so the workers
    can look converged on an older target.)"""
    group_id = workers[0].group_id
    status, d = server.request("GET", f"/v1/groups/{group_id}", token=workers[0].token, timeout=30)
    if status != 200 or d["ErrorCode"] != 0 or d["AssignmentEpoch"] != d["GroupEpoch"] or items(d["Deferred"]):
        return False
    members = {m["MemberId"]: m for m in d["Members"]}
    return set(members) == {w.member_id for w in workers} and all(
        m["State"] == "STABLE"
        and m["MemberEpoch"] == d["GroupEpoch"]
        and items(m["Assignment"]) == items(m["Target"]) == w.owned
        and w.epoch == m["MemberEpoch"]
        for w in workers
        for m in [members[w.member_id]]
    )


def converge(server: ServeProcess, workers: list[Worker], everything: frozenset, timeout: float = 90.0) -> None:
    """Heartbeat every worker, round after round, until the group has converged and settled."""
    deadline = time.monotonic() + timeout
    while not (converged(workers, everything) and settled(server, workers)):
        assert time.monotonic() < deadline, f"no convergence within {timeout:g} s: {workers}"
        for w in workers:
            w.heartbeat(server)
        time.sleep(0.05)


class Churn:
    """Workers heartbeating from threads of their own, and now and then leaving and joining again,
    until `stop()`. `writes` counts acknowledged joins and leaves, which always write records: a
    rising count means the coordinator commits transactions."""

    def __init__(
        self,
        server: ServeProcess,
        workers: list[Worker],
        *,
        seed: int = 0,
        leave_probability: float = 0.04,
        pause: float = 0.05,
    ) -> None:
        self.server = server
        self.workers = workers
        self.leave_probability = leave_probability
        self.pause = pause
        self.writes = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._run, args=(w, random.Random(seed * 1000 + i)), daemon=True, name=f"churn-{w.member_id}"
            )
            for i, w in enumerate(workers)
        ]

    def _count(self) -> None:
        with self._lock:
            self.writes += 1

    def _run(self, worker: Worker, rng: random.Random) -> None:
        try:
            while not self._stop.is_set():
                joining = worker.epoch == 0
                code = worker.heartbeat(self.server)
                if joining and code == 0:
                    self._count()
                if worker.epoch > 0 and rng.random() < self.leave_probability:
                    if worker.leave(self.server) in (0, 25):
                        self._count()
                    self._stop.wait(rng.uniform(0.1, 0.8))  # away for a while, then back under the same id
                self._stop.wait(self.pause)
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.failures.append(f"{worker.member_id}: {e!r}")

    def start(self) -> Churn:
        for thread in self._threads:
            thread.start()
        return self

    def wait_writes(self, count: int, timeout: float, what: str) -> None:
        """Until `count` more joins and leaves are acknowledged."""
        target = self.writes + count
        wait_for(lambda: self.writes >= target or self.failures, timeout, f"{count} acknowledged writes {what}")
        assert not self.failures, self.failures

    def halt(self) -> None:
        """Stop the threads without checking anything (clean-up after a failed test)."""
        self._stop.set()
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(120)

    def stop(self) -> None:
        self.halt()
        assert not any(t.is_alive() for t in self._threads), "a churn thread did not end"
        assert not self.failures, self.failures
