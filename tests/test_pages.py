"""The coordinator's HTML pages and the Connect-style status, against a running coordinator on the
session broker with a real group of SDK workers: the group page shows the members, their tasks and
the timeline's SVG, escapes what users named, answers 404, 401 and 403 as pages, and the list
hides what the principal may not describe; headless Chromium loads the page and saves a screenshot
(`.run/screenshots/group-page.png`; `make test` installs Debian's chromium where it can)."""

from __future__ import annotations

import asyncio
import base64
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer

from records import ConnectorTaskCount

from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.protocol import ErrorCode, ErrorResponse, SetConnectorsRequest
from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.worker import Worker
from coordinator.service.auth import ANONYMOUS, Acl, Authorizer, Operation
from coordinator.service.pages import Timelines
from coordinator.tools.partitions import read_range, reader_config
from tests.live_server import served
from tests.support import installed
from tests.topics import create_topic

pytestmark = pytest.mark.integration

G = "page-group"
OTHER = "alice-group"
EVIL = "<script>alert(1)</script>"
OPS, ALICE = "pages-ops-token", "pages-alice-token"
SCREENSHOT = Path(__file__).resolve().parents[1] / ".run" / "screenshots" / "group-page.png"


@dataclass
class Live:
    url: str
    workers: list[Worker]
    loop: asyncio.AbstractEventLoop
    topic: str
    timelines: Timelines  # the group pages' kept histories


def _get(live: Live, path: str, token: str | None = OPS, **kw) -> requests.Response:  # noqa: ANN003
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(live.url + path, headers=headers, timeout=30, allow_redirects=False, **kw)


@pytest.fixture(scope="module")
def live(kafka_broker) -> Iterator[Live]:  # noqa: ANN001
    topic = f"test-pages-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap_servers, topic)
    # ops may do everything; alice only her own groups; anonymous visitors (the browser) may look at page-*.
    authorizer = Authorizer(
        {OPS: "User:ops", ALICE: "User:alice"},
        [
            Acl("User:ops", frozenset({Operation.ALL}), "*"),
            Acl("User:alice", frozenset({Operation.READ}), "alice-*"),
            Acl(ANONYMOUS, frozenset({Operation.DESCRIBE}), "page-*"),
        ],
        allow_anonymous=True,
    )
    config = CoordinatorConfig(heartbeat_interval_ms=200, initial_assignment_delay_ms=0)
    workers: list[Worker] = []

    async def start(url: str) -> None:
        client = CoordinatorClient(url, token=OPS, retry_for_s=10)
        body = SetConnectorsRequest(
            connectors=[
                ConnectorTaskCount(name="orders-sink", tasks=3),
                ConnectorTaskCount(EVIL, 1),
            ]
        )
        assert (await client.call(G, "PUT", f"/v1/groups/{G}/connectors", ErrorResponse, body)).error_code == 0
        for member, instance in (("worker-1", None), ("worker-2", "pod-2")):
            w = Worker(client, G, member_id=member, instance_id=instance, url=f"http://{member}:8083")
            await w.start()
            workers.append(w)
        for _ in range(300):
            if all(w.stable for w in workers) and sum(len(w.owned) for w in workers) == 6:
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the group did not converge")

    async def stop() -> None:
        for w in workers:
            await w.stop()
        await workers[0].client.close()

    with served("pages-live-server", kafka_broker.client_config(), topic, 1, [0], config, authorizer=authorizer) as s:
        s.run(start(s.url))
        try:
            yield Live(s.url, workers, s.loop, topic, s.server.pages.timelines)
        finally:
            s.run(stop())


# --- the status endpoint ------------------------------------------------------------------------------


