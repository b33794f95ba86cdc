"""End to end at the API level, JobSets (#18): the four services and the webhook on
the real stack, with kuota's own JobSet CRD (``tests/crds``) and NO JobSet
controller (the Go module proxy serves none): no pod of a JobSet runs here.

A JobSet of two replicatedJobs (``driver`` 1 × 1 GPU, ``workers`` 2 × 1 GPU),
created NOT suspended with the queue label in a ClusterQueue of 3 GPUs: the webhook
stores it suspended (``spec.suspend``), the fold admits it as one gang of both
podsets, and the actuator unsuspends it with the flavor's node selector and
toleration in both Job templates' pod templates. A user may not unsuspend a held
one. Deactivated (``kuota.dev/active: "false"``), it is evicted, suspended with its
templates restored, and its quota is released: with no controller, no status and
no pod, the drains take a suspended JobSet nobody reconciled as stopped.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import QUEUE_LABEL, Run, kubectl_apply, run_fixture, wait_journaled
from e2e_objects import labelled
from e2e_operators import (
    GPU,
    NODE_LABEL,
    PRIORITY_LABEL,
    decisions,
    gpu_node,
    history,
    queue_objects,
)
from kubernetes_asyncio import client

from kuota.events.schema import ObjectUpserted, WorkloadStopped

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
CRD = Path(__file__).resolve().parents[1] / "crds" / "jobset.x-k8s.io_jobsets.yaml"


@pytest.fixture(scope="module", autouse=True)
def jobset_crd(kubeconfig: str) -> None:
    """kuota's JobSet CRD, installed (and Established) before the pipeline starts, so
    ingest's and the actuator's JobSet watches list at once."""
    kubectl = os.environ.get("KUOTA_KUBECTL")
    assert kubectl, "KUOTA_KUBECTL unset: run `scripts/stack up`"
    base = [kubectl, f"--kubeconfig={kubeconfig}"]
    subprocess.run([*base, "apply", "--server-side", "-f", str(CRD)], check=True)
    subprocess.run(
        [*base, "wait", "--for=condition=Established", "--timeout=60s", "crd/jobsets." + GROUP],
        check=True,
    )


e2e_run = run_fixture()


def job_set(run: Run, name: str, *, priority: str) -> dict[str, Any]:
    def rjob(rname: str, replicas: int) -> dict[str, Any]:
        pod = {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": rname,
                    "image": "busybox",
                    "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
                }
            ],
        }
        job = {"parallelism": 1, "completions": 1, "template": {"spec": pod}}
        return {"name": rname, "replicas": replicas, "template": {"spec": job}}

    return labelled(
        run,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "JobSet",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority}},
            "spec": {"replicatedJobs": [rjob("driver", 1), rjob("workers", 2)]},
        },
    )


async def get(run: Run, ns: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(run.api).get_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, name
    )
    return got


def templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [j["template"]["spec"]["template"]["spec"] for j in obj["spec"]["replicatedJobs"]]


async def user_unsuspend(run: Run, ns: str, name: str) -> str:
    """A user (impersonated: the test's own user is kuota's, trusted) sets
    spec.suspend false; kubectl's stderr (it must fail)."""
    proc = await asyncio.create_subprocess_exec(
        run.env["KUOTA_KUBECTL"],
        f"--kubeconfig={run.env['KUBECONFIG']}",
        "--as=tenant",
        "--as-group=system:masters",
        "patch",
        f"{PLURAL}.{GROUP}",
        name,
        "-n",
        ns,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"suspend": False}}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode != 0, "the webhook refuses a user's unsuspend"
    return err.decode()


async def test_a_job_set_is_suspended_gang_admitted_injected_and_restored(e2e_run: Run) -> None:
    run = e2e_run
    ns = f"{run.id}-js"
    node = await gpu_node(run, "gpu-js")
    applied = await kubectl_apply(run, queue_objects(run, ns, node, gpus=3))
    await wait_journaled(run, applied)
    key = f"{ns}/jobset/js"
    objects = client.CustomObjectsApi(run.api)
    created = await objects.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, job_set(run, "js", priority=f"{ns}-low")
    )
    assert created["spec"]["suspend"] is True, "the webhook suspends it"

    (admitted,) = await run.until(
        lambda: decisions(run, key, "Admitted"), lambda: f"js admitted ({history(run, key)})"
    )
    assert (admitted.kind, admitted.api_version) == ("JobSet", "jobset.x-k8s.io/v1alpha2")
    assert admitted.flavors == {"driver": {GPU: ns}, "workers": {GPU: ns}}, "one gang, 2 podsets"

    async def unsuspended() -> dict[str, Any] | None:
        got = await get(run, ns, "js")
        return got if got["spec"].get("suspend") is False else None

    for _ in range(200):
        stored = await unsuspended()
        if stored is not None:
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail(f"the actuator did not unsuspend js ({history(run, key)})")
    for spec in templates(stored):
        assert spec["nodeSelector"] == {NODE_LABEL: node}
        assert [t["key"] for t in spec["tolerations"]] == [NODE_LABEL]

    # deactivated: suspended, templates restored, quota back (no controller, no pod)
    await objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "js",
        {"metadata": {"annotations": {"kuota.dev/active": "false"}}},
        _content_type="application/merge-patch+json",
    )
    (stop,) = await run.until(lambda: decisions(run, key, "Evicted"), "js evicted")
    assert stop.reason == "InactiveWorkload"

    def stopped() -> list[WorkloadStopped]:
        return [e for _, e in run.journal if isinstance(e, WorkloadStopped) and e.workload == key]

    await run.until(stopped, "WorkloadStopped for the JobSet")
    (released,) = await run.until(lambda: decisions(run, key, "QuotaReleased"), "released")
    assert released.stop_id == stop.id, history(run, key)
    assert released.usage == {ns: {GPU: "3"}}
    held = await get(run, ns, "js")
    assert held["spec"]["suspend"] is True
    for spec in templates(held):
        assert "nodeSelector" not in spec and "tolerations" not in spec
    err = await user_unsuspend(run, ns, "js")
    assert "spec.suspend: Forbidden" in err, err
    assert (await get(run, ns, "js"))["spec"]["suspend"] is True
    journaled = [
        e.object
        for _, e in run.journal
        if isinstance(e, ObjectUpserted)
        and e.object.get("kind") == "JobSet"
        and e.object["metadata"]["name"] == "js"
    ]
    assert journaled, "ingest journals the JobSet"
    for obj in journaled:  # the admission's write included: the user's own templates
        assert all("nodeSelector" not in spec for spec in templates(obj)), obj
