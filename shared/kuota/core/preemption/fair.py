"""Fair-sharing preemption: victims chosen by Dominant Resource Share.

Theory of operation: with ``Configuration.fairSharing.enable`` Kueue replaces
the classical search (:mod:`kuota.core.preemption.classical`) by this one
(``fair_strategy.go``). Candidates follow the original rule (the preemptor's
own queue by ``withinClusterQueue``, borrowing queues of the tree by
``reclaimWithinCohort``), in
:func:`~kuota.core.preemption.classical.candidate_order`, and the preemptor's
usage counts on its queue throughout. Target queues are chosen from the root
down by the highest share; for each, the shares of the two *almost lowest
common ancestors* are compared by strategy S2-a
(``LessThanOrEqualToFinalShare``), then S2-b (``LessThanInitialShare``) over
the candidates S2-a refused, at most one per queue. Once the preemptor fits
(its quota, and a node when the view gives a room, as in the classical search),
the victims are minimised as in the classical search and the tree restored;
each victim's ``policy`` says what allowed it. Rules: docs/design/preemption.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kuota.core.preemption.classical import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    NEVER,
    AdmittedWorkload,
    ClusterView,
    PreemptionResult,
    Preemptor,
    RoomWatch,
    Victim,
    add_workload,
    allows,
    candidate_order,
    fits,
    remove_workload,
)
from kuota.core.quota.fairshare import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    STRATEGIES,
    Share,
    Weights,
    dominant_resource_share,
    simulated,
)
from kuota.core.quota.tree import QuotaNode, QuotaTree

__all__ = ["FairSearch", "fair_targets"]


def _borrowing(node: QuotaNode, preemptor: Preemptor) -> bool:
    return node.parent is not None and any(
        node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in preemptor.contested
    )


def find_candidates(
    view: ClusterView,
    p: Preemptor,
    exclude: frozenset[str],
    only: frozenset[str] | None = None,
) -> list[AdmittedWorkload]:
    """Kueue's ``findCandidates`` for fair sharing, in candidate order."""
    tree = view.tree
    policy = view.policy(p.cluster_queue)
    out: list[AdmittedWorkload] = []

    def take(w: AdmittedWorkload, rule: str) -> None:
        if w.key in exclude or not any(fr in p.contested for fr, _ in w.usage):
            return
        if only is not None and w.key not in only:
            return
        if allows(rule, p, w):
            out.append(w)

    if policy.within_cluster_queue != NEVER:
        for w in view.admitted(p.cluster_queue):
            take(w, policy.within_cluster_queue)
    node = tree.queues[p.cluster_queue]
    if node.parent is not None and policy.reclaim_within_cohort != NEVER:
        root = node.root()
        for name in _subtree_queues(root):
            other = tree.queues[name]
            if other is node or not _borrowing(other, p):
                continue
            for w in view.admitted(name):
                take(w, policy.reclaim_within_cohort)
    out.sort(key=lambda w: candidate_order(p.cluster_queue, w))
    return out


def _subtree_queues(cohort: QuotaNode) -> list[str]:
    out: list[str] = []
    stack = [cohort]
    while stack:
        n = stack.pop()
        out.extend(q.name for q in n.child_queues)
        stack.extend(reversed(n.child_cohorts))
    return sorted(out)


