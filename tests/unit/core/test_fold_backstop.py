"""The backstop in the fold: Jobs that run without an admission, lose their
label, live in managed namespaces, or change after admission
(docs/design/backstop.md)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from builders.driver import Driver, kinds
from builders.manifests import (
    cluster_queue,
    configuration,
    flavor,
    job,
    local_queue,
    namespace,
)

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision

QUEUE = "kueue.x-k8s.io/queue-name"
DECISION_ID = "kuota.dev/decision-id"


def setup(d: Driver, gpus: int = 4, *objects: Any) -> None:
    d.apply(
        flavor("h100"),
        cluster_queue("cq", gpus=gpus),
        local_queue("lq", namespace="ns", cluster_queue="cq"),
        *objects,
    )


def observed(
    name: str = "j",
    *,
    suspend: bool,
    decision: str | None = None,
    queue: str | None = "lq",
    gpus: int = 1,
    parallelism: int | None = None,
    ns: str = "ns",
    uid: str | None = None,
) -> dict[str, Any]:
    """The Job as ingest journals it: ``spec.suspend`` and the actuator's record."""
    notes = {DECISION_ID: decision} if decision else None
    return job(
        name,
        namespace=ns,
        gpus=gpus,
        queue=queue,
        suspend=suspend,
        annotations=notes,
        parallelism=parallelism,
        uid=uid or f"uid-{name}",
    )


def only(decisions: list[Decision], type_: str) -> list[Decision]:
    return [x for x in decisions if x.type == type_]


# --------------------------------------------------------------------- running without admission


def test_unsuspended_pending_job_is_suspended_again_and_keeps_its_place() -> None:
    d = Driver()
    setup(d, 1)
    d.apply(observed("a", suspend=True), observed("b", suspend=True))
    assert d.state("ns/a") == "Admitted" and d.state("ns/b") == "Inadmissible"
    order = d.fold.pending_workloads("cq")
    out = d.apply(observed("b", suspend=False))
    assert kinds(out) == [("Suspended", "ns/b")]
    (s,) = out
    assert (s.reason, s.message, s.uid, s.cluster_queue) == (
        "StartedWithoutAdmission",
        "started without admission",
        "uid-b",
        "cq",
    )
    assert d.state("ns/b") == "Inadmissible" and d.fold.pending_workloads("cq") == order
    assert d.apply(observed("b", suspend=False)) == [], "the same observation: no new decision"
    # suspended by the actuator (its record on the Job), then unsuspended again: again
    assert d.apply(observed("b", suspend=True, decision=s.id)) == []
    assert kinds(d.apply(observed("b", suspend=False, decision=s.id))) == [("Suspended", "ns/b")]


def test_a_job_created_running_is_suspended_before_it_is_admitted() -> None:
    d = Driver()
    setup(d)
    out = d.apply(observed("a", suspend=False))
    assert kinds(out) == [("Suspended", "ns/a"), ("Admitted", "ns/a")], (
        "the actuator suspends it, then starts it with its admission"
    )


def test_the_admitted_jobs_own_start_is_not_a_bypass() -> None:
    d = Driver()
    setup(d)
    (adm,) = d.apply(observed("a", suspend=True))
    assert adm.type == "Admitted"
    assert d.apply(observed("a", suspend=False, decision=adm.id)) == [], "the actuator's start"


def test_a_stale_observation_after_an_eviction_is_not_suspended_again() -> None:
    """Admitted, then evicted before the observation of the actuator's start
    arrives: that observation (decision-id = the Admitted one) is the Job before
    the actuator's own stop; a user's later unsuspend is not."""
    d = Driver()
    setup(d, 1)
    (adm,) = d.apply(observed("a", suspend=True))
    out = d.apply(observed("a", suspend=True, queue=None))  # label removed: evicted
    assert kinds(out) == [("Evicted", "ns/a"), ("Inadmissible", "ns/a"), ("QuotaReleased", "ns/a")]
    assert d.apply(observed("a", suspend=False, decision=adm.id, queue=None)) == [], "stale"
    # the actuator's stop lands (suspend, then its record), then the user unsuspends
    stop = out[0].id
    assert d.apply(observed("a", suspend=True, decision=adm.id, queue=None)) == []
    out = d.apply(observed("a", suspend=False, decision=stop, queue=None))
    assert kinds(out) == [("Suspended", "ns/a")]


