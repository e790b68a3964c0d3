"""Encode and decode the records of the topic (DESIGN §4).

    key   = int16 record type (big-endian) + Avro body of the type's key schema
    value = int16 value version (big-endian) + Avro body of that version's schema; None = tombstone

Bodies are schemaless Avro without a schema registry: the record type and the value version in
the two-byte headers say which schema wrote them.

Theory of operation. Every schema of `records.schema` gets, once at import, two functions generated
by `records.avro`: a *reader* (Avro binary -> typed object, in one pass, no intermediate dict) and a
*writer* (typed object -> Avro datum, which fastavro's `schemaless_writer` encodes and
`records.render` shows as JSON). An older value version is read into the current class, fields it
lacks taking their defaults; writing an older version refuses a record that sets a field that
version cannot hold, instead of silently dropping it.

Errors: every failure to decode raises `RecordDecodeError` (naming the record type, the version
and why); unknown record types and unknown value versions are subclasses of it, so a reader that
skips corrupt records catches one class. Encoding invalid records raises `RecordEncodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from fastavro import schemaless_writer

from records.avro import attributes, compile_reader, compile_writer, snake_case
from records.model import Record
from records.schema import (
    FORMAT_LEVELS,
    NESTED_CLASSES,
    RECORD_TYPES,
    RESERVED_TYPES,
    RecordType,
    format_version,
    load,
)

_INT16 = struct.Struct(">h")
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}


class RecordDecodeError(ValueError):
    """Bytes that are not a record this code can read. Names the record type, version and why."""

    def __init__(
        self, reason: str, *, record_type: int | None = None, version: int | None = None, part: str = "value"
    ) -> None:
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


# --- one codec per record type ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Body:
    """How to read and write one Avro body: a key schema, or one version of a value schema."""

    schema: dict[str, Any]
    read: Callable[[bytes, int], tuple[Any, int]]
    write: Callable[[Any], dict[str, Any]]
    # Attributes of the class this version cannot hold, with the default they must have.
    absent: tuple[tuple[str, Any], ...]


def _body(schema_name: str, cls: type) -> _Body:
    schema = load(schema_name)
    present = {snake_case(f["name"]) for f in schema["fields"]}
    absent = tuple((attr, default) for attr, default in attributes(cls) if attr not in present)
    return _Body(
        schema, compile_reader(schema, cls, NESTED_CLASSES), compile_writer(schema, cls, NESTED_CLASSES), absent
    )


@dataclass(frozen=True, slots=True)
class _TypeCodec:
    spec: RecordType
    key: _Body
    values: dict[int, _Body]


_CODECS: dict[int, _TypeCodec] = {
    t: _TypeCodec(
        spec,
        _body(spec.key_schema, spec.key_class),
        {v: _body(name, spec.value_class) for v, name in spec.value_schemas.items()},
    )
    for t, spec in RECORD_TYPES.items()
}


# --- decode ----------------------------------------------------------------------------------


def _read_body(data: bytes, body: _Body, record_type: int, version: int | None, part: str) -> Any:
    try:
        obj, end = body.read(data, 2)
    except IndexError:
        raise RecordDecodeError(
            "truncated: the Avro body ends early", record_type=record_type, version=version, part=part
        ) from None
    except Exception as e:  # AvroError, UnicodeDecodeError: whatever foreign bytes provoke
        raise RecordDecodeError(
            f"{type(e).__name__}: {e}", record_type=record_type, version=version, part=part
        ) from None
    if end != len(data):
        raise RecordDecodeError(
            f"{len(data) - end} bytes left after the Avro body", record_type=record_type, version=version, part=part
        )
    return obj


def _header(data: Any, part: str, record_type: int | None = None) -> tuple[bytes, int]:
    if data.__class__ is not bytes:
        if not isinstance(data, (bytearray, memoryview)):
            raise RecordDecodeError(f"expected bytes, got {type(data).__name__}", record_type=record_type, part=part)
        data = bytes(data)
    if len(data) < 2:
        what = "record type" if part == "key" else "value version"
        raise RecordDecodeError(
            f"{len(data)} bytes is shorter than the 2-byte {what}", record_type=record_type, part=part
        )
    return data, _INT16.unpack_from(data)[0]


# Decoded keys by their bytes (header included). A compacted topic is a small set of keys written
# over and over (a member's current assignment, a group's epoch), so most keys decode to a dict
# hit. Bounded: cleared when full, which costs one re-decode per live key.
_KEY_CACHE: dict[bytes, tuple[_TypeCodec, Any]] = {}
_KEY_CACHE_SIZE = 65_536


def _decode_key(key: Any) -> tuple[_TypeCodec, Any]:
    key, record_type = _header(key, "key")
    codec = _CODECS.get(record_type)
    if codec is None:
        reason = RESERVED_TYPES.get(record_type, "unknown record type")
        raise UnknownRecordTypeError(reason, record_type=record_type, part="key")
    entry = codec, _read_body(key, codec.key, record_type, None, "key")
    if len(_KEY_CACHE) >= _KEY_CACHE_SIZE:
        _KEY_CACHE.clear()
    _KEY_CACHE[key] = entry
    return entry


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode a record from the topic; a None value decodes to a tombstone of the key's type."""
    entry = _KEY_CACHE.get(key) if key.__class__ is bytes else None  # bytearray is unhashable
    codec, record_key = entry or _decode_key(key)
    if value is None:
        return Record(record_key, None)
    # The common case inline (a coordinator replays whole partitions through here); anything
    # unusual (short, foreign, unknown version, trailing bytes) goes the careful way below.
    if value.__class__ is bytes and len(value) >= 2:
        version = (value[0] << 8) | value[1]
        body = codec.values.get(version)
        if body is not None:
            try:
                obj, end = body.read(value, 2)
            except Exception:  # noqa: BLE001 - reported with its context by the careful path
                pass
            else:
                if end == len(value):
                    return Record(record_key, obj, version)
    value, version = _header(value, "value", codec.spec.type)
    body = codec.values.get(version)
    if body is None:
        known = ", ".join(map(str, sorted(codec.values)))
        raise UnsupportedVersionError(
            f"this reader knows versions {known}", record_type=codec.spec.type, version=version
        )
    return Record(record_key, _read_body(value, body, codec.spec.type, version, "value"), version)


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


