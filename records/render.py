"""Records rendered for humans and tools: JSON (orjson) with the schemas' field names.

The shape follows the HTTP API's wire conventions (DESIGN §7): PascalCase field names as in the
seed, tasks as {"Connector", "Task"} objects, bytes as base64 strings.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from records.codec import avro_datum
from records.model import Record
from records.schema import RECORD_TYPES


def to_dict(record: Record) -> dict[str, Any]:
    """The record as a JSON-ready dict: RecordType, Name, Version, Key, Value (None = tombstone)."""
    key, value, version = avro_datum(record)
    return {
        "RecordType": record.record_type,
        "Name": RECORD_TYPES[record.record_type].name,
        "Version": version,
        "Key": key,
        "Value": value,
    }


def _default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode("ascii")
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def value_json(record: Record) -> bytes | None:
    """The record's value alone as JSON bytes (to_json's "Value"); None for a tombstone."""
    value = avro_datum(record)[1]
    return None if value is None else orjson.dumps(value, default=_default)


def to_json(record: Record, *, indent: bool = False) -> bytes:
    """The record as JSON bytes (one line unless `indent`)."""
    option = orjson.OPT_INDENT_2 if indent else 0
    return orjson.dumps(to_dict(record), default=_default, option=option)
