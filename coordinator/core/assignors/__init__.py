"""Connect assignors: pure functions from a group's state to its target assignment.

The same code runs in two places (seed 000 "Assignment Process", DESIGN §5 and §8):

- server-side, inside the coordinator's heartbeat handler, when the group's members name a
  `ServerAssignor`;
- client-side, on the worker the coordinator chose: the worker gets COMPUTE_ASSIGNMENT, calls
  PrepareAssignment (whose answer is a `GroupSpec`), runs `assign` and sends the result back with
  InstallAssignment.

An assignor is declarative (seed 000): it says what each member should own, not what to move.
The coordinator validates the result against the `GroupSpec` it was computed from (every
configured connector and task assigned exactly once to a member of the spec, or deferred with a
delay) and reconciles the members toward it, revoking before assigning.

No I/O and no clock: the coordinator's time comes in as `GroupSpec.now_ms`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from operator import attrgetter
from typing import Annotated, Any, Protocol

from msgspec import Struct, field

from records import ConnectorsAndTasks, ConnectorTaskCount, DepartedMember, TargetAssignmentMemberValue
from records.constraints import Base64, Int8, Int16, Int32, Int64, doc

__all__ = [
    "ASSIGNORS",
    "ASSIGNOR_ERROR",
    "AssignmentMember",
    "AssignorEntry",
    "AssignorError",
    "ConnectAssignor",
    "GroupAssignment",
    "GroupSpec",
    "MemberAssignment",
    "UnknownAssignorError",
    "assignor",
    "by_member_id",
    "member_versions",
    "reporting_errors",
]


class Spec(Struct, rename="pascal", frozen=True, gc=False):
    """The assignor's input, as PrepareAssignment sends it (seed 000 ConnectGroupPrepareAssignment
    response): JSON names the seed's."""


class AssignorEntry(Spec):
    """The member's entry for the selected assignor (seed "Assignor": version range, reason, metadata;
    all 0 and empty for a server-side assignor)."""

    minimum_version: Annotated[Int16, doc("The minimum supported version for the metadata.")] = 0
    maximum_version: Annotated[Int16, doc("The maximum supported version for the metadata.")] = 0
    version: Annotated[Int16, doc("The version of the metadata.")] = 0
    reason: Annotated[Int8, doc("The reason of the metadata update.")] = 0
    metadata: Annotated[Base64, doc("The assignor metadata.")] = b""


NO_ENTRY = AssignorEntry()


class AssignmentMember(Spec):
    """A member as the assignor sees it (the seed's `GroupMember`): a member of the group at GroupEpoch."""

    member_id: Annotated[str, doc("The member ID.")]
    instance_id: Annotated[str | None, doc("The member instance ID.")] = None
    member_epoch: Annotated[Int32, doc("The member epoch.")] = 0
    # Its part of the group's current target assignment (empty for a member that just joined).
    # Sticky assignors keep members on this.
    target: Annotated[ConnectorsAndTasks, doc("Its part of the current target assignment.")] = field(
        default_factory=ConnectorsAndTasks, name="TargetConnectorsAndTasks"
    )
    # What it owns right now (its current assignment); differs from `target` while it reconciles.
    owned: Annotated[ConnectorsAndTasks, doc("What the member owns now.")] = field(
        default_factory=ConnectorsAndTasks, name="ConnectorsAndTasks"
    )
    assignor: AssignorEntry = NO_ENTRY


class GroupSpec(Spec):
    """Everything an assignor may use: the group metadata at `group_epoch` and the current target."""

    group_id: Annotated[str, doc("The group identifier.")]
    group_epoch: Annotated[Int32, doc("The group epoch the assignment is computed for.")]
    connectors: Annotated[tuple[ConnectorTaskCount, ...], doc("The connectors the group runs, and their task counts.")]
    members: Annotated[tuple[AssignmentMember, ...], doc("The members, by member id.")]
    # Work whose owner left and that the current target keeps for its return (seed 002 Design II).
    departed: Annotated[
        tuple[DepartedMember, ...],
        doc("Members whose work waits for their return until ScheduledRebalanceMaxDelayMs has passed."),
    ] = field(default=(), name="DepartedMembers")
    # Items the current target deferred, and when the coordinator will rebalance for them.
    deferred: Annotated[ConnectorsAndTasks, doc("Items the current target deferred.")] = field(
        default_factory=ConnectorsAndTasks
    )
    scheduled_rebalance_at_ms: Annotated[
        Int64 | None, doc("When the coordinator rebalances for the deferred items (ms since the epoch), or null.")
    ] = None
    # The group's `scheduled.rebalance.max.delay.ms`: how long departed work may wait.
    scheduled_rebalance_max_delay_ms: Annotated[
        Int32, doc("How long departed work may wait (the group's scheduled.rebalance.max.delay.ms).")
    ] = 300_000
    # The coordinator's clock when it prepared this spec (never the worker's: clocks differ).
    now_ms: Annotated[Int64, doc("The coordinator's clock when it prepared this (ms since the epoch).")] = 0


