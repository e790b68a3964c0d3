"""`coordinator topic create|describe|validate|alter`: the coordinator's compacted topic.

The topic is the coordinator's only storage: a group's state is the replay of its records (DESIGN
§3), and the latest record per key must stay readable forever. Two properties follow, and
`validate` insists on both: the cleanup policy is exactly `compact` (retention would delete live
state), and the partition count never changes (a group lives in partition murmur2(group_id) % N,
so a new N sends groups to partitions that do not hold their records).

`alter` brings an existing topic's settings to those `create` sets (a topic created before one of
them existed, such as max.message.bytes), without a Kafka tool.

Existence is decided from metadata, not from DescribeConfigs, and a config a broker does not list
means the broker default: brokers of other vendors differ in what DescribeConfigs returns.
"""

from __future__ import annotations

import argparse
import functools
import logging
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
    TopicMetadata,
)

from records import DEFAULT_FORMAT_LEVEL, MAX_FORMAT_LEVEL, FormatLevelKey, RecordDecodeError, decode

from coordinator.errors import CliError
from coordinator.tools import format_levels, kafka_config, partitions

DEFAULT_PARTITIONS = 16
_INT16 = struct.Struct(">h")
DEFAULT_TIMEOUT = 15.0

# Apache Kafka's defaults for the configs `validate` reads, for brokers that omit unset configs.
_BROKER_DEFAULTS = {
    "cleanup.policy": "delete",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
}

# The errors a first metadata request fails with when no broker could be reached in time.
_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}

# librdkafka logs every failed connection attempt; a command reports the last error in one line
# instead. The records still reach an application that configures logging.
_LIBRDKAFKA_LOG = logging.getLogger("coordinator.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
_LIBRDKAFKA_LOG.propagate = False  # not even when a long-running command configures logging


# The largest record batch the topic takes, and the coordinator's producer sends. A member's target
# or current assignment record holds its tasks: tens of thousands of tasks exceed Kafka's 1 MiB.
MAX_MESSAGE_BYTES = 16 << 20


def topic_configs(replication_factor: int) -> dict[str, str]:
    """The topic configs `create` sets, before `--config` overrides."""
    configs = {
        # A group's state is the latest record per key; deletion by retention would lose it.
        "cleanup.policy": "compact",
        # Records stay uncompacted for an hour so the Spark audit and `replay` see every
        # intermediate change.
        "min.compaction.lag.ms": "3600000",
        # Tombstones stay readable for 7 days so an audit that was down a few days still sees
        # member departures.
        "delete.retention.ms": "604800000",
        # Bounds how much of the log a coordinator replays at load: the active segment rolls and is
        # cleaned at least daily.
        "max.compaction.lag.ms": "86400000",
        # The segment size of __consumer_offsets, the topic this one is modelled on.
        "segment.bytes": "104857600",
        # Clean once a tenth of the log is superseded, so load replays little beyond live state.
        "min.cleanable.dirty.ratio": "0.1",
        # An unclean leader loses acknowledged records, and with them acknowledged group changes.
        "unclean.leader.election.enable": "false",
        # A large group's assignment records (see MAX_MESSAGE_BYTES).
        "max.message.bytes": str(MAX_MESSAGE_BYTES),
    }
    if replication_factor > 1:
        # acks=all must mean two copies, or one broker failure loses an acknowledged batch.
        configs["min.insync.replicas"] = str(min(2, replication_factor))
    return configs


@dataclass(frozen=True)
class Partition:
    id: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True)
class Config:
    value: str | None
    source: str


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: list[Partition]
    configs: dict[str, Config]

    @property
    def replication_factor(self) -> int:
        # The weakest partition is the one that loses data first.
        return min((len(p.replicas) for p in self.partitions), default=0)

    def setting(self, name: str) -> str:
        """The config's value, or the broker default when the broker did not report it."""
        config = self.configs.get(name)
        if config is None:
            return _BROKER_DEFAULTS[name]
        return config.value or ""

    def shown(self, name: str) -> str:
        """`name=value` for messages, saying when the value is only the broker default."""
        suffix = "" if name in self.configs else " (not set; broker default)"
        return f"{name}={self.setting(name)}{suffix}"

    @property
    def compacted(self) -> bool:
        return "compact" in _policies(self.setting("cleanup.policy"))


