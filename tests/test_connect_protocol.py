"""Kafka Connect's classic-protocol bytes (`records/connect_protocol.py`) against connect-runtime's
own code.

`tests/golden/connect_protocol.json` holds cases that connect-runtime 4.3.1 serialized
(`tests/java/ConnectProtocolGolden.java generate`): each case's input, Java's bytes, and what Java's
reader (`IncrementalCooperativeConnectProtocol`, the one `WorkerCoordinator` and both assignors use)
reads from them. We read every case as Java does, write every case byte for byte as Java did, and
regenerating with Java gives the file again. Java then reads our bytes (golden and generated cases,
every truncation and mutations of the golden bytes) as we do, and writes generated inputs to our
bytes, `HashSet` order included. Hypothesis: no bytes make a decoder raise anything but
`ConnectProtocolError`, and every protocol round-trips. `holdings` is onJoinComplete's rule. Bytes of
the previous release's Avro dialect either decode or raise `ConnectProtocolError`, and type 2 records
holding them still load.

Java and Maven are prerequisites (tests/connect_java.py): without them the Java tests fail, unless
COORDINATOR_TESTS_WITHOUT_JAVA=1 skips them.
"""

from __future__ import annotations

import dataclasses
import io
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import connect_java
import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from records import ClassicGroupMember, ClassicGroupMetadataKey, ClassicGroupMetadataValue, Record, decode, encode
from records.connect_protocol import (
    COMPATIBLE,
    CONFIG_MISMATCH,
    DEFAULT,
    PROTOCOLS,
    SESSIONED,
    VERSIONS,
    ConnectProtocolError,
    WorkerAssignment,
    WorkerMetadata,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    holdings,
)
from records.model import ConnectorsAndTasks, TaskId

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden" / "connect_protocol.json"
DRIVER = (HERE / "java" / "ConnectProtocolGolden.java",)
MAIN = "ConnectProtocolGolden"
CASES: list[dict[str, Any]] = json.loads(GOLDEN.read_text())["cases"]
NAMES = [c["name"] for c in CASES]
EMPTY = ConnectorsAndTasks()

# --- the JSON shapes of ConnectProtocolGolden.java ---------------------------------------------------


def items_from(j: dict[str, Any]) -> ConnectorsAndTasks:
    return ConnectorsAndTasks(tuple(j["connectors"]), tuple(TaskId(c, t) for c, t in j["tasks"]))


def items_json(x: ConnectorsAndTasks) -> dict[str, Any]:
    return {"connectors": list(x.connectors), "tasks": [[t.connector, t.task] for t in x.tasks]}


def assignment_from(j: dict[str, Any], protocol: str) -> WorkerAssignment:
    return WorkerAssignment(
        j["leader"],
        j["leader_url"],
        j["config_offset"],
        items_from(j["assigned"]),
        items_from(j["revoked"]) if "revoked" in j else EMPTY,
        j.get("delay_ms", 0),
        j["error"],
        VERSIONS[protocol],
    )


def assignment_input(a: WorkerAssignment, protocol: str) -> dict[str, Any]:
    out = {
        "error": a.error,
        "leader": a.leader,
        "leader_url": a.leader_url,
        "config_offset": a.config_offset,
        "assigned": items_json(a.assigned),
    }
    if protocol != DEFAULT:
        out |= {"revoked": items_json(a.revoked), "delay_ms": a.delay_ms}
    return out


def assignment_read(a: WorkerAssignment) -> dict[str, Any]:
    """What a reader says of an assignment: every field, and the header's version."""
    return {"version": a.version} | assignment_input(a, COMPATIBLE)


def metadata_from(j: dict[str, Any], protocol: str) -> WorkerMetadata:
    allocation = j.get("allocation")
    return WorkerMetadata(
        j["url"],
        j["config_offset"],
        None if allocation is None else assignment_from(allocation, protocol),
        VERSIONS[protocol],
    )


def metadata_input(m: WorkerMetadata, protocol: str) -> dict[str, Any]:
    out: dict[str, Any] = {"url": m.url, "config_offset": m.config_offset}
    if protocol != DEFAULT:
        out["allocation"] = None if m.allocation is None else assignment_input(m.allocation, protocol)
    return out


