"""End to end, quota that follows the pods (#23 items 2 and 3): the four services on
the real stack (kube-apiserver, kwok, Kafka, Redis), one pipeline for the module.

1. A preempted Job's pod is held in Terminating (kwok's ``pod-terminate`` stage
   delayed an hour: a long ``terminationGracePeriodSeconds``). Its quota stays
   charged: the preemptor waits (``WaitingForStoppedWorkloads``), is neither
   admitted nor unsuspended while the pod exists, and no other workload is
   preempted for it. Once the pod is gone (deleted at once), the actuator
   journals ``WorkloadStopped``, the fold answers ``QuotaReleased`` and admits
   the preemptor, and the actuator starts it.
2. ``kubectl delete job --cascade=orphan`` of an admitted Job: its pod keeps
   running, and so does its charge (``Finished`` Deleted, no release); a second
   Job that needs the quota waits until the orphaned pod is deleted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from e2e_harness import (
    KUEUE,
    KWOK_COMPLETE,
    KWOK_READY,
    QUEUE_LABEL,
    Run,
    kubectl_apply,
    run_fixture,
    wait_journaled,
)
from e2e_objects import labelled, one_flavor_queue
from kubernetes_asyncio import client

from kuota.events.schema import Decision, WorkloadStopped

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KWOK_TERMINATE = "pod-terminate.stage.kwok.x-k8s.io/delay"
WAITING = "WaitingForStoppedWorkloads"
HELD = 5.0  # seconds the test watches the preemptor wait while the victim's pod exists


def queue_objects(run: Run, name: str, cpus: int) -> list[dict[str, Any]]:
    """Namespace, flavor, ClusterQueue (``cpus`` of quota, preemption of lower
    priority within it), LocalQueue ``lq`` and two priority classes."""
    api = f"{KUEUE[0]}/{KUEUE[1]}"
    preemption = {"withinClusterQueue": "LowerPriority"}
    classes = [
        {"apiVersion": api, "kind": "WorkloadPriorityClass", "metadata": {"name": f"{name}-{n}"}}
        | {"value": v}
        for n, v in (("low", 10), ("high", 100))
    ]
    queue = one_flavor_queue(run, name, "cpu", cpus, preemption=preemption)
    return queue + [labelled(run, c) for c in classes]


def job(run: Run, name: str, *, priority: str, terminate: str = "500ms") -> dict[str, Any]:
    """A one-pod Job asking for 1 cpu whose pod runs an hour on kwok; a deleted pod
    takes ``terminate`` to stop (kwok's pod-terminate stage: the grace period)."""
    return labelled(
        run,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority}},
            "spec": {
                "suspend": True,
                "backoffLimit": 0,
                "template": {
                    "metadata": {
                        "annotations": {
                            KWOK_READY: "200ms",
                            KWOK_COMPLETE: "1h",
                            KWOK_TERMINATE: terminate,
                        }
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "1"}},
                            }
                        ],
                    },
                },
            },
        },
    )


def decisions(run: Run, key: str, kind: str) -> list[Decision]:
    return [d for _, d in run.decisions if d.workload == key and d.type == kind]


def stopped(run: Run, key: str) -> list[WorkloadStopped]:
    return [e for _, e in run.journal if isinstance(e, WorkloadStopped) and e.workload == key]


async def pods_of(run: Run, ns: str, uid: str) -> list[client.V1Pod]:
    listed = await client.CoreV1Api(run.api).list_namespaced_pod(
        ns, label_selector=f"batch.kubernetes.io/controller-uid={uid}"
    )
    return list(listed.items)


async def running(run: Run, ns: str, name: str) -> client.V1Job:
    batch = client.BatchV1Api(run.api)

    async def active() -> client.V1Job | None:
        j = await batch.read_namespaced_job(name, ns)
        return j if (j.status.active or 0) >= 1 and j.status.ready else None

    for _ in range(300):
        if (j := await active()) is not None:
            return j
        await asyncio.sleep(0.2)
    pytest.fail(f"{ns}/{name} never ran")


