"""Every group a Kafka cluster's coordinators have, whatever its protocol type: kafka-python's Admin
`list_groups` (ListGroups to every broker). librdkafka's `list_consumer_groups` is no check that a
Connect group is absent: it leaves out every group whose protocol type is not `consumer` (or empty),
so a `connect` group would never show in it even where it exists."""

from __future__ import annotations

from kafka.admin import KafkaAdminClient


def groups_at(bootstrap_servers: str, **config: object) -> dict[str, str]:
    """group id -> protocol type of every group the cluster at `bootstrap_servers` coordinates."""
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap_servers, client_id="test-groups", request_timeout_ms=15_000, **config
    )
    try:
        return {g["group_id"]: g["protocol_type"] for g in admin.list_groups()}
    finally:
        admin.close()
