"""``kuota explain``'s history: decisions, quota state at each, and why a workload waits."""

from __future__ import annotations

import json

from audit_builders import NS, Journal, busy_journal, fold_all

from kuota.audit.explain import PREEMPTOR, WORKLOAD, Explainer, Explanation, relevant
from kuota.audit.replay import JournalRecord
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, parse_decision


def explain(key: str, recs: list[JournalRecord], decisions: list[Decision]) -> Explanation:
    ex = Explainer(key, relevant(key, decisions))
    until = ex.needed_until
    for r in recs:
        if until is not None and r.offset > until:
            break
        ex.event(r)
    return ex.explain()


def usage_of(step_quota: tuple, cq: str = "cq-gpu") -> int:  # type: ignore[type-arg]
    (own, *_) = step_quota
    assert own.name == cq
    return sum(r.usage for r in own.resources)


def test_history_of_a_finished_workload_with_quota_after_each_decision() -> None:
    recs = busy_journal().records()
    ds = fold_all(recs)
    ex = explain(f"{NS}/j4", recs, ds)
    assert [(s.decision.type, s.role) for s in ex.steps] == [
        ("Inadmissible", WORKLOAD),
        ("Admitted", WORKLOAD),
    ]
    assert [s.decision for s in ex.steps] == [d for d in ds if d.workload == f"{NS}/j4"]
    # j0..j3 hold 4 GPUs when j4 arrives; j0 finishes and j4 takes its place.
    assert usage_of(ex.steps[0].quota) == 4000
    assert usage_of(ex.steps[1].quota) == 4000
    assert ex.steps[1].quota[0].admitted == 4
    assert ex.state == "Admitted" and ex.waiting is None


def test_a_finished_workload_needs_no_fold_past_its_last_decision() -> None:
    recs = busy_journal().records()
    ds = fold_all(recs)
    mine = relevant(f"{NS}/j0", ds)
    assert [d.type for d in mine] == ["Admitted", "Finished"]
    ex = Explainer(f"{NS}/j0", mine)
    assert ex.needed_until == mine[-1].cause_offset
    waiting = Explainer(f"{NS}/j6", relevant(f"{NS}/j6", ds))
    assert waiting.needed_until is None, "a waiting workload's end state matters"


def test_the_quota_state_is_the_fold_summary_right_after_the_cause() -> None:
    recs = busy_journal().records()
    ds = fold_all(recs)
    key = f"{NS}/j8"
    ex = explain(key, recs, ds)
    (step,) = ex.steps
    fold = Fold()
    for r in recs:
        assert r.event is not None
        fold.apply(r.event, offset=r.offset)
        if r.offset == step.decision.cause_offset:
            break
    want = next(s for s in fold.summary() if s.name == "cq-gpu")
    assert step.quota == (want,)


def test_a_pending_workload_says_why_it_waits_and_where() -> None:
    recs = busy_journal().records()
    ds = fold_all(recs)
    for name, position, ahead in (("j6", 0, ()), ("j7", 1, ("team-a/j6",)), ("j9", 2, None)):
        ex = explain(f"{NS}/{name}", recs, ds)
        w = ex.waiting
        assert w is not None, name
        assert (w.cluster_queue, w.local_queue, w.position, w.local_position, w.queued) == (
            "cq-gpu",
            "lq",
            position,
            position,
            3,
        ), name
        if ahead is not None:
            assert w.ahead == ahead
        assert w.reason == "InsufficientQuota" and w.message, name
        last = [d for d in ds if d.workload == f"{NS}/{name}" and d.type == "Inadmissible"][-1]
        assert (w.message, w.reason_at) == (last.message, last.at)
        assert ex.state == "Inadmissible"
        assert ex.as_of_offset == recs[-1].offset


def test_a_held_workload_is_in_no_queue_and_says_why() -> None:
    j = Journal().queues().job("lost", queue="no-such-queue")
    recs = j.records()
    ds = fold_all(recs)
    ex = explain(f"{NS}/lost", recs, ds)
    assert ex.waiting is not None and ex.waiting.position is None and ex.waiting.queued == 0
    assert ex.waiting.reason == "LocalQueueDoesNotExist"


