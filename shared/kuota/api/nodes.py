"""The Nodes kuota reads, and how a Node manifest becomes one.

Theory of operation: the fold is to place a gang's DRA devices on nodes (#17,
docs/design/dra-placement.md); for that it needs to know which nodes exist and
which a pod may use: their labels (node selectors, affinity, a flavor's
nodeLabels), their taints (tolerations), whether they are cordoned
(``spec.unschedulable``) and what they offer (``status.allocatable``).
:func:`read_node` reads those four and nothing else, raising
``kuota.api.fields.FieldError`` at the first bad field (``kuota.api.parse``
dispatches ``kind: Node`` to it); :func:`parse_node` is the same read behind its
own boundary, never raising: a ``ValidationError`` names the field. Pods are not
read for what they use of a node: CPU and memory per node is kube-scheduler's
business, the placement is of devices only ("Nodes, and why not Pods" in
docs/design/dra-placement.md).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kuota.api.fields import (
    FieldError,
    Raw,
    boolean,
    index,
    keyed,
    mapping,
    meta_of,
    object_name,
    qualified_name,
    quantity,
    seq,
    spec_of,
    string_map,
    taint,
)
from kuota.api.not_journaled import not_journaled
from kuota.api.types import ObjectRef, Taint, ValidationError
from kuota.kinds import get

_NODE = get("Node")


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: tuple[tuple[str, str], ...] = ()  # sorted by key
    taints: tuple[Taint, ...] = ()  # manifest order
    unschedulable: bool = False
    allocatable: tuple[tuple[str, int], ...] = ()  # resource -> milli-units, sorted


def read_node(raw: Raw) -> Node:
    """A Node manifest's name, labels, taints, unschedulable and allocatable;
    ``FieldError`` for the first bad one (every other field is ignored)."""
    name = object_name(raw)
    labels = string_map(meta_of(raw).get("labels"), "metadata.labels", labels=True)
    spec = spec_of(raw)
    taints = tuple(
        taint(t, index("spec.taints", i))
        for i, t in enumerate(seq(spec.get("taints"), "spec.taints"))
    )
    unschedulable = boolean(spec.get("unschedulable"), "spec.unschedulable", default=False)
    status = mapping(raw.get("status"), "status")
    field = "status.allocatable"
    allocatable: list[tuple[str, int]] = []
    for resource, amount in mapping(status.get("allocatable"), field).items():
        path = keyed(field, str(resource))
        allocatable.append((qualified_name(resource, path), quantity(amount, path)))
    return Node(name, labels, taints, unschedulable, tuple(sorted(allocatable)))


def parse_node(manifest: object) -> Node | ValidationError:
    """A ``v1`` Node manifest as a :class:`Node`, or a ``ValidationError`` naming
    the bad field; never raises."""
    meta = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    ref = ObjectRef(_NODE.kind, name if isinstance(name, str) else "")
    try:
        if not isinstance(manifest, Mapping):
            raise FieldError("", f"a manifest must be a mapping, not {type(manifest).__name__}")
        kind = manifest.get("kind")
        if kind not in (None, _NODE.kind):
            raise FieldError("kind", f"{kind!r} is not {_NODE.kind}")
        refused = not_journaled(manifest)
        if refused is not None:  # ingest's stand-in for an object too large to journal
            raise FieldError("metadata", refused)
        api_version = manifest.get("apiVersion")
        if api_version not in (None, "", *_NODE.api_versions):
            want = ", ".join(_NODE.api_versions)
            raise FieldError("apiVersion", f"unsupported apiVersion {api_version!r}: want {want}")
        return read_node(manifest)
    except FieldError as e:
        return ValidationError(ref, e.field, e.message)
    except Exception as e:  # the boundary: bad input must never stop the fold
        return ValidationError(ref, "", f"cannot parse: {type(e).__name__}: {e}")
