"""The group's session timeout reaches the worker (issue 29, item 2), against `coordinator serve` as
a child process on the session's Kafka, with SDK workers whose own session timeout (30 s) is far
longer than the group's (2 s, the group's configuration record).

- The coordinator frozen (SIGSTOP) for three times the group's session: every worker stops its work
  before the coordinator wakes.
- One worker cut off (its connections dropped by a relay, new ones refused) while the coordinator
  lives: it stops its work before the coordinator hands that work to another. No item ever has two
  owners, checked from both sides: the workers' own start/stop events, and the coordinator's
  `ownership-moved` events in its JSON log.

Only the order of events is asserted, never how long anything took. Worker events carry a global
sequence number (one process, one event loop: their order is exact) and the wall clock in
milliseconds, floored as the coordinator's log floors it, to compare with the coordinator's events.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from coordinator.cli import main as coordinator
from coordinator.core.items import items_of
from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.worker import RebalanceListener, Worker
from coordinator.tools.process import ServeProcess
from tests.support.waiting import until

pytestmark = pytest.mark.integration

G = "session-group"
GROUP_SESSION_MS = 2_000
OWN_SESSION_MS = 30_000


def _now_ms() -> int:
    return int(time.time() * 1000)


class Timeline:
    """Every worker's starts and stops, and the test's own marks, in one order."""

    def __init__(self) -> None:
        self.events: list[tuple[int, int, str, str, frozenset]] = []  # (sequence, ms, who, kind, items)
        self._sequence = itertools.count()

    def add(self, who: str, kind: str, items: frozenset = frozenset()) -> int:
        at = _now_ms()
        self.events.append((next(self._sequence), at, who, kind, items))
        return at

    def of(self, who: str, kind: str) -> list[tuple[int, int, str, str, frozenset]]:
        return [e for e in self.events if e[2] == who and e[3] == kind]


class Work(RebalanceListener):
    """A worker's own account of what it runs: `start` on assignment, `stop` on revocation or loss."""

    def __init__(self, name: str, timeline: Timeline) -> None:
        self.name, self.timeline = name, timeline

    def on_assigned(self, items) -> None:  # noqa: ANN001
        self.timeline.add(self.name, "start", frozenset(items_of(items)))

    def on_revoked(self, items) -> None:  # noqa: ANN001
        self.timeline.add(self.name, "stop", frozenset(items_of(items)))

    def on_lost(self, items) -> None:  # noqa: ANN001
        self.timeline.add(self.name, "lost", frozenset(items_of(items)))


def _no_two_owners_by_the_workers(timeline: Timeline) -> None:
    owner: dict = {}
    for _, _, who, kind, items in sorted(timeline.events):
        for item in items:
            if kind == "start":
                assert owner.get(item) in (None, who), f"{who} started {item} while {owner[item]} ran it"
                owner[item] = who
            elif kind in ("stop", "lost") and owner.get(item) == who:
                del owner[item]


def _log_ms(line: dict) -> int:
    return int(datetime.fromisoformat(line["time"].replace("Z", "+00:00")).timestamp() * 1000)


def _coordinator_events(server: ServeProcess, name: str) -> list[dict]:
    lines = [orjson.loads(line) for line in server.log_path.read_text().splitlines() if line.strip()]
    return [line for line in lines if line.get("event") == name and line.get("group") == G]


def _no_two_owners_by_the_coordinator(moves: list[dict]) -> None:
    """The coordinator's own view, from its committed `ownership-moved` events."""
    owner: dict[str, str] = {}
    for move in moves:
        who = move["member"]
        for item in move.get("released", []):
            if owner.get(item) == who:
                del owner[item]
        for item in move.get("gained", []):
            assert owner.get(item) in (None, who), f"the coordinator gave {item} to {who} while {owner[item]} held it"
            owner[item] = who


