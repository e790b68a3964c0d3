"""The HTTP API against the session broker: the case study end to end over HTTP (server-side
assignor), the admin routes, and bad input answered with 400/INVALID_REQUEST, never a 500."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp.test_utils import TestClient, TestServer

from records import MAX_FORMAT_LEVEL

from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.service.auth import ANONYMOUS
from coordinator.service.runtime import Status
from coordinator.service.server import MAX_BODY_BYTES, CoordinatorServer
from coordinator.tools.partitions import partition_for
from coordinator.tools.release import release
from tests.topics import create_topic

pytestmark = pytest.mark.integration
G = "connect-cluster"
HB = "/v1/connect-group/heartbeat"


def _serve(broker, topic: str, scenario) -> None:  # noqa: ANN001
    create_topic(broker.bootstrap_servers, topic, 2)

    async def run() -> None:
        server = CoordinatorServer(
            broker.client_config(),
            topic,
            2,
            [0, 1],
            "http://127.0.0.1:0",
            CoordinatorConfig(server_assignment_interval_ms=100),
        )
        await server.start()
        client = TestClient(TestServer(server.app()))
        await client.start_server()
        try:
            await scenario(client)
        finally:
            await client.close()
            await server.close()

    asyncio.run(run())


async def _post(client: TestClient, path: str, body: dict) -> dict:
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    return await response.json()


def test_workers_converge_over_http(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: TestClient) -> None:
        r = await client.put(
            f"/v1/groups/{G}/connectors", json={"Connectors": [{"Name": "A", "Tasks": 2}, {"Name": "B", "Tasks": 1}]}
        )
        assert (await r.json())["ErrorCode"] == 0
        state = {}
        for m in ("W1", "W2"):
            body = await _post(
                client,
                HB,
                {
                    "GroupId": G,
                    "MemberId": m,
                    "MemberEpoch": 0,
                    "RebalanceTimeoutMs": 5000,
                    "ServerAssignor": "incremental_cooperative",
                },
            )
            assert body["ErrorCode"] == 0
            state[m] = (body["MemberEpoch"], body["Assignment"]["ConnectorsAndTasks"])
        for _ in range(20):
            await asyncio.sleep(0.15)
            for m, (epoch, owned) in list(state.items()):
                body = await _post(
                    client, HB, {"GroupId": G, "MemberId": m, "MemberEpoch": epoch, "ConnectorsAndTasks": owned}
                )
                assert body["ErrorCode"] == 0, body
                state[m] = (body["MemberEpoch"], (body["Assignment"] or {}).get("ConnectorsAndTasks", owned))
        described = await (await client.get(f"/v1/groups/{G}")).json()
        assert described["State"] == "STABLE", described
        items = [(c,) for m in state.values() for c in m[1]["Connectors"]]
        items += [(t["Connector"], t["Task"]) for m in state.values() for t in m[1]["Tasks"]]
        assert sorted(items) == [("A",), ("A", 0), ("A", 1), ("B",), ("B", 0)]
        listed = await (await client.get("/v1/groups")).json()
        assert [g["GroupId"] for g in listed["Groups"]] == [G]
        found = await _post(client, "/v1/find-coordinator", {"GroupId": G})
        assert found["ErrorCode"] == 0 and found["Url"]
        health = await client.get("/health")
        assert health.status == 200

    _serve(kafka_broker, unique_topic, scenario)


def test_bad_input_is_a_clear_error_never_a_500(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: TestClient) -> None:
        cases = [
            (HB, b"{not json"),
            (HB, b"[]"),
            (HB, b'{"GroupId": 3, "MemberId": "m", "MemberEpoch": 0}'),
            (HB, b'{"GroupId": "g", "MemberId": "m"}'),
            (HB, b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 99999999999}'),
            (
                HB,
                b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 0, "ClientAssignors": [{"Name": "x", '
                b'"MinimumVersion": 0, "MaximumVersion": 0, "Metadata": "***"}]}',
            ),
            (
                "/v1/connect-group/install-assignment",
                b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 0, "GroupEpoch": 1, "Members": [5]}',
            ),
        ]
        for path, raw in cases:
            response = await client.post(path, data=raw, headers={"Content-Type": "application/json"})
            body = await response.json()
            assert response.status == 400 and body["ErrorCode"] == 42 and body["ErrorMessage"], (raw, body)
        too_big = await client.post(HB, data=b"x" * (MAX_BODY_BYTES + 1))
        assert too_big.status == 413
        unknown = await _post(client, HB, {"GroupId": "nope", "MemberId": "m", "MemberEpoch": 5})
        assert unknown["ErrorCode"] == 25
        described = await (await client.get("/v1/groups/nope")).json()
        assert described["ErrorCode"] == 69
        invalid = await _post(client, HB, {"GroupId": "", "MemberId": "m", "MemberEpoch": 0, "RebalanceTimeoutMs": 1})
        assert invalid["ErrorCode"] == 42

    _serve(kafka_broker, unique_topic, scenario)


def test_a_members_client_id_is_what_its_client_calls_itself(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Issue 29: CLIENT-ID showed the principal. A member's ClientId is the Client-Id header (as
    Kafka's request header client.id), the principal only without one; a malformed one is refused."""

    async def scenario(client: TestClient) -> None:
        join = {
            "GroupId": G,
            "MemberEpoch": 0,
            "RebalanceTimeoutMs": 60_000,
            "ServerAssignor": "incremental_cooperative",
        }
        named = await client.post(HB, json={**join, "MemberId": "m1"}, headers={"Client-Id": "connect-7"})
        assert (await named.json())["ErrorCode"] == 0
        plain = await _post(client, HB, {**join, "MemberId": "m2"})
        assert plain["ErrorCode"] == 0
        for bad in ("", "x" * 256):  # HTTP itself strips surrounding blanks and refuses control bytes
            refused = await client.post(HB, json={**join, "MemberId": "m3"}, headers={"Client-Id": bad})
            body = await refused.json()
            assert refused.status == 400 and body["ErrorCode"] == 42 and "Client-Id" in body["ErrorMessage"], bad
        described = await (await client.get(f"/v1/groups/{G}")).json()
        clients = {m["MemberId"]: m["ClientId"] for m in described["Members"]}
        assert clients == {"m1": "connect-7", "m2": ANONYMOUS}  # the open authorizer's principal

    _serve(kafka_broker, unique_topic, scenario)


