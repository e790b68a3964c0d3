"""`coordinator serve --tls-cert/--tls-key` (issue 29, item 11): the HTTP API over TLS.

A client that trusts the CA gets answers (health, connectors, a worker's heartbeats, the admin
command line with --ca-file); the advertised URL is https. A plain-HTTP client, a TLS client that
does not trust the CA and one that names no CA at all fail at once with an error, never a hang;
the server stays up for the clients that do it right, and its log has no traceback."""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
import tls_files
from serve_workers import Ledger, Worker, converge

from records import TaskId

from coordinator.cli import main as coordinator
from coordinator.tools.process import ServeProcess
from tests.topics import create_topic

pytestmark = pytest.mark.integration

G = "tls-group"
CONSOLE_SCRIPT = Path(sys.executable).with_name("coordinator")


class TlsServe(ServeProcess):
    """`coordinator serve` over HTTPS, asked with a client context that trusts the test CA."""

    def __init__(self, *args, ca: Path, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.url = self.url.replace("http://", "https://")
        self.context = ssl.create_default_context(cafile=str(ca))

    def request(
        self, method: str, path: str, body: dict | None = None, token: str | None = None, timeout: float = 10.0
    ) -> tuple[int, dict]:
        data = None if body is None else orjson.dumps(body)
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.context) as response:
                return response.status, orjson.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, orjson.loads(e.read())


def test_the_http_api_over_tls(kafka_broker, unique_topic, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    files = tls_files.make(tmp_path / "tls")
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    server = TlsServe(
        kafka_broker.bootstrap_servers,
        unique_topic,
        tmp_path,
        "--allow-anonymous",
        "--tls-cert",
        str(files.cert),
        "--tls-key",
        str(files.key),
        "--server-assignment-interval-ms",
        "0",
        ca=files.ca,
    )
    try:
        server.start()
        # A client that trusts the CA: answers, and the instance names itself by its https URL.
        status, health = server.request("GET", "/health")
        assert status == 200 and health["Partitions"] == {"0": "active"}, health
        status, found = server.request("POST", "/v1/find-coordinator", {"GroupId": G})
        assert status == 200 and (found["ErrorCode"], found["Url"]) == (0, server.url), found
        status, body = server.request("PUT", f"/v1/groups/{G}/connectors", {"Connectors": [{"Name": "A", "Tasks": 2}]})
        assert (status, body["ErrorCode"]) == (200, 0), body
        workers = [Worker(G, "w1", Ledger(), timeout=30)]
        converge(server, workers, frozenset(["A", TaskId("A", 0), TaskId("A", 1)]))

        def refused(attempt) -> str:  # noqa: ANN001
            """`attempt` fails with a transport or TLS error, promptly; its description."""
            started = time.monotonic()
            with pytest.raises((OSError, http.client.HTTPException)) as failure:
                attempt()
            assert time.monotonic() - started < 8, "the failure took as long as a timeout: the client hung"
            return repr(failure.value)

        host, port = "127.0.0.1", server.port
        for _ in range(2):  # twice: a failed client leaves the server able to fail the next one too
            # Plain HTTP to the TLS port: no HTTP answer (the TLS handshake fails and the server
            # closes the connection).
            def plain() -> None:
                connection = http.client.HTTPConnection(host, port, timeout=10)
                try:
                    connection.request("GET", "/health")
                    connection.getresponse().read()
                finally:
                    connection.close()

            refused(plain)
            # TLS without the CA: the client refuses the server's certificate.
            with pytest.raises(urllib.error.URLError) as failure:
                urllib.request.urlopen(server.url + "/health", timeout=10, context=ssl.create_default_context())
            assert isinstance(failure.value.reason, ssl.SSLCertVerificationError), failure.value
            # A raw TLS handshake that trusts nothing: refused the same way, at the handshake.
            untrusting = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            with socket.create_connection((host, port), timeout=10) as raw:
                with pytest.raises(ssl.SSLCertVerificationError):
                    untrusting.wrap_socket(raw, server_hostname=host)
            # A client that sends garbage in place of a ClientHello, then closes.
            with socket.create_connection((host, port), timeout=10) as raw:
                raw.sendall(b"\x00" * 64 + b"\r\n\r\n")
            # The server is still up and answers a client that does it right, with the group intact.
            assert server.process.poll() is None, server.log()
            status, described = server.request("GET", f"/v1/groups/{G}")
            assert status == 200 and [m["MemberId"] for m in described["Members"]] == ["w1"], described
            assert workers[0].heartbeat(server) == 0

        # The admin command line: with --ca-file it answers; without, one line and exit 1.
        auth = ["--url", server.url]
        capsys.readouterr()
        assert coordinator(["groups", "list", *auth, "--ca-file", str(files.ca)]) == 0
        listed = capsys.readouterr().out.splitlines()
        assert listed[1].split()[0] == G, listed
        without = subprocess.run(
            [str(CONSOLE_SCRIPT), "groups", "list", *auth], capture_output=True, text=True, timeout=60
        )
        assert without.returncode == 1, without
        assert "Traceback" not in without.stderr and len(without.stderr.strip().splitlines()) == 1, without.stderr
        assert "certificate" in without.stderr.lower(), without.stderr

        assert server.request("GET", "/health")[0] == 200
        assert "Traceback" not in server.log(), server.log()
    finally:
        assert server.stop() == 0
