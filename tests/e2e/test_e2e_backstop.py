"""End to end, the backstop and edits after admission (issue 22): the four services
on the real stack (kube-apiserver, kwok, Kafka, Redis), one pipeline for the module.

1. An admin unsuspends a pending Job. ``kuota-admin`` is trusted by the webhook
   (it is the local pipeline's actuator identity), so the door lets the change
   through and only the backstop stops it: ingest journals the Job running, the
   fold answers ``Suspended`` (StartedWithoutAdmission) and the actuator
   suspends it again, recording its decision id and a Warning Event
   ``Suspended: started without admission``. The Job keeps waiting; the
   running one keeps its admission.
2. The running admitted Job's ``parallelism`` grows (Kubernetes allows it on a
   running Job): ``Evicted`` and ``Requeued`` (PodSetsChanged), then admitted
   again charged for the new shape (two cpus, not one), its pods stopped and
   started again.
3. A Job admitted while the actuator is away grows while still suspended: the
   actuator, back, does not start it on the old admission (its generation is
   older than the Job's: ActuationFailed JobChanged), only on the new one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from e2e_harness import (
    KWOK_READY,
    QUEUE_LABEL,
    Run,
    kubectl_apply,
    load_launcher,
    run_fixture,
    wait_journaled,
)
from e2e_objects import labelled, one_flavor_queue
from kubernetes_asyncio import client

from kuota.actuation.patch import ANN_DECISION_ID
from kuota.events.schema import ActuationFailed, Decision

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()


def queue_objects(run: Run, name: str, cpus: int) -> list[dict[str, Any]]:
    """Namespace, flavor, ClusterQueue (``cpus`` of quota) and LocalQueue ``lq``."""
    return one_flavor_queue(run, name, "cpu", cpus)


def job(run: Run, name: str, cpus: int) -> dict[str, Any]:
    """A Job of one pod at a time (of 4 completions) asking for ``cpus`` cpus; kwok
    keeps its pods running."""
    return labelled(
        run,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq"}},
            "spec": {
                "suspend": True,
                "backoffLimit": 0,
                # completions caps the pod count: without it Kubernetes sets 1
                "parallelism": 1,
                "completions": 4,
                "template": {
                    "metadata": {"annotations": {KWOK_READY: "200ms"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": str(cpus)}},
                            }
                        ],
                    },
                },
            },
        },
    )


def decisions(run: Run, key: str, kind: str) -> list[Decision]:
    return [d for _, d in run.decisions if d.workload == key and d.type == kind]


def changes(run: Run, key: str) -> list[dict[str, Any]]:
    ns, _, name = key.partition("/")
    return [
        c.obj
        for c in run.job_changes
        if c.obj["metadata"]["namespace"] == ns and c.obj["metadata"]["name"] == name
    ]


def latest(run: Run, key: str) -> dict[str, Any] | None:
    seen = changes(run, key)
    return seen[-1] if seen else None


async def actuator_events(run: Run, key: str) -> dict[str, tuple[str, str]]:
    ns, _, name = key.partition("/")
    listed = await client.CoreV1Api(run.api).list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name}"
    )
    return {
        e.reason: (e.message, e.type)
        for e in listed.items
        if e.source and e.source.component == "kuota-actuator"
    }


async def until_event(run: Run, key: str, reason: str) -> tuple[str, str]:
    for _ in range(300):
        got = await actuator_events(run, key)
        if reason in got:
            return got[reason]
        await asyncio.sleep(0.2)
    pytest.fail(f"{key}: Event {reason} not written; have {await actuator_events(run, key)}")


async def test_an_admins_unsuspend_is_suspended_again_and_a_grown_job_requeued(
    e2e_run: Run,
) -> None:
    run = e2e_run
    ns = f"{run.id}-bs"
    batch = client.BatchV1Api(run.api)
    applied = await kubectl_apply(run, queue_objects(run, ns, cpus=2))
    await wait_journaled(run, applied)
    first, second = f"{ns}/first", f"{ns}/second"
    await batch.create_namespaced_job(ns, job(run, "first", 1))
    (admitted,) = await run.until(lambda: decisions(run, first, "Admitted"), "first admitted")
    await run.until(
        lambda: (latest(run, first) or {}).get("status", {}).get("active"), "first runs"
    )
    await batch.create_namespaced_job(ns, job(run, "second", 2))
    await run.until(lambda: decisions(run, second, "Inadmissible"), "second waits for quota")

    # 1. The admin (trusted by the door) unsuspends the waiting Job: the backstop.
    await batch.patch_namespaced_job("second", ns, {"spec": {"suspend": False}})
    (suspended,) = await run.until(
        lambda: decisions(run, second, "Suspended"), "the fold suspends second again"
    )
    assert (suspended.reason, suspended.message, suspended.cluster_queue) == (
        "StartedWithoutAdmission",
        "started without admission",
        ns,
    )

    def suspended_again() -> dict[str, Any] | None:
        seen = changes(run, second)
        ran = next((i for i, o in enumerate(seen) if o["spec"].get("suspend") is False), None)
        if ran is None:
            return None
        return next((o for o in seen[ran:] if o["spec"].get("suspend") is True), None)

    again = await run.until(suspended_again, "second suspended again by the actuator")
    assert again["metadata"]["annotations"][ANN_DECISION_ID] == suspended.id
    message, kind = await until_event(run, second, "Suspended")
    assert (message, kind) == ("started without admission", "Warning")
    assert not decisions(run, second, "Admitted"), "it still waits for the quota"
    assert not decisions(run, first, "Evicted"), "the running Job keeps its admission"
    await asyncio.sleep(1.0)
    assert len(decisions(run, second, "Suspended")) == 1, "its own suspend is not a bypass"
    now = await batch.read_namespaced_job("second", ns)
    assert now.spec.suspend is True

    # 2. The running Job grows: evicted and requeued, charged for the new shape.
    await batch.patch_namespaced_job("first", ns, {"spec": {"parallelism": 2}})
    (evicted,) = await run.until(lambda: decisions(run, first, "Evicted"), "first evicted")
    assert evicted.reason == "PodSetsChanged"
    assert evicted.message is not None and "main: 1 -> 2 pods" in evicted.message
    (requeued,) = decisions(run, first, "Requeued")
    assert requeued.reason == "PodSetsChanged"
    regrown = await run.until(
        lambda: [d for d in decisions(run, first, "Admitted") if d.id != admitted.id],
        "first admitted again",
    )
    assert regrown[0].usage == {ns: {"cpu": "2"}}, "never the old charge"
    assert admitted.usage == {ns: {"cpu": "1"}}

    def restarted() -> dict[str, Any] | None:
        # The re-admission decided with the eviction is for the Job before kuota's
        # stop (suspend, restore: two generations on): refused once (JobChanged),
        # admitted again at the generation the stop left (backstop.md).
        obj = latest(run, first) or {}
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        running = obj.get("spec", {}).get("suspend") is False
        ids = {d.id for d in decisions(run, first, "Admitted") if d.id != admitted.id}
        return obj if running and ann.get(ANN_DECISION_ID) in ids else None

    await run.until(restarted, "first started again with its new admission")
    again = [d for d in decisions(run, first, "Admitted") if d.id != admitted.id]
    assert all(d.usage == {ns: {"cpu": "2"}} for d in again), "never the old charge"
    assert len(again) <= 2, "refused at most once"
    stops = [o for o in changes(run, first) if o["spec"].get("parallelism") == 2]
    assert any(o["spec"].get("suspend") is True for o in stops), "stopped before the restart"
    assert not decisions(run, first, "Suspended"), "kuota's own stop and start are no bypass"
    assert not decisions(run, second, "Admitted"), "second still waits: first holds the quota"
    log = run.pipeline.log_file("actuator").read_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


async def test_a_job_grown_before_its_admission_is_applied_never_runs_at_the_old_size(
    e2e_run: Run,
) -> None:
    run = e2e_run
    launcher = load_launcher()
    ns = f"{run.id}-gr"
    batch = client.BatchV1Api(run.api)
    applied = await kubectl_apply(run, queue_objects(run, ns, cpus=4))
    await wait_journaled(run, applied)
    key = f"{ns}/grow"
    pid = launcher.pids(run.pipeline)["actuator"]
    assert await asyncio.to_thread(launcher._stop_pid, pid, "actuator"), "actuator stopped"
    try:
        await batch.create_namespaced_job(ns, job(run, "grow", 1))
        (first,) = await run.until(lambda: decisions(run, key, "Admitted"), "admitted, 1 pod")
        assert first.usage == {ns: {"cpu": "1"}} and first.generation == 1
        await batch.patch_namespaced_job("grow", ns, {"spec": {"parallelism": 4}})
        (stop,) = await run.until(
            lambda: decisions(run, key, "Evicted"), "evicted: its podsets changed"
        )
        assert stop.reason == "PodSetsChanged"
        # The fold cannot know the old admission was never applied: its quota stays
        # charged until the actuator reports the Job's pods gone (#23 items 2-3).
        assert not [d for d in decisions(run, key, "Admitted") if d.id != first.id]
    finally:
        await asyncio.to_thread(launcher.up, run.pipeline, quiet=True)
    regrown = await run.until(
        lambda: [d for d in decisions(run, key, "Admitted") if d.id != first.id],
        "admitted again for 4 pods",
    )
    assert regrown[0].usage == {ns: {"cpu": "4"}} and regrown[0].generation == 2
    (released,) = decisions(run, key, "QuotaReleased")
    assert released.stop_id == stop.id

    def reported() -> list[ActuationFailed]:
        return [e for _, e in run.journal if isinstance(e, ActuationFailed) and e.workload == key]

    (failed,) = await run.until(reported, "the old admission refused")
    assert (failed.reason, failed.decision_id, failed.generation) == ("JobChanged", first.id, 2)

    def started() -> dict[str, Any] | None:
        return next((o for o in changes(run, key) if o["spec"].get("suspend") is False), None)

    running = await run.until(started, "started on the new admission")
    assert running["metadata"]["annotations"][ANN_DECISION_ID] == regrown[0].id
    assert running["spec"]["parallelism"] == 4
    now = await batch.read_namespaced_job("grow", ns)
    assert now.metadata.annotations[ANN_DECISION_ID] != first.id, "never started on 1 pod"
    assert not decisions(run, key, "Suspended"), "no bypass to catch"
    assert len(decisions(run, key, "Admitted")) == 2, "the refusal of an ended admission is ignored"
