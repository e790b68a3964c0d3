"""The OpenAPI 3.1 document of the HTTP API (DESIGN §7), served at `GET /openapi.json`.

Generated: the schemas come from the message declarations (the core's in `coordinator.core.protocol`,
HTTP's own in `coordinator.api.wire`; msgspec writes them), so the document says exactly what the
decoder takes and the server sends; this module adds
the operations, each a row of `coordinator.api.operations.OPERATIONS` or `SERVICE`, and closes the answers (every declared property is sent,
and no other; requests stay open, unknown properties being ignored). `tests/test_openapi_http.py`
holds the decoder and the server to it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from coordinator.api import kafka_protocol, wire
from coordinator.api.operations import OPERATIONS, PATH, SERVICE, Operation, Schema, ServiceOperation, json_content, ref
from coordinator.core.protocol import ErrorCode

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


# The Kafka API each operation is served as on the Kafka listener (`serve --kafka-listener`, DESIGN
# §12), by operation id: the same call of the core behind both. ApiVersions, Kafka's handshake, has
# no HTTP operation. `kafka_protocol.SUPPORTED` holds the versions; tests/test_kafka_listener.py
# checks that the two name the same APIs.
KAFKA_APIS: dict[str, int] = {
    "joinGroup": kafka_protocol.JOIN_GROUP,
    "syncGroup": kafka_protocol.SYNC_GROUP,
    "classicHeartbeat": kafka_protocol.HEARTBEAT,
    "leaveGroup": kafka_protocol.LEAVE_GROUP,
    "findCoordinator": kafka_protocol.FIND_COORDINATOR,
    "listGroups": kafka_protocol.LIST_GROUPS,
    "describeGroup": kafka_protocol.DESCRIBE_GROUPS,
    "deleteGroup": kafka_protocol.DELETE_GROUPS,
}


def _operation(op: Operation) -> Schema:
    answers = [ref(t.__name__) for t in op.answers]
    responses: Schema = {
        "200": json_content("The answer, or a protocol error.", answers[0] if len(answers) == 1 else {"anyOf": answers})
    }
    for status, (schema, about) in _REFUSALS.items():
        if status in ("400", "413") and op.request is None:
            continue
        if status == "403" and op.operation_id in ("listGroups", "listPartitions"):
            continue  # groups the caller may not describe are left out, never refused; partitions are no group's
        responses[status] = json_content(about, ref(schema))
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
        media: Schema = {"schema": ref(op.request.__name__)}
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
    """Answers are closed: the server sends every property it declares (it encodes without omitting
    defaults: a default of the core's message is there for the code that builds it, not an absence
    the server may choose) and nothing else. Requests stay open (unknown properties are ignored); a
    shape both use (ConnectorsAndTasks, ...) is complete where an answer refers to it."""
    taken = _reach(components, requests)
    shared = {name: components[name] for name in taken}
    for name in _reach(components, answers) - taken:
        schema = components[name]
        if "properties" not in schema:
            continue  # ErrorCode
        schema["required"] = list(schema["properties"])
        for prop in schema["properties"].values():
            prop.pop("default", None)
        schema["additionalProperties"] = False
        schema["properties"] = _complete(schema["properties"], shared)


# The document's names for the shapes whose class is named for the records or the core rather than
# for the message they are part of (the names the document has always had).
_NAMES = {
    "TargetAssignmentMemberValue": "Assignment",
    "Assignor": "ClientAssignor",
    "ClassicMemberProtocol": "ClassicProtocol",
    "AssignmentMember": "GroupMember",
    "DescribedDeparture": "Departure",
}


def _renamed(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_renamed(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _renamed(v) for k, v in schema.items()}
    ref_ = out.get("$ref", "")
    name = ref_.rsplit("/", 1)[-1]
    if name in _NAMES:
        out["$ref"] = ref_.removesuffix(name) + _NAMES[name]
    return out


def _document() -> dict:
    types = {t for op in OPERATIONS for t in (*op.answers, op.request) if t is not None}
    types |= {wire.Health, wire.Liveness, wire.InvalidRequest, wire.AuthorizationFailed}
    _, components = msgspec.json.schema_components(
        sorted(types, key=lambda t: t.__name__), ref_template="#/components/schemas/{name}"
    )
    components = {_NAMES.get(name, name): _renamed(schema) for name, schema in components.items()}
    for name, schema in components.items():  # docstrings, as one line each
        schema["title"] = name
        if "description" in schema:
            schema["description"] = " ".join(schema["description"].split())
    for name in ("ErrorResponse", "HeartbeatResponse", "PrepareAssignmentError"):
        components[name]["properties"]["ErrorCode"] = ref("ErrorCode")
    components["ErrorCode"] = {
        "type": "integer",
        "format": "int16",
        "enum": [int(c) for c in ErrorCode],
        "description": "The top-level error code, or 0 if there was no error. Kafka's numbers where Kafka has the "
        "error; 1000 and up are the connect group type's own.\n\n"
        + "\n".join(f"- {int(c)} {c.name}: {about}" for c, about in ERRORS.items()),
        "x-enum-varnames": [c.name for c in ErrorCode],
    }
    for op in OPERATIONS:
        if op.group == PATH and op.request is not None:
            # The path names the group; the server sets the message's GroupId from it.
            schema = components[op.request.__name__]
            del schema["properties"]["GroupId"]
            assert "GroupId" not in schema.get("required", ()), op.operation_id
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
