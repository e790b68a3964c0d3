"""The coordinator's Kafka listener (`serve --kafka-listener HOST:PORT`, DESIGN §12): the classic
group APIs in Kafka's binary protocol, for the groups this instance owns, so that an unmodified
Kafka Connect worker can use the coordinator.

One core, two transports: every request goes through the same calls of `CoordinatorServer` as the
HTTP routes (`call_join_group`, `call_sync_group`, ...: the runtime of the group's partition, the
answers a Java member survives while it loads), and authorization through the same `Authorizer`.
The listener has no authentication yet (issue 28, item 4): its requests act as principal
`ANONYMOUS`, so they are refused (GROUP_AUTHORIZATION_FAILED) unless anonymous access is on and the
ACLs let ANONYMOUS in.

As Kafka's SocketServer does, a connection's requests are handled one at a time and answered in
order. Every answer counts in `coordinator_kafka_requests_total{api}` and each failure code it carries
in `coordinator_kafka_errors_total{api,error}`; open connections are `coordinator_kafka_connections`.
Bad input (a frame size above the maximum or negative, a truncated frame, a request that does
not decode, an API or version not served) closes that connection with one log line and counts it in
`coordinator_kafka_bad_input_total{reason}`; no other connection notices. ApiVersions at a version
we do not know is answered as Kafka answers it (v0, UNSUPPORTED_VERSION, our versions).

OffsetCommit (v2-v10) and OffsetFetch (v1-v10) are answered, never with a closed connection: this
coordinator keeps no offsets (Connect's worker group never commits any; its source offsets live in
its own topic). Kafka's GroupCoordinator would commit for a classic group whose member id and
generation it knows, and otherwise answers UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND
from OffsetCommit v9 for a group it does not have) or REBALANCE_IN_PROGRESS; all of those tell a
consumer to rejoin and retry, a loop here, and would be false (our members are known). We answer
INVALID_REQUEST (42) instead, for every group: every topic/partition of an OffsetCommit; OffsetFetch's
each group (v8+), or its top level and each partition asked (v2-v7), or each partition (v1). It is
not retriable, and its message, Kafka's own ("... the message was sent to an incompatible broker. See
the broker logs for more details"), says what happened; our log line (one per request, a warning:
the API, version, groups, client id and host) says the rest. Kafka's consumer raises it as
KafkaException("Unexpected error in commit: ..."). Not UNSUPPORTED_VERSION (the version is fine, and
clients read it as a version mismatch), nor INVALID_GROUP_ID (the group id is valid: the group
exists here), nor GROUP_AUTHORIZATION_FAILED (it is no ACL); that one is answered only when
ANONYMOUS may not READ (OffsetCommit) or DESCRIBE (OffsetFetch) the group, checked first as Kafka
does. Counted in `coordinator_kafka_errors_total` once per request and group.

Kafka's request and response types become the core's messages and back in one place,
`coordinator.service.kafka_edge`; this module frames, authorizes and calls.

Member ids are `<client id>-<uuid>`; the member's client id and host are its Kafka client id and
the socket's peer address, which `groups describe` shows and the `kafka-member-joined` log event
(once per member, at its first successful JoinGroup here) names.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import ssl as ssl_module
import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from coordinator.api import kafka_protocol as kp
from coordinator.core.protocol import (
    DeleteGroupRequest,
    ErrorCode,
    RequestContext,
)
from coordinator.service import kafka_edge as edge
from coordinator.service.auth import ANONYMOUS, Operation
from coordinator.service.runtime import NotServing, Status
from coordinator.service.server import CoordinatorServer
from coordinator.tools import logs
from coordinator.tools.partitions import partition_for

log = logging.getLogger(__name__)

# ListGroups' type of a group served with our connect protocol (seed 000 over HTTP). Kafka 4.x's
# types are classic, consumer, share and streams; none is this protocol (a `consumer` group would
# send Kafka's Admin to ConsumerGroupDescribe, which is not served here), so it is named for what it
# is: Kafka's Admin reads a type it does not know as UNKNOWN and lists the group all the same. A
# classic group (a Connect worker over this listener) is `classic`, as Kafka lists it.
CONNECT_TYPE = "connect"
_INVALID_REQUEST = 42
_CLUSTER_AUTHORIZATION_FAILED = 31
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34
_SASL_AUTHENTICATION_FAILED = 58
NO_OFFSETS_ERROR = _INVALID_REQUEST  # OffsetCommit/OffsetFetch for any group here (the module's docstring)
_SEEN_MAX = 10_000
_GROUP_KEY_TYPE = 0


class Unauthenticated(kp.KafkaProtocolError):
    """A request the connection may not send before (or without) authentication: it is closed."""

    def __init__(self, message: str, client_id: str | None) -> None:
        super().__init__(message)
        self.client_id = client_id


def node_id(host: str, port: int) -> int:
    """The node id of the Kafka listener advertised at host:port, the same whichever instance
    computes it (FindCoordinator names other instances' listeners too): 2**30 plus the CRC-32 of
    `host:port` modulo 2**30. Stable across restarts at the same address, different for different
    addresses but for a 1 in 2**30 chance, and never one of the small ids (below 2**30) Kafka's
    brokers are given, so a gateway can list it beside theirs."""
    return (1 << 30) | (zlib.crc32(f"{host}:{port}".encode()) & ((1 << 30) - 1))


@dataclass
class Caller:
    """Who sent a request: the connection's peer address and what it authenticated as, or (for a
    request a trusted gateway forwarded in an Envelope) the client's principal and address."""

    host: str
    principal: str | None = None  # None: not authenticated (ANONYMOUS where anonymous access is on)
    mechanism: str | None = None  # the SASL mechanism of a handshake whose authentication is pending
    is_gateway: bool = False  # a principal of --kafka-gateway-principals (on its own requests)


