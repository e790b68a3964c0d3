"""The record codec: round trips, agreement with fastavro, schema evolution, corrupt input, JSON."""

from __future__ import annotations

import base64
import io
import struct
import subprocess
import sys

import orjson
import pytest
from fastavro import schemaless_reader, schemaless_writer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import VALUES, any_record, records

from records import (
    RECORD_TYPES,
    Assignor,
    ConnectorsAndTasks,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    MemberMetadataKey,
    MemberMetadataValue,
    Record,
    RecordDecodeError,
    RecordEncodeError,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TaskId,
    UnknownRecordTypeError,
    UnsupportedVersionError,
    decode,
    encode,
    to_dict,
    to_json,
)
from records.avro import attributes, snake_case
from records.codec import avro_datum
from records.schema import SCHEMA_DIR, load

# --- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("record_type", sorted(RECORD_TYPES))
@given(data=st.data())
def test_round_trip_every_type(record_type: int, data: st.DataObject) -> None:
    record = data.draw(records(record_type))
    key, value = encode(record)
    assert key[:2] == struct.pack(">h", record_type)
    decoded = decode(key, value)
    assert decoded == record
    assert decoded.record_type == record_type
    assert decoded.is_tombstone == (record.value is None)
    if value is not None:
        assert decoded.version == RECORD_TYPES[record_type].latest_version
        assert struct.unpack(">h", value[:2])[0] == decoded.version


@given(any_record)
def test_our_reader_agrees_with_fastavro(record: Record) -> None:
    """The generated reader and fastavro read the same datum out of the same bytes."""
    key, value = encode(record)
    spec = RECORD_TYPES[record.record_type]
    key_datum, value_datum, version = avro_datum(decode(key, value))
    assert schemaless_reader(io.BytesIO(key[2:]), load(spec.key_schema), None) == key_datum
    if value is not None:
        schema = load(spec.value_schemas[version])
        assert schemaless_reader(io.BytesIO(value[2:]), schema, None) == value_datum


@given(any_record)
def test_decoded_records_are_values(record: Record) -> None:
    """Equal records are equal however often they are decoded; keys are hashable and shared safely."""
    key, value = encode(record)
    first, second = decode(key, value), decode(key, value)
    assert first == second
    assert hash(first.key) == hash(record.key)
    with pytest.raises(AttributeError):
        first.key.group_id = "other"  # type: ignore[misc]


def test_array_blocks_with_byte_sizes_are_read() -> None:
    """Avro lets a writer split arrays into blocks with a negative count and a byte size; fastavro
    never writes them, other writers may."""
    value = CurrentMemberAssignmentValue(1, 0, "STABLE", ConnectorsAndTasks(("A", "B"), (TaskId("A", 0),)))
    key, plain = encode(Record(CurrentMemberAssignmentKey("g", "m"), value))
    # Connectors ["A", "B"]: count 2 (zigzag 4) -> count -2 (zigzag 3) then the block size 4 (zigzag 8).
    blocked = plain.replace(b"\x04\x02A\x02B\x00", b"\x03\x08\x02A\x02B\x00", 1)
    assert blocked != plain
    assert decode(key, blocked).value == value


def test_multi_byte_varints() -> None:
    value = CurrentMemberAssignmentValue(
        2**31 - 1,
        -(2**31),
        "x" * 300,
        ConnectorsAndTasks(tuple(f"c{i}" for i in range(100)), tuple(TaskId("c", i) for i in range(-70, 70))),
    )
    record = Record(CurrentMemberAssignmentKey("g" * 200, "m"), value)
    assert decode(*encode(record)) == record


# --- schema evolution ------------------------------------------------------------------------


def _member(rack_id: str | None) -> Record:
    return Record(
        MemberMetadataKey("g", "W1"),
        MemberMetadataValue(
            3, None, "client", "host", None, 60_000, None, (Assignor("eager", 0, 1, 0, 1, b""),), rack_id
        ),
    )


def test_old_value_version_is_read_by_the_new_reader() -> None:
    key, v0 = encode(_member(None), version=0)
    _, v1 = encode(_member(None), version=1)
    assert v0[:2] == b"\x00\x00" and v1[:2] == b"\x00\x01"
    assert encode(_member(None))[1][:2] == b"\x00\x02"  # the latest, by default
    assert v0 != v1  # v1 carries the RackId union
    decoded = decode(key, v0)
    assert decoded.version == 0
    assert decoded.value.rack_id is None  # the field v0 lacks takes its default
    assert decoded == decode(key, v1)