def metadata_read(m: WorkerMetadata) -> dict[str, Any]:
    """What a reader says of a metadata (Java's ExtendedWorkerState keeps no header version)."""
    return {
        "url": m.url,
        "config_offset": m.config_offset,
        "allocation": None if m.allocation is None else assignment_read(m.allocation),
    }


def ours(kind: str, data: bytes) -> dict[str, Any]:
    """What our decoder reads, in the reading shape, or the ConnectProtocolError it raised."""
    try:
        return metadata_read(decode_metadata(data)) if kind == "metadata" else assignment_read(decode_assignment(data))
    except ConnectProtocolError as e:
        return {"exception": f"ConnectProtocolError: {e}"}


def our_bytes(protocol: str, value: WorkerMetadata | WorkerAssignment) -> bytes:
    if isinstance(value, WorkerMetadata):
        return encode_metadata(value, protocol)
    return encode_assignment(value, protocol)


def value_of(case: dict[str, Any]) -> WorkerMetadata | WorkerAssignment:
    from_json = metadata_from if case["kind"] == "metadata" else assignment_from
    return from_json(case["input"], case["protocol"])


# --- (a), (b): Java's golden bytes ----------------------------------------------------------------


def test_the_golden_cases_cover_every_protocol_and_kind() -> None:
    covered = {(c["kind"], c["protocol"]) for c in CASES}
    assert covered == {(k, p) for k in ("metadata", "assignment") for p in PROTOCOLS}
    assert {c["read"]["error"] for c in CASES if c["kind"] == "assignment"} == {0, CONFIG_MISMATCH}


@pytest.mark.parametrize("name", NAMES)
def test_we_read_connects_bytes_as_connect_does(name: str) -> None:
    case = CASES[NAMES.index(name)]
    data = bytes.fromhex(case["hex"])
    assert ours(case["kind"], data) == case["read"]
    if case["kind"] == "metadata":
        assert decode_metadata(data).version == VERSIONS[case["protocol"]]


@pytest.mark.parametrize("name", NAMES)
def test_we_write_connects_bytes_byte_for_byte(name: str) -> None:
    case = CASES[NAMES.index(name)]
    assert our_bytes(case["protocol"], value_of(case)).hex() == case["hex"]


def test_connectors_are_in_javas_hash_set_order_not_insertion_order() -> None:
    """The golden bytes would not show Java's order if the cases' connectors came out as given."""
    case = next(c for c in CASES if c["name"] == "assignment/sessioned/twenty-connectors")
    given_order = case["input"]["assigned"]["connectors"]
    written = case["read"]["assigned"]["connectors"]
    assert sorted(written) == sorted(given_order) and written != given_order


# --- (c): Java writes the golden file again --------------------------------------------------------


@pytest.fixture(scope="session")
def driver() -> None:
    """The Java driver compiled (once per source digest, cached across sessions)."""
    connect_java.require()
    connect_java.compiled(DRIVER)


def java(mode: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    return json.loads(connect_java.run(DRIVER, MAIN, [mode], None if payload is None else json.dumps(payload)))


def test_connect_runtime_generates_the_checked_in_golden_file(driver: None) -> None:
    fresh = connect_java.run(DRIVER, MAIN, ["generate"])
    checked_in = GOLDEN.read_text()
    if fresh != checked_in:
        old = {c["name"]: c for c in json.loads(checked_in)["cases"]}
        new = {c["name"]: c for c in json.loads(fresh)["cases"]}
        changed = sorted(n for n in old.keys() | new.keys() if old.get(n) != new.get(n))
        pytest.fail(
            f"connect-runtime now writes other golden cases ({', '.join(changed) or 'only the header'}); "
            f"if that is meant, regenerate: .venv/bin/python tests/connect_java.py "
            f"{DRIVER[0].relative_to(HERE.parent)} generate > {GOLDEN.relative_to(HERE.parent)}",
            pytrace=False,
        )


# --- (d): Java reads our bytes, and writes our bytes ---------------------------------------------------

_ALPHABET = "abcdefgxyz-_.0123456789" + "\u00e9\u00fc\u00df" + "\u30b3\u30cd" + "\U0001f680\U0001f41b"
# Numbers of connectors (duplicates included) that make HashSet's table size differ by JDK: Java 17's
# HashSet(Collection) sizes its table for size/.75+1 entries, Java 19 and later for ceil(size/.75),
# so at 3 * 2^k (k >= 2) connectors Java 19+ uses half the buckets (another order, the same set).
_JDK_DEPENDENT_SIZES = {12, 24, 48, 96}
_SIZES = (0, 1, 2, 3, 5, 8, 11, 12, 13, 20, 23, 24, 25, 40, 47, 48, 49)


def _name(rng: random.Random, names: list[str]) -> str:
    if names and rng.random() < 0.5:
        return rng.choice(names)
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 14)))


