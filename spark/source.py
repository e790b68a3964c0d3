"""`worker_offsets`: a Spark data source that reads the topic with confluent-kafka (DESIGN §10).

    spark.dataSource.register(WorkerOffsetsDataSource)
    df = (spark.readStream.format("worker_offsets")
          .option("kafka.bootstrap.servers", "127.0.0.1:19092")
          .option("topic", "__worker_offsets")
          .load())

Rows are `spark.decode.SCHEMA`: decoded inside `read()` on Spark's Python workers.

Options (names as in Spark's own Kafka source, so users know them):

- `kafka.bootstrap.servers` (required) and any other `kafka.<librdkafka setting>` (security etc.);
- `topic` (default `__worker_offsets`);
- `startingOffsets`: `earliest` (default), `latest`, or JSON `{"<topic>": {"0": 23, "1": -2}}` where
  -2 is earliest and -1 latest; partitions it leaves out start at earliest;
- `maxOffsetsPerTrigger`: at most this many offsets per micro-batch, shared between partitions in
  proportion to what each has waiting (ignored by an available-now trigger's last batch only as
  Spark asks: it passes ReadAllAvailable then);
- `minPartitions`: split a batch into at least this many Spark tasks (one per Kafka partition
  otherwise), so one busy partition still uses every core;
- `timeoutSeconds` (default 30): how long a read may wait on Kafka before it fails.

Offsets in the checkpoint are `{"<topic>": {"<partition>": <next offset>}}`, Spark's Kafka source's
shape. A range is read from its start until the consumer's position reaches its end, not until a
message with offset end-1 arrives: compaction and transaction markers leave offsets without
messages, so counting messages would wait forever. Reads are read_committed, and the end offsets
are read the same way (librdkafka lists offsets at the consumer's isolation level: the last stable
offset), so a batch never waits on an open transaction.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import orjson
from confluent_kafka import Consumer, KafkaException, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from replay.source import SourceError, kafka_message, open_consumer, partition_count, read_partition
from spark.decode import decode_batch, spark_schema

DEFAULT_TOPIC = "__worker_offsets"
EARLIEST, LATEST = -2, -1
_BATCH_ROWS = 65_536  # rows per Arrow batch handed to Spark


def reader_options(kafka: Mapping[str, str], topic: str, *, starting_offsets: str = "earliest",
                   max_offsets_per_trigger: int | None = None, min_partitions: int | None = None) -> dict[str, str]:
    """The source's options for a librdkafka configuration and the rest, as `.options(**...)` takes them."""
    options = {f"kafka.{k}": v for k, v in kafka.items()}
    options.update(topic=topic, startingOffsets=starting_offsets)
    if max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    if min_partitions:
        options["minPartitions"] = str(min_partitions)
    return options


class OptionError(ValueError):
    """An option of the data source that cannot be used; says which and why."""


@dataclass(frozen=True)
class Options:
    kafka: dict[str, str]
    topic: str
    starting: str
    max_offsets: int | None
    min_partitions: int
    timeout_s: float

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Options:
        options = {k.lower(): v for k, v in options.items()}
        kafka = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
        if "bootstrap.servers" not in kafka:
            raise OptionError("option kafka.bootstrap.servers is required")
        return cls(kafka, options.get("topic", DEFAULT_TOPIC), options.get("startingoffsets", "earliest").strip(),
                   _positive(options, "maxoffsetspertrigger"), _positive(options, "minpartitions") or 1,
                   float(_positive(options, "timeoutseconds") or 30))


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise OptionError(f"option {name} must be a positive integer, not {text!r}")
    return value


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark task: offsets [start, end) of one partition."""

    partition: int
    start: int
    end: int


class WorkerOffsetsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "worker_offsets"

    def schema(self):  # noqa: ANN201 - a StructType
        return spark_schema()

    def streamReader(self, schema) -> WorkerOffsetsStreamReader:  # noqa: ANN001
        return WorkerOffsetsStreamReader(Options.parse(self.options))

    def reader(self, schema) -> WorkerOffsetsBatchReader:  # noqa: ANN001
        return WorkerOffsetsBatchReader(Options.parse(self.options))


class _Topic:
    """The driver's view of the topic: partitions and their offsets, asked with one consumer."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self._consumer: Consumer | None = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = open_consumer(self.options.kafka)
        return self._consumer

    def watermarks(self) -> dict[int, tuple[int, int]]:
        """Partition -> (earliest, end) offsets now."""
        o = self.options
        try:
            consumer = self._client()
            count = partition_count(consumer, o.topic, o.timeout_s, o.kafka)
            return {p: consumer.get_watermark_offsets(TopicPartition(o.topic, p), timeout=o.timeout_s)
                    for p in range(count)}
        except KafkaException as e:
            raise SourceError(kafka_message(e, o.kafka, o.timeout_s)) from None

    def initial(self) -> dict[int, int]:
        marks = self.watermarks()
        starting = self.options.starting
        if starting == "earliest":
            return {p: low for p, (low, _) in marks.items()}
        if starting == "latest":
            return {p: high for p, (_, high) in marks.items()}
        try:
            given = orjson.loads(starting)[self.options.topic]
            asked = {int(p): int(o) for p, o in given.items()}
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            raise OptionError(f"startingOffsets must be earliest, latest or JSON like "
                              f'{{"{self.options.topic}": {{"0": 23, "1": -2}}}}, not {starting!r}') from None
        out = {}
        for p, (low, high) in marks.items():
            o = asked.get(p, EARLIEST)
            out[p] = low if o == EARLIEST else high if o == LATEST else min(max(o, low), high)
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _to_json(topic: str, offsets: Mapping[int, int]) -> dict:
    return {topic: {str(p): o for p, o in sorted(offsets.items())}}


