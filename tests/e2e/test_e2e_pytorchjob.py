"""End to end, PyTorchJobs (#18): the four services and the webhook on the real stack
(kube-apiserver, kwok, Kafka, Redis) with the real Kubeflow training-operator
v1.8.1 (the stack's ``training`` component), one pipeline for the module.

1. A PyTorchJob of 1 master + 3 workers, 1 GPU each, created NOT suspended with the
   queue label in a ClusterQueue of 4 GPUs: the webhook stores it suspended
   (``spec.runPolicy.suspend``), the fold admits it as one gang (both podsets),
   the actuator unsuspends it with the flavor's node selector and toleration in
   both templates, the operator makes 4 pods that run together on the GPU node,
   and ingest journals PodsReady from the PyTorchJob's replicaStatuses.
   A higher-priority PyTorchJob (1 + 1) then preempts it: the actuator suspends
   it (templates restored), the operator deletes its pods, and only once they
   are gone is its quota released (WorkloadStopped, QuotaReleased) and the
   preemptor admitted and run.
2. A 1 + 4 PyTorchJob in a ClusterQueue of 4 GPUs is never partially admitted:
   Inadmissible with a reason that names the 5 GPUs, no pod made, still
   suspended; a user's unsuspend is refused by the webhook.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from e2e_harness import QUEUE_LABEL, Run, kubectl_apply, run_fixture, wait_journaled
from e2e_objects import labelled
from e2e_operators import (
    GPU,
    HELD,
    NODE_LABEL,
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
from kubernetes_asyncio.client.exceptions import ApiException

from kuota.events.schema import PodsReady, WorkloadStopped

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()


def pytorchjob(run: Run, name: str, workers: int, *, priority: str) -> dict[str, Any]:
    """1 master + ``workers`` workers, 1 GPU each, NOT suspended (the webhook does it)."""

    def replica(n: int) -> dict[str, Any]:
        return {
            "replicas": n,
            "restartPolicy": "OnFailure",
            # "pytorch": the operator's default container name
            "template": gpu_pod("pytorch", "registry.k8s.io/pause:3.10"),
        }

    return labelled(
        run,
        {
            "apiVersion": "/".join(PYTORCHJOBS[:2]),
            "kind": "PyTorchJob",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority}},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
        },
    )


async def all_running(run: Run, ns: str, name: str, count: int) -> list[client.V1Pod]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        got = await pytorchjob_pods(run, ns, name)
        if len(got) == count and all(p.status.phase == "Running" for p in got):
            return got
        await asyncio.sleep(0.3)
    got = await pytorchjob_pods(run, ns, name)
    pytest.fail(f"{ns}/{name}: want {count} pods Running, have {[p.status.phase for p in got]}")


def templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    specs = obj["spec"]["pytorchReplicaSpecs"]
    return {rtype: specs[rtype]["template"]["spec"] for rtype in specs}


async def test_a_gang_runs_together_and_its_preemption_waits_for_its_pods(
    e2e_run: Run,
) -> None:
    operator_up()
    run = e2e_run
    ns = f"{run.id}-pt"
    node = await gpu_node(run, "gpu-a")
    applied = await kubectl_apply(run, queue_objects(run, ns, node, gpus=4))
    await wait_journaled(run, applied)
    gang = f"{ns}/pytorchjob/gang"

    created = await create_pytorchjob(run, ns, pytorchjob(run, "gang", 3, priority=f"{ns}-low"))
    assert created["spec"]["runPolicy"]["suspend"] is True, "the webhook suspends it"

    (admitted,) = await run.until(
        lambda: decisions(run, gang, "Admitted"), lambda: f"gang admitted ({history(run, gang)})"
    )
    assert (admitted.kind, admitted.api_version) == ("PyTorchJob", "kubeflow.org/v1")
    assert admitted.flavors == {"master": {GPU: ns}, "worker": {GPU: ns}}
    running = await all_running(run, ns, "gang", 4)
    assert {p.spec.node_name for p in running} == {node}, "together on the flavor's node"
    stored = await get_pytorchjob(run, ns, "gang")
    assert stored["spec"]["runPolicy"]["suspend"] is False
    for rtype, spec in templates(stored).items():
        assert spec["nodeSelector"] == {NODE_LABEL: node}, rtype
        assert [t["key"] for t in spec["tolerations"]] == [NODE_LABEL], rtype

    def ready() -> list[PodsReady]:
        return [
            e for _, e in run.journal if isinstance(e, PodsReady) and e.workload == gang and e.ready
        ]

    await run.until(ready, "PodsReady of the gang, from its replicaStatuses")

    # A higher-priority PyTorchJob preempts it; its quota returns once its pods are gone.
    urgent = f"{ns}/pytorchjob/urgent"
    await create_pytorchjob(run, ns, pytorchjob(run, "urgent", 1, priority=f"{ns}-high"))
    (preempted,) = await run.until(lambda: decisions(run, gang, "Preempted"), "gang preempted")
    assert preempted.preemptor == urgent

    def stopped() -> list[WorkloadStopped]:
        return [e for _, e in run.journal if isinstance(e, WorkloadStopped) and e.workload == gang]

    (report,) = await run.until(stopped, "WorkloadStopped for the gang")
    assert report.decision_id == preempted.id
    left = [
        (p.metadata.name, p.status.phase, p.metadata.deletion_timestamp)
        for p in await pytorchjob_pods(run, ns, "gang")
        if p.status.phase not in ("Succeeded", "Failed")  # a done pod holds nothing
    ]
    assert not left, "reported only once the operator deleted them"
    (released,) = await run.until(lambda: decisions(run, gang, "QuotaReleased"), "released")
    assert released.stop_id == preempted.id and released.usage == {ns: {GPU: "4"}}
    (urgent_admitted,) = await run.until(
        lambda: decisions(run, urgent, "Admitted"), "urgent admitted"
    )
    order = [d.id for _, d in run.decisions]
    assert order.index(released.id) < order.index(urgent_admitted.id)
    await all_running(run, ns, "urgent", 2)
    stopped_gang = await get_pytorchjob(run, ns, "gang")
    assert stopped_gang["spec"]["runPolicy"]["suspend"] is True
    for rtype, spec in templates(stopped_gang).items():
        assert "nodeSelector" not in spec and "tolerations" not in spec, f"{rtype} restored"


async def test_a_gang_too_big_is_never_partly_admitted_nor_unsuspended_by_a_user(
    e2e_run: Run,
) -> None:
    operator_up()
    run = e2e_run
    ns = f"{run.id}-big"
    node = await gpu_node(run, "gpu-b")
    applied = await kubectl_apply(run, queue_objects(run, ns, node, gpus=4))
    await wait_journaled(run, applied)
    big = f"{ns}/pytorchjob/big"
    await create_pytorchjob(run, ns, pytorchjob(run, "big", 4, priority=f"{ns}-low"))
    (why, *_) = await run.until(lambda: decisions(run, big, "Inadmissible"), "big inadmissible")
    text = f"{why.reason}: {why.message}"
    assert "5" in text and GPU in text, text
    # a user (impersonated: the test's own user is kuota's, trusted) may not start it
    patch = {"spec": {"runPolicy": {"suspend": False}}}
    proc = await asyncio.create_subprocess_exec(
        run.env["KUOTA_KUBECTL"],
        f"--kubeconfig={run.env['KUBECONFIG']}",
        "--as=tenant",
        "--as-group=system:masters",
        "patch",
        "pytorchjob",
        "big",
        "-n",
        ns,
        "--type=merge",
        "-p",
        json.dumps(patch),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode != 0, "the webhook refuses a user's unsuspend"
    assert "spec.runPolicy.suspend: Forbidden" in err.decode(), err.decode()
    for _ in range(int(HELD / 0.5)):
        assert not await pytorchjob_pods(run, ns, "big"), "no pod of a gang that does not fit"
        assert (await get_pytorchjob(run, ns, "big"))["spec"]["runPolicy"]["suspend"] is True
        assert not decisions(run, big, "Admitted")
        await asyncio.sleep(0.5)
    with pytest.raises(ApiException):
        await client.CoreV1Api(run.api).read_namespaced_pod("big-master-0", ns)
