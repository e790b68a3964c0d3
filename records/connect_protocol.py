"""Kafka Connect's own bytes for the classic protocol: the member metadata a worker puts in its
JoinGroup and the assignment its leader sends in SyncGroup (seed 004's "MemberMetadata" and
"MemberState"), exactly as connect-runtime's `ConnectProtocol` and
`IncrementalCooperativeConnectProtocol` write and read them.

Three protocols, offered by a Connect worker in this order of preference (`connect.protocol`):

| protocol     | header | metadata                                  | assignment                                   |
| ------------ | ------ | ----------------------------------------- | -------------------------------------------- |
| `sessioned`  | 2      | url, config offset, allocation            | error, leader, leader url, config offset,    |
| `compatible` | 1      | (the worker's last assignment, v1 or v2)  | assigned, revoked, delay                     |
| `default`    | 0      | url, config offset                        | error, leader, leader url, config offset,    |
|              |        |                                           | assigned                                     |

Everything is Kafka's `Struct` encoding: big-endian integers, a string is an int16 length and
UTF-8, bytes an int32 length (-1: null), an array an int32 count (-1: null). An assignment is a list
of (connector, [task numbers]) in which task -1 (`CONNECTOR_TASK`) stands for the connector itself.
v2 is v1's layout; its number only says that the group signs its internal REST requests (KIP-507).

What `Assigned` means differs: for `default` it is everything the worker runs (eager: it stopped all
before joining); for `compatible` and `sessioned` it is what is *added* to what the worker already
runs, after it stops `Revoked` (`WorkerCoordinator.onJoinComplete`). `holdings` says that rule once.

Java writes a worker's connectors in `HashSet` iteration order; `_java_hash_set_order` reproduces
it so that the bytes are Java's byte for byte (the golden test compares them).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from records.model import ConnectorsAndTasks, TaskId

DEFAULT = "default"  # ConnectProtocolCompatibility.EAGER
COMPATIBLE = "compatible"  # ConnectProtocolCompatibility.COMPATIBLE
SESSIONED = "sessioned"  # ConnectProtocolCompatibility.SESSIONED
# Each protocol's header version, and a Connect worker's order of preference (connect.protocol=sessioned).
VERSIONS = {DEFAULT: 0, COMPATIBLE: 1, SESSIONED: 2}
PROTOCOLS = (SESSIONED, COMPATIBLE, DEFAULT)
# The protocols a worker configured with connect.protocol=X offers, by preference.
OFFERED = {SESSIONED: PROTOCOLS, COMPATIBLE: (COMPATIBLE, DEFAULT), DEFAULT: (DEFAULT,)}
CONNECTOR_TASK = -1
# ConnectProtocol.Assignment's error codes.
NO_ERROR = 0
CONFIG_MISMATCH = 1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_EMPTY = ConnectorsAndTasks()


class ConnectProtocolError(ValueError):
    """Bytes that are not a metadata or an assignment of Connect's protocol, or a protocol name
    that is not one of Connect's."""


@dataclass(slots=True, frozen=True)
class WorkerAssignment:
    """Connect's `ExtendedAssignment` (`ConnectProtocol.Assignment` for `default`)."""

    leader: str = ""
    leader_url: str = ""
    config_offset: int = -1
    assigned: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)
    revoked: ConnectorsAndTasks = field(default_factory=ConnectorsAndTasks)  # not in `default`
    delay_ms: int = 0  # not in `default`
    error: int = NO_ERROR
    version: int = VERSIONS[SESSIONED]  # the header it was read with


@dataclass(slots=True, frozen=True)
class WorkerMetadata:
    """Connect's `ExtendedWorkerState` (`WorkerState` for `default`): where the worker's REST API
    listens, the config topic offset it has read to, and, in `compatible` and `sessioned`, the
    assignment it last had with what it runs in it (`Assigned` there is the whole set: the worker
    keeps its assignment snapshot whole)."""

    url: str = ""
    config_offset: int = -1
    allocation: WorkerAssignment | None = None  # None in `default`, and before a first assignment
    version: int = VERSIONS[SESSIONED]

    @property
    def owned(self) -> ConnectorsAndTasks:
        """What the worker said it runs (nothing in `default`: an eager worker stops all first)."""
        return self.allocation.assigned if self.allocation is not None else _EMPTY


def version_of(protocol: str | None) -> int:
    """The header version of a Connect protocol name."""
    try:
        return VERSIONS[protocol]  # type: ignore[index]
    except KeyError:
        raise ConnectProtocolError(f"{protocol!r} is not a Kafka Connect protocol ({', '.join(PROTOCOLS)})") from None


