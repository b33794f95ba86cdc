"""End to end, pod groups (#18): the four services and the webhook on the real stack
(kube-apiserver, kube-scheduler, kwok, Kafka, Redis), plain Pods, no operator.

A pod group of 3 Pods (``kueue.x-k8s.io/pod-group-name``, total count 3), 1 GPU
each (``example.com/gpu``, kept Running by kwok), in a ClusterQueue of 4 GPUs:

1. two of them created: both are stored gated by the webhook (the
   ``kueue.x-k8s.io/admission`` scheduling gate, the ``kueue.x-k8s.io/managed``
   label), the group waits ``Inadmissible`` ``PodGroupIncomplete`` and nothing runs;
2. the third created: one ``Admitted`` for the group, the actuator removes the
   three gates and puts the flavor's node selector and toleration in, the three
   Pods run on the flavor's node together, and ingest journals the group's
   PodsReady;
3. a single labelled Pod without a group label that does not fit (2 GPUs, 1 left)
   waits gated, ``Inadmissible``; a user may not remove its gate (the webhook);
4. a higher-priority single Pod preempts the group: the actuator deletes the
   group's three Pods, and only once they are gone is ``WorkloadStopped``
   journaled and the group's 3 GPUs released (``QuotaReleased``), before the
   preemptor is admitted and runs.
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
    HELD,
    KEEP_RUNNING,
    NODE_LABEL,
    PRIORITY_LABEL,
    decisions,
    gpu_node,
    history,
    queue_objects,
)
from e2e_pods import GROUP_LABEL, all_running, gates, group_pods, user_patch
from kubernetes_asyncio import client

from kuota.events.schema import ObjectUpserted, PodsReady, WorkloadStopped

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()
COUNT = "kueue.x-k8s.io/pod-group-total-count"
GATE = "kueue.x-k8s.io/admission"
MANAGED = "kueue.x-k8s.io/managed"


def gpu_pod(
    run: Run,
    name: str,
    gpus: int,
    *,
    group: str | None = None,
    total: int = 3,
    priority: str | None = None,
) -> dict[str, Any]:
    """A plain Pod with the queue label asking for ``gpus`` GPUs, kept Running; in
    pod group ``group`` of ``total`` Pods (None: a single Pod). No gate: the
    webhook adds it."""
    labels = {QUEUE_LABEL: "lq"}
    annotations = dict(KEEP_RUNNING)
    if group is not None:
        labels[GROUP_LABEL] = group
        annotations[COUNT] = str(total)
    if priority is not None:
        labels[PRIORITY_LABEL] = priority
    resources = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    return labelled(
        run,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {
                "containers": [
                    {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}
                ]
            },
        },
    )


async def read(run: Run, ns: str, name: str) -> client.V1Pod:
    return await client.CoreV1Api(run.api).read_namespaced_pod(name, ns)


async def test_a_pod_group_waits_for_its_pods_runs_together_and_is_stopped_by_deletion(
    e2e_run: Run,
) -> None:
    run = e2e_run
    ns = f"{run.id}-pg"
    node = await gpu_node(run, "gpu-pg")
    applied = await kubectl_apply(run, queue_objects(run, ns, node, gpus=4))
    await wait_journaled(run, applied)
    core = client.CoreV1Api(run.api)
    key = f"{ns}/podgroup/pg"
    low = f"{ns}-low"

    # 1. two of three: stored gated, the group incomplete, nothing runs
    for i in range(2):
        created = await core.create_namespaced_pod(
            ns, gpu_pod(run, f"pg-{i}", 1, group="pg", priority=low)
        )
        assert gates(created) == [GATE], "the webhook gates it"
        assert created.metadata.labels[MANAGED] == "true"
    (waiting, *_) = await run.until(
        lambda: [
            d
            for d in decisions(run, key, "Inadmissible")
            if (d.message or "").startswith("2 of 3 pods of pod group pg exist")
        ],
        lambda: f"the group waits for its third Pod ({history(run, key)})",
    )
    assert waiting.reason == "PodGroupIncomplete"
    assert (waiting.kind, waiting.api_version) == ("Pod", "v1")
    for _ in range(int(HELD / 0.5)):
        for p in await group_pods(run, ns, "pg"):
            assert gates(p) == [GATE] and not p.spec.node_name, p.metadata.name
            assert p.status.phase == "Pending"
        assert not decisions(run, key, "Admitted")
        await asyncio.sleep(0.5)

    # 2. the third: admitted as one gang, ungated with the flavor, running together
    await core.create_namespaced_pod(ns, gpu_pod(run, "pg-2", 1, group="pg", priority=low))
    (admitted,) = await run.until(
        lambda: decisions(run, key, "Admitted"), lambda: f"pg admitted ({history(run, key)})"
    )
    assert (admitted.kind, admitted.api_version) == ("Pod", "v1")
    (podset,) = admitted.flavors or {}  # three Pods alike: one role
    assert admitted.flavors == {podset: {GPU: ns}}
    assert admitted.usage == {ns: {GPU: "3"}}
    running = await all_running(run, ns, "pg", 3)
    assert {p.spec.node_name for p in running} == {node}, "together on the flavor's node"
    for p in running:
        assert GATE not in gates(p), p.metadata.name
        assert p.spec.node_selector == {NODE_LABEL: node}
        assert NODE_LABEL in [t.key for t in p.spec.tolerations or []]
        assert p.metadata.annotations["kuota.dev/decision-id"] == admitted.id

    def ready() -> list[PodsReady]:
        return [
            e for _, e in run.journal if isinstance(e, PodsReady) and e.workload == key and e.ready
        ]

    await run.until(ready, "PodsReady of the group, from its Pods")
    journaled = [
        e.object
        for _, e in run.journal
        if isinstance(e, ObjectUpserted)
        and e.object.get("kind") == "Pod"
        and e.object["metadata"].get("labels", {}).get(GROUP_LABEL) == "pg"
    ]
    assert journaled, "ingest journals the group's Pods"
    for obj in journaled:  # what the fold reads, no image
        assert all("image" not in c for c in obj["spec"]["containers"]), obj

    # 3. a single Pod that does not fit waits gated; a user may not ungate it
    solo_key = f"{ns}/pod/solo"
    solo = await core.create_namespaced_pod(ns, gpu_pod(run, "solo", 2))
    assert gates(solo) == [GATE]
    await run.until(
        lambda: decisions(run, solo_key, "Inadmissible"),
        lambda: f"solo inadmissible ({history(run, solo_key)})",
    )
    err = await user_patch(run, ns, "solo", {"spec": {"schedulingGates": None}})
    assert "spec.schedulingGates: Forbidden" in err, err
    for _ in range(int(HELD / 0.5)):
        held = await read(run, ns, "solo")
        assert gates(held) == [GATE] and not held.spec.node_name
        assert not decisions(run, solo_key, "Admitted")
        await asyncio.sleep(0.5)

    # 4. preempted by a higher-priority single Pod: its Pods deleted, then its quota back
    urgent_key = f"{ns}/pod/urgent"
    await core.create_namespaced_pod(ns, gpu_pod(run, "urgent", 2, priority=f"{ns}-high"))
    (preempted,) = await run.until(
        lambda: decisions(run, key, "Preempted"), lambda: f"pg preempted ({history(run, key)})"
    )
    assert preempted.preemptor == urgent_key

    def stopped() -> list[WorkloadStopped]:
        return [e for _, e in run.journal if isinstance(e, WorkloadStopped) and e.workload == key]

    (report,) = await run.until(stopped, "WorkloadStopped for the group")
    assert report.decision_id == preempted.id and report.uid == preempted.uid
    left = [
        (p.metadata.name, p.status.phase)
        for p in await group_pods(run, ns, "pg")
        if p.status.phase not in ("Succeeded", "Failed")  # an ended Pod holds nothing
    ]
    assert not left, "reported only once the actuator's deletes took the Pods down"
    (released,) = await run.until(
        lambda: decisions(run, key, "QuotaReleased"), lambda: f"released ({history(run, key)})"
    )
    assert released.stop_id == preempted.id and released.usage == {ns: {GPU: "3"}}
    (urgent_admitted,) = await run.until(
        lambda: decisions(run, urgent_key, "Admitted"), "urgent admitted"
    )
    order = [d.id for _, d in run.decisions]
    assert order.index(released.id) < order.index(urgent_admitted.id)
    deadline = time.monotonic() + 60
    while (await group_pods(run, ns, "pg")) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    assert not await group_pods(run, ns, "pg"), "Kueue stops a pod group by deleting its Pods"
    for _ in range(300):
        urgent = await read(run, ns, "urgent")
        if urgent.status.phase == "Running":
            break
        await asyncio.sleep(0.3)
    else:
        pytest.fail(f"urgent not Running ({history(run, urgent_key)})")
    assert urgent.spec.node_name == node and GATE not in gates(urgent)
