"""The HTTP API's bodies (DESIGN §7), declared once as typed structs.

Each request and response body is a `msgspec.Struct` whose fields are the seed's names (`GroupId`,
`MemberEpoch`, ...; `rename="pascal"` turns `group_id` into `GroupId`). The same declarations:

- decode and validate a request in one pass (`decode`): a body that does not fit raises `WireError`
  naming the field (`... - at $.ClientAssignors[0].Name`), which the server answers with HTTP 400
  and INVALID_REQUEST; never a 500;
- encode responses (`encode`), and the worker SDK's requests, so both sides share one shape;
- generate the OpenAPI document (`coordinator.api.openapi`), which therefore says exactly what is
  accepted.

Each struct converts to and from the protocol's own types in one place: `protocol()` for what the
state machine takes or gave, `of(...)` for the other way. `bytes` travel as base64 (RFC 4648,
standard alphabet, padded). Integers are JSON integers within their format's range; as JSON Schema
reads them (the document's language), a number with a zero fraction is that integer (2.0 is 2),
any other fraction is refused, so the document and the decoder agree exactly.
Unknown properties are ignored. Rules the state machine checks beyond the type (epochs >= -2,
non-empty ids, version ranges) answer HTTP 200 with an ErrorCode, as the seed's error table says.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta, Struct

import records

from coordinator.core import assignors, protocol
from coordinator.core.protocol import ErrorCode
from coordinator.tools.text import iso_time

T = TypeVar("T")
_TASK_ID = records.TaskId

# Exactly the strings msgspec's base64 decoder takes: standard alphabet, padded to a multiple of four.
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"

Int8 = Annotated[int, Meta(ge=-(2**7), le=2**7 - 1, extra_json_schema={"format": "int8"})]
Int16 = Annotated[int, Meta(ge=-(2**15), le=2**15 - 1, extra_json_schema={"format": "int16"})]
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1, extra_json_schema={"format": "int32"})]
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1, extra_json_schema={"format": "int64"})]
Base64 = Annotated[bytes, Meta(extra_json_schema={"contentEncoding": "base64", "pattern": BASE64_PATTERN})]


def doc(text: str) -> Meta:
    return Meta(description=text)


_MEMBER_EPOCH = (
    "The current member epoch; 0 to join the group; -1 to leave the group; -2 to leave as a static "
    "member whose assignment waits for its InstanceId to return. Below -2 is INVALID_REQUEST (HTTP "
    "200)."
)
_TIMEOUT = (
    "Milliseconds; null restores the server's default. Values below the server's minimum are "
    "INVALID_REQUEST (HTTP 200)."
)
_UNCHANGED = "null if not provided or if it didn't change since the last heartbeat; "


class WireError(ValueError):
    """A body that is not what the API accepts; the message names the field."""


class Body(Struct, rename="pascal", kw_only=True, gc=False):
    """Every body: the seed's field names. No body refers back to itself, so the garbage collector
    need not track them (msgspec's `gc=False`: a third off decoding)."""


# --- shared shapes ------------------------------------------------------------------------------------


class TaskId(Body):
    """A connector task, numbered from 0 as in Kafka Connect."""

    connector: Annotated[str, doc("The connector's name.")]
    task: Annotated[Int32, doc("The task number; below 0 is INVALID_REQUEST (HTTP 200).")]


class ConnectorsAndTasks(Body):
    """A set of connectors and tasks: what a worker owns, an assignment, a pending revocation, deferred
    work. Names must be non-empty and items listed once, else INVALID_REQUEST (HTTP 200)."""

    connectors: Annotated[list[str], doc("The connectors; absent is empty, null is refused.")] = []
    tasks: Annotated[list[TaskId], doc("The tasks; absent is empty, null is refused.")] = []

    @classmethod
    def of(cls, value: records.ConnectorsAndTasks) -> ConnectorsAndTasks:
        return cls(
            connectors=list(value.connectors), tasks=[TaskId(connector=t.connector, task=t.task) for t in value.tasks]
        )

    def protocol(self) -> records.ConnectorsAndTasks:
        return records.ConnectorsAndTasks(
            tuple(self.connectors), tuple([_TASK_ID(t.connector, t.task) for t in self.tasks])
        )


class ConnectorTaskCount(Body):
    """A connector the group must run, and how many tasks it has."""

    name: Annotated[str, doc("The connector's name (non-empty, listed once; else INVALID_REQUEST at HTTP 200).")]
    tasks: Annotated[Int32, doc("How many tasks it has, within [0, 100000] (else INVALID_REQUEST at HTTP 200).")]

    @classmethod
    def of(cls, value: records.ConnectorTaskCount) -> ConnectorTaskCount:
        return cls(name=value.name, tasks=value.tasks)

    def protocol(self) -> records.ConnectorTaskCount:
        return records.ConnectorTaskCount(self.name, self.tasks)


class ErrorResponse(Body):
    """An outcome and nothing else: the whole answer of install-assignment and the admin writes, and of
    any operation whose partition cannot serve (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) or whose
    coordinator failed unexpectedly (COORDINATOR_NOT_AVAILABLE)."""

    error_code: Annotated[int, doc("The top-level error code, or 0 if there was no error.")]
    error_message: Annotated[str | None, doc("The top-level error message, or null if there was no error.")]

    @classmethod
    def of(cls, value: protocol.ErrorResponse) -> ErrorResponse:
        return cls(error_code=int(value.error_code), error_message=value.error_message)


# --- ConnectGroupHeartbeat ----------------------------------------------------------------------------


class ClientAssignor(Body):
    """A client-side assignor the worker supports."""

    name: Annotated[str, doc("The name of the assignor.")]
    minimum_version: Annotated[
        Int16, doc("The minimum supported version for the metadata (>= -1, else INVALID_REQUEST at HTTP 200).")
    ]
    maximum_version: Annotated[
        Int16,
        doc(
            "The maximum supported version for the metadata (>= 0 and >= "
            "MinimumVersion, else INVALID_REQUEST at HTTP 200)."
        ),
    ]
    reason: Annotated[Int8, doc("The reason of the metadata update; absent is 0.")] = 0
    version: Annotated[
        Int16, doc("The version of the metadata, within [MinimumVersion, MaximumVersion]; absent is 0.")
    ] = 0
    metadata: Annotated[Base64, doc("The metadata; absent is empty.")] = b""

    @classmethod
    def of(cls, a: records.Assignor) -> ClientAssignor:
        return cls(
            name=a.name,
            minimum_version=a.minimum_version,
            maximum_version=a.maximum_version,
            reason=a.reason,
            version=a.version,
            metadata=a.metadata,
        )

    def protocol(self) -> records.Assignor:
        return records.Assignor(
            self.name, self.minimum_version, self.maximum_version, self.reason, self.version, self.metadata
        )


class HeartbeatRequest(Body, omit_defaults=True):
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
        list[ClientAssignor] | None, doc(_UNCHANGED + "the list of client-side assignors otherwise.")
    ] = None
    connectors_and_tasks: Annotated[
        ConnectorsAndTasks | None,
        doc("null if it didn't change since the last heartbeat; the connectors/tasks owned by the worker."),
    ] = None
    url: Annotated[str | None, doc(_UNCHANGED + "where the worker's REST API listens otherwise.")] = None
    topic_partitions: Annotated[
        Any,
        doc(
            "Seed 003: a member of another group type owns topic partitions. A connect member must leave it absent "
            "or null: any other value is INVALID_REQUEST (HTTP 200)."
        ),
    ] = None

    @classmethod
    def of(cls, r: protocol.HeartbeatRequest) -> HeartbeatRequest:
        return cls(
            group_id=r.group_id,
            member_id=r.member_id,
            member_epoch=r.member_epoch,
            instance_id=r.instance_id,
            rack_id=r.rack_id,
            rebalance_timeout_ms=r.rebalance_timeout_ms,
            server_assignor=r.server_assignor,
            client_assignors=None if r.client_assignors is None else [ClientAssignor.of(a) for a in r.client_assignors],
            connectors_and_tasks=None if r.owned is None else ConnectorsAndTasks.of(r.owned),
            url=r.url,
        )

    def protocol(self) -> protocol.HeartbeatRequest:
        assignors_ = self.client_assignors
        owned = self.connectors_and_tasks
        return protocol.HeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            client_assignors=None if assignors_ is None else tuple(a.protocol() for a in assignors_),
            owned=None if owned is None else owned.protocol(),
            url=self.url,
            topic_partitions=self.topic_partitions,
        )


