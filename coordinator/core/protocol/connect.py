"""The worker protocol (seed 000): ConnectGroupHeartbeat, PrepareAssignment and InstallAssignment."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from msgspec import field
from msgspec.structs import astuple

from records import Assignor, ClassicMemberMetadata, ConnectorsAndTasks
from records.constraints import Base64, Int8, Int16, Int32, doc

from coordinator.core.assignors import GroupAssignment, GroupSpec, MemberAssignment
from coordinator.core.protocol.common import ErrorCode, Message

__all__ = [
    "ClassicJoinHeartbeat",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "InstallAssignmentRequest",
    "InstallMember",
    "PrepareAssignmentError",
    "PrepareAssignmentRequest",
    "PrepareAssignmentResponse",
]

_MEMBER_EPOCH = (
    "The current member epoch; 0 to join the group; -1 to leave the group; -2 to leave as a static "
    "member whose assignment waits for its InstanceId to return. Below -2 is INVALID_REQUEST (HTTP "
    "200)."
)
_UNCHANGED = "null if not provided or if it didn't change since the last heartbeat; "


class HeartbeatRequest(Message, omit_defaults=True):
    """ConnectGroupHeartbeat. The member must set all the fields when it joins for the first time or when
    an error occurs; otherwise it only fills in the fields which have changed since the last heartbeat
    (null or absent = unchanged)."""

    group_id: Annotated[str, doc("The group identifier (non-empty, else INVALID_REQUEST at HTTP 200).")]
    member_id: Annotated[str, doc("The member id, chosen by the worker and kept for its whole lifetime.")]
    member_epoch: Annotated[Int32, doc(_MEMBER_EPOCH)]
    instance_id: Annotated[str | None, doc(_UNCHANGED + "the instance id (static membership) otherwise.")] = None
    rack_id: Annotated[str | None, doc(_UNCHANGED + "the rack of the worker otherwise.")] = None
    rebalance_timeout_ms: Annotated[
        Int32,
        doc(
            "-1 if it didn't change since the last heartbeat; the maximum time in milliseconds that the coordinator "
            "will wait on the member to revoke its connectors/tasks otherwise (> 0; it must be set when joining). "
            "Absent is -1; null is refused."
        ),
    ] = -1
    server_assignor: Annotated[
        str | None,
        doc(
            _UNCHANGED + "the server side assignor to use otherwise (eager or incremental_cooperative). Never "
            "together with ClientAssignors."
        ),
    ] = None
    client_assignors: Annotated[
        tuple[Assignor, ...] | None, doc(_UNCHANGED + "the list of client-side assignors otherwise.")
    ] = None
    # The seed's ConnectorsAndTasks: what the worker owns.
    owned: Annotated[
        ConnectorsAndTasks | None,
        doc("null if it didn't change since the last heartbeat; the connectors/tasks owned by the worker."),
    ] = field(default=None, name="ConnectorsAndTasks")
    # Where the worker's REST API listens (the seed's Worker "url"); None = unchanged.
    url: Annotated[str | None, doc(_UNCHANGED + "where the worker's REST API listens otherwise.")] = None
    topic_partitions: Annotated[
        Any,
        doc(
            "Seed 003: a member of another group type owns topic partitions. A connect member must leave it absent "
            "or null: any other value is INVALID_REQUEST (HTTP 200)."
        ),
    ] = None
    # Only a classic member's JoinGroup translated into a heartbeat has one (`ClassicJoinHeartbeat`): a
    # class attribute here, so that no body on the wire can set it.
    classic: ClassVar[ClassicMemberMetadata | None] = None


class ClassicJoinHeartbeat(HeartbeatRequest):
    """A classic member's JoinGroup as the heartbeat the coordinator translates it into (seed 000's
    migration): its session timeout and protocols too. Made by the coordinator only, never decoded."""

    classic: ClassicMemberMetadata | None = None  # type: ignore[misc]


class HeartbeatResponse(Message):
    """ConnectGroupHeartbeat response."""

    error_code: Annotated[int, doc("The top-level error code, or 0 if there was no error.")] = ErrorCode.NONE
    error_message: Annotated[str | None, doc("The top-level error message, or null if there was no error.")] = None
    member_epoch: Annotated[Int32, doc("The member epoch.")] = 0
    heartbeat_interval_ms: Annotated[Int32, doc("The heartbeat interval in milliseconds.")] = 0
    # What the member should own now; None unless it changes.
    assignment: Annotated[
        MemberAssignment | None, doc("null unless the member's assignment changes; the assignment otherwise.")
    ] = None
    # Beyond the seed. Always sent; 0 lets a worker read an older coordinator's answer.
    session_timeout_ms: Annotated[
        Int32,
        doc(
            "Beyond the seed: the session timeout in milliseconds the coordinator holds this member to (the "
            "group's SessionTimeoutMs, else the server's default). A member that has had no heartbeat answered "
            "for the shorter of this and its own session timeout stops its work: by then the coordinator may "
            "give it to another member. 0 in an answer with an error."
        ),
    ] = 0


class PrepareAssignmentRequest(Message):
    """ConnectGroupPrepareAssignment: the chosen member asks for the group state to feed its client-side
    assignor."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[str, doc("The member id.")]
    member_epoch: Annotated[Int32, doc("The member epoch (>= 0, else INVALID_REQUEST at HTTP 200).")]


