"""`coordinator serve` as a process against the session broker: start-up errors, security, kill -9
failover in static mode with a batch open, and group mode (an instance killed, an instance stopped
and replaced, find-coordinator from the consumer group's description)."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from serve_workers import items, served, wait_for

from records import TaskId

from coordinator.cli import main as coordinator
from coordinator.core.items import describe
from coordinator.core.protocol import HeartbeatResponse
from coordinator.core.worker.member import Member
from coordinator.tools.devbroker import free_port
from coordinator.tools.partitions import batches_to_end, partition_for
from coordinator.tools.process import ServeProcess
from tests.topics import create_topic

pytestmark = pytest.mark.integration
G = "connect-cluster"


def _serve_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", "serve", *args], capture_output=True, text=True, timeout=timeout
    )


# --- start-up --------------------------------------------------------------------------------------


def test_unreachable_kafka_is_one_clear_line(tmp_path: Path) -> None:
    result = _serve_cli(
        "--bootstrap-servers",
        f"127.0.0.1:{free_port()}",
        "--allow-anonymous",
        "--connect-timeout",
        "2",
        "--listen",
        f"127.0.0.1:{free_port()}",
    )
    assert result.returncode == 1
    assert "cannot reach Kafka" in result.stderr and "waiting for Kafka" in result.stderr
    assert "Traceback" not in result.stderr


def test_peer_is_for_static_ownership_only() -> None:
    # Refused before Kafka is asked anything: group ownership finds owners through the consumer group.
    for extra, env in ((("--peer", "http://127.0.0.1:1"), {}), ((), {"COORDINATOR_PEERS": "http://127.0.0.1:1"})):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "coordinator",
                "serve",
                "--bootstrap-servers",
                f"127.0.0.1:{free_port()}",
                "--allow-anonymous",
                "--ownership",
                "group",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **env},
        )
        assert result.returncode == 2, result.stderr
        assert "--peer" in result.stderr and "static ownership only" in result.stderr
        assert "Traceback" not in result.stderr and "waiting for Kafka" not in result.stderr


def test_missing_topic_and_missing_credentials_are_refused(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    missing = _serve_cli(
        "--bootstrap-servers",
        kafka_broker.bootstrap_servers,
        "--topic",
        unique_topic,
        "--allow-anonymous",
        "--listen",
        f"127.0.0.1:{free_port()}",
    )
    assert missing.returncode == 1 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    nobody = _serve_cli("--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", unique_topic)
    assert nobody.returncode == 2 and "--allow-anonymous" in nobody.stderr
    bad_partitions = _serve_cli(
        "--bootstrap-servers", kafka_broker.bootstrap_servers, "--allow-anonymous", "--partitions", "0-x"
    )
    assert bad_partitions.returncode == 2 and "--partitions" in bad_partitions.stderr


# --- security --------------------------------------------------------------------------------------


def test_tokens_and_acls(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 2)
    (tmp_path / "tokens").write_text("# token principal\ns3cret-a alice\ns3cret-o ops\n")
    (tmp_path / "acls").write_text("alice Read group-a*\nops All *\n")
    server = ServeProcess(
        kafka_broker.bootstrap_servers,
        unique_topic,
        tmp_path,
        "--tokens",
        str(tmp_path / "tokens"),
        "--acls",
        str(tmp_path / "acls"),
    ).start()
    try:
        join = {
            "MemberId": "w1",
            "MemberEpoch": 0,
            "RebalanceTimeoutMs": 5000,
            "ServerAssignor": "incremental_cooperative",
        }
        status, body = server.request("POST", "/v1/connect-group/heartbeat", {"GroupId": "group-a", **join})
        assert status == 401 and body["ErrorCode"] == 30
        status, body = server.request(
            "POST", "/v1/connect-group/heartbeat", {"GroupId": "group-a", **join}, token="wrong"
        )
        assert status == 401 and body["ErrorCode"] == 30
        for group in ("group-a", "group-b"):
            status, body = server.request(
                "PUT", f"/v1/groups/{group}/connectors", {"Connectors": [{"Name": "A", "Tasks": 1}]}, token="s3cret-o"
            )
            assert (status, body["ErrorCode"]) == (200, 0)
        status, body = server.request(
            "POST", "/v1/connect-group/heartbeat", {"GroupId": "group-a", **join}, token="s3cret-a"
        )
        assert status == 200 and body["ErrorCode"] == 0 and body["MemberEpoch"] > 0
        status, body = server.request(
            "POST", "/v1/connect-group/heartbeat", {"GroupId": "group-b", **join}, token="s3cret-a"
        )
        assert status == 403 and body["ErrorCode"] == 30 and "group-b" in body["ErrorMessage"]
        # Read lets alice see her group, not change it.
        status, body = server.request("PUT", "/v1/groups/group-a/connectors", {"Connectors": []}, token="s3cret-a")
        assert status == 403 and body["ErrorCode"] == 30
        status, body = server.request("GET", "/v1/groups", token="s3cret-a")
        assert [g["GroupId"] for g in body["Groups"]] == ["group-a"]
        status, body = server.request("GET", "/v1/groups", token="s3cret-o")
        assert [g["GroupId"] for g in body["Groups"]] == ["group-a", "group-b"]
        assert server.request("GET", "/health")[0] == 200  # open, for load balancers
    finally:
        assert server.stop() == 0


# --- a minimal worker (server-side assignor): the project's member state machine over http.client ----


class Worker:
    def __init__(self, member_id: str, timeout: float = 5) -> None:
        self.member = Member(
            G,
            member_id,
            rebalance_timeout_ms=30_000,
            server_assignor="incremental_cooperative",
            session_timeout_ms=60_000,
        )
        self.timeout = timeout
        self.acknowledged: tuple[int, frozenset] | None = None  # the last (epoch, assignment) answered OK
        self.in_flight = False  # a heartbeat is sent and not answered
        self.unanswered = 0  # heartbeats the coordinator took and never answered (it went away)
        self.errors: list[int] = []  # the error codes answered

    member_id = property(lambda self: self.member.member_id)
    epoch = property(lambda self: self.member.member_epoch)
    owned = property(lambda self: self.member.owned)

    def heartbeat(self, server: ServeProcess) -> int | None:
        body = msgspec.to_builtins(self.member.heartbeat(_now_ms()))
        self.in_flight = True
        try:
            status, r = server.request("POST", "/v1/connect-group/heartbeat", body, timeout=self.timeout)
        except ConnectionRefusedError:
            self.member.failed(_now_ms(), "connection refused")
            return None  # the coordinator is away: try again later
        except (OSError, http.client.HTTPException):
            self.unanswered += 1  # it went away mid-request: never acknowledged
            self.member.failed(_now_ms(), "no answer")
            return None
        finally:
            self.in_flight = False
        assert status == 200, r
        code = r["ErrorCode"]
        if code == 0:
            self.member.received(msgspec.convert(r, HeartbeatResponse), _now_ms())
            self.acknowledged = (self.epoch, self.owned)
        else:
            self.member.received(HeartbeatResponse(code, r.get("ErrorMessage")), _now_ms())
            self.errors.append(code)
        return code


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _no_double_ownership(workers: list[Worker]) -> None:
    seen: dict = {}
    for w in workers:
        for item in w.owned:
            assert item not in seen, f"{item} owned by {seen[item]} and {w.member_id}"
            seen[item] = w.member_id


EVERYTHING = frozenset(["A", "B"] + [TaskId("A", t) for t in range(4)] + [TaskId("B", t) for t in range(2)])


def _round(server: ServeProcess, workers: list[Worker]) -> None:
    for w in workers:
        w.heartbeat(server)
        _no_double_ownership(workers)


def _converged(workers: list[Worker]) -> bool:
    owned = [i for w in workers for i in w.owned]
    # Every item once: as many as there are, and all of them.
    return len(owned) == len(EVERYTHING) and set(owned) == EVERYTHING and len({w.epoch for w in workers}) == 1


class Heartbeating:
    """Each worker heartbeating from a thread of its own, one request after the other, until stopped."""

    def __init__(self, server: ServeProcess, workers: list[Worker]) -> None:
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(server, w), daemon=True) for w in workers]

    def _run(self, server: ServeProcess, worker: Worker) -> None:
        try:
            while not self._stop.is_set():
                worker.heartbeat(server)
                self._stop.wait(0.01)
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.failures.append(f"{worker.member_id}: {e!r}")

    def start(self) -> Heartbeating:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        assert not any(t.is_alive() for t in self._threads), "a heartbeat thread did not end"
        assert not self.failures, self.failures


_GATED_SERVE = Path(__file__).with_name("gated_serve.py")


def _gated(server: ServeProcess, gate: Path) -> ServeProcess:
    """`server`, run as tests/gated_serve.py: once `_arm_gate(gate, commits)` is called, `commits`
    more transactions commit and the one after stays open until the process is killed."""
    assert server.args[1:4] == ["-m", "coordinator", "serve"], server.args
    server.args[1:4] = [str(_GATED_SERVE)]
    server.env["GATED_SERVE_GATE"] = str(gate)
    return server


def _arm_gate(gate: Path, commits: int) -> None:
    staged = gate.with_name(gate.name + ".staged")
    staged.write_text(str(commits))
    staged.rename(gate)  # at once: the gate never exists without its number


def _high_watermark(broker, topic: str, partition: int) -> int:  # noqa: ANN001
    consumer = Consumer(broker.client_config({"group.id": f"count-{topic}"}))
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    finally:
        consumer.close()


def _records(broker, topic: str, partition: int, isolation: str, end: int) -> int:  # noqa: ANN001
    """How many records of `topic[partition]` below offset `end` a consumer reads at `isolation`."""
    consumer = Consumer(
        broker.client_config({"group.id": f"count-{topic}", "enable.auto.commit": False, "isolation.level": isolation})
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([TopicPartition(topic, partition, 0)])
        count, deadline = 0, time.monotonic() + 60
        for messages in batches_to_end(consumer, tp, end):
            count += sum(1 for m in messages if m.offset() < end)
            assert time.monotonic() < deadline, f"{topic}[{partition}] not read to offset {end} in time"
        return count
    finally:
        consumer.close()


def test_kill_9_in_the_middle_of_a_rebalance(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    """kill -9 of the coordinator with a batch open (its records in the log, its transaction not
    committed) and heartbeats from every worker in flight: the next owner fences it
    (init_transactions aborts the open transaction) and loads exactly what was acknowledged.

    The batch is held open by tests/gated_serve.py, which stops the coordinator in front of a
    commit. A kill that lands on its own can also fall after a commit reached the broker and
    before its responses left: then changes nobody was told of are durable, and rightly loaded
    (an unanswered request may or may not have happened). Holding the commit makes the outcome
    certain, so the test can demand equality: acknowledged is loaded, unacknowledged is not."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 2)
    flags = (
        "--allow-anonymous",
        "--heartbeat-interval-ms",
        "200",
        "--session-timeout-ms",
        "60000",
        "--server-assignment-interval-ms",
        "0",
    )
    gate = tmp_path / "gate"
    first = _gated(ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *flags), gate).start()
    second = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *flags, port=first.port)
    partition = partition_for(G, 2)
    try:
        status, _ = first.request(
            "PUT", f"/v1/groups/{G}/connectors", {"Connectors": [{"Name": "A", "Tasks": 4}, {"Name": "B", "Tasks": 2}]}
        )
        assert status == 200
        workers = [Worker(f"w{i}", timeout=60) for i in range(3)]
        for _ in range(30):
            _round(first, workers)
            if _converged(workers):
                break
        assert _converged(workers)
        # A fourth worker joins and all four heartbeat at once, each from its own thread: the
        # others must revoke before it gets anything. One more transaction commits (the join's);
        # the next is held open, and behind it every request that comes after. There is a next:
        # a rebalance writes at least twice, since a member can confirm a revocation only once told.
        workers.append(Worker("w3", timeout=60))
        _arm_gate(gate, commits=1)
        heartbeating = Heartbeating(first, workers).start()
        try:
            wait_for(gate.with_name("gate.blocked").exists, 60, "a batch to be held open")
            # The responses to the committed batches were sent before the held batch began, and
            # no request is answered any more: once every worker waits on a heartbeat, kill.
            wait_for(lambda: all(w.in_flight for w in workers), 60, "every worker to wait on a heartbeat")
            first.kill()
        finally:
            heartbeating.stop()
        assert sum(1 for w in workers if w.unanswered) >= 2, "heartbeats in flight from several workers"
        assert not any(w.errors for w in workers), [(w.member_id, w.errors) for w in workers]
        acknowledged = {w.member_id: w.acknowledged for w in workers}
        assert not _converged(workers), acknowledged  # in the middle of the rebalance
        second.start()
        status, described = second.request("GET", f"/v1/groups/{G}")
        assert status == 200 and described["ErrorCode"] == 0, described
        loaded = {m["MemberId"]: (m["MemberEpoch"], items(m["Assignment"])) for m in described["Members"]}
        # Exactly what was acknowledged, for every member: nothing acknowledged is missing, nothing
        # of the held batch (nor anything answered to nobody) is there. A worker never answered
        # OK (the fourth, if its join was held) is no member.
        assert loaded == {m: ack for m, ack in acknowledged.items() if ack is not None}, (loaded, acknowledged)
        # The held batch was in the log, and its records were not loaded: its transaction was aborted.
        end = _high_watermark(kafka_broker, unique_topic, partition)
        aborted = _records(kafka_broker, unique_topic, partition, "read_uncommitted", end) - _records(
            kafka_broker, unique_topic, partition, "read_committed", end
        )
        assert aborted > 0
        for w in workers:
            w.timeout = 5
        for _ in range(40):
            _round(second, workers)
            if _converged(workers) and all(len(w.owned) >= 1 for w in workers):
                break
        assert _converged(workers), [(w.member_id, w.epoch, describe(w.owned)) for w in workers]
        assert all(w.owned for w in workers)
    finally:
        first.stop()
        second.stop()


