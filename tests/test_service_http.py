"""The service end to end: seed 000's case studies over HTTP with the client-side assignor flow,
and the durability promise (what was acknowledged is in the topic, and the topic replays to exactly
the state that was served), against the session broker.

Workers here are small HTTP clients (`HttpWorker`) that behave as `coordinator.core.driver.SimWorker`
does: every field while at epoch 0; revoke at once and acknowledge in the next heartbeat (never
revoked and given in one response); on COMPUTE_ASSIGNMENT (1000) PrepareAssignment -> the assignor,
run here in the worker -> InstallAssignment; on INVALID_ASSIGNMENT (1001) wait to be asked again; on
FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID abandon everything and rejoin with epoch 0.

A `Ledger` per group watches every message of every worker. An item is *held* by a worker from the
response that gives it until that worker sends a heartbeat no longer reporting it (the
acknowledgement of its revocation), leaves, or is fenced. The coordinator must never give an item
another worker still holds: seed 000's "revoke before assign", checked from outside after every
response, whatever the scenario.

Items as in tests/test_case_studies.py: AC0 = A, AT1 = A-0, AT2 = A-1, BC0 = B, BT1 = B-0.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer
from serve_workers import items

from records import (
    Assignor,
    ConnectorsTasksMetadataKey,
    ConnectorTaskCount,
    CurrentMemberAssignmentKey,
    GroupConfigurationKey,
    MemberMetadataKey,
    Record,
    TargetAssignmentMetadataKey,
    TaskId,
)

from coordinator.api import wire
from coordinator.core.assignors import GroupSpec, assignor
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.items import Item, items_of
from coordinator.core.protocol import (
    SCHEDULED_REBALANCE,
    ErrorCode,
    HeartbeatResponse,
    InstallAssignmentRequest,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    SetConfigRequest,
    SetConnectorsRequest,
    Timer,
)
from coordinator.core.state import CoordinatorState
from coordinator.core.worker.member import Assign, ComputeAssignment, Lose, Member, Revoke
from coordinator.service.log import load_partition
from coordinator.service.server import CoordinatorServer
from coordinator.tools.partitions import LogError, partition_for
from tests.topics import create_topic

pytestmark = pytest.mark.integration

HB = "/v1/connect-group/heartbeat"
PREPARE = "/v1/connect-group/prepare-assignment"
INSTALL = "/v1/connect-group/install-assignment"

NONE, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH = 0, 25, 110
COMPUTE_ASSIGNMENT, INVALID_ASSIGNMENT = 1000, 1001
ACCEPTED = (NONE, COMPUTE_ASSIGNMENT)  # COMPUTE_ASSIGNMENT is a heartbeat that took effect

AC0, AT1, AT2, BC0, BT1 = "A", TaskId("A", 0), TaskId("A", 1), "B", TaskId("B", 0)
ALL = frozenset({AC0, AT1, AT2, BC0, BT1})
SEED_CONNECTORS = {"A": 2, "B": 1}
G = "connect-cluster"

# Server defaults small enough that the whole file runs in seconds; each test sets its group's own
# timeouts (type 9) through PUT /v1/groups/{id}/config as an operator would.
FAST = CoordinatorConfig(
    session_timeout_ms=3_000,
    heartbeat_interval_ms=100,
    scheduled_rebalance_max_delay_ms=1_000,
    initial_assignment_delay_ms=0,
    assignor_error_backoff_ms=200,
    server_assignment_interval_ms=100,
)


def now_ms() -> float:
    return time.time() * 1000  # the runtime's clock is time.time() too (same process)


# --- who holds what: "revoke before assign", watched from outside ----------------------------------


@dataclass(frozen=True)
class Event:
    seq: int
    at_ms: float
    member: str
    kind: str  # "given" (a response), "released" (an acknowledging heartbeat sent, a leave, fenced)
    items: frozenset


class Ledger:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.held: dict[Item, str] = {}
        self.events: list[Event] = []
        self.workers: list[HttpWorker] = []

    def _event(self, member: str, kind: str, what: frozenset) -> None:
        if what:
            self.events.append(Event(len(self.events), now_ms(), member, kind, what))

    def history(self) -> str:
        return "\n".join(f"  #{e.seq} {e.member} {e.kind} {sorted(map(str, e.items))}" for e in self.events[-40:])

    def release(self, member: str, keeping: frozenset = frozenset()) -> None:
        """`member` sent a heartbeat reporting `keeping` (or left, or was fenced: nothing)."""
        released = frozenset(i for i, holder in self.held.items() if holder == member and i not in keeping)
        for i in released:
            del self.held[i]
        self._event(member, "released", released)

    def give(self, member: str, given: frozenset) -> None:
        for item in given:
            holder = self.held.get(item)
            if holder is not None and holder != member:
                raise AssertionError(
                    f"{self.group_id}: {member} was given {item} while {holder} still holds it "
                    f"(its revocation was not acknowledged)\n{self.history()}"
                )
            self.held[item] = member
        self._event(member, "given", given)
        owners: dict[Item, str] = {}
        for w in self.workers:
            for item in w.owned:
                assert item not in owners, f"{item} owned by {owners[item]} and {w.member_id}\n{self.history()}"
                owners[item] = w.member_id

    def first(self, member: str, kind: str, item: Item, after: int = -1) -> int | None:
        for e in self.events:
            if e.seq > after and e.member == member and e.kind == kind and item in e.items:
                return e.seq
        return None


# --- a worker over HTTP, behaving as driver.SimWorker ----------------------------------------------


@dataclass
class Exchange:
    """One request and its answer, kept for the durability checks."""

    path: str
    request: dict
    response: dict


class HttpWorker:
    """The project's member state machine (`Member`) over the aiohttp test client, with every
    exchange kept for the durability checks and the ledger told what it runs."""

    def __init__(
        self,
        client: TestClient,
        ledger: Ledger,
        group_id: str,
        member_id: str,
        *,
        instance_id: str | None = None,
        rebalance_timeout_ms: int = 5_000,
        assignor_name: str = "incremental_cooperative",
    ) -> None:
        self.client = client
        self.ledger = ledger
        impl = assignor(assignor_name)
        self.instance_id = instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        # No ServerAssignor: the client-side flow. Version: the highest this worker speaks.
        self.client_assignors = (
            Assignor(impl.name, impl.minimum_version, impl.maximum_version, 0, impl.maximum_version),
        )
        self.member = self._member(member_id)
        self.exchanges: list[Exchange] = []
        self.installs: list[tuple[GroupSpec, dict, dict]] = []  # (spec, install request, response)
        self.history: list[frozenset] = [frozenset()]  # every distinct owned set, in order
        ledger.workers.append(self)

    def _member(self, member_id: str) -> Member:
        return Member(
            self.ledger.group_id,
            member_id,
            instance_id=self.instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            client_assignors=self.client_assignors,
            session_timeout_ms=10**9,
        )

    group_id = property(lambda self: self.member.group_id)
    member_id = property(lambda self: self.member.member_id)
    member_epoch = property(lambda self: self.member.member_epoch)
    owned = property(lambda self: self.member.owned)
    joined = property(lambda self: self.member.joined)
    ack_pending = property(lambda self: self.member.acknowledgement_due)

    async def _post(self, path: str, body: dict) -> dict:
        response = await self.client.post(path, json=body)
        assert response.status == 200, (path, body, response.status, await response.text())
        answer = await response.json()
        self.exchanges.append(Exchange(path, body, answer))
        return answer

    async def heartbeat(self, *, compute: bool = True) -> dict:
        request = self.member.heartbeat(int(now_ms()))
        if request.owned is not None:
            self.ledger.release(self.member_id, items_of(request.owned))  # the acknowledgement is sent
        response = await self._post(HB, msgspec.to_builtins(request))
        await self._handle(response, compute)
        return response

    async def _handle(self, response: dict, compute: bool) -> None:
        code = response["ErrorCode"]
        answer = (
            msgspec.convert(response, HeartbeatResponse)
            if code in ACCEPTED
            else HeartbeatResponse(code, response["ErrorMessage"])
        )
        before = self.owned
        actions = self.member.received(answer, int(now_ms()))
        if any(isinstance(a, Lose) for a in actions) or not self.member.joined:
            self._released()
            return
        kinds = {type(a) for a in actions}
        assert not (Revoke in kinds and Assign in kinds), f"{self.member_id} was revoked and given in one response"
        self.ledger.give(self.member_id, self.owned - before)  # revoked work is stopped at once (onRevoked)
        if self.history[-1] != self.owned:
            self.history.append(self.owned)
        if ComputeAssignment in kinds and compute:
            await self.compute_assignment()

    async def compute_assignment(self) -> dict:
        """PrepareAssignment -> the assignor, here -> InstallAssignment (seed 000 "Assignment Process")."""
        prepared = await self._post(
            PREPARE,
            msgspec.to_builtins(
                PrepareAssignmentRequest(
                    group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch
                )
            ),
        )
        if prepared["ErrorCode"] != NONE:
            return prepared  # FENCED: retried at the next heartbeat response; anything else: abandoned
        spec = msgspec.convert(prepared, PrepareAssignmentResponse)
        assert msgspec.json.decode(msgspec.json.encode(spec)) == prepared, "the GroupSpec lost something on the way"
        result = assignor(prepared["AssignorName"]).assign(spec)
        request = msgspec.to_builtins(
            InstallAssignmentRequest.of(self.group_id, self.member_id, self.member_epoch, spec.group_epoch, result)
        )
        installed = await self._post(INSTALL, request)
        # INVALID_ASSIGNMENT (1001): wait for the next COMPUTE_ASSIGNMENT.
        self.installs.append((spec, request, installed))
        return installed

    async def leave(self, *, static: bool = False) -> dict:
        _, request = self.member.leave()  # a leaving worker stops its work first
        self._released()
        epoch = -2 if static else -1
        assert request is not None and request.member_epoch == epoch, (self.member_id, request)
        response = await self._post(HB, msgspec.to_builtins(request))
        assert response["ErrorCode"] == NONE and response["MemberEpoch"] == epoch, response
        return response

    def crash(self) -> None:
        """The process dies (or hangs) and stops its work; it remembers its last epoch, so a
        restarted process may heartbeat with it (seed 000 "Worker Bounces"): a new member state
        machine at that epoch, whose first heartbeat carries every field."""
        epoch = self.member_epoch
        self.member = self._member(self.member_id)
        self.member.member_epoch = epoch
        self._released()

    def lose_everything(self) -> None:
        self.member.lose("lost everything")
        self._released()

    def _released(self) -> None:
        self.ledger.release(self.member_id)
        if self.history[-1]:
            self.history.append(frozenset())


# --- a group, its admin routes, and rounds of heartbeats -------------------------------------------


class Cluster:
    def __init__(self, client: TestClient, group_id: str) -> None:
        self.client = client
        self.group_id = group_id
        self.ledger = Ledger(group_id)
        self.admin: list[Exchange] = []

    def worker(self, member_id: str, **kwargs: Any) -> HttpWorker:
        return HttpWorker(self.client, self.ledger, self.group_id, member_id, **kwargs)

    async def put(self, what: str, body: wire.Body) -> dict:
        request = msgspec.to_builtins(body)
        response = await self.client.put(f"/v1/groups/{self.group_id}/{what}", json=request)
        assert response.status == 200, await response.text()
        answer = await response.json()
        assert answer["ErrorCode"] == NONE, answer
        self.admin.append(Exchange(f"PUT {what}", request, answer))
        return answer

    async def set_connectors(self, counts: dict[str, int]) -> dict:
        return await self.put(
            "connectors",
            SetConnectorsRequest(connectors=[ConnectorTaskCount(n, t) for n, t in counts.items()]),
        )

    async def set_config(self, **timeouts: int | None) -> dict:
        return await self.put("config", SetConfigRequest(**timeouts))

    async def delete(self) -> dict:
        response = await self.client.delete(f"/v1/groups/{self.group_id}")
        answer = await response.json()
        self.admin.append(Exchange("DELETE", {}, answer))
        return answer

    async def describe(self) -> dict:
        return await (await self.client.get(f"/v1/groups/{self.group_id}")).json()

    async def members(self) -> dict[str, dict]:
        return {m["MemberId"]: m for m in (await self.describe()).get("Members", [])}

    async def round(self, workers: Iterable[HttpWorker], *, concurrent: bool = False) -> None:
        if concurrent:
            await asyncio.gather(*(w.heartbeat() for w in workers))
        else:
            for w in workers:
                await w.heartbeat()

    async def converge(
        self, workers: list[HttpWorker], *, timeout_s: float = 10.0, pause_s: float = 0.02, concurrent: bool = False
    ) -> dict:
        """Rounds of heartbeats until a round changes nothing, the group is STABLE and every worker
        owns exactly its target at the assignment epoch; returns the description."""
        deadline = time.monotonic() + timeout_s
        while True:
            before = [(w.member_epoch, w.owned) for w in workers]
            await self.round(workers, concurrent=concurrent)
            d = await self.describe()
            members = {m["MemberId"]: m for m in d["Members"]}
            if (
                before == [(w.member_epoch, w.owned) for w in workers]
                and d["State"] == "STABLE"
                and all(
                    w.member_epoch == d["AssignmentEpoch"] and w.owned == items(members[w.member_id]["Target"])
                    for w in workers
                )
            ):
                return d
            assert time.monotonic() < deadline, f"no convergence: {d}\n{self.ledger.history()}"
            await asyncio.sleep(pause_s)


def owned_by(workers: Iterable[HttpWorker]) -> dict[str, frozenset]:
    return {w.member_id: w.owned for w in workers}


# --- the service -----------------------------------------------------------------------------------


def _serve(
    broker: Any,
    topic: str,
    scenario: Callable[[TestClient, CoordinatorServer], Awaitable[Any]],
    config: CoordinatorConfig = FAST,
    partitions: int = 2,
    timeout_s: float = 45.0,
) -> Any:
    """Run `scenario(client, server)` against a coordinator serving every partition of a new topic;
    the server is closed when this returns (its last result is returned)."""
    create_topic(broker.bootstrap_servers, topic, partitions)

    async def run() -> Any:
        server = CoordinatorServer(
            broker.client_config(), topic, partitions, range(partitions), "http://127.0.0.1:0", config
        )
        await server.start()
        client = TestClient(TestServer(server.app()))
        await client.start_server()
        try:
            return await asyncio.wait_for(scenario(client, server), timeout_s)
        finally:
            await client.close()
            await server.close()

    return asyncio.run(run())


async def _seed_group(
    client: TestClient, *, session_timeout_ms: int = 3_000, delay_ms: int = 1_000, instance_ids: bool = False
) -> tuple[Cluster, dict[str, HttpWorker]]:
    """Three workers sharing A(2 tasks) and B(1 task), converged (seed 000 "Worker Leaving the Group")."""
    cluster = Cluster(client, G)
    await cluster.set_config(
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=100,
        rebalance_timeout_ms=None,
        scheduled_rebalance_max_delay_ms=delay_ms,
    )
    await cluster.set_connectors(SEED_CONNECTORS)
    workers = {m: cluster.worker(m, instance_id=f"{m}-instance" if instance_ids else None) for m in ("W1", "W2", "W3")}
    for w in workers.values():
        await cluster.converge([v for v in workers.values() if v.joined] + [w])
    owned = owned_by(workers.values())
    assert frozenset().union(*owned.values()) == ALL
    assert all(owned.values()), f"every worker runs something: {owned}"  # 5 items, balanced over 3
    return cluster, workers


# --- 1. the case studies ---------------------------------------------------------------------------


def test_a_worker_joins_and_never_gets_work_before_its_owner_acknowledged_revoking_it(
    kafka_broker, unique_topic
) -> None:  # noqa: ANN001
    async def scenario(client: TestClient, server: CoordinatorServer) -> None:
        cluster = Cluster(client, G)
        await cluster.set_config(session_timeout_ms=3_000, heartbeat_interval_ms=100)
        await cluster.set_connectors(SEED_CONNECTORS)
        assert (await cluster.describe())["GroupEpoch"] == 1  # setting the connectors is a change

        # "W1 joins the Group": the group epoch moves, W1 is chosen to run the client assignor.
        w1 = cluster.worker("W1")
        r = await w1.heartbeat(compute=False)
        assert r["ErrorCode"] == COMPUTE_ASSIGNMENT and r["MemberEpoch"] == 0 and w1.owned == frozenset()
        d = await cluster.describe()
        assert d["GroupEpoch"] == 2 and d["AssignmentEpoch"] == 0 and d["AssignorKind"] == "client"
        assert (await w1.compute_assignment())["ErrorCode"] == NONE
        d = await cluster.describe()
        assert d["AssignmentEpoch"] == 2 and items(d["Members"][0]["Target"]) == ALL
        r = await w1.heartbeat()  # nothing to revoke: straight to its target
        assert r["MemberEpoch"] == 2 and w1.owned == ALL

        # "W2 joins the Group": W1 computes; W2 cannot have B, B-0 until W1 revoked them.
        w2 = cluster.worker("W2")
        assert (await w2.heartbeat())["ErrorCode"] == NONE and w2.owned == frozenset()
        assert (await cluster.describe())["GroupEpoch"] == 3
        assert (await w1.heartbeat(compute=False))["ErrorCode"] == COMPUTE_ASSIGNMENT
        assert (await w1.compute_assignment())["ErrorCode"] == NONE
        members = await cluster.members()
        assert items(members["W1"]["Target"]) == {AC0, AT1, AT2} and items(members["W2"]["Target"]) == {BC0, BT1}
        await w2.heartbeat()
        assert w2.owned == frozenset() and (await cluster.members())["W2"]["State"] == "UNRELEASED"
        r = await w1.heartbeat()  # asked to revoke: told what it keeps, at its old epoch
        assert r["MemberEpoch"] == 2 and w1.owned == {AC0, AT1, AT2} and w1.ack_pending
        assert (await cluster.members())["W1"]["State"] == "UNREVOKED"
        await w2.heartbeat()
        assert w2.owned == frozenset(), "W2 got B before W1 acknowledged its revocation"
        r = await w1.heartbeat()  # the acknowledgement
        assert r["MemberEpoch"] == 3 and w1.owned == {AC0, AT1, AT2}
        r = await w2.heartbeat()
        assert r["MemberEpoch"] == 3 and w2.owned == {BC0, BT1}

        # A third worker joins the group of two: whatever moves to it moves only after its owner
        # acknowledged (the ledger checks that on every response; here explicitly too).
        before = len(cluster.ledger.events)
        owner_before = {item: w.member_id for w in (w1, w2) for item in w.owned}
        w3 = cluster.worker("W3")
        workers = [w3, w2, w1]  # the newcomer asks first in every round: it must be held back
        d = await cluster.converge(workers)
        assert d["GroupEpoch"] == d["AssignmentEpoch"] == 4
        final = owned_by(workers)
        assert frozenset().union(*final.values()) == ALL and sum(map(len, final.values())) == len(ALL)
        assert final["W3"], "the newcomer got work"
        for who in final.values():  # balanced per kind: connectors 2 over 3, tasks 3 over 3
            assert len([i for i in who if isinstance(i, str)]) <= 1
            assert len([i for i in who if isinstance(i, TaskId)]) == 1
        assert final["W1"] <= {AC0, AT1, AT2} and final["W2"] <= {BC0, BT1}  # sticky: only moves to W3
        ledger = cluster.ledger
        for item in final["W3"]:
            given = ledger.first("W3", "given", item, after=before - 1)
            released = ledger.first(owner_before[item], "released", item, after=before - 1)
            assert released is not None and given is not None and released < given, ledger.history()

    _serve(kafka_broker, unique_topic, scenario)


@pytest.mark.parametrize("how", ["leave", "session-timeout"])
def test_a_worker_leaves_its_work_waits_for_the_delay_then_is_reassigned(kafka_broker, unique_topic, how: str) -> None:  # noqa: ANN001
    delay_ms = 1_000

    async def scenario(client: TestClient, server: CoordinatorServer) -> None:
        cluster, workers = await _seed_group(
            client, session_timeout_ms=600 if how == "session-timeout" else 3_000, delay_ms=delay_ms
        )
        w1, w2, w3 = workers["W1"], workers["W2"], workers["W3"]
        baseline = owned_by(workers.values())
        departed = baseline["W2"]
        epoch = (await cluster.describe())["GroupEpoch"]

        # Whole milliseconds, as the coordinator's clock reads them: a departure handled within
        # this very millisecond is stamped with its start, not a fraction after it.
        left_at = math.floor(now_ms())
        mark = len(cluster.ledger.events)
        if how == "leave":
            await w2.leave()  # MemberEpoch -1
        else:
            w2.crash()  # "W2 fails to heartbeat and the group coordinator kicks it out"
        stayers = [w1, w3]
        # W1 and W3 keep heartbeating. The chosen one installs a target that changes nothing and
        # defers W2's work ("to give the failing worker a chance to come back").
        deadline_s = time.monotonic() + 5
        while True:
            await cluster.round(stayers)
            d = await cluster.describe()
            if "W2" not in {m["MemberId"] for m in d["Members"]} and d["AssignmentEpoch"] == d["GroupEpoch"]:
                break
            assert time.monotonic() < deadline_s, d
            await asyncio.sleep(0.05)
        assert d["GroupEpoch"] == epoch + 1, "one new epoch for the departure"
        assert items(d["Deferred"]) == departed
        scheduled = d["ScheduledRebalanceAtMs"]
        assert scheduled is not None and scheduled >= left_at + delay_ms
        assert owned_by(stayers) == {m: baseline[m] for m in ("W1", "W3")}

        # Nothing moves before the delay passes, however often they heartbeat; then the persisted
        # deadline bumps the group epoch and the deferred work is spread over W1 and W3.
        deadline_s = time.monotonic() + 10
        while not departed <= w1.owned | w3.owned:
            await cluster.round(stayers)
            if now_ms() < scheduled:
                assert not (w1.owned | w3.owned) & departed, "deferred work moved before the delay"
            assert time.monotonic() < deadline_s, await cluster.describe()
            await asyncio.sleep(0.05)
        d = await cluster.converge(stayers)
        assert d["GroupEpoch"] == epoch + 2 and not items(d["Deferred"]) and d["ScheduledRebalanceAtMs"] is None
        for item in departed:
            first_given = min(
                e.at_ms
                for e in cluster.ledger.events[mark:]
                if e.kind == "given" and item in e.items and e.member in ("W1", "W3")
            )
            assert first_given >= scheduled, f"{item} given at {first_given}, before the deadline {scheduled}"
        assert w1.owned | w3.owned == ALL and not w1.owned & w3.owned
        assert baseline["W1"] <= w1.owned and baseline["W3"] <= w3.owned, "sticky: what they had stays"

    _serve(kafka_broker, unique_topic, scenario)


@pytest.mark.parametrize("how", ["session-timeout", "leave-and-rejoin", "static", "static-same-id", "static-expired"])
def test_a_worker_bounces_and_gets_exactly_its_work_back(kafka_broker, unique_topic, how: str) -> None:  # noqa: ANN001
    """Seed 000 "Worker Bounces" (session-timeout: W2 goes silent, is kicked out, comes back with
    its last epoch, is told UNKNOWN_MEMBER_ID and rejoins with epoch 0), and docs/decisions.md's
    decisions: departed work waits for the group's ScheduledRebalanceMaxDelayMs (60 s here) but goes
    back at once when the member returns, under the same member id or, for a static member, the
    same InstanceId under a new member id; a static leave (-2) keeps the work without a rebalance
    until the session times out. In every case nothing else moves."""
    static = how.startswith("static")
    expires = how in ("session-timeout", "static-expired")

    async def scenario(client: TestClient, server: CoordinatorServer) -> None:
        cluster, workers = await _seed_group(
            client, session_timeout_ms=600 if expires else 3_000, delay_ms=60_000, instance_ids=static
        )
        w1, w2, w3 = workers["W1"], workers["W2"], workers["W3"]
        baseline = owned_by(workers.values())
        marks = {m: len(w.history) for m, w in workers.items()}
        stayers = [w1, w3]
        epoch = (await cluster.describe())["GroupEpoch"]
        started = time.monotonic()

        if how in ("static", "static-same-id"):
            await w2.leave(static=True)
            d = await cluster.converge(stayers)
            assert d["GroupEpoch"] == epoch, "a static leave does not rebalance"
            assert (await cluster.members())["W2"]["MemberEpoch"] == -2
        else:
            if how == "session-timeout":
                w2.crash()
            else:
                await w2.leave(static=how == "static-expired")
            deadline_s = time.monotonic() + 5
            while True:  # W1 and W3 heartbeat until the departure is assigned (work deferred)
                await cluster.round(stayers)
                d = await cluster.describe()
                if "W2" not in {m["MemberId"] for m in d["Members"]} and d["AssignmentEpoch"] == d["GroupEpoch"]:
                    break
                assert time.monotonic() < deadline_s, d
                await asyncio.sleep(0.05)
            assert d["GroupEpoch"] == epoch + 1
            assert items(d["Deferred"]) == baseline["W2"] and d["ScheduledRebalanceAtMs"] is not None
            if how == "session-timeout":
                # "It may join with the last known epoch": it is no longer a member.
                assert w2.member_epoch == epoch
                assert (await w2.heartbeat())["ErrorCode"] == UNKNOWN_MEMBER_ID
        returning = (
            cluster.worker("W2-restarted", instance_id="W2-instance") if how in ("static", "static-expired") else w2
        )

        r = await returning.heartbeat()  # epoch 0: back in the group
        assert r["ErrorCode"] in ACCEPTED, r
        everyone = [w1, returning, w3]
        d = await cluster.converge(everyone)
        assert returning.owned == baseline["W2"], "exactly its previous work back"
        assert owned_by(stayers) == {m: baseline[m] for m in ("W1", "W3")}
        for m in ("W1", "W3"):
            assert workers[m].history[marks[m] - 1 :] == [baseline[m]], f"{m}'s work moved: {workers[m].history}"
        assert not items(d["Deferred"]) and d["ScheduledRebalanceAtMs"] is None
        assert {m["MemberId"] for m in d["Members"]} == {"W1", returning.member_id, "W3"}
        assert time.monotonic() - started < 60, "it did not wait for the scheduled rebalance"

    _serve(kafka_broker, unique_topic, scenario)


# --- 2. durability: what was acknowledged is in the topic; the topic is the served state -----------


class RecordingState(CoordinatorState):
    """A CoordinatorState that also keeps every record it replayed, in topic order."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        super().__init__()
        self.records: list[Record] = []

    def replay_all(self, records: Iterable[Record]) -> None:
        def tee() -> Iterable[Record]:
            for record in records:
                self.records.append(record)
                yield record

        super().replay_all(tee())


