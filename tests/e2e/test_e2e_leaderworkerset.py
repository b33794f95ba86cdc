"""End to end at the API level, LeaderWorkerSets: the four services and the webhook on
the real stack, with kuota's own LeaderWorkerSet CRD (``tests/crds``) and NO LWS
controller (the Go module proxy serves none): the test makes the pods as the LWS
controller would (from the stored templates, with its labels and size annotation).

A LeaderWorkerSet of 2 groups of 2 pods (a leaderTemplate and a workerTemplate, 1 GPU
each: ``example.com/gpu``, kept Running by kwok), labelled, in a ClusterQueue of 2
GPUs:

1. the webhook copies its queue and priority-class labels into both templates;
2. group 1's two pods, created first, are stored gated, in pod group
   ``leaderworkerset-lws-1`` of 2 (a forged group label on one of them is written
   over), admitted whole (one ``Admitted`` for ``<ns>/podgroup/leaderworkerset-lws-1``),
   ungated with the flavor's node selector, and run together;
3. group 0's two pods wait gated, ``Inadmissible`` for quota, not for a missing pod;
   a user may not move one out of its group (the webhook);
4. group 1's pods deleted: its group is ``Finished``, its 2 GPUs released
   (``QuotaReleased``) once its pods are gone, then group 0 is admitted and runs.

The LeaderWorkerSet object itself is no workload here: ingest does not watch it, so
no decision names ``<ns>/leaderworkerset/lws/<i>``.
"""

from __future__ import annotations

import asyncio
import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import QUEUE_LABEL, Run, kubectl_apply, run_fixture, wait_journaled
from e2e_objects import labelled
from e2e_operators import (
    GPU,
    HELD,
    NODE_LABEL,
    PRIORITY_LABEL,
    decisions,
    gpu_node,
    gpu_pod,
    history,
    queue_objects,
)
from e2e_pods import GROUP_LABEL, all_running, gates, group_pods, user_patch
from kubernetes_asyncio import client

from kuota.events.schema import ObjectUpserted

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

GROUP, VERSION, PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
CRD = (
    Path(__file__).resolve().parents[1] / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
)
COUNT = "kueue.x-k8s.io/pod-group-total-count"
GATE = "kueue.x-k8s.io/admission"
MANAGED = "kueue.x-k8s.io/managed"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
SIZE = 2


@pytest.fixture(scope="module", autouse=True)
def leaderworkerset_crd(kubeconfig: str) -> None:
    """kuota's LeaderWorkerSet CRD, installed (and Established) before the run."""
    kubectl = os.environ.get("KUOTA_KUBECTL")
    assert kubectl, "KUOTA_KUBECTL unset: run `scripts/stack up`"
    base = [kubectl, f"--kubeconfig={kubeconfig}"]
    subprocess.run([*base, "apply", "--server-side", "-f", str(CRD)], check=True)
    subprocess.run(
        [
            *base,
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/leaderworkersets." + GROUP,
        ],
        check=True,
    )


e2e_run = run_fixture()


def leader_worker_set(run: Run, name: str, *, priority: str) -> dict[str, Any]:
    """A labelled LWS of 2 groups of ``SIZE`` pods, leader and workers 1 GPU each; the
    templates carry no queue label: the webhook copies it in."""
    return labelled(
        run,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority}},
            "spec": {
                "replicas": 2,
                "startupPolicy": "LeaderCreated",
                "leaderWorkerTemplate": {
                    "size": SIZE,
                    "leaderTemplate": gpu_pod("leader", "registry.k8s.io/pause:3.10"),
                    "workerTemplate": gpu_pod("worker", "registry.k8s.io/pause:3.10"),
                },
            },
        },
    )


def controller_pod(
    run: Run, lws: dict[str, Any], group: int, worker: int, **extra_labels: str
) -> dict[str, Any]:
    """The pod the LWS controller makes for ``group``'s ``worker`` (0: the leader), from
    the stored LWS's templates: their labels and annotations, the LWS's own labels and
    size annotation, the template's spec. ``extra_labels``: what a user adds."""
    lwt = lws["spec"]["leaderWorkerTemplate"]
    template = lwt["leaderTemplate"] if worker == 0 else lwt["workerTemplate"]
    md = copy.deepcopy(template.get("metadata") or {})
    name = lws["metadata"]["name"]
    labels = {
        **md.get("labels", {}),
        LWS_NAME: name,
        LWS_INDEX: str(group),
        LWS_WORKER: str(worker),
        **extra_labels,
    }
    annotations = {**md.get("annotations", {}), LWS_SIZE: str(lwt["size"])}
    pod_name = f"{name}-{group}" if worker == 0 else f"{name}-{group}-{worker}"
    return labelled(
        run,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod_name, "labels": labels, "annotations": annotations},
            "spec": copy.deepcopy(template["spec"]),
        },
    )


async def get_lws(run: Run, ns: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(run.api).get_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, name
    )
    return got


