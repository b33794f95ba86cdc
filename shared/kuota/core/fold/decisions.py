"""The decisions the fold emits, one typed builder per kind.

Theory of operation: every decision the fold emits is built here, by a
keyword-only function named after its type (``admitted``, ``inadmissible``,
...), so mypy checks each field's name and type at every emission site. A
builder returns the decision's fields as a dict, without the four fields
``Fold.apply`` adds to every decision of an event (``id``, ``cause``,
``cause_offset``, ``at``), which ``kuota.events.schema.trusted_decision`` then
turns into a :class:`~kuota.events.schema.Decision` without validating. A field
a builder takes as ``None``-for-absent is left out of the dict (it is not in
the Decision's ``model_fields_set``), exactly as the fold always emitted it.
``tests/unit/core/test_fold_decisions.py`` validates each builder's output
against the schema. :func:`identify`, which ``Fold.apply`` calls on every
decision, adds ``kind`` and ``api_version`` (docs/design/workload-identity.md).
"""

from __future__ import annotations

from typing import Any

from kuota.kinds import find as find_kind
from kuota.kinds import workload_identity


def admitted(
    *,
    workload: str,
    uid: str,
    cluster_queue: str,
    flavors: dict[str, dict[str, str]],
    usage: dict[str, dict[str, str]],
    victims: list[str] | None = None,
    generation: int | None = None,
    nodes: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Quota reserved: ``flavors`` podset -> resource -> flavor, ``usage``
    flavor -> resource -> quantity; ``victims`` when it preempted (maps shared
    between admissions are copied by ``trusted_decision``); ``generation``, the
    Job's ``metadata.generation`` decided on, when its manifest has one (the
    actuator starts the Job only at it)."""
    d: dict[str, Any] = {
        "type": "Admitted",
        "workload": workload,
        "uid": uid,
        "cluster_queue": cluster_queue,
        "flavors": flavors,
        "usage": usage,
    }
    if victims is not None:
        d["victims"] = victims
    if generation is not None:
        d["generation"] = generation
    if nodes is not None:
        d["nodes"] = nodes
    return d


def inadmissible(
    *, workload: str, uid: str, cluster_queue: str | None, reason: str, message: str
) -> dict[str, Any]:
    """The workload cannot be admitted now, and why."""
    return {
        "type": "Inadmissible",
        "workload": workload,
        "uid": uid,
        "cluster_queue": cluster_queue,
        "reason": reason,
        "message": message,
    }


def preempted(
    *,
    workload: str,
    uid: str,
    cluster_queue: str | None,
    reason: str,
    message: str,
    preemptor: str,
    policy: str,
) -> dict[str, Any]:
    """Evicted to make room for ``preemptor``; ``policy`` allowed it."""
    return {
        "type": "Preempted",
        "workload": workload,
        "uid": uid,
        "cluster_queue": cluster_queue,
        "reason": reason,
        "message": message,
        "preemptor": preemptor,
        "policy": policy,
    }


def evicted(
    *,
    workload: str,
    uid: str,
    cluster_queue: str | None,
    reason: str,
    message: str,
    requeue_at: float | None = None,
) -> dict[str, Any]:
    """The admission ended for a cause other than preemption; ``requeue_at``
    when the workload waits out a backoff first (PodsReadyTimeout)."""
    d: dict[str, Any] = {
        "type": "Evicted",
        "workload": workload,
        "uid": uid,
        "cluster_queue": cluster_queue,
        "reason": reason,
        "message": message,
    }
    if requeue_at is not None:
        d["requeue_at"] = requeue_at
    return d


def requeued(*, workload: str, uid: str, cluster_queue: str | None, reason: str) -> dict[str, Any]:
    """Back in its queue after an eviction, a preemption or a backoff."""
    return {
        "type": "Requeued",
        "workload": workload,
        "uid": uid,
        "cluster_queue": cluster_queue,
        "reason": reason,
    }


def finished(
    *, workload: str, uid: str, cluster_queue: str | None, reason: str, message: str
) -> dict[str, Any]:
    """The Job finished (Succeeded, Failed) or was deleted (Deleted)."""
    return {
        "type": "Finished",
        "workload": workload,
        "uid": uid,
        "cluster_queue": cluster_queue,
        "reason": reason,
        "message": message,
    }


def deactivated(
    *, workload: str, uid: str, reason: str, message: str, cluster_queue: str | None = None
) -> dict[str, Any]:
    """Taken out of queueing; ``cluster_queue`` when it was deactivated out of
    an admission (RequeuingLimitExceeded), left out for a pending workload."""
    d: dict[str, Any] = {"type": "Deactivated", "workload": workload, "uid": uid}
    if cluster_queue is not None:
        d["cluster_queue"] = cluster_queue
    d["reason"] = reason
    d["message"] = message
    return d


STARTED_WITHOUT_ADMISSION = "StartedWithoutAdmission"


def suspended(
    *,
    workload: str,
    uid: str,
    cluster_queue: str | None,
    reason: str = STARTED_WITHOUT_ADMISSION,
    message: str = "started without admission",
) -> dict[str, Any]:
    """A managed Job was seen not suspended while it holds no admission (the
    backstop, docs/design/backstop.md): the actuator suspends it again; the
    workload stays where it was."""
    return {
        "type": "Suspended",
        "workload": workload,
        "uid": uid,
        "cluster_queue": cluster_queue,
        "reason": reason,
        "message": message,
    }


def rejected(*, object: str, reason: str, message: str) -> dict[str, Any]:
    """An observed object failed validation (``object``: ``Kind namespace/name``)."""
    return {"type": "Rejected", "object": object, "reason": reason, "message": message}


def quota_changed(
    *, cluster_queue: str, cohort: str | None, quota: dict[str, dict[str, dict[str, str]]]
) -> dict[str, Any]:
    """A ClusterQueue's cohort and quota (flavor -> resource -> limits as
    quantities) took effect."""
    return {
        "type": "QuotaChanged",
        "cluster_queue": cluster_queue,
        "object": f"ClusterQueue {cluster_queue}",
        "cohort": cohort,
        "quota": quota,
    }


def quota_deleted(*, cluster_queue: str) -> dict[str, Any]:
    """The QuotaChanged of a deleted ClusterQueue: no quota any more."""
    return {
        "type": "QuotaChanged",
        "cluster_queue": cluster_queue,
        "object": f"ClusterQueue {cluster_queue}",
        "reason": "Deleted",
        "message": f"ClusterQueue {cluster_queue} was deleted",
    }


def quota_released(
    *,
    workload: str,
    uid: str,
    cluster_queue: str,
    usage: dict[str, dict[str, str]],
    stop_id: str,
    message: str,
    reason: str = "PodsGone",
) -> dict[str, Any]:
    """The pods of a stopped workload are gone: the ``usage`` kept for them since
    the stop decision ``stop_id`` is released (docs/design/quota-until-pods-gone.md).
    ``NotStarted``: the stop of an admission the actuator never wrote, released with it."""
    return {
        "type": "QuotaReleased",
        "workload": workload,
        "uid": uid,
        "cluster_queue": cluster_queue,
        "usage": usage,
        "reason": reason,
        "message": message,
        "stop_id": stop_id,
    }


def identify(d: dict[str, Any]) -> None:
    """Set the decision's ``kind`` and ``api_version``: its workload's, else its
    object's (``Kind ns/name`` of a Rejected, ``ClusterQueue name`` of a QuotaChanged)."""
    workload = d.get("workload")
    if workload is not None:
        identity = workload_identity(workload)
        if identity is not None:
            d["kind"], d["api_version"] = identity
        return
    obj = d.get("object")
    if obj:
        kind = obj.partition(" ")[0]
        if kind:
            d["kind"] = kind
            known = find_kind(kind)
            if known is not None and known.served:
                d["api_version"] = known.api_version


def local_queue_usage(
    *,
    object: str,
    cluster_queue: str,
    consumed: dict[str, str],
    weighted_usage: float | None,
) -> dict[str, Any]:
    """Admission fair sharing sampled a LocalQueue (``object``: ``LocalQueue
    namespace/name``): its decayed ``consumed`` resources and the usage that
    orders its workloads (None: weight 0, always last). The LocalQueue status's
    ``fairSharing``."""
    return {
        "type": "LocalQueueUsage",
        "object": object,
        "cluster_queue": cluster_queue,
        "consumed": consumed,
        "weighted_usage": weighted_usage,
    }
