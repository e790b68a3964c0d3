"""Wire benchmark (`make bench-wire`): a heartbeat request from the bytes on the wire to the state
machine's `HeartbeatRequest`, parsed and validated.

Two bodies: (a) a worker reporting what it owns (20 tasks of two connectors in ConnectorsAndTasks),
(b) a joining worker with every field, two ClientAssignors included. In one run, on one core, each
way is timed timeit-style (rounds of many calls; the ways' rounds interleaved, so that a busy machine
slows them alike) and reported as the median of its rounds:

- old: the hand parser the declared types replaced, copied below unchanged from af81eb5
  (`orjson.loads`, then `heartbeat_request`: field-by-field checks that build the core's types);
- new: `wire.decode(raw, HeartbeatRequest)`, as the server does it (issue 30 item 2): msgspec decodes
  and validates straight into the core's `HeartbeatRequest` (a Struct declared once, its TaskIds and
  ConnectorsAndTasks the records' own Structs); nothing is converted afterwards.

Goal (issue 14, again issue 30): parse + validate + ready-for-the-core, old/new >= 5x.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from records import Assignor, ConnectorsAndTasks, TaskId  # noqa: E402

from coordinator.api import wire  # noqa: E402
from coordinator.core.protocol import HeartbeatRequest  # noqa: E402

# --- old: the hand parser of af81eb5 (coordinator/api/wire.py), unchanged ------------------------------

INT32 = (-(2**31), 2**31 - 1)
INT16 = (-(2**15), 2**15 - 1)
INT8 = (-(2**7), 2**7 - 1)
_MISSING = object()


class WireError(ValueError):
    """A body that is not what the API accepts."""


def _get(
    body: dict,
    name: str,
    kind: str,
    *,
    required: bool = False,
    nullable: bool = False,
    default: Any = None,
    bounds: tuple[int, int] = INT32,
) -> Any:
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
            # JSON has one number type: 2.0 is the integer 2 to JSON Schema (and to our document).
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
            Assignor(
                _get(a, "Name", "str", required=True),
                _get(a, "MinimumVersion", "int", required=True, bounds=INT16),
                _get(a, "MaximumVersion", "int", required=True, bounds=INT16),
                _get(a, "Reason", "int", default=0, bounds=INT8),
                _get(a, "Version", "int", default=0, bounds=INT16),
                _get(a, "Metadata", "bytes", default=b"") or b"",
            )
            for a in (_object(a, "ClientAssignors[]") for a in assignors)
        )
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
        topic_partitions=body.get("TopicPartitions"),
    )


def old(raw: bytes) -> HeartbeatRequest:
    return heartbeat_request(orjson.loads(raw))


# --- new: the declared types ----------------------------------------------------------------------------


def new(raw: bytes) -> HeartbeatRequest:
    return wire.decode(raw, HeartbeatRequest)


# --- the bodies and the clock ---------------------------------------------------------------------------

OWNED = ConnectorsAndTasks(("conn-a", "conn-b"), tuple(TaskId(f"conn-{'ab'[i % 2]}", i // 2) for i in range(20)))
BODIES = {
    "(a) heartbeat, 20 tasks owned": HeartbeatRequest("connect-cluster", "worker-7.example.com-5f3a", 42, owned=OWNED),
    "(b) join, with ClientAssignors": HeartbeatRequest(
        "connect-cluster",
        "worker-7.example.com-5f3a",
        0,
        instance_id="worker-7",
        rack_id="rack-1",
        rebalance_timeout_ms=60_000,
        url="http://worker-7.example.com:8083",
        owned=ConnectorsAndTasks(),
        client_assignors=(
            Assignor("incremental_cooperative", 0, 1, 0, 1, b"\x01\x02\x03"),
            Assignor("eager", 0, 0, 0, 0, b""),
        ),
    ),
}


def medians_us(ways: dict[str, Callable[[bytes], object]], raw: bytes, calls: int, rounds: int) -> dict[str, float]:
    """Microseconds per call of each way, the median of `rounds` rounds of `calls` calls."""
    timers = {name: timeit.Timer(lambda parse=parse: parse(raw)) for name, parse in ways.items()}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, timer in timers.items():
            times[name].append(timer.timeit(calls) / calls * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print(
        f"heartbeat request, bytes -> core HeartbeatRequest: median of {args.rounds} rounds of {args.calls:,} "
        "calls, one core"
    )
    for name, request in BODIES.items():
        raw = wire.encode(request)
        assert old(raw) == new(raw) == request, name  # both read the same thing
        us = medians_us({"old": old, "new": new}, raw, args.calls, args.rounds)
        ratio = us["old"] / us["new"]
        print(f"  {name} ({len(raw)} bytes)")
        print(f"    old: orjson + hand parser                  {us['old']:6.2f} us")
        print(
            f"    new: msgspec decode into HeartbeatRequest  {us['new']:6.2f} us   old/new {ratio:4.1f}x  (goal >= 5x: "
            f"{'met' if ratio >= 5 else 'not met'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
