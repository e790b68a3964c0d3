"""What an operator is told (issue 19, items 1 and 4): the structured events of joins, leaves,
fencings, rebalances and ownership moves, the live rebalance-duration histogram, the partition
status gauge, and JSON logs from a running `coordinator serve`.

The observer is checked first on the pure state machine (a virtual clock, no broker), where every
duration is known exactly; then through a real coordinator process on the session's Kafka."""

from __future__ import annotations

import io
import logging
import time
from pathlib import Path

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from serve_workers import Ledger, Worker, converge, wait_for

from records import TaskId

from coordinator.core.driver import Driver, SimWorker
from coordinator.core.driver import converge as converge_sim
from coordinator.core.protocol import LeaveReason
from coordinator.service.events import Observer, Told
from coordinator.tools import logs
from coordinator.tools.process import ServeProcess
from tests.topics import create_topic

pytestmark = pytest.mark.ops

G = "g"


class Observed(Driver):
    """The pure driver, with the runtime's observer around each result (told at once: there is no
    commit to wait for here)."""

    def __init__(self) -> None:
        super().__init__()
        self.durations: list[float] = []
        self.observer = Observer(0, self.durations.append)
        self.told: list[Told] = []

    def run(self, result):  # noqa: ANN001, ANN201
        seen = self.observer.before(self.state, result.records)
        response = super().run(result)
        told = self.observer.after(self.state, seen, self.now)
        self.observer.tell(told)
        self.told += told
        return response

    def named(self, name: str) -> list[Told]:
        return [t for t in self.told if t.name == name]


def _group(connectors: dict[str, int], workers: int) -> tuple[Observed, list[SimWorker]]:
    d = Observed()
    d.set_config(G, session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=0)
    d.set_connectors(G, connectors)
    ws = [SimWorker(d, G, f"W{i + 1}") for i in range(workers)]
    return d, ws


def test_joins_a_rebalance_and_its_duration_from_the_bump_to_convergence() -> None:
    d, ws = _group({"A": 2}, 2)
    d.now = 5_000
    converge_sim(ws)
    joined = d.named("member-joined")
    assert [t.fields["member"] for t in joined] == ["W1", "W2"]
    assert all(t.fields["group"] == G and t.fields["partition"] == 0 for t in joined)
    (started,) = d.named("rebalance-started")
    (converged,) = d.named("rebalance-converged")
    assert converged.fields["epoch"] >= started.fields["epoch"] and converged.fields["members"] == 2
    # Following the ownership events gives who holds what now, never two holders at once.
    holders: dict[str, str] = {}
    for t in d.named("ownership-moved"):
        for item in t.fields.get("released", []):
            assert holders.pop(item) == t.fields["member"]
        for item in t.fields.get("gained", []):
            assert item not in holders, f"{item} taken by {t.fields['member']} while {holders.get(item)} holds it"
            holders[item] = t.fields["member"]
    assert holders == {str(item): member for item, member in d.state.groups[G].owners().items()}
    assert sorted(holders) == ["A", "A-0", "A-1"] and set(holders.values()) == {"W1", "W2"}
    assert not d.observer.open

    # A second rebalance, on the virtual clock: a third worker joins at t=20 s and the group
    # converges some heartbeats later. The histogram gets exactly the clock's difference.
    d.now = 20_000
    w3 = SimWorker(d, G, "W3")
    w3.heartbeat()
    bumped_at = d.now
    ticks = 0
    while d.observer.open:
        d.now += 250
        ticks += 1
        for w in [*ws, w3]:
            w.heartbeat()
        assert ticks < 100, "no convergence"
    last = d.named("rebalance-converged")[-1]
    assert last.rebalance_seconds == pytest.approx((d.now - bumped_at) / 1000) and last.rebalance_seconds > 0
    assert d.durations[-1] == last.rebalance_seconds and len(d.durations) == 2


def test_a_fencing_is_a_warning_with_its_reason_and_a_leave_is_not() -> None:
    d, (w1, w2, w3) = _group({"A": 3}, 3)
    converge_sim([w1, w2, w3])
    w3.leave()
    (left,) = d.named("member-left")
    assert left.fields["member"] == "W3" and left.fields["reason"] == LeaveReason.LEAVE
    assert left.level == logging.INFO
    for _ in range(11):  # W2 goes silent past its 10 s session
        d.advance(1_000)
        w1.heartbeat()
    (fenced,) = d.named("member-fenced")
    assert fenced.fields["member"] == "W2" and fenced.fields["reason"] == LeaveReason.SESSION_TIMEOUT
    assert fenced.level == logging.WARNING and "no heartbeat within its session timeout" in fenced.message
    assert fenced.fields["epoch"] == d.state.groups[G].group_epoch


def test_rebalances_open_at_a_load_are_tracked_but_not_timed() -> None:
    d, ws = _group({"A": 2}, 2)
    ws[0].heartbeat()  # joined: the target waits for the first member's next heartbeat
    assert d.observer.open
    fresh = Observer(3)
    fresh.loaded(d.state, 1_000)
    assert set(fresh.open) == {G} and not fresh.open[G].known_start
    assert fresh.in_progress(4_000) == {G: 3.0}


