"""The connect group coordinator's handlers: the protocol of seed 000, sans-I/O (DESIGN §3, §5).

The rule of this module
-----------------------
Every handler is a function of (state, request, now) that returns a `Result`: the records that
express the change, the response to send once those records are durable, and the timers to arm or
cancel. A handler never changes the state; the runtime applies `Result.records` (and the volatile
updates) through `CoordinatorState.replay`, which is also how a coordinator that takes over a
partition rebuilds the same state from the topic. There is no clock here: `now` is an argument.

Theory of operation: three epochs
---------------------------------
- The **group epoch** (type 3) is the version of the group's metadata: members, their assignors,
  the connectors and tasks to run. Every change of it is written with the epoch bumped by one.
- The **assignment epoch** (type 6) is the group epoch the target assignment was computed from.
  Whenever group epoch > assignment epoch a new target is needed: a server-side assignor computes it
  inside the handler that bumped the epoch; otherwise a member is chosen and told so with
  COMPUTE_ASSIGNMENT in its next heartbeat response, prepares (PrepareAssignment), computes and
  installs (InstallAssignment). The install is checked against the group metadata it was computed
  from; a target for an epoch the group has since left behind is still installed (it is progress)
  and the next one is asked for at once.
- The **member epoch** (type 8) is the assignment epoch a member has reconciled to. Members move
  independently, each on its own heartbeats; `coordinator.core.reconciliation` says how, revoking before
  assigning so that no item is ever held by two members.

Departed work. A member that leaves (or is fenced) while its target holds work has that work
recorded in the target metadata as a `DepartedMember` (persisted, so a failover keeps it). The
incremental cooperative assignor defers it for `scheduled.rebalance.max.delay.ms` and gives it back
at once if the member returns (by member id or InstanceId); the deadline it asks for is persisted
too, and the scheduled-rebalance timer bumps the group epoch when it passes (DESIGN §5).

Timers are handlers too (`on_timer`); the runtime owns the clocks and only tells us which key fired.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from records import (
    ConnectorsAndTasks,
    ConnectorTaskCount,
    CurrentMemberAssignmentValue,
    DepartedMember,
    GroupConfigurationValue,
    MemberMetadataValue,
    Record,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
)

from coordinator.core import record_helpers
from coordinator.core.assignors import (
    ASSIGNORS,
    AssignmentMember,
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
)
from coordinator.core.items import EMPTY, Item, configured_work, connectors_and_tasks, describe, items_of
from coordinator.core.protocol import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    DeleteGroupRequest,
    ErrorCode,
    ErrorResponse,
    GroupDescription,
    GroupListing,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallAssignmentRequest,
    MemberDescription,
    NO_CONTEXT,
    MemberState,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    RequestContext,
    Result,
    SetConfigRequest,
    SetConnectorsRequest,
    Timer,
    TimerKey,
)
from coordinator.core.reconciliation import next_current
from coordinator.core.selection import (
    CLIENT,
    SERVER,
    GroupAssignor,
    assignor_conflict,
    choose_member,
    entry,
    group_assignor,
)
from coordinator.core.state import (
    NEW_MEMBER_CURRENT,
    AssignmentComputation,
    AssignmentComputationUpdate,
    ConnectGroup,
    CoordinatorState,
    ServerAssignmentWindow,
    held_items,
)

SESSION = "session"
REBALANCE = "rebalance"
ASSIGNMENT = "assignment"  # the chosen member's deadline to install (client-side)
SERVER_ASSIGNMENT = "server-assignment"  # the end of a server-side assignor's interval
SCHEDULED_REBALANCE = "scheduled-rebalance"
ASSIGNMENT_RETRY = "assignment-retry"

MAX_TASKS_PER_CONNECTOR = 100_000


@dataclass(slots=True, frozen=True)
class CoordinatorConfig:
    """Server defaults; a group's type 9 record overrides each (DESIGN §5: Kafka Connect's defaults)."""

    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    # None: each member's own RebalanceTimeoutMs from its heartbeat (the seed's rule).
    rebalance_timeout_ms: int | None = None
    scheduled_rebalance_max_delay_ms: int = 300_000
    default_server_assignor: str = "incremental_cooperative"
    # After an assignor error the group keeps its assignment; ask again this much later.
    assignor_error_backoff_ms: int = 5_000
    # A server-side assignor runs at most once per this interval per group: the changes of a
    # burst (a rolling restart, a join storm) are assigned together. 0 computes on every change.
    server_assignment_interval_ms: int = 1_000
    # The smallest timeout a group may configure: small enough for tests and demos.
    min_timeout_ms: int = 100


def _timer(kind: str, group_id: str, member_id: str | None = None) -> TimerKey:
    return (kind, group_id) if member_id is None else (kind, group_id, member_id)


_UNSET = object()


class _Txn:
    """A handler's pending changes to one group. Reads see them; nothing touches the state.

    `records()` lists the changes once each, in a fixed order that reads well in the topic: group
    configuration and metadata first (members, connectors, epoch), then the target (members, then
    its metadata), then current assignments.
    """

    __slots__ = ("group", "epoch", "connectors", "config", "target_metadata", "members", "targets", "currents",
                 "computation", "server_window", "timers", "_held")

    def __init__(self, group: ConnectGroup) -> None:
        self.group = group
        self.epoch: int | None = None
        self.connectors = _UNSET
        self.config = _UNSET
        self.target_metadata = _UNSET
        self.members: dict[str, MemberMetadataValue | None] = {}
        self.targets: dict[str, TargetAssignmentMemberValue | None] = {}
        self.currents: dict[str, CurrentMemberAssignmentValue | None] = {}
        self.computation = _UNSET
        self.server_window: int | None = None
        self.timers: list[Timer] = []
        self._held: dict[str, frozenset[Item]] = {}

    # --- reads -----------------------------------------------------------------------------------

    @property
    def group_epoch(self) -> int:
        return self.group.group_epoch if self.epoch is None else self.epoch

    def bump(self) -> None:
        """The group metadata changed: one new group epoch per handler, however many changes."""
        if self.epoch is None:
            self.epoch = self.group.group_epoch + 1

    def target_meta(self) -> TargetAssignmentMetadataValue | None:
        return self.group.target_metadata if self.target_metadata is _UNSET else self.target_metadata

    @property
    def assignment_epoch(self) -> int:
        value = self.target_meta()
        return 0 if value is None else value.assignment_epoch

    def connector_counts(self) -> tuple[ConnectorTaskCount, ...]:
        if self.connectors is _UNSET:
            return self.group.connector_counts
        return self.connectors

    def member(self, member_id: str) -> MemberMetadataValue | None:
        members = self.members
        return members[member_id] if member_id in members else self.group.members.get(member_id)

    def all_members(self) -> dict[str, MemberMetadataValue]:
        if not self.members:
            return self.group.members
        merged = dict(self.group.members)
        for member_id, value in self.members.items():
            if value is None:
                merged.pop(member_id, None)
            else:
                merged[member_id] = value
        return merged

    def target(self, member_id: str) -> TargetAssignmentMemberValue | None:
        targets = self.targets
        return targets[member_id] if member_id in targets else self.group.targets.get(member_id)

    def current(self, member_id: str) -> CurrentMemberAssignmentValue:
        if member_id in self.currents:
            return self.currents[member_id] or NEW_MEMBER_CURRENT
        return self.group.current(member_id)

    def held_by_other(self, item: Item, member_id: str) -> bool:
        """Whether a member other than `member_id` holds `item` (owned or pending revocation)."""
        for other, held in self._held.items():
            if other != member_id and item in held:
                return True
        owner = self.group.owners().get(item)
        return owner is not None and owner != member_id and owner not in self.currents

    def server_assignment_not_before(self) -> int:
        return self.group.server_assignment_not_before_ms if self.server_window is None else self.server_window

    def current_computation(self) -> AssignmentComputation | None:
        return self.group.computation if self.computation is _UNSET else self.computation

    # --- writes ----------------------------------------------------------------------------------

    def set_member(self, member_id: str, value: MemberMetadataValue | None) -> None:
        self.members[member_id] = value

    def set_target(self, member_id: str, value: TargetAssignmentMemberValue | None) -> None:
        self.targets[member_id] = value

    def set_current(self, member_id: str, value: CurrentMemberAssignmentValue | None) -> None:
        self.currents[member_id] = value
        self._held[member_id] = frozenset() if value is None else held_items(value)

    def remove_member(self, member_id: str) -> None:
        self.set_member(member_id, None)
        self.set_target(member_id, None)
        self.set_current(member_id, None)
        self.timers.append(Timer(_timer(SESSION, self.group.group_id, member_id), None))
        self.timers.append(Timer(_timer(REBALANCE, self.group.group_id, member_id), None))
        self.release_computation(member_id)

    def release_computation(self, member_id: str) -> None:
        """A member that leaves, for good or for a while, no longer computes the target."""
        computation = self.current_computation()
        if computation is not None and computation.member_id == member_id:
            self.computation = None

    def records(self) -> list[Record]:
        g = self.group.group_id
        group = self.group
        out: list[Record] = []
        if self.config is not _UNSET:
            out.append(record_helpers.configuration(g, self.config))
        for member_id, value in self.members.items():
            if value is not None or member_id in group.members:
                out.append(record_helpers.member_metadata(g, member_id, value))
        if self.connectors is not _UNSET:
            out.append(record_helpers.connectors(g, self.connectors))
        if self.epoch is not None:
            out.append(record_helpers.group_epoch(g, self.epoch))
        for member_id, value in self.targets.items():
            if value is not None or member_id in group.targets:
                out.append(record_helpers.target_member(g, member_id, value))
        if self.target_metadata is not _UNSET:
            out.append(record_helpers.target_metadata(g, self.target_metadata))
        for member_id, value in self.currents.items():
            if value is not None or member_id in group.currents:
                out.append(record_helpers.current_assignment(g, member_id, value))
        return out

    def result(self, response: object) -> Result:
        volatile = []
        if self.computation is not _UNSET and self.computation != self.group.computation:
            volatile.append(AssignmentComputationUpdate(self.group.group_id, self.computation))
        if self.server_window is not None:
            volatile.append(ServerAssignmentWindow(self.group.group_id, self.server_window))
        return Result(response, self.records(), self.timers, volatile)


# --- request validation (seed 000 "Request Validation", and seed 003 where it adds rules) ---------


def _heartbeat_problem(r: HeartbeatRequest) -> str | None:
    if not r.group_id:
        return "GroupId must be non-empty"
    if not r.member_id:
        return "MemberId must be non-empty"
    if r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return f"MemberEpoch must be >= {LEAVE_GROUP_STATIC_MEMBER_EPOCH}, got {r.member_epoch}"
    if r.instance_id is not None and not r.instance_id:
        return "InstanceId, if provided, must be non-empty"
    if r.rebalance_timeout_ms == 0 or r.rebalance_timeout_ms < -1:
        return f"RebalanceTimeoutMs must be -1 (unchanged) or larger than zero, got {r.rebalance_timeout_ms}"
    if r.server_assignor is not None and r.client_assignors:
        return "ServerAssignor and ClientAssignors cannot be used together"
    if r.server_assignor is not None and not r.server_assignor:
        return "ServerAssignor, if provided, must be non-empty"
    for a in r.client_assignors or ():
        if not a.name:
            return "Assignor.Name must be non-empty"
        if a.minimum_version < -1:
            return f"Assignor.MinimumVersion must be >= -1 (assignor {a.name!r})"
        if a.maximum_version < 0 or a.maximum_version < a.minimum_version:
            return f"Assignor.MaximumVersion must be >= 0 and >= Assignor.MinimumVersion (assignor {a.name!r})"
        if not a.minimum_version <= a.version <= a.maximum_version:
            return f"Assignor.Version must be within [MinimumVersion, MaximumVersion] (assignor {a.name!r})"
    if r.client_assignors and len({a.name for a in r.client_assignors}) != len(r.client_assignors):
        return "ClientAssignors must not name an assignor twice"
    if r.topic_partitions is not None:
        return "TopicPartitions and ConnectorsAndTasks cannot be used together: a connect member owns connectors and tasks"
    if r.owned is not None:
        return _items_problem(r.owned, "ConnectorsAndTasks")
    return None


def _items_problem(value: ConnectorsAndTasks, field: str) -> str | None:
    if any(not c for c in value.connectors) or any(not t.connector for t in value.tasks):
        return f"{field}: connector names must be non-empty"
    if any(t.task < 0 for t in value.tasks):
        return f"{field}: task numbers start at 0"
    if len(set(value.connectors)) != len(value.connectors) or len(set(value.tasks)) != len(value.tasks):
        return f"{field} lists an item twice"
    return None


def _member_request_problem(group_id: str, member_id: str, member_epoch: int) -> str | None:
    if not group_id:
        return "GroupId must be non-empty"
    if not member_id:
        return "MemberId must be non-empty"
    if member_epoch < 0:
        return f"MemberEpoch must be >= 0, got {member_epoch}"
    return None


def _install_problem(r: InstallAssignmentRequest) -> str | None:
    problem = _member_request_problem(r.group_id, r.member_id, r.member_epoch)
    if problem:
        return problem
    if r.group_epoch < 0:
        return f"GroupEpoch must be >= 0, got {r.group_epoch}"
    seen = set()
    for m in r.members:
        if not m.member_id:
            return "Members[].MemberId must be non-empty"
        if m.member_id in seen:
            return f"member {m.member_id} is listed twice"
        seen.add(m.member_id)
        if m.topic_partitions is not None or m.assignment is None:
            return f"member {m.member_id}: ConnectorsAndTasks must be set, and Partitions must not be"
        problem = _items_problem(m.assignment.assignment, f"member {m.member_id}")
        if problem:
            return problem
    if r.scheduled_rebalance_delay_ms is not None and r.scheduled_rebalance_delay_ms < 0:
        return "ScheduledRebalanceDelayMs must be >= 0"
    return _items_problem(r.deferred, "Deferred")


# --- the coordinator ------------------------------------------------------------------------------


class GroupCoordinator:
    """The handlers over one partition's `CoordinatorState`. See the module docstring."""

    def __init__(self, state: CoordinatorState | None = None, config: CoordinatorConfig | None = None) -> None:
        self.state = state if state is not None else CoordinatorState()
        self.config = config if config is not None else CoordinatorConfig()

    def apply(self, result: Result) -> Result:
        """Apply a handler's records and volatile updates to the state (what the runtime does)."""
        replay = self.state.replay
        for record in result.records:
            replay(record)
        for update in result.volatile:
            replay(update)
        return result

    # --- group settings --------------------------------------------------------------------------

    def _setting(self, group: ConnectGroup, name: str) -> int:
        if group.config is not None:
            value = getattr(group.config, name)
            if value is not None:
                return value
        return getattr(self.config, name)

    def session_timeout_ms(self, group: ConnectGroup) -> int:
        return self._setting(group, "session_timeout_ms")

    def heartbeat_interval_ms(self, group: ConnectGroup) -> int:
        return self._setting(group, "heartbeat_interval_ms")

    def scheduled_rebalance_max_delay_ms(self, group: ConnectGroup) -> int:
        return self._setting(group, "scheduled_rebalance_max_delay_ms")

    def rebalance_timeout_ms(self, group: ConnectGroup, member: MemberMetadataValue) -> int:
        """How long a member may take to revoke, or to compute an assignment: the group's setting
        when an operator set one, else what the member asked for in its heartbeat (seed 000)."""
        configured = group.config.rebalance_timeout_ms if group.config is not None else None
        if configured is None:
            configured = self.config.rebalance_timeout_ms
        return member.rebalance_timeout_ms if configured is None else configured

    # --- ConnectGroupHeartbeat -------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, now: int, context: RequestContext = NO_CONTEXT
                  ) -> Result[HeartbeatResponse]:
        problem = _heartbeat_problem(request)
        if problem is not None:
            return _heartbeat_error(ErrorCode.INVALID_REQUEST, problem)
        group_id = request.group_id
        member_id = request.member_id
        epoch = request.member_epoch
        if group_id in self.state.classic_groups:
            return _heartbeat_error(ErrorCode.INVALID_GROUP_ID,
                                    f"group {group_id} uses the classic protocol; it cannot take connect members")
        group = self.state.groups.get(group_id)
        if epoch < 0:
            return self._leave(group, request, now)
        if group is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                return _heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
            group = ConnectGroup(group_id)  # created by this heartbeat's records
        member = group.members.get(member_id)
        current = group.current(member_id)

        # The steady heartbeat: nothing changed, nothing to reconcile. No records, no work.
        if (member is not None and epoch == current.member_epoch and epoch != JOIN_GROUP_MEMBER_EPOCH
                and current.state == MemberState.STABLE and epoch == group.assignment_epoch
                and group.group_epoch == epoch and _unchanged(member, request, context)
                and (request.owned is None or request.owned == current.assignment)):
            return Result(HeartbeatResponse(ErrorCode.NONE, None, epoch, self.heartbeat_interval_ms(group)),
                          timers=[Timer(_timer(SESSION, group_id, member_id), now + self.session_timeout_ms(group))])

        txn = _Txn(group)
        takeover = None
        lost_response = False
        # Epoch 0 is a join, except from a member still at epoch 0 (it joined and no target has
        # included it yet): that is its ordinary heartbeat.
        joining = epoch == JOIN_GROUP_MEMBER_EPOCH and (member is None or current != NEW_MEMBER_CURRENT)
        if member is None and epoch == JOIN_GROUP_MEMBER_EPOCH and request.rebalance_timeout_ms <= 0:
            return _heartbeat_error(ErrorCode.INVALID_REQUEST,
                                    "RebalanceTimeoutMs must be larger than zero in the first heartbeat request")
        if joining:
            instance_id = request.instance_id if request.instance_id is not None else (
                member.instance_id if member is not None else None)
            holder = group.member_with_instance(instance_id) if instance_id is not None else None
            if holder is not None and holder != member_id:
                if group.current(holder).member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return _heartbeat_error(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"instance {instance_id} is still held by member {holder}: it must leave (epoch -2) or "
                        "let its session time out first")
                takeover = holder
        else:
            if member is None:
                return _heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
            if epoch != current.member_epoch:
                # Seed 000's edge case: the response that moved the member to its new epoch was lost.
                # Safe to move it again when it owns nothing beyond what it was given.
                lost_response = (epoch == current.previous_member_epoch and current.member_epoch >= 0
                                 and request.owned is not None
                                 and items_of(request.owned) <= items_of(current.assignment))
                if not lost_response:
                    self._remove_member(txn, member_id, now)
                    self._assign_if_needed(txn, now)
                    return txn.result(_error_response(
                        ErrorCode.FENCED_MEMBER_EPOCH,
                        f"member {member_id} sent epoch {epoch} but is at epoch {current.member_epoch}; it has "
                        "been removed from the group and must rejoin with epoch 0"))

        updated = _updated_metadata(member, request, context, txn.group_epoch)
        assignors_changed = member is None or _assignors(member) != _assignors(updated)
        if assignors_changed:
            problem = self._assignor_problem(group, member_id, updated, exclude=takeover)
            if problem is not None:
                return _heartbeat_error(ErrorCode.UNSUPPORTED_ASSIGNOR, problem)

        if takeover is not None:
            # Static membership: the returning instance takes over the old member's target; the
            # old member id is gone. The member set changed, so the group epoch moves.
            old_target = txn.target(takeover)
            txn.remove_member(takeover)
            if old_target is not None:
                txn.set_target(member_id, old_target)
        if member is None or assignors_changed or takeover is not None or member.rack_id != updated.rack_id:
            txn.bump()
        if updated != member:
            txn.set_member(member_id, replace(updated, group_epoch=txn.group_epoch))

        # A (re)joining member owns nothing (seed 000: a fenced worker abandons everything and
        # rejoins with epoch 0), so it reconciles from an empty assignment and what it held is free.
        base = NEW_MEMBER_CURRENT if joining else current

        self._assign_if_needed(txn, now)

        reported = frozenset() if joining else None if request.owned is None else items_of(request.owned)
        if lost_response:
            # Tell the member again what the lost response said, and nothing more: it holds only
            # part of that, so a reconciliation step now could look to it like a revocation and an
            # assignment at once. The next heartbeat reconciles.
            updated_current = current
        else:
            updated_current = next_current(base, txn.assignment_epoch, txn.target(member_id),
                                           lambda item: txn.held_by_other(item, member_id), reported)
        if updated_current != current or member is None:
            txn.set_current(member_id, updated_current)

        session = Timer(_timer(SESSION, group_id, member_id), now + self.session_timeout_ms(group))
        txn.timers.append(session)
        was_revoking = current.state == MemberState.UNREVOKED and not joining
        if updated_current.state == MemberState.UNREVOKED and not was_revoking:
            deadline = now + self.rebalance_timeout_ms(group, txn.member(member_id))
            txn.timers.append(Timer(_timer(REBALANCE, group_id, member_id), deadline))
        elif updated_current.state != MemberState.UNREVOKED and was_revoking:
            txn.timers.append(Timer(_timer(REBALANCE, group_id, member_id), None))

        send_assignment = (joining or lost_response
                           or updated_current.assignment != current.assignment
                           or (reported is not None and reported != items_of(updated_current.assignment)))
        assignment = None
        if send_assignment:
            assignment = MemberAssignment(updated_current.assignment, updated_current.error, updated_current.version,
                                          updated_current.metadata)
        error_code, message = ErrorCode.NONE, None
        computation = txn.current_computation()
        if (computation is not None and computation.member_id == member_id
                and txn.group_epoch > txn.assignment_epoch
                and (computation.prepared is None or computation.prepared.group_epoch < txn.group_epoch)):
            error_code = ErrorCode.COMPUTE_ASSIGNMENT
            message = f"compute the target assignment for group epoch {txn.group_epoch}"
        return txn.result(HeartbeatResponse(error_code, message, updated_current.member_epoch,
                                             self.heartbeat_interval_ms(group), assignment))

    def _leave(self, group: ConnectGroup | None, request: HeartbeatRequest, now: int) -> Result[HeartbeatResponse]:
        member_id = request.member_id
        if group is None or member_id not in group.members:
            return _heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID, f"group {request.group_id} has no member {member_id}")
        member = group.members[member_id]
        txn = _Txn(group)
        # Only a member that joined with an InstanceId can be taken back by it; -2 from any other
        # member is an ordinary leave.
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and member.instance_id is not None:
            # A static member leaves for a while: its assignment waits for its InstanceId, and the
            # group does not rebalance unless the session times out (DESIGN §5).
            current = group.current(member_id)
            txn.set_current(member_id, CurrentMemberAssignmentValue(
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, previous_member_epoch=current.member_epoch,
                state=MemberState.STABLE, assignment=current.assignment, pending_revocation=EMPTY,
                error=current.error, version=current.version, metadata=current.metadata))
            txn.timers.append(Timer(_timer(REBALANCE, group.group_id, member_id), None))
            txn.timers.append(Timer(_timer(SESSION, group.group_id, member_id), now + self.session_timeout_ms(group)))
            txn.release_computation(member_id)
            return txn.result(HeartbeatResponse(ErrorCode.NONE, None, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                                self.heartbeat_interval_ms(group)))
        self._remove_member(txn, member_id, now)
        self._assign_if_needed(txn, now)
        return txn.result(HeartbeatResponse(ErrorCode.NONE, None, request.member_epoch,
                                            self.heartbeat_interval_ms(group)))

    def _assignor_problem(self, group: ConnectGroup, member_id: str, updated: MemberMetadataValue,
                          exclude: str | None) -> str | None:
        if updated.server_assignor is not None and updated.server_assignor not in ASSIGNORS:
            return (f"server-side assignor {updated.server_assignor!r} is not supported; this coordinator has "
                    f"{', '.join(sorted(ASSIGNORS))}")
        members = group.members if exclude is None else {m: v for m, v in group.members.items() if m != exclude}
        return assignor_conflict(members, member_id, updated)

    # --- membership changes shared by handlers and timers ------------------------------------------

    def _remove_member(self, txn: _Txn, member_id: str, now: int) -> None:
        """A member leaves or is fenced: tombstones for types 5, 7 and 8, and a new group epoch. Its
        part of the target is remembered as departed work, so that it may wait for its return."""
        member = txn.member(member_id)
        target = txn.target(member_id)
        txn.remove_member(member_id)
        txn.bump()
        if target is not None and (target.assignment.connectors or target.assignment.tasks):
            meta = txn.target_meta() or TargetAssignmentMetadataValue(assignment_epoch=0)
            departed = tuple(d for d in meta.departed_members if d.member_id != member_id)
            instance_id = member.instance_id if member is not None else None
            departed += (DepartedMember(member_id, instance_id, target.assignment, now),)
            txn.target_metadata = replace(meta, departed_members=departed)

    def _assign_if_needed(self, txn: _Txn, now: int) -> None:
        """Group epoch ahead of the assignment epoch: compute the target here (server-side
        assignor) or make sure a member has been chosen to compute it (client-side)."""
        if txn.group_epoch <= txn.assignment_epoch:
            return
        members = txn.all_members()
        if not members:
            return  # nobody to assign to; the first member to join triggers the computation
        chosen = group_assignor(members.values(), self.config.default_server_assignor)
        if chosen is None:
            return  # members disagree; the one that broke the group was refused, so this is transient
        if chosen.kind == SERVER:
            if txn.current_computation() is not None:
                # The group switched from a client-side assignor: nobody computes for it any more.
                txn.computation = None
                txn.timers.append(Timer(_timer(ASSIGNMENT, txn.group.group_id), None))
            not_before = txn.server_assignment_not_before()
            if now < not_before:
                txn.timers.append(Timer(_timer(SERVER_ASSIGNMENT, txn.group.group_id), not_before))
                return
            spec = self._group_spec(txn, now, chosen)
            result = ASSIGNORS[chosen.name].assign(spec)
            self._install(txn, spec, result, installed_by=None, assignor_name=chosen.name, now=now)
            if self.config.server_assignment_interval_ms:
                txn.server_window = now + self.config.server_assignment_interval_ms
        else:
            self._ensure_computation(txn, chosen.name, now)

    def _ensure_computation(self, txn: _Txn, name: str, now: int) -> None:
        computation = txn.current_computation()
        if computation is None:
            self._choose(txn, name, frozenset(), prefer=None, now=now)
            return
        # The chosen member keeps the job while it still qualifies: members that joined since may
        # have widened the version ranges in use beyond what it can read.
        members = txn.all_members()
        if computation.member_id in members and choose_member(
                members, name, [computation.member_id], [computation.member_id]) == computation.member_id:
            return
        self._choose(txn, name, computation.excluded, prefer=computation.member_id, now=now)

    def _choose(self, txn: _Txn, name: str, excluded: frozenset[str], prefer: str | None, now: int) -> None:
        members = txn.all_members()
        present = [m for m in members if txn.current(m).member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH]
        meta = txn.target_meta()
        preferred = (prefer, meta.installed_by if meta is not None else None)
        chosen = choose_member(members, name, [m for m in present if m not in excluded], preferred)
        if chosen is None and excluded:
            excluded = frozenset()  # everyone had a go: start over rather than never assign
            chosen = choose_member(members, name, present, preferred)
        key = _timer(ASSIGNMENT, txn.group.group_id)
        if chosen is None:
            txn.computation = None
            txn.timers.append(Timer(key, None))
            return
        deadline = now + self.rebalance_timeout_ms(txn.group, members[chosen])
        txn.computation = AssignmentComputation(chosen, deadline, excluded)
        txn.timers.append(Timer(key, deadline))

    def _group_spec(self, txn: _Txn, now: int, assignor: GroupAssignor) -> GroupSpec:
        """The assignor's input: the group metadata at the txn's group epoch and the current target."""
        spec_members = []
        members = txn.all_members()
        for member_id in sorted(members):
            member = members[member_id]
            target = txn.target(member_id)
            current = txn.current(member_id)
            a = entry(member, assignor.name) if assignor.kind == CLIENT else None
            spec_members.append(AssignmentMember(
                member_id=member_id, instance_id=member.instance_id, member_epoch=current.member_epoch,
                target=target.assignment if target is not None else EMPTY, owned=current.assignment,
                minimum_version=a.minimum_version if a else 0, maximum_version=a.maximum_version if a else 0,
                reason=a.reason if a else 0, version=a.version if a else 0, metadata=a.metadata if a else b""))
        meta = txn.target_meta()
        return GroupSpec(
            group_id=txn.group.group_id, group_epoch=txn.group_epoch, connectors=txn.connector_counts(),
            members=tuple(spec_members),
            departed=meta.departed_members if meta is not None else (),
            deferred=meta.deferred if meta is not None else EMPTY,
            scheduled_rebalance_at_ms=meta.scheduled_rebalance_at_ms if meta is not None else None,
            scheduled_rebalance_max_delay_ms=self.scheduled_rebalance_max_delay_ms(txn.group), now_ms=now)

    def _install(self, txn: _Txn, spec: GroupSpec, assignment: GroupAssignment, installed_by: str | None,
                 assignor_name: str, now: int) -> None:
        """Write a target assignment computed from `spec` (already validated)."""
        group_id = txn.group.group_id
        meta = txn.target_meta() or TargetAssignmentMetadataValue(assignment_epoch=0)
        txn.timers.append(Timer(_timer(ASSIGNMENT, group_id), None))
        txn.timers.append(Timer(_timer(SERVER_ASSIGNMENT, group_id), None))
        if txn.current_computation() is not None:
            txn.computation = None
        if assignment.error:
            # DESIGN §5: an assignor error keeps every member's assignment: the previous target is
            # stamped with the new epoch and the error, and the coordinator asks again later.
            txn.target_metadata = replace(meta, assignment_epoch=spec.group_epoch, error=assignment.error,
                                          error_message=assignment.error_message, assignor_name=assignor_name,
                                          installed_by=installed_by)
            txn.timers.append(Timer(_timer(ASSIGNMENT_RETRY, group_id), now + self.config.assignor_error_backoff_ms))
            return
        for member_id in txn.all_members():
            given = assignment.members.get(member_id)
            value = given if given is not None else MemberAssignment(EMPTY)
            if txn.target(member_id) != value:
                txn.set_target(member_id, value)
        deferred = items_of(assignment.deferred)
        spec_departed = {(d.member_id, d.departed_at_ms) for d in spec.departed}
        departed = []
        for d in meta.departed_members:
            if (d.member_id, d.departed_at_ms) not in spec_departed:
                departed.append(d)  # left after the spec was taken: the assignor has not seen it
            elif still := items_of(d.assignment) & deferred:
                departed.append(replace(d, assignment=connectors_and_tasks(still)))
        delay = assignment.scheduled_rebalance_delay_ms
        at = now + delay if delay else None
        txn.target_metadata = TargetAssignmentMetadataValue(
            assignment_epoch=spec.group_epoch, error=0, error_message=None, assignor_name=assignor_name,
            installed_by=installed_by, scheduled_rebalance_at_ms=at, deferred=assignment.deferred,
            departed_members=tuple(departed))
        txn.timers.append(Timer(_timer(SCHEDULED_REBALANCE, group_id), at))
        txn.timers.append(Timer(_timer(ASSIGNMENT_RETRY, group_id), None))

    # --- ConnectGroupPrepareAssignment -------------------------------------------------------------

    def prepare_assignment(self, request: PrepareAssignmentRequest, now: int) -> Result[PrepareAssignmentResponse]:
        problem = _member_request_problem(request.group_id, request.member_id, request.member_epoch)
        if problem is not None:
            return Result(PrepareAssignmentResponse(ErrorCode.INVALID_REQUEST, problem))
        group, error = self._chosen_member_group(request.group_id, request.member_id, request.member_epoch)
        if error is not None:
            return Result(PrepareAssignmentResponse(error.error_code, error.error_message))
        txn = _Txn(group)
        chosen = group_assignor(group.members.values(), self.config.default_server_assignor)
        if chosen is None or chosen.kind != CLIENT:
            return Result(PrepareAssignmentResponse(
                ErrorCode.UNKNOWN_MEMBER_ID, "the group has no client-side assignor to run"))
        spec = self._group_spec(txn, now, chosen)
        txn.computation = replace(group.computation, prepared=spec)
        return txn.result(PrepareAssignmentResponse(ErrorCode.NONE, None, spec.group_epoch, chosen.name, spec))

    def _chosen_member_group(self, group_id: str, member_id: str, member_epoch: int
                             ) -> tuple[ConnectGroup, ErrorResponse | None]:
        """Seed 000 steps 1-4 of PrepareAssignment and InstallAssignment."""
        group = self.state.groups.get(group_id)
        if group is None or group_id in self.state.classic_groups:
            return group, ErrorResponse(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
        if member_id not in group.members:
            return group, ErrorResponse(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
        current = group.current(member_id)
        if member_epoch != current.member_epoch:
            return group, ErrorResponse(ErrorCode.FENCED_MEMBER_EPOCH,
                                        f"member {member_id} is at epoch {current.member_epoch}, not {member_epoch}")
        computation = group.computation
        if computation is None or computation.member_id != member_id:
            who = "no member" if computation is None else f"member {computation.member_id}"
            return group, ErrorResponse(ErrorCode.UNKNOWN_MEMBER_ID,
                                        f"member {member_id} was not chosen to compute the assignment ({who} was)")
        return group, None

    # --- ConnectGroupInstallAssignment -------------------------------------------------------------

    def install_assignment(self, request: InstallAssignmentRequest, now: int) -> Result[ErrorResponse]:
        problem = _install_problem(request)
        if problem is not None:
            return Result(ErrorResponse(ErrorCode.INVALID_REQUEST, problem))
        group, error = self._chosen_member_group(request.group_id, request.member_id, request.member_epoch)
        if error is not None:
            return Result(error)
        epoch = request.group_epoch
        if epoch > group.group_epoch:
            return Result(ErrorResponse(ErrorCode.INVALID_REQUEST,
                                        f"GroupEpoch {epoch} is ahead of the group's epoch {group.group_epoch}"))
        if epoch <= group.assignment_epoch:
            return Result(ErrorResponse(ErrorCode.INVALID_ASSIGNMENT,
                                        f"stale: the target is already at epoch {group.assignment_epoch}, "
                                        f"this assignment was computed for group epoch {epoch}"))
        chosen = group_assignor(group.members.values(), self.config.default_server_assignor)
        name = chosen.name if chosen is not None else None
        txn = _Txn(group)
        prepared = group.computation.prepared
        if epoch == group.group_epoch:
            spec = self._group_spec(txn, now, chosen) if chosen is not None else None
        else:
            spec = prepared if prepared is not None and prepared.group_epoch == epoch else None
        if spec is None:
            return Result(ErrorResponse(ErrorCode.INVALID_ASSIGNMENT,
                                        f"group epoch {epoch} is not the group's epoch ({group.group_epoch}) and no "
                                        "PrepareAssignment answered for it: prepare again"))
        assignment = GroupAssignment(
            members={m.member_id: m.assignment for m in request.members},
            deferred=request.deferred, scheduled_rebalance_delay_ms=request.scheduled_rebalance_delay_ms,
            error=request.error, error_message=request.error_message)
        if not assignment.error:
            problem = validate_assignment(spec, assignment)
            if problem is not None:
                # The chosen member is asked again on its next heartbeat (COMPUTE_ASSIGNMENT), not
                # only after its deadline: an assignor that erred once may well succeed next time.
                txn.computation = replace(group.computation, prepared=None)
                return txn.result(ErrorResponse(ErrorCode.INVALID_ASSIGNMENT, problem))
        self._install(txn, spec, assignment, installed_by=request.member_id, assignor_name=name or "", now=now)
        return txn.result(ErrorResponse())

    # --- admin ---------------------------------------------------------------------------------------

    def set_connectors(self, request: SetConnectorsRequest, now: int) -> Result[ErrorResponse]:
        """Set the connectors (and task counts) a group runs; creates the group; bumps its epoch on change."""
        problem = _group_id_problem(request.group_id, self.state)
        if problem is not None:
            return Result(problem)
        names = [c.name for c in request.connectors]
        if any(not n for n in names):
            return Result(ErrorResponse(ErrorCode.INVALID_REQUEST, "connector names must be non-empty"))
        if len(set(names)) != len(names):
            return Result(ErrorResponse(ErrorCode.INVALID_REQUEST, "a connector is listed twice"))
        for c in request.connectors:
            if not 0 <= c.tasks <= MAX_TASKS_PER_CONNECTOR:
                return Result(ErrorResponse(ErrorCode.INVALID_REQUEST,
                                            f"connector {c.name}: Tasks must be within [0, {MAX_TASKS_PER_CONNECTOR}]"))
        counts = tuple(sorted((ConnectorTaskCount(c.name, c.tasks) for c in request.connectors), key=lambda c: c.name))
        group = self.state.groups.get(request.group_id) or ConnectGroup(request.group_id)
        if group.connectors is not None and group.connectors.connectors == counts:
            return Result(ErrorResponse())
        txn = _Txn(group)
        txn.connectors = counts
        txn.bump()
        self._assign_if_needed(txn, now)
        return txn.result(ErrorResponse())

    def set_config(self, request: SetConfigRequest, now: int) -> Result[ErrorResponse]:
        """Set a group's timeouts (None: the server's default). Creates the group if needed."""
        problem = _group_id_problem(request.group_id, self.state)
        if problem is not None:
            return Result(problem)
        low = self.config.min_timeout_ms
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "rebalance_timeout_ms"):
            value = getattr(request, name)
            if value is not None and value < low:
                return Result(ErrorResponse(ErrorCode.INVALID_REQUEST, f"{_wire(name)} must be >= {low} ms"))
        delay = request.scheduled_rebalance_max_delay_ms
        if delay is not None and delay < 0:
            return Result(ErrorResponse(ErrorCode.INVALID_REQUEST, "ScheduledRebalanceMaxDelayMs must be >= 0"))
        value = GroupConfigurationValue(request.session_timeout_ms, request.heartbeat_interval_ms,
                                        request.rebalance_timeout_ms, request.scheduled_rebalance_max_delay_ms)
        group = self.state.groups.get(request.group_id) or ConnectGroup(request.group_id)
        session = value.session_timeout_ms or self.config.session_timeout_ms
        interval = value.heartbeat_interval_ms or self.config.heartbeat_interval_ms
        if interval >= session:
            return Result(ErrorResponse(ErrorCode.INVALID_REQUEST,
                                        f"HeartbeatIntervalMs ({interval}) must be smaller than SessionTimeoutMs "
                                        f"({session})"))
        if group.config == value:
            return Result(ErrorResponse())
        txn = _Txn(group)
        txn.config = value
        return txn.result(ErrorResponse())

    def delete_group(self, request: DeleteGroupRequest, now: int) -> Result[ErrorResponse]:
        """Delete a group that has no members: a tombstone for every key it has."""
        problem = _group_id_problem(request.group_id, self.state)
        if problem is not None:
            return Result(problem)
        group = self.state.groups.get(request.group_id)
        if group is None:
            return Result(ErrorResponse(ErrorCode.GROUP_ID_NOT_FOUND, f"group {request.group_id} does not exist"))
        if group.members:
            return Result(ErrorResponse(ErrorCode.NON_EMPTY_GROUP,
                                        f"group {request.group_id} still has {len(group.members)} member(s)"))
        g = group.group_id
        records = record_helpers.group_tombstones(g, list(group.members), list(group.targets), list(group.currents))
        present = {key for key, _ in group.slots()}
        records = [r for r in records if r.key in present]
        timers = [Timer(_timer(kind, g), None)
                  for kind in (ASSIGNMENT, SERVER_ASSIGNMENT, SCHEDULED_REBALANCE, ASSIGNMENT_RETRY)]
        return Result(ErrorResponse(), records, timers)

    def describe_group(self, group_id: str) -> GroupDescription | None:
        group = self.state.groups.get(group_id)
        if group is None:
            return None
        members = []
        for member_id in sorted(group.members):
            m = group.members[member_id]
            current = group.current(member_id)
            target = group.targets.get(member_id)
            members.append(MemberDescription(
                member_id, m.instance_id, m.client_id, m.client_host, m.url, current.member_epoch, current.state,
                current.assignment, current.pending_revocation, target.assignment if target else EMPTY,
                m.server_assignor, m.client_assignors))
        meta = group.target_metadata
        chosen = group_assignor(group.members.values(), self.config.default_server_assignor)
        configured = group.config.rebalance_timeout_ms if group.config is not None else None
        return GroupDescription(
            group_id=group_id, group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            state=group_state(group), assignor=chosen.name if chosen else None,
            assignor_kind=chosen.kind if chosen else None, connectors=group.connector_counts, members=tuple(members),
            deferred=meta.deferred if meta else EMPTY,
            scheduled_rebalance_at_ms=meta.scheduled_rebalance_at_ms if meta else None,
            assignment_error=meta.error if meta else 0, assignment_error_message=meta.error_message if meta else None,
            session_timeout_ms=self.session_timeout_ms(group), heartbeat_interval_ms=self.heartbeat_interval_ms(group),
            rebalance_timeout_ms=configured if configured is not None else self.config.rebalance_timeout_ms,
            scheduled_rebalance_max_delay_ms=self.scheduled_rebalance_max_delay_ms(group))

    def list_groups(self) -> list[GroupListing]:
        return [GroupListing(g.group_id, g.group_epoch, group_state(g), len(g.members))
                for g in sorted(self.state.groups.values(), key=lambda g: g.group_id)]

    # --- timers --------------------------------------------------------------------------------------

    def on_timer(self, key: TimerKey, now: int) -> Result[None]:
        """A timer fired. Its condition is checked again: the state may have moved on since it was armed."""
        kind, group_id = key[0], key[1]
        group = self.state.groups.get(group_id)
        if group is None:
            return Result(None)
        txn = _Txn(group)
        if kind in (SESSION, REBALANCE):
            member_id = key[2]
            if member_id not in group.members:
                return Result(None)
            if kind == REBALANCE and group.current(member_id).state != MemberState.UNREVOKED:
                return Result(None)
            self._remove_member(txn, member_id, now)  # session expired, or did not revoke in time
            self._assign_if_needed(txn, now)
        elif kind == SERVER_ASSIGNMENT:
            self._assign_if_needed(txn, now)  # the server-side assignor's interval has passed
        elif kind == ASSIGNMENT:
            computation = group.computation
            if computation is None:  # after a failover: choose who computes
                self._assign_if_needed(txn, now)
                return txn.result(None)
            if group.group_epoch <= group.assignment_epoch:
                return Result(None)
            if computation.deadline_ms > now:
                # Early: the runtime's timers run on a monotonic clock and `now` is wall time, which
                # may have stepped back. Dropping the timer would leave the job with this member forever.
                return Result(None, timers=[Timer(key, computation.deadline_ms)])
            chosen = group_assignor(group.members.values(), self.config.default_server_assignor)
            if chosen is None or chosen.kind != CLIENT:
                txn.computation = None
            else:  # the chosen member did not install in time: another one gets the job
                self._choose(txn, chosen.name, computation.excluded | {computation.member_id}, None, now)
        elif kind == SCHEDULED_REBALANCE:
            meta = group.target_metadata
            if meta is None or meta.scheduled_rebalance_at_ms is None:
                return Result(None)
            if meta.scheduled_rebalance_at_ms > now:  # early (see above): deferred work must not wait forever
                return Result(None, timers=[Timer(key, meta.scheduled_rebalance_at_ms)])
            txn.target_metadata = replace(meta, scheduled_rebalance_at_ms=None)
            txn.bump()
            self._assign_if_needed(txn, now)
        elif kind == ASSIGNMENT_RETRY:
            meta = group.target_metadata
            if meta is None or not meta.error or group.group_epoch != group.assignment_epoch:
                return Result(None)
            txn.bump()
            self._assign_if_needed(txn, now)
        return txn.result(None)

    def timers(self, now: int) -> list[Timer]:
        """The timers to arm after loading a partition (timers are never persisted, DESIGN §6)."""
        timers = []
        for group in self.state.groups.values():
            g = group.group_id
            session = now + self.session_timeout_ms(group)
            for member_id, member in group.members.items():
                timers.append(Timer(_timer(SESSION, g, member_id), session))
                if group.current(member_id).state == MemberState.UNREVOKED:
                    timers.append(Timer(_timer(REBALANCE, g, member_id), now + self.rebalance_timeout_ms(group, member)))
            meta = group.target_metadata
            if meta is not None and meta.scheduled_rebalance_at_ms is not None:
                timers.append(Timer(_timer(SCHEDULED_REBALANCE, g), meta.scheduled_rebalance_at_ms))
            if meta is not None and meta.error and group.group_epoch == group.assignment_epoch:
                timers.append(Timer(_timer(ASSIGNMENT_RETRY, g), now + self.config.assignor_error_backoff_ms))
            if group.members and group.group_epoch > group.assignment_epoch:
                timers.append(Timer(_timer(ASSIGNMENT, g), now))  # compute, or choose who computes
        return timers


# --- helpers ---------------------------------------------------------------------------------------


def validate_assignment(spec: GroupSpec, assignment: GroupAssignment) -> str | None:
    """Seed 000 "Assignment Validation", against the metadata the assignment was computed from:
    every configured item assigned exactly once (or deferred, DESIGN §5), only to members that
    existed, and a deferral always comes with a delay no longer than the group allows."""
    members = {m.member_id for m in spec.members}
    unknown = sorted(set(assignment.members) - members)
    if unknown:
        return f"members {', '.join(unknown)} were not in the group at epoch {spec.group_epoch}"
    configured = configured_work(spec.connectors).items
    seen: dict[Item, str] = {}
    for member_id, given in assignment.members.items():
        for item in (*given.assignment.connectors, *given.assignment.tasks):
            if item in seen:
                return f"{item} is assigned twice (to {seen[item]} and {member_id})"
            seen[item] = member_id
    for item in (*assignment.deferred.connectors, *assignment.deferred.tasks):
        if item in seen:
            return f"{item} is both assigned (to {seen[item]}) and deferred"
        seen[item] = "deferred"
    extra = set(seen) - configured
    if extra:
        return f"not configured in the group: {describe(extra)}"
    missing = configured - set(seen)
    if missing and members:
        return f"not assigned: {describe(missing)}"
    delay = assignment.scheduled_rebalance_delay_ms
    deferred = assignment.deferred.connectors or assignment.deferred.tasks
    if deferred and not delay:
        return "deferred items need a ScheduledRebalanceDelayMs > 0"
    if delay and delay > spec.scheduled_rebalance_max_delay_ms:
        return (f"ScheduledRebalanceDelayMs {delay} exceeds the group's scheduled rebalance max delay "
                f"({spec.scheduled_rebalance_max_delay_ms} ms)")
    return None


def _assignors(member: MemberMetadataValue) -> tuple:
    return member.server_assignor, member.client_assignors


def _unchanged(member: MemberMetadataValue, r: HeartbeatRequest, context: RequestContext) -> bool:
    """Whether a heartbeat's optional fields leave the member's metadata as it is."""
    return ((r.instance_id is None or r.instance_id == member.instance_id)
            and (r.rack_id is None or r.rack_id == member.rack_id)
            and (r.rebalance_timeout_ms == -1 or r.rebalance_timeout_ms == member.rebalance_timeout_ms)
            and (r.server_assignor is None or r.server_assignor == member.server_assignor)
            and (r.client_assignors is None or r.client_assignors == member.client_assignors)
            and (r.url is None or r.url == member.url)
            and (not context.principal or context.principal == member.client_id)
            and (not context.client_host or context.client_host == member.client_host))


def _updated_metadata(member: MemberMetadataValue | None, r: HeartbeatRequest, context: RequestContext,
                      group_epoch: int) -> MemberMetadataValue:
    """The member's metadata after this heartbeat: null request fields keep what we had."""
    if member is None:
        return MemberMetadataValue(
            group_epoch=group_epoch, instance_id=r.instance_id, client_id=context.principal,
            client_host=context.client_host,
            url=r.url, rebalance_timeout_ms=r.rebalance_timeout_ms, server_assignor=r.server_assignor,
            client_assignors=r.client_assignors or (), rack_id=r.rack_id)
    if _unchanged(member, r, context):
        return member
    server, client = member.server_assignor, member.client_assignors
    if r.server_assignor is not None:  # a member names one kind of assignor at a time
        server, client = r.server_assignor, ()
    elif r.client_assignors is not None:
        server, client = None, r.client_assignors
    return MemberMetadataValue(
        group_epoch=member.group_epoch,
        instance_id=r.instance_id if r.instance_id is not None else member.instance_id,
        client_id=context.principal or member.client_id, client_host=context.client_host or member.client_host,
        url=r.url if r.url is not None else member.url,
        rebalance_timeout_ms=r.rebalance_timeout_ms if r.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
        server_assignor=server, client_assignors=client,
        rack_id=r.rack_id if r.rack_id is not None else member.rack_id)


def _group_id_problem(group_id: str, state: CoordinatorState) -> ErrorResponse | None:
    if not group_id:
        return ErrorResponse(ErrorCode.INVALID_REQUEST, "GroupId must be non-empty")
    if group_id in state.classic_groups:
        return ErrorResponse(ErrorCode.INVALID_GROUP_ID, f"group {group_id} uses the classic protocol")
    return None


def group_state(group: ConnectGroup) -> str:
    if not group.members:
        return "EMPTY"
    if group.group_epoch > group.assignment_epoch:
        return "ASSIGNING"
    epoch = group.assignment_epoch
    for member_id in group.members:
        current = group.current(member_id)
        if current.member_epoch not in (epoch, LEAVE_GROUP_STATIC_MEMBER_EPOCH) or current.state != MemberState.STABLE:
            return "RECONCILING"
    return "STABLE"


def _wire(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _heartbeat_error(code: ErrorCode, message: str) -> Result[HeartbeatResponse]:
    return Result(_error_response(code, message))


def _error_response(code: ErrorCode, message: str) -> HeartbeatResponse:
    return HeartbeatResponse(code, message, 0, 0, None)


__all__ = ["CoordinatorConfig", "GroupCoordinator", "validate_assignment"]
