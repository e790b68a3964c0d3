"""The coordinator's HTML pages, for people: `/ui/groups` (the groups this process serves) and
`/ui/groups/{group}` (one group: epochs, connectors, each member's work, what it revokes and its
target, deferred work, and the group's timeline drawn from its records in the topic). Each page
reloads itself every `REFRESH_S` seconds.

Authentication is the API's, in the header a browser can send: `Authorization: Bearer TOKEN` (a
proxy or a header extension), or HTTP Basic with the token as the password (any user name), which a
browser asks for itself when a page answers 401 (`WWW-Authenticate: Basic`). Never a token in the
URL: it would land in logs and browser history. Without a header the principal is ANONYMOUS when
the server allows it. The group page needs Describe on the group (else a 403 page); the list shows
only the groups the principal may describe. A group not here is a 404 page; a group of a partition
served elsewhere is a redirect (307) to the instance serving it; a partition loading is a 503 page
that reloads. Nothing answers 500: an unexpected failure is logged and shown as a 503 page.

Every string a user chose (group ids, member and instance ids, connector names, hosts, URLs) is
escaped (`coordinator.tools.text.escape`). The timeline is `replay.plot`'s SVG of `replay.history` over the group's
partition, read read_committed to its end offset (`replay.source.read_partition`) in a thread,
within `TIMELINE_READ_S` per page; each group's history is kept (`Timelines`, the last `KEEP`
groups asked for) with the offset it reached, so a reload reads only the records written since,
and nothing at all when the partition's end offset has not moved.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web
from confluent_kafka import Consumer, KafkaException, TopicPartition

from records import ConnectorsAndTasks

from coordinator.core.items import describe, items_of
from coordinator.core.protocol import GroupDescription, GroupListing, MemberDescription
from coordinator.service import whatif
from coordinator.service.auth import AuthError, Authorizer, Operation
from coordinator.service.runtime import NotServing, PartitionRuntime, Status
from coordinator.tools.partitions import partition_for, reader_config
from coordinator.tools.text import escape, group_path, iso_time
from replay import plot
from replay.history import History
from replay.positions import RawRecord, format_duration
from replay.source import SourceError, read_partition

log = logging.getLogger(__name__)

REFRESH_S = 5
TIMELINE_READ_S = 5.0  # reading the group's records, per page; the rest is read at the next reload
KEEP = 16  # groups whose history is kept between reloads


def _iso(ms: int | None) -> str:
    return "-" if ms is None else iso_time(ms)


# --- the timeline ------------------------------------------------------------------------------------


@dataclass
class _Timeline:
    history: History
    next_offset: int = 0  # the first offset of the partition not read yet
    svg: str | None = None
    drawn_at: int = -1  # next_offset when `svg` was drawn
    records_read: int = 0  # from the partition by all its pages together: a reload adds only what is new
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Timelines:
    """Each group's replayed history, read from its partition a little more at each page."""

    def __init__(
        self, kafka_config: Mapping[str, str], topic: str, read_s: float = TIMELINE_READ_S, keep: int = KEEP
    ) -> None:
        self.kafka_config = dict(kafka_config)
        self.topic = topic
        self.read_s = read_s
        self.keep = keep
        self._groups: OrderedDict[str, _Timeline] = OrderedDict()

    async def picture(self, group_id: str, partition: int) -> tuple[str | None, str]:
        """(the SVG or None, a line about it: how far the read got, or why there is none)."""
        timeline = self._groups.pop(group_id, None) or _Timeline(History(group_id))
        self._groups[group_id] = timeline  # the most recently asked for last
        while len(self._groups) > self.keep:
            self._groups.popitem(last=False)
        async with timeline.lock:
            return await asyncio.to_thread(self._read, timeline, group_id, partition)

    def records_read(self, group_id: str) -> int:
        """The records a group's pages have read from its partition since its history was first
        kept (0 for a group not kept): each reload adds the records written since the one before."""
        timeline = self._groups.get(group_id)
        return 0 if timeline is None else timeline.records_read

    def _read(self, timeline: _Timeline, group_id: str, partition: int) -> tuple[str | None, str]:
        try:
            consumer = Consumer(reader_config(self.kafka_config, "worker-coordinator-pages"))
        except KafkaException as e:
            return timeline.svg, f"the topic cannot be read: {e}"
        try:
            low, end = consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=self.read_s)
            start = max(timeline.next_offset, low)
            if start < end:
                deadline = time.monotonic() + self.read_s
                timeline.history.run(self._records(consumer, timeline, partition, start, end, deadline))
        except (KafkaException, SourceError) as e:
            return timeline.svg, f"the topic could not be read to its end: {e}"
        finally:
            consumer.close()
        if timeline.history.first is None:
            return None, f"no records of this group in {self.topic}[{partition}]"
        if timeline.drawn_at != timeline.next_offset:
            timeline.svg = plot.svg(timeline.history, group_id)
            timeline.drawn_at = timeline.next_offset
        behind = end - timeline.next_offset
        where = f"{self.topic}[{partition}] up to offset {timeline.next_offset}"
        return timeline.svg, where + (f"; {behind} more offsets to read at the next reloads" if behind > 0 else "")

    def _records(
        self, consumer: Consumer, timeline: _Timeline, partition: int, start: int, end: int, deadline: float
    ) -> Iterator[RawRecord]:
        for record in read_partition(consumer, self.topic, partition, start, end, self.read_s):
            timeline.records_read += 1
            yield record
            timeline.next_offset = record.offset + 1  # applied: History asks for the next one only then
            if time.monotonic() > deadline:
                return
        timeline.next_offset = end  # read to the end: what follows the last record were transaction markers


