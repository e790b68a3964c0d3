"""The admin commands: `coordinator groups list|describe`, `connectors set`, `config set`.

They talk to any coordinator instance (`--url`, env COORDINATOR_URL); a group's requests go to
its coordinator through find-coordinator, and are retried while partitions move or load
(`coordinator.sdk.client`). Output is a readable table, or JSON with `--format json`. Shaped like
Kafka's `kafka-consumer-groups`: the group is `--group GROUP` (or the first argument), `describe`
has `--members [--verbose]`, `--state` and a per-task view `--tasks`, and `--watch` redraws it.
Times in tables are ISO 8601 (UTC, milliseconds); JSON keeps milliseconds since the epoch.
`groups list` asks every instance: `/v1/partitions` says who serves each partition.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import msgspec
import orjson

from records import ConnectorsAndTasks, ConnectorTaskCount

from coordinator.api import operations, wire
from coordinator.core.protocol import (
    ErrorResponse,
    GroupDescription,
    GroupListing,
    SetConfigRequest,
    SetConnectorsRequest,
)
from coordinator.core.states import TaskStatus
from coordinator.errors import CliError
from coordinator.sdk.client import ApiError, CoordinatorClient, Unavailable
from coordinator.tools import coordinator_args
from coordinator.tools.text import iso_time, table


def register(subparsers: argparse._SubParsersAction) -> None:
    _register_groups(subparsers)
    _register_changes(subparsers)


def _register_groups(subparsers: argparse._SubParsersAction) -> None:
    """`groups list` and `groups describe`."""
    groups = subparsers.add_parser("groups")
    groups_sub = groups.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = groups_sub.add_parser(
        "list",
        help="the groups of every partition, asked of every instance that serves one",
        description="Lists the groups of every partition of the topic: the instance at --url says who serves each "
        "partition (its own, and in group mode or with --peer the others'), and each instance is asked "
        "for its groups. Partitions nobody answered for are named on stderr.",
    )
    _common(listing)
    listing.set_defaults(func=_runner(_list))
    describe = groups_sub.add_parser(
        "describe",
        help="a group's members, epochs and assignments",
        description="A group as `kafka-consumer-groups --describe` shows one. Without a view flag: its epochs, "
        "assignor, connectors, deferred work and members. Times are ISO 8601, UTC.",
    )
    _group_argument(describe)
    view = describe  # one view at a time: checked in _describe, so that a clash is one line
    view.add_argument(
        "--members",
        action="store_true",
        help="one row per member: member and instance id, client (over HTTP the principal its "
        "heartbeats authenticated as, which carry no client id; over Kafka's protocol its "
        "client.id), host, protocol, epoch, state",
    )
    view.add_argument(
        "--state",
        action="store_true",
        help="the group's coordinator (URL and partition), assignor, state, epochs and member count",
    )
    view.add_argument(
        "--tasks",
        action="store_true",
        help="one row per connector and task, in the status endpoint's words: ASSIGNED to a member, "
        "REVOKING by its owner, or UNASSIGNED (deferred until the scheduled rebalance, or "
        "until the next target assignment when no rebalance time is set); its target. Whether "
        "it runs only the worker knows",
    )
    describe.add_argument(
        "--verbose",
        action="store_true",
        help="with --members: also what each member owns, is revoking and is given as its target",
    )
    describe.add_argument(
        "--watch",
        nargs="?",
        type=_seconds,
        const=2.0,
        metavar="SECONDS",
        help="redraw every SECONDS (default 2) until Ctrl-C; with --format json, one JSON line per redraw",
    )
    _common(describe)
    describe.set_defaults(func=_runner(_describe))


def _register_changes(subparsers: argparse._SubParsersAction) -> None:
    """`connectors set` and `config set`."""
    connectors = subparsers.add_parser("connectors")
    connectors_sub = connectors.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_connectors = connectors_sub.add_parser(
        "set", help="replace the group's connectors (creates the group; bumps its epoch when the set changes)"
    )
    _group_argument(set_connectors)
    set_connectors.add_argument(
        "connectors",
        nargs="*",
        type=connector_count,
        metavar="NAME=TASKS",
        help="each connector and its task count; none removes them all",
    )
    _common(set_connectors)
    set_connectors.set_defaults(func=_runner(_set_connectors), connectors_follow=True)

    config = subparsers.add_parser("config")
    config_sub = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_config = config_sub.add_parser(
        "set", help="replace the group's timeouts; a flag left out means the server's default"
    )
    _group_argument(set_config)
    for flag in (
        "--session-timeout-ms",
        "--heartbeat-interval-ms",
        "--rebalance-timeout-ms",
        "--scheduled-rebalance-max-delay-ms",
        "--initial-assignment-delay-ms",
    ):
        set_config.add_argument(flag, type=int, metavar="MS")
    _common(set_config)
    set_config.set_defaults(func=_runner(_set_config))


def _common(parser: argparse.ArgumentParser) -> None:
    coordinator_args.add_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="keep retrying an unavailable coordinator this long (default 30)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")


def _group_argument(parser: argparse.ArgumentParser) -> None:
    """The group, as Kafka's tools take it (`--group GROUP`) or as the first argument: one of the two."""
    parser.add_argument("group", nargs="?", metavar="GROUP", help="the group id (or --group)")
    parser.add_argument("--group", dest="group_flag", metavar="GROUP", help="the group id, as Kafka's tools take it")


