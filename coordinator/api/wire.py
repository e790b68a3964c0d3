"""What the HTTP API (DESIGN §7) has of its own: decoding and encoding, and the bodies only HTTP has.

The protocol's requests and responses are the core's own messages (`coordinator.core.protocol`,
msgspec Structs with the seed's field names and their documentation): the server decodes a request
body straight into the message the core takes (`decode(raw, HeartbeatRequest)`) and encodes the
core's answer as it is (`encode`); the SDK does the reverse. A body that does not fit raises
`WireError` naming the field (`... - at $.ClientAssignors[0].Name`), which the server answers with
HTTP 400 and INVALID_REQUEST; never a 500. The OpenAPI document (`coordinator.api.openapi`) is
generated from the same declarations, so it says exactly what is accepted.

Declared here: the bodies that exist only over HTTP (health, liveness, the record format level, the
refusals, FindCoordinator, where partitions are served, ListGroups' envelope), and Kafka Connect's
status shape (`ConnectorStatus`, Connect's REST shape: its lower-case names, ISO times).

`bytes` travel as base64 (RFC 4648, standard alphabet, padded). Integers are JSON integers within
their format's range; as JSON Schema reads them (the document's language), a number with a zero
fraction is that integer (2.0 is 2), any other fraction is refused, so the document and the decoder
agree exactly. Unknown properties are ignored. Rules the state machine checks beyond the type (epochs
>= -2, non-empty ids, version ranges) answer HTTP 200 with an ErrorCode, as the seed's error table says.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta, Struct

from records.constraints import Int32, doc

from coordinator.core import protocol
from coordinator.core.protocol import ErrorCode, ErrorResponse
from coordinator.core.states import TaskStatus
from coordinator.tools.text import iso_time

T = TypeVar("T")


class WireError(ValueError):
    """A body that is not what the API accepts; the message names the field."""


class Body(Struct, rename="pascal", kw_only=True, gc=False):
    """Every body: the seed's field names. No body refers back to itself, so the garbage collector
    need not track them (msgspec's `gc=False`: a third off decoding)."""


# --- FindCoordinator and the admin API -----------------------------------------------------------------


class FindCoordinatorRequest(Body):
    """Which coordinator serves a group."""

    group_id: Annotated[str, doc("The group identifier.")]


class FindCoordinatorResponse(Body):
    """The coordinator of the group's partition."""

    error_code: Annotated[Literal[0], doc("0: no error.")]
    error_message: Annotated[None, doc("null: no error.")]
    partition: Annotated[Int32, doc("The partition of the topic the group lives in (murmur2(GroupId) % partitions).")]
    url: Annotated[str, doc("The base URL of the coordinator serving that partition.")]


class ListGroupsResponse(Body):
    """The groups of the partitions this process serves that the caller may Describe."""

    error_code: Annotated[Literal[0], doc("0: no error.")]
    groups: Annotated[list[protocol.GroupListing], doc("By group id.")]


class PartitionOwner(Body):
    """A partition of the topic and where it is served."""

    partition: Annotated[Int32, doc("The partition number.")]
    url: Annotated[str | None, doc("The base URL of the coordinator serving it, or null when none is known.")]


class PartitionOwnersResponse(Body):
    """Where every partition of the topic is served, as this process knows it: its own partitions, and
    the others from the ownership consumer group (group mode) or its peers (static mode with --peer)."""

    error_code: Annotated[Literal[0], doc("0: no error.")]
    url: Annotated[str, doc("This coordinator's advertised URL.")]
    partitions: Annotated[list[PartitionOwner], doc("Every partition of the topic, by number.")]


# --- Kafka Connect's status, as far as the coordinator knows -------------------------------------------

_ITEM_STATE = Annotated[
    Literal[tuple(s.value for s in TaskStatus)],
    doc(
        "ASSIGNED: a worker owns it; REVOKING: its owner is giving it up and no other worker holds it yet; "
        "UNASSIGNED: no worker holds it. Never RUNNING or FAILED: whether it runs is the worker's to say."
    ),
]
_WORKER_ID = Annotated[
    str | None,
    doc(
        "The member id of the worker holding it (Kafka Connect gives the worker's host:port; the coordinator knows "
        "the member id, and its Url is in describe), or null when UNASSIGNED."
    ),
]
_INSTANCE_ID = Annotated[str | None, doc("That worker's static instance id, or null (dynamic, or UNASSIGNED).")]
_DEFERRED_UNTIL = Annotated[
    str | None,
    doc(
        "When UNASSIGNED because the target deferred it: when the coordinator rebalances for it (ISO 8601, UTC); "
        "else null."
    ),
]


def _iso(ms: int | None) -> str | None:
    return None if ms is None else iso_time(ms)


class ConnectorState(Struct, kw_only=True, gc=False):
    """Where the connector itself is (Kafka Connect's `connector`)."""

    state: _ITEM_STATE
    worker_id: _WORKER_ID
    instance_id: _INSTANCE_ID
    deferred_until: _DEFERRED_UNTIL

    @classmethod
    def of(cls, s: protocol.ItemStatus) -> ConnectorState:
        return cls(
            state=s.state, worker_id=s.member_id, instance_id=s.instance_id, deferred_until=_iso(s.deferred_until_ms)
        )


class TaskState(Struct, kw_only=True, gc=False):
    """Where a task is (an entry of Kafka Connect's `tasks`)."""

    id: Annotated[Int32, doc("The task number.")]
    state: _ITEM_STATE
    worker_id: _WORKER_ID
    instance_id: _INSTANCE_ID
    deferred_until: _DEFERRED_UNTIL


class ConnectorStatus(Struct, kw_only=True, gc=False):
    """A connector's status shaped like Kafka Connect's `GET /connectors/{name}/status`
    (ConnectorStateInfo: Connect's lower-case field names, so Connect's tools read it), claiming only what
    the coordinator knows: who holds the connector and each task, not whether they run. ErrorCode is 0, as
    in every answer of this API."""

    error_code: Annotated[Literal[0], doc("0: no error.")] = msgspec.field(name="ErrorCode")
    name: Annotated[str, doc("The connector's name.")]
    connector: ConnectorState
    tasks: Annotated[
        list[TaskState], doc("By task number: the configured tasks, and any a worker still holds beyond them.")
    ]
    type: Annotated[
        Literal["unknown"],
        doc("Kafka Connect's connector type (source or sink); the coordinator does not know it: always unknown."),
    ]

    @classmethod
    def of(cls, s: protocol.ConnectorStatus) -> ConnectorStatus:
        return cls(
            error_code=0,
            name=s.name,
            connector=ConnectorState.of(s.connector),
            tasks=[
                TaskState(
                    id=n,
                    state=t.state,
                    worker_id=t.member_id,
                    instance_id=t.instance_id,
                    deferred_until=_iso(t.deferred_until_ms),
                )
                for n, t in s.tasks
            ],
            type="unknown",
        )


class Health(Body):
    """This process's partitions and their status."""

    status: Annotated[Literal["ok", "degraded"], doc("ok when every partition is active, degraded otherwise.")]
    url: Annotated[str, doc("This coordinator's advertised URL.")]
    partitions: Annotated[
        dict[
            Annotated[str, Meta(pattern="^(0|[1-9][0-9]*)$")],
            Literal["loading", "active", "failed", "fenced", "closed", "refused"],
        ],
        doc(
            "Partition number -> status (refused: at a record format level this release does not read; "
            "`coordinator topic upgrade-format`)."
        ),
    ]
    release: Annotated[str, doc("This coordinator's release (the package version).")]
    max_format_level: Annotated[
        int, doc("The highest record format level this release reads and writes; `topic upgrade-format` checks it.")
    ]
    format_levels: Annotated[
        dict[Annotated[str, Meta(pattern="^(0|[1-9][0-9]*)$")], int],
        doc("Serving partition number -> the record format level it writes at."),
    ]
    standbys: Annotated[
        dict[Annotated[str, Meta(pattern="^(0|[1-9][0-9]*)$")], StandbyHealth],
        doc("Partition number -> the hot standby kept of it here (not served here; no effect on status)."),
    ] = {}


class FormatLevelRequest(Body):
    """Raise the record format level of every partition this process serves."""

    level: Annotated[int, Meta(ge=1, le=2**15 - 1), doc("The level (records.FORMAT_LEVELS); never lowered.")]


class FormatLevelResponse(Body):
    """What each partition this process serves answered."""

    url: Annotated[str, doc("This coordinator's advertised URL.")]
    partitions: Annotated[
        dict[Annotated[str, Meta(pattern="^(0|[1-9][0-9]*)$")], ErrorResponse],
        doc("Partition number -> its outcome: 0 once the level is durable in the partition."),
    ]


class StandbyHealth(Body):
    """One hot standby this process keeps (`serve --standby-partitions`)."""

    status: Annotated[
        Literal["catching-up", "following", "failed"],
        doc(
            "catching-up until a read first finds nothing new, then following; failed when tailing stopped "
            "(a takeover of the partition then loads it in full; the standby is started again at the next "
            "change of assignment)."
        ),
    ]
    next_offset: Annotated[int, Meta(ge=0), doc("The partition offset the standby reads next.")]
    records: Annotated[int, Meta(ge=0), doc("Records the standby has replayed.")]


class Liveness(Body):
    """This process answers: its event loop runs. Says nothing about its partitions (see Health)."""

    status: Annotated[Literal["alive"], doc("Always alive: an answer at all is the news.")]
    url: Annotated[str, doc("This coordinator's advertised URL.")]
    partitions: Annotated[
        int,
        Meta(ge=0, le=2**31 - 1, extra_json_schema={"format": "int32"}),
        doc("How many partitions this process holds, in any status."),
    ]


class InvalidRequest(Body):
    """The body is not JSON, breaks the schema, or is too large."""

    error_code: Annotated[Literal[42], doc("INVALID_REQUEST")]
    error_message: Annotated[str, doc("What is wrong, naming the field.")]


class AuthorizationFailed(Body):
    """GROUP_AUTHORIZATION_FAILED."""

    error_code: Annotated[Literal[30], doc("GROUP_AUTHORIZATION_FAILED")]
    error_message: Annotated[str, doc("Why the request was refused.")]


assert int(ErrorCode.INVALID_REQUEST) == 42 and int(ErrorCode.GROUP_AUTHORIZATION_FAILED) == 30


# --- decoding and encoding -------------------------------------------------------------------------------

_decoders: dict[type, msgspec.json.Decoder] = {}
_encoder = msgspec.json.Encoder()


def decode(raw: bytes, body: type[T]) -> T:
    """`raw` as a `body`, validated; WireError naming the field when it does not fit."""
    decoder = _decoders.get(body)
    if decoder is None:
        decoder = _decoders[body] = msgspec.json.Decoder(body)
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as e:  # before DecodeError, its base class
        if "got `float`" not in str(e):
            raise WireError(str(e)) from None
        # JSON has one number type: 2.0 is the integer 2 to JSON Schema, and so to us. The rare body
        # that spells an integer so is read again with whole numbers as integers.
        try:
            return decoder.decode(_encoder.encode(_whole_numbers(msgspec.json.decode(raw))))
        except msgspec.ValidationError as again:
            raise WireError(str(again)) from None
    except msgspec.DecodeError as e:
        raise WireError(f"the body is not JSON: {e}") from None


def _whole_numbers(value: Any) -> Any:
    if value.__class__ is float:
        return int(value) if value.is_integer() else value
    if value.__class__ is list:
        return [_whole_numbers(v) for v in value]
    if value.__class__ is dict:
        return {k: _whole_numbers(v) for k, v in value.items()}
    return value


def encode(body: Body) -> bytes:
    return _encoder.encode(body)