def _policies(value: str) -> set[str]:
    return {policy.strip() for policy in value.split(",")}


class Admin:
    """An AdminClient for one command: its arguments' connection settings and timeout."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.bootstrap_servers = args.bootstrap_servers
        self.timeout = args.timeout
        self._errors: list[KafkaError] = []
        config = {
            **kafka_config.client_config(args),
            # AdminClient is a producer handle, which asks a broker with auto.create.topics.enable to
            # create a topic it requests metadata for: looking a topic up must never create it.
            "allow.auto.create.topics": "false",
            "error_cb": self._errors.append,
            "logger": _LIBRDKAFKA_LOG,
        }
        try:
            self._client = AdminClient(config)
        except KafkaException as e:
            raise CliError(f"invalid Kafka client configuration: {e.args[0].str()}", exit_code=2) from None

    def metadata(self, topic: str) -> ClusterMetadata:
        """Cluster metadata and that of `topic`. Every command asks this first, so it is where an
        unreachable cluster shows."""
        try:
            return self._client.list_topics(topic, timeout=self.timeout)
        except KafkaException as e:
            if e.args[0].code() in _UNREACHABLE:
                raise CliError(
                    f"cannot reach Kafka at {self.bootstrap_servers} within {self.timeout:g}s{self._last_error()}"
                ) from None
            raise

    def exists(self, topic: str) -> bool:
        return _topic_metadata(self.metadata(topic), topic) is not None

    def describe(self, topic: str) -> Topic | None:
        found = _topic_metadata(self.metadata(topic), topic)
        if found is None:
            return None
        partitions = [
            Partition(p.id, p.leader, list(p.replicas), list(p.isrs))
            for p in sorted(found.partitions.values(), key=lambda p: p.id)
        ]
        return Topic(topic, partitions, self._configs(topic))

    def create(self, topic: NewTopic) -> None:
        futures = self._client.create_topics([topic], operation_timeout=self.timeout, request_timeout=self.timeout)
        futures[topic.topic].result()
        # Kafka answers CreateTopics once the controller has the topic; brokers learn of it a
        # little later, and a `validate` right after must not find it missing.
        deadline = time.monotonic() + self.timeout
        while not self.exists(topic.topic):
            if time.monotonic() > deadline:
                raise CliError(f"topic {topic.topic} was created but is not visible after {self.timeout:g}s")
            time.sleep(0.1)

    def alter(self, topic: str, configs: dict[str, str]) -> None:
        """Set `configs` on the topic and leave its other configs as they are (IncrementalAlterConfigs)."""
        entries = [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in sorted(configs.items())
        ]
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
        self._client.incremental_alter_configs([resource], request_timeout=self.timeout)[resource].result()

    def first_keyless(self, topic: Topic, client: dict[str, str]) -> tuple[int, int] | None:
        """(partition, offset) of the topic's first record without a key, or None when every record
        has one (or there is none)."""
        consumer = Consumer(
            partitions.reader_config(client, f"coordinator-topic-alter-{time.monotonic_ns()}", logger=_LIBRDKAFKA_LOG)
        )
        try:
            for p in topic.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic.name, p.id), timeout=self.timeout)
                if low >= high:
                    continue  # empty: nothing to read (and read_range would wait for a first record)
                for message in partitions.read_range(consumer, topic.name, p.id, low, high, self.timeout):
                    if message.key() is None:
                        return p.id, message.offset()
        except partitions.LogError as e:
            raise CliError(str(e)) from None
        finally:
            consumer.close()
        return None

    def format_levels(self, topic: Topic, client: dict[str, str]) -> dict[int, int]:
        """Each partition's record format level: its last type 10 record's, else the default. Reads
        every record's key header only (a type 10 value is two bytes of version and one number)."""
        header = _INT16.pack(FormatLevelKey.RECORD_TYPE)
        consumer = Consumer(
            partitions.reader_config(
                client, f"coordinator-topic-describe-{time.monotonic_ns()}", logger=_LIBRDKAFKA_LOG
            )
        )
        levels = {}
        try:
            for p in topic.partitions:
                levels[p.id] = DEFAULT_FORMAT_LEVEL
                low, high = consumer.get_watermark_offsets(TopicPartition(topic.name, p.id), timeout=self.timeout)
                if low >= high:
                    continue
                for message in partitions.read_range(consumer, topic.name, p.id, low, high, self.timeout):
                    key = message.key()
                    if key is not None and key[:2] == header and message.value() is not None:
                        try:
                            value = decode(key, message.value()).value
                        except RecordDecodeError:
                            continue  # the coordinator skips it too
                        levels[p.id] = value.level
        except partitions.LogError as e:
            raise CliError(str(e)) from None
        finally:
            consumer.close()
        return levels

    def _configs(self, topic: str) -> dict[str, Config]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        entries = self._client.describe_configs([resource], request_timeout=self.timeout)[resource].result()
        return {name: Config(entry.value, _source_name(entry.source)) for name, entry in sorted(entries.items())}

    def _last_error(self) -> str:
        # error_cb runs only when the client is polled.
        self._client.poll(0)
        causes = [e.str() for e in self._errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
        return f" (last error: {causes[-1]})" if causes else ""


def _topic_metadata(metadata: ClusterMetadata, topic: str) -> TopicMetadata | None:
    found = metadata.topics.get(topic)
    if found is None or (found.error and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return None
    if found.error:
        raise KafkaException(found.error)
    return found


def _source_name(source: int) -> str:
    try:
        return ConfigSource(source).name.lower()
    except ValueError:  # a source newer than this confluent-kafka knows
        return str(source)


# --- validate -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    level: str  # "ok", "warning" or "problem"; a problem fails validation
    message: str


def check(topic: Topic, partitions: int | None) -> Iterator[Finding]:
    """What `validate` reports about the topic; `partitions` is the expected count, if known."""
    policy = topic.setting("cleanup.policy")
    if _policies(policy) == {"compact"}:
        yield Finding("ok", topic.shown("cleanup.policy"))
    elif "delete" in _policies(policy):
        yield Finding(
            "problem",
            f"{topic.shown('cleanup.policy')}: retention would delete records, and with them group "
            "state; it must be exactly compact",
        )
    else:
        yield Finding("problem", f"{topic.shown('cleanup.policy')}: it must be exactly compact")

    count = len(topic.partitions)
    if partitions is None:
        yield Finding("ok", f"{count} partitions (no --partitions given to compare with)")
    elif count == partitions:
        yield Finding("ok", f"{count} partitions, as expected")
    else:
        yield Finding(
            "problem",
            f"{count} partitions, expected {partitions}: a group lives in partition "
            "murmur2(group_id) % N, so a different N moves groups away from their records",
        )

    rf = topic.replication_factor
    if rf == 1:
        yield Finding("warning", "replication factor 1: losing one broker loses every group's state")
    else:
        yield Finding("ok", f"replication factor {rf}")
        min_isr = topic.setting("min.insync.replicas")
        if not min_isr.isdigit() or int(min_isr) < 2:
            yield Finding(
                "warning",
                f"{topic.shown('min.insync.replicas')}: acks=all is met by a single copy, so one "
                "broker failure can lose acknowledged records",
            )
        else:
            yield Finding("ok", topic.shown("min.insync.replicas"))

    if topic.setting("unclean.leader.election.enable").lower() == "true":
        yield Finding(
            "warning",
            f"{topic.shown('unclean.leader.election.enable')}: an unclean leader loses acknowledged records",
        )
    else:
        yield Finding("ok", topic.shown("unclean.leader.election.enable"))


def _report(topic: Topic, partitions: int | None) -> int:
    findings = list(check(topic, partitions))
    print(f"validating topic {topic.name}:")
    for finding in findings:
        print(f"  {finding.level}: {finding.message}")
    problems = sum(finding.level == "problem" for finding in findings)
    if problems:
        raise CliError(f"topic {topic.name} is not fit for the coordinator: {problems} problem(s), see above")
    print(f"topic {topic.name} is fit for the coordinator")
    return 0


# --- commands -----------------------------------------------------------------------------------


def _create(args: argparse.Namespace) -> int:
    admin = Admin(args)
    existing = admin.describe(args.topic)
    if existing is not None:
        if not args.if_not_exists:
            raise CliError(f"topic {args.topic} already exists (pass --if-not-exists to validate it instead)")
        print(f"topic {args.topic} already exists; validating it instead of creating it")
        return _report(existing, args.partitions)

    partitions = args.partitions or DEFAULT_PARTITIONS
    # Not -1 (the broker's default), which brokers before Kafka 2.4 do not accept.
    rf = args.replication_factor or min(3, len(admin.metadata(args.topic).brokers))
    configs = topic_configs(rf) | dict(args.config)
    admin.create(NewTopic(args.topic, partitions, rf, config=configs))
    print(f"created topic {args.topic}: {partitions} partitions, replication factor {rf}")
    for name, value in sorted(configs.items()):
        print(f"  {name}={value}")
    return 0


@dataclass(frozen=True)
class Change:
    name: str
    old: Config | None  # None: the broker did not report the config
    new: str

    def __str__(self) -> str:
        if self.old is None:
            old = "(not reported)"
        elif self.old.source == "dynamic_topic_config":
            old = self.old.value or ""
        else:  # a value the topic has from the broker or Kafka's default, not one set on it
            old = f"{self.old.value or ''} ({self.old.source})"
        if self.old is not None and self.old.value == self.new:
            # The same value, inherited: set on the topic, so a broker default changed later cannot change it.
            return f"{self.name}: {old} -> {self.new} (set on the topic)"
        return f"{self.name}: {old} -> {self.new}"


def changes(topic: Topic, wanted: dict[str, str]) -> list[Change]:
    """What setting `wanted` on the topic changes: the configs whose value differs, or that are not
    set on the topic itself."""
    out = []
    for name, value in sorted(wanted.items()):
        old = topic.configs.get(name)
        if old is None or old.value != value or old.source != "dynamic_topic_config":
            out.append(Change(name, old, value))
    return out


def _alter(args: argparse.Namespace) -> int:
    admin = Admin(args)
    topic = admin.describe(args.topic)
    if topic is None:
        raise CliError(f"topic {args.topic} does not exist (`coordinator topic create` makes it)")
    # min.insync.replicas follows the replication factor the topic has, as create derives it from the
    # one it creates with; alter changes neither it nor the partition count (groups live by N).
    wanted = topic_configs(topic.replication_factor) | dict(args.config)
    if not topic.compacted and "compact" in _policies(wanted["cleanup.policy"]):
        # Compaction discards every record without a key (Kafka's log cleaner drops them as invalid),
        # so a topic of `delete` records is made compact only when none would be lost that way. The
        # coordinator writes a key on every record; a keyless one means this is someone else's topic.
        keyless = admin.first_keyless(topic, kafka_config.client_config(args))
        if keyless is not None:
            raise CliError(
                f"topic {topic.name} cannot be made compact: partition {keyless[0]} has a record without a key "
                f"at offset {keyless[1]}, which compaction would delete (is --topic the coordinator's topic?)"
            )
    todo = changes(topic, wanted)
    if not todo:
        print(f"topic {topic.name} already has the coordinator's settings; nothing to change")
        return 0
    verb = "would change" if args.dry_run else "changing"
    print(f"topic {topic.name}: {verb} {len(todo)} setting(s)")
    for change in todo:
        print(f"  {change}")
    if args.dry_run:
        print("dry run: nothing changed (run without --dry-run to apply)")
        return 0
    admin.alter(topic.name, {c.name: c.new for c in todo})
    print(f"altered topic {topic.name}: {len(todo)} setting(s) changed")
    return 0


def _describe(args: argparse.Namespace) -> int:
    admin = Admin(args)
    topic = admin.describe(args.topic)
    if topic is None:
        raise CliError(f"topic {args.topic} does not exist")
    levels = admin.format_levels(topic, kafka_config.client_config(args))
    if args.format == "json":
        described = _as_json(topic)
        described["format_levels"] = {str(p): level for p, level in levels.items()}
        sys.stdout.write(orjson.dumps(described).decode() + "\n")
        return 0
    print(f"topic: {topic.name}")
    print(f"partitions: {len(topic.partitions)}")
    print(f"replication factor: {topic.replication_factor}")
    for p in topic.partitions:
        print(f"  partition {p.id}: leader {p.leader}, replicas {p.replicas}, isr {p.isr}")
    print("configs:" if topic.configs else "configs: none reported")
    for name, config in topic.configs.items():
        print(f"  {name}={'' if config.value is None else config.value} ({config.source})")
    print(f"compacted: {'yes' if topic.compacted else 'no'} ({topic.shown('cleanup.policy')})")
    print(f"record format level: {_levels_text(levels)} (this release reads {DEFAULT_FORMAT_LEVEL}-{MAX_FORMAT_LEVEL})")
    return 0


def _levels_text(levels: dict[int, int]) -> str:
    """`1`, or `2 (partitions 0-3), 1 (partitions 4-15)` while an upgrade has reached only some."""
    if len(set(levels.values())) <= 1:
        return str(next(iter(levels.values()), DEFAULT_FORMAT_LEVEL))
    by_level: dict[int, list[int]] = {}
    for p, level in sorted(levels.items()):
        by_level.setdefault(level, []).append(p)
    return ", ".join(f"{level} (partitions {', '.join(map(str, ps))})" for level, ps in sorted(by_level.items()))


def _as_json(topic: Topic) -> dict[str, object]:
    return {
        "topic": topic.name,
        "partition_count": len(topic.partitions),
        "replication_factor": topic.replication_factor,
        "partitions": [
            {"partition": p.id, "leader": p.leader, "replicas": p.replicas, "isr": p.isr} for p in topic.partitions
        ],
        "configs": {name: {"value": c.value, "source": c.source} for name, c in topic.configs.items()},
        "cleanup_policy": topic.setting("cleanup.policy"),
        "compacted": topic.compacted,
    }


def _validate(args: argparse.Namespace) -> int:
    topic = Admin(args).describe(args.topic)
    if topic is None:
        raise CliError(f"topic {args.topic} does not exist")
    return _report(topic, args.partitions)


# --- command line -------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "topic",
        description="The coordinator's topic must be compacted and keep its partition count forever.",
    )
    commands = parser.add_subparsers(dest="topic_command", metavar="SUBCOMMAND", required=True)

    create = _add_command(commands, "create", _create, "create the topic, compacted, with the coordinator's settings")
    create.add_argument("--partitions", type=_positive_int, help=f"partition count (default {DEFAULT_PARTITIONS})")
    create.add_argument(
        "--replication-factor",
        type=_positive_int,
        help="replicas per partition (default: 3, or the number of brokers when fewer)",
    )
    create.add_argument(
        "--config",
        type=kafka_config.key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config to set or override (repeatable)",
    )
    create.add_argument(
        "--if-not-exists",
        action="store_true",
        help="when the topic exists, validate it instead of failing",
    )

    describe = _add_command(commands, "describe", _describe, "print the topic's partitions and configs")
    describe.add_argument(
        "--format",
        type=_table_or_json,
        default="table",
        metavar="{table,json}",
        help="text for people (default) or JSON (text: the former name of table)",
    )

    validate = _add_command(
        commands, "validate", _validate, "check that the topic is fit for the coordinator; exit 1 if not"
    )
    validate.add_argument("--partitions", type=_positive_int, help="the partition count the topic must have")

    alter = _add_command(
        commands,
        "alter",
        _alter,
        "bring an existing topic's configs to those create sets, showing each change (old -> new); the partition "
        "count and replication factor stay",
    )
    alter.add_argument(
        "--config",
        type=kafka_config.key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config to set instead of the coordinator's (repeatable), as create takes it",
    )
    alter.add_argument("--dry-run", action="store_true", help="show what would change and change nothing")
    # Raising the record format level asks the coordinator instances, not Kafka.
    format_levels.add_command(commands)


def _table_or_json(text: str) -> str:
    """--format as every command takes it; `text`, this command's former name for table, still works."""
    if text not in ("table", "json", "text"):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from 'table', 'json')")
    return "table" if text == "text" else text


def _add_command(
    commands: argparse._SubParsersAction, name: str, run: Callable[[argparse.Namespace], int], help: str
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help, description=help)
    kafka_config.add_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds to wait for Kafka per request (default {DEFAULT_TIMEOUT:g})",
    )
    parser.set_defaults(func=_kafka_errors_as_cli_errors(run))
    return parser


def _kafka_errors_as_cli_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except KafkaException as e:
            error = e.args[0]
            raise CliError(f"{error.name()}: {error.str()}" if isinstance(error, KafkaError) else str(e)) from None

    return wrapper


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
