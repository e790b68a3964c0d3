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
   metadata and the group's connectors exactly as Connect's leader does for the chosen protocol
   (`coordinator.core.assignors.connect_leader`: Connect's EagerAssignor and
   IncrementalCooperativeAssignor, checked against Connect's own classes), and remembers what
   Connect's leader remembers: the previous assignment, lost work and its scheduled delay.
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
from dataclasses import replace

from records import ConnectorsAndTasks, ConnectorTaskCount
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

from coordinator.core.assignors import MemberAssignment
from coordinator.core.assignors.connect_leader import ConfigSnapshot, ConnectLeaderAssignor
from coordinator.core.items import Item, configured_work, connectors_and_tasks, items_of
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
from coordinator.core.states import CLASSIC_MEMBER_PREVIOUS, ClassicMemberState, check_transition
from coordinator.core.worker.member import RETRIABLE, Action, Assign, GiveUp, Lose, Revoke

PROTOCOL_TYPE = "connect"
# After an answer that can be retried (the coordinator moving, loading), ask again this much later.
RETRY_BACKOFF_MS = 200


class ClassicWorker:
    """One classic member of one group. See the module docstring."""

    def __init__(
        self,
        group_id: str,
        *,
        instance_id: str | None = None,
        connect_protocol: str = SESSIONED,
        url: str | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 60_000,
        heartbeat_interval_ms: int = 3_000,
        scheduled_rebalance_max_delay_ms: int = 300_000,
        config_offset: int = -1,
    ) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        if connect_protocol not in OFFERED:
            raise ValueError(
                f"connect_protocol must be one of Kafka Connect's ({', '.join(OFFERED)}), not {connect_protocol!r}"
            )
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
        self.state = ClassicMemberState.UNJOINED
        self.owned: frozenset[Item] = frozenset()
        # Connect's assignment snapshot: the last assignment, with everything the worker runs in it,
        # which its JoinGroup metadata carries (None before a first assignment, and on `default`).
        self.snapshot: WorkerAssignment | None = None
        self.given_up: str | None = None
        # Connect's leader keeps its assignor's memory across the rounds it leads (lost work and its
        # deadline, the previous assignment); a new process, or another leader, starts without it.
        self.assignor = ConnectLeaderAssignor(scheduled_rebalance_max_delay_ms)
        self._last_completed_generation = UNKNOWN_GENERATION  # Connect's lastCompletedGenerationId
        self._join_at_ms: int | None = 0  # join (again) once the clock reaches this
        self._sync_at_ms: int | None = None
        self._heartbeat_at_ms: int | None = None
        self._in_flight = False
        self._assignments: tuple[SyncGroupAssignment, ...] = ()  # the leader's, for its SyncGroup
        self._last_answer_ms: int | None = None  # the coordinator last answered a request sent then
        self._sent_ms = 0

    # --- what to send ---------------------------------------------------------------------------------

    def _enter(self, state: ClassicMemberState) -> None:
        """The one place the worker changes state: only along `CLASSIC_MEMBER_PREVIOUS`."""
        check_transition(CLASSIC_MEMBER_PREVIOUS, self.state, state, f"classic worker {self.member_id or '(no id)'}")
        self.state = state

    @property
    def settled(self) -> bool:
        """In a generation with its assignment, and no rejoin waiting."""
        return self.state is ClassicMemberState.STABLE and self._join_at_ms is None

    @property
    def is_leader(self) -> bool:
        return self.leader is not None and self.leader == self.member_id

    def poll(
        self, now: int
    ) -> tuple[list[Action], JoinGroupRequest | SyncGroupRequest | ClassicHeartbeatRequest | None]:
        """The actions due now, and the request to send now (None: nothing yet; ask `due`)."""
        if self.given_up is not None or self._in_flight:
            return [], None
        actions = self._self_fence(now)
        if self._join_at_ms is not None and now >= self._join_at_ms:
            if self.protocol == DEFAULT:
                actions += self._revoke(self.owned)  # Connect's eager onJoinPrepare: stop everything first
                self.snapshot = None
            self._enter(ClassicMemberState.PREPARING_REBALANCE)
            return actions, self._sent(
                now,
                JoinGroupRequest(
                    group_id=self.group_id,
                    member_id=self.member_id,
                    protocol_type=PROTOCOL_TYPE,
                    protocols=tuple(ClassicProtocol(name, self._metadata(name)) for name in self.protocols),
                    session_timeout_ms=self.session_timeout_ms,
                    rebalance_timeout_ms=self.rebalance_timeout_ms,
                    instance_id=self.instance_id,
                ),
            )
        if self._sync_at_ms is not None and now >= self._sync_at_ms:
            return actions, self._sent(
                now,
                SyncGroupRequest(
                    self.group_id,
                    self.member_id,
                    self.generation,
                    self.instance_id,
                    PROTOCOL_TYPE,
                    self.protocol,
                    self._assignments,
                ),
            )
        if self._heartbeat_at_ms is not None and now >= self._heartbeat_at_ms:
            return actions, self._sent(
                now, ClassicHeartbeatRequest(self.group_id, self.member_id, self.generation, self.instance_id)
            )
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
            snapshot = replace(snapshot, assigned=_in_order(snapshot.assigned, self.owned))  # lost or stopped since
        return encode_metadata(WorkerMetadata(self.url, self.config_offset, snapshot), protocol)

    # --- what came back -------------------------------------------------------------------------------

    def joined(
        self, response: JoinGroupResponse, now: int, connectors: Iterable[ConnectorTaskCount] = ()
    ) -> list[Action]:
        """The JoinGroup answer; the leader's assignments are computed here, from `connectors`."""
        code = self._answered(response.error_code, now)
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            self._join_at_ms = now
            return []
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            # Not now (a newer JoinGroup replaced this one, or the instance is still held): again soon.
            self._enter(ClassicMemberState.UNJOINED)
            self._join_at_ms = now + RETRY_BACKOFF_MS
            return []
        if code != ErrorCode.NONE:
            return self._failed_round(code, response.error_message, now)
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.protocol = response.protocol_name
        self.leader = response.leader
        self._enter(ClassicMemberState.COMPLETING_REBALANCE)
        self._join_at_ms = None
        self._heartbeat_at_ms = None
        self._sync_at_ms = now
        self._assignments = ()
        if self.is_leader and response.members and not response.skip_assignment:
            self._assignments = self._assign(response.members, tuple(connectors), now)
        return []

    def synced(
        self, response: SyncGroupResponse, now: int, connectors: Iterable[ConnectorTaskCount] | None = None
    ) -> list[Action]:
        """The SyncGroup answer. `connectors`, when known, is the group's configuration: a Connect
        worker stops on its own what its config topic no longer has (DistributedHerder's config
        updates), which Connect's assignor does not revoke when it does not remember having given it."""
        code = self._answered(response.error_code, now)
        if code != ErrorCode.NONE:
            return self._failed_round(code, response.error_message, now)
        self._sync_at_ms = None
        self._assignments = ()
        try:
            assignment = (
                decode_assignment(response.assignment) if response.assignment else WorkerAssignment(self.leader or "")
            )
        except ConnectProtocolError as e:
            return self.refused(f"the leader's assignment cannot be read: {e}")
        self._enter(ClassicMemberState.STABLE)
        self._heartbeat_at_ms = now + self.heartbeat_interval_ms
        # Connect's onJoinComplete: stop what is revoked, then run what the protocol's rule says.
        runs = items_of(holdings(connectors_and_tasks(self.owned), assignment))
        if connectors is not None:
            runs &= configured_work(tuple(connectors)).items
        actions = self._revoke(self.owned - runs)
        added = runs - self.owned
        if added:
            self.owned |= added
            actions.append(Assign(connectors_and_tasks(added), MemberAssignment(connectors_and_tasks(self.owned))))
        if self.protocol != DEFAULT:
            # Connect's onJoinComplete: the new assignment's items, then the last snapshot's not
            # revoked, in that order, which the next JoinGroup reports (Connect's leader revokes the
            # first items a member reported when it balances: the ones it was given last).
            before = self.snapshot.assigned if self.snapshot is not None else connectors_and_tasks(())
            order = ConnectorsAndTasks(
                assignment.assigned.connectors + before.connectors, assignment.assigned.tasks + before.tasks
            )
            self.snapshot = replace(assignment, assigned=_in_order(order, self.owned))
        self._last_completed_generation = self.generation
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

    def heartbeats_answered_before(self, until_ms: int) -> tuple[int, int | None]:
        """Take the heartbeats due before `until_ms` as sent and answered with nothing new (a stable
        group's answer, which changes nothing but the clocks): its schedule and its session clock
        move on as if they had been. How many that was, and when the last was sent (a driver
        skipping a quiet stretch)."""
        due = self._heartbeat_at_ms
        if due is None or self._in_flight or self.state is not ClassicMemberState.STABLE or due >= until_ms:
            return 0, None
        count = -(-(until_ms - due) // self.heartbeat_interval_ms)
        self._last_answer_ms = due + (count - 1) * self.heartbeat_interval_ms
        self._heartbeat_at_ms = due + count * self.heartbeat_interval_ms
        return count, self._last_answer_ms

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
            self._enter(ClassicMemberState.UNJOINED)
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
            actions = self._lose(
                f"no answer for {now - self._last_answer_ms} ms (session timeout "
                f"{self.session_timeout_ms} ms): {reason}"
            )
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
        self._enter(ClassicMemberState.UNJOINED)
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

    def _assign(
        self, members: tuple[JoinGroupMember, ...], connectors: tuple[ConnectorTaskCount, ...], now: int
    ) -> tuple[SyncGroupAssignment, ...]:
        """Everyone's assignment for this generation, as Connect's leader computes it for the chosen
        protocol (`ConnectLeaderAssignor`). The connectors come from the coordinator, so the leader is
        never behind a member's config offset: its snapshot is at the highest one reported."""
        metadata: dict[str, WorkerMetadata] = {}
        for m in members:
            try:
                metadata[m.member_id] = decode_metadata(m.metadata)
            except ConnectProtocolError:
                metadata[m.member_id] = WorkerMetadata()  # unreadable: it is told to run what it is given
        offset = max([self.config_offset, *(m.config_offset for m in metadata.values())])
        protocol = self.protocol or self.protocols[0]
        config = ConfigSnapshot(offset, {c.name: c.tasks for c in connectors})
        given = self.assignor.assign(
            protocol,
            self.member_id,
            metadata,
            config,
            generation=self.generation,
            last_completed_generation=self._last_completed_generation,
            now_ms=now,
        )
        return tuple(SyncGroupAssignment(member_id, encode_assignment(a, protocol)) for member_id, a in given.items())


def _in_order(order: ConnectorsAndTasks, items: frozenset[Item]) -> ConnectorsAndTasks:
    """`items` in `order`'s order (each once), any not in it after them, sorted."""
    listed = [*order.connectors, *order.tasks]
    ordered = list(dict.fromkeys(i for i in listed if i in items))
    rest = connectors_and_tasks(items - set(ordered))
    connectors = [i for i in ordered if isinstance(i, str)] + list(rest.connectors)
    tasks = [i for i in ordered if not isinstance(i, str)] + list(rest.tasks)
    return ConnectorsAndTasks(tuple(connectors), tuple(tasks))


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


__all__ = ["ClassicWorker"]