def test_cohort_members_are_part_of_the_quota_state() -> None:
    j = Journal().queues(cohort="pool").jobs(2)
    recs = j.records()
    ds = fold_all(recs)
    ex = explain(f"{NS}/j0", recs, ds)
    names = [s.name for s in ex.steps[0].quota]
    assert names == ["cq-gpu", "cq-other"] and ex.steps[0].quota[0].cohort == "pool"


def test_preemptions_it_caused_are_part_of_its_history() -> None:
    recs = busy_journal().records()
    ds = fold_all(recs)
    victim = next(d for d in ds if d.workload == f"{NS}/j3")
    preempted = victim.model_copy(
        update={
            "type": "Preempted",
            "preemptor": f"{NS}/j8",
            "reason": "InClusterQueue",
            "policy": "LowerPriority",
            "id": "p" * 24,
        }
    )
    mine = relevant(f"{NS}/j8", [*ds, preempted])
    assert preempted in mine
    ex = explain(f"{NS}/j8", recs, [*ds, preempted])
    roles = {s.decision.id: s.role for s in ex.steps}
    assert roles["p" * 24] == PREEMPTOR
    assert relevant(f"{NS}/j3", [preempted]) == [preempted], "and the victim's"


def test_an_unknown_workload_has_no_history() -> None:
    recs = busy_journal().records()
    ex = explain(f"{NS}/nobody", recs, fold_all(recs))
    assert ex.steps == () and ex.state is None and ex.waiting is None


def test_explanation_serialises_for_json() -> None:
    recs = busy_journal().records()
    ds = fold_all(recs)
    doc = json.loads(json.dumps(explain(f"{NS}/j7", recs, ds).to_dict()))
    assert doc["workload"] == f"{NS}/j7" and doc["state"] == "Inadmissible"
    assert doc["waiting"]["position_in_cluster_queue"] == 1
    first = doc["history"][0]
    assert first["decision"]["type"] == "Inadmissible"
    assert first["quota"][0]["resources"][0] == {
        "flavor": "gpu-a",
        "resource": "nvidia.com/gpu",
        "usage": "4",
        "nominal": "4",
        "borrowing_limit": None,
        "lending_limit": None,
        "borrowed": "0",
    }


def test_pending_workloads_is_kueue_visibility_order() -> None:
    """The Fold accessor explain relies on: queue order, parked included."""
    recs = busy_journal().records()
    fold = Fold()
    for r in recs:
        assert r.event is not None
        fold.apply(r.event, offset=r.offset)
    assert fold.pending_workloads("cq-gpu") == [
        (f"{NS}/j6", "lq"),
        (f"{NS}/j7", "lq"),
        (f"{NS}/j9", "lq"),
    ]
    assert fold.pending_workloads("no-such-cq") == []


def test_a_gang_is_explained_by_its_key_with_the_rejection_of_its_manifest() -> None:
    # A PyTorchJob's key is ns/pytorchjob/name (docs/design/workload-identity.md);
    # the Rejected of its manifest names the object "PyTorchJob ns/name" and is its
    # own step, not one it caused as a preemptor.
    rejected = parse_decision(
        {
            "id": "r" * 24,
            "cause": "e1",
            "at": 1.0,
            "type": "Rejected",
            "object": "PyTorchJob ns/ddp",
            "kind": "PyTorchJob",
            "reason": "InvalidObject",
            "message": "spec.pytorchReplicaSpecs: a PyTorchJob needs a Master replica spec",
        }
    )
    job_rejected = rejected.model_copy(update={"object": "Job ns/ddp", "id": "j" * 24})
    mine = relevant("ns/pytorchjob/ddp", [rejected, job_rejected])
    assert mine == [rejected], "not the Job of the same name's"
    ex = Explainer("ns/pytorchjob/ddp", mine, Fold()).explain()
    assert [s.role for s in ex.steps] == [WORKLOAD]
