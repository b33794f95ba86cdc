"""Fair sharing: Dominant Resource Share, the preemption strategies, the admission order.

Theory of operation: a node's **DRS** (Kueue's ``fair_sharing.go``) is, over
resources, the largest ratio of what it uses above its subtree quota to what
its parent could lend, times 1000, divided by its ``fairSharing.weight``: 0
within quota or without a parent, infinite for a weight-0 node that borrows.
:class:`Share` keeps it as an exact fraction and orders as Kueue's
``CompareDRS``; :meth:`Share.rounded` is Kueue's integer figure. The
**preemption strategies** (KEP-1714 rules S2-a, S2-b) are predicates over
shares (:data:`STRATEGIES`) for :mod:`kuota.core.preemption.fair`. The
**admission order** (:func:`fair_order`, Kueue's
``fair_sharing_iterator.go``) is a tournament per cohort tree on the shares
each head would have once admitted. Usage counted for a share is added to the
tree and taken back before returning. Rules in full: docs/design/preemption.md
("Fair sharing").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction

from kuota.core.quota.tree import (
    FlavorResource,
    QuotaNode,
    QuotaTree,
    add_usage,
    potential_available,
    remove_usage,
)

__all__ = [
    "LESS_THAN_INITIAL_SHARE",
    "LESS_THAN_OR_EQUAL_TO_FINAL_SHARE",
    "STRATEGIES",
    "FairEntry",
    "Share",
    "Weights",
    "dominant_resource_share",
    "fair_order",
    "less_than_initial_share",
    "less_than_or_equal_to_final_share",
    "simulated",
    "tournament_winner",
]

DEFAULT_WEIGHT = 1000  # milli-units: weight 1
MAX_INT64 = 2**63 - 1
Usage = tuple[tuple[FlavorResource, int], ...]


@dataclass(frozen=True, slots=True, order=True)
class Share:
    """A node's Dominant Resource Share, ordered as Kueue's ``CompareDRS``."""

    infinite: bool = False  # weight 0 while borrowing
    value: Fraction = Fraction(0)  # weighted share; the unweighted ratio when infinite
    resource: str = field(default="", compare=False)  # the dominant resource

    @property
    def is_zero(self) -> bool:
        """Not borrowing (Kueue's ``DRS.IsZero``)."""
        return not self.infinite and self.value == 0

    def rounded(self) -> int:
        """Kueue's integer share: ``ceil`` of the weighted share, int64 max when infinite."""
        return MAX_INT64 if self.infinite else math.ceil(self.value)


ZERO = Share()


@dataclass(frozen=True, slots=True)
class Weights:
    """``fairSharing.weight`` per ClusterQueue and per Cohort, milli-units (default 1000)."""

    queues: Mapping[str, int] = field(default_factory=dict)
    cohorts: Mapping[str, int] = field(default_factory=dict)
    # History-aware fair sharing (kuota.core.quota.history): ClusterQueue -> its
    # decayed share (milli-units of a share), and -> the weight (milli, > 0) its
    # DRS gives that history.
    history: Mapping[str, int] = field(default_factory=dict)
    history_weight: Mapping[str, int] = field(default_factory=dict)

    def of(self, node: QuotaNode) -> int:
        table = self.queues if node.is_cluster_queue else self.cohorts
        return table.get(node.name, DEFAULT_WEIGHT)


def _lendable(parent: QuotaNode) -> dict[str, int]:
    """What the parent could lend, per resource name, over every flavor of the tree."""
    root = parent.root()
    out: dict[str, int] = {}
    for fr in sorted(root.subtree):
        out[fr[1]] = out.get(fr[1], 0) + potential_available(parent, fr)
    return out


def dominant_resource_share(node: QuotaNode, weights: Weights) -> Share:
    """The node's DRS on the tree's current usage (see the module docstring)."""
    if node.parent is None:
        return ZERO
    share = _current_share(node, weights)
    if weights.history_weight and node.is_cluster_queue and not share.infinite:
        w = weights.history_weight.get(node.name, 0)
        past = weights.history.get(node.name, 0)
        if w and past:
            # History-aware (kuota.core.quota.history): plus w times its decayed share.
            return Share(False, share.value + Fraction(w * past, 1000 * 1000), share.resource)
    return share


def _current_share(node: QuotaNode, weights: Weights) -> Share:
    """The DRS on the tree's current usage alone."""
    if node.parent is None:
        return ZERO
    borrowed: dict[str, int] = {}
    usage = node.usage
    for fr, quota in node.subtree.items():
        over = usage.get(fr, 0) - quota
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return ZERO
    lendable = _lendable(node.parent)
    ratio = Fraction(0)
    dominant = ""
    for resource in sorted(borrowed):
        lent = lendable.get(resource, 0)
        if lent <= 0:
            continue
        r = Fraction(borrowed[resource] * 1000, lent)
        if r > ratio:
            ratio, dominant = r, resource
    if ratio == 0:
        return ZERO
    weight = weights.of(node)
    if weight <= 0:
        return Share(True, ratio, dominant)
    return Share(False, ratio * 1000 / weight, dominant)


@contextmanager
def simulated(node: QuotaNode, usage: Usage, *, sign: int = 1) -> Iterator[None]:
    """The tree with ``usage`` added to (``sign=1``) or removed from (``-1``) a
    ClusterQueue for the ``with`` block (Kueue's ``SimulateUsageAddition``/``Removal``)."""
    first, then = (add_usage, remove_usage) if sign > 0 else (remove_usage, add_usage)
    done: list[tuple[FlavorResource, int]] = []
    try:
        for fr, qty in usage:
            first(node, fr, qty)
            done.append((fr, qty))
        yield
    finally:
        for fr, qty in reversed(done):
            then(node, fr, qty)


# --------------------------------------------------------------------------- strategies


LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


def less_than_or_equal_to_final_share(
    preemptor_new: Share, target_old: Share, target_new: Share
) -> bool:
    """Rule S2-a: the preemptor's share after admission is at most the target's
    share after losing the workload."""
    return preemptor_new <= target_new


def less_than_initial_share(preemptor_new: Share, target_old: Share, target_new: Share) -> bool:
    """Rule S2-b: the preemptor's share after admission is below the target's
    share before the preemption."""
    return preemptor_new < target_old


Strategy = Callable[[Share, Share, Share], bool]
STRATEGIES: Mapping[str, Strategy] = {
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: less_than_or_equal_to_final_share,
    LESS_THAN_INITIAL_SHARE: less_than_initial_share,
}


# --------------------------------------------------------------------------- admission order


@dataclass(frozen=True, slots=True)
class FairEntry:
    """A head competing for admission."""

    key: str
    cluster_queue: str
    priority: int
    queue_time: float
    usage: Usage


def _tiebreak(e: FairEntry) -> tuple[int, float, str]:
    return (-e.priority, e.queue_time, e.key)


def _shares(
    tree: QuotaTree, weights: Weights, entries: Iterable[FairEntry]
) -> dict[tuple[str, str], Share]:
    """(parent cohort, entry key) -> share of the entry's child of that cohort
    with the entry admitted (Kueue's ``computeDRS``)."""
    out: dict[tuple[str, str], Share] = {}
    for e in entries:
        node = tree.queues[e.cluster_queue]
        with simulated(node, e.usage):
            share = dominant_resource_share(node, weights)
            parent = node.parent
            while parent is not None:
                out[(parent.name, e.key)] = share
                share = dominant_resource_share(parent, weights)
                parent = parent.parent
    return out


def _tournament(
    cohort: QuotaNode,
    by_queue: Mapping[str, Sequence[FairEntry]],
    shares: Mapping[tuple[str, str], Share],
) -> FairEntry | None:
    candidates: list[FairEntry] = []
    for child in cohort.child_cohorts:
        winner = _tournament(child, by_queue, shares)
        if winner is not None:
            candidates.append(winner)
    for q in cohort.child_queues:
        candidates.extend(by_queue.get(q.name, ()))
    if not candidates:
        return None
    name = cohort.name
    return min(candidates, key=lambda e: (shares[(name, e.key)], _tiebreak(e)))


def tournament_winner(
    tree: QuotaTree, weights: Weights, entries: Sequence[FairEntry]
) -> FairEntry | None:
    """The entry a fair-sharing cycle considers next among ``entries`` of one
    cohort tree (or of ClusterQueues without a cohort)."""
    if not entries:
        return None
    node = tree.queues[entries[0].cluster_queue]
    if node.parent is None:
        return min(entries, key=_tiebreak)
    by_queue: dict[str, list[FairEntry]] = {}
    for e in entries:
        by_queue.setdefault(e.cluster_queue, []).append(e)
    shares = _shares(tree, weights, entries)
    return _tournament(node.root(), by_queue, shares)


def fair_order(
    tree: QuotaTree,
    weights: Weights,
    entries: Sequence[FairEntry],
    *,
    admit: Callable[[FairEntry], object] | None = None,
) -> list[FairEntry]:
    """Every entry, in the order a fair-sharing cycle considers them.

    ``admit`` is called with each winner before the next tournament; it may
    add the winner's usage to ``tree`` (an admission), which the following
    shares then include."""
    groups: dict[str, list[FairEntry]] = {}
    for e in entries:
        groups.setdefault(_group(tree, e.cluster_queue), []).append(e)
    order: list[FairEntry] = []
    for name in sorted(groups):
        remaining = groups[name]
        while remaining:
            winner = tournament_winner(tree, weights, remaining)
            assert winner is not None
            remaining = [e for e in remaining if e is not winner]
            order.append(winner)
            if admit is not None:
                admit(winner)
    return order


def _group(tree: QuotaTree, cluster_queue: str) -> str:
    """Tournament group: the root cohort, or one group of all queues without a cohort."""
    node = tree.queues[cluster_queue]
    return "cohort:" + node.root().name if node.parent is not None else "cq:"
