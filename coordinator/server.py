"""The HTTP API (DESIGN §7) over the partitions this process owns.

Protocol errors are HTTP 200 with `ErrorCode`/`ErrorMessage`; a body that is not JSON or breaks
the schema is HTTP 400 with INVALID_REQUEST; nothing ever answers 500 with a traceback: an
unexpected failure is logged and answered COORDINATOR_NOT_AVAILABLE.

Ownership here is `static`: the process owns the partitions it is given (DESIGN §6).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import orjson
from aiohttp import web

from coordinator import openapi, wire
from coordinator.group_coordinator import CoordinatorConfig
from coordinator.log import partition_for
from coordinator.protocol import ErrorCode
from coordinator.runtime import NotServing, PartitionRuntime, Status

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # an InstallAssignment of a large group fits; anything bigger is refused


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _error(code: ErrorCode, message: str, status: int = 200) -> web.Response:
    return _json({"ErrorCode": int(code), "ErrorMessage": message}, status)


class CoordinatorServer:
    """The partitions this process serves, and the routes that reach them."""

    def __init__(self, kafka_config: Mapping[str, str], topic: str, partitions: int, owned: Iterable[int],
                 advertised_url: str, config: CoordinatorConfig | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.advertised_url = advertised_url
        self.runtimes = {p: PartitionRuntime(kafka_config, topic, p, config) for p in owned}

    async def start(self) -> None:
        for runtime in self.runtimes.values():
            await runtime.start()

    async def close(self) -> None:
        for runtime in self.runtimes.values():
            await runtime.close()

    def runtime_for(self, group_id: str) -> PartitionRuntime:
        partition = partition_for(group_id, self.partitions)
        runtime = self.runtimes.get(partition)
        if runtime is None:
            raise NotServing(ErrorCode.NOT_COORDINATOR, f"group {group_id} (partition {partition}) is not served here")
        return runtime

    # --- the app -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_never_a_500])
        post = [("/v1/connect-group/heartbeat", self._protocol("heartbeat", wire.heartbeat_request,
                                                                 wire.heartbeat_response)),
                ("/v1/connect-group/prepare-assignment", self._protocol("prepare_assignment", wire.prepare_request,
                                                                          wire.prepare_response)),
                ("/v1/connect-group/install-assignment", self._protocol("install_assignment", wire.install_request,
                                                                          _outcome)),
                ("/v1/find-coordinator", self.find_coordinator)]
        app.add_routes([web.post(path, handler) for path, handler in post])
        app.add_routes([
            web.get("/v1/groups", self.list_groups),
            web.get("/v1/groups/{group_id}", self.describe_group),
            web.put("/v1/groups/{group_id}/connectors", self._admin("set_connectors", wire.set_connectors_request)),
            web.put("/v1/groups/{group_id}/config", self._admin("set_config", wire.set_config_request)),
            web.delete("/v1/groups/{group_id}", self._admin("delete_group", lambda g, _: wire.delete_request(g))),
            web.get("/health", self.health),
            web.get("/openapi.json", self.openapi_document),
        ])
        return app

    def _protocol(self, handler: str, parse: Callable[..., Any], render: Callable[[Any], dict]
                  ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def route(request: web.Request) -> web.Response:
            body = await _body(request)
            parsed = parse(body) if handler != "heartbeat" else parse(body, "", request.remote or "")
            runtime = self.runtime_for(parsed.group_id)
            return _json(render(await runtime.call(handler, parsed)))
        return route

    def _admin(self, handler: str, parse: Callable[[str, Any], Any]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def route(request: web.Request) -> web.Response:
            group_id = request.match_info["group_id"]
            body = await _body(request) if request.method != "DELETE" else None
            runtime = self.runtime_for(group_id)
            return _json(_outcome(await runtime.call(handler, parse(group_id, body))))
        return route

    async def find_coordinator(self, request: web.Request) -> web.Response:
        body = await _body(request)
        group_id = wire._get(wire._object(body, "the body"), "GroupId", "str", required=True)
        partition = partition_for(group_id, self.partitions)
        if partition not in self.runtimes:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no coordinator known for partition {partition}")
        return _json({"ErrorCode": 0, "ErrorMessage": None, "Partition": partition, "Url": self.advertised_url})

    async def list_groups(self, request: web.Request) -> web.Response:
        groups = []
        for runtime in self.runtimes.values():
            if runtime.status is Status.ACTIVE:
                groups += [{"GroupId": g.group_id, "GroupEpoch": g.group_epoch, "State": g.state, "Members": g.members}
                           for g in runtime.coordinator.list_groups()]
        return _json({"ErrorCode": 0, "Groups": sorted(groups, key=lambda g: g["GroupId"])})

    async def describe_group(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group_id"]
        runtime = self.runtime_for(group_id)
        runtime._check_serving()
        description = runtime.coordinator.describe_group(group_id)
        if description is None:
            return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
        return _json({"ErrorCode": 0, **wire.group_description_json(description)})

    async def openapi_document(self, request: web.Request) -> web.Response:
        return _json(openapi.DOCUMENT)

    async def health(self, request: web.Request) -> web.Response:
        partitions = {str(p): r.status.value for p, r in sorted(self.runtimes.items())}
        healthy = all(r.status is Status.ACTIVE for r in self.runtimes.values())
        return _json({"Status": "ok" if healthy else "degraded", "Partitions": partitions}, 200 if healthy else 503)


def _outcome(response: Any) -> dict:
    return {"ErrorCode": int(response.error_code), "ErrorMessage": response.error_message}


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise wire.WireError(f"the body is not JSON: {e}") from None


@web.middleware
async def _never_a_500(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                       ) -> web.StreamResponse:
    try:
        return await handler(request)
    except wire.WireError as e:
        return _error(ErrorCode.INVALID_REQUEST, str(e), status=400)
    except NotServing as e:
        return _error(e.code, str(e))
    except web.HTTPRequestEntityTooLarge:
        return _error(ErrorCode.INVALID_REQUEST, f"the body is larger than {MAX_BODY_BYTES} bytes", status=413)
    except web.HTTPException:
        raise  # 404, 405: aiohttp's own answers
    except Exception:  # a bug: logged with its traceback, never shown to the client
        log.exception("unexpected failure on %s %s", request.method, request.path)
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "internal error; the coordinator logged it")
