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
    """Parse a Java properties file as java.util.Properties.load does, so a file written for Kafka's
    Java clients means the same here: `key=value`, `key: value` or `key value`; `#` and `!` comment
    lines; a line ending in an odd number of backslashes continues on the next (its leading blanks
    dropped); escapes `\\t \\n \\r \\f \\uXXXX`, and a backslash before any other character
    stands for that character (`sasl.password=a\\=b` is `a=b`). A malformed `\\u` escape is an error
    naming its line."""
    config: dict[str, str] = {}
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        first = number + 1
        line = lines[number].lstrip(" \t\f")
        number += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and number < len(lines):
            line = line[:-1] + lines[number].lstrip(" \t\f")
            number += 1
        if _continues(line):  # a continuation at the end of the file continues into nothing
            line = line[:-1]
        key, value = _split_key(line)
        try:
            config[_unescape(key)] = _unescape(value)
        except ValueError as e:
            raise CliError(f"{source}:{first}: {e}", exit_code=2) from None
    return config


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_key(line: str) -> tuple[str, str]:
    """The raw key, up to the first unescaped '=', ':' or blank, and the raw value after it."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != "\\" or i + 1 >= len(raw):
            out.append(c)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uXXXX escape: {raw[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


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
