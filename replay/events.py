"""The events of a group's history: their kinds, in the protocol's words, and as JSON (DESIGN §9).

An `Event` is one thing that happened to a group, at the record that wrote it; `replay.derive`
derives them from the state before and after each record (one function per record type; the
classic group's in `replay.derive_classic`). This module says what each kind of event is (the
table below, and `text`, one function per kind) and how an event is written for scripts
(`event_json`):

    kind                    what happened
    ----------------------  --------------------------------------------------------------------
    group-epoch             the group epoch moved, and why (the changes written since the last
                            epoch record)
    group-deleted           the group was deleted
    connectors              connectors added, removed, resized
    configuration           the group's timeouts
    member-joined           a member joined (maybe taking over a static instance)
    member-updated          a member changed what it told the coordinator
    member-left             a member left, or was removed (why: the epoch record's reason)
    target-installed        a target assignment installed (who computed it, with which assignor,
                            what is deferred and until when)
    target-failed           an assignor error
    target-updated          departed work recorded
    revoking                a member asked to revoke
    member-epoch            a member moving to a new member epoch: what it gave up, what it was
                            given, what it waits for
    static-leave            a static member leaving for a while
    released                a member's hold on its work ending as it is removed
    classic-group           the classic group's generation, state and members
    classic-member-joined,  a member of a classic group joined, left, joined a new generation,
    classic-member-left,    was assigned or revoked work (what it runs by Kafka Connect's rule
    classic-member          over its bytes)
    converted               the group changed protocol (seed 000's migration)

Every event carries what it changed in *ownership*: `gained` and `released` are the items a
member started or stopped holding (owning, or still revoking: `coordinator.core.state.held_items`;
a classic member: what it runs). Ownership intervals, "what moved" in a rebalance and the
no-double-ownership check are all built from those two sets, so they agree with each other and
with the state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.items import Item, describe, item_order
from coordinator.core.protocol import leave_reason_text
from replay.positions import Position, format_clock, format_duration

# --- the events ------------------------------------------------------------------------------------

GROUP_EPOCH = "group-epoch"
GROUP_DELETED = "group-deleted"
CONNECTORS = "connectors"
CONFIGURATION = "configuration"
MEMBER_JOINED = "member-joined"
MEMBER_UPDATED = "member-updated"
MEMBER_LEFT = "member-left"
TARGET_INSTALLED = "target-installed"
TARGET_FAILED = "target-failed"
TARGET_UPDATED = "target-updated"
REVOKING = "revoking"
MEMBER_EPOCH = "member-epoch"
STATIC_LEAVE = "static-leave"
RELEASED = "released"
CLASSIC_GROUP = "classic-group"
# A member of a classic group (type 2), what it runs by Kafka Connect's rule over its bytes.
CLASSIC_MEMBER_JOINED = "classic-member-joined"
CLASSIC_MEMBER_LEFT = "classic-member-left"
CLASSIC_MEMBER = "classic-member"  # joined a new generation, was assigned or revoked work, or its note changed
CONVERTED = "converted"  # the group changed protocol (seed 000's migration)

NOTHING: frozenset[Item] = frozenset()


@dataclass(slots=True)
class Event:
    """One thing that happened to a group, at the record that wrote it.

    `epoch` is the epoch the event is about: the group epoch (group-epoch), the assignment epoch
    (target-*), or the member epoch (member events); `previous_epoch` what it was before (None:
    the slot was empty). `detail` holds the rest, as JSON-ready values where it can."""

    at: Position
    group_id: str
    kind: str
    member_id: str | None = None
    epoch: int | None = None
    previous_epoch: int | None = None
    gained: frozenset[Item] = NOTHING
    released: frozenset[Item] = NOTHING
    detail: dict[str, Any] = field(default_factory=dict)


# --- in words --------------------------------------------------------------------------------------

_SHOWN_ITEMS = 12


def show(items: Iterable[Item]) -> str:
    """`[A, A-0, B]`; long lists are cut: `[A, A-0, ... +250 more]`."""
    items = list(items)
    if len(items) <= _SHOWN_ITEMS:
        return f"[{describe(items) if items else ''}]"
    ordered = item_names(items)
    return f"[{', '.join(ordered[:_SHOWN_ITEMS])}, ... +{len(ordered) - _SHOWN_ITEMS} more]"


def _ms(value: int | None) -> str:
    return "default" if value is None else format_duration(value)


def text(event: Event) -> str:
    """The event in the protocol's words, for people."""
    return _TEXT[event.kind](event, event.detail)


def _text_group_epoch(e: Event, d: dict) -> str:
    why = ", ".join(d["causes"]) or "cause not recorded"
    return f"group epoch {e.epoch}: {why}"


def _text_connectors(e: Event, d: dict) -> str:
    if d["first"]:
        return "connectors set: " + (
            ", ".join(f"{n} ({_tasks(t)})" for n, t in sorted(d["connectors"].items())) or "none"
        )
    parts = [f"added {n} ({_tasks(t)})" for n, t in sorted(d["added"].items())]
    parts += [f"removed {n}" for n in d["removed"]]
    parts += [f"{n} {old} -> {new} tasks" for n, (old, new) in sorted(d["resized"].items())]
    return "connectors changed: " + ("; ".join(parts) or "same set rewritten")


