"""The admin commands: `coordinator groups list|describe`, `connectors set`, `config set`.

They talk to any coordinator instance (`--url`, env COORDINATOR_URL); a group's requests go to
its coordinator through find-coordinator, and are retried while partitions move or load
(`coordinator.sdk.client`). Output is a readable table, or JSON with `--format json`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import msgspec
import orjson

from coordinator.api import wire
from coordinator.errors import CliError
from coordinator.sdk.client import ApiError, CoordinatorClient, Unavailable

DEFAULT_URL = "http://127.0.0.1:8400"


def register(subparsers: argparse._SubParsersAction) -> None:
    groups = subparsers.add_parser("groups")
    groups_sub = groups.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = groups_sub.add_parser("list", help="the groups of every partition the instance serves")
    _common(listing)
    listing.set_defaults(func=_runner(_list))
    describe = groups_sub.add_parser("describe", help="a group's members, epochs and assignments")
    describe.add_argument("group")
    _common(describe)
    describe.set_defaults(func=_runner(_describe))

    connectors = subparsers.add_parser("connectors")
    connectors_sub = connectors.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_connectors = connectors_sub.add_parser(
        "set", help="replace the group's connectors (creates the group; bumps its epoch when the set changes)")
    set_connectors.add_argument("group")
    set_connectors.add_argument("connectors", nargs="*", type=connector_count, metavar="NAME=TASKS",
                                help="each connector and its task count; none removes them all")
    _common(set_connectors)
    set_connectors.set_defaults(func=_runner(_set_connectors))

    config = subparsers.add_parser("config")
    config_sub = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_config = config_sub.add_parser("set", help="replace the group's timeouts; a flag left out means the "
                                                   "server's default")
    set_config.add_argument("group")
    for flag in ("--session-timeout-ms", "--heartbeat-interval-ms", "--rebalance-timeout-ms",
                 "--scheduled-rebalance-max-delay-ms", "--initial-assignment-delay-ms"):
        set_config.add_argument(flag, type=int, metavar="MS")
    _common(set_config)
    set_config.set_defaults(func=_runner(_set_config))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("COORDINATOR_URL", DEFAULT_URL),
                        help=f"any coordinator instance (env COORDINATOR_URL, default {DEFAULT_URL})")
    parser.add_argument("--token", default=os.environ.get("COORDINATOR_TOKEN"),
                        help="bearer token (env COORDINATOR_TOKEN)")
    parser.add_argument("--ca-file", default=os.environ.get("COORDINATOR_CA_FILE"), metavar="FILE",
                        help="CA certificates to verify an HTTPS coordinator (env COORDINATOR_CA_FILE)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="keep retrying an unavailable coordinator this long (default 30)")
    parser.add_argument("--format", choices=("table", "json"), default="table")


def connector_count(text: str) -> tuple[str, int]:
    """`NAME=TASKS`: a connector and its task count, as `connectors set` and the fleet take them."""
    name, equals, tasks = text.rpartition("=")
    if not equals or not name or not tasks.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=TASKS, got {text!r}")
    return name, int(tasks)


def _runner(action: Callable[[CoordinatorClient, argparse.Namespace], Awaitable[int]]
            ) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        context = None
        if args.ca_file:
            try:
                context = ssl.create_default_context(cafile=args.ca_file)
            except (OSError, ssl.SSLError) as e:
                raise CliError(f"cannot load --ca-file {args.ca_file}: {e}", exit_code=2) from None

        def retrying(why: str) -> None:
            print(f"waiting for the coordinator of this group ({why})", file=sys.stderr)

        async def go() -> int:
            async with CoordinatorClient(args.url, token=args.token, ssl_context=context, retry_for_s=args.timeout,
                                         on_retry=retrying) as client:
                return await action(client, args)
        try:
            return asyncio.run(go())
        except ApiError as e:
            raise CliError(str(e)) from None
        except Unavailable as e:
            raise CliError(str(e)) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            raise CliError(f"cannot reach the coordinator at {args.url}: {e}") from None
    return run


def _protocol_error(answer: wire.ErrorResponse) -> int:
    if answer.error_code:
        print(f"error {answer.error_code}: {answer.error_message}", file=sys.stderr)
        return 1
    return 0


def _print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(msgspec.to_builtins(value), option=orjson.OPT_INDENT_2).decode() + "\n")


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells)


def _items(cat: wire.ConnectorsAndTasks) -> str:
    return ",".join([*cat.connectors, *(f"{t.connector}-{t.task}" for t in cat.tasks)]) or "-"


async def _list(client: CoordinatorClient, args: argparse.Namespace) -> int:
    answer = await client.request("GET", "/v1/groups", wire.ListGroupsResponse)
    if isinstance(answer, wire.ErrorResponse):
        return _protocol_error(answer)
    if args.format == "json":
        _print_json(answer.groups)
    else:
        print(table([[g.group_id, g.group_epoch, g.state, g.members] for g in answer.groups],
                    ["GROUP", "EPOCH", "STATE", "MEMBERS"]))
    return 0


async def _describe(client: CoordinatorClient, args: argparse.Namespace) -> int:
    a = await client.call(args.group, "GET", f"/v1/groups/{args.group}", wire.GroupDescription)
    if isinstance(a, wire.ErrorResponse):
        return _protocol_error(a)
    if args.format == "json":
        _print_json(a)
        return 0
    if a.group_type == "classic":
        print(f"group {a.group_id} (classic): {a.state}, generation {a.generation}, protocol {a.protocol_name}, "
              f"leader {a.leader}")
    else:
        print(f"group {a.group_id}: {a.state}, group epoch {a.group_epoch}, assignment epoch {a.assignment_epoch}, "
              f"assignor {a.assignor} ({a.assignor_kind})")
    print("connectors: " + (", ".join(f"{c.name}({c.tasks} tasks)" for c in a.connectors) or "none"))
    if a.deferred.connectors or a.deferred.tasks:
        print(f"deferred: {_items(a.deferred)} until {a.scheduled_rebalance_at_ms} ms")
    if a.assignment_error:
        print(f"assignment error {a.assignment_error}: {a.assignment_error_message}")
    print()
    print(table([[m.member_id, m.instance_id, m.protocol, m.member_epoch, m.state, _items(m.assignment),
                  _items(m.pending_revocation), _items(m.target)] for m in a.members],
                ["MEMBER", "INSTANCE", "PROTOCOL", "EPOCH", "STATE", "OWNS", "REVOKING", "TARGET"]))
    if a.departures:
        print()
        print(f"removed by the change to group epoch {a.group_epoch}:")
        print(table([[d.member_id, d.instance_id, d.reason_text] for d in a.departures],
                    ["MEMBER", "INSTANCE", "WHY"]))
    return 0


async def _set_connectors(client: CoordinatorClient, args: argparse.Namespace) -> int:
    names = [name for name, _ in args.connectors]
    if len(set(names)) != len(names):
        raise CliError("a connector is named twice", exit_code=2)
    body = wire.SetConnectorsRequest(connectors=[wire.ConnectorTaskCount(name=n, tasks=t) for n, t in args.connectors])
    return _protocol_error(await client.call(args.group, "PUT", f"/v1/groups/{args.group}/connectors",
                                             wire.ErrorResponse, body))


async def _set_config(client: CoordinatorClient, args: argparse.Namespace) -> int:
    body = wire.SetConfigRequest(session_timeout_ms=args.session_timeout_ms,
                                 heartbeat_interval_ms=args.heartbeat_interval_ms,
                                 rebalance_timeout_ms=args.rebalance_timeout_ms,
                                 scheduled_rebalance_max_delay_ms=args.scheduled_rebalance_max_delay_ms,
                                 initial_assignment_delay_ms=args.initial_assignment_delay_ms)
    return _protocol_error(await client.call(args.group, "PUT", f"/v1/groups/{args.group}/config",
                                             wire.ErrorResponse, body))
