"""Whether a podset may run on a ResourceFlavor's nodes.

Theory of operation: as Kueue's flavor assigner does (it replicates
kube-scheduler's NodeAffinity and TaintToleration filters on the flavor's
labels and taints, not on real nodes):

- every ``NoSchedule``/``NoExecute`` taint of the flavor must be tolerated by
  the podset's tolerations or the flavor's own; ``PreferNoSchedule`` is ignored;
- the podset's nodeSelector and required node affinity are matched against the
  flavor's nodeLabels **on the flavor's own label keys only** (a selector key
  the flavor does not label is ignored); affinity terms are ORed, expressions
  ANDed, and a term left without expressions matches everything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from kuota.api.nodes import Node
from kuota.api.types import NodeSelectorRequirement, NodeSelectorTerm, ResourceFlavor, Toleration


class Constrained(Protocol):
    """What node matching reads of a podset (``flavors.PodSetRequest`` has it)."""

    @property
    def node_selector(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def required_affinity(self) -> tuple[NodeSelectorTerm, ...]: ...
    @property
    def tolerations(self) -> tuple[Toleration, ...]: ...


def _tolerates(tol: Toleration, key: str, value: str, effect: str) -> bool:
    if tol.effect and tol.effect != effect:
        return False
    if tol.key != key and not (tol.key == "" and tol.operator == "Exists"):
        return False
    if tol.operator == "Exists":
        return True
    return tol.value == value


def _requirement_matches(req: NodeSelectorRequirement, value: str) -> bool:
    op = req.operator
    if op == "In":
        return value in req.values
    if op == "NotIn":
        return value not in req.values
    if op == "Exists":
        return True
    if op == "DoesNotExist":
        return False
    if op in ("Gt", "Lt") and len(req.values) == 1:
        try:
            left, right = int(value), int(req.values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def flavor_mismatch(flavor: ResourceFlavor, ps: Constrained) -> str | None:
    """Why ``ps`` cannot use ``flavor`` (None if it can)."""
    if flavor.node_taints:
        tolerations = ps.tolerations + flavor.tolerations
        for taint in flavor.node_taints:
            if taint.effect not in ("NoSchedule", "NoExecute"):
                continue
            if not any(_tolerates(t, taint.key, taint.value, taint.effect) for t in tolerations):
                shown = (
                    f"{taint.key}={taint.value}:{taint.effect}"
                    if taint.value
                    else (f"{taint.key}:{taint.effect}")
                )
                return f"untolerated taint {shown} in flavor {flavor.name}"
    if not flavor.node_labels or not (ps.node_selector or ps.required_affinity):
        return None
    labels = dict(flavor.node_labels)
    for key, value in ps.node_selector:
        if key in labels and labels[key] != value:
            return f"flavor {flavor.name} doesn't match node affinity"
    if ps.required_affinity:
        terms: list[list[NodeSelectorRequirement]] = []
        for term in ps.required_affinity:
            kept = [e for e in term.match_expressions if e.key in labels]
            if not kept:
                terms = []  # a term that matches everything makes the terms moot
                break
            terms.append(kept)
        if terms and not any(
            all(_requirement_matches(e, labels[e.key]) for e in term) for term in terms
        ):
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


#: The taint the node controller puts on a cordoned node; a pod tolerating it may
#: still be scheduled there (kube-scheduler's NodeUnschedulable filter).
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def _node_requirement(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    if req.key not in labels:
        return req.operator in ("NotIn", "DoesNotExist")
    if req.operator == "DoesNotExist":
        return False
    return _requirement_matches(req, labels[req.key])


def node_mismatch(node: Node, ps: Constrained, flavors: Sequence[ResourceFlavor]) -> str | None:
    """Why a pod of ``ps``, assigned ``flavors``, cannot run on ``node`` (None if it
    can), as kube-scheduler's NodeUnschedulable, NodeAffinity and TaintToleration
    filters decide on the node itself: the flavors' nodeLabels and the pod's
    nodeSelector and required affinity against every label of the node, and each
    NoSchedule/NoExecute taint tolerated by the pod's or a flavor's tolerations."""
    labels = dict(node.labels)
    tolerations = ps.tolerations + tuple(t for f in flavors for t in f.tolerations)
    if node.unschedulable and not any(
        _tolerates(t, UNSCHEDULABLE_TAINT, "", "NoSchedule") for t in tolerations
    ):
        return "unschedulable"
    for flavor in flavors:
        for key, value in flavor.node_labels:
            if labels.get(key) != value:
                return f"not a node of flavor {flavor.name}"
    for key, value in ps.node_selector:
        if labels.get(key) != value:
            return "nodeSelector does not match"
    if ps.required_affinity and not any(
        all(_node_requirement(e, labels) for e in term.match_expressions)
        for term in ps.required_affinity
    ):
        return "node affinity does not match"
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint.key, taint.value, taint.effect) for t in tolerations):
            return f"untolerated taint {taint.key}:{taint.effect}"
    return None