class Assignment(Body):
    """The assignment: what the member should own now."""

    error: Annotated[Int8, doc("The assigned error (the assignor's, 0 for none).")]
    connectors_and_tasks: Annotated[ConnectorsAndTasks, doc("The assigned connectors/tasks to the member.")]
    version: Annotated[Int16, doc("The version of the metadata.")]
    metadata: Annotated[Base64, doc("The assigned metadata.")]

    @classmethod
    def of(cls, a: assignors.MemberAssignment) -> Assignment:
        return cls(
            error=a.error,
            connectors_and_tasks=ConnectorsAndTasks.of(a.assignment),
            version=a.version,
            metadata=a.metadata,
        )

    def protocol(self) -> assignors.MemberAssignment:
        return assignors.MemberAssignment(self.connectors_and_tasks.protocol(), self.error, self.version, self.metadata)


class HeartbeatResponse(Body):
    """ConnectGroupHeartbeat response."""

    error_code: Annotated[int, doc("The top-level error code, or 0 if there was no error.")]
    error_message: Annotated[str | None, doc("The top-level error message, or null if there was no error.")]
    member_epoch: Annotated[Int32, doc("The member epoch.")]
    heartbeat_interval_ms: Annotated[Int32, doc("The heartbeat interval in milliseconds.")]
    assignment: Annotated[
        Assignment | None, doc("null unless the member's assignment changes; the assignment otherwise.")
    ]
    # Beyond the seed. Always sent; the default lets a worker read an older coordinator's answer.
    session_timeout_ms: Annotated[
        Int32,
        doc(
            "Beyond the seed: the session timeout in milliseconds the coordinator holds this member to (the "
            "group's SessionTimeoutMs, else the server's default). A member that has had no heartbeat answered "
            "for the shorter of this and its own session timeout stops its work: by then the coordinator may "
            "give it to another member. 0 in an answer with an error."
        ),
    ] = 0

    @classmethod
    def of(cls, r: protocol.HeartbeatResponse) -> HeartbeatResponse:
        return cls(
            error_code=int(r.error_code),
            error_message=r.error_message,
            member_epoch=r.member_epoch,
            heartbeat_interval_ms=r.heartbeat_interval_ms,
            assignment=None if r.assignment is None else Assignment.of(r.assignment),
            session_timeout_ms=r.session_timeout_ms,
        )

    def protocol(self) -> protocol.HeartbeatResponse:
        return protocol.HeartbeatResponse(
            self.error_code,
            self.error_message,
            self.member_epoch,
            self.heartbeat_interval_ms,
            None if self.assignment is None else self.assignment.protocol(),
            self.session_timeout_ms,
        )


# --- ConnectGroupPrepareAssignment --------------------------------------------------------------------


class PrepareAssignmentRequest(Body):
    """ConnectGroupPrepareAssignment: the chosen member asks for the group state to feed its client-side
    assignor."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[str, doc("The member id.")]
    member_epoch: Annotated[Int32, doc("The member epoch (>= 0, else INVALID_REQUEST at HTTP 200).")]

    def protocol(self) -> protocol.PrepareAssignmentRequest:
        return protocol.PrepareAssignmentRequest(self.group_id, self.member_id, self.member_epoch)


class AssignorEntry(Body):
    """The member's entry for the selected assignor (all 0 and empty for a server-side assignor)."""

    minimum_version: Annotated[Int16, doc("The minimum supported version for the metadata.")]
    maximum_version: Annotated[Int16, doc("The maximum supported version for the metadata.")]
    version: Annotated[Int16, doc("The version of the metadata.")]
    reason: Annotated[Int8, doc("The reason of the metadata update.")]
    metadata: Annotated[Base64, doc("The assignor metadata.")]


