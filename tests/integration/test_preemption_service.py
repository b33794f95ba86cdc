"""Preemption through the real services: kuota-admission and kuota-preemption
as processes on the local Kafka and Redis, fed synthetic journal events.

Every test has a pipeline of its own (``pipeline_helpers``: own topic prefix,
consumer groups, transactional ids, snapshot key, metrics ports) and reads
the decisions admission commits. Nothing of the core is replaced: the victim
search that runs is ``kuota.core.preemption.planner`` in kuota-preemption, validated by
admission's fold. The cases (docs/design/preemption.md, "How it is tested"):

- the preemption shell alone: it folds, serves /metrics, dead-letters an
  undecodable record, and writes one plan per awaiting head to the journal;
- priority preemption within a ClusterQueue, a cohort reclaim (reference
  article 004's team-alpha / team-beta) and a fair-sharing preemption: each
  asserts the victims, the reasons, that every ``Preempted`` comes before the
  ``Admitted`` decision listing the victims, and that the cause of both is
  the plan's id ``plan/<preemptor>/<based_on>``;
- liveness: without kuota-preemption, admission admits what needs no
  preemption and announces ``WaitingForPreemptionPlan`` (with the lag) for
  the head that does; started later, kuota-preemption plans and the
  preemption happens;
- kill -9 of kuota-preemption during a cohort reclaim (frozen after the
  head started waiting and killed before any plan; then a loop of kills
  while a second reclaim is planned): every reclaim happens exactly once.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from builders.manifests import cluster_queue, flavor, local_queue, priority_class
from pipeline_helpers import Pipeline, pipeline
from preemption_journal import (
    WAIT_MESSAGE,
    WAITING,
    Journal,
    cohort_reclaim,
    fair_sharing,
    within_cluster_queue,
)

from kuota.events.schema import Decision, PreemptionPlan

pytestmark = pytest.mark.integration

LATENCY = "kuota_preemption_plan_latency_seconds"


@pytest.fixture
async def pipe(kafka_bootstrap: str, redis_url: str, tmp_path: Path) -> AsyncIterator[Pipeline]:
    async with pipeline(kafka_bootstrap, redis_url, tmp_path) as p:
        p.report_stops()  # no cluster here: the victims' pods are gone at once
        yield p


def check_preemption(ds: list[Decision], preemptor: str, victims: dict[str, str]) -> Decision:
    """The preemption of ``victims`` (victim -> reason) for ``preemptor``, as
    admission decided it: each victim Preempted (and Requeued) exactly once,
    all before the one Admitted decision of the preemptor, which lists them;
    the cause of every Preempted is one plan's id; each victim's quota comes
    back (QuotaReleased) when its pods are reported gone, and the last such
    report admits the preemptor (#23 items 2-3); the head had been waiting
    for a plan. Returns the Admitted decision."""
    admitted = [i for i, d in enumerate(ds) if d.type == "Admitted" and d.workload == preemptor]
    assert len(admitted) == 1, f"{preemptor} admitted {len(admitted)} times"
    adm = ds[admitted[0]]
    assert adm.victims == list(victims), f"victims of {preemptor}: {adm.victims}"
    preempted = [(i, d) for i, d in enumerate(ds) if d.type == "Preempted"]
    mine = [(i, d) for i, d in preempted if d.preemptor == preemptor]
    assert {d.workload: d.reason for _, d in mine} == victims
    assert len(mine) == len(victims), "a victim preempted twice for the same preemptor"
    assert all(i < admitted[0] for i, _ in mine), "Preempted before Admitted(victims)"
    plan_id = mine[0][1].cause
    assert plan_id.startswith(f"plan/{preemptor}/"), f"caused by {plan_id}, not a plan"
    assert all(d.cause == plan_id for _, d in mine), "the same plan caused them"
    released = {d.stop_id for d in ds[: admitted[0]] if d.type == "QuotaReleased"}
    assert {d.id for _, d in mine} <= released, "each victim's quota released first"
    stopped = {f"workloadstopped/{d.id}" for _, d in mine}
    assert adm.cause in stopped, f"admitted by {adm.cause}, not a victim's pods gone"
    for i, d in mine:
        after = ds[i + 1]
        assert (after.type, after.workload, after.reason) == ("Requeued", d.workload, "Preempted")
        assert preemptor in (d.message or "")
    waits = [
        i
        for i, d in enumerate(ds)
        if d.type == "Inadmissible" and d.workload == preemptor and d.reason == WAITING
    ]
    assert waits and waits[0] < min(i for i, _ in mine), "it waited for the plan first"
    assert (ds[waits[0]].message or "").startswith(WAIT_MESSAGE)
    return adm


async def check_plan(pipe: Pipeline, adm: Decision) -> PreemptionPlan:
    """The plan that caused ``adm`` is on the journal, written by kuota-preemption."""
    plans = [
        p for p in await pipe.plans() if p.preemptor == adm.workload and p.victims == adm.victims
    ]
    assert plans, f"no PreemptionPlan of {adm.workload} for {adm.victims} on the journal"
    plan = plans[0]
    assert plan.preemptor == adm.workload and plan.victims == adm.victims
    assert plan.id == f"plan/{plan.preemptor}/{plan.based_on}"
    return plan


async def caught_up(service: Any, timeout: float = 20.0) -> None:
    """The service's ``kuota_consumer_lag`` reaches 0."""
    deadline = time.monotonic() + timeout
    lag = None
    while time.monotonic() < deadline:
        lag = service.metric("kuota_consumer_lag")
        if lag == 0.0:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"kuota-{service.name}: kuota_consumer_lag {lag}, not 0 in {timeout}s")


