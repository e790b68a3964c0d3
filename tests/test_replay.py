"""`replay`: a group's history from a log, checked against the state machine that wrote the log.

The logs are the state machine's own (`tests/replay_scenarios.py`: the on-call story and random
histories), stamped with the virtual time of the handler that wrote each record. Every answer is
compared with something the coordinator itself says: its state (`slots()`, `owners()`) after a
prefix of the log, or the story's script. No broker: dumps are files (test_replay_kafka.py reads
the topic).
"""

from __future__ import annotations

import io
import sys
from dataclasses import replace
from pathlib import Path

import msgspec
import orjson
import pytest
from replay_scenarios import GROUP, T0, StampedDriver, Story, on_call_story, random_story, raw_records, replayed

import records
from records import (
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    CurrentMemberAssignmentKey,
    Record,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataKey,
    TaskId,
    encode,
)

from coordinator.api import wire
from coordinator.core.driver import SimWorker, converge
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.items import Item, items_of
from coordinator.core.protocol import LeaveReason, leave_reason_text
from replay import events as ev
from replay import plot_layout, plot_svg
from replay.commands.who_owned import parse_item
from replay.history import History
from replay.invariants import EPOCH_WENT_BACK, HELD_TWICE, INVALID_TARGET, Invariants
from replay.positions import Point, RawRecord, format_duration, format_time, parse_point, parse_time
from replay.source import SourceError, dump_header, read_dump, write_dump
from tests.support.cli import run


@pytest.fixture(scope="module")
def story():  # noqa: ANN201
    return on_call_story()


@pytest.fixture(scope="module")
def dumps(story, tmp_path_factory):  # noqa: ANN001, ANN201
    """The story as a dump file in each format."""
    folder = tmp_path_factory.mktemp("dumps")
    files = {}
    for fmt in ("binary", "jsonl"):
        path = folder / f"story.{fmt}"
        with path.open("wb") as out:
            write_dump(out, story.raw(), fmt, dump_header("test", "__worker_offsets", [0]))
        files[fmt] = path
    return files


def json_lines(text: str) -> list[dict]:
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def history_of(raw: list[RawRecord], group: str | None = GROUP, **options) -> History:  # noqa: ANN003
    h = History(group, **options)
    h.run(raw)
    return h


def owners_after_each_record(log: list[Record], group: str) -> list[dict[Item, str]]:
    """The coordinator's own answer to "who holds what" after every prefix of the log."""
    out = []
    state = replayed([])
    for record in log:
        state.replay(record)
        g = state.groups.get(group)
        out.append(dict(g.owners()) if g is not None else {})
    return out


# --- the timeline --------------------------------------------------------------------------------------


def test_the_timeline_tells_the_story_in_the_protocols_words(story) -> None:  # noqa: ANN001
    h = history_of(story.raw())
    texts = [(e.at.offset, ev.text(e)) for e in h.events]
    by_kind = {}
    for e in h.events:
        by_kind.setdefault(e.kind, []).append(e)

    # W2 crashed after "scaled_out": its session timed out 10 s later, which bumped the group epoch.
    left = [e for e in by_kind[ev.MEMBER_LEFT] if e.member_id == "W2"]
    assert len(left) == 1 and story.marks["scaled_out"] < left[0].at.offset <= story.marks["w2_removed"]
    assert left[0].at.timestamp_ms - story.times["scaled_out"] <= 10_000 + 1_000
    bump = next(e for e in h.events if e.kind == ev.GROUP_EPOCH and e.at.offset > left[0].at.offset)
    why = "W2 fenced: no heartbeat within its session timeout"  # the reason, from the epoch's record (type 3 v1)
    assert bump.detail["causes"] == [why] and ev.text(bump) == f"group epoch {bump.epoch}: {why}"
    assert left[0].detail["reason"] == "session-timeout" and ev.text(left[0]) == why

    # The target for that epoch defers W2's work for the scheduled rebalance delay (60 s).
    w2_work = frozenset(items_of(story.slots_at["scaled_out"][TargetAssignmentMemberKey(GROUP, "W2")].assignment))
    install = next(e for e in by_kind[ev.TARGET_INSTALLED] if e.epoch == bump.epoch)
    assert install.detail["deferred"] == w2_work
    assert install.detail["scheduled_rebalance_at_ms"] == left[0].at.timestamp_ms + 60_000
    assert install.detail["installed_by"] == "W1" and install.detail["assignor"] == "incremental_cooperative"
    deadline = format_time(left[0].at.timestamp_ms + 60_000)[11:19]
    assert ev.text(install) == (
        f"target {bump.epoch} installed by W1 with incremental_cooperative: unchanged for "
        f"W1, W3, W4; deferred {ev.show(w2_work)} until {deadline}"
    )

    # When the delay passes, the scheduled rebalance hands W2's work to the others.
    scheduled = next(e for e in by_kind[ev.GROUP_EPOCH] if e.epoch == bump.epoch + 1)
    assert scheduled.detail["causes"] == [f"scheduled rebalance due at {deadline}"]
    assert scheduled.at.timestamp_ms == left[0].at.timestamp_ms + 60_000

    # Revocation before assignment: W1 gave up work and moved epoch in one record, in those words.
    assert any(text.startswith("W1 revoked [") and "and moved to epoch 4" in text for _, text in texts)
    assert any(text.startswith("W1 asked to revoke [") and "for target 4" in text for _, text in texts)
    # W3 bounced: it rejoined after its removal.
    assert story.marks["w3_removed"] < [o for o, t in texts if t.startswith("W3 joined")][-1]


