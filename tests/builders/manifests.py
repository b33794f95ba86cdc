"""Manifests as plain dicts, the name first and every option keyword-only.

The defaults are the smallest object the fold takes: one ResourceFlavor
``h100``, a ClusterQueue whose one resource group covers ``nvidia.com/gpu`` in
that flavor, a Job with one container that asks for ``gpus`` whole GPUs and
names a LocalQueue. An option left at ``None`` writes no field, so a test that
does not mention a field gets the manifest without it; ``resource_version``
writes ``metadata.resourceVersion`` (what ingest journals), and the DRA kinds
(DeviceClass, ResourceClaimTemplate, ResourceClaim, ResourceSlice) are written
the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kuota.kinds import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL

GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"
CONFIG = "config.kueue.x-k8s.io/v1beta2"
DRA = "resource.k8s.io/v1"
GPU_DRIVER = "gpu.nvidia.com"
QUEUE_LABEL = QUEUE_NAME_LABEL
PRIORITY_LABEL = PRIORITY_CLASS_LABEL
CREATED = "kuota.dev/created-at"


def _meta(
    name: str, *, namespace: str | None = None, resource_version: str | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    return meta


def quota(resource: str, nominal: Any, *, borrowing: Any = None) -> dict[str, Any]:
    """One resource of a flavor in a resource group (``borrowingLimit`` when given)."""
    out: dict[str, Any] = {"name": resource, "nominalQuota": nominal}
    if borrowing is not None:
        out["borrowingLimit"] = borrowing
    return out


def resource_group(flavor: str, quotas: list[dict[str, Any]]) -> dict[str, Any]:
    """One resource group: the resources of ``quotas``, all in one flavor."""
    covered = [q["name"] for q in quotas]
    return {"coveredResources": covered, "flavors": [{"name": flavor, "resources": quotas}]}


def flavor(
    name: str, *, spec: dict[str, Any] | None = None, resource_version: str | None = None
) -> dict[str, Any]:
    """A ResourceFlavor; ``spec=None`` writes none (``{}`` writes an empty one)."""
    out: dict[str, Any] = {"apiVersion": KUEUE, "kind": "ResourceFlavor"}
    out["metadata"] = _meta(name, resource_version=resource_version)
    if spec is not None:
        out["spec"] = spec
    return out


def cluster_queue(
    name: str,
    *,
    gpus: int | str | tuple[Any, Any] | None = None,
    quotas: Mapping[str, Any] | None = None,
    flavor: str = "h100",
    cohort: str | None = None,
    cohort_field: str = "cohort",
    within: str | None = None,
    reclaim: str | None = None,
    borrow: str | None = None,
    threshold: int | None = None,
    weight: str | None = None,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """A ClusterQueue of ``gpus`` GPUs (``n`` or ``(nominal, borrowingLimit)``),
    or of ``quotas`` (resource -> nominalQuota), in ``flavor``; ``cohort`` is
    written as ``spec.<cohort_field>`` (``cohort`` or v1beta2's ``cohortName``);
    ``within`` / ``reclaim`` / ``borrow`` are its preemption policies
    (``threshold`` borrowWithinCohort's maxPriorityThreshold)."""
    rows: list[dict[str, Any]] = []
    if gpus is not None:
        nominal, borrowing = gpus if isinstance(gpus, tuple) else (gpus, None)
        rows.append(quota(GPU, nominal, borrowing=borrowing))
    rows += [quota(r, q) for r, q in (quotas or {}).items()]
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [resource_group(flavor, rows)],
    }
    if cohort:
        spec[cohort_field] = cohort
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
    meta = _meta(name, resource_version=resource_version)
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": meta, "spec": spec}


def cohort(
    name: str,
    *,
    parent: str | None = None,
    quotas: Mapping[str, Any] | None = None,
    flavor: str = "h100",
) -> dict[str, Any]:
    """A Cohort, under ``parent`` when given, with ``quotas`` (resource ->
    nominalQuota) in ``flavor`` when given."""
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if quotas:
        spec["resourceGroups"] = [resource_group(flavor, [quota(r, q) for r, q in quotas.items()])]
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(
    name: str, *, namespace: str, cluster_queue: str, resource_version: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": _meta(name, namespace=namespace, resource_version=resource_version),
        "spec": {"clusterQueue": cluster_queue},
    }


def priority_class(name: str, *, value: int, resource_version: str | None = None) -> dict[str, Any]:
    """A WorkloadPriorityClass."""
    return {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": _meta(name, resource_version=resource_version),
        "value": value,
    }


def namespace(name: str, *, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def configuration(*, api_version: str = CONFIG, **sections: Any) -> dict[str, Any]:
    """Kueue's Configuration with the given top-level sections
    (``configuration(fairSharing={"enable": True})``)."""
    return {"apiVersion": api_version, "kind": "Configuration", **sections}


def job(
    name: str,
    *,
    namespace: str,
    gpus: int | str | None = None,
    requests: Mapping[str, Any] | None = None,
    queue: str | None = "lq",
    priority: str | None = None,
    created: float | None = 0.0,
    creation_timestamp: str | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    active: bool = True,
    suspend: bool | None = None,
    parallelism: int | None = None,
    claims: Mapping[str, str] | None = None,
    image: str = "busybox",
) -> dict[str, Any]:
    """A Job whose one pod asks for ``gpus`` GPUs (and ``requests``; neither:
    no resources), labelled for LocalQueue ``queue`` (``None``: no label);
    ``created`` is the creation time ingest stamps (``kuota.dev/created-at``, 0
    unless told; ``None`` writes none), ``creation_timestamp`` the apiserver's
    ``metadata.creationTimestamp``, ``active=False`` marks it inactive,
    ``claims`` maps a pod claim's name to its ResourceClaimTemplate (the
    container uses them all)."""
    all_labels: dict[str, str] = {}
    if queue is not None:
        all_labels[QUEUE_LABEL] = queue
    if priority:
        all_labels[PRIORITY_LABEL] = priority
    all_labels.update(labels or {})
    notes: dict[str, str] = {}
    if created is not None:
        notes[CREATED] = str(created)
    if not active:
        notes["kuota.dev/active"] = "false"
    notes.update(annotations or {})
    meta = _meta(name, namespace=namespace)
    if uid:
        meta["uid"] = uid
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if creation_timestamp is not None:
        meta["creationTimestamp"] = creation_timestamp
    if all_labels:
        meta["labels"] = all_labels
    if notes:
        meta["annotations"] = notes
    container: dict[str, Any] = {"name": "main", "image": image}
    asks: dict[str, Any] = {} if gpus is None else {GPU: gpus}
    asks.update(requests or {})
    if asks:
        container["resources"] = {"requests": asks}
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if claims:
        pod["resourceClaims"] = [
            {"name": c, "resourceClaimTemplateName": t} for c, t in claims.items()
        ]
        container.setdefault("resources", {})["claims"] = [{"name": c} for c in claims]
    spec: dict[str, Any] = {}
    if suspend is not None:
        spec["suspend"] = suspend
    if parallelism is not None:
        spec["parallelism"] = parallelism
    spec["template"] = {"spec": pod}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


# --------------------------------------------------------------------------- DRA


def selectors(expressions: Iterable[str]) -> list[dict[str, Any]]:
    """CEL selectors, as DeviceClasses and device requests write them."""
    return [{"cel": {"expression": e}} for e in expressions]


def device_class(
    name: str,
    *,
    cel: Iterable[str] | None = None,
    extended: str | None = None,
    created: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A DeviceClass selecting with the CEL expressions ``cel`` (``None``: an
    empty spec); ``extended`` is its extendedResourceName, ``created`` its
    creationTimestamp."""
    spec: dict[str, Any] = {} if cel is None else {"selectors": selectors(cel)}
    if extended:
        spec["extendedResourceName"] = extended
    meta: dict[str, Any] = {"name": name}
    if created:
        meta["creationTimestamp"] = created
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": DRA, "kind": "DeviceClass", "metadata": meta, "spec": spec}


def device_request(
    name: str,
    *,
    device_class: str,
    cel: Iterable[str] = (),
    count: Any = 1,
    mode: str | None = None,
    admin: bool = False,
) -> dict[str, Any]:
    """One ``exactly`` request of a claim (``count=None`` writes none)."""
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if count is not None:
        exactly["count"] = count
    if mode:
        exactly["allocationMode"] = mode
    expressions = list(cel)
    if expressions:
        exactly["selectors"] = selectors(expressions)
    if admin:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def resource_claim_template(
    name: str,
    *,
    namespace: str,
    device_class: str | None = None,
    cel: Iterable[str] = (),
    count: Any = 1,
    requests: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ResourceClaimTemplate: ``requests`` as given, else one request ``gpu``
    of ``count`` devices of ``device_class`` (selected by ``cel``)."""
    if requests is None:
        assert device_class is not None, "a device class or the requests"
        requests = [device_request("gpu", device_class=device_class, cel=cel, count=count)]
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": requests}}},
    }


def resource_claim(
    name: str,
    *,
    namespace: str,
    device_class: str | None = None,
    count: Any = 1,
    requests: list[dict[str, Any]] | None = None,
    allocated: Iterable[tuple[str, str]] = (),
    driver: str = GPU_DRIVER,
    node: str | None = None,
    reserved_for: str | None = None,
) -> dict[str, Any]:
    """A ResourceClaim: ``requests`` as given, else one request ``gpu`` of ``count``
    devices of ``device_class``; ``allocated``: the (pool, device) of ``driver`` its
    allocation holds (none: not allocated), for its first request, on ``node`` (its
    allocation's nodeSelector); ``reserved_for``: the Pod that uses it."""
    if requests is None:
        assert device_class is not None, "a device class or the requests"
        requests = [device_request("gpu", device_class=device_class, count=count)]
    out: dict[str, Any] = {
        "apiVersion": DRA,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": requests}},
    }
    results = [
        {"request": requests[0]["name"], "driver": driver, "pool": pool, "device": device}
        for pool, device in allocated
    ]
    if not results:
        return out
    allocation: dict[str, Any] = {"devices": {"results": results}}
    if node is not None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        allocation["nodeSelector"] = {"nodeSelectorTerms": [term]}
    status: dict[str, Any] = {"allocation": allocation}
    if reserved_for is not None:
        status["reservedFor"] = [
            {"resource": "pods", "name": reserved_for, "uid": f"uid-{reserved_for}"}
        ]
    out["status"] = status
    return out


@dataclass(frozen=True)
class Version:
    """A version attribute value (as opposed to a string)."""

    text: str


def attribute(value: object) -> dict[str, object]:
    """A device attribute as a ResourceSlice writes it, typed by the value."""
    if isinstance(value, Version):
        return {"version": value.text}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def device(
    name: str,
    *,
    attributes: Mapping[str, object] | None = None,
    capacity: Mapping[str, str] | None = None,
    consumes: Mapping[str, str] | None = None,
    counter_set: str = "gpu-0-cs",
) -> dict[str, Any]:
    """A device of a ResourceSlice; ``consumes`` draws on ``counter_set``."""
    out: dict[str, Any] = {"name": name}
    if attributes:
        out["attributes"] = {k: attribute(v) for k, v in attributes.items()}
    if capacity:
        out["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    if consumes:
        out["consumesCounters"] = [
            {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in consumes.items()}}
        ]
    return out


def resource_slice(
    name: str,
    *,
    devices: list[dict[str, Any]],
    driver: str = GPU_DRIVER,
    pool: str | None = None,
    node: str | None = None,
    generation: int = 0,
    slices: int = 1,
    counters: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """A ResourceSlice of pool ``pool`` (the name unless told) on node ``node``
    (the pool unless told); ``counters`` are its shared counter sets
    (set name -> counter -> value)."""
    pool = pool or name
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": slices},
        "nodeName": node if node is not None else pool,
        "devices": devices,
    }
    if counters:
        spec["sharedCounters"] = [
            {"name": s, "counters": {k: {"value": v} for k, v in c.items()}}
            for s, c in counters.items()
        ]
    return {"apiVersion": DRA, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def device_taint_rule(
    name: str,
    *,
    key: str = "example.com/maintenance",
    effect: str = "NoSchedule",
    value: str = "",
    selector: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A DeviceTaintRule (resource.k8s.io/v1beta2): one taint on the devices
    ``selector`` (driver, pool, device) selects; None: no selector (none)."""
    taint = {"key": key, "effect": effect, **({"value": value} if value else {})}
    spec: dict[str, Any] = {"taint": taint}
    if selector is not None:
        spec["deviceSelector"] = dict(selector)
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": spec,
    }


def node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[tuple[str, str]] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Node with ``labels`` and ``taints`` as (key, effect)."""
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [{"key": k, "effect": e} for k, e in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


#: For :func:`set_path`: remove the field.
DELETE = object()


def set_path(manifest: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A copy of ``manifest`` with the field at dotted ``path`` (list indexes as
    numbers: ``spec.devices.0.name``) set to ``value``, or removed (:data:`DELETE`)."""
    out = copy.deepcopy(manifest)
    node: Any = out
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    for k in keys[:-1]:
        node = node[k]
    if value is DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return out
