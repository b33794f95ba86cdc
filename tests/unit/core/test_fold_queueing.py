"""Queueing over time: order, StrictFIFO vs BestEffortFIFO, requeue when quota
frees, objects that change or appear mid-run, and what each event decides."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from core_builders import (
    Driver,
    admitted,
    cohort,
    cq,
    flavor,
    job,
    kinds,
    last,
    lq,
    namespace,
    wpc,
)

from kuota.events.schema import decision_id


def setup(*extra: Any, strategy: str = "BestEffortFIFO", cpu: Any = 2) -> Driver:
    d = Driver()
    d.apply(flavor("default"), *extra)
    d.apply(cq("cq").flavor("default", cpu=cpu).strategy(strategy), lq("ns", "lq", "cq"))
    return d


def cpu_job(name: str, n: Any = 1, created: float | None = None, queue: str = "lq") -> Any:
    j = job("ns", name).queue(queue).requests(cpu=n)
    return j.created(created) if created is not None else j


# --------------------------------------------------------------------------- order


@dataclass
class OrderCase:
    name: str
    jobs: list[Any]  # submitted while the queue is full
    want: list[str]  # admission order once quota frees one slot at a time


ORDER = [
    OrderCase(
        "earlier creation first",
        [cpu_job("b", created=20), cpu_job("a", created=10), cpu_job("c", created=30)],
        ["ns/a", "ns/b", "ns/c"],
    ),
    OrderCase(
        "higher priority first, then creation",
        [
            cpu_job("low", created=1).priority("low"),
            cpu_job("high2", created=3).priority("high"),
            cpu_job("high1", created=2).priority("high"),
            cpu_job("none", created=0),
        ],
        ["ns/high1", "ns/high2", "ns/none", "ns/low"],
    ),
    OrderCase(
        "equal priority and time: the workload key decides",
        [cpu_job("y", created=5), cpu_job("x", created=5)],
        ["ns/x", "ns/y"],
    ),
]


@pytest.mark.parametrize("case", ORDER, ids=[c.name for c in ORDER])
def test_queue_order(case: OrderCase) -> None:
    d = setup(wpc("low", -10), wpc("high", 100), cpu=1)
    d.apply(cpu_job("running", created=0))
    assert d.state("ns/running") == "Admitted"
    d.apply(*case.jobs)
    got: list[str] = []
    running = "ns/running"
    for _ in case.jobs:
        out = d.finish(running)
        new = admitted(out)
        assert len(new) == 1, kinds(out)
        got += new
        running = new[0]
    assert got == case.want


# --------------------------------------------------------------------------- strategies


def test_best_effort_fifo_lets_smaller_jobs_pass_a_blocked_head() -> None:
    d = setup(cpu=4)
    d.apply(cpu_job("running", 3, created=0), cpu_job("big", 2, created=1))
    d.apply(cpu_job("small", 1, created=2))
    assert d.state("ns/big") == "Inadmissible"
    assert d.state("ns/small") == "Admitted"


def test_strict_fifo_head_blocks_the_queue() -> None:
    d = setup(strategy="StrictFIFO", cpu=4)
    d.apply(cpu_job("running", 3, created=0), cpu_job("big", 2, created=1))
    out = d.apply(cpu_job("small", 1, created=2))
    assert admitted(out) == []
    assert d.state("ns/small") == "Pending"  # never tried: the head blocks
    assert d.state("ns/big") == "Inadmissible"
    out = d.finish("ns/running")
    assert admitted(out) == ["ns/big", "ns/small"]


def test_strict_fifo_a_new_higher_priority_head_is_tried() -> None:
    d = setup(wpc("high", 10), strategy="StrictFIFO", cpu=4)
    d.apply(cpu_job("running", 3, created=0), cpu_job("big", 2, created=1))
    out = d.apply(cpu_job("urgent", 1, created=5).priority("high"))
    assert admitted(out) == ["ns/urgent"]


def test_strict_fifo_deleting_the_blocked_head_unblocks() -> None:
    d = setup(strategy="StrictFIFO", cpu=4)
    d.apply(cpu_job("running", 3, created=0), cpu_job("big", 2, created=1))
    d.apply(cpu_job("small", 1, created=2))
    out = d.delete("Job", "big", "ns")
    assert kinds(out) == [("Finished", "ns/big"), ("Admitted", "ns/small")]
    assert last(out, "Finished").reason == "Deleted"


def test_best_effort_parked_workloads_return_when_quota_frees() -> None:
    d = setup(cpu=2)
    d.apply(cpu_job("a", 2, created=0), cpu_job("b", 2, created=1), cpu_job("c", 1, created=2))
    assert [d.state(k) for k in ("ns/a", "ns/b", "ns/c")] == [
        "Admitted",
        "Inadmissible",
        "Inadmissible",
    ]
    out = d.finish("ns/a")
    assert kinds(out) == [("Finished", "ns/a"), ("Admitted", "ns/b")]
    out = d.finish("ns/b", succeeded=False)
    assert last(out, "Finished").reason == "Failed"
    assert admitted(out) == ["ns/c"]


def test_quota_freed_in_a_cohort_wakes_another_queue() -> None:
    d = Driver()
    d.apply(flavor("default"))
    d.apply(
        cq("a").cohort("pool").flavor("default", cpu=2),
        cq("b").cohort("pool").flavor("default", cpu=0),
        lq("ns", "lq", "a"),
        lq("ns", "lqb", "b"),
    )
    d.apply(cpu_job("a1", 2, created=0))
    d.apply(cpu_job("b1", 1, created=1, queue="lqb"))
    assert d.state("ns/b1") == "Inadmissible"
    out = d.finish("ns/a1")
    assert admitted(out) == ["ns/b1"]


def test_a_release_in_another_cohort_wakes_nothing_here() -> None:
    d = Driver()
    d.apply(flavor("default"))
    d.apply(
        cq("a").cohort("p1").flavor("default", cpu=1),
        cq("b").cohort("p2").flavor("default", cpu=1),
        lq("ns", "la", "a"),
        lq("ns", "lb", "b"),
    )
    d.apply(cpu_job("a1", 1, queue="la"), cpu_job("a2", 1, queue="la"))
    d.apply(cpu_job("b1", 1, queue="lb"))
    out = d.finish("ns/b1")
    assert kinds(out) == [("Finished", "ns/b1")]
    assert d.state("ns/a2") == "Inadmissible"


def test_identical_parked_workloads_settle_in_one_try() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("running", 1, created=0))
    d.apply(*[cpu_job(f"w{i}", 1, created=i + 1) for i in range(50)])
    out = d.finish("ns/running")
    assert kinds(out) == [("Finished", "ns/running"), ("Admitted", "ns/w0")]
    assert sum(1 for x in d.decisions if x.type == "Inadmissible") == 50


def test_cross_queue_order_prefers_not_borrowing() -> None:
    # Two heads wait in one cohort: b1 (older) would borrow, a2 (newer) fits in
    # a's nominal quota once a1 finishes. Kueue's order: not borrowing first.
    d = Driver()
    d.apply(flavor("default"))
    d.apply(
        cq("a").cohort("pool").flavor("default", cpu=1),
        cq("b").cohort("pool").flavor("default", cpu=0),
        cq("x").cohort("pool").flavor("default", cpu=1),
        lq("ns", "la", "a"),
        lq("ns", "lb", "b"),
        lq("ns", "lx", "x"),
    )
    d.apply(cpu_job("x1", created=0, queue="lx"), cpu_job("a1", created=0, queue="la"))
    d.apply(cpu_job("b1", created=1, queue="lb"), cpu_job("a2", created=2, queue="la"))
    assert [d.state(k) for k in ("ns/b1", "ns/a2")] == ["Inadmissible", "Inadmissible"]
    out = d.finish("ns/a1")
    assert admitted(out) == ["ns/a2"]
    assert d.state("ns/b1") == "Inadmissible"
    out = d.finish("ns/x1")
    assert admitted(out) == ["ns/b1"]


# --------------------------------------------------------------------------- changes mid-run


def test_finished_and_deleted_jobs_free_quota() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a", created=0), cpu_job("b", created=1), cpu_job("c", created=2))
    assert admitted(d.finish("ns/a")) == ["ns/b"]
    out = d.delete("Job", "b", "ns")
    # deleted: its quota is kept until its pods are gone (the driver reports at once)
    assert kinds(out) == [("Finished", "ns/b"), ("QuotaReleased", "ns/b"), ("Admitted", "ns/c")]
    assert d.state("ns/b") is None
    assert d.state("ns/a") == "Finished"


def test_deleting_a_pending_job_is_a_finished_decision() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a"), cpu_job("b"))
    out = d.delete("Job", "b", "ns")
    assert kinds(out) == [("Finished", "ns/b")]
    assert out[0].reason == "Deleted"
    assert d.fold.summary()[0].pending == 0


def test_quota_increase_admits_pending_and_decrease_keeps_admissions() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a", created=0), cpu_job("b", created=1), cpu_job("c", created=2))
    out = d.apply(cq("cq").flavor("default", cpu=3))
    assert admitted(out) == ["ns/b", "ns/c"]
    out = d.apply(cq("cq").flavor("default", cpu=1))
    assert [(x.type, x.quota) for x in out] == [
        ("QuotaChanged", {"default": {"cpu": {"nominalQuota": "1"}}})
    ]
    assert d.usage("cq") == {("default", "cpu"): 3000}
    d.apply(cpu_job("d", created=3))
    assert admitted(d.finish("ns/a")) == []
    assert admitted(d.finish("ns/b")) == []
    assert admitted(d.finish("ns/c")) == ["ns/d"]


def test_local_queue_and_cluster_queue_created_later() -> None:
    d = Driver()
    d.apply(flavor("default"))
    d.apply(cpu_job("j"))
    assert last(d.decisions, "Inadmissible").reason == "LocalQueueDoesNotExist"
    d.apply(lq("ns", "lq", "cq"))
    assert last(d.decisions, "Inadmissible").reason == "ClusterQueueDoesNotExist"
    out = d.apply(cq("cq").flavor("default", cpu=1))
    assert admitted(out) == ["ns/j"]


def test_local_queue_moved_to_another_cluster_queue() -> None:
    d = setup(cpu=0)
    d.apply(cq("big").flavor("default", cpu=4))
    d.apply(cpu_job("j"))
    assert d.state("ns/j") == "Inadmissible"
    out = d.apply(lq("ns", "lq", "big"))
    assert admitted(out) == ["ns/j"]
    assert last(out, "Admitted").cluster_queue == "big"


def test_local_queue_deleted_holds_pending_workloads() -> None:
    d = setup(cpu=0)
    d.apply(cpu_job("j"))
    d.delete("LocalQueue", "lq", "ns")
    assert last(d.decisions, "Inadmissible").reason == "LocalQueueDoesNotExist"
    assert d.fold.summary()[0].pending == 0


def test_cluster_queue_deleted_then_recreated() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a"), cpu_job("b"))
    d.delete("ClusterQueue", "cq")
    assert last(d.decisions, "Inadmissible", "ns/b").reason == "ClusterQueueDoesNotExist"
    assert d.state("ns/a") == "Admitted"  # keeps its admission while the queue terminates
    assert d.fold.summary() == []
    d.finish("ns/a")
    out = d.apply(cq("cq").flavor("default", cpu=1))
    assert admitted(out) == ["ns/b"]


def test_namespace_labels_change_selects_the_namespace() -> None:
    d = Driver()
    d.apply(flavor("default"), namespace("ns"))
    d.apply(
        cq("cq").flavor("default", cpu=1).selector({"matchLabels": {"team": "a"}}),
        lq("ns", "lq", "cq"),
    )
    d.apply(cpu_job("j"))
    assert d.state("ns/j") == "Inadmissible"
    out = d.apply(namespace("ns", team="a"))
    assert admitted(out) == ["ns/j"]


def test_priority_class_created_later() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("j").priority("gold"))
    assert last(d.decisions, "Inadmissible").reason == "PriorityClassNotFound"
    out = d.apply(wpc("gold", 5))
    assert admitted(out) == ["ns/j"]


def test_flavor_created_later_activates_the_queue() -> None:
    d = Driver()
    d.apply(cq("cq").flavor("h100", gpu=1), lq("ns", "lq", "cq"))
    d.apply(job("ns", "j").queue("lq").requests(gpu=1))
    assert last(d.decisions, "Inadmissible").reason == "FlavorNotFound"
    out = d.apply(flavor("h100"))
    assert admitted(out) == ["ns/j"]
    d.delete("ResourceFlavor", "h100")
    d.apply(job("ns", "k").queue("lq").requests(gpu=1))
    assert last(d.decisions, "Inadmissible", "ns/k").reason == "FlavorNotFound"


def test_flavor_labels_change_wakes_parked_workloads() -> None:
    d = Driver()
    d.apply(flavor("gpu").label("gpu", "a100"))
    d.apply(cq("cq").flavor("gpu", gpu=2), lq("ns", "lq", "cq"))
    d.apply(job("ns", "j").queue("lq").requests(gpu=1).node_selector(gpu="h100"))
    assert last(d.decisions, "Inadmissible").reason == "NoMatchingFlavor"
    out = d.apply(flavor("gpu").label("gpu", "h100"))
    assert admitted(out) == ["ns/j"]


def test_stop_policy_hold_and_resume() -> None:
    d = setup(cpu=2)
    d.apply(cpu_job("a", created=0))
    out = d.apply(cq("cq").flavor("default", cpu=2).stop("Hold"))
    assert out == []
    d.apply(cpu_job("b", created=1))
    assert last(d.decisions, "Inadmissible", "ns/b").reason == "ClusterQueueStopped"
    assert d.state("ns/a") == "Admitted"
    out = d.apply(cq("cq").flavor("default", cpu=2))
    assert admitted(out) == ["ns/b"]


def test_stop_policy_hold_and_drain_evicts() -> None:
    d = setup(cpu=2)
    d.apply(cpu_job("a", created=0))
    out = d.apply(cq("cq").flavor("default", cpu=2).stop("HoldAndDrain"))
    assert [x.type for x in out] == ["Evicted", "Requeued", "QuotaReleased", "Inadmissible"]
    assert out[0].reason == "ClusterQueueStopped"
    assert d.usage("cq") == {}
    out = d.apply(cq("cq").flavor("default", cpu=2))
    assert admitted(out) == ["ns/a"]


def test_job_changed_while_pending_is_requeued_with_the_new_spec() -> None:
    d = setup(cpu=2)
    d.apply(cpu_job("j", 3))
    assert d.state("ns/j") == "Inadmissible"
    out = d.apply(cpu_job("j", 2))
    assert admitted(out) == ["ns/j"]
    assert last(out, "Admitted").usage == {"default": {"cpu": "2"}}


def test_job_changed_while_admitted_keeps_its_admission_unless_its_podsets_change() -> None:
    d = setup(cpu=2)
    d.apply(cpu_job("j", 1))
    labelled = cpu_job("j", 1)
    labelled.meta()["labels"]["team"] = "x"
    assert d.apply(labelled) == []
    assert d.usage("cq") == {("default", "cpu"): 1000}
    assert d.apply(cpu_job("j", 1)) == []  # the same Job seen again: nothing new
    # new podsets: Kueue makes a new Workload; the old charge is never kept (issue #22)
    out = d.apply(cpu_job("j", 2))
    assert [(x.type, x.reason) for x in out] == [
        ("Evicted", "PodSetsChanged"),
        ("Requeued", "PodSetsChanged"),
        ("QuotaReleased", "PodsGone"),
        ("Admitted", None),
    ]
    assert d.usage("cq") == {("default", "cpu"): 2000}
    assert d.apply(cpu_job("j", 2)) == []


def test_an_admitted_job_moved_to_another_local_queue_is_evicted_and_queued_there() -> None:
    """The label moved (lq -> lq2) while the Admitted decision was on its way (the
    Job still suspended, so the webhook let it through): the admission in q's
    ClusterQueue ends, and the Job waits in q2, so a later stop never puts it
    back in lq."""
    d = setup(cpu=2)
    d.apply(cq("cq2").flavor("default", cpu=1))
    d.apply(lq("ns", "lq2", "cq2"))
    d.apply(cpu_job("j", 1))
    assert d.usage("cq") == {("default", "cpu"): 1000}
    moved = cpu_job("j", 1, queue="lq2")
    out = d.apply(moved)
    assert [(x.type, x.reason, x.cluster_queue) for x in out] == [
        ("Evicted", "LocalQueueChanged", "cq"),
        ("Requeued", "LocalQueueChanged", "cq"),
        ("QuotaReleased", "PodsGone", "cq"),
        ("Admitted", None, "cq2"),
    ]
    assert "from LocalQueue lq to lq2" in (out[0].message or "")
    assert d.usage("cq") == {} and d.usage("cq2") == {("default", "cpu"): 1000}


def test_deactivated_job() -> None:
    d = setup(cpu=2)
    inactive = cpu_job("j")
    inactive.meta().setdefault("annotations", {})["kuota.dev/active"] = "false"
    out = d.apply(inactive)
    assert [(x.type, x.reason) for x in out] == [("Deactivated", "InactiveWorkload")]
    assert d.state("ns/j") == "Deactivated"
    assert admitted(d.apply(cpu_job("j"))) == ["ns/j"]
    out = d.apply(inactive)
    assert [(x.type, x.reason) for x in out] == [
        ("Evicted", "InactiveWorkload"),
        ("Deactivated", "InactiveWorkload"),
        ("QuotaReleased", "PodsGone"),
    ]
    assert d.usage("cq") == {}


def test_a_finished_job_seen_again_is_ignored_and_a_new_one_is_admitted() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("j").uid("u1"))
    d.finish("ns/j")
    assert d.state("ns/j") == "Finished"
    assert d.apply(cpu_job("j").uid("u1")) == []  # a status update of the finished Job
    assert d.state("ns/j") == "Finished"
    out = d.apply(cpu_job("j").uid("u2"))  # a new Job under the same name
    assert [(x.type, x.uid) for x in out] == [("Admitted", "u2")]
    assert d.delete("Job", "j", "ns")[0].uid == "u2"
    assert d.state("ns/j") is None


def test_a_recreated_job_is_a_new_workload() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("j").uid("u1"))
    out = d.apply(cpu_job("j").uid("u2"))
    # the old Job's pods may still run: u2 waits for their quota (released at once here)
    assert kinds(out) == [
        ("Finished", "ns/j"),
        ("Inadmissible", "ns/j"),
        ("QuotaReleased", "ns/j"),
        ("Admitted", "ns/j"),
    ]
    assert [x.uid for x in out] == ["u1", "u2", "u1", "u2"]


# --------------------------------------------------------------------------- objects


def test_invalid_object_is_rejected_and_the_previous_version_stays() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a"), cpu_job("b"))
    bad = cq("cq").flavor("default", cpu=-1)
    out = d.apply(bad)
    assert [(x.type, x.reason, x.object) for x in out] == [
        ("Rejected", "InvalidObject", "ClusterQueue cq")
    ]
    assert out[0].message is not None and "nominalQuota" in out[0].message
    assert d.fold.summary()[0].resources[0].nominal == 1000
    assert admitted(d.finish("ns/a")) == ["ns/b"]


def test_invalid_job_is_rejected() -> None:
    d = setup(cpu=1)
    out = d.apply(job("ns", "j").queue("lq").requests(cpu="lots"))
    assert [(x.type, x.object) for x in out] == [("Rejected", "Job ns/j")]
    assert d.state("ns/j") is None


def test_job_without_queue_label_is_ignored() -> None:
    d = setup(cpu=1)
    assert d.apply(job("ns", "j").requests(cpu=1)) == []
    assert d.state("ns/j") is None


CycleSteps = list[Any]


@dataclass
class CycleCase:
    name: str
    cohorts: CycleSteps
    rejected: str  # the cohort whose upsert closes the cycle


CYCLES = [
    CycleCase("self parent", [cohort("a").parent("a")], "a"),
    CycleCase("two", [cohort("a").parent("b"), cohort("b").parent("a")], "b"),
    CycleCase(
        "three, closed last",
        [cohort("a").parent("b"), cohort("b").parent("c"), cohort("c").parent("a")],
        "c",
    ),
    CycleCase(
        "three, closed by an update",
        [cohort("a"), cohort("b").parent("a"), cohort("c").parent("b"), cohort("a").parent("c")],
        "a",
    ),
]


@pytest.mark.parametrize("case", CYCLES, ids=[c.name for c in CYCLES])
def test_circular_cohorts_are_rejected(case: CycleCase) -> None:
    d = Driver()
    d.apply(flavor("default"), cq("q").cohort("a").flavor("default", cpu=1), lq("ns", "lq", "q"))
    d.apply(cq("free").flavor("default", cpu=1), lq("ns", "lq-free", "free"))
    out: list[Any] = []
    for c in case.cohorts:
        out += d.apply(c)
    assert [(x.type, x.object, x.reason) for x in out] == [
        ("Rejected", f"Cohort {case.rejected}", "CohortCycle")
    ]
    # The queue under the cycle admits nothing and says why (docs/design/bad-input.md);
    # a queue outside it carries on.
    d.apply(cpu_job("j"))
    assert d.state("ns/j") == "Inadmissible"
    assert last(d.decisions, "Inadmissible", "ns/j").reason == "CohortCycle"
    assert admitted(d.apply(cpu_job("k").queue("lq-free"))) == ["ns/k"]
    # Breaking the cycle (the rejected cohort back without a parent) frees the queue.
    assert admitted(d.apply(cohort(case.rejected))) == ["ns/j"]


def test_cohort_deleted_leaves_an_implicit_cohort() -> None:
    d = Driver()
    d.apply(flavor("default"), cohort("pool").flavor("default", cpu=2))
    d.apply(cq("q").cohort("pool").flavor("default", cpu=0), lq("ns", "lq", "q"))
    assert admitted(d.apply(cpu_job("a"), cpu_job("b"))) == ["ns/a", "ns/b"]
    d.delete("Cohort", "pool")
    d.apply(cpu_job("c"))
    assert d.state("ns/c") == "Inadmissible"


# --------------------------------------------------------------------------- messages


def test_inadmissible_is_not_repeated() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a", created=0), cpu_job("b", created=1))
    before = [x for x in d.decisions if x.type == "Inadmissible"]
    assert len(before) == 1
    d.apply(cpu_job("c", 1, created=2))  # c is parked with b's shape: its own first verdict
    d.tick(at=10)
    d.apply(cq("cq").flavor("default", cpu=1))  # not a change: nothing is tried again
    d.apply(cq("cq").flavor("default", cpu="1000m").strategy("BestEffortFIFO"))
    inadmissible = [x.workload for x in d.decisions if x.type == "Inadmissible"]
    assert inadmissible == ["ns/b", "ns/c"]


def test_a_new_reason_is_announced() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a"), cpu_job("b"))
    d.apply(cq("cq").flavor("default", cpu=1).stop("Hold"))
    reasons = [x.reason for x in d.decisions if x.type == "Inadmissible" and x.workload == "ns/b"]
    assert reasons == ["InsufficientQuota", "ClusterQueueStopped"]


# --------------------------------------------------------------------------- article 004


def article_004() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "nvidia-h100"},
            "spec": {
                "nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-tesla-h100"},
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "team-alpha-cq"},
            "spec": {
                "cohort": "gpu-pool",
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "nvidia-h100",
                                "resources": [
                                    {
                                        "name": "nvidia.com/gpu",
                                        "nominalQuota": 8,
                                        "borrowingLimit": 4,
                                    }
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "training-queue", "namespace": "team-alpha"},
            "spec": {"clusterQueue": "team-alpha-cq"},
        },
    ]


def training(name: str, gpus: int) -> Any:
    return job("team-alpha", name).queue("training-queue").requests(gpu=gpus)


def test_article_004_as_written_admits_team_alpha() -> None:
    # The article's ClusterQueue has no namespaceSelector; kuota treats that as
    # "every namespace" (docs/design/namespace-selector.md), so it works as printed.
    d = Driver()
    d.apply(*article_004())
    out = d.apply(training("t1", 1))
    assert admitted(out) == ["team-alpha/t1"]


def test_article_004_team_alpha_borrows_up_to_twelve_gpus() -> None:
    objs = article_004()
    objs[1]["spec"]["namespaceSelector"] = {}
    other = cq("team-beta-cq").cohort("gpu-pool").flavor("nvidia-h100", gpu=8)
    d = Driver()
    d.apply(*objs, other.m)
    out = d.apply(*[training(f"t{i}", 2) for i in range(7)])
    assert admitted(out) == [f"team-alpha/t{i}" for i in range(6)]
    blocked = last(out, "Inadmissible", "team-alpha/t6")
    assert blocked.reason == "InsufficientQuota"
    assert blocked.message == (
        "couldn't assign flavors to podset main: insufficient quota for nvidia.com/gpu in "
        "flavor nvidia-h100: requested 2, 0 available, borrowing limit reached; 2 more needed"
    )
    assert d.usage("team-alpha-cq") == {("nvidia-h100", "nvidia.com/gpu"): 12000}
    summary = {s.name: s for s in d.fold.summary()}["team-alpha-cq"]
    assert (summary.cohort, summary.pending, summary.admitted) == ("gpu-pool", 1, 6)
    row = summary.resources[0]
    assert (row.nominal, row.borrowing_limit, row.usage) == (8000, 4000, 12000)


def test_article_004_message_names_what_is_missing() -> None:
    objs = article_004()
    objs[1]["spec"]["namespaceSelector"] = {}
    d = Driver()
    d.apply(*objs)
    d.apply(training("a", 7))
    out = d.apply(training("b", 2))
    assert last(out, "Inadmissible").message == (
        "couldn't assign flavors to podset main: insufficient quota for nvidia.com/gpu in "
        "flavor nvidia-h100: requested 2, 1 available, no unused quota left in cohort "
        "gpu-pool; 1 more needed"
    )
    # With a preemption policy, the message says preemption could make room.
    objs[1]["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    d.apply(objs[1])
    d.apply(training("c", 2))
    message = last(d.decisions, "Inadmissible", "team-alpha/c").message
    assert message is not None and message.endswith("; 1 more needed, preemption possible")


# --------------------------------------------------------------------------- events


def test_decision_ids_causes_and_offsets() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a"))
    out = d.apply(cpu_job("b"))
    event = d.events[-1]
    assert [(x.id, x.cause, x.cause_offset, x.at) for x in out] == [
        (decision_id(event.id, 0), event.id, len(d.events) - 1, event.at)
    ]


def test_ticks_pods_ready_and_plans_change_nothing_yet() -> None:
    d = setup(cpu=1)
    d.apply(cpu_job("a"), cpu_job("b"))
    assert d.tick(at=100) == []
    assert d.fold.now == 100
    assert d.ready("ns/a") == []
    assert d.plan("ns/b", ["ns/a"]) == []
    assert d.fold.next_wakeup() is None
    assert d.state("ns/a") == "Admitted"


def test_finished_for_an_unknown_workload_is_ignored() -> None:
    d = setup(cpu=1)
    assert d.finish("ns/ghost") == []


Step = Callable[[Driver], object]
