"""A classic handler's pending change to one group (`ClassicChange`): the one place a classic group
changes state, and what a handler's result carries (the record, timers, answers to parked requests)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from coordinator.core import record_helpers
from coordinator.core.classic.group import ClassicGroup, ClassicGroupUpdate, ClassicMember
from coordinator.core.protocol import (
    JOIN,
    SYNC,
    ErrorCode,
    JoinGroupResponse,
    ParkKey,
    Result,
    SyncGroupResponse,
    Timer,
    timer_key,
)
from coordinator.core.states import CLASSIC_GROUP_PREVIOUS, ClassicGroupState, check_transition


@dataclass(slots=True)
class ClassicChange:
    """A handler's pending change to one classic group: the group as it will be, whether to write
    it, the timers and the answers to parked requests."""

    group: ClassicGroup
    now: int
    initial_delay_ms: int = 0  # the group's initial assignment delay (its type 9 record, else the server's)
    persist: bool = False
    timers: list[Timer] = field(default_factory=list)
    deliveries: list[tuple[ParkKey, object]] = field(default_factory=list)

    def result(self, response: object) -> Result:
        group = self.group
        records = []
        if self.persist:
            value = group.to_record(self.now)
            group = replace(group, record=value)
            records.append(record_helpers.classic_group(group.group_id, value))
        return Result(response, records, self.timers, [ClassicGroupUpdate(group.group_id, group)], self.deliveries)

    def timer(self, kind: str, deadline_ms: int | None, member_id: str | None = None) -> None:
        self.timers.append(Timer(timer_key(kind, self.group.group_id, member_id), deadline_ms))

    def deliver(self, kind: str, member_id: str, response: object) -> None:
        self.deliveries.append(((kind, self.group.group_id, member_id), response))

    def answer_waiting(self, member: ClassicMember, code: ErrorCode, message: str, *, sync_only: bool = False) -> None:
        """Answer `member`'s JoinGroup and SyncGroup that still wait with an error."""
        if member.joined and not sync_only:
            self.deliver(JOIN, member.member_id, JoinGroupResponse(code, message, member_id=member.member_id))
        if member.synced:
            self.deliver(SYNC, member.member_id, SyncGroupResponse(code, message))

    def set_state(self, state: ClassicGroupState, **changes: object) -> None:
        """The one place a classic group changes state: only along `CLASSIC_GROUP_PREVIOUS`."""
        if state is not self.group.state:
            check_transition(CLASSIC_GROUP_PREVIOUS, self.group.state, state, f"classic group {self.group.group_id}")
        self.group = replace(self.group, state=state, **changes)

    def set_members(self, members: dict[str, ClassicMember], **changes: object) -> None:
        self.group = self.group.with_members(members, **changes)