def _items(rng: random.Random, size: int | None = None) -> ConnectorsAndTasks:
    names: list[str] = []
    while len(set(names)) < (rng.choice(_SIZES[:9]) if size is None else size):
        names.append(_name(rng, []))
    if names and rng.random() < 0.2:
        names.append(rng.choice(names))  # a duplicate: Java's HashSet (revoked: distinct()) drops it
    task_number = lambda: rng.choice((0, 1, 2, rng.randint(0, 2**31 - 1)))  # noqa: E731
    tasks = [TaskId(_name(rng, names), task_number()) for _ in range(rng.choice((0, 0, 1, 3, 7, 30)))]
    return ConnectorsAndTasks(tuple(names), tuple(tasks))


def _assignment(rng: random.Random, protocol: str, size: int | None = None) -> WorkerAssignment:
    int_of = lambda bits: rng.choice((0, -1, 1, rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)))  # noqa: E731
    text = lambda: "".join(rng.choice(_ALPHABET) for _ in range(rng.choice((0, 5, 40))))  # noqa: E731
    revoked, delay = (EMPTY, 0) if protocol == DEFAULT else (_items(rng), int_of(32))
    return WorkerAssignment(
        text(), text(), int_of(64), _items(rng, size), revoked, delay, int_of(16), VERSIONS[protocol]
    )


def _metadata(rng: random.Random, protocol: str) -> WorkerMetadata:
    allocation = None if protocol == DEFAULT or rng.random() < 0.3 else _assignment(rng, protocol)
    url = rng.choice(("", "http://10.1.2.3:8083/", "https://w\u00e9rker:8443"))
    return WorkerMetadata(url, rng.choice((-1, 0, 7, rng.randint(-(2**63), 2**63 - 1))), allocation, VERSIONS[protocol])


def _generated() -> list[dict[str, Any]]:
    """Inputs no golden case has: many connectors (every table size), duplicates, unicode, extreme numbers."""
    rng = random.Random(27)
    out = []
    for i in range(240):
        protocol = PROTOCOLS[i % 3]
        if i % 4 == 3:
            kind, value = "metadata", _metadata(rng, protocol)
        else:
            kind, value = "assignment", _assignment(rng, protocol, _SIZES[i % len(_SIZES)])
        out.append({"name": f"generated/{i}", "kind": kind, "protocol": protocol, "value": value})
    # Lone surrogates, which Java's String.getBytes(UTF_8) writes as "?" (and hashes as its chars).
    lone = ConnectorsAndTasks(("a\ud800b", "\udfff", "ok", "\ud800\ud800"), (TaskId("\udc00", 1),))
    for protocol in PROTOCOLS:
        revoked = EMPTY if protocol == DEFAULT else ConnectorsAndTasks(("\ud801",))
        out.append(
            {
                "name": f"generated/lone-surrogates/{protocol}",
                "kind": "assignment",
                "protocol": protocol,
                "value": WorkerAssignment("w\ud800", "u", 1, lone, revoked, 0, 0, VERSIONS[protocol]),
            }
        )
    return out


GENERATED = _generated()


def _truncations_and_mutations() -> list[dict[str, Any]]:
    rng = random.Random(1)
    out = []
    for case in CASES:
        data = bytes.fromhex(case["hex"])
        for n in range(len(data)):
            out.append({"name": f"{case['name']}/first-{n}", "kind": case["kind"], "hex": data[:n].hex()})
        for i in range(40):
            mutated = bytearray(data)
            at = rng.randrange(len(data))
            mutated[at] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, rng.randrange(256)))
            if i % 4 == 0 and at + 1 < len(data):
                mutated[at + 1] = 0xFF
            out.append({"name": f"{case['name']}/mutated-{i}", "kind": case["kind"], "hex": mutated.hex()})
    return out