class KafkaListener:
    """Kafka's classic group APIs over `server`'s partitions, on one TCP address. `advertised` is the
    (host, port) FindCoordinator names (default: where it listens); `ssl` makes it a TLS listener;
    `gateway_principals` may forward their clients' requests in Envelopes."""

    def __init__(
        self,
        server: CoordinatorServer,
        advertised: tuple[str, int] | None = None,
        *,
        max_frame_bytes: int = kp.MAX_FRAME_BYTES,
        ssl: ssl_module.SSLContext | None = None,
        gateway_principals: frozenset[str] = frozenset(),
    ) -> None:
        self.server = server
        self.advertised = advertised
        self.max_frame_bytes = max_frame_bytes
        self.ssl = ssl
        self.gateway_principals = gateway_principals
        self._tcp: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()  # members whose join was logged

    @property
    def node_id(self) -> int:
        """The node id FindCoordinator gives for this instance (`node_id`)."""
        host, port = self.advertised or ("", 0)
        return node_id(host, port)

    @property
    def sasl_required(self) -> bool:
        """Whether a connection must authenticate before anything but ApiVersions and SASL: there are
        tokens to authenticate with and anonymous access is off, as on a Kafka SASL listener."""
        authorizer = self.server.authorizer
        return bool(authorizer.tokens) and not authorizer.allow_anonymous

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on host:port (port 0: any free one); returns the address bound."""
        self._tcp = await asyncio.start_server(self._connection, host, port, reuse_address=True, ssl=self.ssl)
        bound = self._tcp.sockets[0].getsockname()[:2]
        if self.advertised is None:
            self.advertised = (host if host not in ("", "0.0.0.0", "::") else "127.0.0.1", bound[1])
        return bound

    async def close(self) -> None:
        if self._tcp is not None:
            self._tcp.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._tcp.wait_closed()
            self._tcp = None

    # --- a connection -------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        self.server.metrics.kafka_connections.inc()
        peer = writer.get_extra_info("peername")
        caller = Caller(peer[0] if isinstance(peer, tuple) else "")
        host = caller.host
        try:
            while (payload := await kp.read_frame(reader, self.max_frame_bytes)) is not None:
                answer, close = await self._answer(payload, caller)
                writer.write(answer)
                await writer.drain()
                if close:  # a failed authentication: answered, then closed, as Kafka does
                    self._bad_input(host, "authentication", close)
                    break
        except kp.Truncated as e:
            self._bad_input(host, "truncated", str(e))
        except kp.UnsupportedRequest as e:
            self._bad_input(host, "unsupported", str(e), e.header.client_id)
        except kp.FrameTooLarge as e:
            self._bad_input(host, "frame-size", str(e))
        except Unauthenticated as e:
            self._bad_input(host, "unauthenticated", str(e), e.client_id)
        except kp.KafkaProtocolError as e:
            self._bad_input(host, "malformed", str(e))
        except (ConnectionError, asyncio.CancelledError, ssl_module.SSLError):
            pass
        except Exception:  # a bug: logged with its traceback; the client reconnects
            log.exception("Kafka listener: unexpected failure on a connection from %s; closing it", host)
        finally:
            if task is not None:
                self._connections.discard(task)
            self.server.metrics.kafka_connections.dec()
            writer.close()

    def _bad_input(self, host: str, reason: str, detail: str, client_id: str | None = None) -> None:
        self.server.metrics.kafka_bad_input.labels(reason).inc()
        log.warning(
            "Kafka listener: closing the connection from %s%s: %s",
            host,
            f" (client id {client_id})" if client_id else "",
            detail,
        )

    async def _answer(self, payload: bytes, caller: Caller) -> tuple[bytes, str | None]:
        """A request's framed answer, and why the connection closes after it (None: it stays open)."""
        try:
            request = kp.decode_request(payload)
        except kp.UnsupportedRequest as e:
            if e.header.api_key == kp.API_VERSIONS:  # a newer client: Kafka's v0 answer lists ours
                self.server.metrics.observe_kafka_request(kp.NAMES[kp.API_VERSIONS], [kp.UNSUPPORTED_VERSION])
                return kp.api_versions_response(e.header), None
            raise
        header, body = request.header, request.body
        if header.api_key == kp.API_VERSIONS:
            self.server.metrics.observe_kafka_request(kp.NAMES[kp.API_VERSIONS], [])
            return kp.api_versions_response(header), None
        if header.api_key == kp.SASL_HANDSHAKE:
            return self._observed(header, self._sasl_handshake(header, body, caller)), None
        if header.api_key == kp.SASL_AUTHENTICATE:
            answer, close = self._sasl_authenticate(header, body, caller)
            return self._observed(header, answer), close
        if caller.mechanism is not None or (caller.principal is None and self.sasl_required):
            raise Unauthenticated(f"{header.api_name} before SASL authentication completed", header.client_id)
        if header.api_key == kp.ENVELOPE:
            return self._observed(header, await self._envelope(header, body, caller)), None
        if caller.is_gateway and header.api_key != kp.FIND_COORDINATOR:
            raise Unauthenticated(
                f"a gateway's own {header.api_name}: it forwards its clients' requests in Envelopes", header.client_id
            )
        return self._observed(header, await _HANDLERS[header.api_key](self, header, body, caller)), None

    def _observed(self, header: kp.RequestHeader, answer: Any) -> bytes:
        self.server.metrics.observe_kafka_request(kp.NAMES[header.api_key], kp.error_codes(answer))
        return kp.encode_response(header, answer)

    # --- authentication -------------------------------------------------------------------------

    def _sasl_handshake(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        """SASL PLAIN, when there are tokens: the user is a principal, the password one of its tokens
        (the tokens file the HTTP API reads)."""
        cls = kp.response_class(kp.SASL_HANDSHAKE, header.api_version)
        mechanisms = ["PLAIN"] if self.server.authorizer.tokens else []
        if body.mechanism not in mechanisms:
            return cls(error_code=_UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
        caller.mechanism = body.mechanism
        return cls(error_code=ErrorCode.NONE, mechanisms=mechanisms)

    def _sasl_authenticate(self, header: kp.RequestHeader, body: Any, caller: Caller) -> tuple[Any, str | None]:
        cls = kp.response_class(kp.SASL_AUTHENTICATE, header.api_version)

        def answer(code: int, message: str | None) -> Any:
            return cls(error_code=code, error_message=message, auth_bytes=b"", session_lifetime_ms=0)

        if caller.mechanism != "PLAIN":
            return answer(_ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake"), "SaslAuthenticate first"
        caller.mechanism = None
        try:
            authzid, user, password = kp.sasl_plain_credentials(body.auth_bytes)
        except kp.KafkaProtocolError as e:
            return answer(_SASL_AUTHENTICATION_FAILED, str(e)), f"authentication failed: {e}"
        known = next(
            (p for t, p in self.server.authorizer.tokens.items() if hmac.compare_digest(t.encode(), password.encode())),
            None,
        )
        if known != user or authzid not in ("", user):
            # Kafka's words, the same for a wrong user and a wrong password
            return (
                answer(_SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password"),
                f"authentication failed for user {user!r}",
            )
        caller.principal = user
        caller.is_gateway = user in self.gateway_principals
        return answer(ErrorCode.NONE, None), None

    def _principal_of(self, caller: Caller) -> str | None:
        """The principal a request acts as: the authenticated one, else ANONYMOUS where anonymous
        access is on; None when neither."""
        if caller.principal is not None:
            return caller.principal
        return ANONYMOUS if self.server.authorizer.allow_anonymous else None

    def _authorize(self, caller: Caller, operation: Operation, group_id: str) -> int:
        """NONE if the caller may do `operation` on the group, else GROUP_AUTHORIZATION_FAILED."""
        principal = self._principal_of(caller)
        if principal is None or not self.server.authorizer.allowed(principal, operation, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        return ErrorCode.NONE

    def _not_served(self, group_id: str) -> int:
        """NONE if this instance serves the group's partition, else NotServing's code."""
        try:
            self.server.runtime_for(group_id)
        except NotServing as e:
            return e.code
        return ErrorCode.NONE

    async def _envelope(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        """A request a trusted gateway forwards for a client (Kafka's Envelope, KIP-590): answered as
        the client's principal (Kafka's `User:name`; `User:ANONYMOUS`, a client that did not
        authenticate, is ANONYMOUS) and address, its answer wrapped back. Only a principal of
        --kafka-gateway-principals may send one (CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka
        answers a broker without ClusterAction)."""
        cls = kp.response_class(kp.ENVELOPE, header.api_version)
        if not caller.is_gateway:
            return cls(response_data=None, error_code=_CLUSTER_AUTHORIZATION_FAILED)
        try:
            inner = kp.decode_request(bytes(body.request_data))
            if inner.header.api_key not in _HANDLERS:
                raise kp.KafkaProtocolError(f"{inner.header.api_name} cannot be forwarded")
            if body.request_principal is None:
                raise kp.KafkaProtocolError("an Envelope without a principal")
            kind, name = kp.principal_of(body.request_principal)
            host = str(ipaddress.ip_address(bytes(body.client_host_address)))
        except (kp.KafkaProtocolError, ValueError) as e:
            log.warning(
                "Kafka listener: an Envelope from gateway %s (%s) refused: %s", caller.principal, caller.host, e
            )
            return cls(response_data=None, error_code=_INVALID_REQUEST)
        client = Caller(host, ANONYMOUS if (kind, name) == ("User", ANONYMOUS) else f"{kind}:{name}")
        if client.principal == ANONYMOUS and not self.server.authorizer.allow_anonymous:
            client.principal = None  # refused wherever a principal is needed
        request_header = inner.header
        answer = await _HANDLERS[request_header.api_key](self, request_header, inner.body, client)
        return cls(response_data=self._observed(request_header, answer)[4:], error_code=ErrorCode.NONE)

    # --- the APIs -------------------------------------------------------------------------------

    async def _find_coordinator(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        version = header.api_version
        cls = kp.response_class(kp.FIND_COORDINATOR, version)
        keys = list(body.coordinator_keys) if version >= 4 else [body.key]
        key_type = body.key_type if version >= 1 else _GROUP_KEY_TYPE
        found = [await self._coordinator_of(key, key_type, caller) for key in keys]
        if version >= 4:
            return cls(
                throttle_time_ms=0,
                coordinators=[
                    cls.Coordinator(key=key, node_id=node, host=h, port=p, error_code=code, error_message=message)
                    for key, (code, message, node, h, p) in zip(keys, found, strict=True)
                ],
            )
        code, message, node, h, p = found[0]
        return cls(throttle_time_ms=0, error_code=code, error_message=message, node_id=node, host=h, port=p)

    async def _coordinator_of(self, key: str, key_type: int, caller: Caller) -> tuple[int, str | None, int, str, int]:
        if key_type != _GROUP_KEY_TYPE:
            return _INVALID_REQUEST, f"key type {key_type} is not served here (groups only)", -1, "", -1
        # A trusted gateway finds the owner of any group it forwards for; the client it forwards for
        # is authorized on each forwarded request.
        refused = None if caller.is_gateway else self._authorize(caller, Operation.DESCRIBE, key)
        if refused:
            return refused, f"not allowed to describe group {key}", -1, "", -1
        partition = partition_for(key, self.server.partitions)
        owner = await self.server.owner_of(partition)
        if owner == self.server.advertised_url:
            host, port = self.advertised or ("", -1)
            return ErrorCode.NONE, None, self.node_id, host, port
        # Another instance (group ownership: its client.id in the ownership group names its
        # listener), or none.
        found = await self.server.locate_kafka(partition) if owner and self.server.locate_kafka else None
        if found is None:
            why = "no instance serves it" if owner is None else f"{owner} serves it without a Kafka listener known here"
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"no Kafka listener known for partition {partition}: {why}",
                -1,
                "",
                -1,
            )
        _, host, port = found
        return ErrorCode.NONE, None, node_id(host, port), host, port

    async def _join_group(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        cls = kp.response_class(kp.JOIN_GROUP, header.api_version)
        client_id = header.client_id or ""
        join = edge.join_request(body)
        code = self._authorize(caller, Operation.READ, join.group_id)
        if not code:
            context = RequestContext(client_id, caller.host, f"{client_id}-{uuid.uuid4()}")
            try:
                answer = await self.server.call_join_group(join, context)
            except NotServing as e:
                code = e.code
        if code:
            return cls(
                throttle_time_ms=0,
                error_code=code,
                generation_id=-1,
                protocol_type=None,
                protocol_name=None if header.api_version >= 7 else "",
                leader="",
                skip_assignment=False,
                member_id=body.member_id,
                members=[],
            )
        if answer.error_code == ErrorCode.NONE:
            self._joined(join.group_id, answer.member_id, answer.generation_id, client_id, caller.host)
        return edge.join_response(cls, header.api_version, answer)

    def _joined(self, group_id: str, member_id: str, generation: int, client_id: str, host: str) -> None:
        """One `kafka-member-joined` event the first time this listener sees a member join (its
        later rejoins, one per rebalance, are not logged), naming its client id and host."""
        key = (group_id, member_id)
        if key in self._seen:
            self._seen.move_to_end(key)
            return
        self._seen[key] = None
        if len(self._seen) > _SEEN_MAX:
            self._seen.popitem(last=False)
        logs.event(
            log,
            "kafka-member-joined",
            "member %s (client id %s, host %s) joined group %s over Kafka's protocol, generation %d",
            member_id,
            client_id,
            host,
            group_id,
            generation,
            group=group_id,
            member=member_id,
            client_id=client_id,
            host=host,
            generation=generation,
        )

    async def _sync_group(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        cls = kp.response_class(kp.SYNC_GROUP, header.api_version)
        sync = edge.sync_request(body, header.api_version)
        code = self._authorize(caller, Operation.READ, sync.group_id)
        if not code:
            try:
                answer = await self.server.call_sync_group(sync)
            except NotServing as e:
                code = e.code
        if code:
            return cls(throttle_time_ms=0, error_code=code, protocol_type=None, protocol_name=None, assignment=b"")
        return edge.sync_response(cls, answer)

    async def _heartbeat(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        cls = kp.response_class(kp.HEARTBEAT, header.api_version)
        heartbeat = edge.heartbeat_request(body)
        code = self._authorize(caller, Operation.READ, heartbeat.group_id)
        if not code:
            try:
                code = (await self.server.call_classic_heartbeat(heartbeat)).error_code
            except NotServing as e:
                code = e.code
        return cls(throttle_time_ms=0, error_code=code)

    async def _leave_group(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        cls = kp.response_class(kp.LEAVE_GROUP, header.api_version)
        leave = edge.leave_request(body, header.api_version)
        code = self._authorize(caller, Operation.READ, body.group_id)
        answer = None
        if not code:
            try:
                answer = await self.server.call_leave_group(leave)
            except NotServing as e:
                code = e.code
        return edge.leave_response(cls, header.api_version, code, answer)

    async def _describe_groups(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        version = header.api_version
        cls = kp.response_class(kp.DESCRIBE_GROUPS, version)
        groups = []
        for group_id in body.groups:
            described, raw = None, {}
            code = self._authorize(caller, Operation.DESCRIBE, group_id)
            if not code:
                try:
                    # One read of the state: the description and each classic member's bytes agree.
                    described, raw = await self.server.runtime_for(group_id).query(
                        lambda c, g=group_id: (c.describe_group(g), _member_bytes(c.state, g))
                    )
                except NotServing as e:
                    code = e.code
            groups.append(edge.described_group(cls, version, group_id, code, described, raw))
        return cls(throttle_time_ms=0, groups=groups)

    async def _list_groups(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        version = header.api_version
        cls = kp.response_class(kp.LIST_GROUPS, version)
        principal = self._principal_of(caller)
        if principal is None:
            return cls(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, groups=[])
        states = {s.strip().lower() for s in body.states_filter} if version >= 4 and body.states_filter else None
        types = {t.strip().lower() for t in body.types_filter} if version >= 5 and body.types_filter else None
        kinds = await self._group_types()
        listed = []
        for g in await self.server.listed_groups(principal):
            state = edge.KAFKA_STATES.get(g.state, g.state)
            group_type, protocol_type = kinds.get(g.group_id, (CONNECT_TYPE, "connect"))
            # As Kafka's listGroups: a filter matches case-insensitively, and a type it does not
            # know (Kafka's UNKNOWN) matches no group, never an error.
            if (states is None or state.lower() in states) and (types is None or group_type in types):
                listed.append(
                    cls.ListedGroup(
                        group_id=g.group_id, protocol_type=protocol_type, group_state=state, group_type=group_type
                    )
                )
        return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=listed)

    async def _group_types(self) -> dict[str, tuple[str, str]]:
        """Each served group's ListGroups type and protocol type (`_group_types_of`)."""
        kinds: dict[str, tuple[str, str]] = {}
        for runtime in list(self.server.runtimes.values()):
            if runtime.status is Status.ACTIVE:
                try:
                    kinds.update(await runtime.query(lambda c: _group_types_of(c.state)))
                except NotServing:
                    continue
        return kinds

    async def _delete_groups(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        cls = kp.response_class(kp.DELETE_GROUPS, header.api_version)
        results = []
        for group_id in body.groups_names:
            code = self._authorize(caller, Operation.DELETE, group_id)
            if not code:
                delete = DeleteGroupRequest(group_id)
                try:
                    code = (
                        await self.server.runtime_for(group_id).call(
                            lambda coordinator, now, d=delete: coordinator.delete_group(d, now)
                        )
                    ).error_code
                except NotServing as e:
                    code = e.code
            results.append(cls.DeletableGroupResult(group_id=group_id, error_code=code))
        return cls(throttle_time_ms=0, results=results)

    # --- offsets: answered with an error, we keep none ----------------------------------------------

    def _no_offsets(
        self, header: kp.RequestHeader, groups: list[str], operation: Operation, caller: Caller
    ) -> dict[str, int]:
        """Each group's answer to an offsets request: GROUP_AUTHORIZATION_FAILED if the caller may not
        `operation` on it (Kafka checks first), NOT_COORDINATOR for a group this instance does not
        serve (the client looks its coordinator up again), else INVALID_REQUEST (NO_OFFSETS_ERROR);
        one log line."""
        codes = {g: self._authorize(caller, operation, g) or self._not_served(g) or NO_OFFSETS_ERROR for g in groups}
        log.warning(
            "Kafka listener: %s v%d for group(s) %s from %s (client id %s) answered with error %s: this "
            "coordinator keeps no offsets (commit them to a Kafka broker's group coordinator)",
            header.api_name,
            header.api_version,
            ", ".join(groups),
            caller.host,
            header.client_id,
            ", ".join(sorted({str(c) for c in codes.values()})),
        )
        return codes

    async def _offset_commit(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        version = header.api_version
        cls = kp.response_class(kp.OFFSET_COMMIT, version)
        code = self._no_offsets(header, [body.group_id], Operation.READ, caller)[body.group_id]
        return cls(
            throttle_time_ms=0,
            topics=[
                cls.OffsetCommitResponseTopic(
                    **({"topic_id": t.topic_id} if version >= 10 else {"name": t.name}),
                    partitions=[
                        cls.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=code
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ],
        )

    async def _offset_fetch(self, header: kp.RequestHeader, body: Any, caller: Caller) -> Any:
        version = header.api_version
        cls = kp.response_class(kp.OFFSET_FETCH, version)
        if version >= 8:  # the error at each group's level, no topics
            codes = self._no_offsets(header, [g.group_id for g in body.groups], Operation.DESCRIBE, caller)
            return cls(
                throttle_time_ms=0,
                groups=[
                    cls.OffsetFetchResponseGroup(group_id=g.group_id, error_code=codes[g.group_id], topics=[])
                    for g in body.groups
                ],
            )
        code = self._no_offsets(header, [body.group_id], Operation.DESCRIBE, caller)[body.group_id]
        # v1 has only each partition's error; v2-v7 the top-level one too (and null topics: all of them)
        partition = cls.OffsetFetchResponseTopic.OffsetFetchResponsePartition
        topics = [
            cls.OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    partition(
                        partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=code
                    )
                    for i in t.partition_indexes
                ],
            )
            for t in body.topics or ()
        ]
        if version >= 2:
            return cls(throttle_time_ms=0, topics=topics, error_code=code)
        return cls(topics=topics)


def _member_bytes(state: Any, group_id: str) -> dict[str, tuple[bytes, bytes]]:
    """A classic group's members: the metadata each sent for the chosen protocol in its JoinGroup,
    and the assignment the leader gave it. A connect group's members have no such bytes (a
    translated classic member's assignment is made for each SyncGroup, not kept): empty."""
    classic = state.classic_groups.get(group_id)
    connect = state.groups.get(group_id)
    if classic is None or (connect is not None and connect.members):
        return {}
    return {m.member_id: (m.metadata(classic.protocol), m.assignment) for m in classic.members.values()}


def _group_types_of(state: Any) -> dict[str, tuple[str, str]]:
    """ListGroups' type and protocol type of each group, as describe decides a group's kind: a
    classic group (no connect group with members beside it) is `classic` with its protocol type; a
    connect group is `connect` (CONNECT_TYPE)."""
    kinds = {group_id: (CONNECT_TYPE, "connect") for group_id in state.groups}
    for group_id, classic in state.classic_groups.items():
        connect = state.groups.get(group_id)
        if connect is None or not connect.members:
            kinds[group_id] = ("classic", classic.protocol_type or "")
    return kinds


_HANDLERS = {
    kp.FIND_COORDINATOR: KafkaListener._find_coordinator,
    kp.JOIN_GROUP: KafkaListener._join_group,
    kp.SYNC_GROUP: KafkaListener._sync_group,
    kp.HEARTBEAT: KafkaListener._heartbeat,
    kp.LEAVE_GROUP: KafkaListener._leave_group,
    kp.DESCRIBE_GROUPS: KafkaListener._describe_groups,
    kp.LIST_GROUPS: KafkaListener._list_groups,
    kp.DELETE_GROUPS: KafkaListener._delete_groups,
    kp.OFFSET_COMMIT: KafkaListener._offset_commit,
    kp.OFFSET_FETCH: KafkaListener._offset_fetch,
}
