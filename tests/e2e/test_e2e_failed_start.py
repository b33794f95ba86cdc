"""End to end, failed starts free their quota (issue 14): the four services on the
real stack (kube-apiserver, kwok, Kafka, Redis), one pipeline for the module.

1. ``FailedToStart``. A ResourceFlavor gains a nodeLabel between the admission
   of a Job and its actuation (the actuator is stopped meanwhile): the label
   conflicts with the Job's own nodeSelector. The restarted actuator reports
   ``ActuationFailed`` (FailedToStart) to the journal; the fold answers with
   ``Evicted`` (FailedToStart), the Job is held, and the second Job, waiting for
   that quota, is admitted and runs. The Evicted decision is a no-op on the
   Job (never a write: the Job carries no kuota annotation), which stays
   suspended. Once the user removes the conflicting selector, the Job is
   admitted when the quota is free again, and runs to completion.
2. ``ApiError``. A flavor's toleration that the fold accepts but the apiserver
   refuses in a pod template (its value is not a label value): the admission's
   PATCH is a 422, reported as ``ActuationFailed`` (ApiError, the apiserver's
   message), evicted and held (not pending in its ClusterQueue, as in the
   fold), the quota released in the ClusterQueue's status, the Job suspended.
"""

from __future__ import annotations

import asyncio
import copy
import re
from datetime import datetime
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from e2e_harness import (
    KUEUE,
    KWOK_COMPLETE,
    KWOK_READY,
    NODE_POOL_LABEL,
    QUEUE_LABEL,
    Run,
    job_done,
    kubectl_apply,
    load_launcher,
    run_fixture,
    wait_journaled,
)
from e2e_objects import labelled
from kubernetes_asyncio import client

from kuota.actuation.patch import ANN_DECISION_ID
from kuota.events.schema import ActuationFailed, Decision

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()

HOSTNAME = "kubernetes.io/hostname"
BAD_TOLERATION = {
    "key": "example.com/dedicated",
    "operator": "Equal",
    "value": "not a label value!",  # a pod template refuses it (a label value)
    "effect": "NoSchedule",
}


def flavor(run: Run, name: str, labels: dict[str, str], tolerations: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {NODE_POOL_LABEL: run.id, **labels}}
    if tolerations:
        spec["tolerations"] = tolerations
    return labelled(
        run,
        {
            "apiVersion": f"{KUEUE[0]}/{KUEUE[1]}",
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


def queues(run: Run, name: str) -> list[dict[str, Any]]:
    """Namespace, ClusterQueue (one cpu of quota in flavor ``name``) and LocalQueue."""
    api = f"{KUEUE[0]}/{KUEUE[1]}"
    return [
        labelled(run, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        labelled(
            run,
            {
                "apiVersion": api,
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {"name": name, "resources": [{"name": "cpu", "nominalQuota": 1}]}
                            ],
                        }
                    ],
                },
            },
        ),
        labelled(
            run,
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": name},
                "spec": {"clusterQueue": name},
            },
        ),
    ]