def test_v0_bytes_written_without_this_codec_are_read() -> None:
    """Bytes written by fastavro straight from the v0 schema file, as an old coordinator would."""
    datum = {
        "GroupEpoch": 9,
        "InstanceId": "i",
        "ClientId": "c",
        "ClientHost": "h",
        "Url": "http://u",
        "RebalanceTimeoutMs": 5,
        "ServerAssignor": None,
        "ClientAssignors": [],
    }
    buf = io.BytesIO()
    buf.write(b"\x00\x00")
    schemaless_writer(buf, load("MemberMetadataValue.v0"), datum)
    key, _ = encode(_member(None))
    value = decode(key, buf.getvalue()).value
    assert (value.group_epoch, value.instance_id, value.url, value.rack_id) == (9, "i", "http://u", None)


def test_writing_an_old_version_refuses_to_drop_a_newer_field() -> None:
    with pytest.raises(RecordEncodeError, match="version 0 cannot hold rack_id"):
        encode(_member("rack-a"), version=0)


def test_a_newer_value_version_is_reported_not_guessed() -> None:
    key, value = encode(_member("r"))
    with pytest.raises(UnsupportedVersionError) as e:
        decode(key, b"\x00\x03" + value[2:])
    assert (e.value.record_type, e.value.version) == (5, 3)
    assert "MemberMetadata" in str(e.value) and "knows versions 0, 1, 2" in str(e.value)


def test_every_schema_file_is_in_use() -> None:
    used = {spec.key_schema for spec in RECORD_TYPES.values()}
    used |= {name for spec in RECORD_TYPES.values() for name in spec.value_schemas.values()}
    shared = {"worker_offsets.TaskId", "worker_offsets.ConnectorsAndTasks"}
    assert {p.stem for p in SCHEMA_DIR.glob("*.avsc")} == used | shared


@pytest.mark.parametrize("record_type", sorted(RECORD_TYPES))
def test_latest_schema_holds_every_field_of_its_class(record_type: int) -> None:
    """A class field that the latest schema lacks would be dropped on every write."""
    spec = RECORD_TYPES[record_type]
    avro = [f["name"] for f in load(spec.value_schemas[spec.latest_version])["fields"]]
    assert [name for name, _ in attributes(spec.value_class)] == [snake_case(n) for n in avro]


# --- corrupt input ---------------------------------------------------------------------------

GOOD = encode(
    Record(
        CurrentMemberAssignmentKey("group", "member"),
        CurrentMemberAssignmentValue(
            7,
            6,
            "UNREVOKED",
            ConnectorsAndTasks(("A",), (TaskId("A", 0), TaskId("A", 1))),
            ConnectorsAndTasks((), (TaskId("A", 1),)),
            0,
            1,
            b"meta",
        ),
    )
)


@pytest.mark.parametrize("cut", range(len(GOOD[1])))
def test_truncated_value_is_a_typed_error(cut: int) -> None:
    with pytest.raises(RecordDecodeError) as e:
        decode(GOOD[0], GOOD[1][:cut])
    assert e.value.record_type == 8
    assert e.value.part == "value"


@pytest.mark.parametrize("cut", range(len(GOOD[0])))
def test_truncated_key_is_a_typed_error(cut: int) -> None:
    with pytest.raises(RecordDecodeError) as e:
        decode(GOOD[0][:cut], GOOD[1])
    assert e.value.part == "key"


@pytest.mark.parametrize(
    ("key", "value", "error", "message"),
    [
        (b"\x00\x05", None, RecordDecodeError, "truncated"),
        (GOOD[0] + b"\x00", GOOD[1], RecordDecodeError, "1 bytes left after the Avro body"),
        (GOOD[0], GOOD[1] + b"junk", RecordDecodeError, "4 bytes left"),
        (b"\x00\x01" + GOOD[0][2:], GOOD[1], UnknownRecordTypeError, "reserved for classic offset commits"),
        (b"\x00\x00" + GOOD[0][2:], GOOD[1], UnknownRecordTypeError, "reserved"),
        (b"\x7f\xff" + GOOD[0][2:], GOOD[1], UnknownRecordTypeError, "record type 32767: unknown record type"),
        (b"\xff\xff" + GOOD[0][2:], None, UnknownRecordTypeError, "record type -1"),
        (GOOD[0], b"\xff\xff" + GOOD[1][2:], UnsupportedVersionError, "value version -1"),
        (GOOD[0], b"\x00", RecordDecodeError, "shorter than the 2-byte value version"),
        (b"", None, RecordDecodeError, "shorter than the 2-byte record type"),
        (GOOD[0], b"\x00\x00\x0e" + b"\xff" * 11, RecordDecodeError, "varint longer than 10 bytes"),
        (GOOD[0], b"\x00\x00\x0e\x0e\x04\xff\xfe\x00", RecordDecodeError, "UnicodeDecodeError"),
        (GOOD[0], b"\x00\x00\x0e\x0e\x01", RecordDecodeError, "string of -1 bytes"),
        ("text", None, RecordDecodeError, "expected bytes, got str"),
        (None, None, RecordDecodeError, "expected bytes, got NoneType"),
        (GOOD[0], 12, RecordDecodeError, "expected bytes, got int"),
    ],
)
def test_corrupt_records_are_typed_errors(key, value, error, message) -> None:
    with pytest.raises(error, match=message):
        decode(key, value)


