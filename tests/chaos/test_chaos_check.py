"""The fault runs' observer: usage, violations and double actuation from Job changes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from chaos_check import ANN_DECISION_ID, SLICE_GPUS, Observer, claim_gpus, claim_owner, pod_gpus
from chaos_workload import GI, quota_docs
from e2e_harness import QuotaModel


def job(name: str, *, suspend: bool, decision: str | None = None, done: bool = False) -> Any:
    md: dict[str, Any] = {"namespace": "chaos-a", "name": name, "resourceVersion": "1"}
    if decision:
        md["annotations"] = {ANN_DECISION_ID: decision}
    status = {"conditions": [{"type": "Complete", "status": "True"}]} if done else {}
    return {"metadata": md, "spec": {"suspend": suspend}, "status": status}


def observer() -> Observer:
    charges = {f"chaos-a/w{i}": ("chaos-a", {"gpu-memory": 80 * GI}) for i in range(4)}
    return Observer(
        api=None,  # type: ignore[arg-type]
        kafka=None,
        run="chaos",
        quota=QuotaModel.of(quota_docs()),
        charges=charges,
    )


def test_usage_follows_the_changes_and_over_quota_is_counted() -> None:
    o = observer()
    for i in range(3):
        o._on_job("UPSERT", job(f"w{i}", suspend=True))
        o._on_job("UPSERT", job(f"w{i}", suspend=False, decision=f"d{i}"))
    assert o.usage() == {("chaos-a", "gpu-memory"): 240 * GI}  # nominal 160Gi + borrowing 80Gi
    assert not o.violations
    o._on_job("UPSERT", job("w3", suspend=False, decision="d3"))
    assert o.violations and "chaos-a uses" in o.violations[-1]
    o._on_job("UPSERT", job("w3", suspend=False, decision="d3", done=True))
    o._on_job("DELETE", job("w2", suspend=False))
    assert o.usage() == {("chaos-a", "gpu-memory"): 160 * GI}


def test_a_second_unsuspension_for_one_decision_is_a_double_actuation() -> None:
    o = observer()
    o._on_job("UPSERT", job("w0", suspend=True))
    o._on_job("UPSERT", job("w0", suspend=False, decision="d0"))
    o._on_job("UPSERT", job("w0", suspend=True, decision="d0"))
    assert not o.doubles
    o._on_job("UPSERT", job("w0", suspend=False, decision="d1"))  # a new admission: fine
    assert not o.doubles
    o._on_job("UPSERT", job("w0", suspend=True, decision="d1"))
    o._on_job("UPSERT", job("w0", suspend=False, decision="d1"))
    assert o.doubles and "d1" in o.doubles[0]


def test_a_job_held_for_another_reason_than_quota_is_lost() -> None:
    from kuota.events.schema import Decision

    o = observer()

    def inadmissible(name: str, reason: str) -> Decision:
        return Decision(
            id=f"d-{name}",
            cause="c",
            at=1.0,
            type="Inadmissible",
            workload=f"chaos-a/{name}",
            reason=reason,
        )

    for name in ("w0", "w1", "w2"):
        o._on_job("UPSERT", job(name, suspend=True))
    o.decisions += [
        inadmissible("w0", "InsufficientQuota"),
        inadmissible("w1", "WaitingForPreemptionPlan"),
        inadmissible("w2", "ActuationLoop"),  # a failed start, held until the Job changes
    ]
    ends, lost = o.classify(["chaos-a/w0", "chaos-a/w1", "chaos-a/w2"])
    assert ends["pending"] == 2
    assert len(lost) == 1 and "chaos-a/w2" in lost[0] and "ActuationLoop" in lost[0]


# ------------------------------------------------------------------ bypass (issue #22)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


def admitted(name: str, did: str, gpu_memory: str) -> Any:
    from kuota.events.schema import Decision

    return Decision(
        id=did,
        cause="c",
        at=1.0,
        type="Admitted",
        workload=f"chaos-a/{name}",
        usage={"chaos-gpu": {"gpu-memory": gpu_memory}},
    )


def pod(job_name: str, n: int, *, phase: str = "Running", template: str = "slice") -> Any:
    return {
        "metadata": {
            "namespace": "chaos-a",
            "name": f"{job_name}-{n}",
            "labels": {"batch.kubernetes.io/job-name": job_name},
        },
        "spec": {"nodeName": "n1", "resourceClaims": [{"resourceClaimTemplateName": template}]},
        "status": {"phase": phase},
    }


def rogue(obj: Any) -> Any:
    obj["metadata"]["labels"] = {"chaos.kuota.dev/rogue": "true", "kueue.x-k8s.io/queue-name": "q"}
    return obj


def test_pods_of_an_admission_are_no_bypass(monkeypatch: Any) -> None:
    import chaos_check

    clock = Clock()
    monkeypatch.setattr(chaos_check, "time", clock)
    o = observer()
    o._on_job("UPSERT", job("w0", suspend=True))
    o._on_job("UPSERT", job("w0", suspend=False, decision="d0"))
    o.decisions.append(admitted("w0", "d0", "80Gi"))
    clock.now += 0.1
    o._on_pod("UPSERT", pod("w0", 0, template="whole"))
    clock.now += 2.0
    o._on_pod("UPSERT", pod("w0", 0, phase="Succeeded", template="whole"))
    assert o.bypass() == (0.0, [])


def test_a_users_unsuspension_counts_its_pods_gpu_seconds(monkeypatch: Any) -> None:
    import chaos_check

    clock = Clock()
    monkeypatch.setattr(chaos_check, "time", clock)
    o = observer()
    o._on_job("UPSERT", rogue(job("r0", suspend=True)))
    o._on_job("UPSERT", rogue(job("r0", suspend=False)))  # no decision id: a user did it
    assert not o.doubles, "a rogue Job's unsuspension is judged by bypass, not as a double"
    o._on_pod("UPSERT", pod("r0", 0))
    clock.now += 4.0
    o._on_pod("DELETE", pod("r0", 0))
    total, details = o.bypass()
    assert total == 4.0 * 10 / 80
    assert len(details) == 1 and "without a fresh admission (decision-id None)" in details[0]


def test_an_old_admission_id_does_not_admit_again(monkeypatch: Any) -> None:
    """Preempted, suspended, then unsuspended by a user: the annotation still names
    the first admission, which admitted the first run only."""
    import chaos_check

    clock = Clock()
    monkeypatch.setattr(chaos_check, "time", clock)
    o = observer()
    o.decisions.append(admitted("w1", "d1", "10Gi"))
    o._on_job("UPSERT", job("w1", suspend=True))
    o._on_job("UPSERT", job("w1", suspend=False, decision="d1"))
    o._on_pod("UPSERT", pod("w1", 0))
    clock.now += 1.0
    o._on_job("UPSERT", job("w1", suspend=True, decision="d1"))
    o._on_pod("DELETE", pod("w1", 0))
    o._on_job("UPSERT", job("w1", suspend=False, decision="d1"))
    o._on_pod("UPSERT", pod("w1", 1))
    clock.now += 2.0
    total, details = o.bypass()
    assert total == 2.0 * 10 / 80 and "w1-1" in details[0], details


def test_pods_beyond_what_the_admission_charged_count(monkeypatch: Any) -> None:
    """Grown after admission (parallelism 1 -> 2): the second slice ran on no quota."""
    import chaos_check

    clock = Clock()
    monkeypatch.setattr(chaos_check, "time", clock)
    o = observer()
    o.decisions.append(admitted("w2", "d2", "10Gi"))
    o._on_job("UPSERT", job("w2", suspend=True))
    o._on_job("UPSERT", job("w2", suspend=False, decision="d2"))
    o._on_pod("UPSERT", pod("w2", 0))
    clock.now += 1.0
    o._on_pod("UPSERT", pod("w2", 1))
    clock.now += 3.0
    total, details = o.bypass()
    assert total == 3.0 * 10 / 80
    assert (
        len(details) == 1 and "w2-1" in details[0] and "beyond the 0.125 GPU(s) of d2" in details[0]
    )
    # a pod that replaces a finished one is admitted again
    o._on_pod("UPSERT", pod("w2", 0, phase="Succeeded"))
    o._on_pod("UPSERT", pod("w2", 1, phase="Succeeded"))
    o._on_pod("UPSERT", pod("w2", 2))
    clock.now += 1.0
    assert o.bypass()[0] == 3.0 * 10 / 80


def test_a_rogue_jobs_charge_follows_its_queue_label() -> None:
    o = observer()
    r = rogue(job("r1", suspend=True))
    o._on_job("UPSERT", r)
    moved = rogue(job("r1", suspend=False))
    moved["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "q2"
    moved["spec"]["parallelism"] = 2
    o._on_job("UPSERT", moved)
    assert o.usage() == {("chaos-b", "gpu-memory"): 20 * GI}
    o._on_job("DELETE", moved)
    assert o.usage() == {}


def test_a_restart_the_watch_did_not_see_is_a_new_unsuspension(monkeypatch: Any) -> None:
    """Stopped and admitted again while the watch was away (a relist shows only the
    last state): the new decision id on a still unsuspended Job is a new start."""
    import chaos_check

    clock = Clock()
    monkeypatch.setattr(chaos_check, "time", clock)
    o = observer()
    o.decisions += [admitted("w3", "d3", "10Gi"), admitted("w3", "d4", "10Gi")]
    o._on_job("UPSERT", job("w3", suspend=True))
    o._on_job("UPSERT", job("w3", suspend=False, decision="d3"))
    o._on_pod("UPSERT", pod("w3", 0))
    clock.now += 1.0
    o._on_job("UPSERT", job("w3", suspend=False, decision="d4"))
    o._on_pod("UPSERT", pod("w3", 1))  # the first one's end not seen yet
    clock.now += 1.0
    assert o.bypass() == (0.0, [])


def test_a_stopped_runs_late_pod_beside_kuotas_own_restart_is_set_apart(monkeypatch: Any) -> None:
    """Admitted (d1), stopped and admitted again (d2) by kuota: a pod of the d1 run
    that comes up late beside d2's pod is not a bypass but a restart overlap."""
    import chaos_check

    clock = Clock()
    monkeypatch.setattr(chaos_check, "time", clock)
    o = observer()
    o.decisions.append(admitted("w3", "d1", "10Gi"))
    o.decisions.append(admitted("w3", "d2", "10Gi"))
    o._on_job("UPSERT", job("w3", suspend=True))
    o._on_job("UPSERT", job("w3", suspend=False, decision="d1"))
    o._on_job("UPSERT", job("w3", suspend=True, decision="d1"))
    clock.now += 1.0
    o._on_job("UPSERT", job("w3", suspend=False, decision="d2"))
    o._on_pod("UPSERT", pod("w3", 0))
    o._on_pod("UPSERT", pod("w3", 1))
    clock.now += 2.0
    total, details = o.bypass()
    assert (total, details) == (0.0, [])
    assert o.restart_overlap_s == 2.0 * 10 / 80
    assert len(o.restart_overlaps) == 1 and "after kuota restarted the Job" in o.restart_overlaps[0]


