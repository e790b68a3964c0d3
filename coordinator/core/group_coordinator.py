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

Where each part lives
---------------------
This module is the facade the runtime calls, and the admin handlers. The heartbeat is in
`coordinator.core.heartbeat`, the target assignment in `target_assignment`, request validation in
`validation`, timers in `timers`, read views in `views`, and a handler's pending change in
`group_change`. A request the protocol refuses raises `ProtocolError` wherever that is found;
`_answers` below turns it into the handler's response, the one place that does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Concatenate, ParamSpec, TypeVar

from records import (
    FORMAT_LEVELS,
    MAX_FORMAT_LEVEL,
    ConnectGroupMetadataKey,
    ConnectorTaskCount,
    FormatLevelKey,
    FormatLevelValue,
    GroupConfigurationValue,
    MemberMetadataKey,
    Record,
)

from coordinator.core import record_helpers, timers, views
from coordinator.core.assignors import GroupAssignment
from coordinator.core.classic import handlers as classic
from coordinator.core.classic import migration
from coordinator.core.classic import phases as classic_phases
from coordinator.core.classic import timers as classic_timers
from coordinator.core.classic import translation as classic_translation
from coordinator.core.classic.change import ClassicChange
from coordinator.core.classic.group import ClassicGroupUpdate
from coordinator.core.config import CoordinatorConfig, GroupSettings
from coordinator.core.group_change import GroupChange
from coordinator.core.heartbeat import connect_group_heartbeat
from coordinator.core.items import EMPTY
from coordinator.core.protocol import (
    ASSIGNMENT,
    ASSIGNMENT_RETRY,
    CLASSIC_JOIN,
    CLASSIC_SESSION,
    CLASSIC_SYNC,
    INITIAL_ASSIGNMENT,
    NO_CONTEXT,
    SCHEDULED_REBALANCE,
    SERVER_ASSIGNMENT,
    ClassicHeartbeatRequest,
    ConnectorStatus,
    DeleteGroupRequest,
    ErrorCode,
    ErrorResponse,
    GroupDescription,
    GroupListing,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallAssignmentRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    PrepareAssignmentError,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    ProtocolError,
    RequestContext,
    Result,
    SetConfigRequest,
    SetConnectorsRequest,
    SyncGroupRequest,
    SyncGroupResponse,
    Timer,
    TimerKey,
    timer_key,
)
from coordinator.core.selection import CLIENT, group_assignor
from coordinator.core.state import ConnectGroup, CoordinatorState
from coordinator.core.target_assignment import assign_if_needed, group_spec, install
from coordinator.core.validation import (
    check_group_id,
    check_install,
    check_member_request,
    check_set_config,
    check_set_connectors,
    validate_assignment,
)
from coordinator.core.views import group_state, rebalance_converged

CLASSIC_TIMERS = frozenset((CLASSIC_SESSION, CLASSIC_JOIN, CLASSIC_SYNC))

P = ParamSpec("P")
R = TypeVar("R")


