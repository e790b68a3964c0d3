"""Broker failures under a serving coordinator, on the local three-node cluster (RF 3, min ISR 2).

`coordinator serve` (static ownership, bootstrap = all three nodes) serves a group whose workers
keep heartbeating, leaving and joining again, while a broker dies:

- the leader of the group's partition, kill -9, then restarted on its storage;
- the transaction coordinator of the partition's `transactional.id` (the leader of its
  `__transaction_state` partition), kill -9, then restarted;
- every broker in turn, a rolling restart (SIGTERM, start, wait for the replicas to catch up).

Each time the coordinator must keep serving, or answer retriable error codes, never HTTP 500 and
never crash; it must serve again, with acknowledged writes, while the node is down and after it is
back. After each, with the workers stopped:

- no item was ever owned by two workers (checked after every answer);
- every state a worker was acknowledged is in the topic's committed history of its member, in the
  order it was acknowledged (nothing acknowledged was lost, or acknowledged before it was durable);
- a fresh coordinator process loading the topic serves, for every worker whose last request was
  answered definitively, exactly the epoch and assignment it was last told (or no member, after
  an acknowledged leave or fence);
- the group converges under the fresh coordinator.

A node is always restarted in a `finally`, and the replicas are waited for: the cluster is shared by
the session.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from serve_workers import GONE, Churn, Ledger, Worker, converge, group_on_partition, items, wait_for

from records import ConnectorTaskCount, CurrentMemberAssignmentKey, TaskId, decode

from coordinator.cli import main as coordinator
from coordinator.core.items import items_of
from coordinator.core.protocol import ErrorCode, SetConnectorsRequest
from coordinator.core.state import CoordinatorState
from coordinator.service.log import KafkaPartitionLog
from coordinator.service.runtime import NotServing, PartitionRuntime, Status
from coordinator.tools.devbroker import Cluster
from coordinator.tools.partitions import batches_to_end
from coordinator.tools.process import ServeProcess
from tests.support.waiting import until

pytestmark = pytest.mark.integration

# Enough partitions that one of them is led by a broker other than its transaction coordinator
# (each is by chance, about two times in three), so the two can be killed apart.
PARTITIONS = 8
TXN_STATE = "__transaction_state"
CONNECTORS = [{"Name": "A", "Tasks": 4}, {"Name": "B", "Tasks": 2}]
EVERYTHING = frozenset(["A", "B"] + [TaskId("A", t) for t in range(4)] + [TaskId("B", t) for t in range(2)])
SERVE_FLAGS = (
    "--allow-anonymous",
    "--heartbeat-interval-ms",
    "200",
    "--session-timeout-ms",
    "60000",
    "--scheduled-rebalance-max-delay-ms",
    "2000",
    "--server-assignment-interval-ms",
    "0",
)
# Leader elections after a kill -9 wait for the broker's session to expire (9 s), a transaction
# may wait for its timeout, and the machine is shared: generous, never relied on for correctness.
RECOVERY_S = 150


def set_connectors(request: SetConnectorsRequest) -> Callable:
    """The set-connectors handler on `request`, as `PartitionRuntime.call` takes it."""
    return lambda coordinator, now: coordinator.set_connectors(request, now)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def transaction_state_partition(transactional_id: str, partitions: int) -> int:
    """Kafka's TransactionStateManager.partitionFor: Utils.abs(transactionalId.hashCode) % partitions."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def partitions_of(admin: AdminClient, topic: str) -> dict:
    """The topic's partitions from the cluster's metadata. While a broker is being killed, the
    one the client asks may not answer: metadata timeouts are retried (until RECOVERY_S)."""
    deadline = time.monotonic() + RECOVERY_S
    while True:
        try:
            found = admin.list_topics(topic, timeout=10).topics[topic]
            if found.error is not None:
                raise KafkaException(found.error)
            return found.partitions
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def leader_of(admin: AdminClient, topic: str, partition: int) -> int:
    """The partition's leader (-1 while it has none), once the metadata lists the partition (a
    topic just created may be listed without its partitions for a moment)."""
    deadline = time.monotonic() + RECOVERY_S
    while True:
        try:
            return partitions_of(admin, topic)[partition].leader
        except (KafkaException, KeyError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def wait_in_sync(admin: AdminClient, topic: str) -> None:
    """Until every replica of `topic` and of the transaction log is in sync again."""

    def in_sync() -> bool:
        try:
            return all(
                len(p.isrs) == len(p.replicas) == 3 and p.leader >= 0
                for t in (topic, TXN_STATE)
                for p in partitions_of(admin, t).values()
            )
        except KafkaException:
            return False

    wait_for(in_sync, RECOVERY_S, "every replica to be in sync", interval=0.5)


class Scenario:
    """A topic, a coordinator serving it, and churning workers of one group on a chosen partition."""

    def __init__(self, cluster: Cluster, topic: str, tmp_path: Path) -> None:
        self.cluster = cluster
        self.topic = topic
        self.tmp_path = tmp_path
        self.admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
        self.servers: list[ServeProcess] = []
        self.churn: Churn | None = None
        self.group = ""
        self.partition = -1
        self.workers: list[Worker] = []

    # --- the cluster ---------------------------------------------------------------------------

    def _partitions(self, topic: str) -> dict:
        return partitions_of(self.admin, topic)

    def leader(self, partition: int, topic: str | None = None) -> int:
        return leader_of(self.admin, topic or self.topic, partition)

    def transactional_id(self, partition: int) -> str:
        return f"worker-coordinator-{self.topic}-{partition}"  # PartitionWriter's scheme

    def transaction_coordinator(self, partition: int) -> int:
        """The broker coordinating the transactions of `partition`'s writer: the leader of the
        `__transaction_state` partition its transactional.id hashes to."""
        state = transaction_state_partition(self.transactional_id(partition), len(self._partitions(TXN_STATE)))
        return self.leader(state, TXN_STATE)

    def assert_transaction_state_partition(self, partition: int) -> None:
        """The hash is right: the transactional.id's records are in the partition it names."""
        tid = self.transactional_id(partition).encode()
        tp = TopicPartition(TXN_STATE, transaction_state_partition(tid.decode(), len(self._partitions(TXN_STATE))))
        consumer = Consumer(
            {
                "bootstrap.servers": self.cluster.bootstrap_servers,
                "group.id": f"probe-{self.topic}",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        try:
            end = consumer.get_watermark_offsets(tp, timeout=30)[1]
            consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)])
            keys = [m.key() for batch in batches_to_end(consumer, tp, end) for m in batch]
        finally:
            consumer.close()
        assert any(k is not None and k.endswith(tid) for k in keys), f"{tid!r} not in {tp}"

    def wait_in_sync(self) -> None:
        wait_in_sync(self.admin, self.topic)

    def restart_everything(self) -> None:
        for node in self.cluster.nodes:
            if node.pid() is None:
                self.cluster.start_node(node.id, timeout=120)

    # --- the coordinator and its workers -------------------------------------------------------

    def serve(self) -> ServeProcess:
        server = ServeProcess(self.cluster.bootstrap_servers, self.topic, self.tmp_path, *SERVE_FLAGS)
        self.servers.append(server)
        server.start(wait=False)
        server.wait_healthy(90, partitions=PARTITIONS)
        return server

    def start(self, choose: Callable[[int], bool]) -> None:
        """Create the topic, serve it, put the group on the first partition `choose` accepts, churn."""
        assert (
            coordinator(
                [
                    "topic",
                    "create",
                    "--bootstrap-servers",
                    self.cluster.bootstrap_servers,
                    "--topic",
                    self.topic,
                    "--partitions",
                    str(PARTITIONS),
                    "--replication-factor",
                    "3",
                ]
            )
            == 0
        )
        self.server = self.serve()
        chosen = [p for p in range(PARTITIONS) if choose(p)]
        assert chosen, [(self.leader(p), self.transaction_coordinator(p)) for p in range(PARTITIONS)]
        self.partition = chosen[0]
        self.group = group_on_partition(self.partition, PARTITIONS, "connect-churn")
        status, body = self.server.request("PUT", f"/v1/groups/{self.group}/connectors", {"Connectors": CONNECTORS})
        assert (status, body["ErrorCode"]) == (200, 0), body
        ledger = Ledger()
        self.workers = [Worker(self.group, f"w{i}", ledger) for i in range(4)]
        self.ledger = ledger
        self.churn = Churn(self.server, self.workers, seed=self.partition).start()
        self.churn.wait_writes(8, RECOVERY_S, "before any failure")

    def alive(self) -> None:
        assert self.server.process.poll() is None, f"coordinator serve exited:\n{self.server.log()}"

    def survive(self, node: int, what: str) -> None:
        """While `node` is down: the coordinator keeps committing acknowledged changes."""
        self.churn.wait_writes(4, RECOVERY_S, f"with node {node} ({what}) down")
        self.alive()

    def finish(self) -> None:
        """Stop the workers and check everything the module promises."""
        self.churn.stop()
        self.alive()
        workers = self.workers
        assert not self.ledger.violations, self.ledger.violations[:5]
        assert not [(w.member_id, w.unexpected) for w in workers if w.unexpected]
        certain = [w for w in workers if w.last is not None and not w.uncertain]
        assert len(certain) >= 2, [(w.member_id, w.last, w.uncertain) for w in workers]

        history = committed_history(self.cluster.bootstrap_servers, self.topic, self.partition, self.group)
        for w in workers:
            assert_in_order(w.acked, history.get(w.member_id, []), w.member_id)

        # The running coordinator, then a fresh one loading the topic: each serves exactly what
        # was last acknowledged to every worker whose last request was answered definitively.
        for source in ("running", "fresh"):
            if source == "fresh":
                assert self.server.stop() == 0, self.server.log()
                self.server = self.serve()
            loaded = described(self.server, self.group)
            for w in certain:
                assert loaded.get(w.member_id, GONE) == w.last, (source, w.member_id, loaded, w.last)
        converge(self.server, workers, EVERYTHING, timeout=RECOVERY_S)
        assert not self.ledger.violations, self.ledger.violations[:5]
        assert not [(w.member_id, w.unexpected) for w in workers if w.unexpected]
        print(
            f"\n{self.group} on partition {self.partition}: {self.churn.writes} joins and leaves acknowledged; "
            + ", ".join(
                f"{w.member_id}: {len(w.acked)} states, retriable {w.retriable}, "
                f"unanswered {w.unanswered}, slowest {w.slowest:.1f} s"
                for w in workers
            )
        )

    def close(self) -> None:
        try:
            if self.churn is not None:
                self.churn.halt()
            for server in self.servers:
                server.stop()
        finally:
            self.restart_everything()
            self.wait_in_sync()
        for server in self.servers:
            text = server.log_path.read_text(errors="replace")
            assert "Traceback" not in text and "unexpected failure" not in text, server.log()