def _the_group(args: argparse.Namespace) -> None:
    """Settles `args.group` from the positional form or --group; one and only one of them."""
    if not hasattr(args, "group_flag"):
        return
    flag, positional = args.group_flag, args.group
    if flag is not None and positional is not None:
        if not getattr(args, "connectors_follow", False):
            raise CliError(
                f"the group is given twice ({positional!r} and --group {flag!r}): give one of them", exit_code=2
            )
        try:  # `connectors set --group G A=2 B=1`: the first word after the flags is a connector
            args.connectors.insert(0, connector_count(positional))
        except argparse.ArgumentTypeError as e:
            raise CliError(f"with --group, every argument is a connector: {e}", exit_code=2) from None
    group = flag if flag is not None else positional
    if not group:
        raise CliError("which group? pass --group GROUP (or the group id as the first argument)", exit_code=2)
    args.group = group


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, 86400], got {text!r}")
    return value


def connector_count(text: str) -> tuple[str, int]:
    """`NAME=TASKS`: a connector and its task count, as `connectors set` and the fleet take them."""
    name, equals, tasks = text.rpartition("=")
    if not equals or not name or not tasks.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=TASKS, got {text!r}")
    return name, int(tasks)


def _runner(
    action: Callable[[CoordinatorClient, argparse.Namespace], Awaitable[int]],
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        _the_group(args)
        context = None
        if args.ca_file:
            try:
                context = ssl.create_default_context(cafile=args.ca_file)
            except (OSError, ssl.SSLError) as e:
                raise CliError(f"cannot load --ca-file {args.ca_file}: {e}", exit_code=2) from None

        def retrying(why: str) -> None:
            print(f"waiting for the coordinator of this group ({why})", file=sys.stderr)

        async def go() -> int:
            async with CoordinatorClient(
                args.url, token=args.token, ssl_context=context, retry_for_s=args.timeout, on_retry=retrying
            ) as client:
                return await action(client, args)

        try:
            return asyncio.run(go())
        except KeyboardInterrupt:
            if getattr(args, "watch", None) is None:
                raise
            return 0  # --watch runs until Ctrl-C: that is how it ends, not a failure
        except ApiError as e:
            raise CliError(str(e)) from None
        except Unavailable as e:
            raise CliError(str(e)) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise CliError(f"cannot reach the coordinator at {args.url}: {e}") from None

    return run


def _protocol_error(answer: ErrorResponse) -> int:
    if answer.error_code:
        print(f"error {answer.error_code}: {answer.error_message}", file=sys.stderr)
        return 1
    return 0


def _print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(msgspec.to_builtins(value), option=orjson.OPT_INDENT_2).decode() + "\n")


