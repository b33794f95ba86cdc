"""What a fault run checks, from the cluster and the decision topic alone.

Theory of operation. ``Observer`` keeps a watch-fed mirror of the run's Jobs
and pods (``kuota.kube.watch.Watcher``: list, watch, relist on 410 — so it
carries on through an apiserver restart) and reads the decision topic
(``read_committed``). Quota is checked twice:

- at every change the Job watch delivers (the exact check: the usage right
  after that change), and
- every ``SAMPLE_PERIOD`` by a sampler over the mirror (the periodic check
  the issue asks for; it also proves the mirror is looked at at least every
  200 ms, whatever the watch does).

Usage is "admitted and running, or its pods still there": a Job unsuspended
and not finished, or one kuota started whose pods are still bound or running
(terminating ones, deletionTimestamp set, included; its Job stopped or even
deleted), is charged what the workload generator's own table says (never
kuota's core), against ``e2e_harness.QuotaModel`` (each ClusterQueue's nominal
+ borrowing limit, each cohort's total; #23 items 2-3: quota follows the pods).
An excess that only pods of stopped Jobs make is confirmed ``POD_SLACK`` later
(the pod and Job watches are two streams: a pod's end may arrive after the
next Job's start). A pod of the run that is running or bound while its Job was
never seen unsuspended is counted as an over-admission too.

Double actuation: every transition of a Job from suspended to unsuspended is
recorded with the ``kuota.dev/decision-id`` annotation the actuator wrote
with it; the same (Job, decision id) twice, or an unsuspension carrying an id
that is not an ``Admitted`` decision for that Job, is a double/foreign
actuation.

Bypass (issue #22): ``bypass`` adds up the GPU-seconds of pods that ran
without an admission in force. A pod is judged when it first holds a device
(bound or running) by the Job's latest unsuspension: one carrying the id of an
``Admitted`` decision of that Job not used before admits pods up to the GPUs
that decision's ``usage`` charged; any other unsuspension (none, a user's, a
reused id) admits none. A pod not admitted counts its GPUs (a whole GPU 1, a
1g.10gb slice 10/80) for its whole life. The rogue user's Jobs
(``chaos_rogue``) are judged by this, not by the double-actuation check.

At the end ``classify`` puts each Job in one of the three allowed ends
(admitted and completed; pending, suspended, with a current Inadmissible
decision; deactivated) or counts it lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from chaos_rogue import ROGUE_LABEL, rogue_charge
from chaos_workload import GI
from e2e_harness import PIPELINE_LABEL, QUEUE_LABEL, QuotaModel, job_done, job_key, job_running
from kubernetes_asyncio import client

from kuota.events.schema import Decision, parse_decision
from kuota.kube.watch import Change, Resource, Watcher
from kuota.quantity import parse_quantity

SAMPLE_PERIOD = 0.1  # seconds; the bound is 0.2
ANN_DECISION_ID = "kuota.dev/decision-id"
log = logging.getLogger("chaos")

Usage = dict[tuple[str, str], int]
# A pod may be seen bound a moment before the watch delivers its Job's unsuspension.
POD_SLACK = 0.5  # seconds
GPU_MEMORY = 80 * GI  # one GPU's gpu-memory (milli-units)
SLICE_GPUS = 10 / 80  # a 1g.10gb slice's share of a GPU


@dataclass
class PodSpan:
    """A pod of the run while it held a device: from bound or running to its end."""

    job: str
    gpus: float
    start: float  # time.monotonic() it was first seen bound or running
    end: float | None = None  # first seen finished or deleted


def pod_gpus(pod: Mapping[str, Any]) -> float:
    """The GPUs a pod of the run holds, by its template's name: 1 for a whole GPU,
    10/80 for a slice (``slice``, and the rogue's ``rogue-slice`` as first made).
    ``claim_gpus`` (the pod's own ResourceClaim) is exact and wins when seen."""
    claims = (pod.get("spec") or {}).get("resourceClaims") or []
    templates = {str(c.get("resourceClaimTemplateName") or "") for c in claims}
    return SLICE_GPUS if any(t.endswith("slice") for t in templates) else float(bool(claims))


def claim_gpus(claim: Mapping[str, Any]) -> float:
    """The GPUs a ResourceClaim asks for: each request's count of whole GPUs, or of
    1g.10gb slices (a ``mig-`` DeviceClass) at 10/80 each."""
    requests = (((claim.get("spec") or {}).get("devices") or {}).get("requests")) or []
    total = 0.0
    for r in requests:
        exactly = r.get("exactly") or {}
        per = SLICE_GPUS if str(exactly.get("deviceClassName", "")).startswith("mig-") else 1.0
        total += per * int(exactly.get("count") or 1)
    return total


def claim_owner(claim: Mapping[str, Any]) -> str | None:
    """``namespace/pod`` of the pod a ResourceClaim was made for, if any."""
    md = claim.get("metadata") or {}
    for ref in md.get("ownerReferences") or []:
        if ref.get("kind") == "Pod":
            return f"{md.get('namespace')}/{ref.get('name')}"
    return None


def decision_gpus(d: Decision) -> float:
    """The GPUs an Admitted decision charged (gpu-memory in 80Gi GPUs, whole-gpus)."""
    if d.usage is None:
        return float("inf")
    total = 0.0
    for resources in d.usage.values():
        for r, q in resources.items():
            if r == "gpu-memory":
                total += parse_quantity(q) / GPU_MEMORY
            elif r == "whole-gpus":
                total += parse_quantity(q) / 1000
    return total


class _BatchWatcher(Watcher):
    """A Watcher that says how many of the changes it yields come from one (re)list."""

    batch_left = 0

    async def _relist(self) -> list[Change]:
        changes = await super()._relist()
        self.batch_left = len(changes)
        return changes


# The reasons a Job of the run's workload may still wait with at the end (every
# Job fits its ClusterQueue alone): anything else, e.g. a hold after a failed
# start, is a lost Job.
WAITING_FOR_QUOTA = frozenset({"InsufficientQuota", "WaitingForPreemptionPlan"})


@dataclass
class Observer:
    api: client.ApiClient
    kafka: Any  # KafkaSettings of the run's topics
    run: str
    quota: QuotaModel
    charges: Mapping[str, tuple[str, dict[str, int]]]  # job key -> (cq, resource -> milli)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    doubles: list[str] = field(default_factory=list)
    unsuspensions: dict[str, list[str | None]] = field(default_factory=dict)
    ever_unsuspended: set[str] = field(default_factory=set)
    samples: list[float] = field(default_factory=list)
    job_relists: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    peak: Usage = field(default_factory=dict)
    early_pods: dict[str, str] = field(default_factory=dict)  # job -> a pod seen before
    # job -> (time.monotonic(), decision id) of each unsuspension seen, in order
    unsuspended_at: dict[str, list[tuple[float, str | None]]] = field(default_factory=dict)
    pod_spans: dict[str, PodSpan] = field(default_factory=dict)  # pod key -> its span
    # pod key -> the GPUs its ResourceClaim asks for (the rogue's template swaps)
    pod_claim_gpus: dict[str, float] = field(default_factory=dict)
    # what bypass() set apart: a stopped run's late pods beside kuota's own restart
    restart_overlap_s: float = 0.0
    restart_overlaps: list[str] = field(default_factory=list)
    t0: float = 0.0  # time.monotonic() of the first Job: the times in bypass() are from it
    # name -> event set at each such moment of preemption (the Injector's triggers)
    moments: Mapping[str, asyncio.Event] = field(default_factory=dict)
    _usage: Usage = field(default_factory=dict)
    _charged: dict[str, tuple[str, dict[str, int]]] = field(default_factory=dict)  # in _usage
    # job -> its pods bound or running and not done (terminating ones included)
    _pod_live: dict[str, set[str]] = field(default_factory=dict)
    # (time.monotonic(), what, jobs charged only for their pods): confirmed POD_SLACK later
    suspects: list[tuple[float, str, list[str]]] = field(default_factory=list)

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self._watch_jobs(), name="jobs"),
            asyncio.create_task(self._watch_pods(), name="pods"),
            asyncio.create_task(self._watch_claims(), name="claims"),
            asyncio.create_task(self._read_decisions(), name="decisions"),
            asyncio.create_task(self._read_plans(), name="plans"),
            asyncio.create_task(self._sample(), name="sampler"),
        ]

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def check_tasks(self) -> None:
        for t in self.tasks:
            if t.done() and not t.cancelled() and t.exception() is not None:
                raise RuntimeError(f"observer {t.get_name()} failed: {t.exception()!r}")

    # ------------------------------------------------------------ quota

    def usage(self) -> Usage:
        """Kept up to date change by change (O(1) each), not recomputed over 1,000 Jobs."""
        return {k: v for k, v in self._usage.items() if v}

    def _charge_of(self, key: str, obj: dict[str, Any]) -> tuple[str, dict[str, int]] | None:
        """The workload's table; a rogue Job's by its queue label and size now."""
        if key in self.charges:
            return self.charges[key]
        md = obj.get("metadata") or {}
        if (md.get("labels") or {}).get(ROGUE_LABEL) is None:
            return None
        queue = (md.get("labels") or {}).get(QUEUE_LABEL)
        cq = self.quota.queue_of.get((str(md.get("namespace")), str(queue)))
        return None if cq is None else (cq, rogue_charge(obj))

    def _holds(self, key: str, obj: dict[str, Any] | None) -> bool:
        """Running, or pods of a run kuota started still bound, running or terminating
        (a rogue's Job is judged by bypass(), not here)."""
        if obj is not None and job_running(obj):
            return True
        return bool(self._pod_live.get(key)) and key in self.unsuspensions

    def _account(self, key: str, obj: dict[str, Any] | None) -> None:
        """Move ``key``'s charge in or out of the running usage."""
        running = self._holds(key, obj)
        if running == (key in self._charged):
            return
        if running:
            found = self._charge_of(key, obj) if obj is not None else self.charges.get(key)
            if found is None:
                return
            self._charged[key] = found
        cq, charge = self._charged[key] if running else self._charged.pop(key)
        sign = 1 if running else -1
        for r, amount in charge.items():
            self._usage[(cq, r)] = self._usage.get((cq, r), 0) + sign * amount

    def _check_usage(self, where: str) -> None:
        usage = self.usage()
        for k, v in usage.items():
            self.peak[k] = max(self.peak.get(k, 0), v)
        found = self.quota.violations(usage)
        if not found:
            return
        pods_only = [k for k in self._charged if not job_running(self.jobs.get(k) or {})]
        for v in found:
            if pods_only:  # stopped runs' pods: confirmed once their ends are surely seen
                self.suspects.append((time.monotonic(), f"{where}: {v}", pods_only))
            else:
                if not self.violations:  # the first one says who held the quota
                    log.warning("over quota %s: %s", where, self._holders())
                self.violations.append(f"{where}: {v}")

    def _holders(self) -> str:
        """Who the usage is charged to now: ``job=cq:resource=amount`` (with the run's
        unsuspension ids), for the report of the first over-admission."""
        parts = []
        for key, (cq, charge) in sorted(self._charged.items()):
            amounts = ",".join(f"{r}={v / 1000:g}" for r, v in sorted(charge.items()))
            ids = [d for _, d in self.unsuspended_at.get(key, [])][-2:]
            state = "running" if job_running(self.jobs.get(key) or {}) else "pods only"
            parts.append(f"{key}={cq}:{amounts} ({state}; ids {ids})")
        return "; ".join(parts)

    def _confirm(self, now: float) -> None:
        """Turn the suspects older than POD_SLACK into violations when each Job charged
        for its pods alone still had one POD_SLACK after the check."""
        keep: list[tuple[float, str, list[str]]] = []
        for at, what, jobs in self.suspects:
            if now - at < POD_SLACK:
                keep.append((at, what, jobs))
                continue
            if all(
                any(
                    p.job == j and p.start <= at and (p.end is None or p.end > at + POD_SLACK)
                    for p in self.pod_spans.values()
                )
                for j in jobs
            ):
                self.violations.append(f"{what} (with the pods of stopped Jobs {jobs})")
        self.suspects = keep

    # ------------------------------------------------------------ recorders

    async def _watch_jobs(self) -> None:
        watcher = _BatchWatcher(
            self.api,
            Resource("Job", "/apis/batch/v1/jobs", label_selector=f"{PIPELINE_LABEL}={self.run}"),
        )
        while True:
            try:
                async for change in watcher.changes():
                    self.job_relists = watcher.relists
                    # A relist's changes come in name order, not in the order they
                    # happened: the mirror is a real state only after the last one.
                    in_relist = watcher.batch_left > 0
                    if in_relist:
                        watcher.batch_left -= 1
                    self._on_job(change.type, change.object, check=watcher.batch_left == 0)
            except Exception as err:  # the first LIST while the apiserver is down
                log.warning("job watch: %r; again in 1s", err)
                await asyncio.sleep(1)

    def _on_job(self, kind: str, obj: dict[str, Any], *, check: bool = True) -> None:
        key = job_key(obj)
        if kind == "DELETE":
            self.jobs.pop(key, None)
            self._account(key, None)
            return
        before = self.jobs.get(key)
        self.jobs[key] = obj
        self._account(key, obj)
        suspended = bool((obj.get("spec") or {}).get("suspend", False))
        was = True if before is None else bool((before.get("spec") or {}).get("suspend", False))
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        did = ann.get(ANN_DECISION_ID)
        if not suspended and not was and before is not None:
            # unsuspended before and now with another decision id: stopped and started
            # again where the watch did not see it (a relist shows only the last state)
            old = ((before.get("metadata") or {}).get("annotations") or {}).get(ANN_DECISION_ID)
            if did != old:
                self.unsuspended_at.setdefault(key, []).append((time.monotonic(), did))
        if was and not suspended:
            self.unsuspended_at.setdefault(key, []).append((time.monotonic(), did))
            self.ever_unsuspended.add(key)
            if ((obj.get("metadata") or {}).get("labels") or {}).get(ROGUE_LABEL) is not None:
                return self._checked(key, obj, check)  # judged by bypass(): users unsuspend it
            seen = self.unsuspensions.setdefault(key, [])
            if did is None or did in seen:
                self.doubles.append(
                    f"{key} unsuspended again for decision {did} "
                    f"(rv {(obj.get('metadata') or {}).get('resourceVersion')})"
                )
            seen.append(did)
        self._checked(key, obj, check)

    def _checked(self, key: str, obj: dict[str, Any], check: bool) -> None:
        if check:
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            self._check_usage(f"after {key}@{rv}")

    async def _watch_pods(self) -> None:
        watcher = Watcher(
            self.api,
            Resource("Pod", "/api/v1/pods", label_selector=f"{PIPELINE_LABEL}={self.run}"),
        )
        while True:
            try:
                async for change in watcher.changes():
                    self._on_pod(change.type, change.object)
            except Exception as err:
                log.warning("pod watch: %r; again in 1s", err)
                await asyncio.sleep(1)

    async def _watch_claims(self) -> None:
        watcher = Watcher(
            self.api, Resource("ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims")
        )
        while True:
            try:
                async for change in watcher.changes():
                    owner = claim_owner(change.object)
                    if owner is not None and change.type != "DELETE":  # kept once gone
                        self.pod_claim_gpus[owner] = claim_gpus(change.object)
            except Exception as err:
                log.warning("claim watch: %r; again in 1s", err)
                await asyncio.sleep(1)

    def _on_pod(self, kind: str, obj: dict[str, Any]) -> None:
        md = obj.get("metadata") or {}
        key = f"{md.get('namespace')}/{md.get('name')}"
        span = self.pod_spans.get(key)
        job = (
            f"{md.get('namespace')}/{(md.get('labels') or {}).get('batch.kubernetes.io/job-name')}"
        )
        phase = (obj.get("status") or {}).get("phase")
        bound = bool((obj.get("spec") or {}).get("nodeName"))
        live = self._pod_live.setdefault(job, set())
        if (
            kind != "DELETE"
            and (phase == "Running" or bound)
            and phase not in ("Succeeded", "Failed")
        ):
            live.add(key)  # deletionTimestamp or not: it holds its devices until it is gone
        else:
            live.discard(key)
        if not live:
            del self._pod_live[job]
        self._account(job, self.jobs.get(job))
        if kind == "DELETE":
            self.pods.pop(key, None)
            if span is not None and span.end is None:
                span.end = time.monotonic()
            return
        self.pods[key] = obj
        if span is None and (phase == "Running" or bound) and phase not in ("Succeeded", "Failed"):
            self.pod_spans[key] = PodSpan(job, pod_gpus(obj), time.monotonic())
        elif span is not None and span.end is None and phase in ("Succeeded", "Failed"):
            span.end = time.monotonic()
        if (phase == "Running" or bound) and job not in self.ever_unsuspended:
            # judged at the end: the Job watch may deliver the unsuspension later
            self.early_pods.setdefault(job, f"pod {key} ({phase}) of {job}, never admitted")

    async def _tail(
        self, topic: str, on_record: Callable[[ConsumerRecord[bytes, bytes]], None], *, new: bool
    ) -> None:
        """Follow one partition of a run's topic (committed records only), from
        its beginning or, ``new``, from its end."""
        consumer = AIOKafkaConsumer(
            isolation_level="read_committed",
            enable_auto_commit=False,
            **self.kafka.client_kwargs(),
        )
        await consumer.start()
        try:
            tp = TopicPartition(f"{self.kafka.topic_prefix}{topic}", 0)
            consumer.assign([tp])
            await (consumer.seek_to_end(tp) if new else consumer.seek_to_beginning(tp))
            while True:
                batch = await consumer.getmany(tp, timeout_ms=200)
                for record in batch.get(tp, []):
                    with contextlib.suppress(ValueError):
                        on_record(record)
        finally:
            await consumer.stop()

    async def _read_decisions(self) -> None:
        def on_record(record: ConsumerRecord[bytes, bytes]) -> None:
            d = parse_decision(record.value or b"")
            self.decisions.append(d)
            if d.reason == "WaitingForPreemptionPlan" and "waiting" in self.moments:
                self.moments["waiting"].set()

        await self._tail("decisions", on_record, new=False)

    async def _read_plans(self) -> None:
        """Sets the ``plan`` moment when a plan with victims is on the journal."""

        def on_record(record: ConsumerRecord[bytes, bytes]) -> None:
            if dict(record.headers or ()).get("kuota-type") != b"PreemptionPlan":
                return
            if json.loads(record.value or b"{}").get("victims") and "plan" in self.moments:
                self.moments["plan"].set()

        await self._tail("journal", on_record, new=True)

    def preempted(self) -> int:
        """Preempted decisions seen (each a victim stopped for a preemptor)."""
        return sum(1 for d in self.decisions if d.type == "Preempted")

    async def _sample(self) -> None:
        next_at = time.monotonic()
        while True:
            self.samples.append(time.monotonic())
            self._check_usage(f"sample at {time.time():.3f}")
            if self.suspects:
                self._confirm(time.monotonic())
            next_at += SAMPLE_PERIOD
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    # ------------------------------------------------------------ verdicts

    def completed(self, key: str) -> bool:
        obj = self.jobs.get(key)
        return obj is not None and job_done(obj)

    def bypass(self, now: float | None = None) -> tuple[float, list[str]]:
        """GPU-seconds pods ran without an admission in force, and what ran so."""
        now = time.monotonic() if now is None else now
        admitted = {
            (d.workload, d.id): decision_gpus(d) for d in self.decisions if d.type == "Admitted"
        }
        # pod key -> (its span, the unsuspension it runs under), by start
        spans = sorted(self.pod_spans.items(), key=lambda kv: kv[1].start)
        for pod, span in spans:  # what the pod's own claim asks, once seen
            span.gpus = self.pod_claim_gpus.get(pod, span.gpus)
        admitted_pods: dict[tuple[str, int], list[PodSpan]] = {}
        self.restart_overlap_s, self.restart_overlaps = 0.0, []
        total, details = 0.0, []
        for pod, span in spans:
            ups = self.unsuspended_at.get(span.job, [])
            under = [i for i, (t, _) in enumerate(ups) if t <= span.start + POD_SLACK]
            why = "its Job was never seen unsuspended"
            if under:
                i = under[-1]
                did = ups[i][1]
                fresh = did is not None and all(d != did for _, d in ups[:i])
                allowed = admitted.get((span.job, did or ""), 0.0) if fresh else 0.0
                mates = [
                    p
                    for p in admitted_pods.get((span.job, i), [])
                    if p.end is None or p.end > span.start
                ]
                if sum(p.gpus for p in mates) + span.gpus <= allowed + 1e-9:
                    admitted_pods.setdefault((span.job, i), []).append(span)
                    continue
                why = (
                    f"beyond the {allowed:g} GPU(s) of {did}"
                    if allowed
                    else f"an unsuspension without a fresh admission (decision-id {did})"
                )
                earlier = {d for _, d in ups[:i]}
                if allowed and earlier and all((span.job, d or "") in admitted for d in earlier):
                    # kuota itself stopped and restarted the Job (every unsuspension
                    # its own admission): a pod of the stopped run that came up late
                    # beside the new run's. Not a way around the queue: quota released
                    # at the stop, not when its pods were gone (issue #23, item 3).
                    end = span.end if span.end is not None else now
                    self.restart_overlap_s += (end - span.start) * span.gpus
                    self.restart_overlaps.append(
                        f"pod {pod}: {(end - span.start) * span.gpus:.2f} GPU-s "
                        f"(t+{span.start - self.t0:.1f}s to t+{end - self.t0:.1f}s), {why}, "
                        f"after kuota restarted the Job (unsuspensions: "
                        + ", ".join(f"t+{t - self.t0:.1f}s {d}" for t, d in ups)
                        + ")"
                    )
                    continue
            end = span.end if span.end is not None else now
            seconds = (end - span.start) * span.gpus
            total += seconds
            history = ", ".join(f"t+{t - self.t0:.1f}s {d}" for t, d in ups)
            details.append(
                f"pod {pod}: {seconds:.2f} GPU-s (t+{span.start - self.t0:.1f}s to "
                f"t+{end - self.t0:.1f}s), {why}; its Job's unsuspensions: {history or 'none'}"
            )
        return total, details

    def unadmitted_pods(self) -> list[str]:
        return [v for job, v in sorted(self.early_pods.items()) if job not in self.ever_unsuspended]

    def foreign_unsuspensions(self) -> list[str]:
        """Unsuspensions whose decision id is not an Admitted decision for that Job."""
        admitted = {(d.workload, d.id) for d in self.decisions if d.type == "Admitted"}
        return [
            f"{key} unsuspended with decision id {did}, not an Admitted decision of it"
            for key, ids in sorted(self.unsuspensions.items())
            for did in ids
            if (key, did) not in admitted
        ]

    def classify(self, keys: list[str]) -> tuple[dict[str, int], list[str]]:
        """Counts per end state, and the lost Jobs (with what was seen of them)."""
        last: dict[str, Decision] = {}
        admitted: set[str] = set()
        for d in self.decisions:
            if d.workload:
                if d.type != "Rejected":
                    last[d.workload] = d
                if d.type == "Admitted":
                    admitted.add(d.workload)
        ends = {"completed": 0, "pending": 0, "deactivated": 0}
        lost: list[str] = []
        for key in keys:
            obj = self.jobs.get(key)
            d = last.get(key)
            suspended = obj is not None and bool((obj.get("spec") or {}).get("suspend", False))
            if obj is not None and job_done(obj) and key in admitted:
                ends["completed"] += 1
            elif d is not None and d.type == "Deactivated":
                ends["deactivated"] += 1
            elif (
                suspended
                and d is not None
                and d.type == "Inadmissible"
                and d.reason in WAITING_FOR_QUOTA
            ):
                ends["pending"] += 1  # still waiting for quota when the run ended
            else:
                state = (
                    "gone" if obj is None else json.dumps((obj.get("spec") or {}).get("suspend"))
                )
                last_d = f"{d.type} {d.reason or ''}".strip() if d else None
                lost.append(f"{key} (suspend={state}, last decision {last_d})")
        return ends, lost
