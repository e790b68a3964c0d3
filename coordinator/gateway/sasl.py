"""SASL on a client connection, passed through to the broker, which decides; the gateway follows
the exchange to learn the principal it conveys to the coordinators (`proxy` has the story)."""

from __future__ import annotations

from typing import Any

from coordinator.api import kafka_protocol as kp
from coordinator.gateway.rules import Refused, Rewrite


class SaslFollower:
    """One connection's SASL as the gateway follows it: the mechanism of a handshake whose
    authentication is pending, the user its first message named, the rounds answered, and the
    principal once the broker accepted."""

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.user: str | None = None
        self.rounds = 0
        self.principal: tuple[str, str] | None = None
        self.opaque_mechanism: str | None = None  # authenticated with a mechanism whose principal we cannot read

    def handshake(self, mechanism: str) -> None:
        self.mechanism, self.user, self.rounds = mechanism, None, 0

    def authenticate(self, header: kp.RequestHeader, body: Any) -> Rewrite:
        """A SaslAuthenticate on its way to the broker (one client connection, one upstream
        connection: the broker authenticates, and re-authenticates, the client itself). For PLAIN and
        SCRAM the user the client's first message names is read and, once the broker accepts the last
        round (PLAIN one, SCRAM two), `User:<user>` is the connection's principal, Kafka's default
        principal for both. Returns what follows the broker's answer."""
        if self.mechanism is None:
            raise Refused("SaslAuthenticate without a SaslHandshake before it")
        mechanism = self.mechanism
        if self.rounds == 0 and mechanism in kp.SASL_MECHANISMS_WITH_NAMES:
            try:
                self.user = kp.sasl_username(mechanism, body.auth_bytes)
            except kp.KafkaProtocolError as e:
                raise Refused(f"SaslAuthenticate: {e}") from None
        self.rounds += 1
        rounds = self.rounds

        async def follow(answer: bytes) -> bytes:
            _, decoded = kp.decode_response(kp.SASL_AUTHENTICATE, header.api_version, answer)
            if decoded.error_code:
                self.mechanism = None  # the broker closes the connection
            elif mechanism not in kp.SASL_MECHANISMS_WITH_NAMES:
                self.mechanism, self.principal, self.opaque_mechanism = None, None, mechanism
            elif rounds == (1 if mechanism == "PLAIN" else 2):
                self.mechanism, self.principal, self.opaque_mechanism = None, ("User", self.user), None
            return kp.frame(answer)

        return follow

    def check_authenticated(self, header: kp.RequestHeader, required: bool) -> None:
        """As a Kafka SASL listener: nothing but ApiVersions and SASL while an authentication is
        under way, or before one when authentication is `required` (--require-sasl)."""
        if self.mechanism in kp.SASL_MECHANISMS_WITH_NAMES:
            raise Refused(f"{header.api_name} before SASL authentication completed", "unauthenticated")
        if required and self.principal is None and self.opaque_mechanism is None:
            raise Refused(f"{header.api_name} before SASL authentication (the gateway requires it)", "unauthenticated")

    def conveyed_principal(self, group: str) -> bytes:
        """The principal an Envelope carries for this client: `User:<user>` after PLAIN or SCRAM,
        `User:ANONYMOUS` without authentication; Refused after a mechanism whose principal the
        gateway cannot read (GSSAPI, OAUTHBEARER): fail closed rather than act as somebody else."""
        if self.opaque_mechanism is not None:
            raise Refused(
                f"group {group}: the principal of a {self.opaque_mechanism} client cannot be conveyed to "
                "the coordinator (PLAIN and SCRAM only)",
                "unauthenticated",
            )
        return kp.principal_bytes(*(self.principal or ("User", "ANONYMOUS")))
