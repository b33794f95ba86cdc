"""A preemptor's victims' quota is held for it until the last victim's pods are gone.

Found on Kueue's baseline shape (docs/design/kueue-side-by-side.md): a
high-priority Job that preempted workloads of three ClusterQueues waited for
their pods, and as each victim's pods went its quota was given back at once,
to whoever could use it first: the victim itself, requeued and admitted again
(borrowing), to be preempted again when the preemptor could run, or never. In
Kueue the waiting preemptor is a head in every cycle and charges its usage
before the heads ordered after it, so a victim (lower priority) cannot take
the quota back. A cohort like ``tests/e2e/scenarios/cohort-priority-tiers.yaml``:
``c/large`` preempts ``a/small``, ``b/medium-3`` and ``c/small``.
"""

from __future__ import annotations

from builders.driver import Driver, kinds
from builders.manifests import cluster_queue, flavor, job, local_queue, priority_class

from kuota.events.schema import Decision

QUEUES = {"a": 4, "b": 2, "c": 4}  # ClusterQueue -> borrowingLimit (nominal 4 each)


def setup() -> Driver:
    d = Driver(auto_stop=False)
    d.apply(
        flavor("h100"),
        priority_class("small", value=50),
        priority_class("medium", value=100),
        priority_class("large", value=200),
        *[
            cluster_queue(q, gpus=(4, limit), cohort="tiers", within="LowerPriority", reclaim="Any")
            for q, limit in QUEUES.items()
        ],
        *[local_queue("lq", namespace=q, cluster_queue=q) for q in QUEUES],
    )
    t = 0.0
    for ns, name, gpus, cls in [
        ("a", "medium-1", 2, "medium"),
        ("a", "medium-2", 2, "medium"),
        ("b", "medium-1", 2, "medium"),
        ("b", "medium-2", 2, "medium"),
        ("b", "medium-3", 2, "medium"),  # b at its borrowing limit (6)
        ("a", "small", 1, "small"),  # a borrows 1
        ("c", "small", 1, "small"),  # the cohort's 12 are used
    ]:
        t += 1
        out = d.apply(job(name, namespace=ns, gpus=gpus, priority=cls, created=t), at=t)
        assert kinds(out) == [("Admitted", f"{ns}/{name}")]
    return d


def preempt(d: Driver) -> dict[str, Decision]:
    out = d.apply(job("large", namespace="c", gpus=4, priority="large", created=10), at=10)
    stops = {x.workload or "": x for x in out if x.type == "Preempted"}
    assert sorted(stops) == ["a/small", "b/medium-3", "c/small"]
    assert {x.reason for x in stops.values()} == {"InCohortReclamation", "InClusterQueue"}
    waiting = [x for x in out if x.type == "Inadmissible" and x.workload == "c/large"]
    assert [x.reason for x in waiting] == ["WaitingForStoppedWorkloads"]
    return stops


def test_a_victim_whose_pods_are_gone_does_not_take_its_quota_back() -> None:
    d = setup()
    stops = preempt(d)
    # a/small's pods are gone first: a/small fits again (a borrows 1 of the 12),
    # but the quota is the preemptor's. It used to be QuotaReleased + Admitted.
    assert d.stopped(stops["a/small"], at=11) == []
    assert d.stopped(stops["b/medium-3"], at=12) == []
    assert d.fold.workload_state("a/small") != "Admitted"
    out = d.stopped(stops["c/small"], at=13)
    assert kinds(out)[:4] == [
        ("QuotaReleased", "a/small"),
        ("QuotaReleased", "b/medium-3"),
        ("QuotaReleased", "c/small"),
        ("Admitted", "c/large"),
    ]
    order = ("a/small", "b/medium-3", "c/small")
    assert [x.stop_id for x in out[:3]] == [stops[k].id for k in order]
    (admitted,) = [x for x in out if x.type == "Admitted"]
    assert sorted(admitted.victims or []) == sorted(stops)
    assert d.fold.workload_state("c/large") == "Admitted"
    for key in stops:  # the cohort is full again: the victims wait
        assert d.fold.workload_state(key) == "Inadmissible"


def test_the_held_quota_is_released_when_the_preemptor_is_admitted_anyway() -> None:
    d = setup()
    stops = preempt(d)
    assert d.stopped(stops["a/small"], at=11) == []
    # Room frees elsewhere (b/medium-1 ends, 2 back to the cohort): with a/small's
    # 1 held for it and c/small's still charged, c/large still waits; b/medium-2
    # ending too gives it room before its last victims stopped.
    assert ("Admitted", "c/large") not in kinds(d.finish("b/medium-1", at=12))
    out = d.finish("a/medium-1", at=13)
    assert ("Admitted", "c/large") in kinds(out)
    # a/small's held quota went back with the admission; the two still stopping keep theirs.
    assert ("QuotaReleased", "a/small") in kinds(out)
    seen = kinds(out)
    assert seen.index(("Admitted", "c/large")) < seen.index(("QuotaReleased", "a/small"))
    assert kinds(d.stopped(stops["b/medium-3"], at=14))[0] == ("QuotaReleased", "b/medium-3")


def test_the_held_quota_is_released_when_the_preemptor_is_deleted() -> None:
    d = setup()
    stops = preempt(d)
    assert d.stopped(stops["a/small"], at=11) == []
    out = d.delete("Job", "large", "c", at=12)
    assert ("QuotaReleased", "a/small") in kinds(out)
    assert ("Admitted", "a/small") in kinds(out), "nobody waits for that quota any more"
    assert kinds(d.stopped(stops["c/small"], at=13))[0] == ("QuotaReleased", "c/small")
