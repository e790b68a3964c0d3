"""Encode and decode the records of the topic (DESIGN §4).

    key   = int16 record type (big-endian) + Avro body of the type's key schema
    value = int16 value version (big-endian) + Avro body of that version's schema; None = tombstone

Bodies are schemaless Avro (fastavro), without a schema registry: the record type and the value
version in the two-byte headers say which schema wrote them.

Theory of operation. For every schema in `records.schema` this module generates, once at import,
a *reader* (Avro datum -> typed object) and a *writer* (typed object -> Avro datum) as straight-line
Python from the schema's structure (the way `dataclasses` generates `__init__`). Decoding is then one
fastavro call and one flat function call per body, which keeps it within a small factor of bare
fastavro (bench/bench_records.py measures it). An older value version is read into the current
class, fields it lacks taking their defaults; writing an older version refuses a record that sets a
field that version cannot hold, instead of dropping it.

Errors: every failure to decode raises `RecordDecodeError` (naming the record type, the version
and why); unknown record types and unknown value versions are subclasses of it, so a reader that
skips corrupt records catches one class. Encoding invalid records raises `RecordEncodeError`.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from io import BytesIO
from operator import itemgetter
from typing import Any

from fastavro import schemaless_reader, schemaless_writer

from records.model import Record, TaskId
from records.schema import NESTED_CLASSES, RECORD_TYPES, RESERVED_TYPES, RecordType, load

_INT16 = struct.Struct(">h")
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}


class RecordDecodeError(ValueError):
    """Bytes that are not a record this code can read. Names the record type, version and why."""

    def __init__(self, reason: str, *, record_type: int | None = None, version: int | None = None,
                 part: str = "value") -> None:
        self.reason = reason
        self.record_type = record_type
        self.version = version
        self.part = part
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = "record"
        if self.record_type is not None:
            spec = RECORD_TYPES.get(self.record_type)
            name = f" ({spec.name})" if spec else ""
            where = f"record type {self.record_type}{name}"
        if self.part == "value" and self.version is not None:
            where += f" value version {self.version}"
        return f"cannot decode {self.part} of {where}: {self.reason}"


class UnknownRecordTypeError(RecordDecodeError):
    """The key's record type is not one this code knows (it is not guessed)."""


class UnsupportedVersionError(RecordDecodeError):
    """The value version is newer (or older) than any this code reads: upgrade the reader."""


class RecordEncodeError(ValueError):
    """A record that cannot be written: wrong types, out-of-range numbers, a key/value mismatch."""


# --- code generation -------------------------------------------------------------------------


