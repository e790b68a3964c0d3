"""Kafka's binary protocol (KRPC) as the coordinator's Kafka listener speaks it (DESIGN §12): the
one module that touches the message library.

The message types are kafka-python 3's (`kafka.protocol`: loaded at import from Kafka's own JSON
message schemas; bytes checked against kafka-clients 4.3.1 by `tests/test_kafka_protocol.py`). This
module adds what a server needs around them, sans-I/O:

- frames: an int32 size, then that many bytes (`frame_length`, `FrameReader`), at most
  `MAX_FRAME_BYTES` (Kafka's `socket.request.max.bytes`, 100 MiB) unless told otherwise;
- the request header peeked without decoding the body (`peek_header`: API key and version,
  correlation id, client id);
- a request's body decoded for the APIs we serve, at the versions in `SUPPORTED` (`decode_request`);
- a response framed with the header Kafka writes for it (`encode_response`: header v1, with tagged
  fields, for a flexible version; v0 otherwise and always for ApiVersions, whose answer a client
  must read before it knows our versions);
- ApiVersions answered from `SUPPORTED` (`api_versions_response`), including Kafka's v0 answer with
  UNSUPPORTED_VERSION to a client that asks with a version we do not know.

Every failure to read input is a `KafkaProtocolError` (nothing else escapes): the listener closes
that connection. Tagged fields the schemas do not know are skipped, never an error, and error codes
are plain integers, so a code the library has no name for is carried, not refused.

The client side (`encode_request`, `decode_response`) is here too: tests build real frames with it.
"""

from __future__ import annotations

import asyncio
import io
import struct
import warnings
from dataclasses import dataclass
from typing import Any

with warnings.catch_warnings():  # kafka-python 3.0 loads its schemas with importlib.resources' old calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin import (
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )
    from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
    from kafka.protocol.api_data import ApiData
    from kafka.protocol.api_header import RequestHeader as _LibRequestHeader
    from kafka.protocol.api_header import ResponseHeader as _LibResponseHeader
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        OffsetFetchResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        MetadataRequest,
        MetadataResponse,
    )
    from kafka.protocol.producer import AddOffsetsToTxnRequest, TxnOffsetCommitRequest
    from kafka.protocol.sasl import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

    from coordinator.api import kafka_schemas

    # Forwarding (KIP-590) and its principal: schemas kafka-python does not ship (kafka_schemas/).
    class EnvelopeRequest(ApiMessage, load_json=kafka_schemas):
        pass

    class EnvelopeResponse(ApiMessage, load_json=kafka_schemas):
        pass

    class DefaultPrincipalData(ApiData, load_json=kafka_schemas):
        pass


# Kafka's `socket.request.max.bytes` default: a frame announcing more closes the connection.
MAX_FRAME_BYTES = 100 * 1024 * 1024

PRODUCE = 0
FETCH = 1
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
ADD_OFFSETS_TO_TXN = 25
TXN_OFFSET_COMMIT = 28
OFFSET_DELETE = 47
DESCRIBE_CLUSTER = 60
API_VERSIONS = 18
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
ENVELOPE = 58

# The APIs the listener serves and their versions (inclusive), the only table of them: ApiVersions
# answers it, and a request outside it is refused. JoinGroup from v4 (KIP-394: a new member is
# given its id with MEMBER_ID_REQUIRED); the others from v0, as kafka-clients 4.3.1 still sends
# them; OffsetCommit and OffsetFetch over kafka-clients 4.3.1's whole range (v2-v10, v1-v10: the listener
# answers them with an error, we keep no offsets); every maximum is kafka-clients 4.3.1's (the golden
# test checks).
SUPPORTED: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 4),
    FIND_COORDINATOR: (0, 6),
    JOIN_GROUP: (4, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_COMMIT: (2, 10),
    OFFSET_FETCH: (1, 10),
    # Authentication (SASL PLAIN: a principal and its token) and the gateway's forwarding of a
    # client's request with the client's principal (Envelope, KIP-590): `coordinator.service.kafka_listener`.
    SASL_HANDSHAKE: (1, 1),
    SASL_AUTHENTICATE: (0, 2),
    ENVELOPE: (0, 0),
}


_MESSAGES: dict[int, tuple[Any, Any]] = {
    API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    SASL_HANDSHAKE: (SaslHandshakeRequest, SaslHandshakeResponse),
    SASL_AUTHENTICATE: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    ENVELOPE: (EnvelopeRequest, EnvelopeResponse),
    # Not served by the listener: the gateway rewrites their answers (addresses).
    METADATA: (MetadataRequest, MetadataResponse),
    DESCRIBE_CLUSTER: (DescribeClusterRequest, DescribeClusterResponse),
}

