"""The admin CLI's counterpart: an HTTP endpoint answering `coordinator groups` from a GroupCoordinator
(`serving`), and a group whose static member crashed, for the tests of describe's departures (the admin
CLI's and the group page's)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson

from coordinator.api import wire
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.protocol import ErrorResponse

G = "connect-cluster"


@contextmanager
def serving(coordinator_of: GroupCoordinator, puts: list | None = None) -> Iterator[str]:
    """The base URL of an endpoint answering find-coordinator (itself) and describe from
    `coordinator_of`, and taking any PUT (appended to `puts` as (path, body))."""

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # connectors set, config set
            body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if puts is not None:
                puts.append((self.path, body))
            self._answer(ErrorResponse())

        def do_POST(self) -> None:  # find-coordinator
            self._answer(wire.FindCoordinatorResponse(error_code=0, error_message=None, partition=0, url=url))

        def do_GET(self) -> None:
            description = coordinator_of.describe_group(self.path.rpartition("/")[2])
            self._answer(description)

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


def static_member_crashed() -> Driver:
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
