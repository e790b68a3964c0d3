"""A group on the classic protocol (seed 004): what the coordinator holds, and its record (type 2).

States, in Kafka's names and the seed's (`Initialize` is a partition loading, for every group at
once, so no group is ever in it; meanwhile the server answers as Kafka's coordinator does:
JoinGroup and LeaveGroup COORDINATOR_LOAD_IN_PROGRESS, SyncGroup REBALANCE_IN_PROGRESS, Heartbeat
NONE, the answers a Java member survives):

| state                 | seed 004  | what the coordinator waits for                                 |
| --------------------- | --------- | -------------------------------------------------------------- |
| `Empty`               | Down      | a first JoinGroup                                              |
| `PreparingRebalance`  | Joining   | a JoinGroup from every member, until the rebalance timeout     |
| `CompletingRebalance` | AwaitSync | the leader's SyncGroup with the assignments                    |
| `Stable`              | Stable    | heartbeats; a JoinGroup, a LeaveGroup or a session timeout     |

The group is an immutable value. A handler builds the next one and hands it to `replay` as a
`ClassicGroupUpdate` (volatile: the join round in progress, the members' full protocol lists),
together with the type 2 record whenever the change must survive a failover. The record holds
what seed 004 persists: the generation with its members and their metadata for the chosen
protocol (written when the join phase completes), their assignments (written when the leader's
SyncGroup arrives), and, since value v1, the state, so that a departure that started a rebalance,
or a leader that has not synced yet, is resumed by the next coordinator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from records import ClassicGroupMember, ClassicGroupMetadataValue
from records.connect_protocol import OFFERED, ConnectProtocolError, metadata_for

from coordinator.core.protocol import ClassicProtocol
from coordinator.core.states import ClassicGroupState, ClassicMemberState

_BY_VALUE = {s.value: s for s in ClassicGroupState}


@dataclass(slots=True, frozen=True)
class ClassicMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[ClassicProtocol, ...]  # by preference; after a load, the chosen one only
    assignment: bytes = b""  # what the leader gave it in this generation's SyncGroup
    joined: bool = False  # its JoinGroup for the rebalance in progress has arrived (and waits)
    synced: bool = False  # its SyncGroup for this generation has arrived (and waits for the leader's)
    # Joined in the round in progress (Kafka's `isNew`): its waiting JoinGroup does not keep it
    # alive; the new member join timeout removes it if the round takes that long.
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        return next((p.metadata for p in self.protocols if p.name == protocol), b"")

    def supports(self, names: set[str]) -> bool:
        return any(p.name in names for p in self.protocols)


def _frozen(members: Mapping[str, ClassicMember]) -> Mapping[str, ClassicMember]:
    return MappingProxyType(dict(members))


@dataclass(slots=True, frozen=True)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None  # the protocol chosen for this generation
    leader: str | None = None
    members: Mapping[str, ClassicMember] = field(default_factory=lambda: MappingProxyType({}))
    # Member ids handed out with MEMBER_ID_REQUIRED and not joined yet (Kafka's pendingMembers): a
    # join phase waits for them too, and they stay pending across it until they join, leave, or
    # their session times out.
    pending: frozenset[str] = frozenset()
    # The members of this generation that have not sent SyncGroup yet (Kafka's pendingSyncMembers):
    # those still missing when the sync deadline passes are removed, in Stable as in
    # CompletingRebalance.
    pending_sync: frozenset[str] = frozenset()
    join_deadline_ms: int | None = None  # PreparingRebalance ends by then with whoever joined
    # The first round of an empty group waits for more members (Kafka's
    # group.initial.rebalance.delay.ms), each join extending the wait up to the rebalance timeout.
    initial_round_started_ms: int | None = None
    record: ClassicGroupMetadataValue | None = None  # the last written type 2 value: the group's slot

    # --- reading -------------------------------------------------------------------------------

    def member_with_instance(self, instance_id: str) -> str | None:
        return next((m.member_id for m in self.members.values() if m.instance_id == instance_id), None)

    def rebalance_timeout_ms(self) -> int:
        """The join phase's bound: the longest rebalance timeout of the members (Kafka's)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        """Every member has joined the round, and no member id handed out is still to join."""
        return bool(self.members) and all(m.joined for m in self.members.values()) and not self.pending

    def downgraded(self) -> bool:
        """A group that a downgrade made and whose first classic round has not completed: its
        generation was never handed out (the downgrade writes no leader; a group that had one keeps
        one while it has members), so its members still carry their connect member epochs."""
        return self.state == ClassicGroupState.PREPARING_REBALANCE and self.leader is None and bool(self.members)

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        names: set[str] | None = None
        for member in self.members.values():
            mine = {p.name for p in member.protocols}
            names = mine if names is None else names & mine
        return names or set()

    def select_protocol(self) -> str | None:
        """Kafka's vote: each member votes for the first of its protocols that every member
        supports; the most votes win, ties going to the name first in sort order. While one old
        worker supports only the old protocol, the old one is chosen (seed 004's rolling upgrade)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            vote = next((p.name for p in member.protocols if p.name in candidates), None)
            if vote is not None:
                votes[vote] = votes.get(vote, 0) + 1
        if not votes:
            return None
        return min(votes, key=lambda name: (-votes[name], name))

    def member_state(self, member_id: str) -> ClassicMemberState:
        """Seed 000's worker state of a classic member."""
        member = self.members.get(member_id)
        if member is None:
            return ClassicMemberState.UNJOINED
        if self.state == ClassicGroupState.PREPARING_REBALANCE:
            return ClassicMemberState.PREPARING_REBALANCE if member.joined else ClassicMemberState.UNJOINED
        if self.state == ClassicGroupState.COMPLETING_REBALANCE:
            return ClassicMemberState.COMPLETING_REBALANCE
        return ClassicMemberState.STABLE

    # --- changing (returns a new group) ----------------------------------------------------------

    def with_members(self, members: Mapping[str, ClassicMember], **changes: object) -> ClassicGroup:
        return replace(self, members=_frozen(members), **changes)

    def to_record(self, now: int) -> ClassicGroupMetadataValue:
        """The type 2 value of this group as it stands."""
        return ClassicGroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol,
            leader=self.leader,
            current_state_timestamp_ms=now,
            members=tuple(
                ClassicGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol),
                    assignment=m.assignment,
                )
                for m in sorted(self.members.values(), key=lambda m: m.member_id)
            ),
            state=self.state,
        )


