"""JSON wire shapes of the HTTP API (DESIGN §7) <-> the protocol's requests and responses.

Field names are the seed's (`GroupId`, `MemberEpoch`, ...); `bytes` travel as base64; the seed's
nested `[]ConnectorsAndTasks` is one object `{"Connectors": [...], "Tasks": [{"Connector", "Task"}]}`.
Anything that does not fit raises `WireError`, which the server answers with HTTP 400 and
INVALID_REQUEST naming the field: never a 500.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from records import Assignor, ConnectorsAndTasks, ConnectorTaskCount, DepartedMember, TaskId

from coordinator.core.assignors import AssignmentMember, GroupAssignment, GroupSpec, MemberAssignment
from coordinator.core.protocol import (
    DeleteGroupRequest,
    GroupDescription,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallAssignmentRequest,
    InstallMember,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    SetConfigRequest,
    SetConnectorsRequest,
)

INT32 = (-(2**31), 2**31 - 1)
INT16 = (-(2**15), 2**15 - 1)
INT8 = (-(2**7), 2**7 - 1)
_MISSING = object()


class WireError(ValueError):
    """A body that is not what the API accepts."""


def _get(body: dict, name: str, kind: str, *, required: bool = False, nullable: bool = False,
         default: Any = None, bounds: tuple[int, int] = INT32) -> Any:
    value = body.get(name, _MISSING)
    if value is _MISSING:
        if required:
            raise WireError(f"{name} is required")
        return default
    if value is None:
        if nullable or not required and default is None:
            return None
        raise WireError(f"{name} must not be null")
    if kind == "int":
        if value.__class__ is not int:
            # JSON has one number type: 2.0 is the integer 2 to JSON Schema (and to our document).
            if value.__class__ is not float or not value.is_integer():
                raise WireError(f"{name} must be an integer")
            value = int(value)
        if not bounds[0] <= value <= bounds[1]:
            raise WireError(f"{name} must be within [{bounds[0]}, {bounds[1]}]")
    elif kind == "str":
        if value.__class__ is not str:
            raise WireError(f"{name} must be a string")
    elif kind == "bytes":
        if value.__class__ is not str:
            raise WireError(f"{name} must be a base64 string")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise WireError(f"{name} is not valid base64") from None
    elif kind == "list":
        if value.__class__ is not list:
            raise WireError(f"{name} must be an array")
    elif kind == "object":
        if value.__class__ is not dict:
            raise WireError(f"{name} must be an object")
    return value


def _object(value: Any, what: str) -> dict:
    if value.__class__ is not dict:
        raise WireError(f"{what} must be an object")
    return value


def connectors_and_tasks(value: Any, what: str = "ConnectorsAndTasks") -> ConnectorsAndTasks:
    body = _object(value, what)
    connectors = _get(body, "Connectors", "list", default=[]) or []
    tasks = _get(body, "Tasks", "list", default=[]) or []
    for c in connectors:
        if c.__class__ is not str:
            raise WireError(f"{what}.Connectors must hold strings")
    out = []
    for t in tasks:
        t = _object(t, f"{what}.Tasks[]")
        out.append(TaskId(_get(t, "Connector", "str", required=True), _get(t, "Task", "int", required=True)))
    return ConnectorsAndTasks(tuple(connectors), tuple(out))


def connectors_and_tasks_json(value: ConnectorsAndTasks) -> dict:
    return {"Connectors": list(value.connectors), "Tasks": [{"Connector": c, "Task": t} for c, t in value.tasks]}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def heartbeat_request(body: Any) -> HeartbeatRequest:
    body = _object(body, "the body")
    assignors = _get(body, "ClientAssignors", "list", nullable=True)
    client_assignors = None
    if assignors is not None:
        client_assignors = tuple(
            Assignor(_get(a, "Name", "str", required=True),
                     _get(a, "MinimumVersion", "int", required=True, bounds=INT16),
                     _get(a, "MaximumVersion", "int", required=True, bounds=INT16),
                     _get(a, "Reason", "int", default=0, bounds=INT8),
                     _get(a, "Version", "int", default=0, bounds=INT16),
                     _get(a, "Metadata", "bytes", default=b"") or b"")
            for a in (_object(a, "ClientAssignors[]") for a in assignors))
    owned = _get(body, "ConnectorsAndTasks", "object", nullable=True)
    return HeartbeatRequest(
        group_id=_get(body, "GroupId", "str", required=True),
        member_id=_get(body, "MemberId", "str", required=True),
        member_epoch=_get(body, "MemberEpoch", "int", required=True),
        instance_id=_get(body, "InstanceId", "str", nullable=True),
        rack_id=_get(body, "RackId", "str", nullable=True),
        rebalance_timeout_ms=_get(body, "RebalanceTimeoutMs", "int", default=-1),
        server_assignor=_get(body, "ServerAssignor", "str", nullable=True),
        client_assignors=client_assignors,
        owned=None if owned is None else connectors_and_tasks(owned),
        url=_get(body, "Url", "str", nullable=True),
        topic_partitions=body.get("TopicPartitions"))


def heartbeat_response(r: HeartbeatResponse) -> dict:
    assignment = None
    if r.assignment is not None:
        assignment = {"Error": r.assignment.error,
                      "ConnectorsAndTasks": connectors_and_tasks_json(r.assignment.assignment),
                      "Version": r.assignment.version, "Metadata": _b64(r.assignment.metadata)}
    return {"ErrorCode": int(r.error_code), "ErrorMessage": r.error_message, "MemberEpoch": r.member_epoch,
            "HeartbeatIntervalMs": r.heartbeat_interval_ms, "Assignment": assignment}


def find_coordinator_request(body: Any) -> str:
    """The group a FindCoordinator request asks about."""
    return _get(_object(body, "the body"), "GroupId", "str", required=True)


def prepare_request(body: Any) -> PrepareAssignmentRequest:
    body = _object(body, "the body")
    return PrepareAssignmentRequest(_get(body, "GroupId", "str", required=True),
                                    _get(body, "MemberId", "str", required=True),
                                    _get(body, "MemberEpoch", "int", required=True))


def group_spec_json(spec: GroupSpec) -> dict:
    return {
        "GroupId": spec.group_id, "GroupEpoch": spec.group_epoch,
        "Connectors": [{"Name": c.name, "Tasks": c.tasks} for c in spec.connectors],
        "Members": [{"MemberId": m.member_id, "MemberEpoch": m.member_epoch, "InstanceId": m.instance_id,
                     "Assignor": {"MinimumVersion": m.minimum_version, "MaximumVersion": m.maximum_version,
                                  "Version": m.version, "Reason": m.reason, "Metadata": _b64(m.metadata)},
                     "ConnectorsAndTasks": connectors_and_tasks_json(m.owned),
                     "TargetConnectorsAndTasks": connectors_and_tasks_json(m.target)} for m in spec.members],
        "DepartedMembers": [{"MemberId": d.member_id, "InstanceId": d.instance_id,
                             "ConnectorsAndTasks": connectors_and_tasks_json(d.assignment),
                             "DepartedAtMs": d.departed_at_ms} for d in spec.departed],
        "Deferred": connectors_and_tasks_json(spec.deferred),
        "ScheduledRebalanceAtMs": spec.scheduled_rebalance_at_ms,
        "ScheduledRebalanceMaxDelayMs": spec.scheduled_rebalance_max_delay_ms,
        "NowMs": spec.now_ms,
    }


def prepare_response(r: PrepareAssignmentResponse) -> dict:
    out = {"ErrorCode": int(r.error_code), "ErrorMessage": r.error_message, "GroupEpoch": r.group_epoch,
           "AssignorName": r.assignor_name}
    if r.group is not None:
        out.update(group_spec_json(r.group))
    return out


def install_request(body: Any) -> InstallAssignmentRequest:
    body = _object(body, "the body")
    members = []
    for m in _get(body, "Members", "list", default=[]) or []:
        m = _object(m, "Members[]")
        cat = _get(m, "ConnectorsAndTasks", "object", nullable=True)
        member_id = _get(m, "MemberId", "str", required=True)
        error = _get(m, "Error", "int", default=0, bounds=INT8)
        version = _get(m, "Version", "int", default=0, bounds=INT16)
        metadata = _get(m, "Metadata", "bytes", default=b"") or b""
        members.append(InstallMember(
            member_id=member_id,
            assignment=None if cat is None else MemberAssignment(
                connectors_and_tasks(cat, "Members[].ConnectorsAndTasks"), error, version, metadata),
            topic_partitions=m.get("Partitions")))
    deferred = _get(body, "Deferred", "object", nullable=True)
    return InstallAssignmentRequest(
        group_id=_get(body, "GroupId", "str", required=True), member_id=_get(body, "MemberId", "str", required=True),
        member_epoch=_get(body, "MemberEpoch", "int", required=True),
        group_epoch=_get(body, "GroupEpoch", "int", required=True), members=tuple(members),
        error=_get(body, "Error", "int", default=0, bounds=INT8),
        error_message=_get(body, "ErrorMessage", "str", nullable=True),
        deferred=ConnectorsAndTasks() if deferred is None else connectors_and_tasks(deferred, "Deferred"),
        scheduled_rebalance_delay_ms=_get(body, "ScheduledRebalanceDelayMs", "int", nullable=True))


# --- the worker's side: a PrepareAssignment answer in, an InstallAssignment body out -----------


def group_spec(body: dict) -> GroupSpec:
    """The `GroupSpec` a PrepareAssignment response describes (the inverse of `group_spec_json`)."""
    members = []
    for m in body.get("Members") or ():
        a = m.get("Assignor") or {}
        members.append(AssignmentMember(
            m["MemberId"], m.get("InstanceId"), m.get("MemberEpoch", 0),
            target=connectors_and_tasks(m.get("TargetConnectorsAndTasks") or {}),
            owned=connectors_and_tasks(m.get("ConnectorsAndTasks") or {}),
            minimum_version=a.get("MinimumVersion", 0), maximum_version=a.get("MaximumVersion", 0),
            reason=a.get("Reason", 0), version=a.get("Version", 0),
            metadata=base64.b64decode(a.get("Metadata") or "")))
    departed = tuple(DepartedMember(d["MemberId"], d.get("InstanceId"), connectors_and_tasks(d["ConnectorsAndTasks"]),
                                    d["DepartedAtMs"]) for d in body.get("DepartedMembers") or ())
    return GroupSpec(
        group_id=body["GroupId"], group_epoch=body["GroupEpoch"],
        connectors=tuple(ConnectorTaskCount(c["Name"], c["Tasks"]) for c in body.get("Connectors") or ()),
        members=tuple(members), departed=departed, deferred=connectors_and_tasks(body.get("Deferred") or {}),
        scheduled_rebalance_at_ms=body.get("ScheduledRebalanceAtMs"),
        scheduled_rebalance_max_delay_ms=body.get("ScheduledRebalanceMaxDelayMs", 300_000),
        now_ms=body.get("NowMs", 0))


def install_body(group_id: str, member_id: str, member_epoch: int, group_epoch: int,
                 result: GroupAssignment) -> dict:
    """The InstallAssignment request for an assignor's `result` (what `install_request` parses)."""
    return {
        "GroupId": group_id, "MemberId": member_id, "MemberEpoch": member_epoch, "GroupEpoch": group_epoch,
        "Error": result.error, "ErrorMessage": result.error_message,
        "Members": [{"MemberId": member_id_, "ConnectorsAndTasks": connectors_and_tasks_json(a.assignment),
                     "Error": a.error, "Version": a.version, "Metadata": _b64(a.metadata)}
                    for member_id_, a in sorted(result.members.items())],
        "Deferred": connectors_and_tasks_json(result.deferred),
        "ScheduledRebalanceDelayMs": result.scheduled_rebalance_delay_ms,
    }


