"""The main job's story, shortened, against the session broker; and the fleet's scenario files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from coordinator.errors import CliError
from coordinator.sdk.demo import CONNECTORS, Timing, story
from coordinator.sdk.fleet import Event, parse_scenario
from tests.topics import create_topic


@pytest.mark.integration
def test_the_story_ends_with_every_task_owned_once_and_the_bounce_undone(
    kafka_broker, unique_topic, tmp_path: Path, capsys
) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 4)
    outcome = asyncio.run(
        story(kafka_broker.bootstrap_servers, unique_topic, "demo", 4, Timing(150, 1_500, 2_500, 0.5), tmp_path)
    )
    assert outcome.problems == []
    out = capsys.readouterr().out
    # The story happened as told: the bounced worker is back with its own work, the crashed one is gone.
    assert outcome.bounced_before and outcome.bounced_after == outcome.bounced_before
    assert outcome.crashed not in outcome.ownership and "CRASHED" in out
    owned = [i for items in outcome.ownership.values() for i in items]
    assert len(owned) == len(set(owned)) == sum(CONNECTORS.values()) + len(CONNECTORS) + 1  # orders-source grew
    assert "a new coordinator loaded the topic" in out


def test_scenario_files() -> None:
    events = parse_scenario("""
        # at action args
        8   bounce   worker-2 1.5
        0   join     5
        12  connectors A=3 "B x=2"
        30  stop
    """)
    assert events == [
        Event(0, "join", ("5",)),
        Event(8, "bounce", ("worker-2", "1.5")),
        Event(12, "connectors", ("A=3", "B x=2")),
        Event(30, "stop", ()),
    ]
    for bad, line in (("x join 1", ":1:"), ("1 dance", ":1:"), ("0 join 1\n2", ":2:")):
        with pytest.raises(CliError, match=f"s{line}"):
            parse_scenario(bad, "s")
