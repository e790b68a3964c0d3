"""A real Kafka Connect worker (`ConnectDistributed`, one JVM, jars from Maven Central through
`bench/vs_connect/pom.xml`) as a child process, configured as a Connect user configures one for our
coordinator: its top-level `bootstrap.servers` is the gateway (its group member, internal topics'
clients and shared admin read it), its connectors' own clients go to the real brokers. Used by the
second main job (`coordinator demo --connect`) and the real-JVM tests."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson

from coordinator.tools import maven
from coordinator.tools.devbroker import free_port

ROOT = Path(__file__).resolve().parents[2]
CONNECT_POM = ROOT / "bench" / "vs_connect" / "pom.xml"
CONNECT_LOG4J = ROOT / "bench" / "vs_connect" / "log4j2.properties"
SOURCE = "org.apache.kafka.connect.tools.VerifiableSourceConnector"


def libs() -> Path:
    """Kafka Connect's jars, resolved from Maven Central on first use."""
    return maven.libs(CONNECT_POM, "connect-runtime-*.jar", "Kafka Connect")


def http(method: str, url: str, body: object = None) -> tuple[int, object]:
    """(status, JSON body) of a Connect REST call; status 0 when nothing answered."""
    data = orjson.dumps(body) if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw = answer.read()
            return answer.status, orjson.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return 0, str(e)


def through_gateway(gateway: str, brokers: str) -> dict[str, str]:
    """A Connect worker's Kafka settings for our coordinator: its own clients (group member, internal
    topics, shared admin) read `bootstrap.servers`, the gateway; its connectors' clients go straight
    to the real brokers. The benchmark's Connect on our coordinator sets these too."""
    return {
        "bootstrap.servers": gateway,
        "producer.bootstrap.servers": brokers,
        "consumer.bootstrap.servers": brokers,
        "admin.bootstrap.servers": brokers,
    }


class ConnectWorker:
    """One ConnectDistributed JVM of group `group`, its REST API on a free port of 127.0.0.1."""

    def __init__(
        self,
        run_dir: Path,
        name: str,
        gateway: str,
        brokers: str,
        group: str,
        *,
        heartbeat_ms: int = 1_000,
        session_ms: int = 10_000,
        delay_ms: int = 5_000,
        extra: dict[str, object] | None = None,
    ) -> None:
        """`extra`: more worker properties, over these (e.g. `{"connect.protocol": "eager"}`)."""
        self.name, self.port = name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = run_dir / f"{name}.log"
        settings = {
            **through_gateway(gateway, brokers),
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.storage.partitions": 1,
            "status.storage.partitions": 1,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": self.port,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": heartbeat_ms,
            "scheduled.rebalance.max.delay.ms": delay_ms,
            "plugin.discovery": "only_scan",
            **(extra or {}),
        }
        self.properties = run_dir / f"{name}.properties"
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        self.log4j = CONNECT_LOG4J  # a subclass may log more
        self.process: subprocess.Popen | None = None

    def start(self) -> ConnectWorker:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    maven.java(),
                    "-Xms128m",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    # C1 only: these workers live minutes on a small machine (the second main job,
                    # the tests), where C2's compiling costs more than it saves: measured a worker's
                    # start to its REST API at 7.5 s of CPU with it, 4.5 s without.
                    "-XX:TieredStopAtLevel=1",
                    f"-Dlog4j2.configurationFile={self.log4j}",
                    "-cp",
                    f"{libs()}/*",
                    "org.apache.kafka.connect.cli.ConnectDistributed",
                    str(self.properties),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def up(self) -> bool:
        """Whether its REST API answers; a process that exited is an error, with its log's tail."""
        if not self.alive():
            raise RuntimeError(f"Kafka Connect worker {self.name} exited: {self.log.read_text()[-3000:]}")
        return http("GET", self.url + "/")[0] == 200

    def running(self, connector: str, tasks: int) -> dict | None:
        """The connector's status (Connect's REST API) when it and each of its `tasks` tasks are
        RUNNING (Connect names one worker for each), else None."""
        status, body = http("GET", f"{self.url}/connectors/{connector}/status")
        if status != 200 or body["connector"]["state"] != "RUNNING":
            return None
        if sorted(t["id"] for t in body["tasks"]) != list(range(tasks)) or any(
            t["state"] != "RUNNING" for t in body["tasks"]
        ):
            return None
        return body

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM: Connect stops its tasks and leaves the group."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait(timeout=30)


def source_connector(topic: str, tasks: int) -> dict:
    """A VerifiableSourceConnector's config: one record a second per task into `topic`."""
    return {
        "connector.class": SOURCE,
        "tasks.max": str(tasks),
        "topic": topic,
        "throughput": "1",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1",
    }


def until(condition, timeout: float, what: str):  # noqa: ANN001, ANN201
    """`condition()`'s first truthy value within `timeout` seconds, else AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout} s: {what}")