def _answers(
    response: Callable[[int, str], R],
) -> Callable[
    [Callable[Concatenate[GroupCoordinator, P], Result[R]]], Callable[Concatenate[GroupCoordinator, P], Result[R]]
]:
    """A handler whose refusals (`ProtocolError`) are answered as `response(code, message)`."""

    def decorate(
        handler: Callable[Concatenate[GroupCoordinator, P], Result[R]],
    ) -> Callable[Concatenate[GroupCoordinator, P], Result[R]]:
        @functools.wraps(handler)
        def answer(self: GroupCoordinator, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
            try:
                result = handler(self, *args, **kwargs)
            except ProtocolError as e:
                return Result(response(e.code, e.message))
            now = kwargs["now"] if "now" in kwargs else args[1]  # every handler takes (request, now, ...)
            return self._after(result, now)

        return answer

    return decorate


class GroupCoordinator:
    """The handlers over one partition's `CoordinatorState`. See the module docstring."""

    def __init__(self, state: CoordinatorState | None = None, config: CoordinatorConfig | None = None) -> None:
        self.state = state if state is not None else CoordinatorState()
        self.config = config if config is not None else CoordinatorConfig()

    def _after(self, result: Result, now: int) -> Result:
        """The steps after every handler and timer, in one place: a connect group left with classic
        members only goes back to the classic protocol (seed 000's migration; only a member's removal,
        its type 5 tombstone, can do that), then the epoch records are timed."""
        for group_id in {
            r.key.group_id for r in result.records if r.value is None and r.key.__class__ is MemberMetadataKey
        }:
            result = migration.downgrade_if_only_classic(self.state, group_id, result, now)
        return self._timed(result, now)

    def _timed(self, result: Result, now: int) -> Result:
        """At record format level 2 and above, each connect group epoch record says when it was
        bumped and since when the group has been rebalancing (a bump while a rebalance is open
        extends it, as the live metrics and `replay` count rebalances). Stamped here, where time
        enters the state machine, so that every path that bumps an epoch is covered."""
        if self.state.format_level < 2 or not result.records:
            return result
        for i, record in enumerate(result.records):
            value = record.value
            if record.key.__class__ is ConnectGroupMetadataKey and value is not None and value.epoch_bumped_ms is None:
                group = self.state.groups.get(record.key.group_id)
                before = None if group is None else group.metadata
                open_since = None if before is None or rebalance_converged(group) else before.rebalance_started_ms
                result.records[i] = Record(
                    record.key,
                    replace(
                        value, epoch_bumped_ms=now, rebalance_started_ms=open_since if open_since is not None else now
                    ),
                )
        return result

    def apply(self, result: Result) -> Result:
        """Apply a handler's records and volatile updates to the state (what the runtime does)."""
        replay = self.state.replay
        for record in result.records:
            replay(record)
        for update in result.volatile:
            replay(update)
        return result

    # --- the protocol (seed 000) -----------------------------------------------------------------

    @_answers(HeartbeatResponse)
    def heartbeat(
        self, request: HeartbeatRequest, now: int, context: RequestContext = NO_CONTEXT
    ) -> Result[HeartbeatResponse]:
        return connect_group_heartbeat(self.state, self.config, request, now, context)

    @_answers(PrepareAssignmentError)
    def prepare_assignment(
        self, request: PrepareAssignmentRequest, now: int
    ) -> Result[PrepareAssignmentResponse | PrepareAssignmentError]:
        """ConnectGroupPrepareAssignment: the chosen member asks for the assignor's input."""
        check_member_request(request.group_id, request.member_id, request.member_epoch)
        group = self._chosen_member_group(request.group_id, request.member_id, request.member_epoch)
        chosen = group_assignor(group.members.values(), self.config.default_server_assignor)
        if chosen is None or chosen.kind != CLIENT:
            raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, "the group has no client-side assignor to run")
        change = GroupChange(group)
        spec = group_spec(change, self.config, now, chosen)
        change.computation = replace(group.computation, prepared=spec)
        return change.result(PrepareAssignmentResponse.of(spec, chosen.name))

    @_answers(ErrorResponse)
    def install_assignment(self, request: InstallAssignmentRequest, now: int) -> Result[ErrorResponse]:
        """ConnectGroupInstallAssignment: the chosen member installs what its assignor computed."""
        check_install(request)
        group = self._chosen_member_group(request.group_id, request.member_id, request.member_epoch)
        epoch = request.group_epoch
        if epoch > group.group_epoch:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, f"GroupEpoch {epoch} is ahead of the group's epoch {group.group_epoch}"
            )
        if epoch <= group.assignment_epoch:
            raise ProtocolError(
                ErrorCode.INVALID_ASSIGNMENT,
                f"stale: the target is already at epoch {group.assignment_epoch}, "
                f"this assignment was computed for group epoch {epoch}",
            )
        chosen = group_assignor(group.members.values(), self.config.default_server_assignor)
        change = GroupChange(group)
        prepared = group.computation.prepared
        if epoch == group.group_epoch:
            spec = group_spec(change, self.config, now, chosen) if chosen is not None else None
        else:
            spec = prepared if prepared is not None and prepared.group_epoch == epoch else None
        if spec is None:
            raise ProtocolError(
                ErrorCode.INVALID_ASSIGNMENT,
                f"group epoch {epoch} is not the group's epoch ({group.group_epoch}) and no "
                "PrepareAssignment answered for it: prepare again",
            )
        assignment = GroupAssignment(
            members={m.member_id: m.assignment for m in request.members},
            deferred=request.deferred if request.deferred is not None else EMPTY,
            scheduled_rebalance_delay_ms=request.scheduled_rebalance_delay_ms,
            error=request.error,
            error_message=request.error_message,
        )
        if not assignment.error:
            problem = validate_assignment(spec, assignment)
            if problem is not None:
                # The chosen member is asked again on its next heartbeat (COMPUTE_ASSIGNMENT), not
                # only after its deadline: an assignor that erred once may well succeed next time.
                change.computation = replace(group.computation, prepared=None)
                return change.result(ErrorResponse(ErrorCode.INVALID_ASSIGNMENT, problem))
        install(
            change,
            self.config,
            spec,
            assignment,
            installed_by=request.member_id,
            assignor_name=chosen.name if chosen is not None else "",
            now=now,
        )
        return change.result(ErrorResponse())

    # --- the classic protocol (seed 004, `coordinator.core.classic.handlers`); in a connect group, its
    # requests are translated (seed 000's migration, `coordinator.core.classic.translation`) -------

    def _translated(self, group_id: str) -> bool:
        group = self.state.groups.get(group_id)
        return group is not None and bool(group.members)

    @_answers(JoinGroupResponse)
    def join_group(self, request: JoinGroupRequest, now: int, context: RequestContext = NO_CONTEXT) -> Result:
        """JoinGroup: answered at once, or `Parked` until the join phase completes."""
        classic.check_join(request, self.config)
        if self._translated(request.group_id):
            # A classic member taking over a static connect member's instance may leave no connect
            # member behind: the group then goes back to the classic protocol (`_after`).
            return classic_translation.join_group(self.state, self.config, request, now, context)
        return classic.join_group(self.state, self.config, request, now, context)

    @_answers(SyncGroupResponse)
    def sync_group(self, request: SyncGroupRequest, now: int) -> Result:
        """SyncGroup: the leader's carries the assignments; the others wait for it (`Parked`)."""
        if self._translated(request.group_id):
            return classic_translation.sync_group(self.state, self.config, request, now)
        return classic.sync_group(self.state, self.config, request, now)

    @_answers(ErrorResponse)
    def classic_heartbeat(self, request: ClassicHeartbeatRequest, now: int) -> Result[ErrorResponse]:
        if self._translated(request.group_id):
            return classic_translation.heartbeat(self.state, self.config, request, now)
        return classic.heartbeat(self.state, self.config, request, now)

    @_answers(LeaveGroupResponse)
    def leave_group(self, request: LeaveGroupRequest, now: int) -> Result[LeaveGroupResponse]:
        if self._translated(request.group_id):
            if not request.members:
                raise ProtocolError(ErrorCode.INVALID_REQUEST, "LeaveGroup names no member")
            return classic_translation.leave_group(self.state, self.config, request, now)
        return classic.leave_group(self.state, self.config, request, now)

    def _chosen_member_group(self, group_id: str, member_id: str, member_epoch: int) -> ConnectGroup:
        """Seed 000 steps 1-4 of PrepareAssignment and InstallAssignment."""
        group = self.state.groups.get(group_id)
        if group is None or group_id in self.state.classic_groups:
            raise ProtocolError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
        if member_id not in group.members:
            raise ProtocolError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}")
        current = group.current(member_id)
        if member_epoch != current.member_epoch:
            raise ProtocolError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"member {member_id} is at epoch {current.member_epoch}, not {member_epoch}",
            )
        computation = group.computation
        if computation is None or computation.member_id != member_id:
            who = "no member" if computation is None else f"member {computation.member_id}"
            raise ProtocolError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id} was not chosen to compute the assignment ({who} was)"
            )
        return group

    # --- admin ---------------------------------------------------------------------------------------

    @_answers(ErrorResponse)
    def set_connectors(self, request: SetConnectorsRequest, now: int) -> Result[ErrorResponse]:
        """Set the connectors (and task counts) a group runs; creates the group; bumps its epoch on change."""
        check_group_id(request.group_id)
        check_set_connectors(request)
        counts = tuple(sorted((ConnectorTaskCount(c.name, c.tasks) for c in request.connectors), key=lambda c: c.name))
        group = self.state.groups.get(request.group_id) or ConnectGroup(request.group_id)
        if group.connectors is not None and group.connectors.connectors == counts:
            return Result(ErrorResponse())
        change = GroupChange(group)
        change.connectors = counts
        change.bump()
        assign_if_needed(change, self.config, now)
        result = change.result(ErrorResponse())
        classic_group = self.state.classic_groups.get(request.group_id)
        if classic_group is not None and classic_group.members:
            # A classic group's leader assigns the new work after every member joins again.
            classic_change = ClassicChange(classic_group, now)
            classic_phases.rebalance(classic_change)
            result.merge(classic_change.result(None))
        return result

    @_answers(ErrorResponse)
    def set_config(self, request: SetConfigRequest, now: int) -> Result[ErrorResponse]:
        """Set a group's timeouts (None: the server's default). Creates the group if needed."""
        check_group_id(request.group_id)
        check_set_config(request, self.config.min_timeout_ms)
        value = GroupConfigurationValue(
            request.session_timeout_ms,
            request.heartbeat_interval_ms,
            request.rebalance_timeout_ms,
            request.scheduled_rebalance_max_delay_ms,
            request.initial_assignment_delay_ms,
        )
        settings = self.config.for_group(value)
        if settings.heartbeat_interval_ms >= settings.session_timeout_ms:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST,
                f"HeartbeatIntervalMs ({settings.heartbeat_interval_ms}) must be smaller than "
                f"SessionTimeoutMs ({settings.session_timeout_ms})",
            )
        group = self.state.groups.get(request.group_id) or ConnectGroup(request.group_id)
        if group.config == value:
            return Result(ErrorResponse())
        change = GroupChange(group)
        change.config = value
        return change.result(ErrorResponse())

    @_answers(ErrorResponse)
    def delete_group(self, request: DeleteGroupRequest, now: int) -> Result[ErrorResponse]:
        """Delete a group that has no members: a tombstone for every key it has."""
        check_group_id(request.group_id)
        g = request.group_id
        group = self.state.groups.get(g)
        classic_group = self.state.classic_groups.get(g)
        if group is None and classic_group is None:
            raise ProtocolError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {g} does not exist")
        members = len(group.members) if group is not None else 0
        members += len(classic_group.members) if classic_group is not None else 0
        if members:
            raise ProtocolError(ErrorCode.NON_EMPTY_GROUP, f"group {g} still has {members} member(s)")
        records = []
        if group is not None:
            records = record_helpers.group_tombstones(g, list(group.members), list(group.targets), list(group.currents))
            present = {key for key, _ in group.slots()}
            records = [r for r in records if r.key in present]
        volatile = []
        if classic_group is not None:
            if classic_group.record is not None:
                records.append(record_helpers.classic_group(g, None))
            volatile.append(ClassicGroupUpdate(g, None))
        cancelled = [
            Timer(timer_key(kind, g), None)
            for kind in (
                ASSIGNMENT,
                SERVER_ASSIGNMENT,
                SCHEDULED_REBALANCE,
                ASSIGNMENT_RETRY,
                INITIAL_ASSIGNMENT,
                CLASSIC_JOIN,
                CLASSIC_SYNC,
            )
        ]
        return Result(ErrorResponse(), records, cancelled, volatile)

    @_answers(ErrorResponse)
    def raise_format_level(self, level: int, now: int) -> Result[ErrorResponse]:
        """Raise this partition's record format level (`coordinator topic upgrade-format`): one
        type 10 record, after which every record of the partition may use the level's versions.
        Levels are never lowered: a reader that took the higher level for granted would misread."""
        current = self.state.format_level
        if level not in FORMAT_LEVELS:
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"record format level {level} is unknown to this coordinator (it writes levels 1-{MAX_FORMAT_LEVEL})",
            )
        if level < current:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, f"the record format level is {current}; it is never lowered to {level}"
            )
        if level == current and self.state.format_level_record is not None:
            return Result(ErrorResponse())
        return Result(ErrorResponse(), [Record(FormatLevelKey(FormatLevelKey.PARTITION), FormatLevelValue(level))])

    # --- reads and timers ----------------------------------------------------------------------------

    def settings(self, group: ConnectGroup) -> GroupSettings:
        """`group`'s timeouts: its configuration record's, else this coordinator's defaults."""
        return self.config.for_group(group.config)

    def describe_group(self, group_id: str) -> GroupDescription | None:
        return views.describe_group(self.state, self.config, group_id)

    def list_groups(self) -> list[GroupListing]:
        return views.list_groups(self.state)

    def connector_status(self, group_id: str, connector: str) -> ConnectorStatus | ErrorResponse:
        return views.connector_status(self.state, self.config, group_id, connector)

    def on_timer(self, key: TimerKey, now: int) -> Result[None]:
        """A timer fired (`coordinator.core.timers`, `coordinator.core.classic.timers`)."""
        if key[0] in CLASSIC_TIMERS:
            return self._after(classic_timers.on_timer(self.state, self.config, key, now), now)
        return self._after(timers.on_timer(self.state, self.config, key, now), now)

    def timers(self, now: int) -> list[Timer]:
        """The timers to arm after loading a partition (timers are never persisted, DESIGN §6)."""
        return timers.after_load(self.state, self.config, now) + classic_timers.after_load(self.state, self.config, now)


__all__ = ["CoordinatorConfig", "GroupCoordinator", "group_state", "validate_assignment"]