async def start_both(pipe: Pipeline) -> None:
    pipe.admission.start()
    pipe.preemption.start()
    await pipe.admission.wait_log(r"recovered: ")
    await pipe.preemption.wait_log(r"recovered: ")


# ---------------------------------------------------------------------- the shell alone


async def test_shell_folds_dead_letters_serves_metrics_and_writes_plans(pipe: Pipeline) -> None:
    j = Journal()
    events = within_cluster_queue(j)  # two Jobs running, nobody waiting
    await pipe.produce(events)
    bad = await pipe.produce_raw(b"not json")
    pipe.preemption.start()
    await pipe.preemption.wait_metric("kuota_journal_position", bad + 1)
    metrics = pipe.preemption.metrics()
    assert "kuota_consumer_lag 0.0" in metrics
    assert "kuota_skipped_records_total 1.0" in metrics, "the garbage record is skipped"
    assert f'kuota_journal_events_total{{type="ObjectUpserted"}} {float(len(events))}' in metrics
    assert "kuota_preemption_plans_total 0.0" in metrics, "no head awaits a plan"

    dead = await pipe.read(pipe.topics.deadletter)
    assert [r.value for r in dead] == [b"not json"], "dead-lettered with its original bytes"
    headers = dict(dead[0].headers)
    assert headers["kuota-consumer"].endswith(b"-preemption")
    assert headers["kuota-source"].endswith(f"/0/{bad}".encode())

    # A head that needs preemption. Admission is not running, but
    # kuota-preemption folds its own plan back like admission would: the
    # victim is stopped and held until its pods are reported gone (#23 items
    # 2-3), which nobody does here, so it never becomes a head of its own:
    # one plan, and nothing more is written.
    high = j.job("high", namespace="team-a", gpus=2, priority="high")
    await pipe.produce(high)
    await pipe.preemption.wait_metric("kuota_preemption_plans_total", 1)
    await asyncio.sleep(2)
    plans = await pipe.plans()
    assert len(plans) == 1, plans
    (plan,) = plans
    assert plan.preemptor == "team-a/high"
    assert plan.victims == ["team-a/low"] and plan.reasons == {"team-a/low": "InClusterQueue"}
    assert plan.based_on == high[0].id, "based on the last journal event it folded"
    assert plan.id == f"plan/team-a/high/{plan.based_on}"
    assert pipe.preemption.metric("kuota_preemption_plans_total") == 1.0
    assert 'kuota_preemption_searches_total{result="ok"}' in pipe.preemption.metrics()
    assert pipe.preemption.terminate() == 0, pipe.preemption.text()
    assert "Traceback" not in pipe.preemption.text()


# ---------------------------------------------------------------------- the three searches


async def test_priority_preemption_within_a_cluster_queue(pipe: Pipeline) -> None:
    await start_both(pipe)
    j = Journal()
    await pipe.produce(within_cluster_queue(j))
    await pipe.decisions.admitted("team-a/mid")
    await pipe.produce(j.job("high", namespace="team-a", gpus=2, priority="high"))
    await pipe.decisions.admitted("team-a/high")
    await pipe.decisions.settle()
    ds = pipe.decisions.all
    adm = check_preemption(ds, "team-a/high", {"team-a/low": "InClusterQueue"})
    assert not any(d.type == "Preempted" and d.workload == "team-a/mid" for d in ds), (
        "the lowest priority goes first: mid (50) stays, low (10) is preempted"
    )
    (pre,) = [d for d in ds if d.type == "Preempted"]
    assert pre.policy == "withinClusterQueue=LowerPriority"
    assert "prioritization in the ClusterQueue" in (pre.message or "")
    await check_plan(pipe, adm)
    # The shell's histogram saw it (the requeued victim's empty plan does not count).
    assert pipe.admission.metric(f"{LATENCY}_count") == 1.0
    # Caught up, both at lag 0, though the journal now ends with the commit
    # marker of the preemption service's last transaction (it counted as 1).
    for service in (pipe.admission, pipe.preemption):
        await caught_up(service)
    assert pipe.admission.terminate() == 0 and pipe.preemption.terminate() == 0