# --- static ownership across instances --------------------------------------------------------------


def test_static_instances_find_each_other_through_peer(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    # Static instances serving different partitions have no consumer group to describe: each
    # names the other with --peer, and find-coordinator asks its /health.
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 2)
    ports = [free_port(), free_port()]
    a, b = (
        ServeProcess(
            kafka_broker.bootstrap_servers,
            unique_topic,
            tmp_path,
            "--allow-anonymous",
            "--partitions",
            str(p),
            "--peer",
            f"http://127.0.0.1:{ports[1 - p]}",
            port=ports[p],
        )
        for p in (0, 1)
    )
    try:
        a.start()
        b.start()
        for p, owner in ((0, a), (1, b)):
            for asked in (a, b):
                status, found = asked.request("POST", "/v1/find-coordinator", {"GroupId": _group_on_partition(p, 2)})
                assert status == 200 and (found["ErrorCode"], found["Url"]) == (0, owner.url), (p, found)
        b.stop()
        # Once the answer cached for a second is gone: COORDINATOR_NOT_AVAILABLE, nobody serves it now.
        wait_for(
            lambda: (
                a.request("POST", "/v1/find-coordinator", {"GroupId": _group_on_partition(1, 2)})[1]["ErrorCode"] == 15
            ),
            30,
            "find-coordinator to know that the stopped peer serves nothing",
        )
    finally:
        a.stop()
        b.stop()