async def test_each_lws_group_is_a_pod_group_admitted_whole(e2e_run: Run) -> None:
    run = e2e_run
    ns = f"{run.id}-lws"
    node = await gpu_node(run, "gpu-lws")
    applied = await kubectl_apply(run, queue_objects(run, ns, node, gpus=2))
    await wait_journaled(run, applied)
    core = client.CoreV1Api(run.api)
    low = f"{ns}-low"
    one, zero = "leaderworkerset-lws-1", "leaderworkerset-lws-0"
    key1, key0 = f"{ns}/podgroup/{one}", f"{ns}/podgroup/{zero}"

    # 1. the LWS: its queue and priority in both templates
    await client.CustomObjectsApi(run.api).create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, leader_worker_set(run, "lws", priority=low)
    )
    lws = await get_lws(run, ns, "lws")
    for name in ("leaderTemplate", "workerTemplate"):
        labels = lws["spec"]["leaderWorkerTemplate"][name]["metadata"]["labels"]
        assert (labels[QUEUE_LABEL], labels[PRIORITY_LABEL]) == ("lq", low), name

    # 2. group 1 first: gated, in its pod group, admitted whole, run together
    for worker in range(SIZE):
        forged = {GROUP_LABEL: "elsewhere"} if worker == 1 else {}
        created = await core.create_namespaced_pod(
            ns, controller_pod(run, lws, 1, worker, **forged)
        )
        assert gates(created) == [GATE], "the webhook gates it"
        assert created.metadata.labels[MANAGED] == "true"
        assert created.metadata.labels[GROUP_LABEL] == one, "the LWS labels decide"
        assert created.metadata.annotations[COUNT] == str(SIZE)
    (admitted,) = await run.until(
        lambda: decisions(run, key1, "Admitted"), lambda: f"group 1 admitted ({history(run, key1)})"
    )
    assert (admitted.kind, admitted.api_version) == ("Pod", "v1")
    (podset,) = admitted.flavors or {}  # leader and worker alike: one shape, one podset
    assert admitted.flavors == {podset: {GPU: ns}}
    assert admitted.usage == {ns: {GPU: str(SIZE)}}
    running = await all_running(run, ns, one, SIZE)
    assert [p.metadata.name for p in running] == ["lws-1", "lws-1-1"]
    for p in running:
        assert GATE not in gates(p), p.metadata.name
        assert p.spec.node_name == node
        assert p.spec.node_selector == {NODE_LABEL: node}
        assert p.metadata.annotations["kuota.dev/decision-id"] == admitted.id

    # 3. group 0 waits gated, for quota (not for a pod); it may not leave its group
    for worker in range(SIZE):
        created = await core.create_namespaced_pod(ns, controller_pod(run, lws, 0, worker))
        assert gates(created) == [GATE]
        assert created.metadata.labels[GROUP_LABEL] == zero

    def short_of_quota() -> list[Any]:
        return [d for d in decisions(run, key0, "Inadmissible") if d.reason != "PodGroupIncomplete"]

    (waiting, *_) = await run.until(
        short_of_quota, lambda: f"group 0 waits for quota ({history(run, key0)})"
    )
    assert GPU in (waiting.message or ""), waiting.message
    err = await user_patch(run, ns, "lws-0-1", {"metadata": {"labels": {GROUP_LABEL: "mine"}}})
    assert f"metadata.labels[{GROUP_LABEL}]: Forbidden" in err, err
    for _ in range(int(HELD / 0.5)):
        held = await group_pods(run, ns, zero)
        assert [p.metadata.name for p in held] == ["lws-0", "lws-0-1"]
        for p in held:
            assert gates(p) == [GATE] and not p.spec.node_name, p.metadata.name
        assert not decisions(run, key0, "Admitted")
        await asyncio.sleep(0.5)

    # 4. group 1's pods deleted: its quota back once they are gone, then group 0 runs
    for p in running:
        await core.delete_namespaced_pod(p.metadata.name, ns)
    (finished,) = await run.until(
        lambda: decisions(run, key1, "Finished"), lambda: f"group 1 finished ({history(run, key1)})"
    )
    (released,) = await run.until(
        lambda: decisions(run, key1, "QuotaReleased"),
        lambda: f"group 1 released ({history(run, key1)})",
    )
    assert released.stop_id == finished.id and released.usage == {ns: {GPU: str(SIZE)}}
    (admitted0,) = await run.until(
        lambda: decisions(run, key0, "Admitted"), lambda: f"group 0 admitted ({history(run, key0)})"
    )
    order = [d.id for _, d in run.decisions]
    assert order.index(released.id) < order.index(admitted0.id), "the quota first"
    assert admitted0.usage == {ns: {GPU: str(SIZE)}}
    for p in await all_running(run, ns, zero, SIZE):
        assert GATE not in gates(p) and p.spec.node_name == node, p.metadata.name
        assert p.spec.node_selector == {NODE_LABEL: node}

    # the LWS object is no workload of its own here: not journaled, never decided
    assert not [
        d for _, d in run.decisions if (d.workload or "").startswith(f"{ns}/leaderworkerset/")
    ], "each group is decided as its pod group"
    assert not [
        e
        for _, e in run.journal
        if isinstance(e, ObjectUpserted) and e.object.get("kind") == "LeaderWorkerSet"
    ], "ingest does not watch LeaderWorkerSets"
