"""Play one scenario file of ``tests/e2e/scenarios/`` on an e2e run.

``run_scenario`` applies the queue objects, waits until ingest journaled them,
creates each Job at its ``kuota.dev/submit-at`` time without ``spec.suspend``
(the webhook must suspend it), samples the run's Jobs every ``SAMPLE_PERIOD``
for usage over quota, waits until every Job reached its expected end, replays
the Job watch for the exact check, and returns an ``Outcome`` with what
``kuota.sim`` decides for the same manifests (in the services' plans mode).
The scenario annotations are described in ``e2e_harness.py`` (which
re-exports every name).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import string
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_hardware import KWOK_COMPLETE, KWOK_READY, PIPELINE_LABEL
from e2e_outcome import (
    Outcome,
    QuotaModel,
    ScenarioJob,
    Usage,
    job_done,
    job_key,
    parse_charge,
    unsuspended_after,
    usage_of,
)
from e2e_pipeline import Run, kubectl_apply, wait_journaled
from kubernetes_asyncio import client

from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import PLANS
from kuota.events.schema import Decision
from kuota.kinds import QUEUE_NAME_LABEL as QUEUE_LABEL
from kuota.quantity import format_quantity
from kuota.sim.duration import micros_to_seconds, parse_duration
from kuota.sim.engine import Simulator
from kuota.sim.planning import PreemptionService

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
CHARGE = "e2e.kuota.dev/charge"
DEVICE = "e2e.kuota.dev/device"
EXPECT = "e2e.kuota.dev/expect"
ADMISSIONS = "e2e.kuota.dev/admissions"
SAMPLE_PERIOD = 0.1  # seconds between two samples of the Jobs (the bound asked: 0.2)
SETTLE_TIMEOUT = 90.0  # after the last Job's submission, for every Job to reach its end


def load_scenario(name: str, run: Run) -> list[dict[str, Any]]:
    text = (SCENARIOS / f"{name}.yaml").read_text()
    text = string.Template(text).substitute(run=run.id, driver=run.driver, pool=run.id)
    docs = [copy.deepcopy(d) for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    for d in docs:  # every object belongs to the run (ingest, actuator, cleanup)
        d.setdefault("metadata", {}).setdefault("labels", {})[PIPELINE_LABEL] = run.id
    return docs


async def _sample(
    run: Run,
    jobs: dict[str, ScenarioJob],
    quota: QuotaModel,
    samples: list[tuple[float, Usage]],
    violations: list[str],
) -> None:
    """Every SAMPLE_PERIOD, one consistent LIST of the run's Jobs, usage checked.

    A LIST is started every period whether or not the previous one has answered
    (at most four in flight), so a slow apiserver delays answers, not samples;
    each sample is stamped with the time its LIST was sent.
    """
    batch = client.BatchV1Api(run.api)
    namespaces = {k.split("/", 1)[0] for k in jobs}
    in_flight: set[asyncio.Task[None]] = set()

    async def one(sent: float) -> None:
        listed = await batch.list_job_for_all_namespaces(
            label_selector=f"{PIPELINE_LABEL}={run.id}", _preload_content=False
        )
        data = json.loads(await listed.read())
        objs = {
            job_key(o): o
            for o in data.get("items") or []
            if (o.get("metadata") or {}).get("namespace") in namespaces
        }
        usage = usage_of(jobs, objs)
        samples.append((sent, usage))
        for v in quota.violations(usage):
            violations.append(f"sample sent at {sent:.3f}: {v}")

    try:
        next_at = time.monotonic()
        while True:
            if len(in_flight) < 4:
                task = asyncio.create_task(one(time.time()))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            next_at += SAMPLE_PERIOD
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        for task in list(in_flight):
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
        samples.sort(key=lambda s: s[0])


async def run_scenario(run: Run, name: str) -> Outcome:
    docs = load_scenario(name, run)
    setup = [d for d in docs if d["kind"] != "Job"]
    quota = QuotaModel.of(docs)
    flavors = {
        d["metadata"]["name"]: dict((d.get("spec") or {}).get("nodeLabels") or {})
        for d in docs
        if d["kind"] == "ResourceFlavor"
    }
    jobs: dict[str, ScenarioJob] = {}
    for d in docs:
        if d["kind"] != "Job":
            continue
        md = d["metadata"]
        ann = md.get("annotations") or {}
        run_for = micros_to_seconds(parse_duration(ann["kuota.dev/run-for"]))
        manifest = copy.deepcopy(d)
        manifest["spec"].pop("suspend", None)  # the webhook must suspend it
        pod_ann = (
            manifest["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})
        )
        pod_ann[KWOK_READY] = "200ms"
        pod_ann[KWOK_COMPLETE] = f"{run_for:g}s"
        key = f"{md['namespace']}/{md['name']}"
        jobs[key] = ScenarioJob(
            key=key,
            manifest=manifest,
            submit_at=micros_to_seconds(parse_duration(ann.get("kuota.dev/submit-at", "0s"))),
            run_for=run_for,
            charge=parse_charge(ann.get(CHARGE, "")),
            device=ann.get(DEVICE),
            expect=ann.get(EXPECT, "Finished"),
            cluster_queue=quota.queue_of[(md["namespace"], md["labels"][QUEUE_LABEL])],
            admissions=int(ann.get(ADMISSIONS, "1")),
        )
    namespaces = {k.split("/", 1)[0] for k in jobs}

    applied = await kubectl_apply(run, setup)
    await wait_journaled(run, applied)

    first_decision = len(run.decisions)
    first_change = len(run.job_changes)
    samples: list[tuple[float, Usage]] = []
    sample_violations: list[str] = []
    sampler = asyncio.create_task(_sample(run, jobs, quota, samples, sample_violations))
    batch = client.BatchV1Api(run.api)
    t0 = time.time()
    try:
        for job in sorted(jobs.values(), key=lambda j: j.submit_at):
            delay = t0 + job.submit_at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            ns = job.manifest["metadata"]["namespace"]
            created = await batch.create_namespaced_job(ns, job.manifest, _preload_content=False)
            job.created = json.loads(await created.read())
            job.created_at = time.time()

        def scenario_decisions() -> list[Decision]:
            return [
                d
                for _, d in run.decisions[first_decision:]
                if d.workload and d.workload.split("/", 1)[0] in namespaces
            ]

        def settled() -> bool:
            ds = scenario_decisions()
            for job in jobs.values():
                if job.expect == "Finished":
                    ok = any(d.type == "Finished" and d.workload == job.key for d in ds)
                else:
                    reason = job.expect.split("/", 1)[1]
                    ok = any(
                        d.type == "Inadmissible" and d.workload == job.key and d.reason == reason
                        for d in ds
                    )
                if not ok:
                    return False
            return True

        def pending() -> str:
            ds = scenario_decisions()
            late = []
            for job in jobs.values():
                last = [d.type for d in ds if d.workload == job.key]
                late.append(f"{job.key} (expect {job.expect}; decisions {last})")
            return "; ".join(late)

        try:
            await run.until(settled, f"scenario {name} settles", timeout=SETTLE_TIMEOUT)
        except pytest.fail.Exception:
            pytest.fail(f"scenario {name} did not settle in {SETTLE_TIMEOUT:.0f}s: {pending()}")
        # the Job controller's last writes (Complete) are in by now; one more sample
        await asyncio.sleep(2 * SAMPLE_PERIOD)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    duration = time.time() - t0
    decisions = scenario_decisions()

    # Every change of the run's Jobs, replayed in watch order: the exact check.
    state: dict[str, dict[str, Any]] = {}
    change_violations: list[str] = []
    peak: Usage = {}
    unsuspended_at: dict[str, float] = {}
    stopped_at: dict[str, list[float]] = {}
    finished_at: dict[str, float] = {}
    for ch in run.job_changes[first_change:]:
        key = job_key(ch.obj)
        if key not in jobs:
            continue
        if ch.type == "DELETE":
            state.pop(key, None)
            continue
        before = state.get(key)
        state[key] = ch.obj
        suspended = bool((ch.obj.get("spec") or {}).get("suspend", False))
        if not suspended:
            unsuspended_at.setdefault(key, ch.at)
        elif before is not None and not (before.get("spec") or {}).get("suspend", False):
            stopped_at.setdefault(key, []).append(ch.at)
        if job_done(ch.obj):
            finished_at.setdefault(key, ch.at)
        usage = usage_of(jobs, state)
        for k, v in usage.items():
            peak[k] = max(peak.get(k, 0), v)
        rv = (ch.obj.get("metadata") or {}).get("resourceVersion")
        for v in quota.violations(usage):
            change_violations.append(f"after {key}@{rv}: {v}")

    final_jobs, pods, claims, events = await _collect(run, jobs, namespaces)
    # As the services fold: plans mode, the preemption service in-process (no lag).
    sim = Simulator(
        run.infra + docs, fold=Fold(preemption=PLANS), planning=PreemptionService()
    ).run()
    sim_decisions = [d for d in sim if d.workload and d.workload.split("/", 1)[0] in namespaces]
    outcome = Outcome(
        name=name,
        run=run,
        jobs=jobs,
        quota=quota,
        flavors=flavors,
        decisions=decisions,
        sim_decisions=sim_decisions,
        final_jobs=final_jobs,
        pods=pods,
        claims=claims,
        events=events,
        samples=samples,
        sample_violations=sample_violations,
        change_violations=change_violations,
        peak=peak,
        unsuspended_at=unsuspended_at,
        stopped_at=stopped_at,
        finished_at=finished_at,
        duration=duration,
    )
    _report(outcome)
    return outcome


async def _collect(
    run: Run, jobs: Mapping[str, ScenarioJob], namespaces: set[str]
) -> tuple[
    dict[str, dict[str, Any]],
    dict[str, list[dict[str, Any]]],
    dict[str, list[dict[str, Any]]],
    dict[str, list[dict[str, Any]]],
]:
    batch = client.BatchV1Api(run.api)
    core = client.CoreV1Api(run.api)
    final_jobs: dict[str, dict[str, Any]] = {}
    pods: dict[str, list[dict[str, Any]]] = {k: [] for k in jobs}
    events: dict[str, list[dict[str, Any]]] = {k: [] for k in jobs}
    for ns in sorted(namespaces):
        resp = await batch.list_namespaced_job(ns, _preload_content=False)
        for o in json.loads(await resp.read()).get("items") or []:
            final_jobs[job_key(o)] = o
        resp = await core.list_namespaced_pod(ns, _preload_content=False)
        for p in json.loads(await resp.read()).get("items") or []:
            owner = (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name")
            if f"{ns}/{owner}" in pods:
                pods[f"{ns}/{owner}"].append(p)
        resp = await core.list_namespaced_event(ns, _preload_content=False)
        for e in json.loads(await resp.read()).get("items") or []:
            inv = e.get("involvedObject") or {}
            if inv.get("kind") == "Job" and f"{ns}/{inv.get('name')}" in events:
                events[f"{ns}/{inv.get('name')}"].append(e)
    claims: dict[str, list[dict[str, Any]]] = {}
    for claim in run.claims.values():
        ns = claim["metadata"]["namespace"]
        for ref in claim["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Pod":
                claims.setdefault(f"{ns}/{ref['name']}", []).append(claim)
    return final_jobs, pods, claims, events


def _report(o: Outcome) -> None:
    lat = [
        o.unsuspended_at[k] - j.created_at
        for k, j in o.jobs.items()
        if k in o.unsuspended_at and j.created_at
    ]
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(o.samples)]
    peaks = ", ".join(f"{cq}/{r}: {format_quantity(v)}" for (cq, r), v in sorted(o.peak.items()))
    print(
        f"\n[e2e] {o.name}: {o.duration:.1f}s, {len(o.decisions)} decisions, "
        f"admitted {o.admitted_order()}, "
        f"create->unsuspended {min(lat, default=0) * 1000:.0f}..{max(lat, default=0) * 1000:.0f}ms "
        f"(no wait: {sorted(round(x * 1000) for x in lat)[:3]}ms), "
        f"{len(o.samples)} samples (max gap {max(gaps, default=0) * 1000:.0f}ms), "
        f"peak {peaks}"
    )
    for d in o.decisions:
        if d.type == "Admitted" and d.victims and d.workload:
            started = unsuspended_after(o, d.workload, d)
            for victim in d.victims:
                stops = o.stopped_at.get(victim) or []
                if started is not None and stops:
                    print(
                        f"[e2e]   {d.workload} unsuspended {(started - min(stops)) * 1000:.0f}ms "
                        f"after its victim {victim} was suspended"
                    )
    t0 = min((j.created_at for j in o.jobs.values() if j.created_at), default=0.0)

    def at(t: float | None) -> str:
        return "-" if t is None else f"{t - t0:.1f}"

    print(
        "[e2e]   timeline (s): "
        + "; ".join(
            f"{k.split('/', 1)[1]} created {at(j.created_at)} unsuspended "
            f"{at(o.unsuspended_at.get(k))} finished {at(o.finished_at.get(k))}"
            for k, j in o.jobs.items()
        )
    )