def test_connector_status_over_http(live: Live) -> None:
    status = _get(live, f"/v1/groups/{G}/connectors/orders-sink/status").json()
    assert status["name"] == "orders-sink" and status["type"] == "unknown" and status["ErrorCode"] == 0
    owner = {str(i): w for w in live.workers for i in w.owned}
    for place, item in [
        (status["connector"], "orders-sink"),
        *((t, f"orders-sink-{t['id']}") for t in status["tasks"]),
    ]:
        assert place["state"] == "ASSIGNED" and place["worker_id"] == owner[item].member_id, status
        assert place["instance_id"] == owner[item].instance_id and place["deferred_until"] is None
    assert [t["id"] for t in status["tasks"]] == [0, 1, 2]
    evil = _get(live, f"/v1/groups/{G}/connectors/{requests.utils.quote(EVIL, safe='')}/status").json()
    assert evil["name"] == EVIL and len(evil["tasks"]) == 1
    assert _get(live, f"/v1/groups/{G}/connectors/nope/status").json()["ErrorCode"] == ErrorCode.UNKNOWN_CONNECTOR
    assert _get(live, "/v1/groups/nope/connectors/A/status").json()["ErrorCode"] == ErrorCode.GROUP_ID_NOT_FOUND
    refused = _get(live, f"/v1/groups/{G}/connectors/orders-sink/status", token=ALICE)
    assert refused.status_code == 403 and refused.json()["ErrorCode"] == ErrorCode.GROUP_AUTHORIZATION_FAILED


# --- the pages -------------------------------------------------------------------------------------------


def test_group_page_shows_members_their_work_and_the_timeline(live: Live) -> None:
    response = _get(live, f"/ui/groups/{G}")
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/html")
    page = response.text
    assert '<meta http-equiv="refresh" content="5">' in page
    for w in live.workers:
        assert f'data-member="{w.member_id}"' in page
        for item in w.owned:
            if EVIL not in str(item):
                assert str(item) in page
    assert "pod-2" in page and "<svg" in page and "Timeline" in page
    # What users named is escaped everywhere: the connector's name never becomes a tag.
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_refresh_reads_only_what_was_written_since(live: Live, kafka_broker) -> None:  # noqa: ANN001
    """The page keeps the group's replayed history and the offset it reached: a reload reads the
    records written to the partition since the page before, each once, and nothing it read before."""
    first = _read_to(_get(live, f"/ui/groups/{G}"))
    read_before = live.timelines.records_read(G)
    assert first > 0 and read_before > 0  # there was a history to keep
    # Records written meanwhile: another group's, to the same partition (the topic has one).
    other = f"{G}-refreshed"
    body = SetConnectorsRequest(connectors=[ConnectorTaskCount(name="refresh-sink", tasks=2)])
    put = live.workers[0].client.call(other, "PUT", f"/v1/groups/{other}/connectors", ErrorResponse, body)
    assert asyncio.run_coroutine_threadsafe(put, live.loop).result(timeout=60).error_code == 0
    again = _get(live, f"/ui/groups/{G}")
    assert again.status_code == 200 and "<svg" in again.text
    written = _records_between(kafka_broker.client_config(), live.topic, first, _read_to(again))
    assert written > 0, "the PUT wrote nothing"
    assert live.timelines.records_read(G) - read_before == written


def _read_to(page: requests.Response) -> int:
    """The offset the page's timeline has read to (its note: `TOPIC[0] up to offset N`)."""
    found = re.search(r"\[0\] up to offset (\d+)", page.text)
    assert found, page.text
    return int(found[1])


def _records_between(kafka_config: dict, topic: str, start: int, end: int) -> int:
    """The records (not transaction markers) of offsets [start, end) of the topic's partition, as
    every reader of it reads them (`read_range`)."""
    consumer = Consumer(reader_config(kafka_config, f"test-pages-{uuid.uuid4().hex[:8]}"))
    try:
        return sum(1 for _ in read_range(consumer, topic, 0, start, end, 60))
    finally:
        consumer.close()


def test_basic_credentials_carry_the_token(live: Live) -> None:
    basic = base64.b64encode(f"anyone:{OPS}".encode()).decode()
    response = requests.get(f"{live.url}/ui/groups/{G}", headers={"Authorization": f"Basic {basic}"}, timeout=30)
    assert response.status_code == 200 and "worker-1" in response.text