def _serve(broker, topic: str, log_dir: Path) -> ServeProcess:  # noqa: ANN001
    created = coordinator(
        [
            "topic",
            "create",
            "--bootstrap-servers",
            broker.bootstrap_servers,
            "--topic",
            topic,
            "--partitions",
            "1",
            "--replication-factor",
            "1",
        ]
    )
    assert created == 0
    server = ServeProcess(
        broker.bootstrap_servers,
        topic,
        log_dir,
        "--log-format",
        "json",
        "--allow-anonymous",
        "--initial-assignment-delay-ms",
        "0",
        "--scheduled-rebalance-max-delay-ms",
        "0",
    ).start()
    # The group's session is far shorter than the workers' own: only the heartbeat answers tell them.
    status, body = server.request(
        "PUT",
        f"/v1/groups/{G}/config",
        {"SessionTimeoutMs": GROUP_SESSION_MS, "HeartbeatIntervalMs": 500, "ScheduledRebalanceMaxDelayMs": 0},
    )
    assert status == 200 and body["ErrorCode"] == 0, body
    status, body = server.request("PUT", f"/v1/groups/{G}/connectors", {"Connectors": [{"Name": "A", "Tasks": 5}]})
    assert status == 200 and body["ErrorCode"] == 0, body
    return server


EVERYTHING = frozenset(["A"] + [f"A-{t}" for t in range(5)])


def _names(items: frozenset) -> frozenset[str]:
    return frozenset(str(item) for item in items)


def _covered(workers: list[Worker]) -> bool:
    owned = [str(item) for w in workers for item in w.owned]
    return len(owned) == len(set(owned)) and set(owned) == EVERYTHING


async def _settled(workers: list[Worker]) -> None:
    await until(
        lambda: (
            _covered(workers)
            and all(w.owned and w.member.group_session_timeout_ms == GROUP_SESSION_MS for w in workers)
        ),
        30,
        "every worker runs some of the work and knows the group's session",
    )