class GroupMember(Body):
    """A member of the group at GroupEpoch, as the assignor sees it."""

    member_id: Annotated[str, doc("The member ID.")]
    member_epoch: Annotated[Int32, doc("The member epoch.")]
    instance_id: Annotated[str | None, doc("The member instance ID.")]
    assignor: AssignorEntry
    connectors_and_tasks: Annotated[ConnectorsAndTasks, doc("What the member owns now.")]
    target_connectors_and_tasks: Annotated[ConnectorsAndTasks, doc("Its part of the current target assignment.")]

    @classmethod
    def of(cls, m: assignors.AssignmentMember) -> GroupMember:
        return cls(
            member_id=m.member_id,
            member_epoch=m.member_epoch,
            instance_id=m.instance_id,
            assignor=AssignorEntry(
                minimum_version=m.minimum_version,
                maximum_version=m.maximum_version,
                version=m.version,
                reason=m.reason,
                metadata=m.metadata,
            ),
            connectors_and_tasks=ConnectorsAndTasks.of(m.owned),
            target_connectors_and_tasks=ConnectorsAndTasks.of(m.target),
        )

    def protocol(self) -> assignors.AssignmentMember:
        a = self.assignor
        return assignors.AssignmentMember(
            self.member_id,
            self.instance_id,
            self.member_epoch,
            target=self.target_connectors_and_tasks.protocol(),
            owned=self.connectors_and_tasks.protocol(),
            minimum_version=a.minimum_version,
            maximum_version=a.maximum_version,
            reason=a.reason,
            version=a.version,
            metadata=a.metadata,
        )


class DepartedMember(Body):
    """A member that left while its target held work."""

    member_id: Annotated[str, doc("The member ID.")]
    instance_id: Annotated[str | None, doc("The member instance ID.")]
    connectors_and_tasks: Annotated[ConnectorsAndTasks, doc("The work it held, kept for its return.")]
    departed_at_ms: Annotated[Int64, doc("When it left (coordinator clock, ms since the epoch).")]

    @classmethod
    def of(cls, d: records.DepartedMember) -> DepartedMember:
        return cls(
            member_id=d.member_id,
            instance_id=d.instance_id,
            connectors_and_tasks=ConnectorsAndTasks.of(d.assignment),
            departed_at_ms=d.departed_at_ms,
        )

    def protocol(self) -> records.DepartedMember:
        return records.DepartedMember(
            self.member_id, self.instance_id, self.connectors_and_tasks.protocol(), self.departed_at_ms
        )


class PrepareAssignmentResponse(Body):
    """ConnectGroupPrepareAssignment response with no error: the group state an assignor takes (the
    seed's fields, the configured connectors and the current target assignment)."""

    error_code: Annotated[Literal[0], doc("0: no error.")]
    error_message: Annotated[None, doc("null: no error.")]
    group_id: Annotated[str, doc("The group identifier.")]
    group_epoch: Annotated[Int32, doc("The group epoch the assignment is computed for.")]
    assignor_name: Annotated[str, doc("The selected assignor.")]
    connectors: Annotated[list[ConnectorTaskCount], doc("The connectors the group runs, and their task counts.")]
    members: Annotated[list[GroupMember], doc("The members, by member id.")]
    departed_members: Annotated[
        list[DepartedMember],
        doc("Members whose work waits for their return until ScheduledRebalanceMaxDelayMs has passed."),
    ]
    deferred: Annotated[ConnectorsAndTasks, doc("Items the current target deferred.")]
    scheduled_rebalance_at_ms: Annotated[
        Int64 | None, doc("When the coordinator rebalances for the deferred items (ms since the epoch), or null.")
    ]
    scheduled_rebalance_max_delay_ms: Annotated[
        Int32, doc("How long departed work may wait (the group's scheduled.rebalance.max.delay.ms).")
    ]
    now_ms: Annotated[Int64, doc("The coordinator's clock when it prepared this (ms since the epoch).")]

    @classmethod
    def of(cls, r: protocol.PrepareAssignmentResponse) -> PrepareAssignmentResponse | PrepareAssignmentError:
        """The answer to send: this, or the error when the coordinator prepared no group."""
        spec = r.group
        if spec is None:
            return PrepareAssignmentError(
                error_code=int(r.error_code),
                error_message=r.error_message,
                group_epoch=r.group_epoch,
                assignor_name=None,
            )
        return cls(
            error_code=0,
            error_message=None,
            group_id=spec.group_id,
            group_epoch=r.group_epoch,
            assignor_name=r.assignor_name,
            connectors=[ConnectorTaskCount.of(c) for c in spec.connectors],
            members=[GroupMember.of(m) for m in spec.members],
            departed_members=[DepartedMember.of(d) for d in spec.departed],
            deferred=ConnectorsAndTasks.of(spec.deferred),
            scheduled_rebalance_at_ms=spec.scheduled_rebalance_at_ms,
            scheduled_rebalance_max_delay_ms=spec.scheduled_rebalance_max_delay_ms,
            now_ms=spec.now_ms,
        )

    def group_spec(self) -> assignors.GroupSpec:
        """The `GroupSpec` this answer describes: what the worker's assignor takes."""
        return assignors.GroupSpec(
            group_id=self.group_id,
            group_epoch=self.group_epoch,
            connectors=tuple([c.protocol() for c in self.connectors]),
            members=tuple([m.protocol() for m in self.members]),
            departed=tuple([d.protocol() for d in self.departed_members]),
            deferred=self.deferred.protocol(),
            scheduled_rebalance_at_ms=self.scheduled_rebalance_at_ms,
            scheduled_rebalance_max_delay_ms=self.scheduled_rebalance_max_delay_ms,
            now_ms=self.now_ms,
        )


class PrepareAssignmentError(Body):
    """ConnectGroupPrepareAssignment response with an error."""

    error_code: Annotated[int, doc("The top-level error code.")]
    error_message: Annotated[str | None, doc("The top-level error message.")]
    group_epoch: Annotated[Int32, doc("0.")]
    assignor_name: Annotated[None, doc("null.")]


# --- ConnectGroupInstallAssignment --------------------------------------------------------------------