# --- group ownership -------------------------------------------------------------------------------


def _group_instances(broker, topic: str, tmp_path: Path) -> list[ServeProcess]:  # noqa: ANN001
    """Two instances in group ownership. Neither is told of the other (no --peer): whatever one
    knows of the other comes from the consumer group."""
    return [
        ServeProcess(
            broker.bootstrap_servers,
            topic,
            tmp_path,
            "--allow-anonymous",
            "--ownership",
            "group",
            "--ownership-session-timeout-ms",
            "6000",
        )
        for _ in range(2)
    ]


def _described_owners(broker, topic: str) -> dict[str, set[int]]:  # noqa: ANN001
    """The ownership consumer group's description as the broker gives it: each member's client.id
    (the instance's advertised URL) and the partitions assigned to it."""
    admin = AdminClient(broker.client_config())
    group = f"worker-coordinator-{topic}"
    description = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    return {
        m.client_id: {
            tp.partition for tp in (m.assignment.topic_partitions if m.assignment else ()) if tp.topic == topic
        }
        for m in description.members
    }


def _group_on_partition(partition: int, partitions: int) -> str:
    return next(f"group-{i}" for i in range(1000) if partition_for(f"group-{i}", partitions) == partition)


def test_group_mode_shares_partitions_and_takes_over_from_a_killed_instance(
    kafka_broker, unique_topic, tmp_path: Path
) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 4)
    a, b = _group_instances(kafka_broker, unique_topic, tmp_path)
    try:
        a.start()
        wait_for(lambda: served(a) == {0, 1, 2, 3}, 30, "the only instance to take every partition")
        b.start()
        wait_for(
            lambda: served(a) | served(b) == {0, 1, 2, 3} and served(b) and not served(a) & served(b),
            30,
            "the partitions to be shared",
        )
        # The broker describes the group as the instances serve it: each member's client.id is
        # its advertised URL, listed with its partitions. That is all find-coordinator has to go on.
        wait_for(
            lambda: _described_owners(kafka_broker, unique_topic) == {a.url: served(a), b.url: served(b)},
            30,
            "the consumer group's description to show who serves what",
        )
        groups = {p: _group_on_partition(p, 4) for p in range(4)}
        for p, group in groups.items():
            # find-coordinator answers from either instance, with the owner's URL: for a partition
            # the other serves, from the consumer group's description (neither was told of the other).
            for asked in (a, b):
                _, found = asked.request("POST", "/v1/find-coordinator", {"GroupId": group})
                assert found["Url"] == (a.url if p in served(a) else b.url), (p, found)
            owner = a if p in served(a) else b
            assert (
                owner.request("PUT", f"/v1/groups/{group}/connectors", {"Connectors": [{"Name": f"C{p}", "Tasks": 1}]})[
                    1
                ]["ErrorCode"]
                == 0
            )
        b.kill()
        wait_for(lambda: served(a) == {0, 1, 2, 3}, 30, "the survivor to take the killed instance's partitions")
        for p, group in groups.items():
            _, described = a.request("GET", f"/v1/groups/{group}")
            assert described["Connectors"] == [{"Name": f"C{p}", "Tasks": 1}], described
    finally:
        a.stop()
        b.stop()


