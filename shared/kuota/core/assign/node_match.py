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

from typing import Protocol

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
