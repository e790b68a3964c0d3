"""A worker on the classic protocol, sans-I/O: Kafka Connect's `WorkerCoordinator` (seed 004).

`ClassicWorker` is to the classic protocol what `Member` is to the connect protocol: it never
sends or sleeps. `poll(now)` gives the actions to carry out and the request to send next (JoinGroup,
SyncGroup, a heartbeat, or none yet); `joined`, `synced` and `heartbeat_answered` turn the answers
into actions (`Revoke`, `Assign`, `Lose`, `GiveUp`, the same as `Member`'s).

The round, as a Connect worker runs it:

1. **Join** with Kafka Connect's protocols by preference (`sessioned`, `compatible`, `default`
   for `connect.protocol=sessioned`) and each one's metadata in Connect's own bytes
   (`records.connect_protocol`): where its REST API listens, the config offset, and (all but
   `default`) its last assignment with everything it runs in it. On `default` (eager) it first
   stops everything (Connect's onJoinPrepare).
2. The **leader** (the coordinator says who) computes everyone's assignment from the members'
   metadata and the group's connectors, as Connect's leader does for the chosen protocol, and
   remembers its result: the previous targets, work whose owner left and waits for it, and when to
   give that work out.
3. **Sync**: every member gets its assignment in Connect's bytes. On `default` `Assigned` is the
   whole set; on `compatible` and `sessioned` it is what is added, after the member stops `Revoked`
   (`holdings`), and `Delay` says when deferred work will be given out. An item another member
   still runs is never assigned in the same round: that member stops it and joins again at once,
   and the next round gives it out (Connect's two rounds).
4. **Heartbeat**; REBALANCE_IN_PROGRESS means join again (keeping the work, on the cooperative
   protocols); a member whose delay passes joins again too.

Errors: MEMBER_ID_REQUIRED joins again with the id given; UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION
lose everything and join again (with a new id, or the same); FENCED_INSTANCE_ID,
INCONSISTENT_GROUP_PROTOCOL and refusals no retry can change give up. A member that has had no
answer for its session timeout stops its work itself, as `Member` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from records import ConnectorsAndTasks, ConnectorTaskCount, DepartedMember
from records.connect_protocol import (
    DEFAULT,
    OFFERED,
    SESSIONED,
    ConnectProtocolError,
    WorkerAssignment,
    WorkerMetadata,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    holdings,
)

from coordinator.core.assignors import ASSIGNORS, AssignmentMember, GroupSpec, MemberAssignment
from coordinator.core.items import Item, connectors_and_tasks, items_of
from coordinator.core.member import RETRIABLE, Action, Assign, GiveUp, Lose, Revoke
from coordinator.core.protocol import (
    UNKNOWN_GENERATION,
    ClassicHeartbeatRequest,
    ClassicProtocol,
    ErrorCode,
    ErrorResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveMember,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)

PROTOCOL_TYPE = "connect"
# The assignor each of Connect's protocols runs at the leader.
LEADER_ASSIGNORS = {DEFAULT: "eager"}
COOPERATIVE_ASSIGNOR = "incremental_cooperative"
# After an answer that can be retried (the coordinator moving, loading), ask again this much later.
RETRY_BACKOFF_MS = 200

UNJOINED = "UNJOINED"
PREPARING_REBALANCE = "PREPARING_REBALANCE"  # our JoinGroup is out
COMPLETING_REBALANCE = "COMPLETING_REBALANCE"  # joined; our SyncGroup is due or out
STABLE = "STABLE"


@dataclass(slots=True)
class LeaderMemory:
    """What a leader remembers between its rounds (and a new leader does not know)."""

    targets: dict[str, ConnectorsAndTasks] = field(default_factory=dict)
    instances: dict[str, str | None] = field(default_factory=dict)
    departed: tuple[DepartedMember, ...] = ()
    deferred: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)
    scheduled_at_ms: int | None = None


class ClassicWorker:
    """One classic member of one group. See the module docstring."""

    def __init__(self, group_id: str, *, instance_id: str | None = None, connect_protocol: str = SESSIONED,
                 url: str | None = None, session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 60_000,
                 heartbeat_interval_ms: int = 3_000, scheduled_rebalance_max_delay_ms: int = 300_000,
                 config_offset: int = -1) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        if connect_protocol not in OFFERED:
            raise ValueError(f"connect_protocol must be one of Kafka Connect's ({', '.join(OFFERED)}), "
                             f"not {connect_protocol!r}")
        self.protocols = OFFERED[connect_protocol]  # Connect's connect.protocol: what it offers, by preference
        self.url = url or ""
        self.config_offset = config_offset
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.scheduled_rebalance_max_delay_ms = scheduled_rebalance_max_delay_ms
        self.member_id = ""
        self.generation = UNKNOWN_GENERATION
        self.protocol: str | None = None  # the one the coordinator chose for this generation
        self.leader: str | None = None
        self.state = UNJOINED
        self.owned: frozenset[Item] = frozenset()
        # Connect's assignment snapshot: the last assignment, with everything the worker runs in it,
        # which its JoinGroup metadata carries (None before a first assignment, and on `default`).
        self.snapshot: WorkerAssignment | None = None
        self.given_up: str | None = None
        self.memory = LeaderMemory()
        self._join_at_ms: int | None = 0  # join (again) once the clock reaches this
        self._sync_at_ms: int | None = None
        self._heartbeat_at_ms: int | None = None
        self._in_flight = False
        self._assignments: tuple[SyncGroupAssignment, ...] = ()  # the leader's, for its SyncGroup
        self._last_answer_ms: int | None = None  # the coordinator last answered a request sent then
        self._sent_ms = 0

    # --- what to send ---------------------------------------------------------------------------------

    @property
    def settled(self) -> bool:
        """In a generation with its assignment, and no rejoin waiting."""
        return self.state == STABLE and self._join_at_ms is None

    @property
    def is_leader(self) -> bool:
        return self.leader is not None and self.leader == self.member_id

    def poll(self, now: int
             ) -> tuple[list[Action], JoinGroupRequest | SyncGroupRequest | ClassicHeartbeatRequest | None]:
        """The actions due now, and the request to send now (None: nothing yet; ask `due`)."""
        if self.given_up is not None or self._in_flight:
            return [], None
        actions = self._self_fence(now)
        if self._join_at_ms is not None and now >= self._join_at_ms:
            if self.protocol == DEFAULT:
                actions += self._revoke(self.owned)  # Connect's eager onJoinPrepare: stop everything first
                self.snapshot = None
            self.state = PREPARING_REBALANCE
            return actions, self._sent(now, JoinGroupRequest(
                self.group_id, self.member_id, PROTOCOL_TYPE,
                tuple(ClassicProtocol(name, self._metadata(name)) for name in self.protocols), self.session_timeout_ms,
                self.rebalance_timeout_ms, self.instance_id))
        if self._sync_at_ms is not None and now >= self._sync_at_ms:
            return actions, self._sent(now, SyncGroupRequest(
                self.group_id, self.member_id, self.generation, self.instance_id, PROTOCOL_TYPE, self.protocol,
                self._assignments))
        if self._heartbeat_at_ms is not None and now >= self._heartbeat_at_ms:
            return actions, self._sent(now, ClassicHeartbeatRequest(self.group_id, self.member_id, self.generation,
                                                                    self.instance_id))
        return actions, None

    def due(self) -> int | None:
        """When `poll` next has something to send (None: only after an answer)."""
        if self.given_up is not None or self._in_flight:
            return None
        times = [t for t in (self._join_at_ms, self._sync_at_ms, self._heartbeat_at_ms) if t is not None]
        if self.owned and self._last_answer_ms is not None:
            times.append(self._last_answer_ms + self.session_timeout_ms)
        return min(times, default=None)

    def leave(self) -> tuple[list[Action], LeaveGroupRequest | None]:
        """Stop everything, then leave (None: not in the group)."""
        actions = self._revoke(self.owned)
        member_id, self.member_id = self.member_id, ""
        self._reset_generation()
        self._join_at_ms = None
        if not member_id:
            return actions, None
        return actions, LeaveGroupRequest(self.group_id, (LeaveMember(member_id, self.instance_id),))

    def _sent(self, now: int, request: object) -> object:
        self._in_flight = True
        self._sent_ms = now
        return request

    def _metadata(self, protocol: str) -> bytes:
        snapshot = self.snapshot
        if snapshot is not None and items_of(snapshot.assigned) != self.owned:
            snapshot = replace(snapshot, assigned=connectors_and_tasks(self.owned))  # lost or stopped since
        return encode_metadata(WorkerMetadata(self.url, self.config_offset, snapshot), protocol)

    # --- what came back -------------------------------------------------------------------------------

    def joined(self, response: JoinGroupResponse, now: int, connectors: Iterable[ConnectorTaskCount] = ()
               ) -> list[Action]:
        """The JoinGroup answer; the leader's assignments are computed here, from `connectors`."""
        code = self._answered(response.error_code, now)
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            self._join_at_ms = now
            return []
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            # Not now (a newer JoinGroup replaced this one, or the instance is still held): again soon.
            self.state = UNJOINED
            self._join_at_ms = now + RETRY_BACKOFF_MS
            return []
        if code != ErrorCode.NONE:
            return self._failed_round(code, response.error_message, now)
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.protocol = response.protocol_name
        self.leader = response.leader
        self.state = COMPLETING_REBALANCE
        self._join_at_ms = None
        self._heartbeat_at_ms = None
        self._sync_at_ms = now
        self._assignments = ()
        if self.is_leader and response.members and not response.skip_assignment:
            self._assignments = self._assign(response.members, tuple(connectors), now)
        return []

    def synced(self, response: SyncGroupResponse, now: int) -> list[Action]:
        code = self._answered(response.error_code, now)
        if code != ErrorCode.NONE:
            return self._failed_round(code, response.error_message, now)
        self._sync_at_ms = None
        self._assignments = ()
        try:
            assignment = decode_assignment(response.assignment) if response.assignment else WorkerAssignment(
                self.leader or "")
        except ConnectProtocolError as e:
            return self.refused(f"the leader's assignment cannot be read: {e}")
        self.state = STABLE
        self._heartbeat_at_ms = now + self.heartbeat_interval_ms
        # Connect's onJoinComplete: stop what is revoked, then run what the protocol's rule says.
        runs = items_of(holdings(connectors_and_tasks(self.owned), assignment))
        actions = self._revoke(self.owned - runs)
        added = runs - self.owned
        if added:
            self.owned |= added
            actions.append(Assign(connectors_and_tasks(added), MemberAssignment(connectors_and_tasks(self.owned))))
        if self.protocol != DEFAULT:
            self.snapshot = replace(assignment, assigned=connectors_and_tasks(self.owned))
        if assignment.revoked.connectors or assignment.revoked.tasks:
            self._join_at_ms = now  # stopped what another member waits for: the next round gives it out
        elif assignment.delay_ms > 0:
            self._join_at_ms = now + assignment.delay_ms  # deferred work is given out then
        return actions

    def heartbeat_answered(self, response: ErrorResponse, now: int) -> list[Action]:
        code = self._answered(response.error_code, now)
        if code == ErrorCode.NONE:
            self._heartbeat_at_ms = now + self.heartbeat_interval_ms
            return []
        return self._failed_round(code, response.error_message, now)

    def failed(self, now: int, reason: str) -> list[Action]:
        """A request got no answer (timed out, connection lost): ask again after a pause."""
        self._in_flight = False
        self._retry(now)
        return self._self_fence(now, reason)

    # --- inside -----------------------------------------------------------------------------------------

    def _answered(self, code: int, now: int) -> int:
        self._in_flight = False
        if code not in RETRIABLE:
            self._last_answer_ms = self._sent_ms
        return code

    def _failed_round(self, code: int, message: str | None, now: int) -> list[Action]:
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self._join_at_ms = now
            self._sync_at_ms = None
            self._heartbeat_at_ms = None
            self.state = UNJOINED
            return []
        if code in RETRIABLE:
            self._retry(now)
            return self._self_fence(now, f"{ErrorCode(code).name}: {message}")
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            # Our generation is gone: what we run may be given to others already.
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            actions = self._lose(f"{ErrorCode(code).name}: {message}")
            self._join_at_ms = now
            return actions
        return self.refused(f"{_name(code)}: {message}")

    def _retry(self, now: int) -> None:
        """Ask again later what was asked: a join, a sync (seed 004: a member whose SyncGroup failed
        over sends it again to the new coordinator), or a heartbeat."""
        for attribute in ("_join_at_ms", "_sync_at_ms", "_heartbeat_at_ms"):
            if getattr(self, attribute) is not None:
                setattr(self, attribute, now + RETRY_BACKOFF_MS)
                return
        self._heartbeat_at_ms = now + RETRY_BACKOFF_MS

    def _self_fence(self, now: int, reason: str = "no answer from the coordinator") -> list[Action]:
        if self.owned and self._last_answer_ms is not None and now >= self._last_answer_ms + self.session_timeout_ms:
            actions = self._lose(f"no answer for {now - self._last_answer_ms} ms (session timeout "
                                 f"{self.session_timeout_ms} ms): {reason}")
            self._join_at_ms = now
            return actions
        return []

    def _revoke(self, items: frozenset[Item]) -> list[Action]:
        if not items:
            return []
        self.owned -= items
        return [Revoke(connectors_and_tasks(items))]

    def _lose(self, reason: str) -> list[Action]:
        lost = self.owned
        self.owned = frozenset()
        self.snapshot = None
        self._reset_generation()
        return [Lose(connectors_and_tasks(lost), reason)] if lost else []

    def _reset_generation(self) -> None:
        self.generation = UNKNOWN_GENERATION
        self.state = UNJOINED
        self._sync_at_ms = None
        self._heartbeat_at_ms = None
        self._last_answer_ms = None

    def refused(self, reason: str) -> list[Action]:
        """An answer no retry can change, or a bug in the driver: lose everything and give up
        (as `Member.refused`)."""
        actions = self._lose(reason)
        self.given_up = reason
        self._join_at_ms = None
        actions.append(GiveUp(reason))
        return actions

    # --- the leader ---------------------------------------------------------------------------------------

    def _assign(self, members: tuple[JoinGroupMember, ...], connectors: tuple[ConnectorTaskCount, ...], now: int
                ) -> tuple[SyncGroupAssignment, ...]:
        """Everyone's assignment for this generation, by the chosen protocol's assignor."""
        owned: dict[str, frozenset[Item]] = {}
        offsets: dict[str, int] = {}
        for m in members:
            try:
                metadata = decode_metadata(m.metadata)
                owned[m.member_id] = items_of(metadata.owned)
                offsets[m.member_id] = metadata.config_offset
            except ConnectProtocolError:
                owned[m.member_id] = frozenset()  # unreadable: it is told to run what it is given
        memory = self.memory
        by_instance = {i: m for m, i in memory.instances.items() if i is not None}
        spec_members = []
        for m in sorted(members, key=lambda m: m.member_id):
            previous = memory.targets.get(m.member_id) or memory.targets.get(by_instance.get(m.instance_id or "", ""))
            spec_members.append(AssignmentMember(
                member_id=m.member_id, instance_id=m.instance_id, member_epoch=self.generation,
                target=previous if previous is not None else connectors_and_tasks(owned[m.member_id]),
                owned=connectors_and_tasks(owned[m.member_id])))
        present = {m.member_id for m in members} | {m.instance_id for m in members if m.instance_id}
        departed = {d.member_id: d for d in memory.departed}
        for member_id, target in memory.targets.items():
            if member_id not in present and memory.instances.get(member_id) not in present and (
                    target.connectors or target.tasks) and member_id not in departed:
                departed[member_id] = DepartedMember(member_id, memory.instances.get(member_id), target, now)
        spec = GroupSpec(self.group_id, self.generation, connectors, tuple(spec_members),
                         departed=tuple(d for d in departed.values()
                                        if d.member_id not in present and d.instance_id not in present),
                         deferred=memory.deferred, scheduled_rebalance_at_ms=memory.scheduled_at_ms,
                         scheduled_rebalance_max_delay_ms=self.scheduled_rebalance_max_delay_ms, now_ms=now)
        result = ASSIGNORS[LEADER_ASSIGNORS.get(self.protocol or "", COOPERATIVE_ASSIGNOR)].assign(spec)
        if result.error:
            targets = {m.member_id: owned[m.member_id] for m in members}  # keep everyone's work (seed 000)
            delay = 0
        else:
            targets = {m.member_id: items_of(result.members[m.member_id].assignment) if m.member_id in result.members
                       else frozenset() for m in members}
            deferred = items_of(result.deferred)
            memory.departed = tuple(replace(d, assignment=connectors_and_tasks(items_of(d.assignment) & deferred))
                                    for d in spec.departed if items_of(d.assignment) & deferred)
            memory.deferred = result.deferred
            delay = result.scheduled_rebalance_delay_ms or 0
            memory.scheduled_at_ms = now + delay if delay else None
        memory.targets = {m: connectors_and_tasks(t) for m, t in targets.items()}
        memory.instances = {m.member_id: m.instance_id for m in members}
        holder = {item: member_id for member_id, items in owned.items() for item in items}
        protocol = self.protocol or self.protocols[0]
        offset = max([self.config_offset, *offsets.values()])  # the leader reads the config from us: never behind
        assignments = []
        for m in members:
            mine, target = owned[m.member_id], targets[m.member_id]
            # Never given while another member still runs it: that one stops it and joins again.
            given = target & mine | {i for i in target - mine if holder.get(i, m.member_id) == m.member_id}
            # `default` says everything the member runs; the others only what it adds (Connect's delta).
            assigned = given if protocol == DEFAULT else given - mine
            assignments.append(SyncGroupAssignment(m.member_id, encode_assignment(WorkerAssignment(
                leader=self.member_id, leader_url=self.url, config_offset=offset,
                assigned=connectors_and_tasks(assigned), revoked=connectors_and_tasks(mine - target),
                delay_ms=delay), protocol)))
        return tuple(assignments)


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


__all__ = ["ClassicWorker", "LeaderMemory"]
