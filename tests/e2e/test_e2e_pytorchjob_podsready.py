"""End to end, WaitForPodsReady for a PyTorchJob (#18): the four services and the
webhook on the real stack with the real Kubeflow training-operator v1.8.1, in a
pipeline whose Configuration has ``waitForPodsReady`` (timeout 6 s, one requeue
after a 1 s backoff).

A PyTorchJob of 1 master + 2 workers whose workers can never be scheduled (their
template asks for a node label no node has) is admitted as one gang; its master
runs, its workers stay Pending, so the operator's ``replicaStatuses`` never count
every replica active and ingest never journals it ready. After the timeout the
fold evicts it (``PodsReadyTimeout``): the actuator suspends it, the operator
deletes its pods, its quota is released once they are gone; it is admitted again
after the backoff, times out again, and is deactivated
(``RequeuingLimitExceeded``), suspended for good with its quota back.
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
    PRIORITY_LABEL,
    PYTORCHJOBS,
    create_pytorchjob,
    decisions,
    get_pytorchjob,
    gpu_node,
    gpu_pod,
    history,
    operator_up,
    pytorchjob_pods,
    queue_objects,
)
from kubernetes_asyncio import client

from kuota.events.schema import PodsReady

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

TIMEOUT_S = 6
e2e_run = run_fixture(
    {
        "waitForPodsReady": {
            "timeout": f"{TIMEOUT_S}s",
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffLimitCount": 1,
                "backoffBaseSeconds": 1,
                "backoffMaxSeconds": 10,
            },
        }
    }
)
NOWHERE = {"e2e.kuota.dev/nowhere": "true"}  # no node has it: the workers stay Pending


def stuck_pytorchjob(run: Run, name: str, *, priority: str) -> dict[str, Any]:
    master = gpu_pod("pytorch", "registry.k8s.io/pause:3.10")
    worker = gpu_pod("pytorch", "registry.k8s.io/pause:3.10")
    worker["spec"]["nodeSelector"] = dict(NOWHERE)
    return labelled(
        run,
        {
            "apiVersion": "/".join(PYTORCHJOBS[:2]),
            "kind": "PyTorchJob",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority}},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": master},
                    "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": worker},
                }
            },
        },
    )


async def live_pods(run: Run, ns: str, name: str) -> list[client.V1Pod]:
    done = ("Succeeded", "Failed")
    return [p for p in await pytorchjob_pods(run, ns, name) if p.status.phase not in done]


async def phases_when_started(run: Run, ns: str, name: str) -> dict[str, str]:
    """Pod name -> phase once the operator has made all three pods."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = await live_pods(run, ns, name)
        if len(got) == 3 and any(p.status.phase == "Running" for p in got):
            return {p.metadata.name: p.status.phase for p in got}
        await asyncio.sleep(0.3)
    pytest.fail(f"{ns}/{name}: 3 pods, the master Running, not seen within 60s")


async def test_a_pytorchjob_whose_workers_never_get_ready_is_evicted_then_deactivated(
    e2e_run: Run,
) -> None:
    operator_up()
    run = e2e_run
    ns = f"{run.id}-ready"
    node = await gpu_node(run, "gpu-r")
    applied = await kubectl_apply(run, queue_objects(run, ns, node, gpus=4))
    await wait_journaled(run, applied)
    key = f"{ns}/pytorchjob/stuck"
    manifest = stuck_pytorchjob(run, "stuck", priority=f"{ns}-low")
    await create_pytorchjob(run, ns, manifest)

    (first,) = await run.until(
        lambda: decisions(run, key, "Admitted")[:1], lambda: f"admitted ({history(run, key)})"
    )
    assert first.flavors == {"master": {GPU: ns}, "worker": {GPU: ns}}
    phases = await phases_when_started(run, ns, "stuck")
    assert sorted(phases.values()) == ["Pending", "Pending", "Running"], phases

    (evicted, *_) = await run.until(
        lambda: decisions(run, key, "Evicted"), lambda: f"evicted ({history(run, key)})"
    )
    assert evicted.reason == "PodsReadyTimeout", history(run, key)
    assert evicted.kind == "PyTorchJob"
    assert not [
        e for _, e in run.journal if isinstance(e, PodsReady) and e.workload == key and e.ready
    ], "never ready: its workers never ran"
    # the actuator suspended it, the operator deleted its pods, then the quota went back
    (released, *_) = await run.until(
        lambda: [d for d in decisions(run, key, "QuotaReleased") if d.stop_id == evicted.id],
        lambda: f"quota released after the eviction ({history(run, key)})",
    )
    assert released.usage == {ns: {GPU: "3"}}
    # admitted again after the 1 s backoff; the second timeout deactivates it
    await run.until(
        lambda: decisions(run, key, "Admitted")[1:], lambda: f"re-admitted ({history(run, key)})"
    )
    (deactivated,) = await run.until(
        lambda: decisions(run, key, "Deactivated"), lambda: f"deactivated ({history(run, key)})"
    )
    assert deactivated.reason == "RequeuingLimitExceeded", history(run, key)
    assert [d.reason for d in decisions(run, key, "Evicted")] == ["PodsReadyTimeout"]
    order = [d.id for _, d in run.decisions]
    assert order.index(released.id) < order.index(decisions(run, key, "Admitted")[1].id), (
        "admitted again only once the first run's pods were gone"
    )

    async def suspended_and_empty() -> bool:
        obj = await get_pytorchjob(run, ns, "stuck")
        return obj["spec"]["runPolicy"]["suspend"] is True and not await live_pods(run, ns, "stuck")

    deadline = time.monotonic() + 60
    while not await suspended_and_empty():
        assert time.monotonic() < deadline, "a deactivated PyTorchJob is suspended, pods gone"
        await asyncio.sleep(0.3)
    (last,) = await run.until(
        lambda: [d for d in decisions(run, key, "QuotaReleased") if d.stop_id == deactivated.id],
        lambda: f"quota released after the deactivation ({history(run, key)})",
    )
    assert last.usage == {ns: {GPU: "3"}}
    assert not decisions(run, key, "Admitted")[2:], "deactivated: never admitted again"
