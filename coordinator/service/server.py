"""The HTTP API (DESIGN §7) over the partitions this process owns.

Protocol errors are HTTP 200 with `ErrorCode`/`ErrorMessage`; a body that is not JSON or breaks
the schema is HTTP 400 with INVALID_REQUEST; nothing ever answers 500 with a traceback: an
unexpected failure is logged and answered COORDINATOR_NOT_AVAILABLE.

Requests to `/v1/` are authenticated (bearer token, or ANONYMOUS when allowed) and authorized per
group (`coordinator.service.auth`); `/health` (also `/health/ready`), `/health/live`, `/metrics` and
`/openapi.json` are open. The HTML pages under `/ui/` (`coordinator.service.pages`) authenticate and
authorize themselves.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import msgspec
import orjson
from aiohttp import web

from records import MAX_FORMAT_LEVEL

from coordinator.api import openapi, operations, wire
from coordinator.core.group_coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.core.protocol import (
    ClassicHeartbeatRequest,
    DeleteGroupRequest,
    ErrorCode,
    ErrorResponse,
    GroupDescription,
    GroupListing,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    RequestContext,
    Result,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.service import metrics
from coordinator.service.auth import AuthError, Authorizer, Operation
from coordinator.service.log import PartitionLog, kafka_logs
from coordinator.service.metrics import Metrics
from coordinator.service.pages import Pages
from coordinator.service.runtime import NotServing, PartitionRuntime, Status
from coordinator.service.standby import PartitionTail, Standby, kafka_tails
from coordinator.service.whatif import Bounds
from coordinator.tools.logs import event
from coordinator.tools.partitions import partition_for
from coordinator.tools.release import release

log = logging.getLogger(__name__)

PRINCIPAL = web.RequestKey("principal", str)
ERROR_CODE = web.ResponseKey("error_code", int)
# A heartbeat or an InstallAssignment of a large group fits (50,000 tasks with long names: about
# 4 MB); anything bigger is refused (413), the body unread. Bounded so that a client cannot make the
# server hold more than this per request in flight.
MAX_BODY_BYTES = 16 << 20
# Served as bytes: the document is the same for every request.
_DOCUMENT = orjson.dumps(openapi.DOCUMENT)
T = TypeVar("T")
# The call of the core `CoordinatorServer._serve` makes for an operation: (the protocol request, the
# HTTP request) -> the core's answer.
Call = Callable[[Any, web.Request], Awaitable[Any]]


def _answer(body: msgspec.Struct, status: int = 200) -> web.Response:
    response = web.Response(body=wire.encode(body), status=status, content_type="application/json")
    response[ERROR_CODE] = getattr(body, "error_code", 0)  # for the metrics, without parsing it again
    return response


def _error(code: ErrorCode, message: str, status: int = 200) -> web.Response:
    return _answer(ErrorResponse(int(code), message), status)


# While a partition loads, the classic answers Kafka's coordinator gives (GroupCoordinator.scala's
# handleSyncGroup and handleHeartbeat; GroupCoordinatorService.heartbeat): a Java member treats
# COORDINATOR_LOAD_IN_PROGRESS in a SyncGroup as an unexpected error and its worker exits, so the
# SyncGroup is told to join again (its rebalance was lost with the old coordinator anyway), and a
# heartbeat is answered blindly.
SYNC_WHILE_LOADING = SyncGroupResponse(
    ErrorCode.REBALANCE_IN_PROGRESS, "the group's partition is loading: the rebalance starts over; join again"
)
HEARTBEAT_WHILE_LOADING = ErrorResponse()


class CoordinatorServer:
    """The partitions this process serves, and the routes that reach them.

    Which partitions it serves is decided outside: `start()` takes the `owned` ones (static
    ownership); a group-mode `Ownership` calls `assign` and `revoke` as the consumer group moves
    partitions. `locate(partition)` says where a partition not served here is served (group mode:
    the consumer group's description; static mode: the `--peer` instances); without one,
    find-coordinator knows only this process. `locate_kafka(partition)` says, in group mode, the
    URL of the instance serving it and that instance's Kafka listener (URL, host, port), for the
    Kafka listener's FindCoordinator.
    """

    def __init__(
        self,
        kafka_config: Mapping[str, str],
        topic: str,
        partitions: int,
        owned: Iterable[int],
        advertised_url: str,
        config: CoordinatorConfig | None = None,
        *,
        authorizer: Authorizer | None = None,
        transactional_prefix: str = "worker-coordinator",
        linger_ms: float = 2.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        log: Callable[[int], PartitionLog] | None = None,
        tail: Callable[[int], PartitionTail] | None = None,
        whatif_bounds: Bounds | None = None,
    ) -> None:
        self.kafka_config = dict(kafka_config)
        self.topic = topic
        self.partitions = partitions
        self.advertised_url = advertised_url
        self.config = config or CoordinatorConfig()
        self.authorizer = authorizer or Authorizer.open()
        self.transactional_prefix = transactional_prefix
        # partition -> a new handle on its log, for each partition's runtime: the topic's by default.
        self.logs = log or kafka_logs(self.kafka_config, topic, transactional_prefix)
        # partition -> a new reader of its log from the first offset, for each standby kept here.
        self.tails = tail or kafka_tails(self.kafka_config, topic)
        self.standbys: dict[int, Standby] = {}  # shadow copies of partitions not served here
        self.linger_ms = linger_ms
        self.max_body_bytes = max_body_bytes
        self.metrics = Metrics()
        self.runtimes: dict[int, PartitionRuntime] = {}
        self.metrics.watch(lambda: dict(self.runtimes), lambda: dict(self.standbys))
        self.locate: Callable[[int], Awaitable[str | None]] | None = None
        self.locate_kafka: Callable[[int], Awaitable[tuple[str, str, int] | None]] | None = None
        self._owned = list(owned)
        self.whatif_bounds = whatif_bounds or Bounds()
        self.pages = Pages(self)

    async def start(self) -> None:
        await self.assign(self._owned)

    async def close(self) -> None:
        await self.keep_standbys(())
        await self.revoke(list(self.runtimes))

    async def assign(self, partitions: Iterable[int]) -> None:
        """Serve `partitions` from now on: each fences its previous owner and loads, or promotes
        this instance's standby of it (taken before the first await: `keep_standbys` may run next)."""
        partitions = list(partitions)
        standbys = {p: self.standbys.pop(p) for p in partitions if p in self.standbys and p not in self.runtimes}
        new = []
        for p in partitions:
            if p not in self.runtimes:
                self.runtimes[p] = PartitionRuntime(
                    self.kafka_config,
                    self.topic,
                    p,
                    self.config,
                    linger_ms=self.linger_ms,
                    metrics=self.metrics,
                    transactional_prefix=self.transactional_prefix,
                    log=self.logs,
                )
                new.append(self.runtimes[p])
        results = await asyncio.gather(*(r.start(standbys.get(r.partition)) for r in new), return_exceptions=True)
        for runtime, result in zip(new, results):
            if isinstance(result, BaseException):
                log.error("partition %d could not be taken: %s", runtime.partition, result)
                runtime.status = Status.FAILED

    async def revoke(self, partitions: Iterable[int]) -> None:
        """Stop serving `partitions` at once (their new owner fences this process anyway)."""
        closing = [self.runtimes.pop(p) for p in list(partitions) if p in self.runtimes]
        await asyncio.gather(*(r.close() for r in closing), return_exceptions=True)

    async def keep_standbys(self, partitions: Iterable[int]) -> None:
        """Keep standbys of `partitions` (those not served here) and of no others: new ones start
        tailing from the first offset, the ones no longer wanted stop."""
        wanted = {p for p in partitions if p not in self.runtimes}
        # A failed standby is replaced by a new one (it reads from the first offset again).
        dropped = [self.standbys.pop(p) for p in list(self.standbys) if p not in wanted or self.standbys[p].failed]
        for p in sorted(wanted - set(self.standbys)):
            self.standbys[p] = Standby(p, self.tails(p)).start()
            event(log, "standby-started", "keeping a standby of partition %d", p, partition=p)
        for standby in dropped:
            event(
                log,
                "standby-stopped",
                "no longer keeping a standby of partition %d",
                standby.partition,
                partition=standby.partition,
            )
        await asyncio.gather(*(asyncio.to_thread(s.close) for s in dropped))

    def runtime_for(self, group_id: str) -> PartitionRuntime:
        partition = partition_for(group_id, self.partitions)
        runtime = self.runtimes.get(partition)
        if runtime is None or runtime.status in (Status.CLOSED, Status.FENCED):
            raise NotServing(ErrorCode.NOT_COORDINATOR, f"group {group_id} (partition {partition}) is not served here")
        return runtime

    # --- the app -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        """The routes, as `operations.OPERATIONS` and `operations.SERVICE` declare them: each operation
        served by `_serve` with its call of the core (`_calls`), or by a handler of its own."""
        app = web.Application(client_max_size=self.max_body_bytes, middlewares=[self._middleware])
        calls = self._calls()
        own = self._own_handlers()
        routes = []
        for op in operations.OPERATIONS:
            name = op.operation_id
            handler = own[name] if name in own else functools.partial(self._serve, op, calls[name])
            routes.append(getattr(web, op.method)(_pattern(op.path), handler))
        routes += [getattr(web, op.method)(op.path, own[op.operation_id]) for op in operations.SERVICE]
        app.add_routes([*routes, *self.pages.routes()])
        return app

    def _own_handlers(self) -> dict[str, Callable[[web.Request], Awaitable[web.Response]]]:
        """The operations that are not a decode, authorize, call, answer of one group's partition."""
        return {
            "findCoordinator": self.find_coordinator,
            "listGroups": self.list_groups,
            "listPartitions": self.partition_owners,
            "describeGroup": self.describe_group,
            "connectorStatus": self.connector_status,
            "raiseFormatLevel": self.raise_format_level,
            "health": self.health,
            "healthReady": self.health,
            "healthLive": self.live,
            "metrics": self.metrics_text,
            "openapi": self.openapi_document,
        }

    def _calls(self) -> dict[str, Call]:
        """What each operation `_serve` serves asks of the core, given its protocol request (a
        path's group id for a route without a body) and the HTTP request."""
        run = self._run
        return {
            "heartbeat": self._connect_heartbeat,
            "prepareAssignment": lambda r, _: run(r.group_id, lambda c, now: c.prepare_assignment(r, now)),
            "installAssignment": lambda r, _: run(r.group_id, lambda c, now: c.install_assignment(r, now)),
            "joinGroup": self._join_group,
            "syncGroup": lambda r, _: self.call_sync_group(r),
            "classicHeartbeat": lambda r, _: self.call_classic_heartbeat(r),
            "leaveGroup": lambda r, _: self.call_leave_group(r),
            "setConnectors": lambda r, _: run(r.group_id, lambda c, now: c.set_connectors(r, now)),
            "setConfig": lambda r, _: run(r.group_id, lambda c, now: c.set_config(r, now)),
            "deleteGroup": lambda group_id, _: run(
                group_id, lambda c, now: c.delete_group(DeleteGroupRequest(group_id), now)
            ),
        }

    async def _serve(self, op: operations.Operation, call: Call, request: web.Request) -> web.Response:
        """The one handler of the operations on one group: decode, authorize, call, answer, as `op`
        declares. A group named by the path is authorized before the body is read (a refusal
        never depends on the body); one named by the body, once it is decoded."""
        if op.group == operations.PATH:
            group_id = self._group_id(request, op.operation_id)
            # The path names the group: the body's message gets it (`SetConnectorsRequest.group_id`).
            message = (
                group_id
                if op.request is None
                else msgspec.structs.replace(await _decode(request, op.request), group_id=group_id)
            )
        else:
            assert op.group == operations.BODY and op.request is not None, op.operation_id
            message = await _decode(request, op.request)  # the core's own request: no conversion
            self._authorize(request, op.operation_id, message.group_id)
        return _answer(await call(message, request))

    def _authorize(self, request: web.Request, operation_id: str, group_id: str) -> None:
        """AuthError unless the principal may do on `group_id` what `operation_id` declares it needs."""
        self.authorizer.authorize(request[PRINCIPAL], Operation(operations.operation(operation_id).acl), group_id)

    def _group_id(self, request: web.Request, operation_id: str) -> str:
        """The group the route names, once the principal may do `operation_id` on it."""
        group_id = request.match_info["group_id"]
        self._authorize(request, operation_id, group_id)
        return group_id

    async def _run(self, group_id: str, operation: Callable[[GroupCoordinator, int], Result[T]]) -> T:
        return await self.runtime_for(group_id).call(operation)

    async def _connect_heartbeat(self, heartbeat: HeartbeatRequest, request: web.Request) -> HeartbeatResponse:
        context = RequestContext(_client_id(request), request.remote or "")
        return await self._run(heartbeat.group_id, lambda c, now: c.heartbeat(heartbeat, now, context))

    async def _join_group(self, join: JoinGroupRequest, request: web.Request) -> JoinGroupResponse:
        # Kafka's coordinator makes a member id of the client id and a UUID; so do we, out here,
        # because the state machine has no randomness.
        client_id = _client_id(request)
        context = RequestContext(client_id, request.remote or "", f"{client_id}-{uuid.uuid4()}")
        return await self.call_join_group(join, context)

    # --- the classic calls, one core for both transports (these routes and the Kafka listener) ---
    # Each raises NotServing (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) for its transport
    # to answer, except where a Java member needs another answer while the partition loads.

    async def call_join_group(self, join: JoinGroupRequest, context: RequestContext) -> JoinGroupResponse:
        return await self.runtime_for(join.group_id).call(
            lambda coordinator, now: coordinator.join_group(join, now, context)
        )

    async def call_sync_group(self, sync: SyncGroupRequest) -> SyncGroupResponse:
        return await self._classic(
            sync.group_id, lambda coordinator, now: coordinator.sync_group(sync, now), loading=SYNC_WHILE_LOADING
        )

    async def call_classic_heartbeat(self, heartbeat: ClassicHeartbeatRequest) -> ErrorResponse:
        return await self._classic(
            heartbeat.group_id,
            lambda coordinator, now: coordinator.classic_heartbeat(heartbeat, now),
            loading=HEARTBEAT_WHILE_LOADING,
        )

    async def call_leave_group(self, leave: LeaveGroupRequest) -> LeaveGroupResponse:
        return await self.runtime_for(leave.group_id).call(lambda coordinator, now: coordinator.leave_group(leave, now))

    async def _classic(self, group_id: str, operation: Callable[[GroupCoordinator, int], Result], *, loading: T) -> T:
        """A classic request whose partition is loading gets `loading`, an answer a Java member
        survives, as Kafka's coordinator gives it (JoinGroup and LeaveGroup keep
        COORDINATOR_LOAD_IN_PROGRESS, which Java's JoinGroup retries after a backoff)."""
        try:
            return await self.runtime_for(group_id).call(operation)
        except NotServing as e:
            if e.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                return loading
            raise

    # --- admin -------------------------------------------------------------------------------------

    async def raise_format_level(self, request: web.Request) -> web.Response:
        """Every partition served here writes the level (`coordinator topic upgrade-format`). Only a
        principal that may Alter every group may: the level decides how all of them are written."""
        level = (await _decode(request, wire.FormatLevelRequest)).level
        self._authorize(request, "raiseFormatLevel", operations.EVERY_GROUP)

        async def one(runtime: PartitionRuntime) -> ErrorResponse:
            try:
                return await runtime.call(lambda coordinator, now: coordinator.raise_format_level(level, now))
            except NotServing as e:
                return ErrorResponse(int(e.code), str(e))

        runtimes = sorted(self.runtimes.items())
        answers = await asyncio.gather(*(one(r) for _, r in runtimes))
        return _answer(
            wire.FormatLevelResponse(
                url=self.advertised_url, partitions={str(p): a for (p, _), a in zip(runtimes, answers)}
            )
        )

    async def find_coordinator(self, request: web.Request) -> web.Response:
        group_id = (await _decode(request, wire.FindCoordinatorRequest)).group_id
        self._authorize(request, "findCoordinator", group_id)
        partition = partition_for(group_id, self.partitions)
        url = await self.owner_of(partition)
        if url is None:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no coordinator known for partition {partition}")
        return _answer(wire.FindCoordinatorResponse(error_code=0, error_message=None, partition=partition, url=url))

    async def owner_of(self, partition: int) -> str | None:
        """The URL of the instance serving `partition`: this one, or whom `locate` names, or None."""
        runtime = self.runtimes.get(partition)
        if runtime is not None and runtime.status in (Status.ACTIVE, Status.LOADING):
            return self.advertised_url
        return await self.locate(partition) if self.locate is not None else None

    async def partition_owners(self, request: web.Request) -> web.Response:
        """Where each partition is served, so that a client can ask every instance (`coordinator
        groups list`). Asked together: one lookup of the owners answers them all (Locator's cache)."""
        urls = await asyncio.gather(*(self.owner_of(p) for p in range(self.partitions)))
        return _answer(
            wire.PartitionOwnersResponse(
                error_code=0,
                url=self.advertised_url,
                partitions=[wire.PartitionOwner(partition=p, url=url) for p, url in enumerate(urls)],
            )
        )

    async def listed_groups(self, principal: str) -> list[GroupListing]:
        """The groups of the partitions this process serves that `principal` may describe, by group
        id (`GET /v1/groups` and the groups page)."""
        groups = []
        for runtime in list(self.runtimes.values()):
            if runtime.status is Status.ACTIVE:
                try:
                    listed = await runtime.query(GroupCoordinator.list_groups)
                except NotServing:
                    continue  # moved away meanwhile: its new owner lists it
                groups += [g for g in listed if self.authorizer.allowed(principal, Operation.DESCRIBE, g.group_id)]
        return sorted(groups, key=lambda g: g.group_id)

    async def list_groups(self, request: web.Request) -> web.Response:
        groups = await self.listed_groups(request[PRINCIPAL])
        return _answer(wire.ListGroupsResponse(error_code=0, groups=groups))

    async def describe_group(self, request: web.Request) -> web.Response:
        group_id = self._group_id(request, "describeGroup")
        runtime = self.runtime_for(group_id)
        description = await self.call_describe_group(group_id)
        if description is None:
            return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
        return _answer(
            msgspec.structs.replace(description, coordinator=self.advertised_url, partition=runtime.partition)
        )

    async def call_describe_group(self, group_id: str) -> GroupDescription | None:
        """The group's description (None: no such group); NotServing if it is not served here."""
        return await self.runtime_for(group_id).query(lambda c: c.describe_group(group_id))

    async def connector_status(self, request: web.Request) -> web.Response:
        """Kafka Connect's status of one connector, as far as the coordinator knows (`views.connector_status`)."""
        group_id = self._group_id(request, "connectorStatus")
        connector = request.match_info["connector"]
        status = await self.runtime_for(group_id).query(lambda c: c.connector_status(group_id, connector))
        if isinstance(status, ErrorResponse):
            return _error(ErrorCode(status.error_code), status.error_message or "")
        return _answer(wire.ConnectorStatus.of(status))

    async def health(self, request: web.Request) -> web.Response:
        """This process's partitions and their status; 503 while any of them cannot serve."""
        partitions = {str(p): r.status.value for p, r in sorted(self.runtimes.items())}
        healthy = all(r.status is Status.ACTIVE for r in self.runtimes.values())
        return _answer(
            wire.Health(
                status="ok" if healthy else "degraded",
                url=self.advertised_url,
                partitions=partitions,
                release=release(),
                max_format_level=MAX_FORMAT_LEVEL,
                format_levels={
                    str(p): r.coordinator.state.format_level
                    for p, r in sorted(self.runtimes.items())
                    if r.status is Status.ACTIVE
                },
                standbys={
                    str(p): wire.StandbyHealth(status=s.status, next_offset=s.next_offset, records=s.result.records)
                    for p, s in sorted(self.standbys.items())
                },
            ),
            200 if healthy else 503,
        )

    async def live(self, request: web.Request) -> web.Response:
        """Liveness: 200 whenever the event loop answers, whatever its partitions are doing (a pod
        that restarts because a partition loads would only load it again elsewhere)."""
        return _answer(wire.Liveness(status="alive", url=self.advertised_url, partitions=len(self.runtimes)))

    async def metrics_text(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.exposition(), headers={"Content-Type": metrics.CONTENT_TYPE})

    async def openapi_document(self, request: web.Request) -> web.Response:
        return web.Response(body=_DOCUMENT, content_type="application/json")

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Authentication, metrics, and the rule that no input ever produces a 500."""
        started = time.perf_counter()
        response = await self._answer(request, handler)
        route = request.match_info.route.resource
        if route is not None and request.path.startswith(operations.API_PREFIX):
            self.metrics.observe_request(route.canonical, time.perf_counter() - started, response.get(ERROR_CODE, 0))
        return response

    async def _answer(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            if request.path.startswith(operations.API_PREFIX):
                request[PRINCIPAL] = self.authorizer.authenticate(request.headers.get("Authorization"))
            return await handler(request)
        except AuthError as e:
            response = _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, str(e), status=e.status)
            if e.status == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="worker-coordinator"'
            return response
        except wire.WireError as e:
            return _error(ErrorCode.INVALID_REQUEST, str(e), status=400)
        except NotServing as e:
            return _error(e.code, str(e))
        except web.HTTPRequestEntityTooLarge:
            return _error(ErrorCode.INVALID_REQUEST, f"the body is larger than {self.max_body_bytes} bytes", status=413)
        except web.HTTPException:
            raise  # 404, 405: aiohttp's own answers
        except Exception:  # a bug: logged with its traceback, never shown to the client
            log.exception("unexpected failure on %s %s", request.method, request.path)
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "internal error; the coordinator logged it")


# As Kafka's request header client.id: printable, and short enough to show in a table.
_CLIENT_ID = re.compile(r"[\x21-\x7e][\x20-\x7e]{0,254}")


def _client_id(request: web.Request) -> str:
    """The `Client-Id` header (the SDK sends its client's), else the principal, as the member's
    ClientId: what `groups describe` shows in CLIENT-ID."""
    given = request.headers.get("Client-Id")
    if given is None:
        return request[PRINCIPAL]
    if not _CLIENT_ID.fullmatch(given):
        raise wire.WireError("the Client-Id header must be 1 to 255 printable ASCII characters")
    return given


def _pattern(path: str) -> str:
    """An OpenAPI path as aiohttp's route: each `{parameter}` one segment (the metrics label a
    request by the route's canonical path, which is the OpenAPI path again)."""
    return re.sub(r"\{(\w+)\}", r"{\1:[^/]+}", path)


async def _decode(request: web.Request, body: type[T]) -> T:
    return wire.decode(await request.read(), body)
