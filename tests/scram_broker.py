"""A secured Apache Kafka broker for the session, shared by the tests that need one
(tests/test_gateway_security.py, tests/test_serve_sasl.py): one dev-broker node with SCRAM-SHA-256
users alice and bob on a SASL_PLAINTEXT listener and on a SASL_SSL one (its certificate from
tests/tls_files.py, the CA in `tls.ca`), beside the plaintext listener the setup uses. Started on
first use, stopped at the end of the session (registered in conftest's pytest_plugins)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import tls_files
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from coordinator.tools import devbroker
from coordinator.tools.devbroker import free_port

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'


@dataclass(frozen=True)
class ScramBroker:
    cluster: devbroker.Cluster
    plain: str  # the plaintext listener (setup only)
    sasl: str  # SASL_PLAINTEXT, SCRAM-SHA-256
    sasl_ssl: str  # SASL_SSL, SCRAM-SHA-256, a certificate for 127.0.0.1 signed by tls.ca
    tls: tls_files.TlsFiles
    run_dir: Path


def _settings(sasl_port: int, sasl_ssl_port: int, keystore: Path) -> dict[str, object]:
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{{port}},SASL://127.0.0.1:{sasl_port},"
        f"SASLSSL://127.0.0.1:{sasl_ssl_port},CONTROLLER://127.0.0.1:{{controller_port}}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{{port}},SASL://127.0.0.1:{sasl_port},"
        f"SASLSSL://127.0.0.1:{sasl_ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,SASLSSL:SASL_SSL,"
        "CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl.scram-sha-256.sasl.jaas.config": scram,
        "listener.name.saslssl.scram-sha-256.sasl.jaas.config": scram,
        # A PEM keystore: the (unencrypted PKCS#8) key and the certificate in one file.
        "listener.name.saslssl.ssl.keystore.type": "PEM",
        "listener.name.saslssl.ssl.keystore.location": str(keystore),
    }


@pytest.fixture(scope="session")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramBroker]:
    run_dir = tmp_path_factory.mktemp("scram-broker")
    files = tls_files.make(run_dir / "tls")
    keystore = run_dir / "tls" / "keystore.pem"
    keystore.write_text(files.key.read_text() + files.cert.read_text())
    sasl_port, sasl_ssl_port = free_port(), free_port()
    cluster = devbroker.start(
        devbroker.free_port(), run_dir / "broker", 1, 90.0, _settings(sasl_port, sasl_ssl_port, keystore)
    )
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        upserts = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode()
            )
            for user, password in PASSWORDS.items()
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=30)
        yield ScramBroker(
            cluster,
            cluster.bootstrap_servers,
            f"127.0.0.1:{sasl_port}",
            f"127.0.0.1:{sasl_ssl_port}",
            files,
            run_dir,
        )
    finally:
        cluster.stop(timeout=30)