def test_rebalances_run_from_an_epoch_bump_to_convergence_and_say_what_moved(story) -> None:  # noqa: ANN001
    h = history_of(story.raw())
    rebalances = h.all_rebalances()
    assert [r.causes for r in rebalances] == [
        ["W1 joined", "W2 joined", "W3 joined"],
        ["W4 joined"],
        ["W2 fenced: no heartbeat within its session timeout"],
        [rebalances[3].causes[0]],
        ["W3 fenced: no heartbeat within its session timeout"],
        ["W3 joined"],
        ["connectors changed"],
    ]
    assert rebalances[3].causes[0].startswith("scheduled rebalance due at")
    assert all(r.end is not None and r.duration_ms >= 0 for r in rebalances)
    owners = owners_after_each_record(story.log, GROUP)
    for r in rebalances:
        # What moved is what the coordinator's owners say changed between the rebalance's ends.
        before = owners[r.start.offset - 1]
        after = owners[r.end.offset]
        expected = sorted(
            (
                (item, before.get(item), after.get(item))
                for item in before.keys() | after.keys()
                if before.get(item) != after.get(item)
            ),
            key=lambda m: ev.item_order(m[0]),
        )
        assert r.moved == expected, r
        # Converged: every member at the group epoch, nothing pending.
        state = replayed(story.log[: r.end.offset + 1])
        g = state.groups[GROUP]
        assert g.group_epoch == g.assignment_epoch == r.to_epoch
        assert all(c.member_epoch == r.to_epoch and not items_of(c.pending_revocation) for c in g.currents.values())
    # The bounce: W3 came back within the delay and got its own work back, nothing else moved.
    w3_work = items_of(story.slots_at["w2_work_moved"][TargetAssignmentMemberKey(GROUP, "W3")].assignment)
    back = rebalances[5]
    assert {item for item, _, to in back.moved if to == "W3"} == w3_work
    assert all(frm is None for _, frm, _ in back.moved)


def test_timeline_command_table_and_json(capsys, dumps) -> None:  # noqa: ANN001
    code, out, err = run(capsys, "replay", "timeline", "--group", GROUP, "--file", str(dumps["binary"]))
    assert code == 0 and err == ""
    assert f"group {GROUP}: 88 records from dump" in out
    assert "┌ rebalance 3: W2 fenced: no heartbeat within its session timeout" in out
    assert (
        "└ converged at epoch 6 after 3 s: 3 released by members that left or joined again; moved clicks-source W2 -> (none)"
        in out
    )
    assert "7 rebalances converged" in out
    # Issue 29: a rebalance that moved nothing says "nothing moved", never "moved nothing moved".
    closes = [line for line in out.splitlines() if "└ converged at" in line]
    assert len(closes) == 7 and "moved nothing" not in out
    assert all(line.endswith("; nothing moved") or "; moved " in line for line in closes), closes
    # The story's rebalances all move something: the wording of one that moves nothing, open or closed.
    from types import SimpleNamespace

    from replay.commands.timeline import _moves

    assert _moves(SimpleNamespace(moved=())) == "nothing moved"
    assert _moves(SimpleNamespace(moved=()), so_far=True) == "nothing moved so far"
    assert _moves(SimpleNamespace(moved=[("A-0", "W1", None)]), so_far=True) == "so far moved A-0 W1 -> (none)"

    code, out, _ = run(
        capsys, "replay", "timeline", "--group", GROUP, "--file", str(dumps["jsonl"]), "--format", "json"
    )
    lines = json_lines(out)
    assert code == 0
    assert sum(line["type"] == "rebalance" for line in lines) == 7
    events = [line for line in lines if line["type"] == "event"]
    assert [e["offset"] for e in events] == sorted(e["offset"] for e in events)
    left = next(e for e in events if e["kind"] == "member-left")
    assert left["member"] == "W2" and left["text"] == "W2 fenced: no heartbeat within its session timeout"
    released = next(e for e in events if e["kind"] == "released")
    assert released["released"] == ["clicks-source", "clicks-source-1", "clicks-source-2"]


def _static_instance_taken_over() -> tuple[StampedDriver, SimWorker, SimWorker]:
    """W1 and static W2 (instance i-2); W2 leaves with -2 and its instance comes back as W2b."""
    d = StampedDriver()
    d.set_config("g", session_timeout_ms=10_000, heartbeat_interval_ms=1_000, scheduled_rebalance_max_delay_ms=5_000)
    d.set_connectors("g", {"A": 2})
    w1 = SimWorker(d, "g", "W1", instance_id="i-1")
    w2 = SimWorker(d, "g", "W2", instance_id="i-2")
    converge([w1, w2], advance_ms=500)
    w2.leave(static=True)
    d.advance(1_000)
    back = SimWorker(d, "g", "W2b", instance_id="i-2")
    converge([w1, back], advance_ms=500)
    return d, w1, back


