"""Where records come from: the live topic, or a dump file `coordinator dump` wrote.

Both give the same thing, `RawRecord`s: partition, offset, timestamp and the key and value bytes
exactly as the topic holds them, in offset order within each partition. Nothing is decoded here:
deciding what bytes mean is `records.decode`'s job, and `replay.history` decides which records to
decode at all (a group's question decodes only that group's values).

The topic is read as a coordinator loads a partition (`coordinator.service.log.load_partition`):
read_committed, partitions assigned (no consumer group membership, nothing committed), from the
window's start to the end offset captured when the read starts, so a live topic gives a finite,
consistent read. As in `load_partition`, watermarks are read first, so an empty partition is known
empty without waiting for a position, and times are also checked on each record: the window is
exact whatever `offsets_for_times` answers (the broker only saves reading). A window's end in time does not end
the read early: timestamps are the producers' clocks, which need not grow with offsets across a
failover, and a read of the topic must give what a read of its dump gives.

Dump files come in two formats, told apart by their first bytes:

- JSON lines (`--format jsonl`): a header line, then one object per record with the key and value
  base64-encoded (`null` value for a tombstone). Greppable, any tool can read it.
- binary (`--format binary`, the default): `_MAGIC`, a big-endian uint16 format version, a uint32
  length and the same JSON header, then per record `>iqqii` (partition, offset, timestamp, key
  length, value length or -1 for a tombstone) followed by the key and value bytes. About half the
  size of JSON lines and several times faster to read.
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from coordinator.tools.partitions import LogError, read_range, reader_config
from replay.errors import ReplayError
from replay.positions import RawRecord, Window

DUMP_FORMATS = ("binary", "jsonl")
_MAGIC = b"WCDUMP\r\n\x1a\n"  # like PNG's: a text-mode copy or a truncated download shows at once
_FORMAT_VERSION = 1
_HEADER = struct.Struct(">HI")
_RECORD = struct.Struct(">iqqii")
_CHUNK = 1 << 22

# librdkafka logs every failed connection attempt; a command reports the failure in one line instead.
_LIBRDKAFKA_LOG = logging.getLogger("replay.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
_LIBRDKAFKA_LOG.propagate = False

_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}

# Called with (units done, units in all) as a read goes; units are offsets or bytes.
ProgressFn = Callable[[int, int], None]


class SourceError(ReplayError):
    """The topic or the dump file cannot be read; said in one line."""


def _in_window(window: Window) -> Callable[[RawRecord], bool] | None:
    """A per-record check of the window's bounds, or None when the window is open."""
    if window == Window():
        return None
    low_o = -1 if window.from_offset is None else window.from_offset
    high_o = 2**63 if window.to_offset is None else window.to_offset
    low_t = -(2**63) if window.from_time_ms is None else window.from_time_ms
    high_t = 2**63 if window.to_time_ms is None else window.to_time_ms
    return lambda r: low_o <= r.offset <= high_o and low_t <= r.timestamp_ms <= high_t


# --- the live topic ----------------------------------------------------------------------------------


def read_topic(
    config: Mapping[str, str],
    topic: str,
    *,
    partitions: Iterable[int] | Callable[[int], Iterable[int]] | None = None,
    window: Window = Window(),
    timeout_s: float = 30.0,
    progress: ProgressFn | None = None,
) -> Iterator[RawRecord]:
    """The records of `topic` (all partitions, or `partitions`, one after the other) in `window`,
    up to each partition's end offset when the read starts. `partitions` may be a function of the
    topic's partition count (a group's partition is). Raises SourceError."""
    consumer = open_consumer(config)
    try:
        count = partition_count(consumer, topic, timeout_s, config)
        if callable(partitions):
            partitions = partitions(count)
        wanted = sorted(set(partitions)) if partitions is not None else list(range(count))
        for p in wanted:
            if not 0 <= p < count:
                raise SourceError(f"topic {topic} has partitions 0-{count - 1}; there is no partition {p}")
        ranges = [_range(consumer, topic, p, window, timeout_s) for p in wanted]
        total = sum(max(0, end - start) for _, start, end in ranges)
        done = 0
        keep = _in_window(window)
        for p, start, end in ranges:
            if start >= end:
                continue  # empty, or nothing in the window: no fetch would ever move the position
            for record in read_partition(consumer, topic, p, start, end, timeout_s):
                if keep is None or keep(record):
                    yield record
                if progress is not None and not record.offset & 4095:
                    progress(done + record.offset - start, total)
            done += end - start
        if progress is not None:
            progress(total, total)
    except KafkaException as e:
        raise SourceError(kafka_message(e, config, timeout_s)) from None
    finally:
        consumer.close()


