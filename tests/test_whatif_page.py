"""The group page's "what if" view (issue 32 item 6), against a running coordinator on the session
broker with a real group of SDK workers that lived through a crash: the view's table is the one
`coordinator replay simulate` computes for the same group and delay; it answers under the group
page's ACL; a simulation over its time or memory bound, or one too many at once, gets a page that
says so while the server keeps answering the workers' heartbeats; bad parameters are a 400 page
with one line."""

from __future__ import annotations

import asyncio
import html
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import requests

from records import ConnectorTaskCount

from bench.bench_simulate import write_week
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.protocol import ErrorResponse, SetConnectorsRequest
from coordinator.sdk.client import CoordinatorClient
from coordinator.sdk.worker import Worker
from coordinator.service.auth import ANONYMOUS, Acl, Authorizer, Operation
from coordinator.service.server import CoordinatorServer
from coordinator.service.whatif import Bounds
from tests.live_server import served
from tests.support import installed
from tests.topics import create_topic

pytestmark = pytest.mark.integration

G = "whatif-group"
BIG = "whatif-big"  # a generated week of 20 workers, written before the server starts: enough to exceed a bound
OPS, ALICE = "whatif-ops-token", "whatif-alice-token"
SESSION_MS = 1_500
SCREENSHOT = Path(__file__).resolve().parents[1] / ".run" / "screenshots" / "whatif-page.png"


@dataclass
class Live:
    url: str
    bootstrap: str
    topic: str
    server: CoordinatorServer
    workers: list[Worker]
    loop: asyncio.AbstractEventLoop


def _get(live: Live, path: str, token: str | None = OPS, **kw) -> requests.Response:  # noqa: ANN003
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(live.url + path, headers=headers, timeout=120, allow_redirects=False, **kw)


@pytest.fixture(scope="module")
def live(kafka_broker) -> Iterator[Live]:  # noqa: ANN001
    topic = f"test-whatif-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap_servers, topic)
    write_week(kafka_broker.bootstrap_servers, topic, 20, 150, group=BIG)
    authorizer = Authorizer(
        {OPS: "User:ops", ALICE: "User:alice"},
        [
            Acl("User:ops", frozenset({Operation.ALL}), "*"),
            Acl("User:alice", frozenset({Operation.READ}), "alice-*"),
            Acl(ANONYMOUS, frozenset({Operation.DESCRIBE}), BIG),  # the browser's, for the screenshot
        ],
        allow_anonymous=True,
    )
    config = CoordinatorConfig(
        heartbeat_interval_ms=200,
        session_timeout_ms=SESSION_MS,
        initial_assignment_delay_ms=0,
        scheduled_rebalance_max_delay_ms=2_000,
    )
    workers: list[Worker] = []

    async def converged(count: int, tasks: int) -> None:
        for _ in range(400):
            if all(w.stable for w in workers) and sum(len(w.owned) for w in workers) == tasks + 1:
                if len(workers) == count:
                    return
            await asyncio.sleep(0.05)
        raise AssertionError("the group did not converge")

    async def start(url: str) -> None:
        client = CoordinatorClient(url, token=OPS, retry_for_s=10)
        body = SetConnectorsRequest(connectors=[ConnectorTaskCount(name="orders-sink", tasks=6)])
        assert (await client.call(G, "PUT", f"/v1/groups/{G}/connectors", ErrorResponse, body)).error_code == 0
        for n in range(3):
            w = Worker(client, G, member_id=f"worker-{n}", instance_id=f"pod-{n}")
            await w.start()
            workers.append(w)
            await converged(n + 1, 6)
        # A crash: the worker stops heartbeating; its session expires, its work waits out the delay
        # and goes to the others.
        crashed = workers.pop()
        await crashed.stop(leave=False)
        await asyncio.sleep((SESSION_MS + 2_000) / 1000 + 1)
        await converged(2, 6)

    async def stop() -> None:
        for w in workers:
            await w.stop()
        await workers[0].client.close()

    with served("whatif-live-server", kafka_broker.client_config(), topic, 1, [0], config, authorizer=authorizer) as s:
        s.run(start(s.url), 90)
        try:
            yield Live(s.url, kafka_broker.bootstrap_servers, topic, s.server, workers, s.loop)
        finally:
            s.run(stop())