def _items(cat: ConnectorsAndTasks) -> str:
    return ",".join([*cat.connectors, *(f"{t.connector}-{t.task}" for t in cat.tasks)]) or "-"


async def _list(client: CoordinatorClient, args: argparse.Namespace) -> int:
    """The groups of every partition: the instance at --url says who serves each partition, each
    instance named lists its own; a group seen twice (a partition moving meanwhile) is listed once,
    at its newest epoch."""
    try:
        owners = await client.request(*operations.route("listPartitions"), wire.PartitionOwnersResponse)
    except ApiError as e:
        if e.status != 404:
            raise
        owners = None  # a coordinator from before /v1/partitions: its own groups only
    this = owners.url.rstrip("/") if owners else None
    urls = list(dict.fromkeys(p.url.rstrip("/") for p in owners.partitions if p.url)) if owners else [None]
    unanswered = [p.partition for p in owners.partitions if not p.url] if owners else []
    groups: dict[str, GroupListing] = {}
    for url in urls:
        try:
            answer = await client.request(
                *operations.route("listGroups"), wire.ListGroupsResponse, url=None if url == this else url
            )
        except (aiohttp.ClientError, TimeoutError, OSError, ApiError) as e:
            if url is None:
                raise
            failed = [p.partition for p in owners.partitions if p.url and p.url.rstrip("/") == url]
            print(f"warning: {url} (partitions {_numbers(failed)}) did not answer: {e}", file=sys.stderr)
            unanswered += failed
            continue
        if isinstance(answer, ErrorResponse):
            return _protocol_error(answer)
        for g in answer.groups:
            if g.group_id not in groups or g.group_epoch > groups[g.group_id].group_epoch:
                groups[g.group_id] = g
    if unanswered:
        print(
            f"warning: no coordinator answered for partitions {_numbers(sorted(unanswered))}: their groups are "
            "not listed",
            file=sys.stderr,
        )
    listed = [groups[g] for g in sorted(groups)]
    if args.format == "json":
        _print_json(listed)
    else:
        print(
            table(
                [[g.group_id, g.group_epoch, g.state, g.members] for g in listed],
                ["GROUP", "EPOCH", "STATE", "MEMBERS"],
            )
        )
    return 0


def _numbers(values: list[int]) -> str:
    return ", ".join(map(str, values))


async def _describe(client: CoordinatorClient, args: argparse.Namespace) -> int:
    views = [flag for flag in ("members", "state", "tasks") if getattr(args, flag)]
    if len(views) > 1:
        raise CliError(f"one view at a time: --{views[0]} or --{views[1]}", exit_code=2)
    if args.verbose and not args.members:
        raise CliError("--verbose goes with --members", exit_code=2)
    if args.watch is None:
        out, err, code = await _frame(client, args)
        if out is not None:
            sys.stdout.write(out + "\n")
        if err is not None:
            print(err, file=sys.stderr)
        return code
    # Until Ctrl-C (the runner turns it into exit code 0). A failure is shown in the frame and
    # the next redraw tries again: a watch outlives a coordinator moving or restarting.
    terminal = sys.stdout.isatty()
    first = True
    while True:
        try:
            out, err, _ = await _frame(client, args)
        except (ApiError, Unavailable, aiohttp.ClientError, TimeoutError, OSError) as e:
            out, err = None, f"error: {e}"
        now = iso_time(int(datetime.now(UTC).timestamp() * 1000))
        if args.format == "json":  # JSON lines: one object per redraw, nothing between them
            sys.stdout.write((out if out is not None else orjson.dumps({"error": err, "at": now}).decode()) + "\n")
        else:
            header = f"every {args.watch:g}s: group {args.group} at {now}"
            body = out if out is not None else err
            sys.stdout.write(("\x1b[H\x1b[2J" if terminal else "" if first else "\n") + header + "\n\n" + body + "\n")
        sys.stdout.flush()
        first = False
        await asyncio.sleep(args.watch)


