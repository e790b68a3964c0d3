"""The three systems the side-by-side benchmark runs, behind one interface: real Kafka Connect workers
(one JVM each, `ConnectDistributed`) on Kafka's own group coordinator; ours (one `coordinator worker`
process each, against a `coordinator serve`); and the same real Connect workers on our coordinator
(a `coordinator serve` with its Kafka listener and a `coordinator gateway` in front of the broker,
the workers' `bootstrap.servers`), on the same Apache Kafka with the same timeouts.

A worker has a name; a restart starts a new process under the same name: for Connect the same REST
port (its worker id is host:port), for ours the same instance id. `kill` is kill -9; `stop` is
SIGTERM and waits for the process to exit (Connect's herder stops its tasks; our fleet revokes and
leaves, the SDK's `stop`). Both write what their workers run into a `Timeline`.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path

import orjson

from bench.vs_connect.timeline import DOWN, REBALANCE, START, STOP, Timeline
from coordinator.tools import connect_worker, maven
from coordinator.tools.devbroker import free_port, free_port_block
from coordinator.tools.process import ServeProcess

CONNECT_LOG4J = connect_worker.CONNECT_LOG4J
CONNECT_JVM = ("-Xms128m", "-Xmx256m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true")


@dataclass(frozen=True)
class Timing:
    """Kafka Connect's defaults; `scaled(f)` divides every one by f (`--fast`)."""

    session_ms: int = 10_000
    heartbeat_ms: int = 3_000
    delay_ms: int = 300_000  # scheduled.rebalance.max.delay.ms
    rebalance_ms: int = 60_000
    initial_ms: int = 3_000  # the broker's group.initial.rebalance.delay.ms; our initial assignment delay

    def scaled(self, factor: float) -> Timing:
        return replace(self, **{k: max(1, round(getattr(self, k) / factor)) for k in self.__dataclass_fields__})


class System:
    label = ""

    def __init__(self, bootstrap: str, timing: Timing, run_dir: Path, key: str) -> None:
        self.bootstrap, self.timing, self.run_dir, self.key = bootstrap, timing, run_dir, key
        self.timeline = Timeline()
        self.processes: dict[str, subprocess.Popen] = {}
        self._incarnations: dict[str, int] = {}

    # --- what each system does its own way -----------------------------------------------------

    def _command(self, name: str) -> list[str]:
        raise NotImplementedError

    async def _ready(self, name: str) -> None:
        """Returns when the new process of `name` is up."""

    async def prepare(self, connectors: dict[str, int]) -> None:
        """Before any worker: what the whole run needs (ours: a coordinator)."""

    async def configure(self, connectors: dict[str, int]) -> None:
        raise NotImplementedError

    async def configure_empty(self, connectors: dict[str, int]) -> None:
        """The connectors configured in a group that has no member (the join storm's start)."""
        raise NotImplementedError

    def refresh(self) -> None:
        """Pull the events written since the last call."""

    # --- shared ----------------------------------------------------------------------------------

    def log_path(self, name: str) -> Path:
        return self.run_dir / f"{name}-{self._incarnations.get(name, 0)}.log"

    async def launch(self, names: list[str]) -> None:
        """Start these workers at once; returns when every one is up."""
        for name in names:
            self._incarnations[name] = self._incarnations.get(name, 0) + 1
            with self.log_path(name).open("ab") as log:
                self.processes[name] = subprocess.Popen(
                    self._command(name),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        await asyncio.gather(*(self._ready(name) for name in names))

    async def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        now = time.time()
        process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(process.wait)
        self.timeline.add(now, DOWN, name)

    async def stop(self, name: str, timeout: float = 120.0) -> None:
        process = self.processes.pop(name)
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)
        self.refresh()
        self.timeline.add(time.time(), DOWN, name)

    def alive(self) -> set[str]:
        return {name for name, p in self.processes.items() if p.poll() is None}

    def died(self) -> list[str]:
        """Workers whose process ended without being told to: the run is broken."""
        return [
            f"{name} (exit {p.returncode}; {self.log_path(name)})"
            for name, p in self.processes.items()
            if p.poll() is not None
        ]

    def leader(self) -> str | None:
        """The worker that computes assignments, where one does it for the whole group."""
        return None

    def joined_since(self, name: str | None, t: float) -> float | None:
        """When `name` (any worker: None) first joined (its first rebalance) at or after `t`; None if it
        has not yet."""
        return next(
            (
                e.t
                for e in self.timeline.events()
                if e.kind == REBALANCE and (name is None or e.worker == name) and e.t >= t
            ),
            None,
        )

    async def close(self) -> None:
        await asyncio.gather(*(self.kill(name) for name in list(self.processes)))