def test_metrics_count_what_happened(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    async def scenario(client: TestClient) -> None:
        await client.put(f"/v1/groups/{G}/connectors", json={"Connectors": [{"Name": "A", "Tasks": 2}]})
        joined = await _post(
            client,
            HB,
            {
                "GroupId": G,
                "MemberId": "W1",
                "MemberEpoch": 0,
                "RebalanceTimeoutMs": 5000,
                "ServerAssignor": "incremental_cooperative",
            },
        )
        await _post(client, HB, {"GroupId": G, "MemberId": "W1", "MemberEpoch": joined["MemberEpoch"] + 7})
        response = await client.get("/metrics")
        assert response.status == 200 and response.content_type == "text/plain"
        samples = {}
        for line in (await response.text()).splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        hb = '{api="/v1/connect-group/heartbeat"}'
        assert samples[f"coordinator_request_seconds_count{hb}"] == 2
        assert samples['coordinator_errors_total{api="/v1/connect-group/heartbeat",error="FENCED_MEMBER_EPOCH"}'] == 1
        partition = str(partition_for(G, 2))
        assert samples[f'coordinator_groups{{partition="{partition}"}}'] == 1
        assert samples[f'coordinator_members{{partition="{partition}"}}'] == 0  # fenced, so removed
        assert samples[f'coordinator_group_epoch{{group="{G}"}}'] >= 2
        assert samples[f'coordinator_rebalances_total{{partition="{partition}"}}'] >= 2
        assert samples[f'coordinator_batch_records_count{{partition="{partition}"}}'] >= 2
        assert samples['coordinator_partition_loads_total{partition="0"}'] == 1

    _serve(kafka_broker, unique_topic, scenario)


def test_live_while_a_partition_loads_and_not_ready(kafka_broker, unique_topic) -> None:  # noqa: ANN001
    """Kubernetes' two probes: /health/live is 200 whatever the partitions do (a liveness probe that
    failed during a load would restart the pod, which would load again elsewhere); /health/ready and
    /health are 503 until every partition this process holds serves. The load of partition 1 is held
    by a gate queued on its own I/O thread (it runs the fence and the load, one job at a time), so the
    partition is loading for certain while the probes are asked; then it loads from Kafka."""
    create_topic(kafka_broker.bootstrap_servers, unique_topic, 2)

    async def run() -> None:
        server = CoordinatorServer(kafka_broker.client_config(), unique_topic, 2, [0], "http://127.0.0.1:0")
        await server.start()
        client = TestClient(TestServer(server.app()))
        await client.start_server()
        gate = threading.Event()
        try:
            assert (await client.get("/health/ready")).status == 200
            assigning = asyncio.create_task(server.assign([1]))
            await asyncio.sleep(0)  # assign has made the runtime, and queued no Kafka call yet
            held = server.runtimes[1]._io.submit(gate.wait)
            live = await client.get("/health/live")
            assert live.status == 200 and live.content_type == "application/json"
            assert await live.json() == {"Status": "alive", "Url": "http://127.0.0.1:0", "Partitions": 2}
            for path in ("/health/ready", "/health"):
                ready = await client.get(path)
                assert ready.status == 503, path
                assert await ready.json() == {
                    "Status": "degraded",
                    "Url": "http://127.0.0.1:0",
                    "Partitions": {"0": "active", "1": "loading"},
                    "Release": release(),
                    "MaxFormatLevel": MAX_FORMAT_LEVEL,
                    "FormatLevels": {"0": 1},  # a loading partition's level is not known yet
                    "Standbys": {},  # none kept without --standby-partitions
                }
            gate.set()
            await asyncio.wrap_future(held)
            await assigning
            assert server.runtimes[1].status is Status.ACTIVE
            assert (await client.get("/health/ready")).status == 200
            assert (await client.get("/health/live")).status == 200
        finally:
            gate.set()
            await client.close()
            await server.close()

    asyncio.run(run())