class InstallMember(Body, omit_defaults=True):
    """One member's part of the installed assignment."""

    member_id: Annotated[str, doc("The member ID.")]
    connectors_and_tasks: Annotated[
        ConnectorsAndTasks | None,
        doc("The assigned connectors/tasks to the member. Must be set: absent or null is INVALID_REQUEST (HTTP 200)."),
    ] = None
    error: Annotated[Int8, doc("The assigned error; absent is 0.")] = 0
    version: Annotated[Int16, doc("The metadata version; absent is 0.")] = 0
    metadata: Annotated[Base64, doc("The metadata bytes; absent is empty.")] = b""
    partitions: Annotated[
        Any,
        doc(
            "Seed 003: never together with ConnectorsAndTasks. Must be absent or null for a connect group: any other "
            "value is INVALID_REQUEST (HTTP 200)."
        ),
    ] = None

    def protocol(self) -> protocol.InstallMember:
        cat = self.connectors_and_tasks
        return protocol.InstallMember(
            self.member_id,
            None
            if cat is None
            else assignors.MemberAssignment(cat.protocol(), self.error, self.version, self.metadata),
            topic_partitions=self.partitions,
        )


class InstallAssignmentRequest(Body, omit_defaults=True):
    """ConnectGroupInstallAssignment: the chosen member installs the result of its client-side assignor
    for the group epoch it was computed at."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[str, doc("The member id.")]
    member_epoch: Annotated[Int32, doc("The member epoch (>= 0, else INVALID_REQUEST at HTTP 200).")]
    group_epoch: Annotated[Int32, doc("The group epoch the assignment was computed at (PrepareAssignment's).")]
    members: Annotated[list[InstallMember], doc("The members; absent is empty, null is refused.")] = []
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
        cls, group_id: str, member_id: str, member_epoch: int, group_epoch: int, result: assignors.GroupAssignment
    ) -> InstallAssignmentRequest:
        """The install of an assignor's `result`, computed for `group_epoch`."""
        return cls(
            group_id=group_id,
            member_id=member_id,
            member_epoch=member_epoch,
            group_epoch=group_epoch,
            error=result.error,
            error_message=result.error_message,
            members=[
                InstallMember(
                    member_id=m,
                    connectors_and_tasks=ConnectorsAndTasks.of(a.assignment),
                    error=a.error,
                    version=a.version,
                    metadata=a.metadata,
                )
                for m, a in sorted(result.members.items())
            ],
            deferred=ConnectorsAndTasks.of(result.deferred),
            scheduled_rebalance_delay_ms=result.scheduled_rebalance_delay_ms,
        )

    def protocol(self) -> protocol.InstallAssignmentRequest:
        return protocol.InstallAssignmentRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            group_epoch=self.group_epoch,
            members=tuple(m.protocol() for m in self.members),
            error=self.error,
            error_message=self.error_message,
            deferred=records.ConnectorsAndTasks() if self.deferred is None else self.deferred.protocol(),
            scheduled_rebalance_delay_ms=self.scheduled_rebalance_delay_ms,
        )


# --- the classic protocol (seed 004): JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------

_INSTANCE = "The group instance id of a static member (Kafka's GroupInstanceId), null for a dynamic one."


class ClassicProtocol(Body):
    """One protocol a member supports, with its metadata for it (for Connect: an assignor)."""

    name: Annotated[str, doc("The protocol name.")]
    metadata: Annotated[Base64, doc("The protocol metadata.")] = b""


class JoinGroupRequest(Body, omit_defaults=True, kw_only=True):
    """JoinGroup. Answered once the join phase completes: the request waits up to the group's rebalance
    timeout (the longest of its members')."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[
        str, doc("The member id the coordinator gave; empty on the first join (MEMBER_ID_REQUIRED answers with one).")
    ] = ""
    group_instance_id: Annotated[str | None, doc(_INSTANCE)] = None
    protocol_type: Annotated[str, doc("The protocol type, the same for every member (Connect: connect).")]
    protocols: Annotated[list[ClassicProtocol], doc("The protocols the member supports, by preference.")]
    session_timeout_ms: Annotated[Int32, doc("The member's session timeout in milliseconds.")]
    rebalance_timeout_ms: Annotated[
        Int32, doc("How long the coordinator waits for every member to join when rebalancing; -1: the session timeout.")
    ] = -1
    reason: Annotated[str | None, doc("Why the member joins, for the logs.")] = None

    @classmethod
    def of(cls, r: protocol.JoinGroupRequest) -> JoinGroupRequest:
        return cls(
            group_id=r.group_id,
            member_id=r.member_id,
            group_instance_id=r.instance_id,
            protocol_type=r.protocol_type,
            protocols=[ClassicProtocol(name=p.name, metadata=p.metadata) for p in r.protocols],
            session_timeout_ms=r.session_timeout_ms,
            rebalance_timeout_ms=r.rebalance_timeout_ms,
            reason=r.reason,
        )

    def protocol(self) -> protocol.JoinGroupRequest:
        return protocol.JoinGroupRequest(
            self.group_id,
            self.member_id,
            self.protocol_type,
            tuple(protocol.ClassicProtocol(p.name, p.metadata) for p in self.protocols),
            self.session_timeout_ms,
            self.rebalance_timeout_ms,
            self.group_instance_id,
            self.reason,
        )


class JoinGroupMember(Body):
    member_id: Annotated[str, doc("The member id.")]
    group_instance_id: Annotated[str | None, doc(_INSTANCE)]
    metadata: Annotated[Base64, doc("Its metadata for the chosen protocol.")]


class JoinGroupResponse(Body):
    """JoinGroup response: the generation, its protocol and leader; the members for the leader only."""

    error_code: Annotated[int, doc("The error code, or 0 if there was no error.")]
    error_message: Annotated[str | None, doc("The error message, or null if there was no error.")]
    generation_id: Annotated[Int32, doc("The generation of the group; -1 with an error.")]
    protocol_type: Annotated[str | None, doc("The group's protocol type.")]
    protocol_name: Annotated[str | None, doc("The protocol the coordinator chose.")]
    leader: Annotated[str, doc("The leader's member id.")]
    skip_assignment: Annotated[
        bool, doc("The leader must not compute assignments: a static leader came back to a stable group.")
    ]
    member_id: Annotated[str, doc("The member's id (with MEMBER_ID_REQUIRED: the one to join with).")]
    members: Annotated[
        list[JoinGroupMember], doc("Every member with its metadata, for the leader; empty for the others.")
    ]

    @classmethod
    def of(cls, r: protocol.JoinGroupResponse) -> JoinGroupResponse:
        return cls(
            error_code=int(r.error_code),
            error_message=r.error_message,
            generation_id=r.generation_id,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            leader=r.leader,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
            members=[
                JoinGroupMember(member_id=m.member_id, group_instance_id=m.instance_id, metadata=m.metadata)
                for m in r.members
            ],
        )

    def protocol(self) -> protocol.JoinGroupResponse:
        return protocol.JoinGroupResponse(
            self.error_code,
            self.error_message,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader,
            self.skip_assignment,
            self.member_id,
            tuple(protocol.JoinGroupMember(m.member_id, m.group_instance_id, m.metadata) for m in self.members),
        )


class SyncGroupAssignment(Body):
    member_id: Annotated[str, doc("The member id.")]
    assignment: Annotated[Base64, doc("Its assignment.")]


class SyncGroupRequest(Body, omit_defaults=True):
    """SyncGroup. The leader's carries every member's assignment; the others' wait for it."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[str, doc("The member id.")]
    generation_id: Annotated[Int32, doc("The generation the member joined.")]
    group_instance_id: Annotated[str | None, doc(_INSTANCE)] = None
    protocol_type: Annotated[str | None, doc("The protocol type, checked when given.")] = None
    protocol_name: Annotated[str | None, doc("The protocol name, checked when given.")] = None
    assignments: Annotated[list[SyncGroupAssignment], doc("The leader's assignments; empty for the others.")] = []

    @classmethod
    def of(cls, r: protocol.SyncGroupRequest) -> SyncGroupRequest:
        return cls(
            group_id=r.group_id,
            member_id=r.member_id,
            generation_id=r.generation_id,
            group_instance_id=r.instance_id,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            assignments=[SyncGroupAssignment(member_id=a.member_id, assignment=a.assignment) for a in r.assignments],
        )

    def protocol(self) -> protocol.SyncGroupRequest:
        return protocol.SyncGroupRequest(
            self.group_id,
            self.member_id,
            self.generation_id,
            self.group_instance_id,
            self.protocol_type,
            self.protocol_name,
            tuple(protocol.SyncGroupAssignment(a.member_id, a.assignment) for a in self.assignments),
        )