def open_consumer(config: Mapping[str, str]) -> Consumer:
    try:
        # fetch.wait.max.ms: a read goes partition after partition, and each switch otherwise waits
        # out the fetch left pending on the finished one (0.5 s by default; 8 s on 16 partitions).
        return Consumer(
            {
                **reader_config(config, "worker-coordinator-replay", **{"fetch.wait.max.ms": 10}),
                "logger": _LIBRDKAFKA_LOG,
            }
        )
    except KafkaException as e:
        raise SourceError(f"invalid Kafka client configuration: {e.args[0].str()}", invalid_input=True) from None


def partition_count(consumer: Consumer, topic: str, timeout_s: float, config: Mapping[str, str]) -> int:
    """How many partitions `topic` has; raises SourceError (missing topic, Kafka unreachable)."""
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
    except KafkaException as e:
        raise SourceError(kafka_message(e, config, timeout_s)) from None
    found = metadata.topics.get(topic)
    if found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise SourceError(f"topic {topic} does not exist on {config.get('bootstrap.servers')}")
    if found.error is not None:
        raise SourceError(kafka_message(KafkaException(found.error), config, timeout_s))
    return len(found.partitions)


def _range(consumer: Consumer, topic: str, partition: int, window: Window, timeout_s: float) -> tuple[int, int, int]:
    """(partition, first offset to read, end offset) for the window, the end captured now."""
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
    start, end = low, high
    if window.from_offset is not None:
        start = max(start, window.from_offset)
    if window.to_offset is not None:
        end = min(end, window.to_offset + 1)
    if window.from_time_ms is not None and start < end:
        (found,) = consumer.offsets_for_times(
            [TopicPartition(topic, partition, window.from_time_ms)], timeout=timeout_s
        )
        if found.error is None:
            # -1: no record at or after that time. Anything else is only a hint (see the module
            # docstring): records are checked against the window's times as they come.
            start = end if found.offset < 0 else max(start, min(found.offset, end))
    return partition, start, end


def read_partition(
    consumer: Consumer, topic: str, partition: int, start: int, end: int, timeout_s: float
) -> Iterator[RawRecord]:
    try:
        for message in read_range(consumer, topic, partition, start, end, timeout_s):
            yield RawRecord(partition, message.offset(), message.timestamp()[1], message.key() or b"", message.value())
    except LogError as e:
        raise SourceError(str(e)) from None


def kafka_message(e: KafkaException, config: Mapping[str, str], timeout_s: float) -> str:
    error = e.args[0] if e.args else None
    if isinstance(error, KafkaError):
        if error.code() in _UNREACHABLE:
            return f"cannot reach Kafka at {config.get('bootstrap.servers')} within {timeout_s:g}s ({error.str()})"
        return f"{error.name()}: {error.str()}"
    return str(e)


# --- dump files --------------------------------------------------------------------------------------


def dump_header(source: str, topic: str | None, partitions: Iterable[int] | None) -> dict[str, Any]:
    """What a dump says about itself: the tool and version, and where its records came from."""
    return {
        "dump": "worker-coordinator",
        "version": _FORMAT_VERSION,
        "source": source,
        "topic": topic,
        "partitions": None if partitions is None else sorted(partitions),
        "written_at_ms": int(time.time() * 1000),
    }