def described(server: ServeProcess, group: str) -> dict[str, tuple]:
    deadline = time.monotonic() + RECOVERY_S
    while True:
        status, body = server.request("GET", f"/v1/groups/{group}", timeout=90)
        assert status == 200, body
        if body["ErrorCode"] == 0:
            return {m["MemberId"]: ("member", m["MemberEpoch"], items(m["Assignment"])) for m in body["Members"]}
        assert body["ErrorCode"] in (14, 15, 16) and time.monotonic() < deadline, body
        time.sleep(0.2)


def committed_history(bootstrap: str, topic: str, partition: int, group: str) -> dict[str, list[tuple]]:
    """Each member's committed CurrentMemberAssignment records (type 8) in log order, as the
    states a worker is told: ("member", epoch, items), or GONE for a tombstone."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"history-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    history: dict[str, list[tuple]] = {}
    try:
        tp = TopicPartition(topic, partition)
        end = consumer.get_watermark_offsets(tp, timeout=30)[1]
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        for batch in batches_to_end(consumer, tp, end):
            for message in batch:
                record = decode(message.key(), message.value())
                key = record.key
                if isinstance(key, CurrentMemberAssignmentKey) and key.group_id == group:
                    value = record.value
                    history.setdefault(key.member_id, []).append(
                        GONE if value is None else ("member", value.member_epoch, items_of(value.assignment))
                    )
    finally:
        consumer.close()
    return history


def assert_in_order(acked: list[tuple], history: list[tuple], member_id: str) -> None:
    """Every acknowledged state is a committed one, in the order acknowledged. Before its first
    record a member is GONE (an UNKNOWN_MEMBER_ID answer)."""
    states = [GONE, *history]
    at = 0
    for state in acked:
        try:
            at = states.index(state, at)
        except ValueError:
            raise AssertionError(
                f"{member_id}: acknowledged {state} is not in the committed history after "
                f"position {at}: acknowledged {acked}, committed {states}"
            ) from None


@pytest.fixture
def scenario(kafka_cluster3, unique_topic, tmp_path):  # noqa: ANN001, ANN201
    s = Scenario(kafka_cluster3, unique_topic, tmp_path)
    try:
        yield s
    finally:
        s.close()


def kill_one_role(scenario: Scenario, role: Callable[[int], int], what: str, taken_over: str) -> None:
    """kill -9 the broker holding `role` for the scenario's partition, check the coordinator survives
    while another broker takes the role over, then restart it and check that writes go on."""
    node = role(scenario.partition)
    scenario.cluster.kill(node)
    try:
        wait_for(lambda: role(scenario.partition) not in (node, -1), RECOVERY_S, taken_over, interval=0.5)
        scenario.survive(node, what)
    finally:
        scenario.cluster.start_node(node, timeout=120)
    scenario.wait_in_sync()
    scenario.churn.wait_writes(4, RECOVERY_S, f"after node {node} came back")
    scenario.finish()


def test_partition_leader_killed(scenario: Scenario) -> None:
    # A partition whose leader is not also its transaction coordinator: this is the leader's failure alone.
    scenario.start(lambda p: scenario.leader(p) != scenario.transaction_coordinator(p))
    kill_one_role(scenario, scenario.leader, "the partition's leader", "another replica to lead the partition")


def test_transaction_coordinator_killed(scenario: Scenario) -> None:
    # A partition whose transaction coordinator does not also lead it.
    scenario.start(lambda p: scenario.leader(p) != scenario.transaction_coordinator(p))
    scenario.assert_transaction_state_partition(scenario.partition)
    kill_one_role(
        scenario,
        scenario.transaction_coordinator,
        "the transaction coordinator",
        "another broker to coordinate the partition's transactions",
    )


def test_rolling_restart_of_every_broker(scenario: Scenario) -> None:
    scenario.start(lambda p: True)
    for node in scenario.cluster.nodes:
        scenario.cluster.kill(node.id, signal.SIGTERM, timeout=60)
        try:
            scenario.survive(node.id, "restarting")
        finally:
            scenario.cluster.start_node(node.id, timeout=120)
        scenario.wait_in_sync()
    scenario.churn.wait_writes(4, RECOVERY_S, "after the rolling restart")
    scenario.finish()


def test_majority_of_brokers_down_then_back(kafka_cluster3, unique_topic, caplog) -> None:  # noqa: ANN001
    """Two brokers of three down (no quorum, no min ISR) for longer than the writer's Kafka timeout:
    a commit fails, and loading again (init_transactions, then the load) fails too, attempt after
    attempt. The partition answers retriable errors meanwhile, and serves again by itself once the
    brokers are back, with what was acknowledged before. In process, with a 5 s Kafka timeout
    instead of serve's 30 s, so that the outage outlasts it quickly."""
    cluster = kafka_cluster3
    assert (
        coordinator(
            [
                "topic",
                "create",
                "--bootstrap-servers",
                cluster.bootstrap_servers,
                "--topic",
                unique_topic,
                "--partitions",
                "1",
                "--replication-factor",
                "3",
            ]
        )
        == 0
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    wait_for(lambda: leader_of(admin, unique_topic, 0) >= 0, RECOVERY_S, "the partition to have a leader")
    leader = leader_of(admin, unique_topic, 0)
    down = [n.id for n in cluster.nodes if n.id != leader]
    group = "connect-majority"

    def connectors(name: str) -> SetConnectorsRequest:
        return SetConnectorsRequest(group_id=group, connectors=(ConnectorTaskCount(name, 1),))

    async def scenario() -> None:
        runtime = PartitionRuntime({"bootstrap.servers": cluster.bootstrap_servers}, unique_topic, 0, kafka_timeout_s=5)
        await runtime.start()
        try:
            assert (await runtime.call(set_connectors(connectors("before")))).error_code == ErrorCode.NONE
            for node in down:
                await asyncio.to_thread(cluster.kill, node)
            try:
                with pytest.raises(NotServing) as refused:
                    await runtime.call(set_connectors(connectors("during")))
                assert refused.value.code == ErrorCode.NOT_COORDINATOR  # not acknowledged; maybe written
                await until(lambda: "cannot be loaded now" in caplog.text, RECOVERY_S, "a failed load attempt")
                assert runtime.status is Status.LOADING
                with pytest.raises(NotServing) as refused:
                    await runtime.call(set_connectors(connectors("during")))
                assert refused.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            finally:
                # Together: each start waits until the cluster lists every node.
                await asyncio.gather(*(asyncio.to_thread(cluster.start_node, node, 120) for node in down))
            await until(lambda: runtime.status is Status.ACTIVE, RECOVERY_S, "the partition to serve again")
            described = await runtime.query(lambda c: c.describe_group(group))
            assert [c.name for c in described.connectors] in (["before"], ["during"]), described.connectors
            assert (await runtime.call(set_connectors(connectors("after")))).error_code == ErrorCode.NONE
        finally:
            await runtime.close()
        # What the next owner replays, taken over as a failover does: commit_transaction returns once
        # the transaction coordinator has logged the commit, and its markers reach the partition
        # after (slowly, with brokers just back); a plain read_committed load may not see "after"
        # yet, but open() (init_transactions) waits for those markers before the load.
        state = CoordinatorState()
        successor = KafkaPartitionLog({"bootstrap.servers": cluster.bootstrap_servers}, unique_topic, 0)
        try:
            await asyncio.to_thread(successor.open)
            await asyncio.to_thread(successor.load, state)
        finally:
            successor.close()
        assert [c.name for c in state.groups[group].connector_counts] == ["after"]

    try:
        asyncio.run(scenario())
    finally:
        for node in cluster.nodes:
            if node.pid() is None:
                cluster.start_node(node.id, timeout=120)
        wait_in_sync(admin, unique_topic)
