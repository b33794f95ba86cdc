"""A ``batch/v1`` Job as the ``WorkloadSpec`` kuota admits.

Theory of operation: as Kueue turns a Job into a Workload with one PodSet
``main``, ``read_job`` reads what quota, flavor assignment and ordering need:
the queue (label ``kueue.x-k8s.io/queue-name``; without it ``None``, not ours,
unless ``managed``: then queue ``""`` and the fold decides) and priority class;
the creation time (``creationTimestamp``; ``kuota.dev/created-at`` only in
synthetic journals); the pod count (``parallelism`` capped by ``completions``);
per-pod requests as Kubernetes' ``PodRequests`` computes them; DRA claims, node
selector, required node affinity, tolerations; ``kuota.dev/active``; for the
backstop ``spec.suspend``, the actuator's ``kuota.dev/decision-id`` and
``metadata.generation`` (docs/design/backstop.md). The PodSet read from a pod
spec is memoised by ``(pod count, marshal.dumps(pod spec, 2))``; a spec that
does not read is never memoised. Each rule in full: docs/design/manifests.md.
"""

from __future__ import annotations

import marshal
import math
from dataclasses import dataclass
from typing import Any, cast

from kuota.api.duration import DurationError, parse_rfc3339
from kuota.api.fields import (
    INT32_MAX,
    FieldError,
    Raw,
    child,
    dns1123_label,
    dns1123_subdomain,
    enum,
    index,
    integer,
    keyed,
    mapping,
    meta_of,
    qualified_name,
    quantity,
    requirement,
    seq,
    spec_of,
    string,
    string_map,
    tolerations,
)
from kuota.api.types import ClaimRef, NodeSelectorTerm, PodSet, WorkloadSpec
from kuota.kinds import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, managed_owner

CREATED_AT_ANNOTATION = "kuota.dev/created-at"
ACTIVE_ANNOTATION = "kuota.dev/active"
# Written by the actuator on every final patch (kuota.actuation.patch): the id of
# the last decision it applied to the Job.
DECISION_ID_ANNOTATION = "kuota.dev/decision-id"
MAX_PODS = 100_000  # parallelism beyond this is a typo, not a workload


