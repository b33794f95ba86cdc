"""Apply one decision to the cluster: the I/O around ``kuota.core.actuation``.

For a Job-changing decision (Admitted, Preempted, Evicted, Deactivated) the
loop is: GET the Job, ask :func:`kuota.core.actuation.plan` for the next step,
write it with the Job's resourceVersion as precondition (PUT), and repeat
until the step was final. A ``Wait`` step (a suspended Job whose pods the Job
controller has not taken down yet) polls with a growing pause, up to
``wait_timeout``. At most ``slots`` steps run their API calls at once; pauses
hold no slot, so Jobs waiting for the Job controller do not hold up others.

A 409 Conflict means someone wrote the Job in between: GET again, recompute.
Transient errors (429, 5xx, timeouts) back off exponentially. Both are bounded
(``max_attempts``); past the bound, as for a missing Job or a permanent API
error, the failure goes to the journal as an ``ActuationFailed`` event and the
decision is done with.

Two latencies are measured from the decision's ``at``:
``kuota_actuation_latency_seconds`` to the first write that takes effect
(the unsuspend, or the suspend of a stop), and
``kuota_actuation_completion_seconds`` to the final write (for a stop: the
restored template, after the Job controller has taken the pods down).

Events follow Kueue's reasons: ``Admitted`` and ``Started`` on admission,
``Stopped`` when a running Job is suspended, ``Preempted`` /
``EvictedDueTo<reason>`` / ``Deactivated`` when a stop is complete, a
``Pending`` warning for Inadmissible, and the Rejected reason on a rejected
object. Event names are derived from the decision id, so a redelivered
decision never writes an event twice (the apiserver answers 409).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kuota.core.actuation import (
    JOB_MUTATING,
    DecisionOrder,
    EventSpec,
    Fail,
    FlavorSpec,
    ResetStartTime,
    Skip,
    Wait,
    assigned_flavors,
    feedback_events,
    flavor_spec,
    plan,
)
from kuota.events.schema import ActuationFailed, Decision
from kuota_actuator.kubeapi import ApiError, Conflict, Kube, Permanent, Transient
from kuota_actuator.metrics import ActuatorMetrics

log = logging.getLogger("kuota.actuator")

FLAVORS_PATH = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"
MAX_STEPS = 6  # writes per decision: a stop is suspend, reset startTime, restore
COMPONENT = "kuota-actuator"

# Rejected objects: kind -> (collection path template, namespaced)
_KINDS: dict[str, tuple[str, bool]] = {
    "ClusterQueue": ("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", False),
    "ResourceFlavor": ("/apis/kueue.x-k8s.io/v1beta2/resourceflavors", False),
    "Cohort": ("/apis/kueue.x-k8s.io/v1beta2/cohorts", False),
    "WorkloadPriorityClass": ("/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses", False),
    "LocalQueue": ("/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues", True),
    "Job": ("/apis/batch/v1/namespaces/{ns}/jobs", True),
    "DeviceClass": ("/apis/resource.k8s.io/v1/deviceclasses", False),
    "ResourceSlice": ("/apis/resource.k8s.io/v1/resourceslices", False),
    "ResourceClaimTemplate": (
        "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
        True,
    ),
    "Namespace": ("/api/v1/namespaces", False),
    "ConfigMap": ("/api/v1/namespaces/{ns}/configmaps", True),
}
_API_VERSIONS = {
    "ClusterQueue": "kueue.x-k8s.io/v1beta2",
    "ResourceFlavor": "kueue.x-k8s.io/v1beta2",
    "Cohort": "kueue.x-k8s.io/v1beta2",
    "WorkloadPriorityClass": "kueue.x-k8s.io/v1beta2",
    "LocalQueue": "kueue.x-k8s.io/v1beta2",
    "Job": "batch/v1",
    "DeviceClass": "resource.k8s.io/v1",
    "ResourceSlice": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    "Namespace": "v1",
    "ConfigMap": "v1",
}


def job_path(workload: str) -> str:
    namespace, _, name = workload.partition("/")
    return f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"


@dataclass(frozen=True, slots=True)
class Outcome:
    result: str  # applied | skipped | failed | noted
    detail: str = ""
    latency: float | None = None  # decision at -> its first effective Job write


@dataclass(slots=True)
class _Progress:
    """Where one decision's step loop is."""

    errors: int = 0  # consecutive failed API calls
    last_error: ApiError | None = None
    writes: int = 0
    waited: float = 0.0
    wait_pause: float = 0.05
    effective: float | None = None

    def failed(self, err: ApiError) -> None:
        self.errors += 1
        self.last_error = err


Report = Callable[[ActuationFailed], Awaitable[None]]


