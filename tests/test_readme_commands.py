"""Every shell line of the README, of docs/*.md and of docker/README.md runs as printed
(issue 29 item 10; the reference moved from the README to docs/ in issue 30 item 7).

The lines are read from the documents' fenced shell blocks (```sh, bash, shell, console), a
backslash continuation joined to its line and a trailing `# comment` dropped, and run on the session
broker, against one coordinator started once for the module from docs/service.md's own
`coordinator serve` line. They run in the order of what they build on (`STAGES`: the topic, then
serve, then the admin commands against it, then the replay of a story written once serve has
stopped), each stage in the documents' order, so that a paragraph may move from one document to
another without reordering the test. A line is changed in one way only, in one place:
`README_DEFAULTS` puts this test's broker, topic and port where the documents print their example
addresses. An optional `[--flag value]` is run with its first alternative, and one that holds a
placeholder (FILE, URL, MS, KEY=VALUE, ...) is left out.

Each line is either run (`EXPECTED` says what it must print: its exit code is 0 unless said) or
listed in `NOT_HERE` with the reason it cannot run here. A line in neither fails the test, so a new
line is run by default unless someone writes down why not. Where a document shows a
command's output (the replay timeline), the output must hold those lines.

docs/replay.md reads the story its example shows (`tests/replay_scenarios.py`'s
on-call story, group connect-prod): it is written into the topic, non-transactionally and with its
own timestamps, once the coordinator has stopped, so that its offsets are the document's.
"""

from __future__ import annotations

import http.client
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer
from replay_scenarios import on_call_story

from coordinator.tools.devbroker import free_port
from coordinator.tools.partitions import partition_for
from tests.signals import default_sigint

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "docker" / "README.md"]
SHELL_BLOCKS = {"sh", "bash", "shell", "console", "shell-session"}
COORDINATOR = str(Path(sys.executable).with_name("coordinator"))
PARTITIONS = 16  # docs/operations.md's `--partitions 16`


@dataclass
class Line:
    document: str
    number: int  # of its first line
    text: str  # the command as printed, continuations joined, without its comment
    block_end: int  # the line number of the block's closing fence

    @property
    def id(self) -> str:
        return f"{self.document}:{self.number}"


