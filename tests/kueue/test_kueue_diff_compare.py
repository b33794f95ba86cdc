"""The differential harness's comparison and kuota's side of it, without a stack."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [
    str(Path(__file__).resolve().parent),
    str(Path(__file__).resolve().parents[1] / "e2e"),
]

from kueue_diff import (  # noqa: E402
    Admission,
    Preemption,
    Record,
    differences,
    kuota_record,
    load,
    pod_templates,
    unsuspend,
    workload_key,
)


def _adm(wl: str, flavor: str = "pool", qty: str = "1") -> Admission:
    return Admission(wl, "team-a", (("whole-gpus", flavor),), (("whole-gpus", qty),))


def test_equal_records_agree() -> None:
    a = Record([_adm("a/1"), _adm("a/2")], [Preemption("a/1", "a/2", "InClusterQueue")], {})
    b = Record([_adm("a/1"), _adm("a/2")], [Preemption("a/1", "a/2", "InClusterQueue")], {})
    assert differences(a, b) == []


def test_each_kind_of_difference_is_named() -> None:
    base = Record([_adm("a/1"), _adm("a/2")], [], {})
    assert "admission order" in differences(base, Record([_adm("a/2"), _adm("a/1")]))[0]
    assert "flavors of a/2" in differences(base, Record([_adm("a/1"), _adm("a/2", "other")]))[0]
    assert "charge of a/2" in differences(base, Record([_adm("a/1"), _adm("a/2", qty="2")]))[0]
    preempting = Record(base.admissions, [Preemption("a/1", "a/2", "InClusterQueue")])
    assert "preemptions" in differences(base, preempting)[0]
    never = Record(base.admissions, [], {"a/3": "InsufficientQuota"})
    assert "never fit" in differences(base, never)[0]


def test_kuota_side_of_cohort_reclaim() -> None:
    rec = kuota_record("cohort-reclaim", "dtest", "kq")
    assert rec.order == ["lender-a/a-1", "lender-a/a-2", "owner-b/b-1", "lender-a/a-2"]
    assert [str(p) for p in rec.preemptions] == ["lender-a/a-2<-owner-b/b-1(InCohortReclamation)"]
    assert rec.never_fit == {}


def test_scenarios_name_the_stack_hardware() -> None:
    docs = load("mig-memory", "drun", "kq")
    text = repr(docs)
    assert "mig-kq" in text and "mig-drun" not in text
    assert any(d["metadata"]["name"] == "drun-mig" for d in docs)


def test_kuota_side_of_admission_fair_sharing() -> None:
    # The harness's Configuration has admissionFairSharing, as Kueue's stack does:
    # team-b's LocalQueue, unused, goes before team-a's older Jobs.
    rec = kuota_record("admission-fair-sharing", "dtest", "kq")
    assert rec.order == ["team-a/a-1", "team-b/b-1", "team-b/b-2", "team-a/a-2", "team-a/a-3"]
    assert rec.preemptions == []


def test_kuota_side_of_training_gangs() -> None:
    # PyTorchJobs and a RayCluster are named ns/kind/name, charged per flavor over
    # their podsets; the 5-GPU gang never fits a ClusterQueue of 4.
    rec = kuota_record("training-gangs", "dtest", "kq")
    assert rec.order == ["train/pytorchjob/ddp-a", "train/pytorchjob/ddp-b", "train/raycluster/rc"]
    assert [a.usage for a in rec.admissions] == [(("example.com/gpu", "3"),)] + [
        (("example.com/gpu", "2"),)
    ] * 2
    assert list(rec.never_fit) == ["train/pytorchjob/ddp-c"]


def test_training_kinds_are_played_unsuspended_with_kwok_durations() -> None:
    docs = {d["metadata"]["name"]: d for d in load("training-gangs", "drun", "kq")}
    ddp, rc = docs["ddp-a"], docs["rc"]
    for d in (ddp, rc):
        unsuspend(d)
    assert "suspend" not in ddp["spec"]["runPolicy"] and "suspend" not in rc["spec"]
    assert len(pod_templates(ddp)) == 2 and len(pod_templates(rc)) == 2
    assert workload_key("drun", "drun-train", "RayCluster", "rc") == "train/raycluster/rc"
    assert workload_key("drun", "drun-train", "Job", "j") == "train/j"