def test_unknown_group_is_a_404_page(live: Live) -> None:
    response = _get(live, "/ui/groups/page-nobody")
    assert response.status_code == 404 and "text/html" in response.headers["Content-Type"]
    assert "no such group" in response.text


def test_the_pages_respect_the_acls(live: Live) -> None:
    refused = _get(live, f"/ui/groups/{G}", token=ALICE)
    assert refused.status_code == 403 and "text/html" in refused.headers["Content-Type"]
    assert "worker-1" not in refused.text
    listed = _get(live, "/ui/groups", token=ALICE)
    assert listed.status_code == 200 and G not in listed.text
    assert G in _get(live, "/ui/groups").text and f'href="/ui/groups/{G}"' in _get(live, "/ui/groups").text
    unknown = _get(live, f"/ui/groups/{G}", token="not-a-token")
    assert unknown.status_code == 401 and unknown.headers["WWW-Authenticate"].startswith("Basic")
    assert G in _get(live, "/ui/groups", token=None).text  # anonymous may describe page-*
    assert _get(live, f"/ui/groups/{OTHER}", token=None).status_code == 403


def test_a_group_id_with_markup_is_escaped(live: Live) -> None:
    response = _get(live, "/ui/groups/" + requests.utils.quote("page-<b>x</b>", safe=""))
    assert response.status_code == 404 and "<b>x</b>" not in response.text and "&lt;b&gt;x&lt;/b&gt;" in response.text


# --- in a browser ------------------------------------------------------------------------------------------


