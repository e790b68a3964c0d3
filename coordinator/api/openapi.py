"""The OpenAPI 3.1 document of the HTTP API (DESIGN §7), served at `GET /openapi.json`.

It says exactly what `coordinator.api.wire` accepts and what `coordinator.service.server` answers: a request
schema is never stricter than the parser (a body it rejects is a 400 the parser also gives) nor
looser (a body it admits never gets a 400). Rules the state machine checks beyond the type (epochs
>= -2, non-empty ids, versions in range, ...) are not in the schemas: such a body is well formed,
and the answer is HTTP 200 with an ErrorCode. Requests ignore unknown properties; responses list
every property they have. `tests/test_openapi_http.py` holds the document to both promises.

Shared shapes are written once under `components` and referenced: edit them there.
"""

from __future__ import annotations

from typing import Any

from coordinator.core.protocol import ErrorCode

Schema = dict[str, Any]

# --- small builders ------------------------------------------------------------------------------

_BOUNDS = {8: (-(2**7), 2**7 - 1), 16: (-(2**15), 2**15 - 1), 32: (-(2**31), 2**31 - 1),
           64: (-(2**63), 2**63 - 1)}

# Exactly the strings `base64.b64decode(s, validate=True)` takes: standard alphabet, padded to a
# multiple of four (CPython also tolerates extra `=` after a complete quantum, hence the last branch).
BASE64_PATTERN = (r"^(?:(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
                  r"|(?:[A-Za-z0-9+/]{4})+=+)$")

_JSON_INTEGER = "a JSON integer (a whole number; 2.0 is read as 2)"


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def integer(bits: int, about: str, **extra: Any) -> Schema:
    low, high = _BOUNDS[bits]
    return {"type": "integer", "format": f"int{bits}", "minimum": low, "maximum": high, "description": about,
            **extra}


def string(about: str, **extra: Any) -> Schema:
    return {"type": "string", "description": about, **extra}


def base64_bytes(about: str) -> Schema:
    return {"type": "string", "contentEncoding": "base64", "pattern": BASE64_PATTERN,
            "description": f"{about} Base64 (RFC 4648, standard alphabet, padded)."}


def array(items: Schema, about: str) -> Schema:
    return {"type": "array", "items": items, "description": about}


def nullable(schema: Schema) -> Schema:
    """The schema, or null."""
    if "$ref" in schema or "allOf" in schema or "anyOf" in schema:
        about = schema.get("description")
        inner = {k: v for k, v in schema.items() if k != "description"}
        return {"anyOf": [inner, {"type": "null"}], **({"description": about} if about else {})}
    return {**schema, "type": [schema["type"], "null"]}


def described(schema: Schema, about: str) -> Schema:
    return {**schema, "description": about}