def snake_case(avro_name: str) -> str:
    """Avro field name -> Python attribute: `GroupEpoch` -> `group_epoch`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", avro_name).lower()


def _short(name: str) -> str:
    return name.rpartition(".")[2]


class _Generator:
    """Writes the reader and writer expressions for one schema; resolves named-type references."""

    def __init__(self, top_class: type) -> None:
        self.top_class = top_class
        self.named: dict[str, dict[str, Any]] = {}
        self.env: dict[str, Any] = {"TaskId": TaskId, "_task_fields": _task_fields, "_map": map,
                                    "_tuple": tuple}
        self.depth = 0

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return self.named[schema]
        if isinstance(schema, dict) and schema.get("type") == "record":
            self.named.setdefault(schema["name"], schema)
        return schema

    def class_for(self, schema: dict[str, Any], top: bool) -> type:
        cls = self.top_class if top else NESTED_CLASSES[_short(schema["name"])]
        self.env[cls.__name__] = cls
        return cls

    def fresh(self) -> str:
        self.depth += 1
        return f"_v{self.depth}"

    def read(self, schema: Any, src: str, top: bool = False) -> str:
        schema = self.resolve(schema)
        if isinstance(schema, str):
            return src
        if isinstance(schema, list):
            (branch,) = [s for s in schema if s != "null"]
            inner = self.read(branch, src)
            return src if inner == src else f"(None if {src} is None else {inner})"
        if schema["type"] == "array":
            items = self.resolve(schema["items"])
            if isinstance(items, str):
                return f"_tuple({src})"
            if _short(items["name"]) == "TaskId":
                # Tasks are the bulk of every assignment: build them in C (itemgetter + tuple.__new__).
                return f"_tuple(_map(TaskId._make, _map(_task_fields, {src})))"
            var = self.fresh()
            return f"_tuple([{self.read(items, var)} for {var} in {src}])"
        if schema["type"] == "record":
            cls = self.class_for(schema, top)
            attrs = {f.name for f in fields(cls)} if cls is not TaskId else set(TaskId._fields)
            args = []
            for field in schema["fields"]:
                attr = snake_case(field["name"])
                if attr not in attrs:
                    raise TypeError(f"{cls.__name__} has no attribute {attr!r} for Avro field {field['name']!r}")
                value = self.read(field["type"], f"{src}[{field['name']!r}]")
                args.append(f"{attr}={value}")
            return f"{cls.__name__}({', '.join(args)})"
        return src  # enums, fixed, maps: unused by our schemas; fastavro's value is the value

    def write(self, schema: Any, src: str, top: bool = False) -> str:
        schema = self.resolve(schema)
        if isinstance(schema, str):
            return src
        if isinstance(schema, list):
            (branch,) = [s for s in schema if s != "null"]
            inner = self.write(branch, src)
            return src if inner == src else f"(None if {src} is None else {inner})"
        if schema["type"] == "array":
            items = self.resolve(schema["items"])
            if isinstance(items, str):
                return f"list({src})"
            var = self.fresh()
            return f"[{self.write(items, var)} for {var} in {src}]"
        if schema["type"] == "record":
            cls = self.class_for(schema, top)
            if cls is TaskId:  # index access: a plain (connector, task) tuple is accepted too
                return f"{{'Connector': {src}[0], 'Task': {src}[1]}}"
            parts = []
            for field in schema["fields"]:
                value = self.write(field["type"], f"{src}.{snake_case(field['name'])}")
                parts.append(f"{field['name']!r}: {value}")
            return "{" + ", ".join(parts) + "}"
        return src


# (connector, task) of an Avro TaskId datum, in C.
_task_fields = itemgetter("Connector", "Task")


def _compile(schema: dict[str, Any], cls: type, kind: str) -> Callable[[Any], Any]:
    gen = _Generator(cls)
    body = gen.read(schema, "d", top=True) if kind == "read" else gen.write(schema, "o", top=True)
    arg = "d" if kind == "read" else "o"
    source = f"def {kind}({arg}):\n    return {body}\n"
    namespace = dict(gen.env)
    exec(compile(source, f"<records {kind} {cls.__name__}>", "exec"), namespace)  # noqa: S102
    fn = namespace[kind]
    fn.__source__ = source
    return fn


@dataclass(frozen=True, slots=True)
class _Body:
    """How to read and write one Avro body: a key schema, or one version of a value schema."""

    schema: dict[str, Any]
    read: Callable[[dict[str, Any]], Any]
    write: Callable[[Any], dict[str, Any]]
    # Attributes of the class this version cannot hold, with the default they must have.
    absent: tuple[tuple[str, Any], ...]


def _body(schema_name: str, cls: type) -> _Body:
    schema = load(schema_name)
    present = {snake_case(f["name"]) for f in schema["fields"]}
    absent = tuple(
        (f.name, f.default if f.default is not MISSING else f.default_factory())  # type: ignore[misc]
        for f in fields(cls) if f.name not in present
    )
    return _Body(schema, _compile(schema, cls, "read"), _compile(schema, cls, "write"), absent)


@dataclass(frozen=True, slots=True)
class _TypeCodec:
    spec: RecordType
    key: _Body
    values: dict[int, _Body]
    latest: int


_CODECS: dict[int, _TypeCodec] = {
    t: _TypeCodec(
        spec,
        _body(spec.key_schema, spec.key_class),
        {v: _body(name, spec.value_class) for v, name in spec.value_schemas.items()},
        spec.latest_version,
    )
    for t, spec in RECORD_TYPES.items()
}


# --- decode ----------------------------------------------------------------------------------


def _read_body(data: bytes, body: _Body, record_type: int, version: int | None, part: str) -> Any:
    try:
        buf = BytesIO(data)
        buf.seek(2)
        obj = body.read(schemaless_reader(buf, body.schema, None))
        if buf.tell() != len(data):
            raise RecordDecodeError(f"{len(data) - buf.tell()} bytes left after the Avro body",
                                    record_type=record_type, version=version, part=part)
        return obj
    except RecordDecodeError:
        raise
    except Exception as e:  # any failure of the Avro reader on foreign bytes means corrupt bytes
        reason = f"{type(e).__name__}: {e}" if str(e) else f"{type(e).__name__} (truncated or corrupt Avro body)"
        raise RecordDecodeError(reason, record_type=record_type, version=version, part=part) from None


def _header(data: Any, part: str, record_type: int | None = None) -> tuple[bytes, int]:
    if data.__class__ is not bytes:
        if not isinstance(data, (bytearray, memoryview)):
            raise RecordDecodeError(f"expected bytes, got {type(data).__name__}", record_type=record_type, part=part)
        data = bytes(data)
    if len(data) < 2:
        what = "record type" if part == "key" else "value version"
        raise RecordDecodeError(f"{len(data)} bytes is shorter than the 2-byte {what}",
                                record_type=record_type, part=part)
    return data, _INT16.unpack_from(data)[0]


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode a record from the topic; a None value decodes to a tombstone of the key's type."""
    key, record_type = _header(key, "key")
    codec = _CODECS.get(record_type)
    if codec is None:
        reason = RESERVED_TYPES.get(record_type, "unknown record type")
        raise UnknownRecordTypeError(reason, record_type=record_type, part="key")
    record_key = _read_body(key, codec.key, record_type, None, "key")
    if value is None:
        return Record(record_key, None)
    value, version = _header(value, "value", record_type)
    body = codec.values.get(version)
    if body is None:
        known = ", ".join(map(str, sorted(codec.values)))
        raise UnsupportedVersionError(f"this reader knows versions {known}", record_type=record_type,
                                      version=version)
    return Record(record_key, _read_body(value, body, record_type, version, "value"), version)