def job(run: Run, name: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A one-cpu Job, created without ``suspend`` (the webhook suspends it); its
    pod runs 4 s on a kwok node."""
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1"}},
            }
        ],
    }
    if selector:
        pod["nodeSelector"] = selector
    return labelled(
        run,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq"}},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {KWOK_READY: "200ms", KWOK_COMPLETE: "4s"}},
                    "spec": pod,
                },
            },
        },
    )


def decisions(run: Run, key: str, kind: str) -> list[Decision]:
    return [d for _, d in run.decisions if d.workload == key and d.type == kind]


def reported(run: Run, key: str) -> list[ActuationFailed]:
    return [e for _, e in run.journal if isinstance(e, ActuationFailed) and e.workload == key]


def changes(run: Run, key: str) -> list[dict[str, Any]]:
    ns, _, name = key.partition("/")
    return [
        c.obj
        for c in run.job_changes
        if c.obj["metadata"]["namespace"] == ns and c.obj["metadata"]["name"] == name
    ]


async def actuator_events(run: Run, key: str) -> dict[str, str]:
    ns, _, name = key.partition("/")
    listed = await client.CoreV1Api(run.api).list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name}"
    )
    return {
        e.reason: e.message
        for e in listed.items
        if e.source and e.source.component == "kuota-actuator"
    }


async def until_events(run: Run, key: str, *reasons: str) -> dict[str, str]:
    for _ in range(300):
        got = await actuator_events(run, key)
        if set(reasons) <= set(got):
            return got
        await asyncio.sleep(0.2)
    pytest.fail(f"{key}: Events {reasons} not written; have {await actuator_events(run, key)}")


async def committed(run: Run) -> int:
    """The actuator's committed offset on the decision topic."""
    probe = AIOKafkaConsumer(
        group_id=f"{run.id}-actuator", enable_auto_commit=False, **run.kafka.client_kwargs()
    )
    await probe.start()
    try:
        return (await probe.committed(TopicPartition(f"{run.id}.decisions", 0))) or 0
    finally:
        await probe.stop()


def creation(obj: dict[str, Any]) -> float:
    return datetime.fromisoformat(obj["metadata"]["creationTimestamp"]).timestamp()


async def test_a_failed_start_frees_its_quota_and_the_fixed_job_runs(e2e_run: Run) -> None:
    run = e2e_run
    launcher = load_launcher()
    ns = f"{run.id}-fs"
    batch = client.BatchV1Api(run.api)
    applied = await kubectl_apply(run, [flavor(run, ns, {}), *queues(run, ns)])
    await wait_journaled(run, applied)

    # The actuator is away while the fold admits j1: the flavor changes meanwhile.
    pid = launcher.pids(run.pipeline)["actuator"]
    assert await asyncio.to_thread(launcher._stop_pid, pid, "actuator"), "actuator stopped"
    other = f"{run.id}-1"  # the node the flavor will pin; j1 asks for the other one
    j1, j2 = f"{ns}/j1", f"{ns}/j2"
    await batch.create_namespaced_job(ns, job(run, "j1", {HOSTNAME: f"{run.id}-0"}))
    await run.until(lambda: decisions(run, j1, "Admitted"), "j1 admitted by the fold")
    await batch.create_namespaced_job(ns, job(run, "j2"))
    await run.until(lambda: decisions(run, j2, "Inadmissible"), "j2 waits for the quota")
    edited = await kubectl_apply(run, [flavor(run, ns, {HOSTNAME: other})])
    await wait_journaled(run, edited)
    assert not decisions(run, j1, "Evicted"), "a flavor edit keeps the admission"
    await asyncio.to_thread(launcher.up, run.pipeline, quiet=True)

    # The actuator reports the failed start; the fold releases the quota and holds j1.
    (failed,) = await run.until(lambda: reported(run, j1), "ActuationFailed for j1")
    (admitted_j1,) = decisions(run, j1, "Admitted")
    assert (failed.reason, failed.decision_type, failed.decision_id, failed.at) == (
        "FailedToStart",
        "Admitted",
        admitted_j1.id,
        admitted_j1.at,
    )
    conflict = (
        f"the Job's nodeSelector {HOSTNAME}={run.id}-0 conflicts with the nodeLabel "
        f"{HOSTNAME}={other} of ResourceFlavor {ns}, which kuota adds to the pod template"
    )
    assert failed.message == conflict
    (evicted,) = await run.until(lambda: decisions(run, j1, "Evicted"), "j1 evicted")
    assert (evicted.reason, evicted.cluster_queue) == ("FailedToStart", ns)
    assert evicted.message == (
        f"the Job could not be started with its admission: {conflict}; its quota is released"
    )
    held = [d for d in decisions(run, j1, "Inadmissible") if d.cause == failed.id]
    assert [d.reason for d in held] == ["FailedToStart"], decisions(run, j1, "Inadmissible")
    (admitted_j2,) = await run.until(lambda: decisions(run, j2, "Admitted"), "j2 admitted")
    assert admitted_j2.cause == failed.id, "admitted by the very report that freed the quota"

    # j2 runs on the pinned node; j1 stays suspended and was never written by kuota.
    def j2_ran() -> Any:
        return next((o for o in changes(run, j2) if job_done(o)), None)

    done = await run.until(j2_ran, "j2 ran to completion", timeout=90)
    assert done["spec"]["template"]["spec"]["nodeSelector"] == {
        NODE_POOL_LABEL: run.id,
        HOSTNAME: other,
    }
    now = await batch.read_namespaced_job("j1", ns)
    assert now.spec.suspend is True
    assert all(o["spec"].get("suspend") is True for o in changes(run, j1)), "never unsuspended"
    assert not [
        o for o in changes(run, j1) if ANN_DECISION_ID in (o["metadata"].get("annotations") or {})
    ], "the failed Admitted and its Evicted wrote nothing to the Job"
    events = await until_events(run, j1, "EvictedDueToFailedToStart", "Pending")
    assert events["EvictedDueToFailedToStart"] == evicted.message
    assert events["Pending"] == held[0].message
    j2_events = await until_events(run, j2, "Admitted")
    created = creation(changes(run, j2)[0])
    assert j2_events["Admitted"] == (
        f"Admitted by ClusterQueue {ns}, wait time since creation was "
        f"{admitted_j2.at - created:.0f}s"
    )
    assert len(reported(run, j1)) == 1 and not reported(run, j2)

    # The user removes the conflicting selector: j1 queues again and runs.
    await batch.patch_namespaced_job(
        "j1", ns, {"spec": {"template": {"spec": {"nodeSelector": None}}}}
    )
    (again,) = await run.until(
        lambda: [d for d in decisions(run, j1, "Admitted") if d.id != admitted_j1.id],
        "the fixed j1 admitted",
        timeout=90,
    )
    finished = await run.until(lambda: decisions(run, j2, "Finished"), "j2 finished")
    assert again.at >= finished[0].at, "j1 waited for j2's quota"

    def j1_ran() -> Any:
        return next((o for o in changes(run, j1) if job_done(o)), None)

    ran = await run.until(j1_ran, "j1 ran to completion", timeout=90)
    assert ran["metadata"]["annotations"][ANN_DECISION_ID] == again.id
    assert ran["spec"]["template"]["spec"]["nodeSelector"][HOSTNAME] == other
    assert len(reported(run, j1)) == 1, "the second admission was applied"
    wait = again.at - creation(changes(run, j1)[0])
    assert wait >= 4, "j1 waited at least for j2's 4 s run"
    j1_events = await until_events(run, j1, "Admitted")
    assert j1_events["Admitted"] == (
        f"Admitted by ClusterQueue {ns}, wait time since creation was {wait:.0f}s"
    )
    log = run.pipeline.log_file("actuator").read_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


async def test_a_template_the_apiserver_refuses_frees_its_quota(e2e_run: Run) -> None:
    run = e2e_run
    ns = f"{run.id}-tol"
    batch = client.BatchV1Api(run.api)
    objs = [flavor(run, ns, {}, [BAD_TOLERATION]), *queues(run, ns)]
    applied = await kubectl_apply(run, copy.deepcopy(objs))
    await wait_journaled(run, applied)
    await batch.create_namespaced_job(ns, job(run, "t1"))
    key = f"{ns}/t1"
    (failed,) = await run.until(lambda: reported(run, key), "ActuationFailed for t1")
    assert (failed.reason, failed.decision_type) == ("ApiError", "Admitted")
    assert re.search(r"^422: .*tolerations\[0\]", failed.message), failed.message
    (evicted,) = await run.until(lambda: decisions(run, key, "Evicted"), "t1 evicted")
    assert evicted.reason == "ApiError" and failed.message in (evicted.message or "")
    assert [d.reason for d in decisions(run, key, "Inadmissible")][-1] == "ApiError"

    # Once the actuator has consumed the Evicted decision, its ClusterQueue status
    # shows the quota free; the held workload is not pending there (as in the fold).
    at = next(offset for offset, d in run.decisions if d.id == evicted.id)
    for _ in range(300):
        if await committed(run) > at:
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail(f"the actuator never committed past the Evicted decision at {at}")
    status: dict[str, Any] = {}
    for _ in range(150):
        cq = await client.CustomObjectsApi(run.api).get_cluster_custom_object(
            *KUEUE, "clusterqueues", ns
        )
        status = cq.get("status") or {}
        if (status.get("admittedWorkloads"), status.get("pendingWorkloads")) == (0, 0):
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail(f"ClusterQueue {ns} status never showed the quota released: {status}")
    assert status["flavorsUsage"] == [
        {"name": ns, "resources": [{"name": "cpu", "total": "0", "borrowed": "0"}]}
    ]
    now = await batch.read_namespaced_job("t1", ns)
    assert now.spec.suspend is True
    assert ANN_DECISION_ID not in (now.metadata.annotations or {})