def _from_json(topic: str, offset: dict) -> dict[int, int]:
    return {int(p): int(o) for p, o in offset.get(topic, {}).items()}


def limit_offsets(start: Mapping[int, int], latest: Mapping[int, int], max_offsets: int) -> dict[int, int]:
    """End offsets at most `max_offsets` past `start` in all, shared in proportion to what each
    partition has waiting (at least one offset each while any waits, so none starves)."""
    waiting = {p: max(0, latest[p] - start.get(p, latest[p])) for p in latest}
    total = sum(waiting.values())
    if total <= max_offsets:
        return dict(latest)
    out = {}
    for p, lag in waiting.items():
        share = max(1, lag * max_offsets // total) if lag else 0
        out[p] = start.get(p, latest[p]) + min(lag, share)
    return out


def split_ranges(start: Mapping[int, int], end: Mapping[int, int], min_partitions: int) -> list[OffsetRange]:
    """The batch's offset ranges, one per partition with something to read, split further (in
    equal parts of the largest) until there are at least `min_partitions`."""
    ranges = [OffsetRange(p, start.get(p, end[p]), end[p]) for p in sorted(end) if end[p] > start.get(p, end[p])]
    total = sum(r.end - r.start for r in ranges)
    if not ranges or len(ranges) >= min_partitions or total < min_partitions:
        return ranges
    step = -(-total // min_partitions)
    out = []
    for r in ranges:
        out += [OffsetRange(r.partition, s, min(s + step, r.end)) for s in range(r.start, r.end, step)]
    return out


def read_range(options: Options, part: OffsetRange) -> Iterator:
    """The decoded records of one range, as Arrow batches (runs on a Spark Python worker)."""
    consumer = open_consumer(options.kafka)
    # Decoding builds millions of small objects that all stay alive until the batch is handed on:
    # the cyclic collector would only walk them again (measured: 20 -> 16 µs per record).
    collecting = gc.isenabled()
    gc.disable()
    try:
        cols: tuple[list, ...] = ([], [], [], [], [])
        ps, os_, ts, ks, vs = cols
        for r in read_partition(consumer, options.topic, part.partition, part.start, part.end, options.timeout_s):
            ps.append(r.partition)
            os_.append(r.offset)
            ts.append(r.timestamp_ms)
            ks.append(r.key)
            vs.append(r.value)
            if len(ps) >= _BATCH_ROWS:
                yield decode_batch(*cols)
                for c in cols:
                    c.clear()
        if ps:
            yield decode_batch(*cols)
    finally:
        consumer.close()
        if collecting:
            gc.enable()


class WorkerOffsetsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Options) -> None:
        self.options = options
        self._topic = _Topic(options)
        self._cap: dict[int, int] | None = None  # the end an available-now trigger stops at
        self._ends: dict[int, int] | None = None  # the end offsets latestOffset saw last

    def initialOffset(self) -> dict:
        return _to_json(self.options.topic, self._topic.initial())

    def getDefaultReadLimit(self):  # noqa: ANN201
        o = self.options.max_offsets
        return ReadAllAvailable() if o is None else ReadMaxRows(o)

    def prepareForTriggerAvailableNow(self) -> None:
        self._cap = {p: high for p, (_, high) in self._topic.watermarks().items()}

    def latestOffset(self, start: dict, limit) -> dict:  # noqa: ANN001
        topic = self.options.topic
        begun = _from_json(topic, start)
        marks = self._topic.watermarks()
        self._ends = {p: high for p, (_, high) in marks.items()}
        latest = dict(self._ends) if self._cap is None else dict(self._cap)
        # A partition the topic gained since the start begins at its earliest offset.
        begun = {p: begun.get(p, marks[p][0] if p in marks else 0) for p in latest}
        latest = {p: max(latest[p], begun[p]) for p in latest}
        if isinstance(limit, ReadMaxRows):
            latest = limit_offsets(begun, latest, limit.max_rows)
        return _to_json(topic, latest)

    def reportLatestOffset(self) -> dict | None:
        # The ends latestOffset asked for in this trigger: asking again would double the requests.
        return None if self._ends is None else _to_json(self.options.topic, self._ends)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        topic = self.options.topic
        return split_ranges(_from_json(topic, start), _from_json(topic, end), self.options.min_partitions)

    def read(self, partition: OffsetRange) -> Iterator:
        return read_range(self.options, partition)

    def commit(self, end: dict) -> None:
        pass  # nothing to acknowledge: the checkpoint is Spark's, the topic is only read

    def stop(self) -> None:
        self._topic.close()


class WorkerOffsetsBatchReader(DataSourceReader):
    """`spark.read.format("worker_offsets")`: the topic from `startingOffsets` to its end now."""

    def __init__(self, options: Options) -> None:
        self.options = options

    def partitions(self) -> list[OffsetRange]:
        topic = _Topic(self.options)
        try:
            start = topic.initial()
            end = {p: high for p, (_, high) in topic.watermarks().items()}
        finally:
            topic.close()
        return split_ranges(start, end, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator:
        if not isinstance(partition, OffsetRange):
            return iter(())  # Spark reads one placeholder partition when partitions() found nothing to read
        return read_range(self.options, partition)
