"""A small fluent builder of quota forests with admitted workloads.

``World().cq("a", "pool", gpu=(8, 4)).admitted("a", "a/1", gpu=4, priority=1)``
is a ClusterQueue ``a`` in cohort ``pool`` with nominal 8 and borrowing limit 4
of ``gpu`` in flavor ``f``, and a workload ``a/1`` admitted there using 4.
Quotas are ``n``, ``(n, borrowing)`` or ``(n, borrowing, lending)``, whole
units (converted to milli-units). ``preemptor(...)`` returns a
:class:`~kuota.core.preemption.classical.Preemptor` whose contested flavor-resources are
the ones its request does not fit in now (as the flavor assignment would say).

``within_setup`` / ``plans_setup`` are the fold-level start of the preemption
and planner tests: two low Jobs fill ClusterQueue ``a``'s 8 GPUs.
"""

from __future__ import annotations

from typing import Any

from builders.driver import Driver
from builders.manifests import cluster_queue, flavor, job, local_queue, priority_class

from kuota.api.types import (
    BorrowWithinCohort,
    FlavorQuotas,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
)
from kuota.core.fold.fold import Fold
from kuota.core.preemption.classical import AdmittedWorkload, Preemptor, Snapshot
from kuota.core.quota.fairshare import Weights
from kuota.core.quota.tree import FlavorResource, QuotaTree, add_usage, available

FLAVOR = "f"
MILLI = 1000
Quota = int | tuple[Any, ...]


def _groups(flavor: str, quotas: dict[str, Quota]) -> tuple[ResourceGroup, ...]:
    if not quotas:
        return ()
    rqs = []
    for name, q in quotas.items():
        t = q if isinstance(q, tuple) else (q,)
        t = t + (None,) * (3 - len(t))
        rqs.append(
            ResourceQuota(
                name,
                t[0] * MILLI,
                None if t[1] is None else t[1] * MILLI,
                None if t[2] is None else t[2] * MILLI,
            )
        )
    return (ResourceGroup(tuple(quotas), (FlavorQuotas(flavor, tuple(rqs)),)),)


def usage_of(
    requests: dict[str, int], flavor: str = FLAVOR
) -> tuple[tuple[FlavorResource, int], ...]:
    return tuple(((flavor, r), q * MILLI) for r, q in sorted(requests.items()))


class World:
    def __init__(self) -> None:
        self.tree = QuotaTree()
        self.policies: dict[str, PreemptionPolicy] = {}
        self.workloads: dict[str, list[AdmittedWorkload]] = {}
        self.queue_weights: dict[str, int] = {}
        self.cohort_weights: dict[str, int] = {}
        self.clock = 0.0

    # ----------------------------------------------------------------- structure

    def cohort(
        self, name: str, parent: str | None = None, *, weight: float | None = None, **quotas: Quota
    ) -> World:
        self.tree.set_cohort(name, parent=parent, groups=_groups(FLAVOR, quotas))
        if weight is not None:
            self.cohort_weights[name] = int(weight * MILLI)
        return self

    def cq(
        self,
        name: str,
        cohort: str | None = None,
        *,
        within: str = "Never",
        reclaim: str = "Never",
        borrow: str = "Never",
        threshold: int | None = None,
        weight: float | None = None,
        flavor: str = FLAVOR,
        **quotas: Quota,
    ) -> World:
        self.tree.set_queue(name, cohort=cohort, groups=_groups(flavor, quotas))
        self.policies[name] = PreemptionPolicy(
            within, reclaim, BorrowWithinCohort(borrow, threshold)
        )
        if weight is not None:
            self.queue_weights[name] = int(weight * MILLI)
        return self

    # ----------------------------------------------------------------- workloads

    def admitted(
        self,
        cq: str,
        key: str,
        *,
        priority: int = 0,
        at: float | None = None,
        queue_time: float | None = None,
        evicting: bool = False,
        flavor: str = FLAVOR,
        **requests: int,
    ) -> World:
        if at is None:
            self.clock += 1
            at = self.clock
        usage = usage_of(requests, flavor)
        node = self.tree.queues[cq]
        for fr, qty in usage:
            add_usage(node, fr, qty)
        self.workloads.setdefault(cq, []).append(
            AdmittedWorkload(
                key, cq, priority, at, at if queue_time is None else queue_time, usage, evicting
            )
        )
        return self

    def preemptor(
        self,
        cq: str,
        key: str = "new/p",
        *,
        priority: int = 0,
        queue_time: float = 1000.0,
        flavor: str = FLAVOR,
        **requests: int,
    ) -> Preemptor:
        usage = usage_of(requests, flavor)
        node = self.tree.queues[cq]
        contested = frozenset(fr for fr, qty in usage if qty > available(node, fr))
        return Preemptor(key, cq, priority, queue_time, usage, contested)

    # ----------------------------------------------------------------- views

    def view(self) -> Snapshot:
        return Snapshot(self.tree, self.policies, self.workloads)

    def weights(self) -> Weights:
        return Weights(self.queue_weights, self.cohort_weights)

    def usage(self) -> dict[str, dict[FlavorResource, int]]:
        """Every node's usage (nonzero entries), to check a search restores the tree."""
        out: dict[str, dict[FlavorResource, int]] = {}
        for kind, nodes in (("cq", self.tree.queues), ("cohort", self.tree.cohorts)):
            for name, node in nodes.items():
                out[f"{kind}:{name}"] = {fr: v for fr, v in node.usage.items() if v}
        return out

    def workload(self, key: str) -> AdmittedWorkload:
        for ws in self.workloads.values():
            for w in ws:
                if w.key == key:
                    return w
        raise KeyError(key)


def within_setup(d: Driver) -> None:
    d.apply(
        flavor("h100"),
        priority_class("low", value=10),
        priority_class("high", value=100),
        cluster_queue("a", gpus=8, within="LowerPriority"),
        local_queue("lq", namespace="ns", cluster_queue="a"),
    )
    d.apply(
        job("low-1", namespace="ns", gpus=4, priority="low"),
        job("low-2", namespace="ns", gpus=4, priority="low"),
    )


def plans_setup() -> Driver:
    d = Driver(Fold(preemption="plans"))
    within_setup(d)
    return d
