"""The KubeRay operator (v1.5.0, the stack's ``kuberay`` component) on the stack's
apiserver and kwok, kuota's services left out: what a RayCluster and a RayJob do
there, the facts kuota's suspend/resume of Ray workloads rests on.

- a RayCluster (head + one worker group of 2) created with ``spec.suspend:
  true`` is marked suspended and gets no pod; unsuspended, it gets 3 pods that
  kwok runs on this test's node and its state turns ``ready``; suspended again,
  its pods are deleted and it is ``suspended`` again;
- a RayJob created suspended is accepted by the CRD and held: its deployment
  status turns ``Suspended`` and no RayCluster is made for it. (Unsuspended it
  would get a RayCluster, but never run: a kwok pod serves no Ray dashboard to
  submit to.)
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from operator_helpers import (
    KEEP_RUNNING,
    TEST_LABEL,
    api_client,
    conditions,
    eventually,
    kwok_node,
    merge_patch,
    on_node,
    pods,
    require_operator,
)
from stack_helpers import temp_namespace

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GROUP, VERSION = "ray.io", "v1"
CLUSTER_LABEL = "ray.io/cluster"


@pytest.fixture
async def api(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    require_operator("KUOTA_KUBERAY_HEALTH_URL", "kuberay")
    async with api_client(kubeconfig) as a:
        yield a


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"kuota-ray-{uuid.uuid4().hex[:8]}"
    async with temp_namespace(api, name, {TEST_LABEL: "kuberay"}):
        yield name


def ray_cluster_spec(node: str, workers: int = 2) -> dict[str, Any]:
    def template(container: str) -> dict[str, Any]:
        return {
            "metadata": {"annotations": dict(KEEP_RUNNING)},
            "spec": {
                **on_node(node),
                "containers": [
                    {
                        "name": container,
                        "image": "rayproject/ray:2.46.0",
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "256Mi"},
                            "limits": {"cpu": "100m", "memory": "256Mi"},
                        },
                    }
                ],
            },
        }

    return {
        "headGroupSpec": {"rayStartParams": {}, "template": template("ray-head")},
        "workerGroupSpecs": [
            {
                "groupName": "small",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": template("ray-worker"),
            }
        ],
    }


async def test_raycluster_suspend_resume_suspend(api: client.ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    name = "rc"
    selector = f"{CLUSTER_LABEL}={name}"

    async def cluster() -> dict[str, Any]:
        got: dict[str, Any] = await custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "rayclusters", name
        )
        return got

    async def state(want: str, suspended: str) -> dict[str, Any] | None:
        """The cluster once its state is ``want`` and its RayClusterSuspended
        condition ``suspended`` (the two are written in separate updates)."""
        c = await cluster()
        ok = (c.get("status") or {}).get("state") == want
        return c if ok and conditions(c).get("RayClusterSuspended") == suspended else None

    async with kwok_node(api, "kuota-ray") as node:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "RayCluster",
            "metadata": {"name": name},
            "spec": {"suspend": True, **ray_cluster_spec(node)},
        }
        await custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "rayclusters", body)
        held = await eventually(lambda: state("suspended", "True"), "RayCluster suspended")
        assert conditions(held).get("RayClusterSuspending") == "False", conditions(held)
        assert await pods(api, namespace, selector) == [], "a suspended RayCluster made pods"

        await merge_patch(
            api, (GROUP, VERSION), namespace, "rayclusters", name, {"spec": {"suspend": False}}
        )

        async def running_pods() -> list[Any] | None:
            got = await pods(api, namespace, selector)
            running = [p for p in got if p.status.phase == "Running"]
            return got if len(got) == 3 and len(running) == 3 else None

        got = await eventually(running_pods, "head and 2 worker pods Running on kwok")
        assert {p.spec.node_name for p in got} == {node}
        kinds = sorted(p.metadata.labels["ray.io/node-type"] for p in got)
        assert kinds == ["head", "worker", "worker"], kinds
        ready = await eventually(lambda: state("ready", "False"), "RayCluster ready")
        assert conditions(ready).get("HeadPodReady") == "True", conditions(ready)

        await merge_patch(
            api, (GROUP, VERSION), namespace, "rayclusters", name, {"spec": {"suspend": True}}
        )

        async def no_pods() -> bool:
            return await pods(api, namespace, selector) == []

        await eventually(no_pods, "the pods of the suspended RayCluster deleted")
        again = await eventually(lambda: state("suspended", "True"), "suspended again")
        assert conditions(again).get("RayClusterProvisioned") == "False", conditions(again)


async def test_rayjob_suspend_resume_suspend(api: client.ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    name = "rj"

    async def rayjob() -> dict[str, Any]:
        got: dict[str, Any] = await custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "rayjobs", name
        )
        return got

    async def deployment(want: str) -> dict[str, Any] | None:
        j = await rayjob()
        return j if (j.get("status") or {}).get("jobDeploymentStatus") == want else None

    async def clusters() -> list[dict[str, Any]]:
        listed = await custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, "rayclusters"
        )
        items: list[dict[str, Any]] = listed["items"]
        return items

    async with kwok_node(api, "kuota-rayjob") as node:
        submitter = {
            "metadata": {"annotations": dict(KEEP_RUNNING)},
            "spec": {
                "restartPolicy": "Never",
                **on_node(node),
                "containers": [{"name": "ray-job-submitter", "image": "rayproject/ray:2.46.0"}],
            },
        }
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "RayJob",
            "metadata": {"name": name},
            "spec": {
                "suspend": True,
                "entrypoint": "python -c 'print(1)'",
                # KubeRay refuses to suspend a RayJob that keeps its cluster
                "shutdownAfterJobFinishes": True,
                "rayClusterSpec": ray_cluster_spec(node, workers=1),
                "submitterPodTemplate": submitter,
            },
        }
        await custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "rayjobs", body)
        held = await eventually(lambda: deployment("Suspended"), "RayJob Suspended")
        assert held["spec"]["suspend"] is True
        assert await clusters() == [], "a suspended RayJob got a RayCluster"
        assert await pods(api, namespace, "") == [], "a suspended RayJob made pods"

        await merge_patch(
            api, (GROUP, VERSION), namespace, "rayjobs", name, {"spec": {"suspend": False}}
        )
        # Resumed: its RayCluster's head and worker run on kwok, then the submitter
        # Job; kwok serves no dashboard, so the Ray job itself never starts, but the
        # submitter pod (kept Running) holds the RayJob in Running.
        running = await eventually(lambda: deployment("Running"), "RayJob Running")
        cluster = running["status"]["rayClusterName"]

        async def cluster_pods() -> list[Any] | None:
            got = await pods(api, namespace, f"{CLUSTER_LABEL}={cluster}")
            up = [p for p in got if p.status.phase == "Running"]
            return got if len(got) == 2 and len(up) == 2 else None

        got = await eventually(cluster_pods, "the RayJob's head and worker Running on kwok")
        assert {p.spec.node_name for p in got} == {node}
        sub = await eventually(
            lambda: pods(api, namespace, f"batch.kubernetes.io/job-name={name}"),
            "the submitter pod",
        )
        assert sub[0].spec.node_name == node

        await merge_patch(
            api, (GROUP, VERSION), namespace, "rayjobs", name, {"spec": {"suspend": True}}
        )
        # Suspended only once its RayCluster and submitter Job are deleted
        again = await eventually(lambda: deployment("Suspended"), "RayJob Suspended again")
        assert not again["status"].get("rayClusterName"), again["status"]
        assert not again["status"].get("jobStatus"), again["status"]  # reset to New ("")
        assert await clusters() == []

        async def no_pods() -> bool:
            return await pods(api, namespace, "") == []

        await eventually(no_pods, "the RayJob's pods deleted")