# Requests that name a group besides the group APIs above: the gateway reads their group ids (and
# only those) to keep our groups away from the brokers' coordinators.
_GROUP_KEYED: dict[int, Any] = {
    ADD_OFFSETS_TO_TXN: AddOffsetsToTxnRequest,
    TXN_OFFSET_COMMIT: TxnOffsetCommitRequest,
    OFFSET_DELETE: OffsetDeleteRequest,
}

NONE = 0
UNSUPPORTED_VERSION = 35

_SIZE = struct.Struct(">i")
_FIXED_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length


class KafkaProtocolError(Exception):
    """Input that is not a request we can answer: a bad frame, a truncated or malformed request, an
    API or version we do not serve. The connection it came on is closed."""


class FrameTooLarge(KafkaProtocolError):
    """A frame size above the maximum, or negative."""


class Truncated(KafkaProtocolError):
    """The connection ended inside a frame."""


class UnsupportedRequest(KafkaProtocolError):
    """An API key or version outside `SUPPORTED`."""

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


# --- frames ---------------------------------------------------------------------------------------


def frame_length(prefix: bytes, max_bytes: int = MAX_FRAME_BYTES) -> int:
    """The size a frame's 4-byte prefix announces; FrameTooLarge above `max_bytes` or below 0."""
    if len(prefix) != 4:
        raise KafkaProtocolError(f"a frame size is 4 bytes, got {len(prefix)}")
    (size,) = _SIZE.unpack(prefix)
    if size < 0:
        raise FrameTooLarge(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameTooLarge(f"frame of {size} bytes is over the maximum of {max_bytes}")
    return size


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> bytes | None:
    """The next frame's payload from a stream; None at a clean end between frames. FrameTooLarge
    for a bad size, Truncated when the stream ends inside a frame. Both servers read their
    connections with it: the coordinator's Kafka listener and the gateway."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if e.partial:
            raise Truncated("the connection ended inside a frame's size") from None
        return None
    size = frame_length(prefix, max_bytes)
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as e:
        raise Truncated(f"the connection ended {len(e.partial)} bytes into a frame of {size}") from None


class FrameReader:
    """Splits a byte stream into frames: `feed(data)` returns the frames it completed (without their
    size), keeping a partial one for the next call; a bad size raises FrameTooLarge."""

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        out: list[bytes] = []
        while len(self._buffer) >= 4:
            size = frame_length(bytes(self._buffer[:4]), self.max_bytes)
            if len(self._buffer) < 4 + size:
                break
            out.append(bytes(self._buffer[4 : 4 + size]))
            del self._buffer[: 4 + size]
        return out

    @property
    def pending(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buffer)


# --- requests -------------------------------------------------------------------------------------


def api_name(api_key: int) -> str:
    """Kafka's name of an API (the library's table of every key), `api-key-N` for one it does not know."""
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api-key-{api_key}"


NAMES: dict[int, str] = {api_key: api_name(api_key) for api_key in SUPPORTED}


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)


@dataclass(frozen=True)
class Request:
    header: RequestHeader
    body: Any  # the library's request message, at header.api_version


def peek_header(payload: bytes) -> RequestHeader:
    """A request's header (header v1 and v2 begin alike: the client id is never compact), the body
    left undecoded."""
    if len(payload) < _FIXED_HEADER.size:
        raise KafkaProtocolError(f"a request header is at least {_FIXED_HEADER.size} bytes, got {len(payload)}")
    api_key, api_version, correlation_id, length = _FIXED_HEADER.unpack_from(payload)
    if length < -1:
        raise KafkaProtocolError(f"client id length {length}")
    client_id = None
    if length >= 0:
        end = _FIXED_HEADER.size + length
        if len(payload) < end:
            raise KafkaProtocolError("request header truncated in its client id")
        try:
            client_id = bytes(payload[_FIXED_HEADER.size : end]).decode("utf-8")
        except UnicodeDecodeError:
            raise KafkaProtocolError("client id is not UTF-8") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def is_supported(api_key: int, api_version: int) -> bool:
    span = SUPPORTED.get(api_key)
    return span is not None and span[0] <= api_version <= span[1]


def decode_request(payload: bytes) -> Request:
    """A request frame's payload (without its size): header and body. UnsupportedRequest for an API
    or version outside SUPPORTED, KafkaProtocolError for anything malformed."""
    header = peek_header(payload)
    if not is_supported(header.api_key, header.api_version):
        raise UnsupportedRequest(
            f"{header.api_name} v{header.api_version} is not served (served: {_span_text(header.api_key)})", header
        )
    request_class = _MESSAGES[header.api_key][0]
    flexible = request_class.flexible_version_q(header.api_version)
    try:
        stream = io.BytesIO(payload)
        _LibRequestHeader.decode(stream, flexible=flexible)  # skips the header's tagged fields
        body = _decode_body(request_class, memoryview(payload)[stream.tell() :], header.api_version)
    except Exception as e:  # noqa: BLE001 (the library raises IndexError, ValueError, struct.error, ...)
        raise KafkaProtocolError(
            f"{header.api_name} v{header.api_version} request does not decode: {type(e).__name__}: {e}"
        ) from None
    return Request(header, body)


def _decode_body(cls: Any, data: memoryview, version: int) -> Any:
    """A message of `cls` at `version` from `data`, which must hold every byte its fields declare.

    The library's `decode` slices strings, bytes and tagged-field values without checking that they
    are all there, so a frame cut inside a field decoded to a shorter value (a FindCoordinator cut
    in its key asked for group "conn" instead of "connect-cluster"); Kafka's own readers raise on
    such a frame. Its compiled decoder (what `decode` runs) also returns where the message ended,
    past the data when a slice came up short. A top-level tagged-field section is read through a
    copy that cannot go past the data, so a message ending in one is decoded once more with a byte
    appended: it ends past the data only when a tagged value lacked bytes (trailing bytes are left
    alone, as Kafka leaves them; only the top-level section can end a message cut short silently,
    a nested one cut short leaves no bytes for the fields after it)."""
    flexible = cls.flexible_version_q(version)
    decoder = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls[None])
    body, end = decoder(data, 0)
    if end > len(data):
        raise ValueError(f"its fields declare {end - len(data)} bytes more than it holds")
    if flexible and end == len(data) and (body.unknown_tags or body.tags):
        _, padded_end = decoder(memoryview(bytes(data) + b"\x00"), 0)
        if padded_end > len(data):
            raise ValueError("a tagged field holds fewer bytes than it declares")
    return body


def request_class(api_key: int, version: int) -> Any:
    """The library's request type for one served API at one version (its nested types are its
    attributes: `request_class(JOIN_GROUP, 9).JoinGroupRequestProtocol`)."""
    return _MESSAGES[api_key][0][version]


def response_class(api_key: int, version: int) -> Any:
    return _MESSAGES[api_key][1][version]


def response_header_version(api_key: int, version: int) -> int:
    """1 (tagged fields) for a flexible version, else 0; ApiVersions always 0 (KIP-511)."""
    if api_key == API_VERSIONS:
        return 0
    return 1 if _MESSAGES[api_key][1].flexible_version_q(version) else 0


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """The framed response to the request `header` came with: `body` (a response message) at the
    request's version, after the response header Kafka writes for it."""
    flexible = response_header_version(header.api_key, header.api_version) == 1
    head = _LibResponseHeader(correlation_id=header.correlation_id).encode(flexible=flexible)
    return frame(head + body.encode(version=header.api_version))


