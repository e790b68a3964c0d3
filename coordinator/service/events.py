"""What an operator is told of the groups a partition serves: a log event for each join, leave
(with its reason), fencing, rebalance started and converged, and ownership move, and the live
rebalance metrics (issue 19; DESIGN §7).

How they are found. The state machine writes no log and keeps no clock; the runtime applies each
result through `replay`. `Observer.before` notes the slots a result's records are about to change
(the records say which: their keys); `after` compares them with the state once applied and says
what that means in the protocol's words, reading the state with the core's own views
(`rebalance_converged`, `held_items`): records are interpreted only by `replay`. What `after`
finds is *told* (`tell`) only once the batch carrying those records is committed: a commit that
fails takes its changes back (the partition reloads), and nothing it took back is ever logged or
counted.

Rebalances. One starts when a group's epoch is bumped and ends when the group has converged
(`rebalance_converged`); a bump while one is open extends it, as `replay.history` counts them, so
the live histogram and the offline history measure the same thing, with one difference: a bump of
a group that has no members (its connectors set before any worker joined) is no rebalance here, as
nobody has anything to move, where the history counts it as one that converged at once. The start is the `now` of the
handler that bumped the epoch. A coordinator that loads a partition takes the start of a rebalance
open in it from the group's epoch record (RebalanceStartedMs, record format level 2). Below that
level the records carry no handler time: it tracks such a rebalance from the load, says so in the
converged event (`since_load`) and leaves it out of the histogram rather than report a duration it
does not know.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from records import (
    ConnectGroupMetadataKey,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    MemberMetadataKey,
    MemberMetadataValue,
    Record,
)

from coordinator.core.items import Item, describe, items_of
from coordinator.core.protocol import LEAVE_GROUP_STATIC_MEMBER_EPOCH, LeaveReason, leave_reason_text
from coordinator.core.state import CoordinatorState, held_items
from coordinator.core.views import rebalance_converged
from coordinator.tools.logs import event

log = logging.getLogger("coordinator.events")

# Removals the member did not ask for: logged as fencings, at WARNING.
FENCED = frozenset({LeaveReason.SESSION_TIMEOUT, LeaveReason.REBALANCE_TIMEOUT, LeaveReason.FENCED_EPOCH})


@dataclass(slots=True)
class OpenRebalance:
    started_ms: int
    from_epoch: int
    known_start: bool = True  # False: open when the partition was loaded; its start is unknown


@dataclass(slots=True)
class _Before:
    """The slots a result is about to change, as they were."""

    epochs: dict[str, int] = field(default_factory=dict)  # group -> group epoch (-1: no group)
    members: dict[tuple[str, str], MemberMetadataValue | None] = field(default_factory=dict)
    currents: dict[tuple[str, str], CurrentMemberAssignmentValue | None] = field(default_factory=dict)


@dataclass(slots=True)
class Told:
    """One thing to tell once its records are durable: a log event, maybe a rebalance's duration."""

    name: str
    message: str
    fields: dict[str, Any]
    level: int = logging.INFO
    rebalance_seconds: float | None = None