# --- Kafka Connect ---------------------------------------------------------------------------------


_JOINED = re.compile(rb"^(\d{13}) \S+ .*Joined group at generation (\d+).*leaderUrl='http://([^/']+)/'")


class ConnectSystem(System):
    """`ConnectDistributed` workers with the IncrementalCooperativeAssignor (connect.protocol
    sessioned, the default) and VerifiableSourceConnector's tasks (one record a second each)."""

    label = "Kafka Connect"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.libs = connect_worker.libs()
        self.ports: dict[str, int] = {}
        self.names_by_id: dict[str, str] = {}
        self.status_topic = f"{self.key}-status"
        self._log_offsets: dict[Path, int] = {}
        self._leader: tuple[float, str] | None = None  # (when seen, worker name)
        self._reader: threading.Thread | None = None
        self._closing = threading.Event()

    def _properties(self, name: str) -> Path:
        port = self.ports.setdefault(name, free_port())
        self.names_by_id[f"127.0.0.1:{port}"] = name
        t = self.timing
        settings = {
            **self._clients(),
            "group.id": self.key,
            "config.storage.topic": f"{self.key}-configs",
            "offset.storage.topic": f"{self.key}-offsets",
            "status.storage.topic": self.status_topic,
            "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.storage.partitions": 1,
            "status.storage.partitions": 1,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "listeners": f"http://127.0.0.1:{port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": port,
            "session.timeout.ms": t.session_ms,
            "heartbeat.interval.ms": t.heartbeat_ms,
            "rebalance.timeout.ms": t.rebalance_ms,
            "scheduled.rebalance.max.delay.ms": t.delay_ms,
            "plugin.discovery": "only_scan",
        }
        path = self.run_dir / f"{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        return path

    def _clients(self) -> dict[str, str]:
        """Where the worker's Kafka clients go: all of them to the broker, whose coordinator has the group."""
        return {"bootstrap.servers": self.bootstrap}

    def _command(self, name: str) -> list[str]:
        return [
            maven.java(),
            *CONNECT_JVM,
            f"-Dlog4j2.configurationFile={CONNECT_LOG4J}",
            "-cp",
            f"{self.libs}/*",
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(self._properties(name)),
        ]

    def _url(self, name: str | None = None) -> str:
        name = name or min(self.alive())
        return f"http://127.0.0.1:{self.ports[name]}"

    async def _ready(self, name: str) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.processes[name].poll() is not None:
                raise RuntimeError(
                    f"Connect worker {name} exited {self.processes[name].returncode}: {self.log_path(name)}"
                )
            if (await asyncio.to_thread(_http, "GET", self._url(name) + "/"))[0] == 200:
                return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"Connect worker {name}'s REST API did not answer within 180 s")

    async def configure(self, connectors: dict[str, int]) -> None:
        for connector, tasks in connectors.items():
            config = connect_worker.source_connector(f"{self.key}-data", tasks)
            deadline = time.monotonic() + 60
            while True:  # 409 while the group rebalances; any worker forwards to the leader
                status, body = await asyncio.to_thread(
                    _http, "PUT", f"{self._url()}/connectors/{connector}/config", config
                )
                if status in (200, 201):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"creating connector {connector}: {status} {body}")
                await asyncio.sleep(0.5)
        self._start_reader()

    async def configure_empty(self, connectors: dict[str, int]) -> None:
        # Connect keeps connectors in its config topic, written by a worker: one writes them and
        # leaves, and the group is empty with its connectors configured.
        await self.launch(["seed"])
        await self.configure(connectors)
        while not self.timeline.covered(task_ids(connectors)):
            await asyncio.sleep(0.2)
        await self.stop("seed")

    def _start_reader(self) -> None:
        if self._reader is None:
            self._reader = threading.Thread(target=self._read_status, name="connect-status", daemon=True)
            self._reader.start()

    def _read_status(self) -> None:
        """The status topic, from its start: each task's state as the worker running it wrote it."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"{self.key}-bench-reader",
                "enable.auto.commit": False,
                "log_level": 3,
            }
        )
        consumer.assign([TopicPartition(self.status_topic, 0, OFFSET_BEGINNING)])
        try:
            while not self._closing.is_set():
                message = consumer.poll(0.1)
                if message is None or message.error() or message.value() is None:
                    continue
                key = message.key().decode()
                if not key.startswith("status-task-"):
                    continue
                status = orjson.loads(message.value())
                worker = self.names_by_id.get(status.get("worker_id"), status.get("worker_id"))
                kind = START if status.get("state") == "RUNNING" else STOP
                self.timeline.add(message.timestamp()[1] / 1000, kind, worker, [key.removeprefix("status-task-")])
        finally:
            consumer.close()

    def refresh(self) -> None:
        """Rebalances from each worker's log: Connect logs "Joined group at generation N" once per round."""
        for name, count in self._incarnations.items():
            for n in range(1, count + 1):
                path = self.run_dir / f"{name}-{n}.log"
                offset = self._log_offsets.get(path, 0)
                try:
                    with path.open("rb") as f:
                        f.seek(offset)
                        chunk = f.read()
                except OSError:
                    continue
                complete = chunk[: chunk.rfind(b"\n") + 1]
                self._log_offsets[path] = offset + len(complete)
                for line in complete.splitlines():
                    if match := _JOINED.match(line):
                        t = int(match.group(1)) / 1000
                        self.timeline.add(t, REBALANCE, name)
                        leader = self.names_by_id.get(match.group(3).decode())
                        if leader and (self._leader is None or t >= self._leader[0]):
                            self._leader = (t, leader)

    def leader(self) -> str | None:
        """The group's leader as the last join said: the worker running the assignor."""
        self.refresh()
        return None if self._leader is None else self._leader[1]

    async def close(self) -> None:
        await super().close()
        self._closing.set()
        if self._reader is not None:
            await asyncio.to_thread(self._reader.join, 5)


