"""Quotas, usage and the cohort tree.

Theory of operation: ClusterQueues and Cohorts are nodes of a forest (a
ClusterQueue's parent is the Cohort it names, a Cohort's its ``parentName``; a
cohort named but not defined exists implicitly, with no quota). Every node
keeps, per ``(flavor, resource)``: its limits (nominal, borrowing, lending), its
subtree quota (own nominal plus what each child lends up) and its usage (for a
Cohort, what its children draw beyond their local quota). ``available`` and
``potential_available`` follow Kueue's recursion (``resource_node.go``);
``add_usage``/``remove_usage`` bubble a change up in O(depth); a structural
change rebuilds subtree quotas and cohort usage from the ClusterQueues' usage,
the single source of truth. A cohort that would close a cycle is refused by
:meth:`QuotaTree.set_cohort`, so no walk can loop, and children are kept
sorted by name. Formulas: docs/design/fold.md ("Quota forest").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kuota.api.types import ResourceGroup
from kuota.core.pickling import register_by_fields
from kuota.core.quota.rows import flavor_resources

FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True, slots=True)
class Limits:
    nominal: int = 0
    borrowing_limit: int | None = None  # None: unlimited
    lending_limit: int | None = None  # None: lends everything


_NO_LIMITS = Limits()


@dataclass(eq=False, slots=True)
class QuotaNode:
    name: str
    is_cluster_queue: bool
    limits: dict[FlavorResource, Limits] = field(default_factory=dict)
    parent: QuotaNode | None = None
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    child_queues: list[QuotaNode] = field(default_factory=list)
    child_cohorts: list[QuotaNode] = field(default_factory=list)
    height: int = 0  # Kueue's getNodeHeight: distance to the furthest leaf
    # Per flavor-resource with limits, derived from them and ``subtree`` whenever
    # the tree is rebuilt: (local quota kept back from the parent, the borrowing
    # cap before usage, i.e. ``subtree - local + borrowingLimit``, or None when
    # unlimited). ``available`` reads it instead of recomputing both per call.
    caps: dict[FlavorResource, tuple[int, int | None]] = field(default_factory=dict)

    def local_quota(self, fr: FlavorResource) -> int:
        """Quota this node keeps for its own subtree (never lent to its parent)."""
        lending = self.limits.get(fr, _NO_LIMITS).lending_limit
        if lending is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - lending)

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node


def limits_from_groups(groups: Iterable[ResourceGroup]) -> dict[FlavorResource, Limits]:
    return {
        (flavor, resource): Limits(q.nominal_quota, q.borrowing_limit, q.lending_limit)
        for flavor, resource, q in flavor_resources(groups)
    }


# --------------------------------------------------------------------------- arithmetic


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """How much more of ``fr`` the node can take now (Kueue's ``available``):
    what is free in its local quota plus what its parent can give, the latter
    capped by its borrowing limit minus what it already draws from the parent.

    May be negative after quota was removed under admitted workloads."""
    parent = node.parent
    # boxed once: compiled, a FlavorResource parameter is rebuilt as a new tuple
    # for each look-up (docs/design/native-core.md)
    key: Any = fr
    if parent is None:
        return node.subtree.get(key, 0) - node.usage.get(key, 0)
    if parent.parent is None:  # the usual shape: a ClusterQueue in a root cohort
        # available_below(node, fr, what the root has free), inlined: the hottest call
        result = parent.subtree.get(key, 0) - parent.usage.get(key, 0)
        caps = node.caps.get(key)
        if caps is None:
            if key not in node.limits:
                return result
            caps = _caps(node, fr)
        local, cap = caps
        usage = node.usage.get(key, 0)
        if cap is not None:
            cap -= usage - local if usage > local else 0
            if cap < result:
                result = cap
        return result + local - usage if local > usage else result
    # Iterative form of Kueue's recursion: the chain up to the root, then back down.
    chain: list[QuotaNode] = []
    top = node
    while top.parent is not None:
        chain.append(top)
        top = top.parent
    result = top.subtree.get(fr, 0) - top.usage.get(fr, 0)
    for n in reversed(chain):
        lim = n.limits.get(fr)
        usage = n.usage.get(fr, 0)
        if lim is None:  # no quota of its own for fr: nothing local, no limits
            continue
        subtree = n.subtree.get(fr, 0)
        lending = lim.lending_limit
        local = subtree - lending if lending is not None and subtree > lending else 0
        if lim.borrowing_limit is not None:
            used_in_parent = usage - local if usage > local else 0
            cap = subtree - local - used_in_parent + lim.borrowing_limit
            if cap < result:
                result = cap
        if local > usage:
            result += local - usage
    return result


def available_below(node: QuotaNode, fr: FlavorResource, parent_available: int) -> int:
    """``available(node, fr)`` given ``available(node.parent, fr)`` (computed once
    for all the children of a cohort)."""
    caps = node.caps.get(fr)
    if caps is None:
        if fr not in node.limits:
            return parent_available
        caps = _caps(node, fr)  # a node outside a rebuilt tree
    local, cap = caps
    usage = node.usage.get(fr, 0)
    result = parent_available
    if cap is not None:
        # the borrowing limit caps what the node may draw from its parent
        cap -= usage - local if usage > local else 0
        if cap < result:
            result = cap
    return result + local - usage if local > usage else result


def _caps(node: QuotaNode, fr: FlavorResource) -> tuple[int, int | None]:
    """``QuotaNode.caps[fr]`` from the node's limits and subtree quota."""
    lim = node.limits[fr]
    subtree = node.subtree.get(fr, 0)
    lending = lim.lending_limit
    local = subtree - lending if lending is not None and subtree > lending else 0
    borrowing = lim.borrowing_limit
    return local, None if borrowing is None else subtree - local + borrowing


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most the node could ever take of ``fr`` if nothing were in use."""
    parent = node.parent
    if parent is None:
        return node.subtree.get(fr, 0)
    result = node.local_quota(fr) + potential_available(parent, fr)
    borrowing = node.limits.get(fr, _NO_LIMITS).borrowing_limit
    if borrowing is not None:
        result = min(node.subtree.get(fr, 0) + borrowing, result)
    return result


def borrows_with(node: QuotaNode, fr: FlavorResource, value: int) -> bool:
    return node.usage.get(fr, 0) + value > node.subtree.get(fr, 0)


def borrowing_height(node: QuotaNode, fr: FlavorResource, value: int) -> tuple[int, bool]:
    """Height of the lowest subtree that holds ``value`` more of ``fr`` without
    borrowing (0: the ClusterQueue itself), and whether that subtree is smaller
    than the whole tree (Kueue's ``FindHeightOfLowestSubtreeThatFits``)."""
    if node.parent is None or not borrows_with(node, fr, value):
        return 0, node.parent is not None
    remaining = value - node.local_available(fr)
    tracking = node.parent
    while True:
        if not borrows_with(tracking, fr, remaining):
            return tracking.height, tracking.parent is not None
        remaining -= tracking.local_available(fr)
        if tracking.parent is None:
            return tracking.height, False
        tracking = tracking.parent


def limiting_factor(node: QuotaNode, fr: FlavorResource) -> str:
    """Says, for people, what caps ``available`` (for Inadmissible messages)."""
    if node.parent is None:
        return "nominal quota reached" if node.is_cluster_queue else f"cohort {node.name} is full"
    from_parent = available(node.parent, fr)
    lim = node.limits.get(fr, _NO_LIMITS)
    if lim.borrowing_limit is not None:
        local = node.local_quota(fr)
        stored = node.subtree.get(fr, 0) - local
        used = max(0, node.usage.get(fr, 0) - local)
        if stored - used + lim.borrowing_limit <= from_parent:
            who = "" if node.is_cluster_queue else f" of cohort {node.name}"
            return f"borrowing limit{who} reached"
    cohort = node.parent
    while cohort.parent is not None:
        lim = cohort.limits.get(fr, _NO_LIMITS)
        if lim.borrowing_limit is not None:
            local = cohort.local_quota(fr)
            stored = cohort.subtree.get(fr, 0) - local
            used = max(0, cohort.usage.get(fr, 0) - local)
            if stored - used + lim.borrowing_limit <= available(cohort.parent, fr):
                return f"borrowing limit of cohort {cohort.name} reached"
        cohort = cohort.parent
    return f"no unused quota left in cohort {cohort.name}"


def add_usage(node: QuotaNode, fr: FlavorResource, value: int) -> None:
    """Charge ``value`` to the node; the part beyond its local quota goes up."""
    while True:
        usage = node.usage.get(fr, 0)
        node.usage[fr] = usage + value
        parent = node.parent
        if parent is None:
            return
        local = _local(node, fr)
        if local > usage:
            local_free = local - usage
            if value <= local_free:
                return
            value -= local_free
        node = parent


def _local(node: QuotaNode, fr: FlavorResource) -> int:
    """``node.local_quota(fr)``, from the caps derived at the last rebuild."""
    caps = node.caps.get(fr)
    if caps is not None:
        return caps[0]
    return _caps(node, fr)[0] if fr in node.limits else 0


def remove_usage(node: QuotaNode, fr: FlavorResource, value: int) -> None:
    """Release ``value``; what was drawn from the parent is given back first."""
    while True:
        usage = node.usage.get(fr, 0)
        left = usage - value
        if left:
            node.usage[fr] = left
        else:
            node.usage.pop(fr, None)
        parent = node.parent
        if parent is None:
            return
        caps = node.caps.get(fr)  # _local(node, fr), inlined
        if caps is not None:
            stored_in_parent = usage - caps[0]
        elif fr in node.limits:
            stored_in_parent = usage - _caps(node, fr)[0]
        else:
            stored_in_parent = usage
        if stored_in_parent <= 0:
            return
        if stored_in_parent < value:
            value = stored_in_parent
        node = parent


# --------------------------------------------------------------------------- the forest


@dataclass(frozen=True, slots=True)
class _CohortSpec:
    parent: str | None
    limits: Mapping[FlavorResource, Limits]


class QuotaTree:
    """All ClusterQueue and Cohort nodes. Structure edits rebuild derived data."""

    def __init__(self) -> None:
        self.queues: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}  # explicit and implicit
        self._queue_cohort: dict[str, str | None] = {}
        self.root_of: dict[str, str] = {}  # ClusterQueue -> root_name (rebuilt with the tree)
        self._cohort_specs: dict[str, _CohortSpec] = {}  # explicit Cohort objects only

    # ----------------------------------------------------------------- queries

    def root_name(self, queue: str) -> str:
        """Identity of the tree a ClusterQueue belongs to (``cq:x`` or ``cohort:y``)."""
        return self.root_of[queue]

    def queues_in_tree(self, root: str) -> list[str]:
        kind, _, name = root.partition(":")
        if kind == "cq":
            return [name] if name in self.queues else []
        cohort = self.cohorts.get(name)
        if cohort is None or cohort.parent is not None:
            return []
        out: list[str] = []
        stack = [cohort]
        while stack:
            node = stack.pop()
            out.extend(q.name for q in node.child_queues)
            stack.extend(node.child_cohorts)
        return sorted(out)

    def all_roots(self) -> list[str]:
        roots = {self.root_name(q) for q in self.queues}
        return sorted(roots)

    def cohort_parent(self, name: str) -> str | None:
        spec = self._cohort_specs.get(name)
        return spec.parent if spec is not None else None

    # ----------------------------------------------------------------- edits

    def set_queue(self, name: str, *, cohort: str | None, groups: Iterable[ResourceGroup]) -> None:
        node = self.queues.get(name)
        if node is None:
            node = self.queues[name] = QuotaNode(name=name, is_cluster_queue=True)
        node.limits = limits_from_groups(groups)
        self._queue_cohort[name] = cohort
        self._rebuild()

    def remove_queue(self, name: str) -> None:
        self.queues.pop(name, None)
        self._queue_cohort.pop(name, None)
        self._rebuild()

    def would_cycle(self, name: str, parent: str | None) -> bool:
        seen = name
        current = parent
        steps = 0
        while current is not None:
            if current == seen:
                return True
            steps += 1
            if steps > len(self._cohort_specs) + 1:
                return True  # defensive: an existing cycle (cannot happen)
            spec = self._cohort_specs.get(current)
            current = spec.parent if spec is not None else None
        return False

    def set_cohort(self, name: str, *, parent: str | None, groups: Iterable[ResourceGroup]) -> bool:
        """Define or replace a Cohort object. Returns False (and changes nothing)
        if ``parent`` would close a cycle."""
        if self.would_cycle(name, parent):
            return False
        self._cohort_specs[name] = _CohortSpec(parent, limits_from_groups(groups))
        self._rebuild()
        return True

    def remove_cohort(self, name: str) -> None:
        self._cohort_specs.pop(name, None)
        self._rebuild()

    def _rebuild(self) -> None:
        # Which cohorts exist: explicit ones plus every name referenced.
        names: dict[str, None] = dict.fromkeys(sorted(self._cohort_specs))
        for queue in sorted(self.queues):
            cohort = self._queue_cohort.get(queue)
            if cohort:
                names.setdefault(cohort, None)
        for spec_name in sorted(self._cohort_specs):
            parent = self._cohort_specs[spec_name].parent
            if parent:
                names.setdefault(parent, None)
        old = self.cohorts
        cohorts: dict[str, QuotaNode] = {}
        for name in sorted(names):
            node = old.get(name) or QuotaNode(name=name, is_cluster_queue=False)
            spec = self._cohort_specs.get(name)
            node.limits = dict(spec.limits) if spec is not None else {}
            node.parent = None
            node.child_cohorts = []
            node.child_queues = []
            cohorts[name] = node
        self.cohorts = cohorts
        for name in sorted(cohorts):
            spec = self._cohort_specs.get(name)
            if spec is not None and spec.parent:
                parent_node = cohorts[spec.parent]
                cohorts[name].parent = parent_node
                parent_node.child_cohorts.append(cohorts[name])
        for queue in sorted(self.queues):
            node = self.queues[queue]
            cohort = self._queue_cohort.get(queue)
            node.parent = cohorts[cohort] if cohort else None
            if node.parent is not None:
                node.parent.child_queues.append(node)
            node.subtree = {fr: lim.nominal for fr, lim in node.limits.items()}
        for name in sorted(cohorts):
            if cohorts[name].parent is None:
                _accumulate(cohorts[name])
        self.root_of = {
            q: f"cq:{q}" if n.parent is None else f"cohort:{n.root().name}"
            for q, n in self.queues.items()
        }
        for node in (*self.queues.values(), *cohorts.values()):
            node.caps = {fr: _caps(node, fr) for fr in node.limits}


def _accumulate(cohort: QuotaNode) -> None:
    """Recompute subtree quota, usage and height of ``cohort`` from its children."""
    subtree = {fr: lim.nominal for fr, lim in cohort.limits.items()}
    usage: dict[FlavorResource, int] = {}
    height = 1 if cohort.child_queues else 0
    children: list[QuotaNode] = []
    for child in cohort.child_cohorts:
        _accumulate(child)
        height = max(height, child.height + 1)
        children.append(child)
    children.extend(cohort.child_queues)
    for child in children:
        for fr, quota in child.subtree.items():
            subtree[fr] = subtree.get(fr, 0) + quota - child.local_quota(fr)
    cohort.subtree = subtree
    for child in children:
        for fr, used in child.usage.items():
            drawn = max(0, used - child.local_quota(fr))
            if drawn:
                usage[fr] = usage.get(fr, 0) + drawn
    cohort.usage = usage
    cohort.height = height


register_by_fields(Limits, _CohortSpec)