@dataclass(slots=True)
class _Ordering:
    """Kueue's ``TargetClusterQueueOrdering``: which queue to take from next."""

    tree: QuotaTree
    weights: Weights
    preemptor: QuotaNode
    targets: dict[str, list[AdmittedWorkload]]
    ancestors: set[int] = field(default_factory=set)  # id() of the preemptor's cohorts
    pruned_queues: set[str] = field(default_factory=set)
    pruned_cohorts: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        node = self.preemptor.parent
        while node is not None:
            self.ancestors.add(id(node))
            node = node.parent

    def has_workload(self, cq: str) -> bool:
        return bool(self.targets.get(cq))

    def pop(self, cq: str) -> AdmittedWorkload:
        return self.targets[cq].pop(0)

    def drop(self, cq: str) -> None:
        self.pruned_queues.add(cq)

    def __iter__(self) -> Iterator[QuotaNode]:
        """Target queues, one at a time; the consumer pops or drops between."""
        if self.preemptor.parent is None:
            while self.has_workload(self.preemptor.name):
                yield self.preemptor
            return
        root = self.preemptor.root()
        while root.name not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _share(self, node: QuotaNode) -> Share:
        return dominant_resource_share(node, self.weights)

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        best_q: QuotaNode | None = None
        best_q_share: Share | None = None
        for q in cohort.child_queues:
            if q.name in self.pruned_queues:
                continue
            share = self._share(q)
            if (share.is_zero and q is not self.preemptor) or not self.has_workload(q.name):
                self.pruned_queues.add(q.name)
            elif best_q_share is None or share >= best_q_share:
                best_q, best_q_share = q, share
        best_c: QuotaNode | None = None
        best_c_share: Share | None = None
        for c in cohort.child_cohorts:
            if c.name in self.pruned_cohorts:
                continue
            share = self._share(c)
            if share.is_zero and id(c) not in self.ancestors:
                self.pruned_cohorts.add(c.name)
            elif best_c_share is None or share >= best_c_share:
                best_c, best_c_share = c, share
        if best_q is None and best_c is None:
            self.pruned_cohorts.add(cohort.name)
            return None
        if best_c is not None and (
            best_q_share is None or (best_c_share is not None and best_c_share >= best_q_share)
        ):
            return self._next(best_c)
        return best_q

    def almost_lcas(self, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
        """(preemptor side, target side): the children of their lowest common cohort."""
        lca = target.parent
        while lca is not None and id(lca) not in self.ancestors:
            lca = lca.parent
        assert lca is not None, "target outside the preemptor's cohort tree"
        return _child_towards(self.preemptor, lca), _child_towards(target, lca)


def _child_towards(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    while node.parent is not lca:
        assert node.parent is not None
        node = node.parent
    return node


class FairSearch:
    """One fair-sharing victim search (see the module docstring)."""

    def __init__(
        self,
        view: ClusterView,
        preemptor: Preemptor,
        *,
        weights: Weights,
        strategies: Sequence[str],
        exclude: frozenset[str] = frozenset(),
        only: frozenset[str] | None = None,
    ) -> None:
        self.view = view
        self.only = only
        self.tree = view.tree
        self.p = preemptor
        self.node = self.tree.queues[preemptor.cluster_queue]
        self.weights = weights
        names = [s for s in strategies if s in STRATEGIES] or [
            LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
            LESS_THAN_INITIAL_SHARE,
        ]
        self.strategies = names
        self.exclude = exclude
        self.within = view.policy(preemptor.cluster_queue).within_cluster_queue
        self.targets: list[tuple[AdmittedWorkload, str, str]] = []  # (workload, reason, policy)
        self.watch = RoomWatch(view.room(preemptor))

    def _fits(self) -> bool:
        # The preemptor's usage is simulated during the search: take it out to check.
        with simulated(self.node, self.p.usage, sign=-1):
            quota = fits(self.node, self.p.usage, borrowing=True)
        return quota and self.watch.fits([w for w, _, _ in self.targets])

    def _take(self, w: AdmittedWorkload, reason: str, policy: str) -> bool:
        remove_workload(self.tree, w)
        self.targets.append((w, reason, policy))
        self.watch.added(w)
        return self._fits()

    def _ordering(self, candidates: Sequence[AdmittedWorkload]) -> _Ordering:
        targets: dict[str, list[AdmittedWorkload]] = {}
        for w in candidates:
            targets.setdefault(w.cluster_queue, []).append(w)
        return _Ordering(self.tree, self.weights, self.node, targets)

    def _first(self, candidates: Sequence[AdmittedWorkload]) -> tuple[bool, list[AdmittedWorkload]]:
        strategy_name = self.strategies[0]
        strategy = STRATEGIES[strategy_name]
        ordering = self._ordering(candidates)
        retry: list[AdmittedWorkload] = []
        for target in ordering:
            if target is self.node:
                w = ordering.pop(target.name)
                if self._take(w, IN_CLUSTER_QUEUE, f"withinClusterQueue={self.within}"):
                    return True, retry
                continue
            mine, theirs = ordering.almost_lcas(target)
            preemptor_new = dominant_resource_share(mine, self.weights)
            target_old = dominant_resource_share(theirs, self.weights)
            while ordering.has_workload(target.name):
                w = ordering.pop(target.name)
                with simulated(target, w.usage, sign=-1):
                    target_new = dominant_resource_share(theirs, self.weights)
                if strategy(preemptor_new, target_old, target_new):
                    if self._take(w, IN_COHORT_FAIR_SHARING, f"fairSharing={strategy_name}"):
                        return True, retry
                    break  # shares changed: choose the target queue afresh
                retry.append(w)
        return False, retry

    def _second(self, retry: Sequence[AdmittedWorkload]) -> bool:
        strategy_name = self.strategies[1]
        strategy = STRATEGIES[strategy_name]
        ordering = self._ordering(retry)
        for target in ordering:
            mine, theirs = ordering.almost_lcas(target)
            preemptor_new = dominant_resource_share(mine, self.weights)
            target_old = dominant_resource_share(theirs, self.weights)
            w = ordering.pop(target.name)
            if strategy(preemptor_new, target_old, target_old) and self._take(
                w, IN_COHORT_FAIR_SHARING, f"fairSharing={strategy_name}"
            ):
                return True
            ordering.drop(target.name)  # S2-b applies at most once per queue
        return False

    def run(self) -> PreemptionResult:
        if not self.p.contested:
            return PreemptionResult()
        candidates = find_candidates(self.view, self.p, self.exclude, self.only)
        if not candidates:
            return PreemptionResult()
        try:
            with simulated(self.node, self.p.usage):
                ok, retry = self._first(candidates)
                if not ok and len(self.strategies) > 1:
                    ok = self._second(retry)
            if not ok:
                return PreemptionResult()
            kept = self._fill_back()
            return PreemptionResult(
                tuple(Victim(w.key, w.cluster_queue, r, pol) for w, r, pol in kept), True
            )
        finally:
            for w, _, _ in reversed(self.targets):
                add_workload(self.tree, w)
            self.targets = []

    def _fill_back(self) -> list[tuple[AdmittedWorkload, str, str]]:
        targets = self.targets
        kept = list(targets)
        for i in range(len(targets) - 2, -1, -1):
            w = targets[i][0]
            add_workload(self.tree, w)
            if fits(self.node, self.p.usage, borrowing=True) and self.watch.still_fits(
                w, [k[0] for k in kept if k is not targets[i]]
            ):
                kept.remove(targets[i])
            else:
                remove_workload(self.tree, w)
        self.targets = kept  # what stays removed, restored by run()
        return kept


def fair_targets(
    view: ClusterView,
    preemptor: Preemptor,
    *,
    weights: Weights,
    strategies: Sequence[str] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE),
    exclude: frozenset[str] = frozenset(),
    only: frozenset[str] | None = None,
) -> PreemptionResult:
    """The victims fair-sharing preemption picks for ``preemptor``, or an empty result."""
    return FairSearch(
        view, preemptor, weights=weights, strategies=strategies, exclude=exclude, only=only
    ).run()
