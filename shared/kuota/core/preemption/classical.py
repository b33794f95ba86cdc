"""Classical preemption: which admitted workloads to evict so a pending one fits.

Theory of operation: Kueue's classical search (``pkg/scheduler/preemption``)
as a pure function over a read-only :class:`ClusterView` (the quota forest,
each ClusterQueue's preemption policy and admitted workloads), returning data
(:class:`PreemptionResult`). Candidates use a flavor-resource the preemptor
must preempt for: in its own ClusterQueue, by ``withinClusterQueue``; in other
queues of the cohort tree that are above their nominal quota, by
``reclaimWithinCohort``, as *hierarchy* or *priority* candidates (these only
as ``borrowWithinCohort`` allows). In Kueue's ``CandidatesOrdering`` they are
removed on the tree until the preemptor fits, then all but the last are added
back wherever it still fits; the tree is restored exactly before returning.
:func:`plan_victims` plans several preemptors in order, never sharing a
victim; a :class:`Plan` is one result as the preemption service writes it, and
:func:`validate_plan` is admission's check of it. When the view gives a
:class:`Room` for the preemptor (its pods need node-local DRA devices that no
node has free now), "the preemptor fits" also means that, with the victims'
devices freed, a node can take its pods: the walk goes on past the quota fit
until it does, and a victim is added back only if both still hold (issue #17).
Rules: docs/design/preemption.md, docs/design/dra-placement.md.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from kuota.api.types import PreemptionPolicy
from kuota.core.quota.tree import (
    FlavorResource,
    QuotaNode,
    QuotaTree,
    add_usage,
    available,
    remove_usage,
)

__all__ = [
    "IN_CLUSTER_QUEUE",
    "IN_COHORT_FAIR_SHARING",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "IN_COHORT_RECLAMATION",
    "AdmittedWorkload",
    "ClusterView",
    "Plan",
    "PreemptionResult",
    "Preemptor",
    "Room",
    "RoomWatch",
    "Search",
    "Snapshot",
    "Victim",
    "add_workload",
    "allows",
    "candidate_order",
    "classical_targets",
    "copy_tree",
    "fits",
    "plan_victims",
    "remove_workload",
    "removed",
    "validate_plan",
]

# Kueue's preemption reasons (the Preempted condition's reason).
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL = "LowerOrNewerEqualPriority"
ANY = "Any"

Usage = tuple[tuple[FlavorResource, int], ...]


@dataclass(frozen=True, slots=True)
class AdmittedWorkload:
    """What the search reads of an admitted workload."""

    key: str  # "namespace/name"
    cluster_queue: str
    priority: int
    admitted_at: float  # quota reservation time
    queue_time: float  # the time that orders it in its queue (creation, or eviction)
    usage: Usage  # charged per flavor-resource
    evicting: bool = False  # already being evicted (quota not yet released)
    sequence: int = 0  # admission order, for admissions at the same instant


@dataclass(frozen=True, slots=True)
class Preemptor:
    """The pending workload that needs room."""

    key: str
    cluster_queue: str
    priority: int
    queue_time: float
    usage: Usage  # what admission would charge (the flavor assignment's usage)
    contested: frozenset[FlavorResource]  # flavor-resources in Preempt mode


@dataclass(frozen=True, slots=True)
class Victim:
    key: str
    cluster_queue: str
    reason: str  # IN_CLUSTER_QUEUE | IN_COHORT_RECLAMATION | ...
    policy: str  # the policy that allowed it, e.g. "withinClusterQueue=LowerPriority"


@dataclass(frozen=True, slots=True)
class PreemptionResult:
    """Victims in the order chosen; empty when no preemption makes room."""

    victims: tuple[Victim, ...] = ()
    borrowing: bool = False  # whether the preemptor may borrow once they are gone

    def __bool__(self) -> bool:
        return bool(self.victims)


class Room(Protocol):
    """Whether evicting victims makes room on a node for a preemptor whose pods
    need node-local devices (the fold's :class:`~kuota.core.fold.node_victims.NodeRoom`).
    Given only when no node can take its pods as things are, so evicting no
    device-freeing victim never makes room."""

    def frees(self, workload: AdmittedWorkload) -> bool:
        """Whether evicting ``workload`` frees a device (else it cannot matter)."""
        ...

    def fits(self, victims: Sequence[AdmittedWorkload]) -> bool:
        """Whether, with ``victims`` evicted (their devices free), a node can take
        every pod of the preemptor. Called once its quota fits."""
        ...


class ClusterView(Protocol):
    """What the search reads. ``tree`` is changed during a search and restored."""

    @property
    def tree(self) -> QuotaTree: ...

    def policy(self, cluster_queue: str) -> PreemptionPolicy: ...

    def admitted(self, cluster_queue: str) -> Iterable[AdmittedWorkload]: ...

    def room(self, preemptor: Preemptor) -> Room | None:
        """The preemptor's node check, or None when quota alone decides."""
        ...


@dataclass(slots=True)
class Snapshot:
    """A plain :class:`ClusterView` (tests, the preemption service)."""

    tree: QuotaTree
    policies: Mapping[str, PreemptionPolicy] = field(default_factory=dict)
    workloads: Mapping[str, Sequence[AdmittedWorkload]] = field(default_factory=dict)

    def policy(self, cluster_queue: str) -> PreemptionPolicy:
        return self.policies.get(cluster_queue) or PreemptionPolicy()

    def admitted(self, cluster_queue: str) -> Iterable[AdmittedWorkload]:
        return self.workloads.get(cluster_queue, ())

    def room(self, preemptor: Preemptor) -> Room | None:
        return None


class RoomWatch:
    """Asks a :class:`Room` only when the answer may have changed: the first time
    the quota fits, then after a victim that frees a device was added (placement
    only gets easier as devices are freed)."""

    __slots__ = ("_asked", "_dirty", "_ok", "room")

    def __init__(self, room: Room | None) -> None:
        self.room = room
        self._asked = False
        self._dirty = False
        self._ok = room is None

    def added(self, w: AdmittedWorkload) -> None:
        if self.room is not None and not self._ok and self.room.frees(w):
            self._dirty = True

    def fits(self, victims: Sequence[AdmittedWorkload]) -> bool:
        """Whether the victims so far make room (their quota fits already)."""
        if self.room is not None and not self._ok and (self._dirty or not self._asked):
            self._asked = True
            self._dirty = False
            self._ok = self.room.fits(victims)
        return self._ok

    def still_fits(self, w: AdmittedWorkload, without: Sequence[AdmittedWorkload]) -> bool:
        """Whether the victims ``without`` ``w`` still make room (fill-back)."""
        room = self.room
        return room is None or not room.frees(w) or room.fits(without)


def copy_tree(tree: QuotaTree) -> QuotaTree:
    """An independent copy of a quota forest, to search without touching it."""
    return copy.deepcopy(tree)


# --------------------------------------------------------------------------- usage with undo


def remove_workload(tree: QuotaTree, w: AdmittedWorkload) -> None:
    """Take a workload's usage out of the tree (undo with :func:`add_workload`)."""
    node = tree.queues[w.cluster_queue]
    for fr, qty in w.usage:
        remove_usage(node, fr, qty)


def add_workload(tree: QuotaTree, w: AdmittedWorkload) -> None:
    """Charge a workload's usage to the tree (undo with :func:`remove_workload`)."""
    node = tree.queues[w.cluster_queue]
    for fr, qty in w.usage:
        add_usage(node, fr, qty)


@contextmanager
def removed(tree: QuotaTree, workloads: Sequence[AdmittedWorkload]) -> Iterator[None]:
    """The tree without the given workloads' usage, for the ``with`` block."""
    done: list[AdmittedWorkload] = []
    try:
        for w in workloads:
            remove_workload(tree, w)
            done.append(w)
        yield
    finally:
        for w in reversed(done):
            add_workload(tree, w)


def fits(node: QuotaNode, usage: Usage, *, borrowing: bool) -> bool:
    """Kueue's ``workloadFits``: every request within ``available``, and, when
    borrowing is not allowed, within the ClusterQueue's own quota."""
    for fr, qty in usage:
        if not borrowing and node.usage.get(fr, 0) + qty > node.subtree.get(fr, 0):
            return False
        if qty > available(node, fr):
            return False
    return True


def _within_nominal(node: QuotaNode, frs: Iterable[FlavorResource]) -> bool:
    """Kueue's ``IsWithinNominalInResources``: not above its subtree quota in any."""
    return all(node.usage.get(fr, 0) <= node.subtree.get(fr, 0) for fr in frs)


def _uses(w: AdmittedWorkload, contested: frozenset[FlavorResource]) -> bool:
    return any(fr in contested for fr, _ in w.usage)


def allows(policy: str, preemptor: Preemptor, candidate: AdmittedWorkload) -> bool:
    """Whether a within/reclaim policy lets ``preemptor`` evict ``candidate``."""
    if policy == LOWER_PRIORITY:
        return candidate.priority < preemptor.priority
    if policy == LOWER_OR_NEWER_EQUAL:
        return candidate.priority < preemptor.priority or (
            candidate.priority == preemptor.priority and preemptor.queue_time < candidate.queue_time
        )
    return policy == ANY


def candidate_order(
    preemptor_cq: str, w: AdmittedWorkload
) -> tuple[bool, bool, int, float, int, str]:
    """Kueue's ``CandidatesOrdering`` as a sort key (evicting, other queues,
    lower priority, most recently admitted, then the key)."""
    return (
        not w.evicting,
        w.cluster_queue == preemptor_cq,
        w.priority,
        -w.admitted_at,
        -w.sequence,
        w.key,
    )


# --------------------------------------------------------------------------- classical


# How a candidate may be preempted (Kueue's preemptionVariant).
_WITHIN_CQ = 1
_HIERARCHICAL = 2  # the preemptor has preferential access to the quota it uses
_RECLAIM_WITHOUT_BORROWING = 3  # only if the preemptor will not borrow
_RECLAIM_WHILE_BORROWING = 4  # allowed by borrowWithinCohort


@dataclass(frozen=True, slots=True)
class _Candidate:
    workload: AdmittedWorkload
    variant: int
    lca: QuotaNode | None  # the cohort where it and the preemptor meet (None: same queue)


def _variant_policy(variant: int, policy: PreemptionPolicy) -> tuple[str, str]:
    if variant == _WITHIN_CQ:
        return IN_CLUSTER_QUEUE, f"withinClusterQueue={policy.within_cluster_queue}"
    if variant == _RECLAIM_WHILE_BORROWING:
        bwc = policy.borrow_within_cohort
        text = f"borrowWithinCohort={bwc.policy}"
        if bwc.max_priority_threshold is not None:
            text += f",maxPriorityThreshold={bwc.max_priority_threshold}"
        return IN_COHORT_RECLAIM_WHILE_BORROWING, text
    return IN_COHORT_RECLAMATION, f"reclaimWithinCohort={policy.reclaim_within_cohort}"


class _Classical:
    """One classical search (Kueue's candidate iterator and attempts)."""

    def __init__(
        self,
        view: ClusterView,
        preemptor: Preemptor,
        exclude: frozenset[str],
        only: frozenset[str] | None,
    ) -> None:
        self.view = view
        self.only = only
        self.tree = view.tree
        self.p = preemptor
        self.node = self.tree.queues[preemptor.cluster_queue]
        self.policy = view.policy(preemptor.cluster_queue)
        self.exclude = exclude
        self.room = view.room(preemptor)
        bwc = self.policy.borrow_within_cohort
        self.borrow_forbidden = bwc.policy == NEVER
        self.threshold = bwc.max_priority_threshold
        # Whether another queue holds a candidate (any, and a hierarchy one), `only`
        # or not: the attempts are chosen from the whole situation, so a plan's
        # check walks its victims in the attempts the search that made it walked.
        self.other_candidates = False
        self.hierarchy_candidates = False

    def _classify(self, w: AdmittedWorkload, advantage: bool) -> int:
        p = self.p
        if w.cluster_queue == p.cluster_queue:
            return _WITHIN_CQ if allows(self.policy.within_cluster_queue, p, w) else 0
        if not allows(self.policy.reclaim_within_cohort, p, w):
            return 0
        if advantage:
            return _HIERARCHICAL
        if self.borrow_forbidden:
            return _RECLAIM_WITHOUT_BORROWING
        above = w.priority >= p.priority or (
            self.threshold is not None and w.priority > self.threshold
        )
        return _RECLAIM_WITHOUT_BORROWING if above else _RECLAIM_WHILE_BORROWING

    def _from_queue(
        self, cq: str, lca: QuotaNode | None, advantage: bool, out: list[_Candidate]
    ) -> None:
        contested = self.p.contested
        only = self.only
        for w in self.view.admitted(cq):
            if w.key in self.exclude or not _uses(w, contested):
                continue
            variant = self._classify(w, advantage)
            if not variant:
                continue
            if lca is not None:
                self.other_candidates = True
                self.hierarchy_candidates |= variant == _HIERARCHICAL
            if only is None or w.key in only:
                out.append(_Candidate(w, variant, lca))

    def _in_subtree(
        self,
        cohort: QuotaNode,
        subtree_root: QuotaNode,
        skip: QuotaNode | None,
        advantage: bool,
        out: list[_Candidate],
    ) -> None:
        contested = self.p.contested
        for child in cohort.child_cohorts:
            if child is skip or _within_nominal(child, contested):
                continue
            self._in_subtree(child, subtree_root, skip, advantage, out)
        for child in cohort.child_queues:
            if child is self.node or _within_nominal(child, contested):
                continue
            self._from_queue(child.name, subtree_root, advantage, out)

    def collect(self) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
        """(hierarchy, priority, same-queue) candidates, each in Kueue's order."""
        same: list[_Candidate] = []
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        if self.policy.within_cluster_queue != NEVER:
            self._from_queue(self.p.cluster_queue, None, False, same)
        if self.node.parent is not None and self.policy.reclaim_within_cohort != NEVER:
            advantage, remaining = _fits_in_quota(self.node, dict(self.p.usage))
            previous: QuotaNode | None = None
            current: QuotaNode | None = self.node.parent
            while current is not None:
                target = hierarchy if advantage else priority
                self._in_subtree(current, current, previous, advantage, target)
                subtree_fits, remaining = _fits_in_quota(current, remaining)
                advantage = advantage or subtree_fits
                previous, current = current, current.parent
        cq = self.p.cluster_queue
        for group in (hierarchy, priority, same):
            group.sort(key=lambda c: candidate_order(cq, c.workload))
        return hierarchy, priority, same

    def _valid(self, c: _Candidate, borrowing: bool) -> bool:
        """Kueue's ``candidateIsValid``: earlier removals may have brought the
        candidate's queue (or a cohort below the common ancestor) back within
        its nominal quota; reclaiming stops there."""
        if c.variant == _WITHIN_CQ:
            return True
        if borrowing and c.variant == _RECLAIM_WITHOUT_BORROWING:
            return False
        contested = self.p.contested
        node: QuotaNode | None = self.tree.queues[c.workload.cluster_queue]
        while node is not None and node is not c.lca:
            if _within_nominal(node, contested):
                return False
            node = node.parent
        return True

    def under_nominal(self) -> bool:
        """Kueue's ``queueUnderNominalInResourcesNeedingPreemption``."""
        node = self.node
        for fr in self.p.contested:
            lim = node.limits.get(fr)
            if node.usage.get(fr, 0) >= (lim.nominal if lim is not None else 0):
                return False
        return True

    def run(self) -> PreemptionResult:
        hierarchy, priority, same = self.collect()
        ordered: list[_Candidate] = []
        for evicting in (True, False):
            for group in (hierarchy, priority, same):
                ordered.extend(c for c in group if c.workload.evicting is evicting)
        if not ordered:
            return PreemptionResult()
        if not self.other_candidates or (self.borrow_forbidden and not self.under_nominal()):
            attempts: tuple[bool, ...] = (True,)
        elif self.borrow_forbidden and not self.hierarchy_candidates:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for borrowing in attempts:
            victims = self._attempt(ordered, borrowing)
            if victims is not None:
                return PreemptionResult(victims, borrowing)
        return PreemptionResult()

    def _attempt(self, ordered: list[_Candidate], borrowing: bool) -> tuple[Victim, ...] | None:
        tree, usage, node = self.tree, self.p.usage, self.node
        targets: list[_Candidate] = []
        watch = RoomWatch(self.room)
        try:
            for c in ordered:
                if not self._valid(c, borrowing):
                    continue
                remove_workload(tree, c.workload)
                targets.append(c)
                watch.added(c.workload)
                if fits(node, usage, borrowing=borrowing) and watch.fits(
                    [t.workload for t in targets]
                ):
                    targets = _fill_back(tree, targets, node, usage, borrowing, watch)
                    return tuple(
                        Victim(
                            c.workload.key,
                            c.workload.cluster_queue,
                            *_variant_policy(c.variant, self.policy),
                        )
                        for c in targets
                    )
            return None
        finally:
            for c in reversed(targets):
                add_workload(tree, c.workload)


def _fits_in_quota(
    node: QuotaNode, requests: Mapping[FlavorResource, int]
) -> tuple[bool, dict[FlavorResource, int]]:
    """Kueue's ``QuantitiesFitInQuota``: whether the requests fit in the node's
    subtree quota, and what is left for its parent beyond its local quota."""
    ok = True
    remaining: dict[FlavorResource, int] = {}
    for fr, v in requests.items():
        if node.usage.get(fr, 0) + v > node.subtree.get(fr, 0):
            ok = False
        remaining[fr] = max(0, v - node.local_available(fr))
    return ok, remaining


def _fill_back(
    tree: QuotaTree,
    targets: list[_Candidate],
    node: QuotaNode,
    usage: Usage,
    borrowing: bool,
    watch: RoomWatch,
) -> list[_Candidate]:
    """Add victims back, last-but-one first, wherever the preemptor still fits
    (its quota, and a node when ``watch`` has a room). The victims kept stay
    removed from the tree (the caller restores them)."""
    kept = list(targets)
    for i in range(len(targets) - 2, -1, -1):
        c = targets[i]
        add_workload(tree, c.workload)
        if fits(node, usage, borrowing=borrowing) and watch.still_fits(
            c.workload, [k.workload for k in kept if k is not c]
        ):
            kept.remove(c)
        else:
            remove_workload(tree, c.workload)
    return kept


def classical_targets(
    view: ClusterView,
    preemptor: Preemptor,
    *,
    exclude: frozenset[str] = frozenset(),
    only: frozenset[str] | None = None,
) -> PreemptionResult:
    """The victims that make room for ``preemptor`` (Kueue's classical
    preemption), or an empty result. ``exclude`` names workloads that may not
    be chosen (victims another preemptor already claimed); ``only``, when
    given, the only workloads that may be (to validate a plan)."""
    if not preemptor.contested:
        return PreemptionResult()
    return _Classical(view, preemptor, exclude, only).run()


class Search(Protocol):
    """A per-preemptor victim search (:func:`classical_targets` or the fair one)."""

    def __call__(
        self,
        view: ClusterView,
        preemptor: Preemptor,
        *,
        exclude: frozenset[str] = ...,
        only: frozenset[str] | None = ...,
    ) -> PreemptionResult: ...


def plan_victims(
    view: ClusterView,
    preemptors: Sequence[Preemptor],
    *,
    search: Search = classical_targets,
) -> list[PreemptionResult]:
    """Plan several preemptors in order, each on the state the earlier ones
    leave: their victims removed (and never chosen again), their usage
    reserved. The tree is restored before returning."""
    find = search
    tree = view.tree
    claimed: dict[str, AdmittedWorkload] = {}
    reserved: list[Preemptor] = []
    results: list[PreemptionResult] = []
    by_key: dict[str, AdmittedWorkload] = {}
    try:
        for p in preemptors:
            result: PreemptionResult = find(view, p, exclude=frozenset(claimed))
            results.append(result)
            if not result:
                continue
            for v in result.victims:
                w = by_key.get(v.key)
                if w is None:
                    w = _lookup(view, v)
                    by_key[v.key] = w
                remove_workload(tree, w)
                claimed[v.key] = w
            node = tree.queues[p.cluster_queue]
            for fr, qty in p.usage:
                add_usage(node, fr, qty)
            reserved.append(p)
        return results
    finally:
        for p in reversed(reserved):
            node = tree.queues[p.cluster_queue]
            for fr, qty in p.usage:
                remove_usage(node, fr, qty)
        for w in reversed(list(claimed.values())):
            add_workload(tree, w)


def validate_plan(
    view: ClusterView,
    preemptor: Preemptor,
    victims: Sequence[str],
    *,
    search: Search = classical_targets,
    reasons: Mapping[str, str] | None = None,
) -> PreemptionResult | None:
    """A plan computed elsewhere (the preemption service), checked against this
    view: valid when the search, allowed to choose only among the plan's
    victims, chooses exactly them (so every victim is allowed by the policies,
    they make room, and none is superfluous; another such set than the one the
    search would choose now is accepted too), or when the search itself chooses
    exactly them. The second test is for the fair search, whose walk depends on
    the candidates it does not choose (a queue left without candidates is
    pruned, a candidate a strategy refuses is retried by the next): restricted
    to its own choice it may choose other victims, or the same for other
    reasons (``reasons``, the plan's, tell), and a plan refused on the state it
    was made on would be written again and again. Returns the result to act
    on, with this view's reasons, or None for a stale or invalid plan."""
    wanted = frozenset(victims)
    if not wanted or len(wanted) != len(victims):
        return None
    restricted = search(view, preemptor, only=wanted)
    same = frozenset(v.key for v in restricted.victims) == wanted
    if same and (
        reasons is None or all(reasons.get(v.key) == v.reason for v in restricted.victims)
    ):
        return restricted
    full = search(view, preemptor)
    if frozenset(v.key for v in full.victims) == wanted:
        return full
    return restricted if same else None


def _lookup(view: ClusterView, victim: Victim) -> AdmittedWorkload:
    for w in view.admitted(victim.cluster_queue):
        if w.key == victim.key:
            return w
    raise KeyError(victim.key)


# --------------------------------------------------------------------------- for the service


@dataclass(frozen=True, slots=True)
class Plan:
    """One preemptor's victims, as the preemption service writes them."""

    preemptor: str
    victims: tuple[str, ...]
    reasons: Mapping[str, str]  # victim -> Kueue preemption reason
