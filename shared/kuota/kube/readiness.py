"""When a watched object is ready and when it has finished, per kind (pure).

Theory of operation: ingest journals ``PodsReady`` on each flip of a kind's
readiness and ``WorkloadFinished`` once per uid (:mod:`kuota.kube.translate`);
this module says what those are, from the object's own status, as Kueue reads
each kind: :data:`STATUS_RULES` (is it ready, which conditions end it, which of
them is a success) and :data:`FINISHED_BY` for a kind whose end is not a
condition. docs/design/ingest.md, docs/design/workload-kinds.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kuota.actuation.plan_workloads import RAY_JOB_FINISHED


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def condition_true(status: Mapping[str, Any], types: tuple[str, ...]) -> Mapping[str, Any] | None:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    for c in conditions:
        if isinstance(c, Mapping) and c.get("type") in types and c.get("status") == "True":
            return c
    return None


def job_pods(spec: Mapping[str, Any]) -> int:
    """Kueue's ``podsCount``: parallelism (default 1) capped by completions."""
    pods = _int(spec.get("parallelism"), 1)
    completions = spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool) and completions < pods:
        pods = completions
    return pods


def job_ready(obj: Mapping[str, Any]) -> bool:
    """Not suspended, and ready + succeeded pods reach the Job's pod count."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if spec.get("suspend") is True:
        return False
    status = obj.get("status")
    status = status if isinstance(status, Mapping) else {}
    # A pod that succeeded but is not counted yet (the Job controller first
    # records it under uncountedTerminatedPods, then in .succeeded) is neither
    # ready nor succeeded for a moment; without it readiness would flicker.
    uncounted = status.get("uncountedTerminatedPods")
    pending = uncounted.get("succeeded") if isinstance(uncounted, Mapping) else None
    counted_soon = len(pending) if isinstance(pending, list) else 0
    done = _int(status.get("succeeded")) + counted_soon
    return _int(status.get("ready")) + done >= job_pods(spec)


def _replicas(value: object) -> int:
    return _int(value.get("replicas"), 1) if isinstance(value, Mapping) else 0


def pytorch_job_ready(obj: Mapping[str, Any]) -> bool:
    """Not suspended, and the training-operator counts every replica of every type
    (``status.replicaStatuses``) active or succeeded."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    policy = spec.get("runPolicy")
    if isinstance(policy, Mapping) and policy.get("suspend") is True:
        return False
    replicas = spec.get("pytorchReplicaSpecs")
    replicas = replicas if isinstance(replicas, Mapping) else {}
    want = sum(_replicas(r) for r in replicas.values())
    status = obj.get("status")
    status = status if isinstance(status, Mapping) else {}
    counted = status.get("replicaStatuses")
    counted = counted if isinstance(counted, Mapping) else {}
    have = 0
    for rtype in replicas:
        rs = counted.get(rtype)
        if isinstance(rs, Mapping):
            have += _int(rs.get("active")) + _int(rs.get("succeeded"))
    return want > 0 and have >= want


def ray_cluster_ready(obj: Mapping[str, Any]) -> bool:
    """Not suspended, and KubeRay says ``status.state: ready`` (the head and every
    worker pod running and ready)."""
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and spec.get("suspend") is True:
        return False
    status = obj.get("status")
    return isinstance(status, Mapping) and status.get("state") == "ready"


def ray_job_ready(obj: Mapping[str, Any]) -> bool:
    """Not suspended, and KubeRay's copy of its cluster's status says ``ready``
    (``status.rayClusterStatus.state``, Kueue's rule). KubeRay copies it only in a
    reconcile that reached the Ray dashboard."""
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and spec.get("suspend") is True:
        return False
    status = obj.get("status")
    cluster = status.get("rayClusterStatus") if isinstance(status, Mapping) else None
    return isinstance(cluster, Mapping) and cluster.get("state") == "ready"


def ray_job_finished(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A RayJob's end as a finished condition would say it: ``type`` Succeeded when
    the Ray job's ``status.jobStatus`` is ``SUCCEEDED`` (Kueue's success), else
    Failed, ``message`` KubeRay's ``status.message`` (or the deployment status);
    None while ``status.jobDeploymentStatus`` is not Complete or Failed."""
    status = obj.get("status")
    status = status if isinstance(status, Mapping) else {}
    deployment = status.get("jobDeploymentStatus")
    if deployment not in RAY_JOB_FINISHED:
        return None
    succeeded = status.get("jobStatus") == "SUCCEEDED"
    return {
        "type": "Succeeded" if succeeded else "Failed",
        "message": _str(status.get("message")) or f"jobDeploymentStatus {deployment}",
    }


def job_set_ready(obj: Mapping[str, Any]) -> bool:
    """Not suspended, and the JobSet controller counts, for every replicatedJob,
    all its Jobs (``replicas``) ready or succeeded in ``status.replicatedJobsStatus``
    (a child Job is ready when all its pods are)."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if spec.get("suspend") is True:
        return False
    jobs = spec.get("replicatedJobs")
    jobs = [j for j in jobs if isinstance(j, Mapping)] if isinstance(jobs, list) else []
    status = obj.get("status")
    status = status if isinstance(status, Mapping) else {}
    counted = status.get("replicatedJobsStatus")
    by_name = (
        {c.get("name"): c for c in counted if isinstance(c, Mapping)}
        if isinstance(counted, list)
        else {}
    )
    if not jobs:
        return False
    for job in jobs:
        c = by_name.get(job.get("name"))
        if c is None or _int(c.get("ready")) + _int(c.get("succeeded")) < _replicas(job):
            return False
    return True


#: Each status kind: (is it ready, the condition types that finish it, the one of
#: them that is a success).
STATUS_RULES = {
    "Job": (job_ready, ("Complete", "Failed"), "Complete"),
    "PyTorchJob": (pytorch_job_ready, ("Succeeded", "Failed"), "Succeeded"),
    "RayCluster": (ray_cluster_ready, (), ""),  # a RayCluster never finishes by itself
    # a RayJob finishes by its jobDeploymentStatus, not a condition: _FINISHED
    "RayJob": (ray_job_ready, (), "Succeeded"),
    "JobSet": (job_set_ready, ("Completed", "Failed"), "Completed"),
}


#: The kinds whose end is not a status condition: how it is read instead.
FINISHED_BY = {"RayJob": ray_job_finished}