def api_versions_response(header: RequestHeader) -> bytes:
    """ApiVersions' answer, framed: our SUPPORTED table at the request's version; to a version we do
    not know (a newer client), Kafka's v0 answer with UNSUPPORTED_VERSION and the table, after which
    the client asks again with a version we list."""
    low, high = SUPPORTED[API_VERSIONS]
    version = header.api_version
    error = NONE
    if not low <= version <= high:
        version, error = 0, UNSUPPORTED_VERSION
    cls = ApiVersionsResponse[version]
    body = cls(
        error_code=error,
        throttle_time_ms=0,
        api_keys=[
            cls.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(SUPPORTED.items())
        ],
    )
    return encode_response(RequestHeader(API_VERSIONS, version, header.correlation_id, header.client_id), body)


def _span_text(api_key: int) -> str:
    span = SUPPORTED.get(api_key)
    return "none" if span is None else f"v{span[0]}-v{span[1]}"


# --- the client side ------------------------------------------------------------------------------


def encode_request(body: Any, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """A framed request: header v1 (v2, with tagged fields, for a flexible version), then `body`."""
    api_key = body.API_KEY
    flexible = _MESSAGES[api_key][0].flexible_version_q(version)
    head = _LibRequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id
    ).encode(flexible=flexible)
    return frame(head + body.encode(version=version))


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """A response frame's payload (without its size) to a request of `api_key` at `version`: its
    correlation id and body."""
    flexible = response_header_version(api_key, version) == 1
    try:
        stream = io.BytesIO(payload)
        head = _LibResponseHeader.decode(stream, flexible=flexible)
        body = _encodable(_decode_body(_MESSAGES[api_key][1], memoryview(payload)[stream.tell() :], version))
    except Exception as e:  # noqa: BLE001 (as in decode_request)
        raise KafkaProtocolError(
            f"{NAMES.get(api_key, api_key)} v{version} response does not decode: {type(e).__name__}: {e}"
        ) from None
    return head.correlation_id, body


