"""Replaying a log: every record through the coordinator's own `replay`, and what happened.

Theory of operation
-------------------
`History` owns a `CoordinatorState` and applies records to it one at a time, exactly as a
coordinator loading the partition would (`records.decode`, then `CoordinatorState.replay`): the
state here is the coordinator's state at that offset, by construction. Around each `replay` it
reads the slot the record writes, before and after, and `replay.derive.derive` says what the
change means. From the events it keeps, per group:

- **ownership**: who holds each item since when (an item is held from the record that gives it to
  a member to the record where that member no longer holds it, revocation acknowledged or member
  gone); closed holdings become `Interval`s;
- **rebalances**: a rebalance opens at a group epoch bump and closes at the first record after
  which the group is converged: every member at the group epoch with nothing to revoke or wait for
  (`coordinator.core.group_coordinator`'s STABLE), or no members and no holdings left. Bumps while one
  is open extend it. What moved is the holder of each item at its close against its opening. A
  classic group's rebalance opens at a record in PreparingRebalance or CompletingRebalance and
  closes at the first one Stable (the leader's assignments are in) or Empty, its epochs the
  generations;
- **conversions**: when a group changes protocol, its members' work moves from one kind of record
  to the other in one batch (`events`' handover and takeover): a worker that goes on running an
  item keeps one holding of it, from when it got it, not two;
- **corrupt records**: reported with their position and skipped (`strict` stops at the first), as
  a coordinator loading the partition does.

Asked about one group, `History` decodes that group's records only: a key is the record type and
then the group id, so records of other groups are recognised from their first bytes and never
decoded (a dump of a million records of many groups replays one group in about a second). Keys that
are not a known record type cannot be attributed to a group and are decoded, so that they are
reported.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from records import (
    RECORD_TYPES,
    ClassicGroupMetadataKey,
    ConnectGroupMetadataKey,
    FormatLevelKey,
    Record,
    RecordDecodeError,
    decode,
)

from coordinator.core.items import Item
from coordinator.core.protocol import leave_reason_text
from coordinator.core.state import ConnectGroup, CoordinatorState
from coordinator.core.states import ClassicGroupState
from coordinator.core.views import rebalance_converged
from replay import events as ev
from replay.derive import GroupTrack, derive, slot
from replay.errors import ReplayError
from replay.events import Event
from replay.positions import Point, Position, RawRecord


class CorruptRecordError(ReplayError):
    """A record that does not decode, in strict mode."""


@dataclass(slots=True, frozen=True)
class Corrupt:
    at: Position
    reason: str


@dataclass(slots=True)
class Interval:
    """A member held an item from `start` to `end` (None: still holds it where the read ended)."""

    group_id: str
    item: Item
    member_id: str
    start: Position
    start_epoch: int | None
    end: Position | None = None
    ended_by: str | None = None


@dataclass(slots=True)
class Rebalance:
    """From a group epoch bump to convergence (`end` None: not converged where the read ended)."""

    group_id: str
    number: int
    start: Position
    from_epoch: int | None
    to_epoch: int
    causes: list[str]
    end: Position | None = None
    moved: list[tuple[Item, str | None, str | None]] = field(default_factory=list)  # (item, from, to)
    revoked: int = 0  # items members gave up when asked to (revocations acknowledged)
    released: int = 0  # items members stopped holding otherwise: they left, or joined again
    assigned: int = 0
    installed: Position | None = None  # the last target assignment installed while it was open
    deferred: int = 0  # items that target deferred (held back for departed members)
    members: int = 0  # members in the group at its end (where the read ended, if open)
    protocol: str = "connect"  # or "classic": its epochs are generations
    # Each item's holder before its first change in this rebalance: what moved is read from it.
    owners_at_start: dict[Item, str | None] = field(default_factory=dict, repr=False)

    @property
    def duration_ms(self) -> int | None:
        return None if self.end is None else self.end.timestamp_ms - self.start.timestamp_ms


@dataclass(slots=True)
class _Holding:
    since: Position
    epoch: int | None


@dataclass(slots=True)
class _Handed:
    """A holding that a change of protocol moved off its records, until its new record takes it."""

    holding: _Holding
    released: Event


@dataclass(slots=True)
class _GroupHistory:
    track: GroupTrack = field(default_factory=GroupTrack)
    holders: dict[Item, dict[str, _Holding]] = field(default_factory=dict)
    rebalance: Rebalance | None = None
    rebalances: int = 0
    handed: dict[Item, dict[str, _Handed]] = field(default_factory=dict)  # item -> member -> its holding


class History:
    """Replays raw records and keeps the events, ownership intervals and rebalances.

    `group_id`: only that group's records are decoded (None: every group). `keep_events`: keep
    every event in `events`. `intervals`: which items' ownership intervals to keep (True: all).
    `checker`: an `replay.invariants.Invariants` told of every event and double holding.
    """

    def __init__(
        self,
        group_id: str | None = None,
        *,
        keep_events: bool = True,
        intervals: bool | Callable[[Item], bool] = True,
        strict: bool = False,
        checker=None,
    ) -> None:  # noqa: ANN001 - an Invariants; imported by it, not here
        self.group_id = group_id
        self.state = CoordinatorState()
        self.events: list[Event] = []
        self.intervals: list[Interval] = []
        self.rebalances: list[Rebalance] = []
        self.corrupt: list[Corrupt] = []
        self.records = 0  # decoded and applied
        self.skipped = 0  # of other groups, never decoded
        self.first: Position | None = None
        self.last: Position | None = None
        self.strict = strict
        self.checker = checker
        self._keep_events = keep_events
        self._keeps: Callable[[Item], bool] | None = (
            _every_item if intervals is True else None if intervals is False else intervals
        )
        self._groups: dict[str, _GroupHistory] = {}
        self._partition: int | None = None  # the group's partition, once a record of it is seen
        self._prefix = None if group_id is None else group_key_prefix(group_id)

    # --- replaying -------------------------------------------------------------------------------

    def run(self, records: Iterable[RawRecord], until: Point | None = None) -> RawRecord | None:
        """Apply `records` in order; with `until`, stop at the first record past that point (of the
        group's partition, when asked about a group) and return it, not applied. None: the records
        ran out first."""
        # The cyclic collector is paused, as `CoordinatorState.replay_all` pauses it: what is
        # replayed stays alive, so a collection would only walk the growing state again.
        paused = gc.isenabled()
        gc.disable()
        try:
            return self._run(records, until)
        finally:
            if paused:
                gc.enable()

    def _run(self, records: Iterable[RawRecord], until: Point | None) -> RawRecord | None:
        prefix = self._prefix
        known = _KNOWN_TYPES
        apply = self.apply_record
        for raw in records:
            key = raw.key
            if (
                prefix is not None
                and not key.startswith(prefix, 2)
                and len(key) >= 2
                and key[0] == 0
                and key[1] in known
            ):
                if (
                    until is not None
                    and raw.partition == self._partition
                    and until.passed_by(raw.offset, raw.timestamp_ms)
                ):
                    return raw
                self.skipped += 1
                continue
            if until is not None and until.passed_by(raw.offset, raw.timestamp_ms):
                return raw
            apply(raw)
        return None

    def apply_record(self, raw: RawRecord) -> list[Event]:
        """Decode and replay one record; its events (none for a corrupt one, reported)."""
        at = Position(raw.partition, raw.offset, raw.timestamp_ms)
        try:
            record = decode(raw.key, raw.value)
        except RecordDecodeError as e:
            self.corrupt.append(Corrupt(at, str(e)))
            if self.strict:
                raise CorruptRecordError(
                    f"corrupt record at partition {at.partition} offset {at.offset}: {e}"
                ) from None
            return []
        return self.apply(record, at)

    def apply(self, record: Record, at: Position) -> list[Event]:
        """Replay one record, decoded, written at `at` (a re-run's records: `replay.simulate`)."""
        key = record.key
        group_id = key.group_id
        if (self.group_id is not None and group_id != self.group_id) or key.__class__ is FormatLevelKey:
            self.skipped += 1  # another group's, or the partition's record format level (no group's history)
            return []
        self._partition = at.partition
        if self.first is None:
            self.first = at
        self.last = at
        self.records += 1
        state = self.state
        before = slot(state, key)
        state.replay(record)
        after = slot(state, key)
        gh = self._groups.get(group_id)
        if gh is None:
            gh = self._groups[group_id] = _GroupHistory()
        group = state.groups.get(group_id)
        events = derive(gh.track, key, before, after, group, at)
        for event in events:
            self._follow(gh, event, group)
        if gh.handed and after is not None and key.__class__ in _CONVERSION_ENDS:
            self._end_handed(gh)
        if gh.rebalance is not None and _converged(state, group_id, group):
            self._close(gh, at)
        return events  # type: ignore[return-value]

    # --- what the events say -----------------------------------------------------------------------

    def _follow(self, gh: _GroupHistory, e: Event, group: ConnectGroup | None) -> None:
        if self._keep_events:
            self.events.append(e)
        if self.checker is not None:
            self.checker.on_event(e, group)
        if e.released or e.gained:
            self._ownership(gh, e)
        kind = e.kind
        if kind == ev.GROUP_EPOCH:
            rebalance = gh.rebalance
            if rebalance is None:
                gh.rebalance = Rebalance(
                    e.group_id, gh.rebalances + 1, e.at, e.previous_epoch, e.epoch, list(e.detail["causes"])
                )
            else:
                rebalance.to_epoch = e.epoch
                rebalance.causes.extend(e.detail["causes"])
        elif kind == ev.TARGET_INSTALLED and gh.rebalance is not None:
            gh.rebalance.installed = e.at
            gh.rebalance.deferred = len(e.detail["deferred"])
        elif kind == ev.GROUP_DELETED and gh.rebalance is not None:
            self._close(gh, e.at)
        elif kind == ev.CLASSIC_GROUP and e.detail:
            self._classic_rebalance(gh, e)

    def _classic_rebalance(self, gh: _GroupHistory, e: Event) -> None:
        """A classic group's record: a join round in progress opens (or extends) a rebalance; the
        leader's SyncGroup (Stable) is its target installed."""
        d = e.detail
        rebalance = gh.rebalance
        if d["state"] in (ClassicGroupState.PREPARING_REBALANCE, ClassicGroupState.COMPLETING_REBALANCE) or (
            e.previous_epoch is not None and e.epoch != e.previous_epoch
        ):
            causes = [f"{m} joined" for m in d["joined"]] + [f"{m} left" for m in d["left"]]
            if d.get("converted"):
                causes = ["the group went back to the classic protocol"]
            if not causes and e.epoch != e.previous_epoch and e.previous_epoch is not None:
                causes = ["the members joined again"]
            if rebalance is None or rebalance.protocol != "classic":
                gh.rebalance = Rebalance(
                    e.group_id, gh.rebalances + 1, e.at, e.previous_epoch, e.epoch, causes, protocol="classic"
                )
            else:
                rebalance.to_epoch = e.epoch
                if causes != ["the members joined again"]:  # the round a departure started, going on
                    rebalance.causes.extend(c for c in causes if c not in rebalance.causes)
        if d["state"] == ClassicGroupState.STABLE and gh.rebalance is not None and gh.rebalance.protocol == "classic":
            gh.rebalance.installed = e.at

    def _ownership(self, gh: _GroupHistory, e: Event) -> None:
        member_id = e.member_id
        holders = gh.holders
        keeps = self._keeps
        rebalance = gh.rebalance
        if rebalance is not None:
            before = rebalance.owners_at_start
            for item in e.released | e.gained:
                if item not in before:
                    before[item] = _holder(gh, item)
        handover = e.detail.get("handover", False)
        takeover = e.detail.get("takeover", False)
        for item in e.released:
            held = holders.get(item)
            holding = held.pop(member_id, None) if held is not None else None
            if held is not None and not held:
                del holders[item]
            if holding is not None and handover:
                gh.handed.setdefault(item, {})[member_id] = _Handed(holding, e)
            elif holding is not None and keeps is not None and keeps(item):
                self.intervals.append(
                    Interval(e.group_id, item, member_id, holding.since, holding.epoch, e.at, _ended_by(e))
                )
        carried = 0
        for item in e.gained:
            handed = None
            if takeover and item in gh.handed:
                handed = gh.handed[item].pop(member_id, None)
                if not gh.handed[item]:
                    del gh.handed[item]
            if handed is not None:
                carried += 1
            mine = handed.holding if handed is not None else _Holding(e.at, e.epoch)
            held = holders.get(item)
            if held is None:
                holders[item] = {member_id: mine}
                continue
            if self.checker is not None:
                for other, holding in held.items():
                    if other != member_id:
                        self.checker.held_twice(e, item, other, holding.since)
            held[member_id] = mine
        if rebalance is not None:
            if handover:
                pass  # not given up: carried over to the other protocol's records
            elif e.detail.get("revoked") or e.detail.get("revoked_released"):
                rebalance.revoked += len(e.released)
            else:
                rebalance.released += len(e.released)
            rebalance.assigned += len(e.gained) - carried

    def _end_handed(self, gh: _GroupHistory) -> None:
        """The change of protocol is written: holdings it moved that no new record took ended
        where they were moved off."""
        keeps = self._keeps
        for item, by_member in gh.handed.items():
            if keeps is not None and keeps(item):
                for member_id, handed in by_member.items():
                    e = handed.released
                    self.intervals.append(
                        Interval(
                            e.group_id, item, member_id, handed.holding.since, handed.holding.epoch, e.at, _ended_by(e)
                        )
                    )
        gh.handed.clear()

    def _close(self, gh: _GroupHistory, at: Position) -> None:
        rebalance = gh.rebalance
        gh.rebalance = None
        rebalance.end = at
        rebalance.moved = _moved(rebalance.owners_at_start, gh)
        rebalance.members = _members(self.state, rebalance.group_id)
        rebalance.owners_at_start = {}
        if rebalance.end == rebalance.start and not rebalance.moved:
            return  # the epoch of a group without members moved (its connectors were set): nothing to rebalance
        gh.rebalances += 1
        self.rebalances.append(rebalance)

    def take(self) -> tuple[list[Event], list[Rebalance], list[Interval]]:
        """The events, converged rebalances and ended intervals kept since the last `take`, no
        longer kept (the corrupt records' reports are dropped too): for a reader that consumes
        the history as it goes, in bounded memory."""
        kept = self.events, self.rebalances, self.intervals
        self.events, self.rebalances, self.intervals = [], [], []
        self.corrupt.clear()
        return kept

    # --- reading the result ------------------------------------------------------------------------

    def open_intervals(self) -> list[Interval]:
        """Holdings that had not ended where the read ended."""
        keeps = self._keeps
        out = []
        for group_id, gh in self._groups.items():
            for item, held in gh.holders.items():
                if keeps is not None and keeps(item):
                    out.extend(Interval(group_id, item, m, h.since, h.epoch) for m, h in held.items())
        return out

    def handed_intervals(self) -> list[Interval]:
        """Holdings a change of protocol moved off their records where the read ended, its new
        records not read yet: ended there, as far as this read shows."""
        keeps = self._keeps
        return [
            Interval(group_id, item, member_id, h.holding.since, h.holding.epoch, h.released.at, _ended_by(h.released))
            for group_id, gh in self._groups.items()
            for item, by_member in gh.handed.items()
            if keeps is not None and keeps(item)
            for member_id, h in by_member.items()
        ]

    def all_intervals(self) -> list[Interval]:
        return sorted(
            [*self.intervals, *self.handed_intervals(), *self.open_intervals()],
            key=lambda i: (i.group_id, ev.item_order(i.item), i.start.partition, i.start.offset),
        )

    def all_rebalances(self) -> list[Rebalance]:
        """Converged rebalances, then any still open where the read ended."""
        open_ = [gh.rebalance for gh in self._groups.values() if gh.rebalance is not None]
        for rebalance in open_:
            rebalance.moved = _moved(rebalance.owners_at_start, self._groups[rebalance.group_id])
            rebalance.members = _members(self.state, rebalance.group_id)
        return sorted([*self.rebalances, *open_], key=lambda r: (r.group_id, r.number))

    @property
    def groups_seen(self) -> int:
        return len(self._groups)

    def group(self, group_id: str | None = None) -> ConnectGroup | None:
        return self.state.groups.get(group_id or self.group_id)

    def owners(self, group_id: str | None = None) -> dict[Item, str | None]:
        """Item -> the member holding it now (members joined with " & " if the log shows several)."""
        gh = self._groups.get(group_id or self.group_id)
        return {} if gh is None else _owners(gh)


def rebalance_json(r: Rebalance) -> dict[str, Any]:
    """A rebalance as `coordinator replay --format json` prints it and the audit's tables hold it."""
    return {
        "type": "rebalance",
        "group": r.group_id,
        "number": r.number,
        "from_epoch": r.from_epoch,
        "to_epoch": r.to_epoch,
        "causes": r.causes,
        "partition": r.start.partition,
        "start_offset": r.start.offset,
        "start_timestamp_ms": r.start.timestamp_ms,
        "installed_offset": r.installed.offset if r.installed else None,
        "installed_timestamp_ms": r.installed.timestamp_ms if r.installed else None,
        "end_offset": r.end.offset if r.end else None,
        "end_timestamp_ms": r.end.timestamp_ms if r.end else None,
        "duration_ms": r.duration_ms,
        "converged": r.end is not None,
        "members": r.members,
        "deferred": r.deferred,
        "revoked": r.revoked,
        "released": r.released,
        "assigned": r.assigned,
        "moved": [{"item": str(item), "from": a, "to": b} for item, a, b in r.moved],
    }


def interval_json(i: Interval) -> dict[str, Any]:
    """An ownership interval as `coordinator replay who-owned --format json` prints it and the
    audit's `ownership` table holds it."""
    return {
        "type": "interval",
        "group": i.group_id,
        "item": str(i.item),
        "member": i.member_id,
        "partition": i.start.partition,
        "from_offset": i.start.offset,
        "from_timestamp_ms": i.start.timestamp_ms,
        "to_offset": i.end.offset if i.end else None,
        "to_timestamp_ms": i.end.timestamp_ms if i.end else None,
        "given_at_epoch": i.start_epoch,
        "ended_by": i.ended_by,
    }


_KNOWN_TYPES = frozenset(RECORD_TYPES)


def group_key_prefix(group_id: str) -> bytes:
    """The bytes after the record type of every key of `group_id`: its Avro string (zig-zag varint
    length, then UTF-8). Every key type starts with the GroupId (records/schemas/Group*Key.avsc)."""
    data = group_id.encode()
    n = len(data) << 1  # zig-zag of a non-negative length
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + data


def _every_item(item: Item) -> bool:
    return True  # a function, not a lambda: a History is pickled as the audit's snapshot


_CONVERSION_ENDS = (ClassicGroupMetadataKey, ConnectGroupMetadataKey)  # with a value: the batch of a conversion ends


def _classic_only(state: CoordinatorState, group_id: str, group: ConnectGroup | None):  # noqa: ANN202
    """The classic group `group_id` is, when it is one (no connect members)."""
    classic = state.classic_groups.get(group_id)
    return classic if classic is not None and (group is None or not group.members) else None


def _converged(state: CoordinatorState, group_id: str, group: ConnectGroup | None) -> bool:
    classic = _classic_only(state, group_id, group)
    if classic is not None:
        return classic.state in (ClassicGroupState.STABLE, ClassicGroupState.EMPTY)
    return rebalance_converged(group)


def _members(state: CoordinatorState, group_id: str) -> int:
    group = state.groups.get(group_id)
    classic = _classic_only(state, group_id, group)
    if classic is not None:
        return len(classic.members)
    return 0 if group is None else len(group.members)


def _owner(held: dict[str, _Holding] | None) -> str | None:
    """Who holds an item: one member, or several joined with " & " where a log shows that."""
    if not held:
        return None
    return next(iter(held)) if len(held) == 1 else " & ".join(sorted(held))


def _owners(gh: _GroupHistory) -> dict[Item, str | None]:
    return {item: _owner(held) for item, held in gh.holders.items()}


def _holder(gh: _GroupHistory, item: Item) -> str | None:
    """Who holds an item, counting a holding a change of protocol is carrying over."""
    return _owner(gh.holders.get(item) or gh.handed.get(item))


def _moved(before: dict[Item, str | None], gh: _GroupHistory) -> list[tuple[Item, str | None, str | None]]:
    moved = []
    for item, was in before.items():
        now = _holder(gh, item)
        if now != was:
            moved.append((item, was, now))
    return sorted(moved, key=lambda m: ev.item_order(m[0]))


def _ended_by(e: Event) -> str:
    d = e.detail
    if d.get("handover"):
        return "moved to the other protocol's records"
    if e.kind == ev.RELEASED:
        # Why the member was removed, where its group's epoch record says (type 3 v1).
        return leave_reason_text(d["reason"]) if "reason" in d else "member left the group"
    if e.kind == ev.CLASSIC_MEMBER_LEFT:
        return "member left the classic group"
    if e.kind == ev.CLASSIC_MEMBER:
        if d.get("revoked_released"):
            return f"revoked (generation {e.epoch})"
        if not d.get("synced") and e.epoch != e.previous_epoch:
            return f"stopped to join generation {e.epoch}"
        return f"released (generation {e.epoch})"
    if e.kind == ev.MEMBER_EPOCH:
        return f"revoked (epoch {e.epoch})" if e.detail.get("revoked") else f"released (epoch {e.epoch})"
    if e.kind == ev.STATIC_LEAVE:
        return "released on a static leave"
    return e.kind
