"""Kafka client settings shared by every command that talks to Kafka.

Every such command takes Kafka's own flag names, as `kafka-topics` or `kafka-consumer-groups` take
them: `--bootstrap-server` (default: $KAFKA_BOOTSTRAP_SERVERS; `--bootstrap-servers` is the older
spelling, still accepted) and `--command-config FILE`, a Java properties file of client settings
(`--kafka-config-file` is the older spelling), plus repeated `--kafka-config KEY=VALUE` options, so
that security settings (security.protocol, sasl.*, ssl.*) and any other librdkafka property reach
the client. Later options win over earlier ones; the file is read first, so a command-line
`--kafka-config` overrides it.

A file written for Kafka's Java tools means the same here (`java_to_librdkafka`): the Java keys
whose librdkafka name or form differs are translated (a PLAIN or SCRAM `sasl.jaas.config` becomes
sasl.username/sasl.password, a PEM truststore ssl.ca.location, a PKCS#12 or PEM keystore its
librdkafka settings, an empty ssl.endpoint.identification.algorithm `none`), and the Java-only ones
librdkafka has no counterpart for are refused in one line naming the key. The other way,
`java_client_config` gives the Java client (Spark's Kafka source) a librdkafka configuration.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from pathlib import Path

import javaproperties

from coordinator.errors import CliError

DEFAULT_TOPIC = "__worker_offsets"


def add_arguments(parser: argparse.ArgumentParser, *, topic: bool = True) -> None:
    group = parser.add_argument_group("Kafka connection")
    group.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="bootstrap_servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        metavar="HOST:PORT[,HOST:PORT]",
        help="Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS; --bootstrap-servers is an alias)",
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
        "--command-config",
        "--kafka-config-file",
        dest="kafka_config_file",
        default=os.environ.get("KAFKA_CONFIG_FILE"),
        metavar="FILE",
        help="a Java properties file of Kafka client settings, as Kafka's tools take it; Java keys are translated "
        "to librdkafka's (env KAFKA_CONFIG_FILE; --kafka-config-file is an alias)",
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
            "no Kafka bootstrap servers: pass --bootstrap-server or set KAFKA_BOOTSTRAP_SERVERS",
            exit_code=2,
        )
    config: dict[str, str] = {}
    source = "--kafka-config"
    if args.kafka_config_file:
        path = Path(args.kafka_config_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise CliError(
                f"cannot read Kafka config file {path} (--command-config): {e.strerror}", exit_code=2
            ) from None
        config.update(parse_properties(text, str(path)))
        source = str(path)
    config.update(args.kafka_config)
    config = java_to_librdkafka(config, source)
    config["bootstrap.servers"] = args.bootstrap_servers
    return config


# Java client keys librdkafka has no counterpart for: refused, since dropping one silently could
# weaken security (a protocol pin) or hide a setting the user relies on.
_JAVA_ONLY = {
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "security.providers",
    "default.api.timeout.ms",
    "sasl.login.refresh.window.factor",
    "sasl.kerberos.ticket.renew.window.factor",
}
_JAAS = re.compile(
    r"^\s*org\.apache\.kafka\.common\.security\.(?:plain\.PlainLoginModule|scram\.ScramLoginModule)"
    r"\s+required\s+(?P<options>.*?);?\s*$",
    re.DOTALL,
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def java_to_librdkafka(config: dict[str, str], source: str) -> dict[str, str]:
    """`config` with the keys of Kafka's Java clients that librdkafka names or writes otherwise
    translated; a Java-only key is a CliError naming it (and `source`, where it came from)."""
    out = dict(config)

    def refuse(key: str, why: str) -> CliError:
        return CliError(f"{source}: {key}: {why}", exit_code=2)

    for key in out:
        if key in _JAVA_ONLY or key.endswith((".class", ".classes")):
            raise refuse(key, "a Java client setting librdkafka has no counterpart for; remove it")
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None:
        match = _JAAS.match(jaas)
        options = dict(_JAAS_OPTION.findall(match.group("options"))) if match else {}
        if not match or "username" not in options or "password" not in options:
            raise refuse(
                "sasl.jaas.config",
                "only a PlainLoginModule or ScramLoginModule with username and password "
                "translates (to sasl.username, sasl.password); set those instead",
            )
        out.setdefault("sasl.username", re.sub(r"\\(.)", r"\1", options["username"]))
        out.setdefault("sasl.password", re.sub(r"\\(.)", r"\1", options["password"]))
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"  # Java's empty value: no host name check
    truststore_type = out.pop("ssl.truststore.type", "JKS").upper()
    truststore_password = out.pop("ssl.truststore.password", None)
    if "ssl.truststore.location" in out:
        if truststore_type != "PEM":
            raise refuse(
                "ssl.truststore.location",
                f"librdkafka reads no {truststore_type} truststore: convert it to "
                "PEM and set ssl.truststore.type=PEM (or ssl.ca.location)",
            )
        out["ssl.ca.location"] = out.pop("ssl.truststore.location")
    elif truststore_password is not None:
        raise refuse("ssl.truststore.password", "without ssl.truststore.location it means nothing")
    keystore_type = out.pop("ssl.keystore.type", "JKS").upper()
    if "ssl.keystore.location" in out:
        if keystore_type == "PEM":  # the certificate and its key in one PEM file
            location = out.pop("ssl.keystore.location")
            out.pop("ssl.keystore.password", None)
            out["ssl.certificate.location"] = out["ssl.key.location"] = location
        elif keystore_type != "PKCS12":  # librdkafka's ssl.keystore.location is a PKCS#12 file
            raise refuse(
                "ssl.keystore.location",
                f"librdkafka reads no {keystore_type} keystore: convert it to PKCS12 (ssl.keystore.type=PKCS12) or PEM",
            )
    return out


# librdkafka's names for the settings whose Java client names differ (the rest are the same or
# only one client knows them; the Java client ignores what it does not know).
_SASL_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_LIBRDKAFKA_ONLY = {
    "sasl.username",
    "sasl.password",
    "sasl.mechanisms",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "enable.ssl.certificate.verification",
}


def java_client_config(kafka: Mapping[str, str]) -> dict[str, str]:
    """The Java client's settings for a librdkafka configuration, the inverse of `java_to_librdkafka`
    (Spark's Kafka source runs the Java client): SASL PLAIN/SCRAM credentials become a JAAS line, PEM
    files a PEM trust/key store. What does not translate is a CliError saying what to set instead."""
    out = {k: v for k, v in kafka.items() if k not in _LIBRDKAFKA_ONLY}
    mechanism = kafka.get("sasl.mechanism") or kafka.get("sasl.mechanisms")
    if mechanism:
        out["sasl.mechanism"] = mechanism
    if "sasl.username" in kafka and "sasl.jaas.config" not in kafka:
        module = _SASL_MODULES.get((mechanism or "PLAIN").upper())
        if module is None:
            raise CliError(
                f"sasl.mechanism {mechanism}: only PLAIN and SCRAM credentials (sasl.username, "
                "sasl.password) translate to Spark's Kafka client; pass sasl.jaas.config instead",
                exit_code=2,
            )
        user, password = (
            kafka[k].replace("\\", "\\\\").replace('"', '\\"') for k in ("sasl.username", "sasl.password")
        )
        out["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    if "ssl.ca.location" in kafka:
        out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": kafka["ssl.ca.location"]})
    if "ssl.certificate.location" in kafka or "ssl.key.location" in kafka:
        if kafka.get("ssl.certificate.location") != kafka.get("ssl.key.location"):
            raise CliError(
                "Spark's Kafka client reads a client certificate and its key from one PEM file: "
                "set ssl.certificate.location and ssl.key.location to the same file",
                exit_code=2,
            )
        out.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": kafka["ssl.key.location"]})
        if "ssl.key.password" in kafka:
            out["ssl.key.password"] = kafka["ssl.key.password"]
    if kafka.get("enable.ssl.certificate.verification", "true").lower() == "false":
        out["ssl.endpoint.identification.algorithm"] = ""
    return out
