"""Manifests as plain dicts, the name first and every option keyword-only.

The defaults are the smallest object the fold takes: one ResourceFlavor
``h100``, a ClusterQueue whose one resource group covers ``nvidia.com/gpu`` in
that flavor, a Job with one container that asks for ``gpus`` whole GPUs and
names a LocalQueue. An option left at ``None`` writes no field, so a test that
does not mention a field gets the manifest without it.
"""

from __future__ import annotations

from typing import Any

GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"
CONFIG = "config.kueue.x-k8s.io/v1beta2"
DRA = "resource.k8s.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
CREATED = "kuota.dev/created-at"


def flavor(name: str, *, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ResourceFlavor; ``spec=None`` writes none (``{}`` writes an empty one)."""
    out: dict[str, Any] = {"apiVersion": KUEUE, "kind": "ResourceFlavor"}
    out["metadata"] = {"name": name}
    if spec is not None:
        out["spec"] = spec
    return out


def cluster_queue(
    name: str,
    *,
    gpus: int | tuple[int, int],
    flavor: str = "h100",
    cohort: str | None = None,
    within: str | None = None,
    reclaim: str | None = None,
    borrow: str | None = None,
    threshold: int | None = None,
    weight: str | None = None,
) -> dict[str, Any]:
    """A ClusterQueue of ``gpus`` GPUs (``n`` or ``(nominal, borrowingLimit)``)
    in ``flavor``; ``within`` / ``reclaim`` / ``borrow`` are its preemption
    policies (``threshold`` borrowWithinCohort's maxPriorityThreshold)."""
    nominal, borrowing = gpus if isinstance(gpus, tuple) else (gpus, None)
    quota: dict[str, Any] = {"name": GPU, "nominalQuota": nominal}
    if borrowing is not None:
        quota["borrowingLimit"] = borrowing
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": [GPU], "flavors": [{"name": flavor, "resources": [quota]}]}
        ],
    }
    if cohort:
        spec["cohort"] = cohort
    preemption: dict[str, Any] = {}
    if within:
        preemption["withinClusterQueue"] = within
    if reclaim:
        preemption["reclaimWithinCohort"] = reclaim
    if borrow:
        preemption["borrowWithinCohort"] = {"policy": borrow}
        if threshold is not None:
            preemption["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
    if preemption:
        spec["preemption"] = preemption
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, *, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def priority_class(name: str, *, value: int) -> dict[str, Any]:
    """A WorkloadPriorityClass."""
    return {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def configuration(*, api_version: str = CONFIG, **sections: Any) -> dict[str, Any]:
    """Kueue's Configuration with the given top-level sections
    (``configuration(fairSharing={"enable": True})``)."""
    return {"apiVersion": api_version, "kind": "Configuration", **sections}


def job(
    name: str,
    *,
    namespace: str,
    gpus: int | str,
    queue: str = "lq",
    priority: str | None = None,
    created: float | None = 0.0,
    uid: str | None = None,
    active: bool = True,
    suspend: bool | None = None,
    image: str = "busybox",
) -> dict[str, Any]:
    """A Job asking for ``gpus`` GPUs in one pod, labelled for LocalQueue
    ``queue``; ``created`` is the creation time ingest stamps
    (``kuota.dev/created-at``, 0 unless told; ``None`` writes none),
    ``active=False`` marks it inactive."""
    labels = {QUEUE_LABEL: queue}
    if priority:
        labels[PRIORITY_LABEL] = priority
    annotations: dict[str, str] = {}
    if created is not None:
        annotations[CREATED] = str(created)
    if not active:
        annotations["kuota.dev/active"] = "false"
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {}
    if suspend is not None:
        spec["suspend"] = suspend
    spec["template"] = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": image, "resources": {"requests": {GPU: gpus}}}
            ],
        }
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
