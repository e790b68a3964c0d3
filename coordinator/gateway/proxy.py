"""The gateway: Kafka's binary protocol proxied to the real brokers, our groups to our coordinators.

Ports (`--listen HOST:PORT` is the bootstrap port P):
- P, the bootstrap port: its connections go to the first bootstrap server that answers;
- P + 1, the gateway's coordinator node (node id `COORDINATOR_NODE_ID`, listed in every Metadata
  answer): FindCoordinator for one of our groups names it; its other requests go to a bootstrap server;
- P + 2 + N for the broker of node id N, bound before an answer naming it is passed on.

One upstream connection per client connection (plus one per coordinator a connection's group requests
reach); requests are forwarded as bytes after a peek at their header, answers matched by correlation id
and written back in request order. Only answers that carry addresses are decoded and rewritten
(Metadata, DescribeCluster, FindCoordinator) and ApiVersions, capped to what the gateway can rewrite
(`ALLOWED`): Produce at most v9 and Fetch at most v15 (no KIP-951 node endpoints), the group APIs at
the versions our listener serves, and no API whose answers carry addresses we do not rewrite
(DescribeQuorum, the share and consumer (KIP-848) group APIs, ...). A request outside `ALLOWED`, or
bad input, closes its connection with one log line; ApiVersions at a version we cannot read gets
Kafka's v0 answer (UNSUPPORTED_VERSION and our table).

Fail closed: an answer that cannot be rewritten closes the client connection; a request naming one
of our groups (`--groups`, an anchored regex) never goes to a broker: the six group APIs, and
OffsetCommit and OffsetFetch (which the coordinator answers with INVALID_REQUEST: it keeps no offsets),
go to the coordinator that owns the group (found with FindCoordinator against each `--coordinator`,
which answers NONE for a group it owns, or names the owner's listener; forgotten on NOT_COORDINATOR or
when it cannot be reached); anything else (OffsetDelete, transactions) for our groups closes the
connection.
ListGroups on the coordinator node's port is
every coordinator's groups, merged.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from coordinator.api import kafka_protocol as kp
from coordinator.gateway.metrics import GatewayMetrics
from coordinator.tools import logs

log = logging.getLogger(__name__)

COORDINATOR_NODE_ID = 2_000_000_000  # the gateway's coordinator node: far above any broker id we expect
GROUP_KEY_TYPE = 0
NOT_COORDINATOR = 16
MAX_RESPONSE_BYTES = 2**31 - 1

# The APIs forwarded, with the versions the gateway allows (None: whatever the broker has).
_PASSED = (
    2,
    17,
    19,
    20,
    21,
    22,
    23,
    24,
    26,
    29,
    30,
    31,
    32,
    33,
    34,
    35,
    36,
    37,
    38,
    39,
    40,
    41,
    43,
    44,
    45,
    46,
    48,
    49,
    50,
    51,
    57,
    61,
    65,
    66,
    71,
    72,
    74,
    75,
)
ALLOWED: dict[int, tuple[int, int] | None] = {key: None for key in _PASSED}
ALLOWED[kp.PRODUCE] = (0, 9)  # v10+ answers may carry node endpoints (KIP-951)
ALLOWED[kp.FETCH] = (0, 15)  # v16+ likewise
for _key in (
    kp.METADATA,
    kp.DESCRIBE_CLUSTER,
    kp.FIND_COORDINATOR,
    kp.API_VERSIONS,
    kp.OFFSET_COMMIT,
    kp.OFFSET_FETCH,
    kp.ADD_OFFSETS_TO_TXN,
    kp.TXN_OFFSET_COMMIT,
    kp.OFFSET_DELETE,
):
    ALLOWED[_key] = kp.library_versions(_key)
ALLOWED[kp.SASL_HANDSHAKE] = (1, 1)  # v0 is followed by raw SASL tokens, which cannot be followed; clients send v1
ALLOWED[kp.SASL_AUTHENTICATE] = kp.library_versions(kp.SASL_AUTHENTICATE)
for _key in (
    kp.JOIN_GROUP,
    kp.SYNC_GROUP,
    kp.HEARTBEAT,
    kp.LEAVE_GROUP,
    kp.DESCRIBE_GROUPS,
    kp.LIST_GROUPS,
    kp.DELETE_GROUPS,
):
    ALLOWED[_key] = kp.SUPPORTED[_key]
# The coordinator answers OffsetCommit and OffsetFetch with an error (it keeps no offsets): a client
# is told so rather than cut off.
_TO_COORDINATOR = (
    kp.JOIN_GROUP,
    kp.SYNC_GROUP,
    kp.HEARTBEAT,
    kp.LEAVE_GROUP,
    kp.DESCRIBE_GROUPS,
    kp.DELETE_GROUPS,
    kp.OFFSET_COMMIT,
    kp.OFFSET_FETCH,
)


class Refused(Exception):
    """A reason to close one client connection; `kind` names it in the closed-connections metric:
    bad-input (the client's bytes), unauthenticated, refused (what the gateway will not pass on, an
    answer it cannot rewrite), upstream (a broker or coordinator gone or unreachable)."""

    def __init__(self, message: str, kind: str = "bad-input") -> None:
        super().__init__(message)
        self.kind = kind


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not HOST:PORT: {text!r}")
    return host.strip("[]"), int(port)


def allowed(api_key: int, version: int) -> bool:
    if api_key not in ALLOWED:
        return False
    span = ALLOWED[api_key]
    return span is None or span[0] <= version <= span[1]


@dataclass
class GatewayConfig:
    bootstrap: list[tuple[str, int]]
    listen: tuple[str, int]
    groups: str
    coordinators: list[tuple[str, int]]
    advertised_host: str | None = None
    max_frame_bytes: int = kp.MAX_FRAME_BYTES
    server_ssl: ssl.SSLContext | None = None  # TLS on every port of the gateway
    broker_ssl: ssl.SSLContext | None = None  # TLS to the brokers
    coordinator_ssl: ssl.SSLContext | None = None  # TLS to the coordinators' listeners
    require_sasl: bool = False  # a connection authenticates (SASL, with the brokers) before anything else
    # The gateway's own principal and token at the coordinators (SASL PLAIN): set, it forwards our
    # groups' requests in Envelopes carrying each client's principal and address.
    coordinator_credentials: tuple[str, str] | None = None


async def _read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """One frame's payload (`kafka_protocol.read_frame`); None at a clean end of stream; Refused for
    a bad size or a truncation."""
    try:
        return await kp.read_frame(reader, max_bytes)
    except kp.KafkaProtocolError as e:
        raise Refused(str(e)) from None


Rewrite = Callable[[bytes], Awaitable[bytes]]


@dataclass
class _Upstream:
    """One connection to a broker or a coordinator listener; answers come in request order."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    pending: collections.deque = field(default_factory=collections.deque)
    task: asyncio.Task | None = None
    correlation: int = 1000  # the gateway's own correlation ids (Envelopes), after its log-in's


