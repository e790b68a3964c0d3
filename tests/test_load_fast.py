"""Loading through compaction's view (`coordinator.service.log.LatestPerKey`) gives the state that
replaying every record gives, on a real broker: the scripted and random histories of the replay
tests, their compacted form, the golden records, the benchmark's partition, hypothesis-made logs with tombstones, corrupt
records and format-level records.

The record-by-record load is `load_partition` with a subclass of CoordinatorState (a state that
watches `replay_all` gets every record, in topic order); the fast one with a plain CoordinatorState.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from records import (
    FORMAT_LEVELS,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    FormatLevelKey,
    FormatLevelValue,
    MemberMetadataKey,
    MemberMetadataValue,
    Record,
    encode,
)

from coordinator.core.state import CoordinatorState
from coordinator.service.log import UnreadableFormatLevel, load_partition
from tests.replay_scenarios import on_call_story, random_story
from tests.strategies import VALUES
from tests.topics import create_topic

pytestmark = pytest.mark.integration

Entry = tuple[bytes | None, bytes | None]


class EveryRecord(CoordinatorState):
    """Loaded record by record: how every partition was loaded before compaction's view."""

    __slots__ = ()


def _write(kafka_broker, topic: str, entries: list[Entry]) -> None:  # noqa: ANN001
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "linger.ms": 5})
    for key, value in entries:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0


def _load(kafka_broker, topic: str, state: CoordinatorState):  # noqa: ANN001, ANN202
    try:
        return load_partition(kafka_broker.client_config(), topic, 0, state), state
    except UnreadableFormatLevel as e:
        return str(e), None


def _instances(state: CoordinatorState) -> dict:
    return {g: dict(group._instances) for g, group in state.groups.items()}


def _assert_same_load(kafka_broker, topic: str, *, caches: bool = True) -> tuple:  # noqa: ANN001
    """Both loads of `topic`: the same slots, format level and classic groups; the fast one reports
    the corrupt records that are the last of their key (all of them if it fell back)."""
    old, old_state = _load(kafka_broker, topic, EveryRecord())
    new, new_state = _load(kafka_broker, topic, CoordinatorState())
    if old_state is None or new_state is None:
        assert new == old  # both refuse the partition, for the same record
        return old, new
    assert new_state.slots() == old_state.slots()
    assert new_state.format_level_record == old_state.format_level_record
    assert new_state.classic_groups.keys() == old_state.classic_groups.keys()
    assert set(new_state.groups) == set(old_state.groups)
    if caches:  # caches that depend on the order across keys: equal on histories the protocol wrote
        assert _instances(new_state) == _instances(old_state)
        assert {g: s.owners() for g, s in new_state.groups.items()} == {
            g: s.owners() for g, s in old_state.groups.items()
        }
    assert new.end_offset == old.end_offset
    assert new.records + len(new.corrupt) == old.records + len(old.corrupt)  # every record read is one or the other
    assert set(new.corrupt) <= set(old.corrupt)
    return old, new


def _compacted(entries: list[Entry]) -> list[Entry]:
    """What log compaction leaves (before tombstones expire): the last record of each key, in order."""
    last = {key: i for i, (key, _) in enumerate(entries)}
    return [entries[i] for i in sorted(last.values())]


def _histories() -> list[Entry]:
    log = list(on_call_story().driver.log)
    for seed in range(6):
        log += random_story(seed, group=f"random-{seed}", server_side=seed % 2 == 1).log
    return [encode(record) for record in log]


@pytest.mark.parametrize("compact", [False, True], ids=["live", "compacted"])
def test_the_replay_histories_load_to_the_same_state(kafka_broker, unique_topic: str, compact: bool) -> None:  # noqa: ANN001
    entries = _histories()
    if compact:
        entries = _compacted(entries)
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    _write(kafka_broker, unique_topic, entries)
    old, new = _assert_same_load(kafka_broker, unique_topic)
    assert new.records == len(entries) and not new.corrupt and not old.corrupt


