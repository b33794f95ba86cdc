"""Flavor assignment: which ResourceFlavor each podset's resources come from.

Theory of operation: as in Kueue's ``flavorassigner``, for each podset and each
resource group it requests, the group's flavors are tried in listed order. A
flavor is eligible if it exists and the podset may run on its nodes
(:mod:`kuota.core.assign.node_match`). Each resource is checked against the
quota tree, with what earlier podsets of the workload put on that flavor:
**Fit**, **Preempt** or **NoFit**; the flavor's mode is the worst of its
resources, with a *borrowing level*. ``flavorFungibility`` decides whether to
try the next flavor; when all were tried, the best mode wins, then the least
borrowing. A group's resources share one flavor in a podset, and a podset with
no flavor fails the whole workload (gang). The result is data: the choice and
mode per podset, a :class:`Shortfall` per flavor-resource to preempt for, the
flavor-resources that blocked it, a Kueue-style message. Rules in full:
docs/design/flavor-assignment.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from kuota.api.dra import ExactDeviceRequest
from kuota.api.types import (
    ClusterQueue,
    NodeSelectorTerm,
    ResourceFlavor,
    Toleration,
)
from kuota.core.assign.node_match import flavor_mismatch
from kuota.core.dra.placement_rules import PodConstraint
from kuota.core.pickling import register_by_fields
from kuota.core.quota.rows import flavor_resources
from kuota.core.quota.tree import (
    FlavorResource,
    QuotaNode,
    available,
    borrowing_height,
    limiting_factor,
    potential_available,
)
from kuota.quantity import format_quantity

INSUFFICIENT_QUOTA = "InsufficientQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
RESOURCE_NOT_COVERED = "ResourceNotCovered"
FLAVOR_NOT_FOUND = "FlavorNotFound"


class Mode(IntEnum):
    """How a flavor can be assigned, from worst to best (Kueue's order)."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    """One podset as the assigner sees it: totals are per-pod charge × count."""

    name: str
    count: int
    totals: tuple[tuple[str, int], ...]  # (resource, milli), sorted by resource
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # what one pod asks of DRA devices (placement, #17): part of the shape, since
    # two podsets charged alike may fit on different nodes
    devices: tuple[ExactDeviceRequest, ...] = ()
    # per request of ``devices``, its claim; the claims' matchAttribute constraints
    device_claims: tuple[int, ...] = ()
    device_constraints: tuple[PodConstraint, ...] = ()
    # the ResourceClaims its pods name directly (docs/design/dra-placement.md,
    # "Direct ResourceClaims"), each with what this podset's totals include for it,
    # the claim's whole charge, once: () when charged elsewhere (another podset of
    # the workload, or already carried in its ClusterQueue)
    claims: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class QueueView:
    """What the assigner reads of a ClusterQueue, indexed once per version."""

    name: str
    groups: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]  # (covered, flavor names)
    group_of: dict[str, int]  # resource -> index in ``groups``
    nominal: dict[FlavorResource, int]
    try_next_when_borrowing: bool
    try_next_when_preempting: bool
    can_preempt_while_borrowing: bool
    may_preempt: bool  # any preemption policy other than Never


def queue_view(cq: ClusterQueue, *, fair_sharing: bool = False) -> QueueView:
    groups = tuple(
        (tuple(g.covered_resources), tuple(f.name for f in g.flavors)) for g in cq.resource_groups
    )
    group_of: dict[str, int] = {}
    for i, group in enumerate(cq.resource_groups):
        for res in group.covered_resources:
            group_of.setdefault(res, i)
    nominal = {(f, r): q.nominal_quota for f, r, q in flavor_resources(cq)}
    fung = cq.flavor_fungibility
    policy = cq.preemption
    return QueueView(
        name=cq.name,
        groups=groups,
        group_of=group_of,
        nominal=nominal,
        try_next_when_borrowing=fung.when_can_borrow == "TryNextFlavor",
        try_next_when_preempting=fung.when_can_preempt == "TryNextFlavor",
        can_preempt_while_borrowing=policy.borrow_within_cohort.policy != "Never"
        or (fair_sharing and policy.reclaim_within_cohort != "Never"),
        may_preempt=policy.within_cluster_queue != "Never"
        or policy.reclaim_within_cohort != "Never"
        or policy.borrow_within_cohort.policy != "Never",
    )