async def test_cohort_reclaim_of_article_004(pipe: Pipeline) -> None:
    """team-beta borrows 4 of team-alpha's GPUs (beta-1 8, beta-2 2, beta-3 2);
    team-alpha's 6-GPU Job reclaims: the most recently admitted borrower goes."""
    await start_both(pipe)
    j = Journal()
    await pipe.produce(cohort_reclaim(j))
    await pipe.decisions.admitted("team-beta/beta-3")
    await pipe.produce(j.job("alpha-1", namespace="team-alpha", gpus=6, queue="training-queue"))
    await pipe.decisions.admitted("team-alpha/alpha-1")
    await pipe.decisions.settle()
    ds = pipe.decisions.all
    adm = check_preemption(ds, "team-alpha/alpha-1", {"team-beta/beta-3": "InCohortReclamation"})
    assert adm.cluster_queue == "team-alpha-cq"
    assert adm.usage == {"nvidia-h100": {"nvidia.com/gpu": "6"}}
    (pre,) = [d for d in ds if d.type == "Preempted"]
    assert pre.cluster_queue == "team-beta-cq" and pre.policy == "reclaimWithinCohort=Any"
    assert "reclamation within the cohort" in (pre.message or "")
    await check_plan(pipe, adm)
    assert pipe.admission.terminate() == 0 and pipe.preemption.terminate() == 0


async def test_fair_sharing_preemption(pipe: Pipeline) -> None:
    """Fair sharing on (Configuration ``fairSharing.enable: true``): team-a
    holds all 8 GPUs of the cohort; team-b's 2-GPU Job takes one of its Jobs
    back by fair sharing (``InCohortFairSharing``, not a classical reclaim)."""
    await start_both(pipe)
    j = Journal()
    await pipe.produce(fair_sharing(j))
    await pipe.decisions.admitted("team-a/a-4")
    await pipe.produce(j.job("b-1", namespace="team-b", gpus=2))
    await pipe.decisions.admitted("team-b/b-1")
    await pipe.decisions.settle()
    ds = pipe.decisions.all
    adm = check_preemption(ds, "team-b/b-1", {"team-a/a-4": "InCohortFairSharing"})
    (pre,) = [d for d in ds if d.type == "Preempted"]
    assert pre.policy == "fairSharing=LessThanOrEqualToFinalShare"
    assert "fair sharing within the cohort" in (pre.message or "")
    plan = await check_plan(pipe, adm)
    assert plan.reasons == {"team-a/a-4": "InCohortFairSharing"}
    assert pipe.admission.terminate() == 0 and pipe.preemption.terminate() == 0


# ---------------------------------------------------------------------- liveness


async def test_admission_goes_on_without_the_preemption_service(pipe: Pipeline) -> None:
    pipe.admission.start()
    j = Journal()
    await pipe.produce(
        j.objects(
            flavor("h100", spec={}),
            priority_class("low", value=10),
            priority_class("high", value=100),
            cluster_queue("cq", gpus=4, within="LowerPriority"),
            local_queue("lq", namespace="team-a", cluster_queue="cq"),
        )
        + j.job("low", namespace="team-a", gpus=3, priority="low")
        + j.job("high", namespace="team-a", gpus=2, priority="high")  # needs low's GPUs
        + j.job("small", namespace="team-a", gpus=1, priority="low")  # fits in the one left
    )
    await pipe.decisions.admitted("team-a/small")

    def waiting(ds: list[Decision], lag: str = "") -> Decision | None:
        return next(
            (
                d
                for d in ds
                if d.type == "Inadmissible"
                and d.workload == "team-a/high"
                and d.reason == WAITING
                and (d.message or "").startswith(WAIT_MESSAGE + lag)
            ),
            None,
        )

    first = await pipe.decisions.until(waiting, "the WaitingForPreemptionPlan reason")
    assert ": couldn't assign flavors" in first.message
    # Event time goes on (ingest's Ticks): the wait is announced again with the lag.
    await pipe.produce(j.tick(6.0))
    await pipe.decisions.until(
        lambda ds: waiting(ds, " (preemption service lag 5 s)"), "the re-announcement"
    )
    ds = pipe.decisions.all
    assert not any(d.type == "Preempted" for d in ds)
    assert not any(d.type == "Admitted" and d.workload == "team-a/high" for d in ds)
    assert await pipe.plans() == []

    pipe.preemption.start()
    await pipe.decisions.admitted("team-a/high")
    await pipe.decisions.settle()
    ds = pipe.decisions.all
    # low (3 GPUs) is enough; small, admitted later, is added back by the search.
    adm = check_preemption(ds, "team-a/high", {"team-a/low": "InClusterQueue"})
    assert not any(d.type == "Preempted" and d.workload == "team-a/small" for d in ds)
    await check_plan(pipe, adm)
    assert pipe.admission.metric(f"{LATENCY}_count") == 1.0
    assert pipe.admission.metric(f'{LATENCY}_bucket{{le="1.0"}}') == 0.0, (
        "the wait lasted at least the Tick's round trip and the service's start"
    )
    assert pipe.admission.terminate() == 0 and pipe.preemption.terminate() == 0