def _table(page: str) -> dict[str, list[str]]:
    """The view's side-by-side table: row name -> its cells, one per history."""
    table = re.search(r'<table class="whatif">(.*?)</table>', page, re.S)
    assert table is not None, page[-2000:]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S):
        cells = [html.unescape(c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", row, re.S)]
        rows[cells[0]] = cells[1:]
    return rows


def _cli(live: Live, *arguments: str) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "coordinator", "replay", "simulate", f"--group={G}", "--topic", live.topic]
        + ["--bootstrap-server", live.bootstrap, "--no-progress", "--format", "json", *arguments],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in map(orjson.loads, out.splitlines()) if line["type"] == "outcome"]


def _members_after_a_session(live: Live) -> list[str]:
    """The group's members a session after now: who kept heartbeating through whatever ran meanwhile."""
    time.sleep(SESSION_MS / 1000 + 0.5)
    answer = _get(live, f"/ui/groups/{G}")
    assert answer.status_code == 200
    return sorted(re.findall(r'data-member="([^"]+)"', answer.text))


def test_the_group_page_links_the_view_and_the_form_offers_the_groups_delay(live: Live) -> None:
    group_page = _get(live, f"/ui/groups/{G}").text
    assert f'href="/ui/groups/{G}/whatif"' in group_page
    form = _get(live, f"/ui/groups/{G}/whatif")
    assert form.status_code == 200 and 'name="delay" value="2 s"' in form.text and "<table" not in form.text


@pytest.mark.parametrize("delay", ["0", "60s"])
def test_the_views_numbers_are_the_commands(live: Live, delay: str) -> None:
    answer = _get(live, f"/ui/groups/{G}/whatif", params={"delay": delay})
    assert answer.status_code == 200, answer.text[-1000:]
    table = _table(answer.text)
    cli = _cli(live, "--scheduled-delay", delay)
    assert [o["name"] for o in cli][:2] == ["recorded", "re-run"]
    assert table[""] == [o["name"] for o in cli]
    assert table["rebalances"] == [str(o["rebalances"]) for o in cli]
    assert table["items moved"] == [str(o["items_moved"]) for o in cli]
    assert table["tasks moved"] == [str(o["tasks_moved"]) for o in cli]
    assert table["unowned task-seconds"] == [f"{o['unowned_task_ms'] / 1000:.1f}" for o in cli]
    assert int(table["tasks moved"][0]) > 0  # the crashed worker's share moved: there is a history to compare
    # A timeline per history, drawn inline as the group page draws its own.
    assert answer.text.count("<svg") == 3 and "faithfulness:" in answer.text


def test_the_view_answers_under_the_group_pages_acl(live: Live) -> None:
    for token, status in ((ALICE, 403), ("not-a-token", 401), (None, 403)):
        assert _get(live, f"/ui/groups/{G}", token=token).status_code == status
        refused = _get(live, f"/ui/groups/{G}/whatif", token=token, params={"delay": "0"})
        assert refused.status_code == status and "<table" not in refused.text
    assert _get(live, "/ui/groups/whatif-nobody/whatif", params={"delay": "0"}).status_code == 404