def _tasks(n: int) -> str:
    return "1 task" if n == 1 else f"{n} tasks"


def _text_configuration(e: Event, d: dict) -> str:
    if not d:
        return "configuration removed"
    return (
        f"configuration: session timeout {_ms(d['session_timeout_ms'])}, heartbeat interval "
        f"{_ms(d['heartbeat_interval_ms'])}, rebalance timeout {_ms(d['rebalance_timeout_ms'])}, "
        f"scheduled rebalance max delay {_ms(d['scheduled_rebalance_max_delay_ms'])}, initial assignment delay "
        f"{_ms(d.get('initial_assignment_delay_ms'))}"
    )


def _text_joined(e: Event, d: dict) -> str:
    out = f"{e.member_id} joined" + (" on the classic protocol" if d.get("protocol") == "classic" else "")
    if d["instance_id"]:
        out += f" as instance {d['instance_id']}"
    if d["took_over"]:
        out += f", taking over from {d['took_over']}"
    return out + f" (assignors: {d['assignors']})"


def _text_updated(e: Event, d: dict) -> str:
    changes = ", ".join(f"{name} {old} -> {new}" for name, (old, new) in d["changed"].items())
    return f"{e.member_id} changed its metadata: {changes}"


def _text_left(e: Event, d: dict) -> str:
    if d["static_session_expired"]:
        return f"{e.member_id} removed: the session of static instance {d['instance_id']} expired after it left"
    reason = d.get("reason")
    out = f"{e.member_id} {leave_reason_text(reason) if reason else 'left the group'}"
    if d.get("while_revoking"):
        out += f" while still revoking {show(d['while_revoking'])}"
    return out


def _text_installed(e: Event, d: dict) -> str:
    by = f"by {d['installed_by']}" if d["installed_by"] else "by the coordinator"
    targets = d["targets"]
    changed = [f"{m}={show(targets[m])}" for m in d["changed"]]
    unchanged = sorted(m for m in targets if m not in d["changed"])
    out = f"target {e.epoch} installed {by} with {d['assignor'] or 'no assignor'}: " + ", ".join(changed)
    if unchanged:
        out += ("; " if changed else "") + f"unchanged for {', '.join(unchanged)}"
    elif not changed:
        out += "no member"
    if d["deferred"]:
        at = d["scheduled_rebalance_at_ms"]
        out += f"; deferred {show(d['deferred'])}" + (f" until {format_clock(at)}" if at is not None else "")
    elif d["scheduled_rebalance_at_ms"] is not None:
        out += f"; next rebalance at {format_clock(d['scheduled_rebalance_at_ms'])}"
    return out


def _text_failed(e: Event, d: dict) -> str:
    by = f" from {d['installed_by']}" if d["installed_by"] else ""
    return (
        f"target {e.epoch}: assignor {d['assignor']}{by} failed with error {d['error']}"
        f"{': ' + d['error_message'] if d['error_message'] else ''}; members keep their targets"
    )


def _text_target_updated(e: Event, d: dict) -> str:
    return "; ".join(
        f"{m} departed with target {show(items)} (recorded for its return)"
        for m, items in sorted(d["departed"].items())
    )


def _text_revoking(e: Event, d: dict) -> str:
    return (
        f"{e.member_id} asked to revoke {show(d['revoking'])} for target {d['target_epoch']}, keeps {show(d['kept'])}"
    )


def _text_member_epoch(e: Event, d: dict) -> str:
    parts = []
    if e.released:
        parts.append(f"{'revoked' if d['revoked'] else 'released'} {show(e.released)}")
    if e.epoch != e.previous_epoch:
        parts.append(f"moved to epoch {e.epoch}")
    if e.gained:
        parts.append(f"was assigned {show(e.gained)}")
    if e.previous_epoch is None:  # a new member's first current assignment
        parts[parts.index(f"moved to epoch {e.epoch}")] = f"starts at epoch {e.epoch}"
    if d.get("takeover"):
        parts = [
            (
                f"starts at epoch {e.epoch} on the connect protocol, running {show(e.gained)} as it did on the "
                "classic one"
            )
        ]
    out = f"{e.member_id} " + (" and ".join(parts) or f"is at epoch {e.epoch}")
    if d.get("waiting"):
        holders = f" (held by {', '.join(d['held_by'])})" if d["held_by"] else ""
        out += f", waiting for {show(d['waiting'])}{holders}"
    if e.epoch == e.previous_epoch and not e.gained and not e.released:
        out += f", {d['state'].lower()}"
    return out


def _text_static_leave(e: Event, d: dict) -> str:
    return f"{e.member_id} left as a static member; its assignment {show(d['kept'])} waits for its return"


def _text_released(e: Event, d: dict) -> str:
    if d.get("handover"):
        return f"{e.member_id} carries {show(e.released)} back to the classic protocol"
    return f"{e.member_id} no longer holds {show(e.released)}: it is out of the group"