def _resource_list(value: object, field: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, amount in mapping(value, field).items():
        path = keyed(field, str(key))
        out[qualified_name(key, path)] = quantity(amount, path)
    return out


def _container_requests(value: object, field: str) -> dict[str, int]:
    raw = mapping(value, field, required=True)
    rpath = child(field, "resources")
    resources = mapping(raw.get("resources"), rpath)
    requests = _resource_list(resources.get("requests"), child(rpath, "requests"))
    limits = _resource_list(resources.get("limits"), child(rpath, "limits"))
    for name, limit in limits.items():
        requested = requests.setdefault(name, limit)  # Kubernetes defaults requests to limits
        if requested > limit:
            raise FieldError(
                keyed(child(rpath, "requests"), name), "must be less than or equal to its limit"
            )
    return requests


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _maximize(total: dict[str, int], other: dict[str, int]) -> None:
    for name, amount in other.items():
        total[name] = max(total.get(name, 0), amount)


def _pod_requests(pod: Raw, field: str) -> tuple[tuple[str, int], ...]:
    cpath = child(field, "containers")
    containers = seq(pod.get("containers"), cpath)
    if not containers:
        raise FieldError(cpath, "required: a pod has at least one container")
    total: dict[str, int] = {}
    for i, c in enumerate(containers):
        _add(total, _container_requests(c, index(cpath, i)))
    ipath = child(field, "initContainers")
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(seq(pod.get("initContainers"), ipath)):
        path = index(ipath, i)
        requests = _container_requests(c, path)
        policy = enum(
            mapping(c, path).get("restartPolicy"),
            child(path, "restartPolicy"),
            ("Always",),
            default="",
        )
        if policy == "Always":  # a sidecar runs for the pod's whole life
            _add(total, requests)
            _add(sidecars, requests)
            _maximize(init_peak, sidecars)
        else:  # runs alone, next to the sidecars started before it
            running = dict(sidecars)
            _add(running, requests)
            _maximize(init_peak, running)
    _maximize(total, init_peak)
    _add(total, _resource_list(pod.get("overhead"), child(field, "overhead")))
    return tuple(sorted(total.items()))


def _claims(value: object, field: str) -> tuple[ClaimRef, ...]:
    claims: list[ClaimRef] = []
    for i, item in enumerate(seq(value, field)):
        path = index(field, i)
        raw = mapping(item, path, required=True)
        name = dns1123_label(raw.get("name"), child(path, "name"))
        if any(c.name == name for c in claims):
            raise FieldError(child(path, "name"), f"duplicate claim name {name!r}")
        template = raw.get("resourceClaimTemplateName")
        claim = raw.get("resourceClaimName")
        if (template is None) == (claim is None):
            raise FieldError(
                path, "must set exactly one of resourceClaimName and resourceClaimTemplateName"
            )
        claims.append(
            ClaimRef(
                name=name,
                resource_claim_template_name=None
                if template is None
                else dns1123_subdomain(template, child(path, "resourceClaimTemplateName")),
                resource_claim_name=None
                if claim is None
                else dns1123_subdomain(claim, child(path, "resourceClaimName")),
            )
        )
    return tuple(claims)


def _required_affinity(pod: Raw, field: str) -> tuple[NodeSelectorTerm, ...]:
    apath = child(field, "affinity")
    npath = child(apath, "nodeAffinity")
    rpath = child(npath, "requiredDuringSchedulingIgnoredDuringExecution")
    node_affinity = mapping(mapping(pod.get("affinity"), apath).get("nodeAffinity"), npath)
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return ()
    tpath = child(rpath, "nodeSelectorTerms")
    items = seq(mapping(required, rpath).get("nodeSelectorTerms"), tpath)
    if not items:
        raise FieldError(tpath, "must have at least one node selector term")
    terms: list[NodeSelectorTerm] = []
    for i, item in enumerate(items):
        path = index(tpath, i)
        epath = child(path, "matchExpressions")
        expressions = seq(mapping(item, path, required=True).get("matchExpressions"), epath)
        terms.append(
            NodeSelectorTerm(
                match_expressions=tuple(
                    requirement(e, index(epath, j), node=True) for j, e in enumerate(expressions)
                )
            )
        )
    return tuple(terms)


_POD_PATH = "spec.template.spec"
# (count, marshalled pod spec) -> the Job's PodSet "main"; (count, spec, name, path)
# for the podsets of other kinds (kuota.api.parse_workloads)
_PODSETS: dict[tuple[Any, ...], PodSet] = {}
_PODSETS_MAX = 4096


def _podset(pod: Raw, count: int) -> PodSet:
    """The PodSet ``main`` of ``count`` pods of ``pod``, memoised (see the module
    docstring): the memo changes how fast, never what, a Job reads."""
    try:
        # version 2: no back-references, so the bytes do not depend on refcounts
        data = marshal.dumps(cast("dict[str, Any]", pod), 2)
    except Exception:  # not plain data (or recursive): read it without the memo
        return _read_podset(pod, count)
    key = (count, data)
    podset = _PODSETS.get(key)
    if podset is None:
        podset = _read_podset(pod, count)  # a FieldError propagates, never memoised
        if len(_PODSETS) >= _PODSETS_MAX:
            _PODSETS.clear()
        _PODSETS[key] = podset
    return podset


def pod_set(pod: Raw, count: int, *, name: str, path: str) -> PodSet:
    """The PodSet ``name`` of ``count`` pods of the pod spec ``pod`` found at
    ``path`` (its field errors name that path), memoised as a Job's is."""
    try:
        data = marshal.dumps(cast("dict[str, Any]", pod), 2)
    except Exception:
        return _read_podset(pod, count, name, path)
    key = (count, data, name, path)
    podset = _PODSETS.get(key)
    if podset is None:
        podset = _read_podset(pod, count, name, path)
        if len(_PODSETS) >= _PODSETS_MAX:
            _PODSETS.clear()
        _PODSETS[key] = podset
    return podset


def _read_podset(pod: Raw, count: int, name: str = "main", path: str = _POD_PATH) -> PodSet:
    return PodSet(
        name=name,
        count=count,
        requests=_pod_requests(pod, path),
        claims=_claims(pod.get("resourceClaims"), child(path, "resourceClaims")),
        node_selector=string_map(pod.get("nodeSelector"), child(path, "nodeSelector"), labels=True),
        required_affinity=_required_affinity(pod, path),
        tolerations=tolerations(pod.get("tolerations"), child(path, "tolerations")),
    )


def _pod_count(spec: Raw) -> int:
    parallelism = integer(
        spec.get("parallelism"), "spec.parallelism", default=1, minimum=0, maximum=MAX_PODS
    )
    completions = spec.get("completions")
    if completions is None:
        return parallelism
    return min(parallelism, integer(completions, "spec.completions", minimum=0, maximum=INT32_MAX))


_CREATED_AT_PATH = keyed("metadata.annotations", CREATED_AT_ANNOTATION)
_ACTIVE_PATH = keyed("metadata.annotations", ACTIVE_ANNOTATION)
_QUEUE_PATH = keyed("metadata.labels", QUEUE_NAME_LABEL)
_PRIORITY_PATH = keyed("metadata.labels", PRIORITY_CLASS_LABEL)


def _creation_seconds(meta: Raw, annotations: Raw, at: float) -> float:
    created = annotations.get(CREATED_AT_ANNOTATION)
    if type(created) is str:  # the common case (the engine writes a string)
        try:
            seconds = float(created)
        except ValueError:
            pass  # said below
        else:
            if math.isfinite(seconds):
                return seconds
    if created is not None:
        path = _CREATED_AT_PATH
        if isinstance(created, bool) or not isinstance(created, str | int | float):
            raise FieldError(path, "must be seconds as a string")
        try:
            seconds = float(created)
        except (ValueError, OverflowError):
            raise FieldError(path, f"{created!r} is not a number of seconds") from None
        if not math.isfinite(seconds):
            raise FieldError(path, f"{created!r} is not a finite number of seconds")
        return seconds
    stamp = meta.get("creationTimestamp")
    if stamp is None:
        return float(at)
    try:
        return parse_rfc3339(string(stamp, "metadata.creationTimestamp"))
    except DurationError as e:
        raise FieldError("metadata.creationTimestamp", str(e)) from None


def _active(annotations: Raw) -> bool:
    value = annotations.get(ACTIVE_ANNOTATION)
    if value is None:
        return True  # the common case: what string() reads as "" below
    path = _ACTIVE_PATH
    value = string(value, path).lower()
    if value not in ("", "true", "false"):
        raise FieldError(path, f'{value!r} must be "true" or "false"')
    return value != "false"


_DECISION_ID_PATH = keyed("metadata.annotations", DECISION_ID_ANNOTATION)


def _suspended(spec: Raw) -> bool | None:
    value = spec.get("suspend")
    if value is None or type(value) is bool:
        return value
    raise FieldError("spec.suspend", f"must be a boolean, not {type(value).__name__}")


def _generation(meta: Raw) -> int | None:
    value = meta.get("generation")
    if value is None:
        return None
    return integer(value, "metadata.generation", minimum=0)


@dataclass(frozen=True, slots=True)
class Header:
    """What every workload kind reads from its metadata, as a Job does."""

    namespace: str
    name: str
    uid: str
    queue: str
    priority: str | None
    creation_seconds: float
    active: bool
    decision_id: str | None
    generation: int | None


def read_header(raw: Raw, *, at: float, managed: bool = False) -> Header | None:
    """The metadata of a workload of any kind, read as a Job's is; ``None``
    without a queue label unless ``managed``, and for an object whose controller
    owner is a workload kind admitted itself (``kuota.kinds.managed_owner``: the
    RayCluster KubeRay makes for a RayJob, its labels copied): the owner is the
    workload, as Kueue skips such an object."""
    meta = meta_of(raw)
    if managed_owner(raw) is not None:
        return None
    labels = mapping(meta.get("labels"), "metadata.labels")
    queue = string(labels.get(QUEUE_NAME_LABEL), _QUEUE_PATH)
    if queue:
        dns1123_subdomain(queue, _QUEUE_PATH)
    elif not managed:
        return None
    name = dns1123_subdomain(meta.get("name"), "metadata.name")
    namespace = meta.get("namespace")
    namespace = (
        "default" if namespace in (None, "") else dns1123_label(namespace, "metadata.namespace")
    )
    priority = string(labels.get(PRIORITY_CLASS_LABEL), _PRIORITY_PATH)
    if priority:
        dns1123_subdomain(priority, _PRIORITY_PATH)
    annotations = mapping(meta.get("annotations"), "metadata.annotations")
    return Header(
        namespace=namespace,
        name=name,
        uid=string(meta.get("uid"), "metadata.uid"),
        queue=queue,
        priority=priority or None,
        creation_seconds=_creation_seconds(meta, annotations, at),
        active=_active(annotations),
        decision_id=string(annotations.get(DECISION_ID_ANNOTATION), _DECISION_ID_PATH) or None,
        generation=_generation(meta),
    )


def read_job(raw: Raw, *, at: float, managed: bool = False) -> WorkloadSpec | None:
    """The Job as a workload; ``None`` without a queue label unless ``managed``.
    A Job's controller owner is not trusted (unlike the other kinds' in
    :func:`read_header`): a user may write any ``ownerReferences`` on a Job, so a
    Job owned by a workload kind is still read, which keeps a labelled Job, or any
    Job of a managed namespace, in the queue (docs/security.md, "Owners")."""
    kind = raw.get("kind")
    if kind is not None and kind != "Job":
        raise FieldError("kind", f"expected a Job, not {kind!r}")
    meta = meta_of(raw)
    labels = mapping(meta.get("labels"), "metadata.labels")
    queue = string(labels.get(QUEUE_NAME_LABEL), _QUEUE_PATH)
    if queue:
        dns1123_subdomain(queue, _QUEUE_PATH)
    elif not managed:
        return None  # not a Kueue workload
    # object_name(raw) and object_namespace(raw), with ``meta`` already read
    name = dns1123_subdomain(meta.get("name"), "metadata.name")
    namespace = meta.get("namespace")
    namespace = (
        "default" if namespace in (None, "") else dns1123_label(namespace, "metadata.namespace")
    )
    priority = string(labels.get(PRIORITY_CLASS_LABEL), _PRIORITY_PATH)
    if priority:
        dns1123_subdomain(priority, _PRIORITY_PATH)
    annotations = mapping(meta.get("annotations"), "metadata.annotations")
    spec = spec_of(raw, required=True)
    count = _pod_count(spec)
    template = mapping(spec.get("template"), "spec.template", required=True)
    pod = mapping(template.get("spec"), _POD_PATH, required=True)
    podset = _podset(pod, count)
    return WorkloadSpec(
        namespace=namespace,
        name=name,
        uid=string(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
        queue_name=queue,
        priority_class=priority or None,
        creation_seconds=_creation_seconds(meta, annotations, at),
        podsets=(podset,),
        active=_active(annotations),
        suspended=_suspended(spec),
        decision_id=string(annotations.get(DECISION_ID_ANNOTATION), _DECISION_ID_PATH) or None,
        generation=_generation(meta),
    )
