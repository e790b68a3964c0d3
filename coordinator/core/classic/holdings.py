"""Who runs what in a classic group: the one rule, read from Kafka Connect's own bytes.

A classic group's record (type 2) holds, per member, its `subscription` (the JoinGroup metadata for
the group's chosen protocol: Connect's `WorkerState`/`ExtendedWorkerState`) and its `assignment`
(the leader's SyncGroup bytes for it, empty between the join completing and the leader's sync).
What the member runs follows from those two alone (`records.connect_protocol`):

| group protocol              | leader has synced (assignment present)         | not yet (join done, no sync) |
| --------------------------- | ---------------------------------------------- | ---------------------------- |
| `default` (v0, eager)       | the assignment's `Assigned`, all of it          | nothing: an eager worker     |
|                             |                                                | stops everything to join     |
| `compatible`, `sessioned`   | what it reported (`Owned`) minus `Revoked`,     | what it reported it runs     |
| (v1, v2, cooperative)       | plus `Assigned` (a delta)                      |                              |

Bytes that are not Connect's (a foreign client's, another dialect a previous release wrote), or a
protocol that is not one of Connect's, are never a failure here: the member is shown as running
nothing known, with a note saying why. Every surface (describe, the group page, `coordinator
replay`, the Spark audit) asks this module, so they all agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from records import ConnectorsAndTasks
from records.connect_protocol import (
    ConnectProtocolError,
    decode_assignment,
    decode_metadata,
    holdings,
    version_of,
)

from coordinator.core.classic.group import ClassicGroup, ClassicMember
from coordinator.core.items import connectors_and_tasks, items_of
from coordinator.core.states import ClassicGroupState

_NOTHING = ConnectorsAndTasks()


@dataclass(slots=True, frozen=True)
class ClassicHoldings:
    """What a classic member runs, and who it is, as its bytes say.

    `runs`: what it runs (empty, with `note`, when that cannot be known); `url` and `config_offset`:
    where its REST API listens and the config topic offset it had read to when it joined (None when
    the metadata cannot be read); `note`: why `runs` is not known, else None. `synced`: the leader's
    assignment of this generation is in; `assigned`, `revoked`, `leader`, `error`: that assignment's
    fields (`assigned` is everything for `default`, a delta for the cooperative protocols)."""

    runs: ConnectorsAndTasks
    url: str | None
    config_offset: int | None
    note: str | None = None
    synced: bool = False
    assigned: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)
    revoked: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)
    leader: str | None = None
    error: int = 0


def classic_member_holdings(group_protocol: str | None, subscription: bytes, assignment: bytes) -> ClassicHoldings:
    """What a member of a classic group runs: `group_protocol` is the group's chosen protocol,
    `subscription` the member's metadata for it, `assignment` the leader's bytes for it in this
    generation (empty: not synced yet). See the module docstring for the rule."""
    try:
        version = version_of(group_protocol)
    except ConnectProtocolError as e:
        what = (
            "no protocol chosen yet"
            if group_protocol is None
            else f"{e}: the group's protocol is not one of Kafka Connect's"
        )
        return ClassicHoldings(_NOTHING, None, None, f"{what}: what the member runs is not known")
    try:
        metadata = decode_metadata(subscription)
    except ConnectProtocolError as e:
        return ClassicHoldings(
            _NOTHING, None, None, f"its JoinGroup metadata cannot be read ({e}): what it runs is not known"
        )
    # An eager worker (v0) stopped everything before it joined; a cooperative one runs what it said.
    reported = metadata.owned if version > 0 else _NOTHING
    if not assignment:
        return ClassicHoldings(_sorted(reported), metadata.url, metadata.config_offset)
    try:
        given = decode_assignment(assignment)
    except ConnectProtocolError as e:
        return ClassicHoldings(
            _NOTHING,
            metadata.url,
            metadata.config_offset,
            f"its assignment cannot be read ({e}): what it runs is not known",
        )
    return ClassicHoldings(
        _sorted(holdings(reported, given)),
        metadata.url,
        metadata.config_offset,
        None,
        True,
        given.assigned,
        given.revoked,
        given.leader or None,
        given.error,
    )


def live_member_holdings(classic: ClassicGroup, m: ClassicMember) -> ClassicHoldings:
    """The rule over a live member rather than the record (describe, and an upgrade taking the
    members over): a member that has joined the round in progress has sent fresh metadata (what it
    runs now; an eager worker stopped everything), so its assignment of the last generation no longer
    applies; the record learns that when the join phase completes. When the member does not offer
    the group's protocol (none chosen yet, or a worker restarted with another connect.protocol), its
    first protocol's metadata says who it is and what it runs."""
    protocol = classic.protocol
    subscription = m.metadata(protocol)
    if not subscription and m.protocols:
        protocol, subscription = m.protocols[0].name, m.protocols[0].metadata
    fresh = classic.state == ClassicGroupState.PREPARING_REBALANCE and m.joined
    return classic_member_holdings(protocol, subscription, b"" if fresh else m.assignment)


def _sorted(items: ConnectorsAndTasks) -> ConnectorsAndTasks:
    """Each item once, in the order every view shows a set of work in."""
    return connectors_and_tasks(items_of(items))


def worker_identity(metadata: bytes) -> tuple[str | None, int | None]:
    """(url, config offset) of a worker's JoinGroup metadata, (None, None) when it cannot be read:
    for a classic member of a connect group, whose last JoinGroup the coordinator keeps."""
    try:
        m = decode_metadata(metadata)
    except ConnectProtocolError:
        return None, None
    return m.url, m.config_offset


__all__ = ["ClassicHoldings", "classic_member_holdings", "live_member_holdings", "worker_identity"]