def test_group_mode_a_stopped_owner_is_fenced_when_it_wakes(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 4)
    a, b = _group_instances(kafka_broker, unique_topic, tmp_path)
    try:
        a.start()
        wait_for(lambda: served(a) == {0, 1, 2, 3}, 30, "the first instance to take every partition")
        b.start()
        wait_for(lambda: served(b) and served(a) | served(b) == {0, 1, 2, 3}, 30, "the partitions to be shared")
        taken = min(served(b))
        group = _group_on_partition(taken, 4)
        assert (
            b.request("PUT", f"/v1/groups/{group}/connectors", {"Connectors": [{"Name": "old", "Tasks": 1}]})[1][
                "ErrorCode"
            ]
            == 0
        )
        b.signal(signal.SIGSTOP)
        wait_for(lambda: taken in served(a), 40, "the other instance to take the stopped one's partitions")
        assert (
            a.request("PUT", f"/v1/groups/{group}/connectors", {"Connectors": [{"Name": "new", "Tasks": 1}]})[1][
                "ErrorCode"
            ]
            == 0
        )
        b.signal(signal.SIGCONT)
        # The woken instance must not write: either it already knows it lost the partition, or
        # its transactional producer was fenced by the new owner's init_transactions.
        status, body = b.request(
            "PUT", f"/v1/groups/{group}/connectors", {"Connectors": [{"Name": "zombie", "Tasks": 1}]}
        )
        assert status == 200 and body["ErrorCode"] in (15, 16), body
        wait_for(lambda: taken not in served(b), 20, "the woken instance to stop serving the partition")
        # The truth is the new owner's; reload it from the topic to be sure nothing of the zombie's got in.
        a.stop()
        c = ServeProcess(
            kafka_broker.bootstrap_servers, unique_topic, tmp_path, "--allow-anonymous", "--partitions", str(taken)
        ).start()
        try:
            _, described = c.request("GET", f"/v1/groups/{group}")
            assert described["Connectors"] == [{"Name": "new", "Tasks": 1}], described
        finally:
            c.stop()
    finally:
        a.stop()
        b.stop()


