"""Shared pieces of the operator tests (training-operator, KubeRay) on the local stack.

The operators are stack components (scripts/stack.d/training.sh, kuberay.sh);
a test finds one through the health URL its ``*_env`` writes to stack.env and
FAILS when it is missing or not ready: the operator was not started
(``scripts/stack up training kuberay``), never a reason to skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

T = TypeVar("T")

TEST_LABEL = "kuota.dev/test"
NODE_LABEL = "kuota.dev/operator-test-node"
WAIT = 120.0  # seconds, for every wait
# kwok (scripts/kube/stages/pod.yaml) completes a pod with restartPolicy Never or
# OnFailure after 5s; the operators' pods must stay Running while the test looks.
KEEP_RUNNING = {"pod-complete.stage.kwok.x-k8s.io/delay": "8760h"}


def require_operator(url_var: str, component: str) -> str:
    """The operator's /readyz URL from the stack's env; fails unless it answers ok."""
    url = os.environ.get(url_var)
    if not url:
        pytest.fail(
            f"{url_var} is not set and stack.env does not provide it: the {component} "
            f"component is not on this stack; run `scripts/stack up {component}`",
            pytrace=False,
        )
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read().decode()
    except (urllib.error.URLError, OSError) as e:
        pytest.fail(
            f"{component} at {url} does not answer ({e}): run `scripts/stack up {component}` "
            f"and see `scripts/stack logs {component}`",
            pytrace=False,
        )
    if body != "ok":
        pytest.fail(f"{component} at {url} is not ready: {body!r}", pytrace=False)
    return url


async def eventually(
    probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = WAIT
) -> T:
    """Poll ``probe`` until it returns something true (not None, False or empty)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        last = await probe()
        if last:
            return last
        if loop.time() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f}s")
        await asyncio.sleep(0.5)


def on_node(node: str) -> dict[str, Any]:
    """The pod spec fields that put a pod on ``kwok_node``'s node, and only there."""
    return {
        "nodeSelector": {NODE_LABEL: node},
        "tolerations": [{"key": NODE_LABEL, "operator": "Equal", "value": node}],
    }


@contextlib.asynccontextmanager
async def kwok_node(api: client.ApiClient, prefix: str) -> AsyncIterator[str]:
    """A kwok node of this test only: labelled and tainted NODE_LABEL=<name>, so
    that only pods placed by ``on_node`` land on it; yielded Ready, with no taint
    but its own."""
    core = client.CoreV1Api(api)
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await core.create_node(
        {
            "spec": {"taints": [{"key": NODE_LABEL, "value": name, "effect": "NoSchedule"}]},
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {
                    TEST_LABEL: prefix,
                    NODE_LABEL: name,
                    "type": "kwok-operator-test",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
            "status": {
                "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            },
        }
    )
    try:

        async def ready() -> bool:
            node = await core.read_node(name)
            conds = {c.type: c.status for c in node.status.conditions or []}
            others = [t for t in node.spec.taints or [] if t.key != NODE_LABEL]
            return conds.get("Ready") == "True" and not others

        await eventually(ready, f"kwok node {name} Ready and untainted")
        yield name
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_node(name)


@contextlib.asynccontextmanager
async def api_client(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    from kubernetes_asyncio import config

    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        yield api


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    """type -> status of a custom object's status.conditions."""
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


async def pods(api: client.ApiClient, namespace: str, selector: str) -> list[Any]:
    listed = await client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector)
    return list(listed.items)


async def merge_patch(
    api: client.ApiClient,
    group_version: tuple[str, str],
    namespace: str,
    plural: str,
    name: str,
    body: dict[str, Any],
) -> None:
    """A JSON merge patch of a custom object (the client's default is a JSON patch)."""
    group, version = group_version
    await client.CustomObjectsApi(api).patch_namespaced_custom_object(
        group,
        version,
        namespace,
        plural,
        name,
        body,
        _content_type="application/merge-patch+json",
    )