BROKEN = _truncations_and_mutations()


@pytest.fixture(scope="session")
def connect_reads(driver: None) -> dict[str, dict[str, Any]]:
    """What Connect's deserializers read from our golden-case bytes, our bytes of the generated
    inputs, and every truncation and some mutations of the golden bytes: one JVM for all."""
    cases = [{"name": c["name"], "kind": c["kind"], "hex": our_bytes(c["protocol"], value_of(c)).hex()} for c in CASES]
    cases += [
        {"name": g["name"], "kind": g["kind"], "hex": our_bytes(g["protocol"], g["value"]).hex()} for g in GENERATED
    ]
    cases += BROKEN
    read = java("read", {"cases": cases})
    return {
        c["name"]: c | {"kind": sent["kind"], "hex": sent["hex"]} for c, sent in zip(read["cases"], cases, strict=True)
    }


@pytest.mark.parametrize("name", NAMES)
def test_connect_reads_our_bytes_of_every_golden_case_as_the_case_says(
    name: str, connect_reads: dict[str, dict[str, Any]]
) -> None:
    case = CASES[NAMES.index(name)]
    assert connect_reads[name]["read"] == case["read"]
    if case["protocol"] == DEFAULT:  # ConnectProtocol's own reader agrees on what v0 holds
        v0 = connect_reads[name]["read_v0"]
        assert v0 == {k: v for k, v in case["read"].items() if k in v0}


def test_connect_reads_our_bytes_of_generated_inputs_as_we_do(connect_reads: dict[str, dict[str, Any]]) -> None:
    for g in GENERATED:
        read = connect_reads[g["name"]]
        assert "exception" not in read["read"], (g, read)
        assert read["read"] == ours(g["kind"], bytes.fromhex(read["hex"])), g["name"]


def test_connect_and_we_agree_on_truncated_and_mutated_bytes(connect_reads: dict[str, dict[str, Any]]) -> None:
    """Where Java's reader fails we raise ConnectProtocolError, and where it reads we read the same,
    but for what Connect never writes: a string that is not UTF-8 (Java substitutes U+FFFD), a task
    number below -1 (Java keeps it), and an allocation after a `default` (v0) header (the eager
    assignor ignores it; we read none)."""
    outcomes: Counter[str] = Counter()
    for b in BROKEN:
        java_read = connect_reads[b["name"]]["read"]
        our_read = ours(b["kind"], bytes.fromhex(b["hex"]))
        if our_read == java_read:
            outcomes["read the same"] += 1
            continue
        if "exception" in our_read and "exception" in java_read:
            outcomes["both refused"] += 1
            continue
        why = our_read.get("exception", "")
        if ("not UTF-8" in why or "has task" in why) and "exception" not in java_read:
            outcomes["we refused what Connect never writes"] += 1
            continue
        if b["kind"] == "metadata" and b["hex"][:4] == "0000" and "exception" not in java_read:
            assert our_read == java_read | {"allocation": None}, b
            outcomes["a v0 allocation"] += 1
            continue
        pytest.fail(f"{b['name']} ({b['hex']}): Connect read {java_read}, we read {our_read}")
    assert outcomes["read the same"] > 200 and outcomes["both refused"] > 2000, outcomes


def test_connect_writes_our_bytes_for_generated_inputs(driver: None) -> None:
    """Connect's serializers write each generated input to our bytes: its HashSet order for up to 49
    connectors (table sizes 16 to 128), its distinct() for revocations, its grouping of tasks."""
    cases = [
        {
            "name": g["name"],
            "kind": g["kind"],
            "protocol": g["protocol"],
            "input": (metadata_input if g["kind"] == "metadata" else assignment_input)(g["value"], g["protocol"]),
        }
        for g in GENERATED
    ]
    written = java("write", {"cases": cases})
    jdk = int(written["java"].split(".")[-1] if written["java"].startswith("1.") else written["java"])
    for g, w in zip(GENERATED, written["cases"], strict=True):
        ours_hex = our_bytes(g["protocol"], g["value"]).hex()
        if jdk >= 19 and len(_assigned(g["value"]).connectors) in _JDK_DEPENDENT_SIZES:
            assert _same(g["kind"], bytes.fromhex(w["hex"]), bytes.fromhex(ours_hex)), g["name"]
            continue
        assert w["hex"] == ours_hex, g["name"]


