"""Kafka client settings from the command line and properties files (coordinator.kafka_config)."""

from __future__ import annotations

import argparse

import pytest

from coordinator.errors import CliError
from coordinator.kafka_config import add_arguments, client_config, parse_properties


def test_parse_properties_reads_java_properties_syntax():
    text = "# comment\n! also a comment\n\nsecurity.protocol = SASL_SSL\nsasl.mechanism: PLAIN\nurl=a:b=c\n"
    assert parse_properties(text, "f") == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "url": "a:b=c"}


def test_parse_properties_names_the_bad_line():
    with pytest.raises(CliError, match=r"f:2: expected KEY=VALUE, got 'oops'"):
        parse_properties("a=1\noops\n", "f")


def test_command_line_settings_override_the_file(tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text("client.id=file\nacks=all\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--bootstrap-servers", "h:1", "--kafka-config-file", str(properties),
                              "--kafka-config", "client.id=flag", "--kafka-config", "sasl.password=a=b"])
    assert client_config(args) == {"client.id": "flag", "acks": "all", "sasl.password": "a=b", "bootstrap.servers": "h:1"}


@pytest.mark.parametrize("bad", ["novalue", "=x", " =x"])
def test_kafka_config_option_must_be_key_value(bad, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["--kafka-config", bad])
    assert e.value.code == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