async def _durability_run(client: TestClient, server: CoordinatorServer) -> dict:
    """Two groups (one per partition) and a third that is emptied and deleted; joins, leaves, a
    static takeover, deferred work reassigned after its delay, connectors changed three times; all
    heartbeats of a round concurrent, so that many share one commit."""
    groups = ("durable-1", "durable-3")
    assert sorted(partition_for(g, 2) for g in groups) == [0, 1]
    doomed = Cluster(client, "durable-2")

    async def one_group(cluster: Cluster) -> list[HttpWorker]:
        await cluster.set_config(
            session_timeout_ms=30_000,
            heartbeat_interval_ms=100,
            rebalance_timeout_ms=5_000,
            scheduled_rebalance_max_delay_ms=300,
        )
        await cluster.set_connectors({"A": 3, "B": 2})
        w = {m: cluster.worker(m, instance_id="i4" if m == "W4" else None) for m in ("W1", "W2", "W3", "W4")}
        live = list(w.values())
        await cluster.converge(live, concurrent=True)
        await cluster.set_connectors({"A": 3, "B": 2, "C": 4})
        await cluster.converge(live, concurrent=True)
        await w["W2"].leave()  # deferred for 300 ms, then reassigned
        live.remove(w["W2"])
        await cluster.converge(live, concurrent=True)
        while (d := await cluster.describe())["ScheduledRebalanceAtMs"] is not None or items(d["Deferred"]):
            await cluster.round(live, concurrent=True)
            await asyncio.sleep(0.05)
        await cluster.converge(live, concurrent=True)
        await w["W4"].leave(static=True)  # a static member restarts under a new member id
        w4b = cluster.worker("W4b", instance_id="i4")
        live = [x for x in live if x is not w["W4"]] + [w4b]
        w5 = cluster.worker("W5")
        live.append(w5)
        await cluster.converge(live, concurrent=True)
        await cluster.set_connectors({"A": 1, "C": 4})  # B removed, A shrinks
        await cluster.converge(live, concurrent=True)
        live.append(w["W2"])  # W2 comes back under its old member id
        await cluster.converge(live, concurrent=True)
        await cluster.set_config(
            session_timeout_ms=30_000,
            heartbeat_interval_ms=200,
            rebalance_timeout_ms=5_000,
            scheduled_rebalance_max_delay_ms=400,
        )
        await cluster.converge(live, concurrent=True)
        return live

    async def doomed_group() -> None:
        await doomed.set_connectors({"X": 1})
        x = doomed.worker("X1")
        await doomed.converge([x])
        await x.leave()
        assert (await doomed.delete())["ErrorCode"] == NONE
        assert (await doomed.describe())["ErrorCode"] == 69

    clusters = [Cluster(client, g) for g in groups]
    lives = await asyncio.gather(*(one_group(c) for c in clusters), doomed_group())
    # Quiet now: a last round that writes nothing is answered only after every earlier write is
    # committed; no timer is due for 30 s. What is served now is what must be in the topic.
    for cluster, live in zip(clusters, lives):
        await cluster.round(live, concurrent=True)
    served = {p: runtime.coordinator.state.slots() for p, runtime in server.runtimes.items()}
    return {"served": served, "clusters": clusters + [doomed], "live": dict(zip(groups, lives))}