def _assigned(value: WorkerMetadata | WorkerAssignment) -> ConnectorsAndTasks:
    if isinstance(value, WorkerMetadata):
        return value.allocation.assigned if value.allocation is not None else EMPTY
    return value.assigned


def _same(kind: str, one: bytes, other: bytes) -> bool:
    """The same bytes but for the order of the connectors and the tasks."""
    if kind == "assignment":
        return _same_assignment(decode_assignment(one), decode_assignment(other))
    a, b = decode_metadata(one), decode_metadata(other)
    return (a.url, a.config_offset, a.version) == (b.url, b.config_offset, b.version) and (
        a.allocation == b.allocation
        or (a.allocation is not None and b.allocation is not None and _same_assignment(a.allocation, b.allocation))
    )


# --- (e): Hypothesis -----------------------------------------------------------------------------

names = st.text(min_size=1, max_size=10)
task_ids = st.builds(TaskId, names, st.integers(0, 2**31 - 1))
items = st.builds(ConnectorsAndTasks, st.lists(names, max_size=8).map(tuple), st.lists(task_ids, max_size=8).map(tuple))
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=24)


@st.composite
def assignments(draw: st.DrawFn, protocol: str) -> WorkerAssignment:
    v0 = protocol == DEFAULT
    return WorkerAssignment(
        draw(text),
        draw(text),
        draw(int64),
        draw(items),
        EMPTY if v0 else draw(items),
        0 if v0 else draw(int32),
        draw(int16),
        VERSIONS[protocol],
    )


@st.composite
def metadatas(draw: st.DrawFn, protocol: str) -> WorkerMetadata:
    allocation = None if protocol == DEFAULT else draw(st.none() | assignments(protocol))
    return WorkerMetadata(draw(text), draw(int64), allocation, VERSIONS[protocol])


def _same_items(read: ConnectorsAndTasks, written: ConnectorsAndTasks) -> bool:
    return set(read.connectors) == set(written.connectors) and Counter(read.tasks) == Counter(written.tasks)


def _same_assignment(read: WorkerAssignment, written: WorkerAssignment) -> bool:
    return (
        _same_items(read.assigned, written.assigned)
        and _same_items(read.revoked, written.revoked)
        and (read.leader, read.leader_url, read.config_offset, read.delay_ms, read.error, read.version)
        == (written.leader, written.leader_url, written.config_offset, written.delay_ms, written.error, written.version)
    )


CORPUS = [bytes.fromhex(c["hex"]) for c in CASES]
HEADERS = [v.to_bytes(2, "big", signed=True) for v in (0, 1, 2, 3, -1, 0x7FFF)]
any_bytes = (
    st.binary(max_size=200)
    | st.builds(bytes.__add__, st.sampled_from(HEADERS), st.binary(max_size=200))
    | st.builds(
        lambda data, at, junk: data[:at] + junk + data[at + len(junk) :],
        st.sampled_from(CORPUS),
        st.integers(0, 400),
        st.binary(min_size=1, max_size=6),
    )
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_bytes)
def test_any_bytes_decode_or_raise_connect_protocol_error_only(data: bytes) -> None:
    for decoder in (decode_metadata, decode_assignment):
        try:
            decoder(data)
        except ConnectProtocolError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PROTOCOLS).flatmap(lambda p: st.tuples(st.just(p), assignments(p))))
def test_assignments_round_trip_in_every_protocol(protocol_and_assignment: tuple[str, WorkerAssignment]) -> None:
    protocol, a = protocol_and_assignment
    data = encode_assignment(a, protocol)
    read = decode_assignment(data)
    assert _same_assignment(read, a)
    assert encode_assignment(read, protocol) == data  # what we read is written to the same bytes


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PROTOCOLS).flatmap(lambda p: st.tuples(st.just(p), metadatas(p))))
def test_metadata_round_trips_in_every_protocol(protocol_and_metadata: tuple[str, WorkerMetadata]) -> None:
    protocol, m = protocol_and_metadata
    data = encode_metadata(m, protocol)
    read = decode_metadata(data)
    assert (read.url, read.config_offset, read.version) == (m.url, m.config_offset, VERSIONS[protocol])
    assert (read.allocation is None) == (m.allocation is None)
    if m.allocation is not None:
        assert read.allocation is not None and _same_assignment(read.allocation, m.allocation)
    assert encode_metadata(read, protocol) == data


