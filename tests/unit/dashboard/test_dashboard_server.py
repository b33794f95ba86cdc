"""The dashboard's server without Kafka or Redis: routes, token, SSE, explain page.

The Live state is real (a fold with nothing folded, a read model set by hand
as the Redis reader would set it); nothing is started, so no reader runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from kuota.audit.explain import Explainer, Explanation
from kuota.audit.replay import service_fold
from kuota.audit.status import parse_status
from kuota.bus.settings import KafkaSettings
from kuota.dashboard.live import Live, LiveConfig
from kuota.dashboard.server import COOKIE, make_app, plotly_js
from kuota.events.schema import Decision

TOKEN = "s3cret-token"


def _live() -> Live:
    settings = KafkaSettings.from_env({"KUOTA_KAFKA_BOOTSTRAP": "127.0.0.1:1"})
    live = Live(LiveConfig(kafka=settings, redis_url="redis://127.0.0.1:1", redis_key="k"))
    live.queues = parse_status(
        {
            b"team-a": json.dumps(
                {
                    "flavorsUsage": [{"name": "f", "resources": [{"name": "gpus", "total": "1"}]}],
                    "quota": [{"flavor": "f", "resource": "gpus", "nominalQuota": "2"}],
                }
            )
        }
    )
    return live


async def _explain(key: str) -> Explanation:
    d = Decision(id="d1", cause="c", at=5.0, type="Inadmissible", workload=key, reason="Why")
    return Explainer(key, [d], service_fold()).explain()


@pytest_asyncio.fixture
async def client() -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    async with TestClient(TestServer(make_app(_live(), _explain))) as c:
        yield c


@pytest_asyncio.fixture
async def guarded() -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    async with TestClient(TestServer(make_app(_live(), _explain, token=TOKEN))) as c:
        yield c


async def test_the_page_and_its_scripts_come_from_the_packages(client: TestClient) -> None:  # type: ignore[type-arg]
    page = await client.get("/")
    assert page.status == 200
    html = await page.text()
    assert '<script src="/static/plotly.min.js">' in html and "http" not in html.split("<body>")[0]
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    js = await client.get("/static/plotly.min.js")
    assert js.status == 200
    assert (await js.read()) == plotly_js().read_bytes()
    assert (await client.get("/static/app.js")).status == 200
    assert (await client.get("/static/../server.py")).status == 404
    assert (await client.get("/static/nothing.js")).status == 404


async def test_state_is_json_with_the_bars(client: TestClient) -> None:  # type: ignore[type-arg]
    state = await (await client.get("/api/state")).json()
    (cq,) = state["cluster_queues"]
    assert cq["name"] == "team-a"
    assert (cq["bars"][0]["usage"], cq["bars"][0]["nominal"]) == (1.0, 2.0)
    assert state["pending"] == [] and state["decisions"] == []


async def test_it_is_read_only(client: TestClient) -> None:  # type: ignore[type-arg]
    for path in ("/", "/api/state", "/api/events"):
        assert (await client.post(path)).status == 405


async def test_events_start_with_the_state_then_follow_decisions(client: TestClient) -> None:  # type: ignore[type-arg]
    live: Live = next(iter(client.app.values()))  # the one Live of the app
    response = await client.get("/api/events")
    assert response.headers["Content-Type"] == "text/event-stream"
    first = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 5)
    assert first.startswith(b"event: state\ndata: ")
    assert json.loads(first.split(b"data: ", 1)[1])["cluster_queues"][0]["name"] == "team-a"
    live._send("decision", json.dumps({"type": "Admitted"}))
    second = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 5)
    assert second == b'event: decision\ndata: {"type": "Admitted"}\n\n'
    response.close()


async def test_the_workload_page_is_explains_rendering(client: TestClient) -> None:  # type: ignore[type-arg]
    page = await client.get("/workload/team/job-1")
    assert page.status == 200
    text = await page.text()
    assert "kuota explain team/job-1" in text
    assert "Inadmissible" in text and "Why" in text
    doc = await (await client.get("/api/explain/team/job-1")).json()
    assert doc["workload"] == "team/job-1"
    assert doc["history"][0]["decision"]["reason"] == "Why"


async def test_a_workload_of_another_kind_has_its_page_by_its_key(client: TestClient) -> None:  # type: ignore[type-arg]
    page = await client.get("/workload/team/PyTorchJob/ddp")
    assert page.status == 200
    assert "kuota explain team/pytorchjob/ddp" in await page.text()
    doc = await (await client.get("/api/explain/team/leaderworkerset/lws/1")).json()
    assert doc["workload"] == "team/leaderworkerset/lws/1"
    bad = await client.get("/workload/team/nosuchkind/x")
    assert bad.status == 400 and "namespace>/<kind>/<name>" in await bad.text()


async def test_a_token_is_required_except_for_probes(guarded: TestClient) -> None:  # type: ignore[type-arg]
    assert (await guarded.get("/")).status == 401
    assert (
        await guarded.get("/api/state", headers={"Authorization": "Bearer wrong"})
    ).status == 401
    ok = await guarded.get("/api/state", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status == 200
    assert (await guarded.get("/healthz")).status == 200
    # A first visit with ?token= sets an HttpOnly cookie; later plain URLs work.
    first = await guarded.get(f"/?token={TOKEN}")
    assert first.status == 200
    cookie = first.cookies[COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    assert (await guarded.get("/api/state")).status == 200