class SyncGroupResponse(Body):
    """SyncGroup response: the member's assignment for the generation."""

    error_code: Annotated[int, doc("The error code, or 0 if there was no error.")]
    error_message: Annotated[str | None, doc("The error message, or null if there was no error.")]
    protocol_type: Annotated[str | None, doc("The group's protocol type.")]
    protocol_name: Annotated[str | None, doc("The group's protocol.")]
    assignment: Annotated[Base64, doc("The member's assignment.")]

    @classmethod
    def of(cls, r: protocol.SyncGroupResponse) -> SyncGroupResponse:
        return cls(
            error_code=int(r.error_code),
            error_message=r.error_message,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            assignment=r.assignment,
        )

    def protocol(self) -> protocol.SyncGroupResponse:
        return protocol.SyncGroupResponse(
            self.error_code, self.error_message, self.protocol_type, self.protocol_name, self.assignment
        )


class ClassicHeartbeatRequest(Body, omit_defaults=True):
    """Heartbeat of a classic member: REBALANCE_IN_PROGRESS tells it to join again."""

    group_id: Annotated[str, doc("The group identifier.")]
    member_id: Annotated[str, doc("The member id.")]
    generation_id: Annotated[Int32, doc("The generation the member is in.")]
    group_instance_id: Annotated[str | None, doc(_INSTANCE)] = None

    def protocol(self) -> protocol.ClassicHeartbeatRequest:
        return protocol.ClassicHeartbeatRequest(
            self.group_id, self.member_id, self.generation_id, self.group_instance_id
        )


class LeaveMember(Body, omit_defaults=True):
    member_id: Annotated[str, doc("The member id; empty to name a static member by its instance id.")] = ""
    group_instance_id: Annotated[str | None, doc(_INSTANCE)] = None
    reason: Annotated[str | None, doc("Why it leaves, for the logs.")] = None


class LeaveGroupRequest(Body):
    """LeaveGroup: members leave at once (Kafka's v3+ batch)."""

    group_id: Annotated[str, doc("The group identifier.")]
    members: Annotated[list[LeaveMember], doc("The members leaving.")]

    def protocol(self) -> protocol.LeaveGroupRequest:
        return protocol.LeaveGroupRequest(
            self.group_id, tuple(protocol.LeaveMember(m.member_id, m.group_instance_id, m.reason) for m in self.members)
        )


class LeaveMemberResponse(Body):
    member_id: Annotated[str, doc("The member id.")]
    group_instance_id: Annotated[str | None, doc(_INSTANCE)]
    error_code: Annotated[int, doc("This member's error code, or 0.")]
    error_message: Annotated[str | None, doc("This member's error message, or null.")]


class LeaveGroupResponse(Body):
    error_code: Annotated[int, doc("The top-level error code, or 0 if there was no error.")]
    error_message: Annotated[str | None, doc("The top-level error message, or null if there was no error.")]
    members: Annotated[list[LeaveMemberResponse], doc("Each member's outcome.")]

    @classmethod
    def of(cls, r: protocol.LeaveGroupResponse) -> LeaveGroupResponse:
        return cls(
            error_code=int(r.error_code),
            error_message=r.error_message,
            members=[
                LeaveMemberResponse(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    error_code=int(m.error_code),
                    error_message=m.error_message,
                )
                for m in r.members
            ],
        )


# --- FindCoordinator and the admin API -----------------------------------------------------------------


class FindCoordinatorRequest(Body):
    """Which coordinator serves a group."""

    group_id: Annotated[str, doc("The group identifier.")]


class FindCoordinatorResponse(Body):
    """The coordinator of the group's partition."""

    error_code: Annotated[Literal[0], doc("0: no error.")]
    error_message: Annotated[None, doc("null: no error.")]
    partition: Annotated[Int32, doc("The partition of the topic the group lives in (murmur2(GroupId) % partitions).")]
    url: Annotated[str, doc("The base URL of the coordinator serving that partition.")]


