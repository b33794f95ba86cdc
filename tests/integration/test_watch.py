"""The list+watch adapter against the real kube-apiserver: every change is
reported once, and a relist after missed changes reports exactly the difference."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client, config

from kuota.kube.watch import Change, Resource, Watcher

pytestmark = pytest.mark.integration


@pytest.fixture
async def api() -> AsyncIterator[client.ApiClient]:
    path = os.environ.get("KUBECONFIG")
    assert path, "KUBECONFIG unset: run scripts/stack up"
    cfg = client.Configuration()
    await config.load_kube_config(config_file=path, client_configuration=cfg)
    async with client.ApiClient(cfg) as c:
        yield c


async def _next(it: AsyncIterator[Change], n: int, timeout: float = 20) -> list[Change]:
    out: list[Change] = []
    async with asyncio.timeout(timeout):
        while len(out) < n:
            out.append(await anext(it))
    return out


async def test_list_watch_and_relist_diff(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    ns = f"watch-{uuid.uuid4().hex[:6]}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    label = f"kuota-test={ns}"
    try:
        for name in ("a", "b"):
            await core.create_namespaced_config_map(
                ns,
                client.V1ConfigMap(
                    metadata=client.V1ObjectMeta(name=name, labels={"kuota-test": ns}),
                    data={"v": "1"},
                ),
            )
        w = Watcher(api, Resource("ConfigMap", "/api/v1/configmaps", label), timeout_seconds=30)
        it = w.changes().__aiter__()
        first = await _next(it, 2)
        assert sorted((c.type, c.key) for c in first) == [
            ("UPSERT", (ns, "a")),
            ("UPSERT", (ns, "b")),
        ]
        assert all(c.object["kind"] == "ConfigMap" for c in first)

        # Live changes arrive through the watch, each once.
        await core.patch_namespaced_config_map("a", ns, {"data": {"v": "2"}})
        await core.delete_namespaced_config_map("b", ns)
        live = await _next(it, 2)
        assert [(c.type, c.key) for c in live] == [("UPSERT", (ns, "a")), ("DELETE", (ns, "b"))]
        assert live[0].object["data"] == {"v": "2"}
        await it.aclose()

        # Changes missed while not watching: a relist reports exactly the difference.
        await core.delete_namespaced_config_map("a", ns)
        await core.create_namespaced_config_map(
            ns,
            client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c", labels={"kuota-test": ns})),
        )
        diff = await w._relist()
        assert sorted((c.type, c.key) for c in diff) == [
            ("DELETE", (ns, "a")),
            ("UPSERT", (ns, "c")),
        ]
        assert await w._relist() == [], "an unchanged relist reports nothing again"
    finally:
        await core.delete_namespace(ns)
