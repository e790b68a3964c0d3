"""What each record meant for its group, in the protocol's words (seed 000, DESIGN §9).

The rule of this module
-----------------------
Records are interpreted in one place only: `CoordinatorState.replay`. This module never reads a
record's value to decide what happened; it compares the *state*: `replay.history` captures the
slot a record writes (its key's value in the state) before and after `replay` applies it, and
`derive` turns that change, with the group as it now is, into events. One function per record
type, listed in `_DERIVE`, says what a change of that slot means:

    type  slot                      events
    ----  ------------------------  ------------------------------------------------------------
    3     group epoch               the group epoch moved (why: the changes written since the
                                    last epoch record), or the group was deleted
    4     connectors                connectors added, removed, resized
    5     member metadata           a member joined (maybe taking over a static instance), left,
                                    or changed what it told the coordinator
    6     target metadata           a target assignment installed (who computed it, with which
                                    assignor, what is deferred and until when), an assignor
                                    error, departed work recorded, a scheduled rebalance due
    7     a member's target         nothing on its own: shown when the target is installed (6),
                                    which the coordinator writes after its members' parts
    8     current assignment        a member asked to revoke, a member moving to a new member
                                    epoch (what it gave up, what it was given, what it waits
                                    for), a static member leaving for a while, a member's hold
                                    on its work ending as it is removed
    9     configuration             the group's timeouts
    2     classic group             the classic group's generation, state and members; its
                                    conversion to the connect type (seen at the join of the first
                                    connect member that follows its deletion) and back (a classic
                                    record right after the connect group's epoch was deleted); per
                                    member, what it runs by Kafka Connect's rule over its bytes
                                    (`coordinator.core.classic_holdings`): a member joined, left,
                                    joined a new generation, was assigned or revoked work

Every event carries what it changed in *ownership*: `gained` and `released` are the items a
member started or stopped holding (owning, or still revoking: `coordinator.core.state.held_items`;
a classic member: what it runs). Ownership intervals, "what moved" in a rebalance and the
no-double-ownership check are all built from those two sets, so they agree with each other and
with the state.

A group changing protocol moves its members' work from one kind of record to the other in one
batch: the releases of that move say `handover` in their detail and the gains `takeover`, so that
`replay.history` keeps a worker's holding whole across it (the worker never stopped).

A `GroupTrack` is what derivation remembers about a group between records: the changes seen since
the last group epoch record (they are why the epoch moves: a handler writes member and connector
records before the epoch), the target as last installed (to say which members' targets changed),
and static instances whose member just left (to tell a takeover from a join).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from records import (
    ClassicGroupMetadataKey,
    ClassicGroupMetadataValue,
    ConnectGroupMetadataKey,
    ConnectorsTasksMetadataKey,
    CurrentMemberAssignmentKey,
    FormatLevelKey,
    GroupConfigurationKey,
    MemberMetadataKey,
    MemberMetadataValue,
    RecordKey,
    TargetAssignmentMemberKey,
    TargetAssignmentMetadataKey,
)

from coordinator.core.classic_holdings import ClassicHoldings, classic_member_holdings
from coordinator.core.items import Item, describe, items_of
from coordinator.core.protocol import LEAVE_GROUP_STATIC_MEMBER_EPOCH, LeaveReason, MemberState, leave_reason_text
from coordinator.core.state import ConnectGroup, CoordinatorState, held_items
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


@dataclass(slots=True)
class GroupTrack:
    """What derivation remembers about one group between records (see the module docstring)."""

    causes: list[str] = field(default_factory=list)
    installed: dict[str, frozenset[Item]] = field(default_factory=dict)
    left_instances: dict[str, str] = field(default_factory=dict)
    left: dict[str, Event] = field(default_factory=dict)  # member-left events waiting for their epoch's reasons
    upgrading_from: int | None = None  # a classic group with members was deleted at this generation
    deleted_epoch: int | None = None  # the connect group's epoch was just deleted (a downgrade, maybe)
    # Members of a classic group being upgraded, whose connect records are being written.
    handed_over: set[str] = field(default_factory=set)
    # Classic members of a connect group removed since its last epoch record (a downgrade, maybe).
    classic_removed: set[str] = field(default_factory=set)


# --- slots -----------------------------------------------------------------------------------------


def _group_slot(attribute: str) -> Callable[[CoordinatorState, RecordKey], Any]:
    def read(state: CoordinatorState, key: RecordKey) -> Any:
        group = state.groups.get(key.group_id)
        return None if group is None else getattr(group, attribute)

    return read


def _member_slot(attribute: str) -> Callable[[CoordinatorState, RecordKey], Any]:
    def read(state: CoordinatorState, key: RecordKey) -> Any:
        group = state.groups.get(key.group_id)
        return None if group is None else getattr(group, attribute).get(key.member_id)

    return read


# The state's slot for each record type: where `replay` puts the record's value.
_SLOTS: dict[type, Callable[[CoordinatorState, RecordKey], Any]] = {
    ConnectGroupMetadataKey: _group_slot("metadata"),
    ConnectorsTasksMetadataKey: _group_slot("connectors"),
    GroupConfigurationKey: _group_slot("config"),
    TargetAssignmentMetadataKey: _group_slot("target_metadata"),
    MemberMetadataKey: _member_slot("members"),
    TargetAssignmentMemberKey: _member_slot("targets"),
    CurrentMemberAssignmentKey: _member_slot("currents"),
    ClassicGroupMetadataKey: lambda state, key: getattr(state.classic_groups.get(key.group_id), "record", None),
    FormatLevelKey: lambda state, key: state.format_level_record,
}


def slot(state: CoordinatorState, key: RecordKey) -> Any:
    """The value the state holds for `key` (None: empty)."""
    return _SLOTS[key.__class__](state, key)


# --- derivation, one function per record type ----------------------------------------------------


def derive(
    track: GroupTrack, key: RecordKey, before: Any, after: Any, group: ConnectGroup | None, at: Position
) -> Iterable[Event]:
    """The events of one record: its slot went from `before` to `after`; `group` is the group now
    (None: it no longer exists)."""
    if before is None and after is None:
        return ()  # a tombstone for state never seen: nothing happened
    return _DERIVE[key.RECORD_TYPE](track, key, before, after, group, at)


def _group_epoch(track, key, before, after, group, at):  # noqa: ANN001, ANN202
    if after is None:
        track.causes.clear()
        track.deleted_epoch = before.group_epoch
        return (Event(at, key.group_id, GROUP_DELETED, epoch=before.group_epoch),)
    # An epoch record ends the batch of an upgrade, and follows the members a removal tombstones.
    track.handed_over.clear()
    track.classic_removed.clear()
    previous = before.group_epoch if before is not None else None
    if previous == after.group_epoch:
        return ()
    causes = track.causes[:] or _unwritten_cause(group)
    # The epoch record says why each member that this change removed left (type 3 v1): the causes
    # say it, and so do the member-left events of the same change, derived a few records earlier.
    reasons = {d.member_id: d.reason for d in after.departures}
    causes = [_with_reason(cause, reasons) for cause in causes]
    for member_id, reason in reasons.items():
        left = track.left.get(member_id)
        if left is not None:
            left.detail["reason"] = reason
            if reason == LeaveReason.REPLACED:
                # A static member away (-2) goes when its session ends or when its instance
                # comes back under a new member id: the record says which.
                left.detail["static_session_expired"] = False
    track.causes.clear()
    track.left_instances.clear()
    track.left.clear()
    return (
        Event(
            at,
            key.group_id,
            GROUP_EPOCH,
            epoch=after.group_epoch,
            previous_epoch=previous,
            detail={"causes": causes, "departures": reasons},
        ),
    )


def _with_reason(cause: str, reasons: dict[str, str]) -> str:
    member_id, _, what = cause.partition(" ")
    if what == "left" and member_id in reasons:
        return f"{member_id} {leave_reason_text(reasons[member_id])}"
    return cause


def _unwritten_cause(group: ConnectGroup | None) -> list[str]:
    """Why the epoch moved when no member or connector record says: a timer of the coordinator."""
    meta = group.target_metadata if group is not None else None
    if meta is not None and meta.scheduled_rebalance_at_ms is not None:
        return [f"scheduled rebalance due at {format_clock(meta.scheduled_rebalance_at_ms)}"]
    if meta is not None and meta.error:
        return [f"retry after assignor error {meta.error}"]
    return []


def _connectors(track, key, before, after, group, at):  # noqa: ANN001, ANN202
    old = {} if before is None else {c.name: c.tasks for c in before.connectors}
    new = {} if after is None else {c.name: c.tasks for c in after.connectors}
    detail = {
        "connectors": new,
        "added": {n: t for n, t in new.items() if n not in old},
        "removed": sorted(n for n in old if n not in new),
        "resized": {n: [old[n], t] for n, t in new.items() if n in old and old[n] != t},
        "first": before is None,
    }
    track.causes.append("connectors changed")
    return (Event(at, key.group_id, CONNECTORS, detail=detail),)


def _configuration(track, key, before, after, group, at):  # noqa: ANN001, ANN202
    detail = (
        {}
        if after is None
        else {
            "session_timeout_ms": after.session_timeout_ms,
            "heartbeat_interval_ms": after.heartbeat_interval_ms,
            "rebalance_timeout_ms": after.rebalance_timeout_ms,
            "scheduled_rebalance_max_delay_ms": after.scheduled_rebalance_max_delay_ms,
            "initial_assignment_delay_ms": after.initial_assignment_delay_ms,
        }
    )
    return (Event(at, key.group_id, CONFIGURATION, detail=detail),)


def _member(track, key, before, after, group, at):  # noqa: ANN001, ANN202
    member_id = key.member_id
    if before is None:
        took_over = track.left_instances.pop(after.instance_id, None) if after.instance_id else None
        track.causes.append(f"{member_id} joined" + (f" (took over instance {after.instance_id})" if took_over else ""))
        joined = Event(
            at, key.group_id, MEMBER_JOINED, member_id, detail={**_member_detail(after), "took_over": took_over}
        )
        if track.upgrading_from is not None and after.classic_member_metadata is None:
            generation, track.upgrading_from = track.upgrading_from, None
            return (
                Event(
                    at,
                    key.group_id,
                    CONVERTED,
                    member_id,
                    epoch=generation,
                    detail={"to": "connect", "generation": generation},
                ),
                joined,
            )
        return (joined,)
    if after is None:
        current = group.currents.get(member_id) if group is not None else None  # tombstoned after this record
        detail: dict[str, Any] = {"instance_id": before.instance_id, "static_session_expired": False}
        if current is not None and current.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Only a session timeout, or a takeover (the epoch record that follows says so),
            # removes a static member that left with -2.
            detail["static_session_expired"] = True
        elif current is not None and current.state == MemberState.UNREVOKED:
            detail["while_revoking"] = items_of(current.pending_revocation)
        if before.instance_id:
            track.left_instances[before.instance_id] = member_id
        if before.classic_member_metadata is not None:
            track.classic_removed.add(member_id)
        track.causes.append(f"{member_id} left")
        left = track.left[member_id] = Event(at, key.group_id, MEMBER_LEFT, member_id, detail=detail)
        return (left,)
    old, new = _member_detail(before), _member_detail(after)
    changed = {name: [old[name], value] for name, value in new.items() if old[name] != value}
    if not changed:
        return ()
    if {"assignors", "rack_id"} & changed.keys():  # what bumps the group epoch (group_coordinator.heartbeat)
        track.causes.append(
            f"{member_id} changed its {' and '.join(sorted(changed.keys() & {'assignors', 'rack_id'}))}"
        )
    return (Event(at, key.group_id, MEMBER_UPDATED, member_id, detail={"changed": changed}),)


def _member_detail(m: MemberMetadataValue) -> dict[str, Any]:
    if m.server_assignor is not None:
        assignors = f"server-side {m.server_assignor}"
    else:
        assignors = (
            ", ".join(f"{a.name} v{a.minimum_version}-{a.maximum_version}" for a in m.client_assignors) or "none"
        )
    return {
        "instance_id": m.instance_id,
        "assignors": assignors,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "url": m.url,
        "rack_id": m.rack_id,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "protocol": "classic" if m.classic_member_metadata is not None else "connect",
    }


def _target_metadata(track, key, before, after, group, at):  # noqa: ANN001, ANN202
    if after is None:
        return ()  # the group is being deleted: its epoch's tombstone says so
    g = key.group_id
    previous = before.assignment_epoch if before is not None else None
    common = {"assignor": after.assignor_name, "installed_by": after.installed_by}
    if previous != after.assignment_epoch:
        if after.error:
            return (
                Event(
                    at,
                    g,
                    TARGET_FAILED,
                    epoch=after.assignment_epoch,
                    previous_epoch=previous,
                    detail={**common, "error": after.error, "error_message": after.error_message},
                ),
            )
        # The members' parts (type 7) were written just before this record, in the same batch.
        targets = {m: items_of(t.assignment) for m, t in group.targets.items()}
        changed = sorted(m for m, items in targets.items() if track.installed.get(m) != items)
        track.installed = targets
        return (
            Event(
                at,
                g,
                TARGET_INSTALLED,
                epoch=after.assignment_epoch,
                previous_epoch=previous,
                detail={
                    **common,
                    "targets": targets,
                    "changed": changed,
                    "deferred": items_of(after.deferred),
                    "scheduled_rebalance_at_ms": after.scheduled_rebalance_at_ms,
                },
            ),
        )
    detail: dict[str, Any] = {}
    known = {(d.member_id, d.departed_at_ms) for d in before.departed_members}
    departed = {
        d.member_id: items_of(d.assignment)
        for d in after.departed_members
        if (d.member_id, d.departed_at_ms) not in known
    }
    if departed:
        detail["departed"] = departed
    # A scheduled rebalance clearing its deadline is not shown: the group epoch record just
    # before it already says "scheduled rebalance due".
    if not detail:
        return ()
    return (Event(at, g, TARGET_UPDATED, epoch=after.assignment_epoch, detail=detail),)


def _target_member(track, key, before, after, group, at):  # noqa: ANN001, ANN202
    return ()  # shown with the target metadata that follows it (type 6)


def _current(track, key, before, after, group, at):  # noqa: ANN001, ANN202
    g = key.group_id
    member_id = key.member_id
    held_before = held_items(before) if before is not None else NOTHING
    if after is None:
        if not held_before:
            return ()
        detail = _departure(group, member_id)
        if member_id in track.classic_removed and group is not None and not group.members:
            # Every member gone and the last ones classic, without an epoch record between: the
            # group is going back to the classic protocol, whose record follows with their work.
            detail["handover"] = True
        return (
            Event(
                at,
                g,
                RELEASED,
                member_id,
                epoch=None,
                previous_epoch=before.member_epoch,
                released=held_before,
                detail=detail,
            ),
        )
    held_after = held_items(after)
    gained = held_after - held_before
    released = held_before - held_after
    previous = before.member_epoch if before is not None else None
    if after.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if previous == LEAVE_GROUP_STATIC_MEMBER_EPOCH and not gained and not released:
            return ()
        return (
            Event(
                at,
                g,
                STATIC_LEAVE,
                member_id,
                epoch=after.member_epoch,
                previous_epoch=previous,
                gained=gained,
                released=released,
                detail={"kept": items_of(after.assignment)},
            ),
        )
    pending = items_of(after.pending_revocation)
    if (
        after.state == MemberState.UNREVOKED
        and pending
        and (before is None or items_of(before.pending_revocation) != pending)
    ):
        return (
            Event(
                at,
                g,
                REVOKING,
                member_id,
                epoch=after.member_epoch,
                previous_epoch=previous,
                gained=gained,
                released=released,
                detail={
                    "revoking": pending,
                    "kept": items_of(after.assignment),
                    "target_epoch": group.assignment_epoch,
                },
            ),
        )
    if (
        before is not None
        and previous == after.member_epoch
        and before.state == after.state
        and not gained
        and not released
    ):
        return ()
    detail = {
        "state": after.state,
        "revoked": bool(released) and before is not None and released <= items_of(before.pending_revocation),
    }
    if before is None and member_id in track.handed_over:
        track.handed_over.discard(member_id)
        detail["takeover"] = True  # a classic member of the group being upgraded: it ran this already
    if after.state == MemberState.UNRELEASED:
        target = group.targets.get(member_id)
        waiting = (items_of(target.assignment) if target is not None else NOTHING) - held_after
        owners = group.owners()
        detail["waiting"] = waiting
        detail["held_by"] = sorted({owners[i] for i in waiting if i in owners})
    return (
        Event(
            at,
            g,
            MEMBER_EPOCH,
            member_id,
            epoch=after.member_epoch,
            previous_epoch=previous,
            gained=gained,
            released=released,
            detail=detail,
        ),
    )


def _departure(group: ConnectGroup | None, member_id: str) -> dict[str, str]:
    """{"reason": why} when the group's epoch record says why `member_id` was removed. A member's
    current assignment is tombstoned after the epoch record of the change that removed it, so the
    epoch the state holds is that change's; a tombstone of another cause (a conversion to classic)
    or a log compacted past that record leaves it unsaid."""
    meta = group.metadata if group is not None else None
    for departure in meta.departures if meta is not None else ():
        if departure.member_id == member_id:
            return {"reason": departure.reason}
    return {}


def _classic_group(track, key, before, after, group, at):  # noqa: ANN001, ANN202
    g = key.group_id
    was = _classic_members(before)
    now = _classic_members(after)
    if after is None:
        if before is not None and before.members:
            track.upgrading_from = before.generation  # the connect join that follows converted it
            # Its members' work goes on in the connect records written next, in the same batch.
            track.handed_over = set(was)
            return tuple(
                Event(
                    at,
                    g,
                    CLASSIC_MEMBER_LEFT,
                    m,
                    previous_epoch=before.generation,
                    released=items_of(held.runs),
                    detail={
                        "instance_id": member.group_instance_id,
                        "generation": before.generation,
                        "runs": items_of(held.runs),
                        "handover": True,
                    },
                )
                for m, (member, held) in sorted(was.items())
                if held.runs.connectors or held.runs.tasks
            )
        return (Event(at, g, CLASSIC_GROUP, detail={}),)
    converted = before is None and track.deleted_epoch is not None
    detail = {
        "generation": after.generation,
        "protocol": after.protocol,
        "members": len(after.members),
        "state": after.state,
        "leader": after.leader,
        "joined": sorted(now.keys() - was.keys()),
        "left": sorted(was.keys() - now.keys()),
        "converted": converted,
    }
    events = []
    if converted:
        events.append(
            Event(
                at,
                g,
                CONVERTED,
                epoch=after.generation,
                previous_epoch=track.deleted_epoch,
                detail={"to": "classic", "generation": after.generation, "members": len(after.members)},
            )
        )
    # Back from the connect protocol: the generation goes on from the group epoch just deleted.
    previous = before.generation if before is not None else (track.deleted_epoch if converted else None)
    track.deleted_epoch = None
    track.classic_removed.clear()
    events.append(Event(at, g, CLASSIC_GROUP, epoch=after.generation, previous_epoch=previous, detail=detail))
    events.extend(_classic_member_events(g, before, after, was, now, at, converted))
    return tuple(events)


def _classic_members(value: ClassicGroupMetadataValue | None) -> dict[str, tuple]:
    """member id -> (its ClassicGroupMember, what it runs: `ClassicHoldings`)."""
    if value is None:
        return {}
    return {
        m.member_id: (m, classic_member_holdings(value.protocol, m.subscription, m.assignment)) for m in value.members
    }


def _runs(entry: tuple | None) -> frozenset[Item]:
    return items_of(entry[1].runs) if entry is not None else NOTHING


def _classic_member_events(
    g: str,
    before: ClassicGroupMetadataValue | None,
    after: ClassicGroupMetadataValue,
    was: dict[str, tuple],
    now: dict[str, tuple],
    at: Position,
    converted: bool,
) -> list[Event]:
    """One event per member whose place in the record changed. Work moving between members in
    one record is released before it is given (an item a member gives up and another gets in the
    same record is never held twice): a member's gains of items another member releases here come
    in a second event of its own, after every release."""
    changes = {
        m: (_runs(now.get(m)) - _runs(was.get(m)), _runs(was.get(m)) - _runs(now.get(m)))
        for m in sorted(was.keys() | now.keys())
    }
    released_here = {item: m for m, (_, released) in changes.items() for item in released}
    first: list[Event] = []
    later: list[Event] = []
    previous_generation = before.generation if before is not None else None
    left_instances = {
        entry[0].group_instance_id: m for m, entry in was.items() if m not in now and entry[0].group_instance_id
    }
    for member_id, (gained, released) in changes.items():
        old, new = was.get(member_id), now.get(member_id)
        waiting = frozenset(i for i in gained if released_here.get(i, member_id) != member_id)
        gained_now = gained - waiting
        if new is None:
            first.append(
                Event(
                    at,
                    g,
                    CLASSIC_MEMBER_LEFT,
                    member_id,
                    previous_epoch=previous_generation,
                    released=released,
                    detail={
                        "instance_id": old[0].group_instance_id,
                        "generation": after.generation,
                        "runs": _runs(old),
                    },
                )
            )
            continue
        member, held = new
        detail = _classic_detail(after, member, held, released)
        if old is None:
            kind = CLASSIC_MEMBER_JOINED
            detail["took_over"] = left_instances.get(member.group_instance_id) if member.group_instance_id else None
            if converted:
                detail["takeover"] = True  # the group came back to the classic protocol: it ran this already
        else:
            old_held = old[1]
            same = (
                not gained
                and not released
                and previous_generation == after.generation
                and old_held.synced == held.synced
                and old_held.note == held.note
                and old[0].assignment == member.assignment
            )
            if same:
                continue
            kind = CLASSIC_MEMBER
        event = Event(
            at,
            g,
            kind,
            member_id,
            epoch=after.generation,
            previous_epoch=previous_generation if old is not None else None,
            gained=gained_now,
            released=released,
            detail=detail,
        )
        first.append(event)
        if waiting:
            later.append(
                Event(
                    at,
                    g,
                    CLASSIC_MEMBER,
                    member_id,
                    epoch=after.generation,
                    previous_epoch=after.generation,
                    gained=waiting,
                    detail={**detail, "rest": True},
                )
            )
    return first + later


def _classic_detail(
    after: ClassicGroupMetadataValue, member: object, held: ClassicHoldings, released: frozenset[Item]
) -> dict[str, Any]:
    revoked = items_of(held.revoked)
    return {
        "instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "generation": after.generation,
        "state": after.state,
        "protocol": after.protocol,
        "url": held.url,
        "config_offset": held.config_offset,
        "runs": items_of(held.runs),
        "synced": held.synced,
        "assigned": items_of(held.assigned),
        "revoked": revoked,
        "revoked_released": bool(released) and held.synced and released <= revoked,
        "leader": held.leader,
        "error": held.error,
        "note": held.note,
    }


_DERIVE = {
    ConnectGroupMetadataKey.RECORD_TYPE: _group_epoch,
    ConnectorsTasksMetadataKey.RECORD_TYPE: _connectors,
    GroupConfigurationKey.RECORD_TYPE: _configuration,
    MemberMetadataKey.RECORD_TYPE: _member,
    TargetAssignmentMetadataKey.RECORD_TYPE: _target_metadata,
    TargetAssignmentMemberKey.RECORD_TYPE: _target_member,
    CurrentMemberAssignmentKey.RECORD_TYPE: _current,
    ClassicGroupMetadataKey.RECORD_TYPE: _classic_group,
}


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


def item_order(item: Item) -> tuple:
    return (item, -1) if item.__class__ is str else item


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