def test_the_admissions_record_put_back_after_the_stop_is_a_bypass() -> None:
    """A user (the door down) copies the admission's decision id back onto the
    stopped Job and unsuspends it: once the stop was seen, that id is forged."""
    d = Driver()
    setup(d, 1)
    (adm,) = d.apply(observed("a", suspend=True))
    d.apply(observed("a", suspend=False, decision=adm.id))  # the actuator's start
    d.apply(observed("a", suspend=False, decision=adm.id, queue=None))  # evicted
    assert d.apply(observed("a", suspend=True, decision=adm.id, queue=None)) == [], "the stop"
    out = d.apply(observed("a", suspend=False, decision=adm.id, queue=None))
    assert kinds(out) == [("Suspended", "ns/a")]


def test_an_older_admissions_record_is_a_bypass() -> None:
    d = Driver()
    setup(d, 1)
    (first,) = d.apply(observed("a", suspend=True))
    d.apply(observed("a", suspend=True, queue=None))  # evicted (label removed)
    (second,) = only(d.apply(observed("a", suspend=True)), "Admitted")  # label back: admitted
    d.apply(observed("a", suspend=True, queue=None))  # evicted again
    assert d.apply(observed("a", suspend=False, decision=second.id, queue=None)) == []
    out = d.apply(observed("a", suspend=False, decision=first.id, queue=None))
    assert kinds(out) == [("Suspended", "ns/a")]


def test_a_deactivated_job_that_runs_is_suspended() -> None:
    d = Driver()
    setup(d)
    inactive = job("a", namespace="ns", gpus=1, suspend=True, active=False, uid="u")
    assert kinds(d.apply(inactive)) == [("Deactivated", "ns/a")]
    running = copy.deepcopy(inactive)
    running["spec"]["suspend"] = False
    assert kinds(d.apply(running)) == [("Suspended", "ns/a")]
    assert d.state("ns/a") == "Deactivated"


def test_a_job_without_spec_suspend_is_never_suspended() -> None:
    """The simulator's Jobs carry no spec.suspend: nothing to observe."""
    d = Driver()
    setup(d, 1)
    d.apply(job("a", namespace="ns", gpus=1), job("b", namespace="ns", gpus=1))
    assert not only(d.decisions, "Suspended")


# --------------------------------------------------------------------------- label removal


def test_label_removed_from_an_admitted_job_evicts_and_releases() -> None:
    d = Driver()
    setup(d, 1)
    d.apply(observed("a", suspend=True), observed("b", suspend=True))
    out = d.apply(observed("a", suspend=True, queue=None))
    assert kinds(out) == [
        ("Evicted", "ns/a"),
        ("Inadmissible", "ns/a"),
        ("QuotaReleased", "ns/a"),
        ("Admitted", "ns/b"),
    ], "quota released once a's pods are gone: b takes it"
    evicted, held, _, _ = out
    assert evicted.reason == "QueueLabelRemoved"
    assert held.reason == "QueueLabelRemoved" and held.message is not None
    assert "put it back" in held.message and "delete the Job" in held.message
    assert d.usage("cq") == {("h100", "nvidia.com/gpu"): 1000}


def test_label_removed_from_a_pending_job_keeps_it_waiting_then_put_back() -> None:
    d = Driver()
    setup(d, 1)
    d.apply(observed("a", suspend=True), observed("b", suspend=True))
    out = d.apply(observed("b", suspend=True, queue=None))
    assert [(x.type, x.reason) for x in out] == [("Inadmissible", "QueueLabelRemoved")]
    assert d.state("ns/b") == "Inadmissible" and d.fold.pending_workloads("cq") == []
    out = d.apply(observed("b", suspend=True))  # the label is back
    assert [(x.type, x.reason) for x in out] == [("Inadmissible", "InsufficientQuota")]
    d.finish("ns/a")
    assert only(d.decisions, "Admitted")[-1].workload == "ns/b"


def test_an_unlabelled_job_kuota_never_queued_is_ignored() -> None:
    d = Driver()
    setup(d)
    assert d.apply(observed("x", suspend=False, queue=None)) == []
    assert d.state("ns/x") is None


def test_a_new_unlabelled_job_under_a_known_name_is_not_ours() -> None:
    d = Driver()
    setup(d, 1)
    d.apply(observed("a", suspend=True))
    assert d.apply(observed("a", suspend=False, queue=None, uid="other")) == []
    assert d.state("ns/a") == "Admitted"


# --------------------------------------------------------------------------- managed namespaces


MANAGED = configuration(manageJobsWithoutQueueName=True)


def test_unlabelled_job_in_a_managed_namespace_waits_for_a_local_queue_name() -> None:
    d = Driver()
    setup(d, 4, MANAGED, namespace("ns"))
    out = d.apply(observed("a", suspend=True, queue=None))
    assert [(x.type, x.reason) for x in out] == [("Inadmissible", "NoLocalQueueNamed")]
    assert out[0].message is not None and "no LocalQueue named" in out[0].message
    assert "namespace ns is managed" in out[0].message
    out = d.apply(observed("a", suspend=True))  # the user adds the label
    assert kinds(out) == [("Admitted", "ns/a")]


