"""A head parked without a victim searches again when a release may give it one.

Found by the Kueue referee (issue #16, docs/design/kueue-side-by-side.md): a
small Job parked as ``InsufficientQuota`` in a ClusterQueue above its nominal
quota (it would borrow, so no other queue's workload may go for it, and none of
its own has a lower priority) stayed parked when its queue dropped back within
its nominal quota while the cohort was full of borrowers. Kueue requeues the
cohort's inadmissible workloads when a workload of the cohort is evicted or
finishes, and the requeued head searches again: it reclaims from a borrower.
kuota woke the parked group when the quota it lacked was free, a preemptor took
that quota first, and the group's head was then set aside by the quick re-check
of that need, without a new search.

Cohort of three ClusterQueues, nominal 4 GPUs each, borrowingLimit 4,
``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``:

- a: a/base (1) and a/big (4, admitted last): 5, borrowing 1
- b: b/one (4) and b/two (3): 7, borrowing 3; the cohort's 12 are used
- a/x (2, low) would borrow: no victim allowed, ``InsufficientQuota``
- c/large (4, high) reclaims a/big (the most recently admitted borrower):
  a drops to 1, within its nominal quota; c/large takes the 4 freed
- a/x now fits a's nominal quota: it reclaims b/two from the borrower b
"""

from __future__ import annotations

import pytest
from builders.driver import Driver, kinds
from builders.manifests import cluster_queue, flavor, job, local_queue, priority_class

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision


def setup(mode: str) -> Driver:
    d = Driver(Fold(preemption=mode))
    d.apply(
        flavor("h100"),
        priority_class("low", value=10),
        priority_class("high", value=100),
        *[
            cluster_queue(q, gpus=(4, 4), cohort="pool", within="LowerPriority", reclaim="Any")
            for q in "abc"
        ],
        *[local_queue("lq", namespace=q, cluster_queue=q) for q in "abc"],
    )
    t = 0.0
    for ns, name, gpus in [("a", "base", 1), ("b", "one", 4), ("b", "two", 3), ("a", "big", 4)]:
        t += 1
        out = d.apply(job(name, namespace=ns, gpus=gpus, priority="low", created=t), at=t)
        assert kinds(out) == [("Admitted", f"{ns}/{name}")]
    return d


def play(d: Driver) -> list[Decision]:
    """Each PreemptionPlan the planner would write is folded at once (plans mode)."""
    out: list[Decision] = []
    for name, ns, gpus, cls, t in [("x", "a", 2, "low", 10), ("large", "c", 4, "high", 20)]:
        out += d.apply(job(name, namespace=ns, gpus=gpus, priority=cls, created=t), at=t)
        while plans := d.fold.preemption_plans():
            for plan in plans:
                out += d.plan(plan.preemptor, list(plan.victims), at=t)
    return out


@pytest.mark.parametrize("mode", ["inline", "plans"])
def test_a_parked_head_back_within_nominal_reclaims_from_a_borrower(mode: str) -> None:
    d = setup(mode)
    out = play(d)
    preempted = [(x.workload, x.preemptor, x.reason) for x in out if x.type == "Preempted"]
    assert preempted == [
        ("a/big", "c/large", "InCohortReclamation"),
        ("b/two", "a/x", "InCohortReclamation"),
    ]
    admitted = [(x.workload, x.victims) for x in out if x.type == "Admitted"]
    assert admitted == [("c/large", ["a/big"]), ("a/x", ["b/two"])]
    said = [x.reason for x in out if x.type == "Inadmissible" and x.workload == "a/x"]
    quota = [r for r in said if r != "WaitingForPreemptionPlan"]
    assert quota[0] == "InsufficientQuota", "parked first: it would borrow, no victim"
    assert d.state("a/x") == "Admitted" and d.state("b/two") == "Inadmissible"


def test_plans_mode_announces_what_inline_mode_does() -> None:
    """Drop the WaitingForPreemptionPlan announcements and each workload is told
    the same things in the same order in both modes (the plans of one batch may
    settle two heads in another order: docs/design/plans-mode.md); a head that
    searches again for the reason it already has is not announced again, nor
    told that it waits for a plan."""
    inline, plans = play(setup("inline")), play(setup("plans"))

    def said(ds: list[Decision]) -> dict[str, list[tuple[str, str | None]]]:
        per: dict[str, list[tuple[str, str | None]]] = {}
        for x in ds:
            if x.reason != "WaitingForPreemptionPlan":
                per.setdefault(x.workload or "", []).append((x.type, x.reason))
        return per

    assert said(plans) == said(inline)
    for ds in (inline, plans):
        x_said = [x.reason for x in ds if x.workload == "a/x" and x.type == "Inadmissible"]
        assert x_said.count("InsufficientQuota") == 1
    waits = [x.workload for x in plans if x.reason == "WaitingForPreemptionPlan"]
    assert waits.count("a/x") == 1, "searched again at 20 s: not announced as a wait"