def set_connectors_request(group_id: str, body: Any) -> SetConnectorsRequest:
    body = _object(body, "the body")
    connectors = []
    for c in _get(body, "Connectors", "list", required=True):
        c = _object(c, "Connectors[]")
        connectors.append(ConnectorTaskCount(_get(c, "Name", "str", required=True),
                                             _get(c, "Tasks", "int", required=True)))
    return SetConnectorsRequest(group_id, tuple(connectors))


def set_config_request(group_id: str, body: Any) -> SetConfigRequest:
    body = _object(body, "the body")
    return SetConfigRequest(group_id, *(_get(body, name, "int", nullable=True) for name in (
        "SessionTimeoutMs", "HeartbeatIntervalMs", "RebalanceTimeoutMs", "ScheduledRebalanceMaxDelayMs")))


def delete_request(group_id: str) -> DeleteGroupRequest:
    return DeleteGroupRequest(group_id)


def group_description_json(d: GroupDescription) -> dict:
    return {
        "GroupId": d.group_id, "GroupEpoch": d.group_epoch, "AssignmentEpoch": d.assignment_epoch, "State": d.state,
        "Assignor": d.assignor, "AssignorKind": d.assignor_kind,
        "Connectors": [{"Name": c.name, "Tasks": c.tasks} for c in d.connectors],
        "Members": [{"MemberId": m.member_id, "InstanceId": m.instance_id, "ClientId": m.client_id,
                     "ClientHost": m.client_host, "Url": m.url, "MemberEpoch": m.member_epoch, "State": m.state,
                     "Assignment": connectors_and_tasks_json(m.assignment),
                     "PendingRevocation": connectors_and_tasks_json(m.pending_revocation),
                     "Target": connectors_and_tasks_json(m.target)} for m in d.members],
        "Deferred": connectors_and_tasks_json(d.deferred), "ScheduledRebalanceAtMs": d.scheduled_rebalance_at_ms,
        "AssignmentError": d.assignment_error, "AssignmentErrorMessage": d.assignment_error_message,
        "SessionTimeoutMs": d.session_timeout_ms, "HeartbeatIntervalMs": d.heartbeat_interval_ms,
        "RebalanceTimeoutMs": d.rebalance_timeout_ms,
        "ScheduledRebalanceMaxDelayMs": d.scheduled_rebalance_max_delay_ms,
    }
