"""Who runs what in a classic group (issue 27, item 3): one rule over Kafka Connect's own bytes
(`coordinator.core.classic.holdings`), and every view that shows it: describe, the admin CLI's table,
`coordinator replay timeline|who-owned|verify`. The group page and the Spark audit have their
classic cases beside their other tests (test_pages.py, test_spark_audit.py), built from `classic_log`.

Classic groups are built two ways, both with real Connect bytes (`encode_metadata`,
`encode_assignment`): type 2 records written by hand (what the coordinator writes: the generation
when the join phase completes, the assignments when the leader syncs, departures), and requests
sent through the in-memory driver. No broker.
"""

from __future__ import annotations

import orjson
import pytest

from records import (
    Record,
)

from coordinator import cli
from coordinator.core.classic.holdings import classic_member_holdings
from coordinator.core.driver import Driver
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.items import items_of
from coordinator.core.protocol import (
    JoinGroupResponse,
    Parked,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from replay import events as ev
from replay.history import History
from replay.invariants import HELD_TWICE, Invariants
from replay.source import dump_header, write_dump
from tests.support.classic import (
    LEADER,
    T0,
    G,
    assignment,
    cat,
    classic,
    classic_join,
    classic_log,
    classic_new,
    member,
    metadata,
    migrated,
    raw,
    replayed_state,
    url,
)

# --- Connect's bytes, and classic records made of them ---------------------------------------------


def eager_log(group: str = G) -> list[Record]:
    """The same story on `default` (v0, eager): every worker stops everything to join, and the
    leader gives each its whole assignment."""
    p = "default"
    m = lambda mid: metadata(mid, p)  # noqa: E731
    a = lambda *items: assignment(p, cat(*items))  # noqa: E731
    return [
        classic(1, "CompletingRebalance", p, member("W1", m("W1")), member("W2", m("W2")), group=group),
        classic(
            1,
            "Stable",
            p,
            member("W1", m("W1"), a("A", ("A", 0))),
            member("W2", m("W2"), a(("A", 1), ("A", 2))),
            group=group,
        ),
        classic(
            2,
            "CompletingRebalance",
            p,
            member("W1", m("W1")),
            member("W2", m("W2")),
            member("W3", m("W3")),
            group=group,
        ),
        classic(
            2,
            "Stable",
            p,
            member("W1", m("W1"), a("A", ("A", 0))),
            member("W2", m("W2"), a(("A", 1))),
            member("W3", m("W3"), a(("A", 2))),
            group=group,
        ),
    ]


def history_of(log: list[Record], group: str | None = G, **options) -> History:  # noqa: ANN003
    h = History(group, **options)
    h.run(raw(log))
    return h


def runs_at(log: list[Record], n: int) -> dict[str, frozenset]:
    """Who runs what after record `n`, by the rule, straight from that record."""
    value = log[n].value
    return {
        x.member_id: items_of(classic_member_holdings(value.protocol, x.subscription, x.assignment).runs)
        for x in value.members
    }


def items(*names: str | tuple[str, int]) -> frozenset:
    return items_of(cat(*names))


# --- the rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["compatible", "sessioned"])
def test_a_cooperative_worker_runs_what_it_reported_minus_revoked_plus_assigned(protocol: str) -> None:
    owned = cat("A", ("A", 0), ("A", 1))
    sub = metadata("W1", protocol, owned, offset=40)
    # Joined, the leader has not synced: what it said it runs.
    held = classic_member_holdings(protocol, sub, b"")
    assert (items_of(held.runs), held.url, held.config_offset, held.note, held.synced) == (
        items_of(owned),
        url("W1"),
        40,
        None,
        False,
    )
    # Synced: Assigned is a delta, after Revoked is stopped.
    held = classic_member_holdings(protocol, sub, assignment(protocol, cat(("B", 0)), cat(("A", 1))))
    assert items_of(held.runs) == items("A", ("A", 0), ("B", 0)) and held.synced
    assert items_of(held.assigned) == items(("B", 0)) and items_of(held.revoked) == items(("A", 1))
    assert held.leader == LEADER and held.error == 0
    # A worker never assigned before runs nothing until it is given something.
    assert items_of(classic_member_holdings(protocol, metadata("W3", protocol), b"").runs) == frozenset()
    assert items_of(
        classic_member_holdings(protocol, metadata("W3", protocol), assignment(protocol, cat("B"))).runs
    ) == items("B")


def test_an_eager_worker_runs_its_whole_assignment_and_nothing_once_it_joins_again() -> None:
    sub = metadata("W1", "default", offset=7)
    held = classic_member_holdings("default", sub, b"")
    assert (items_of(held.runs), held.url, held.config_offset, held.note) == (frozenset(), url("W1"), 7, None)
    held = classic_member_holdings("default", sub, assignment("default", cat("A", ("A", 0))))
    assert items_of(held.runs) == items("A", ("A", 0)) and held.synced


def test_bytes_that_are_not_connects_are_a_note_never_a_failure() -> None:
    good = metadata("W1", "sessioned", cat("A"))
    for protocol, sub, given, says in [
        ("sessioned", b"\x00\x02junk", b"", "JoinGroup metadata cannot be read"),
        ("sessioned", b"", b"", "JoinGroup metadata cannot be read"),
        ("sessioned", good, b"\x00\x02\x00", "assignment cannot be read"),
        ("range", good, b"", "not one of Kafka Connect's"),
        (None, good, b"", "no protocol chosen yet"),
    ]:
        held = classic_member_holdings(protocol, sub, given)
        assert items_of(held.runs) == frozenset() and says in held.note, (protocol, held)
    # An unreadable assignment still tells who the worker is.
    held = classic_member_holdings("sessioned", good, b"\x00\x02\x00")
    assert (held.url, held.config_offset) == (url("W1"), 12)


# --- describe ------------------------------------------------------------------------------------------


def test_describe_shows_each_classic_members_url_config_offset_and_what_it_runs() -> None:
    log = classic_log()
    for n in range(len(log)):
        described = GroupCoordinator(replayed_state(log[: n + 1])).describe_group(G)
        want = runs_at(log, n)
        assert {m.member_id: items_of(m.assignment) for m in described.members} == want, n
        for m in described.members:
            assert m.protocol == "classic"
            assert (m.url, m.config_offset, m.note) == (url(m.member_id), 12, None)
            assert items_of(m.target) == want[m.member_id] and not items_of(m.pending_revocation)
    assert described.group_type == "classic" and described.generation == 3
    assert described.state == "PREPARING_REBALANCE"


def test_describe_notes_a_member_whose_bytes_are_not_connects() -> None:
    log = [
        classic(
            4,
            "Stable",
            "sessioned",
            member("W1", metadata("W1", "sessioned", cat("A")), assignment("sessioned", cat(("A", 0)))),
            member("X9", b"\x00\x02\xff", b"\x01"),
        )
    ]
    described = GroupCoordinator(replayed_state(log)).describe_group(G)
    w1, x9 = described.members
    assert items_of(w1.assignment) == items("A", ("A", 0)) and w1.note is None
    assert items_of(x9.assignment) == frozenset() and x9.url is None and x9.config_offset is None
    assert "cannot be read" in x9.note
    # The Connect-style status of the connector agrees: A runs on W1.
    from coordinator.core.views import connector_status

    status = connector_status(replayed_state(log), GroupCoordinator().config, G, "A")
    assert status.connector.member_id == "W1" and dict(status.tasks)[0].member_id == "W1"


@pytest.mark.parametrize("protocol", ["default", "sessioned"])
def test_describe_of_a_live_classic_group_driven_through_join_and_sync(protocol: str) -> None:
    """Requests as a Connect worker sends them: describe answers from the live group, and a member
    that has joined the round in progress runs what its fresh metadata says (an eager one nothing)."""
    d = Driver()
    a, joined = classic_new(d, "A", metadata("WA", protocol), protocol)
    assert isinstance(joined, JoinGroupResponse) and joined.leader == a
    given = {a: assignment(protocol, cat("C", ("C", 0), ("C", 1)))}
    d.sync_group(
        SyncGroupRequest(
            G, a, joined.generation_id, assignments=tuple(SyncGroupAssignment(m, x) for m, x in given.items())
        )
    )
    (m,) = d.coordinator.describe_group(G).members
    assert (m.url, m.config_offset, items_of(m.assignment)) == (url("WA"), 12, items("C", ("C", 0), ("C", 1)))
    # A second worker joins: the group prepares a rebalance; A has not joined again yet.
    b, parked = classic_new(d, "B", metadata("WB", protocol), protocol)
    assert isinstance(parked, Parked)
    shown = {x.member_id: items_of(x.assignment) for x in d.coordinator.describe_group(G).members}
    assert shown == {a: items("C", ("C", 0), ("C", 1)), b: frozenset()}
    # A joins again, saying what it runs (v2), or having stopped everything (v0).
    owned = cat("C", ("C", 0), ("C", 1))
    rejoined = classic_join(d, a, metadata("WA", protocol, owned if protocol != "default" else None), protocol)
    assert rejoined.generation_id == joined.generation_id + 1
    shown = {x.member_id: items_of(x.assignment) for x in d.coordinator.describe_group(G).members}
    assert shown[a] == (frozenset() if protocol == "default" else items_of(owned))
    # The record the join wrote says the same to a coordinator replaying it.
    replayed = {
        x.member_id: items_of(x.assignment) for x in GroupCoordinator(replayed_state(d.log)).describe_group(G).members
    }
    assert replayed == shown


def test_describe_shows_a_translated_classic_members_url_and_config_offset(capsys: pytest.CaptureFixture) -> None:
    from tests.support.admin import serving

    d = Driver()
    c1, c2 = migrated(d, downgrade=False)
    by = {m.member_id: m for m in d.coordinator.describe_group(G).members}
    for member_id, name in ((c1, "C1"), (c2, "C2")):
        m = by[member_id]
        assert m.protocol == "classic"
        assert (m.url, m.config_offset, m.note) == (url(name), 12, None)
    assert items_of(by[c1].assignment) == items("A", ("A", 0), ("A", 1))
    assert by["n1"].protocol == "connect" and by["n1"].config_offset is None and by["n1"].note is None
    with serving(d.coordinator) as base:
        assert cli.main(["groups", "describe", G, "--url", base]) == 0
        out = capsys.readouterr().out
    table = out[out.index("MEMBER") :].splitlines()
    assert table[0].split() == [
        "MEMBER",
        "INSTANCE",
        "PROTOCOL",
        "URL",
        "EPOCH",
        "STATE",
        "ASSIGNED",
        "REVOKING",
        "TARGET",
    ]
    rows = {line.split()[0]: line.split() for line in table[1:4]}
    assert rows[c1][2:4] == ["classic", url("C1")] and rows["n1"][2:4] == ["connect", "-"]


# --- the admin CLI --------------------------------------------------------------------------------------


def test_groups_describe_prints_a_classic_members_url_config_offset_and_work(capsys: pytest.CaptureFixture) -> None:
    from tests.support.admin import serving

    log = [
        *classic_log()[:6],
        classic(4, "Stable", "sessioned", *classic_log()[5].value.members, member("X9", b"\x00\x02junk", b"")),
    ]
    coordinator = GroupCoordinator(replayed_state(log))
    with serving(coordinator) as base:
        assert cli.main(["groups", "describe", G, "--url", base]) == 0
        out = capsys.readouterr().out
        assert cli.main(["groups", "describe", G, "--url", base, "--format", "json"]) == 0
        described = orjson.loads(capsys.readouterr().out)
    assert out.splitlines()[0] == f"group {G} (classic): STABLE, generation 4, protocol sessioned, leader W1"
    table = out[out.index("MEMBER") :].splitlines()
    assert table[0].split() == ["MEMBER", "INSTANCE", "URL", "CONFIG-OFFSET", "STATE", "ASSIGNED"]
    assert [line.split() for line in table[1:5]] == [
        ["W1", "-", url("W1"), "12", "STABLE", "A,A-0"],
        ["W2", "-", url("W2"), "12", "STABLE", "A-1"],
        ["W3", "-", url("W3"), "12", "STABLE", "A-2"],
        ["X9", "-", "-", "-", "STABLE", "-"],
    ]
    assert any(line.startswith("X9: its JoinGroup metadata cannot be read") for line in table)
    assert [(m["MemberId"], m["Url"], m["ConfigOffset"], m["Assignment"]["Tasks"]) for m in described["Members"]] == [
        ("W1", url("W1"), 12, [{"Connector": "A", "Task": 0}]),
        ("W2", url("W2"), 12, [{"Connector": "A", "Task": 1}]),
        ("W3", url("W3"), 12, [{"Connector": "A", "Task": 2}]),
        ("X9", None, None, []),
    ]


# --- replay: timeline, who-owned, verify ------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["compatible", "sessioned"])
def test_replay_holds_what_the_rule_says_after_every_record(protocol: str) -> None:
    log = classic_log(protocol)
    h = History(G)
    for n, record in enumerate(raw(log)):
        h.apply_record(record)
        held: dict[str, set] = {}
        for item, member_id in h.owners().items():
            held.setdefault(member_id, set()).add(item)
        want = {m: s for m, s in runs_at(log, n).items() if s}
        assert {m: frozenset(s) for m, s in held.items()} == want, n


def test_replay_of_an_eager_group_stops_everything_at_each_join() -> None:
    log = eager_log()
    h = history_of(log)
    texts = [(e.at.offset, ev.text(e)) for e in h.events if e.member_id == "W1"]
    assert (2, "W1 stopped [A, A-0] and joined generation 2, runs []") in texts
    assert (3, "W1 was assigned [A, A-0] at generation 2 (leader W1), runs [A, A-0]") in texts
    ended = [(str(i.item), i.member_id, i.end.offset, i.ended_by) for i in h.all_intervals() if i.end is not None]
    assert ("A-0", "W1", 2, "stopped to join generation 2") in ended
    assert {m: frozenset(s) for m, s in _holders(h).items()} == {
        "W1": items("A", ("A", 0)),
        "W2": items(("A", 1)),
        "W3": items(("A", 2)),
    }


def _holders(h: History) -> dict[str, set]:
    held: dict[str, set] = {}
    for item, member_id in h.owners().items():
        held.setdefault(member_id, set()).add(item)
    return held


def test_the_timeline_tells_who_ran_what_in_a_classic_group(tmp_path, capsys: pytest.CaptureFixture) -> None:  # noqa: ANN001
    dump = tmp_path / "classic.jsonl"
    with dump.open("wb") as out:
        write_dump(out, raw(classic_log()), "jsonl", dump_header("test", "__worker_offsets", [0]))
    assert cli.main(["replay", "timeline", "--group", G, "--file", str(dump), "--no-progress"]) == 0
    out = capsys.readouterr().out
    for line in [
        f"W1 joined the classic group at generation 1 (url {url('W1')}, config offset 12), runs []",
        "W1 was assigned [A, A-0] at generation 1 (leader W1), runs [A, A-0]",
        "W2 joined generation 2, runs [A-1, A-2]",
        "W2 revoked [A-2] at generation 2 (leader W1), runs [A-1]",
        "W3 was assigned [A-2] at generation 3 (leader W1), runs [A-2]",
        "W2 left the classic group, no longer runs [A-1]",
        "┌ rebalance 2: W3 joined",
        "└ converged at generation 2 after 1 s: 1 revoked; moved A-2 W2 -> (none)",
        "└ converged at generation 3 after 1 s: 1 assigned; moved A-2 (none) -> W3",
        "┌ rebalance 4: W2 left",
        "└ not converged where the read ended (generation 3); so far moved A-1 W2 -> (none)",
    ]:
        assert line in out, line
    # JSON: the same events, each member's work in `gained`/`released` and its identity in `detail`.
    assert cli.main(["replay", "timeline", "--group", G, "--file", str(dump), "--no-progress", "--format", "json"]) == 0
    lines = [orjson.loads(x) for x in capsys.readouterr().out.splitlines()]
    revoked = next(
        x for x in lines if x["type"] == "event" and x["kind"] == ev.CLASSIC_MEMBER and x["released"] == ["A-2"]
    )
    assert revoked["member"] == "W2" and revoked["epoch"] == 2 and revoked["detail"]["revoked"] == ["A-2"]
    assert revoked["detail"]["runs"] == ["A-1"] and revoked["detail"]["url"] == url("W2")
    assert [x["number"] for x in lines if x["type"] == "rebalance"] == [1, 2, 3, 4]


def test_who_owned_a_task_of_a_classic_group(tmp_path, capsys: pytest.CaptureFixture) -> None:  # noqa: ANN001
    dump = tmp_path / "classic.bin"
    with dump.open("wb") as out:
        write_dump(out, raw(classic_log()), "binary", dump_header("test", "__worker_offsets", [0]))
    assert cli.main(["replay", "who-owned", "A-2", "--file", str(dump), "--no-progress", "--format", "json"]) == 0
    rows = [orjson.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["member"], r["from_offset"], r["to_offset"], r["given_at_epoch"], r["ended_by"]) for r in rows] == [
        ("W2", 1, 3, 1, "revoked (generation 2)"),
        ("W3", 5, None, 3, None),
    ]
    assert (
        cli.main(
            ["replay", "who-owned", "A-1", "--group", G, "--file", str(dump), "--no-progress", "--at", str(T0 + 4_500)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "W2" in out and "member left the classic group" in out


def test_verify_flags_a_task_two_classic_members_run(tmp_path, capsys: pytest.CaptureFixture) -> None:  # noqa: ANN001
    good = classic_log()
    checker = Invariants()
    history_of(good, checker=checker)
    assert checker.violations == []
    # Generation 4 joined: W3 says it runs A-0 too (a zombie task), while W1 still does.
    bad = [
        *good,
        classic(
            4,
            "CompletingRebalance",
            "sessioned",
            member("W1", metadata("W1", "sessioned", cat("A", ("A", 0))), b""),
            member("W3", metadata("W3", "sessioned", cat(("A", 0), ("A", 2))), b""),
        ),
    ]
    checker = Invariants()
    history_of(bad, checker=checker)
    (v,) = checker.violations
    assert (v.rule, v.offsets) == (HELD_TWICE, (1, 7)) and "A-0 given to W3 while W1 holds it" in v.message
    dump = tmp_path / "bad.jsonl"
    with dump.open("wb") as out:
        write_dump(out, raw(bad), "jsonl", dump_header("test", "__worker_offsets", [0]))
    assert cli.main(["replay", "verify", "--file", str(dump), "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "[held-twice] A-0 given to W3 while W1 holds it" in captured.out and "0:1, 0:7" in captured.err
    # A generation that goes back is flagged too.
    back = [*good, classic(2, "CompletingRebalance", "sessioned", member("W1", metadata("W1", "sessioned")))]
    checker = Invariants()
    history_of(back, checker=checker)
    assert [v.rule for v in checker.violations] == ["epoch-went-back"]


def test_a_member_whose_bytes_cannot_be_read_holds_nothing_in_replay() -> None:
    log = [
        classic(
            1,
            "Stable",
            "sessioned",
            member("W1", metadata("W1", "sessioned"), assignment("sessioned", cat("A"))),
            member("X9", b"junk", b"junk"),
        )
    ]
    h = history_of(log)
    assert h.owners() == {"A": "W1"}
    joined = next(e for e in h.events if e.member_id == "X9")
    assert joined.kind == ev.CLASSIC_MEMBER_JOINED and "cannot be read" in ev.text(joined)
