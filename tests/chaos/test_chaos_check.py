"""The fault runs' observer: usage, violations and double actuation from Job changes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from chaos_check import ANN_DECISION_ID, Observer
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
