"""Events are logged only once their records are committed (issue 29, item 11;
coordinator/service/events.py: what `Observer.after` finds is told only once the batch carrying
its records is committed).

`coordinator serve --log-format json` runs as tests/gated_serve.py, which holds one transaction
open in front of its commit: its records are produced and flushed to the session's broker, in an
open transaction, and the commit waits until the test releases it. A worker joins while the commit
is held: its member record is in the log (read_uncommitted) and not committed (read_committed),
its heartbeat is unanswered, and the log holds no event of its join. Once released, the commit
goes on, the heartbeat is answered, and the join's events are logged, its records now committed.
A coordinator that logged a change before its commit (say, the observer told before the write)
would log the join while the transaction could still be aborted: the test fails on that line."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition
from serve_workers import Ledger, Worker, converge, wait_for

from records import MemberMetadataKey, TaskId, decode

from coordinator.tools.process import ServeProcess
from tests.topics import create_topic

pytestmark = pytest.mark.integration

G = "events-group"
_GATED_SERVE = Path(__file__).with_name("gated_serve.py")


def _events(server: ServeProcess) -> list[dict]:
    """The JSON log lines of `server` that are events."""
    lines = server.log_path.read_text(errors="replace").splitlines() if server.log_path.exists() else []
    out = []
    for line in lines:
        try:
            parsed = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(parsed, dict) and "event" in parsed:
            out.append(parsed)
    return out


def _about(events: list[dict], member: str) -> list[dict]:
    return [e for e in events if e.get("member") == member]


def _members_in_topic(broker, topic: str, isolation: str) -> set[str]:  # noqa: ANN001
    """The members that have a member record in `topic` as a consumer at `isolation` reads it: all
    it is given until nothing more comes for a while (a read_committed one stops at the open
    transaction)."""
    consumer = Consumer(
        broker.client_config({"group.id": f"events-{topic}", "enable.auto.commit": False, "isolation.level": isolation})
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        members: set[str] = set()
        quiet_since = time.monotonic()
        deadline = time.monotonic() + 30
        while time.monotonic() - quiet_since < 2.0 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            quiet_since = time.monotonic()
            record = decode(message.key(), message.value())
            if isinstance(record.key, MemberMetadataKey) and record.value is not None:
                members.add(record.key.member_id)
        return members
    finally:
        consumer.close()


def test_a_change_is_logged_only_after_its_commit(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    gate = tmp_path / "gate"
    server = ServeProcess(
        kafka_broker.bootstrap_servers,
        unique_topic,
        tmp_path,
        "--allow-anonymous",
        "--log-format",
        "json",
        "--session-timeout-ms",
        "60000",
        "--server-assignment-interval-ms",
        "0",
    )
    assert server.args[1:4] == ["-m", "coordinator", "serve"], server.args
    server.args[1:4] = [str(_GATED_SERVE)]
    server.env["GATED_SERVE_GATE"] = str(gate)
    server.start()
    try:
        status, body = server.request("PUT", f"/v1/groups/{G}/connectors", {"Connectors": [{"Name": "A", "Tasks": 2}]})
        assert (status, body["ErrorCode"]) == (200, 0), body
        ledger = Ledger()
        first = Worker(G, "w1", ledger, timeout=60)
        converge(server, [first], frozenset(["A", TaskId("A", 0), TaskId("A", 1)]))
        # An acknowledged join has its event, and its record is committed.
        assert [e["event"] for e in _about(_events(server), "w1")][:1] == ["member-joined"], _events(server)
        assert "w1" in _members_in_topic(kafka_broker, unique_topic, "read_committed")

        # The next transaction is held in front of its commit: w2's join.
        staged = gate.with_name("gate.staged")
        staged.write_text("0")
        staged.rename(gate)
        second = Worker(G, "w2", ledger, timeout=60)
        answered: list[int | None] = []
        joining = threading.Thread(target=lambda: answered.append(second.heartbeat(server)), daemon=True)
        joining.start()
        wait_for(gate.with_name("gate.blocked").exists, 30, "the join's transaction to be held open")
        events_before = len(_events(server))
        # Its records are in the log, not committed.
        assert "w2" in _members_in_topic(kafka_broker, unique_topic, "read_uncommitted")
        assert "w2" not in _members_in_topic(kafka_broker, unique_topic, "read_committed")
        # (The reads above took seconds: time enough for an early event to reach the log.)
        assert joining.is_alive() and not answered, "the join was answered before its commit"
        assert _about(_events(server), "w2") == [], "an event was logged before its records were committed"
        # Nothing else of the held batch was told either (the rebalance it starts, say).
        assert len(_events(server)) == events_before, _events(server)[events_before:]

        gate.with_name("gate.release").touch()
        joining.join(60)
        assert answered == [0], (answered, second.unexpected)
        wait_for(lambda: _about(_events(server), "w2"), 30, "the join's event once committed")
        joined = _about(_events(server), "w2")[0]
        assert (joined["event"], joined["group"], joined["partition"]) == ("member-joined", G, 0), joined
        assert "w2" in _members_in_topic(kafka_broker, unique_topic, "read_committed")
        assert "Traceback" not in server.log(), server.log()
    finally:
        gate.with_name("gate.release").touch()
        server.stop()
