"""End to end up to its cluster, RayJobs (#18): the four services and the webhook on the
real stack with the real KubeRay operator v1.5.0 (the stack's ``kuberay`` component),
one pipeline for the module. Written, NOT yet run (docs/design/workload-kinds.md).

A RayJob of a head and a worker group of 2, 1 GPU each (``example.com/gpu``), created
NOT suspended with the queue label in a ClusterQueue of 3 GPUs:

- API level (what kuota does, read back from the apiserver and the journal): the
  webhook stores it suspended (``spec.suspend``); the fold admits it as one gang with
  ONE ``Admitted`` naming the ``head``, ``gpu`` and ``submitter`` podsets; the actuator
  unsuspends it with the flavor's node selector and toleration in the head's and the
  worker group's templates (the submitter asks for nothing, so it is assigned no
  flavor and its template keeps the user's own fields).
- End to end with KubeRay (what the operator does with kuota's writes): KubeRay
  makes the RayCluster, owned by the RayJob and carrying its labels (the queue label
  too), and its 3 pods run on the flavor's node on kwok. kuota does NOT queue that
  RayCluster: no decision names it, ingest does not journal it, and the webhook does
  not suspend it. Deactivated (``kuota.dev/active: "false"``), the RayJob is evicted
  (``InactiveWorkload``), suspended with every template restored; KubeRay deletes its
  RayCluster and submitter Job and says ``Suspended``, the cluster's pods go, and
  only then come ``WorkloadStopped`` and ``QuotaReleased`` (3 GPUs).

Not asserted: the Ray job itself never runs on kwok (no Ray dashboard answers), so
KubeRay never copies the cluster's ``ready`` state into the RayJob's status and
ingest journals no PodsReady for it; the RayJob never completes.

The submitter: KubeRay's default submitter asks for 500m CPU and 200Mi, which this
ClusterQueue (GPUs only) does not cover, so the RayJob would wait. It gets an
explicit ``submitterPodTemplate`` that asks for nothing (``K8sJobMode``, so the
``submitter`` podset is still there and still admitted with the gang), with the
user's own node selector and toleration for this run's GPU node so that kwok runs
it and KubeRay's RayJob stays ``Running`` (``HTTPMode`` would have no submitter
podset at all, and this test is also about that podset).
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
    KEEP_RUNNING,
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

from kuota.events.schema import ObjectUpserted, WorkloadStopped

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()
GROUP, VERSION, PLURAL = "ray.io", "v1", "rayjobs"
CLUSTERS = "rayclusters"
CLUSTER_LABEL = "ray.io/cluster"
IMAGE = "rayproject/ray:2.46.0"


def ray_job(run: Run, name: str, node: str, workers: int, *, priority: str) -> dict[str, Any]:
    toleration = {"key": NODE_LABEL, "operator": "Equal", "value": node, "effect": "NoSchedule"}
    submitter = {
        "metadata": {"annotations": dict(KEEP_RUNNING)},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {NODE_LABEL: node},
            "tolerations": [toleration],
            "containers": [{"name": "ray-job-submitter", "image": IMAGE}],
        },
    }
    return labelled(
        run,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "RayJob",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority}},
            "spec": {
                "entrypoint": "python -c 'print(1)'",
                "shutdownAfterJobFinishes": True,  # kuota's webhook (and Kueue's) want it
                "submitterPodTemplate": submitter,
                "rayClusterSpec": {
                    "headGroupSpec": {"rayStartParams": {}, "template": gpu_pod("ray-head", IMAGE)},
                    "workerGroupSpecs": [
                        {
                            "groupName": "gpu",
                            "replicas": workers,
                            "minReplicas": workers,
                            "maxReplicas": workers,
                            "rayStartParams": {},
                            "template": gpu_pod("ray-worker", IMAGE),
                        }
                    ],
                },
            },
        },
    )


async def get(run: Run, ns: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(run.api).get_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, name
    )
    return got


async def clusters_of(run: Run, ns: str, uid: str) -> list[dict[str, Any]]:
    """The RayClusters whose controller is the RayJob ``uid``."""
    listed = await client.CustomObjectsApi(run.api).list_namespaced_custom_object(
        GROUP, VERSION, ns, CLUSTERS
    )
    return [
        c
        for c in listed["items"]
        if any(
            r.get("controller") and r.get("uid") == uid
            for r in c["metadata"].get("ownerReferences") or ()
        )
    ]


async def live_pods(run: Run, ns: str, cluster: str) -> list[client.V1Pod]:
    listed = await client.CoreV1Api(run.api).list_namespaced_pod(
        ns, label_selector=f"{CLUSTER_LABEL}={cluster}"
    )
    return [p for p in listed.items if p.status.phase not in ("Succeeded", "Failed")]


def cluster_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["rayClusterSpec"]
    return [spec["headGroupSpec"]["template"]["spec"]] + [
        g["template"]["spec"] for g in spec["workerGroupSpecs"]
    ]


async def test_a_ray_job_is_gang_admitted_its_cluster_runs_unqueued_and_it_gives_its_quota_back(
    e2e_run: Run,
) -> None:
    operator_up("KUOTA_KUBERAY_HEALTH_URL", "kuberay")
    run = e2e_run
    ns = f"{run.id}-rj"
    node = await gpu_node(run, "gpu-rj")
    applied = await kubectl_apply(run, queue_objects(run, ns, node, gpus=3))
    await wait_journaled(run, applied)
    key = f"{ns}/rayjob/rj"
    objects = client.CustomObjectsApi(run.api)
    manifest = ray_job(run, "rj", node, 2, priority=f"{ns}-low")
    user_submitter = manifest["spec"]["submitterPodTemplate"]["spec"]
    created = await objects.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, manifest)
    assert created["spec"]["suspend"] is True, "the webhook suspends it"
    uid = created["metadata"]["uid"]

    # one Admitted for the whole gang: head, worker group and submitter. KubeRay may
    # change the RayJob's spec right after its creation (metadata.generation 1 -> 2,
    # seen in this test): the actuator then refuses the first admission (JobChanged:
    # Evicted, QuotaReleased NotStarted, Requeued) and the fold admits it again at
    # the new generation; every admission is the whole gang
    (admitted, *_) = await run.until(
        lambda: decisions(run, key, "Admitted"), lambda: f"rj admitted ({history(run, key)})"
    )
    assert (admitted.kind, admitted.api_version) == ("RayJob", "ray.io/v1")
    assert admitted.flavors == {"head": {GPU: ns}, "gpu": {GPU: ns}, "submitter": {}}
    assert admitted.usage == {ns: {GPU: "3"}}

    # unsuspended with the flavor in the GPU templates; the submitter keeps its own fields
    deadline = time.monotonic() + 60
    while True:
        stored = await get(run, ns, "rj")
        if stored["spec"].get("suspend") is False:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"the actuator did not unsuspend rj ({history(run, key)})")
        await asyncio.sleep(0.2)
    started = stored["metadata"]["annotations"]["kuota.dev/decision-id"]
    (applied,) = [d for d in decisions(run, key, "Admitted") if d.id == started]
    assert applied.flavors == admitted.flavors and applied.usage == admitted.usage
    early = [d.reason for d in decisions(run, key, "Evicted")]
    assert early in ([], ["JobChanged"]), history(run, key)
    for spec in cluster_templates(stored):
        assert spec["nodeSelector"] == {NODE_LABEL: node}
        assert [t["key"] for t in spec["tolerations"]] == [NODE_LABEL]
    submitter = stored["spec"]["submitterPodTemplate"]["spec"]
    assert submitter["nodeSelector"] == user_submitter["nodeSelector"]
    assert submitter["tolerations"] == user_submitter["tolerations"]

    # KubeRay makes the RayCluster (the RayJob's labels copied) and its pods run on kwok
    deadline = time.monotonic() + 90
    while not (found := await clusters_of(run, ns, uid)):
        if time.monotonic() > deadline:
            pytest.fail(
                f"KubeRay made no RayCluster for rj: {(await get(run, ns, 'rj'))['status']}"
            )
        await asyncio.sleep(0.3)
    (cluster,) = found
    cname = cluster["metadata"]["name"]
    assert cluster["metadata"]["labels"].get(QUEUE_LABEL) == "lq", "KubeRay copies the label"
    assert cluster["spec"].get("suspend") is not True, "the webhook left it alone"
    deadline = time.monotonic() + 90
    while True:
        got = await live_pods(run, ns, cname)
        if len(got) == 3 and all(p.status.phase == "Running" for p in got):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"3 pods of {cname} Running: {[p.status.phase for p in got]}")
        await asyncio.sleep(0.3)
    assert {p.spec.node_name for p in got} == {node}, "together on the flavor's node"
    # ... and kuota never queues it: no decision, never journaled
    ckey = f"{ns}/raycluster/{cname}"
    await asyncio.sleep(3.0)
    assert not [d for _, d in run.decisions if d.workload == ckey], history(run, ckey)
    assert not [
        e
        for _, e in run.journal
        if isinstance(e, ObjectUpserted)
        and e.object.get("kind") == "RayCluster"
        and e.object["metadata"].get("name") == cname
    ], "ingest journals the RayJob's cluster"

    # deactivated: suspended, templates restored, quota back once KubeRay's pods are gone
    await objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "rj",
        {"metadata": {"annotations": {"kuota.dev/active": "false"}}},
        _content_type="application/merge-patch+json",
    )
    (stop,) = await run.until(
        lambda: [d for d in decisions(run, key, "Evicted") if d.reason == "InactiveWorkload"],
        lambda: f"rj evicted ({history(run, key)})",
    )

    def stopped() -> list[WorkloadStopped]:
        return [e for _, e in run.journal if isinstance(e, WorkloadStopped) and e.workload == key]

    await run.until(stopped, "WorkloadStopped for the RayJob")
    assert not await live_pods(run, ns, cname), "reported only once KubeRay's pods are gone"
    (released,) = await run.until(
        lambda: [d for d in decisions(run, key, "QuotaReleased") if d.stop_id == stop.id],
        lambda: f"released ({history(run, key)})",
    )
    assert released.usage == {ns: {GPU: "3"}}
    held = await get(run, ns, "rj")
    assert held["spec"]["suspend"] is True
    assert held["status"].get("jobDeploymentStatus") == "Suspended", held["status"]
    for spec in cluster_templates(held):
        assert "nodeSelector" not in spec and "tolerations" not in spec
    assert held["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {NODE_LABEL: node}
    assert await clusters_of(run, ns, uid) == [], "KubeRay deleted the RayCluster"
    journaled = [
        e.object
        for _, e in run.journal
        if isinstance(e, ObjectUpserted)
        and e.object.get("kind") == "RayJob"
        and e.object["metadata"]["name"] == "rj"
    ]
    assert journaled, "ingest journals the RayJob"
    for obj in journaled:  # the admission's write included: the user's own templates
        assert all("nodeSelector" not in spec for spec in cluster_templates(obj)), obj