@settings(max_examples=100, deadline=None)
@given(st.sampled_from((COMPATIBLE, SESSIONED)).flatmap(lambda p: st.tuples(st.just(p), assignments(p))))
def test_an_allocation_takes_the_metadatas_header(protocol_and_assignment: tuple[str, WorkerAssignment]) -> None:
    """Connect writes the allocation in a metadata with the metadata's header, whatever version the
    assignment was read with (serializeMetadata passes its `sessioned` on)."""
    protocol, a = protocol_and_assignment
    other = SESSIONED if protocol == COMPATIBLE else COMPATIBLE
    m = WorkerMetadata("http://w:8083", 3, dataclasses.replace(a, version=VERSIONS[other]))
    read = decode_metadata(encode_metadata(m, protocol))
    assert read.allocation is not None and read.allocation.version == read.version == VERSIONS[protocol]


# --- (f): holdings is WorkerCoordinator.onJoinComplete ---------------------------------------------


def _on_join_complete(reported: ConnectorsAndTasks, a: WorkerAssignment, protocol: str) -> tuple[set, set]:
    """onJoinComplete's steps: eager takes the assignment; otherwise the snapshot (what the worker
    reported) loses everything revoked and the new assignment gets the rest of it added."""
    if protocol == DEFAULT:
        return set(a.assigned.connectors), set(a.assigned.tasks)
    snapshot_connectors = [c for c in reported.connectors if c not in a.revoked.connectors]  # removeAll
    snapshot_tasks = [t for t in reported.tasks if t not in a.revoked.tasks]
    return set(a.assigned.connectors) | set(snapshot_connectors), set(a.assigned.tasks) | set(snapshot_tasks)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PROTOCOLS), items, items, items)
def test_holdings_is_on_join_complete(
    protocol: str, reported: ConnectorsAndTasks, assigned: ConnectorsAndTasks, revoked: ConnectorsAndTasks
) -> None:
    a = WorkerAssignment(
        "leader", "http://l", 1, assigned, EMPTY if protocol == DEFAULT else revoked, 0, 0, VERSIONS[protocol]
    )
    a = decode_assignment(encode_assignment(a, protocol))  # as a worker gets it
    held = holdings(reported, a)
    assert (set(held.connectors), set(held.tasks)) == _on_join_complete(reported, a, protocol)
    if protocol == DEFAULT:
        assert held == a.assigned


def test_holdings_examples() -> None:
    reported = ConnectorsAndTasks(("A", "B"), (TaskId("A", 0), TaskId("A", 1), TaskId("B", 0)))
    a = decode_assignment(
        encode_assignment(
            WorkerAssignment(
                "l",
                "u",
                5,
                ConnectorsAndTasks(("C",), (TaskId("C", 0),)),
                ConnectorsAndTasks(("B",), (TaskId("A", 1),)),
                0,
            ),
            SESSIONED,
        )
    )
    assert holdings(reported, a) == ConnectorsAndTasks(("A", "C"), (TaskId("A", 0), TaskId("B", 0), TaskId("C", 0)))
    eager = decode_assignment(
        encode_assignment(WorkerAssignment("l", "u", 5, ConnectorsAndTasks(("C",), (TaskId("C", 0),))), DEFAULT)
    )
    assert holdings(reported, eager) == ConnectorsAndTasks(("C",), (TaskId("C", 0),))


# --- the previous release's Avro dialect -------------------------------------------------------------
# The previous release wrote its own bytes for classic members: an int16 version 0, then an Avro body
# of these schemas (records/schemas/ConnectProtocol{Metadata,Assignment}.v0.avsc, since removed).