class ConnectOnOurSystem(ConnectSystem):
    """The same `ConnectDistributed` workers, unmodified, on our coordinator: a `coordinator serve`
    with its Kafka listener (`--kafka-listener`) and a `coordinator gateway` in front of the broker
    that sends this group to it. The workers' own clients (group member, internal topics, shared
    admin) bootstrap from the gateway, their connectors' clients from the broker
    (`connect_worker.through_gateway`, as a Connect user configures it). Connect's leader still
    runs Connect's assignor; the coordinator only keeps the group (JoinGroup, SyncGroup, Heartbeat,
    LeaveGroup), with the same group settings as the broker's coordinator has in this benchmark (an
    initial delay of `initial_ms`, sessions down to the run's session timeout). What each task runs
    on comes from the status topic, as for Connect on Kafka's coordinator."""

    label = "Connect on ours"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.serve: ServeProcess | None = None
        self.gateway: subprocess.Popen | None = None
        self.gateway_port = 0

    async def prepare(self, connectors: dict[str, int]) -> None:
        t = self.timing
        await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "coordinator", "topic", "create", "--bootstrap-servers", self.bootstrap,
            "--topic", self.key, "--partitions", "1", "--replication-factor", "1"],
            check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        listener = f"127.0.0.1:{free_port()}"
        self.serve = ServeProcess(
            self.bootstrap,
            self.key,
            self.run_dir,
            "--allow-anonymous",
            "--log-level",
            "WARNING",
            "--kafka-listener",
            listener,
            "--initial-assignment-delay-ms",
            str(t.initial_ms),
            "--classic-min-session-timeout-ms",
            str(min(6000, t.session_ms)),
        )
        await asyncio.to_thread(self.serve.start)
        # The gateway's ports: P bootstrap, P+1 its coordinator node, P+2+N broker N (a dev broker's
        # node ids are small).
        self.gateway_port = free_port_block(5)
        self.gateway = await asyncio.to_thread(self._start_gateway, listener)
        await self._gateway_listening(30.0)

    def _start_gateway(self, listener: str) -> subprocess.Popen:
        with (self.run_dir / "gateway.log").open("ab") as log:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "coordinator",
                    "gateway",
                    "--bootstrap-server",
                    self.bootstrap,
                    "--listen",
                    f"127.0.0.1:{self.gateway_port}",
                    "--groups",
                    re.escape(self.key),
                    "--coordinator",
                    listener,
                    "--log-level",
                    "WARNING",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    async def _gateway_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.gateway.poll() is not None:
                raise RuntimeError(f"the gateway exited {self.gateway.returncode}: {self.run_dir / 'gateway.log'}")
            try:
                await asyncio.to_thread(_dial, "127.0.0.1", self.gateway_port)
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the gateway did not listen within {timeout:g} s") from None
                await asyncio.sleep(0.1)
            else:
                return

    def _clients(self) -> dict[str, str]:
        return connect_worker.through_gateway(f"127.0.0.1:{self.gateway_port}", self.bootstrap)

    def died(self) -> list[str]:
        died = super().died()
        if self.gateway is not None and self.gateway.poll() is not None:
            died.append(f"the gateway (exit {self.gateway.returncode}; {self.run_dir / 'gateway.log'})")
        return died

    async def close(self) -> None:
        await super().close()
        if self.gateway is not None and self.gateway.poll() is None:
            self.gateway.kill()
            await asyncio.to_thread(self.gateway.wait)
        if self.serve is not None:
            await asyncio.to_thread(self.serve.stop)


