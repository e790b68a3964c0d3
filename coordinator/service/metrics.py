"""What `/metrics` shows (Prometheus text format), through the reference client library.

Event metrics (requests, errors, batches, commits, loads, rebalances) are counted as they happen;
state metrics (groups, members, epochs) are read from the partitions' state when scraped, so they
can never drift from what the coordinator holds. Each server has its own registry: two servers in
one process (tests, benchmarks) do not mix their figures.

Every series the dashboard and the alert rules under docker/ name is there from the first scrape,
at 0, where its label values are known in advance (issue 29, item 4): a series Prometheus first
sees at 1 has no 0 before it, so rate() and increase() miss that first error or rebalance, and a
panel shows "No data" instead of 0. Known in advance are the APIs and the errors and signals their
documentation names (`coordinator.api.openapi.OPERATIONS`), initialised here, and the partitions
this process serves, initialised at each load. A group's series (PER_GROUP) cannot be: groups come
and go, and a placeholder group would be counted by every panel that counts groups. For them the
dashboard's queries end in `or on() vector(0)`-style fallbacks, and an alert on them not firing
when no group exists is what it should do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

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

from records import ConnectGroupMetadataKey, Record

from coordinator.api.openapi import OPERATIONS
from coordinator.core.protocol import ErrorCode
from coordinator.tools.release import release

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Heartbeats answered from memory take tens of microseconds; durable ones wait for a commit (ms).
_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
# From an epoch bump to convergence: a heartbeat interval or two when nothing must be revoked, up
# to a rebalance timeout (Connect's default 60 s) or a scheduled rebalance delay (5 min) when it is.
_REBALANCE_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
# The partition's status as `/health` and the alert rules name it (the runtime's ACTIVE is "serving").
PARTITION_STATUSES = {
    "loading": "loading",
    "active": "serving",
    "failed": "failed",
    "fenced": "fenced",
    "closed": "closed",
    "refused": "refused",
}

STANDBY_STATUSES = ("catching-up", "following", "failed")  # coordinator.service.standby.Standby.status

# Codes that are steps of the protocol, not failures: a member asked to compute the target
# (client-side assignment), a classic member told to rejoin or to join again with its new id. An
# alert on coordinator_errors_total must not fire on a normal rebalance, so they are counted apart.
SIGNALS = frozenset({ErrorCode.COMPUTE_ASSIGNMENT, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.MEMBER_ID_REQUIRED})


# The series labelled by group: they exist once a group does, never before (see the module's doc).
PER_GROUP = frozenset(
    {"coordinator_group_epoch", "coordinator_assignment_epoch", "coordinator_rebalance_in_progress_seconds"}
)


def documented_codes() -> dict[str, frozenset[ErrorCode]]:
    """The codes each HTTP API (its path, as the server's metrics label it) can answer with, as the
    OpenAPI document lists them: the codes its description names, GROUP_AUTHORIZATION_FAILED for
    every API (401 without a credential), INVALID_REQUEST for one with a body (400, 413). Two
    operations on one path (GET and DELETE /v1/groups/{group_id}) share its label, so their codes."""
    names = {code.name: code for code in ErrorCode if code is not ErrorCode.NONE}
    codes: dict[str, set[ErrorCode]] = {}
    for op in OPERATIONS:
        found = codes.setdefault(op.path, set())
        found.update(names[word] for word in re.findall(r"\b[A-Z][A-Z_]+\b", op.description) if word in names)
        found.add(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if op.request is not None:
            found.add(ErrorCode.INVALID_REQUEST)
    return {path: frozenset(found) for path, found in codes.items()}


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)  # a code this version does not know: its number, rather than nothing


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # Registered in this order, which is the order a scrape lists them in.
        self._request_metrics(self.registry)
        self._kafka_listener_metrics(self.registry)
        self._process_metrics(self.registry)
        self._partition_metrics(self.registry)
        for api, codes in documented_codes().items():
            self.request_seconds.labels(api)
            for code in codes:
                (self.signals if code in SIGNALS else self.errors).labels(api, code.name)

    def _request_metrics(self, r: CollectorRegistry) -> None:
        """Every request's time and error code, by API (both transports)."""
        self.request_seconds = Histogram(
            "coordinator_request_seconds",
            "Time to answer a request, by API",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "coordinator_errors",
            "Responses with an ErrorCode that is a failure, by API and error name",
            ["api", "error"],
            registry=r,
        )
        self.signals = Counter(
            "coordinator_protocol_signals",
            "Responses with an ErrorCode that is a step of the "
            "protocol (COMPUTE_ASSIGNMENT, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED), by API "
            "and name",
            ["api", "signal"],
            registry=r,
        )

    def _kafka_listener_metrics(self, r: CollectorRegistry) -> None:
        """The Kafka listener's connections, requests and errors."""
        self.kafka_bad_input = Counter(
            "coordinator_kafka_bad_input",
            "Kafka listener connections closed for bad input (frame-size, truncated, malformed, unsupported)",
            ["reason"],
            registry=r,
        )
        self.kafka_connections = Gauge(
            "coordinator_kafka_connections", "Connections open to the Kafka listener", registry=r
        )
        self.kafka_requests = Counter(
            "coordinator_kafka_requests",
            "Requests the Kafka listener answered, by Kafka API (JoinGroup, Heartbeat, ...)",
            ["api"],
            registry=r,
        )
        self.kafka_errors = Counter(
            "coordinator_kafka_errors",
            "Error codes that are failures in the Kafka "
            "listener's answers (one per key, group or member of a batched answer), by "
            "Kafka API and error name; the protocol's steps (REBALANCE_IN_PROGRESS, "
            "MEMBER_ID_REQUIRED) are not counted",
            ["api", "error"],
            registry=r,
        )

    @staticmethod
    def _process_metrics(r: CollectorRegistry) -> None:
        """The process's, Python's and the build's."""
        ProcessCollector(registry=r)  # process_*: CPU, RSS, open file descriptors, start time
        PlatformCollector(registry=r)  # python_info
        GCCollector(registry=r)  # python_gc_*
        Info("coordinator_build", "The coordinator's version", registry=r).info({"version": release()})

    def _partition_metrics(self, r: CollectorRegistry) -> None:
        """Each partition's writes, loads and rebalances."""
        self.batch_records = Histogram(
            "coordinator_batch_records",
            "Records per committed transaction",
            ["partition"],
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.commit_seconds = Histogram(
            "coordinator_commit_seconds",
            "Time to write and commit one batch",
            ["partition"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.load_seconds = Gauge(
            "coordinator_partition_load_seconds", "Duration of the last load of a partition", ["partition"], registry=r
        )
        self.records_loaded = Gauge(
            "coordinator_partition_records_loaded", "Records replayed by the last load", ["partition"], registry=r
        )
        self.loads = Counter(
            "coordinator_partition_loads",
            "Partition loads (start, failover, reload after a write failure)",
            ["partition"],
            registry=r,
        )
        self.rebalances = Counter(
            "coordinator_rebalances", "Group epoch bumps written (each starts a rebalance)", ["partition"], registry=r
        )
        self.rebalance_seconds = Histogram(
            "coordinator_rebalance_duration_seconds",
            "Rebalances from the group "
            "epoch bump to convergence (every member at the new epoch with nothing "
            "to revoke), as they converge",
            ["partition"],
            buckets=_REBALANCE_BUCKETS,
            registry=r,
        )

    def watch(
        self, partitions: Callable[[], Mapping[int, Any]], standbys: Callable[[], Mapping[int, Any]] = dict
    ) -> None:
        """Report the status of the partitions (runtimes) `partitions()` returns when scraped, the
        groups, members, epochs and rebalances in progress of those serving, and the standbys
        (`coordinator.service.standby.Standby`) `standbys()` returns."""
        self.registry.register(_StateCollector(partitions, standbys))

    def observe_request(self, api: str, seconds: float, error_code: int) -> None:
        self.request_seconds.labels(api).observe(seconds)
        if error_code in SIGNALS:
            self.signals.labels(api, _error_name(error_code)).inc()
        elif error_code:
            self.errors.labels(api, _error_name(error_code)).inc()

    def observe_kafka_request(self, api: str, error_codes: Iterable[int]) -> None:
        """A Kafka listener answer: the API's request count, and each failure code it carries."""
        self.kafka_requests.labels(api).inc()
        for code in error_codes:
            if code and code not in SIGNALS:
                self.kafka_errors.labels(api, _error_name(code)).inc()

    def observe_commit(self, partition: int, batch: list[Record], seconds: float) -> None:
        label = str(partition)
        self.batch_records.labels(label).observe(len(batch))
        self.commit_seconds.labels(label).observe(seconds)
        bumps = sum(1 for r in batch if r.key.__class__ is ConnectGroupMetadataKey and r.value is not None)
        if bumps:
            self.rebalances.labels(label).inc(bumps)

    def observe_rebalance(self, partition: int, seconds: float) -> None:
        self.rebalance_seconds.labels(str(partition)).observe(seconds)

    def observe_load(self, partition: int, seconds: float, records: int) -> None:
        label = str(partition)
        # The partition is served from now on: its event series start at 0 (see the module's doc).
        for family in (self.batch_records, self.commit_seconds, self.rebalances, self.rebalance_seconds):
            family.labels(label)
        self.loads.labels(label).inc()
        self.load_seconds.labels(label).set(seconds)
        self.records_loaded.labels(label).set(records)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(self, partitions: Callable[[], Mapping[int, Any]], standbys: Callable[[], Mapping[int, Any]]) -> None:
        self.partitions = partitions
        self.standbys = standbys

    def collect(self) -> Iterable[GaugeMetricFamily]:
        groups = GaugeMetricFamily("coordinator_groups", "Groups held by a partition", labels=["partition"])
        members = GaugeMetricFamily("coordinator_members", "Members held by a partition", labels=["partition"])
        group_epoch = GaugeMetricFamily("coordinator_group_epoch", "Group epoch", labels=["group"])
        assignment_epoch = GaugeMetricFamily(
            "coordinator_assignment_epoch", "Epoch of the installed target assignment", labels=["group"]
        )
        status = GaugeMetricFamily(
            "coordinator_partition_status",
            "1 for the status each partition this process "
            "owns is in (loading, serving, failed, fenced, refused: at a record format level this "
            "release does not read), 0 for the others",
            labels=["partition", "status"],
        )
        in_progress = GaugeMetricFamily(
            "coordinator_rebalance_in_progress_seconds",
            "Seconds since each group "
            "rebalancing now had its epoch bumped (since the partition loaded, for a "
            "rebalance open then)",
            labels=["group"],
        )
        level = GaugeMetricFamily(
            "coordinator_partition_format_level",
            "The record format level each serving partition writes at (records.FORMAT_LEVELS)",
            labels=["partition"],
        )
        for partition, runtime in sorted(self.partitions().items()):
            current = PARTITION_STATUSES[runtime.status.value]
            for name in ("loading", "serving", "failed", "fenced", "refused"):
                status.add_metric([str(partition), name], 1.0 if name == current else 0.0)
            if current != "serving":
                continue
            for group_id, seconds in runtime.observer.in_progress(runtime.now_ms()).items():
                in_progress.add_metric([group_id], seconds)
            state = runtime.coordinator.state
            level.add_metric([str(partition)], state.format_level)
            groups.add_metric([str(partition)], len(state.groups))
            members.add_metric([str(partition)], sum(len(g.members) for g in state.groups.values()))
            for group in state.groups.values():
                group_epoch.add_metric([group.group_id], group.group_epoch)
                assignment_epoch.add_metric([group.group_id], group.assignment_epoch)
        yield from (groups, members, group_epoch, assignment_epoch, status, in_progress, level)
        yield from self._standbys()

    def _standbys(self) -> Iterable[GaugeMetricFamily]:
        status = GaugeMetricFamily(
            "coordinator_standby_status",
            "1 for the status each hot standby kept here is in (catching-up, following, failed: a "
            "takeover then loads in full), 0 for the others",
            labels=["partition", "status"],
        )
        offset = GaugeMetricFamily(
            "coordinator_standby_next_offset", "The partition offset each standby reads next", labels=["partition"]
        )
        for partition, standby in sorted(self.standbys().items()):
            current = standby.status
            for name in STANDBY_STATUSES:
                status.add_metric([str(partition), name], 1.0 if name == current else 0.0)
            offset.add_metric([str(partition)], standby.next_offset)
        yield from (status, offset)