GroupState = Annotated[
    Literal["EMPTY", "ASSIGNING", "RECONCILING", "STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"],
    doc(
        "EMPTY: no members; ASSIGNING: the group epoch is ahead of the assignment epoch; RECONCILING: a member is "
        "not at its target yet; STABLE: every member owns its target at the assignment epoch. A classic group "
        "(seed 004) is EMPTY, PREPARING_REBALANCE (waiting for JoinGroups), COMPLETING_REBALANCE (waiting for the "
        "leader's SyncGroup) or STABLE."
    ),
]


class GroupListing(Body):
    """A group."""

    group_id: Annotated[str, doc("The group identifier.")]
    group_epoch: Annotated[Int32, doc("The group epoch.")]
    state: GroupState
    members: Annotated[Int32, doc("How many members it has.")]

    @classmethod
    def of(cls, g: protocol.GroupListing) -> GroupListing:
        return cls(group_id=g.group_id, group_epoch=g.group_epoch, state=g.state, members=g.members)


class ListGroupsResponse(Body):
    """The groups of the partitions this process serves that the caller may Describe."""

    error_code: Annotated[Literal[0], doc("0: no error.")]
    groups: Annotated[list[GroupListing], doc("By group id.")]


class PartitionOwner(Body):
    """A partition of the topic and where it is served."""

    partition: Annotated[Int32, doc("The partition number.")]
    url: Annotated[str | None, doc("The base URL of the coordinator serving it, or null when none is known.")]


class PartitionOwnersResponse(Body):
    """Where every partition of the topic is served, as this process knows it: its own partitions, and
    the others from the ownership consumer group (group mode) or its peers (static mode with --peer)."""

    error_code: Annotated[Literal[0], doc("0: no error.")]
    url: Annotated[str, doc("This coordinator's advertised URL.")]
    partitions: Annotated[list[PartitionOwner], doc("Every partition of the topic, by number.")]