def shell_lines(path: Path) -> tuple[list[Line], dict[int, tuple[str, list[str]]]]:
    """The commands of a document's shell blocks, and every other fenced block (its language and
    lines) by its opening fence's line number (the output a command block may be followed by)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    commands: list[Line] = []
    others: dict[int, tuple[str, list[str]]] = {}
    n = 0
    while n < len(lines):
        fence = re.match(r"^\s*```(\S*)\s*$", lines[n])
        if not fence:
            n += 1
            continue
        start, body = n + 1, []
        n += 1
        while n < len(lines) and not re.match(r"^\s*```\s*$", lines[n]):
            body.append(lines[n])
            n += 1
        if fence.group(1) not in SHELL_BLOCKS:
            others[start] = (fence.group(1), body)
        else:
            pending, first = "", 0
            for offset, raw in enumerate(body):
                text = raw.strip()
                if not pending and (not text or text.startswith("#")):
                    continue
                text = re.sub(r"\s+#\s.*$", "", text)  # a trailing comment (no document's line quotes a ' # ')
                if not pending:
                    first = start + offset + 1
                if text.endswith("\\"):
                    pending += text[:-1].strip() + " "
                    continue
                commands.append(Line(path.relative_to(ROOT).as_posix(), first, " ".join((pending + text).split()), n))
                pending = ""
        n += 1
    return commands, others


def all_lines() -> list[Line]:
    return [line for path in DOCUMENTS if path.exists() for line in shell_lines(path)[0]]


# What a line builds on, by its first two words: the topic before serve, serve before the admin commands
# that talk to it, and the replay's story written (serve stopped first) before dump and replay. A line
# of no stage runs after them; within a stage, the documents' order.
STAGES = {
    ("coordinator", "topic"): 0,
    ("coordinator", "serve"): 1,
    ("coordinator", "groups"): 2,
    ("coordinator", "connectors"): 2,
    ("coordinator", "config"): 2,
    ("coordinator", "dump"): 3,
    ("coordinator", "replay"): 3,
}


def in_stage_order(lines: list[Line]) -> list[Line]:
    return sorted(lines, key=lambda line: STAGES.get(tuple(line.text.split()[:2]), len(STAGES)))


# --- what cannot run here, and why ------------------------------------------------------------------

NOT_HERE = {
    "coordinator replay simulate --group connect-cluster --file classic.jsonl --recorded-heartbeat-interval 500ms "
    "--scheduled-delay 0": "a classic "
    "group's records, which the story here does not write; tests/test_simulate.py runs this line on an eager group's",
    "make run": "the main job: starts its own broker and coordinator and plays a 25 s story; "
    "tests/test_demo.py runs its `coordinator demo` as a process on the session broker (and `make run-connect`'s)",
    "make test": "the whole test suite, this test included",
    "coordinator topic upgrade-format --url http://coordinator-1:8400 [--level 2]": "a deployment's instances, "
    "all on a release that reads the level; tests/test_release_upgrade.py runs it with two releases' serve processes",
    "coordinator topic describe --bootstrap-server kafka:9093 --command-config client.properties "
    "--kafka-config sasl.username=coordinator": "a SASL listener and its client.properties: the session broker is "
    "plaintext; tests/test_kafka_config.py translates such files",
    "coordinator serve --ownership group --kafka-listener 0.0.0.0:9400 --kafka-advertised coordinator-1:9400 ...": "a "
    "deployment's hosts (coordinator-1, three brokers), with `...` for the rest; the compose topology "
    "(tests/test_compose_topology.py) and tests/test_kafka_listener.py run it",
    "coordinator gateway --bootstrap-server kafka-1:9092,kafka-2:9092,kafka-3:9092 --listen 0.0.0.0:9192 "
    "--advertised-host gateway --groups 'kafka-connect-cluster' --coordinator coordinator-1:9400,coordinator-2:9400": "a "
    "deployment's hosts (kafka-1..3, coordinator-1/2); tests/test_gateway.py runs the gateway",
    "coordinator serve --tokens tokens --acls acls --tls-cert c.pem --tls-key k.pem --kafka-listener 0.0.0.0:9400 "
    "--kafka-gateway-principals gateway ...": "certificates, token and ACL files of a deployment, with `...`; "
    "tests/test_gateway_security.py runs it with its own",
    "coordinator gateway --bootstrap-server kafka-1:9093 --broker-tls-ca ca.pem --listen 0.0.0.0:9192 --tls-cert "
    "gw.pem --tls-key gw-key.pem --require-sasl --groups 'kafka-connect-cluster' --coordinator coordinator-1:9400 "
    "--coordinator-tls-ca ca.pem --coordinator-user gateway --coordinator-password-file gateway-token": "a TLS "
    "broker and a deployment's certificates; tests/test_gateway_security.py runs it with its own",
    "kafka-acls.sh --bootstrap-server kafka-1:9092 --command-config admin.properties --add --deny-principal 'User:*' "
    "--operation All --group kafka-connect-cluster": "Kafka's own tool (not on PATH) against a cluster with an "
    "authorizer; the session broker has none",
    "coordinator audit --bootstrap-servers kafka:9092 --warehouse /data/audit": "a Spark Structured Streaming job "
    "that runs until stopped (minutes of JVM on 2 shared cores); tests/test_spark_audit.py runs the audit",
    "coordinator audit --bootstrap-servers kafka:9092 --warehouse /data/audit --trigger available-now": "Spark: a "
    "JVM session and its jars, minutes here; tests/test_spark_audit.py runs it",
    'coordinator sql --warehouse /data/audit "SELECT * FROM rebalances ORDER BY duration_ms DESC LIMIT 5"': "Spark, "
    "and the tables an audit wrote; tests/test_spark_audit.py runs docs/audit.md's queries",
    "coordinator sql --warehouse /data/audit --format json \"SELECT * FROM ownership WHERE item = 'orders-sink-2'\"": ""
    "Spark, and the tables an audit wrote; tests/test_spark_audit.py runs docs/audit.md's queries",
    'spark-sql $(coordinator spark-conf --warehouse /data/audit) --database worker_coordinator -e "SELECT \\`group\\`, '
    'count(*) FROM rebalances GROUP BY 1"': "spark-sql is Spark's own launcher, not installed here; the words "
    "`$(coordinator spark-conf)` gives it are checked below (test_spark_conf_survives_command_substitution)",
    "coordinator audit-simulate --warehouse /data/audit --group connect-prod --from 2026-11-20T03:00Z --to "
    "2026-11-27T03:00Z --scheduled-delay 0 --scheduled-delay 5min": "Spark, and the tables an audit wrote; "
    "tests/test_simulate_spark.py runs it on an audited story",
    # docs/audit.md's shared metastore and cluster (issue 31): hosts of a deployment.
    "createdb -h db -U hive metastore": "a PostgreSQL server at host db; tests/test_spark_metastore.py runs its own",
    "coordinator audit --bootstrap-servers kafka:9092 --warehouse /data/audit --metastore "
    "'jdbc:postgresql://db:5432/metastore?user=hive&password=secret'": "PostgreSQL at host db, and Spark; "
    "tests/test_spark_metastore.py runs the audit with a metastore of its own",
    "spark-sql $(coordinator spark-conf --warehouse /data/audit --metastore "
    "'jdbc:postgresql://db:5432/metastore?user=hive&password=secret') -e \"SELECT count(*) FROM "
    'worker_coordinator.records"': "spark-sql is not installed here; tests/test_spark_metastore.py queries the "
    "tables by name from a session made of `coordinator spark-conf --metastore`'s settings",
    "coordinator audit --bootstrap-servers kafka:9092 --warehouse /shared/audit --master spark://spark-master:7077 "
    "--conf spark.pyspark.python=/opt/audit-venv/bin/python --conf spark.executor.memory=2g": "a deployment's Spark "
    "master; tests/test_spark_cluster.py runs the audit on a standalone cluster of its own",
    "coordinator audit ... --master yarn": "a YARN cluster, with `...` for the rest",
    "coordinator audit ... --master k8s://https://kubernetes.default.svc:443 --conf "
    "spark.kubernetes.container.image=apache/spark:4.2.0-python3 --conf spark.driver.host=$(hostname -i)": "a "
    "Kubernetes cluster, with `...` for the rest",
    # docker/README.md: the compose deployment and the image.
    "docker compose -f docker/compose.yaml up -d --build": "Docker (none here); tests/test_docker_files.py "
    "and test_compose_topology.py check the files and run the topology without it",
    "docker compose -f docker/compose.yaml ps": "Docker",
    "docker build -f docker/Dockerfile -t worker-coordinator .": "Docker",
    "docker run --rm worker-coordinator serve --help": "Docker (`coordinator serve --help` itself is run by "
    "tests/test_cli_errors.py)",
    'docker run -d -p 8400:8400 -v "$PWD/my-tokens:/etc/coordinator/tokens:ro" -e '
    "KAFKA_BOOTSTRAP_SERVERS=kafka.example.com:9092 -e COORDINATOR_TOKENS_FILE=/etc/coordinator/tokens "
    "worker-coordinator": "Docker",
    "curl -s localhost:8401/health": "the compose deployment's published port",
    "curl -s localhost:8402/health": "the compose deployment's published port",
    "docker compose -f docker/compose.yaml run --rm --no-deps --entrypoint coordinator coordinator-1 topic describe "
    "--bootstrap-servers kafka-1:9092": "Docker",
    "curl -s -H 'Authorization: Bearer REPLACE-ME-example-ops-token-2b8e41' localhost:8401/v1/groups": "the compose "
    "deployment's published port and its example token",
    "PUBLISH_ADDRESS=0.0.0.0 COORDINATOR_1_URL=http://coord-host.example.com:8401 "
    "COORDINATOR_2_URL=http://coord-host.example.com:8402 docker compose -f docker/compose.yaml up -d": "Docker",
    "curl -s localhost:8083/ ; curl -s localhost:8083/connectors": "the compose deployment's Kafka Connect worker",
    "docker compose -f docker/compose.yaml run --rm --no-deps --entrypoint coordinator coordinator-1 groups describe "
    "kafka-connect-cluster --members --url http://coordinator-1:8400 --token REPLACE-ME-example-ops-token-2b8e41": ""
    "Docker",
    "docker compose -f docker/compose.yaml up -d --build --no-deps coordinator-1": "Docker",
    "kubectl apply -k docker/kubernetes": "a Kubernetes cluster (none here)",
    "kubectl -n worker-coordinator rollout status deployment/worker-coordinator": "a Kubernetes cluster",
    "kubectl -n worker-coordinator port-forward service/worker-coordinator 8400 & curl -s localhost:8400/health": "a "
    "Kubernetes cluster",
}


# --- the documents' example addresses, and what they are here: the one place lines are changed --------


def readme_defaults(bootstrap: str, topic: str, listen: str) -> dict[str, str]:
    """Printed text -> what runs here, applied to every line before it runs."""
    return {
        "HOST:9092": bootstrap,  # the documents' broker placeholder
        "kafka:9092": bootstrap,  # the replay and audit examples' broker
        "__worker_offsets": topic,  # the default topic (WORKER_OFFSETS_TOPIC below) gets a name of its own
        "127.0.0.1:8400": listen,  # serve's default --listen, on a free port
        "--replication-factor 3": "--replication-factor 1",  # the session broker may have one node
    }


PLACEHOLDER = re.compile(r"\b(FILE|URL|MS|N|KEY=VALUE|HOST:PORT)\b|\.\.\.")


def runnable(text: str, defaults: dict[str, str]) -> list[str]:
    """The printed line as it runs here: the defaults substituted, an optional `[...]` with its first
    alternative (`static|group` -> static), one holding a placeholder left out, a lone `...` too."""

    def optional(match: re.Match) -> str:
        inner = match.group(1)
        if PLACEHOLDER.search(inner):
            return ""
        return " ".join(word.split("|")[0] for word in inner.split())

    for printed, here in defaults.items():
        text = text.replace(printed, here)
    text = re.sub(r"\[([^\[\]]*)\]", optional, text)
    argv = [word for word in shlex.split(text) if word != "..."]
    if argv[0] == "coordinator":
        argv[0] = COORDINATOR
    return argv


# --- what each line that runs must print -------------------------------------------------------------


@dataclass
class Expect:
    stdout: tuple[str, ...] = ()  # regular expressions, each found in stdout
    stderr: tuple[str, ...] = ()
    code: int = 0
    files: tuple[str, ...] = ()  # written in the working directory
    json_lines: bool = False  # every stdout line is a JSON value
    shown: bool = False  # holds the output block the document shows after its command block
    long_running: str = ""  # "serve" or "watch": started, checked, stopped


EXPECTED = {
    "coordinator topic create --bootstrap-server HOST:9092 [--topic __worker_offsets] [--partitions 16] "
    "[--replication-factor 3]": Expect(
        stdout=(r"created topic \S+: 16 partitions, replication factor 1", r"cleanup\.policy=compact")
    ),
    "coordinator topic describe --bootstrap-server HOST:9092 [--format json]": Expect(
        stdout=(r'"partition_count":16',), json_lines=True
    ),
    "coordinator topic validate --bootstrap-server HOST:9092 [--partitions 16]": Expect(
        stdout=(r"ok: cleanup\.policy=compact", r"ok: 16 partitions", r"is fit for the coordinator")
    ),
    "coordinator topic alter --bootstrap-server HOST:9092 [--topic __worker_offsets] [--dry-run] "
    "[--config KEY=VALUE]": Expect(stdout=(r"already has the coordinator's settings; nothing to change",)),
    "coordinator serve --bootstrap-servers HOST:9092 [--topic __worker_offsets] [--listen 127.0.0.1:8400] "
    "[--ownership static|group] [--partitions all|0-3,7] [--advertised-url URL] [--tokens FILE] [--acls FILE] "
    "[--allow-anonymous] [--tls-cert FILE --tls-key FILE] [--kafka-config KEY=VALUE ...] [--session-timeout-ms MS] "
    "[--heartbeat-interval-ms MS] ...": Expect(long_running="serve"),
    "coordinator groups list": Expect(
        stdout=(r"^GROUP\s+EPOCH\s+STATE\s+MEMBERS$", r"^connect-cluster\s+\d+\s+\w+\s+3$")
    ),
    "coordinator groups describe --group connect-cluster": Expect(
        stdout=(
            r"^group connect-cluster: \w+, group epoch \d+, assignment epoch \d+",
            r"^timeouts: session timeout \d+ ms",
            r"^MEMBER\s+INSTANCE\s+PROTOCOL\s+EPOCH\s+STATE\s+ASSIGNED\s+REVOKING\s+TARGET$",
            r"^\S+\s+worker-1\s+connect\s",
        )
    ),
    "coordinator groups describe --group connect-cluster --members [--verbose]": Expect(
        stdout=(
            r"^MEMBER\s+INSTANCE\s+CLIENT\s+HOST\s+PROTOCOL\s+EPOCH\s+STATE",
            r"^\S+\s+worker-3\s+\S+\s+127\.0\.0\.1",
        )
    ),
    "coordinator groups describe --group connect-cluster --state": Expect(
        stdout=(r"^GROUP\s+COORDINATOR\s+PARTITION\s+ASSIGNOR", r"^connect-cluster\s+http://127\.0\.0\.1:\d+\s+\d+\s")
    ),
    "coordinator groups describe --group connect-cluster --tasks": Expect(
        stdout=(r"group connect-cluster runs no connectors|^CONNECTOR\s+TASK\s+STATUS",)
    ),
    "coordinator groups describe --group connect-cluster --tasks --watch 5": Expect(long_running="watch"),
    "coordinator connectors set --group connect-cluster A=2 B=1": Expect(
        stdout=(r"^group connect-cluster: connectors set to A \(2 tasks\), B \(1 task\)$",)
    ),
    "coordinator config set --group connect-cluster --session-timeout-ms 10000 "
    "--scheduled-rebalance-max-delay-ms 60000": Expect(
        stdout=(
            r"^group connect-cluster: config set: session timeout 10000 ms, scheduled rebalance max delay 60000 ms",
        )
    ),
    "coordinator dump --bootstrap-server kafka:9092 --output offsets.bin": Expect(
        stderr=(r"dumped \d+ records from topic \S+ to offsets\.bin \(binary\)",), files=("offsets.bin",)
    ),
    "coordinator dump --bootstrap-server kafka:9092 --decode [--format json]": Expect(
        stdout=(r'"name":"ConnectGroupMetadata"', r'"key":\{"GroupId":"connect-prod"\}'), json_lines=True
    ),
    "coordinator replay timeline --group connect-prod --file offsets.bin --plot connect-prod.png": Expect(
        stderr=(r"plot written to connect-prod\.png",), files=("connect-prod.png",), shown=True
    ),
    "coordinator replay state --group connect-prod --at 2026-03-01T03:01:40Z --bootstrap-servers kafka:9092": Expect(
        stdout=(
            r"^group connect-prod at 2026-03-01 03:01:40\.000: after the record at offset 48",
            r"^deferred: \[clicks-source, clicks-source-1, clicks-source-2\] until 2026-03-01 03:02:39\.000$",
            r"^MEMBER\s+INSTANCE\s+EPOCH\s+STATE\s+OWNS",
        )
    ),
    "coordinator replay diff --group connect-prod --from 38 --to 79 --file offsets.bin": Expect(
        stdout=(r"^group connect-prod from offset 38 .* to offset 79 ", r"^members joined: none; left: W2$")
    ),
    "coordinator replay who-owned clicks-source-1 [--group connect-prod] [--at 2026-03-01T03:02Z] "
    "--file offsets.bin": Expect(
        stdout=(
            r"^nobody held clicks-source-1 at 2026-03-01 03:02:00\.000",
            r"before: W2 held clicks-source-1 until 2026-03-01 03:01:39\.000",
        )
    ),
    "coordinator replay simulate --group connect-prod --file offsets.bin --scheduled-delay 0 "
    "--scheduled-delay 5min": Expect(
        stdout=(r"^faithfulness: the re-run with the group's own settings made 13 of the 13 recorded moves; the same",),
        shown=True,
    ),
    # docs/replay.md's comment says what a log with a fault gives (exit 1); this one has none.
    "coordinator replay verify --bootstrap-servers kafka:9092": Expect(
        stdout=(r"^verified \d+ records of 2 groups from topic \S+: no violations$",)
    ),
}


# --- the module's coordinator, fleet and working directory ------------------------------------------


@dataclass
class Stage:
    cwd: Path
    env: dict[str, str]
    defaults: dict[str, str]
    bootstrap: str
    topic: str
    port: int
    serve: subprocess.Popen | None = None
    fleet: subprocess.Popen | None = None
    story_written: bool = False


@pytest.fixture(scope="module")
def stage(kafka_broker, tmp_path_factory):  # noqa: ANN001, ANN201
    cwd = tmp_path_factory.mktemp("readme")
    topic = f"readme-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_broker.bootstrap_servers,
        "WORKER_OFFSETS_TOPIC": topic,  # the topic of every line that names none
        "COORDINATOR_URL": f"http://127.0.0.1:{port}",  # the admin commands' instance (docs/service.md: env COORDINATOR_URL)
        "COORDINATOR_LOG_FORMAT": "text",
    }
    s = Stage(
        cwd,
        env,
        readme_defaults(kafka_broker.bootstrap_servers, topic, f"127.0.0.1:{port}"),
        kafka_broker.bootstrap_servers,
        topic,
        port,
    )
    yield s
    for process in (s.fleet, s.serve):
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)


def _health(port: int) -> int | None:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/health")
        status = c.getresponse().status
        c.close()
        return status
    except OSError:
        return None


def _group(port: int, group: str) -> dict | None:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", f"/v1/groups/{group}")
    response = c.getresponse()
    body = response.read()
    c.close()
    return orjson.loads(body) if response.status == 200 else None


def _wait(condition, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _start_fleet(stage: Stage) -> None:
    """docs/sdk.md's worker fleet (`coordinator worker --group G [--count N]`), for the admin commands
    to have a group to show: three workers, stable."""
    stage.fleet = subprocess.Popen(
        [COORDINATOR, "worker", "--group", "connect-cluster", "--count", "3"],
        cwd=stage.cwd,
        env=stage.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def stable() -> bool:
        group = _group(stage.port, "connect-cluster")
        members = (group or {}).get("Members") or []
        return len(members) == 3 and all(m.get("MemberEpoch") == group.get("GroupEpoch") for m in members)

    _wait(stable, 60, "the fleet's three workers to be stable in connect-cluster")


def _stop(process: subprocess.Popen, what: str) -> str:
    """SIGTERM: docs/service.md says serve hands its partitions over and exits 0, and the fleet stops as
    on Ctrl-C (every worker revokes, then leaves)."""
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, f"{what} exited {process.returncode} on SIGTERM:\n{out}"
    assert "Traceback" not in (out or ""), out
    return out or ""


def _write_story(stage: Stage) -> None:
    """The on-call story docs/replay.md's example shows, in group connect-prod's partition from
    offset 0, with its own timestamps (2026-03-01 03:00 UTC)."""
    story = on_call_story()
    partition = partition_for("connect-prod", PARTITIONS)
    assert partition != partition_for("connect-cluster", PARTITIONS)  # its offsets are docs/replay.md's
    producer = Producer({"bootstrap.servers": stage.bootstrap, "enable.idempotence": True})
    offsets = []
    for r in story.raw(partition):
        producer.produce(
            stage.topic,
            key=r.key,
            value=r.value,
            partition=partition,
            timestamp=r.timestamp_ms,
            on_delivery=lambda err, msg: offsets.append(msg.offset() if err is None else err),
        )
    assert producer.flush(30) == 0
    assert offsets == list(range(len(story.raw()))), offsets[:5]
    stage.story_written = True


def _before(stage: Stage, line: Line) -> None:
    """What the documents' lines build on, set up once, in stage order."""
    words = line.text.split()
    if words[:2] == ["coordinator", "groups"] and stage.fleet is None:
        assert stage.serve is not None, "docs/service.md's serve line runs before its admin commands"
        _start_fleet(stage)
    if words[:2] in (["coordinator", "dump"], ["coordinator", "replay"]) and not stage.story_written:
        if stage.fleet is not None:
            _stop(stage.fleet, "the worker fleet")
        if stage.serve is not None:
            out = _stop(stage.serve, "coordinator serve")
            assert "stopping" in out
        _write_story(stage)