def _value_version(record: Record, codec: _TypeCodec, requested: int | None = None, level: int | None = None) -> int:
    """The version to write: the one asked for, else the one the format level allows, else the one
    the record was decoded from, else the latest."""
    if requested is not None:
        return requested
    if level is not None:
        if level not in FORMAT_LEVELS:
            raise RecordEncodeError(f"unknown record format level {level}")
        return format_version(level, codec.spec.type)
    if record.version is not None:
        return record.version
    return codec.spec.latest_version


def encode(record: Record, version: int | None = None, *, level: int | None = None) -> tuple[bytes, bytes | None]:
    """Encode a record as (key bytes, value bytes or None for a tombstone).

    The value is written at `version`, else at the version the record format `level` allows for its
    type (what the coordinator writes), else at the version it was decoded from, else the latest.
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
            f"a {codec.spec.name} key needs a {codec.spec.value_class.__name__}, got {type(record.value).__name__}"
        )
    version = _value_version(record, codec, version, level)
    body = codec.values.get(version)
    if body is None:
        raise RecordEncodeError(f"{codec.spec.name} has no value version {version}")
    for attr, default in body.absent:
        if getattr(record.value, attr) != default:
            raise RecordEncodeError(
                f"{codec.spec.name} value version {version} cannot hold {attr}={getattr(record.value, attr)!r}"
            )
    return key, _write_body(version, record.value, body, codec.spec.name + "Value")


def avro_datum(record: Record) -> tuple[dict[str, Any], dict[str, Any] | None, int | None]:
    """The record as Avro-shaped dicts (field names as in the schemas) and its value version."""
    codec = _CODECS[record.record_type]
    if record.value is None:
        return codec.key.write(record.key), None, None
    version = _value_version(record, codec)
    return codec.key.write(record.key), codec.values[version].write(record.value), version