# --- encode ----------------------------------------------------------------------------------


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "bytes": lambda v: isinstance(v, (bytes, bytearray)),
    "boolean": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "null": lambda v: v is None,
}


def _check(schema: Any, datum: Any, path: str, named: dict[str, Any], width: str | None = None) -> None:
    """Type and range checks fastavro does not make (it would happily write an int16 of 70000).

    `width` is a field's "range" attribute: the seed's int8/int16, stored as Avro int.
    """
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, str):
        if not _TYPE_CHECKS.get(schema, lambda v: True)(datum):
            raise RecordEncodeError(f"{path}: expected {schema}, got {type(datum).__name__} {datum!r:.60}")
        if schema in ("int", "long"):
            low, high = _INT_RANGES[width or schema]
            if not low <= datum <= high:
                raise RecordEncodeError(f"{path}: {datum} is out of range for {width or schema}")
    elif isinstance(schema, list):
        if datum is not None:
            (branch,) = [s for s in schema if s != "null"]
            _check(branch, datum, path, named, width)
    elif schema["type"] == "array":
        if not isinstance(datum, list):
            raise RecordEncodeError(f"{path}: expected a sequence, got {type(datum).__name__}")
        for i, item in enumerate(datum):
            _check(schema["items"], item, f"{path}[{i}]", named)
    elif schema["type"] == "record":
        named.setdefault(schema["name"], schema)
        for field in schema["fields"]:
            _check(field["type"], datum[field["name"]], f"{path}.{field['name']}", named, field.get("range"))
    else:
        _check(schema["type"], datum, path, named, width)


def _write_body(header: int, obj: Any, body: _Body, what: str) -> bytes:
    try:
        datum = body.write(obj)
    except (AttributeError, TypeError, IndexError) as e:
        raise RecordEncodeError(f"{what}: {type(obj).__name__} does not fit its schema: {e}") from None
    _check(body.schema, datum, what, {})
    buf = BytesIO()
    buf.write(_INT16.pack(header))
    schemaless_writer(buf, body.schema, datum)
    return buf.getvalue()


def encode(record: Record, version: int | None = None) -> tuple[bytes, bytes | None]:
    """Encode a record as (key bytes, value bytes or None for a tombstone).

    The value is written at `version`, else at the version it was decoded from, else the latest.
    """
    key_class = type(record.key)
    record_type = getattr(key_class, "RECORD_TYPE", None)
    codec = _CODECS.get(record_type)  # type: ignore[arg-type]
    if codec is None or codec.spec.key_class is not key_class:
        raise RecordEncodeError(f"{key_class.__name__} is not a record key")
    key = _write_body(record_type, record.key, codec.key, codec.spec.name + "Key")  # type: ignore[arg-type]
    if record.value is None:
        return key, None
    if type(record.value) is not codec.spec.value_class:
        raise RecordEncodeError(
            f"a {codec.spec.name} key needs a {codec.spec.value_class.__name__}, got {type(record.value).__name__}")
    version = version if version is not None else record.version if record.version is not None else codec.latest
    body = codec.values.get(version)
    if body is None:
        raise RecordEncodeError(f"{codec.spec.name} has no value version {version}")
    for attr, default in body.absent:
        if getattr(record.value, attr) != default:
            raise RecordEncodeError(
                f"{codec.spec.name} value version {version} cannot hold {attr}={getattr(record.value, attr)!r}")
    return key, _write_body(version, record.value, body, codec.spec.name + "Value")


def avro_datum(record: Record) -> tuple[dict[str, Any], dict[str, Any] | None, int | None]:
    """The record as Avro-shaped dicts (field names as in the schemas) and its value version."""
    codec = _CODECS[record.record_type]
    if record.value is None:
        return codec.key.write(record.key), None, None
    version = record.version if record.version is not None else codec.latest
    return codec.key.write(record.key), codec.values[version].write(record.value), version