# ---------------------------------------------------------------------- kill -9


async def test_kill9_of_preemption_mid_reclaim_is_exactly_once(pipe: Pipeline) -> None:
    await start_both(pipe)
    j = Journal()
    await pipe.produce(cohort_reclaim(j))
    await pipe.decisions.admitted("team-beta/beta-3")

    # 1. Frozen before alpha-1 is journaled, killed once admission says it
    #    waits: no plan can have been written; the restart must write it.
    pipe.preemption.signal(signal.SIGSTOP)
    await pipe.produce(j.job("alpha-1", namespace="team-alpha", gpus=6, queue="training-queue"))
    await pipe.decisions.until(
        lambda ds: any(d.workload == "team-alpha/alpha-1" and d.reason == WAITING for d in ds),
        "alpha-1 waiting for a plan",
    )
    assert pipe.preemption.kill9() == -signal.SIGKILL
    assert not [p for p in await pipe.plans() if p.preemptor == "team-alpha/alpha-1"]
    pipe.preemption.start()
    await pipe.decisions.admitted("team-alpha/alpha-1")

    # 2. A second reclaim (alpha-2, within alpha's nominal quota; the cohort
    #    is full) journaled while kuota-preemption is down, then the service
    #    killed again and again as it comes back (the plan is written some
    #    10-20 ms after recovery; the first kills land before it), with Ticks
    #    journaled between the kills so that a restarted service may plan
    #    again what its predecessor planned.
    assert pipe.preemption.kill9() == -signal.SIGKILL
    await pipe.produce(j.job("alpha-2", namespace="team-alpha", gpus=2, queue="training-queue"))
    for delay in (0.0, 0.0, 0.01, 0.02, 0.05, 0.1):
        pipe.preemption.start()
        await pipe.preemption.wait_log(r"recovered: ", poll=0.002)
        await asyncio.sleep(delay)
        assert pipe.preemption.kill9() == -signal.SIGKILL
        await pipe.produce(j.tick())
    pipe.preemption.start()
    await pipe.decisions.admitted("team-alpha/alpha-2")
    await pipe.produce(j.tick())
    await pipe.preemption.wait_log(r"recovered: ")
    await pipe.decisions.settle(3.0)

    ds = pipe.decisions.all
    adm1 = check_preemption(ds, "team-alpha/alpha-1", {"team-beta/beta-3": "InCohortReclamation"})
    adm2 = check_preemption(ds, "team-alpha/alpha-2", {"team-beta/beta-2": "InCohortReclamation"})
    pairs = [(d.workload, d.preemptor) for d in ds if d.type == "Preempted"]
    assert sorted(pairs) == [
        ("team-beta/beta-2", "team-alpha/alpha-2"),
        ("team-beta/beta-3", "team-alpha/alpha-1"),
    ], f"each reclaim exactly once: {pairs}"
    ids = [d.id for d in ds]
    assert len(ids) == len(set(ids)), "no decision twice"
    await check_plan(pipe, adm1)
    await check_plan(pipe, adm2)
    plans = [p for p in await pipe.plans() if p.preemptor == "team-alpha/alpha-2"]
    runs = pipe.preemption.text().split("---- start\n")[1:]
    planned = [i for i, run in enumerate(runs) if "plan plan/team-alpha/alpha-2/" in run]
    print(
        f"{len(runs)} runs of kuota-preemption; runs that wrote a plan for alpha-2: {planned}; "
        f"plans for alpha-2 on the journal: {len(plans)}"
    )
    assert pipe.preemption.starts == 9 and len(runs) == 9
    assert pipe.admission.terminate() == 0 and pipe.preemption.terminate() == 0