# Value classes built on the scheduling path are dataclasses with hand-written
# constructors (``init=False``) and ``Final`` fields instead of ``frozen=True``:
# mypyc compiles a constructor written in the class but not the one the
# ``dataclass`` decorator generates at run time, and a frozen one sets each field
# through ``object.__setattr__`` (docs/design/native-core.md). mypy --strict
# refuses any assignment to a ``Final`` field outside ``__init__``; equality and
# hashing are the dataclass's, as before. A ``Final`` field's default is given in
# ``__init__`` only (mypy counts a class-level value as its one assignment);
# tests/unit/core/test_value_classes.py checks every constructor against the fields.


@dataclass(slots=True, init=False, unsafe_hash=True)
class Shortfall:
    """A flavor-resource where the request exceeds what is available now."""

    flavor: Final[str]
    resource: Final[str]
    requested: Final[int]  # including earlier podsets of the same workload
    available: Final[int]
    potential: Final[int]  # the most the ClusterQueue could reach with nothing else in use
    mode: Final[Mode]  # PREEMPT (preemption could make room) or NO_FIT

    def __init__(
        self, flavor: str, resource: str, requested: int, available: int, potential: int, mode: Mode
    ) -> None:
        self.flavor = flavor
        self.resource = resource
        self.requested = requested
        self.available = available
        self.potential = potential
        self.mode = mode

    @property
    def missing(self) -> int:
        return self.requested - max(0, self.available)


@dataclass(slots=True, init=False, unsafe_hash=True)
class QuotaFact:
    """Why one flavor-resource could not take a request, with the figures then."""

    resource: Final[str]
    flavor: Final[str]
    requested: Final[int]  # this podset's request
    assumed: Final[int]  # what earlier podsets of the workload already put there
    available: Final[int]
    potential: Final[int]
    limiter: Final[str]  # what caps ``available`` (see ``quota.limiting_factor``)
    mode: Final[Mode]  # PREEMPT: within what preemption could make room for; NO_FIT otherwise
    policies_allow: Final[bool]  # some preemption policy of the queue is not Never

    def __init__(
        self,
        resource: str,
        flavor: str,
        requested: int,
        assumed: int,
        available: int,
        potential: int,
        limiter: str,
        mode: Mode,
        policies_allow: bool = False,
    ) -> None:
        self.resource = resource
        self.flavor = flavor
        self.requested = requested
        self.assumed = assumed
        self.available = available
        self.potential = potential
        self.limiter = limiter
        self.mode = mode
        self.policies_allow = policies_allow

    def render(self) -> str:
        value = self.requested + self.assumed
        asked = (
            _q(value)
            if not self.assumed
            else f"{_q(self.requested)} plus {_q(self.assumed)} for earlier podsets"
        )
        head = f"insufficient quota for {self.resource} in flavor {self.flavor}: requested {asked}"
        if value > self.potential:
            return f"{head}, maximum capacity {_q(max(0, self.potential))}"
        text = f"{head}, {_q(max(0, self.available))} available, {self.limiter}"
        if self.mode is Mode.PREEMPT:
            text += f"; {_q(value - max(0, self.available))} more needed"
            if self.policies_allow:
                text += ", preemption possible"
        return text

    def stable(self) -> tuple[str, str, int, int]:
        return (self.resource, self.flavor, self.requested + self.assumed, int(self.mode))


Reason = str | QuotaFact  # a text reason (flavor mismatch, ...) or a quota shortage


def render_reasons(podset: str, reasons: Sequence[Reason]) -> str:
    parts = [r if isinstance(r, str) else r.render() for r in reasons]
    return f"couldn't assign flavors to podset {podset}: {'; '.join(parts)}"


@dataclass(slots=True, init=False, unsafe_hash=True)
class PodSetAssignment:
    name: Final[str]
    flavors: Final[tuple[tuple[str, str], ...]]  # (resource, flavor); empty when no flavor
    mode: Final[Mode]
    borrowing: Final[int]
    reasons: Final[tuple[Reason, ...]]  # why flavors were not (fully) usable, in the order tried
    shortfalls: Final[tuple[Shortfall, ...]]  # of the chosen flavors, when mode is PREEMPT

    def __init__(
        self,
        name: str,
        flavors: tuple[tuple[str, str], ...],
        mode: Mode,
        borrowing: int,
        reasons: tuple[Reason, ...],
        shortfalls: tuple[Shortfall, ...],
    ) -> None:
        self.name = name
        self.flavors = flavors
        self.mode = mode
        self.borrowing = borrowing
        self.reasons = reasons
        self.shortfalls = shortfalls