def _expect_in_topic(cluster: Cluster, state: CoordinatorState, log: list[Record]) -> None:
    """Every acknowledged change of `cluster` is in the topic (`log`) and in its replay (`state`)."""
    g = cluster.group_id
    by_key: dict[Any, list] = {}
    for record in log:
        by_key.setdefault(record.key, []).append(record.value)

    def values(key: Any) -> list:
        return by_key.get(key, [])

    # Admin: each acknowledged PUT that changed something has its record; the last one is the state.
    connectors = [e for e in cluster.admin if e.path == "PUT connectors"]
    for e in connectors:
        counts = tuple(
            sorted((ConnectorTaskCount(c["Name"], c["Tasks"]) for c in e.request["Connectors"]), key=lambda c: c.name)
        )
        assert any(v is not None and v.connectors == counts for v in values(ConnectorsTasksMetadataKey(g))), e
    configs = [e for e in cluster.admin if e.path == "PUT config"]
    for e in configs:
        wanted = tuple(
            e.request.get(n)
            for n in ("SessionTimeoutMs", "HeartbeatIntervalMs", "RebalanceTimeoutMs", "ScheduledRebalanceMaxDelayMs")
        )
        assert any(
            v is not None
            and (
                v.session_timeout_ms,
                v.heartbeat_interval_ms,
                v.rebalance_timeout_ms,
                v.scheduled_rebalance_max_delay_ms,
            )
            == wanted
            for v in values(GroupConfigurationKey(g))
        ), e
    if any(e.path == "DELETE" and e.response["ErrorCode"] == NONE for e in cluster.admin):
        assert g not in state.groups, f"deleted group {g} came back on replay"
        return
    group = state.groups[g]
    if connectors:
        last = connectors[-1].request["Connectors"]
        assert group.connector_counts == tuple(
            sorted((ConnectorTaskCount(c["Name"], c["Tasks"]) for c in last), key=lambda c: c.name)
        )
    if configs:
        c = group.config
        assert (
            c.session_timeout_ms,
            c.heartbeat_interval_ms,
            c.rebalance_timeout_ms,
            c.scheduled_rebalance_max_delay_ms,
        ) == tuple(
            configs[-1].request.get(n)
            for n in ("SessionTimeoutMs", "HeartbeatIntervalMs", "RebalanceTimeoutMs", "ScheduledRebalanceMaxDelayMs")
        )

    # Protocol: every accepted heartbeat's epoch and assignment, every leave, every install.
    last_word: dict[str, str] = {}  # member -> "joined" / "left" / "static-left", from its last acknowledged call
    epochs_seen: list[int] = []
    installed_epochs: list[int] = []
    for w in cluster.ledger.workers:
        currents = [v for v in values(CurrentMemberAssignmentKey(g, w.member_id)) if v is not None]
        for e in w.exchanges:
            code = e.response["ErrorCode"]
            if e.path == HB and e.request["MemberEpoch"] == -1 and code == NONE:
                assert None in values(MemberMetadataKey(g, w.member_id)), f"{w.member_id}: leave not in the topic"
                last_word[w.member_id] = "left"
            elif e.path == HB and e.request["MemberEpoch"] == -2 and code == NONE:
                assert any(v.member_epoch == -2 for v in currents), f"{w.member_id}: static leave not in the topic"
                last_word[w.member_id] = "static-left"
            elif e.path == HB and code in ACCEPTED:
                epoch = e.response["MemberEpoch"]
                epochs_seen.append(epoch)
                assert any(v.member_epoch == epoch for v in currents), f"{w.member_id}: epoch {epoch} not in the topic"
                if e.response["Assignment"] is not None:
                    told = items(e.response["Assignment"]["ConnectorsAndTasks"])
                    assert any(v.member_epoch == epoch and items_of(v.assignment) == told for v in currents), (
                        f"{w.member_id}: told {sorted(map(str, told))} at epoch {epoch}; not in the topic"
                    )
                last_word[w.member_id] = "joined"
            elif e.path == PREPARE and code == NONE:
                epochs_seen.append(e.response["GroupEpoch"])
            elif e.path == INSTALL and code == NONE:
                installed_epochs.append(e.request["GroupEpoch"])
                metas = [v for v in values(TargetAssignmentMetadataKey(g)) if v is not None]
                assert any(
                    v.assignment_epoch == e.request["GroupEpoch"]
                    and v.installed_by == w.member_id
                    and items_of(v.deferred) == items(e.request["Deferred"])
                    for v in metas
                ), e.request

    assert installed_epochs, "the client-side flow ran"
    assert group.group_epoch >= max(epochs_seen) and group.assignment_epoch >= max(installed_epochs)
    for w in cluster.ledger.workers:
        word = last_word.get(w.member_id)
        if (
            word == "left"
            or word == "static-left"
            and any(o.instance_id == w.instance_id and o is not w for o in cluster.ledger.workers)
        ):
            assert w.member_id not in group.members and w.member_id not in group.currents, w.member_id
        elif word == "joined":
            # The last word each live worker was given is exactly the replayed current assignment.
            assert w.member_id in group.members
            current = group.current(w.member_id)
            assert current.member_epoch == w.member_epoch and items_of(current.assignment) == w.owned, (
                w.member_id,
                current,
                w.member_epoch,
                w.owned,
            )