class Gateway:
    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.groups = re.compile(config.groups)
        host = config.listen[0]
        self.advertised_host = config.advertised_host or (host if host not in ("", "0.0.0.0", "::") else "127.0.0.1")
        self.brokers: dict[int, tuple[str, int]] = {}  # node id -> the broker's real address
        self._servers: dict[str, asyncio.Server] = {}
        self._bind_lock = asyncio.Lock()
        self._owners: dict[str, tuple[str, int]] = {}  # group -> the coordinator listener that owns it
        self._connections: set[asyncio.Task] = set()
        self.bad_input = 0  # connections closed, whatever the reason (metrics.closed has them by reason)
        self.metrics = GatewayMetrics()

    # --- ports ----------------------------------------------------------------------------------

    @property
    def bootstrap_port(self) -> int:
        return self.config.listen[1]

    @property
    def coordinator_port(self) -> int:
        return self.bootstrap_port + 1

    def broker_port(self, node_id: int) -> int:
        return self.bootstrap_port + 2 + node_id

    def ours(self, group: str) -> bool:
        return self.groups.fullmatch(group) is not None

    async def start(self) -> None:
        if self.bootstrap_port == 0:
            raise ValueError("--listen needs a fixed port: the other ports follow from it")
        await self._bind("bootstrap", self.bootstrap_port, None)
        await self._bind("coordinator", self.coordinator_port, None)
        try:  # the brokers' ports now, so clients that remember them reconnect after a restart
            await self._learn_brokers()
        except (OSError, kp.KafkaProtocolError, Refused) as e:
            log.warning("gateway: no broker list at start (%s); broker ports open as Metadata names them", e)

    async def close(self) -> None:
        for server in self._servers.values():
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers.values():
            await server.wait_closed()
        self._servers.clear()

    async def _bind(self, name: str, port: int, node_id: int | None) -> None:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._connection(reader, writer, name, node_id)

        self._servers[name] = await asyncio.start_server(
            accept, self.config.listen[0], port, reuse_address=True, ssl=self.config.server_ssl
        )

    async def gateway_port_of(self, node_id: int, host: str, port: int) -> int:
        """The gateway's port for broker `node_id` at host:port, bound before it is returned."""
        if node_id == COORDINATOR_NODE_ID:
            raise Refused(f"a broker has node id {node_id}, the gateway's coordinator node's")
        if node_id < 0 or self.broker_port(node_id) > 65535:
            raise Refused(f"node id {node_id} has no gateway port (base {self.bootstrap_port})")
        self.brokers[node_id] = (host, port)
        name = f"broker-{node_id}"
        async with self._bind_lock:
            if name not in self._servers:
                try:
                    await self._bind(name, self.broker_port(node_id), node_id)
                except OSError as e:
                    raise Refused(f"cannot bind port {self.broker_port(node_id)} for node {node_id}: {e}") from None
                log.info("gateway: node %d (%s:%d) is at port %d", node_id, host, port, self.broker_port(node_id))
        return self.broker_port(node_id)

    async def _learn_brokers(self) -> None:
        reader, writer = await self._open(self.config.bootstrap, self.config.broker_ssl)
        try:
            body = kp.request_class(kp.METADATA, 12)(
                topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
            writer.write(kp.encode_request(body, 12, 1, "coordinator-gateway"))
            payload = await _read_frame(reader, MAX_RESPONSE_BYTES)
            if payload is None:
                raise Refused("the broker closed the connection")
            _, answer = kp.decode_response(kp.METADATA, 12, payload)
            for broker in answer.brokers:
                await self.gateway_port_of(broker.node_id, broker.host, broker.port)
        finally:
            writer.close()

    async def _open(
        self, addresses: list[tuple[str, int]], context: ssl.SSLContext | None = None, timeout: float = 10
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        error: Exception | None = None
        for host, port in addresses:
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=context, server_hostname=host if context else None), timeout
                )
            except (TimeoutError, OSError) as e:  # ssl.SSLError is an OSError
                error = e
        raise Refused(f"no upstream answers ({error})", "upstream")

    async def open_coordinator(
        self, address: tuple[str, int], timeout: float = 10
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to a coordinator's listener, logged in with the gateway's own credentials
        when it has them (SASL PLAIN, correlation ids 1 and 2). Refused if it cannot be had."""
        try:
            reader, writer = await self._open([address], self.config.coordinator_ssl, timeout)
        except Refused:
            self.metrics.upstream_failures.labels("coordinator").inc()
            raise
        if self.config.coordinator_credentials is None:
            return reader, writer
        user, password = self.config.coordinator_credentials
        try:
            for correlation, api_key, version, body in (
                (1, kp.SASL_HANDSHAKE, 1, kp.request_class(kp.SASL_HANDSHAKE, 1)(mechanism="PLAIN")),
                (
                    2,
                    kp.SASL_AUTHENTICATE,
                    2,
                    kp.request_class(kp.SASL_AUTHENTICATE, 2)(auth_bytes=f"\0{user}\0{password}".encode()),
                ),
            ):
                writer.write(kp.encode_request(body, version, correlation, "coordinator-gateway"))
                payload = await asyncio.wait_for(_read_frame(reader, MAX_RESPONSE_BYTES), timeout)
                if payload is None:
                    raise Refused("the connection closed")
                _, answer = kp.decode_response(api_key, version, payload)
                if answer.error_code:
                    raise Refused(f"error {answer.error_code} {getattr(answer, 'error_message', '') or ''}".strip())
        except (TimeoutError, OSError, kp.KafkaProtocolError, Refused) as e:
            writer.close()
            self.metrics.upstream_failures.labels("coordinator").inc()
            log.error("gateway: the coordinator at %s:%d refused the gateway's log-in as %s: %s", *address, user, e)
            raise Refused(f"cannot log in to the coordinator at {address[0]}:{address[1]}: {e}", "upstream") from None
        return reader, writer

    # --- our groups' coordinators -----------------------------------------------------------

    async def owner_of(self, group: str) -> tuple[str, int] | None:
        """The coordinator listener that owns `group`: FindCoordinator asked of each `--coordinator` in
        turn; the first that answers NONE names the owner's listener."""
        if group in self._owners:
            return self._owners[group]
        for address in self.config.coordinators:
            try:
                reader, writer = await self.open_coordinator(address, timeout=5)
            except Refused:
                continue
            try:
                body = kp.request_class(kp.FIND_COORDINATOR, 3)(key=group, key_type=GROUP_KEY_TYPE)
                writer.write(kp.encode_request(body, 3, 3, "coordinator-gateway"))
                payload = await asyncio.wait_for(_read_frame(reader, MAX_RESPONSE_BYTES), 10)
                if payload is None:
                    continue
                _, answer = kp.decode_response(kp.FIND_COORDINATOR, 3, payload)
                if answer.error_code == 0:  # the owner's listener (another instance may name it)
                    owner = (answer.host, answer.port) if answer.host and answer.port > 0 else address
                    self._owners[group] = owner
                    return owner
            except (TimeoutError, OSError, kp.KafkaProtocolError, Refused):
                continue
            finally:
                writer.close()
        return None

    def forget(self, group: str) -> None:
        self._owners.pop(group, None)

    def forget_coordinator(self, address: tuple[str, int]) -> None:
        """A coordinator that cannot be reached owns nothing we know of: ask again next time."""
        for group in [g for g, owner in self._owners.items() if owner == address]:
            del self._owners[group]

    # --- a client connection ----------------------------------------------------------------

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port_name: str, node_id: int | None
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        self.metrics.connections.labels(port_name).inc()
        try:
            await _ClientConnection(self, reader, writer, port_name, node_id).run()
        finally:
            self.metrics.connections.labels(port_name).dec()
            if task is not None:
                self._connections.discard(task)


class _ClientConnection:
    def __init__(
        self,
        gateway: Gateway,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        port_name: str,
        node_id: int | None,
    ) -> None:
        self.gw = gateway
        self.reader, self.writer = reader, writer
        self.port_name, self.node_id = port_name, node_id
        peer = writer.get_extra_info("peername")
        self.host = peer[0] if isinstance(peer, tuple) else ""
        self.client_id: str | None = None
        self.broker: _Upstream | None = None
        self.coordinators: dict[tuple[str, int], _Upstream] = {}
        self.answers: asyncio.Queue[asyncio.Future[bytes] | None] = asyncio.Queue()
        self.closing: str | None = None
        # SASL, passed through to the broker, which decides; the gateway follows it to learn the
        # principal (`_sasl`): the mechanism of a handshake whose authentication is pending, the user
        # its first message named, the rounds answered, and the principal once the broker accepted.
        self.mechanism: str | None = None
        self.user: str | None = None
        self.rounds = 0
        self.principal: tuple[str, str] | None = None
        self.opaque_mechanism: str | None = None  # authenticated with a mechanism whose principal we cannot read

    async def run(self) -> None:
        sender = asyncio.create_task(self._send_answers())
        try:
            await self._serve()
        except Refused as e:
            self._refuse(str(e), e.kind)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # a bug: logged with its traceback; the client reconnects
            log.exception("gateway: unexpected failure on a connection from %s; closing it", self.host)
        finally:
            sender.cancel()
            upstreams = ([self.broker] if self.broker else []) + list(self.coordinators.values())
            for upstream in upstreams:
                if upstream.task is not None:
                    upstream.task.cancel()
                upstream.writer.close()
                for future in upstream.pending:
                    if not future[1].done():
                        future[1].cancel()
            await asyncio.gather(sender, *(u.task for u in upstreams if u.task), return_exceptions=True)
            self.writer.close()

    def _refuse(self, reason: str, kind: str) -> None:
        """One `gateway-connection-closed` event (a warning) naming the client id and host, counted."""
        self.gw.bad_input += 1
        self.gw.metrics.closed.labels(kind).inc()
        logs.event(
            log,
            "gateway-connection-closed",
            "gateway: closing the connection from %s on the %s port%s: %s",
            self.host,
            self.port_name,
            f" (client id {self.client_id})" if self.client_id else "",
            reason,
            level=logging.WARNING,
            host=self.host,
            port=self.port_name,
            client_id=self.client_id,
            reason=kind,
            detail=reason,
        )

    def _abort(self, reason: str, kind: str = "refused") -> None:
        if self.closing is None:
            self.closing = reason
            self._refuse(reason, kind)
        self.writer.close()

    async def _send_answers(self) -> None:
        while True:
            future = await self.answers.get()
            try:
                data = await future
            except asyncio.CancelledError:
                raise
            except Refused as e:
                self._abort(str(e), e.kind)
                return
            except Exception as e:  # noqa: BLE001 (an upstream gone or an answer that does not decode)
                self._abort(f"{type(e).__name__}: {e}", "upstream" if isinstance(e, ConnectionError) else "refused")
                return
            self.writer.write(data)
            await self.writer.drain()

    async def _serve(self) -> None:
        if self.port_name.startswith("broker-"):
            address = self.gw.brokers[self.node_id]
            self.broker = await self._upstream([address])
        else:
            self.broker = await self._upstream(self.gw.config.bootstrap)
        while self.closing is None:
            payload = await _read_frame(self.reader, self.gw.config.max_frame_bytes)
            if payload is None:
                return
            try:
                header = kp.peek_header(payload)
            except kp.KafkaProtocolError as e:
                raise Refused(str(e)) from None
            self.client_id = header.client_id
            if header.api_key == kp.API_VERSIONS and header.api_version > ALLOWED[kp.API_VERSIONS][1]:
                self._api_versions_fallback(header)
                continue
            if not allowed(header.api_key, header.api_version):
                raise Refused(f"{header.api_name} v{header.api_version} is not passed by the gateway")
            if header.api_key in (kp.SASL_HANDSHAKE, kp.SASL_AUTHENTICATE):
                self._sasl(header, payload)
                continue
            if header.api_key != kp.API_VERSIONS:
                self._check_authenticated(header)
            await self._route(header, payload)
            for upstream in (self.broker, *self.coordinators.values()):  # a slow upstream slows its client
                await upstream.writer.drain()

    # --- authentication: SASL passed through, followed ---------------------------------------------

    def _sasl(self, header: kp.RequestHeader, payload: bytes) -> None:
        """A SaslHandshake or SaslAuthenticate, forwarded to the connection's broker (one client
        connection, one upstream connection: the broker authenticates, and re-authenticates, the
        client itself). For PLAIN and SCRAM the gateway reads the user the client's first message
        names and, once the broker accepts the last round (PLAIN one, SCRAM two), takes `User:<user>`
        as the connection's principal, Kafka's default principal for both."""
        try:
            body = kp.decode_any_request(payload).body
        except kp.KafkaProtocolError as e:
            raise Refused(str(e)) from None
        if header.api_key == kp.SASL_HANDSHAKE:
            self.mechanism, self.user, self.rounds = body.mechanism, None, 0
            return self._forward(self.broker, header, payload, None)
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

        self._forward(self.broker, header, payload, follow)

    def _check_authenticated(self, header: kp.RequestHeader) -> None:
        """As a Kafka SASL listener: nothing but ApiVersions and SASL while an authentication is
        under way, or before one when authentication is required (--require-sasl)."""
        if self.mechanism in kp.SASL_MECHANISMS_WITH_NAMES:
            raise Refused(f"{header.api_name} before SASL authentication completed", "unauthenticated")
        if self.gw.config.require_sasl and self.principal is None and self.opaque_mechanism is None:
            raise Refused(f"{header.api_name} before SASL authentication (the gateway requires it)", "unauthenticated")

    def _conveyed_principal(self, group: str) -> bytes:
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

    async def _route(self, header: kp.RequestHeader, payload: bytes) -> None:
        key = header.api_key
        if key == kp.PRODUCE:
            try:
                acks = kp.produce_acks(payload)
            except kp.KafkaProtocolError as e:
                raise Refused(str(e)) from None
            if acks == 0:  # no answer comes: nothing to wait for
                self.gw.metrics.requests.labels(header.api_name, "broker").inc()
                self.broker.writer.write(kp.frame(payload))
                return
        if kp.is_group_keyed(key) or key == kp.FIND_COORDINATOR:
            try:
                request = kp.decode_any_request(payload)
            except kp.KafkaProtocolError as e:
                raise Refused(str(e)) from None
            if key == kp.FIND_COORDINATOR:
                return self._forward(self.broker, header, payload, self._find_coordinator_rewrite(request))
            groups = kp.group_ids(request)
            ours = [g for g in groups if self.gw.ours(g)]
            if ours:
                return await self._to_coordinator(header, payload, groups, ours)
        elif key == kp.LIST_GROUPS and self.port_name == "coordinator":
            return await self._list_our_groups(header, payload)
        rewrite = {
            kp.API_VERSIONS: self._api_versions_rewrite,
            kp.METADATA: self._metadata_rewrite,
            kp.DESCRIBE_CLUSTER: self._describe_cluster_rewrite,
        }.get(key)
        self._forward(self.broker, header, payload, rewrite(header) if rewrite else None)

    def _forward(
        self,
        upstream: _Upstream,
        header: kp.RequestHeader,
        payload: bytes,
        rewrite: Rewrite | None,
        answer: bool = True,
    ) -> asyncio.Future[bytes]:
        """Send `payload` upstream; its answer (after `rewrite`) is the client's next one, unless
        `answer` is False (a part of an answer the caller assembles)."""
        if upstream is self.broker:
            self.gw.metrics.requests.labels(header.api_name, "broker").inc()
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        upstream.pending.append((header.correlation_id, future, rewrite))
        if answer:
            self.answers.put_nowait(future)
        upstream.writer.write(kp.frame(payload))
        return future

    async def _upstream(self, addresses: list[tuple[str, int]], coordinator: bool = False) -> _Upstream:
        if coordinator:
            reader, writer = await self.gw.open_coordinator(addresses[0])
        else:
            try:
                reader, writer = await self.gw._open(addresses, self.gw.config.broker_ssl)
            except Refused:
                self.gw.metrics.upstream_failures.labels("broker").inc()
                raise
        upstream = _Upstream(reader, writer)
        upstream.task = asyncio.create_task(self._read_answers(upstream, addresses[0] if coordinator else None))
        return upstream

    async def _read_answers(self, upstream: _Upstream, coordinator: tuple[str, int] | None) -> None:
        try:
            while True:
                payload = await _read_frame(upstream.reader, MAX_RESPONSE_BYTES)
                if payload is None:
                    raise ConnectionError("the upstream closed the connection")
                correlation = kp.correlation_of(payload)
                if not upstream.pending:
                    raise Refused(f"an answer (correlation id {correlation}) to no request")
                expected, future, rewrite = upstream.pending.popleft()
                if correlation != expected:
                    raise Refused(f"an answer with correlation id {correlation}, expected {expected}")
                try:
                    data = await rewrite(payload) if rewrite else kp.frame(payload)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 (fail closed: whatever stops a rewrite closes the client)
                    future.set_exception(Refused(f"a {type(e).__name__} rewriting an answer: {e}"))
                    return
                if not future.done():
                    future.set_result(data)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 (the upstream is gone: the client connection goes with it)
            for _, future, _ in upstream.pending:
                if not future.done():
                    future.set_exception(e if isinstance(e, Refused) else ConnectionError(f"upstream: {e}"))
            upstream.pending.clear()
            if coordinator is not None:
                self.gw.forget_coordinator(coordinator)
            # Closed once the answers read before it are written: a broker answers a failed
            # authentication, then closes, and the client must read why.
            closed: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            closed.set_exception(
                Refused(f"upstream connection lost: {e}", "refused" if isinstance(e, Refused) else "upstream")
            )
            self.answers.put_nowait(closed)

    # --- our groups ---------------------------------------------------------------------------

    async def _to_coordinator(
        self, header: kp.RequestHeader, payload: bytes, groups: list[str], ours: list[str]
    ) -> None:
        if len(ours) != len(groups):
            raise Refused(f"{header.api_name} names our groups and others together: {groups}")
        if header.api_key not in _TO_COORDINATOR:
            raise Refused(
                f"{header.api_name} for our group {ours[0]} is not served (the coordinator has no offsets "
                "or transactions)"
            )
        owner = await self.gw.owner_of(ours[0])
        if owner is None:
            raise Refused(f"no coordinator owns group {ours[0]} now")
        upstream = self.coordinators.get(owner)
        if upstream is None:
            try:
                upstream = self.coordinators[owner] = await self._upstream([owner], coordinator=True)
            except Refused:
                self.gw.forget_coordinator(owner)
                raise
        self._to_listener(upstream, header, payload, ours[0], self._coordinator_answer(header, ours))

    def _to_listener(
        self,
        upstream: _Upstream,
        header: kp.RequestHeader,
        payload: bytes,
        group: str,
        rewrite: Rewrite | None,
        answer: bool = True,
    ) -> asyncio.Future[bytes]:
        """A request forwarded to a coordinator's listener: as it is, or, when the gateway logs in to
        the coordinators, in an Envelope with the client's principal and address (Kafka's forwarding,
        KIP-590), whose answer is unwrapped before `rewrite`."""
        self.gw.metrics.requests.labels(header.api_name, "coordinator").inc()
        if self.gw.config.coordinator_credentials is None:
            return self._forward(upstream, header, payload, rewrite, answer)
        principal = self._conveyed_principal(group)
        try:
            address = ipaddress.ip_address(self.host).packed
        except ValueError:
            address = bytes(4)
        upstream.correlation += 1
        wrapped = kp.envelope(payload, principal, address, upstream.correlation, "coordinator-gateway")

        async def unwrap(answer: bytes) -> bytes:
            _, envelope = kp.decode_response(kp.ENVELOPE, 0, answer)
            if envelope.error_code or envelope.response_data is None:
                raise Refused(
                    f"the coordinator did not take the forwarded {header.api_name}: error {envelope.error_code}"
                )
            inner = bytes(envelope.response_data)
            return await rewrite(inner) if rewrite else kp.frame(inner)

        envelope_header = kp.RequestHeader(kp.ENVELOPE, 0, upstream.correlation, "coordinator-gateway")
        return self._forward(upstream, envelope_header, wrapped[4:], unwrap, answer)

    async def _list_our_groups(self, header: kp.RequestHeader, payload: bytes) -> None:
        """ListGroups on the coordinator node: every coordinator's groups in one answer (Kafka's Admin
        asks every node, so the brokers' groups come from their own ports)."""
        parts: list[asyncio.Future[bytes]] = []
        for address in self.gw.config.coordinators:
            upstream = self.coordinators.get(address)
            if upstream is None:
                try:
                    upstream = self.coordinators[address] = await self._upstream([address], coordinator=True)
                except Refused:
                    continue  # a coordinator not running owns nothing
            parts.append(self._to_listener(upstream, header, payload, "(ListGroups)", None, answer=False))
        if not parts:
            raise Refused("ListGroups: no coordinator answers")

        async def merge() -> bytes:
            merged = None
            for data in await asyncio.gather(*parts):
                _, body = kp.decode_response(kp.LIST_GROUPS, header.api_version, data[4:])
                if merged is None:
                    merged = body
                    continue
                if body.error_code and not merged.error_code:
                    merged.error_code = body.error_code
                known = {g.group_id for g in merged.groups}
                merged.groups = list(merged.groups) + [g for g in body.groups if g.group_id not in known]
            return kp.encode_response(header, merged)

        self.answers.put_nowait(asyncio.ensure_future(merge()))

    def _coordinator_answer(self, header: kp.RequestHeader, groups: list[str]) -> Rewrite:
        async def check(payload: bytes) -> bytes:
            _, body = kp.decode_response(header.api_key, header.api_version, payload)
            codes = [getattr(body, "error_code", 0)]
            if header.api_key == kp.DESCRIBE_GROUPS:
                codes = [g.error_code for g in body.groups]
            elif header.api_key == kp.DELETE_GROUPS:
                codes = [r.error_code for r in body.results]
            self.gw.metrics.observe_coordinator_answer(header.api_name, kp.error_codes(body))
            if NOT_COORDINATOR in codes:
                for group in groups:
                    self.gw.forget(group)
            return kp.frame(payload)

        return check

    # --- rewrites -----------------------------------------------------------------------------

    def _api_versions_fallback(self, header: kp.RequestHeader) -> None:
        """ApiVersions at a version we cannot read (a newer client): Kafka's answer, v0 with
        UNSUPPORTED_VERSION and the versions we pass, after which the client asks again at one of them.
        The broker is asked at v0 for its table."""
        request = kp.encode_request(kp.request_class(kp.API_VERSIONS, 0)(), 0, header.correlation_id, header.client_id)
        asked = kp.RequestHeader(kp.API_VERSIONS, 0, header.correlation_id, header.client_id)
        self._forward(self.broker, asked, request[4:], self._api_versions_rewrite(asked, error=kp.UNSUPPORTED_VERSION))

    def _api_versions_rewrite(self, header: kp.RequestHeader, error: int | None = None) -> Rewrite:
        async def rewrite(payload: bytes) -> bytes:
            version = header.api_version
            try:
                _, body = kp.decode_response(kp.API_VERSIONS, version, payload)
            except kp.KafkaProtocolError:
                version = 0  # Kafka answers a version it does not know with v0
                _, body = kp.decode_response(kp.API_VERSIONS, 0, payload)
            kept = []
            for api in body.api_keys:
                if api.api_key not in ALLOWED:
                    continue
                span = ALLOWED[api.api_key]
                low, high = api.min_version, api.max_version
                if span is not None:
                    low, high = max(low, span[0]), min(high, span[1])
                if low <= high:
                    api.min_version, api.max_version = low, high
                    kept.append(api)
            body.api_keys = kept
            if error is not None:
                body.error_code = error
            return kp.encode_response(kp.RequestHeader(kp.API_VERSIONS, version, header.correlation_id, None), body)

        return rewrite

    def _metadata_rewrite(self, header: kp.RequestHeader) -> Rewrite:
        async def rewrite(payload: bytes) -> bytes:
            _, body = kp.decode_response(kp.METADATA, header.api_version, payload)
            for broker in body.brokers:
                broker.port = await self.gw.gateway_port_of(broker.node_id, broker.host, broker.port)
                broker.host = self.gw.advertised_host
            cls = kp.response_class(kp.METADATA, header.api_version)
            body.brokers = list(body.brokers) + [
                cls.MetadataResponseBroker(
                    node_id=COORDINATOR_NODE_ID, host=self.gw.advertised_host, port=self.gw.coordinator_port, rack=None
                )
            ]
            return kp.encode_response(header, body)

        return rewrite

    def _describe_cluster_rewrite(self, header: kp.RequestHeader) -> Rewrite:
        async def rewrite(payload: bytes) -> bytes:
            _, body = kp.decode_response(kp.DESCRIBE_CLUSTER, header.api_version, payload)
            if header.api_version >= 1 and body.endpoint_type != 1:
                raise Refused("DescribeCluster of the controllers: their addresses are not rewritten")
            for broker in body.brokers:
                broker.port = await self.gw.gateway_port_of(broker.broker_id, broker.host, broker.port)
                broker.host = self.gw.advertised_host
            return kp.encode_response(header, body)

        return rewrite

    def _find_coordinator_rewrite(self, request: kp.Request) -> Rewrite:
        header, body = request.header, request.body
        version = header.api_version
        key_type = body.key_type if version >= 1 else GROUP_KEY_TYPE
        keys = list(body.coordinator_keys) if version >= 4 else [body.key]

        async def place(key: str, node_id: int, host: str, port: int, code: int) -> tuple[int, str, int, int]:
            if key_type == GROUP_KEY_TYPE and self.gw.ours(key):
                return COORDINATOR_NODE_ID, self.gw.advertised_host, self.gw.coordinator_port, 0
            if code == 0 and node_id >= 0:
                return node_id, self.gw.advertised_host, await self.gw.gateway_port_of(node_id, host, port), code
            return node_id, host, port, code

        async def rewrite(payload: bytes) -> bytes:
            _, answer = kp.decode_response(kp.FIND_COORDINATOR, version, payload)
            if version >= 4:
                for entry in answer.coordinators:
                    node, h, p, code = await place(entry.key, entry.node_id, entry.host, entry.port, entry.error_code)
                    if code != entry.error_code:
                        entry.error_message = None
                    entry.node_id, entry.host, entry.port, entry.error_code = node, h, p, code
            else:
                node, h, p, code = await place(keys[0], answer.node_id, answer.host, answer.port, answer.error_code)
                if code != answer.error_code:
                    answer.error_message = None
                answer.node_id, answer.host, answer.port, answer.error_code = node, h, p, code
            return kp.encode_response(header, answer)

        return rewrite
