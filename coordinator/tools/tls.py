"""TLS contexts from PEM files, one place for every listener and client of ours: the HTTP API and
the Kafka listener of `coordinator serve`, the gateway's ports and its connections upstream."""

from __future__ import annotations

import ssl

from coordinator.errors import CliError


def server_context(cert: str | None, key: str | None, flags: str = "--tls-cert and --tls-key") -> ssl.SSLContext | None:
    """A server's context from a certificate (chain) and its key; None when neither is given. A
    CliError (exit 2) when one is missing or they do not load."""
    if not cert and not key:
        return None
    if not (cert and key):
        raise CliError(f"TLS needs both {flags}", exit_code=2)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise CliError(f"cannot load the TLS certificate or key: {e}", exit_code=2) from None
    return context


def client_context(ca: str | None, flag: str) -> ssl.SSLContext | None:
    """A client's context that trusts the CA certificates in `ca` (PEM) and checks host names; None
    when `ca` is not given."""
    if not ca:
        return None
    try:
        return ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    except (OSError, ssl.SSLError) as e:
        raise CliError(f"{flag}: cannot load {ca}: {e}", exit_code=2) from None
