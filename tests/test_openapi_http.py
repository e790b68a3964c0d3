"""The OpenAPI document (generated from the core's messages and `coordinator/api/wire.py`) against the decoder and the live server.

- The served `/openapi.json` is a valid OpenAPI 3.1 document that Schemathesis loads, and it names
  exactly the routes the aiohttp app registers.
- Without a server: every body the document calls valid is taken by the matching `coordinator.api.wire`
  parser (the document never promises more than the parser takes); the base64 pattern is the
  parser's rule.
- Against a live server on the session broker (module-scoped, in a thread with its own event loop):
  Schemathesis calls every operation with valid and invalid data (its examples, coverage and
  fuzzing phases) and runs all its checks: no 5xx, documented status codes, content types, headers
  and bodies, valid data accepted and invalid data refused, the bearer token enforced; and ours: no
  internal error (the server answers a bug with 200 COORDINATOR_NOT_AVAILABLE and logs it).
- The answers random data rarely reaches (401/403/413, a client-side assignment end to end),
  each validated against the document.

Deterministic: Hypothesis is derandomized and keeps no example database. The fuzzing found two
mismatches, now regression tests: whole floats (2.0) for integers (JSON Schema's integer takes
them, and so does the decoder), and a token that is not UTF-8.
The base64 pattern is checked exhaustively against the decoder in `tests/test_wire.py`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
import msgspec
import orjson
import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR

from records.constraints import BASE64_PATTERN

from coordinator.api import openapi, operations, wire
from coordinator.core import protocol
from coordinator.core.assignors import assignor
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.protocol import ErrorCode
from coordinator.service.auth import Acl, Authorizer, Operation
from coordinator.service.server import CoordinatorServer
from tests.live_server import served
from tests.topics import create_topic

pytestmark = pytest.mark.integration

TOKEN = "openapi-fuzz-token"  # may do everything
READER_TOKEN = "openapi-reader-token"  # may only Read groups named readable-*: 403 elsewhere
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PARTITIONS = 2

# The document as a client sees it (JSON, not Python objects), loaded once for the parametrized test.
DOCUMENT = orjson.loads(orjson.dumps(openapi.DOCUMENT))
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)
# Valid and invalid data; no generated credentials: the fuzzer calls with TOKEN, and the ignored_auth
# check removes or spoils it on its own.
SCHEMA.config.generation.update(modes=list(GenerationMode), with_security_parameters=False, database="none")
SCHEMA.config.phases.update(phases=["examples", "coverage", "fuzzing"])


# Fuzzing examples per operation (the coverage phase adds its own, a fixed set): a few seconds in CI;
# OPENAPI_FUZZ_EXAMPLES=1000 for a long hunt.
FUZZ_SETTINGS = settings(
    max_examples=int(os.environ.get("OPENAPI_FUZZ_EXAMPLES", "25")),
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)


# --- the live server ---------------------------------------------------------------------------


@dataclass
class Live:
    url: str
    server: CoordinatorServer
    app: web.Application
    errors: list[logging.LogRecord]  # ERROR records the coordinator logged (tracebacks of bugs)


class _Collect(logging.Handler):
    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


@pytest.fixture(scope="module")
def live(kafka_broker) -> Iterator[Live]:  # noqa: ANN001
    # Module-scoped, so not the function-scoped `unique_topic`: the same kind of name, made here.
    topic = f"test-openapi-http-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap_servers, topic, PARTITIONS)
    authorizer = Authorizer(
        {TOKEN: "User:fuzz", READER_TOKEN: "User:reader"},
        [
            Acl("User:fuzz", frozenset({Operation.ALL}), "*"),
            Acl("User:reader", frozenset({Operation.READ}), "readable-*"),
        ],
    )
    errors: list[logging.LogRecord] = []
    handler = _Collect(errors)
    logging.getLogger("coordinator").addHandler(handler)
    try:
        with served(
            "openapi-live-server",
            kafka_broker.client_config(),
            topic,
            PARTITIONS,
            range(PARTITIONS),
            CoordinatorConfig(server_assignment_interval_ms=100, initial_assignment_delay_ms=0),
            authorizer=authorizer,
            max_body_bytes=1 << 20,  # small, so that the 413 test sends little
        ) as s:
            yield Live(s.url, s.server, s.app, errors)
    finally:
        logging.getLogger("coordinator").removeHandler(handler)


# --- the document ----------------------------------------------------------------------------------


def test_served_document_is_valid_openapi_and_names_every_route(live: Live) -> None:
    response = requests.get(f"{live.url}/openapi.json", timeout=10)
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("application/json")
    served = response.json()
    assert served == DOCUMENT
    assert list(OPENAPI_31_VALIDATOR.iter_errors(served)) == []
    # Schemathesis loads it and finds every operation well formed (it leaves out the document's own route).
    loaded = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    assert all(result.ok() for result in loaded.get_all_operations())
    documented = {(method.upper(), path) for path, item in served["paths"].items() for method in item}
    assert len(list(loaded.get_all_operations())) == len(documented) - 1

    registered = set()
    for route in live.app.router.routes():
        if route.method == "HEAD":  # aiohttp adds HEAD to every GET
            continue
        info = route.resource.get_info()
        path = info.get("path") or info["formatter"]
        if path.split("/")[1] != "ui":  # the HTML pages (/ui, /ui/...) are for people, not part of the API
            registered.add((route.method, path))
    assert documented == registered


def _resolve(schema: Any) -> Any:
    """`schema` with every $ref replaced by its target (the document has no recursive shapes)."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            target: Any = DOCUMENT
            for part in schema["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            return _resolve({**target, **{k: v for k, v in schema.items() if k != "$ref"}})
        return {k: _resolve(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_resolve(v) for v in schema]
    return schema


def test_documented_schemas_are_valid_json_schema() -> None:
    for name, schema in DOCUMENT["components"]["schemas"].items():
        assert jsonschema_rs.meta.is_valid(schema), name
    # Every $ref points somewhere.
    _resolve(DOCUMENT["paths"])


def test_answers_are_closed_and_requests_open() -> None:
    """As the hand-written document had it: an answer lists every property the server sends, always,
    and no other; a request may carry unknown properties (ignored)."""
    schemas = DOCUMENT["components"]["schemas"]
    for name in (
        "HeartbeatResponse",
        "Assignment",
        "PrepareAssignmentResponse",
        "GroupMember",
        "GroupDescription",
        "MemberDescription",
        "ErrorResponse",
        "Health",
        "Liveness",
    ):
        assert schemas[name]["additionalProperties"] is False, name
        assert set(schemas[name]["required"]) == set(schemas[name]["properties"]), name
    for name in ("HeartbeatRequest", "ClientAssignor", "ConnectorsAndTasks", "TaskId", "InstallAssignmentRequest"):
        assert "additionalProperties" not in schemas[name], name
    # A shape both use is complete in an answer: Connectors and Tasks are always there.
    assert schemas["Assignment"]["properties"]["ConnectorsAndTasks"]["required"] == ["Connectors", "Tasks"]


# --- the document never promises more than the parsers take (no server) ------------------------------


PARSERS = {
    "heartbeat": lambda body: wire.decode(orjson.dumps(body), protocol.HeartbeatRequest),
    "prepareAssignment": lambda body: wire.decode(orjson.dumps(body), protocol.PrepareAssignmentRequest),
    "installAssignment": lambda body: wire.decode(orjson.dumps(body), protocol.InstallAssignmentRequest),
    "findCoordinator": lambda body: wire.decode(orjson.dumps(body), wire.FindCoordinatorRequest),
    "setConnectors": lambda body: wire.decode(orjson.dumps(body), protocol.SetConnectorsRequest),
    "setConfig": lambda body: wire.decode(orjson.dumps(body), protocol.SetConfigRequest),
    "joinGroup": lambda body: wire.decode(orjson.dumps(body), protocol.JoinGroupRequest),
    "syncGroup": lambda body: wire.decode(orjson.dumps(body), protocol.SyncGroupRequest),
    "classicHeartbeat": lambda body: wire.decode(orjson.dumps(body), protocol.ClassicHeartbeatRequest),
    "leaveGroup": lambda body: wire.decode(orjson.dumps(body), protocol.LeaveGroupRequest),
    "raiseFormatLevel": lambda body: wire.decode(orjson.dumps(body), wire.FormatLevelRequest),
}


def _body_operations() -> list[Any]:
    return [op for op in (r.ok() for r in SCHEMA.get_all_operations()) if op.body]


def test_each_operation_declares_the_acl_its_description_names() -> None:
    """The declaration the server authorizes by (`acl`, `group`) says what the document tells."""
    for op in operations.OPERATIONS:
        named = re.search(r"Required ACL: (\w+)", op.description)
        assert op.acl == (named.group(1) if named else None), op.operation_id
        assert (op.acl is None) == (op.group is None), op.operation_id
        assert op.path.startswith(operations.API_PREFIX), op.operation_id  # authenticated, measured
        if op.group == operations.PATH:
            assert op.path.startswith("/v1/groups/{group_id}"), op.operation_id
        elif op.group == operations.BODY:
            assert op.request is not None and "group_id" in op.request.__struct_fields__, op.operation_id


def test_every_body_operation_has_a_parser() -> None:
    assert {op.definition.raw["operationId"] for op in _body_operations()} == set(PARSERS)


@pytest.mark.parametrize("operation", _body_operations(), ids=lambda op: op.definition.raw["operationId"])
def test_parser_takes_every_body_the_document_calls_valid(operation) -> None:  # noqa: ANN001
    parse = PARSERS[operation.definition.raw["operationId"]]

    @settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    def parses(case) -> None:  # noqa: ANN001
        # Through JSON as on the wire: serialized as Schemathesis sends it, read as the server reads it.
        body = orjson.loads(json.dumps(case.body))
        parse(body)  # a WireError here is a body the document allows and the server refuses

    parses()


def _base64_body(text: str) -> dict:
    return {
        "GroupId": "g",
        "MemberId": "m",
        "MemberEpoch": 0,
        "ClientAssignors": [{"Name": "a", "MinimumVersion": 0, "MaximumVersion": 0, "Metadata": text}],
    }


@pytest.mark.parametrize("text", ["", "AA==", "AAA=", "AAAA", "+/+/"])
def test_base64_pattern_admits_what_the_parser_admits(text: str) -> None:
    assert re.fullmatch(BASE64_PATTERN, text)
    PARSERS["heartbeat"](_base64_body(text))


@pytest.mark.parametrize(
    "text", ["A", "AA", "AA=", "AAA", "=", "A===", "AA=A", "AAAA=", "AAAA==", "AAAA\n", "AA-_", "AA ="]
)
def test_base64_pattern_refuses_what_the_parser_refuses(text: str) -> None:
    assert not re.fullmatch(BASE64_PATTERN, text)
    with pytest.raises(wire.WireError):
        PARSERS["heartbeat"](_base64_body(text))


# --- the live server against its document --------------------------------------------------------


def _no_internal_error(live: Live):  # noqa: ANN202
    def no_internal_error(ctx, response, case) -> None:  # noqa: ANN001
        """The server turns a bug into 200 COORDINATOR_NOT_AVAILABLE and a logged traceback: a 5xx in disguise."""
        logged, live.errors[:] = list(live.errors), []
        assert not logged, "the coordinator logged: " + "\n".join(
            r.getMessage() + ("\n" + logging.Formatter().formatException(r.exc_info) if r.exc_info else "")
            for r in logged
        )
        if response.headers.get("content-type", [""])[0].startswith("application/json"):
            body = response.json()
            assert not (
                isinstance(body, dict)
                and body.get("ErrorCode") == ErrorCode.COORDINATOR_NOT_AVAILABLE
                and "internal error" in str(body.get("ErrorMessage"))
            ), body

    return no_internal_error


@SCHEMA.parametrize()
@FUZZ_SETTINGS
def test_live_server_matches_its_document(case, live: Live) -> None:  # noqa: ANN001
    case.call_and_validate(base_url=live.url, headers=AUTH, additional_checks=[_no_internal_error(live)])


def test_refusals_match_the_document(live: Live) -> None:
    """401 without or with an unknown token (and WWW-Authenticate), 403 on a group the ACLs do not
    allow, 413 over the server's limit (1 MiB here); a group id with braces reaches its route: each as documented."""
    bodies = {
        "heartbeat": {"GroupId": "other", "MemberId": "m", "MemberEpoch": 0},
        "prepareAssignment": {"GroupId": "other", "MemberId": "m", "MemberEpoch": 0},
        "installAssignment": {"GroupId": "other", "MemberId": "m", "MemberEpoch": 0, "GroupEpoch": 0},
        "findCoordinator": {"GroupId": "other"},
        "setConnectors": {"Connectors": []},
        "setConfig": {},
        "joinGroup": {
            "GroupId": "other",
            "ProtocolType": "connect",
            "Protocols": [{"Name": "eager"}],
            "SessionTimeoutMs": 10000,
        },
        "syncGroup": {"GroupId": "other", "MemberId": "m", "GenerationId": 1},
        "classicHeartbeat": {"GroupId": "other", "MemberId": "m", "GenerationId": 1},
        "leaveGroup": {"GroupId": "other", "Members": [{"MemberId": "m"}]},
        "raiseFormatLevel": {"Level": 1},
    }
    seen = set()
    for result in SCHEMA.get_all_operations():
        op = result.ok()
        op_id = op.definition.raw["operationId"]
        secured = bool(op.definition.raw["security"])
        path_parameters = (
            {"group_id": "other", **({"connector": "A"} if "{connector}" in op.path else {})}
            if "{group_id}" in op.path
            else None
        )
        body = {"body": bodies[op_id], "media_type": "application/json"} if op_id in bodies else {}
        case = op.Case(path_parameters=path_parameters, **body)
        for headers, expected in (
            [
                ({}, 401),
                ({"Authorization": "Bearer nope"}, 401),
                (
                    {"Authorization": f"Bearer {READER_TOKEN}"},
                    403 if op_id not in ("listGroups", "listPartitions") else 200,
                ),
            ]
            if secured
            else [({}, 200)]
        ):
            response = case.call(base_url=live.url, headers=headers)
            assert response.status_code == expected, (op_id, headers, response.text)
            _conforms(live, case, response)
            if expected == 401:
                assert response.headers["www-authenticate"][0].startswith("Bearer")
            seen.add((op_id, expected))
        if op_id in bodies:
            big = requests.request(
                op.method.upper(),
                live.url + op.path.replace("{group_id}", "other"),
                headers=AUTH,
                data=b"[" + b"0," * (1 << 19) + b"0]",
                timeout=30,
            )
            assert big.status_code == 413, (op_id, big.text)
            _conforms(live, case, big)
        if path_parameters:  # any group id reaches its route, braces included
            braces = op.Case(path_parameters={**path_parameters, "group_id": "a{b}"}, **body)
            response = braces.call(base_url=live.url, headers=AUTH)
            assert response.status_code in (200, 400), (op_id, response.text)
            _conforms(live, braces, response)
    assert ("heartbeat", 403) in seen and ("health", 200) in seen
    assert ("listPartitions", 200) in seen  # where each partition is served: no group's, so any principal's
    assert ("healthReady", 200) in seen and ("healthLive", 200) in seen  # the probes are open as well
    assert not live.errors


def test_whole_floats_for_integers_are_taken_as_the_document_says(live: Live) -> None:
    """What the fuzzing once found: JSON Schema's `integer` takes 2.0, so the server does, as that
    integer; 2.5 is refused with 400 naming the field."""
    prepare = SCHEMA["/v1/connect-group/prepare-assignment"]["POST"]
    whole = prepare.Case(body={"GroupId": "g", "MemberId": "m", "MemberEpoch": 2.0}, media_type="application/json")
    response = whole.call(base_url=live.url, headers=AUTH)
    assert response.status_code == 200 and response.json()["ErrorCode"] == ErrorCode.GROUP_ID_NOT_FOUND, response.text
    _conforms(live, whole, response)
    fraction = prepare.Case(body={"GroupId": "g", "MemberId": "m", "MemberEpoch": 2.5}, media_type="application/json")
    response = fraction.call(base_url=live.url, headers=AUTH)
    assert response.status_code == 400 and "$.MemberEpoch" in response.json()["ErrorMessage"], response.text
    _conforms(live, fraction, response)


def test_a_token_that_is_not_utf8_is_refused_like_any_unknown_token(live: Live) -> None:
    try:
        response = requests.get(f"{live.url}/v1/groups", headers={"Authorization": "Bearer \u00e9"}, timeout=10)
        assert (response.status_code, response.json()["ErrorCode"]) == (401, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        assert not live.errors
    finally:
        live.errors.clear()  # the traceback is this test's business only


def _conforms(live: Live, case, response) -> None:  # noqa: ANN001
    """The response is a documented one: status, content type, headers and body."""
    case.validate_response(
        response,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_headers_conformance,
            response_schema_conformance,
            _no_internal_error(live),
        ],
    )


def _call(
    live: Live, method: str, path: str, body: Any = None, group_id: str | None = None, connector: str | None = None
) -> Any:
    operation = SCHEMA[path][method]
    kwargs: dict[str, Any] = {"path_parameters": {"group_id": group_id}} if group_id is not None else {}
    if connector is not None:
        kwargs["path_parameters"]["connector"] = connector
    if body is not None:
        kwargs.update(body=body, media_type="application/json")
    case = operation.Case(**kwargs)
    response = case.call(base_url=live.url, headers=AUTH)
    _conforms(live, case, response)
    assert response.status_code == 200, response.text
    return response.json()


def test_client_side_assignment_over_http_matches_the_document(live: Live) -> None:
    """The answers random data rarely reaches, each checked against the document: COMPUTE_ASSIGNMENT,
    a full PrepareAssignment (members, departed work), installs with deferred work, assignments in
    heartbeats, and a described group with members, deferred items and a scheduled rebalance. The
    worker's side is the shipped incremental_cooperative assignor through the wire types'
    `group_spec` and `InstallAssignmentRequest.of`, as the SDK runs it."""
    group = "openapi-client-side"
    hb, prepare, install = (
        "/v1/connect-group/heartbeat",
        "/v1/connect-group/prepare-assignment",
        "/v1/connect-group/install-assignment",
    )
    client_assignors = [
        {
            "Name": "incremental_cooperative",
            "MinimumVersion": 0,
            "MaximumVersion": 1,
            "Reason": 0,
            "Version": 1,
            "Metadata": "AQID",
        }
    ]
    assert (
        _call(
            live,
            "PUT",
            "/v1/groups/{group_id}/connectors",
            {"Connectors": [{"Name": "A", "Tasks": 2}, {"Name": "B", "Tasks": 1}]},
            group,
        )["ErrorCode"]
        == 0
    )
    assert (
        _call(
            live,
            "PUT",
            "/v1/groups/{group_id}/config",
            {"SessionTimeoutMs": 30_000, "HeartbeatIntervalMs": 1_000, "ScheduledRebalanceMaxDelayMs": 120_000},
            group,
        )["ErrorCode"]
        == 0
    )
    workers: dict[str, dict] = {}
    seen: set[str] = set()

    def heartbeat(member: str, body: dict) -> dict:
        answer = _call(live, "POST", hb, {"GroupId": group, "MemberId": member, **body})
        if answer["ErrorCode"] == ErrorCode.COMPUTE_ASSIGNMENT:
            seen.add("compute")
            spec = _call(
                live, "POST", prepare, {"GroupId": group, "MemberId": member, "MemberEpoch": answer["MemberEpoch"]}
            )
            assert spec["ErrorCode"] == 0, spec
            seen.update({"departed"} if spec["DepartedMembers"] else set())
            # The worker's side as the SDK does it: the shipped assignor on the answer, its result installed.
            group_spec = msgspec.convert(spec, protocol.PrepareAssignmentResponse)
            result = assignor(spec["AssignorName"]).assign(group_spec)
            body = msgspec.to_builtins(
                protocol.InstallAssignmentRequest.of(group, member, answer["MemberEpoch"], spec["GroupEpoch"], result)
            )
            outcome = _call(live, "POST", install, body)
            assert outcome["ErrorCode"] == 0, outcome
        else:
            assert answer["ErrorCode"] == 0, answer
        state = workers.setdefault(member, {"owned": {"Connectors": [], "Tasks": []}})
        state["epoch"] = answer["MemberEpoch"]
        if answer["Assignment"] is not None:
            seen.add("assignment")
            state["owned"] = answer["Assignment"]["ConnectorsAndTasks"]
        return answer

    def settle() -> dict:
        for _ in range(30):
            for member, state in list(workers.items()):
                heartbeat(member, {"MemberEpoch": state["epoch"], "ConnectorsAndTasks": state["owned"]})
            described = _call(live, "GET", "/v1/groups/{group_id}", group_id=group)
            if described["State"] == "STABLE":
                return described
        raise AssertionError(f"the group did not settle: {described}")

    for member, instance in (("W1", None), ("W2", "instance-2")):
        heartbeat(
            member,
            {
                "MemberEpoch": 0,
                "InstanceId": instance,
                "RebalanceTimeoutMs": 10_000,
                "ClientAssignors": client_assignors,
                "Url": f"http://{member}:8083",
                "ConnectorsAndTasks": {"Connectors": [], "Tasks": []},
            },
        )
    described = settle()
    assert {m["MemberId"] for m in described["Members"]} == {"W1", "W2"}
    assert described["Assignor"] == "incremental_cooperative" and described["AssignorKind"] == "client"
    status = "/v1/groups/{group_id}/connectors/{connector}/status"
    a = _call(live, "GET", status, group_id=group, connector="A")
    assert a["name"] == "A" and [t["id"] for t in a["tasks"]] == [0, 1] and a["type"] == "unknown", a
    holders = {m["MemberId"]: m["InstanceId"] for m in described["Members"]}
    for place in (a["connector"], *a["tasks"]):
        assert place["state"] == "ASSIGNED" and holders[place["worker_id"]] == place["instance_id"], a
    assert _call(live, "GET", status, group_id=group, connector="Z")["ErrorCode"] == ErrorCode.UNKNOWN_CONNECTOR
    # W2 leaves holding work: the next assignment defers it, and the group schedules a rebalance.
    heartbeat("W2", {"MemberEpoch": -1})
    del workers["W2"]
    described = settle()
    assert described["Deferred"]["Connectors"] or described["Deferred"]["Tasks"], described
    assert described["ScheduledRebalanceAtMs"] is not None
    deferred = [
        *described["Deferred"]["Connectors"],
        *((t["Connector"], t["Task"]) for t in described["Deferred"]["Tasks"]),
    ]
    waiting = [
        place
        for name in ("A", "B")
        for s in [_call(live, "GET", status, group_id=group, connector=name)]
        for place in ((name, s["connector"]), *(((name, t["id"]), t) for t in s["tasks"]))
    ]
    assert sorted(str(i) for i, p in waiting if p["state"] == "UNASSIGNED") == sorted(map(str, deferred)), waiting
    assert all(p["deferred_until"] and p["worker_id"] is None for i, p in waiting if p["state"] == "UNASSIGNED")
    assert seen == {"compute", "departed", "assignment"}
    listed = _call(live, "GET", "/v1/groups")
    assert group in [g["GroupId"] for g in listed["Groups"]]
    assert _call(live, "POST", "/v1/find-coordinator", {"GroupId": group})["ErrorCode"] == 0
    assert _call(live, "DELETE", "/v1/groups/{group_id}", group_id=group)["ErrorCode"] == ErrorCode.NON_EMPTY_GROUP
    heartbeat("W1", {"MemberEpoch": -1})
    assert _call(live, "DELETE", "/v1/groups/{group_id}", group_id=group)["ErrorCode"] == 0
    assert _call(live, "GET", "/v1/groups/{group_id}", group_id=group)["ErrorCode"] == ErrorCode.GROUP_ID_NOT_FOUND
