"""The OpenAPI 3.1 document of the HTTP API (DESIGN §7), served at `GET /openapi.json`.

Generated: the schemas come from the body declarations in `coordinator.api.wire` (msgspec writes
them), so the document says exactly what the decoder takes and the server sends; this module adds
the operations, each a row of `OPERATIONS`, and closes the answers (every declared property is sent,
and no other; requests stay open, unknown properties being ignored). `tests/test_openapi_http.py`
holds the decoder and the server to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from coordinator.api import kafka_protocol, wire
from coordinator.core.protocol import ErrorCode

Schema = dict[str, Any]

# What each code means, in the protocol's words (seed 000): the ErrorCode schema's description.
ERRORS: dict[ErrorCode, str] = {
    ErrorCode.NONE: "no error",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "the group's partition is loading; retry",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "no coordinator is known for the group's partition, or this one failed "
    "unexpectedly (it logged why)",
    ErrorCode.NOT_COORDINATOR: "this process does not serve the group's partition; ask find-coordinator",
    ErrorCode.ILLEGAL_GENERATION: "classic: the generation is not the group's current one; join again",
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: "classic: the protocol type or protocols do not match the group's, or "
    "the group is a connect group",
    ErrorCode.INVALID_GROUP_ID: "the group id is empty, or the group uses the classic protocol (connect requests)",
    ErrorCode.INVALID_SESSION_TIMEOUT: "classic: the session timeout is outside the coordinator's bounds",
    ErrorCode.REBALANCE_IN_PROGRESS: "classic: the group is rebalancing; send JoinGroup",
    ErrorCode.MEMBER_ID_REQUIRED: "classic: join again with the member id this answer gives",
    ErrorCode.GROUP_MAX_SIZE_REACHED: "classic: the group has the most members `serve --classic-group-max-size` allows",
    ErrorCode.FENCED_INSTANCE_ID: "classic: another member holds this static instance id now",
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
    ErrorCode.UNKNOWN_CONNECTOR: "the group neither runs the connector nor has a worker holding it",
    ErrorCode.UNSUPPORTED_VERSION: "the record format level is one this coordinator's release does not know",
}


# Where an operation finds the group it is authorized on (Operation.group).
BODY = "body"  # the request's GroupId: authorized once the body is decoded
PATH = "path"  # the path's {group_id}: authorized before the body is read
EVERY_GROUP = "*"  # every group: an ACL whose pattern is `*`


@dataclass(frozen=True)
class Operation:
    """One route, declared once: the server routes it (`coordinator.service.server`), the SDK asks
    it (`route`), this document describes it. Its request body type (None: no body), the answers at
    HTTP 200 (the first is what the core's answer is sent as), prose, the ACL operation it needs
    (`auth.Operation`'s value; None: any authenticated principal) on the group `group` says where to
    find, and the Kafka API it is also served as on the Kafka listener (DESIGN §12)."""

    method: str
    path: str
    operation_id: str
    summary: str
    description: str
    answers: tuple[type, ...]
    request: type | None = None
    example: dict | None = None
    tag: str = "connect-group"
    acl: str | None = None
    group: str | None = None
    kafka_api: int | None = None


_SERVING = "Errors at HTTP 200: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, "

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "post",
        "/v1/connect-group/heartbeat",
        "heartbeat",
        "ConnectGroupHeartbeat",
        "Workers advertise their state, assignors and owned connectors/tasks; the coordinator assigns and revokes "
        "through the response. Also the liveness check. Required ACL: Read on the group. "
        + _SERVING
        + "INVALID_REQUEST, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, "
        "UNSUPPORTED_ASSIGNOR, COMPUTE_ASSIGNMENT (the heartbeat took effect; call prepare-assignment).",
        (wire.HeartbeatResponse, wire.ErrorResponse),
        wire.HeartbeatRequest,
        {
            "GroupId": "connect-cluster",
            "MemberId": "worker-1",
            "MemberEpoch": 0,
            "RebalanceTimeoutMs": 60000,
            "ServerAssignor": "incremental_cooperative",
            "Url": "http://worker-1:8083",
            "ConnectorsAndTasks": {"Connectors": [], "Tasks": []},
        },
        acl="Read",
        group=BODY,
    ),
    Operation(
        "post",
        "/v1/connect-group/prepare-assignment",
        "prepareAssignment",
        "ConnectGroupPrepareAssignment",
        "The member chosen by COMPUTE_ASSIGNMENT gets the group state to feed its client-side assignor. Required "
        "ACL: Read. " + _SERVING + "INVALID_REQUEST, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID (absent or not "
        "chosen), FENCED_MEMBER_EPOCH.",
        (wire.PrepareAssignmentResponse, wire.PrepareAssignmentError, wire.ErrorResponse),
        wire.PrepareAssignmentRequest,
        {"GroupId": "connect-cluster", "MemberId": "worker-1", "MemberEpoch": 1},
        acl="Read",
        group=BODY,
    ),
    Operation(
        "post",
        "/v1/connect-group/install-assignment",
        "installAssignment",
        "ConnectGroupInstallAssignment",
        "The chosen member installs the new target assignment its assignor computed; the coordinator validates it "
        "against the group epoch it was computed at and persists it. Required ACL: Read. "
        + _SERVING
        + "INVALID_REQUEST, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, INVALID_ASSIGNMENT.",
        (wire.ErrorResponse,),
        wire.InstallAssignmentRequest,
        {
            "GroupId": "connect-cluster",
            "MemberId": "worker-1",
            "MemberEpoch": 1,
            "GroupEpoch": 2,
            "Members": [
                {
                    "MemberId": "worker-1",
                    "ConnectorsAndTasks": {"Connectors": ["A"], "Tasks": [{"Connector": "A", "Task": 0}]},
                }
            ],
        },
        acl="Read",
        group=BODY,
    ),
    Operation(
        "post",
        "/v1/classic-group/join",
        "joinGroup",
        "JoinGroup (classic, seed 004)",
        "A classic member joins, or joins again when told REBALANCE_IN_PROGRESS. The answer waits until every "
        "member has joined or the rebalance timeout passes; the leader's carries every member's metadata. "
        "Required ACL: Read. " + _SERVING + "INVALID_REQUEST, INVALID_GROUP_ID, INCONSISTENT_GROUP_PROTOCOL, "
        "INVALID_SESSION_TIMEOUT, MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, "
        "REBALANCE_IN_PROGRESS (a newer JoinGroup of the member replaced this one).",
        (wire.JoinGroupResponse, wire.ErrorResponse),
        wire.JoinGroupRequest,
        {
            "GroupId": "connect-cluster",
            "MemberId": "",
            "ProtocolType": "connect",
            "Protocols": [{"Name": "incremental_cooperative", "Metadata": ""}],
            "SessionTimeoutMs": 10000,
            "RebalanceTimeoutMs": 60000,
        },
        tag="classic-group",
        acl="Read",
        group=BODY,
        kafka_api=kafka_protocol.JOIN_GROUP,
    ),
    Operation(
        "post",
        "/v1/classic-group/sync",
        "syncGroup",
        "SyncGroup (classic, seed 004)",
        "The leader sends every member's assignment; the others' SyncGroup waits for it. Required ACL: Read. "
        + _SERVING
        + "UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, FENCED_INSTANCE_ID, "
        "REBALANCE_IN_PROGRESS, INVALID_REQUEST (assignments for members outside the generation).",
        (wire.SyncGroupResponse, wire.ErrorResponse),
        wire.SyncGroupRequest,
        {"GroupId": "connect-cluster", "MemberId": "worker-1-5f1c", "GenerationId": 1, "Assignments": []},
        tag="classic-group",
        acl="Read",
        group=BODY,
        kafka_api=kafka_protocol.SYNC_GROUP,
    ),
    Operation(
        "post",
        "/v1/classic-group/heartbeat",
        "classicHeartbeat",
        "Heartbeat (classic, seed 004)",
        "Keeps a classic member's session; REBALANCE_IN_PROGRESS tells it to join again. Required ACL: Read. "
        + _SERVING
        + "UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS.",
        (wire.ErrorResponse,),
        wire.ClassicHeartbeatRequest,
        {"GroupId": "connect-cluster", "MemberId": "worker-1-5f1c", "GenerationId": 1},
        tag="classic-group",
        acl="Read",
        group=BODY,
        kafka_api=kafka_protocol.HEARTBEAT,
    ),
    Operation(
        "post",
        "/v1/classic-group/leave",
        "leaveGroup",
        "LeaveGroup (classic, seed 004)",
        "Members leave at once; the rest rebalance. Required ACL: Read. "
        + _SERVING
        + "INVALID_REQUEST, UNKNOWN_MEMBER_ID (no such group); per member UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID.",
        (wire.LeaveGroupResponse, wire.ErrorResponse),
        wire.LeaveGroupRequest,
        {"GroupId": "connect-cluster", "Members": [{"MemberId": "worker-1-5f1c"}]},
        tag="classic-group",
        acl="Read",
        group=BODY,
        kafka_api=kafka_protocol.LEAVE_GROUP,
    ),
    Operation(
        "post",
        "/v1/find-coordinator",
        "findCoordinator",
        "FindCoordinator",
        "Which coordinator serves the group: any instance answers. Required ACL: Describe. Errors at HTTP 200: "
        "COORDINATOR_NOT_AVAILABLE (no coordinator known for the partition).",
        (wire.FindCoordinatorResponse, wire.ErrorResponse),
        wire.FindCoordinatorRequest,
        {"GroupId": "connect-cluster"},
        acl="Describe",
        group=BODY,
        kafka_api=kafka_protocol.FIND_COORDINATOR,
    ),
    Operation(
        "get",
        "/v1/groups",
        "listGroups",
        "List groups",
        "The groups of the partitions this process serves and that the caller may Describe (others are left out, "
        "never refused).",
        (wire.ListGroupsResponse,),
        tag="admin",
        kafka_api=kafka_protocol.LIST_GROUPS,
    ),
    Operation(
        "get",
        "/v1/partitions",
        "listPartitions",
        "Where each partition is served",
        "Every partition of the topic and the URL of the instance serving it, as this process knows it (its own, "
        "and in group mode or static mode with peers the others'; null when no one is known to serve it): "
        "`coordinator groups list` asks each instance named here. Needs an authenticated principal; no group "
        "ACL.",
        (wire.PartitionOwnersResponse,),
        tag="admin",
    ),
    Operation(
        "get",
        "/v1/groups/{group_id}",
        "describeGroup",
        "Describe a group",
        "Required ACL: Describe. Errors at HTTP 200: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, "
        "GROUP_ID_NOT_FOUND.",
        (wire.GroupDescription, wire.ErrorResponse),
        tag="admin",
        acl="Describe",
        group=PATH,
        kafka_api=kafka_protocol.DESCRIBE_GROUPS,
    ),
    Operation(
        "get",
        "/v1/groups/{group_id}/connectors/{connector}/status",
        "connectorStatus",
        "A connector's status",
        "Shaped like Kafka Connect's `GET /connectors/{name}/status`, claiming only what the coordinator knows: "
        "which worker holds the connector and each task (ASSIGNED), is giving it up (REVOKING) or that none does "
        "(UNASSIGNED, with when the coordinator rebalances for it if the target deferred it). Required ACL: "
        "Describe. Errors at HTTP 200: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND, "
        "UNKNOWN_CONNECTOR.",
        (wire.ConnectorStatus, wire.ErrorResponse),
        tag="admin",
        acl="Describe",
        group=PATH,
    ),
    Operation(
        "delete",
        "/v1/groups/{group_id}",
        "deleteGroup",
        "Delete a group",
        "Deletes a group that has no members (a tombstone for each of its records). Required ACL: Delete. Errors "
        "at HTTP 200: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST (empty id), "
        "INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP.",
        (wire.ErrorResponse,),
        tag="admin",
        acl="Delete",
        group=PATH,
        kafka_api=kafka_protocol.DELETE_GROUPS,
    ),
    Operation(
        "put",
        "/v1/groups/{group_id}/connectors",
        "setConnectors",
        "Set the connectors a group runs",
        "Creates the group if needed and bumps the group epoch when the set changes. Required ACL: Alter. Errors "
        "at HTTP 200: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST, INVALID_GROUP_ID.",
        (wire.ErrorResponse,),
        wire.SetConnectorsRequest,
        {"Connectors": [{"Name": "A", "Tasks": 2}, {"Name": "B", "Tasks": 1}]},
        tag="admin",
        acl="Alter",
        group=PATH,
    ),
    Operation(
        "put",
        "/v1/groups/{group_id}/config",
        "setConfig",
        "Set a group's timeouts",
        "Per-group session timeout, heartbeat interval, rebalance timeout and scheduled rebalance delay. Creates "
        "the group if needed. Required ACL: Alter. Errors at HTTP 200: NOT_COORDINATOR, "
        "COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST, INVALID_GROUP_ID.",
        (wire.ErrorResponse,),
        wire.SetConfigRequest,
        {
            "SessionTimeoutMs": 10000,
            "HeartbeatIntervalMs": 3000,
            "RebalanceTimeoutMs": None,
            "ScheduledRebalanceMaxDelayMs": 300000,
        },
        tag="admin",
        acl="Alter",
        group=PATH,
    ),
    Operation(
        "post",
        "/v1/format-level",
        "raiseFormatLevel",
        "Raise the record format level",
        "Raises the record format level of every partition this process serves (a type 10 record in each, "
        "durable before the answer); `coordinator topic upgrade-format` asks every instance. Required ACL: Alter "
        "on every group (an ACL whose pattern is `*`). Errors per partition: NOT_COORDINATOR, "
        "COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, UNSUPPORTED_VERSION (a level this release does "
        "not know), INVALID_REQUEST (lower than the partition's).",
        (wire.FormatLevelResponse,),
        wire.FormatLevelRequest,
        {"Level": 2},
        tag="admin",
        acl="Alter",
        group=EVERY_GROUP,
    ),
)

# Answers every operation may give besides its own, by HTTP status.
_REFUSALS = {
    "400": (
        "InvalidRequest",
        ("INVALID_REQUEST: the body is not JSON or breaks the schema (the message names the field)."),
    ),
    "401": (
        "AuthorizationFailed",
        ("GROUP_AUTHORIZATION_FAILED: no credential (and anonymous access is off) or an unknown one."),
    ),
    "403": ("AuthorizationFailed", "GROUP_AUTHORIZATION_FAILED: the principal may not do this on the group (ACLs)."),
    "413": ("InvalidRequest", "INVALID_REQUEST: the body is larger than the server's limit."),
}


# The Kafka API each operation is also served as on the Kafka listener (`serve --kafka-listener`,
# DESIGN §12), by operation id: the same call of the core behind both. ApiVersions, Kafka's
# handshake, has no HTTP operation. `kafka_protocol.SUPPORTED` holds the versions;
# tests/test_kafka_listener.py checks that the two name the same APIs.
KAFKA_APIS: dict[str, int] = {op.operation_id: op.kafka_api for op in OPERATIONS if op.kafka_api is not None}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(about: str, schema: Schema) -> Schema:
    return {"description": about, "content": {"application/json": {"schema": schema}}}


def _operation(op: Operation) -> Schema:
    answers = [_ref(t.__name__) for t in op.answers]
    responses: Schema = {
        "200": _json("The answer, or a protocol error.", answers[0] if len(answers) == 1 else {"anyOf": answers})
    }
    for status, (schema, about) in _REFUSALS.items():
        if status in ("400", "413") and op.request is None:
            continue
        if status == "403" and op.operation_id in ("listGroups", "listPartitions"):
            continue  # groups the caller may not describe are left out, never refused; partitions are no group's
        responses[status] = _json(about, _ref(schema))
    responses["401"]["headers"] = {"WWW-Authenticate": {"description": "Bearer.", "schema": {"type": "string"}}}
    out: Schema = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "description": op.description,
        "tags": [op.tag],
        "security": [{"bearer": []}],
        "responses": responses,
    }
    if "{group_id}" in op.path:
        out["parameters"] = [
            {
                "name": "group_id",
                "in": "path",
                "required": True,
                "description": "The group identifier, percent-encoded.",
                "schema": {"type": "string", "minLength": 1},
            }
        ]
    if "{connector}" in op.path:
        out["parameters"].append(
            {
                "name": "connector",
                "in": "path",
                "required": True,
                "description": "The connector's name, percent-encoded.",
                "schema": {"type": "string", "minLength": 1},
            }
        )
    if op.request is not None:
        media: Schema = {"schema": _ref(op.request.__name__)}
        if op.example is not None:
            media["example"] = op.example
        out["requestBody"] = {"required": True, "content": {"application/json": media}}
    return out


def _open(op: ServiceOperation) -> Schema:
    return {
        "operationId": op.operation_id,
        "summary": op.summary,
        "description": op.description,
        "tags": ["service"],
        "security": [],
        "responses": op.responses,
    }


@dataclass(frozen=True)
class ServiceOperation:
    """A route open to everyone (health, metrics, this document): no credentials, no group."""

    path: str
    operation_id: str
    summary: str
    description: str
    responses: Schema
    method: str = "get"


_HEALTH = {
    "200": _json("Every partition is active.", _ref("Health")),
    "503": _json("A partition is loading, failed or closed.", _ref("Health")),
}

SERVICE: tuple[ServiceOperation, ...] = (
    ServiceOperation(
        "/health", "health", "Health", "This process's partitions and their status; needs no credentials.", _HEALTH
    ),
    ServiceOperation(
        "/health/ready",
        "healthReady",
        "Readiness",
        "As /health, for a readiness probe: 200 once every partition this process holds "
        "is active, 503 while one is loading, failed or closed; needs no credentials.",
        _HEALTH,
    ),
    ServiceOperation(
        "/health/live",
        "healthLive",
        "Liveness",
        "For a liveness probe: 200 whenever the process's event loop answers, never 503 "
        "because a partition loads; needs no credentials.",
        {"200": _json("The process answers.", _ref("Liveness"))},
    ),
    ServiceOperation(
        "/metrics",
        "metrics",
        "Prometheus metrics",
        "Requests, errors, batches, commits, loads, rebalances, groups, members and "
        "epochs in the Prometheus text exposition format; needs no credentials.",
        {"200": {"description": "The metrics.", "content": {"text/plain": {"schema": {"type": "string"}}}}},
    ),
    ServiceOperation(
        "/openapi.json",
        "openapi",
        "This document",
        "The OpenAPI document of the API; needs no credentials.",
        {"200": _json("The document.", {"type": "object"})},
    ),
)

_BY_ID: dict[str, Operation | ServiceOperation] = {op.operation_id: op for op in (*OPERATIONS, *SERVICE)}


def operation(operation_id: str) -> Operation:
    """The declaration of an operation of the API (not a service route), by its operation id."""
    op = _BY_ID[operation_id]
    assert isinstance(op, Operation), operation_id
    return op


def route(operation_id: str, **parameters: str) -> tuple[str, str]:
    """The method and path a client sends for `operation_id`, the path's `{parameters}` put in as
    given (unencoded, as the SDK has always sent them)."""
    op = _BY_ID[operation_id]
    return op.method.upper(), op.path.format(**parameters)


def path(operation_id: str, **parameters: str) -> str:
    """The path of `operation_id` (see `route`)."""
    return route(operation_id, **parameters)[1]


def _refs(schema: Any) -> set[str]:
    """The component names `schema` refers to, directly."""
    if isinstance(schema, dict):
        found = {schema["$ref"].rsplit("/", 1)[1]} if "$ref" in schema else set()
        return found.union(*(_refs(v) for k, v in schema.items() if k != "$ref"))
    if isinstance(schema, list):
        return set().union(*(_refs(v) for v in schema))
    return set()


def _reach(components: Schema, names: set[str]) -> set[str]:
    seen: set[str] = set()
    while names - seen:
        name = (names - seen).pop()
        seen.add(name)
        names = names | _refs(components[name])
    return seen


def _complete(schema: Any, shared: Schema) -> Any:
    """`schema` with each reference to a `shared` shape made complete, as answers send it: the request's
    optional properties are all present, and nothing else is."""
    if isinstance(schema, list):
        return [_complete(v, shared) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _complete(v, shared) for k, v in schema.items()}
    name = schema.get("$ref", "").rsplit("/", 1)[-1]
    if name in shared:
        out.update(
            allOf=[{"$ref": out.pop("$ref")}], required=list(shared[name]["properties"]), unevaluatedProperties=False
        )
    return out


def _close_answers(components: Schema, requests: set[str], answers: set[str]) -> None:
    """Answers are closed: the server sends every property it declares and nothing else. Requests stay
    open (unknown properties are ignored); a shape both use (ConnectorsAndTasks, ...) is complete
    where an answer refers to it."""
    taken = _reach(components, requests)
    shared = {name: components[name] for name in taken}
    for name in _reach(components, answers) - taken:
        schema = components[name]
        if "properties" not in schema:
            continue  # ErrorCode
        assert set(schema.get("required", ())) == set(schema.get("properties", {})), f"{name}: all sent, always"
        schema["additionalProperties"] = False
        schema["properties"] = _complete(schema["properties"], shared)


def _document() -> dict:
    types = {t for op in OPERATIONS for t in (*op.answers, op.request) if t is not None}
    types |= {wire.Health, wire.Liveness, wire.InvalidRequest, wire.AuthorizationFailed}
    _, components = msgspec.json.schema_components(
        sorted(types, key=lambda t: t.__name__), ref_template="#/components/schemas/{name}"
    )
    for schema in components.values():  # docstrings, as one line each
        if "description" in schema:
            schema["description"] = " ".join(schema["description"].split())
    for name in ("ErrorResponse", "HeartbeatResponse", "PrepareAssignmentError"):
        components[name]["properties"]["ErrorCode"] = _ref("ErrorCode")
    # The server always sends SessionTimeoutMs; its default is there for a worker reading an older
    # coordinator's answer, not an absence the server may choose.
    heartbeat = components["HeartbeatResponse"]
    heartbeat["required"] = [*heartbeat["required"], "SessionTimeoutMs"]
    del heartbeat["properties"]["SessionTimeoutMs"]["default"]
    components["ErrorCode"] = {
        "type": "integer",
        "format": "int16",
        "enum": [int(c) for c in ErrorCode],
        "description": "The top-level error code, or 0 if there was no error. Kafka's numbers where Kafka has the "
        "error; 1000 and up are the connect group type's own.\n\n"
        + "\n".join(f"- {int(c)} {c.name}: {about}" for c, about in ERRORS.items()),
        "x-enum-varnames": [c.name for c in ErrorCode],
    }
    requests = {op.request.__name__ for op in OPERATIONS if op.request is not None}
    _close_answers(components, requests, {t.__name__ for t in types} - requests)
    paths: Schema = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = _operation(op)
    for service in SERVICE:
        paths[service.path] = {service.method: _open(service)}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "worker coordinator",
            "version": "1",
            "summary": "The group coordinator of Kafka Connect-style worker groups (the KIP-848 connect group type).",
            "description": "Field names are the protocol's (seed 000). Protocol errors are HTTP 200 with ErrorCode "
            "and ErrorMessage; a body that is not JSON or breaks the schema is HTTP 400 with "
            "INVALID_REQUEST (42); a body over the server's limit is HTTP 413; a missing or unknown "
            "credential is HTTP 401, a principal the ACLs do not allow on the group HTTP 403, both "
            "with GROUP_AUTHORIZATION_FAILED (30). Unknown request properties are ignored. Integers "
            "are JSON integers within the range of their format (int8, int16, int32, int64); as in "
            "JSON Schema, a number with a zero fraction is that integer (2.0 is 2), any other "
            "fraction is refused; `bytes` are base64 strings (standard alphabet, padded).",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "http://127.0.0.1:8400", "description": "`coordinator serve`'s default --listen"}],
        "tags": [
            {"name": "connect-group", "description": "The worker protocol (seed 000)."},
            {"name": "admin", "description": "Groups, their connectors and configuration."},
            {"name": "service", "description": "Health, metrics and this document; open to everyone."},
        ],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token of the server's tokens file (`TOKEN PRINCIPAL` per line). Without one, the "
                    "principal is ANONYMOUS when the server allows anonymous access, else HTTP 401.",
                }
            },
        },
    }


DOCUMENT: dict = _document()
