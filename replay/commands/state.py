"""`coordinator replay state` and `coordinator replay diff`: a group at one point of its log, and
what changed between two points."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import msgspec

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.items import Item, items_of
from coordinator.core.protocol import GroupDescription
from coordinator.errors import CliError
from coordinator.tools.text import table
from replay import events as ev
from replay.commands.reading import Read, print_json, read_summary, report_corrupt, where
from replay.history import History, rebalance_json
from replay.positions import format_duration, format_time


def run_state(args: argparse.Namespace) -> int:
    read = Read(args, args.group)
    history = History(args.group, strict=args.strict, keep_events=False, intervals=False)
    history.run(read, until=args.at)
    report_corrupt(history, args)
    description = GroupCoordinator(history.state).describe_group(args.group)
    point = f"at {args.at}" if args.at is not None else "at the end of the read"
    if description is None:
        raise CliError(f"group {args.group} does not exist {point} ({read_summary(history, read)})")
    if args.format == "json":
        print_json(
            {
                "type": "state",
                "group": args.group,
                "offset": history.last.offset,
                "timestamp_ms": history.last.timestamp_ms,
                "description": msgspec.to_builtins(description),
            }
        )
        return 0
    print(f"group {args.group} {point}: after the record at {where(history.last)}")
    _print_description(description, history)
    return 0


def _print_description(d: GroupDescription, history: History) -> None:
    if d.group_type == "classic":
        _print_classic_description(d)
        return
    print(
        f"group epoch {d.group_epoch}, assignment epoch {d.assignment_epoch}, {d.state}"
        + (f", assignor {d.assignor} ({d.assignor_kind}-side)" if d.assignor else "")
    )
    print("connectors: " + (", ".join(f"{c.name} ({c.tasks} tasks)" for c in d.connectors) or "none"))
    group = history.group()
    config = group.config if group is not None else None
    if config is not None:
        print(
            "timeouts: "
            + ", ".join(
                f"{name} {format_duration(value) if value is not None else 'server default'}"
                for name, value in (
                    ("session", config.session_timeout_ms),
                    ("heartbeat", config.heartbeat_interval_ms),
                    ("rebalance", config.rebalance_timeout_ms),
                    ("scheduled rebalance max delay", config.scheduled_rebalance_max_delay_ms),
                    ("initial assignment delay", config.initial_assignment_delay_ms),
                )
            )
        )
    if d.deferred.connectors or d.deferred.tasks:
        at = d.scheduled_rebalance_at_ms
        print(f"deferred: {ev.show(items_of(d.deferred))}" + (f" until {format_time(at)}" if at is not None else ""))
    if d.assignment_error:
        print(f"assignment error {d.assignment_error}: {d.assignment_error_message}")
    print()
    rows = [
        [
            m.member_id,
            m.instance_id,
            m.member_epoch,
            m.state,
            ev.show(items_of(m.assignment)),
            ev.show(items_of(m.pending_revocation))
            if m.pending_revocation.connectors or m.pending_revocation.tasks
            else "-",
            ev.show(items_of(m.target)),
        ]
        for m in d.members
    ]
    print(table(rows, ["MEMBER", "INSTANCE", "EPOCH", "STATE", "OWNS", "REVOKING", "TARGET"]) if rows else "no members")


def _print_classic_description(d: GroupDescription) -> None:
    """A classic group: its generation, and who each worker is and what it runs by Kafka Connect's
    rule over its bytes (coordinator.core.classic.holdings)."""
    print(f"classic group, generation {d.generation}, {d.state}, protocol {d.protocol_name}, leader {d.leader or '-'}")
    print("connectors: " + (", ".join(f"{c.name} ({c.tasks} tasks)" for c in d.connectors) or "none"))
    print()
    rows = [
        [m.member_id, m.instance_id, m.url, getattr(m, "config_offset", None), m.state, ev.show(items_of(m.assignment))]
        for m in d.members
    ]
    print(table(rows, ["MEMBER", "INSTANCE", "URL", "CONFIG-OFFSET", "STATE", "RUNS"]) if rows else "no members")
    for m in d.members:
        if getattr(m, "note", None):
            print(f"{m.member_id}: {m.note}")


# --- diff --------------------------------------------------------------------------------------------


def run_diff(args: argparse.Namespace) -> int:
    a, b = args.from_point, args.to_point
    if b is not None and (
        (a.offset is not None and b.offset is not None and a.offset > b.offset)
        or (a.time_ms is not None and b.time_ms is not None and a.time_ms > b.time_ms)
    ):
        raise CliError("--from is after --to", exit_code=2)
    read = Read(args, args.group)
    history = History(args.group, strict=args.strict, intervals=False)
    records = iter(read)
    pending = history.run(records, until=args.from_point)
    start = _Snapshot(history, args.group)
    events_before = len(history.events)
    rebalances_before = len(history.rebalances)
    if pending is not None:
        records = itertools.chain([pending], records)
    history.run(records, until=args.to_point)
    end = _Snapshot(history, args.group)
    report_corrupt(history, args)
    changes = _changes(start, end)
    events = len(history.events) - events_before
    rebalances = history.rebalances[rebalances_before:]
    if args.format == "json":
        print_json(
            {
                "type": "diff",
                "group": args.group,
                "from": start.json(),
                "to": end.json(),
                "events": events,
                "rebalances": [rebalance_json(r) for r in rebalances],
                **changes,
            }
        )
        return 0
    print(
        f"group {args.group} from {where(start.at)} to {where(end.at)}: {events} events, "
        f"{len(rebalances)} rebalances converged"
    )
    for label, (a, b) in changes["epochs"].items():
        print(f"{label}: {a} -> {b}" if a != b else f"{label}: {a} (unchanged)")
    if changes["connectors"]:
        print("connectors: " + "; ".join(changes["connectors"]))
    joined, left = changes["members_joined"], changes["members_left"]
    print(f"members joined: {', '.join(joined) or 'none'}; left: {', '.join(left) or 'none'}")
    rows = []
    for m in changes["members"]:
        rows.append(
            [
                m["member"],
                f"{_dash(m['epoch'][0])} -> {_dash(m['epoch'][1])}",
                _plus_minus(m["owns_gained"], m["owns_lost"]),
                _plus_minus(m["target_gained"], m["target_lost"]),
            ]
        )
    if rows:
        print()
        print(table(rows, ["MEMBER", "EPOCH", "OWNS", "TARGET"]))
    if changes["moved"]:
        print()
        print(
            table(
                [[m["item"], m["from"] or "(none)", m["to"] or "(none)"] for m in changes["moved"]],
                ["ITEM", "HELD BY THEN", "HELD BY NOW"],
            )
        )
    return 0


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _plus_minus(gained: list[str], lost: list[str]) -> str:
    parts = ([f"+[{', '.join(gained)}]"] if gained else []) + ([f"-[{', '.join(lost)}]"] if lost else [])
    return " ".join(parts) or "same"


class _Snapshot:
    """A group at one point: its description and who held what."""

    def __init__(self, history: History, group_id: str) -> None:
        self.at = history.last
        self.description = GroupCoordinator(history.state).describe_group(group_id)
        self.owners = history.owners(group_id)

    def json(self) -> dict[str, Any]:
        return {
            "offset": self.at.offset if self.at else None,
            "timestamp_ms": self.at.timestamp_ms if self.at else None,
            "group_epoch": self.description.group_epoch if self.description else None,
        }


def _changes(a: _Snapshot, b: _Snapshot) -> dict[str, Any]:
    da, db = a.description, b.description
    epochs = {
        "group epoch": (da.group_epoch if da else None, db.group_epoch if db else None),
        "assignment epoch": (da.assignment_epoch if da else None, db.assignment_epoch if db else None),
        "state": (da.state if da else "absent", db.state if db else "absent"),
    }
    ca = {c.name: c.tasks for c in da.connectors} if da else {}
    cb = {c.name: c.tasks for c in db.connectors} if db else {}
    connectors = [f"added {n} ({t} tasks)" for n, t in sorted(cb.items()) if n not in ca]
    connectors += [f"removed {n}" for n in sorted(ca) if n not in cb]
    connectors += [f"{n} {ca[n]} -> {t} tasks" for n, t in sorted(cb.items()) if n in ca and ca[n] != t]
    ma = {m.member_id: m for m in da.members} if da else {}
    mb = {m.member_id: m for m in db.members} if db else {}
    members = []
    for member_id in sorted(ma.keys() | mb.keys()):
        x, y = ma.get(member_id), mb.get(member_id)
        owns_x = _held(x)
        owns_y = _held(y)
        target_x = items_of(x.target) if x else frozenset()
        target_y = items_of(y.target) if y else frozenset()
        epoch = (x.member_epoch if x else None, y.member_epoch if y else None)
        if epoch[0] == epoch[1] and owns_x == owns_y and target_x == target_y:
            continue
        members.append(
            {
                "member": member_id,
                "epoch": list(epoch),
                "owns_gained": ev.item_names(owns_y - owns_x),
                "owns_lost": ev.item_names(owns_x - owns_y),
                "target_gained": ev.item_names(target_y - target_x),
                "target_lost": ev.item_names(target_x - target_y),
            }
        )
    moved = [
        {"item": str(item), "from": a.owners.get(item), "to": b.owners.get(item)}
        for item in sorted(a.owners.keys() | b.owners.keys(), key=ev.item_order)
        if a.owners.get(item) != b.owners.get(item)
    ]
    return {
        "epochs": epochs,
        "connectors": connectors,
        "members_joined": sorted(mb.keys() - ma.keys()),
        "members_left": sorted(ma.keys() - mb.keys()),
        "members": members,
        "moved": moved,
    }


def _held(m: Any) -> frozenset[Item]:
    return items_of(m.assignment) | items_of(m.pending_revocation) if m is not None else frozenset()
