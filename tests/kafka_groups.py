"""Every group a Kafka cluster's coordinators have, whatever its protocol type: kafka-python's Admin
`list_groups` (ListGroups to every broker). librdkafka's `list_consumer_groups` is no check that a
Connect group is absent: it leaves out every group whose protocol type is not `consumer` (or empty),
so a `connect` group would never show in it even where it exists."""

from __future__ import annotations

import time

from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError


def groups_at(bootstrap_servers: str, timeout_s: float = 60.0, **config: object) -> dict[str, str]:
    """group id -> protocol type of every group the cluster at `bootstrap_servers` coordinates.

    A coordinator still loading a partition answers ListGroups with COORDINATOR_LOAD_IN_PROGRESS (ours
    as Kafka's do); the listing is asked again until `timeout_s`, as Java's Admin retries it, since a
    partial list would say a group is absent when it is only not loaded yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap_servers, client_id="test-groups", request_timeout_ms=15_000, **config
        )
        try:
            return {g["group_id"]: g["protocol_type"] for g in admin.list_groups()}
        except KafkaError as e:
            if not e.retriable or time.monotonic() >= deadline:
                raise
        finally:
            admin.close()
        time.sleep(0.5)
