"""Kafka's binary protocol as the coordinator's Kafka listener speaks it
(`coordinator/api/kafka_protocol.py`, over kafka-python 3's message types) against kafka-clients
4.3.1's own code.

`tests/golden/kafka_frames.json` holds frames that kafka-clients 4.3.1 serialized with its message
classes and its header rules (`tests/java/KafkaFramesGolden.java generate`): a request and a response
of every API the listener serves at its lowest, first flexible and highest version, each with the
message as kafka-clients' JSON converter writes it; then frames carrying tagged fields no schema knows
and error codes Kafka never defined. We read Java's request frames to the values Java wrote, write
every frame byte for byte as Java did, Java reads our frames to the same values, and regenerating
with Java gives the file again. Unknown tagged fields are skipped and unknown error codes carried.
Hypothesis: no bytes make frame reading or request decoding raise anything but KafkaProtocolError.

Java and Maven are prerequisites (tests/connect_java.py): without them the Java tests fail, unless
COORDINATOR_TESTS_WITHOUT_JAVA=1 skips them.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import uuid
from pathlib import Path
from typing import Any

import connect_java
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.api import kafka_protocol as kp

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden" / "kafka_frames.json"
DRIVER = (HERE / "java" / "KafkaFramesGolden.java",)
MAIN = "KafkaFramesGolden"
DATA = json.loads(GOLDEN.read_text())
CASES: list[dict[str, Any]] = DATA["cases"]
IDS = [f"{c['name']}-{c['kind']}" for c in CASES]
REQUESTS = [c for c in CASES if c["kind"] == "request"]
RESPONSES = [c for c in CASES if c["kind"] == "response"]


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def message_class(case: dict[str, Any]) -> Any:
    get = kp.request_class if case["kind"] == "request" else kp.response_class
    return get(case["api_key"], case["version"])


def build(cls: Any, version: int, values: dict[str, Any]) -> Any:
    """A library message (or nested struct) of `cls` at `version` from kafka-clients' JSON of it:
    field names in camelCase, bytes in base64; fields the JSON leaves out keep their defaults."""
    by_name = {snake(k): v for k, v in values.items()}
    for kafkas in ("topic_authorized_operations", "cluster_authorized_operations"):  # the library's shorter name
        if kafkas in by_name:
            by_name["authorized_operations"] = by_name.pop(kafkas)
    kwargs: dict[str, Any] = {}
    for field in cls._struct._fields:
        if field.name not in by_name:
            continue
        value = by_name.pop(field.name)
        if value is None:
            kwargs[field.name] = None
        elif field.is_struct_array():
            kwargs[field.name] = [build(nested(cls, field), version, v) for v in value]
        elif field.is_struct():
            kwargs[field.name] = build(nested(cls, field), version, value)
        elif field.type_str == "bytes":
            kwargs[field.name] = base64.b64decode(value)
        elif field.type_str == "uuid":  # Kafka's Uuid.toString: URL-safe base64, unpadded; the library reads
            # Kafka's zero Uuid as None
            value = uuid.UUID(bytes=base64.urlsafe_b64decode(value + "=="))
            kwargs[field.name] = None if value.int == 0 else value
        elif field.type_str == "bitfield":  # an int32 in Kafka's schema, the set of its bits in the library,
            # None for Kafka's INT_MIN ("not asked for")
            kwargs[field.name] = None if value == -(2**31) else {bit for bit in range(32) if value & (1 << bit)}
        else:
            kwargs[field.name] = value
    assert not by_name, f"fields of {cls.__name__} the library does not know: {sorted(by_name)}"
    return cls(version=version, **kwargs)


def nested(cls: Any, field: Any) -> Any:
    return field.data_class or getattr(cls, field.type_str)


def body_of(case: dict[str, Any]) -> Any:
    return build(message_class(case), case["version"], case["body"])


def our_frame(case: dict[str, Any]) -> bytes:
    body = body_of(case)
    if case["kind"] == "request":
        return kp.encode_request(body, case["version"], case["correlation_id"], case["client_id"])
    header = kp.RequestHeader(case["api_key"], case["version"], case["correlation_id"], "ignored")
    return kp.encode_response(header, body)


# --- the golden file ----------------------------------------------------------------------------


def test_golden_covers_every_served_api_at_its_ends():
    served = {(c["api_key"], c["version"]) for c in CASES}
    for api_key, (low, high) in kp.SUPPORTED.items():
        assert (api_key, low) in served and (api_key, high) in served, kp.NAMES[api_key]


def test_served_versions_are_within_kafka_clients_4_3_1():
    for api_key, (low, high) in kp.SUPPORTED.items():
        java_low, java_high = DATA["kafka_clients_versions"][str(api_key)]
        assert java_low <= low <= high <= java_high, kp.NAMES[api_key]
    assert kp.SUPPORTED[kp.JOIN_GROUP] == (4, 9)


@pytest.mark.parametrize("case", REQUESTS, ids=[f"{c['name']}" for c in REQUESTS])
def test_we_decode_java_request_frames(case):
    data = bytes.fromhex(case["hex"])
    (payload,) = kp.FrameReader().feed(data)
    header = kp.peek_header(payload)
    assert header == kp.RequestHeader(case["api_key"], case["version"], case["correlation_id"], case["client_id"])
    # the APIs the listener serves, and those whose answers the gateway rewrites (it reads their requests)
    request = kp.decode_request(payload) if case["api_key"] in kp.SUPPORTED else kp.decode_any_request(payload)
    assert request.header == header
    assert request.body.to_dict() == body_of(case).to_dict()


@pytest.mark.parametrize("case", RESPONSES, ids=[f"{c['name']}" for c in RESPONSES])
def test_we_decode_java_response_frames(case):
    payload = bytes.fromhex(case["hex"])[4:]
    correlation_id, body = kp.decode_response(case["api_key"], case["version"], payload)
    assert correlation_id == case["correlation_id"]
    assert body.to_dict() == body_of(case).to_dict()


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if "unknown_tags" not in c["name"]],
    ids=[i for i, c in zip(IDS, CASES, strict=True) if "unknown_tags" not in c["name"]],
)
def test_we_write_java_bytes(case):
    assert our_frame(case).hex() == case["hex"]


def test_response_header_versions_are_kafkas():
    for case in RESPONSES:
        assert kp.response_header_version(case["api_key"], case["version"]) == case["header_version"], case["name"]


def test_regenerating_with_java_gives_the_golden_file():
    connect_java.require()
    assert json.loads(connect_java.run(DRIVER, MAIN, ["generate"])) == DATA


def java_reads(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    connect_java.require()
    return json.loads(connect_java.run(DRIVER, MAIN, ["read"], stdin=json.dumps({"frames": frames})))["frames"]


def test_java_reads_our_frames_to_the_same_values():
    cases = [c for c in CASES if "unknown_tags" not in c["name"]]
    frames = [
        {"kind": c["kind"], "api_key": c["api_key"], "version": c["version"], "hex": our_frame(c).hex()} for c in cases
    ]
    # and our ApiVersions answers at every version, with Kafka's v0 fallback for a version we do not know
    asked = [*range(kp.SUPPORTED[kp.API_VERSIONS][1] + 1), 99]
    answers = [kp.api_versions_response(kp.RequestHeader(kp.API_VERSIONS, v, 40 + v, "c")) for v in asked]
    frames += [
        {"kind": "response", "api_key": kp.API_VERSIONS, "version": min(v, 4) if v != 99 else 0, "hex": a.hex()}
        for v, a in zip(asked, answers, strict=True)
    ]
    read = java_reads(frames)
    for case, got in zip(cases, read, strict=False):
        assert "error" not in got, (case["name"], got)
        assert got["left_over"] == 0
        assert got["correlation_id"] == case["correlation_id"]
        assert got["body"] == case["body"], case["name"]
    for v, got in zip(asked, read[len(cases) :], strict=True):
        assert "error" not in got, (v, got)
        assert got["correlation_id"] == 40 + v
        assert got["body"]["errorCode"] == (35 if v == 99 else 0)
        assert {(k["apiKey"], k["minVersion"], k["maxVersion"]) for k in got["body"]["apiKeys"]} == {
            (k, lo, hi) for k, (lo, hi) in kp.SUPPORTED.items()
        }


# --- what must never end a connection -------------------------------------------------------------


def golden(name: str, kind: str) -> dict[str, Any]:
    return next(c for c in CASES if c["name"] == name and c["kind"] == kind)


def test_unknown_tagged_fields_are_skipped():
    case = golden("join_group_v9_unknown_tags", "request")
    payload = bytes.fromhex(case["hex"])[4:]
    request = kp.decode_request(payload)
    assert request.body.to_dict() == body_of(golden("join_group_v9", "request")).to_dict()
    case = golden("sync_group_v5_unknown_tags", "response")
    _, body = kp.decode_response(kp.SYNC_GROUP, 5, bytes.fromhex(case["hex"])[4:])
    assert body.to_dict() == body_of(golden("sync_group_v5", "response")).to_dict()


def test_unknown_tagged_fields_in_the_request_header_are_skipped():
    case = golden("heartbeat_v4", "request")
    payload = bytes.fromhex(case["hex"])[4:]
    header_end = 2 + 2 + 4 + 2 + len(case["client_id"])
    assert payload[header_end] == 0  # no tagged fields
    tagged = payload[:header_end] + bytes([1, 9, 2, 0xAB, 0xCD]) + payload[header_end + 1 :]
    assert kp.decode_request(tagged).body.to_dict() == body_of(case).to_dict()


@pytest.mark.parametrize("name,code", [("join_group_v9_unknown_error", 9999), ("heartbeat_v4_unknown_error", 1000)])
def test_error_codes_kafka_never_defined_are_carried(name, code):
    case = golden(name, "response")
    _, body = kp.decode_response(case["api_key"], case["version"], bytes.fromhex(case["hex"])[4:])
    assert body.error_code == code
    assert our_frame(case).hex() == case["hex"]


# --- bad input ----------------------------------------------------------------------------------


def test_frame_sizes():
    assert kp.FrameReader().feed(b"\x00\x00\x00\x02ab\x00\x00\x00\x01c\x00") == [b"ab", b"c"]
    with pytest.raises(kp.FrameTooLarge, match="over the maximum"):
        kp.FrameReader().feed(struct.pack(">i", 2**31 - 1))
    with pytest.raises(kp.FrameTooLarge, match="negative"):
        kp.FrameReader().feed(b"\xff\xff\xff\xfe")
    with pytest.raises(kp.FrameTooLarge):
        kp.frame_length(struct.pack(">i", 1001), max_bytes=1000)
    assert kp.frame_length(struct.pack(">i", 1000), max_bytes=1000) == 1000
    reader = kp.FrameReader()
    assert reader.feed(b"\x00\x00\x00\x05ab") == [] and reader.pending == 6
    assert reader.feed(b"cde") == [b"abcde"] and reader.pending == 0


def test_unsupported_api_or_version_names_what_it_got():
    heartbeat = bytes.fromhex(golden("heartbeat_v4", "request")["hex"])[4:]
    with pytest.raises(kp.UnsupportedRequest, match="Heartbeat v9 is not served") as e:
        kp.decode_request(heartbeat[:2] + struct.pack(">h", 9) + heartbeat[4:])
    assert e.value.header.correlation_id == golden("heartbeat_v4", "request")["correlation_id"]
    with pytest.raises(kp.UnsupportedRequest, match="Produce v4 is not served"):
        kp.decode_request(struct.pack(">hh", 0, 4) + heartbeat[4:])
    with pytest.raises(kp.UnsupportedRequest, match="api-key-9999 v4"):  # a key Kafka never had
        kp.decode_request(struct.pack(">hh", 9999, 4) + heartbeat[4:])
    join = bytes.fromhex(golden("join_group_v4", "request")["hex"])[4:]
    with pytest.raises(kp.UnsupportedRequest, match="JoinGroup v3"):
        kp.decode_request(join[:2] + struct.pack(">h", 3) + join[4:])


@pytest.mark.parametrize("case", REQUESTS, ids=[c["name"] for c in REQUESTS])
def test_every_truncation_of_a_request_is_our_error(case):
    """A frame cut short anywhere is refused, by the listener's decoding and by the gateway's: none of
    Java's frames ends in bytes it could do without, so no prefix of one is a whole request. (The
    library's decoding used to read a string or a tagged value cut short as a shorter one: a
    FindCoordinator cut inside its key asked for "conn", a JoinGroup cut inside an unknown tag
    decoded whole.)"""
    payload = bytes.fromhex(case["hex"])[4:]
    for end in range(len(payload)):
        for decode in (kp.decode_request, kp.decode_any_request):
            try:
                decoded = decode(payload[:end])
            except kp.KafkaProtocolError:
                continue
            pytest.fail(f"{end} of {len(payload)} bytes decoded by {decode.__name__}: {decoded.body}")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_into_frame_reading_raise_only_our_error(data):
    try:
        for payload in kp.FrameReader(max_bytes=200).feed(data):
            kp.decode_request(payload)
    except kp.KafkaProtocolError:
        pass


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted((k, v) for k, (lo, hi) in kp.SUPPORTED.items() for v in range(lo, hi + 1))),
    st.one_of(st.none(), st.text(max_size=5)),
    st.binary(max_size=200),
)
def test_arbitrary_bodies_of_served_requests_raise_only_our_error(api, client_id, body):
    api_key, version = api
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    flexible = kp.request_class(api_key, version).flexible_version_q(version)
    payload = struct.pack(">hhi", api_key, version, 7) + cid + (b"\x00" if flexible else b"") + body
    try:
        request = kp.decode_request(payload)
    except kp.KafkaProtocolError:
        return
    assert request.header.api_key == api_key and request.header.correlation_id == 7


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REQUESTS), st.data())
def test_mutated_java_requests_raise_only_our_error(case, data):
    payload = bytearray(bytes.fromhex(case["hex"])[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    try:
        kp.decode_request(bytes(payload))
    except kp.KafkaProtocolError:
        pass


def test_a_principal_is_serialized_as_kafkas_forwarding_broker_serializes_it():
    # DefaultKafkaPrincipalBuilder.serialize(User:alice), as an Envelope carries it
    java = bytes.fromhex(DATA["principal_user_alice"])
    assert kp.principal_bytes("User", "alice") == java
    assert kp.principal_of(java) == ("User", "alice")
    for bad in (b"", java[:-1], b"\x00\x01" + java[2:]):
        with pytest.raises(kp.KafkaProtocolError):
            kp.principal_of(bad)


def test_the_envelope_java_wrote_carries_a_request_we_read():
    case = next(c for c in REQUESTS if c["api_key"] == kp.ENVELOPE)
    request = kp.decode_request(bytes.fromhex(case["hex"])[4:])
    inner = kp.decode_request(bytes(request.body.request_data))
    assert (inner.header.api_key, inner.header.api_version, inner.header.correlation_id) == (kp.HEARTBEAT, 4, 42)
    assert kp.principal_of(request.body.request_principal) == ("User", "alice")
    assert bytes(request.body.client_host_address) == bytes([10, 0, 0, 7])


@pytest.mark.parametrize(
    ("mechanism", "message", "user"),
    [
        ("PLAIN", b"\x00alice\x00secret", "alice"),
        ("PLAIN", b"alice\x00alice\x00secret", "alice"),
        ("SCRAM-SHA-256", b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL", "alice"),
        ("SCRAM-SHA-512", b"n,a=bob,n=b=2Cob=3D,r=abc", "b,ob="),
    ],
)
def test_the_user_a_first_sasl_message_names(mechanism, message, user):
    assert kp.sasl_username(mechanism, message) == user


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        ("PLAIN", b"alice"),
        ("PLAIN", b"\x00\x00pw"),
        ("PLAIN", b"\xff\x00a\x00b"),
        ("SCRAM-SHA-256", b"n,,r=abc"),
        ("SCRAM-SHA-256", b"n,,n=a=xb,r=1"),
        ("GSSAPI", b"\x60\x82"),
        ("OAUTHBEARER", b"n,,\x01auth=Bearer x\x01\x01"),
    ],
)
def test_no_user_is_named_for_a_message_or_mechanism_we_cannot_read(mechanism, message):
    with pytest.raises(kp.KafkaProtocolError):
        kp.sasl_username(mechanism, message)