def test_group_page_in_headless_chromium(live: Live) -> None:
    chromium = installed.chromium()
    url = f"{live.url}/ui/groups/{G}"
    flags = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--user-data-dir={SCREENSHOT.parent / 'chromium-profile'}",
    ]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    for w in live.workers:
        assert w.member_id in dom
        assert any(str(item) in dom for item in w.owned if EVIL not in str(item))
    assert "<svg" in dom and "orders-sink-0" in dom and EVIL not in dom
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    subprocess.run(
        [*flags, f"--screenshot={SCREENSHOT}", "--window-size=1280,1600", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert SCREENSHOT.stat().st_size > 10_000
    print(f"screenshot: {SCREENSHOT}")


# --- a classic group (issue 27, item 3) --------------------------------------------------------------------


def test_the_page_of_a_classic_group_shows_each_workers_url_config_offset_and_work() -> None:
    """What a classic member runs is Kafka Connect's rule over its bytes, its URL and config offset
    its JoinGroup metadata's; a member whose bytes are not Connect's runs nothing known, with why."""
    from coordinator.core.group_coordinator import GroupCoordinator
    from coordinator.service.pages import group_page
    from replay import plot
    from replay.history import History
    from tests.support.classic import T0, classic, classic_log, member, raw, replayed_state, url
    from tests.support.classic import G as CLASSIC

    log = classic_log()[:6]
    log.append(classic(4, "Stable", "sessioned", *log[-1].value.members, member("X9", b"\x00\x02junk", b"")))
    described = GroupCoordinator(replayed_state(log)).describe_group(CLASSIC)
    history = History(CLASSIC)
    history.run(raw(log))
    html = group_page(
        described, plot.svg(history, CLASSIC), "read to the end", coordinator="http://c", partition=0, now_ms=T0
    )
    tables = {m: html[html.index(f'data-member="{m}"') :] for m in ("W1", "W2", "W3", "X9")}
    for m, runs in (("W1", "A, A-0"), ("W2", "A-1"), ("W3", "A-2")):
        table = tables[m][: tables[m].index("</table>")]
        assert f'<td class="k">url</td><td>{url(m)}</td>' in table
        assert '<td class="k">config offset</td><td>12</td>' in table
        assert f'<td class="k">assigned</td><td>{runs}</td>' in table and '<td class="k">note</td>' not in table
    x9 = tables["X9"][: tables["X9"].index("</table>")]
    assert '<td class="k">assigned</td><td><span class="none">nothing</span></td>' in x9
    assert "its JoinGroup metadata cannot be read" in x9
    # The timeline draws a lane per worker and a bar per task it ran.
    assert all(f">{m}<" in html for m in ("W1", "W2", "W3")) and "A-2" in html


def test_the_live_page_of_a_classic_group(live: Live) -> None:
    """A Connect worker on the classic protocol, through the HTTP API with Connect's bytes: the
    page shows its URL, config offset and what the leader's assignment gave it, and its timeline."""
    from tests.support.classic import assignment, cat, metadata, url

    group = "page-classic"
    sub = metadata("C1", "sessioned", offset=33)
    headers = {"Authorization": f"Bearer {OPS}"}
    joined = requests.post(
        f"{live.url}/v1/classic-group/join",
        headers=headers,
        timeout=30,
        json={
            "GroupId": group,
            "GroupInstanceId": "pod-c1",
            "ProtocolType": "connect",
            "Protocols": [{"Name": "sessioned", "Metadata": base64.b64encode(sub).decode()}],
            "SessionTimeoutMs": 30_000,
            "RebalanceTimeoutMs": 30_000,
        },
    ).json()
    assert joined["ErrorCode"] == 0 and joined["Leader"] == joined["MemberId"], joined
    given = assignment("sessioned", cat("sink", ("sink", 0), ("sink", 1)))
    synced = requests.post(
        f"{live.url}/v1/classic-group/sync",
        headers=headers,
        timeout=30,
        json={
            "GroupId": group,
            "MemberId": joined["MemberId"],
            "GenerationId": joined["GenerationId"],
            "GroupInstanceId": "pod-c1",
            "Assignments": [{"MemberId": joined["MemberId"], "Assignment": base64.b64encode(given).decode()}],
        },
    ).json()
    assert synced["ErrorCode"] == 0, synced
    try:
        deadline = time.monotonic() + 30
        while True:
            page = _get(live, f"/ui/groups/{group}").text
            if "<svg" in page or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        table = page[page.index(f'data-member="{joined["MemberId"]}"') :]
        table = table[: table.index("</table>")]
        assert f'<td class="k">url</td><td>{url("C1")}</td>' in table
        assert '<td class="k">config offset</td><td>33</td>' in table
        assert '<td class="k">assigned</td><td>sink, sink-0, sink-1</td>' in table
        assert "pod-c1" in table and "<svg" in page and "sink-1" in page[page.index("<svg") :]
    finally:
        requests.post(
            f"{live.url}/v1/classic-group/leave",
            headers=headers,
            timeout=30,
            json={"GroupId": group, "Members": [{"MemberId": joined["MemberId"], "GroupInstanceId": "pod-c1"}]},
        )


# --- one vocabulary, and deferred work without a time (issue 29, items 6 and 10) ---------------------------


def test_the_page_says_assigned_and_when_deferred_work_goes_out() -> None:
    """The page's word for a member's work is the status endpoint's (ASSIGNED): the coordinator knows
    what it assigned, not what runs. Deferred work waits for the scheduled rebalance, or, with no time
    set (the status endpoint's null), for the next target assignment: said so, not "at -"."""
    import msgspec

    from coordinator.service.pages import group_page
    from tests.support.admin import G as GROUP
    from tests.support.admin import static_member_crashed

    d = static_member_crashed()
    described = d.coordinator.describe_group(GROUP)
    at = described.scheduled_rebalance_at_ms
    html = group_page(described, None, "", coordinator="http://c", partition=0, now_ms=at - 2_000)
    assert '<td class="k">assigned</td><td>A, A-0</td>' in html and ">runs<" not in html
    assert "A-1: unassigned until the scheduled rebalance at 1970-01-01T00:05:10.000Z (in 2 s)." in html
    untimed = group_page(
        msgspec.structs.replace(described, scheduled_rebalance_at_ms=None),
        None,
        "",
        coordinator="http://c",
        partition=0,
        now_ms=at,
    )
    assert "A-1: unassigned until the next target assignment (no rebalance time is set)." in untimed
    assert "at -" not in untimed
