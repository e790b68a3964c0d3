"""What `/metrics` shows (Prometheus text format), through the reference client library.

Event metrics (requests, errors, batches, commits, loads, rebalances) are counted as they happen;
state metrics (groups, members, epochs) are read from the partitions' state when scraped, so they
can never drift from what the coordinator holds. Each server has its own registry: two servers in
one process (tests, benchmarks) do not mix their figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from importlib.metadata import PackageNotFoundError, version

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.core.protocol import ErrorCode
from records import ConnectGroupMetadataKey, Record

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Heartbeats answered from memory take tens of microseconds; durable ones wait for a commit (ms).
_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

# Codes that are steps of the protocol, not failures: a member asked to compute the target
# (client-side assignment), a classic member told to rejoin or to join again with its new id. An
# alert on coordinator_errors_total must not fire on a normal rebalance, so they are counted apart.
SIGNALS = frozenset({ErrorCode.COMPUTE_ASSIGNMENT, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.MEMBER_ID_REQUIRED})


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)  # a code this version does not know: its number, rather than nothing


def _version() -> str:
    try:
        return version("worker-coordinator")
    except PackageNotFoundError:
        return "unknown"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.request_seconds = Histogram("coordinator_request_seconds", "Time to answer a request, by API",
                                         ["api"], buckets=_LATENCY_BUCKETS, registry=r)
        self.errors = Counter("coordinator_errors", "Responses with an ErrorCode that is a failure, by API and "
                              "error name", ["api", "error"], registry=r)
        self.signals = Counter("coordinator_protocol_signals", "Responses with an ErrorCode that is a step of the "
                               "protocol (COMPUTE_ASSIGNMENT, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED), by API "
                               "and name", ["api", "signal"], registry=r)
        ProcessCollector(registry=r)  # process_*: CPU, RSS, open file descriptors, start time
        PlatformCollector(registry=r)  # python_info
        GCCollector(registry=r)  # python_gc_*
        Info("coordinator_build", "The coordinator's version", registry=r).info({"version": _version()})
        self.batch_records = Histogram("coordinator_batch_records", "Records per committed transaction",
                                       ["partition"], buckets=_BATCH_BUCKETS, registry=r)
        self.commit_seconds = Histogram("coordinator_commit_seconds", "Time to write and commit one batch",
                                        ["partition"], buckets=_LATENCY_BUCKETS, registry=r)
        self.load_seconds = Gauge("coordinator_partition_load_seconds", "Duration of the last load of a partition",
                                  ["partition"], registry=r)
        self.records_loaded = Gauge("coordinator_partition_records_loaded", "Records replayed by the last load",
                                    ["partition"], registry=r)
        self.loads = Counter("coordinator_partition_loads", "Partition loads (start, failover, reload after a "
                             "write failure)", ["partition"], registry=r)
        self.rebalances = Counter("coordinator_rebalances", "Group epoch bumps written (each starts a rebalance)",
                                  ["partition"], registry=r)

    def watch(self, partitions: Callable[[], Mapping[int, Any]]) -> None:
        """Report groups, members and epochs of the partitions `partitions()` returns when scraped."""
        self.registry.register(_StateCollector(partitions))

    def observe_request(self, api: str, seconds: float, error_code: int) -> None:
        self.request_seconds.labels(api).observe(seconds)
        if error_code in SIGNALS:
            self.signals.labels(api, _error_name(error_code)).inc()
        elif error_code:
            self.errors.labels(api, _error_name(error_code)).inc()

    def observe_commit(self, partition: int, batch: list[Record], seconds: float) -> None:
        label = str(partition)
        self.batch_records.labels(label).observe(len(batch))
        self.commit_seconds.labels(label).observe(seconds)
        bumps = sum(1 for r in batch if r.key.__class__ is ConnectGroupMetadataKey and r.value is not None)
        if bumps:
            self.rebalances.labels(label).inc(bumps)

    def observe_load(self, partition: int, seconds: float, records: int) -> None:
        label = str(partition)
        self.loads.labels(label).inc()
        self.load_seconds.labels(label).set(seconds)
        self.records_loaded.labels(label).set(records)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(self, partitions: Callable[[], Mapping[int, Any]]) -> None:
        self.partitions = partitions

    def collect(self) -> Iterable[GaugeMetricFamily]:
        groups = GaugeMetricFamily("coordinator_groups", "Groups held by a partition", labels=["partition"])
        members = GaugeMetricFamily("coordinator_members", "Members held by a partition", labels=["partition"])
        group_epoch = GaugeMetricFamily("coordinator_group_epoch", "Group epoch", labels=["group"])
        assignment_epoch = GaugeMetricFamily("coordinator_assignment_epoch", "Epoch of the installed target "
                                             "assignment", labels=["group"])
        for partition, runtime in sorted(self.partitions().items()):
            state = runtime.coordinator.state
            groups.add_metric([str(partition)], len(state.groups))
            members.add_metric([str(partition)], sum(len(g.members) for g in state.groups.values()))
            for group in state.groups.values():
                group_epoch.add_metric([group.group_id], group.group_epoch)
                assignment_epoch.add_metric([group.group_id], group.assignment_epoch)
        yield from (groups, members, group_epoch, assignment_epoch)
