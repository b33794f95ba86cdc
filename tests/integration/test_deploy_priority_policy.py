"""The optional priority policy (deploy/components/priority-policy) on the real apiserver.

#23 item 12: any tenant may label a Job with any WorkloadPriorityClass. The
component's ValidatingAdmissionPolicy lets a namespace's Jobs name only the
classes its Namespace annotation ``kuota.dev/allowed-priority-classes`` lists
(the ``edit`` role cannot update Namespaces: ``test_rbac_team_role.py``).

The component's own ``policy.yaml`` is applied for real, with the policy and
binding renamed for this run and the binding narrowed to this run's
namespaces (the shared stack's other Jobs are never judged by it). Then, on
the apiserver: a Job naming an allowed class is created, one naming another
class is refused with the policy's message, an UPDATE that changes the label
to another class is refused, one that keeps it passes even after the
administrator withdrew the class (kuota's own writes never change the label),
removing the label passes, and a namespace with no annotation may use no
class at all but still runs Jobs that name none. Everything is deleted at the
end. The Component builds with Kustomize.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from test_deploy_manifests import DEPLOY, RUN_LABEL, documents, kubectl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

COMPONENT = DEPLOY / "components" / "priority-policy"
PRIORITY = "kueue.x-k8s.io/priority-class"
ALLOWED = "kuota.dev/allowed-priority-classes"
REFUSED = "is not allowed in namespace"


def policy_documents(run: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """policy.yaml's policy and binding, renamed for ``run``, bound to its namespaces."""
    docs = documents((COMPONENT / "policy.yaml").read_text())
    (policy,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    (binding,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    policy["metadata"]["name"] += f"-{run}"
    binding["metadata"]["name"] += f"-{run}"
    binding["spec"]["policyName"] = policy["metadata"]["name"]
    binding["spec"]["matchResources"]["namespaceSelector"] = {"matchLabels": {RUN_LABEL: run}}
    return policy, binding


def job(name: str, priority: str | None) -> dict[str, Any]:
    labels = {PRIORITY: priority} if priority else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "suspend": True,  # never runs: the test is about admission only
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }


def refusal(err: ApiException) -> str:
    return str(err.body or err.reason)


@pytest.fixture
async def policy(admin: client.ApiClient) -> AsyncIterator[tuple[str, str, str]]:
    """The run's policy and binding applied; (run, granted namespace, bare namespace)."""
    run = uuid.uuid4().hex[:8]
    reg, core = client.AdmissionregistrationV1Api(admin), client.CoreV1Api(admin)
    granted, bare = f"kuota-prio-{run}", f"kuota-prio-none-{run}"
    await core.create_namespace(
        {
            "metadata": {
                "name": granted,
                "labels": {RUN_LABEL: run},
                "annotations": {ALLOWED: f"low-{run}, high-{run}"},
            }
        }
    )
    await core.create_namespace({"metadata": {"name": bare, "labels": {RUN_LABEL: run}}})
    vap, binding = policy_documents(run)
    await reg.create_validating_admission_policy(vap)
    await reg.create_validating_admission_policy_binding(binding)
    try:
        yield run, granted, bare
    finally:
        for delete, name in (
            (reg.delete_validating_admission_policy_binding, binding["metadata"]["name"]),
            (reg.delete_validating_admission_policy, vap["metadata"]["name"]),
            (core.delete_namespace, granted),
            (core.delete_namespace, bare),
        ):
            try:
                await delete(name)
            except ApiException as e:
                if e.status != 404:
                    raise


async def in_force(batch: client.BatchV1Api, namespace: str, priority: str) -> str:
    """Wait until the policy refuses a (dry-run) Job naming ``priority``: the
    apiserver loads a new policy and binding asynchronously. The refusal text."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            await batch.create_namespaced_job(namespace, job("probe", priority), dry_run="All")
        except ApiException as err:
            if REFUSED in refusal(err):
                return refusal(err)
            raise
        await asyncio.sleep(0.2)
    pytest.fail("the policy did not take effect within 30 s")


async def test_a_namespace_may_name_only_the_classes_its_annotation_grants(
    admin: client.ApiClient, policy: tuple[str, str, str]
) -> None:
    run, granted, bare = policy
    batch, core = client.BatchV1Api(admin), client.CoreV1Api(admin)
    text = await in_force(batch, granted, f"top-{run}")
    assert f"WorkloadPriorityClass top-{run} is not allowed in namespace {granted}" in text
    assert f"(allowed: low-{run}, high-{run};" in text, text

    # CREATE: a granted class is admitted, another is refused.
    made = await batch.create_namespaced_job(granted, job("allowed", f"low-{run}"))
    assert made.metadata.labels[PRIORITY] == f"low-{run}"
    with pytest.raises(ApiException) as refused:
        await batch.create_namespaced_job(granted, job("greedy", f"top-{run}"))
    assert refused.value.status in (403, 422) and REFUSED in refusal(refused.value)

    # UPDATE: the label changed to another class is refused, to a granted one passes.
    with pytest.raises(ApiException) as raised:
        await batch.patch_namespaced_job(
            "allowed", granted, {"metadata": {"labels": {PRIORITY: f"top-{run}"}}}
        )
    assert REFUSED in refusal(raised.value)
    await batch.patch_namespaced_job(
        "allowed", granted, {"metadata": {"labels": {PRIORITY: f"high-{run}"}}}
    )

    # The administrator withdraws every class: the Job keeps its label, and a
    # write that does not change it (as kuota's actuator's never do) still passes.
    await core.patch_namespace(granted, {"metadata": {"annotations": {ALLOWED: None}}})
    await in_force(batch, granted, f"high-{run}")
    kept = await batch.patch_namespaced_job(
        "allowed", granted, {"metadata": {"annotations": {"example.com/note": "kept"}}}
    )
    assert kept.metadata.labels[PRIORITY] == f"high-{run}"
    gone = await batch.patch_namespaced_job(
        "allowed", granted, {"metadata": {"labels": {PRIORITY: None}}}
    )
    assert PRIORITY not in (gone.metadata.labels or {})

    # A namespace without the annotation: no class, but a Job naming none runs.
    with pytest.raises(ApiException) as none:
        await batch.create_namespaced_job(bare, job("any", f"low-{run}"))
    assert f"is not allowed in namespace {bare} (allowed: none;" in refusal(none.value)
    plain = await batch.create_namespaced_job(bare, job("plain", None))
    assert plain.metadata.name == "plain"


def test_the_component_builds_with_kustomize(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"components:\n  - {os.path.relpath(COMPONENT, tmp_path)}\n"  # kustomize: relative
    )
    docs = documents(kubectl("kustomize", str(tmp_path)).stdout)
    assert sorted(d["kind"] for d in docs) == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