# --- the pages ---------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em 2em;
       color: #1d1d1f; background: #fafafa; font-size: 14px; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } h2 { font-size: 1.15em; margin: 1.6em 0 .5em; }
nav { margin-bottom: 1em; color: #666; } nav a { color: #0b5cad; }
.meta { color: #555; margin-bottom: 1em; }
table { border-collapse: collapse; background: white; margin: 0 0 1em; box-shadow: 0 1px 2px #0002; }
th, td { border: 1px solid #ddd; padding: .35em .7em; text-align: left; vertical-align: top; }
th { background: #f0f2f5; font-weight: 600; }
table.member { min-width: 30em; } table.member th[colspan] { background: #e3ecf7; font-size: 1.05em; }
td.k { color: #555; width: 9em; white-space: nowrap; }
.state { display: inline-block; padding: 0 .5em; border-radius: 3px; font-size: .85em; font-weight: 600; }
.STABLE { background: #d8f0dc; color: #17622a; } .RECONCILING, .ASSIGNING, .UNREVOKED, .UNRELEASED,
.PREPARING_REBALANCE, .COMPLETING_REBALANCE { background: #fdebc8; color: #8a5300; }
.EMPTY, .UNJOINED { background: #e8e8e8; color: #444; }
.revoking { color: #a33; } .none { color: #999; }
.members { display: flex; flex-wrap: wrap; gap: 0 1.5em; }
.timeline { background: white; padding: .5em; box-shadow: 0 1px 2px #0002; overflow-x: auto; }
.timeline svg { max-width: 100%; height: auto; }
.note { color: #666; font-size: .9em; } .error { color: #a33; font-weight: 600; }
"""


def page(title: str, body: str, *, refresh: bool = True) -> str:
    """A whole page: `title` and `body` as given (the caller escaped them)."""
    reload = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{reload}'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{_STYLE}</style></head><body>"
        f'<nav><a href="/ui/groups">groups</a></nav>{body}</body></html>'
    )


def _items(items: ConnectorsAndTasks) -> str:
    held = items_of(items)
    return escape(describe(held)) if held else '<span class="none">nothing</span>'


def _state(state: str) -> str:
    return f'<span class="state {escape(state)}">{escape(state)}</span>'


def _member_table(m: MemberDescription) -> str:
    rows = [
        ("instance", escape(m.instance_id) if m.instance_id else '<span class="none">dynamic</span>'),
        ("member epoch", escape(m.member_epoch)),
        ("state", _state(m.state)),
        ("protocol", escape(m.protocol)),
        ("client", f"{escape(m.client_id)} at {escape(m.client_host or '?')}"),
        ("url", escape(m.url) if m.url else '<span class="none">-</span>'),
    ]
    if m.protocol == "classic":
        # A Kafka Connect worker on the classic protocol: the config offset its JoinGroup said,
        # and what it runs by Connect's rule (coordinator.core.classic.holdings), or why that is
        # not known.
        offset = getattr(m, "config_offset", None)
        rows.append(("config offset", escape(offset) if offset is not None else '<span class="none">-</span>'))
    # "assigned", the status endpoint's ASSIGNED: the coordinator knows what it gave, not what runs.
    rows += [
        ("assigned", _items(m.assignment)),
        (
            "revoking",
            f'<span class="revoking">{_items(m.pending_revocation)}</span>'
            if items_of(m.pending_revocation)
            else _items(m.pending_revocation),
        ),
        ("target", _items(m.target)),
    ]
    note = getattr(m, "note", None)
    if note:
        rows.append(("note", f'<span class="note">{escape(note)}</span>'))
    body = "".join(f'<tr><td class="k">{k}</td><td>{v}</td></tr>' for k, v in rows)
    return (
        f'<table class="member" data-member="{escape(m.member_id)}"><tr><th colspan="2">member '
        f"{escape(m.member_id)}</th></tr>{body}</table>"
    )


def group_page(
    d: GroupDescription, picture: str | None, note: str, *, coordinator: str, partition: int, now_ms: int
) -> str:
    """The page of one group, from its description and its timeline."""
    out = [
        f"<h1>group {escape(d.group_id)} {_state(d.state)}</h1>",
        (
            f'<div class="meta">served by {escape(coordinator)}, partition {partition}; as of {_iso(now_ms)} '
            f"(reloads every {REFRESH_S} s)</div>"
        ),
    ]
    epochs = [
        ("group epoch", d.group_epoch),
        ("assignment epoch", d.assignment_epoch),
        ("type", d.group_type),
        ("assignor", f"{d.assignor or '-'} ({d.assignor_kind or 'none'})"),
        ("session timeout", format_duration(d.session_timeout_ms)),
        ("heartbeat interval", format_duration(d.heartbeat_interval_ms)),
        ("rebalance delay", format_duration(d.scheduled_rebalance_max_delay_ms)),
    ]
    if d.generation is not None:
        epochs.append(("generation", f"{d.generation}, leader {d.leader or '-'}"))
    out.append(
        "<h2>Epochs</h2><table>"
        + "".join(f'<tr><td class="k">{k}</td><td>{escape(v)}</td></tr>' for k, v in epochs)
        + "</table>"
    )
    connectors = "".join(f"<tr><td>{escape(c.name)}</td><td>{c.tasks}</td></tr>" for c in d.connectors)
    out.append(
        "<h2>Connectors</h2>"
        + (
            f"<table><tr><th>connector</th><th>tasks</th></tr>{connectors}</table>"
            if connectors
            else '<p class="none">none</p>'
        )
    )
    if items_of(d.deferred) and d.scheduled_rebalance_at_ms is None:
        # No time (the status endpoint's null): the scheduled rebalance has run, or the assignor
        # asked for no delay; the work goes out with the next target assignment.
        out.append(
            f"<h2>Deferred work</h2><p>{_items(d.deferred)}: unassigned until the next target assignment "
            "(no rebalance time is set).</p>"
        )
    elif items_of(d.deferred):
        left = f" (in {format_duration(max(0, d.scheduled_rebalance_at_ms - now_ms))})"
        out.append(
            f"<h2>Deferred work</h2><p>{_items(d.deferred)}: unassigned until the scheduled rebalance at "
            f"{_iso(d.scheduled_rebalance_at_ms)}{left}.</p>"
        )
    else:
        out.append('<h2>Deferred work</h2><p class="none">none</p>')
    if d.assignment_error:
        out.append(f"<p>the last assignment failed ({d.assignment_error}): {escape(d.assignment_error_message)}</p>")
    if d.departures:
        out.append(
            "<h2>Left at this epoch</h2><ul>"
            + "".join(f"<li>{escape(x.member_id)}: {escape(x.reason)}</li>" for x in d.departures)
            + "</ul>"
        )
    out.append(f"<h2>Members ({len(d.members)})</h2>")
    out.append(
        '<div class="members">' + "".join(_member_table(m) for m in d.members) + "</div>"
        if d.members
        else '<p class="none">no members</p>'
    )
    out.append("<h2>Timeline</h2>")
    out.append(
        f'<p><a href="{escape(whatif.href(d.group_id))}">what if: this history re-run with another scheduled '
        "delay</a></p>"
    )
    out.append(f'<div class="timeline">{picture}</div>' if picture is not None else "")
    out.append(f'<p class="note">{escape(note)}</p>')
    return page(f"group {escape(d.group_id)}", "".join(out))


def groups_page(groups: list, partitions: dict[int, str], coordinator: str, now_ms: int) -> str:
    """The list of groups (protocol.GroupListing) of the partitions this process serves."""
    rows = "".join(
        f'<tr><td><a href="{escape(group_path(g.group_id))}">{escape(g.group_id)}</a></td>'
        f"<td>{_state(g.state)}</td><td>{g.group_epoch}</td><td>{g.members}</td></tr>"
        for g in groups
    )
    served = ", ".join(f"{p} ({escape(s)})" for p, s in sorted(partitions.items())) or "none"
    body = (
        f'<h1>groups</h1><div class="meta">{escape(coordinator)} serves partitions {served}; as of '
        f"{_iso(now_ms)} (reloads every {REFRESH_S} s)</div>"
        + (
            f"<table><tr><th>group</th><th>state</th><th>epoch</th><th>members</th></tr>{rows}</table>"
            if rows
            else '<p class="none">no groups you may describe here</p>'
        )
    )
    return page("groups", body)


_SPLICE = "<!--report-->"


def _answer(text: str, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8", headers=headers)


def _message(
    title: str, text: str, status: int, *, refresh: bool = False, headers: dict[str, str] | None = None
) -> web.Response:
    return _answer(page(escape(title), f"<h1>{escape(title)}</h1><p>{text}</p>", refresh=refresh), status, headers)


class Served(Protocol):
    """What the pages need of the server (`CoordinatorServer` is one): its partitions and their
    runtimes, who may see what, the groups a principal may see, and where a partition is served."""

    kafka_config: dict[str, str]
    topic: str
    partitions: int
    advertised_url: str
    runtimes: dict[int, PartitionRuntime]
    authorizer: Authorizer
    whatif_bounds: whatif.Bounds

    async def owner_of(self, partition: int) -> str | None: ...

    async def listed_groups(self, principal: str) -> list[GroupListing]: ...


class Pages:
    """The pages' routes over a server's partitions, authorizer and locator."""

    def __init__(self, server: Served) -> None:
        self.server = server
        self.timelines = Timelines(server.kafka_config, server.topic)
        self.whatif = whatif.WhatIf(server.kafka_config, server.topic, server.whatif_bounds)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/ui", self.home),
            web.get("/ui/", self.home),
            web.get("/ui/groups", self.groups),
            web.get("/ui/groups/{group_id:[^/]+}", self.group),
            web.get("/ui/groups/{group_id:[^/]+}/whatif", self.what_if),
        ]

    async def home(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/ui/groups")

    def principal(self, request: web.Request) -> str:
        """The API's principal for the request's `Authorization`; HTTP Basic carries the token as its
        password (what a browser can send by itself)."""
        header = request.headers.get("Authorization")
        scheme, _, credentials = (header or "").partition(" ")
        if scheme.lower() == "basic":
            try:
                _, _, token = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise AuthError(401, "the Basic credentials are not base64 of USER:TOKEN") from None
            header = f"Bearer {token}" if token else None
        return self.server.authorizer.authenticate(header)

    async def groups(self, request: web.Request) -> web.Response:
        return await self._guarded(request, self._groups)

    async def group(self, request: web.Request) -> web.Response:
        return await self._guarded(request, self._group)

    async def what_if(self, request: web.Request) -> web.Response:
        return await self._guarded(request, self._what_if)

    async def _guarded(
        self, request: web.Request, render: Callable[[web.Request, str], Awaitable[web.Response]]
    ) -> web.Response:
        try:
            return await render(request, self.principal(request))
        except AuthError as e:
            if e.status == 401:
                return _message(
                    "authentication needed",
                    escape(e)
                    + ". Give the token as the password (any user name), or send Authorization: Bearer TOKEN.",
                    401,
                    headers={"WWW-Authenticate": 'Basic realm="worker-coordinator", charset="UTF-8"'},
                )
            return _message("not allowed", escape(e), 403)
        except web.HTTPException:
            raise  # the redirect to the instance serving the group
        except NotServing as e:
            return _message("not available here", escape(e), 503, refresh=True)
        except Exception:  # a bug: logged with its traceback, never shown
            log.exception("unexpected failure on %s", request.path)
            return _message(
                "internal error", "the coordinator failed to draw this page and logged why", 503, refresh=True
            )

    async def _groups(self, request: web.Request, principal: str) -> web.Response:
        listed = await self.server.listed_groups(principal)
        partitions = {p: r.status.value for p, r in self.server.runtimes.items()}
        return _answer(groups_page(listed, partitions, self.server.advertised_url, int(time.time() * 1000)))

    async def _group(self, request: web.Request, principal: str) -> web.Response:
        group_id = request.match_info["group_id"]
        self.server.authorizer.authorize(principal, Operation.DESCRIBE, group_id)
        found = await self._described(request, group_id)
        if isinstance(found, web.Response):
            return found
        partition, description = found
        picture, note = await self.timelines.picture(group_id, partition)
        return _answer(
            group_page(
                description,
                picture,
                note,
                coordinator=self.server.advertised_url,
                partition=partition,
                now_ms=int(time.time() * 1000),
            )
        )

    async def _what_if(self, request: web.Request, principal: str) -> web.Response:
        """The "what if" view (`coordinator.service.whatif`): under the group page's ACL."""
        group_id = request.match_info["group_id"]
        self.server.authorizer.authorize(principal, Operation.DESCRIBE, group_id)
        try:
            ask = whatif.asked(request.query)
        except whatif.BadParameter as e:
            return _message("bad parameter", escape(e), 400)
        found = await self._described(request, group_id)
        if isinstance(found, web.Response):
            return found
        _, description = found
        title = f"what if: group {escape(group_id)}"
        body = (
            f'<h1>{title}</h1><div class="meta"><a href="{escape(group_path(group_id))}">the group\'s page</a></div>'
            + whatif.form(group_id, ask, description.scheduled_rebalance_max_delay_ms)
        )
        if ask.delay_ms is None:
            return _answer(page(title, body, refresh=False))
        outcome = await self.whatif.simulate(group_id, ask)
        if outcome.report is None:
            return _answer(
                page(title, body + f'<p class="error">{escape(outcome.line)}</p>', refresh=False), outcome.status
            )
        # The child's report spliced in as bytes: megabytes of SVG never decoded here.
        head, tail = page(title, body + _SPLICE, refresh=False).encode().split(_SPLICE.encode())
        return web.Response(body=head + outcome.report + tail, content_type="text/html", charset="utf-8")

    async def _described(self, request: web.Request, group_id: str) -> tuple[int, GroupDescription] | web.Response:
        """The group's partition and description, or the page that says why not: a 307 to the
        instance serving it, a 503 while nobody does, a 404 for no such group."""
        partition = partition_for(group_id, self.server.partitions)
        runtime = self.server.runtimes.get(partition)
        if runtime is None or runtime.status not in (Status.ACTIVE, Status.LOADING):
            url = await self.server.owner_of(partition)
            if url is not None and url.rstrip("/") != self.server.advertised_url.rstrip("/"):
                target = url.rstrip("/") + str(request.rel_url)
                raise web.HTTPTemporaryRedirect(
                    target,
                    text=page("moved", f'<p>served by <a href="{escape(target)}">{escape(url)}</a></p>', refresh=False),
                    content_type="text/html",
                )
            return _message(
                "not served here",
                f"group {escape(group_id)} lives in partition {partition}, which no coordinator is known to serve now.",
                503,
                refresh=True,
            )
        description = await runtime.query(lambda c: c.describe_group(group_id))
        if description is None:
            return _message("no such group", f"group {escape(group_id)} does not exist.", 404)
        return partition, description
