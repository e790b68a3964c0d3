"""Wire benchmark (`make bench-wire`): parsing and validating a heartbeat request, from the bytes
on the wire to the state machine's `HeartbeatRequest`.

Two bodies: a worker reporting what it owns (20 tasks of two connectors), and a joining worker
(every field, with its ClientAssignors). Measured in one run, on one core, as medians of several
rounds: the declared types (`coordinator.api.wire`: msgspec decodes and validates into structs),
alone and followed by `.protocol()` (the conversion into the state machine's `HeartbeatRequest`,
which the server does next), against the baseline: the hand parser they replaced, which did all
three at once (orjson, then field-by-field checks building the core's types; copied below from the
last commit that had it, af81eb5). Goal (issue 14): parse + validate >= 5x faster.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from records import Assignor, ConnectorsAndTasks, TaskId  # noqa: E402

from coordinator.api import wire  # noqa: E402
from coordinator.core.protocol import HeartbeatRequest  # noqa: E402

# --- the baseline: the hand parser of af81eb5 (coordinator/api/wire.py), unchanged -----------------

INT32 = (-(2**31), 2**31 - 1)
INT16 = (-(2**15), 2**15 - 1)
INT8 = (-(2**7), 2**7 - 1)
_MISSING = object()


class WireError(ValueError):
    pass


def _get(body: dict, name: str, kind: str, *, required: bool = False, nullable: bool = False,
         default: Any = None, bounds: tuple[int, int] = INT32) -> Any:
    value = body.get(name, _MISSING)
    if value is _MISSING:
        if required:
            raise WireError(f"{name} is required")
        return default
    if value is None:
        if nullable or not required and default is None:
            return None
        raise WireError(f"{name} must not be null")
    if kind == "int":
        if value.__class__ is not int:
            if value.__class__ is not float or not value.is_integer():
                raise WireError(f"{name} must be an integer")
            value = int(value)
        if not bounds[0] <= value <= bounds[1]:
            raise WireError(f"{name} must be within [{bounds[0]}, {bounds[1]}]")
    elif kind == "str":
        if value.__class__ is not str:
            raise WireError(f"{name} must be a string")
    elif kind == "bytes":
        if value.__class__ is not str:
            raise WireError(f"{name} must be a base64 string")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise WireError(f"{name} is not valid base64") from None
    elif kind == "list":
        if value.__class__ is not list:
            raise WireError(f"{name} must be an array")
    elif kind == "object":
        if value.__class__ is not dict:
            raise WireError(f"{name} must be an object")
    return value


def _object(value: Any, what: str) -> dict:
    if value.__class__ is not dict:
        raise WireError(f"{what} must be an object")
    return value


def connectors_and_tasks(value: Any, what: str = "ConnectorsAndTasks") -> ConnectorsAndTasks:
    body = _object(value, what)
    connectors = _get(body, "Connectors", "list", default=[]) or []
    tasks = _get(body, "Tasks", "list", default=[]) or []
    for c in connectors:
        if c.__class__ is not str:
            raise WireError(f"{what}.Connectors must hold strings")
    out = []
    for t in tasks:
        t = _object(t, f"{what}.Tasks[]")
        out.append(TaskId(_get(t, "Connector", "str", required=True), _get(t, "Task", "int", required=True)))
    return ConnectorsAndTasks(tuple(connectors), tuple(out))


def heartbeat_request(body: Any) -> HeartbeatRequest:
    body = _object(body, "the body")
    assignors = _get(body, "ClientAssignors", "list", nullable=True)
    client_assignors = None
    if assignors is not None:
        client_assignors = tuple(
            Assignor(_get(a, "Name", "str", required=True),
                     _get(a, "MinimumVersion", "int", required=True, bounds=INT16),
                     _get(a, "MaximumVersion", "int", required=True, bounds=INT16),
                     _get(a, "Reason", "int", default=0, bounds=INT8),
                     _get(a, "Version", "int", default=0, bounds=INT16),
                     _get(a, "Metadata", "bytes", default=b"") or b"")
            for a in (_object(a, "ClientAssignors[]") for a in assignors))
    owned = _get(body, "ConnectorsAndTasks", "object", nullable=True)
    return HeartbeatRequest(
        group_id=_get(body, "GroupId", "str", required=True),
        member_id=_get(body, "MemberId", "str", required=True),
        member_epoch=_get(body, "MemberEpoch", "int", required=True),
        instance_id=_get(body, "InstanceId", "str", nullable=True),
        rack_id=_get(body, "RackId", "str", nullable=True),
        rebalance_timeout_ms=_get(body, "RebalanceTimeoutMs", "int", default=-1),
        server_assignor=_get(body, "ServerAssignor", "str", nullable=True),
        client_assignors=client_assignors,
        owned=None if owned is None else connectors_and_tasks(owned),
        url=_get(body, "Url", "str", nullable=True),
        topic_partitions=body.get("TopicPartitions"))


def hand_parser(raw: bytes) -> HeartbeatRequest:
    return heartbeat_request(orjson.loads(raw))


# --- the declared types ------------------------------------------------------------------------------


def declared(raw: bytes) -> wire.HeartbeatRequest:
    """Parse and validate: the typed, checked body."""
    return wire.decode(raw, wire.HeartbeatRequest)


def declared_converted(raw: bytes) -> HeartbeatRequest:
    """... and convert it into the state machine's request, as the server does."""
    return wire.decode(raw, wire.HeartbeatRequest).protocol()


# --- the bodies and the clock ---------------------------------------------------------------------------

OWNED = ConnectorsAndTasks(("conn-a", "conn-b"), tuple(TaskId(f"conn-{'ab'[i % 2]}", i // 2) for i in range(20)))
BODIES = {
    "heartbeat, 20 tasks owned": HeartbeatRequest("connect-cluster", "worker-7.example.com-5f3a", 42, owned=OWNED),
    "join, with ClientAssignors": HeartbeatRequest(
        "connect-cluster", "worker-7.example.com-5f3a", 0, instance_id="worker-7", rack_id="rack-1",
        rebalance_timeout_ms=60_000, url="http://worker-7.example.com:8083", owned=ConnectorsAndTasks(),
        client_assignors=(Assignor("incremental_cooperative", 0, 1, 0, 1, b"\x01\x02\x03"),
                          Assignor("eager", 0, 0, 0, 0, b""))),
}


def per_call_us(parse: Callable[[bytes], HeartbeatRequest], raw: bytes, calls: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            parse(raw)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="parses per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"parse + validate a heartbeat request, bytes -> HeartbeatRequest; median of {args.rounds} rounds of "
          f"{args.calls:,} (one core)")
    for name, request in BODIES.items():
        raw = wire.encode(wire.HeartbeatRequest.of(request))
        assert hand_parser(raw) == declared_converted(raw) == request, name  # both read the same thing
        old = per_call_us(hand_parser, raw, args.calls, args.rounds)
        new = per_call_us(declared, raw, args.calls, args.rounds)
        converted = per_call_us(declared_converted, raw, args.calls, args.rounds)
        print(f"  {name} ({len(raw)} bytes): hand parser (baseline) {old:.2f} us")
        print(f"    declared types, parse + validate   {new:6.2f} us  {old / new:4.1f}x faster; goal >= 5x -> "
              f"{'met' if old / new >= 5 else 'NOT met'}")
        print(f"    ... + conversion to the core's type {converted:6.2f} us  {old / converted:4.1f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
