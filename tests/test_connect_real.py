"""Unmodified Kafka Connect 4.3.1 workers on our coordinator (issue 28): three `ConnectDistributed`
JVMs (jars from Maven Central, as `make bench-vs-connect` has them) whose `bootstrap.servers` is the
gateway, with their connectors' own clients pointed at the real broker. They find our coordinator
through the gateway's FindCoordinator, form one group in Connect's own protocol and bytes, and run a
connector's tasks, each on exactly one worker (Connect's own REST status says so). The coordinator is
killed with SIGKILL and another process takes its partitions over from the topic: no worker exits,
the group carries on at the same generation, every task still runs on exactly one worker, and the
group's history is in `coordinator replay`. A sink connector's own consumer group (`connect-<name>`)
stays on Kafka's coordinator.

One story, one set of JVMs (each start costs seconds on our 2-core machines)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from connect_group import describe, settled_generation
from kafka_groups import groups_at

from coordinator.tools.connect_worker import ConnectWorker, http, source_connector, until
from coordinator.tools.devbroker import free_port
from coordinator.tools.process import ServeProcess
from tests.topics import create_topic

pytestmark = pytest.mark.integration

TASKS = 6


def test_unmodified_connect_workers_run_on_our_coordinator_through_the_gateway_and_survive_its_sigkill(
    kafka_broker, unique_topic, tmp_path
) -> None:  # noqa: ANN001
    broker = kafka_broker.bootstrap_servers
    key = f"connect-real-{unique_topic[-8:]}"
    create_topic(broker, unique_topic, 4)
    listener = f"127.0.0.1:{free_port()}"
    flags = ("--allow-anonymous", "--kafka-listener", listener)
    serves = [ServeProcess(broker, unique_topic, tmp_path, *flags).start()]
    gateway_port = free_port()
    gateway_log = (tmp_path / "gateway.log").open("wb")
    gateway = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator",
            "gateway",
            "--bootstrap-server",
            broker,
            "--listen",
            f"127.0.0.1:{gateway_port}",
            "--groups",
            key,
            "--coordinator",
            listener,
        ],
        stdout=gateway_log,
        stderr=subprocess.STDOUT,
    )
    workers: list[ConnectWorker] = []
    try:
        time.sleep(1.0)
        assert gateway.poll() is None, (tmp_path / "gateway.log").read_text()
        workers = [
            ConnectWorker(tmp_path, f"w{i}", f"127.0.0.1:{gateway_port}", broker, key).start() for i in (1, 2, 3)
        ]
        until(lambda: all(w.up() for w in workers), 180, "the workers' REST APIs answer")
        config = source_connector(f"{key}-data", TASKS)
        until(
            lambda: http("PUT", f"{workers[0].url}/connectors/src/config", config)[0] in (200, 201),
            60,
            "the connector is created (409 while the group rebalances)",
        )
        status = until(lambda: workers[0].running("src", TASKS), 120, "every task RUNNING")
        owners = {t["worker_id"] for t in status["tasks"]}
        assert len(owners) == 3, status  # shared among the three workers

        # Each worker's group member found our coordinator through the gateway (its coordinator node,
        # port P+1), and the real broker's coordinator never heard of the group.
        for w in workers:
            assert f"Discovered group coordinator 127.0.0.1:{gateway_port + 1}" in w.log.read_text()
        described = describe(serves[0].url, key)
        assert {m["Url"] for m in described["Members"]} == {f"{w.url}/" for w in workers}
        assert described["GroupType"] == "classic" and described["ProtocolName"] == "sessioned"
        generation = described["Generation"]
        runs = {m["Url"]: m["Assignment"] for m in described["Members"]}
        held = [t["Task"] for a in runs.values() for t in a["Tasks"]]
        assert sorted(held) == list(range(TASKS))  # who runs what, from Connect's own bytes: each task once
        assert key not in groups_at(broker)

        # A sink connector's consumer group (connect-<name>) is not ours: its consumer goes to the
        # real broker (consumer.bootstrap.servers), and Kafka's coordinator has the group.
        sink = {
            "connector.class": "org.apache.kafka.connect.tools.VerifiableSinkConnector",
            "tasks.max": "1",
            "topics": f"{key}-data",
        }
        until(
            lambda: http("PUT", f"{workers[0].url}/connectors/snk/config", sink)[0] in (200, 201),
            60,
            "the sink connector is created",
        )
        until(lambda: groups_at(broker).get("connect-snk") == "consumer", 60, "the sink's group at the real broker")
        unknown = http("GET", f"{serves[0].url}/v1/groups/connect-snk")[1]
        assert unknown["ErrorCode"] == 69  # GROUP_ID_NOT_FOUND: our coordinator never had it
        until(
            lambda: workers[0].running("src", TASKS) and workers[0].running("snk", 1),
            120,
            "every source task and the sink's RUNNING",
        )
        # The sink's task is given out in Connect's rounds: the generation to compare after the
        # failover is the one the group stays at once those are over.
        generation = until(lambda: settled_generation(serves[0].url, key), 60, "the group settled")

        # SIGKILL of the coordinator; another process takes the partitions over from the topic.
        serves[0].kill()
        serves.append(ServeProcess(broker, unique_topic, tmp_path, *flags, port=serves[0].port).start())
        time.sleep(8.0)  # several heartbeats against the new coordinator
        assert all(w.alive() for w in workers)
        status = until(lambda: workers[0].running("src", TASKS), 60, "every task RUNNING after the failover")
        after = describe(serves[-1].url, key)
        assert after["Generation"] == generation and len(after["Members"]) == 3
        source_tasks = [
            t["Task"] for m in after["Members"] for t in m["Assignment"]["Tasks"] if t["Connector"] == "src"
        ]
        assert sorted(source_tasks) == list(range(TASKS))

        # The group's history, replayed from the topic.
        timeline = subprocess.run(
            [
                sys.executable,
                "-m",
                "coordinator",
                "replay",
                "timeline",
                "--bootstrap-servers",
                broker,
                "--topic",
                unique_topic,
                "--group",
                key,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert timeline.returncode == 0, timeline.stderr
        for w in workers:
            assert f"connect-127.0.0.1:{w.port}-" in timeline.stdout
        assert "src-0" in timeline.stdout and "protocol sessioned" in timeline.stdout
    finally:
        for w in workers:
            w.kill()
        gateway.kill()
        gateway.wait(timeout=30)
        gateway_log.close()
        for s in serves:
            s.kill()