async def _frame(client: CoordinatorClient, args: argparse.Namespace) -> tuple[str | None, str | None, int]:
    """One rendering of the group: (standard output, standard error, exit code)."""
    a = await client.call(args.group, *operations.route("describeGroup", group_id=args.group), GroupDescription)
    if isinstance(a, ErrorResponse):
        return None, f"error {a.error_code}: {a.error_message}", 1
    if args.format == "json":
        value: Any = (
            _members_json(a)
            if args.members
            else _state_json(a)
            if args.state
            else _tasks_json(a)
            if args.tasks
            else msgspec.to_builtins(a)
        )
        option = 0 if args.watch is not None else orjson.OPT_INDENT_2
        return orjson.dumps(value, option=option).decode(), None, 0
    if args.members:
        return _members_table(a, args.verbose), None, 0
    if args.state:
        return _state_table(a), None, 0
    if args.tasks:
        return _tasks_table(a), None, 0
    return _description_text(a), None, 0


def _description_text(a: GroupDescription) -> str:
    lines = []
    if a.group_type == "classic":
        lines.append(
            f"group {a.group_id} (classic): {a.state}, generation {a.generation}, protocol "
            f"{a.protocol_name}, leader {a.leader}"
        )
    else:
        lines.append(
            f"group {a.group_id}: {a.state}, group epoch {a.group_epoch}, assignment epoch "
            f"{a.assignment_epoch}, assignor {a.assignor} ({a.assignor_kind})"
        )
    if a.rebalancing_since_ms is not None:
        lines.append(f"rebalancing since {_when(a.rebalancing_since_ms)}")
    lines.append("connectors: " + (", ".join(f"{c.name}({c.tasks} tasks)" for c in a.connectors) or "none"))
    lines.append(_timeouts(a))
    if a.deferred.connectors or a.deferred.tasks:
        lines.append(f"deferred: {_items(a.deferred)} unassigned until {_when(a.scheduled_rebalance_at_ms)}")
    if a.assignment_error:
        lines.append(f"assignment error {a.assignment_error}: {a.assignment_error_message}")
    lines.append("")
    if a.group_type == "classic":
        lines.append(_classic_members_table(a))
    elif any(m.protocol == "classic" for m in a.members):
        # Translated classic members: their URL too (the worker's REST API, from its JoinGroup).
        lines.append(
            table(
                [
                    [
                        m.member_id,
                        m.instance_id,
                        m.protocol,
                        m.url,
                        m.member_epoch,
                        m.state,
                        _items(m.assignment),
                        _items(m.pending_revocation),
                        _items(m.target),
                    ]
                    for m in a.members
                ],
                ["MEMBER", "INSTANCE", "PROTOCOL", "URL", "EPOCH", "STATE", "ASSIGNED", "REVOKING", "TARGET"],
            )
        )
    else:
        lines.append(
            table(
                [
                    [
                        m.member_id,
                        m.instance_id,
                        m.protocol,
                        m.member_epoch,
                        m.state,
                        _items(m.assignment),
                        _items(m.pending_revocation),
                        _items(m.target),
                    ]
                    for m in a.members
                ],
                ["MEMBER", "INSTANCE", "PROTOCOL", "EPOCH", "STATE", "ASSIGNED", "REVOKING", "TARGET"],
            )
        )
    notes = [f"{m.member_id}: {m.note}" for m in a.members if getattr(m, "note", None)]
    if notes:
        lines.append("")
        lines.extend(notes)
    if a.departures:
        lines.append("")
        lines.append(f"removed by the change to group epoch {a.group_epoch}:")
        lines.append(
            table([[d.member_id, d.instance_id, d.reason_text] for d in a.departures], ["MEMBER", "INSTANCE", "WHY"])
        )
    return "\n".join(lines)


def _classic_members_table(a: GroupDescription) -> str:
    """A classic group's members: who each worker is (its REST API's URL, the config offset it had
    read to when it joined) and what it runs, by Kafka Connect's rule (coordinator.core.classic.holdings)."""
    if not a.members:
        return f"group {a.group_id} has no members"
    return table(
        [
            [m.member_id, m.instance_id, m.url, getattr(m, "config_offset", None), m.state, _items(m.assignment)]
            for m in a.members
        ],
        ["MEMBER", "INSTANCE", "URL", "CONFIG-OFFSET", "STATE", "ASSIGNED"],
    )


