"""A pod template's scheduling fields and what an admission writes to them: pure values.

Theory of operation: kuota changes only a template's ``nodeSelector`` and
``tolerations``, and its ``affinity`` once a podset is pinned to nodes
(:class:`SchedulingFields`; the planners record the template's own in
``kuota.dev/original-pod-template-scheduling`` with :meth:`SchedulingFields.to_json`,
so a stop restores them). :func:`inject` adds the assigned flavors' node labels
and tolerations as Kueue's ``podset.Merge`` does (a node label contradicting the
template's own selector is an :class:`InjectionConflict`; ResourceFlavors read
with the fold's parser, :func:`read_flavor`) and, given nodes, pins the pods to
the nodes their DRA pods were placed on: a required node affinity on the node's
name (:func:`pin_to_nodes`, docs/design/dra-placement.md). :func:`own_fields`
says which fields are the template's own. Fields compare as Kubernetes sees them
(:meth:`SchedulingFields.same_as`: empty is absent, an omitted toleration field
is its zero value). Used for a Job by ``kuota.actuation.patch`` and for the
other kinds by ``kuota.actuation.workloads``. Pure: no I/O.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kuota.api.parse import object_ref, parse_object
from kuota.api.types import ObjectRef, ResourceFlavor, Toleration, ValidationError

__all__ = [
    "NODE_NAME_FIELD",
    "Flavors",
    "InjectionConflict",
    "SchedulingFields",
    "inject",
    "own_fields",
    "pin_to_nodes",
    "read_flavor",
    "toleration_json",
]

# The node field a required node affinity pins a pod to its placement's nodes with:
# the node's name itself, exact whatever labels the node carries.
NODE_NAME_FIELD = "metadata.name"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

#: ResourceFlavors by name, as read (a ValidationError for one that does not parse).
Flavors = Mapping[str, ResourceFlavor | ValidationError]


def read_flavor(obj: object) -> ResourceFlavor | ValidationError:
    """A ResourceFlavor manifest as the apiserver returns it (``kind`` and
    ``apiVersion`` may be missing from a list's items), read by ``kuota.api.parse``
    as the fold reads it. Never raises: what does not parse is a ValidationError."""
    if not isinstance(obj, Mapping):
        return ValidationError(ObjectRef("ResourceFlavor", ""), "", "not an object")
    manifest = {"kind": "ResourceFlavor", **obj}
    parsed = parse_object(manifest)
    if isinstance(parsed, ResourceFlavor | ValidationError):
        return parsed
    return ValidationError(
        object_ref(manifest), "kind", f"want a ResourceFlavor, not {manifest['kind']!r}"
    )


def toleration_json(t: Toleration) -> dict[str, Any]:
    """A toleration as a pod template carries it (empty fields left out)."""
    out: dict[str, Any] = {"key": t.key} if t.key else {}
    out["operator"] = t.operator
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


@dataclass(frozen=True, slots=True)
class SchedulingFields:
    """A pod template's ``nodeSelector`` and ``tolerations`` (None = not set), and its
    ``affinity``. ``owns_affinity``: the affinity is kuota's to write (a podset pinned
    to nodes, :func:`pin_to_nodes`): recorded, written and restored with the other
    two, None meaning the template has none. Without it the affinity is only what
    was read, and no write or comparison touches it."""

    node_selector: Mapping[str, str] | None = None
    tolerations: tuple[Mapping[str, Any], ...] | None = None
    affinity: Mapping[str, Any] | None = None
    owns_affinity: bool = False

    def to_json(self) -> str:
        record: dict[str, Any] = {
            "nodeSelector": dict(self.node_selector) if self.node_selector else None,
            "tolerations": [dict(t) for t in self.tolerations] if self.tolerations else None,
        }
        if self.owns_affinity:
            record["affinity"] = None if self.affinity is None else dict(self.affinity)
        return json.dumps(record, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: object) -> SchedulingFields | None:
        if not isinstance(text, str):
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        return cls.from_record(data)

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> SchedulingFields:
        """The fields as the actuator recorded them (:meth:`to_json`): the affinity
        is owned when the record has the key, even as null."""
        fields = cls.read(data)
        return replace(fields, owns_affinity=True) if "affinity" in data else fields

    @classmethod
    def read(cls, pod_spec: Mapping[str, Any]) -> SchedulingFields:
        sel = pod_spec.get("nodeSelector")
        tol = pod_spec.get("tolerations")
        affinity = pod_spec.get("affinity")
        return cls(
            node_selector=(
                {str(k): str(v) for k, v in sel.items()} if isinstance(sel, Mapping) else None
            ),
            tolerations=(
                tuple(dict(t) for t in tol if isinstance(t, Mapping))
                if isinstance(tol, list)
                else None
            ),
            affinity=affinity if isinstance(affinity, Mapping) else None,
        )

    def same_as(self, other: SchedulingFields) -> bool:
        """Equal as Kubernetes sees it: an empty selector or list is an absent one;
        the affinity counts when either side owns it."""
        if (self.owns_affinity or other.owns_affinity) and (self.affinity or None) != (
            other.affinity or None
        ):
            return False
        return dict(self.node_selector or {}) == dict(other.node_selector or {}) and [
            _toleration_key(t) for t in self.tolerations or ()
        ] == [_toleration_key(t) for t in other.tolerations or ()]

    def write(self, pod_spec: dict[str, Any]) -> None:
        """Set these fields in ``pod_spec`` (an unset one removed); the affinity only
        when owned."""
        if self.node_selector:
            pod_spec["nodeSelector"] = dict(self.node_selector)
        else:
            pod_spec.pop("nodeSelector", None)
        if self.tolerations:
            pod_spec["tolerations"] = [dict(t) for t in self.tolerations]
        else:
            pod_spec.pop("tolerations", None)
        if not self.owns_affinity:
            return
        if self.affinity is None:
            pod_spec.pop("affinity", None)
        else:
            pod_spec["affinity"] = copy.deepcopy(dict(self.affinity))


def _toleration_key(t: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    # Go's struct equality: an omitted field equals its zero value; and an omitted
    # operator is Equal (the API's default), which a parsed flavor writes out.
    return tuple(
        sorted(
            (k, json.dumps(v))
            for k, v in t.items()
            if v not in (None, "") and (k, v) != ("operator", "Equal")
        )
    )


class InjectionConflict(ValueError):
    """The flavors' node labels contradict the Job's own nodeSelector."""


def _on_node(node: str) -> dict[str, Any]:
    # One value only: Kubernetes refuses a node field requirement In several names.
    return {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}


def pin_to_nodes(
    affinity: object, nodes: Sequence[str], *, keep_terms: bool = False
) -> dict[str, Any] | None:
    """A copy of a pod's ``affinity`` (None or anything not a map: none) whose required
    node affinity also asks for one of ``nodes`` (not empty) by name.

    Required terms are ORed, a term's requirements ANDed, and a ``matchFields``
    requirement on ``metadata.name`` takes ONE value (the apiserver refuses ``In``
    with more), so each term is repeated once per node with ``metadata.name In
    [node]`` added to its ``matchFields``: (T1 or T2) and (A or B) as (T1 and A)
    or (T1 and B) or (T2 and A) or (T2 and B). Without terms, one term per node.
    A term already pinned to one of ``nodes`` is kept as it is, so pinning twice
    changes nothing. Preferred node affinity, pod (anti-)affinity: untouched.

    ``keep_terms``: what a gated Pod allows (its required terms, once it has
    some, may only be narrowed, none added): None when that would take more terms.
    """
    if not nodes:
        raise ValueError("no node to pin to")
    names = sorted(set(nodes))
    out: dict[str, Any] = copy.deepcopy(dict(affinity)) if isinstance(affinity, Mapping) else {}
    node_affinity = out.get("nodeAffinity")
    if not isinstance(node_affinity, dict):
        node_affinity = out["nodeAffinity"] = {}
    required = node_affinity.get(_REQUIRED)
    if not isinstance(required, dict):
        required = node_affinity[_REQUIRED] = {}
    had = required.get("nodeSelectorTerms")
    terms: list[Any] = had if isinstance(had, list) and had else [{}]
    pinned: list[Any] = []
    for term in terms:
        if not isinstance(term, dict):
            pinned.append(term)  # not a term: the apiserver never stored it
            continue
        fields = term.get("matchFields")
        fields = fields if isinstance(fields, list) else []
        if any(_on_node(n) in fields for n in names):
            pinned.append(term)
            continue
        pinned.extend(
            {**copy.deepcopy(term), "matchFields": [*copy.deepcopy(fields), _on_node(n)]}
            for n in names
        )
    if keep_terms and terms is had and len(pinned) != len(terms):
        return None
    required["nodeSelectorTerms"] = pinned
    return out


def own_fields(
    recorded: SchedulingFields | None, current: SchedulingFields, *, pinning: bool
) -> SchedulingFields:
    """A template's own scheduling fields: the actuator's record, else the template
    as it is. A podset about to be pinned owns its affinity from then on: the
    recorded one, else the template's (kuota has not written it while no record
    owns it)."""
    own = current if recorded is None else recorded
    if pinning and not own.owns_affinity:
        return replace(own, affinity=current.affinity, owns_affinity=True)
    return own


def inject(
    original: SchedulingFields,
    flavors: Sequence[ResourceFlavor],
    nodes: Sequence[str] = (),
) -> SchedulingFields:
    """The template's scheduling fields once ``flavors`` are injected (Kueue's
    podset.Merge) and, with ``nodes``, its pods pinned to them (:func:`pin_to_nodes`;
    ``original`` must own its affinity then: :func:`own_fields`). Without ``nodes``
    an owned affinity is the original one again."""
    from_flavors: dict[str, tuple[str, str]] = {}  # key -> (value, the flavor naming it)
    tolerations: list[Mapping[str, Any]] = []
    for fl in flavors:
        for k, v in fl.node_labels:
            from_flavors.setdefault(k, (v, fl.name))  # between flavors the first wins
        tolerations.extend(toleration_json(t) for t in fl.tolerations)
    selector = dict(original.node_selector or {})
    for k, (v, source) in sorted(from_flavors.items()):
        if k in selector and selector[k] != v:
            raise InjectionConflict(
                f"the Job's nodeSelector {k}={selector[k]} conflicts with the nodeLabel "
                f"{k}={v} of ResourceFlavor {source}, which kuota adds to the pod template"
            )
        selector[k] = v
    merged = list(original.tolerations or ())
    seen = {_toleration_key(t) for t in merged}
    for t in tolerations:
        key = _toleration_key(t)
        if key not in seen:
            seen.add(key)
            merged.append(dict(t))
    affinity = pin_to_nodes(original.affinity, nodes) if nodes else original.affinity
    return SchedulingFields(
        selector or None,
        tuple(merged) or None,
        affinity,
        owns_affinity=original.owns_affinity or bool(nodes),
    )
