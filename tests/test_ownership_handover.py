"""SIGTERM in group ownership hands the partitions over (issue 29, item 11): `coordinator serve`
promises that SIGTERM "stops serving, hands the partitions over (group mode) and exits 0".

Two instances share the topic through the ownership consumer group, whose session timeout is long
(40 s). A group is served by instance A, its workers converged. A gets SIGTERM: it leaves the
consumer group on its way out, so B is given A's partitions at the next rebalance, seconds later,
rather than after the session timeout that a vanished member is removed at. B loads the group as
A acknowledged it (members, epochs, target and assignment), the workers go on heartbeating without
being fenced, and A exits 0."""

from __future__ import annotations

import signal
import time

import pytest
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

from records import TaskId

from tests.topics import create_topic

pytestmark = pytest.mark.integration

PARTITIONS = 2
OWNERSHIP_SESSION_MS = 40_000
# B must have A's partitions well before the ownership session could have expired: A's leave starts
# a rebalance that B joins at its next heartbeat (a tenth of the session, 4 s) and then loads.
HANDOVER_WITHIN_S = 20.0
EVERYTHING = frozenset(["A", "B"] + [TaskId("A", t) for t in range(3)] + [TaskId("B", t) for t in range(1)])


def test_sigterm_hands_the_partitions_over_before_the_session_timeout(kafka_broker, unique_topic, tmp_path) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    a = ownership_instance(kafka_broker, unique_topic, tmp_path, OWNERSHIP_SESSION_MS)
    b = ownership_instance(kafka_broker, unique_topic, tmp_path, OWNERSHIP_SESSION_MS)
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

        sent = time.monotonic()
        a.signal(signal.SIGTERM)
        wait_for(
            lambda: served(b) == {0, 1},
            OWNERSHIP_SESSION_MS / 1000 + 30,
            "the surviving instance to take every partition",
            interval=0.2,
        )
        handover = time.monotonic() - sent
        # A timed-out member would have held its partitions for the whole session (40 s): they moved
        # this soon only because A left the consumer group.
        assert handover < HANDOVER_WITHIN_S, f"handover took {handover:.1f} s: A was timed out, it did not leave"
        assert a.process.wait(30) == 0, a.log()
        assert "Traceback" not in a.log(), a.log()

        # B serves the group as A acknowledged it, and the workers carry on at their epochs.
        assert acknowledged(b, group) == before
        for w in workers:
            epoch, owned = w.epoch, w.owned
            assert w.heartbeat(b) == 0, (w, w.unexpected)
            assert (w.epoch, w.owned) == (epoch, owned)
        assert not ledger.violations, ledger.violations
        assert not [w.unexpected for w in workers if w.unexpected]
    finally:
        a.stop()
        b.stop()
