"""`coordinator serve` as a process against the session broker: start-up errors, security, kill -9
failover in static mode, and group mode (an instance killed, an instance stopped and replaced)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from coordinator import wire
from coordinator.cli import main as coordinator
from coordinator.devbroker import free_port
from coordinator.items import connectors_and_tasks, describe, items_of
from coordinator.log import partition_for
from records import TaskId
from coordinator.process import ServeProcess

pytestmark = pytest.mark.integration
G = "connect-cluster"


def _topic(broker, topic: str, partitions: int = 2) -> None:  # noqa: ANN001
    assert coordinator(["topic", "create", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                        "--partitions", str(partitions), "--replication-factor", "1"]) == 0


def _serve_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", "serve", *args], capture_output=True, text=True,
                          timeout=timeout)


# --- start-up --------------------------------------------------------------------------------------


def test_unreachable_kafka_is_one_clear_line(tmp_path: Path) -> None:
    result = _serve_cli("--bootstrap-servers", f"127.0.0.1:{free_port()}", "--allow-anonymous",
                        "--connect-timeout", "2", "--listen", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "cannot reach Kafka" in result.stderr and "waiting for Kafka" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_topic_and_missing_credentials_are_refused(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    missing = _serve_cli("--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", unique_topic,
                         "--allow-anonymous", "--listen", f"127.0.0.1:{free_port()}")
    assert missing.returncode == 1 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    nobody = _serve_cli("--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", unique_topic)
    assert nobody.returncode == 2 and "--allow-anonymous" in nobody.stderr
    bad_partitions = _serve_cli("--bootstrap-servers", kafka_broker.bootstrap_servers, "--allow-anonymous",
                                "--partitions", "0-x")
    assert bad_partitions.returncode == 2 and "--partitions" in bad_partitions.stderr


# --- security --------------------------------------------------------------------------------------


def test_tokens_and_acls(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    _topic(kafka_broker, unique_topic)
    (tmp_path / "tokens").write_text("# token principal\ns3cret-a alice\ns3cret-o ops\n")
    (tmp_path / "acls").write_text("alice Read group-a*\nops All *\n")
    server = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, "--tokens", str(tmp_path / "tokens"),
                          "--acls", str(tmp_path / "acls")).start()
    try:
        join = {"MemberId": "w1", "MemberEpoch": 0, "RebalanceTimeoutMs": 5000,
                "ServerAssignor": "incremental_cooperative"}
        status, body = server.request("POST", "/v1/connect-group/heartbeat", {"GroupId": "group-a", **join})
        assert status == 401 and body["ErrorCode"] == 30
        status, body = server.request("POST", "/v1/connect-group/heartbeat", {"GroupId": "group-a", **join},
                                      token="wrong")
        assert status == 401 and body["ErrorCode"] == 30
        for group in ("group-a", "group-b"):
            status, body = server.request("PUT", f"/v1/groups/{group}/connectors",
                                          {"Connectors": [{"Name": "A", "Tasks": 1}]}, token="s3cret-o")
            assert (status, body["ErrorCode"]) == (200, 0)
        status, body = server.request("POST", "/v1/connect-group/heartbeat", {"GroupId": "group-a", **join},
                                      token="s3cret-a")
        assert status == 200 and body["ErrorCode"] == 0 and body["MemberEpoch"] > 0
        status, body = server.request("POST", "/v1/connect-group/heartbeat", {"GroupId": "group-b", **join},
                                      token="s3cret-a")
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


# --- a minimal protocol-following worker (server-side assignor) ------------------------------------


def _items(cat: dict | None) -> frozenset:
    return frozenset() if not cat else items_of(wire.connectors_and_tasks(cat))


def _cat(items: frozenset) -> dict:
    return wire.connectors_and_tasks_json(connectors_and_tasks(items))


class Worker:
    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: frozenset = frozenset()
        self.acknowledged: tuple[int, frozenset] | None = None  # the last (epoch, assignment) answered OK

    def heartbeat(self, server: ServeProcess) -> int | None:
        body = {"GroupId": G, "MemberId": self.member_id, "MemberEpoch": self.epoch,
                "ConnectorsAndTasks": _cat(self.owned)}
        if self.epoch == 0:
            body.update(RebalanceTimeoutMs=5000, ServerAssignor="incremental_cooperative")
        try:
            status, r = server.request("POST", "/v1/connect-group/heartbeat", body, timeout=5)
        except OSError:
            return None  # the coordinator is away: try again later
        assert status == 200, r
        if r["ErrorCode"] in (25, 110):  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: lose all, rejoin
            self.epoch, self.owned = 0, frozenset()
        elif r["ErrorCode"] == 0:
            self.epoch = r["MemberEpoch"]
            if r["Assignment"] is not None:
                self.owned = _items(r["Assignment"]["ConnectorsAndTasks"])
            self.acknowledged = (self.epoch, self.owned)
        return r["ErrorCode"]


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


def test_kill_9_in_the_middle_of_a_rebalance(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    _topic(kafka_broker, unique_topic)
    flags = ("--allow-anonymous", "--heartbeat-interval-ms", "200", "--session-timeout-ms", "20000",
             "--server-assignment-interval-ms", "0")
    first = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *flags).start()
    second = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, *flags, port=first.port)
    try:
        status, _ = first.request("PUT", f"/v1/groups/{G}/connectors",
                                  {"Connectors": [{"Name": "A", "Tasks": 4}, {"Name": "B", "Tasks": 2}]})
        assert status == 200
        workers = [Worker(f"w{i}") for i in range(3)]
        for _ in range(30):
            _round(first, workers)
            if _converged(workers):
                break
        assert _converged(workers)
        # A fourth worker joins: the others must revoke before it gets anything. Kill the
        # coordinator after the first steps of that rebalance, with revocations outstanding.
        workers.append(Worker("w3"))
        _round(first, workers)
        _round(first, workers[:2])
        assert not _converged(workers)
        first.kill()
        acknowledged = {w.member_id: w.acknowledged for w in workers}
        second.start()
        status, described = second.request("GET", f"/v1/groups/{G}")
        assert status == 200 and described["ErrorCode"] == 0, described
        members = {m["MemberId"]: m for m in described["Members"]}
        for member_id, (epoch, assignment) in acknowledged.items():
            # Nothing acknowledged is missing. On Tansu the killed process's open transaction
            # may also be visible (DESIGN §10), so the loaded epoch may be newer, never older.
            assert members[member_id]["MemberEpoch"] >= epoch, (member_id, members[member_id], epoch)
            if members[member_id]["MemberEpoch"] == epoch:
                assert _items(members[member_id]["Assignment"]) == assignment
        for _ in range(40):
            _round(second, workers)
            if _converged(workers) and all(len(w.owned) >= 1 for w in workers):
                break
        assert _converged(workers), [(w.member_id, w.epoch, describe(w.owned)) for w in workers]
        assert all(w.owned for w in workers)
    finally:
        first.stop()
        second.stop()


# --- group ownership -------------------------------------------------------------------------------


def _group_instances(broker, topic: str, tmp_path: Path) -> list[ServeProcess]:  # noqa: ANN001
    ports = [free_port(), free_port()]
    peers = [a for p in ports for a in ("--peer", f"http://127.0.0.1:{p}")]
    return [ServeProcess(broker.bootstrap_servers, topic, tmp_path, "--allow-anonymous", "--ownership", "group",
                         "--ownership-session-timeout-ms", "6000", *peers, port=port) for port in ports]


def _wait_for(condition, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _served(server: ServeProcess) -> set[int]:
    try:
        _, body = server.request("GET", "/health", timeout=2)
    except OSError:
        return set()
    return {int(p) for p, s in body["Partitions"].items() if s == "active"}


def _group_on_partition(partition: int, partitions: int) -> str:
    return next(f"group-{i}" for i in range(1000) if partition_for(f"group-{i}", partitions) == partition)


def test_group_mode_shares_partitions_and_takes_over_from_a_killed_instance(kafka_broker, unique_topic,
                                                                             tmp_path: Path) -> None:  # noqa: ANN001
    _topic(kafka_broker, unique_topic, partitions=4)
    a, b = _group_instances(kafka_broker, unique_topic, tmp_path)
    try:
        a.start()
        _wait_for(lambda: _served(a) == {0, 1, 2, 3}, 30, "the only instance to take every partition")
        b.start()
        _wait_for(lambda: _served(a) | _served(b) == {0, 1, 2, 3} and _served(b) and not _served(a) & _served(b),
                  30, "the partitions to be shared")
        groups = {p: _group_on_partition(p, 4) for p in range(4)}
        for p, group in groups.items():
            # find-coordinator answers from either instance, with the owner's URL.
            for asked in (a, b):
                _, found = asked.request("POST", "/v1/find-coordinator", {"GroupId": group})
                assert found["Url"] == (a.url if p in _served(a) else b.url), (p, found)
            owner = a if p in _served(a) else b
            assert owner.request("PUT", f"/v1/groups/{group}/connectors",
                                 {"Connectors": [{"Name": f"C{p}", "Tasks": 1}]})[1]["ErrorCode"] == 0
        b.kill()
        _wait_for(lambda: _served(a) == {0, 1, 2, 3}, 30, "the survivor to take the killed instance's partitions")
        for p, group in groups.items():
            _, described = a.request("GET", f"/v1/groups/{group}")
            assert described["Connectors"] == [{"Name": f"C{p}", "Tasks": 1}], described
    finally:
        a.stop()
        b.stop()


def test_group_mode_a_stopped_owner_is_fenced_when_it_wakes(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    _topic(kafka_broker, unique_topic, partitions=4)
    a, b = _group_instances(kafka_broker, unique_topic, tmp_path)
    try:
        a.start()
        _wait_for(lambda: _served(a) == {0, 1, 2, 3}, 30, "the first instance to take every partition")
        b.start()
        _wait_for(lambda: _served(b) and _served(a) | _served(b) == {0, 1, 2, 3}, 30, "the partitions to be shared")
        taken = min(_served(b))
        group = _group_on_partition(taken, 4)
        assert b.request("PUT", f"/v1/groups/{group}/connectors",
                         {"Connectors": [{"Name": "old", "Tasks": 1}]})[1]["ErrorCode"] == 0
        b.signal(signal.SIGSTOP)
        _wait_for(lambda: taken in _served(a), 40, "the other instance to take the stopped one's partitions")
        assert a.request("PUT", f"/v1/groups/{group}/connectors",
                         {"Connectors": [{"Name": "new", "Tasks": 1}]})[1]["ErrorCode"] == 0
        b.signal(signal.SIGCONT)
        # The woken instance must not write: either it already knows it lost the partition, or
        # its transactional producer was fenced by the new owner's init_transactions.
        status, body = b.request("PUT", f"/v1/groups/{group}/connectors", {"Connectors": [{"Name": "zombie",
                                                                                          "Tasks": 1}]})
        assert status == 200 and body["ErrorCode"] in (15, 16), body
        _wait_for(lambda: taken not in _served(b), 20, "the woken instance to stop serving the partition")
        # The truth is the new owner's; reload it from the topic to be sure nothing of the zombie's got in.
        a.stop()
        c = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, "--allow-anonymous",
                         "--partitions", str(taken)).start()
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
    _topic(kafka_broker, unique_topic)
    (tmp_path / "tokens").write_text("t-ops ops\n")
    server = ServeProcess(kafka_broker.bootstrap_servers, unique_topic, tmp_path, "--tokens",
                          str(tmp_path / "tokens")).start()
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
        assert described["SessionTimeoutMs"] == 5000
        # Errors are one line and an exit code: unknown group, bad config, no credentials.
        assert coordinator(["groups", "describe", "nope", *auth]) == 1
        assert "does not exist" in capsys.readouterr().err
        assert coordinator(["config", "set", "demo", "--heartbeat-interval-ms", "1", *auth]) == 1
        assert "HeartbeatIntervalMs" in capsys.readouterr().err
        assert coordinator(["groups", "list", "--url", server.url]) == 1
        assert "HTTP 401" in capsys.readouterr().err
    finally:
        server.stop()