class Observer:
    """One partition's groups, watched (see the module docstring)."""

    def __init__(self, partition: int, on_rebalance: Any = None) -> None:
        self.partition = partition
        self.open: dict[str, OpenRebalance] = {}  # group -> its rebalance in progress
        self._on_rebalance = on_rebalance  # called with the seconds of each converged rebalance

    def loaded(self, state: CoordinatorState, now_ms: int) -> None:
        """After a load: the groups not converged are in a rebalance that started before it, at the
        time their epoch record says (record format level 2), else unknown: timed from the load."""
        self.open = {}
        for g in state.groups.values():
            if not rebalance_converged(g):
                started = None if g.metadata is None else g.metadata.rebalance_started_ms
                known = started is not None
                self.open[g.group_id] = OpenRebalance(started if known else now_ms, g.group_epoch, known_start=known)

    def before(self, state: CoordinatorState, records: list[Record]) -> _Before:
        seen = _Before()
        groups = state.groups
        for record in records:
            key = record.key
            kind = key.__class__
            if kind is ConnectGroupMetadataKey:
                group = groups.get(key.group_id)
                seen.epochs.setdefault(key.group_id, -1 if group is None else group.group_epoch)
            elif kind is MemberMetadataKey:
                group = groups.get(key.group_id)
                seen.members.setdefault(
                    (key.group_id, key.member_id), None if group is None else group.members.get(key.member_id)
                )
            elif kind is CurrentMemberAssignmentKey:
                group = groups.get(key.group_id)
                seen.currents.setdefault(
                    (key.group_id, key.member_id), None if group is None else group.currents.get(key.member_id)
                )
        return seen

    def after(self, state: CoordinatorState, seen: _Before, now_ms: int) -> list[Told]:
        told: list[Told] = []
        p = self.partition
        groups = state.groups
        touched: set[str] = set()
        for (group_id, member_id), was in seen.members.items():
            touched.add(group_id)
            group = groups.get(group_id)
            now = None if group is None else group.members.get(member_id)
            if was is None and now is not None:
                told.append(
                    Told(
                        "member-joined",
                        f"member {member_id} joined group {group_id}",
                        {
                            "group": group_id,
                            "member": member_id,
                            "instance": now.instance_id,
                            "client_id": now.client_id,
                            "host": now.client_host,
                            "epoch": group.group_epoch,
                            "partition": p,
                        },
                    )
                )
        for group_id, was in seen.epochs.items():
            touched.add(group_id)
            group = groups.get(group_id)
            epoch = -1 if group is None or group.metadata is None else group.group_epoch
            if epoch == was:
                continue
            if epoch < 0:
                told.append(Told("group-deleted", f"group {group_id} deleted", {"group": group_id, "partition": p}))
                continue
            for d in group.metadata.departures:
                fenced = d.reason in FENCED
                told.append(
                    Told(
                        "member-fenced" if fenced else "member-left",
                        f"member {d.member_id} of group {group_id} {leave_reason_text(d.reason)}",
                        {
                            "group": group_id,
                            "member": d.member_id,
                            "instance": d.instance_id,
                            "reason": d.reason,
                            "epoch": epoch,
                            "partition": p,
                        },
                        logging.WARNING if fenced else logging.INFO,
                    )
                )
            if not group.members:
                continue  # nobody to rebalance: a change of a group without members (its connectors, say)
            if group_id not in self.open:
                self.open[group_id] = OpenRebalance(now_ms, max(was, 0))
                told.append(
                    Told(
                        "rebalance-started",
                        f"group {group_id} rebalancing: group epoch {max(was, 0)} -> {epoch}",
                        {"group": group_id, "epoch": epoch, "previous_epoch": max(was, 0), "partition": p},
                    )
                )
            else:
                told.append(
                    Told(
                        "group-epoch-bumped",
                        f"group {group_id} group epoch {was} -> {epoch} (still rebalancing)",
                        {"group": group_id, "epoch": epoch, "previous_epoch": was, "partition": p},
                        logging.DEBUG,
                    )
                )
        for (group_id, member_id), was in seen.currents.items():
            touched.add(group_id)
            group = groups.get(group_id)
            now = None if group is None else group.currents.get(member_id)
            told.extend(self._moves(group_id, member_id, was, now))
        for group_id in touched:
            told.extend(self._converged(group_id, groups.get(group_id), now_ms))
        return told

    def _moves(
        self,
        group_id: str,
        member_id: str,
        was: CurrentMemberAssignmentValue | None,
        now: CurrentMemberAssignmentValue | None,
    ) -> list[Told]:
        held_was = held_items(was) if was is not None else frozenset()
        held_now = held_items(now) if now is not None else frozenset()
        out = []
        if (
            now is not None
            and now.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
            and (was is None or was.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        ):
            out.append(
                Told(
                    "member-static-leave",
                    f"static member {member_id} of group {group_id} left for a while; its work waits for its instance",
                    {"group": group_id, "member": member_id, "partition": self.partition},
                )
            )
        gained, released = held_now - held_was, held_was - held_now
        revoking = _pending(now) - _pending(was)
        if gained or released or revoking:
            fields: dict[str, Any] = {
                "group": group_id,
                "member": member_id,
                "epoch": None if now is None else now.member_epoch,
                "partition": self.partition,
            }
            parts = []
            if gained:
                fields["gained"] = _names(gained)
                parts.append(f"took {describe(gained)}")
            if revoking:
                fields["revoking"] = _names(revoking)
                parts.append(f"is revoking {describe(revoking)}")
            if released:
                fields["released"] = _names(released)
                parts.append(f"released {describe(released)}")
            out.append(Told("ownership-moved", f"member {member_id} of group {group_id} " + "; ".join(parts), fields))
        return out

    def _converged(self, group_id: str, group: Any, now_ms: int) -> list[Told]:
        rebalance = self.open.get(group_id)
        if rebalance is None or not rebalance_converged(group):
            return []
        del self.open[group_id]
        seconds = (now_ms - rebalance.started_ms) / 1000
        epoch = None if group is None else group.group_epoch
        fields = {
            "group": group_id,
            "epoch": epoch,
            "previous_epoch": rebalance.from_epoch,
            "members": None if group is None else len(group.members),
            "partition": self.partition,
        }
        if not rebalance.known_start:
            fields["since_load"] = True
            return [
                Told(
                    "rebalance-converged",
                    f"group {group_id} converged at group epoch {epoch} ({seconds:.3f} s "
                    "since this coordinator loaded it; it started before)",
                    {**fields, "seconds": seconds},
                )
            ]
        return [
            Told(
                "rebalance-converged",
                f"group {group_id} converged at group epoch {epoch} in {seconds:.3f} s",
                {**fields, "seconds": seconds},
                rebalance_seconds=seconds,
            )
        ]

    def tell(self, told: list[Told]) -> None:
        """The batch carrying these changes is durable: log them, count the rebalances."""
        for t in told:
            event(log, t.name, t.message, level=t.level, **t.fields)
            if t.rebalance_seconds is not None and self._on_rebalance is not None:
                self._on_rebalance(t.rebalance_seconds)

    def in_progress(self, now_ms: int) -> dict[str, float]:
        """Seconds since each open rebalance started (since the load, for those open then)."""
        return {g: (now_ms - r.started_ms) / 1000 for g, r in self.open.items()}


def _pending(current: CurrentMemberAssignmentValue | None) -> frozenset[Item]:
    return frozenset() if current is None else items_of(current.pending_revocation)


def _names(items: frozenset[Item]) -> list[str]:
    return describe(items).split(", ")