def _shown_output(line: Line) -> list[str]:
    """The block the document shows right after the command's block: its output."""
    _, others = shell_lines(ROOT / line.document)
    following = min((n for n in others if n > line.block_end), default=None)
    assert following is not None and following <= line.block_end + 3, "no output block follows the command"
    language, body = others[following]
    assert language == "", f"the block after the command is {language}, not output"
    return body


def _holds_in_order(output: str, shown: list[str]) -> None:
    """Each shown line is a line of the output, in order; one ending in "..." is a line's beginning."""
    got = output.splitlines()
    at = 0
    for want in shown:
        prefix = want.endswith("...")
        head = want[:-3].rstrip(" ,") if prefix else want.rstrip()
        while at < len(got) and not (got[at].startswith(head) if prefix else got[at].rstrip() == head):
            at += 1
        assert at < len(got), f"the document shows {want!r}, which the output lacks (in order):\n{output}"
        at += 1


def _run_watch(stage: Stage, argv: list[str]) -> None:
    """`--watch 5` redraws every 5 s until Ctrl-C: two draws, then SIGINT, exit 0."""
    process = subprocess.Popen(
        argv,
        cwd=stage.cwd,
        env=stage.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + 20
        seen = b""
        os.set_blocking(process.stdout.fileno(), False)
        while time.monotonic() < deadline and seen.count(b"every 5s: group connect-cluster at ") < 2:
            seen += process.stdout.read() or b""
            time.sleep(0.2)
        assert seen.count(b"every 5s: group connect-cluster at ") >= 2, seen.decode()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, (process.returncode, err.decode())
    assert b"Traceback" not in err, err.decode()


def _run_serve(stage: Stage, argv: list[str]) -> None:
    """Started for the module (the admin commands talk to it), answering /health."""
    assert "--allow-anonymous" in argv and f"127.0.0.1:{stage.port}" in argv, argv
    stage.serve = subprocess.Popen(
        argv, cwd=stage.cwd, env=stage.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    _wait(lambda: stage.serve.poll() is not None or _health(stage.port) == 200, 60, "serve's /health to answer 200")
    assert stage.serve.poll() is None, stage.serve.communicate()[0]


LINES = in_stage_order(all_lines())


def test_every_line_is_run_or_says_why_not() -> None:
    """An unclassified line fails here: a new line in a document runs unless someone says why not."""
    assert LINES, "no shell lines found"
    unknown = [f"{line.id}: {line.text}" for line in LINES if line.text not in NOT_HERE and line.text not in EXPECTED]
    assert not unknown, "document lines neither run nor excluded (add to EXPECTED or NOT_HERE):\n" + "\n".join(unknown)
    assert all(reason.strip() for reason in NOT_HERE.values())
    printed = {line.text for line in LINES}
    stale = [text for text in [*NOT_HERE, *EXPECTED] if text not in printed]
    assert not stale, "listed here but no longer in the documents:\n" + "\n".join(stale)


@pytest.mark.parametrize("line", LINES, ids=[line.id for line in LINES])
def test_readme_line(line: Line, stage: Stage) -> None:
    if line.text in NOT_HERE:
        pytest.skip(NOT_HERE[line.text])
    expect = EXPECTED.get(line.text)
    if expect is None:
        pytest.fail(f"{line.id} is neither run nor excluded: {line.text}")
    _before(stage, line)
    argv = runnable(line.text, stage.defaults)
    assert not any(PLACEHOLDER.search(word) for word in argv[1:]), argv
    if expect.long_running == "serve":
        _run_serve(stage, argv)
        return
    if expect.long_running == "watch":
        _run_watch(stage, argv)
        return
    result = subprocess.run(argv, cwd=stage.cwd, env=stage.env, capture_output=True, text=True, timeout=120)
    where = (
        f"{line.id}: {shlex.join(argv)}\nexit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    assert result.returncode == expect.code, where
    assert "Traceback" not in result.stderr, where
    for pattern in expect.stdout:
        assert re.search(pattern, result.stdout, re.MULTILINE), f"{pattern!r} not in the output of {where}"
    for pattern in expect.stderr:
        assert re.search(pattern, result.stderr, re.MULTILINE), f"{pattern!r} not in stderr of {where}"
    if expect.json_lines:
        for text in result.stdout.splitlines():
            if text.strip():
                orjson.loads(text)
    for name in expect.files:
        assert (stage.cwd / name).stat().st_size > 0, where
    if name_png := next((n for n in expect.files if n.endswith(".png")), None):
        assert (stage.cwd / name_png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if expect.shown:
        _holds_in_order(result.stdout, _shown_output(line))


def test_spark_conf_survives_command_substitution(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    """`spark-sql $(coordinator spark-conf ...)`: the shell splits the substitution into words and
    removes no quotes, so every word must be Spark's as printed (the metastore URL reached Spark with
    its quotes). The settings are the real ones, the jars' list aside (resolving them is the audit's)."""
    from coordinator import cli
    from spark import session

    # The jars' list is resolved from Maven Central on first use: stood in for by two paths.
    monkeypatch.setattr(session, "connectors_conf", lambda: {"spark.jars": "/j/a.jar,/j/b.jar"})
    assert cli.main(["spark-conf", "--warehouse", str(tmp_path / "audit")]) == 0
    printed = capsys.readouterr().out
    words = subprocess.run(
        ["sh", "-c", 'printf "%s\\n" $(cat)'], input=printed, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert words[0::2] == ["--conf"] * (len(words) // 2) and len(words) % 2 == 0, words
    settings = dict(word.split("=", 1) for word in words[1::2])
    assert not any(q in word for word in words for q in "'\""), words
    url = settings["spark.hadoop.javax.jdo.option.ConnectionURL"]
    assert url == f"jdbc:derby:;databaseName={tmp_path / 'audit'}/metastore_db;create=true", url


# --- the documents' Python blocks ------------------------------------------------------------------

PYTHON_NOT_HERE = {
    "from coordinator.sdk.client import CoordinatorClient": "a fragment: a top-level `async with` against "
    "http://coordinator:8400 with a token, and `...` for the worker's life; tests/test_worker_sdk.py drives Worker",
    "from replay.commands.simulate import report_text": "a Spark session (`spark`) that finds an audit's tables; "
    "tests/test_simulate_spark.py calls spark.whatif on an audited story",
}


def python_blocks() -> list[tuple[str, int, list[str]]]:
    return [
        (path.relative_to(ROOT).as_posix(), start, body)
        for path in DOCUMENTS
        if path.exists()
        for start, (language, body) in shell_lines(path)[1].items()
        if language in ("python", "py")
    ]


@pytest.mark.parametrize("block", python_blocks(), ids=[f"{d}:{n}" for d, n, _ in python_blocks()])
def test_readme_python_block(block: tuple[str, int, list[str]], tmp_path: Path) -> None:
    """A self-contained Python block runs, and each `print(...)  # shown` prints what its comment
    shows ("..." standing for the rest)."""
    _document, _start, body = block
    first = next(text for text in body if text.strip())
    if first in PYTHON_NOT_HERE:
        pytest.skip(PYTHON_NOT_HERE[first])
    result = subprocess.run(
        [sys.executable, "-c", "\n".join(body)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    shown = [text.split("  # ", 1)[1] for text in body if text.startswith("print(") and "  # " in text]
    printed = result.stdout.splitlines()
    assert len(printed) == len(shown), (printed, shown)
    for got, want in zip(printed, shown, strict=True):
        pattern = ".*".join(re.escape(part) for part in want.split("..."))
        assert re.fullmatch(pattern, got), f"the document shows {want}, the block printed {got}"