def test_json_lines_carry_the_fields_and_text_keeps_them_greppable() -> None:
    stream = io.StringIO()
    logs.configure("INFO", "json", stream)
    try:
        logs.event(
            logging.getLogger("t"),
            "member-fenced",
            "member %s fenced",
            "W2",
            level=logging.WARNING,
            group="g",
            member="W2",
            epoch=7,
            instance=None,
        )
        line = orjson.loads(stream.getvalue())
        assert line["event"] == "member-fenced" and line["level"] == "WARNING" and line["message"] == "member W2 fenced"
        assert line["group"] == "g" and line["epoch"] == 7 and "instance" not in line
        assert line["time"].endswith("Z") and "T" in line["time"]
        stream.seek(0)
        stream.truncate()
        logs.configure("INFO", "text", stream)
        logs.event(logging.getLogger("t"), "ownership-moved", "moved", group="g", gained=["A", "A-0"], why="a b")
        assert stream.getvalue().rstrip().endswith('event=ownership-moved group=g gained=A,A-0 why="a b"')
    finally:
        logs.configure("WARNING", "text")
    with pytest.raises(ValueError, match="log format 'xml'"):
        logs.configure("INFO", "xml")


# --- a running coordinator -------------------------------------------------------------------------


def _samples(server: ServeProcess) -> dict[tuple[str, tuple], float]:
    import urllib.request

    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _events(server: ServeProcess) -> list[dict]:
    return [orjson.loads(line) for line in server.log_path.read_text().splitlines() if line.strip()]


@pytest.mark.integration
def test_serve_logs_json_events_and_exports_rebalance_and_partition_metrics(
    kafka_broker,
    unique_topic,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    server = ServeProcess(
        kafka_broker.bootstrap_servers,
        unique_topic,
        tmp_path,
        "--log-format",
        "json",
        "--allow-anonymous",
        "--access-log",
        "--session-timeout-ms",
        "3000",
        "--heartbeat-interval-ms",
        "500",
        "--initial-assignment-delay-ms",
        "0",
        "--scheduled-rebalance-max-delay-ms",
        "0",
    ).start()
    try:
        ledger = Ledger()
        workers = [Worker("logged", f"W{i}", ledger, session_timeout_ms=3_000) for i in (1, 2)]
        assert (
            server.request("PUT", "/v1/groups/logged/connectors", {"Connectors": [{"Name": "A", "Tasks": 3}]})[1][
                "ErrorCode"
            ]
            == 0
        )
        everything = frozenset(["A"] + [TaskId("A", t) for t in range(3)])
        converge(server, workers, everything)
        # W2 stops heartbeating: its session expires, it is fenced, W1 takes everything.
        converge_until = time.monotonic() + 30
        while "W2" in {m["MemberId"] for m in server.request("GET", "/v1/groups/logged")[1]["Members"]}:
            assert time.monotonic() < converge_until, "W2 never timed out"
            workers[0].heartbeat(server)
            time.sleep(0.2)
        workers = workers[:1]
        converge(server, workers, everything)

        def told(name: str) -> list[dict]:
            return [e for e in _events(server) if e.get("event") == name]

        wait_for(lambda: len(told("rebalance-converged")) >= 2, 10, "two converged rebalances logged")
        lines = _events(server)  # every line of the process is one JSON object, librdkafka's included
        assert all({"time", "level", "logger", "message"} <= set(e) for e in lines)
        (loaded,) = told("partition-loaded")
        assert loaded["partition"] == 0 and loaded["records"] == 0
        assert {e["member"] for e in told("member-joined")} == {"W1", "W2"}
        (fenced,) = told("member-fenced")
        assert fenced["member"] == "W2" and fenced["reason"] == "session-timeout" and fenced["level"] == "WARNING"
        assert fenced["group"] == "logged" and isinstance(fenced["epoch"], int)
        assert told("rebalance-started") and all(e["seconds"] >= 0 for e in told("rebalance-converged"))
        assert {"A", "A-0", "A-1", "A-2"} <= {i for e in told("ownership-moved") for i in e.get("gained", [])}
        requests = told("http-request")
        assert any(
            e["path"] == "/v1/connect-group/heartbeat" and e["status"] == 200 and e["method"] == "POST"
            for e in requests
        )

        samples = _samples(server)
        assert samples[("coordinator_partition_status", (("partition", "0"), ("status", "serving")))] == 1
        assert samples[("coordinator_partition_status", (("partition", "0"), ("status", "loading")))] == 0
        converged_count = samples[("coordinator_rebalance_duration_seconds_count", (("partition", "0"),))]
        assert converged_count == len(told("rebalance-converged")) >= 2
        assert not [k for k in samples if k[0] == "coordinator_rebalance_in_progress_seconds"]  # all converged

        # A change that is not yet converged shows up as a rebalance in progress.
        assert (
            server.request("PUT", "/v1/groups/logged/connectors", {"Connectors": [{"Name": "A", "Tasks": 4}]})[1][
                "ErrorCode"
            ]
            == 0
        )
        in_progress = _samples(server)[("coordinator_rebalance_in_progress_seconds", (("group", "logged"),))]
        assert in_progress >= 0
    finally:
        server.stop()