@pytest.mark.parametrize(
    "params, said",
    [
        ({"delay": "soon"}, "delay: expected a duration such as 60s"),
        ({"delay": "99999999999"}, "delay: at most 2^31-1 ms"),
        ({"delay": "0", "from": "yesterday"}, "from: "),
        ({"delay": "0", "from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "from is after to"),
        ({"delay": "0", "color": "red"}, "unknown parameter 'color'"),
        ({"from": "2026-01-01T00:00:00Z"}, "from and to need a delay"),
        ({"delay": "0", "to": "2000-01-01T00:00:00Z"}, "no records of group"),
    ],
)
def test_bad_parameters_are_a_400_page_with_one_line(live: Live, params: dict, said: str) -> None:
    answer = _get(live, f"/ui/groups/{G}/whatif", params=params)
    assert answer.status_code in (400, 404), answer.text[-500:]
    assert (answer.status_code == 404) == (said == "no records of group")
    assert said in html.unescape(answer.text) and "Traceback" not in answer.text


def _with_bounds(live: Live, bounds: Bounds) -> Bounds:
    old, live.server.pages.whatif.bounds = live.server.pages.whatif.bounds, bounds
    return old


def test_a_simulation_over_its_time_is_stopped_and_the_heartbeats_go_on(live: Live) -> None:
    old = _with_bounds(live, Bounds(timeout_s=0.2))
    try:
        answer = _get(live, f"/ui/groups/{G}/whatif", params={"delay": "0"})
    finally:
        _with_bounds(live, old)
    assert answer.status_code == 503 and "did not finish within 0.2 s" in answer.text
    assert live.server.pages.whatif.running == 0
    assert _members_after_a_session(live) == sorted(w.member_id for w in live.workers)


def test_a_simulation_over_its_memory_says_so_and_the_heartbeats_go_on(live: Live) -> None:
    old = _with_bounds(live, Bounds(memory_mb=1))
    try:
        answer = _get(live, f"/ui/groups/{BIG}/whatif", params={"delay": "0"})
    finally:
        _with_bounds(live, old)
    assert answer.status_code == 503 and "needed more than its 1 MB" in answer.text, answer.text[-800:]
    assert _members_after_a_session(live) == sorted(w.member_id for w in live.workers)
    # With room, the same simulation runs.
    assert _get(live, f"/ui/groups/{BIG}/whatif", params={"delay": "0"}).status_code == 200


def test_one_simulation_too_many_is_refused_at_once(live: Live) -> None:
    old = _with_bounds(live, Bounds(concurrency=1))
    first: list[requests.Response] = []
    try:
        running = threading.Thread(
            target=lambda: first.append(_get(live, f"/ui/groups/{G}/whatif", params={"delay": "0"}))
        )
        running.start()
        for _ in range(200):
            if live.server.pages.whatif.running:
                break
            time.sleep(0.01)
        refused = _get(live, f"/ui/groups/{G}/whatif", params={"delay": "60s"})
        running.join(timeout=120)
    finally:
        _with_bounds(live, old)
    assert refused.status_code == 429 and "as many as this server runs at once" in refused.text
    assert first[0].status_code == 200


@pytest.mark.parametrize(
    "flag, value, said",
    [
        ("--whatif-concurrency", "0", "--whatif-concurrency must be at least 1, not 0"),
        ("--whatif-memory-mb", "8", "--whatif-memory-mb must be at least 16, not 8"),
        ("--whatif-timeout-s", "0", "--whatif-timeout-s must be at least 0.1, not 0"),
        ("--whatif-timeout-s", "soon", "expected a number, got 'soon'"),
    ],
)
def test_serves_bounds_out_of_range_are_one_line(flag: str, value: str, said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", "serve", "--bootstrap-server", "127.0.0.1:1", "--log-format", "text"]
        + [flag, value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_view_in_headless_chromium(live: Live) -> None:
    """The generated week's view as a browser draws it (anonymous may describe that group):
    `.run/screenshots/whatif-page.png`."""
    url = f"{live.url}/ui/groups/{BIG}/whatif?delay=0"
    flags = [
        installed.chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ]
    flags.append(f"--user-data-dir={SCREENSHOT.parent / 'chromium-profile-whatif'}")
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=180, check=True).stdout
    assert dom.count("<svg") == 3 and "faithfulness:" in dom and "delay 0 ms" in dom
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    subprocess.run(
        [*flags, f"--screenshot={SCREENSHOT}", "--window-size=1440,2400", url],
        capture_output=True,
        timeout=180,
        check=True,
    )
    assert SCREENSHOT.stat().st_size > 10_000
