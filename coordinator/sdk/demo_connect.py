"""The second main job (`make run-connect`, `coordinator demo --connect`): unmodified Kafka Connect
4.3.1 workers on our coordinator.

A coordinator with its Kafka listener, a gateway in front of the broker, and three real
`ConnectDistributed` JVMs whose `bootstrap.servers` is the gateway, running connect-test-plugins'
VerifiableSourceConnector. The story, printed as who runs what changes: two workers start and the
connector is created; a third joins; one is stopped; the coordinator is killed with SIGKILL and a new
process takes its partitions over from the topic; then the group's replay timeline. It exits 0 only
if every task ran on at most one worker at every look (twice a second, from the coordinator's own
view, read from Connect's bytes) and ends RUNNING on exactly one (Connect's own REST status).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from coordinator.api import operations
from coordinator.errors import CliError
from coordinator.sdk.demo import start_coordinator
from coordinator.tools.connect_worker import ConnectWorker, http, source_connector, until
from coordinator.tools.devbroker import free_port
from coordinator.tools.process import ServeProcess

GROUP = "demo-real-connect"
TASKS = 6


class Watch:
    """Looks at the group twice a second: no task may be held by two workers at once."""

    def __init__(self, serve: list[ServeProcess], group: str) -> None:
        self.serve, self.group = serve, group
        self.problems: list[str] = []
        self.looks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch", daemon=True)

    def start(self) -> Watch:
        self._thread.start()
        return self

    def holders(self) -> dict[str, list[str]] | None:
        method, path = operations.route("describeGroup", group_id=self.group)
        status, body = http(method, self.serve[-1].url + path)
        if status != 200 or not isinstance(body, dict):
            return None
        return {
            m.get("Url") or m["MemberId"]: [
                *m["Assignment"]["Connectors"],
                *(f"{t['Connector']}-{t['Task']}" for t in m["Assignment"]["Tasks"]),
            ]
            for m in body.get("Members", [])
        }

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            holders = self.holders()
            if holders is None:
                continue  # the coordinator is being replaced
            self.looks += 1
            twice = [item for item, n in Counter(i for items in holders.values() for i in items).items() if n > 1]
            if twice:
                self.problems.append(f"held by two workers at once: {sorted(twice)} ({holders})")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _show(what: str, watch: Watch, workers: dict[str, ConnectWorker]) -> None:
    print(f"\n== {what}")
    names = {f"{w.url}/": n for n, w in workers.items()}
    for url, items in sorted((watch.holders() or {}).items(), key=lambda x: names.get(x[0], x[0])):
        print(f"   {names.get(url, url):<10} {url:<26} runs {', '.join(sorted(items)) or 'nothing'}")


def _gateway(bootstrap: str, listener: str, run_dir: Path) -> tuple[str, subprocess.Popen]:
    """`coordinator gateway` in front of `bootstrap`, sending GROUP's requests to `listener`: its
    address and its process."""
    gateway = f"127.0.0.1:{free_port()}"
    args = ["--bootstrap-server", bootstrap, "--listen", gateway, "--groups", GROUP, "--coordinator", listener]
    with (run_dir / "gateway.log").open("wb") as log:
        proxy = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "gateway", *args], stdout=log, stderr=subprocess.STDOUT
        )
    return gateway, proxy


def _timeline(bootstrap: str, topic: str) -> list[str]:
    """Print `coordinator replay timeline` of GROUP; what went wrong."""
    args = ["--bootstrap-servers", bootstrap, "--topic", topic, "--group", GROUP]
    timeline = subprocess.run(
        [sys.executable, "-m", "coordinator", "replay", "timeline", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    print("\n== coordinator replay timeline --group", GROUP)
    print(timeline.stdout[-6000:])
    return [] if timeline.returncode == 0 else [f"replay timeline failed: {timeline.stderr.strip()[-500:]}"]


def _serve_flags(listener: str) -> tuple[str, ...]:
    # Text logs: a coordinator that does not start is told by its last line (start_coordinator).
    return (
        "--allow-anonymous",
        "--kafka-listener",
        listener,
        "--heartbeat-interval-ms",
        "1000",
        "--log-format",
        "text",
    )


def _runs_a_share(watch: Watch, worker: ConnectWorker) -> bool:
    """Whether the group's holders show `worker` (by its REST port) holding something."""
    return any(url.endswith(f":{worker.port}/") and items for url, items in (watch.holders() or {}).items())


