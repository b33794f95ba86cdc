"""What admitting or stopping does to a workload of any kind: pure patch planning.

Theory of operation: a workload kind is suspended by its own field
(:data:`SUSPEND_FIELDS`: a Job's and a JobSet's, Ray's ``spec.suspend``, a
PyTorchJob's ``spec.runPolicy.suspend``), or, for Pods (pod groups, and a
LeaderWorkerSet's pods), held by the scheduling gate ``kueue.x-k8s.io/admission``
until admission. :func:`pod_templates` finds the pod spec of each podset, in
the order and with the names the parser gives them (``kuota.api.parse_workloads``).
:func:`admit` unsuspends the object and injects each podset's flavors into its
own template as :func:`kuota.actuation.scheduling.inject` does for a Job (Kueue's
``podset.Merge``), and pins each podset the decision placed on nodes to them
(a required node affinity, :func:`kuota.actuation.scheduling.pin_to_nodes`; not a
JobSet's: :data:`AFFINITY_FROZEN`), remembering every template's own
``nodeSelector`` and ``tolerations`` (and ``affinity``, once pinned) in
``kuota.dev/original-pod-template-scheduling`` (a map podset -> fields);
:func:`stop` suspends it and restores them. :func:`admit_pod` injects a Pod's
podset flavors, pins it as far as a gated Pod may be narrowed, and removes its
gate (a gated Pod's scheduling directives may still change; a Pod is never
gated again: a stop deletes it, as Kueue does). Every function returns a new
manifest and never raises but :class:`PatchError` (with a CamelCase reason). The
actuator calls them for the kinds wired into the services
(``kuota.actuation.plan_workloads``, and ``kuota.actuation.plan_pods`` for pod
groups, #18): docs/design/workload-kinds.md ("Actuation").
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kuota.actuation.patch import ANN_ORIGINAL
from kuota.actuation.scheduling import (
    Flavors,
    InjectionConflict,
    SchedulingFields,
    inject,
    own_fields,
    pin_to_nodes,
)
from kuota.api.parse_workloads import ADMISSION_GATE, RAY_HEAD, RAY_SUBMITTER, read_pod
from kuota.api.types import PodMember, ResourceFlavor, ValidationError
from kuota.events.schema import Decision

__all__ = [
    "AFFINITY_FROZEN",
    "SUSPEND_FIELDS",
    "PatchError",
    "admit",
    "admit_pod",
    "flavors_by_podset",
    "pod_templates",
    "stop",
    "suspended",
    "user_templates",
    "with_suspend",
]

Path = tuple[str | int, ...]

#: Where each kind is suspended (Pods and LeaderWorkerSets have no such field).
SUSPEND_FIELDS: dict[str, Path] = {
    "Job": ("spec", "suspend"),
    "PyTorchJob": ("spec", "runPolicy", "suspend"),
    "RayCluster": ("spec", "suspend"),
    "RayJob": ("spec", "suspend"),
    "JobSet": ("spec", "suspend"),
}
#: Kinds whose templates' affinity cannot change while suspended, so their podsets are
#: never pinned to nodes: the JobSet webhook lets only the labels, annotations,
#: nodeSelector, tolerations and scheduling gates of a suspended JobSet's templates
#: change (Kueue's podset.Merge), and the JobSet controller copies only those into
#: the child Jobs it resumes (docs/design/dra-placement.md).
AFFINITY_FROZEN = frozenset({"JobSet"})
_PYTORCH_TYPES = (("Master", "master"), ("Worker", "worker"))
# KubeRay's default submitter, written into a RayJob's spec.submitterPodTemplate
# when a flavor must be injected into it (Kueue does the same).
_SUBMITTER_RESOURCES = {
    "requests": {"cpu": "500m", "memory": "200Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}


class PatchError(ValueError):
    """The object cannot be patched as asked; ``reason`` is CamelCase."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


# --------------------------------------------------------------------------- fields


def _get(obj: Any, path: Path) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(obj, list) or step >= len(obj):
                return None
            obj = obj[step]
        else:
            if not isinstance(obj, Mapping):
                return None
            obj = obj.get(step)
    return obj


def _ensure(obj: dict[str, Any], path: Path) -> dict[str, Any]:
    """The mapping at ``path`` of ``obj``, created (as ``{}``) where missing."""
    node: Any = obj
    for step in path:
        if isinstance(step, int):
            node = node[step]
        else:
            child = node.get(step)
            if not isinstance(child, dict | list):
                child = node[step] = {}
            node = child
    result: dict[str, Any] = node
    return result


