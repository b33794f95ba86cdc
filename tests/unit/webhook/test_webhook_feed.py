"""The webhook's own watches (``kuota_webhook.feed``) with a fake apiserver: the view
is fed from every Namespace, Job and the Configuration ConfigMap, complete only
once each input was read once, keeps no Job spec, leaves out unlabelled system
Jobs, and survives a failed LIST."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from kuota.kube.cluster_view import ClusterView
from kuota_webhook.feed import Feed

QUEUE = "kueue.x-k8s.io/queue-name"
CONFIG = (
    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    "manageJobsWithoutQueueName: true\n"
    "managedJobsNamespaceSelector:\n  matchLabels:\n    team: 'yes'\n"
)


class FakeResponse:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.content = self._quiet()

    async def _quiet(self) -> Any:
        await asyncio.sleep(3600)  # a watch that stays open
        yield b""

    async def read(self) -> bytes:
        return json.dumps(self._body).encode()

    def release(self) -> None:
        pass


class FakeApi:
    """LIST answers by path; the first ``fail`` LISTs of a path answer 500."""

    def __init__(self, items: dict[str, list[dict[str, Any]]], fail: int = 0) -> None:
        self.items = items
        self.fail = {path: fail for path in items}
        self.lists: list[str] = []

    async def call_api(self, path: str, method: str, **kw: Any) -> FakeResponse:
        if dict(kw.get("query_params") or []).get("watch") == "true":
            return FakeResponse({})
        self.lists.append(path)
        if self.fail.get(path, 0) > 0:
            self.fail[path] -= 1
            raise ApiException(status=500, reason="etcd is away")
        return FakeResponse({"items": self.items[path], "metadata": {"resourceVersion": "9"}})


def _ns(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": labels}}


def _job(name: str, namespace: str, uid: str, queue: str | None = None) -> dict[str, Any]:
    labels = {QUEUE: queue} if queue else {}
    md = {"name": name, "namespace": namespace, "uid": uid, "labels": labels}
    return {
        "metadata": {**md, "resourceVersion": "2", "managedFields": [{"manager": "kubectl"}]},
        "spec": {"template": {"spec": {"containers": [{"env": [{"value": "x" * 1000}]}]}}},
    }


ITEMS = {
    "/api/v1/namespaces": [_ns("team-a", team="yes"), _ns("team-b"), _ns("kube-system")],
    "/apis/batch/v1/jobs": [
        _job("plain", "team-a", "u-plain"),
        _job("other", "team-b", "u-other"),
        _job("queued", "team-b", "u-queued", queue="lq"),
        _job("sys", "kube-system", "u-sys"),
    ],
    "/api/v1/namespaces/kuota-system/configmaps": [
        {
            "metadata": {"name": "kuota-config", "namespace": "kuota-system", "uid": "c"},
            "data": {"controller_manager_config.yaml": CONFIG},
        },
        {"metadata": {"name": "unrelated", "namespace": "kuota-system"}, "data": {"a": "b"}},
    ],
}


async def _until(cond: Any, timeout: float = 5) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)


async def _run(feed: Feed) -> list[asyncio.Task[None]]:
    tasks = feed.tasks()
    tasks.append(asyncio.create_task(feed.complete(period=0.001)))
    return tasks


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_view_is_fed_from_the_webhooks_own_watches() -> None:
    view = ClusterView()
    feed = Feed(FakeApi(ITEMS), view, config_map=("kuota-system", "kuota-config"))  # type: ignore[arg-type]
    tasks = await _run(feed)
    try:
        await _until(view.complete)
        assert view.namespace_managed("team-a") and not view.namespace_managed("team-b")
        assert view.known("u-plain"), "unlabelled, in a namespace the ConfigMap manages"
        assert view.known("u-queued") and not view.known("u-other")
        assert not view.known("u-sys")
        jobs = feed._watchers["Job"].known
        assert ("kube-system", "sys") not in jobs, "an unlabelled system Job is not kept"
        kept = jobs[("team-a", "plain")]
        assert "spec" not in kept and "managedFields" not in kept["metadata"], "metadata only"
        assert kept["metadata"]["uid"] == "u-plain" and kept["metadata"]["resourceVersion"] == "2"
        assert feed.sizes() == {"Namespace": 3, "Job": 3, "ConfigMap": 2}
    finally:
        await _stop(tasks)


async def test_the_view_is_complete_only_once_every_input_was_read(tmp_path: Path) -> None:
    view = ClusterView()
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    feed = Feed(FakeApi(ITEMS), view, config_file=str(config))  # type: ignore[arg-type]
    tasks = [asyncio.create_task(feed.watch(i)) for i in feed.inputs]  # not the file yet
    tasks.append(asyncio.create_task(feed.complete(period=0.001)))
    try:
        await _until(lambda: feed.listed("Namespace") and feed.listed("Job"))
        await asyncio.sleep(0.02)
        assert not view.complete(), "the Configuration file is not read yet"
        tasks.append(asyncio.create_task(feed.config_file(str(config), poll_seconds=0.01)))
        await _until(view.complete)
        assert view.namespace_managed("team-a")
    finally:
        await _stop(tasks)


async def test_a_failed_list_is_retried_and_the_view_waits_for_it() -> None:
    view = ClusterView()
    api = FakeApi(ITEMS, fail=1)
    feed = Feed(api, view)  # type: ignore[arg-type]
    feed_tasks = await _run(feed)
    try:
        await asyncio.sleep(0.05)
        assert not view.complete(), "no LIST answered yet"
        await _until(view.complete)  # after the 1 s backoff
        assert api.lists.count("/api/v1/namespaces") == 2
        assert not view.namespace_managed("team-a"), "no Configuration: Kueue's defaults"
    finally:
        await _stop(feed_tasks)