# One member's assignment (the seed's `MemberAssignment`: connectors and tasks, error, version,
# metadata) is one type everywhere: what an assignor answers, what InstallAssignment carries, what
# the target assignment record (type 7) stores and what a heartbeat response gives the member.
MemberAssignment = TargetAssignmentMemberValue


@dataclass(slots=True, frozen=True)
class GroupAssignment:
    """An assignor's answer (the seed's `Assignment`).

    `members` has an entry for every member of the spec. `deferred` items are assigned to nobody
    for now; `scheduled_rebalance_delay_ms` (> 0) asks the coordinator for another rebalance after
    that long, which is how deferred work is resolved without any worker keeping a timer. A delay
    without deferred items asks for a follow-up rebalance (an assignor that limits its moves per
    round, seed 002 Design III). `error` != 0 means the assignor could not compute an assignment:
    the coordinator then keeps every member's current target.
    """

    members: dict[str, MemberAssignment]
    deferred: ConnectorsAndTasks = dataclass_field(default_factory=ConnectorsAndTasks)
    scheduled_rebalance_delay_ms: int | None = None
    error: int = 0
    error_message: str | None = None

    @classmethod
    def failed(cls, message: str) -> GroupAssignment:
        """The answer of an assignor that could not compute an assignment."""
        return cls(members={}, error=ASSIGNOR_ERROR, error_message=message)


class ConnectAssignor(Protocol):
    """The seed's `ConnectAssignor`: a name, the metadata versions it speaks, and `assign`."""

    name: str
    minimum_version: int
    maximum_version: int

    def assign(self, group: GroupSpec) -> GroupAssignment: ...


# The `GroupAssignment.error` of an assignor that cannot compute an assignment (seed 000: "If the
# Connect assignor can't compute the assignment, then it would return an error which would result
# in retaining the current assignments").
ASSIGNOR_ERROR = 1

by_member_id = attrgetter("member_id")


class AssignorError(Exception):
    """An assignor cannot compute an assignment for this spec; `assign` answers it as
    `GroupAssignment.failed` (seed 000: the coordinator then keeps the current assignments)."""


Assign = Callable[[Any, "GroupSpec"], "GroupAssignment"]


def reporting_errors(assign: Assign) -> Assign:
    """An `assign` whose AssignorError becomes its answer, `GroupAssignment.failed` (seed 000)."""

    @functools.wraps(assign)
    def answer(self: Any, group: GroupSpec) -> GroupAssignment:
        try:
            return assign(self, group)
        except AssignorError as e:
            return GroupAssignment.failed(str(e))

    return answer


def member_versions(assignor: ConnectAssignor, members: Sequence[AssignmentMember]) -> list[int]:
    """Each member's metadata version: the highest in both its range and the assignor's (seed 000
    "Assignor": Minimum/MaximumVersion).

    The coordinator only picks a worker whose range covers everyone's (DESIGN §5), so an empty
    overlap means the spec is inconsistent: AssignorError, which the assignor reports as its answer.
    """
    versions = []
    for member in members:
        entry = member.assignor
        lowest = max(assignor.minimum_version, entry.minimum_version)
        highest = min(assignor.maximum_version, entry.maximum_version)
        if lowest > highest:
            raise AssignorError(
                f"member {member.member_id!r} supports versions [{entry.minimum_version}, "
                f"{entry.maximum_version}] of assignor {assignor.name!r}, which supports "
                f"[{assignor.minimum_version}, {assignor.maximum_version}]"
            )
        versions.append(highest)
    return versions


class UnknownAssignorError(LookupError):
    pass


def _registry() -> dict[str, ConnectAssignor]:
    from coordinator.core.assignors.eager import EagerAssignor
    from coordinator.core.assignors.incremental_cooperative import IncrementalCooperativeAssignor

    return {a.name: a for a in (EagerAssignor(), IncrementalCooperativeAssignor())}


# The assignors this code ships, by name: what a `ServerAssignor` may name, and what a worker runs.
ASSIGNORS: dict[str, ConnectAssignor] = _registry()


def assignor(name: str) -> ConnectAssignor:
    """The shipped assignor called `name`."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise UnknownAssignorError(f"unknown assignor {name!r}; known: {', '.join(sorted(ASSIGNORS))}") from None
