"""Security on the coordinator's Kafka listener (issue 28, item 4), on Apache Kafka: SASL PLAIN with a
principal and one of its tokens (the tokens file the HTTP API reads), our ACLs for the authenticated
principal, requests before authentication refused as a Kafka SASL listener refuses them, a trusted
gateway's Envelopes (KIP-590) answered as the client's principal and address, and TLS."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest
import tls_files

from coordinator.api import kafka_protocol as kp
from coordinator.service.auth import Authorizer, parse_acls, parse_tokens
from coordinator.tools import tls
from tests.support.kafka_listener import PARTITIONS, Client, Coordinator, G, protocols
from tests.support.metrics import exposed
from tests.topics import create_topic

pytestmark = pytest.mark.integration

TOKENS = "alice-token alice\nbob-token bob\ngateway-token gateway\n"
# alice may run in G; a client the gateway conveys as User:carol too; bob and User:mallory may not
ACLS = f"alice Read,Describe {G}\nUser:carol Read,Describe {G}\n"
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
SASL_AUTHENTICATION_FAILED = 58


def SecureCoordinator(
    broker: Any, topic: str, *, allow_anonymous: bool = False, context: ssl.SSLContext | None = None
) -> Coordinator:
    authorizer = Authorizer(parse_tokens(TOKENS), parse_acls(ACLS), allow_anonymous=allow_anonymous)
    return Coordinator(broker, topic, authorizer, ssl=context, gateway_principals=frozenset({"gateway"}))


async def login(client: Client, user: str, password: str) -> Any:
    handshake = await client.call(kp.SASL_HANDSHAKE, 1, mechanism="PLAIN")
    assert handshake.error_code == 0 and list(handshake.mechanisms) == ["PLAIN"]
    return await client.call(kp.SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{password}".encode())


def join_fields(member: str = "") -> dict[str, Any]:
    return {
        "group_id": G,
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": member,
        "group_instance_id": None,
        "protocol_type": "connect",
        "protocols": protocols("http://w:8083/"),
        "reason": None,
    }


def test_sasl_plain_then_our_acls_for_the_principal_and_a_wrong_password_closes_the_connection(
    kafka_broker, unique_topic
):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)

    async def main() -> None:
        async with SecureCoordinator(kafka_broker, unique_topic) as c:
            async with Client(c.address, "connect-1") as alice, Client(c.address, "connect-2") as bob:
                assert (await login(alice, "alice", "alice-token")).error_code == 0
                assert (await login(bob, "bob", "bob-token")).error_code == 0
                answer = await alice.call(kp.JOIN_GROUP, 9, **join_fields())
                assert answer.error_code == 79 and answer.member_id.startswith("connect-1-")  # MEMBER_ID_REQUIRED
                assert (await bob.call(kp.JOIN_GROUP, 9, **join_fields())).error_code == GROUP_AUTHORIZATION_FAILED
            # a token of another principal, and a wrong one: Kafka's answer, then the connection closes
            for user, password in (("alice", "bob-token"), ("alice", "nope"), ("nobody", "alice-token")):
                async with Client(c.address, "connect-3") as wrong:
                    answer = await login(wrong, user, password)
                    assert answer.error_code == SASL_AUTHENTICATION_FAILED
                    assert answer.error_message == "Authentication failed: Invalid username or password"
                    assert await wrong.closed()
            assert (
                exposed(c.server.metrics.exposition())['coordinator_kafka_bad_input_total{reason="authentication"}']
                == 3
            )
            # SCRAM is not served here (the gateway passes it to the brokers, which hold its credentials)
            async with Client(c.address, "connect-4") as scram:
                answer = await scram.call(kp.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
                assert answer.error_code == 33 and list(answer.mechanisms) == ["PLAIN"]

    asyncio.run(main())


def test_a_request_before_authentication_closes_only_its_connection(kafka_broker, unique_topic):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)

    async def main() -> None:
        async with SecureCoordinator(kafka_broker, unique_topic) as c:
            async with Client(c.address, "connect-1") as other:
                assert (await login(other, "alice", "alice-token")).error_code == 0
                for before in ("nothing", "handshake"):
                    async with Client(c.address, "early") as early:
                        # ApiVersions is answered before authentication, as Kafka's SASL listener does
                        assert (
                            await early.call(kp.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
                        ).error_code == 0
                        if before == "handshake":
                            assert (await early.call(kp.SASL_HANDSHAKE, 1, mechanism="PLAIN")).error_code == 0
                        early.send(kp.JOIN_GROUP, 9, **join_fields())
                        assert await early.closed()
                # the authenticated connection carries on
                assert (await other.call(kp.JOIN_GROUP, 9, **join_fields())).error_code == 79
            assert (
                exposed(c.server.metrics.exposition())['coordinator_kafka_bad_input_total{reason="unauthenticated"}']
                == 2
            )

    asyncio.run(main())


def _enveloped(
    client: Client, principal: bytes | None, address: bytes, api_key: int, version: int, **fields: Any
) -> tuple[int, int, int]:
    inner = kp.encode_request(kp.request_class(api_key, version)(**fields), version, 7, "connect-9")[4:]
    return client.send(kp.ENVELOPE, 0, request_data=inner, request_principal=principal, client_host_address=address)


async def _inner(client: Client, sent: tuple[int, int, int], api_key: int, version: int) -> Any:
    envelope = await client.receive(sent)
    assert envelope.error_code == 0, envelope
    correlation, body = kp.decode_response(api_key, version, bytes(envelope.response_data))
    assert correlation == 7
    return body


def test_a_trusted_gateway_forwards_in_envelopes_as_the_clients_principal_and_address(kafka_broker, unique_topic):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    carol, mallory = kp.principal_bytes("User", "carol"), kp.principal_bytes("User", "mallory")
    anonymous = kp.principal_bytes("User", "ANONYMOUS")

    async def main() -> None:
        async with (
            SecureCoordinator(kafka_broker, unique_topic) as c,
            Client(c.address, "gw") as gateway,
            Client(c.address, "connect-1") as alice,
        ):
            assert (await login(gateway, "gateway", "gateway-token")).error_code == 0
            assert (await login(alice, "alice", "alice-token")).error_code == 0
            # only a principal of --kafka-gateway-principals may forward (Kafka's answer to a broker
            # without ClusterAction)
            sent = _enveloped(alice, carol, bytes([10, 1, 2, 3]), kp.JOIN_GROUP, 9, **join_fields())
            assert (await alice.receive(sent)).error_code == CLUSTER_AUTHORIZATION_FAILED
            # the gateway finds the owner of any group, without an ACL of its own
            found = await gateway.call(kp.FIND_COORDINATOR, 3, key=G, key_type=0)
            assert found.error_code == 0 and found.port == c.address[1]
            # as User:carol from 10.1.2.3: our ACLs let carol in, and the member is hers
            join = await _inner(
                gateway,
                _enveloped(gateway, carol, bytes([10, 1, 2, 3]), kp.JOIN_GROUP, 9, **join_fields()),
                kp.JOIN_GROUP,
                9,
            )
            assert join.error_code == 79 and join.member_id.startswith("connect-9-")
            join = await _inner(
                gateway,
                _enveloped(gateway, carol, bytes([10, 1, 2, 3]), kp.JOIN_GROUP, 9, **join_fields(join.member_id)),
                kp.JOIN_GROUP,
                9,
            )
            assert join.error_code == 0
            described = await _inner(
                gateway,
                _enveloped(
                    gateway,
                    carol,
                    bytes([10, 1, 2, 3]),
                    kp.DESCRIBE_GROUPS,
                    5,
                    groups=[G],
                    include_authorized_operations=False,
                ),
                kp.DESCRIBE_GROUPS,
                5,
            )
            member = described.groups[0].members[0]
            assert (member.client_id, member.client_host) == ("connect-9", "10.1.2.3")
            # User:mallory, and a client that did not authenticate (anonymous access is off), may not
            for who in (mallory, anonymous):
                refused = await _inner(
                    gateway, _enveloped(gateway, who, bytes(16), kp.JOIN_GROUP, 9, **join_fields()), kp.JOIN_GROUP, 9
                )
                assert refused.error_code == GROUP_AUTHORIZATION_FAILED
            # an Envelope that does not read is refused, the connection kept
            bad = await gateway.receive(
                gateway.send(
                    kp.ENVELOPE, 0, request_data=b"\x00\x0c", request_principal=carol, client_host_address=bytes(4)
                )
            )
            assert bad.error_code == 42 and bad.response_data is None
            bad = await gateway.receive(
                _enveloped(
                    gateway,
                    b"\x00\x07junk",
                    bytes(4),
                    kp.HEARTBEAT,
                    4,
                    group_id=G,
                    generation_id=1,
                    member_id="m",
                    group_instance_id=None,
                )
            )
            assert bad.error_code == 42
            # a gateway's own group request (not forwarded): its connection is closed
            gateway.send(kp.JOIN_GROUP, 9, **join_fields())
            assert await gateway.closed()

    asyncio.run(main())


def test_tls_on_the_kafka_listener(kafka_broker, unique_topic, tmp_path):
    create_topic(kafka_broker.bootstrap_servers, unique_topic, PARTITIONS)
    files = tls_files.make(tmp_path / "tls")
    context = tls.server_context(str(files.cert), str(files.key))
    trusted = tls.client_context(str(files.ca), "ca")

    async def main() -> None:
        async with SecureCoordinator(kafka_broker, unique_topic, allow_anonymous=True, context=context) as c:
            # a plaintext client gets no answer; the listener carries on
            async with Client(c.address, "plain") as plain:
                plain.send(kp.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
                assert await plain.closed()
            reader, writer = await asyncio.open_connection(*c.address, ssl=trusted, server_hostname="127.0.0.1")
            client = Client(c.address, "connect-1")
            client.reader, client.writer = reader, writer
            assert (await login(client, "alice", "alice-token")).error_code == 0
            assert (await client.call(kp.JOIN_GROUP, 9, **join_fields())).error_code == 79
            writer.close()

    asyncio.run(main())