class MemberDescription(Body):
    """A member of the group."""

    member_id: Annotated[str, doc("The member ID.")]
    instance_id: Annotated[str | None, doc("The member instance ID, or null.")]
    client_id: Annotated[
        str,
        doc(
            "The client id its heartbeats came with: the Client-Id header (the SDK sends its client's), Kafka's "
            "client.id over the Kafka listener, else the authenticated principal."
        ),
    ]
    client_host: Annotated[str, doc("The address its heartbeats came from.")]
    url: Annotated[str | None, doc("Where the worker's REST API listens, or null.")]
    member_epoch: Annotated[Int32, doc("The member epoch (a classic member: the group's generation).")]
    state: Annotated[
        Literal["STABLE", "UNREVOKED", "UNRELEASED", "UNJOINED", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"],
        doc(
            "STABLE: owns its whole target; UNREVOKED: must give up PendingRevocation first; UNRELEASED: waits for "
            "others to release the rest of its target. A classic member is in seed 000's worker states: UNJOINED, "
            "PREPARING_REBALANCE (its JoinGroup waits), COMPLETING_REBALANCE (joined, waiting for its assignment) "
            "or STABLE."
        ),
    ]
    protocol: Annotated[Literal["connect", "classic"], doc("The protocol the member speaks.")]
    assignment: Annotated[ConnectorsAndTasks, doc("What it owns now (its current assignment).")]
    pending_revocation: Annotated[ConnectorsAndTasks, doc("What it must revoke before it moves on.")]
    target: Annotated[ConnectorsAndTasks, doc("Its part of the target assignment.")]
    config_offset: Annotated[
        Int64 | None,
        doc(
            "A classic member's Kafka Connect config topic offset, as its JoinGroup metadata says; null for connect "
            "members and where the metadata cannot be read."
        ),
    ]
    note: Annotated[
        str | None, doc("Why what a classic member runs is not known (its bytes are not Kafka Connect's), else null.")
    ]


class Departure(Body):
    """A member the change that wrote the group epoch removed, and why."""

    member_id: Annotated[str, doc("The member ID it had.")]
    instance_id: Annotated[str | None, doc("Its instance ID, or null.")]
    reason: Annotated[
        str,
        doc(
            "Why: leave (it sent -1, or a classic LeaveGroup), static-leave (it left with -2 and its instance did not "
            "return within its session timeout), session-timeout, rebalance-timeout (did not revoke in time), "
            "fenced-epoch (sent an epoch it had left behind), replaced (a new member took its instance ID). A "
            "later version may add reasons."
        ),
    ]
    reason_text: Annotated[str, doc("The reason in words.")]

    @classmethod
    def of(cls, d: records.Departure) -> Departure:
        return cls(
            member_id=d.member_id,
            instance_id=d.instance_id,
            reason=d.reason,
            reason_text=protocol.leave_reason_text(d.reason),
        )


class GroupDescription(Body):
    """A group: epochs, assignor, connectors, members and timeouts."""

    error_code: Annotated[Literal[0], doc("0: no error.")]
    group_id: Annotated[str, doc("The group identifier.")]
    group_epoch: Annotated[Int32, doc("The group epoch.")]
    assignment_epoch: Annotated[Int32, doc("The epoch of the current target assignment.")]
    state: GroupState
    assignor: Annotated[
        str | None, doc("The assignor the group uses, or null when its members share no client-side assignor.")
    ]
    assignor_kind: Annotated[Literal["server", "client"] | None, doc("Where the assignor runs, or null.")]
    connectors: Annotated[list[ConnectorTaskCount], doc("The connectors the group runs, and their task counts.")]
    members: Annotated[list[MemberDescription], doc("By member id.")]
    deferred: Annotated[ConnectorsAndTasks, doc("Items the current target deferred.")]
    scheduled_rebalance_at_ms: Annotated[
        Int64 | None, doc("When the coordinator rebalances for the deferred items (ms since the epoch), or null.")
    ]
    assignment_error: Annotated[Int8, doc("The error of the last installed assignment (the assignor's), 0 for none.")]
    assignment_error_message: Annotated[str | None, doc("Its message, or null.")]
    session_timeout_ms: Annotated[Int32, doc("The group's session timeout.")]
    heartbeat_interval_ms: Annotated[Int32, doc("The group's heartbeat interval.")]
    rebalance_timeout_ms: Annotated[
        Int32 | None, doc("The group's rebalance timeout, or null: each member's own RebalanceTimeoutMs.")
    ]
    scheduled_rebalance_max_delay_ms: Annotated[Int32, doc("How long departed work waits for its owner.")]
    initial_assignment_delay_ms: Annotated[
        Int32, doc("How long an empty group that gets members waits for more before its first target.")
    ]
    group_type: Annotated[Literal["connect", "classic"], doc("The protocol the group runs.")]
    generation: Annotated[Int32 | None, doc("A classic group's generation, else null.")]
    protocol_name: Annotated[str | None, doc("The protocol a classic group chose, else null.")]
    leader: Annotated[str | None, doc("A classic group's leader, else null.")]
    departures: Annotated[
        list[Departure],
        doc(
            "The members the change that wrote GroupEpoch removed, and why; empty when it removed none (a join, new "
            "connectors, a scheduled rebalance). Earlier departures: `coordinator replay timeline`."
        ),
    ]
    rebalancing_since_ms: Annotated[
        int | None,
        doc(
            "While the group rebalances, when the rebalance began (ms since the epoch), from its epoch record at "
            "record format level 2 and above; null otherwise."
        ),
    ]
    coordinator: Annotated[
        str | None,
        doc("The base URL of the coordinator serving the group (the one that answered), or null where unknown."),
    ]
    partition: Annotated[
        Int32 | None,
        doc("The partition of the topic the group lives in (murmur2(GroupId) % partitions), or null where unknown."),
    ]

    @classmethod
    def of(
        cls, d: protocol.GroupDescription, *, coordinator: str | None = None, partition: int | None = None
    ) -> GroupDescription:
        items = ConnectorsAndTasks.of
        return cls(
            error_code=0,
            group_id=d.group_id,
            group_epoch=d.group_epoch,
            assignment_epoch=d.assignment_epoch,
            state=d.state,
            assignor=d.assignor,
            assignor_kind=d.assignor_kind,
            connectors=[ConnectorTaskCount.of(c) for c in d.connectors],
            members=[
                MemberDescription(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    url=m.url,
                    member_epoch=m.member_epoch,
                    state=m.state,
                    assignment=items(m.assignment),
                    pending_revocation=items(m.pending_revocation),
                    target=items(m.target),
                    protocol=m.protocol,
                    config_offset=getattr(m, "config_offset", None),
                    note=getattr(m, "note", None),
                )
                for m in d.members
            ],
            deferred=items(d.deferred),
            scheduled_rebalance_at_ms=d.scheduled_rebalance_at_ms,
            assignment_error=d.assignment_error,
            assignment_error_message=d.assignment_error_message,
            session_timeout_ms=d.session_timeout_ms,
            heartbeat_interval_ms=d.heartbeat_interval_ms,
            rebalance_timeout_ms=d.rebalance_timeout_ms,
            scheduled_rebalance_max_delay_ms=d.scheduled_rebalance_max_delay_ms,
            initial_assignment_delay_ms=d.initial_assignment_delay_ms,
            group_type=d.group_type,
            generation=d.generation,
            protocol_name=d.protocol_name,
            leader=d.leader,
            departures=[Departure.of(x) for x in d.departures],
            rebalancing_since_ms=d.rebalancing_since_ms,
            coordinator=coordinator,
            partition=partition,
        )


# --- Kafka Connect's status, as far as the coordinator knows -------------------------------------------

_ITEM_STATE = Annotated[
    Literal["ASSIGNED", "REVOKING", "UNASSIGNED"],
    doc(
        "ASSIGNED: a worker owns it; REVOKING: its owner is giving it up and no other worker holds it yet; "
        "UNASSIGNED: no worker holds it. Never RUNNING or FAILED: whether it runs is the worker's to say."
    ),
]
_WORKER_ID = Annotated[
    str | None,
    doc(
        "The member id of the worker holding it (Kafka Connect gives the worker's host:port; the coordinator knows "
        "the member id, and its Url is in describe), or null when UNASSIGNED."
    ),
]
_INSTANCE_ID = Annotated[str | None, doc("That worker's static instance id, or null (dynamic, or UNASSIGNED).")]
_DEFERRED_UNTIL = Annotated[
    str | None,
    doc(
        "When UNASSIGNED because the target deferred it: when the coordinator rebalances for it (ISO 8601, UTC); "
        "else null."
    ),
]


def _iso(ms: int | None) -> str | None:
    return None if ms is None else iso_time(ms)


class ConnectorState(Struct, kw_only=True, gc=False):
    """Where the connector itself is (Kafka Connect's `connector`)."""

    state: _ITEM_STATE
    worker_id: _WORKER_ID
    instance_id: _INSTANCE_ID
    deferred_until: _DEFERRED_UNTIL

    @classmethod
    def of(cls, s: protocol.ItemStatus) -> ConnectorState:
        return cls(
            state=s.state, worker_id=s.member_id, instance_id=s.instance_id, deferred_until=_iso(s.deferred_until_ms)
        )


class TaskState(Struct, kw_only=True, gc=False):
    """Where a task is (an entry of Kafka Connect's `tasks`)."""

    id: Annotated[Int32, doc("The task number.")]
    state: _ITEM_STATE
    worker_id: _WORKER_ID
    instance_id: _INSTANCE_ID
    deferred_until: _DEFERRED_UNTIL


class ConnectorStatus(Struct, kw_only=True, gc=False):
    """A connector's status shaped like Kafka Connect's `GET /connectors/{name}/status`
    (ConnectorStateInfo: Connect's lower-case field names, so Connect's tools read it), claiming only what
    the coordinator knows: who holds the connector and each task, not whether they run. ErrorCode is 0, as
    in every answer of this API."""

    error_code: Annotated[Literal[0], doc("0: no error.")] = msgspec.field(name="ErrorCode")
    name: Annotated[str, doc("The connector's name.")]
    connector: ConnectorState
    tasks: Annotated[
        list[TaskState], doc("By task number: the configured tasks, and any a worker still holds beyond them.")
    ]
    type: Annotated[
        Literal["unknown"],
        doc("Kafka Connect's connector type (source or sink); the coordinator does not know it: always unknown."),
    ]

    @classmethod
    def of(cls, s: protocol.ConnectorStatus) -> ConnectorStatus:
        return cls(
            error_code=0,
            name=s.name,
            connector=ConnectorState.of(s.connector),
            tasks=[
                TaskState(
                    id=n,
                    state=t.state,
                    worker_id=t.member_id,
                    instance_id=t.instance_id,
                    deferred_until=_iso(t.deferred_until_ms),
                )
                for n, t in s.tasks
            ],
            type="unknown",
        )


class SetConnectorsRequest(Body):
    """The connectors the group runs. Creates the group if needed; bumps the group epoch when the set
    changes."""

    connectors: Annotated[list[ConnectorTaskCount], doc("Every connector, with its task count.")]

    def protocol(self, group_id: str) -> protocol.SetConnectorsRequest:
        return protocol.SetConnectorsRequest(group_id, tuple(c.protocol() for c in self.connectors))


class SetConfigRequest(Body, omit_defaults=True):
    """The group's timeouts; absent or null restores the server's default. HeartbeatIntervalMs must stay
    below SessionTimeoutMs (else INVALID_REQUEST at HTTP 200). Creates the group if needed."""

    session_timeout_ms: Annotated[Int32 | None, doc(f"The session timeout. {_TIMEOUT}")] = None
    heartbeat_interval_ms: Annotated[Int32 | None, doc(f"The heartbeat interval. {_TIMEOUT}")] = None
    rebalance_timeout_ms: Annotated[
        Int32 | None, doc(f"The rebalance timeout for every member (null: each member's own). {_TIMEOUT}")
    ] = None
    scheduled_rebalance_max_delay_ms: Annotated[
        Int32 | None,
        doc(
            "How long departed work waits for its owner (>= 0, else INVALID_REQUEST at HTTP 200); null restores the "
            "server's default."
        ),
    ] = None
    initial_assignment_delay_ms: Annotated[
        Int32 | None,
        doc(
            "How long an empty group that gets members waits for more before its first target, each join "
            "extending the wait up to a rebalance timeout (>= 0, else INVALID_REQUEST at HTTP 200; Kafka's "
            "group.initial.rebalance.delay.ms); null restores the server's default."
        ),
    ] = None

    def protocol(self, group_id: str) -> protocol.SetConfigRequest:
        return protocol.SetConfigRequest(
            group_id,
            self.session_timeout_ms,
            self.heartbeat_interval_ms,
            self.rebalance_timeout_ms,
            self.scheduled_rebalance_max_delay_ms,
            self.initial_assignment_delay_ms,
        )


class Health(Body):
    """This process's partitions and their status."""

    status: Annotated[Literal["ok", "degraded"], doc("ok when every partition is active, degraded otherwise.")]
    url: Annotated[str, doc("This coordinator's advertised URL.")]
    partitions: Annotated[
        dict[
            Annotated[str, Meta(pattern="^(0|[1-9][0-9]*)$")],
            Literal["loading", "active", "failed", "fenced", "closed", "refused"],
        ],
        doc(
            "Partition number -> status (refused: at a record format level this release does not read; "
            "`coordinator topic upgrade-format`)."
        ),
    ]
    release: Annotated[str, doc("This coordinator's release (the package version).")]
    max_format_level: Annotated[
        int, doc("The highest record format level this release reads and writes; `topic upgrade-format` checks it.")
    ]
    format_levels: Annotated[
        dict[Annotated[str, Meta(pattern="^(0|[1-9][0-9]*)$")], int],
        doc("Serving partition number -> the record format level it writes at."),
    ]


class FormatLevelRequest(Body):
    """Raise the record format level of every partition this process serves."""

    level: Annotated[int, Meta(ge=1, le=2**15 - 1), doc("The level (records.FORMAT_LEVELS); never lowered.")]


class FormatLevelResponse(Body):
    """What each partition this process serves answered."""

    url: Annotated[str, doc("This coordinator's advertised URL.")]
    partitions: Annotated[
        dict[Annotated[str, Meta(pattern="^(0|[1-9][0-9]*)$")], ErrorResponse],
        doc("Partition number -> its outcome: 0 once the level is durable in the partition."),
    ]


class Liveness(Body):
    """This process answers: its event loop runs. Says nothing about its partitions (see Health)."""

    status: Annotated[Literal["alive"], doc("Always alive: an answer at all is the news.")]
    url: Annotated[str, doc("This coordinator's advertised URL.")]
    partitions: Annotated[
        int,
        Meta(ge=0, le=2**31 - 1, extra_json_schema={"format": "int32"}),
        doc("How many partitions this process holds, in any status."),
    ]


class InvalidRequest(Body):
    """The body is not JSON, breaks the schema, or is too large."""

    error_code: Annotated[Literal[42], doc("INVALID_REQUEST")]
    error_message: Annotated[str, doc("What is wrong, naming the field.")]


class AuthorizationFailed(Body):
    """GROUP_AUTHORIZATION_FAILED."""

    error_code: Annotated[Literal[30], doc("GROUP_AUTHORIZATION_FAILED")]
    error_message: Annotated[str, doc("Why the request was refused.")]


assert int(ErrorCode.INVALID_REQUEST) == 42 and int(ErrorCode.GROUP_AUTHORIZATION_FAILED) == 30


# --- decoding and encoding -------------------------------------------------------------------------------

_decoders: dict[type, msgspec.json.Decoder] = {}
_encoder = msgspec.json.Encoder()


def decode(raw: bytes, body: type[T]) -> T:
    """`raw` as a `body`, validated; WireError naming the field when it does not fit."""
    decoder = _decoders.get(body)
    if decoder is None:
        decoder = _decoders[body] = msgspec.json.Decoder(body)
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as e:  # before DecodeError, its base class
        if "got `float`" not in str(e):
            raise WireError(str(e)) from None
        # JSON has one number type: 2.0 is the integer 2 to JSON Schema, and so to us. The rare body
        # that spells an integer so is read again with whole numbers as integers.
        try:
            return decoder.decode(_encoder.encode(_whole_numbers(msgspec.json.decode(raw))))
        except msgspec.ValidationError as again:
            raise WireError(str(again)) from None
    except msgspec.DecodeError as e:
        raise WireError(f"the body is not JSON: {e}") from None


def _whole_numbers(value: Any) -> Any:
    if value.__class__ is float:
        return int(value) if value.is_integer() else value
    if value.__class__ is list:
        return [_whole_numbers(v) for v in value]
    if value.__class__ is dict:
        return {k: _whole_numbers(v) for k, v in value.items()}
    return value


def encode(body: Body) -> bytes:
    return _encoder.encode(body)
