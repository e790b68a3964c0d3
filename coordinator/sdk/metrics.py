"""The workers' rebalance metrics for Prometheus (prometheus-client), read when scraped.

Seed 001's names (`rebalance-total`, `rebalance-latency-avg`, ..., the callbacks' latencies) become
`worker_coordinator_member_*`; where Kafka Connect's `connect-worker-rebalance-metrics` group names
the same figure differently (`completed-rebalances-total`, `rebalance-avg-time-ms`, `epoch`, ...),
it is exported under that name too, as the JMX exporter would spell it (`kafka_connect_worker_
rebalance_*`), so dashboards built for Kafka Connect work unchanged. Every series is labelled with
the group and the member id.

    registry = CollectorRegistry()
    registry.register(WorkerMetrics(lambda: fleet.workers.values()))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.sdk.worker import Worker

SEED = "worker_coordinator_member_"
CONNECT = "kafka_connect_worker_rebalance_"
LABELS = ("group", "member")

# Seed 001's figures: snapshot key -> (metric name, help, counter?)
_SEED_METRICS: dict[str, tuple[str, str, bool]] = {
    "rebalance-total": ("rebalance", "Rebalances this member took part in (seed 001 rebalance-total).", True),
    "failed-rebalance-total": (
        "failed_rebalance",
        "Rebalances that failed for this member: fenced, lost or an "
        "assignment refused (seed 001 failed-rebalance-total).",
        True,
    ),
    "rebalance-latency-avg": ("rebalance_latency_avg_ms", "Average rebalance latency (seed 001).", False),
    "rebalance-latency-max": ("rebalance_latency_max_ms", "Longest rebalance latency (seed 001).", False),
    "rebalance-latency-total": ("rebalance_latency_total_ms", "Time spent rebalancing (seed 001).", False),
    "rebalance-rate-per-hour": ("rebalance_rate_per_hour", "Rebalances in the last hour (seed 001).", False),
    "failed-rebalance-rate-per-hour": (
        "failed_rebalance_rate_per_hour",
        "Failed rebalances in the last hour (seed 001).",
        False,
    ),
    "last-rebalance-seconds-ago": (
        "last_rebalance_seconds_ago",
        "Seconds since the last rebalance ended (seed 001; absent before the first).",
        False,
    ),
}
for _kind in ("revoked", "assigned", "lost"):
    _SEED_METRICS[f"connectors-{_kind}-latency-avg"] = (
        f"connectors_{_kind}_latency_avg_ms",
        f"Average on_{_kind} callback latency (seed 001).",
        False,
    )
    _SEED_METRICS[f"connectors-{_kind}-latency-max"] = (
        f"connectors_{_kind}_latency_max_ms",
        f"Longest on_{_kind} callback latency (seed 001).",
        False,
    )

# Kafka Connect's names for the figures it also has: snapshot key -> (metric name, help, scale).
_CONNECT_METRICS: dict[str, tuple[str, str, float]] = {
    "rebalance-total": ("completed_rebalances_total", "completed-rebalances-total", 1.0),
    "rebalance-latency-avg": ("rebalance_avg_time_ms", "rebalance-avg-time-ms", 1.0),
    "rebalance-latency-max": ("rebalance_max_time_ms", "rebalance-max-time-ms", 1.0),
    "last-rebalance-seconds-ago": ("time_since_last_rebalance_ms", "time-since-last-rebalance-ms", 1000.0),
}


class WorkerMetrics(Collector):
    """The rebalance metrics of the workers `workers()` returns, at each scrape."""

    def __init__(self, workers: Callable[[], Iterable[Worker]]) -> None:
        self.workers = workers

    def describe(self) -> list[Metric]:
        return []  # read at scrape time: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}

        def family(name: str, help_: str, counter: bool) -> Metric:
            if name not in families:
                kind = CounterMetricFamily if counter else GaugeMetricFamily
                families[name] = kind(name, help_, labels=LABELS)
            return families[name]

        for worker in list(self.workers()):
            labels = (worker.group_id, worker.member_id)
            snapshot = worker.metrics.snapshot()
            for key, (name, help_, counter) in _SEED_METRICS.items():
                if snapshot.get(key) is not None:
                    family(SEED + name, help_, counter).add_metric(labels, snapshot[key])
            for key, (name, connect_name, scale) in _CONNECT_METRICS.items():
                if snapshot.get(key) is not None:
                    family(CONNECT + name, f"Kafka Connect's {connect_name}.", False).add_metric(
                        labels, snapshot[key] * scale
                    )
            family(
                CONNECT + "rebalancing", "Kafka Connect's rebalancing: 1 while a rebalance is under way.", False
            ).add_metric(labels, 1.0 if worker.metrics.rebalancing else 0.0)
            family(CONNECT + "epoch", "Kafka Connect's epoch: the member epoch.", False).add_metric(
                labels, worker.member_epoch
            )
        yield from families.values()
