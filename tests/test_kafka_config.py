"""Kafka client settings from the command line and properties files (coordinator.tools.kafka_config)."""

from __future__ import annotations

import argparse

import pytest

from coordinator.errors import CliError
from coordinator.tools.kafka_config import add_arguments, client_config, parse_properties


def test_parse_properties_reads_java_properties_syntax():
    text = "# comment\n! also a comment\n\nsecurity.protocol = SASL_SSL\nsasl.mechanism: PLAIN\nurl=a:b=c\n"
    assert parse_properties(text, "f") == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "url": "a:b=c"}


def test_parse_properties_names_the_file_of_a_bad_escape():
    with pytest.raises(CliError, match=r"^f: Invalid \\u escape sequence: \\u12g4$"):
        parse_properties("a=1\nb=\\u12g4\n", "f")


def test_parse_properties_reads_what_java_reads():
    # The three cases a line-by-line key=value reading got wrong without an error: an escaped
    # separator in a secret, continuation lines, and `key value`.
    text = (
        "sasl.password=a\\=b\\:c\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        "    username=\"u\" \\\n"
        "    password=\"p\";\n"
        "client.id  worker one\n"
        "  ! an indented comment\n"
        "key\\ with\\ blanks : v\n"
        "ssl.endpoint.identification.algorithm=\n"
        "escapes=\\u00e9\\t\\\\\n"
        "bare\n"
    )
    assert parse_properties(text, "f") == {
        "sasl.password": "a=b:c",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";',
        "client.id": "worker one",
        "key with blanks": "v",
        "ssl.endpoint.identification.algorithm": "",
        "escapes": "\u00e9\t\\",
        "bare": "",
    }


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