async def test_a_preemptor_starts_only_once_its_victims_terminating_pod_is_gone(
    e2e_run: Run,
) -> None:
    run = e2e_run
    ns = f"{run.id}-drain"
    batch = client.BatchV1Api(run.api)
    core = client.CoreV1Api(run.api)
    applied = await kubectl_apply(run, queue_objects(run, ns, cpus=1))
    await wait_journaled(run, applied)
    low, high = f"{ns}/low", f"{ns}/high"
    await batch.create_namespaced_job(ns, job(run, "low", priority=f"{ns}-low", terminate="1h"))
    await run.until(lambda: decisions(run, low, "Admitted"), "low admitted")
    low_job = await running(run, ns, "low")
    uid = low_job.metadata.uid

    await batch.create_namespaced_job(ns, job(run, "high", priority=f"{ns}-high"))
    (preempted,) = await run.until(lambda: decisions(run, low, "Preempted"), "low preempted")
    assert preempted.preemptor == high

    async def terminating() -> list[client.V1Pod]:
        return [p for p in await pods_of(run, ns, uid) if p.metadata.deletion_timestamp]

    for _ in range(300):
        if await terminating():
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("low's pod was never deleted (the stop)")

    def stop_wait() -> list[Decision]:
        return [d for d in decisions(run, high, "Inadmissible") if d.reason == WAITING]

    (waiting,) = await run.until(stop_wait, "high waits for low's pods")
    assert low in (waiting.message or "")
    # While the victim's pod terminates, its quota stays charged: high is not started.
    for _ in range(int(HELD / 0.5)):
        (pod,) = await terminating()
        assert pod.status.phase == "Running", "kwok holds it in its grace period"
        assert not decisions(run, high, "Admitted"), "admitted while the victim's pod runs"
        assert (await batch.read_namespaced_job("high", ns)).spec.suspend is True
        await asyncio.sleep(0.5)
    assert not stopped(run, low), "no WorkloadStopped while a pod is left"
    assert not decisions(run, low, "QuotaReleased")
    assert [d.workload for _, d in run.decisions if d.type == "Preempted"] == [low], (
        "no more victims while the drain lasts"
    )

    # The pod goes: reported, released, and only then is high admitted and started.
    await core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
    (report,) = await run.until(lambda: stopped(run, low), "WorkloadStopped for low")
    assert (report.decision_id, report.uid) == (preempted.id, uid)
    (released,) = await run.until(lambda: decisions(run, low, "QuotaReleased"), "released")
    assert released.stop_id == preempted.id and released.usage == {ns: {"cpu": "1"}}
    (admitted,) = await run.until(lambda: decisions(run, high, "Admitted"), "high admitted")
    assert admitted.victims == [low]
    order = [d.id for _, d in run.decisions]
    assert order.index(released.id) < order.index(admitted.id)
    await running(run, ns, "high")


async def test_an_orphaning_delete_keeps_the_charge_until_the_pods_are_gone(
    e2e_run: Run,
) -> None:
    run = e2e_run
    ns = f"{run.id}-orphan"
    batch = client.BatchV1Api(run.api)
    core = client.CoreV1Api(run.api)
    applied = await kubectl_apply(run, queue_objects(run, ns, cpus=1))
    await wait_journaled(run, applied)
    first, second = f"{ns}/first", f"{ns}/second"
    await batch.create_namespaced_job(ns, job(run, "first", priority=f"{ns}-low"))
    await run.until(lambda: decisions(run, first, "Admitted"), "first admitted")
    uid = (await running(run, ns, "first")).metadata.uid

    await batch.delete_namespaced_job("first", ns, propagation_policy="Orphan")
    (finished,) = await run.until(lambda: decisions(run, first, "Finished"), "first deleted")
    assert finished.reason == "Deleted"
    await batch.create_namespaced_job(ns, job(run, "second", priority=f"{ns}-low"))
    await run.until(lambda: decisions(run, second, "Inadmissible"), "second waits for quota")
    for _ in range(int(HELD / 0.5)):
        (pod,) = await pods_of(run, ns, uid)
        assert pod.metadata.deletion_timestamp is None and pod.status.phase == "Running"
        assert not decisions(run, second, "Admitted"), "admitted beside the orphaned pod"
        await asyncio.sleep(0.5)
    assert not stopped(run, first) and not decisions(run, first, "QuotaReleased")

    await core.delete_namespaced_pod(pod.metadata.name, ns)
    (report,) = await run.until(lambda: stopped(run, first), "WorkloadStopped for first")
    assert report.decision_id == finished.id
    await run.until(lambda: decisions(run, first, "QuotaReleased"), "first's quota released")
    await run.until(lambda: decisions(run, second, "Admitted"), "second admitted")
    await running(run, ns, "second")
