"""Hot standbys against the broker (issue 33 item 1; tests/test_standby_memory.py has the fast cases).

1. A `Standby` tailing a partition with `KafkaPartitionTail` while the owner's producer writes: a
   transaction committed before the new owner's init_transactions is in the tail; one still open
   then is aborted by the fencing, its commit fails, and the promoted state holds none of it. The
   promoted state equals `load_partition` of the partition after the promotion.
2. Two `coordinator serve` processes in group ownership, each keeping a standby of the other's
   partition (`--standby-partitions 1`): kill -9 of the owner of a group's partition; the other
   instance is given it by the consumer group (after the ownership session timeout), promotes its
   standby (its log says so: no full load), serves the group as the dead one acknowledged it, the
   workers heartbeat on at their epochs, and no task is on two workers.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from serve_workers import (
    Ledger,
    Worker,
    acknowledged,
    converge,
    group_on_partition,
    ownership_instance,
    served,
    wait_for,
)

from records import ConnectorTaskCount, TaskId, encode

from coordinator.core.config import CoordinatorConfig
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.protocol import HeartbeatRequest, SetConnectorsRequest
from coordinator.core.state import CoordinatorState
from coordinator.service.log import PartitionWriter, load_partition
from coordinator.service.standby import KafkaPartitionTail, Standby
from tests.support.runtime_memory import durable
from tests.topics import create_topic

pytestmark = pytest.mark.integration

CONFIG = CoordinatorConfig(server_assignment_interval_ms=0, initial_assignment_delay_ms=0)
PREFIX = "standby-test"


class Owner:
    """Records as the state machine writes them: each handler's result applied, then returned."""

    def __init__(self) -> None:
        self.coordinator = GroupCoordinator(CoordinatorState(), CONFIG)
        self.now = 1_000

    def records(self, group: str, *members: str) -> list:
        self.now += 100
        request = SetConnectorsRequest(group_id=group, connectors=(ConnectorTaskCount("c", 4),))
        results = [self.coordinator.set_connectors(request, self.now)]
        for m in members:
            join = HeartbeatRequest(group, m, 0, rebalance_timeout_ms=5_000, server_assignor="incremental_cooperative")
            results.append(self.coordinator.heartbeat(join, self.now))
        out = []
        for result in results:
            self.coordinator.apply(result)
            out += result.records
        return out


def test_a_promoted_standby_holds_what_was_committed_before_fencing_and_nothing_after(
    kafka_broker, unique_topic
) -> None:  # noqa: ANN001
    bootstrap = kafka_broker.bootstrap_servers
    config = {"bootstrap.servers": bootstrap}
    create_topic(bootstrap, unique_topic, 1)
    owner = Owner()
    old = PartitionWriter(config, unique_topic, 0, prefix=PREFIX)
    old.open()
    old.write(owner.records("early", "w1", "w2"))
    standby = Standby(0, KafkaPartitionTail(config, unique_topic, 0)).start()
    try:
        wait_for(lambda: "early" in standby.state.groups, 30, "the standby to read the first records")
        old.write(owner.records("before-fencing", "w3"))  # committed: in the tail, or read already
        old.close()
        # The old owner's next transaction is open (its records are in the log, uncommitted) when
        # the new owner fences: init_transactions aborts it.
        late = Producer({**config, "transactional.id": old.transactional_id, "enable.idempotence": True})
        late.init_transactions(30)
        late.begin_transaction()
        for record in owner.records("after-fencing", "w4"):
            key, value = encode(record)
            late.produce(unique_topic, key=key, value=value, partition=0)
        late.flush(30)
        new = PartitionWriter(config, unique_topic, 0, prefix=PREFIX)
        new.open()
        promoted = standby.promote()
        with pytest.raises(Exception, match="(?i)fenc|epoch"):
            late.commit_transaction(30)
        assert promoted is not None
        assert {"early", "before-fencing"} <= set(standby.state.groups)
        assert "after-fencing" not in standby.state.groups
        loaded = CoordinatorState()
        load_partition(config, unique_topic, 0, loaded)
        assert durable(standby.state) == durable(loaded)
        new.close()
    finally:
        standby.close()


PARTITIONS = 2
OWNERSHIP_SESSION_MS = 6_000  # the broker's group.min.session.timeout.ms (its default): the shortest
EVERYTHING = frozenset(["A", "B"] + [TaskId("A", t) for t in range(3)] + [TaskId("B", t) for t in range(1)])


def test_kill_9_of_the_owner_promotes_the_other_instances_standby(kafka_broker, unique_topic, tmp_path) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    a = ownership_instance(kafka_broker, unique_topic, tmp_path, OWNERSHIP_SESSION_MS, "--standby-partitions", "1")
    b = ownership_instance(kafka_broker, unique_topic, tmp_path, OWNERSHIP_SESSION_MS, "--standby-partitions", "1")
    try:
        a.start()
        wait_for(lambda: served(a) == {0, 1}, 60, "the first instance to take every partition")
        b.start()
        wait_for(
            lambda: served(b) and served(a) and served(a) | served(b) == {0, 1} and not served(a) & served(b),
            60,
            "the partitions to be shared",
        )
        (partition,) = served(a)
        wait_for(lambda: f"keeping a standby of partition {partition}" in b.log_path.read_text(), 30, "b's standby")
        group = group_on_partition(partition, PARTITIONS)
        status, body = a.request(
            "PUT",
            f"/v1/groups/{group}/connectors",
            {"Connectors": [{"Name": "A", "Tasks": 3}, {"Name": "B", "Tasks": 1}]},
        )
        assert (status, body["ErrorCode"]) == (200, 0), body
        ledger = Ledger()
        workers = [Worker(group, f"w{i}", ledger, timeout=30) for i in range(2)]
        converge(a, workers, EVERYTHING)
        before = acknowledged(a, group)
        assert len(before["Members"]) == 2 and before["GroupEpoch"] > 0

        killed = time.monotonic()
        a.kill()
        wait_for(lambda: served(b) == {0, 1}, OWNERSHIP_SESSION_MS / 1000 + 30, "b to take every partition")
        taken = time.monotonic() - killed
        log = b.log_path.read_text()
        assert f"[{partition}] promoted from its standby" in log, log[-4000:]
        assert "Traceback" not in log, log[-4000:]

        # b serves the group as a acknowledged it, which is what a full load of the partition gives.
        assert acknowledged(b, group) == before
        loaded = CoordinatorState()
        load_partition({"bootstrap.servers": kafka_broker.bootstrap_servers}, unique_topic, partition, loaded)
        state = loaded.groups[group]
        assert state.metadata.group_epoch == before["GroupEpoch"], f"taken over in {taken:.1f} s"
        assert sorted((m, c.member_epoch) for m, c in state.currents.items()) == [m[:2] for m in before["Members"]]
        for w in workers:
            epoch, owned = w.epoch, w.owned
            assert w.heartbeat(b) == 0, (w, w.unexpected)
            assert (w.epoch, w.owned) == (epoch, owned)
        assert not ledger.violations, ledger.violations
        assert not [w.unexpected for w in workers if w.unexpected]
    finally:
        a.stop()
        b.stop()
