"""What `/metrics` exports, without a server: a normal rebalance counts no error, errors carry
their names, and the process, platform and build series are there (issue 19, item 1); the series
whose label values are known in advance are there at 0 before anything happens (issue 29, item 4)."""

from __future__ import annotations

import pytest

from coordinator.core.protocol import ErrorCode
from coordinator.service import metrics
from coordinator.service.metrics import Metrics
from tests.support.metrics import exposed

pytestmark = pytest.mark.ops

HB = "/v1/connect-group/heartbeat"


def test_protocol_steps_are_signals_not_errors_and_errors_carry_their_names() -> None:
    m = Metrics()
    for code in (
        ErrorCode.NONE,
        ErrorCode.COMPUTE_ASSIGNMENT,
        ErrorCode.COMPUTE_ASSIGNMENT,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.MEMBER_ID_REQUIRED,
    ):
        m.observe_request(HB, 0.001, code)
    samples = exposed(m.exposition())
    errors = {name: value for name, value in samples.items() if name.startswith("coordinator_errors_total")}
    assert errors and not any(errors.values())
    assert samples[f'coordinator_protocol_signals_total{{api="{HB}",signal="COMPUTE_ASSIGNMENT"}}'] == 2
    assert samples[f'coordinator_protocol_signals_total{{api="{HB}",signal="REBALANCE_IN_PROGRESS"}}'] == 1
    m.observe_request(HB, 0.001, ErrorCode.FENCED_MEMBER_EPOCH)
    m.observe_request(HB, 0.001, 4242)  # a code this version does not know
    samples = exposed(m.exposition())
    assert samples[f'coordinator_errors_total{{api="{HB}",error="FENCED_MEMBER_EPOCH"}}'] == 1
    assert samples[f'coordinator_errors_total{{api="{HB}",error="4242"}}'] == 1
    assert samples[f'coordinator_request_seconds_count{{api="{HB}"}}'] == 7


def test_process_platform_and_build_series_are_exported() -> None:
    samples = exposed(Metrics().exposition())
    assert samples["process_resident_memory_bytes"] > 0 and samples["process_open_fds"] > 0
    assert any(name.startswith("python_info{") for name in samples)
    assert any(name.startswith("python_gc_collections_total{") for name in samples)
    (build,) = [name for name in samples if name.startswith("coordinator_build_info{")]
    assert 'version="' in build and samples[build] == 1


def test_partition_status_and_rebalances_in_progress_are_read_when_scraped() -> None:
    from types import SimpleNamespace

    from coordinator.core.state import CoordinatorState
    from coordinator.service.events import Observer, OpenRebalance
    from coordinator.service.runtime import Status

    def runtime(status: Status, open_since_ms: dict[str, int]) -> SimpleNamespace:
        observer = Observer(0)
        observer.open = {g: OpenRebalance(ms, 1) for g, ms in open_since_ms.items()}
        return SimpleNamespace(
            status=status,
            observer=observer,
            now_ms=lambda: 10_000,
            coordinator=SimpleNamespace(state=CoordinatorState()),
        )

    runtimes = {
        0: runtime(Status.ACTIVE, {"g": 4_000}),
        1: runtime(Status.LOADING, {}),
        2: runtime(Status.FENCED, {"stale": 0}),
    }
    m = Metrics()
    m.watch(lambda: runtimes)
    samples = exposed(m.exposition())
    for partition, current in ((0, "serving"), (1, "loading"), (2, "fenced")):
        for status in ("loading", "serving", "failed", "fenced"):
            assert samples[f'coordinator_partition_status{{partition="{partition}",status="{status}"}}'] == (
                1 if status == current else 0
            )
    # Only a serving partition's rebalances are shown: a fenced one's are someone else's now.
    assert samples['coordinator_rebalance_in_progress_seconds{group="g"}'] == 6.0
    assert not [name for name in samples if 'group="stale"' in name]
    m.observe_rebalance(0, 1.7)
    samples = exposed(m.exposition())
    assert samples['coordinator_rebalance_duration_seconds_count{partition="0"}'] == 1
    assert samples['coordinator_rebalance_duration_seconds_bucket{le="2.5",partition="0"}'] == 1
    assert samples['coordinator_rebalance_duration_seconds_bucket{le="1.0",partition="0"}'] == 0


