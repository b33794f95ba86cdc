"""Helpers of the e2e tests with the stack's operators (#18: PyTorchJob, RayCluster):
a kwok node of the run with GPUs (an extended resource), a ClusterQueue of GPUs
onto it, and the decisions of one workload."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from e2e_hardware import PIPELINE_LABEL
from e2e_objects import labelled
from e2e_pipeline import KUEUE, Run
from kubernetes_asyncio import client

from kuota.events.schema import Decision

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# A device plugin's GPUs (an extended resource on the node): not nvidia.com/gpu, which
# the run's Configuration maps to DRA (deviceClassMappings, e2e_hardware.py).
GPU = "example.com/gpu"
NODE_LABEL = "e2e.kuota.dev/gpu-node"
# kwok completes a pod with restartPolicy OnFailure after 5s (scripts/kube/stages);
# the operator's pods must stay Running while the test looks.
KEEP_RUNNING = {"pod-complete.stage.kwok.x-k8s.io/delay": "8760h"}
HELD = 3.0  # seconds a test watches that nothing happens
PYTORCHJOBS = ("kubeflow.org", "v1", "pytorchjobs")  # group, version, plural
PYTORCHJOB_POD_LABEL = "training.kubeflow.org/job-name"  # on the operator's pods


def gpu_pod(container: str, image: str) -> dict[str, Any]:
    """An operator's pod template: one container asking for one GPU, kept Running."""
    resources = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    return {
        "metadata": {"annotations": dict(KEEP_RUNNING)},
        "spec": {"containers": [{"name": container, "image": image, "resources": resources}]},
    }


def operator_up(var: str = "KUOTA_TRAINING_HEALTH_URL", component: str = "training") -> None:
    """The operator must run on the stack (``make operators``); a failure, no skip."""
    assert os.environ.get(var), f"{var} unset: run `scripts/stack up {component}`"


async def gpu_node(run: Run, name: str) -> str:
    """A kwok node of this run with 8 GPUs, tainted for the flavor's pods only."""
    core = client.CoreV1Api(run.api)
    node = f"{run.id}-{name}"
    await core.create_node(
        {
            "metadata": {
                "name": node,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {
                    PIPELINE_LABEL: run.id,
                    NODE_LABEL: node,
                    "kubernetes.io/hostname": node,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
            "spec": {"taints": [{"key": NODE_LABEL, "value": node, "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"},
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"},
            },
        }
    )
    for _ in range(300):
        n = await core.read_node(node)
        conds = {c.type: c.status for c in n.status.conditions or []}
        if conds.get("Ready") == "True":
            return node
        await asyncio.sleep(0.2)
    pytest.fail(f"kwok node {node} not Ready")


def queue_objects(run: Run, ns: str, node: str, gpus: int) -> list[dict[str, Any]]:
    """Namespace, a flavor onto ``node`` (its label and toleration), a ClusterQueue of
    ``gpus`` GPUs preempting lower priority within it, LocalQueue ``lq``, two classes."""
    api = f"{KUEUE[0]}/{KUEUE[1]}"
    toleration = {"key": NODE_LABEL, "operator": "Equal", "value": node, "effect": "NoSchedule"}
    quota = {"name": GPU, "nominalQuota": gpus}
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": {"name": ns},
            "spec": {"nodeLabels": {NODE_LABEL: node}, "tolerations": [toleration]},
        },
        {
            "apiVersion": api,
            "kind": "ClusterQueue",
            "metadata": {"name": ns},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [{"name": ns, "resources": [quota]}],
                    }
                ],
            },
        },
        {
            "apiVersion": api,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": ns},
            "spec": {"clusterQueue": ns},
        },
    ]
    objs += [
        {"apiVersion": api, "kind": "WorkloadPriorityClass", "metadata": {"name": f"{ns}-{n}"}}
        | {"value": v}
        for n, v in (("low", 10), ("high", 100))
    ]
    return [labelled(run, o) for o in objs]


def decisions(run: Run, key: str, kind: str) -> list[Decision]:
    return [d for _, d in run.decisions if d.workload == key and d.type == kind]


def history(run: Run, key: str) -> str:
    """The workload's decisions so far, for a failure's message."""
    return f"{key}: " + "; ".join(
        f"{d.type} {d.reason or ''} {d.message or ''}".strip()
        for _, d in run.decisions
        if d.workload == key
    )


async def create_pytorchjob(run: Run, ns: str, manifest: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = await client.CustomObjectsApi(
        run.api
    ).create_namespaced_custom_object(*PYTORCHJOBS[:2], ns, PYTORCHJOBS[2], manifest)
    return created


async def get_pytorchjob(run: Run, ns: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await client.CustomObjectsApi(run.api).get_namespaced_custom_object(
        *PYTORCHJOBS[:2], ns, PYTORCHJOBS[2], name
    )
    return got


async def pytorchjob_pods(run: Run, ns: str, name: str) -> list[client.V1Pod]:
    """The training-operator's pods of one PyTorchJob."""
    listed = await client.CoreV1Api(run.api).list_namespaced_pod(
        ns, label_selector=f"{PYTORCHJOB_POD_LABEL}={name}"
    )
    return list(listed.items)
