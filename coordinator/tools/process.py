"""`coordinator serve` as a child process: started, waited for, killed (-9) and replaced. Used by the
main job (`coordinator demo`), the tests that fail coordinators over, and the benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson

from coordinator.tools.devbroker import free_port


class NotHealthy(AssertionError):
    """`coordinator serve` exited, or did not answer /health in time. An AssertionError for the tests
    that start one; `summary` says which in one line, with the process's last log line, for a command
    that tells a user (`coordinator demo`)."""

    def __init__(self, message: str, summary: str) -> None:
        super().__init__(message)
        self.summary = summary


class ServeProcess:
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        log_dir: Path,
        *extra: str,
        port: int | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"serve-{self.port}-{time.monotonic_ns()}.log"
        self.args = [
            sys.executable,
            "-m",
            "coordinator",
            "serve",
            "--bootstrap-servers",
            bootstrap_servers,
            "--topic",
            topic,
            "--listen",
            f"127.0.0.1:{self.port}",
            *extra,
        ]
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen | None = None

    def start(self, wait: bool = True) -> ServeProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        if wait:
            self.wait_healthy()
        return self

    def wait_healthy(self, timeout: float = 30.0, partitions: int | None = None) -> dict:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                log = self.log()
                raise NotHealthy(
                    f"coordinator serve exited {self.process.returncode}:\n{log}",
                    f"exited {self.process.returncode}: {_last_line(log)}",
                )
            try:
                status, body = self.request("GET", "/health")
                last = body
                if status == 200 and (partitions is None or len(body["Partitions"]) == partitions):
                    return body
            except OSError:
                pass
            time.sleep(0.05)
        log = self.log()
        raise NotHealthy(
            f"coordinator at {self.url} not healthy within {timeout}s ({last}):\n{log}",
            f"did not answer /health within {timeout:g} s: {_last_line(log)}",
        )

    def request(
        self, method: str, path: str, body: dict | None = None, token: str | None = None, timeout: float = 10.0
    ) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else orjson.dumps(body)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return response.status, orjson.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, orjson.loads(e.read())

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def kill(self) -> None:
        """kill -9: no leave, no flush, an open transaction left as it is."""
        self.signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            return self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""


def _last_line(log: str) -> str:
    lines = log.strip().splitlines()
    return lines[-1] if lines else "it wrote nothing"
