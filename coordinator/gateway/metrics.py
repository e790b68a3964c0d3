"""What the gateway's `/metrics` shows (`coordinator gateway --metrics-listen HOST:PORT`), in the
Prometheus text format, through the reference client library: connections open per port,
requests per Kafka API and where they went, the failure codes of our coordinators' answers (the
only answers, with the rewritten ones, that the gateway decodes: a broker's are forwarded as bytes),
connections closed for bad input or an answer it could not pass on, and upstreams it could not reach."""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector, generate_latest

from coordinator.core.protocol import ErrorCode

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Codes that are steps of the group protocol, not failures (as the coordinator's own metrics count them).
_SIGNALS = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.MEMBER_ID_REQUIRED})


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.connections = Gauge(
            "coordinator_gateway_connections",
            "Client connections open, by gateway port (bootstrap, coordinator, broker-N)",
            ["port"],
            registry=r,
        )
        self.requests = Counter(
            "coordinator_gateway_requests",
            "Client requests forwarded, by Kafka API and where they went (broker, coordinator)",
            ["api", "upstream"],
            registry=r,
        )
        self.errors = Counter(
            "coordinator_gateway_coordinator_errors",
            "Failure codes in our coordinators' answers "
            "(one per group or member of a batched answer), by Kafka API and error name",
            ["api", "error"],
            registry=r,
        )
        self.closed = Counter(
            "coordinator_gateway_closed_connections",
            "Client connections the gateway closed, by reason (bad-input, unauthenticated, refused, upstream)",
            ["reason"],
            registry=r,
        )
        self.upstream_failures = Counter(
            "coordinator_gateway_upstream_failures",
            "Upstream connections that could not be opened or logged in to, by kind (broker, coordinator)",
            ["upstream"],
            registry=r,
        )
        ProcessCollector(registry=r)

    def observe_coordinator_answer(self, api: str, codes: Iterable[int]) -> None:
        for code in codes:
            if code and code not in _SIGNALS:
                self.errors.labels(api, _error_name(code)).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def app(self) -> web.Application:
        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=self.exposition(), headers={"Content-Type": CONTENT_TYPE})

        app = web.Application()
        app.add_routes([web.get("/metrics", metrics)])
        return app
