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

Here: the gateway (its ports, the brokers it learned, our groups' owners) and a client connection
(its upstreams, the routing of its requests, its answers in order). Beside it: `rules` (what is passed,
`Refused`), `rewrites` (the answers that carry addresses), `sasl` (following a connection's SASL).
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import logging
import re
import ssl
from dataclasses import dataclass, field

from coordinator.api import kafka_protocol as kp
from coordinator.gateway import rewrites
from coordinator.gateway.metrics import GatewayMetrics
from coordinator.gateway.rules import (
    ALLOWED,
    COORDINATOR_NODE_ID,
    GROUP_KEY_TYPE,
    MAX_RESPONSE_BYTES,
    NOT_COORDINATOR,
    TO_COORDINATOR,
    Refused,
    Rewrite,
    allowed,
    read_frame,
)
from coordinator.gateway.sasl import SaslFollower
from coordinator.tools import logs

log = logging.getLogger(__name__)


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
            payload = await read_frame(reader, MAX_RESPONSE_BYTES)
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
                payload = await asyncio.wait_for(read_frame(reader, MAX_RESPONSE_BYTES), timeout)
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
                payload = await asyncio.wait_for(read_frame(reader, MAX_RESPONSE_BYTES), 10)
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
        self.sasl = SaslFollower()  # SASL, passed through to the broker, which decides; followed (`sasl`)

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
            payload = await read_frame(self.reader, self.gw.config.max_frame_bytes)
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
                self.sasl.check_authenticated(header, self.gw.config.require_sasl)
            await self._route(header, payload)
            for upstream in (self.broker, *self.coordinators.values()):  # a slow upstream slows its client
                await upstream.writer.drain()

    # --- authentication: SASL passed through, followed (`sasl`) ---------------------------------

    def _sasl(self, header: kp.RequestHeader, payload: bytes) -> None:
        """A SaslHandshake or SaslAuthenticate, forwarded to the connection's broker, which decides;
        `self.sasl` follows it."""
        try:
            body = kp.decode_any_request(payload).body
        except kp.KafkaProtocolError as e:
            raise Refused(str(e)) from None
        if header.api_key == kp.SASL_HANDSHAKE:
            self.sasl.handshake(body.mechanism)
            return self._forward(self.broker, header, payload, None)
        self._forward(self.broker, header, payload, self.sasl.authenticate(header, body))

    # --- routing: to the broker, or our groups to their coordinator ------------------------------

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
                return self._forward(self.broker, header, payload, rewrites.find_coordinator_rewrite(self.gw, request))
            groups = kp.group_ids(request)
            ours = [g for g in groups if self.gw.ours(g)]
            if ours:
                return await self._to_coordinator(header, payload, groups, ours)
        elif key == kp.LIST_GROUPS and self.port_name == "coordinator":
            return await self._list_our_groups(header, payload)
        rewrite = None
        if key == kp.API_VERSIONS:
            rewrite = rewrites.api_versions_rewrite(header)
        elif key == kp.METADATA:
            rewrite = rewrites.metadata_rewrite(self.gw, header)
        elif key == kp.DESCRIBE_CLUSTER:
            rewrite = rewrites.describe_cluster_rewrite(self.gw, header)
        self._forward(self.broker, header, payload, rewrite)

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
                payload = await read_frame(upstream.reader, MAX_RESPONSE_BYTES)
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
        if header.api_key not in TO_COORDINATOR:
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
        principal = self.sasl.conveyed_principal(group)
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

    # --- rewrites (`rewrites`) -------------------------------------------------------------------

    def _api_versions_fallback(self, header: kp.RequestHeader) -> None:
        """ApiVersions at a version we cannot read (a newer client): Kafka's answer, v0 with
        UNSUPPORTED_VERSION and the versions we pass, after which the client asks again at one of them.
        The broker is asked at v0 for its table."""
        request = kp.encode_request(kp.request_class(kp.API_VERSIONS, 0)(), 0, header.correlation_id, header.client_id)
        asked = kp.RequestHeader(kp.API_VERSIONS, 0, header.correlation_id, header.client_id)
        self._forward(
            self.broker, asked, request[4:], rewrites.api_versions_rewrite(asked, error=kp.UNSUPPORTED_VERSION)
        )
