"""The fit path: flavor assignment for the attempts where everything fits.

Theory of operation: most attempts the cycle makes either fit at once or fail
on quota. :func:`fit_picks` follows :func:`kuota.core.assign.flavors.assign_flavors`
only while every flavor-resource it looks at fits as it is, and returns what
that search would choose (per podset the flavor of each resource group, and the
borrowing level) without building reasons or shortfalls; as soon as something
does not plainly fit it returns None and the caller runs the full search, which
also says why. With only fitting flavors Kueue's search reduces to: the first
eligible flavor that needs no borrowing, or that borrows while
``whenCanBorrow`` is ``MayStopSearch``; otherwise the least borrowing one.
:func:`fit_assignment` derives the ``Assignment`` from the plan and the picks
alone, so the cycle caches it per (ClusterQueue, shape, picks).
``tests/unit/core/test_assign_fitting_fastpaths.py`` holds both to the full search.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kuota.api.types import ResourceFlavor
from kuota.core.assign.flavors import (
    Assignment,
    Mode,
    PodSetAssignment,
    PodSetPlan,
    QueueView,
)
from kuota.core.assign.node_match import flavor_mismatch
from kuota.core.quota.tree import FlavorResource, QuotaNode, available, borrowing_height

__all__ = ["Picks", "fit_assignment", "fit_picks"]

# Per podset: the flavor chosen for each of its resource groups, and its borrowing level.
Picks = tuple[tuple[tuple[str, ...], int], ...]


def fit_picks(
    *,
    view: QueueView,
    node: QuotaNode,
    flavors: dict[str, ResourceFlavor],
    plan: Sequence[PodSetPlan],
) -> Picks | None:
    """What ``assign_flavors`` would choose, if everything it looks at fits as it
    is; None as soon as something does not (see the module docstring)."""
    parent = node.parent
    # In the usual shape (a ClusterQueue in a root cohort) a borrowing request's
    # borrowing level is always the root's height (borrowing_height() walks there).
    root_height = parent.height if parent is not None and parent.parent is None else -1
    usage = node.usage
    subtree = node.subtree
    if len(plan) == 1 and (single := plan[0].single) is not None and not plan[0].constrained:
        # One podset whose groups each offer one flavor: no choice to make, each
        # group takes its flavor if all fits; the podset borrows at the highest level.
        chosen, requests = single
        for fname in chosen:
            flavor = flavors.get(fname)
            if flavor is None or flavor.node_taints:
                break  # the general search below decides
        else:
            borrow = 0
            if root_height >= 0:  # under a root cohort: available(node, fr) inlined
                assert parent is not None
                parent_subtree = parent.subtree
                parent_usage = parent.usage
                all_caps = node.caps
                # read as objects: a FlavorResource unpacked typed is rebuilt as a
                # new tuple for each look-up (docs/design/native-core.md)
                pairs: Any = requests
                for pair in pairs:
                    fr: Any = pair[0]
                    value: int = pair[1]
                    used = usage.get(fr, 0)
                    free = parent_subtree.get(fr, 0) - parent_usage.get(fr, 0)
                    caps = all_caps.get(fr)
                    if caps is not None:
                        local, cap = caps
                        if cap is not None:
                            cap -= used - local if used > local else 0
                            if cap < free:
                                free = cap
                        if local > used:
                            free += local - used
                    elif fr in node.limits:  # caps not derived yet: the general form
                        free = available(node, fr)
                    if value > free:
                        return None
                    if used + value > subtree.get(fr, 0):
                        borrow = root_height
                return ((chosen, borrow),)
            for fr, value in requests:
                if value > available(node, fr):
                    return None
                if parent is not None and usage.get(fr, 0) + value > subtree.get(fr, 0):
                    b = borrowing_height(node, fr, value)[0]
                    if b > borrow:
                        borrow = b
            return ((chosen, borrow),)
    try_next = view.try_next_when_borrowing
    assumed: dict[FlavorResource, int] = {}  # what earlier podsets take
    picks: list[tuple[tuple[str, ...], int]] = []
    for ps_plan in plan:
        if ps_plan.uncovered is not None:
            return None
        constrained = ps_plan.constrained
        names: list[str] = []
        ps_borrow = 0
        for group in ps_plan.groups:
            best: str | None = None
            best_borrow = 0
            for fname, requests in group.by_flavor:
                flavor = flavors.get(fname)
                if flavor is None:
                    return None
                if (constrained or flavor.node_taints) and flavor_mismatch(
                    flavor, ps_plan.request
                ) is not None:
                    continue
                borrow = 0
                for fr, qty in requests:
                    value = assumed.get(fr, 0) + qty if assumed else qty
                    if value > available(node, fr):
                        return None
                    if parent is not None and usage.get(fr, 0) + value > subtree.get(fr, 0):
                        b = (
                            root_height
                            if root_height >= 0
                            else borrowing_height(node, fr, value)[0]
                        )
                        if b > borrow:
                            borrow = b
                if borrow == 0 or not try_next:
                    best, best_borrow = fname, borrow
                    break
                if best is None or borrow < best_borrow:
                    best, best_borrow = fname, borrow
            if best is None:
                return None
            names.append(best)
            if best_borrow > ps_borrow:
                ps_borrow = best_borrow
        picks.append((tuple(names), ps_borrow))
        if len(plan) > 1:
            for group, fname in zip(ps_plan.groups, names, strict=True):
                for res, qty in group.requests:
                    fr = (fname, res)
                    assumed[fr] = assumed.get(fr, 0) + qty
    return tuple(picks)


def fit_assignment(plan: Sequence[PodSetPlan], picks: Picks) -> Assignment:
    """The Assignment :func:`assign_flavors` returns for a fit with these picks."""
    usage: dict[FlavorResource, int] = {}
    results: list[PodSetAssignment] = []
    for ps_plan, (names, borrow) in zip(plan, picks, strict=True):
        chosen: list[tuple[str, str]] = []
        for group, fname in zip(ps_plan.groups, names, strict=True):
            for res, qty in group.requests:
                chosen.append((res, fname))
                usage[(fname, res)] = usage.get((fname, res), 0) + qty
        results.append(
            PodSetAssignment(ps_plan.request.name, tuple(sorted(chosen)), Mode.FIT, borrow, (), ())
        )
    borrowing = max((p.borrowing for p in results), default=0)
    return Assignment(tuple(results), Mode.FIT, borrowing, tuple(usage.items()), None, (), ())