def holdings(reported: ConnectorsAndTasks, assignment: WorkerAssignment) -> ConnectorsAndTasks:
    """What a worker runs once it has applied `assignment`, given what it reported it ran when it
    joined: `default` replaces everything, `compatible` and `sessioned` stop `Revoked` and add
    `Assigned` (WorkerCoordinator.onJoinComplete)."""
    if assignment.version == VERSIONS[DEFAULT]:
        return assignment.assigned
    revoked_connectors = set(assignment.revoked.connectors)
    revoked_tasks = set(assignment.revoked.tasks)
    connectors = [c for c in reported.connectors if c not in revoked_connectors]
    tasks = [t for t in reported.tasks if t not in revoked_tasks]
    connectors += [c for c in assignment.assigned.connectors if c not in connectors]
    tasks += [t for t in assignment.assigned.tasks if t not in tasks]
    return ConnectorsAndTasks(tuple(connectors), tuple(tasks))


# --- writing ------------------------------------------------------------------------------------------


def encode_metadata(m: WorkerMetadata, protocol: str) -> bytes:
    """The JoinGroup metadata a Connect worker sends for `protocol`."""
    version = version_of(protocol)
    out = bytearray(_INT16.pack(version))
    out += _string(m.url, "url")
    out += _INT64.pack(m.config_offset)
    if version > 0:
        out += _nullable_bytes(None if m.allocation is None else _assignment_v1(m.allocation, version))
    return bytes(out)


def encode_assignment(a: WorkerAssignment, protocol: str) -> bytes:
    """The SyncGroup assignment a Connect leader sends for `protocol`."""
    version = version_of(protocol)
    if version == 0:
        out = bytearray(_INT16.pack(0))
        out += _assignment_head(a)
        out += _task_assignments(a.assigned, java_connector_order=True)
        return bytes(out)
    return _assignment_v1(a, version)


def _assignment_v1(a: WorkerAssignment, version: int) -> bytes:
    out = bytearray(_INT16.pack(version))
    out += _assignment_head(a)
    out += _task_assignments(a.assigned, java_connector_order=True)
    out += _task_assignments(a.revoked, java_connector_order=False)  # revokedAsMap keeps list order
    out += _INT32.pack(a.delay_ms)
    return bytes(out)


def _assignment_head(a: WorkerAssignment) -> bytes:
    return (
        _INT16.pack(a.error)
        + _string(a.leader, "leader")
        + _string(a.leader_url, "leader url")
        + _INT64.pack(a.config_offset)
    )


def _string(value: str, what: str) -> bytes:
    data = value.encode(errors="replace")  # as Java's String.getBytes(UTF_8): a lone surrogate is "?"
    if len(data) > 0x7FFF:
        raise ConnectProtocolError(f"{what} is {len(data)} bytes, more than a Kafka string holds")
    return _INT16.pack(len(data)) + data


def _nullable_bytes(data: bytes | None) -> bytes:
    return _INT32.pack(-1) if data is None else _INT32.pack(len(data)) + data


def _task_assignments(items: ConnectorsAndTasks, *, java_connector_order: bool) -> bytes:
    """(connector, [tasks]) entries: connectors first, each with task -1, then the tasks grouped by
    connector in order of first appearance (ConnectProtocol.Assignment.asMap)."""
    connectors = _distinct(items.connectors)
    by_connector: dict[str, list[int]] = {}
    # Java sizes the HashSet for the list it copies, duplicates included.
    for c in _java_hash_set_order(connectors, len(items.connectors)) if java_connector_order else connectors:
        by_connector.setdefault(c, []).append(CONNECTOR_TASK)
    for t in items.tasks:
        by_connector.setdefault(t.connector, []).append(t.task)
    out = bytearray(_INT32.pack(len(by_connector)))
    for connector, tasks in by_connector.items():
        out += _string(connector, "connector name")
        out += _INT32.pack(len(tasks))
        for task in tasks:
            out += _INT32.pack(task)
    return bytes(out)