@dataclass(slots=True, init=False, unsafe_hash=True)
class Assignment:
    podsets: Final[tuple[PodSetAssignment, ...]]
    mode: Final[Mode]  # the worst podset mode
    borrowing: Final[int]  # the highest borrowing level
    usage: Final[tuple[tuple[FlavorResource, int], ...]]  # what admission would charge
    reason: Final[str | None]  # None when it fits
    # (flavor-resource, amount needed) where the request exceeded what is available
    # but not what could ever be: a release that makes that much available may help.
    blocking: Final[tuple[tuple[FlavorResource, int], ...]]
    # The reasons without the figures that move with usage ("N available", what
    # caps it): two attempts with the same signature failed for the same reasons.
    signature: Final[tuple[object, ...]]

    def __init__(
        self,
        podsets: tuple[PodSetAssignment, ...],
        mode: Mode,
        borrowing: int,
        usage: tuple[tuple[FlavorResource, int], ...],
        reason: str | None,
        blocking: tuple[tuple[FlavorResource, int], ...],
        signature: tuple[object, ...],
    ) -> None:
        self.podsets = podsets
        self.mode = mode
        self.borrowing = borrowing
        self.usage = usage
        self.reason = reason
        self.blocking = blocking
        self.signature = signature

    @property
    def fits(self) -> bool:
        return self.mode is Mode.FIT

    @property
    def message(self) -> str:
        """Kueue-style, e.g. ``couldn't assign flavors to podset main: insufficient
        quota for nvidia.com/gpu in flavor h100: requested 2, 1 available,
        borrowing limit reached``. Built on demand: most failures are never shown."""
        return "; ".join(render_reasons(p.name, p.reasons) for p in self.podsets if p.reasons)