class PrepareAssignmentResponse(GroupSpec):
    """ConnectGroupPrepareAssignment response with no error: the group state an assignor takes (the
    seed's fields, the configured connectors and the current target assignment). It is the `GroupSpec`
    `ConnectAssignor.assign` takes, with the assignor to run."""

    error_code: Annotated[Literal[0], doc("0: no error.")] = 0
    error_message: Annotated[None, doc("null: no error.")] = None
    assignor_name: Annotated[str, doc("The selected assignor.")] = ""

    @classmethod
    def of(cls, spec: GroupSpec, assignor_name: str) -> PrepareAssignmentResponse:
        return cls(*astuple(spec), assignor_name=assignor_name)  # type: ignore[misc]


class PrepareAssignmentError(Message):
    """ConnectGroupPrepareAssignment response with an error."""

    error_code: Annotated[int, doc("The top-level error code.")]
    error_message: Annotated[str | None, doc("The top-level error message.")] = None
    group_epoch: Annotated[Int32, doc("0.")] = 0
    assignor_name: Annotated[None, doc("null.")] = None


class InstallMember(Message, omit_defaults=True):
    """One member's part of the installed assignment: a `MemberAssignment` (`assignment`) as the seed
    spells it inside InstallAssignment."""

    member_id: Annotated[str, doc("The member ID.")]
    connectors_and_tasks: Annotated[
        ConnectorsAndTasks | None,
        doc("The assigned connectors/tasks to the member. Must be set: absent or null is INVALID_REQUEST (HTTP 200)."),
    ] = None
    error: Annotated[Int8, doc("The assigned error; absent is 0.")] = 0
    version: Annotated[Int16, doc("The metadata version; absent is 0.")] = 0
    metadata: Annotated[Base64, doc("The metadata bytes; absent is empty.")] = b""
    # Seed 003: never together with ConnectorsAndTasks.
    topic_partitions: Annotated[
        Any,
        doc(
            "Seed 003: never together with ConnectorsAndTasks. Must be absent or null for a connect group: any other "
            "value is INVALID_REQUEST (HTTP 200)."
        ),
    ] = field(default=None, name="Partitions")

    @classmethod
    def of(cls, member_id: str, assignment: MemberAssignment | None, topic_partitions: Any = None) -> InstallMember:
        if assignment is None:
            return cls(member_id, topic_partitions=topic_partitions)
        a = assignment
        return cls(member_id, a.assignment, a.error, a.version, a.metadata, topic_partitions)

    @property
    def assignment(self) -> MemberAssignment | None:
        """What it is given; None: the body had no ConnectorsAndTasks."""
        cat = self.connectors_and_tasks
        return None if cat is None else MemberAssignment(cat, self.error, self.version, self.metadata)


class InstallAssignmentRequest(Message, omit_defaults=True):
    """ConnectGroupInstallAssignment: the chosen member installs the result of its client-side assignor
    for the group epoch it was computed at, with the deferred items and delay of DESIGN §5."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[str, doc("The member id.")]
    member_epoch: Annotated[Int32, doc("The member epoch (>= 0, else INVALID_REQUEST at HTTP 200).")]
    group_epoch: Annotated[Int32, doc("The group epoch the assignment was computed at (PrepareAssignment's).")]
    members: Annotated[tuple[InstallMember, ...], doc("The members; absent is empty, null is refused.")] = ()
    error: Annotated[
        Int8,
        doc(
            "The assignment error; or zero if the assignment is successful. Non-zero keeps "
            "every member's current assignment. Absent is 0."
        ),
    ] = 0
    error_message: Annotated[str | None, doc("Why the assignor failed, or null.")] = None
    deferred: Annotated[
        ConnectorsAndTasks | None,
        doc("Items deliberately left unassigned until the scheduled rebalance; null is none."),
    ] = None
    scheduled_rebalance_delay_ms: Annotated[
        Int32 | None,
        doc(
            "With Deferred: how long until the coordinator rebalances for them (>= 0, else INVALID_REQUEST at HTTP "
            "200); null is none."
        ),
    ] = None

    @classmethod
    def of(
        cls, group_id: str, member_id: str, member_epoch: int, group_epoch: int, result: GroupAssignment
    ) -> InstallAssignmentRequest:
        """The install of an assignor's `result`, computed for `group_epoch`."""
        return cls(
            group_id,
            member_id,
            member_epoch,
            group_epoch,
            tuple([InstallMember.of(m, a) for m, a in sorted(result.members.items())]),
            result.error,
            result.error_message,
            result.deferred,
            result.scheduled_rebalance_delay_ms,
        )
