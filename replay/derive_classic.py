"""What a classic group's record (type 2) meant: its generation, state and members, and per member
what it runs by Kafka Connect's rule over its bytes (`coordinator.core.classic.holdings`).

`replay.derive` calls `classic_group` with a record's slot before and after it, as it calls its
own functions for the connect protocol's records (see its docstring for the rule): a member joined,
left, joined a new generation, was assigned or revoked work; the group converted to the connect
protocol (its classic record deleted while it had members: the connect join that follows converted
it) or back (a classic record right after the connect group's epoch was deleted).
"""

from __future__ import annotations

from typing import Any

from records import ClassicGroupMetadataValue

from coordinator.core.classic.holdings import ClassicHoldings, classic_member_holdings
from coordinator.core.items import Item, items_of
from replay.events import (
    CLASSIC_GROUP,
    CLASSIC_MEMBER,
    CLASSIC_MEMBER_JOINED,
    CLASSIC_MEMBER_LEFT,
    CONVERTED,
    NOTHING,
    Event,
)
from replay.positions import Position


def classic_group(track, key, before, after, group, at):  # noqa: ANN001, ANN202
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
            detail = {"instance_id": old[0].group_instance_id, "generation": after.generation, "runs": _runs(old)}
            first.append(
                Event(
                    at,
                    g,
                    CLASSIC_MEMBER_LEFT,
                    member_id,
                    previous_epoch=previous_generation,
                    released=released,
                    detail=detail,
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
        elif not gained and not released and previous_generation == after.generation and _same(old, new):
            continue
        else:
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


def _same(old: tuple, new: tuple) -> bool:
    """A classic member's entry that says nothing new: same sync, note and assignment bytes."""
    return old[1].synced == new[1].synced and old[1].note == new[1].note and old[0].assignment == new[0].assignment


def _classic_detail(
    after: ClassicGroupMetadataValue, member: object, held: ClassicHoldings, released: frozenset[Item]
) -> dict[str, Any]:
    revoked = items_of(held.revoked)
    return {
        "instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.session_timeout_ms,  # its JoinGroup's: a re-run's settings (replay.whatif)
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
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