def _text_deleted(e: Event, d: dict) -> str:
    return "group deleted"


def _text_classic(e: Event, d: dict) -> str:
    if not d:
        return "classic group deleted"
    state = f", {d['state']}" if d.get("state") else ""
    leader = f", leader {d['leader']}" if d.get("leader") else ""
    return (
        f"classic group: generation {d['generation']}, protocol {d['protocol']}, {d['members']} members{state}{leader}"
    )


def _text_classic_joined(e: Event, d: dict) -> str:
    out = f"{e.member_id} joined the classic group"
    if d.get("takeover"):
        out = f"{e.member_id} is a classic member again"
    if d["instance_id"]:
        out += f" as instance {d['instance_id']}"
    if d.get("took_over"):
        out += f", taking over from {d['took_over']}"
    out += f" at generation {d['generation']}" + _classic_who(d)
    return out + f", runs {show(d['runs'])}" + _classic_note(d)


def _classic_who(d: dict) -> str:
    parts = ([f"url {d['url']}"] if d.get("url") else []) + (
        [f"config offset {d['config_offset']}"] if d.get("config_offset") is not None else []
    )
    return f" ({', '.join(parts)})" if parts else ""


def _classic_note(d: dict) -> str:
    return f"; {d['note']}" if d.get("note") else ""


def _text_classic_left(e: Event, d: dict) -> str:
    if d.get("handover"):
        return f"{e.member_id} carries {show(d['runs'])} over to the connect protocol"
    out = f"{e.member_id} left the classic group"
    return out + (f", no longer runs {show(e.released)}" if e.released else "")


def _text_classic_member(e: Event, d: dict) -> str:
    if d.get("rest"):
        return f"{e.member_id} was assigned {show(e.gained)} at generation {e.epoch}, once released by the others"
    parts = []
    if e.released:
        parts.append(f"{'revoked' if d['revoked_released'] else 'stopped'} {show(e.released)}")
    if e.gained:
        parts.append(f"{'was assigned' if d['synced'] else 'reports it runs'} {show(e.gained)}")
    if e.epoch != e.previous_epoch and not d["synced"]:
        parts.append(f"joined generation {e.epoch}")
        where = ""
    else:
        where = f" at generation {e.epoch}"
    leader = f" (leader {d['leader']})" if d["synced"] and d.get("leader") else ""
    error = f", assignment error {d['error']}" if d.get("error") else ""
    if d["synced"] and not e.gained and not e.released:
        return (
            f"{e.member_id} got its assignment of generation {e.epoch}{leader}{error}: nothing changes, runs "
            f"{show(d['runs'])}" + _classic_note(d)
        )
    if not parts:
        parts.append("changed its metadata")
    return f"{e.member_id} {' and '.join(parts)}{where}{leader}{error}, runs {show(d['runs'])}" + _classic_note(d)


def _text_converted(e: Event, d: dict) -> str:
    if d["to"] == "connect":
        return f"group converted to connect at generation {d['generation']} by {e.member_id}'s join"
    return (
        f"group converted to classic at generation {d['generation']}: the last connect member left, "
        f"{d['members']} classic member(s) join again"
    )


_TEXT = {
    GROUP_EPOCH: _text_group_epoch,
    GROUP_DELETED: _text_deleted,
    CONNECTORS: _text_connectors,
    CONFIGURATION: _text_configuration,
    MEMBER_JOINED: _text_joined,
    MEMBER_UPDATED: _text_updated,
    MEMBER_LEFT: _text_left,
    TARGET_INSTALLED: _text_installed,
    TARGET_FAILED: _text_failed,
    TARGET_UPDATED: _text_target_updated,
    REVOKING: _text_revoking,
    MEMBER_EPOCH: _text_member_epoch,
    STATIC_LEAVE: _text_static_leave,
    RELEASED: _text_released,
    CLASSIC_GROUP: _text_classic,
    CONVERTED: _text_converted,
    CLASSIC_MEMBER_JOINED: _text_classic_joined,
    CLASSIC_MEMBER_LEFT: _text_classic_left,
    CLASSIC_MEMBER: _text_classic_member,
}


# --- as JSON ---------------------------------------------------------------------------------------


def item_names(items: Iterable[Item]) -> list[str]:
    """Items as the strings people type (`A`, `A-0`), in `describe`'s order: a connector, then its tasks."""
    return [str(item) for item in sorted(items, key=item_order)]


def jsonable(value: Any) -> Any:
    """Detail values made JSON-ready: item sets become sorted lists of names."""
    if isinstance(value, frozenset):
        return item_names(value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def event_json(e: Event) -> dict[str, Any]:
    return {
        "type": "event",
        "group": e.group_id,
        "partition": e.at.partition,
        "offset": e.at.offset,
        "timestamp_ms": e.at.timestamp_ms,
        "kind": e.kind,
        "member": e.member_id,
        "epoch": e.epoch,
        "previous_epoch": e.previous_epoch,
        "gained": item_names(e.gained),
        "released": item_names(e.released),
        "detail": jsonable(e.detail),
        "text": text(e),
    }
