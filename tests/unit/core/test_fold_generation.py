"""An admission is for the Job at one metadata.generation (docs/design/backstop.md):
the Admitted decision carries it, the actuator refuses to start a Job that moved
on (ActuationFailed JobChanged), and the fold admits it again once it has seen
the changed Job."""

from __future__ import annotations

import pickle
from typing import Any

from builders.driver import Driver, kinds
from builders.manifests import cluster_queue, flavor, job, local_queue

from kuota.core.fold.fold import Fold
from kuota.events.schema import ActuationFailed, Decision

DECISION_ID = "kuota.dev/decision-id"


def setup(d: Driver, gpus: int = 4) -> None:
    d.apply(
        flavor("h100"),
        cluster_queue("cq", gpus=gpus),
        local_queue("lq", namespace="ns", cluster_queue="cq"),
    )


def at_generation(
    generation: int | None,
    *,
    suspend: bool = True,
    parallelism: int | None = None,
    decision: str | None = None,
) -> dict[str, Any]:
    m = job(
        "a",
        namespace="ns",
        gpus=1,
        suspend=suspend,
        parallelism=parallelism,
        uid="uid-a",
        annotations={DECISION_ID: decision} if decision else None,
    )
    if generation is not None:
        m["metadata"]["generation"] = generation
    return m


def refused(d: Driver, adm: Decision, found: int | None) -> list[Decision]:
    """The actuator's report: the Job was at ``found``, not ``adm.generation``."""
    d.n += 1
    return d.feed(
        ActuationFailed(
            id=f"actuationfailed/{adm.id}",
            at=adm.at,
            decision_id=adm.id,
            workload="ns/a",
            reason="JobChanged",
            message="the Job changed after it was admitted",
            decision_type="Admitted",
            generation=found,
        )
    )


def test_admitted_carries_the_generation_it_was_decided_on() -> None:
    d = Driver()
    setup(d)
    (adm,) = d.apply(at_generation(3))
    assert adm.type == "Admitted" and adm.generation == 3
    assert "generation" in adm.model_fields_set


def test_without_a_generation_the_decision_has_none() -> None:
    d = Driver()
    setup(d)
    (adm,) = d.apply(at_generation(None))
    assert adm.generation is None and "generation" not in adm.model_fields_set


def test_a_generation_only_change_of_a_pending_job_keeps_its_place() -> None:
    d = Driver()
    setup(d, 1)
    d.apply(job("b", namespace="ns", gpus=1, suspend=True, uid="uid-b"))
    assert kinds(d.apply(at_generation(1))) == [("Inadmissible", "ns/a")]
    assert d.apply(at_generation(2)) == [], "e.g. backoffLimit edited: no new decision"
    d.finish("ns/b")
    (adm,) = [x for x in d.decisions[-2:] if x.type == "Admitted"]
    assert adm.generation == 2, "the latest generation seen"


def test_refused_start_seen_generation_requeues_and_admits_again_at_once() -> None:
    """The grown Job (4 pods) was already observed and evicted (PodSetsChanged):
    the refusal of the 1-pod admission is for an admission the fold ended."""
    d = Driver()
    setup(d)
    (adm,) = d.apply(at_generation(1))
    out = d.apply(at_generation(2, parallelism=4))
    assert kinds(out) == [
        ("Evicted", "ns/a"),
        ("Requeued", "ns/a"),
        ("QuotaReleased", "ns/a"),
        ("Admitted", "ns/a"),
    ]
    assert out[3].generation == 2 and out[3].usage == {"h100": {"nvidia.com/gpu": "4"}}
    assert refused(d, adm, 2) == [], "the old admission's refusal: already evicted"
    assert d.state("ns/a") == "Admitted"


def test_refused_start_of_a_change_not_seen_yet_waits_for_it() -> None:
    """The actuator found generation 2 while the fold has seen only 1: evicted,
    requeued, held until the Job at 2 is observed, then admitted at 2."""
    d = Driver()
    setup(d)
    (adm,) = d.apply(at_generation(1))
    out = refused(d, adm, 2)
    assert [(x.type, x.reason) for x in out] == [
        ("Evicted", "JobChanged"),
        ("QuotaReleased", "NotStarted"),  # no drain: the refused start wrote nothing
        ("Requeued", "JobChanged"),
        ("Inadmissible", "JobChanged"),
    ]
    assert d.usage("cq") == {}, "the quota is released"
    assert d.tick() == [], "nothing is decided before the changed Job is seen"
    (again,) = d.apply(at_generation(2, parallelism=2))
    assert again.type == "Admitted" and again.generation == 2
    assert again.usage == {"h100": {"nvidia.com/gpu": "2"}}


def test_refused_after_kuotas_own_stop_converges_in_one_more_admission() -> None:
    """kuota's stop bumps the generation twice (suspend, then the template's
    restore): a re-admission decided before the restore is seen is refused once;
    the restore's observation (a generation-only change) admits it again."""
    d = Driver()
    setup(d)
    (adm,) = d.apply(at_generation(1))
    d.apply(at_generation(2, suspend=False, decision=adm.id))  # the actuator's start
    # Evicted by label removal and put back: the stop's suspend seen (3), not its restore (4)
    unlabelled = at_generation(2, suspend=False, decision=adm.id)
    del unlabelled["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert kinds(d.apply(unlabelled))[0] == ("Evicted", "ns/a")
    readmit = d.apply(at_generation(3, suspend=True, decision=adm.id))
    assert kinds(readmit) == [("Admitted", "ns/a")] and readmit[0].generation == 3
    out = refused(d, readmit[0], 4)
    assert kinds(out) == [
        ("Evicted", "ns/a"),
        ("QuotaReleased", "ns/a"),
        ("Requeued", "ns/a"),
        ("Inadmissible", "ns/a"),
    ]
    (again,) = d.apply(at_generation(4, suspend=True, decision="the-stop"))
    assert again.type == "Admitted" and again.generation == 4
    assert refused(d, readmit[0], 4) == [], "a repeated report of the old refusal"


def test_refused_when_the_fold_already_saw_the_change_requeues_at_once() -> None:
    """A generation-only change (no podset change) of an admitted Job keeps the
    admission but is remembered: the refusal re-admits at that generation."""
    d = Driver()
    setup(d)
    (adm,) = d.apply(at_generation(1))
    assert d.apply(at_generation(2)) == [], "an admitted Job keeps its admission"
    out = refused(d, adm, 2)
    assert kinds(out) == [
        ("Evicted", "ns/a"),
        ("QuotaReleased", "ns/a"),
        ("Requeued", "ns/a"),
        ("Admitted", "ns/a"),
    ]
    assert out[1].stop_id == out[0].id and out[1].reason == "NotStarted"
    assert out[3].generation == 2


def test_the_refusal_wait_survives_pickling() -> None:
    d = Driver()
    setup(d)
    (adm,) = d.apply(at_generation(1))
    refused(d, adm, 2)
    copy_ = Driver(pickle.loads(pickle.dumps(d.fold)))
    copy_.n = d.n
    assert isinstance(copy_.fold, Fold)
    assert copy_.tick() == d.tick() == []
    later = at_generation(2)
    assert kinds(copy_.apply(later)) == kinds(d.apply(later)) == [("Admitted", "ns/a")]