class Actuator:
    def __init__(
        self,
        kube: Kube,
        *,
        flavors: Callable[[], dict[str, dict[str, Any]]],
        report: Report,
        metrics: ActuatorMetrics,
        cluster_queue_of: Callable[[str], str | None] = lambda _key: None,
        max_attempts: int = 8,
        wait_timeout: float = 60.0,
        slots: int = 16,
        base_backoff: float = 0.1,
        max_backoff: float = 5.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.kube = kube
        self._flavor_objects = flavors
        self._report = report
        self.metrics = metrics
        self._cluster_queue_of = cluster_queue_of
        self.max_attempts = max_attempts
        self.wait_timeout = wait_timeout
        self._slots = asyncio.Semaphore(slots)
        self.base_backoff = base_backoff
        self.max_backoff = max_backoff
        self._clock = clock
        self._sleep = sleep
        self._instance = os.environ.get("HOSTNAME", "") or COMPONENT

    # ------------------------------------------------------------------ entry

    async def apply(self, decision: Decision, record_offset: int) -> Outcome:
        if decision.type in JOB_MUTATING:
            if not decision.workload:
                return Outcome("skipped", "no workload")
            outcome = await self._mutate(decision, DecisionOrder.of(decision, record_offset))
        elif decision.type in ("Inadmissible", "Rejected"):
            async with self._slots:
                await self._feedback(decision)
            outcome = Outcome("noted")
        else:
            outcome = Outcome("noted")
        self.metrics.decisions.labels(decision.type, outcome.result).inc()
        if outcome.latency is not None:
            self.metrics.latency.labels(decision.type).observe(outcome.latency)
        return outcome

    # ------------------------------------------------------------------ Job changes

    async def _flavors(self, decision: Decision) -> dict[str, FlavorSpec]:
        objects = self._flavor_objects()
        specs = {name: flavor_spec(obj) for name, obj in objects.items()}
        if decision.type == "Admitted":
            for name in assigned_flavors(decision):
                if name not in specs:
                    # The watch may not have delivered a brand-new flavor yet.
                    obj = await self.kube.get(f"{FLAVORS_PATH}/{name}")
                    if obj is not None:
                        specs[name] = flavor_spec(obj)
        return specs

    async def _mutate(self, decision: Decision, order: DecisionOrder) -> Outcome:
        """Step until the decision is applied, skipped or failed (see module docstring).

        Only the API calls of a step hold one of the ``slots``; backoff sleeps
        and waits for the Job controller do not."""
        assert decision.workload is not None
        progress = _Progress()
        while progress.errors < self.max_attempts:
            pause: float | None = None
            try:
                async with self._slots:
                    result = await self._step(decision, order, progress)
                if isinstance(result, Outcome):
                    return result
                if isinstance(result, Wait):
                    if progress.waited >= self.wait_timeout:
                        return await self._fail(
                            decision, "StopTimeout", f"{result.why} after {progress.waited:.0f}s"
                        )
                    pause = progress.wait_pause
                    progress.waited += pause
                    progress.wait_pause = min(pause * 2, 1.0)
            except Conflict as err:
                progress.failed(err)
                self.metrics.retries.labels("conflict").inc()
                pause = self._backoff(progress.errors)
            except Transient as err:
                progress.failed(err)
                self.metrics.retries.labels("transient").inc()
                self._log(decision, f"{err}; retrying", logging.WARNING)
                pause = self._backoff(progress.errors)
            except Permanent as err:
                return await self._fail(decision, "ApiError", str(err))
            if pause is not None:
                await self._sleep(pause)
        last = progress.last_error
        reason = "Conflict" if isinstance(last, Conflict) else "ApiUnavailable"
        return await self._fail(
            decision, reason, f"gave up after {self.max_attempts} attempts: {last}"
        )

    async def _step(
        self, decision: Decision, order: DecisionOrder, progress: _Progress
    ) -> Outcome | Wait | None:
        """One GET, one plan, at most one write. None: ask again at once."""
        assert decision.workload is not None
        path = job_path(decision.workload)
        job = await self.kube.get(path)
        if job is None:
            return await self._fail(decision, "JobNotFound", f"Job {decision.workload} not found")
        step = plan(job, decision, order=order, flavors=await self._flavors(decision))
        if isinstance(step, Skip):
            self._log(decision, f"skipped, {step.why}")
            return Outcome("skipped", step.why)
        if isinstance(step, Fail):
            return await self._fail(decision, step.reason, step.message)
        if isinstance(step, Wait):
            return step
        progress.writes += 1
        if progress.writes > MAX_STEPS:
            return await self._fail(
                decision, "ActuationLoop", f"no final step after {MAX_STEPS} writes"
            )
        if isinstance(step, ResetStartTime):
            await self.kube.put(f"{path}/status", step.job)
            self._log(decision, step.what)
            progress.errors = 0
            return None
        written = await self.kube.put(path, step.job)
        if written is None:
            return None  # deleted meanwhile: the next GET reports it
        progress.errors = 0
        now = self._clock()
        if progress.effective is None:
            progress.effective = now - decision.at
        rv = (written.get("metadata") or {}).get("resourceVersion")
        self._log(decision, f"{step.what} (resourceVersion {rv})")
        await self._events(decision, written, step.events)
        if not step.final:
            return None
        self._count(decision)
        self.metrics.completion.labels(decision.type).observe(now - decision.at)
        return Outcome("applied", step.what, progress.effective)

    def _log(self, decision: Decision, text: str, level: int = logging.INFO) -> None:
        log.log(level, "%s %s %s: %s", decision.id, decision.type, decision.workload, text)

    def _backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.base_backoff * 2 ** (attempt - 1)))

    def _count(self, decision: Decision) -> None:
        cq = decision.cluster_queue or ""
        if decision.type == "Admitted":
            self.metrics.admitted.labels(cq).inc()
        elif decision.type == "Evicted":
            self.metrics.evicted.labels(cq, decision.reason or "").inc()
        elif decision.type == "Preempted":
            self.metrics.evicted.labels(cq, "Preempted").inc()
            preempting = self._cluster_queue_of(decision.preemptor or "") or "unknown"
            self.metrics.preempted.labels(preempting, decision.reason or "").inc()

    async def _fail(self, decision: Decision, reason: str, message: str) -> Outcome:
        log.warning(
            "%s %s %s: failed, %s: %s",
            decision.id,
            decision.type,
            decision.workload,
            reason,
            message,
        )
        self.metrics.failures.labels(reason).inc()
        await self._report(
            ActuationFailed(
                id=f"actuationfailed/{decision.id}",
                at=decision.at,
                decision_id=decision.id,
                workload=decision.workload or "",
                reason=reason,
                message=message,
                decision_type=decision.type,
            )
        )
        return Outcome("failed", f"{reason}: {message}")

    # ------------------------------------------------------------------ events

    async def _feedback(self, decision: Decision) -> None:
        specs = feedback_events(decision)
        if not specs:
            return
        try:
            if decision.type == "Inadmissible" and decision.workload:
                ns, _, name = decision.workload.partition("/")
                uid = decision.uid
                if not uid:
                    job = await self.kube.get(job_path(decision.workload))
                    if job is None:
                        return
                    uid = (job.get("metadata") or {}).get("uid")
                ref = {"apiVersion": "batch/v1", "kind": "Job", "namespace": ns, "name": name}
                if uid:
                    ref["uid"] = str(uid)
                await self._write_events(decision, ref, ns, specs)
            elif decision.type == "Rejected" and decision.object:
                target = await self._rejected_object(decision.object)
                if target is not None:
                    ref, ns = target
                    await self._write_events(decision, ref, ns, specs)
        except ApiError as err:
            log.warning("%s %s: event not written: %s", decision.id, decision.type, err)

    async def _rejected_object(self, text: str) -> tuple[dict[str, str], str] | None:
        kind, _, rest = text.partition(" ")
        namespace, _, name = rest.rpartition("/")
        known = _KINDS.get(kind)
        if known is None or not name:
            return None
        collection, namespaced = known
        if namespaced and not namespace:
            return None
        obj = await self.kube.get(f"{collection.format(ns=namespace)}/{name}")
        if obj is None:
            return None
        ref = {"apiVersion": _API_VERSIONS[kind], "kind": kind, "name": name}
        if namespace:
            ref["namespace"] = namespace
        uid = (obj.get("metadata") or {}).get("uid")
        if uid:
            ref["uid"] = str(uid)
        # Events about cluster-scoped objects live in "default", as for Nodes.
        return ref, namespace or "default"

    async def _events(
        self, decision: Decision, job: dict[str, Any], specs: tuple[EventSpec, ...]
    ) -> None:
        if not specs:
            return
        meta = job.get("metadata") or {}
        ns = str(meta.get("namespace", ""))
        ref = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "namespace": ns,
            "name": str(meta.get("name", "")),
            "uid": str(meta.get("uid", "")),
        }
        try:
            await self._write_events(decision, ref, ns, specs)
        except ApiError as err:
            log.warning("%s: event not written: %s", decision.id, err)

    async def _write_events(
        self,
        decision: Decision,
        ref: dict[str, str],
        namespace: str,
        specs: tuple[EventSpec, ...],
    ) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for spec in specs:
            name = f"{ref['name']}.{decision.id[:16]}.{spec.reason.lower()}"[:253]
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": ref,
                "reason": spec.reason,
                "message": spec.message,
                "type": spec.type,
                "source": {"component": COMPONENT},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "reportingComponent": COMPONENT,
                "reportingInstance": self._instance,
            }
            try:
                await self.kube.post(f"/api/v1/namespaces/{namespace}/events", body)
                self.metrics.events.labels(spec.reason, "created").inc()
            except Conflict:
                self.metrics.events.labels(spec.reason, "duplicate").inc()
            except (Transient, Permanent) as err:
                self.metrics.events.labels(spec.reason, "error").inc()
                log.warning("%s: event %s not written: %s", decision.id, spec.reason, err)