def request_object(about: str, properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    """A request body part: unknown properties are ignored by the parser, so they are allowed."""
    out: Schema = {"type": "object", "description": about, "properties": properties}
    if required:
        out["required"] = list(required)
    return out


def response_object(about: str, properties: dict[str, Schema]) -> Schema:
    """A response part: every property is always there, and there is nothing else."""
    return {"type": "object", "description": about, "properties": properties, "required": list(properties),
            "additionalProperties": False}


def complete(name: str, about: str | None = None) -> Schema:
    """A shared request shape used in a response, where all its properties are always present."""
    shape = COMPONENTS[name]
    out: Schema = {"allOf": [ref(name)], "required": list(shape["properties"]), "unevaluatedProperties": False}
    if about:
        out["description"] = about
    return out


def json_body(schema: Schema, example: Any | None = None) -> Schema:
    media: Schema = {"schema": schema}
    if example is not None:
        media["example"] = example
    return {"required": True, "content": {"application/json": media}}


def json_response(about: str, schema: Schema, headers: dict | None = None) -> Schema:
    out: Schema = {"description": about, "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


def answer_or_error(schema: Schema) -> Schema:
    """HTTP 200: the operation's answer, or only ErrorCode/ErrorMessage when the partition cannot
    serve (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) or the coordinator failed unexpectedly
    (COORDINATOR_NOT_AVAILABLE)."""
    return {"anyOf": [schema, ref("ErrorResponse")]}


def error_reference(name: str) -> Schema:
    return {"$ref": f"#/components/responses/{name}"}


# --- descriptions in the protocol's words (seed 000) -----------------------------------------------

_ERRORS: dict[ErrorCode, str] = {
    ErrorCode.NONE: "no error",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "the group's partition is loading; retry",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "no coordinator is known for the group's partition, or this one failed "
                                         "unexpectedly (it logged why)",
    ErrorCode.NOT_COORDINATOR: "this process does not serve the group's partition; ask find-coordinator",
    ErrorCode.INVALID_GROUP_ID: "the group exists and uses the classic protocol",
    ErrorCode.UNKNOWN_MEMBER_ID: "the member is not in the group, or was not chosen to compute the assignment",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "no or an unknown credential (HTTP 401), or the principal may not do "
                                          "this on the group (HTTP 403)",
    ErrorCode.INVALID_REQUEST: "the body is not JSON or breaks the schema (HTTP 400, 413), or breaks a rule of "
                               "the protocol (HTTP 200)",
    ErrorCode.NON_EMPTY_GROUP: "the group still has members",
    ErrorCode.GROUP_ID_NOT_FOUND: "the group does not exist",
    ErrorCode.FENCED_MEMBER_EPOCH: "the member epoch does not correspond to the member epoch expected by the "
                                   "coordinator; rejoin with epoch 0",
    ErrorCode.UNRELEASED_INSTANCE_ID: "another member with the same InstanceId is still active",
    ErrorCode.UNSUPPORTED_ASSIGNOR: "the assignor used by the member or its version range are not supported by "
                                    "the group",
    ErrorCode.COMPUTE_ASSIGNMENT: "the member has been selected by the coordinator to compute the new target "
                                  "assignment of the group (the heartbeat itself took effect)",
    ErrorCode.INVALID_ASSIGNMENT: "the installed assignment is not valid for the group epoch it was computed at",
}

_MEMBER_EPOCH = ("The current member epoch; 0 to join the group; -1 to leave the group; -2 to leave as a static "
                 "member whose assignment waits for its InstanceId to return. Below -2 is INVALID_REQUEST "
                 "(HTTP 200).")
_TIMEOUT = "Milliseconds; null restores the server's default. Values below the server's minimum are " \
           "INVALID_REQUEST (HTTP 200)."

COMPONENTS: dict[str, Schema] = {
    "ErrorCode": {
        "type": "integer", "format": "int16", "enum": [int(c) for c in ErrorCode],
        "description": "The top-level error code, or 0 if there was no error. Kafka's numbers where Kafka has the "
                       "error; 1000 and up are the connect group type's own.\n\n"
                       + "\n".join(f"- {int(c)} {c.name}: {about}" for c, about in _ERRORS.items()),
        "x-enum-varnames": [c.name for c in ErrorCode],
    },
    "ErrorMessage": nullable(string("The top-level error message, or null if there was no error.")),
    "ErrorResponse": response_object("An outcome and nothing else: the whole answer of install-assignment and "
                                     "the admin writes, and of any operation whose partition cannot serve.", {
                                         "ErrorCode": ref("ErrorCode"), "ErrorMessage": ref("ErrorMessage")}),
    "InvalidRequest": response_object("The body is not JSON, breaks the schema, or is too large.", {
        "ErrorCode": {"const": int(ErrorCode.INVALID_REQUEST), "description": "INVALID_REQUEST"},
        "ErrorMessage": string("What is wrong, naming the field.")}),
    "AuthorizationFailed": response_object("GROUP_AUTHORIZATION_FAILED.", {
        "ErrorCode": {"const": int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                      "description": "GROUP_AUTHORIZATION_FAILED"},
        "ErrorMessage": string("Why the request was refused.")}),
    "TaskId": request_object("A connector task, numbered from 0 as in Kafka Connect.", {
        "Connector": string("The connector's name."),
        "Task": integer(32, f"The task number ({_JSON_INTEGER}); below 0 is INVALID_REQUEST (HTTP 200)."),
    }, required=("Connector", "Task")),
    "ConnectorsAndTasks": request_object(
        "A set of connectors and tasks: what a worker owns, an assignment, a pending revocation, deferred work. "
        "Names must be non-empty and items listed once, else INVALID_REQUEST (HTTP 200).", {
            "Connectors": array(string("A connector's name."), "The Connectors assigned to this worker; "
                                                                "absent is empty, null is refused."),
            "Tasks": array(ref("TaskId"), "The tasks assigned to this worker; absent is empty, null is refused."),
        }),
    "ClientAssignor": request_object("A client-side assignor the worker supports.", {
        "Name": string("The name of the assignor."),
        "MinimumVersion": integer(16, "The minimum supported version for the metadata (>= -1, else "
                                      "INVALID_REQUEST at HTTP 200)."),
        "MaximumVersion": integer(16, "The maximum supported version for the metadata (>= 0 and >= "
                                      "MinimumVersion, else INVALID_REQUEST at HTTP 200)."),
        "Reason": integer(8, "The reason of the metadata update; absent is 0.", default=0),
        "Version": integer(16, "The version of the metadata, within [MinimumVersion, MaximumVersion]; absent is "
                               "0.", default=0),
        "Metadata": base64_bytes("The metadata; absent is empty."),
    }, required=("Name", "MinimumVersion", "MaximumVersion")),
    "ConnectorTaskCount": request_object("A connector the group must run, and how many tasks it has.", {
        "Name": string("The connector's name (non-empty, listed once; else INVALID_REQUEST at HTTP 200)."),
        "Tasks": integer(32, "How many tasks it has, within [0, 100000] (else INVALID_REQUEST at HTTP 200)."),
    }, required=("Name", "Tasks")),
}


def _connector_counts(about: str) -> Schema:
    return array(complete("ConnectorTaskCount"), about)


def _items(about: str) -> Schema:
    return complete("ConnectorsAndTasks", about)


COMPONENTS.update({
    "Assignment": response_object("The assignment: what the member should own now.", {
        "Error": integer(8, "The assigned error (the assignor's, 0 for none)."),
        "ConnectorsAndTasks": _items("The assigned connectors/tasks to the member."),
        "Version": integer(16, "The version of the metadata."),
        "Metadata": base64_bytes("The assigned metadata."),
    }),
    "HeartbeatRequest": request_object(
        "ConnectGroupHeartbeat. The member must set all the fields when it joins for the first time or when an "
        "error occurs; otherwise it only fills in the fields which have changed since the last heartbeat "
        "(null or absent = unchanged).", {
            "GroupId": string("The group identifier (non-empty, else INVALID_REQUEST at HTTP 200)."),
            "MemberId": string("The member id, chosen by the worker and kept for its whole lifetime (the worker "
                               "id)."),
            "MemberEpoch": integer(32, _MEMBER_EPOCH),
            "InstanceId": nullable(string("null if not provided or if it didn't change since the last heartbeat; "
                                          "the instance id (static membership) otherwise.")),
            "RackId": nullable(string("null if not provided or if it didn't change since the last heartbeat; the "
                                      "rack of the worker otherwise.")),
            "RebalanceTimeoutMs": integer(32, "-1 if it didn't change since the last heartbeat; the maximum time in "
                                              "milliseconds that the coordinator will wait on the member to revoke "
                                              "its connectors/tasks otherwise (> 0; it must be set when joining). "
                                              "Absent is -1; null is refused.", default=-1),
            "ServerAssignor": nullable(string("null if not used or if it didn't change since the last heartbeat; "
                                              "the server side assignor to use otherwise (eager or "
                                              "incremental_cooperative). Never together with ClientAssignors.")),
            "ClientAssignors": nullable(array(ref("ClientAssignor"), "null if not used or if it didn't change "
                                                                     "since the last heartbeat; the list of "
                                                                     "client-side assignors otherwise.")),
            "ConnectorsAndTasks": nullable(described(ref("ConnectorsAndTasks"), "null if it didn't change since the "
                                                     "last heartbeat; the connectors/tasks owned by the worker.")),
            "Url": nullable(string("null if it didn't change since the last heartbeat; where the worker's REST API "
                                   "listens otherwise.")),
            "TopicPartitions": {"description": "Seed 003: a member of another group type owns topic partitions. A "
                                               "connect member must leave it absent or null: any other value is "
                                               "INVALID_REQUEST (HTTP 200)."},
        }, required=("GroupId", "MemberId", "MemberEpoch")),
    "HeartbeatResponse": response_object("ConnectGroupHeartbeat response.", {
        "ErrorCode": ref("ErrorCode"),
        "ErrorMessage": ref("ErrorMessage"),
        "MemberEpoch": integer(32, "The member epoch."),
        "HeartbeatIntervalMs": integer(32, "The heartbeat interval in milliseconds."),
        "Assignment": nullable(described(ref("Assignment"), "null unless the member's assignment changes; the "
                                                            "assignment otherwise.")),
    }),
    "MemberRequest": request_object("ConnectGroupPrepareAssignment: the chosen member asks for the group state "
                                    "to feed its client-side assignor.", {
        "GroupId": string("The group identifier."),
        "MemberId": string("The member id."),
        "MemberEpoch": integer(32, "The member epoch (>= 0, else INVALID_REQUEST at HTTP 200)."),
    }, required=("GroupId", "MemberId", "MemberEpoch")),
    "AssignorEntry": response_object("The member's entry for the selected assignor (all 0 and empty for a "
                                     "server-side assignor).", {
        "MinimumVersion": integer(16, "The minimum supported version for the metadata."),
        "MaximumVersion": integer(16, "The maximum supported version for the metadata."),
        "Version": integer(16, "The version of the metadata."),
        "Reason": integer(8, "The reason of the metadata update."),
        "Metadata": base64_bytes("The assignor metadata."),
    }),
    "PrepareAssignmentResponse": response_object(
        "ConnectGroupPrepareAssignment response with no error: the group state an assignor takes (the seed's "
        "fields, the configured connectors and the current target assignment).", {
            "ErrorCode": {"const": 0, "description": "0: no error."},
            "ErrorMessage": {"type": "null", "description": "null: no error."},
            "GroupId": string("The group identifier."),
            "GroupEpoch": integer(32, "The group epoch the assignment is computed for."),
            "AssignorName": string("The selected assignor."),
            "Connectors": _connector_counts("The connectors the group runs, and their task counts."),
            "Members": array(response_object("A member of the group at GroupEpoch.", {
                "MemberId": string("The member ID."),
                "MemberEpoch": integer(32, "The member epoch."),
                "InstanceId": nullable(string("The member instance ID.")),
                "Assignor": ref("AssignorEntry"),
                "ConnectorsAndTasks": _items("What the member owns now."),
                "TargetConnectorsAndTasks": _items("The member's part of the current target assignment."),
            }), "The members, by member id."),
            "DepartedMembers": array(response_object("A member that left while its target held work.", {
                "MemberId": string("The member ID."),
                "InstanceId": nullable(string("The member instance ID.")),
                "ConnectorsAndTasks": _items("The work it held, kept for its return."),
                "DepartedAtMs": integer(64, "When it left (coordinator clock, ms since the epoch)."),
            }), "Members whose work waits for their return until ScheduledRebalanceMaxDelayMs has passed."),
            "Deferred": _items("Items the current target deferred."),
            "ScheduledRebalanceAtMs": nullable(integer(64, "When the coordinator rebalances for the deferred "
                                                           "items (ms since the epoch), or null.")),
            "ScheduledRebalanceMaxDelayMs": integer(32, "How long departed work may wait (the group's "
                                                        "scheduled.rebalance.max.delay.ms)."),
            "NowMs": integer(64, "The coordinator's clock when it prepared this (ms since the epoch)."),
        }),
    "PrepareAssignmentError": response_object("ConnectGroupPrepareAssignment response with an error.", {
        "ErrorCode": ref("ErrorCode"),
        "ErrorMessage": ref("ErrorMessage"),
        "GroupEpoch": integer(32, "0."),
        "AssignorName": {"type": "null", "description": "null."},
    }),
    "InstallMember": request_object("One member's part of the installed assignment.", {
        "MemberId": string("The member ID."),
        "ConnectorsAndTasks": nullable(described(ref("ConnectorsAndTasks"), "The assigned connectors/tasks to the "
                                                 "member. Must be set: absent or null is INVALID_REQUEST (HTTP "
                                                 "200).")),
        "Error": integer(8, "The assigned error; absent is 0.", default=0),
        "Version": integer(16, "The metadata version; absent is 0.", default=0),
        "Metadata": base64_bytes("The metadata bytes; absent is empty."),
        "Partitions": {"description": "Seed 003: never together with ConnectorsAndTasks. Must be absent or null "
                                      "for a connect group: any other value is INVALID_REQUEST (HTTP 200)."},
    }, required=("MemberId",)),
    "InstallAssignmentRequest": request_object(
        "ConnectGroupInstallAssignment: the chosen member installs the result of its client-side assignor for the "
        "group epoch it was computed at.", {
            "GroupId": string("The group identifier."),
            "MemberId": string("The member id assigned by the group coordinator."),
            "MemberEpoch": integer(32, "The member epoch (>= 0, else INVALID_REQUEST at HTTP 200)."),
            "GroupEpoch": integer(32, "The group epoch the assignment was computed at (PrepareAssignment's)."),
            "Error": integer(8, "The assignment error; or zero if the assignment is successful. Non-zero keeps "
                                "every member's current assignment. Absent is 0.", default=0),
            "ErrorMessage": nullable(string("Why the assignor failed, or null.")),
            "Members": array(ref("InstallMember"), "The members; absent is empty, null is refused."),
            "Deferred": nullable(described(ref("ConnectorsAndTasks"), "Items deliberately left unassigned until "
                                                                      "the scheduled rebalance; null is none.")),
            "ScheduledRebalanceDelayMs": nullable(integer(32, "With Deferred: how long until the coordinator "
                                                              "rebalances for them (>= 0, else INVALID_REQUEST at "
                                                              "HTTP 200); null is none.")),
        }, required=("GroupId", "MemberId", "MemberEpoch", "GroupEpoch")),
    "FindCoordinatorRequest": request_object("Which coordinator serves a group.", {
        "GroupId": string("The group identifier."),
    }, required=("GroupId",)),
    "FindCoordinatorResponse": response_object("The coordinator of the group's partition.", {
        "ErrorCode": {"const": 0, "description": "0: no error."},
        "ErrorMessage": {"type": "null", "description": "null: no error."},
        "Partition": integer(32, "The partition of the topic the group lives in (murmur2(GroupId) % "
                                 "partitions)."),
        "Url": string("The base URL of the coordinator serving that partition."),
    }),
    "GroupListing": response_object("A group.", {
        "GroupId": string("The group identifier."),
        "GroupEpoch": integer(32, "The group epoch."),
        "State": ref("GroupState"),
        "Members": integer(32, "How many members it has."),
    }),
    "GroupState": {"type": "string", "enum": ["EMPTY", "ASSIGNING", "RECONCILING", "STABLE"],
                   "description": "EMPTY: no members; ASSIGNING: the group epoch is ahead of the assignment epoch; "
                                  "RECONCILING: a member is not at its target yet; STABLE: every member owns its "
                                  "target at the assignment epoch."},
    "ListGroupsResponse": response_object("The groups of the partitions this process serves that the caller may "
                                          "Describe.", {
        "ErrorCode": {"const": 0, "description": "0: no error."},
        "Groups": array(ref("GroupListing"), "By group id."),
    }),
    "MemberDescription": response_object("A member of the group.", {
        "MemberId": string("The member ID."),
        "InstanceId": nullable(string("The member instance ID, or null.")),
        "ClientId": string("Who sent its heartbeats (the authenticated principal)."),
        "ClientHost": string("The address its heartbeats came from."),
        "Url": nullable(string("Where the worker's REST API listens, or null.")),
        "MemberEpoch": integer(32, "The member epoch."),
        "State": {"type": "string", "enum": ["STABLE", "UNREVOKED", "UNRELEASED"],
                  "description": "STABLE: owns its whole target; UNREVOKED: must give up PendingRevocation first; "
                                 "UNRELEASED: waits for others to release the rest of its target."},
        "Assignment": _items("What it owns now (its current assignment)."),
        "PendingRevocation": _items("What it must revoke before it moves on."),
        "Target": _items("Its part of the target assignment."),
    }),
    "GroupDescription": response_object("A group: epochs, assignor, connectors, members and timeouts.", {
        "ErrorCode": {"const": 0, "description": "0: no error."},
        "GroupId": string("The group identifier."),
        "GroupEpoch": integer(32, "The group epoch."),
        "AssignmentEpoch": integer(32, "The epoch of the current target assignment."),
        "State": ref("GroupState"),
        "Assignor": nullable(string("The assignor the group uses, or null when its members share no client-side "
                                    "assignor.")),
        "AssignorKind": {"type": ["string", "null"], "enum": ["server", "client", None],
                         "description": "Where the assignor runs, or null."},
        "Connectors": _connector_counts("The connectors the group runs, and their task counts."),
        "Members": array(ref("MemberDescription"), "By member id."),
        "Deferred": _items("Items the current target deferred."),
        "ScheduledRebalanceAtMs": nullable(integer(64, "When the coordinator rebalances for the deferred items (ms "
                                                       "since the epoch), or null.")),
        "AssignmentError": integer(8, "The error of the last installed assignment (the assignor's), 0 for none."),
        "AssignmentErrorMessage": nullable(string("Its message, or null.")),
        "SessionTimeoutMs": integer(32, "The group's session timeout."),
        "HeartbeatIntervalMs": integer(32, "The group's heartbeat interval."),
        "RebalanceTimeoutMs": nullable(integer(32, "The group's rebalance timeout, or null: each member's own "
                                                   "RebalanceTimeoutMs.")),
        "ScheduledRebalanceMaxDelayMs": integer(32, "How long departed work waits for its owner."),
    }),
    "SetConnectorsRequest": request_object("The connectors the group runs. Creates the group if needed; bumps the "
                                           "group epoch when the set changes.", {
        "Connectors": array(ref("ConnectorTaskCount"), "Every connector, with its task count."),
    }, required=("Connectors",)),
    "SetConfigRequest": request_object("The group's timeouts; absent or null restores the server's default. "
                                       "HeartbeatIntervalMs must stay below SessionTimeoutMs (else INVALID_REQUEST "
                                       "at HTTP 200). Creates the group if needed.", {
        "SessionTimeoutMs": nullable(integer(32, f"The session timeout. {_TIMEOUT}")),
        "HeartbeatIntervalMs": nullable(integer(32, f"The heartbeat interval. {_TIMEOUT}")),
        "RebalanceTimeoutMs": nullable(integer(32, f"The rebalance timeout for every member (null: each member's "
                                                   f"own). {_TIMEOUT}")),
        "ScheduledRebalanceMaxDelayMs": nullable(integer(32, "How long departed work waits for its owner (>= 0, "
                                                             "else INVALID_REQUEST at HTTP 200); null restores the "
                                                             "server's default.")),
    }),
    "Health": response_object("This process's partitions and their status.", {
        "Status": {"type": "string", "enum": ["ok", "degraded"],
                   "description": "ok when every partition is active, degraded otherwise."},
        "Url": string("This coordinator's advertised URL."),
        "Partitions": {"type": "object", "description": "Partition number -> status.",
                       "propertyNames": {"pattern": "^(0|[1-9][0-9]*)$"},
                       "additionalProperties": {"type": "string", "enum": ["loading", "active", "failed",
                                                                           "closed"]}},
    }),
})

# --- operations --------------------------------------------------------------------------------

_BEARER = [{"bearer": []}]
_GROUP_ID = {"name": "group_id", "in": "path", "required": True,
             "description": "The group identifier, percent-encoded.",
             "schema": {"type": "string", "minLength": 1}}


def _operation(operation_id: str, summary: str, description: str, responses: dict[str, Schema], *,
               body: Schema | None = None, group_id: bool = False, secured: bool = True,
               tags: tuple[str, ...] = ()) -> Schema:
    op: Schema = {"operationId": operation_id, "summary": summary, "description": description,
                  "tags": list(tags), "responses": responses}
    if group_id:
        op["parameters"] = [_GROUP_ID]
    if body is not None:
        op["requestBody"] = body
    op["security"] = _BEARER if secured else []
    return op


def _secured(ok: Schema, *, body: bool, forbidden: bool = True) -> dict[str, Schema]:
    responses: dict[str, Schema] = {"200": ok}
    if body:
        responses["400"] = error_reference("InvalidRequest")
    responses["401"] = error_reference("Unauthorized")
    if forbidden:
        responses["403"] = error_reference("Forbidden")
    if body:
        responses["413"] = error_reference("TooLarge")
    return responses


_OUTCOME = json_response("The outcome: ErrorCode 0, or the protocol error.", ref("ErrorResponse"))

PATHS: dict[str, Schema] = {
    "/v1/connect-group/heartbeat": {"post": _operation(
        "heartbeat", "ConnectGroupHeartbeat",
        "Workers advertise their state, assignors and owned connectors/tasks; the coordinator assigns and revokes "
        "through the response. Also the liveness check. Required ACL: Read on the group. Errors at HTTP 200: "
        "NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST, "
        "INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, "
        "COMPUTE_ASSIGNMENT (the heartbeat took effect; call prepare-assignment).",
        _secured(json_response("The heartbeat response, or an error.", answer_or_error(ref("HeartbeatResponse"))),
                 body=True),
        body=json_body(ref("HeartbeatRequest"), {
            "GroupId": "connect-cluster", "MemberId": "worker-1", "MemberEpoch": 0, "RebalanceTimeoutMs": 60000,
            "ServerAssignor": "incremental_cooperative", "Url": "http://worker-1:8083",
            "ConnectorsAndTasks": {"Connectors": [], "Tasks": []}}),
        tags=("connect-group",))},
    "/v1/connect-group/prepare-assignment": {"post": _operation(
        "prepareAssignment", "ConnectGroupPrepareAssignment",
        "The member chosen by COMPUTE_ASSIGNMENT gets the group state to feed its client-side assignor. Required "
        "ACL: Read. Errors at HTTP 200: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, "
        "INVALID_REQUEST, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID (absent or not chosen), FENCED_MEMBER_EPOCH.",
        _secured(json_response("The group state, or an error.", {"anyOf": [
            ref("PrepareAssignmentResponse"), ref("PrepareAssignmentError"), ref("ErrorResponse")]}), body=True),
        body=json_body(ref("MemberRequest"), {"GroupId": "connect-cluster", "MemberId": "worker-1",
                                              "MemberEpoch": 1}),
        tags=("connect-group",))},
    "/v1/connect-group/install-assignment": {"post": _operation(
        "installAssignment", "ConnectGroupInstallAssignment",
        "The chosen member installs the new target assignment its assignor computed; the coordinator validates "
        "it against the group epoch it was computed at and persists it. Required ACL: Read. Errors at HTTP 200: "
        "NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST, "
        "GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, INVALID_ASSIGNMENT.",
        _secured(_OUTCOME, body=True),
        body=json_body(ref("InstallAssignmentRequest"), {
            "GroupId": "connect-cluster", "MemberId": "worker-1", "MemberEpoch": 1, "GroupEpoch": 2,
            "Members": [{"MemberId": "worker-1", "ConnectorsAndTasks": {
                "Connectors": ["A"], "Tasks": [{"Connector": "A", "Task": 0}]}}]}),
        tags=("connect-group",))},
    "/v1/find-coordinator": {"post": _operation(
        "findCoordinator", "FindCoordinator",
        "Which coordinator serves the group: any instance answers. Required ACL: Describe. Errors at HTTP 200: "
        "COORDINATOR_NOT_AVAILABLE (no coordinator known for the partition).",
        _secured(json_response("The coordinator, or an error.", answer_or_error(ref("FindCoordinatorResponse"))),
                 body=True),
        body=json_body(ref("FindCoordinatorRequest"), {"GroupId": "connect-cluster"}),
        tags=("connect-group",))},
    "/v1/groups": {"get": _operation(
        "listGroups", "List groups",
        "The groups of the partitions this process serves and that the caller may Describe (others are left "
        "out, never refused).",
        _secured(json_response("The groups.", ref("ListGroupsResponse")), body=False, forbidden=False),
        tags=("admin",))},
    "/v1/groups/{group_id}": {
        "get": _operation(
            "describeGroup", "Describe a group",
            "Required ACL: Describe. Errors at HTTP 200: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, "
            "GROUP_ID_NOT_FOUND.",
            _secured(json_response("The group, or an error.", answer_or_error(ref("GroupDescription"))),
                     body=False),
            group_id=True, tags=("admin",)),
        "delete": _operation(
            "deleteGroup", "Delete a group",
            "Deletes a group that has no members (a tombstone for each of its records). Required ACL: Delete. "
            "Errors at HTTP 200: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST (empty id), "
            "INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP.",
            _secured(_OUTCOME, body=False), group_id=True, tags=("admin",)),
    },
    "/v1/groups/{group_id}/connectors": {"put": _operation(
        "setConnectors", "Set the connectors a group runs",
        "Creates the group if needed and bumps the group epoch when the set changes. Required ACL: Alter. Errors "
        "at HTTP 200: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST, INVALID_GROUP_ID.",
        _secured(_OUTCOME, body=True),
        body=json_body(ref("SetConnectorsRequest"), {"Connectors": [{"Name": "A", "Tasks": 2},
                                                                    {"Name": "B", "Tasks": 1}]}),
        group_id=True, tags=("admin",))},
    "/v1/groups/{group_id}/config": {"put": _operation(
        "setConfig", "Set a group's timeouts",
        "Per-group session timeout, heartbeat interval, rebalance timeout and scheduled rebalance delay. Creates "
        "the group if needed. Required ACL: Alter. Errors at HTTP 200: NOT_COORDINATOR, "
        "COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST, INVALID_GROUP_ID.",
        _secured(_OUTCOME, body=True),
        body=json_body(ref("SetConfigRequest"), {"SessionTimeoutMs": 10000, "HeartbeatIntervalMs": 3000,
                                                 "RebalanceTimeoutMs": None, "ScheduledRebalanceMaxDelayMs": 300000}),
        group_id=True, tags=("admin",))},
    "/health": {"get": _operation(
        "health", "Health", "This process's partitions and their status; needs no credentials.",
        {"200": json_response("Every partition is active.", ref("Health")),
         "503": json_response("A partition is loading, failed or closed.", ref("Health"))},
        secured=False, tags=("service",))},
    "/metrics": {"get": _operation(
        "metrics", "Prometheus metrics",
        "Requests, errors, batches, commits, loads, rebalances, groups, members and epochs in the Prometheus text "
        "exposition format; needs no credentials.",
        {"200": {"description": "The metrics.",
                 "content": {"text/plain": {"schema": {"type": "string"}}}}},
        secured=False, tags=("service",))},
    "/openapi.json": {"get": _operation(
        "openapi", "This document", "The OpenAPI document of the API; needs no credentials.",
        {"200": json_response("The document.", {"type": "object"})}, secured=False, tags=("service",))},
}

RESPONSES: dict[str, Schema] = {
    "InvalidRequest": json_response("INVALID_REQUEST: the body is not JSON or breaks the schema (the message names "
                                    "the field).", ref("InvalidRequest")),
    "TooLarge": json_response("INVALID_REQUEST: the body is larger than 1 MiB.", ref("InvalidRequest")),
    "Unauthorized": json_response(
        "GROUP_AUTHORIZATION_FAILED: no credential (and anonymous access is off) or an unknown one.",
        ref("AuthorizationFailed"),
        headers={"WWW-Authenticate": {"description": "Bearer.", "schema": {"type": "string"}}}),
    "Forbidden": json_response("GROUP_AUTHORIZATION_FAILED: the principal may not do this on the group (ACLs).",
                               ref("AuthorizationFailed")),
}

DOCUMENT: dict = {
    "openapi": "3.1.0",
    "info": {
        "title": "worker coordinator",
        "version": "1",
        "summary": "The group coordinator of Kafka Connect-style worker groups (the KIP-848 connect group type).",
        "description": "Field names are the protocol's (seed 000). Protocol errors are HTTP 200 with ErrorCode and "
                       "ErrorMessage; a body that is not JSON or breaks the schema is HTTP 400 with "
                       "INVALID_REQUEST (42); a body over 1 MiB is HTTP 413; a missing or unknown credential is "
                       "HTTP 401, a principal the ACLs do not allow on the group HTTP 403, both with "
                       "GROUP_AUTHORIZATION_FAILED (30). Unknown request properties are ignored. Integers are JSON "
                       "integers within the range of their format (int8, int16, int32); as in JSON Schema, a number "
                       "with a zero fraction is that integer (2.0 is 2), any other fraction is refused; `bytes` "
                       "are base64 strings.",
        "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
    },
    "servers": [{"url": "http://127.0.0.1:8400", "description": "`coordinator serve`'s default --listen"}],
    "tags": [{"name": "connect-group", "description": "The worker protocol (seed 000)."},
             {"name": "admin", "description": "Groups, their connectors and configuration."},
             {"name": "service", "description": "Health, metrics and this document; open to everyone."}],
    "paths": PATHS,
    "components": {
        "schemas": COMPONENTS,
        "responses": RESPONSES,
        "securitySchemes": {"bearer": {
            "type": "http", "scheme": "bearer",
            "description": "A token of the server's tokens file (`TOKEN PRINCIPAL` per line). Without one, the "
                           "principal is ANONYMOUS when the server allows anonymous access, else HTTP 401."}},
    },
}