def test_a_frozen_coordinator_every_worker_stops_before_it_wakes(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    server = _serve(kafka_broker, unique_topic, tmp_path)
    timeline = Timeline()
    holders: dict[str, dict[str, str]] = {}  # "before" the freeze and at the "end": item -> member

    async def scenario() -> None:
        async with CoordinatorClient(server.url, retry_for_s=5) as client:
            workers = [
                Worker(
                    client, G, member_id=f"w{i}", listener=Work(f"w{i}", timeline), session_timeout_ms=OWN_SESSION_MS
                )
                for i in range(3)
            ]
            for w in workers:
                await w.start()
            try:
                await _settled(workers)
                held = {w.member_id: frozenset(w.owned) for w in workers}
                holders["before"] = {item: w.member_id for w in workers for item in _names(w.owned)}
                timeline.add("test", "freeze")
                server.signal(signal.SIGSTOP)
                try:
                    await asyncio.sleep(3 * GROUP_SESSION_MS / 1000)
                    still = {w.member_id: _names(w.owned) for w in workers if w.owned}
                    timeline.add("test", "wake")
                finally:
                    server.signal(signal.SIGCONT)
                assert not still, f"still running work while the coordinator was frozen: {still}"
                (wake,) = timeline.of("test", "wake")
                for w in workers:
                    lost = timeline.of(w.member_id, "lost")
                    assert lost, f"{w.member_id} never stopped its work"
                    assert lost[0][4] == held[w.member_id], "it stopped everything it ran"
                    assert lost[0][0] < wake[0], f"{w.member_id} stopped only after the coordinator woke"
                # Once the coordinator is back, the workers rejoin and the work runs again.
                await until(lambda: _covered(workers), 30, "the work runs again after the wake")
                holders["end"] = {item: w.member_id for w in workers for item in _names(w.owned)}
                _no_two_owners_by_the_workers(timeline)
            finally:
                for w in workers:
                    await w.stop()

    try:
        asyncio.run(scenario())
        moves = _coordinator_events(server, "ownership-moved")
        _no_two_owners_by_the_coordinator(moves)
        # What the coordinator gave once it woke (all of the work again), it gave after every worker
        # had stopped what it ran.
        (wake,) = timeline.of("test", "wake")
        last_stop = max(e[1] for e in timeline.events if e[3] == "lost")
        given_after = [m for m in moves if m.get("gained") and _log_ms(m) >= wake[1]]
        assert all(_log_ms(m) >= last_stop for m in given_after), (last_stop, given_after)
        # What it did not give again went back to the member that held it before the freeze: that
        # worker rejoined before the coordinator's late session timer fenced it, so nothing moved
        # (and the worker, which had stopped it, runs it again only once told, after the wake).
        regained = set().union(*(m["gained"] for m in given_after))
        kept = EVERYTHING - regained
        assert all(holders["before"][i] == holders["end"][i] for i in kept), (kept, holders, given_after)
    finally:
        server.stop()


class Relay:
    """A TCP relay between one worker and the coordinator that the test can cut: the worker's
    connections are dropped and new ones refused, while the coordinator runs on."""

    def __init__(self, port: int) -> None:
        self.target_port = port
        self.server: asyncio.Server | None = None
        self.transports: list[asyncio.BaseTransport] = []
        self.tasks: set[asyncio.Task] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.transports += [writer.transport, upstream_writer.transport]
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.close()

    def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        for transport in self.transports:
            transport.abort()
        for task in list(self.tasks):
            task.cancel()


class RelayedClient(CoordinatorClient):
    """Every call through the relay: the coordinator's advertised address would bypass it."""

    async def coordinator_of(self, group_id: str) -> str:
        return self.bootstrap_url


def test_a_worker_cut_off_stops_before_the_coordinator_hands_its_work_to_another(
    kafka_broker,  # noqa: ANN001
    unique_topic: str,
    tmp_path: Path,
) -> None:
    server = _serve(kafka_broker, unique_topic, tmp_path)
    timeline = Timeline()
    relay = Relay(server.port)

    async def scenario() -> frozenset:
        relayed = RelayedClient(await relay.start(), retry_for_s=5)
        async with CoordinatorClient(server.url, retry_for_s=5) as client:
            cut = Worker(relayed, G, member_id="w0", listener=Work("w0", timeline), session_timeout_ms=OWN_SESSION_MS)
            other = Worker(client, G, member_id="w1", listener=Work("w1", timeline), session_timeout_ms=OWN_SESSION_MS)
            workers = [cut, other]
            try:
                for w in workers:
                    await w.start()
                await _settled(workers)
                held = frozenset(cut.owned)
                timeline.add("test", "cut")
                relay.cut()
                await until(lambda: _covered([other]), 30, "the other worker runs everything")
                lost = timeline.of("w0", "lost")
                assert lost and lost[0][4] == held, "the cut-off worker stopped everything it ran"
                _no_two_owners_by_the_workers(timeline)
                (cut_at,) = timeline.of("test", "cut")
                taken = [e for e in timeline.of("w1", "start") if e[0] > cut_at[0] and e[4] & held]
                assert taken and all(e[0] > lost[0][0] for e in taken)
            finally:
                await other.stop()
                await cut.stop(leave=False)
                await relayed.close()
        return held

    try:
        held = asyncio.run(scenario())
        moves = _coordinator_events(server, "ownership-moved")
        _no_two_owners_by_the_coordinator(moves)
        (lost,) = timeline.of("w0", "lost")
        (cut_at,) = timeline.of("test", "cut")
        (fenced,) = [f for f in _coordinator_events(server, "member-fenced") if f["member"] == "w0"]
        assert fenced["reason"] == "session-timeout"
        handed = [
            m
            for m in moves
            if m["member"] != "w0" and set(m.get("gained", [])) & _names(held) and _log_ms(m) >= cut_at[1]
        ]
        assert set().union(*(m["gained"] for m in handed)) >= _names(held), "the coordinator handed all of it over"
        # The coordinator handed w0's work to another only after w0 had stopped it.
        assert all(_log_ms(m) >= lost[1] for m in handed), (lost, handed)
    finally:
        server.stop()