# --- admin commands --------------------------------------------------------------------------------


def test_admin_commands_against_a_served_group(kafka_broker, unique_topic, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 2)
    (tmp_path / "tokens").write_text("t-ops ops\n")
    server = ServeProcess(
        kafka_broker.bootstrap_servers, unique_topic, tmp_path, "--tokens", str(tmp_path / "tokens")
    ).start()
    auth = ["--url", server.url, "--token", "t-ops"]
    try:
        assert coordinator(["connectors", "set", "demo", "A=2", "B=1", *auth]) == 0
        assert coordinator(["config", "set", "demo", "--session-timeout-ms", "5000", *auth]) == 0
        capsys.readouterr()
        assert coordinator(["groups", "list", *auth]) == 0
        listed = capsys.readouterr().out.splitlines()
        assert listed[0].split() == ["GROUP", "EPOCH", "STATE", "MEMBERS"] and listed[1].split()[0] == "demo"
        assert coordinator(["groups", "describe", "demo", "--format", "json", *auth]) == 0
        described = orjson.loads(capsys.readouterr().out)
        assert described["Connectors"] == [{"Name": "A", "Tasks": 2}, {"Name": "B", "Tasks": 1}]
        assert described["SessionTimeoutMs"] == 5000 and described["Departures"] == []
        # A member joins and leaves (-1): describe says whom the change to the new epoch removed, and why.
        beat = {
            "GroupId": "demo",
            "MemberId": "w1",
            "InstanceId": "i-1",
            "RebalanceTimeoutMs": 5000,
            "ServerAssignor": "eager",
        }
        for epoch in (0, -1):
            status, answer = server.request(
                "POST", "/v1/connect-group/heartbeat", {**beat, "MemberEpoch": epoch}, token="t-ops"
            )
            assert status == 200 and answer["ErrorCode"] == 0, answer
        assert coordinator(["groups", "describe", "demo", "--format", "json", *auth]) == 0
        assert orjson.loads(capsys.readouterr().out)["Departures"] == [
            {"MemberId": "w1", "InstanceId": "i-1", "Reason": "leave", "ReasonText": "left the group"}
        ]
        assert coordinator(["groups", "describe", "demo", *auth]) == 0
        assert capsys.readouterr().out.splitlines()[-1].split(None, 2) == ["w1", "i-1", "left the group"]
        # Errors are one line and an exit code: unknown group, bad config, no credentials.
        assert coordinator(["groups", "describe", "nope", *auth]) == 1
        assert "does not exist" in capsys.readouterr().err
        assert coordinator(["config", "set", "demo", "--heartbeat-interval-ms", "1", *auth]) == 1
        assert "HeartbeatIntervalMs" in capsys.readouterr().err
        assert coordinator(["groups", "list", "--url", server.url]) == 1
        assert "HTTP 401" in capsys.readouterr().err
    finally:
        server.stop()