def test_the_events_of_static_membership_takeovers_server_side_assignors_and_assignor_errors() -> None:
    d, w1, back = _static_instance_taken_over()
    texts = [ev.text(e) for e in history_of(raw_records(d.log, d.stamps), "g").events]
    assert any(
        t.startswith("W2 left as a static member; its assignment [") and t.endswith("waits for its return")
        for t in texts
    )
    assert "W2b joined as instance i-2, taking over from W2 (assignors: incremental_cooperative v0-1)" in texts
    assert any("W2 no longer holds" in t for t in texts)

    # A static member that does not come back: its session expires.
    back.leave(static=True)
    for _ in range(12):
        d.advance(1_000)
        w1.heartbeat()
    texts = [ev.text(e) for e in history_of(raw_records(d.log, d.stamps), "g").events]
    assert "W2b removed: the session of static instance i-2 expired after it left" in texts

    # Server-side assignor: the coordinator installs.
    s = StampedDriver()
    s.set_connectors("s", {"A": 1})
    converge([SimWorker(s, "s", "S1", assignor=None, server_assignor="eager")])
    texts = [ev.text(e) for e in history_of(raw_records(s.log, s.stamps), "s").events]
    assert any(t.startswith("target 2 installed by the coordinator with eager: S1=[A, A-0]") for t in texts)

    # An assignor error keeps every target (DESIGN §5).
    from coordinator.core.assignors import GroupAssignment

    e = StampedDriver()
    e.set_connectors("e", {"A": 1})
    w = SimWorker(e, "e", "E1")
    converge([w])
    e.set_connectors("e", {"A": 2})
    w.heartbeat(compute=False)
    w.install(e.state.groups["e"].group_epoch, GroupAssignment(members={}, error=7, error_message="boom"))
    texts = [ev.text(x) for x in history_of(raw_records(e.log, e.stamps), "e").events]
    assert (
        "target 3: assignor incremental_cooperative from E1 failed with error 7: boom; members keep their targets"
    ) in texts


# --- state and diff ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mark", ["stable", "scaled_out", "w2_removed", "w2_work_moved", "w3_removed", "w3_back", "end"]
)
def test_state_at_an_offset_or_a_time_is_the_coordinators_state_there(story, mark) -> None:  # noqa: ANN001
    h = History(GROUP, keep_events=False, intervals=False)
    stopped = h.run(story.raw(), until=Point(offset=story.marks[mark]))
    assert h.state.slots() == story.slots_at[mark]
    assert (stopped is None) == (mark == "end")
    # At a time: after every record stamped at or before it (a join may follow a mark in the same ms).
    t = story.times[mark]
    h = History(GROUP, keep_events=False, intervals=False)
    h.run(story.raw(), until=Point(time_ms=t))
    assert h.state.slots() == replayed([r for r, stamp in zip(story.log, story.driver.stamps) if stamp <= t]).slots()


def test_state_command(capsys, story, dumps) -> None:  # noqa: ANN001
    offset = story.marks["w2_removed"]
    code, out, _ = run(
        capsys,
        "replay",
        "state",
        "--group",
        GROUP,
        "--file",
        str(dumps["binary"]),
        "--at",
        str(offset),
        "--format",
        "json",
    )
    assert code == 0
    (answer,) = json_lines(out)
    expected = GroupCoordinator(replayed(story.log[: offset + 1])).describe_group(GROUP)
    assert answer["offset"] == offset and answer["description"] == orjson.loads(wire.encode(expected))

    iso = format_time(story.times["w2_removed"]).replace(" ", "T") + "Z"
    code, out, _ = run(capsys, "replay", "state", "--group", GROUP, "--file", str(dumps["jsonl"]), "--at", iso)
    assert code == 0
    assert f"group {GROUP} at {format_time(story.times['w2_removed'])}: after the record at offset {offset}" in out
    assert "deferred: [clicks-source, clicks-source-1, clicks-source-2] until" in out
    assert "W2" not in out.split("MEMBER")[1]  # removed
    code, _, err = run(capsys, "replay", "state", "--group", "nobody", "--file", str(dumps["binary"]))
    assert code == 1 and "group nobody does not exist at the end of the read" in err


def test_diff_between_two_points(capsys, story, dumps) -> None:  # noqa: ANN001
    a, b = story.marks["scaled_out"], story.marks["w2_work_moved"]
    code, out, _ = run(
        capsys,
        "replay",
        "diff",
        "--group",
        GROUP,
        "--file",
        str(dumps["binary"]),
        "--from",
        str(a),
        "--to",
        str(b),
        "--format",
        "json",
    )
    assert code == 0
    (diff,) = json_lines(out)
    owners = owners_after_each_record(story.log, GROUP)
    expected = [
        {"item": str(i), "from": owners[a].get(i), "to": owners[b].get(i)}
        for i in sorted(owners[a].keys() | owners[b].keys(), key=ev.item_order)
        if owners[a].get(i) != owners[b].get(i)
    ]
    assert diff["moved"] == expected and {m["from"] for m in expected} == {"W2"}
    assert diff["members_left"] == ["W2"] and diff["members_joined"] == []
    assert diff["epochs"]["group epoch"] == [5, 7]
    assert [r["causes"] for r in diff["rebalances"]] == [
        ["W2 fenced: no heartbeat within its session timeout"],
        [diff["rebalances"][1]["causes"][0]],
    ]

    code, out, _ = run(capsys, "replay", "diff", "--group", GROUP, "--file", str(dumps["binary"]), "--from", str(a))
    assert code == 0 and "group epoch: 5 -> 10" in out and "members joined: none; left: W2" in out
    assert "clicks-source    W2            W4" in out