# --- what a proxy reads of a request (the gateway) ----------------------------------------------


def _encodable(message: Any) -> Any:
    """A decoded message made fit to encode again (the library's decode leaves these slots unset)."""
    for slot in ("_header", "_min_version", "_max_version"):
        if not hasattr(message, slot):
            setattr(message, slot, None)
    return message


def library_versions(api_key: int) -> tuple[int, int]:
    """The versions the library can decode of an API's request and response (ours or group-keyed)."""
    cls = _MESSAGES[api_key][0] if api_key in _MESSAGES else _GROUP_KEYED[api_key]
    return cls.min_version, cls.max_version


def _header_end(payload: bytes, header: RequestHeader, cls: Any) -> int:
    stream = io.BytesIO(payload)
    _LibRequestHeader.decode(stream, flexible=cls.flexible_version_q(header.api_version))
    return stream.tell()


def decode_any_request(payload: bytes) -> Request:
    """A request of any API this module has the types of, at any version the library knows (not only
    SUPPORTED): what the gateway reads to route and rewrite. KafkaProtocolError otherwise."""
    header = peek_header(payload)
    cls = _MESSAGES[header.api_key][0] if header.api_key in _MESSAGES else _GROUP_KEYED.get(header.api_key)
    if cls is None or not cls.min_version <= header.api_version <= cls.max_version:
        raise UnsupportedRequest(f"{header.api_name} v{header.api_version} cannot be read here", header)
    try:
        start = _header_end(payload, header, cls)
        body = _encodable(_decode_body(cls, memoryview(payload)[start:], header.api_version))
    except Exception as e:  # noqa: BLE001 (as in decode_request)
        raise KafkaProtocolError(
            f"{header.api_name} v{header.api_version} request does not decode: {type(e).__name__}: {e}"
        ) from None
    return Request(header, body)


def group_ids(request: Request) -> list[str]:
    """The groups a group-keyed request names (empty for other APIs, and for ListGroups)."""
    key, body = request.header.api_key, request.body
    if key in (
        JOIN_GROUP,
        SYNC_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        OFFSET_COMMIT,
        ADD_OFFSETS_TO_TXN,
        TXN_OFFSET_COMMIT,
        OFFSET_DELETE,
    ):
        return [body.group_id]
    if key in (DESCRIBE_GROUPS, DELETE_GROUPS):
        return list(body.groups if key == DESCRIBE_GROUPS else body.groups_names)
    if key == OFFSET_FETCH:
        if request.header.api_version >= 8:
            return [g.group_id for g in body.groups]
        return [body.group_id]
    return []


def is_group_keyed(api_key: int) -> bool:
    return api_key in _GROUP_KEYED or api_key in (
        JOIN_GROUP,
        SYNC_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        DESCRIBE_GROUPS,
        DELETE_GROUPS,
        OFFSET_COMMIT,
        OFFSET_FETCH,
    )


def produce_acks(payload: bytes) -> int:
    """A Produce request's acks, read without decoding its records (0: no response comes)."""
    header = peek_header(payload)
    version = header.api_version
    try:
        stream = io.BytesIO(payload)
        _LibRequestHeader.decode(stream, flexible=version >= 9)
        pos = stream.tell()
        if version >= 3:  # transactional_id first: a nullable string, compact from v9
            if version >= 9:
                length, shift = 0, 0
                while True:
                    byte = payload[pos]
                    pos += 1
                    length |= (byte & 0x7F) << shift
                    shift += 7
                    if not byte & 0x80:
                        break
                pos += max(length - 1, 0)
            else:
                (length,) = struct.unpack_from(">h", payload, pos)
                pos += 2 + max(length, 0)
        (acks,) = struct.unpack_from(">h", payload, pos)
    except (IndexError, struct.error, ValueError) as e:
        raise KafkaProtocolError(f"Produce v{version} request does not decode: {e}") from None
    return acks