def write_dump(out: IO[bytes], records: Iterable[RawRecord], fmt: str, header: dict[str, Any]) -> int:
    """Write `records` to the binary stream `out` as a dump; returns how many."""
    count = 0
    if fmt == "jsonl":
        out.write(orjson.dumps(header) + b"\n")
        b64 = base64.b64encode
        for r in records:
            out.write(
                orjson.dumps(
                    {
                        "partition": r.partition,
                        "offset": r.offset,
                        "timestamp_ms": r.timestamp_ms,
                        "key": b64(r.key).decode(),
                        "value": None if r.value is None else b64(r.value).decode(),
                    }
                )
                + b"\n"
            )
            count += 1
    elif fmt == "binary":
        head = orjson.dumps(header)
        out.write(_MAGIC + _HEADER.pack(_FORMAT_VERSION, len(head)) + head)
        pack = _RECORD.pack
        for r in records:
            value = r.value
            out.write(pack(r.partition, r.offset, r.timestamp_ms, len(r.key), -1 if value is None else len(value)))
            out.write(r.key)
            if value is not None:
                out.write(value)
            count += 1
    else:
        raise ValueError(f"unknown dump format {fmt!r}; expected one of {', '.join(DUMP_FORMATS)}")
    return count


def read_dump(
    path: str | Path,
    *,
    partitions: Iterable[int] | None = None,
    window: Window = Window(),
    progress: ProgressFn | None = None,
) -> Iterator[RawRecord]:
    """The records of a dump file (either format, told from its first bytes) in `window`."""
    path = Path(path)
    try:
        f = path.open("rb")
    except OSError as e:
        raise SourceError(f"cannot read dump file {path}: {e.strerror}") from None
    with f:
        size = max(1, path.stat().st_size)
        start = f.read(len(_MAGIC))
        if start == _MAGIC:
            records = _binary_records(f, path)
        elif start[:1] == b"{":
            records = _jsonl_records(f, start, path)
        else:
            raise SourceError(f"{path} is not a dump file written by `coordinator dump`")
        wanted = None if partitions is None else frozenset(partitions)
        keep = _in_window(window)
        n = 0
        for record in records:
            if (wanted is None or record.partition in wanted) and (keep is None or keep(record)):
                yield record
            n += 1
            if progress is not None and not n & 4095:
                progress(f.tell(), size)
        if progress is not None:
            progress(size, size)


def _json_header(line: bytes, path: Path) -> dict[str, Any]:
    try:
        header = orjson.loads(line)
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("dump") != "worker-coordinator":
        raise SourceError(f"{path} is not a dump file written by `coordinator dump`")
    if header.get("version") != _FORMAT_VERSION:
        raise SourceError(
            f"{path} is dump format version {header.get('version')}; this reader knows version {_FORMAT_VERSION}"
        )
    return header


def _binary_header(f: IO[bytes], path: Path) -> dict[str, Any]:
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise SourceError(f"{path} ends inside its header")
    version, length = _HEADER.unpack(head)
    if version != _FORMAT_VERSION:
        raise SourceError(f"{path} is dump format version {version}; this reader knows version {_FORMAT_VERSION}")
    return _json_header(f.read(length), path)


def _jsonl_records(f: IO[bytes], start: bytes, path: Path) -> Iterator[RawRecord]:
    _json_header(start + f.readline(), path)
    b64 = base64.b64decode
    loads = orjson.loads
    for number, line in enumerate(f, start=2):
        if not line.strip():
            continue
        try:
            o = loads(line)
            value = o["value"]
            yield RawRecord(
                o["partition"], o["offset"], o["timestamp_ms"], b64(o["key"]), None if value is None else b64(value)
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, binascii.Error):
            raise SourceError(f"{path}:{number}: not a dump record") from None


def _binary_records(f: IO[bytes], path: Path) -> Iterator[RawRecord]:
    _binary_header(f, path)
    unpack = _RECORD.unpack_from
    size = _RECORD.size
    buf = b""
    pos = 0
    make = RawRecord._make
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        buf = buf[pos:] + chunk
        pos = 0
        n = len(buf)
        while pos + size <= n:
            partition, offset, timestamp, key_len, value_len = unpack(buf, pos)
            body = pos + size
            end = body + key_len + (value_len if value_len > 0 else 0)
            if key_len < 0 or value_len < -1:
                raise SourceError(f"{path}: corrupt dump record at byte {f.tell() - n + pos}")
            if end > n:
                break
            key_end = body + key_len
            yield make((partition, offset, timestamp, buf[body:key_end], None if value_len < 0 else buf[key_end:end]))
            pos = end
    if pos != len(buf):
        raise SourceError(f"{path} ends in the middle of a record: the dump is truncated")