def test_acknowledged_changes_are_in_the_topic_and_replay_to_the_served_state(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    outcome = _serve(kafka_broker, unique_topic, _durability_run)
    # The server is closed. Read the topic back, one fresh state per partition.
    config = kafka_broker.client_config()
    logs: dict[int, list[Record]] = {}
    for p, served in outcome["served"].items():
        replayed = CoordinatorState()
        result = load_partition(config, unique_topic, p, replayed)
        assert not result.corrupt
        assert replayed.slots() == served, f"partition {p}: the topic does not replay to the served state"
        recording = RecordingState()
        load_partition(config, unique_topic, p, recording)
        assert recording.slots() == served
        logs[p] = recording.records
    states = {}
    for p in outcome["served"]:
        states[p] = CoordinatorState()
        states[p].replay_all(logs[p])
    for cluster in outcome["clusters"]:
        p = partition_for(cluster.group_id, 2)
        _expect_in_topic(cluster, states[p], logs[p])
    for g, live in outcome["live"].items():
        group = states[partition_for(g, 2)].groups[g]
        assert {w.member_id for w in live} == set(group.members)
        owned = [w.owned for w in live]
        assert frozenset().union(*owned) == group.configured() and sum(map(len, owned)) == len(group.configured())


# --- regressions (found by these tests, fixed) ------------------------------------------------------------------------------------


def test_deferred_work_is_reassigned_even_if_the_wall_clock_steps_back(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """The runtime arms timers on the event loop's monotonic clock, from a deadline in wall-clock
    ms (`PartitionRuntime._arm`); the handler re-checks the deadline against the wall clock. A
    wall-clock step back (NTP step, VM resume) between arming and firing makes the timer fire
    "early": the handler finds the deadline in the future and drops it; nothing arms it again."""
    step = {"back_s": 0.0, "watch": False}

    async def scenario(client: TestClient, server: CoordinatorServer) -> None:
        runtime = server.runtime_for(G)
        runtime.clock = lambda: time.time() - step["back_s"]  # the runtime's own clock hook
        arm = runtime._arm

        def arm_then_step_back(timers: list[Timer]) -> None:
            # The wall clock steps back 200 ms right after the deferral's timer is armed, inside the
            # runtime's own call: always between arming and firing, however slow this machine is.
            # (The step used to be made from the test after a describe, which a slow machine could
            # reach only after the timer had fired; the test then skipped itself.)
            arm(timers)
            if step["watch"] and any(t.key[0] == SCHEDULED_REBALANCE and t.deadline_ms is not None for t in timers):
                step["back_s"] = 0.2

        runtime._arm = arm_then_step_back
        cluster, workers = await _seed_group(client, delay_ms=1_000)
        w1, w2, w3 = workers["W1"], workers["W2"], workers["W3"]
        departed = w2.owned
        step["watch"] = True
        await w2.leave()
        d = await cluster.converge([w1, w3])
        scheduled = d["ScheduledRebalanceAtMs"]
        assert items(d["Deferred"]) == departed and scheduled is not None
        assert step["back_s"] == 0.2, "the deferral's timer was never armed"
        give_up = scheduled + 200 + 1_000  # the coordinator's clock passed the deadline a second ago
        while not departed <= w1.owned | w3.owned:
            assert now_ms() < give_up, f"deferred work never reassigned: {await cluster.describe()}"
            await cluster.round([w1, w3])
            await asyncio.sleep(0.05)

    _serve(kafka_broker, unique_topic, scenario)


def test_describe_never_shows_a_write_that_then_fails(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """runtime.py: "a response that writes nothing ... waits for [writes in flight], because it may
    describe state they created (nothing unacknowledged is ever shown as done)". A PUT of connectors
    is applied in memory at once and waits for its commit, held here until a describe has read the
    state, B included; then the commit fails. The describe, held behind the commit, fails with it
    (NOT_COORDINATOR, as the PUT does) and the reloaded partition shows what the log holds: A. A
    describe answered at once would have shown B, which never became durable, whatever came after."""

    async def scenario(client: TestClient, server: CoordinatorServer) -> None:
        cluster = Cluster(client, G)
        await cluster.set_connectors({"A": 1})
        runtime = server.runtime_for(G)
        committing, fail = threading.Event(), threading.Event()

        def failing_write(records: list, *level: int) -> None:  # runs in the partition's I/O thread
            committing.set()
            fail.wait(30)
            raise LogError("the broker went away during the commit (the test's)")

        runtime._log.write = failing_write  # the reload opens a new log: this one goes with the failure
        body = msgspec.to_builtins(
            SetConnectorsRequest(connectors=[ConnectorTaskCount("A", 1), ConnectorTaskCount("B", 1)])
        )
        put = asyncio.create_task(client.put(f"/v1/groups/{G}/connectors", json=body))
        assert await asyncio.to_thread(committing.wait, 30), "the PUT never reached its commit"
        read = asyncio.Event()
        coordinator = runtime.coordinator
        describe_group = coordinator.describe_group

        def describe_then_say(group_id: str) -> Any:  # the partition's loop reads the state for the describe
            read.set()
            return describe_group(group_id)

        coordinator.describe_group = describe_then_say
        describe = asyncio.create_task(cluster.describe())
        await read.wait()
        fail.set()
        shown = await describe
        assert shown["ErrorCode"] == ErrorCode.NOT_COORDINATOR, f"describe showed {shown} of a write that failed"
        assert (await (await put).json())["ErrorCode"] == ErrorCode.NOT_COORDINATOR
        while (reloaded := await cluster.describe())["ErrorCode"] != NONE:
            assert reloaded["ErrorCode"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, reloaded
            await asyncio.sleep(0.05)
        assert [c["Name"] for c in reloaded["Connectors"]] == ["A"]

    _serve(kafka_broker, unique_topic, scenario)
