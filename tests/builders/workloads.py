"""Manifests of the distributed-training kinds (#18) as plain dicts.

Each pod asks for ``gpus`` whole GPUs (``nvidia.com/gpu``) by default, and the
object names LocalQueue ``queue``. An option left at ``None`` writes no field.
"""

from __future__ import annotations

from typing import Any

from kuota.kinds import QUEUE_NAME_LABEL

GPU = "nvidia.com/gpu"


def pod_template(
    gpus: int = 1, *, cpu: str | None = None, image: str = "busybox"
) -> dict[str, Any]:
    requests: dict[str, Any] = {GPU: gpus} if gpus else {}
    if cpu is not None:
        requests["cpu"] = cpu
    container: dict[str, Any] = {"name": "main", "image": image}
    if requests:
        container["resources"] = {"requests": requests, "limits": dict(requests)}
    return {"spec": {"restartPolicy": "Never", "containers": [container]}}


def _meta(name: str, namespace: str, queue: str | None, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if queue is not None:
        meta["labels"] = {QUEUE_NAME_LABEL: queue}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def pytorch_job(
    name: str,
    *,
    namespace: str = "ns",
    queue: str | None = "lq",
    master: int | None = 1,
    workers: int | None = 3,
    gpus: int = 1,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """A PyTorchJob of one Master (``master`` replicas; ``None``: no Master at all)
    and ``workers`` Workers (``None``: no Worker spec)."""
    replicas: dict[str, Any] = {}
    if master is not None:
        replicas["Master"] = {"replicas": master, "template": pod_template(gpus)}
    if workers is not None:
        replicas["Worker"] = {"replicas": workers, "template": pod_template(gpus)}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": replicas}
    if suspend is not None:
        spec["runPolicy"] = {"suspend": suspend}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": _meta(name, namespace, queue),
        "spec": spec,
    }


def ray_cluster_spec(
    workers: dict[str, int], *, gpus: int = 1, head_gpus: int = 1
) -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": pod_template(head_gpus)},
        "workerGroupSpecs": [
            {"groupName": g, "replicas": n, "template": pod_template(gpus)}
            for g, n in workers.items()
        ],
    }


def ray_cluster(
    name: str,
    *,
    namespace: str = "ns",
    queue: str | None = "lq",
    workers: dict[str, int] | None = None,
    gpus: int = 1,
    head_gpus: int = 1,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """A RayCluster: a head and the worker groups ``workers`` (group -> replicas)."""
    spec = ray_cluster_spec(workers or {"workers": 2}, gpus=gpus, head_gpus=head_gpus)
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": _meta(name, namespace, queue),
        "spec": spec,
    }


def ray_job(
    name: str,
    *,
    namespace: str = "ns",
    queue: str | None = "lq",
    workers: dict[str, int] | None = None,
    gpus: int = 1,
    head_gpus: int = 1,
    mode: str | None = None,
    suspend: bool | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "entrypoint": "python train.py",
        "rayClusterSpec": ray_cluster_spec(
            workers or {"workers": 2}, gpus=gpus, head_gpus=head_gpus
        ),
    }
    if mode is not None:
        spec["submissionMode"] = mode
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": _meta(name, namespace, queue),
        "spec": spec,
    }


def job_set(
    name: str,
    *,
    namespace: str = "ns",
    queue: str | None = "lq",
    jobs: dict[str, tuple[int, int]] | None = None,
    gpus: int = 1,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """A JobSet: replicatedJobs ``jobs`` (name -> (replicas, parallelism))."""
    replicated = [
        {
            "name": n,
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": parallelism,
                    "completions": parallelism,
                    "template": pod_template(gpus),
                }
            },
        }
        for n, (replicas, parallelism) in (jobs or {"leader": (1, 1), "workers": (2, 2)}).items()
    ]
    spec: dict[str, Any] = {"replicatedJobs": replicated}
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _meta(name, namespace, queue),
        "spec": spec,
    }


def leader_worker_set(
    name: str,
    *,
    namespace: str = "ns",
    queue: str | None = "lq",
    replicas: int | None = 2,
    size: int | None = 3,
    leader: bool = True,
    gpus: int = 1,
) -> dict[str, Any]:
    """A LeaderWorkerSet of ``replicas`` groups of ``size`` pods (a leader
    template when ``leader``)."""
    lwt: dict[str, Any] = {"workerTemplate": pod_template(gpus)}
    if size is not None:
        lwt["size"] = size
    if leader:
        lwt["leaderTemplate"] = pod_template(gpus)
    spec: dict[str, Any] = {"leaderWorkerTemplate": lwt}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _meta(name, namespace, queue),
        "spec": spec,
    }


def pod(
    name: str,
    *,
    group: str | None = None,
    total: int | None = None,
    namespace: str = "ns",
    queue: str | None = "lq",
    gpus: int = 1,
    gated: bool = True,
    phase: str | None = None,
) -> dict[str, Any]:
    """A Pod asking for ``gpus`` GPUs, in pod group ``group`` of ``total`` pods
    (``None``: a single Pod), with the admission scheduling gate when ``gated``."""
    meta = _meta(name, namespace, queue)
    if group is not None:
        meta.setdefault("labels", {})["kueue.x-k8s.io/pod-group-name"] = group
    if total is not None:
        meta.setdefault("annotations", {})["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    spec = pod_template(gpus)["spec"]
    if gated:
        spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase is not None:
        out["status"] = {"phase": phase}
    return out