def test_unlabelled_running_job_in_a_managed_namespace_is_suspended() -> None:
    d = Driver()
    setup(d, 4, MANAGED, namespace("ns"))
    out = d.apply(observed("a", suspend=False, queue=None))
    assert kinds(out) == [("Inadmissible", "ns/a"), ("Suspended", "ns/a")]


def test_namespaces_outside_the_managed_selector_are_not_managed() -> None:
    d = Driver()
    selector = {"matchLabels": {"kuota": "managed"}}
    config = configuration(manageJobsWithoutQueueName=True, managedJobsNamespaceSelector=selector)
    setup(d, 4, config, namespace("ns"), namespace("team", labels={"kuota": "managed"}))
    assert d.apply(observed("a", suspend=False, queue=None)) == []
    out = d.apply(observed("b", suspend=False, queue=None, ns="team"))
    assert kinds(out) == [("Inadmissible", "team/b"), ("Suspended", "team/b")]


def test_kube_system_is_not_managed_by_default() -> None:
    d = Driver()
    setup(d, 4, MANAGED, namespace("kube-system"))
    assert d.apply(observed("a", suspend=False, queue=None, ns="kube-system")) == []


def test_without_manage_jobs_without_queue_name_nothing_unlabelled_is_managed() -> None:
    d = Driver()
    setup(d, 4, namespace("ns"))
    assert d.apply(observed("a", suspend=False, queue=None)) == []


# --------------------------------------------------------------------------- edits after admission


def test_parallelism_change_of_an_admitted_job_evicts_and_requeues_with_the_new_shape() -> None:
    d = Driver()
    setup(d, 4)
    (adm,) = d.apply(observed("a", suspend=True, parallelism=2))
    assert adm.usage == {"h100": {"nvidia.com/gpu": "2"}}
    d.apply(observed("a", suspend=False, decision=adm.id, parallelism=2))
    out = d.apply(observed("a", suspend=False, decision=adm.id, parallelism=3))
    assert kinds(out) == [
        ("Evicted", "ns/a"),
        ("Requeued", "ns/a"),
        ("QuotaReleased", "ns/a"),
        ("Admitted", "ns/a"),
    ]
    evicted, requeued, _, again = out
    assert evicted.reason == requeued.reason == "PodSetsChanged"
    assert evicted.message is not None and "2 -> 3 pods" in evicted.message
    assert again.usage == {"h100": {"nvidia.com/gpu": "3"}}, "never the old charge"
    assert d.usage("cq") == {("h100", "nvidia.com/gpu"): 3000}


def test_a_grown_admitted_job_that_no_longer_fits_waits() -> None:
    d = Driver()
    setup(d, 2)
    (adm,) = d.apply(observed("a", suspend=True, parallelism=2))
    out = d.apply(observed("a", suspend=False, decision=adm.id, parallelism=3))
    assert kinds(out) == [
        ("Evicted", "ns/a"),
        ("Requeued", "ns/a"),
        ("QuotaReleased", "ns/a"),
        ("Inadmissible", "ns/a"),
    ]
    assert d.usage("cq") == {}
    # the stale observation of the actuator's start is not a bypass; the stop is
    assert d.apply(observed("a", suspend=False, decision=adm.id, parallelism=3)) == []


def test_an_admitted_jobs_other_changes_keep_its_admission() -> None:
    d = Driver()
    setup(d, 4)
    (adm,) = d.apply(observed("a", suspend=True))
    changed = observed("a", suspend=False, decision=adm.id)
    changed["metadata"]["labels"]["team"] = "x"
    assert d.apply(changed) == []
    assert d.state("ns/a") == "Admitted"


def test_a_pending_jobs_template_change_is_decided_again() -> None:
    d = Driver()
    setup(d, 2)
    out = d.apply(observed("a", suspend=True, gpus=3))
    assert [(x.type, x.reason) for x in out] == [("Inadmissible", "InsufficientQuota")]
    out = d.apply(observed("a", suspend=True, gpus=2))
    assert kinds(out) == [("Admitted", "ns/a")]
    assert out[0].usage == {"h100": {"nvidia.com/gpu": "2"}}


def test_the_backstop_state_survives_pickling() -> None:
    d = Driver()
    setup(d, 1)
    (adm,) = d.apply(observed("a", suspend=True))
    d.apply(observed("a", suspend=True, queue=None))
    copy_ = Driver(pickle.loads(pickle.dumps(d.fold)))
    copy_.n = d.n
    stale = observed("a", suspend=False, decision=adm.id, queue=None)
    assert copy_.apply(stale) == d.apply(stale) == []
    assert isinstance(copy_.fold, Fold)