def test_the_kafka_listener_counts_requests_and_failures_per_kafka_api() -> None:
    m = Metrics()
    m.kafka_connections.inc()
    m.observe_kafka_request("JoinGroup", [ErrorCode.MEMBER_ID_REQUIRED])  # a step, not an error
    m.observe_kafka_request("DeleteGroups", [ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NOT_COORDINATOR])
    m.observe_kafka_request("ApiVersions", [])
    samples = exposed(m.exposition())
    assert samples["coordinator_kafka_connections"] == 1
    assert {k: v for k, v in samples.items() if k.startswith("coordinator_kafka_requests_total")} == {
        'coordinator_kafka_requests_total{api="JoinGroup"}': 1,
        'coordinator_kafka_requests_total{api="DeleteGroups"}': 1,
        'coordinator_kafka_requests_total{api="ApiVersions"}': 1,
    }
    assert {k: v for k, v in samples.items() if k.startswith("coordinator_kafka_errors_total")} == {
        'coordinator_kafka_errors_total{api="DeleteGroups",error="GROUP_ID_NOT_FOUND"}': 1,
        'coordinator_kafka_errors_total{api="DeleteGroups",error="NOT_COORDINATOR"}': 1,
    }


def test_the_series_known_in_advance_are_there_at_zero_before_anything_happens() -> None:
    """Each API's request count, and its documented errors and signals, at 0 from the start: a counter
    Prometheus first sees at 1 has no 0 before it, so rate() would miss that first error."""
    from coordinator.service.metrics import documented_codes
    from coordinator.service.server import CoordinatorServer

    samples = exposed(Metrics().exposition())
    documented = documented_codes()
    # The label values are the server's own routes, as the middleware labels requests.
    app = CoordinatorServer({"bootstrap.servers": "unused:9092"}, "t", 2, [], "http://unused").app()
    assert set(documented) == {
        r.resource.canonical for r in app.router.routes() if r.resource.canonical.startswith("/v1/")
    }
    for api, codes in documented.items():
        assert samples[f'coordinator_request_seconds_count{{api="{api}"}}'] == 0
        assert samples[f'coordinator_request_seconds_bucket{{api="{api}",le="+Inf"}}'] == 0
        assert ErrorCode.GROUP_AUTHORIZATION_FAILED in codes  # a 401 answers any API without a credential
        for code in codes:
            family, label = ("protocol_signals", "signal") if code in metrics.SIGNALS else ("errors", "error")
            assert samples[f'coordinator_{family}_total{{api="{api}",{label}="{code.name}"}}'] == 0
    heartbeat = documented[HB]
    assert {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.NOT_COORDINATOR, ErrorCode.COMPUTE_ASSIGNMENT} <= heartbeat
    assert ErrorCode.ILLEGAL_GENERATION not in heartbeat  # classic only: not every code for every API
    join = "/v1/classic-group/join"
    assert samples[f'coordinator_protocol_signals_total{{api="{join}",signal="MEMBER_ID_REQUIRED"}}'] == 0
    assert not [name for name in samples if 'partition="' in name]  # no partition is served yet


def test_a_loaded_partition_has_its_series_at_zero_before_its_first_commit() -> None:
    m = Metrics()
    m.observe_load(3, 0.25, 17)
    samples = exposed(m.exposition())
    assert samples['coordinator_partition_loads_total{partition="3"}'] == 1
    assert samples['coordinator_partition_load_seconds{partition="3"}'] == 0.25
    assert samples['coordinator_partition_records_loaded{partition="3"}'] == 17
    assert samples['coordinator_rebalances_total{partition="3"}'] == 0
    for histogram in ("batch_records", "commit_seconds", "rebalance_duration_seconds"):
        assert samples[f'coordinator_{histogram}_count{{partition="3"}}'] == 0
        assert samples[f'coordinator_{histogram}_bucket{{le="+Inf",partition="3"}}'] == 0
    assert not [name for name in samples if 'partition="4"' in name]  # only the partitions loaded here
