"""`coordinator groups describe` against a stand-in coordinator: one HTTP endpoint that names itself
the group's coordinator and answers describe with what the state machine describes. No broker: the
served path is in test_serve_process.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest

from coordinator.api import wire
from coordinator.cli import main as coordinator
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.group_coordinator import GroupCoordinator

G = "connect-cluster"


@contextmanager
def serving(coordinator_of: GroupCoordinator) -> Iterator[str]:
    """The base URL of an endpoint answering find-coordinator (itself) and describe from `coordinator_of`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # find-coordinator
            self._answer(wire.FindCoordinatorResponse(error_code=0, error_message=None, partition=0, url=url))

        def do_GET(self) -> None:
            description = coordinator_of.describe_group(self.path.rpartition("/")[2])
            self._answer(wire.GroupDescription.of(description))

        def _answer(self, body: wire.Body) -> None:
            data = wire.encode(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass  # no access log in the test's output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def _static_member_crashed() -> Driver:
    """W1 and a static member S2 (instance i-2); S2 stops heartbeating and its session ends."""
    d = Driver()
    d.set_config(G, session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    d.set_connectors(G, {"A": 2})
    w1 = SimWorker(d, G, "W1")
    converge([w1, SimWorker(d, G, "S2", instance_id="i-2")])
    for _ in range(11):
        d.advance(1_000)
        w1.heartbeat()
    assert "S2" not in d.state.groups[G].members
    return d


def test_describe_shows_who_left_and_why_in_the_table_and_the_json(capsys: pytest.CaptureFixture) -> None:
    d = _static_member_crashed()
    epoch = d.state.groups[G].group_epoch
    with serving(d.coordinator) as url:
        assert coordinator(["groups", "describe", G, "--url", url]) == 0
        out = capsys.readouterr().out
        assert coordinator(["groups", "describe", G, "--url", url, "--format", "json"]) == 0
        described = orjson.loads(capsys.readouterr().out)
    departures = out[out.index(f"removed by the change to group epoch {epoch}:"):].splitlines()[1:]
    assert [line.split(None, 2) for line in departures] == [
        ["MEMBER", "INSTANCE", "WHY"], ["S2", "i-2", "fenced: no heartbeat within its session timeout"]]
    assert described["GroupEpoch"] == epoch and described["Departures"] == [
        {"MemberId": "S2", "InstanceId": "i-2", "Reason": "session-timeout",
         "ReasonText": "fenced: no heartbeat within its session timeout"}]


def test_describe_says_nothing_of_departures_when_the_last_change_removed_nobody(
        capsys: pytest.CaptureFixture) -> None:
    d = _static_member_crashed()
    d.set_connectors(G, {"A": 3})  # a new epoch, written by a change that removed nobody
    with serving(d.coordinator) as url:
        assert coordinator(["groups", "describe", G, "--url", url]) == 0
        out = capsys.readouterr().out
        assert coordinator(["groups", "describe", G, "--url", url, "--format", "json"]) == 0
        described = orjson.loads(capsys.readouterr().out)
    assert "removed by" not in out and "WHY" not in out
    assert described["Departures"] == []