_OLD_ITEMS = {
    "type": "record",
    "name": "ConnectorsAndTasks",
    "namespace": "worker_offsets",
    "fields": [
        {"name": "Connectors", "type": {"type": "array", "items": "string"}},
        {
            "name": "Tasks",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "TaskId",
                    "fields": [{"name": "Connector", "type": "string"}, {"name": "Task", "type": "int"}],
                },
            },
        },
    ],
}
_OLD_METADATA = parse_schema(
    {
        "type": "record",
        "name": "ConnectProtocolMetadata",
        "namespace": "worker_offsets",
        "fields": [
            {"name": "Url", "type": ["null", "string"]},
            {"name": "ConfigOffset", "type": "long"},
            {"name": "Owned", "type": _OLD_ITEMS},
        ],
    }
)
_OLD_ASSIGNMENT = parse_schema(
    {
        "type": "record",
        "name": "ConnectProtocolAssignment",
        "namespace": "worker_offsets",
        "fields": [
            {"name": "Error", "type": "int"},
            {"name": "Leader", "type": "string"},
            {"name": "LeaderUrl", "type": ["null", "string"]},
            {"name": "ConfigOffset", "type": "long"},
            {"name": "Assigned", "type": _OLD_ITEMS},
            {"name": "Revoked", "type": "worker_offsets.ConnectorsAndTasks"},
            {"name": "DelayMs", "type": "int"},
        ],
    }
)


def _old(schema: Any, datum: dict[str, Any]) -> bytes:
    out = io.BytesIO(b"\x00\x00")
    out.seek(2)
    schemaless_writer(out, schema, datum)
    return out.getvalue()


old_items = st.builds(
    lambda cs, ts: {"Connectors": cs, "Tasks": [{"Connector": c, "Task": t} for c, t in ts]},
    st.lists(names, max_size=5),
    st.lists(st.tuples(names, st.integers(0, 2**31 - 1)), max_size=5),
)
old_metadata = st.builds(
    lambda url, offset, owned: _old(_OLD_METADATA, {"Url": url, "ConfigOffset": offset, "Owned": owned}),
    st.none() | text,
    int64,
    old_items,
)
old_assignment = st.builds(
    lambda error, leader, url, offset, assigned, revoked, delay: _old(
        _OLD_ASSIGNMENT,
        {
            "Error": error,
            "Leader": leader,
            "LeaderUrl": url,
            "ConfigOffset": offset,
            "Assigned": assigned,
            "Revoked": revoked,
            "DelayMs": delay,
        },
    ),
    int32,
    text,
    st.none() | text,
    int64,
    old_items,
    old_items,
    int32,
)


@settings(max_examples=400, deadline=None)
@given(old_metadata, old_assignment)
def test_the_old_avro_dialect_decodes_or_raises_connect_protocol_error(metadata: bytes, assignment: bytes) -> None:
    for data in (metadata, assignment):
        for decoder in (decode_metadata, decode_assignment):
            try:
                decoder(data)
            except ConnectProtocolError:
                pass


def test_a_typical_old_member_is_unreadable_not_misread() -> None:
    """A worker of the previous release with a URL: its bytes are refused, not taken for a worker
    that runs nothing (which could give its work to another while it still runs it)."""
    owned = {"Connectors": ["A"], "Tasks": [{"Connector": "A", "Task": 0}, {"Connector": "B", "Task": 3}]}
    metadata = _old(_OLD_METADATA, {"Url": "http://w1:8083", "ConfigOffset": -1, "Owned": owned})
    assignment = _old(
        _OLD_ASSIGNMENT,
        {
            "Error": 0,
            "Leader": "w1",
            "LeaderUrl": "http://w1:8083",
            "ConfigOffset": 4,
            "Assigned": owned,
            "Revoked": {"Connectors": [], "Tasks": []},
            "DelayMs": 0,
        },
    )
    with pytest.raises(ConnectProtocolError):
        decode_metadata(metadata)
    with pytest.raises(ConnectProtocolError):
        decode_assignment(assignment)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old_metadata, old_assignment, st.sampled_from((0, 1)))
def test_a_classic_group_record_holding_the_old_dialect_still_loads(
    metadata: bytes, assignment: bytes, version: int
) -> None:
    """Type 2 records of the previous release: the members' bytes are opaque to the record format."""
    value = ClassicGroupMetadataValue(
        "connect",
        41,
        "incremental_cooperative",
        "worker-1",
        1_732_000_000_000,
        (ClassicGroupMember("worker-1", None, "connect-1", "/10.0.0.1", 60_000, 10_000, metadata, assignment),),
        None if version == 0 else "Stable",
    )
    record = Record(ClassicGroupMetadataKey("connect-cluster"), value)
    key, raw = encode(record, version)
    assert decode(key, raw) == record
