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
    """Parse Java-properties-style `key=value` or `key: value` lines; `#` and `!` start comments."""
    config: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separators = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not separators:
            raise CliError(f"{source}:{number}: expected KEY=VALUE, got {line!r}", exit_code=2)
        i = min(separators)
        config[line[:i].strip()] = line[i + 1 :].strip()
    return config


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