# --- who-owned ---------------------------------------------------------------------------------------


def test_ownership_intervals_are_the_coordinators_owners_over_time(story) -> None:  # noqa: ANN001
    h = history_of(story.raw())
    got = sorted((str(i.item), i.member_id, i.start.offset, i.end.offset if i.end else None) for i in h.all_intervals())
    expected = []
    owners = owners_after_each_record(story.log, GROUP)
    open_: dict = {}
    for offset, now in enumerate(owners):
        for item in list(open_):
            if now.get(item) != open_[item][0]:
                member, since = open_.pop(item)
                expected.append((str(item), member, since, offset))
        for item, member in now.items():
            if item not in open_:
                open_[item] = (member, offset)
    expected += [(str(item), member, since, None) for item, (member, since) in open_.items()]
    assert got == sorted(expected)


def test_who_owned_command(capsys, story, dumps) -> None:  # noqa: ANN001
    code, out, _ = run(
        capsys, "replay", "who-owned", "clicks-source-1", "--file", str(dumps["binary"]), "--format", "json"
    )
    intervals = json_lines(out)
    assert code == 0 and [i["member"] for i in intervals] == ["W1", "W2", "W3", "W3"]
    # Why W2 stopped holding it, from the epoch record that removed it (type 3 v1), not "member left".
    assert intervals[1]["ended_by"] == "fenced: no heartbeat within its session timeout"
    assert intervals[-1]["to_offset"] is None
    assert intervals[0]["ended_by"] == "revoked (epoch 4)"
    # The same item as A:0, asked at a time: who held it then. Between W2's removal and the
    # scheduled rebalance it was deferred: nobody.
    during = story.times["w2_removed"]
    code, out, _ = run(
        capsys,
        "replay",
        "who-owned",
        "clicks-source:1",
        "--group",
        GROUP,
        "--file",
        str(dumps["jsonl"]),
        "--at",
        str(during),
    )
    assert code == 0 and out.startswith("nobody held clicks-source:1 at")
    code, out, _ = run(
        capsys,
        "replay",
        "who-owned",
        "clicks-source:1",
        "--group",
        GROUP,
        "--file",
        str(dumps["jsonl"]),
        "--at",
        str(story.times["scaled_out"]),
    )
    assert code == 0 and "connect-prod  clicks-source-1  W2" in out and out.count("\n") == 3


def test_items_are_typed_as_connectors_or_tasks() -> None:
    assert parse_item("A")("A") and not parse_item("A")(TaskId("A", 0))
    assert parse_item("A:0")(TaskId("A", 0)) and not parse_item("A:0")("A:0")
    # A-0 is task 0 of A, or a connector named A-0: connector names may hold dashes.
    assert parse_item("A-0")(TaskId("A", 0)) and parse_item("A-0")("A-0")
    assert parse_item("sink-eu-1")(TaskId("sink-eu", 1)) and parse_item("sink-eu-1")("sink-eu-1")
    assert parse_item("sink-eu")("sink-eu") and not parse_item("sink-eu")(TaskId("sink", 0))