def story(bootstrap: str, topic: str, run_dir: Path) -> list[str]:
    """The story; what went wrong (nothing: an empty list)."""
    listener = f"127.0.0.1:{free_port()}"
    flags = _serve_flags(listener)
    serves = [ServeProcess(bootstrap, topic, run_dir, *flags)]
    proxy: subprocess.Popen | None = None
    workers: dict[str, ConnectWorker] = {}
    watch = Watch(serves, GROUP)
    try:
        start_coordinator(serves[0], "the coordinator")
        gateway, proxy = _gateway(bootstrap, listener, run_dir)
        print(f"coordinator {serves[0].url} (Kafka listener {listener}), gateway {gateway} in front of {bootstrap}")
        workers = {
            n: ConnectWorker(run_dir, n, gateway, bootstrap, GROUP) for n in ("connect-1", "connect-2", "connect-3")
        }
        for name in ("connect-1", "connect-2"):
            workers[name].start()
        until(lambda: all(workers[n].up() for n in ("connect-1", "connect-2")), 180, "connect-1 and -2 answer")
        watch.start()
        first = workers["connect-1"]
        until(
            lambda: (
                http("PUT", f"{first.url}/connectors/src/config", source_connector(f"{GROUP}-data", TASKS))[0]
                in (200, 201)
            ),
            60,
            "the connector is created",
        )
        until(lambda: first.running("src", TASKS), 120, "every task RUNNING")
        _show(f"two Kafka Connect workers run connector src ({TASKS} tasks) on our coordinator", watch, workers)

        workers["connect-3"].start()
        until(lambda: workers["connect-3"].up(), 180, "connect-3 answers")
        until(
            lambda: _runs_a_share(watch, workers["connect-3"]) and first.running("src", TASKS),
            120,
            "connect-3 runs a share",
        )
        _show("connect-3 joined: it took a share, in Connect's incremental cooperative rounds", watch, workers)

        workers["connect-2"].stop()
        until(
            lambda: first.running("src", TASKS) and len(watch.holders() or {}) == 2,
            120,
            "connect-2's work runs elsewhere",
        )
        _show("connect-2 stopped (SIGTERM): its work moved to the others", watch, workers)

        serves[0].kill()
        print("\n== the coordinator was killed with SIGKILL; a new process takes its partitions over from the topic")
        serves.append(ServeProcess(bootstrap, topic, run_dir, *flags, port=serves[0].port))
        start_coordinator(serves[-1], "the new coordinator")
        time.sleep(6.0)
        until(lambda: first.running("src", TASKS), 60, "every task RUNNING after the failover")
        exited = [n for n, w in workers.items() if n != "connect-2" and not w.alive()]
        _show(
            "the workers carried on with the new coordinator" + (f" (exited: {exited})" if exited else ""),
            watch,
            workers,
        )
        watch.stop()
        problems = list(watch.problems) + [f"worker {n} exited" for n in exited]
        problems += _timeline(bootstrap, topic)
        print(f"({watch.looks} looks at the group, twice a second)")
        return problems
    finally:
        watch.stop()
        for w in workers.values():
            w.kill()
        if proxy is not None:
            proxy.kill()
            proxy.wait(timeout=30)
        for s in serves:
            if s.process is not None:
                s.kill()


def run(bootstrap: str, topic: str) -> int:
    with tempfile.TemporaryDirectory(prefix="coordinator-demo-connect-") as logs:
        try:
            problems = story(bootstrap, topic, Path(logs))
        except (CliError, AssertionError, RuntimeError, OSError) as e:
            problems = [str(e)]
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(
        "\nThe story is over: every task ran on at most one worker at every look and ends RUNNING on exactly "
        "one; the workers are unmodified Kafka Connect, the coordinator and the history are ours."
    )
    return 0
