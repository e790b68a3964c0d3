"""What `coordinator replay verify` checks over a whole log, record by record.

The protocol promises three things a log must show (seed 000; `coordinator.core.reconciliation`):

- **no item held twice**: an item is handed to a member only when no other member holds it, owned
  or still revoking (a classic member: what it runs by Kafka Connect's rule over its bytes, so a
  task that two classic workers run at once is caught too). Checked from the events' `gained` sets
  against the holders `History` keeps.
- **epochs never go back**: the group epoch, the assignment epoch, and each member's epoch (a
  member that leaves and joins again starts over, and -2, the static leave, is not an epoch); a
  classic group's generation.
- **targets valid for their epoch**: an installed target assigns every item configured at the
  group epoch it was computed for exactly once, or defers it with a deadline, and nothing else.
  A target installed for an epoch the group has already left may lack the work of members that
  left since (DESIGN: such installs are progress), so completeness is required only of a target
  for the group's current epoch.

On a compacted log, or a window that starts after the beginning. Compaction drops a record when a
later record of its key exists, so a slot the replay shows is either the true value at that offset
or empty, never an older one. "No item held twice" and "epochs never go back" need no more than
that and are checked everywhere. Judging a target against the configuration needs the whole
group: an empty slot may be a member whose unchanged target was written long before (an install
rewrites only the parts that change), or connectors set before the window. So a target is checked
against the configuration and for completeness only while the read holds the group's whole
history: it saw the group's first epoch and every epoch since (a compacted head drops superseded
epoch records, so the gap shows), and the read started at the log's beginning (`partial=False`: a
window can cut the very transaction that set the group's connectors); elsewhere only for items
assigned twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.core.items import Item
from coordinator.core.protocol import LEAVE_GROUP_STATIC_MEMBER_EPOCH
from coordinator.core.state import ConnectGroup
from replay import events as ev
from replay.events import Event, show
from replay.positions import Position

HELD_TWICE = "held-twice"
EPOCH_WENT_BACK = "epoch-went-back"
INVALID_TARGET = "invalid-target"


@dataclass(slots=True, frozen=True)
class Violation:
    rule: str
    group_id: str
    at: Position
    offsets: tuple[int, ...]  # the records at fault, in `at.partition`
    message: str


class Invariants:
    """Collects the violations of the events `History` shows it."""

    def __init__(self, partial: bool = False) -> None:
        """`partial`: the read started after the beginning of the log (see the module docstring)."""
        self.partial = partial
        self.violations: list[Violation] = []
        # Per group: the items configured at each group epoch not yet installed (see module docstring).
        self._configured: dict[str, dict[int, frozenset[Item]]] = {}
        self._whole_history: dict[str, bool] = {}  # group -> every group epoch seen since the first

    def _violation(self, rule: str, e: Event, message: str, *offsets: int) -> None:
        self.violations.append(Violation(rule, e.group_id, e.at, offsets or (e.at.offset,), message))

    def on_event(self, e: Event, group: ConnectGroup | None) -> None:
        kind = e.kind
        previous = e.previous_epoch
        if kind == ev.GROUP_EPOCH:
            if previous is not None and e.epoch < previous:
                self._violation(EPOCH_WENT_BACK, e, f"group epoch went back from {previous} to {e.epoch}")
            whole = (
                not self.partial and e.epoch == 1
                if previous is None
                else self._whole_history.get(e.group_id, False) and e.epoch == previous + 1
            )
            self._whole_history[e.group_id] = whole
            epochs = self._configured.setdefault(e.group_id, {})
            if whole:
                epochs[e.epoch] = group.configured()
            else:
                epochs.clear()
        elif kind == ev.GROUP_DELETED:
            self._configured.pop(e.group_id, None)
            self._whole_history.pop(e.group_id, None)
        elif kind == ev.TARGET_INSTALLED or kind == ev.TARGET_FAILED:
            if previous is not None and e.epoch < previous:
                self._violation(EPOCH_WENT_BACK, e, f"assignment epoch went back from {previous} to {e.epoch}")
            if kind == ev.TARGET_INSTALLED:
                self._check_target(e, group)
        elif kind == ev.CLASSIC_GROUP:
            if previous is not None and e.epoch is not None and e.epoch < previous:
                self._violation(
                    EPOCH_WENT_BACK,
                    e,
                    f"generation of classic group {e.group_id} went back from {previous} to {e.epoch}",
                )
        elif kind == ev.MEMBER_EPOCH or kind == ev.REVOKING:
            if previous is not None and previous != LEAVE_GROUP_STATIC_MEMBER_EPOCH and e.epoch < previous:
                self._violation(
                    EPOCH_WENT_BACK, e, f"member epoch of {e.member_id} went back from {previous} to {e.epoch}"
                )

    def held_twice(self, e: Event, item: Item, holder: str, since: Position) -> None:
        self._violation(
            HELD_TWICE,
            e,
            f"{item} given to {e.member_id} while {holder} holds it (since offset {since.offset})",
            since.offset,
            e.at.offset,
        )

    def _check_target(self, e: Event, group: ConnectGroup) -> None:
        d = e.detail
        targets: dict[str, frozenset[Item]] = d["targets"]
        deferred: frozenset[Item] = d["deferred"]
        problems = []
        assigned: dict[Item, str] = {}
        for member_id in sorted(targets):
            for item in targets[member_id]:
                if item in assigned:
                    problems.append(f"{item} assigned to both {assigned[item]} and {member_id}")
                assigned[item] = member_id
        both = sorted(str(item) for item in deferred if item in assigned)
        if both:
            problems.append(f"both assigned and deferred: {', '.join(both)}")
        epochs = self._configured.get(e.group_id, {})
        configured = epochs.get(e.epoch)
        if configured is not None:
            extra = (assigned.keys() | deferred) - configured
            if extra:
                problems.append(f"not configured at group epoch {e.epoch}: {show(extra)}")
            if group.group_epoch == e.epoch:  # a target for the group's current epoch (module docstring)
                missing = configured - assigned.keys() - deferred
                if missing and targets:
                    problems.append(f"neither assigned nor deferred: {show(missing)}")
                if deferred and d["scheduled_rebalance_at_ms"] is None:
                    problems.append(f"deferred {show(deferred)} with no scheduled rebalance")
        for epoch in [epoch for epoch in epochs if epoch < e.epoch]:
            del epochs[epoch]  # installs never go back to an older epoch
        if problems:
            self._violation(INVALID_TARGET, e, f"target {e.epoch} is invalid: {'; '.join(problems)}")