# --- verify ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_verify_passes_the_logs_the_state_machine_writes_and_their_compacted_forms(seed: int) -> None:
    d = random_story(seed, server_side=seed % 3 == 0, assignor="eager" if seed % 4 == 1 else "incremental_cooperative")
    raw = raw_records(d.log, d.stamps)
    last = {r.key: r for r in raw}
    compacted = sorted((r for r in last.values() if r.value is not None), key=lambda r: r.offset)
    head = {r.key: r for r in raw[: len(raw) // 2]}
    partly = sorted((r for r in head.values() if r.value is not None), key=lambda r: r.offset) + raw[len(raw) // 2 :]
    for log, partial in ((raw, False), (compacted, False), (partly, False), (raw[len(raw) // 3 :], True)):
        checker = Invariants(partial=partial)
        h = history_of(log, None, keep_events=False, intervals=False, checker=checker)
        assert checker.violations == [] and not h.corrupt
    assert history_of(raw, None).state.slots() == d.state.slots()


def _inject(raw: list[RawRecord], at: int, records: list[Record]) -> list[RawRecord]:
    """`records` inserted after offset `at`, the offsets after them shifted."""
    stamp = raw[at].timestamp_ms
    new = [RawRecord(0, at + 1 + n, stamp, *encode(r)) for n, r in enumerate(records)]
    rest = [r._replace(offset=r.offset + len(records)) for r in raw[at + 1 :]]
    return raw[: at + 1] + new + rest


def test_verify_catches_an_item_held_twice(capsys, story, tmp_path) -> None:  # noqa: ANN001
    at = story.marks["scaled_out"]
    slots = story.slots_at["scaled_out"]
    w1 = slots[CurrentMemberAssignmentKey(GROUP, "W1")]
    w4 = slots[CurrentMemberAssignmentKey(GROUP, "W4")]
    stolen = w1.assignment.tasks[0]
    forged = replace(w4, assignment=msgspec.structs.replace(w4.assignment, tasks=(*w4.assignment.tasks, stolen)))
    raw = _inject(story.raw(), at, [Record(CurrentMemberAssignmentKey(GROUP, "W4"), forged)])
    path = tmp_path / "bad.bin"
    with path.open("wb") as out:
        write_dump(out, raw, "binary", dump_header("test", None, None))
    code, out, err = run(capsys, "replay", "verify", "--file", str(path))
    assert code == 1
    assert f"partition 0 offset {at + 1}" in out and f"[held-twice] {stolen} given to W4 while W1 holds it" in out
    assert "invariant violations; records at fault (partition:offset):" in err and f"0:{at + 1}" in err
    checker = Invariants()
    history_of(raw, None, checker=checker)
    assert [v.rule for v in checker.violations] == [HELD_TWICE]
    assert checker.violations[0].offsets[1] == at + 1


def test_verify_catches_epochs_going_back_and_invalid_targets(story) -> None:  # noqa: ANN001
    at = story.marks["scaled_out"]
    slots = story.slots_at["scaled_out"]
    epoch = slots[ConnectGroupMetadataKey(GROUP)].group_epoch
    checker = Invariants()
    history_of(
        _inject(story.raw(), at, [Record(ConnectGroupMetadataKey(GROUP), ConnectGroupMetadataValue(epoch - 2))]),
        None,
        checker=checker,
    )
    assert [(v.rule, v.offsets) for v in checker.violations][0] == (EPOCH_WENT_BACK, (at + 1,))
    assert checker.violations[0].message == f"group epoch went back from {epoch} to {epoch - 2}"

    # A target for the next epoch that gives W1's task to W3 as well, and leaves one out.
    w1 = slots[TargetAssignmentMemberKey(GROUP, "W1")].assignment
    w3 = slots[TargetAssignmentMemberKey(GROUP, "W3")].assignment
    meta = slots[TargetAssignmentMetadataKey(GROUP)]
    dropped = items_of(slots[TargetAssignmentMemberKey(GROUP, "W4")].assignment)
    forged = [
        Record(ConnectGroupMetadataKey(GROUP), ConnectGroupMetadataValue(epoch + 1)),
        Record(
            TargetAssignmentMemberKey(GROUP, "W3"),
            TargetAssignmentMemberValue(msgspec.structs.replace(w3, tasks=(*w3.tasks, w1.tasks[0]))),
        ),
        Record(
            TargetAssignmentMemberKey(GROUP, "W4"),
            TargetAssignmentMemberValue(
                msgspec.structs.replace(slots[TargetAssignmentMemberKey(GROUP, "W4")].assignment, tasks=())
            ),
        ),
        Record(TargetAssignmentMetadataKey(GROUP), replace(meta, assignment_epoch=epoch + 1)),
    ]
    checker = Invariants()
    history_of(_inject(story.raw()[: at + 1], at, forged), None, checker=checker)
    (violation,) = checker.violations
    assert violation.rule == INVALID_TARGET and violation.offsets == (at + 4,)
    assert f"{w1.tasks[0]} assigned to both W1 and W3" in violation.message
    assert f"neither assigned nor deferred: {ev.show(dropped)}" in violation.message


# --- sources: dumps, windows, corrupt records, one group among many --------------------------------


def test_dumps_round_trip_in_both_formats_and_are_told_apart(story, dumps, tmp_path) -> None:  # noqa: ANN001
    raw = story.raw()
    assert list(read_dump(dumps["binary"])) == raw == list(read_dump(dumps["jsonl"]))
    assert dumps["binary"].stat().st_size < dumps["jsonl"].stat().st_size * 0.7
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(dumps["binary"].read_bytes()[:-3])
    with pytest.raises(SourceError, match="truncated"):
        list(read_dump(truncated))
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(SourceError, match="not a dump file"):
        list(read_dump(other))


def test_windows_bound_the_read(story, dumps) -> None:  # noqa: ANN001
    from replay.positions import Window

    raw = story.raw()
    assert list(read_dump(dumps["binary"], window=Window(from_offset=10, to_offset=20))) == raw[10:21]
    t = story.times["scaled_out"]
    assert list(read_dump(dumps["jsonl"], window=Window(to_time_ms=t))) == [r for r in raw if r.timestamp_ms <= t]
    assert list(read_dump(dumps["binary"], partitions=[3])) == []


def test_corrupt_records_are_reported_and_skipped_and_strict_stops(capsys, story, tmp_path) -> None:  # noqa: ANN001
    raw = story.raw()
    bad_value = raw[30]._replace(value=b"\x00\x00\xff\xff\xff")
    unknown_type = raw[30]._replace(key=b"\x00\x2a" + raw[30].key[2:])
    corrupted = (
        raw[:30]
        + [r._replace(offset=30 + n) for n, r in enumerate([bad_value, unknown_type])]
        + [r._replace(offset=r.offset + 2) for r in raw[30:]]
    )
    path = tmp_path / "corrupt.jsonl"
    with path.open("wb") as out:
        write_dump(out, corrupted, "jsonl", dump_header("test", None, None))
    code, out, err = run(capsys, "replay", "timeline", "--group", GROUP, "--file", str(path))
    assert code == 0 and "7 rebalances" in out
    assert "warning: skipped corrupt record at partition 0 offset 30: cannot decode value of record type" in err
    assert "warning: skipped corrupt record at partition 0 offset 31: cannot decode key of record type 42" in err
    code, out, _ = run(capsys, "replay", "verify", "--file", str(path), "--format", "json")
    assert [line["offset"] for line in json_lines(out) if line["type"] == "corrupt"] == [30, 31]
    code, _, err = run(capsys, "replay", "timeline", "--group", GROUP, "--file", str(path), "--strict")
    assert code == 1 and err.startswith("coordinator replay: error: corrupt record at partition 0 offset 30:")


def test_one_group_among_many_decodes_only_its_own_records(capsys, tmp_path) -> None:  # noqa: ANN001
    d = StampedDriver()
    # Two groups in one partition, their handlers interleaved in time; one group id is the
    # other's prefix, which the key filter must tell apart.
    a = on_call_story("connect", d)
    random_story(7, "connect-2", d)
    raw = raw_records(d.log, d.stamps)
    others = [
        r if not r.key[2:].startswith(b"\x12connect-2") or r.value is None else r._replace(value=b"\x00\x00junk")
        for r in raw
    ]
    h = history_of(others, "connect")
    assert not h.corrupt and h.skipped == sum(1 for r in raw if r.key[2:].startswith(b"\x12connect-2"))
    assert h.state.slots() == {k: v for k, v in d.state.slots().items() if k.group_id == "connect"}
    assert [r.causes for r in h.all_rebalances()] == [r.causes for r in history_of(a.raw(), "connect").all_rebalances()]
    # verify decodes everything, so there the broken values of the other group show.
    assert len(history_of(others, None, keep_events=False).corrupt) > 0


def test_errors_are_one_line(capsys, tmp_path, dumps) -> None:  # noqa: ANN001
    code, _, err = run(capsys, "replay", "timeline", "--group", "g", "--file", str(tmp_path / "missing.bin"))
    assert code == 1 and err.strip().count("\n") == 0 and "cannot read dump file" in err
    code, _, err = run(capsys, "replay", "verify", "--bootstrap-servers", "", "--topic", "t")
    assert code == 2 and "nothing to read" in err
    code, _, err = run(
        capsys,
        "replay",
        "timeline",
        "--group",
        GROUP,
        "--file",
        str(dumps["binary"]),
        "--plot",
        str(tmp_path / "out.gif"),
    )
    assert code == 2 and err.endswith("the picture is a .png, or an .html (or .svg) page\n")
    code, _, err = run(
        capsys, "replay", "diff", "--group", GROUP, "--file", str(dumps["binary"]), "--from", "50", "--to", "10"
    )
    assert code == 2 and "--from is after --to" in err
    code, _, err = run(
        capsys,
        "replay",
        "timeline",
        "--group",
        GROUP,
        "--file",
        str(dumps["binary"]),
        "--plot",
        str(tmp_path / "no" / "such" / "dir.html"),
    )
    assert code == 1 and err.count("\n") == 1 and "No such file or directory" in err


# --- dump and plot -----------------------------------------------------------------------------------


def test_dump_converts_a_dump_and_defaults_its_format_from_the_name(capsys, dumps, tmp_path, story) -> None:  # noqa: ANN001
    target = tmp_path / "copy.jsonl"
    code, _, err = run(capsys, "dump", "--file", str(dumps["binary"]), "--output", str(target), "--from-offset", "10")
    assert code == 0 and "dumped 78 records" in err and "(jsonl)" in err
    assert list(read_dump(target)) == story.raw()[10:]
    assert not (tmp_path / "copy.jsonl.partial").exists()


def test_dump_decode_reads_a_dump_file_as_the_topic(capsys, dumps, story) -> None:  # noqa: ANN001
    # Like `kafka-dump-log --offsets-decoder`: a line per record, decoded by the records package.
    raw = story.raw()
    for fmt in ("binary", "jsonl"):
        code, out, err = run(capsys, "dump", "--file", str(dumps[fmt]), "--decode", "--no-progress")
        lines = out.splitlines()
        assert code == 0 and len(lines) == len(raw) and f"decoded {len(raw)} records" in err
        for line, r in zip(lines, raw, strict=True):
            decoded = records.to_dict(records.decode(r.key, r.value))
            assert line.startswith(
                f"partition: {r.partition} offset: {r.offset} time: "
                f"{format_time(r.timestamp_ms).replace(' ', 'T')}Z type: {decoded['Name']}("
            )
            assert line.endswith("tombstone") == (r.value is None)
        code, out, _ = run(capsys, "dump", "--file", str(dumps[fmt]), "--decode", "--no-progress", "--format", "json")
        rows = json_lines(out)
        assert [(x["offset"], x["timestamp_ms"], x["tombstone"]) for x in rows] == [
            (r.offset, r.timestamp_ms, r.value is None) for r in raw
        ]
        assert rows[0]["key"] == records.to_dict(records.decode(raw[0].key, raw[0].value))["Key"]


def test_plots(capsys, dumps, tmp_path) -> None:  # noqa: ANN001
    page = tmp_path / "story.html"
    code, _, err = run(
        capsys, "replay", "timeline", "--group", GROUP, "--file", str(dumps["binary"]), "--plot", str(page)
    )
    assert code == 0 and f"plot written to {page}" in err
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html
    for lane in ("W1", "W2", "W3", "W4", "(unowned)"):
        assert f">{lane}</text>" in html
    assert "clicks-source-1 held by W2" in html and "rebalance 3: epoch 5 -&gt; 6" in html
    png = tmp_path / "story.png"
    code, _, err = run(
        capsys, "replay", "timeline", "--group", GROUP, "--file", str(dumps["binary"]), "--plot", str(png)
    )
    assert code == 0, err  # matplotlib is the plot extra's, which `make test` installs
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_a_png_without_matplotlib_says_to_install_the_extra(capsys, dumps, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """matplotlib is the extra `plot` (the server image has none): a PNG asked for without it, where
    installing it on first use is switched off, is one line naming the extra, exit 1, and no file; the
    .html plot still works. (tests/test_lean_install.py installs it on first use.)"""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    monkeypatch.setenv("COORDINATOR_INSTALL_EXTRAS", "0")
    png = tmp_path / "story.png"
    code, out, err = run(
        capsys, "replay", "timeline", "--group", GROUP, "--file", str(dumps["binary"]), "--plot", str(png)
    )
    assert code == 1 and out == "" and not png.exists()
    assert err.count("\n") == 1 and "pip install 'worker-coordinator[plot]'" in err, err
    assert err.startswith("coordinator replay: error: a .png plot needs matplotlib"), err
    page = tmp_path / "story.html"
    code, _, _ = run(
        capsys, "replay", "timeline", "--group", GROUP, "--file", str(dumps["binary"]), "--plot", str(page)
    )
    assert code == 0 and page.read_text().startswith("<!DOCTYPE html>")


def _ends(picture: plot_layout.Layout, lane: str) -> set[str]:
    """How the ended holdings of `lane` ended, as their tooltips say ("to <time> (offset N): <how>")."""
    return {b.tooltip.splitlines()[2].split("): ", 1)[1] for b in picture.bars if b.lane == lane and not b.still_held}


def test_plot_tooltips_say_why_a_member_left(
    story: Story, dumps: dict[str, Path], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    why = "fenced: no heartbeat within its session timeout"  # W2 crashed (type 3 v1's reason)
    picture = plot_layout.layout(history_of(story.raw()), GROUP)
    assert why in _ends(picture, "W2") and "member left the group" not in _ends(picture, "W2")
    # Its work waiting out the delay, assigned to nobody (the waiting lane): since W2 was fenced.
    waiting = [
        b.tooltip for b in picture.bars if b.lane == plot_layout.WAITING and "from 2026-03-01 03:01:39.000" in b.tooltip
    ]
    assert len(waiting) == 3 and all(f"waiting for W2 ({why}) within" in t for t in waiting)
    # The rebalance its removal started: the band says why too.
    (band,) = [b for b in picture.bands if b.tooltip.startswith("rebalance 3:")]
    assert f"W2 {why}" in band.tooltip.splitlines()
    page = tmp_path / "story.html"
    assert (
        run(capsys, "replay", "timeline", "--group", GROUP, "--file", str(dumps["binary"]), "--plot", str(page))[0] == 0
    )
    assert f"(offset 43): {why}" in page.read_text()

    # A log whose epoch records say nothing of departures (type 3 v0): the holding's end as before.
    v0 = [
        Record(r.key, replace(r.value, departures=())) if r.key.__class__ is ConnectGroupMetadataKey and r.value else r
        for r in story.log
    ]
    picture = plot_layout.layout(history_of(raw_records(v0, story.driver.stamps)), GROUP)
    assert "member left the group" in _ends(picture, "W2") and why not in _ends(picture, "W2")


def test_plot_tooltips_of_a_static_member_away_say_how_its_wait_ended() -> None:
    d, w1, back = _static_instance_taken_over()  # W2's instance comes back as W2b: W2 is replaced
    back.leave(static=True)
    for _ in range(12):  # and does not come back again within its session
        d.advance(1_000)
        w1.heartbeat()
    h = history_of(raw_records(d.log, d.stamps), "g")
    texts = [ev.text(e) for e in h.events]
    assert "W2 replaced: a new member took its instance over" in texts
    assert "W2b removed: the session of static instance i-2 expired after it left" in texts
    assert (
        "group epoch 5: W2b left as a static member and its instance did not return within its session timeout"
    ) in texts
    picture = plot_layout.layout(h, "g")
    assert [(a.lane, a.ended) for a in picture.away] == [
        ("W2", "W2 replaced: a new member took its instance over"),
        ("W2b", "W2b removed: the session of static instance i-2 expired after it left"),
    ]
    assert _ends(picture, "W2") == {"replaced: a new member took its instance over"}
    assert _ends(picture, "W2b") == {leave_reason_text(LeaveReason.STATIC_LEAVE)}
    assert "kept its assignment until 2026-03-01 03:00:04.000: W2 replaced: a new member took its instance over" in (
        plot_svg.svg_element(picture)
    )


# --- positions ---------------------------------------------------------------------------------------


def test_times_and_points() -> None:
    assert parse_time("2026-03-01T03:00:00Z") == T0 == parse_time("2026-03-01 03:00") == parse_time(str(T0))
    assert parse_time("2026-03-01T04:00:00+01:00") == T0
    assert parse_point("1234") == Point(offset=1234)
    assert parse_point(str(T0)) == Point(time_ms=T0)
    assert parse_point("2026-03-01T03:00:00.5Z") == Point(time_ms=T0 + 500)
    with pytest.raises(ValueError):
        parse_time("yesterday")
    assert [format_duration(ms) for ms in (250, 12_500, 60_000, 250_000, 7_500_000)] == [
        "250 ms",
        "12.5 s",
        "1 min",
        "4 min 10 s",
        "2 h 05 min",
    ]
    assert format_time(T0 + 7) == "2026-03-01 03:00:00.007"


def test_progress_is_silent_for_short_reads_and_draws_on_a_terminal() -> None:
    from replay.progress import Progress

    quiet = io.StringIO()
    p = Progress("reading x", stream=quiet)
    p(50, 100)
    p.close()
    assert quiet.getvalue() == ""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    p = Progress("reading x", stream=tty)
    p.started -= 5
    p(50, 100)
    p.close()
    assert "reading x [###############...............]  50%" in tty.getvalue() and tty.getvalue().endswith("\r")


def test_the_timeline_tells_a_migration_both_ways() -> None:
    """Classic workers, a connect worker joins (upgrade), then leaves (downgrade): the timeline says
    when the group changed protocol and because of whom, and replays without a broken invariant."""
    from coordinator.core.worker.member import Lose
    from tests.support.migration import G, Mixed

    d = StampedDriver()
    d.set_connectors(G, {"A": 4, "B": 3})
    m = Mixed(d)
    for name in ("c1", "c2"):
        m.add_classic(name)
    m.run(3_000)
    generation = d.state.classic_groups[G].generation
    m.add_connect("n1")
    m.run(4_000)
    assert m.converged()
    m.connect.pop("n1").leave()
    m.run(5_000)
    assert m.converged() and not [a for w in m.classic.values() for a in w.log if isinstance(a, Lose)]
    checker = Invariants()
    history = history_of(raw_records(d.log, d.stamps), G, checker=checker)
    assert checker.violations == []
    texts = [ev.text(e) for e in history.events]
    assert f"group converted to connect at generation {generation} by n1's join" in texts
    assert any(t.startswith("c1-") and "joined on the classic protocol" in t for t in texts)
    converted_back = [t for t in texts if t.startswith("group converted to classic at generation")]
    assert converted_back and converted_back[0].endswith("2 classic member(s) join again")
    assert texts.index(converted_back[0]) > texts.index(
        f"group converted to connect at generation {generation} by n1's join"
    )
    # The Spark audit's events table is made of the same events: the conversions are rows of it.
    from spark.tables import event_rows

    rows = event_rows(history.events).to_pylist()
    converted = [r for r in rows if r["kind"] == "converted"]
    assert [orjson.loads(r["detail"])["to"] for r in converted] == ["connect", "classic"]
    assert converted[0]["member"] == "n1" and converted[0]["epoch"] == generation


def test_a_migration_keeps_each_workers_holding_whole_across_the_change_of_protocol() -> None:
    """Two Connect workers on the classic protocol (Connect's bytes, through JoinGroup and SyncGroup)
    run their work by Connect's rule over the type 2 record; a connect worker's join upgrades the
    group, moving that work to connect records, and its leave downgrades it back, in one batch
    each. A worker never stops running what it keeps: who-owned shows one holding, not one per
    protocol, verify finds nothing, and no rebalance counts the move as work changing hands."""
    from tests.support.classic import G, cat, migrated

    d = StampedDriver()
    c1, c2 = migrated(d)
    checker = Invariants()
    history = history_of(raw_records(d.log, d.stamps), G, checker=checker)
    assert checker.violations == []
    texts = [ev.text(e) for e in history.events]
    assert f"{c1} carries [A, A-0, A-1] over to the connect protocol" in texts
    assert f"{c1} carries [A, A-0, A-1] back to the classic protocol" in texts
    assert any(t.startswith(f"{c2} starts at epoch") and "as it did on the classic one" in t for t in texts)
    intervals = history.all_intervals()
    assert {(str(i.item), i.member_id, i.end) for i in intervals} == {
        *((str(x), c1, None) for x in items_of(cat("A", ("A", 0), ("A", 1)))),
        *((str(x), c2, None) for x in items_of(cat("B", ("B", 0)))),
    }
    assert all(a != b for r in history.all_rebalances() for _, a, b in r.moved)
    assert history.owners(G) == {item: i.member_id for i in intervals for item in [i.item]}
