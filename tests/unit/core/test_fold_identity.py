"""Every decision names what it is about with ``kind`` and ``api_version``
(docs/design/workload-identity.md): a workload decision its workload's kind, a
Rejected or QuotaChanged its object's."""

from __future__ import annotations

from core_builders import Driver, cq, flavor, job, lq

from kuota.events.schema import Decision


def _run() -> list[Decision]:
    d = Driver()
    d.apply(flavor("default"), cq("cq").flavor("default", cpu=1), lq("ns", "lq", "cq"))
    d.apply(job("ns", "a").queue("lq").requests(cpu=1))
    d.apply(job("ns", "b").queue("lq").requests(cpu=1))  # waits: Inadmissible
    d.finish("ns/a")  # Finished; b Admitted
    d.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {}})
    return d.decisions


def test_workload_decisions_carry_the_job_kind_and_api_version() -> None:
    decisions = _run()
    about_jobs = [x for x in decisions if x.workload is not None]
    assert {x.type for x in about_jobs} >= {"Admitted", "Inadmissible", "Finished"}
    assert {(x.kind, x.api_version) for x in about_jobs} == {("Job", "batch/v1")}
    assert {x.workload for x in about_jobs} == {"ns/a", "ns/b"}  # the key is still ns/name


def test_object_decisions_carry_their_object_kind() -> None:
    decisions = _run()
    quota = [x for x in decisions if x.type == "QuotaChanged"]
    assert quota and all(
        (x.kind, x.api_version) == ("ClusterQueue", "kueue.x-k8s.io/v1beta2") for x in quota
    )
    rejected = [x for x in decisions if x.type == "Rejected"]
    assert len(rejected) == 1 and rejected[0].kind == "ClusterQueue"
    assert rejected[0].api_version == "kueue.x-k8s.io/v1beta2"


def test_every_decision_of_a_run_names_a_kind() -> None:
    assert all(x.kind for x in _run())
