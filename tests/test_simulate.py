"""`coordinator replay simulate` (issue 32): a group's history re-run through the coordinator, as
recorded and with other settings.

Faithfulness is checked on histories real processes recorded: the main job's story (`coordinator
demo`'s, tests/test_demo.py) and a join storm the SDK's fleet drives through `coordinator serve`,
with the assignor on a worker and on the coordinator; and on the on-call story the state machine
wrote (tests/replay_scenarios.py). The alternatives are checked against what a crash and return
must give, worked out by hand: a delay longer than the absence moves nothing; a delay of 0 moves
the crashed worker's whole share to the only other worker as soon as it is removed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from records import ClassicGroupMetadataKey, ConnectorTaskCount, TaskId
from records.connect_protocol import DEFAULT

from coordinator.core.driver import SimClassicWorker, SimWorker, step_all
from coordinator.core.driver.scripted import Crash, Join, Leave, ScriptSettings, SetConnectors, run_script
from coordinator.core.driver.scripted_classic import ClassicRun
from coordinator.core.items import configured_work
from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.demo import Timing, story
from coordinator.sdk.fleet import Fleet
from coordinator.tools.process import ServeProcess
from replay import events as ev
from replay.history import History
from replay.positions import RawRecord
from replay.simulate import TOLERANCE, Outcome, faithfulness, measure, own_settings, rerun
from replay.source import dump_header, read_topic, write_dump
from replay.whatif import Extracted, extract, on_connect_protocol, recorded_settings
from tests.replay_scenarios import GROUP, StampedDriver, on_call_story, raw_records
from tests.topics import create_topic

COORDINATOR = str(Path(sys.executable).with_name("coordinator"))


def simulated(
    history: History, group: str, given: dict[str, int] | None = None, **alternative: int
) -> tuple[Extracted, Outcome, Outcome]:
    """The recorded history's outcome and a re-run's: with the group's own settings (`given`: those
    the topic does not hold, as --recorded-* gives them), or with `alternative` settings changed."""
    recorded = recorded_settings(history.events, given)
    extracted = extract(history.events, group, recorded.settings)
    own = own_settings(extracted, recorded)
    run, _ = rerun(extracted, replace(own, **alternative), history.last.timestamp_ms)
    end = max(history.last.timestamp_ms, run.last.timestamp_ms)
    return extracted, measure("recorded", history, extracted, end), measure("re-run", run, extracted, end)


def assert_faithful(history: History, group: str, given: dict[str, int]) -> None:
    _, recorded, again = simulated(history, group, given)
    f = faithfulness(recorded, again)
    assert recorded.moves, "a story that moves nothing checks nothing"
    assert f.same_moves, f.first_difference
    assert f.matched_moves == f.recorded_moves
    # The report's bar is 5%; these stories hold a few task-seconds (the tests' coordinators assign
    # at once: no initial delay), where a heartbeat's phase is worth a few percent.
    assert f.unowned_off <= 2 * TOLERANCE, (recorded.unowned_task_ms, again.unowned_task_ms)


# --- a crash and a return, by hand -------------------------------------------------------------------

SESSION_MS, INTERVAL_MS, DELAY_MS = 10_000, 1_000, 60_000


def crash_and_return() -> tuple[History, frozenset, int]:
    """W1 and W2 share connector A's four tasks; W2 crashes, is removed after its session, and is
    back (the same member id) within the delay. Returns the history, what W2 ran when it crashed,
    and when the coordinator removed it."""
    d = StampedDriver()
    d.set_config(
        "g",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=INTERVAL_MS,
        scheduled_rebalance_max_delay_ms=DELAY_MS,
        initial_assignment_delay_ms=0,
    )
    d.set_connectors("g", {"A": 4})
    live = {name: SimWorker(d, "g", name) for name in ("W1", "W2")}

    def run(seconds: int) -> None:  # every worker heartbeats when its member says it is due
        for _ in range(seconds * 10):
            d.advance(100)
            for w in live.values():
                if w.member.heartbeat_due() <= d.now:
                    w.heartbeat()

    for w in live.values():
        w.heartbeat()
    run(20)
    crashed = live.pop("W2")
    held = crashed.owned
    crashed.lose_everything()
    run(20)  # removed after its session; its work waits for it
    live["W2"] = SimWorker(d, "g", "W2")
    live["W2"].heartbeat()
    run(20)
    history = History("g")
    history.run(raw_records(d.log, d.stamps))
    removed = next(e.at.timestamp_ms for e in history.events if e.kind == ev.MEMBER_LEFT)
    return history, held, removed


def test_a_crash_and_return_moves_nothing_with_a_longer_delay_and_everything_at_once_with_none() -> None:
    history, held, removed = crash_and_return()
    assert held and len(held) < 5  # W2 ran a share, not everything
    recorded = recorded_settings(history.events)
    assert (
        recorded.settings.scheduled_rebalance_max_delay_ms == DELAY_MS
        and recorded.how["session_timeout_ms"] == "configured"
    )

    extracted, base, longer = simulated(history, "g", scheduled_rebalance_max_delay_ms=2 * DELAY_MS)
    crash = next(h.step.at_ms for h in extracted.happenings if h.text == "W2's crash")
    assert [m for m in base.moves if m.at_ms >= crash] == []  # as recorded: W2's work waited for it
    assert [m for m in longer.moves if m.at_ms >= crash] == []

    _, _, none = simulated(history, "g", scheduled_rebalance_max_delay_ms=0)
    back = next(h.step.at_ms for h in extracted.happenings if h.text == "W2's join" and h.step.at_ms > crash)
    moved = [m for m in none.moves if crash <= m.at_ms < back]
    assert {(m.item, m.source, m.target) for m in moved} == {(item, "W2", "W1") for item in held}
    # At once: W1 takes it at its first heartbeat after the removal.
    assert all(removed <= m.at_ms <= removed + INTERVAL_MS for m in moved)
    assert none.unowned_task_ms < base.unowned_task_ms


def test_the_on_call_story_re_runs_with_the_same_moves() -> None:
    s = on_call_story()
    history = History(GROUP)
    history.run(s.raw())
    _, recorded, again = simulated(history, GROUP)
    f = faithfulness(recorded, again)
    assert f.same_moves and f.matched_moves == f.recorded_moves > 0, f.first_difference


def test_a_generated_week_re_runs_exactly_when_told_the_interval_the_topic_does_not_hold() -> None:
    """A busy group (20 workers; crashes, restarts, leaves, connector changes) that the driver
    wrote with a 3 s interval and no configuration record."""
    from bench.bench_simulate import GROUP as WEEK_GROUP  # the benchmark's own generator
    from bench.bench_simulate import SETTINGS, recorded, week

    history = History(WEEK_GROUP)
    history.run(recorded(week(20, 150)))
    given = recorded_settings(history.events, {"heartbeat_interval_ms": SETTINGS.heartbeat_interval_ms})
    assert given.how["heartbeat_interval_ms"] == "given" and given.how["session_timeout_ms"] == "server default"
    extracted = extract(history.events, WEEK_GROUP, given.settings)
    run, _ = rerun(extracted, own_settings(extracted, given), history.last.timestamp_ms)
    end = max(history.last.timestamp_ms, run.last.timestamp_ms)
    f = faithfulness(measure("recorded", history, extracted, end), measure("re-run", run, extracted, end))
    assert f.recorded_moves > 20 and f.same_moves and f.unowned_off < 0.01, f.first_difference


# --- real processes -----------------------------------------------------------------------------------


def read_history(bootstrap: str, topic: str, group: str) -> History:
    history = History(group)
    history.run(read_topic({"bootstrap.servers": bootstrap}, topic, timeout_s=30))
    return history


@pytest.mark.integration
def test_the_main_jobs_story_re_runs_as_recorded(kafka_broker, unique_topic, tmp_path: Path) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 4)
    outcome = asyncio.run(
        story(kafka_broker.bootstrap_servers, unique_topic, "demo", 4, Timing(150, 1_500, 2_500, 0.5), tmp_path)
    )
    assert outcome.problems == []
    assert_faithful(
        read_history(kafka_broker.bootstrap_servers, unique_topic, "demo"),
        "demo",
        {"heartbeat_interval_ms": 150, "session_timeout_ms": 1_500},  # the story's flags, as Timing says
    )
    # The command says so, from a dump of the same topic.
    dump = tmp_path / "demo.jsonl"
    with dump.open("wb") as out:
        records = read_topic({"bootstrap.servers": kafka_broker.bootstrap_servers}, unique_topic, timeout_s=30)
        write_dump(out, records, "jsonl", dump_header("test", unique_topic, None))
    out = subprocess.run(
        [
            COORDINATOR,
            "replay",
            "simulate",
            "--group",
            "demo",
            "--file",
            str(dump),
            "--no-progress",
            "--scheduled-delay",
            "0",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert [line["name"] for line in lines if line["type"] == "outcome"] == ["recorded", "re-run", "delay 0 ms"]
    f = next(line for line in lines if line["type"] == "faithfulness")
    assert f["same_moves"] and f["items_moved_off"] == 0 and f["not_reconstructed"] == []


CONNECTORS = {"A": 6, "B": 5, "C": 4}


# Every flag the storm's serve runs with: the topic holds none of them.
STORM_FLAGS = {
    "heartbeat_interval_ms": 200,
    "session_timeout_ms": 2_000,
    "scheduled_rebalance_max_delay_ms": 3_000,
    "initial_assignment_delay_ms": 3_000,
}


async def join_storm(bootstrap: str, topic: str, log_dir: Path, server_side: bool) -> None:
    """Twelve workers start together (assigned once, after the initial delay), three more join,
    one crashes, everyone leaves."""
    everything = configured_work(tuple(ConnectorTaskCount(n, t) for n, t in CONNECTORS.items())).items
    serve = ServeProcess(
        bootstrap,
        topic,
        log_dir,
        "--allow-anonymous",
        # The initial delay is serve's default (the tests' environment says 0): the storm is assigned once.
        *(f"--{name.replace('_', '-')}={value}" for name, value in STORM_FLAGS.items()),
    )
    await asyncio.to_thread(serve.start)
    try:
        async with CoordinatorClient(serve.url, retry_for_s=30) as client:
            fleet = Fleet(client, "storm", server_side=server_side, quiet=True)
            await fleet.set_connectors(CONNECTORS)
            await fleet.join(12)
            await fleet.wait_stable(everything)
            await fleet.join(3)
            # Stable with the three in it: each runs something (a share moved to it) before the crash.
            while not all(w.owned for w in fleet.workers.values()):
                await fleet.wait_stable(everything, settle_s=0.5)
            await fleet.crash("worker-3")
            await fleet.wait_stable(everything, timeout=60)
            await fleet.stop()
    finally:
        await asyncio.to_thread(serve.stop)


def assert_times_are_the_coordinators(history: History, server_side: bool) -> None:
    """The records' times are when the coordinator decided (serve: a request as of when it arrived,
    a timer as of its deadline), not when their transactions were written, to the millisecond: the
    rebalance the crash's deferral scheduled is recorded at the time the deferral named. On a
    server-side assignor the coordinator computed the targets when it recorded them: the deferral
    counts the delay from the crashed worker's removal, and the first target comes the initial
    delay after the last of the first joins. Times a commit or a busy machine had moved would put
    joins on the other side of a window in the re-run."""
    due = next(
        e.detail["scheduled_rebalance_at_ms"]
        for e in history.events
        if e.kind == ev.TARGET_INSTALLED and e.detail["deferred"]
    )
    scheduled = next(
        e.at.timestamp_ms
        for e in history.events
        if e.kind == ev.GROUP_EPOCH and any(c.startswith("scheduled rebalance due") for c in e.detail["causes"])
    )
    assert scheduled == due
    if server_side:  # (a worker's assignor counts the delay from when it computed the target)
        removed = next(e.at.timestamp_ms for e in history.events if e.kind == ev.MEMBER_LEFT)
        assert removed + STORM_FLAGS["scheduled_rebalance_max_delay_ms"] == due
        joins = [e.at.timestamp_ms for e in history.events if e.kind == ev.MEMBER_JOINED][:12]
        first = next(e.at.timestamp_ms for e in history.events if e.kind == ev.TARGET_INSTALLED)
        assert first - max(joins) == STORM_FLAGS["initial_assignment_delay_ms"]


@pytest.mark.integration
@pytest.mark.parametrize("server_side", [False, True], ids=["assignor-on-a-worker", "server-side-assignor"])
def test_a_join_storm_through_serve_re_runs_as_recorded(
    kafka_broker, unique_topic, tmp_path: Path, server_side: bool
) -> None:  # noqa: ANN001
    """Every recorded move, rebalance after rebalance, on a machine as busy as it gets: the
    server-side storm's three joins fall within the server-side assignor's interval or not
    depending on how long the twelve took to follow the first target, and the re-run must put them
    on the same side (it failed in full suite runs while the records' times were their commits')."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 1)
    asyncio.run(join_storm(kafka_broker.bootstrap_servers, unique_topic, tmp_path, server_side))
    history = read_history(kafka_broker.bootstrap_servers, unique_topic, "storm")
    assert sum(e.kind == ev.MEMBER_JOINED for e in history.events) == 15
    assert_times_are_the_coordinators(history, server_side)
    # Given rather than measured: measured, the initial delay of the assignor on a worker comes out
    # longer (the target is installed at the chosen worker's next heartbeat, not when it is due).
    assert_faithful(history, "storm", STORM_FLAGS)
    if server_side:
        # The coordinator computed each target when a join, a removal or a timer said so, and the
        # re-run's joins, crash and timers come at the recorded times: the same targets at the
        # same milliseconds. (A worker's assignor computes at the worker's heartbeat, whose phase
        # the re-run does not replay.)
        recorded = recorded_settings(history.events, STORM_FLAGS)
        extracted = extract(history.events, "storm", recorded.settings)
        run, _ = rerun(extracted, own_settings(extracted, recorded), history.last.timestamp_ms)
        assert targets(run) == targets(history)


