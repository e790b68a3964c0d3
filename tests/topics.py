"""Creating the coordinator's topic for a test, as a user would: `coordinator topic create`."""

from __future__ import annotations

from coordinator.cli import main as coordinator


def create_topic(bootstrap_servers: str, topic: str, partitions: int = 1) -> None:
    """`coordinator topic create` with `partitions` and one replica (the session broker has one node)."""
    code = coordinator(
        [
            "topic",
            "create",
            "--bootstrap-servers",
            bootstrap_servers,
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        ]
    )
    assert code == 0, f"coordinator topic create {topic} exited {code}"