def test_bad_environment_is_a_usage_error_of_serve_only(tmp_path: Path) -> None:
    """A bad number in a COORDINATOR_* variable names its flag when `serve` runs, and no other
    subcommand is touched by it (they used to fail as "coordinator serve: error", or with a traceback)."""
    import os

    for name, flag in (
        ("COORDINATOR_CONNECT_TIMEOUT", "--connect-timeout"),
        ("COORDINATOR_SESSION_TIMEOUT_MS", "--session-timeout-ms"),
        ("COORDINATOR_OWNERSHIP_SESSION_TIMEOUT_MS", "--ownership-session-timeout-ms"),
    ):
        env = {**os.environ, name: "abc"}
        serve = subprocess.run(
            [sys.executable, "-m", "coordinator", "serve", "--allow-anonymous"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert serve.returncode == 2, serve.stderr
        assert f"argument {flag}: expected a" in serve.stderr and "Traceback" not in serve.stderr
        assert f"got {name}='abc'" in serve.stderr  # the variable, not only the flag it stands for
        other = subprocess.run(
            [sys.executable, "-m", "coordinator", "groups", "list", "--url", f"http://127.0.0.1:{free_port()}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert other.returncode == 1 and "cannot reach the coordinator" in other.stderr, other.stderr
        assert "serve" not in other.stderr and "Traceback" not in other.stderr
