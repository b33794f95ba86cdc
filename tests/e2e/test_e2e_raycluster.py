"""End to end, RayClusters (#18): the four services and the webhook on the real stack
with the real KubeRay operator v1.5.0 (the stack's ``kuberay`` component), one
pipeline for the module.

A RayCluster of a head and a worker group of 2, 1 GPU each, created NOT suspended
with the queue label in a ClusterQueue of 3 GPUs: the webhook stores it suspended
(``spec.suspend``), the fold admits it as one gang (``head`` and the group), the
actuator unsuspends it with the flavor's node selector and toleration in every
template, KubeRay makes 3 pods that kwok runs together on the GPU node, and ingest
journals PodsReady once KubeRay says ``state: ready``. Deactivated
(``kuota.dev/active: "false"``), it is evicted (``InactiveWorkload``), suspended
with its templates restored, KubeRay deletes its pods, and its quota is released
only then.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from e2e_harness import QUEUE_LABEL, Run, kubectl_apply, run_fixture, wait_journaled
from e2e_objects import labelled
from e2e_operators import (
    GPU,
    NODE_LABEL,
    PRIORITY_LABEL,
    decisions,
    gpu_node,
    gpu_pod,
    history,
    operator_up,
    queue_objects,
)
from kubernetes_asyncio import client

from kuota.events.schema import PodsReady, WorkloadStopped

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()
GROUP, VERSION, PLURAL = "ray.io", "v1", "rayclusters"
CLUSTER_LABEL = "ray.io/cluster"


def ray_cluster(run: Run, name: str, workers: int, *, priority: str) -> dict[str, Any]:
    def template(container: str) -> dict[str, Any]:
        return gpu_pod(container, "rayproject/ray:2.46.0")

    return labelled(
        run,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "RayCluster",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority}},
            "spec": {
                "headGroupSpec": {"rayStartParams": {}, "template": template("ray-head")},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": workers,
                        "minReplicas": workers,
                        "maxReplicas": workers,
                        "rayStartParams": {},
                        "template": template("ray-worker"),
                    }
                ],
            },
        },
    )


async def get(run: Run, ns: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(run.api).get_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, name
    )
    return got


async def live_pods(run: Run, ns: str, name: str) -> list[client.V1Pod]:
    listed = await client.CoreV1Api(run.api).list_namespaced_pod(
        ns, label_selector=f"{CLUSTER_LABEL}={name}"
    )
    return [p for p in listed.items if p.status.phase not in ("Succeeded", "Failed")]


def templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]
    return [spec["headGroupSpec"]["template"]["spec"]] + [
        g["template"]["spec"] for g in spec["workerGroupSpecs"]
    ]


async def test_a_ray_cluster_is_gang_admitted_runs_on_kwok_and_gives_its_quota_back(
    e2e_run: Run,
) -> None:
    operator_up("KUOTA_KUBERAY_HEALTH_URL", "kuberay")
    run = e2e_run
    ns = f"{run.id}-ray"
    node = await gpu_node(run, "gpu-r")
    applied = await kubectl_apply(run, queue_objects(run, ns, node, gpus=3))
    await wait_journaled(run, applied)
    key = f"{ns}/raycluster/rc"
    objects = client.CustomObjectsApi(run.api)
    created = await objects.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, ray_cluster(run, "rc", 2, priority=f"{ns}-low")
    )
    assert created["spec"]["suspend"] is True, "the webhook suspends it"

    (admitted,) = await run.until(
        lambda: decisions(run, key, "Admitted"), lambda: f"rc admitted ({history(run, key)})"
    )
    assert (admitted.kind, admitted.api_version) == ("RayCluster", "ray.io/v1")
    assert admitted.flavors == {"head": {GPU: ns}, "gpu": {GPU: ns}}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        got = await live_pods(run, ns, "rc")
        if len(got) == 3 and all(p.status.phase == "Running" for p in got):
            break
        await asyncio.sleep(0.3)
    else:
        pytest.fail(f"3 pods Running: {[p.status.phase for p in await live_pods(run, ns, 'rc')]}")
    assert {p.spec.node_name for p in got} == {node}, "together on the flavor's node"
    stored = await get(run, ns, "rc")
    assert stored["spec"].get("suspend") is False
    for spec in templates(stored):
        assert spec["nodeSelector"] == {NODE_LABEL: node}
        assert [t["key"] for t in spec["tolerations"]] == [NODE_LABEL]

    def ready() -> list[PodsReady]:
        return [
            e for _, e in run.journal if isinstance(e, PodsReady) and e.workload == key and e.ready
        ]

    await run.until(ready, "PodsReady of the RayCluster, from its state")

    # deactivated: suspended, templates restored, quota back once KubeRay's pods are gone
    await objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "rc",
        {"metadata": {"annotations": {"kuota.dev/active": "false"}}},
        _content_type="application/merge-patch+json",
    )
    (stop,) = await run.until(lambda: decisions(run, key, "Evicted"), "rc evicted")
    assert stop.reason == "InactiveWorkload"

    def stopped() -> list[WorkloadStopped]:
        return [e for _, e in run.journal if isinstance(e, WorkloadStopped) and e.workload == key]

    await run.until(stopped, "WorkloadStopped for the RayCluster")
    assert not await live_pods(run, ns, "rc"), "reported only once KubeRay deleted them"
    (released,) = await run.until(lambda: decisions(run, key, "QuotaReleased"), "released")
    assert released.stop_id == stop.id, history(run, key)
    assert released.usage == {ns: {GPU: "3"}}
    held = await get(run, ns, "rc")
    assert held["spec"]["suspend"] is True
    for spec in templates(held):
        assert "nodeSelector" not in spec and "tolerations" not in spec