def targets(history: History) -> list[tuple[int, int, dict]]:
    """Each target installed: its epoch, its time and what it gives each member."""
    return [(e.epoch, e.at.timestamp_ms, e.detail["targets"]) for e in history.events if e.kind == ev.TARGET_INSTALLED]


# --- bad input -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:  # noqa: ANN001
    path = tmp_path_factory.mktemp("simulate") / "on-call.jsonl"
    with path.open("wb") as out:
        write_dump(out, on_call_story().raw(), "jsonl", dump_header("test", None, [0]))
    return path


@pytest.mark.parametrize(
    ("arguments", "said", "code"),
    [
        (["--group", "nope"], "no records of group nope in dump", 1),
        (
            ["--group", GROUP, "--from", "2030-01-01T00:00Z"],
            "no membership events of group connect-prod between 2030-01-01",
            1,
        ),
        (["--group", GROUP, "--session-timeout", "5ms"], "--session-timeout must be between 100 ms and", 2),
        (["--group", GROUP, "--max-moves", "0"], "--max-moves must be at least 1, not 0", 2),
        (["--group", GROUP, "--recorded-heartbeat-interval", "0"], "--recorded-heartbeat-interval must be between", 2),
        (["--group", GROUP, "--assignor", "round-robin"], "--assignor round-robin: not an assignor", 2),
        (["--group", GROUP, "--scheduled-delay", "soon"], "expected a duration such as 60s", 2),
        (["--group", GROUP, "--plot", "x.png"], "--plot x.png: the timelines are drawn on an .html page", 2),
    ],
)
def test_bad_input_is_one_line(dump: Path, arguments: list[str], said: str, code: int) -> None:
    done = subprocess.run(
        [COORDINATOR, "replay", "simulate", "--file", str(dump), "--no-progress", *arguments],
        capture_output=True,
        text=True,
    )
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def simulate_group(dump: Path, *arguments: str) -> str:
    """`coordinator replay simulate` of the dump's group with `arguments`: its output (exit 0 checked)."""
    return subprocess.run(
        [COORDINATOR, "replay", "simulate", "--file", str(dump), "--no-progress", "--group", GROUP, *arguments],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_the_report_names_the_differences(dump: Path, tmp_path: Path) -> None:
    page = tmp_path / "what-if.html"
    out = simulate_group(dump, "--scheduled-delay", "0", "--plot", str(page))
    assert "faithfulness: the re-run with the group's own settings made 13 of the 13 recorded moves" in out
    # W3's absence was shorter than the recorded delay: with none, its work moved when it was removed.
    assert "W3's crash: as recorded (re-run) nothing moved; with delay 0 ms 4 items moved" in out
    assert page.read_text().count("<svg") == 3  # recorded, re-run, delay 0


def test_a_move_limit_spreads_the_same_moves_over_more_rebalances(dump: Path) -> None:
    """The third question (would a move limit have helped?) on the on-call story: Design III's
    limit lets a rebalance move at most N items and leaves the rest to follow-up rebalances, so the
    tighter the limit, the more rebalances the same history takes."""
    out = simulate_group(dump, "--max-moves", "1", "--max-moves", "2", "--format", "json")
    outcomes = {o["name"]: o for o in map(orjson.loads, out.splitlines()) if o["type"] == "outcome"}
    assert set(outcomes) == {"recorded", "re-run", "max moves 1", "max moves 2"}
    rebalances = [outcomes[name]["rebalances"] for name in ("re-run", "max moves 2", "max moves 1")]
    assert rebalances[0] < rebalances[1] < rebalances[2], rebalances


def test_from_compares_from_a_time_with_the_group_as_it_was_then(dump: Path) -> None:
    """From just before W2's crash: what moved before (the first balance, W4's share) is the group
    as it was; the delay of 0 takes over there, and moves W2's work when W2 is removed."""
    story = on_call_story()
    since = story.times["scaled_out"]
    out = simulate_group(dump, "--from", str(since), "--scheduled-delay", "0", "--format", "json")
    lines = [orjson.loads(line) for line in out.splitlines()]
    recorded, again, none = (line for line in lines if line["type"] == "outcome")
    moved = [(m["item"], m["from"], m["to"]) for m in recorded["moves"]]
    assert moved and {source for _, source, _ in moved} == {"W2"}  # only W2's work, after its delay
    assert all(m["at_ms"] >= since for m in recorded["moves"])
    assert sorted((m["item"], m["from"], m["to"]) for m in again["moves"]) == sorted(moved)
    removed = story.times["w2_removed"]  # a mark taken once W2 had been removed
    w2 = [m for m in none["moves"] if m["from"] == "W2"]
    assert {m["item"] for m in w2} == {item for item, _, _ in moved}
    assert all(m["at_ms"] <= removed for m in w2)  # at once, not a minute later


# --- a classic group re-run on the connect protocol (issue 32 item 4) --------------------------------

CLASSIC_GROUP_ID = "connect-cluster"
CLASSIC_CONNECTORS = {"A": 4, "B": 3}
CLASSIC_OPTIONS = {"session_timeout_ms": 3_000, "rebalance_timeout_ms": 5_000, "heartbeat_interval_ms": 500}


def eager_classic_group() -> tuple[list[RawRecord], dict[str, str], dict[str, int]]:
    """Kafka Connect workers on the eager protocol (connect.protocol=default): W1 and W2 run A's four
    tasks and B's three, W3 joins, W1 crashes (its 3 s session ends). The topic as a group of real
    Connect workers leaves it: its classic records only (no connectors record: their configuration
    is Connect's config topic). Returns the records, member id -> name, and when W3 joined and
    when W1 crashed."""
    d = StampedDriver()
    d.set_connectors(CLASSIC_GROUP_ID, CLASSIC_CONNECTORS)  # what the leader reads, as Connect's from its config topic
    options = {"connect_protocol": DEFAULT, **CLASSIC_OPTIONS}
    workers = [SimClassicWorker(d, CLASSIC_GROUP_ID, n, **options) for n in ("W1", "W2")]

    def run(ms: int) -> None:
        for _ in range(ms // 100):
            step_all(workers)
            d.advance(100)

    run(3_000)
    times = {"W3 joined": d.now}
    workers.append(SimClassicWorker(d, CLASSIC_GROUP_ID, "W3", **options))
    run(3_000)
    times["W1 crashed"] = d.now
    crashed = workers.pop(0)  # no LeaveGroup: the coordinator removes it when its session ends
    run(6_000)
    names = {w.member_id: w.name for w in [crashed, *workers]}
    classic = [(r, t) for r, t in zip(d.log, d.stamps) if isinstance(r.key, ClassicGroupMetadataKey)]
    return raw_records([r for r, _ in classic], [t for _, t in classic]), names, times


def test_a_classic_eager_group_re_runs_on_the_connect_protocol_moving_only_the_newcomers_share() -> None:
    records, names, times = eager_classic_group()
    history = History(CLASSIC_GROUP_ID)
    history.run(records)
    assert not any(e.kind in (ev.CONNECTORS, ev.MEMBER_JOINED) for e in history.events)
    # The workers' session is in their JoinGroup, which the records keep; their heartbeat interval
    # is not: given, as --recorded-heartbeat-interval gives it.
    interval = {"heartbeat_interval_ms": CLASSIC_OPTIONS["heartbeat_interval_ms"]}
    recorded = recorded_settings(history.events, interval)
    assert recorded.settings.session_timeout_ms == CLASSIC_OPTIONS["session_timeout_ms"]
    assert recorded.how["session_timeout_ms"] == "configured"
    extracted = extract(history.events, CLASSIC_GROUP_ID, recorded.settings)
    assert extracted.protocol == "classic"
    assert {h.step.rebalance_timeout_ms for h in extracted.happenings if isinstance(h.step, Join)} == {
        CLASSIC_OPTIONS["rebalance_timeout_ms"]
    }
    assert [h.text for h in extracted.happenings][0] == "the connectors (read from what the members ran)"
    assert extracted.happenings[0].step.connectors == CLASSIC_CONNECTORS
    assert sorted(names[h.worker] for h in extracted.happenings if h.text.endswith("'s join")) == ["W1", "W2", "W3"]
    assert [names[h.worker] for h in extracted.happenings if h.text.endswith("'s leave")] == ["W1"]
    assert any(line.startswith("why classic members left") for line in extracted.not_reconstructed)  # W1 crashed

    run, _ = rerun(extracted, on_connect_protocol(own_settings(extracted, recorded)), history.last.timestamp_ms)
    end = max(history.last.timestamp_ms, run.last.timestamp_ms)
    base, connect = measure("recorded", history, extracted, end), measure("connect", run, extracted, end)
    generations = {e.epoch for e in history.events if e.kind == ev.CLASSIC_GROUP and e.epoch is not None}
    assert base.rebalances == len(generations)  # a classic rebalance is a generation

    # Eager: at W3's join, W1 and W2 stopped everything they ran before the leader gave it out again.
    joined, crashed = times["W3 joined"], times["W1 crashed"]
    stopped = set().union(*(e.released for e in history.events if joined <= e.at.timestamp_ms < crashed))
    everything = {
        str(i) for i in configured_work(tuple(ConnectorTaskCount(n, t) for n, t in CLASSIC_CONNECTORS.items())).items
    }
    assert {str(i) for i in stopped} == everything
    # On the connect protocol only W3's share moved, to W3: 7 tasks over 3 workers give it 2 (the
    # two connectors stay with W1 and W2, one each); nothing moved between W1 and W2.
    at_join = [m for m in connect.moves if m.at_ms < crashed]
    assert all(names[m.target] == "W3" and isinstance(m.item, TaskId) for m in at_join)
    assert len(at_join) == sum(CLASSIC_CONNECTORS.values()) // 3
    recorded_at_join = [m for m in base.moves if m.at_ms < crashed]
    assert len(recorded_at_join) > len(at_join)


def test_a_classic_eager_group_re_runs_faithfully_on_the_classic_protocol() -> None:
    """The classic re-run: Connect's leader (the port) assigns on the classic protocol, joins of one
    instant in one join phase, under the recorded member ids: the same items to the same members,
    generation after generation."""
    records, names, _ = eager_classic_group()
    history = History(CLASSIC_GROUP_ID)
    history.run(records)
    recorded = recorded_settings(history.events, {"heartbeat_interval_ms": CLASSIC_OPTIONS["heartbeat_interval_ms"]})
    assert recorded.settings.protocol == "classic" and recorded.settings.connect_protocol == DEFAULT
    extracted = extract(history.events, CLASSIC_GROUP_ID, recorded.settings)
    run, script = rerun(extracted, own_settings(extracted, recorded), history.last.timestamp_ms)
    assert script.heartbeats > 0 and not script.given_up
    assert not any(e.kind == ev.MEMBER_JOINED for e in run.events)  # classic members only
    end = max(history.last.timestamp_ms, run.last.timestamp_ms)
    base, again = measure("recorded", history, extracted, end), measure("re-run", run, extracted, end)
    f = faithfulness(base, again)
    assert base.moves and f.same_moves, f.first_difference
    assert f.matched_moves == f.recorded_moves == len(again.moves)
    assert again.rebalances == base.rebalances
    assert {names[m.target] for m in again.moves} == {"W1", "W2", "W3"}


DELAY_CLASSIC_MS = 4_000


def sessioned_crash() -> tuple[History, int, frozenset]:
    """Connect workers on connect.protocol=sessioned with scheduled.rebalance.max.delay.ms 4 s: W1
    and W2 share A and its four tasks, W2 crashes. Returns the history, when W2 was removed (its
    session over) and what it ran."""
    d = StampedDriver()
    d.set_connectors(CLASSIC_GROUP_ID, {"A": 4})
    options = {**CLASSIC_OPTIONS, "scheduled_rebalance_max_delay_ms": DELAY_CLASSIC_MS}
    workers = [SimClassicWorker(d, CLASSIC_GROUP_ID, n, **options) for n in ("W1", "W2")]
    step_all(workers)
    workers.append(SimClassicWorker(d, CLASSIC_GROUP_ID, "W2", **options))
    for w in workers[:2]:
        w.step()
    workers = workers[:2]
    for _ in range(30):
        step_all(workers)
        d.advance(100)
    workers.pop()  # W2 stops: no LeaveGroup, the coordinator removes it when its session ends
    for _ in range(150):
        step_all(workers)
        d.advance(100)
    history = History(CLASSIC_GROUP_ID)
    history.run(raw_records(d.log, d.stamps))
    left = next(e for e in history.events if e.kind == ev.CLASSIC_MEMBER_LEFT)
    return history, left.at.timestamp_ms, frozenset(left.released)


def test_a_classic_crash_re_runs_faithfully_and_with_no_delay_moves_at_once() -> None:
    """By hand: Connect's leader keeps a departed worker's work unassigned for the scheduled delay
    (W1 is the only one left: after the delay everything goes to it); with a delay of 0 it gives
    W2's share to W1 in the rebalance W2's removal starts."""
    history, removed, held = sessioned_crash()
    assert held and {str(i) for i in held} < {"A", "A-0", "A-1", "A-2", "A-3"}
    given = {"heartbeat_interval_ms": 500, "scheduled_rebalance_max_delay_ms": DELAY_CLASSIC_MS}
    extracted, base, again = simulated(history, CLASSIC_GROUP_ID, given)
    f = faithfulness(base, again)
    assert f.same_moves and f.matched_moves == f.recorded_moves == len(held), f.first_difference
    assert all(m.at_ms >= removed + DELAY_CLASSIC_MS for m in again.moves)  # they waited the delay
    assert abs(again.unowned_task_ms - base.unowned_task_ms) <= TOLERANCE * base.unowned_task_ms

    _, _, none = simulated(history, CLASSIC_GROUP_ID, given, scheduled_rebalance_max_delay_ms=0)
    assert {(m.item, m.target) for m in none.moves} == {(m.item, m.target) for m in again.moves}
    assert all(removed <= m.at_ms <= removed + 1_000 for m in none.moves)  # at once (the others' rejoin)
    assert none.unowned_task_ms < again.unowned_task_ms


def test_the_classic_re_run_has_the_recorded_leaders() -> None:
    """Z, Y and X join in one join phase (Z first: the leader), Z leaves, V joins, Y (the next
    leader) crashes. A record lists members by id (X, Y, Z), not in join order: the re-run joins
    them in the order they led, so that the coordinator makes the same leaders (Connect's leader
    keeps the memory the scheduled delay needs) and the re-run matches, rebalances and
    task-seconds too."""
    d = StampedDriver()
    d.set_connectors(CLASSIC_GROUP_ID, {"A": 6, "B": 2})
    options = {**CLASSIC_OPTIONS, "scheduled_rebalance_max_delay_ms": 2_000}
    workers = [SimClassicWorker(d, CLASSIC_GROUP_ID, n, **options) for n in ("Z", "Y", "X")]

    def run(ms: int) -> None:
        for _ in range(ms // 100):
            step_all(workers)
            d.advance(100)

    run(2_000)
    workers.pop(0).leave()
    run(3_000)
    workers.append(SimClassicWorker(d, CLASSIC_GROUP_ID, "V", **options))
    run(3_000)
    workers.pop(0)  # Y stops heartbeating
    run(8_000)
    history = History(CLASSIC_GROUP_ID)
    history.run(raw_records(d.log, d.stamps))
    leaders = [e.detail["leader"] for e in history.events if e.kind == ev.CLASSIC_GROUP and e.detail.get("leader")]
    assert [m.split("-")[0] for m in dict.fromkeys(leaders)] == ["Z", "Y", "X"]
    given = {"heartbeat_interval_ms": 500, "scheduled_rebalance_max_delay_ms": 2_000}
    extracted, base, again = simulated(history, CLASSIC_GROUP_ID, given)
    joins = [h.step.member_id.split("-")[0] for h in extracted.happenings if isinstance(h.step, Join)]
    assert joins == ["Z", "Y", "X", "V"]
    f = faithfulness(base, again)
    assert base.moves and f.same_moves and f.matched_moves == f.recorded_moves, f.first_difference
    assert again.rebalances == base.rebalances
    assert f.unowned_off <= TOLERANCE, (base.unowned_task_ms, again.unowned_task_ms)


def test_the_classic_re_run_skips_quiet_heartbeats_without_changing_anything(monkeypatch) -> None:  # noqa: ANN001
    """A settled classic group's heartbeats only re-arm sessions: the re-run takes them as sent
    (scripted_classic's `_skip_quiet`). An hour of a group with a crash, a return (a static member,
    under an id used before), a leave and a connectors change: the same records at the same times,
    the same heartbeats counted, as sending every one."""
    t0 = 1_772_334_000_000
    steps = [
        SetConnectors(t0, {"A": 6, "B": 3}),
        *(Join(t0, f"w{n}", f"w{n}") for n in range(4)),
        Crash(t0 + 60_000, "w1"),
        Join(t0 + 200_000, "w1", "w1"),
        Leave(t0 + 400_000, "w2"),
        SetConnectors(t0 + 900_000, {"A": 8, "B": 3}),
    ]
    settings = ScriptSettings(
        protocol="classic", initial_assignment_delay_ms=0, scheduled_rebalance_max_delay_ms=60_000
    )
    skipped = run_script(CLASSIC_GROUP_ID, steps, settings, t0, t0 + 3_600_000)
    monkeypatch.setattr(ClassicRun, "_skip_quiet", lambda self, at_ms: None)
    every = run_script(CLASSIC_GROUP_ID, steps, settings, t0, t0 + 3_600_000)
    assert len(every.log) > 10 and not every.given_up
    assert (skipped.log, skipped.stamps, skipped.heartbeats) == (every.log, every.stamps, every.heartbeats)
    assert every.heartbeats > 3_600 // 3 * 3  # three workers for the hour at 3 s at least


def test_simulate_answers_a_classic_group_with_the_connect_re_run(tmp_path: Path) -> None:
    """docs/replay.md's line, on the eager group's records."""
    records, _, _ = eager_classic_group()
    with (tmp_path / "classic.jsonl").open("wb") as out:
        write_dump(out, records, "jsonl", dump_header("test", None, [0]))
    docs = (Path(__file__).parent.parent / "docs" / "replay.md").read_text()
    line = next(
        text for text in docs.splitlines() if text.startswith("coordinator replay simulate --group connect-cluster")
    )
    argv = [COORDINATOR, *line.split()[1:]]
    out = subprocess.run([*argv, "--format", "json"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    lines = [orjson.loads(text) for text in out.splitlines()]
    names = ["recorded", "re-run", "protocol connect", "delay 0 ms"]
    assert [x["name"] for x in lines if x["type"] == "outcome"] == names
    f = next(x for x in lines if x["type"] == "faithfulness")
    assert f["measured"] is True and f["same_moves"] is True and f["matched_moves"] == f["recorded_moves"] > 0
    assert f["settings"]["protocol"] == "classic" and f["settings"]["connect_protocol"] == DEFAULT
    text = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert "Connect's leader assigning (connect.protocol=default)" in text
    assert "the same items moved to the same workers, rebalance after rebalance" in text
    header = next(text for text in text.splitlines() if text.lstrip().startswith("recorded"))
    assert header.split() == ["recorded", "re-run", "protocol", "connect", "delay", "0", "ms"]
    unsaid = [a for a in argv if a not in ("--recorded-heartbeat-interval", "500ms")]
    refused = subprocess.run(unsaid, cwd=tmp_path, capture_output=True, text=True)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr  # 3 s, Connect's default, is its session
    assert "heartbeat interval (3000 ms) must be shorter than their session (3000 ms)" in refused.stderr
    # From a time: the classic alternatives take over then (the workers' settings changed, as a
    # rolling restart would), the connect run is made from the start; all measured from then.
    since = subprocess.run(
        [*argv, "--from", "2026-03-01T03:00:05Z", "--session-timeout", "2s", "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    later = [orjson.loads(text) for text in since.splitlines()]
    assert [x["name"] for x in later if x["type"] == "outcome"] == [*names, "session 2 s"]
    f = next(x for x in later if x["type"] == "faithfulness")
    assert f["same_moves"] and f["matched_moves"] == f["recorded_moves"] > 0  # W1's leave, from then on
    # --protocol names the protocol the group did not run: on a classic group, nothing more.
    again = subprocess.run(
        [*argv, "--protocol", "classic", "--protocol", "connect", "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert [orjson.loads(x)["name"] for x in again.stdout.splitlines() if '"outcome"' in x] == names


def test_a_connect_group_re_runs_on_the_classic_protocol(dump: Path) -> None:
    """--protocol classic on a connect group: its workers as Kafka Connect workers (sessioned),
    its connectors and membership the same: every task is run by somebody at the end."""
    out = simulate_group(dump, "--protocol", "classic", "--format", "json")
    outcomes = {x["name"]: x for x in map(orjson.loads, out.splitlines()) if x["type"] == "outcome"}
    assert list(outcomes) == ["recorded", "re-run", "protocol classic"]
    classic = outcomes["protocol classic"]
    assert classic["rebalances"] > 0 and classic["items_moved"] > 0
