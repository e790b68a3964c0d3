"""The bytes a classic Connect worker puts in its JoinGroup metadata and the leader in SyncGroup
assignments (seed 004's "MemberMetadata" and "MemberState", Kafka Connect's `WorkerState` and
`ExtendedAssignment`), as Avro like the topic's records: an int16 version, then the body.

They are the worker's business under the classic protocol; the coordinator reads the metadata in
one place, when a classic group migrates to the connect type: a member's `Owned` is what it runs.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from records.model import ConnectorsAndTasks, TaskId
from records.schema import load

VERSION = 0
_HEADER = struct.Struct(">h")
# The schema files (records/schemas) of these bodies, at every version this code reads.
SCHEMAS = (f"ConnectProtocolMetadata.v{VERSION}", f"ConnectProtocolAssignment.v{VERSION}")


class ConnectProtocolError(ValueError):
    """Bytes that are not a metadata or an assignment this code can read."""


@dataclass(slots=True, frozen=True)
class WorkerMetadata:
    url: str | None = None
    config_offset: int = -1
    owned: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)


@dataclass(slots=True, frozen=True)
class WorkerAssignment:
    leader: str
    leader_url: str | None = None
    assigned: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)
    revoked: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)
    delay_ms: int = 0
    error: int = 0
    config_offset: int = -1


@cache
def _schema(name: str) -> Any:
    return parse_schema(load(f"{name}.v{VERSION}"))


def _items(value: ConnectorsAndTasks) -> dict[str, Any]:
    return {"Connectors": list(value.connectors),
            "Tasks": [{"Connector": t.connector, "Task": t.task} for t in value.tasks]}


def _read_items(datum: dict[str, Any]) -> ConnectorsAndTasks:
    return ConnectorsAndTasks(tuple(datum["Connectors"]),
                              tuple(TaskId(t["Connector"], t["Task"]) for t in datum["Tasks"]))


def _encode(name: str, datum: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    out.write(_HEADER.pack(VERSION))
    schemaless_writer(out, _schema(name), datum)
    return out.getvalue()


def _decode(name: str, data: bytes) -> dict[str, Any]:
    if len(data) < _HEADER.size:
        raise ConnectProtocolError(f"{name}: {len(data)} bytes, too short for a version")
    (version,) = _HEADER.unpack_from(data)
    if version != VERSION:
        raise ConnectProtocolError(f"{name}: version {version} is not one this code reads ({VERSION})")
    stream = io.BytesIO(data)
    stream.seek(_HEADER.size)
    try:
        datum = schemaless_reader(stream, _schema(name), None)
    except Exception as e:  # noqa: BLE001 - fastavro raises many kinds for bad bytes
        raise ConnectProtocolError(f"{name}: {type(e).__name__}: {e}") from None
    if stream.tell() != len(data):
        raise ConnectProtocolError(f"{name}: {len(data) - stream.tell()} bytes after the body")
    return datum


def encode_metadata(m: WorkerMetadata) -> bytes:
    return _encode("ConnectProtocolMetadata", {"Url": m.url, "ConfigOffset": m.config_offset, "Owned": _items(m.owned)})


def decode_metadata(data: bytes) -> WorkerMetadata:
    d = _decode("ConnectProtocolMetadata", data)
    return WorkerMetadata(d["Url"], d["ConfigOffset"], _read_items(d["Owned"]))


def encode_assignment(a: WorkerAssignment) -> bytes:
    return _encode("ConnectProtocolAssignment", {
        "Error": a.error, "Leader": a.leader, "LeaderUrl": a.leader_url, "ConfigOffset": a.config_offset,
        "Assigned": _items(a.assigned), "Revoked": _items(a.revoked), "DelayMs": a.delay_ms})


def decode_assignment(data: bytes) -> WorkerAssignment:
    d = _decode("ConnectProtocolAssignment", data)
    return WorkerAssignment(d["Leader"], d["LeaderUrl"], _read_items(d["Assigned"]), _read_items(d["Revoked"]),
                            d["DelayMs"], d["Error"], d["ConfigOffset"])