def test_a_stopped_jobs_terminating_pod_is_charged_until_it_is_gone(monkeypatch: Any) -> None:
    """#23 items 2-3: the invariant is of real pods. Three Jobs fill chaos-a (nominal
    160Gi + borrowing 80Gi); w0 is stopped but its pod terminates on: the fourth
    Job started beside it is an over-admission, confirmed POD_SLACK later; a pod
    whose end arrives within POD_SLACK (the other watch's lag) is none."""
    import chaos_check

    clock = Clock()
    monkeypatch.setattr(chaos_check, "time", clock)
    o = observer()
    for i in range(3):
        o._on_job("UPSERT", job(f"w{i}", suspend=True))
        o._on_job("UPSERT", job(f"w{i}", suspend=False, decision=f"d{i}"))
        o._on_pod("UPSERT", pod(f"w{i}", 0))
    o._on_job("UPSERT", job("w0", suspend=True, decision="d0"))  # stopped ...
    terminating = pod("w0", 0)
    terminating["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    o._on_pod("UPSERT", terminating)  # ... its pod in its grace period
    assert o.usage() == {("chaos-a", "gpu-memory"): 240 * GI}, "w0's pod still counts"
    o._on_job("UPSERT", job("w3", suspend=False, decision="d3"))
    assert not o.violations and len(o.suspects) == 1
    clock.now += chaos_check.POD_SLACK + 0.1
    o._confirm(clock.now)
    assert len(o.violations) == 1 and "pods of stopped Jobs ['chaos-a/w0']" in o.violations[0]
    o._on_pod("DELETE", terminating)
    assert o.usage() == {("chaos-a", "gpu-memory"): 240 * GI}

    # The same start, but w1's pod end arrives 0.2 s after it: the watches' lag.
    o._on_job("UPSERT", job("w1", suspend=True, decision="d1"))
    o._on_job("UPSERT", job("w0", suspend=False, decision="d4"))
    assert len(o.suspects) == 1
    clock.now += 0.2
    o._on_pod("DELETE", pod("w1", 0))
    clock.now += chaos_check.POD_SLACK
    o._confirm(clock.now)
    assert len(o.violations) == 1 and not o.suspects, "no second over-admission"


def test_a_pods_own_claim_says_what_it_holds() -> None:
    """The rogue's template swap: a pod made after it claims two slices, whatever
    the template's name says; a claim names its pod in its ownerReferences."""
    claim = {
        "metadata": {
            "namespace": "chaos-a",
            "name": "rogue-003-abc-gpu-x1",
            "ownerReferences": [{"kind": "Pod", "name": "rogue-003-abc"}],
        },
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "mig-chaos", "count": 2}}
                ]
            }
        },
    }
    assert claim_owner(claim) == "chaos-a/rogue-003-abc"
    assert claim_gpus(claim) == 2 * SLICE_GPUS
    whole = {"spec": {"devices": {"requests": [{"exactly": {"deviceClassName": "gpu-chaos"}}]}}}
    assert claim_gpus(whole) == 1.0 and claim_owner(whole) is None
    pod = {
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "rogue-slice"}]}
    }
    assert pod_gpus(pod) == SLICE_GPUS
