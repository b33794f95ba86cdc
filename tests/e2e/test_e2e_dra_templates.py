"""End to end, a ResourceClaimTemplate swapped under an admitted Job (#23 item 4): the
four services on the real stack, pods on the run's kwok nodes with DRA devices
allocated by kube-scheduler, one pipeline for the module.

A Job of one pod at a time, each pod claiming one whole GPU through its
namespace's template, is admitted charged ``whole-gpus: 1`` and runs. The
tenant deletes the template: the Job keeps its admission (no pod can be made
without the template). The tenant recreates it asking for two GPUs: the fold
stops the Job (``Evicted`` + ``Requeued``, reason ``ClaimTemplateChanged``,
the message naming the template and the growth) and admits it again charged
two GPUs, and the actuator starts it on that admission.
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
    run_fixture,
    wait_journaled,
)
from e2e_objects import labelled, one_flavor_queue
from kubernetes_asyncio import client

from kuota.actuation.patch import ANN_DECISION_ID
from kuota.events.schema import Decision, ObjectDeleted

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()
TEMPLATE = "whole-gpu"


def template(run: Run, ns: str, devices: int) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": f"wgpu-{run.id}", "count": devices}}
    return labelled(
        run,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": TEMPLATE, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        },
    )


def queue_objects(run: Run, ns: str, gpus: int) -> list[dict[str, Any]]:
    return one_flavor_queue(run, ns, "whole-gpus", gpus)


def gpu_job(run: Run, name: str) -> dict[str, Any]:
    """One pod at a time (of 4 completions), each claiming from TEMPLATE; kwok keeps
    the pods running."""
    return labelled(
        run,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq"}},
            "spec": {
                "suspend": True,
                "backoffLimit": 0,
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
                                "resources": {"claims": [{"name": "gpu"}]},
                            }
                        ],
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
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


async def test_a_template_recreated_with_more_devices_stops_the_admitted_job(
    e2e_run: Run,
) -> None:
    run = e2e_run
    ns = f"{run.id}-swap"
    key = f"{ns}/swap"
    applied = await kubectl_apply(run, [*queue_objects(run, ns, gpus=4), template(run, ns, 1)])
    await wait_journaled(run, applied)
    batch = client.BatchV1Api(run.api)
    resource = client.ResourceV1Api(run.api)
    await batch.create_namespaced_job(ns, gpu_job(run, "swap"))
    (first,) = await run.until(lambda: decisions(run, key, "Admitted"), "admitted, one GPU")
    assert first.usage == {ns: {"whole-gpus": "1"}}

    def running() -> dict[str, Any] | None:
        seen = changes(run, key)
        obj = seen[-1] if seen else {}
        return obj if (obj.get("status") or {}).get("active") else None

    await run.until(running, "the Job runs on its one-GPU admission")

    # 1. The template is deleted: no pod can be made without it; the charge stays.
    await resource.delete_namespaced_resource_claim_template(TEMPLATE, ns)

    def deleted() -> bool:
        return any(
            isinstance(e, ObjectDeleted)
            and (e.kind, e.namespace, e.name) == ("ResourceClaimTemplate", ns, TEMPLATE)
            for _, e in run.journal
        )

    await run.until(deleted, "ingest journals the template's delete")
    await asyncio.sleep(1.0)
    assert not decisions(run, key, "Evicted"), "a deleted template keeps the admission"

    # 2. Recreated asking for two GPUs per pod: stopped, requeued, charged two.
    await resource.create_namespaced_resource_claim_template(ns, template(run, ns, 2))
    (evicted,) = await run.until(lambda: decisions(run, key, "Evicted"), "the Job is stopped")
    assert evicted.reason == "ClaimTemplateChanged"
    assert evicted.message is not None
    assert f"ResourceClaimTemplate {ns}/{TEMPLATE} changed" in evicted.message
    assert "podset main: whole-gpus 1 -> 2" in evicted.message
    (requeued,) = decisions(run, key, "Requeued")
    assert requeued.reason == "ClaimTemplateChanged"
    again = await run.until(
        lambda: [d for d in decisions(run, key, "Admitted") if d.id != first.id],
        "admitted again",
    )
    assert all(d.usage == {ns: {"whole-gpus": "2"}} for d in again), "never the old charge"

    def restarted() -> dict[str, Any] | None:
        ids = {d.id for d in decisions(run, key, "Admitted") if d.id != first.id}
        for obj in reversed(changes(run, key)):
            ann = (obj.get("metadata") or {}).get("annotations") or {}
            if obj["spec"].get("suspend") is False and ann.get(ANN_DECISION_ID) in ids:
                return obj
        return None

    await run.until(restarted, "started again on the two-GPU admission")
    stopped = [o for o in changes(run, key) if o["spec"].get("suspend") is True]
    assert stopped, "the actuator suspended the Job before its restart"
    assert not decisions(run, key, "Suspended"), "kuota's own stop and start are no bypass"