def test_the_golden_records_load_to_the_same_state(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    golden = json.loads((Path(__file__).parent / "golden" / "records.json").read_text())
    entries = [
        (bytes.fromhex(case["key"]), None if case["value"] is None else bytes.fromhex(case["value"]))
        for case in golden.values()
    ]
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    _write(kafka_broker, unique_topic, entries + entries[::-1])  # each key superseded by itself, reversed
    _assert_same_load(kafka_broker, unique_topic)


def test_the_benchmark_partition_loads_to_the_same_state(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    """bench/bench_service.py's partition (group histories copied under many ids), smaller."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # as the benchmark runs
    from bench_service import large_log

    entries, _ = large_log(20_000, 0, 1)
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    _write(kafka_broker, unique_topic, entries)
    old, new = _assert_same_load(kafka_broker, unique_topic)
    assert new.records == len(entries) and not new.corrupt


GOOD = encode(Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(7)))
LATER = encode(Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(9)))
OTHER = encode(Record(ConnectGroupMetadataKey("h"), ConnectGroupMetadataValue(3)))
BROKEN = b"\x00\x00\xff\xff\xff"  # a version-0 body that runs past its end


@pytest.mark.parametrize(
    ("entries", "epochs", "reported"),
    [
        # The last value of its key is corrupt: the slot keeps the last value that decodes, and
        # every corrupt record is reported (the load fell back to replaying every record).
        ([GOOD, (GOOD[0], BROKEN), OTHER, (LATER[0], BROKEN)], {"g": 7, "h": 3}, [1, 3]),
        # A corrupt key: each of its records is reported.
        ([GOOD, (b"\x7f\x7f", None), OTHER, (b"\x7f\x7f", b"")], {"g": 7, "h": 3}, [1, 3]),
        # Not decoded, so not reported (neither changes the state): a corrupt value that a later
        # record of its key replaces, and a corrupt key whose last record is a tombstone.
        ([(GOOD[0], BROKEN), OTHER, LATER], {"g": 9, "h": 3}, []),
        ([GOOD, (b"\x7f\x7f", b""), OTHER, (b"\x7f\x7f", None)], {"g": 7, "h": 3}, []),
    ],
    ids=["last-value-corrupt", "corrupt-key", "superseded-corrupt-value", "corrupt-key-ending-in-a-tombstone"],
)
def test_corrupt_records(kafka_broker, unique_topic: str, entries: list[Entry], epochs: dict, reported: list) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    _write(kafka_broker, unique_topic, entries)
    old, new = _assert_same_load(kafka_broker, unique_topic)
    assert [offset for offset, _ in new.corrupt] == reported
    assert new.records == len(entries) - len(new.corrupt)
    state = CoordinatorState()
    load_partition(kafka_broker.client_config(), unique_topic, 0, state)
    assert {g: group.group_epoch for g, group in state.groups.items()} == epochs


def test_a_superseded_unreadable_format_level_is_refused_as_before(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    key = FormatLevelKey(FormatLevelKey.PARTITION)
    unreadable = max(FORMAT_LEVELS) + 1
    entries = [GOOD, encode(Record(key, FormatLevelValue(unreadable))), encode(Record(key, FormatLevelValue(1)))]
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    _write(kafka_broker, unique_topic, entries)
    old, new = _assert_same_load(kafka_broker, unique_topic)
    assert isinstance(new, str) and f"level {unreadable} (offset 1)" in new


def test_tombstones_of_the_last_record_empty_a_state_that_held_the_key(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    _write(kafka_broker, unique_topic, [GOOD, (GOOD[0], None), OTHER])
    state = CoordinatorState()
    state.replay(Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(1)))  # held before the load
    load_partition(kafka_broker.client_config(), unique_topic, 0, state)
    assert set(state.groups) == {"h"}


def test_keys_are_replayed_in_the_order_of_their_last_records(kafka_broker, unique_topic: str) -> None:  # noqa: ANN001
    """Which member a static instance id points to depends on the order across keys: A and B both
    claim it, then A writes again. Replaying every record leaves it with A; so must the view."""

    def member(member_id: str, epoch: int) -> Entry:
        value = MemberMetadataValue(epoch, "static-1", "client", "/10.0.0.1", None, 60_000, None)
        return encode(Record(MemberMetadataKey("g", member_id), value))

    create_topic(kafka_broker.bootstrap_servers, unique_topic)
    _write(kafka_broker, unique_topic, [member("A", 1), member("B", 1), member("A", 2)])
    _assert_same_load(kafka_broker, unique_topic)
    state = CoordinatorState()
    load_partition(kafka_broker.client_config(), unique_topic, 0, state)
    assert state.groups["g"].member_with_instance("static-1") == "A"


# Hypothesis: logs of every record type over a few group and member ids (so that records supersede
# each other), with tombstones, corrupt values, corrupt keys and format levels this release reads.
_group_ids = st.sampled_from(["a", "b", "c"])
_member_ids = st.sampled_from(["m1", "m2", "m3", "m4"])


def _key(record_type: int):  # noqa: ANN202
    from records import RECORD_TYPES, GroupMemberKey

    key_class = RECORD_TYPES[record_type].key_class
    if key_class is FormatLevelKey:
        return st.just(FormatLevelKey(FormatLevelKey.PARTITION))
    if issubclass(key_class, GroupMemberKey):
        return st.builds(key_class, _group_ids, _member_ids)
    return st.builds(key_class, _group_ids)


def _value(record_type: int):  # noqa: ANN202
    if record_type == 10:
        return st.builds(FormatLevelValue, st.sampled_from(sorted(FORMAT_LEVELS)))
    return VALUES[record_type]


_entry = st.one_of(
    st.sampled_from(sorted(VALUES)).flatmap(lambda t: st.builds(Record, _key(t), st.none() | _value(t))).map(encode),
    st.tuples(_key(3).map(lambda k: encode(Record(k, None))[0]), st.binary(max_size=6)),  # a corrupt value, mostly
    st.tuples(st.binary(max_size=4), st.none() | st.binary(max_size=4)),  # a corrupt key, mostly
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(entries=st.lists(_entry, min_size=1, max_size=30))
def test_hypothesis_logs_load_to_the_same_state(kafka_broker, entries: list[Entry]) -> None:  # noqa: ANN001
    import uuid

    topic = f"test-load-fast-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap_servers, topic)
    _write(kafka_broker, topic, entries)
    # Random values may give two members one static instance id or one task: the caches that
    # depend on the order across keys are compared on the protocol's histories above.
    old, new = _assert_same_load(kafka_broker, topic, caches=False)
    if not isinstance(new, str):
        # Decoded, so reported: the last record of each key, but for a last tombstone (a no-op on a
        # fresh state, left out).
        last = {key: i for i, (key, _) in enumerate(entries)}
        decoded = {i for i in last.values() if entries[i][1] is not None}
        corrupt_last = {offset for offset, _ in old.corrupt if offset in decoded}
        if corrupt_last:  # fell back: every corrupt record reported
            assert new.corrupt == old.corrupt
        assert {offset for offset, _ in new.corrupt} >= corrupt_last