def correlation_of(payload: bytes) -> int:
    """A response frame's correlation id (its first 4 bytes, whatever its header version)."""
    if len(payload) < 4:
        raise KafkaProtocolError(f"a response is at least 4 bytes, got {len(payload)}")
    return _SIZE.unpack_from(payload)[0]


def error_codes(answer: Any) -> list[int]:
    """The error codes an answer carries: its own, and each key's, group's or member's of a batched
    answer (FindCoordinator v4+, DescribeGroups, DeleteGroups, LeaveGroup v3+, OffsetFetch v8+); of
    per-partition answers (OffsetCommit, OffsetFetch v1-v7) each distinct code once, unless the answer's
    own code already counted it."""
    codes = [answer.error_code] if getattr(answer, "error_code", None) is not None else []
    for field in ("coordinators", "groups", "results", "members"):
        for item in getattr(answer, field, None) or ():
            code = getattr(item, "error_code", None)
            if code is not None:
                codes.append(code)
    partitions = {p.error_code for t in getattr(answer, "topics", None) or () for p in getattr(t, "partitions", ())}
    return codes + sorted(partitions - set(codes))


# --- authentication: what a proxy learns of a SASL exchange, and the principal it conveys ---------

SASL_MECHANISMS_WITH_NAMES = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def sasl_username(mechanism: str, auth_bytes: bytes) -> str:
    """The user a client's first SASL message names, for the mechanisms whose first message names
    one (RFC 4616 PLAIN: `authzid NUL authcid NUL password`, Kafka's principal is authcid; RFC 5802
    SCRAM: `gs2-header,n=user,r=nonce` with `=2C` and `=3D` for `,` and `=`). KafkaProtocolError
    for other mechanisms or malformed bytes: no principal can be named."""
    try:
        text = bytes(auth_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise KafkaProtocolError(f"{mechanism} message is not UTF-8") from None
    if mechanism == "PLAIN":
        parts = text.split("\0")
        if len(parts) != 3 or not parts[1]:
            raise KafkaProtocolError("a PLAIN message is authzid NUL authcid NUL password")
        return parts[1]
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        fields = text.split(",")
        # gs2-header: a channel-binding flag, an optional a=authzid, then the bare message
        for item in fields[2:]:
            if item.startswith("n="):
                name = item[2:]
                if "=" in name.replace("=2C", "").replace("=3D", ""):
                    raise KafkaProtocolError("a SCRAM user name with a bad escape")
                return name.replace("=2C", ",").replace("=3D", "=")
        raise KafkaProtocolError("a SCRAM client-first-message without n=user")
    raise KafkaProtocolError(f"the {mechanism} mechanism's principal is not known to a proxy")


def sasl_plain_credentials(auth_bytes: bytes) -> tuple[str, str, str]:
    """A PLAIN message's (authzid, authcid, password); KafkaProtocolError if malformed."""
    try:
        parts = bytes(auth_bytes).decode("utf-8").split("\0")
    except UnicodeDecodeError:
        raise KafkaProtocolError("a PLAIN message is not UTF-8") from None
    if len(parts) != 3 or not parts[1]:
        raise KafkaProtocolError("a PLAIN message is authzid NUL authcid NUL password")
    return parts[0], parts[1], parts[2]


def principal_bytes(principal_type: str, name: str) -> bytes:
    """A principal as Kafka's DefaultKafkaPrincipalBuilder serializes it for an Envelope: the
    version (int16) then DefaultPrincipalData."""
    return DefaultPrincipalData(type=principal_type, name=name, token_authenticated=False).encode(version=0)


def principal_of(data: bytes) -> tuple[str, str]:
    """(type, name) of a serialized principal (`principal_bytes`); KafkaProtocolError if it does not
    read."""
    data = bytes(data)
    if data[:2] != b"\x00\x00":  # the only version there is, as Kafka's deserializer checks
        raise KafkaProtocolError(f"a principal of version {data[:2].hex() or 'none'}: only 0 is known")
    try:
        decoded = DefaultPrincipalData.decode(io.BytesIO(data), version=0)
    except Exception as e:  # noqa: BLE001 (as in decode_request)
        raise KafkaProtocolError(f"a principal does not decode: {type(e).__name__}: {e}") from None
    return decoded.type, decoded.name


def envelope(
    payload: bytes, principal: bytes | None, client_address: bytes, correlation_id: int, client_id: str | None
) -> bytes:
    """A framed Envelope request carrying `payload` (a request without its frame size)."""
    body = EnvelopeRequest(request_data=bytes(payload), request_principal=principal, client_host_address=client_address)
    return encode_request(body, 0, correlation_id, client_id)