def test_bad_union_branch() -> None:
    key, value = encode(_member(None))
    # InstanceId is the first union, right after GroupEpoch (one byte): branch 0 -> branch 2.
    assert value[3] == 0
    with pytest.raises(RecordDecodeError, match="union branch 2"):
        decode(key, value[:3] + b"\x04" + value[4:])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(record=any_record, data=st.data())
def test_mangled_bytes_never_raise_anything_else(record: Record, data: st.DataObject) -> None:
    key, value = encode(record)
    if value is None or not data.draw(st.booleans()):
        key = _mangle(key, data)
    else:
        value = _mangle(value, data)
    try:
        decoded = decode(key, value)
    except RecordDecodeError:
        return
    assert isinstance(decoded, Record)  # some mangled bytes are still a valid record: fine


def _mangle(raw: bytes, data: st.DataObject) -> bytes:
    how = data.draw(st.sampled_from(["flip", "cut", "insert", "random"]))
    if how == "random":
        return raw[:2] + data.draw(st.binary(max_size=64))
    i = data.draw(st.integers(0, max(len(raw) - 1, 0)))
    if how == "flip":
        return raw[:i] + bytes([raw[i] ^ data.draw(st.integers(1, 255))]) + raw[i + 1 :] if raw else raw
    if how == "cut":
        return raw[:i]
    return raw[:i] + data.draw(st.binary(min_size=1, max_size=8)) + raw[i:]


@given(st.binary(max_size=40), st.none() | st.binary(max_size=80))
def test_random_bytes_never_raise_anything_else(key: bytes, value: bytes | None) -> None:
    try:
        decode(key, value)
    except RecordDecodeError:
        pass


def test_bytearray_and_memoryview_are_accepted() -> None:
    key, value = GOOD
    assert decode(bytearray(key), memoryview(value)) == decode(key, value)


# --- encoding errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            Record(
                MemberMetadataKey("g", "m"),
                MemberMetadataValue(1, None, "c", "h", None, 1, None, (Assignor("a", 0, 70_000, 0, 0, b""),)),
            ),
            r"ClientAssignors\[0\]\.MaximumVersion: 70000 is out of range for int16",
        ),
        (
            Record(
                MemberMetadataKey("g", "m"),
                MemberMetadataValue(1, None, "c", "h", None, 1, None, (Assignor("a", 0, 1, 128, 0, b""),)),
            ),
            "out of range for int8",
        ),
        (
            Record(MemberMetadataKey("g", "m"), MemberMetadataValue(2**31, None, "c", "h", None, 1, None, ())),
            "GroupEpoch: 2147483648 is out of range for int",
        ),
        (
            Record(MemberMetadataKey("g", "m"), MemberMetadataValue(1, 5, "c", "h", None, 1, None, ())),
            "InstanceId: expected string, got int",
        ),
        (Record(MemberMetadataKey("g", 3), None), "MemberId: expected string, got int"),  # type: ignore[arg-type]
        (
            Record(TargetAssignmentMemberKey("g", "m"), CurrentMemberAssignmentValue(1, 0, "S", ConnectorsAndTasks())),
            "needs a TargetAssignmentMemberValue",
        ),
        (Record("not a key", None), "str is not a record key"),  # type: ignore[arg-type]
        (
            Record(
                CurrentMemberAssignmentKey("g", "m"),
                CurrentMemberAssignmentValue(1, 0, "S", ConnectorsAndTasks((), (TaskId("A", "zero"),))),  # type: ignore[arg-type]
            ),
            r"Tasks\[0\]\.Task: expected int",
        ),
        (
            Record(
                CurrentMemberAssignmentKey("g", "m"),
                CurrentMemberAssignmentValue(1, 0, "S", ConnectorsAndTasks((), (5,))),
            ),
            "does not fit its schema",
        ),
    ],
)
def test_invalid_records_are_refused_on_encode(record: Record, message: str) -> None:
    with pytest.raises(RecordEncodeError, match=message):
        encode(record)


def test_unknown_version_on_encode() -> None:
    with pytest.raises(RecordEncodeError, match="no value version 9"):
        encode(_member(None), version=9)