def _when(ms: int | None) -> str:
    """Until when deferred work waits. No time (the status endpoint's null): the scheduled rebalance
    has run or the assignor asked for no delay, so the work goes out with the next target assignment."""
    return "the next target assignment (no rebalance time is set)" if ms is None else iso_time(ms)


def _timeouts(a: GroupDescription) -> str:
    """The group's timeouts in effect (its own, or the server's defaults), as `config set` names them."""
    rebalance = (
        "each member's own"
        if a.rebalance_timeout_ms is None  # null: the members' RebalanceTimeoutMs
        else f"{a.rebalance_timeout_ms} ms"
    )
    return (
        f"timeouts: session timeout {a.session_timeout_ms} ms, heartbeat interval {a.heartbeat_interval_ms} ms, "
        f"rebalance timeout {rebalance}, scheduled rebalance max delay "
        f"{a.scheduled_rebalance_max_delay_ms} ms, initial assignment delay {a.initial_assignment_delay_ms} ms"
    )


def _members_table(a: GroupDescription, verbose: bool) -> str:
    # CLIENT, not CLIENT-ID: the member's ClientId field is the principal for a member heard over
    # HTTP (whose heartbeats carry no client id) and the client.id only over Kafka's protocol.
    header = ["MEMBER", "INSTANCE", "CLIENT", "HOST", "PROTOCOL", "EPOCH", "STATE"]
    rows = []
    for m in a.members:
        row: list[Any] = [
            m.member_id,
            m.instance_id,
            m.client_id or None,
            m.client_host or None,
            m.protocol,
            m.member_epoch,
            m.state,
        ]
        if verbose:
            row += [_items(m.assignment), _items(m.pending_revocation), _items(m.target)]
        rows.append(row)
    if verbose:
        header += ["ASSIGNED", "REVOKING", "TARGET"]
    return table(rows, header) if rows else f"group {a.group_id} has no members"


def _members_json(a: GroupDescription) -> list[Any]:
    return msgspec.to_builtins(a.members)


def _state_json(a: GroupDescription) -> dict[str, Any]:
    return {
        "GroupId": a.group_id,
        "GroupType": a.group_type,
        "Coordinator": a.coordinator,
        "Partition": a.partition,
        "Assignor": a.assignor,
        "AssignorKind": a.assignor_kind,
        "State": a.state,
        "GroupEpoch": a.group_epoch,
        "AssignmentEpoch": a.assignment_epoch,
        "Members": len(a.members),
    }


def _state_table(a: GroupDescription) -> str:
    assignor = None if a.assignor is None else f"{a.assignor} ({a.assignor_kind})" if a.assignor_kind else a.assignor
    return table(
        [
            [
                a.group_id,
                a.coordinator,
                a.partition,
                assignor,
                a.state,
                a.group_epoch,
                a.assignment_epoch,
                len(a.members),
            ]
        ],
        ["GROUP", "COORDINATOR", "PARTITION", "ASSIGNOR", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "MEMBERS"],
    )


def _task_rows(a: GroupDescription) -> list[dict[str, Any]]:
    """One row per connector and task the group runs (and any still held that it no longer runs):
    its status in the status endpoint's words (`coordinator.core.views.connector_status`: ASSIGNED,
    REVOKING while its owner gives it up and nobody else holds it, else UNASSIGNED), the member it is
    assigned to, who is revoking it, whose target it is, and whether it is deferred (until when)."""
    owner: dict[tuple[str, int | None], str] = {}
    revoking: dict[tuple[str, int | None], str] = {}
    target: dict[tuple[str, int | None], str] = {}
    for m in a.members:
        for where, cat in ((owner, m.assignment), (revoking, m.pending_revocation), (target, m.target)):
            for key in _keys(cat):
                where[key] = m.member_id
    deferred = set(_keys(a.deferred))
    items: list[tuple[str, int | None]] = []
    for c in a.connectors:
        items += [(c.name, None), *((c.name, t) for t in range(c.tasks))]
    items += sorted({*owner, *revoking} - set(items), key=lambda k: (k[0], -1 if k[1] is None else k[1]))
    rows = []
    for key in items:
        status = (
            TaskStatus.ASSIGNED if key in owner else TaskStatus.REVOKING if key in revoking else TaskStatus.UNASSIGNED
        )
        waits = status == TaskStatus.UNASSIGNED and key in deferred
        rows.append(
            {
                "Connector": key[0],
                "Task": key[1],
                "Status": status,
                "Member": owner.get(key),
                "Revoking": revoking.get(key),
                "Target": target.get(key),
                "Deferred": waits,
                "DeferredUntilMs": a.scheduled_rebalance_at_ms if waits else None,
            }
        )
    return rows


