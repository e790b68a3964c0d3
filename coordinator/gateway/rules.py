"""What the gateway passes, and how it refuses (`proxy` has the story): the APIs and versions it
forwards (`ALLOWED`), those it sends to our coordinators for our groups (`TO_COORDINATOR`), its
coordinator node's id, and `Refused`, a reason to close one client connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from coordinator.api import kafka_protocol as kp

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
TO_COORDINATOR = (
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


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """One frame's payload (`kafka_protocol.read_frame`); None at a clean end of stream; Refused for
    a bad size or a truncation."""
    try:
        return await kp.read_frame(reader, max_bytes)
    except kp.KafkaProtocolError as e:
        raise Refused(str(e)) from None


Rewrite = Callable[[bytes], Awaitable[bytes]]
