"""Kafka client settings shared by every command that talks to Kafka.

Every such command takes `--bootstrap-servers` (default: $KAFKA_BOOTSTRAP_SERVERS), repeated
`--kafka-config KEY=VALUE` options and `--kafka-config-file FILE` (Java properties syntax), so that
security settings (security.protocol, sasl.*, ssl.*) and any other librdkafka property reach the
client unchanged. Later options win over earlier ones; the file is read first, so a command-line
`--kafka-config` overrides it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import javaproperties

from coordinator.errors import CliError

DEFAULT_TOPIC = "__worker_offsets"


def add_arguments(parser: argparse.ArgumentParser, *, topic: bool = True) -> None:
    group = parser.add_argument_group("Kafka connection")
    group.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="Kafka bootstrap servers, host:port[,host:port] (env KAFKA_BOOTSTRAP_SERVERS)",
    )
    if topic:
        group.add_argument(
            "--topic",
            default=os.environ.get("WORKER_OFFSETS_TOPIC", DEFAULT_TOPIC),
            help=f"the coordinator's compacted topic (env WORKER_OFFSETS_TOPIC, default {DEFAULT_TOPIC})",
        )
    group.add_argument(
        "--kafka-config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka client property, e.g. security.protocol=SASL_SSL (repeatable)",
    )
    group.add_argument(
        "--kafka-config-file",
        default=os.environ.get("KAFKA_CONFIG_FILE"),
        metavar="FILE",
        help="a properties file of Kafka client settings (env KAFKA_CONFIG_FILE)",
    )


def key_value(text: str) -> tuple[str, str]:
    """An argparse type for KEY=VALUE options (`--kafka-config`, `coordinator topic create --config`)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def parse_properties(text: str, source: str) -> dict[str, str]:
    """A Java properties file read as java.util.Properties.load reads it (javaproperties), so a file
    written for Kafka's Java clients means the same here: escaped separators (`a\\=b`), continuation
    lines, `key value` lines, `\\uXXXX` escapes. A malformed escape is one line naming the file."""
    try:
        return dict(javaproperties.loads(text))
    except javaproperties.InvalidUEscapeError as e:
        raise CliError(f"{source}: {e}", exit_code=2) from None


def client_config(args: argparse.Namespace) -> dict[str, str]:
    """The librdkafka configuration a command's arguments describe."""
    if not args.bootstrap_servers:
        raise CliError(
            "no Kafka bootstrap servers: pass --bootstrap-servers or set KAFKA_BOOTSTRAP_SERVERS",
            exit_code=2,
        )
    config: dict[str, str] = {}
    if args.kafka_config_file:
        path = Path(args.kafka_config_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise CliError(f"cannot read Kafka config file {path}: {e.strerror}", exit_code=2) from None
        config.update(parse_properties(text, str(path)))
    config.update(args.kafka_config)
    config["bootstrap.servers"] = args.bootstrap_servers
    return config
