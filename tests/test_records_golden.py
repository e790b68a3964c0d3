"""Golden files: fixed bytes for every record type and value version must decode to the expected
record and re-encode to the very same bytes, so the format can never change silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden_cases import CASES

from records import RECORD_TYPES, decode, encode

GOLDEN = json.loads((Path(__file__).parent / "golden" / "records.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_bytes_decode_and_reencode(name: str) -> None:
    assert name in GOLDEN, f"no golden bytes for {name}: run `python tests/golden/make_golden.py`"
    record, version = CASES[name]
    key = bytes.fromhex(GOLDEN[name]["key"])
    value = None if GOLDEN[name]["value"] is None else bytes.fromhex(GOLDEN[name]["value"])

    decoded = decode(key, value)
    assert decoded == record
    assert decoded.version == version
    assert encode(decoded) == (key, value)  # a decoded record re-encodes at the version it came in
    assert encode(record, version) == (key, value)


def test_every_record_type_and_version_has_golden_bytes() -> None:
    covered = {(r.record_type, v) for r, v in CASES.values()}
    expected = {(t, v) for t, spec in RECORD_TYPES.items() for v in spec.value_schemas}
    expected |= {(t, None) for t in RECORD_TYPES}  # a tombstone of every key type
    assert expected <= covered, f"missing golden cases for {sorted(expected - covered, key=str)}"


def test_no_golden_bytes_without_a_case() -> None:
    assert set(GOLDEN) <= set(CASES), "golden bytes whose case was removed: a released format must stay tested"