def _q(milli: int) -> str:
    return format_quantity(milli)


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True, slots=True)
class GroupPlan:
    flavors: tuple[str, ...]  # the resource group's flavors, in the ClusterQueue's order
    requests: tuple[tuple[str, int], ...]  # the podset's requests covered by the group
    # per flavor (same order), the requests as ((flavor, resource), amount)
    by_flavor: tuple[tuple[str, tuple[tuple[FlavorResource, int], ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class PodSetPlan:
    """A podset's requests split by the ClusterQueue's resource groups."""

    request: PodSetRequest
    groups: tuple[GroupPlan, ...]
    uncovered: str | None  # the first requested resource no group covers
    constrained: bool  # has a node selector, affinity or tolerations
    # When every group offers exactly one flavor: those flavors, and every
    # request as ((flavor, resource), amount), for fit_picks' direct path.
    single: tuple[tuple[str, ...], tuple[tuple[FlavorResource, int], ...]] | None = None


def plan_podsets(view: QueueView, podsets: Sequence[PodSetRequest]) -> tuple[PodSetPlan, ...]:
    """Depends only on the ClusterQueue and the requests: callers may cache it."""
    group_of = view.group_of
    plans: list[PodSetPlan] = []
    for ps in podsets:
        seen: list[int] = []
        groups: list[GroupPlan] = []
        uncovered: str | None = None
        for res, qty in ps.totals:
            gi = group_of.get(res)
            if gi is None:
                if qty == 0:
                    continue  # Kueue ignores zero requests of resources it does not cover
                uncovered = res
                break
            if gi in seen:
                continue
            seen.append(gi)
            requests = tuple((r, q) for r, q in ps.totals if group_of.get(r) == gi)
            names = view.groups[gi][1]
            by_flavor = tuple((f, tuple(((f, r), q) for r, q in requests)) for f in names)
            groups.append(GroupPlan(names, requests, by_flavor))
        constrained = bool(ps.node_selector or ps.required_affinity or ps.tolerations)
        single = None
        if uncovered is None and all(len(g.flavors) == 1 for g in groups):
            single = (
                tuple(g.flavors[0] for g in groups),
                tuple(pair for g in groups for pair in g.by_flavor[0][1]),
            )
        plans.append(PodSetPlan(ps, tuple(groups), uncovered, constrained, single))
    return tuple(plans)


# --------------------------------------------------------------------------- quota fit


class _Search:
    """One assignment attempt over the podsets of a workload."""

    __slots__ = ("blocking", "flavors", "node", "quota_failure", "view")

    def __init__(self, view: QueueView, node: QuotaNode, flavors: dict[str, ResourceFlavor]):
        self.view = view
        self.node = node
        self.flavors = flavors
        self.blocking: dict[FlavorResource, int] = {}
        self.quota_failure = False

    def short(
        self,
        fr: FlavorResource,
        assumed: int,
        request: int,
        free: int,
        reasons: list[Reason],
    ) -> tuple[Mode, int, Shortfall]:
        """Kueue's ``fitsResourceQuota`` when the request exceeds ``available``
        (without the preemption oracle, which a later issue adds)."""
        node = self.node
        value = assumed + request
        self.quota_failure = True
        cap = potential_available(node, fr)
        flavor, res = fr
        if value > cap:
            reasons.append(QuotaFact(res, flavor, request, assumed, free, cap, "", Mode.NO_FIT))
            return Mode.NO_FIT, 0, Shortfall(flavor, res, value, free, cap, Mode.NO_FIT)
        # Beyond the cap only a quota change can help; below it, a release may.
        known = self.blocking.get(fr)
        self.blocking[fr] = value if known is None else min(known, value)
        borrow, may_reclaim = borrowing_height(node, fr, value)
        view = self.view
        mode = (
            Mode.PREEMPT
            if view.nominal.get(fr, 0) >= value or may_reclaim or view.can_preempt_while_borrowing
            else Mode.NO_FIT
        )
        limiter = limiting_factor(node, fr)
        reasons.append(
            QuotaFact(res, flavor, request, assumed, free, cap, limiter, mode, view.may_preempt)
        )
        return mode, borrow, Shortfall(flavor, res, value, free, cap, mode)

    def find_flavor(
        self,
        plan: PodSetPlan,
        group: GroupPlan,
        assumed: dict[FlavorResource, int],
        reasons: list[Reason],
    ) -> tuple[str | None, Mode, int, tuple[Shortfall, ...]]:
        """Kueue's ``findFlavorForPodSets`` for one resource group."""
        view = self.view
        node = self.node
        has_parent = node.parent is not None
        usage = node.usage
        subtree = node.subtree
        best: tuple[str | None, Mode, int, tuple[Shortfall, ...]] = (None, Mode.NO_FIT, 0, ())
        best_mode, best_borrow = Mode.NO_FIT, 0
        for fname in group.flavors:
            flavor = self.flavors.get(fname)
            if flavor is None:
                reasons.append(f"flavor {fname} not found")
                continue
            if plan.constrained or flavor.node_taints:
                why = flavor_mismatch(flavor, plan.request)
                if why is not None:
                    reasons.append(why)
                    continue
            mode, borrow = Mode.FIT, 0
            shorts: list[Shortfall] = []
            for res, qty in group.requests:
                fr = (fname, res)
                before = assumed.get(fr, 0) if assumed else 0
                value = before + qty
                free = available(node, fr)
                if value <= free:  # Fit; borrowing when above the queue's own quota
                    if has_parent and usage.get(fr, 0) + value > subtree.get(fr, 0):
                        b = borrowing_height(node, fr, value)[0]
                        if b > borrow:
                            borrow = b
                    continue
                m, b, short = self.short(fr, before, qty, free, reasons)
                shorts.append(short)
                # keep the worst mode (Kueue: switch when the current one is preferred)
                if m < mode or (m == mode and b > borrow):
                    mode, borrow = m, b
                if mode is Mode.NO_FIT:
                    break
            if mode is Mode.NO_FIT:
                continue  # NoFit always tries the next flavor and is never preferred
            candidate = (fname, mode, borrow, tuple(shorts))
            try_next = (mode is Mode.PREEMPT and view.try_next_when_preempting) or (
                borrow > 0 and view.try_next_when_borrowing
            )
            if not try_next:
                return candidate
            if best[0] is None or mode > best_mode or (mode == best_mode and borrow < best_borrow):
                best, best_mode, best_borrow = candidate, mode, borrow
        return best


def assign_flavors(
    *,
    view: QueueView,
    node: QuotaNode,
    flavors: dict[str, ResourceFlavor],
    podsets: Sequence[PodSetRequest],
    plan: Sequence[PodSetPlan] | None = None,
) -> Assignment:
    """Assign flavors to every podset of one workload against the current usage.

    ``plan`` is ``plan_podsets(view, podsets)``, which callers may cache."""
    if plan is None:
        plan = plan_podsets(view, podsets)
    search = _Search(view, node, flavors)
    usage: dict[FlavorResource, int] = {}
    results: list[PodSetAssignment] = []
    for ps_plan in plan:
        ps = ps_plan.request
        chosen: list[tuple[str, str]] = []
        charged: list[tuple[FlavorResource, int]] = []
        mode, borrowing = Mode.FIT, 0
        reasons: list[Reason] = []
        shortfalls: list[Shortfall] = []
        failed_reason: str | None = None
        if ps_plan.uncovered is not None:
            reasons.append(f"resource {ps_plan.uncovered} unavailable in ClusterQueue {view.name}")
            failed_reason = RESOURCE_NOT_COVERED
        else:
            for group in ps_plan.groups:
                fname, fmode, fborrow, shorts = search.find_flavor(ps_plan, group, usage, reasons)
                if fname is None:
                    if search.quota_failure:
                        failed_reason = INSUFFICIENT_QUOTA
                    elif any(isinstance(r, str) and r.endswith(" not found") for r in reasons):
                        failed_reason = FLAVOR_NOT_FOUND
                    else:
                        failed_reason = NO_MATCHING_FLAVOR
                    break
                for r, q in group.requests:
                    chosen.append((r, fname))
                    charged.append(((fname, r), q))
                if fmode < mode:
                    mode = fmode
                if fborrow > borrowing:
                    borrowing = fborrow
                if shorts:
                    shortfalls.extend(shorts)
        if failed_reason is not None:
            results.append(
                PodSetAssignment(ps.name, (), Mode.NO_FIT, 0, tuple(reasons), tuple(shortfalls))
            )
            return _failed(results, failed_reason, search)
        for fr, qty in charged:
            usage[fr] = usage.get(fr, 0) + qty
        fit = mode is Mode.FIT
        results.append(
            PodSetAssignment(
                ps.name,
                tuple(sorted(chosen)),
                mode,
                borrowing,
                () if fit else tuple(reasons),
                () if fit else tuple(shortfalls),
            )
        )
    overall = min((p.mode for p in results), default=Mode.FIT)
    borrowing = max((p.borrowing for p in results), default=0)
    if overall is Mode.FIT:
        return Assignment(tuple(results), overall, borrowing, tuple(usage.items()), None, (), ())
    assignment = _failed(results, INSUFFICIENT_QUOTA, search)
    return Assignment(
        assignment.podsets,
        overall,
        borrowing,
        tuple(usage.items()),
        INSUFFICIENT_QUOTA,
        assignment.blocking,
        assignment.signature,
    )


def _failed(results: list[PodSetAssignment], reason: str, search: _Search) -> Assignment:
    signature: list[object] = [reason]
    for p in results:
        if p.reasons:
            signature.append(p.name)
            signature.extend(r if isinstance(r, str) else r.stable() for r in p.reasons)
    return Assignment(
        tuple(results),
        Mode.NO_FIT,
        0,
        (),
        reason,
        tuple(search.blocking.items()),
        tuple(signature),
    )


def still_fits(node: QuotaNode, usage: Sequence[tuple[FlavorResource, int]]) -> bool:
    """Re-check an assignment after other admissions in the same cycle."""
    # A loop rather than all(<generator>): this runs for most heads, and is cheaper.
    for fr, qty in usage:  # noqa: SIM110
        if qty > available(node, fr):
            return False
    return True


def could_fit_now(node: QuotaNode, blocking: Sequence[tuple[FlavorResource, int]]) -> bool:
    """Whether any flavor-resource an attempt was short of now has what it needed
    (if none has, the same attempt would fail the same way: no need to run it)."""
    for fr, needed in blocking:  # noqa: SIM110 (as in still_fits)
        if available(node, fr) >= needed:
            return True
    return False


register_by_fields(
    PodSetRequest,
    QueueView,
    Shortfall,
    QuotaFact,
    PodSetAssignment,
    Assignment,
    GroupPlan,
    PodSetPlan,
)
