"""`coordinator topic upgrade-format`: raise the topic's record format level through the instances
that serve it (docs/operations.md, "Record format levels").

The level is written by the instances, each into the partitions it serves, through its own
transactional writer (`POST /v1/format-level`), so that no instance writes at a level its state does
not know. The command asks any instance where every partition is served (`/v1/partitions`), and
refuses, changing nothing, while a partition has no instance or an instance's release cannot read
the level (`/health`'s `MaxFormatLevel`; a release before levels says nothing and reads level 1).
Plain HTTP from the standard library: the `topic` command stays Kafka tooling, without the SDK.
"""

from __future__ import annotations

import argparse
import urllib.error
import urllib.request
from typing import Any

import orjson

from records import MAX_FORMAT_LEVEL

from coordinator.errors import CliError
from coordinator.tools import coordinator_args, tls
from coordinator.tools.text import table


def add_command(commands: argparse._SubParsersAction) -> None:
    help = "raise the topic's record format level, once every instance runs a release that reads it"
    parser = commands.add_parser(
        "upgrade-format",
        help=help,
        description="Raise the record format level of every partition (records.FORMAT_LEVELS): each instance "
        "writes it into the partitions it serves. Refused while an instance that cannot read the level serves, "
        "or while a partition has no instance. Levels are never lowered.",
    )
    parser.add_argument(
        "--level",
        type=int,
        default=MAX_FORMAT_LEVEL,
        help=f"the level to raise to (default {MAX_FORMAT_LEVEL}, the highest this release writes)",
    )
    coordinator_args.add_arguments(parser)
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per request (default 30)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=upgrade_format)


class _Instances:
    """The HTTP exchanges of one command: any answer with a JSON body, whatever its status."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.timeout = args.timeout
        self.context = tls.client_context(args.ca_file, "--ca-file")
        self.headers = {"Content-Type": "application/json", "Client-Id": "coordinator-topic"}
        if args.token:
            self.headers["Authorization"] = f"Bearer {args.token}"

    def request(self, method: str, url: str, body: dict | None = None) -> dict[str, Any]:
        data = None if body is None else orjson.dumps(body)
        request = urllib.request.Request(url, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:  # /health answers 503 while degraded: still its answer
            raw = e.read()
            if e.code in (401, 403):
                raise CliError(f"{url}: {_message(raw) or e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            raise CliError(f"cannot reach the coordinator at {url}: {getattr(e, 'reason', e)}") from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise CliError(f"{url} did not answer as a coordinator does: {raw[:200]!r}") from None


def _message(raw: bytes) -> str | None:
    try:
        return orjson.loads(raw).get("ErrorMessage")
    except (orjson.JSONDecodeError, AttributeError):
        return None


def upgrade_format(args: argparse.Namespace) -> int:
    """Raise the level: every partition must have an instance, every instance must read the level;
    then each writes it into the partitions it serves (durable before it answers)."""
    instances = _Instances(args)
    base = args.url.rstrip("/")
    owners = instances.request("GET", base + "/v1/partitions")
    if owners.get("ErrorCode"):
        raise CliError(f"{base}: {owners.get('ErrorMessage')}")
    partitions = owners.get("Partitions") or []
    unserved = [p["Partition"] for p in partitions if not p.get("Url")]
    if unserved:
        raise CliError(
            f"refused: partitions {', '.join(map(str, unserved))} are served by no instance, which would leave "
            "them at their level; start the instances and run this again"
        )
    urls = list(dict.fromkeys(p["Url"].rstrip("/") for p in partitions))
    behind = []
    for url in urls:
        health = instances.request("GET", url + "/health")
        readable = health.get("MaxFormatLevel", 1)  # a release before levels reads level 1 only
        if readable < args.level:
            behind.append(f"{url} runs {health.get('Release', '0.1.0 or older')}, which reads up to level {readable}")
    if behind:
        raise CliError(
            f"refused: not every instance reads record format level {args.level}: {'; '.join(behind)}. "
            "Upgrade them first"
        )
    rows, failed = [], 0
    for url in urls:
        answer = instances.request("POST", url + "/v1/format-level", {"Level": args.level})
        if "Partitions" not in answer:
            raise CliError(f"{url}: {answer.get('ErrorMessage') or answer}")
        for partition, outcome in answer["Partitions"].items():
            failed += outcome["ErrorCode"] != 0
            rows.append([int(partition), url, outcome.get("ErrorMessage") or f"at level {args.level}"])
    rows.sort()
    if args.format == "json":
        print(orjson.dumps([{"partition": p, "url": u, "outcome": o} for p, u, o in rows]).decode())
    else:
        print(table(rows, ["PARTITION", "INSTANCE", "OUTCOME"]))
        if not failed:
            print(f"record format level {args.level} on every partition")
    return 1 if failed else 0
