"""Where in the log: a record's position, the record read there, the window a read covers, the points
questions are asked at.

A position is (partition, offset, timestamp). Offsets are per partition, and a group lives in one
partition (`coordinator.tools.partitions.partition_for`), so "offset 1234" is unambiguous for a group's
questions. Times are the records' Kafka timestamps: the producer's clock when the coordinator wrote
the batch, in epoch milliseconds; they are shown in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

# A plain number given where an offset or a time is accepted is an offset below this, and epoch
# milliseconds from it: 10^11 ms is March 1973, and no partition of a compacted topic reaches
# 10^11 offsets.
_EPOCH_MS_FROM = 10**11


class Position(NamedTuple):
    """Where a record is. A tuple: `History` makes one per record, and a frozen dataclass costs
    several times as much to build."""

    partition: int
    offset: int
    timestamp_ms: int


class RawRecord(NamedTuple):
    """One record of the topic, undecoded, where it was read: what `replay.source` reads (the topic
    or a dump file) and `replay.history` replays. `value` None is a tombstone."""

    partition: int
    offset: int
    timestamp_ms: int
    key: bytes
    value: bytes | None


@dataclass(slots=True, frozen=True)
class Window:
    """The part of the log a read covers; every bound is inclusive, None is open."""

    from_offset: int | None = None
    to_offset: int | None = None
    from_time_ms: int | None = None
    to_time_ms: int | None = None


@dataclass(slots=True, frozen=True)
class Point:
    """A point in a group's log: after the record at `offset`, or after every record up to `time_ms`."""

    offset: int | None = None
    time_ms: int | None = None

    def passed_by(self, offset: int, timestamp_ms: int) -> bool:
        """Whether a record at (offset, timestamp) comes after this point."""
        if self.offset is not None:
            return offset > self.offset
        return timestamp_ms > self.time_ms  # type: ignore[operator]

    def __str__(self) -> str:
        return f"offset {self.offset}" if self.offset is not None else format_time(self.time_ms)  # type: ignore[arg-type]


def parse_time(text: str) -> int:
    """ISO 8601 (`2026-03-01T03:12:00Z`, `2026-03-01 03:12`; no zone means UTC) or epoch milliseconds."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"expected an ISO 8601 time or epoch milliseconds, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_point(text: str) -> Point:
    """OFFSET or TIME: a number below 10^11 is an offset, a larger one epoch ms; else ISO 8601."""
    stripped = text.strip()
    if stripped.isdigit() and int(stripped) < _EPOCH_MS_FROM:
        return Point(offset=int(stripped))
    return Point(time_ms=parse_time(stripped))


def format_time(ms: int) -> str:
    """`2026-03-01 03:12:00.250` (UTC)."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def format_clock(ms: int) -> str:
    """`03:12:00` (UTC): a time of day, for text that already says which day."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def format_duration(ms: int) -> str:
    """`250 ms`, `12.5 s`, `4 min 10 s`, `1 min`, `2 h 05 min`."""
    if ms < 1_000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s".replace(".0 s", " s")
    if ms < 3_600_000:
        seconds = ms % 60_000 // 1000
        return f"{ms // 60_000} min" + (f" {seconds:02d} s" if seconds else "")
    minutes = ms % 3_600_000 // 60_000
    return f"{ms // 3_600_000} h" + (f" {minutes:02d} min" if minutes else "")
