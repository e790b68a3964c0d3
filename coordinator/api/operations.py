"""Each operation of the HTTP API (DESIGN §7), declared once: its method, path, request and answer
types, the ACL it needs and where its group is, and the prose of its documentation.

From these rows come the server's routes (`coordinator.service.server`: one generic handler for the
operations on one group, a handler of its own for the others), the OpenAPI document
(`coordinator.api.openapi`), the Kafka listener's APIs (`openapi.KAFKA_APIS`, by operation id) and
the paths the SDK and the command line send (`route`, `path`). Light on purpose (the core's messages
and the HTTP bodies of `wire`, nothing else), so that a command of the SDK does not build the document
to find a path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coordinator.api import wire
from coordinator.core import protocol

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(about: str, schema: Schema) -> Schema:
    return {"description": about, "content": {"application/json": {"schema": schema}}}


# Every operation's path starts so: the server authenticates these requests and labels their metrics.
API_PREFIX = "/v1/"

# Where an operation finds the group it is authorized on (Operation.group).
BODY = "body"  # the request's GroupId: authorized once the body is decoded
PATH = "path"  # the path's {group_id}: authorized before the body is read
EVERY_GROUP = "*"  # every group: an ACL whose pattern is `*`


@dataclass(frozen=True)
class Operation:
    """One route, declared once: the server routes it, the SDK asks it (`route`), the OpenAPI
    document describes it. Its request body type (None: no body), the answers at
    HTTP 200 (the first is what the core's answer is sent as), prose, the ACL operation it needs
    (`auth.Operation`'s value; None: any authenticated principal) on the group `group` says where to
    find."""

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
        (protocol.HeartbeatResponse, protocol.ErrorResponse),
        protocol.HeartbeatRequest,
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
        (protocol.PrepareAssignmentResponse, protocol.PrepareAssignmentError, protocol.ErrorResponse),
        protocol.PrepareAssignmentRequest,
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
        (protocol.ErrorResponse,),
        protocol.InstallAssignmentRequest,
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
        (protocol.JoinGroupResponse, protocol.ErrorResponse),
        protocol.JoinGroupRequest,
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
        (protocol.SyncGroupResponse, protocol.ErrorResponse),
        protocol.SyncGroupRequest,
        {"GroupId": "connect-cluster", "MemberId": "worker-1-5f1c", "GenerationId": 1, "Assignments": []},
        tag="classic-group",
        acl="Read",
        group=BODY,
    ),
    Operation(
        "post",
        "/v1/classic-group/heartbeat",
        "classicHeartbeat",
        "Heartbeat (classic, seed 004)",
        "Keeps a classic member's session; REBALANCE_IN_PROGRESS tells it to join again. Required ACL: Read. "
        + _SERVING
        + "UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS.",
        (protocol.ErrorResponse,),
        protocol.ClassicHeartbeatRequest,
        {"GroupId": "connect-cluster", "MemberId": "worker-1-5f1c", "GenerationId": 1},
        tag="classic-group",
        acl="Read",
        group=BODY,
    ),
    Operation(
        "post",
        "/v1/classic-group/leave",
        "leaveGroup",
        "LeaveGroup (classic, seed 004)",
        "Members leave at once; the rest rebalance. Required ACL: Read. "
        + _SERVING
        + "INVALID_REQUEST, UNKNOWN_MEMBER_ID (no such group); per member UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID.",
        (protocol.LeaveGroupResponse, protocol.ErrorResponse),
        protocol.LeaveGroupRequest,
        {"GroupId": "connect-cluster", "Members": [{"MemberId": "worker-1-5f1c"}]},
        tag="classic-group",
        acl="Read",
        group=BODY,
    ),
    Operation(
        "post",
        "/v1/find-coordinator",
        "findCoordinator",
        "FindCoordinator",
        "Which coordinator serves the group: any instance answers. Required ACL: Describe. Errors at HTTP 200: "
        "COORDINATOR_NOT_AVAILABLE (no coordinator known for the partition).",
        (wire.FindCoordinatorResponse, protocol.ErrorResponse),
        wire.FindCoordinatorRequest,
        {"GroupId": "connect-cluster"},
        acl="Describe",
        group=BODY,
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
        (protocol.GroupDescription, protocol.ErrorResponse),
        tag="admin",
        acl="Describe",
        group=PATH,
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
        (wire.ConnectorStatus, protocol.ErrorResponse),
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
        (protocol.ErrorResponse,),
        tag="admin",
        acl="Delete",
        group=PATH,
    ),
    Operation(
        "put",
        "/v1/groups/{group_id}/connectors",
        "setConnectors",
        "Set the connectors a group runs",
        "Creates the group if needed and bumps the group epoch when the set changes. Required ACL: Alter. Errors "
        "at HTTP 200: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST, INVALID_GROUP_ID.",
        (protocol.ErrorResponse,),
        protocol.SetConnectorsRequest,
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
        (protocol.ErrorResponse,),
        protocol.SetConfigRequest,
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
    "200": json_content("Every partition is active.", ref("Health")),
    "503": json_content("A partition is loading, failed or closed.", ref("Health")),
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
        {"200": json_content("The process answers.", ref("Liveness"))},
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
        {"200": json_content("The document.", {"type": "object"})},
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