def test_task_ids_are_structs_not_tuples() -> None:
    """TaskId is the HTTP API's shape too ({"Connector", "Task"}): a plain tuple is no TaskId."""
    value = CurrentMemberAssignmentValue(1, 0, "S", ConnectorsAndTasks((), (TaskId("A", 0),)))
    decoded = decode(*encode(Record(CurrentMemberAssignmentKey("g", "m"), value)))
    assert decoded.value.assignment.tasks == (TaskId("A", 0),) and type(decoded.value.assignment.tasks[0]) is TaskId
    assert TaskId("A", 0) != ("A", 0)
    with pytest.raises(RecordEncodeError, match="does not fit its schema"):
        encode(
            Record(
                CurrentMemberAssignmentKey("g", "m"),
                CurrentMemberAssignmentValue(1, 0, "S", ConnectorsAndTasks((), (("A", 0),))),
            )
        )  # type: ignore[arg-type]


# --- JSON ------------------------------------------------------------------------------------


@given(any_record)
def test_every_record_renders_as_json(record: Record) -> None:
    rendered = orjson.loads(to_json(record))
    spec = RECORD_TYPES[record.record_type]
    assert rendered["RecordType"] == record.record_type
    assert rendered["Name"] == spec.name
    assert rendered["Key"]["GroupId"] == record.key.group_id
    if record.value is None:
        assert rendered["Value"] is None and rendered["Version"] is None
    else:
        assert rendered["Version"] == spec.latest_version
        assert set(rendered["Value"]) == {f["name"] for f in load(spec.value_schemas[spec.latest_version])["fields"]}


def test_json_shape_follows_the_wire_conventions() -> None:
    record = decode(*GOOD)
    rendered = orjson.loads(to_json(record, indent=True))
    assert rendered == {
        "RecordType": 8,
        "Name": "CurrentMemberAssignment",
        "Version": 0,
        "Key": {"GroupId": "group", "MemberId": "member"},
        "Value": {
            "MemberEpoch": 7,
            "PreviousMemberEpoch": 6,
            "State": "UNREVOKED",
            "Assignment": {
                "Connectors": ["A"],
                "Tasks": [{"Connector": "A", "Task": 0}, {"Connector": "A", "Task": 1}],
            },
            "PendingRevocation": {"Connectors": [], "Tasks": [{"Connector": "A", "Task": 1}]},
            "Error": 0,
            "Version": 1,
            "Metadata": base64.b64encode(b"meta").decode(),
        },
    }
    assert to_dict(record)["Value"]["Metadata"] == b"meta"


@pytest.mark.parametrize("record_type", sorted(VALUES))
def test_strategies_cover_every_type(record_type: int) -> None:
    assert record_type in RECORD_TYPES


def test_records_is_pure() -> None:
    """DESIGN §2: records imports nothing of ours and no Kafka, HTTP, asyncio or Spark."""
    code = (
        "import sys, records; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'coordinator', 'replay', 'spark', 'confluent_kafka', 'aiohttp', 'asyncio', 'pyspark'}); print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_repeated_assignments_decode_to_shared_values_and_truncation_still_fails() -> None:
    """Task ids and assignments are looked up by their bytes before decoding (records/avro.py);
    a hit must give the same value, and bytes cut short after a cached part must still fail."""
    assignment = ConnectorsAndTasks(("A",), (TaskId("A", 0), TaskId("A", 1)))
    first = Record(
        CurrentMemberAssignmentKey("g", "W1"),
        CurrentMemberAssignmentValue(3, 2, "STABLE", assignment, ConnectorsAndTasks()),
    )
    second = Record(TargetAssignmentMemberKey("g", "W1"), TargetAssignmentMemberValue(assignment))
    a = decode(*encode(first))
    b = decode(*encode(second))
    assert a == first and b == second
    assert a.value.assignment is b.value.assignment
    key, value = encode(first)
    cut = len(value) - 3  # inside the fields after the pending revocation
    with pytest.raises(RecordDecodeError):
        decode(key, value[:cut])
    with pytest.raises(RecordDecodeError):
        decode(key, value + b"\x00")


def test_shared_shapes_pickle_compare_and_order_as_values() -> None:
    """Spark and multiprocessing pickle them; sets and sorting use TaskId's hash and order."""
    import pickle

    tasks = (TaskId("b", 0), TaskId("a", 10), TaskId("a", 2))
    value = ConnectorsAndTasks(("a",), tasks)
    assert pickle.loads(pickle.dumps(value)) == value and pickle.loads(pickle.dumps(tasks[0])) == tasks[0]
    assert sorted(tasks) == [TaskId("a", 2), TaskId("a", 10), TaskId("b", 0)]
    assert len({TaskId("a", 2), TaskId("a", 2), "a-2"}) == 2 and TaskId("a", 2) != "a-2"
    assert str(TaskId("a", 2)) == "a-2"