def _keys(cat: ConnectorsAndTasks) -> list[tuple[str, int | None]]:
    return [*((c, None) for c in cat.connectors), *((t.connector, t.task) for t in cat.tasks)]


def _tasks_json(a: GroupDescription) -> list[dict[str, Any]]:
    return _task_rows(a)


def _tasks_table(a: GroupDescription) -> str:
    rows = []
    for r in _task_rows(a):
        until = (
            None
            if not r["Deferred"]
            else "next-target"
            if r["DeferredUntilMs"] is None
            else iso_time(r["DeferredUntilMs"])
        )
        rows.append(
            [
                r["Connector"],
                "-" if r["Task"] is None else r["Task"],
                r["Status"],
                r["Member"],
                r["Revoking"],
                r["Target"],
                until,
            ]
        )
    if not rows:
        return f"group {a.group_id} runs no connectors"
    out = table(rows, ["CONNECTOR", "TASK", "STATUS", "MEMBER", "REVOKING", "TARGET", "DEFERRED-UNTIL"])
    if any(r[-1] == "next-target" for r in rows):
        out += "\n\nnext-target: deferred, no rebalance time is set: it goes out with the next target assignment"
    return out


async def _set_connectors(client: CoordinatorClient, args: argparse.Namespace) -> int:
    names = [name for name, _ in args.connectors]
    if len(set(names)) != len(names):
        raise CliError("a connector is named twice", exit_code=2)
    body = SetConnectorsRequest(tuple(ConnectorTaskCount(n, t) for n, t in args.connectors))
    code = _protocol_error(
        await client.call(args.group, *operations.route("setConnectors", group_id=args.group), ErrorResponse, body)
    )
    if code == 0:  # one line of what is now true, so that success is not silence
        if args.format == "json":
            _print_json({"GroupId": args.group, "Connectors": body.connectors})
        else:
            print(
                f"group {args.group}: connectors set to "
                + (
                    ", ".join(f"{n} ({t} task{'' if t == 1 else 's'})" for n, t in args.connectors)
                    or "none (every connector removed)"
                )
            )
    return code


async def _set_config(client: CoordinatorClient, args: argparse.Namespace) -> int:
    body = SetConfigRequest(
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        scheduled_rebalance_max_delay_ms=args.scheduled_rebalance_max_delay_ms,
        initial_assignment_delay_ms=args.initial_assignment_delay_ms,
    )
    code = _protocol_error(
        await client.call(args.group, *operations.route("setConfig", group_id=args.group), ErrorResponse, body)
    )
    if code == 0:  # the whole config is replaced: say so, the defaults included
        if args.format == "json":
            _print_json({"GroupId": args.group, **msgspec.to_builtins(body)})
        else:
            named = [
                ("session timeout", body.session_timeout_ms),
                ("heartbeat interval", body.heartbeat_interval_ms),
                ("rebalance timeout", body.rebalance_timeout_ms),
                ("scheduled rebalance max delay", body.scheduled_rebalance_max_delay_ms),
                ("initial assignment delay", body.initial_assignment_delay_ms),
            ]
            given = [f"{k} {v} ms" for k, v in named if v is not None]
            default = [k for k, v in named if v is None]
            print(
                f"group {args.group}: config set: "
                + ", ".join(given or ["nothing given"])
                + (f"; the server's default for {', '.join(default)}" if default else "")
            )
    return code