def _distinct(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be", errors="surrogatepass")  # Java's chars, a lone surrogate too
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _java_hash_set_order(values: list[str], copied: int) -> list[str]:
    """The iteration order of `new HashSet<>(c)` in Java, `values` being the distinct elements of a
    collection of `copied` elements: by bucket (the string's hash, spread as HashMap.hash does,
    masked by the table size the copy constructor picks for `copied` elements), then insertion.
    The table size is Java 17's (size / .75 + 1); Java 19 and later size for ceil(size / .75), which
    halves the table at 12, 24, 48... elements: the same set in another order. (A bucket of more
    than 8 colliding names, which would resize or treeify the table, is not reproduced.)"""
    capacity = 1
    while capacity < max(int(copied / 0.75) + 1, 16):
        capacity <<= 1

    def bucket(s: str) -> int:
        h = _java_string_hash(s)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(values, key=bucket)  # stable: a bucket's chain keeps insertion order


def metadata_for(data: bytes, protocol: str) -> bytes:
    """The same worker's metadata in another of Connect's protocols (what a worker that offered the
    first also sends for the second: every Connect worker on `sessioned` offers `compatible` and
    `default` too, with the same URL, offset and allocation)."""
    m = decode_metadata(data)
    allocation = m.allocation if m.allocation is not None and version_of(protocol) > 0 else None
    return encode_metadata(WorkerMetadata(m.url, m.config_offset, allocation), protocol)


# --- reading ------------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int, field_name: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ConnectProtocolError(f"{self.what}: {len(self.data)} bytes end inside {field_name}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self, name: str) -> int:
        return _INT16.unpack(self._take(2, name))[0]

    def int32(self, name: str) -> int:
        return _INT32.unpack(self._take(4, name))[0]

    def int64(self, name: str) -> int:
        return _INT64.unpack(self._take(8, name))[0]

    def string(self, name: str) -> str:
        n = self.int16(name)
        if n < 0:
            raise ConnectProtocolError(f"{self.what}: {name} is null, which Connect never writes")
        try:
            return bytes(self._take(n, name)).decode()
        except UnicodeDecodeError:
            raise ConnectProtocolError(f"{self.what}: {name} is not UTF-8") from None

    def nullable_bytes(self, name: str) -> bytes | None:
        n = self.int32(name)
        return None if n < 0 else bytes(self._take(n, name))  # Kafka's NULLABLE_BYTES: any negative size

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def _version(r: _Reader) -> int:
    version = r.int16("version")
    if version < 0:  # Connect's checkVersionCompatibility: any other version reads as the newest it knows
        raise ConnectProtocolError(f"{r.what}: version {version} is not one Connect writes")
    return version


def decode_metadata(data: bytes) -> WorkerMetadata:
    """A worker's JoinGroup metadata, of any of the three protocols (the header says which)."""
    r = _Reader(data, "Connect worker metadata")
    version = _version(r)
    url = r.string("url")
    offset = r.int64("config offset")
    allocation = None
    # Connect's v1 schema tolerates missing fields: v0 bytes read with it have no allocation.
    if version > 0 and not r.at_end():
        raw = r.nullable_bytes("allocation")
        if raw is not None:
            allocation = decode_assignment(raw)
    return WorkerMetadata(url, offset, allocation, version)


def decode_assignment(data: bytes) -> WorkerAssignment:
    """A leader's SyncGroup assignment, of any of the three protocols (the header says which),
    read as WorkerCoordinator.onJoinComplete reads every one, with IncrementalCooperativeConnectProtocol's
    layout, whose trailing fields may be missing: v0 bytes are a prefix of it."""
    r = _Reader(data, "Connect assignment")
    version = _version(r)
    error = r.int16("error")
    leader = r.string("leader")
    leader_url = r.string("leader url")
    offset = r.int64("config offset")
    assigned = revoked = _EMPTY
    delay = 0
    if not r.at_end():
        assigned = _read_task_assignments(r, "assignment")
    if not r.at_end():
        revoked = _read_task_assignments(r, "revoked")
    if not r.at_end():
        delay = r.int32("delay")
    return WorkerAssignment(leader, leader_url, offset, assigned, revoked, delay, error, version)


def _read_task_assignments(r: _Reader, name: str) -> ConnectorsAndTasks:
    count = r.int32(name)
    if count < 0:  # Kafka's nullable ArrayOf: any negative size is null
        return _EMPTY
    connectors: list[str] = []
    tasks: list[TaskId] = []
    for _ in range(count):
        connector = r.string(f"{name} connector")
        n = r.int32(f"{name} tasks of {connector}")
        if n < 0:
            raise ConnectProtocolError(f"{r.what}: {name} tasks of {connector} has {n} entries")
        for _ in range(n):
            task = r.int32(f"{name} task of {connector}")
            if task == CONNECTOR_TASK:
                connectors.append(connector)
            elif task < 0:
                raise ConnectProtocolError(f"{r.what}: {name} has task {task} of {connector}")
            else:
                tasks.append(TaskId(connector, task))
    return ConnectorsAndTasks(tuple(connectors), tuple(tasks))


__all__ = [
    "COMPATIBLE",
    "CONFIG_MISMATCH",
    "CONNECTOR_TASK",
    "DEFAULT",
    "NO_ERROR",
    "OFFERED",
    "PROTOCOLS",
    "SESSIONED",
    "VERSIONS",
    "ConnectProtocolError",
    "WorkerAssignment",
    "WorkerMetadata",
    "decode_assignment",
    "decode_metadata",
    "encode_assignment",
    "encode_metadata",
    "holdings",
    "metadata_for",
    "version_of",
]
