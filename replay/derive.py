"""What each record meant for its group: events derived from the state (seed 000, DESIGN §9).

The rule of this module
-----------------------
Records are interpreted in one place only: `CoordinatorState.replay`. This module never reads a
record's value to decide what happened; it compares the *state*: `replay.history` captures the
slot a record writes (its key's value in the state) before and after `replay` applies it, and
`derive` turns that change, with the group as it now is, into events (`replay.events.Event`). One
function per record type, listed in `_DERIVE`, says what a change of that slot means (the classic
group's, type 2, in `replay.derive_classic`):

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
                                    (`coordinator.core.classic.holdings`): a member joined, left,
                                    joined a new generation, was assigned or revoked work

Every event carries what it changed in ownership (`gained`, `released`: see `replay.events`),
computed here from the slots with `coordinator.core.state.held_items`.

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

from coordinator.core.items import Item, items_of
from coordinator.core.protocol import LEAVE_GROUP_STATIC_MEMBER_EPOCH, LeaveReason, leave_reason_text
from coordinator.core.state import ConnectGroup, CoordinatorState, held_items
from coordinator.core.states import MemberState
from replay.derive_classic import classic_group
from replay.events import (
    CONFIGURATION,
    CONNECTORS,
    CONVERTED,
    GROUP_DELETED,
    GROUP_EPOCH,
    MEMBER_EPOCH,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_UPDATED,
    NOTHING,
    RELEASED,
    REVOKING,
    STATIC_LEAVE,
    TARGET_FAILED,
    TARGET_INSTALLED,
    TARGET_UPDATED,
    Event,
)
from replay.positions import Position, format_clock


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
    held_before = held_items(before) if before is not None else NOTHING
    if after is None:
        return _current_removed(track, key, before, group, at, held_before)
    g = key.group_id
    member_id = key.member_id
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
    return (_member_epoch(track, key, before, after, group, at, held_after),)


def _current_removed(track, key, before, group, at, held_before):  # noqa: ANN001, ANN202
    """A member's current assignment tombstoned: its hold on its work ends as it is removed."""
    member_id = key.member_id
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
            key.group_id,
            RELEASED,
            member_id,
            epoch=None,
            previous_epoch=before.member_epoch,
            released=held_before,
            detail=detail,
        ),
    )


def _member_epoch(track, key, before, after, group, at, held_after):  # noqa: ANN001, ANN202
    """A member at a new member epoch or state: what it gave up, what it was given, what it waits for."""
    member_id = key.member_id
    held_before = held_items(before) if before is not None else NOTHING
    gained = held_after - held_before
    released = held_before - held_after
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
    return Event(
        at,
        key.group_id,
        MEMBER_EPOCH,
        member_id,
        epoch=after.member_epoch,
        previous_epoch=before.member_epoch if before is not None else None,
        gained=gained,
        released=released,
        detail=detail,
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


_DERIVE = {
    ConnectGroupMetadataKey.RECORD_TYPE: _group_epoch,
    ConnectorsTasksMetadataKey.RECORD_TYPE: _connectors,
    GroupConfigurationKey.RECORD_TYPE: _configuration,
    MemberMetadataKey.RECORD_TYPE: _member,
    TargetAssignmentMetadataKey.RECORD_TYPE: _target_metadata,
    TargetAssignmentMemberKey.RECORD_TYPE: _target_member,
    CurrentMemberAssignmentKey.RECORD_TYPE: _current,
    ClassicGroupMetadataKey.RECORD_TYPE: classic_group,
}
