"""Kafka client settings from the command line and properties files (coordinator.tools.kafka_config)."""

from __future__ import annotations

import argparse

import pytest

from coordinator.errors import CliError
from coordinator.tools.kafka_config import add_arguments, client_config, java_to_librdkafka, parse_properties


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
        '    username="u" \\\n'
        '    password="p";\n'
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
    args = parser.parse_args(
        [
            "--bootstrap-servers",
            "h:1",
            "--kafka-config-file",
            str(properties),
            "--kafka-config",
            "client.id=flag",
            "--kafka-config",
            "sasl.password=a=b",
        ]
    )
    assert client_config(args) == {
        "client.id": "flag",
        "acks": "all",
        "sasl.password": "a=b",
        "bootstrap.servers": "h:1",
    }


@pytest.mark.parametrize("bad", ["novalue", "=x", " =x"])
def test_kafka_config_option_must_be_key_value(bad, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["--kafka-config", bad])
    assert e.value.code == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_kafka_flag_spellings_and_command_config_translate_java_keys(tmp_path):
    # A --command-config file as Kafka's Java tools take it: the keys librdkafka names or writes
    # otherwise are translated; librdkafka's own keys pass unchanged.
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="svc" '
        'password="p\\\\"w";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/etc/kafka/ca.pem\n"
        "ssl.keystore.type=PKCS12\n"
        "ssl.keystore.location=/etc/kafka/client.p12\n"
        "ssl.keystore.password=secret\n"
        "ssl.endpoint.identification.algorithm=\n"
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for spelling in (
        ["--bootstrap-server", "h:1", "--command-config"],
        ["--bootstrap-servers", "h:1", "--kafka-config-file"],
    ):
        args = parser.parse_args([*spelling, str(properties)])
        assert client_config(args) == {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "svc",
            "sasl.password": 'p"w',
            "ssl.ca.location": "/etc/kafka/ca.pem",
            "ssl.keystore.location": "/etc/kafka/client.p12",
            "ssl.keystore.password": "secret",
            "ssl.endpoint.identification.algorithm": "none",
            "bootstrap.servers": "h:1",
        }
    # A PEM keystore is librdkafka's certificate and key, in one file.
    assert java_to_librdkafka({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem"}, "f") == {
        "ssl.certificate.location": "/k.pem",
        "ssl.key.location": "/k.pem",
    }


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"ssl.truststore.location": "/t.jks"}, "f: ssl.truststore.location: librdkafka reads no JKS truststore"),
        (
            {"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"},
            "f: ssl.keystore.location: librdkafka reads no JKS",
        ),
        ({"ssl.truststore.password": "x"}, "f: ssl.truststore.password: without ssl.truststore.location"),
        (
            {"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
            "f: sasl.jaas.config: only a PlainLoginModule or ScramLoginModule",
        ),
        ({"sasl.login.callback.handler.class": "x.Y"}, "f: sasl.login.callback.handler.class: a Java client setting"),
        ({"ssl.enabled.protocols": "TLSv1.3"}, "f: ssl.enabled.protocols: a Java client setting"),
    ],
)
def test_java_only_settings_are_refused_naming_the_key(config, says):
    with pytest.raises(CliError) as e:
        java_to_librdkafka(config, "f")
    assert str(e.value).startswith(says) and e.value.exit_code == 2 and "\n" not in str(e.value)