# --- ours ------------------------------------------------------------------------------------------


class OurSystem(System):
    """`coordinator serve` with the same timeouts, and a `coordinator worker` process per worker
    (static members: the name is the instance id), the client-side incremental cooperative assignor
    (run by a worker, as Connect's leader runs its own)."""

    label = "ours"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.serve: ServeProcess | None = None
        self._event_offsets: dict[str, int] = {}

    async def prepare(self, connectors: dict[str, int]) -> None:
        t = self.timing
        await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "coordinator", "topic", "create", "--bootstrap-servers", self.bootstrap,
            "--topic", self.key, "--partitions", "1", "--replication-factor", "1"],
            check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        self.serve = ServeProcess(
            self.bootstrap,
            self.key,
            self.run_dir,
            "--allow-anonymous",
            "--log-level",
            "WARNING",
            "--session-timeout-ms",
            str(t.session_ms),
            "--heartbeat-interval-ms",
            str(t.heartbeat_ms),
            "--rebalance-timeout-ms",
            str(t.rebalance_ms),
            "--scheduled-rebalance-max-delay-ms",
            str(t.delay_ms),
            "--initial-assignment-delay-ms",
            str(t.initial_ms),
        )
        await asyncio.to_thread(self.serve.start)

    def _command(self, name: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "coordinator",
            "worker",
            "--group",
            self.key,
            "--url",
            self.serve.url,
            "--names",
            name,
            "--events",
            str(self._events_path(name)),
            "--quiet",
        ]

    def _events_path(self, name: str) -> Path:
        return self.run_dir / f"{name}.events.jsonl"

    async def configure(self, connectors: dict[str, int]) -> None:
        body = {"Connectors": [{"Name": n, "Tasks": t} for n, t in connectors.items()]}
        status, answer = await asyncio.to_thread(self.serve.request, "PUT", f"/v1/groups/{self.key}/connectors", body)
        if status != 200 or answer.get("ErrorCode"):
            raise RuntimeError(f"setting connectors: {status} {answer}")

    configure_empty = configure  # a group can be configured before it has members

    def refresh(self) -> None:
        for name in self._incarnations:
            path = self._events_path(name)
            offset = self._event_offsets.get(name, 0)
            try:
                with path.open("rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._event_offsets[name] = offset + len(complete)
            for line in complete.splitlines():
                event = orjson.loads(line)
                kind = {"assigned": START, "revoked": STOP, "lost": STOP, "rebalance": REBALANCE}[event["event"]]
                self.timeline.add(event["ts"], kind, event["worker"], event.get("tasks") or [""] * (kind == REBALANCE))

    async def close(self) -> None:
        await super().close()
        if self.serve is not None:
            await asyncio.to_thread(self.serve.stop)


def task_ids(connectors: dict[str, int]) -> list[str]:
    return [f"{c}-{i}" for c, n in connectors.items() for i in range(n)]


def _dial(host: str, port: int) -> None:
    """Raises OSError unless something accepts a connection at host:port."""
    with socket.create_connection((host, port), 1.0):
        pass


def _http(method: str, url: str, body: object = None) -> tuple[int, object]:
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, orjson.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read()[:500]
    except (OSError, ValueError):
        return 0, None


SYSTEMS = {"connect": ConnectSystem, "ours": OurSystem, "connect-ours": ConnectOnOurSystem}