def from_record(group_id: str, value: ClassicGroupMetadataValue) -> ClassicGroup:
    """The group a coordinator resumes from its record: nobody has joined a round yet (nor, in
    CompletingRebalance, synced), members offer the chosen protocol only (Kafka's loading too), no
    member id handed out is pending. A v0 record has no state: Stable with members (Kafka's
    reading), Empty without."""
    members = {
        m.member_id: ClassicMember(
            member_id=m.member_id,
            instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            protocols=_offered(value.protocol, m.subscription),
            assignment=m.assignment,
        )
        for m in value.members
    }
    known = value.state in _BY_VALUE
    state = _BY_VALUE[value.state] if known else (ClassicGroupState.STABLE if members else ClassicGroupState.EMPTY)
    if not members:
        state = ClassicGroupState.EMPTY
    return ClassicGroup(
        group_id=group_id,
        state=state,
        generation=value.generation,
        protocol_type=value.protocol_type or None,
        protocol=value.protocol,
        leader=value.leader if value.leader in members else None,
        members=_frozen(members),
        pending_sync=frozenset(members) if state == ClassicGroupState.COMPLETING_REBALANCE else frozenset(),
        record=value,
    )


def _offered(protocol: str | None, subscription: bytes) -> tuple[ClassicProtocol, ...]:
    """What a member of a loaded group offers: the record keeps the chosen protocol's metadata only
    (as Kafka's). A Kafka Connect worker on one of Connect's protocols offers the lower ones too
    (`connect.protocol=sessioned` offers compatible and default), with the same metadata in their
    bytes, so a worker that joins after a failover with fewer protocols still finds a common one."""
    if protocol is None:
        return ()
    chosen = ClassicProtocol(protocol, subscription)
    if protocol not in OFFERED:
        return (chosen,)
    try:
        return (chosen, *(ClassicProtocol(p, metadata_for(subscription, p)) for p in OFFERED[protocol][1:]))
    except ConnectProtocolError:
        return (chosen,)  # not Connect's bytes: only what the record says


@dataclass(slots=True, frozen=True)
class ClassicGroupUpdate:
    """A volatile change: the classic group as a handler left it (None: it no longer exists)."""

    group_id: str
    group: ClassicGroup | None