def _kind(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind")
    return kind if isinstance(kind, str) else ""


def suspended(obj: Mapping[str, Any]) -> bool | None:
    """The object's suspend field (``None`` for a kind without one)."""
    path = SUSPEND_FIELDS.get(_kind(obj))
    return None if path is None else _get(obj, path) is True


def with_suspend(obj: Mapping[str, Any], value: bool) -> dict[str, Any]:
    """A copy of ``obj`` with its kind's suspend field set to ``value``."""
    path = SUSPEND_FIELDS.get(_kind(obj))
    if path is None:
        raise PatchError(
            "NotSuspendable", f"a {_kind(obj) or 'object'} has no suspend field: its pods are gated"
        )
    new = copy.deepcopy(dict(obj))
    _ensure(new, path[:-1])[str(path[-1])] = value
    return new


def pod_templates(obj: Mapping[str, Any]) -> list[tuple[str, Path]]:
    """(podset name, path of its pod spec) of every podset, in the parser's order."""
    kind = _kind(obj)
    if kind == "Job":
        return [("main", ("spec", "template", "spec"))]
    if kind == "PyTorchJob":
        replicas = _get(obj, ("spec", "pytorchReplicaSpecs"))
        return [
            (name, ("spec", "pytorchReplicaSpecs", rtype, "template", "spec"))
            for rtype, name in _PYTORCH_TYPES
            if isinstance(replicas, Mapping) and replicas.get(rtype) is not None
        ]
    if kind == "RayCluster":
        return _ray_templates(obj, ("spec",))
    if kind == "RayJob":
        out = _ray_templates(obj, ("spec", "rayClusterSpec"))
        mode = _get(obj, ("spec", "submissionMode")) or "K8sJobMode"
        if mode == "K8sJobMode":
            out.append((RAY_SUBMITTER, ("spec", "submitterPodTemplate", "spec")))
        return out
    if kind == "JobSet":
        jobs = _get(obj, ("spec", "replicatedJobs"))
        return [
            (
                str(_get(rj, ("name",))),
                ("spec", "replicatedJobs", i, "template", "spec", "template", "spec"),
            )
            for i, rj in enumerate(jobs if isinstance(jobs, list) else [])
        ]
    raise PatchError(
        "UnsupportedKind", f"kuota does not patch the pod templates of a {kind or 'object'}"
    )


def _ray_templates(obj: Mapping[str, Any], base: Path) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = [(RAY_HEAD, (*base, "headGroupSpec", "template", "spec"))]
    groups = _get(obj, (*base, "workerGroupSpecs"))
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        out.append(
            (str(_get(group, ("groupName",))), (*base, "workerGroupSpecs", i, "template", "spec"))
        )
    return out


# --------------------------------------------------------------------------- flavors


def flavors_by_podset(decision: Decision, flavors: Flavors) -> dict[str, list[ResourceFlavor]]:
    """Each podset's assigned ResourceFlavors (deduplicated, in resource-name order)."""
    out: dict[str, list[ResourceFlavor]] = {}
    for podset, resources in sorted((decision.flavors or {}).items()):
        chosen: list[ResourceFlavor] = []
        for resource in sorted(resources):
            name = resources[resource]
            fl = flavors.get(name)
            if fl is None:
                raise PatchError("FlavorNotFound", f"ResourceFlavor {name} not found")
            if isinstance(fl, ValidationError):
                raise PatchError(
                    "InvalidFlavor", f"ResourceFlavor {name} is not valid: {fl.message}"
                )
            if fl not in chosen:
                chosen.append(fl)
        out[podset] = chosen
    return out


def _originals(obj: Mapping[str, Any]) -> dict[str, SchedulingFields] | None:
    text = _get(obj, ("metadata", "annotations", ANN_ORIGINAL))
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return {
        str(k): SchedulingFields.from_record(v) for k, v in data.items() if isinstance(v, Mapping)
    }


def _originals_json(originals: Mapping[str, SchedulingFields]) -> str:
    return json.dumps(
        {name: json.loads(fields.to_json()) for name, fields in sorted(originals.items())},
        sort_keys=True,
        separators=(",", ":"),
    )


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    return _ensure(obj, ("metadata", "annotations"))


# --------------------------------------------------------------------------- plans


def admit(
    obj: Mapping[str, Any],
    by_podset: Mapping[str, Sequence[ResourceFlavor]],
    nodes: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """``obj`` unsuspended, each podset's flavors in its own pod template, each podset
    of ``nodes`` (the decision's) pinned to its nodes unless the kind is
    :data:`AFFINITY_FROZEN`, and the templates' own scheduling fields kept in
    ``ANN_ORIGINAL`` (kept from an earlier admission if already there, so admitting
    again never stacks flavors or pins)."""
    templates = pod_templates(obj)
    names = [name for name, _ in templates]
    pins = {} if _kind(obj) in AFFINITY_FROZEN else dict(nodes or {})
    unknown = sorted((set(by_podset) | set(pins)) - set(names))
    if unknown:
        raise PatchError(
            "PodSetsChanged",
            f"podsets {unknown} of the decision are not in the {_kind(obj)} ({names})",
        )
    new = with_suspend(obj, False)
    kept = _originals(obj) or {}
    originals: dict[str, SchedulingFields] = {}
    for name, path in templates:
        if name == RAY_SUBMITTER and _get(new, path) is None:
            _default_submitter(new, path)
        pod = _ensure(new, path)
        on = pins.get(name) or ()
        original = own_fields(kept.get(name), SchedulingFields.read(pod), pinning=bool(on))
        originals[name] = original
        try:
            inject(original, list(by_podset.get(name, ())), on).write(pod)
        except InjectionConflict as err:
            raise PatchError("FailedToStart", f"podset {name}: {err}") from None
    _annotations(new)[ANN_ORIGINAL] = _originals_json(originals)
    return new


def _default_submitter(obj: dict[str, Any], path: Path) -> None:
    head = _get(obj, ("spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "containers"))
    image = _get(head, (0, "image")) if isinstance(head, list) else None
    container: dict[str, Any] = {
        "name": "ray-job-submitter",
        "resources": copy.deepcopy(_SUBMITTER_RESOURCES),
    }
    if isinstance(image, str):
        container["image"] = image
    _ensure(obj, path[:-1])["spec"] = {"restartPolicy": "Never", "containers": [container]}


def stop(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` suspended, every pod template's own ``nodeSelector`` and
    ``tolerations`` (and ``affinity``, where pinned) restored, and the remembered
    originals dropped."""
    new = with_suspend(obj, True)
    originals = _originals(obj) or {}
    for name, path in pod_templates(obj):
        fields = originals.get(name)
        if fields is not None and isinstance(_get(new, path), dict):
            fields.write(_ensure(new, path))
    annotations = _get(new, ("metadata", "annotations"))
    if isinstance(annotations, dict):
        annotations.pop(ANN_ORIGINAL, None)
    return new


def user_templates(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` with every pod template's ``nodeSelector`` and ``tolerations``
    (and ``affinity``, where pinned) as the user wrote them (from ``ANN_ORIGINAL``,
    where the actuator injected flavors): what the fold reads, so an admission's own
    write never looks like a change of the podsets. ``obj`` copied unchanged without a
    readable record."""
    new = copy.deepcopy(dict(obj))
    originals = _originals(obj)
    if not originals:
        return new
    try:
        templates = pod_templates(obj)
    except PatchError:
        return new
    for name, path in templates:
        fields = originals.get(name)
        pod = _get(new, path)
        if fields is not None and isinstance(pod, dict):
            fields.write(pod)
    return new


def admit_pod(pod: Mapping[str, Any], decision: Decision, flavors: Flavors) -> dict[str, Any]:
    """A gated Pod of an admitted pod group (or a single Pod): its podset's flavors
    injected into its spec, pinned to its podset's nodes when the decision names
    them, and the ``kueue.x-k8s.io/admission`` gate removed.

    The pin is what Kubernetes lets a gated Pod take: a required node affinity
    set where it has no required terms, else a ``matchFields`` requirement added
    to each of its terms. A Pod with required terms of its own and a podset on
    more than one node cannot be pinned (the OR of the nodes would need new
    terms, which the apiserver refuses on a Pod): it is ungated unpinned."""
    member = read_pod(pod, at=0.0)
    if not isinstance(member, PodMember):
        raise PatchError("NotAGroupPod", "the Pod has no queue label: not kuota's")
    by_podset = flavors_by_podset(decision, flavors)
    if member.role not in by_podset:
        raise PatchError(
            "PodSetsChanged",
            f"the Pod's podset {member.role} is not one the decision assigned: {sorted(by_podset)}",
        )
    new = copy.deepcopy(dict(pod))
    spec = _ensure(new, ("spec",))
    try:
        inject(SchedulingFields.read(spec), by_podset[member.role]).write(spec)
    except InjectionConflict as err:
        raise PatchError("FailedToStart", str(err)) from None
    on = (decision.nodes or {}).get(member.role)
    pinned = pin_to_nodes(spec.get("affinity"), on, keep_terms=True) if on else None
    if pinned is not None:
        spec["affinity"] = pinned
    gates = spec.get("schedulingGates")
    if isinstance(gates, list):
        left = [
            g for g in gates if not (isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE)
        ]
        if left:
            spec["schedulingGates"] = left
        else:
            spec.pop("schedulingGates")
    return new
