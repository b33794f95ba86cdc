"""Apply one decision to the cluster: the I/O around ``kuota.actuation.patch``.

Theory of operation: for a Job-changing decision (Admitted, Preempted, Evicted,
Deactivated, Suspended) take the Job from the watch cache (``kuota_actuator.jobcache``; a
GET only on a miss, after a conflict, or to confirm a failure planned from the
cache), ask :func:`kuota.actuation.patch.plan` for the next step, write it as
ONE JSON merge patch carrying the Job's resourceVersion as a precondition, and
repeat until the step was final: an admission is a single PATCH, refused
(``JobChanged``) if the Job is not at the decision's generation. A ``Wait``
sleeps until the watch shows the Job changed (or a growing pause, then a GET).
A 409 is retried from a fresh GET (``max_conflicts`` in a row: failed),
transient errors forever with capped backoff (a success wakes every waiting
decision), and permanent ones are reported as ``ActuationFailed``. At most
``slots`` steps make API calls at once; Events go to ``kuota_actuator.events``.
The errors, why a decision is never applied twice, latencies: docs/design/actuator.md.

A pod group or a single Pod (``ns/podgroup/<group>``, ``ns/pod/<name>``, #18)
has no object to suspend: its Pods are listed (by the group label in the
namespace, or the one Pod by name) and :func:`kuota.actuation.plan_pods.plan_pods`
says what to write: one conditional merge patch per gated Pod for an admission
(its flavors in, pinned to its podset's nodes when the decision placed it, its
gate out, the decision recorded), one delete per running Pod
for a stop (Kueue stops a pod group by deleting its Pods). A conflict lists
them again; the Pods already written are then found done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kuota import kinds
from kuota.actuation.patch import (
    JOB_MUTATING,
    DecisionOrder,
    Fail,
    ResetStartTime,
    Skip,
    Wait,
    assigned_flavors,
    feedback_events,
    plan,
)
from kuota.actuation.plan_pods import DeletePod, UpdatePod, members, plan_pods
from kuota.actuation.plan_workloads import WIRED, decision_flavors, plan_workload
from kuota.actuation.scheduling import Flavors, read_flavor
from kuota.api.parse_workloads import POD_GROUP_NAME_LABEL
from kuota.events.schema import ActuationFailed, Decision
from kuota_actuator.events import EventSink, Target, job_ref
from kuota_actuator.jobcache import JobCache
from kuota_actuator.kubeapi import Conflict, Kube, Permanent, Transient
from kuota_actuator.metrics import ActuatorMetrics

log = logging.getLogger("kuota.actuator")

FLAVORS_PATH = kinds.get("ResourceFlavor").path()
MAX_STEPS = 6  # writes per decision: a stop is suspend, reset startTime, restore

# Rejected objects: any kind ingest journals from the apiserver, by name.
_KINDS = {k.kind: k for k in kinds.JOURNALED}
_JOB_PATH = kinds.get("Job").path("{ns}", "{name}")  # a template: workload keys are not checked
_POD = kinds.get("Pod")


def job_path(workload: str) -> str:
    namespace, _, name = workload.partition("/")
    return _JOB_PATH.format(ns=namespace, name=name)


def other_kind(workload: str) -> kinds.WorkloadRef | None:
    """The object a workload key names when it is a kind other than a Job that the
    actuator admits and stops (``ns/pytorchjob/name``, #18); None for a Job's key."""
    if workload.count("/") == 1:
        return None
    ref = kinds.workload_ref(workload)
    return ref if ref is not None and ref.kind in WIRED and ref.group is None else None


def pod_workload(workload: str) -> kinds.WorkloadRef | None:
    """What a pod group's or a single Pod's key names (``ns/podgroup/g``,
    ``ns/pod/p``, #18); None for any other key."""
    if workload.count("/") != 2:
        return None
    ref = kinds.workload_ref(workload)
    return ref if ref is not None and ref.kind == "Pod" else None


def pods_path(ref: kinds.WorkloadRef) -> str:
    """The LIST of a pod group's Pods (its label, in its namespace), or a single Pod's path."""
    if not ref.pod_group:
        return _POD.path(ref.namespace, ref.name)
    selector = quote(f"{POD_GROUP_NAME_LABEL}={ref.name}", safe="")
    return f"{_POD.path(ref.namespace)}?labelSelector={selector}"


def object_path(workload: str) -> str:
    """The apiserver path of the object a workload key names (a Job or a wired kind)."""
    ref = other_kind(workload)
    if ref is None:
        return job_path(workload)
    return kinds.get(ref.kind).path(ref.namespace, ref.name)


def merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The RFC 7386 JSON merge patch that turns ``old`` into ``new``.

    Maps are diffed key by key (a removed key is ``null``); anything else,
    lists included, is replaced whole — as the apiserver applies a merge patch.
    """
    patch: dict[str, Any] = {}
    for key in old.keys() | new.keys():
        if key not in new:
            patch[key] = None
        elif key not in old:
            patch[key] = new[key]
        elif old[key] != new[key]:
            a, b = old[key], new[key]
            patch[key] = merge_patch(a, b) if isinstance(a, dict) and isinstance(b, dict) else b
    return patch


# how many generations and workloads the memory of the actuator's own writes keeps
OWN_CHAIN = 16
OWN_WORKLOADS = 50_000


def _generation(job: dict[str, Any] | None, before: int | None) -> int | None:
    """``job``'s metadata.generation, as written by this decision's own patch
    (conditional on the resourceVersion: nobody else's change is in it)."""
    found = ((job or {}).get("metadata") or {}).get("generation")
    return found if type(found) is int else before


def slim(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` without ``metadata.managedFields`` (a shallow copy): the plan deep-copies
    the Job, and managedFields are most of its bytes while no write touches them."""
    meta = job.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return job
    return {**job, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def with_precondition(patch: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """``patch`` carrying ``job``'s resourceVersion: the apiserver answers 409 if it moved."""
    meta = job.get("metadata") or {}
    out = dict(patch)
    out["metadata"] = {
        **(patch.get("metadata") or {}),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return out


@dataclass(frozen=True, slots=True)
class Outcome:
    result: str  # applied | skipped | failed | noted
    detail: str = ""
    latency: float | None = None  # decision at -> its first effective Job write


class ApiHealth:
    """Whether the apiserver answered the last call; wakes backoffs on recovery."""

    def __init__(self, metrics: ActuatorMetrics | None = None) -> None:
        self._up = asyncio.Event()
        self._up.set()
        self._metrics = metrics

    @property
    def up(self) -> bool:
        return self._up.is_set()

    def ok(self) -> None:
        if not self._up.is_set():
            log.info("apiserver reachable again: reconciling the pending decisions")
            self._up.set()
            if self._metrics is not None:
                self._metrics.apiserver_down.set(0)

    def failed(self) -> None:
        if self._up.is_set():
            self._up.clear()
            if self._metrics is not None:
                self._metrics.apiserver_down.set(1)

    async def pause(self, seconds: float, sleep: Callable[[float], Awaitable[None]]) -> None:
        """Sleep ``seconds``, or less if the apiserver is seen reachable again."""
        if self._up.is_set():
            await sleep(seconds)
            return
        sleeper = asyncio.ensure_future(sleep(seconds))
        recovered = asyncio.ensure_future(self._up.wait())
        try:
            await asyncio.wait((sleeper, recovered), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, recovered):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(sleeper, recovered, return_exceptions=True)


@dataclass(slots=True)
class _Progress:
    """Where one decision's step loop is."""

    conflicts: int = 0  # consecutive 409s
    transient: int = 0  # consecutive transient failures
    writes: int = 0
    waited: float = 0.0
    wait_pause: float = 0.05
    effective: float | None = None
    fresh: bool = False  # read the Job from the apiserver, not the cache, next
    generation: int | None = None  # the Job's generation after this decision's own writes


class _Refresh(Exception):
    """The cached Job led to a failure: confirm with a GET before reporting."""


Report = Callable[[ActuationFailed], Awaitable[None]]


class Actuator:
    def __init__(
        self,
        kube: Kube,
        *,
        flavors: Callable[[], dict[str, dict[str, Any]]],
        report: Report,
        metrics: ActuatorMetrics,
        jobs: JobCache | None = None,
        events: EventSink | None = None,
        cluster_queue_of: Callable[[str], str | None] = lambda _key: None,
        max_conflicts: int = 8,
        wait_timeout: float = 60.0,
        slots: int = 64,
        base_backoff: float = 0.05,
        max_backoff: float = 5.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.kube = kube
        self._flavor_objects = flavors
        self._report = report
        self.metrics = metrics
        self.jobs = jobs if jobs is not None else JobCache(None)
        self.events = events if events is not None else EventSink(kube, metrics)
        self._cluster_queue_of = cluster_queue_of
        self.max_conflicts = max_conflicts
        self.wait_timeout = wait_timeout
        self._slots = asyncio.Semaphore(slots)
        self.slots = slots
        self.steps_in_flight = 0  # steps holding a slot (making API calls)
        self.base_backoff = base_backoff
        self.max_backoff = max_backoff
        self._clock = clock
        self._sleep = sleep
        self.health = ApiHealth(metrics)
        # workload -> the generations its Job went through by this actuator's own
        # writes alone, oldest first (a user's change starts a new chain)
        self._own: dict[str, list[int]] = {}

    # ------------------------------------------------------------------ entry

    async def apply(self, decision: Decision, record_offset: int) -> Outcome:
        if decision.type in JOB_MUTATING:
            if not decision.workload:
                return Outcome("skipped", "no workload")
            outcome = await self._mutate(decision, DecisionOrder.of(decision, record_offset))
        elif decision.type in ("Inadmissible", "Rejected"):
            self._feedback(decision)
            outcome = Outcome("noted")
        else:
            outcome = Outcome("noted")
        self.metrics.decisions.labels(decision.type, outcome.result).inc()
        if outcome.latency is not None:
            self.metrics.latency.labels(decision.type).observe(outcome.latency)
        return outcome

    # ------------------------------------------------------------------ Job changes

    async def _flavors(self, decision: Decision) -> Flavors:
        """The decision's ResourceFlavors, read with the fold's parser (``read_flavor``)."""
        objects = self._flavor_objects()
        key = decision.workload or ""
        pick = decision_flavors if other_kind(key) or pod_workload(key) else assigned_flavors
        names = pick(decision) if decision.type == "Admitted" else []
        flavors = {name: read_flavor(objects[name]) for name in names if name in objects}
        for name in names:
            if name not in flavors:
                # The watch may not have delivered a brand-new flavor yet.
                obj = await self.kube.get(f"{FLAVORS_PATH}/{name}")
                if obj is not None:
                    flavors[name] = read_flavor(obj)
        return flavors

    async def _mutate(self, decision: Decision, order: DecisionOrder) -> Outcome:
        """Step until the decision is applied, skipped or failed (see module docstring)."""
        assert decision.workload is not None
        p = _Progress()
        while True:
            pause: float | None = None
            try:
                async with self._slots:
                    self.steps_in_flight += 1
                    try:
                        result = await self._step(decision, order, p)
                    finally:
                        self.steps_in_flight -= 1
                self.health.ok()
                p.transient = 0
                if isinstance(result, Outcome):
                    return result
                if isinstance(result, Wait):
                    # A stop gives up (reported; the fold ignores it); an admission
                    # waits as long as it takes: the Job controller is slow, not the
                    # admission wrong, and a report would release its quota for good.
                    if decision.type != "Admitted" and p.waited >= self.wait_timeout:
                        return await self._fail(
                            decision, "StopTimeout", f"{result.why} after {p.waited:.0f}s"
                        )
                    pause = p.wait_pause
                    if p.waited // self.wait_timeout != (p.waited + pause) // self.wait_timeout:
                        self._log(
                            decision,
                            f"{result.why} after {p.waited:.0f}s; waiting",
                            logging.WARNING,
                        )
                    p.waited += pause
                    p.wait_pause = min(pause * 2, 1.0)
                    # Woken by the watch when the Job changes; else GET after the pause.
                    p.fresh = not await self.jobs.wait_change(decision.workload, pause)
                    continue
            except _Refresh:
                self.metrics.retries.labels("stale").inc()
                p.fresh = True
                continue
            except Conflict as err:
                self.health.ok()
                p.conflicts += 1
                p.fresh = True
                self.metrics.retries.labels("conflict").inc()
                if p.conflicts >= self.max_conflicts:
                    return await self._fail(
                        decision, "Conflict", f"{p.conflicts} conflicts in a row: {err}"
                    )
                pause = self._backoff(p.conflicts)
            except Transient as err:
                self.health.failed()
                p.transient += 1
                p.fresh = True
                self.metrics.retries.labels("transient").inc()
                if p.transient & (p.transient - 1) == 0:  # 1st, 2nd, 4th, 8th ... attempt
                    self._log(decision, f"{err}; retrying (attempt {p.transient})", logging.WARNING)
                pause = self._backoff(p.transient)
            except Permanent as err:
                return await self._fail(decision, "ApiError", str(err))
            if pause is not None:
                await self.health.pause(pause, self._sleep)

    def _note_own_write(self, workload: str, before: dict[str, Any], after: dict[str, Any]) -> None:
        """Remember that this actuator's write (conditional on the resourceVersion,
        so nobody else's change is in it) moved the Job from one generation to the next."""
        a = (before.get("metadata") or {}).get("generation")
        b = (after.get("metadata") or {}).get("generation")
        if type(a) is not int or type(b) is not int or a == b:
            return
        chain = self._own.get(workload)
        if chain is None or chain[-1] != a:
            chain = [a]
        chain.append(b)
        self._own.pop(workload, None)  # re-insert: the dict's order is the recency order
        self._own[workload] = chain[-OWN_CHAIN:]
        if len(self._own) > OWN_WORKLOADS:
            del self._own[next(iter(self._own))]

    def _own_generation(self, workload: str, job: dict[str, Any], wanted: int) -> int | None:
        """The Job's current generation if only this actuator's writes (a stop's
        suspend and restore, an earlier start) moved it on from ``wanted``, the
        generation a decision was made at; else None (the decision's own is wanted)."""
        found = (job.get("metadata") or {}).get("generation")
        chain = self._own.get(workload)
        if chain and chain[-1] == found and wanted in chain:
            return found
        return None

    async def _read(self, workload: str, p: _Progress) -> tuple[dict[str, Any] | None, bool]:
        """The Job, from the cache unless a fresh read is due; (job, from the cache).
        Another kind (#18): always a GET (no cache of it)."""
        if other_kind(workload) is not None:
            obj = await self.kube.get(object_path(workload))
            p.fresh = False
            return (None if obj is None else slim(obj)), False
        if not p.fresh:
            cached = self.jobs.get(workload)
            if cached is not None:
                return slim(cached), True
        job = await self.kube.get(job_path(workload))
        p.fresh = False
        self.jobs.note(job)
        return (None if job is None else slim(job)), False

    async def _step(
        self, decision: Decision, order: DecisionOrder, p: _Progress
    ) -> Outcome | Wait | None:
        """One plan and at most one write. None: ask again at once."""
        assert decision.workload is not None
        pods = pod_workload(decision.workload)
        if pods is not None:
            return await self._step_pods(decision, order, p, pods)
        other = other_kind(decision.workload)
        path = object_path(decision.workload)
        job, cached = await self._read(decision.workload, p)
        if job is None:
            what = f"{'Job' if other is None else other.kind} {decision.workload} not found"
            return await self._fail(decision, "JobNotFound", what)
        if p.generation is None and decision.generation is not None:
            p.generation = self._own_generation(decision.workload, job, decision.generation)
        planner = plan if other is None else plan_workload
        if other is not None:
            job.setdefault("kind", other.kind)  # a GET's object has it; a test's may not
        step = planner(
            job,
            decision,
            order=order,
            flavors=await self._flavors(decision),
            generation=p.generation,
        )
        if isinstance(step, Skip):
            self._log(decision, f"skipped, {step.why}", logging.DEBUG)
            self.events.emit(decision.id, step.events, target=job_ref(job), decision=decision)
            return Outcome("skipped", step.why)
        if isinstance(step, Fail):
            if cached:
                raise _Refresh()
            return await self._fail(decision, step.reason, step.message, step.generation)
        if isinstance(step, Wait):
            return step
        # Only writes that took effect count: a conflict or an apiserver (or
        # webhook) outage retries the same step, it is no loop.
        if p.writes >= MAX_STEPS:
            return await self._fail(
                decision, "ActuationLoop", f"no final step after {MAX_STEPS} writes"
            )
        if isinstance(step, ResetStartTime):
            body = with_precondition({"status": {"startTime": None}}, job)
            status_written = await self.kube.merge_patch(f"{path}/status", body)
            self.jobs.note(status_written)
            p.writes += 1
            p.generation = _generation(status_written, p.generation)
            self._log(decision, step.what)
            p.conflicts = 0
            return None
        body = with_precondition(merge_patch(job, step.job), job)
        written = await self.kube.merge_patch(path, body)
        p.writes += 1
        if written is None:
            p.fresh = True
            return None  # deleted meanwhile: the next GET reports it
        if other is None:
            self.jobs.note(written)
        p.generation = _generation(written, p.generation)  # our own write moved it
        self._note_own_write(decision.workload, job, written)
        p.conflicts = 0
        now = self._clock()
        if p.effective is None:
            p.effective = now - decision.at
        rv = (written.get("metadata") or {}).get("resourceVersion")
        self._log(decision, f"{step.what} (resourceVersion {rv})", logging.DEBUG)
        self.events.emit(decision.id, step.events, target=job_ref(written), decision=decision)
        if not step.final:
            return None
        self._count(decision)
        self.metrics.completion.labels(decision.type).observe(now - decision.at)
        return Outcome("applied", step.what, p.effective)

    async def _pods(self, ref: kinds.WorkloadRef) -> list[dict[str, Any]]:
        """The Pods of a pod group (its label's LIST) or the single Pod, as read now."""
        got = await self.kube.get(pods_path(ref))
        if got is None:
            return []
        items = got.get("items") if ref.pod_group else [got]
        return [
            slim({**item, "apiVersion": "v1", "kind": "Pod"})
            for item in items or ()
            if isinstance(item, dict)
        ]

    async def _step_pods(
        self, decision: Decision, order: DecisionOrder, p: _Progress, ref: kinds.WorkloadRef
    ) -> Outcome:
        """A pod group's decision: its Pods' writes, each conditional (module docstring).
        A 409 raises to the step loop, which lists the Pods again."""
        pods = await self._pods(ref)
        step = plan_pods(pods, decision, order=order, flavors=await self._flavors(decision))
        if isinstance(step, Skip):
            self._log(decision, f"skipped, {step.why}", logging.DEBUG)
            return Outcome("skipped", step.why)
        if isinstance(step, Fail):
            return await self._fail(decision, step.reason, step.message, step.generation)
        read = {str((pod.get("metadata") or {}).get("name")): pod for pod in pods}
        for write in step.writes:
            old = read[write.name]
            path = _POD.path(ref.namespace, write.name)
            if isinstance(write, UpdatePod):
                written = await self.kube.merge_patch(
                    path, with_precondition(merge_patch(old, write.pod), old)
                )
                if written is None:
                    continue  # deleted meanwhile: nothing of it to start
                target = job_ref({**written, "apiVersion": "v1", "kind": "Pod"})
            else:
                assert isinstance(write, DeletePod)
                options = {"apiVersion": "v1", "kind": "DeleteOptions"}
                await self.kube.delete(path, {**options, "preconditions": {"uid": write.uid}})
                target = job_ref(old)
            p.writes += 1
            if p.effective is None:
                p.effective = self._clock() - decision.at
            self.events.emit(decision.id, write.events, target=target, decision=decision)
        self._log(decision, step.what, logging.DEBUG)
        self._count(decision)
        self.metrics.completion.labels(decision.type).observe(self._clock() - decision.at)
        return Outcome("applied", step.what, p.effective)

    def busy(self) -> bool:
        """Half the API slots or more in use: Events wait (``EventSink``)."""
        return self.steps_in_flight * 2 >= self.slots

    def _log(self, decision: Decision, text: str, level: int = logging.INFO) -> None:
        if log.isEnabledFor(level):
            log.log(level, "%s %s %s: %s", decision.id, decision.type, decision.workload, text)

    def _backoff(self, attempt: int) -> float:
        base = min(self.max_backoff, self.base_backoff * 2 ** min(attempt - 1, 30))
        return float(base * random.uniform(0.5, 1.0))  # jitter: no thundering herd

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

    async def _fail(
        self, decision: Decision, reason: str, message: str, generation: int | None = None
    ) -> Outcome:
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
                at=decision.at,  # the actuator never advances event time
                decision_id=decision.id,
                workload=decision.workload or "",
                reason=reason,
                message=message,
                decision_type=decision.type,
                generation=generation,
            )
        )
        return Outcome("failed", f"{reason}: {message}")

    # ------------------------------------------------------------------ events

    def _feedback(self, decision: Decision) -> None:
        """Events for decisions that do not change a Job: queued, resolved in the background."""
        specs = feedback_events(decision)
        if not specs:
            return
        if decision.type == "Inadmissible" and decision.workload:
            workload = decision.workload
            ns, _, name = workload.partition("/")
            pods = pod_workload(workload)
            if pods is not None:  # on its Pods' first (the one named by uid, if listed)

                async def resolve_pod() -> Target | None:
                    assert pods is not None
                    found = members(await self._pods(pods), workload)
                    uid = decision.uid
                    first = [x for x in found if (x.get("metadata") or {}).get("uid") == uid]
                    return job_ref(dict((first or found)[0])) if found else None

                self.events.emit(decision.id, specs, resolve=resolve_pod)
                return
            other = other_kind(workload)
            uid = decision.uid or ((self.jobs.get(workload) or {}).get("metadata") or {}).get("uid")
            ref = {"apiVersion": "batch/v1", "kind": "Job", "namespace": ns, "name": name}
            if other is not None:
                ref = {
                    "apiVersion": other.api_version,
                    "kind": other.kind,
                    "namespace": ns,
                    "name": other.name,
                }
            if uid:
                ref["uid"] = str(uid)
                self.events.emit(decision.id, specs, target=(ref, ns))
                return

            async def resolve_job() -> Target | None:
                job = await self.kube.get(object_path(workload))
                if job is None:
                    return None
                return job_ref(job)

            self.events.emit(decision.id, specs, resolve=resolve_job)
        elif decision.type == "Rejected" and decision.object:
            text = decision.object

            async def resolve_object() -> Target | None:
                return await self._rejected_object(text)

            self.events.emit(decision.id, specs, resolve=resolve_object)

    async def _rejected_object(self, text: str) -> Target | None:
        kind, _, rest = text.partition(" ")
        namespace, _, name = rest.rpartition("/")
        known = _KINDS.get(kind)
        if known is None or not name:
            return None
        if known.namespaced and not namespace:
            return None
        obj = await self.kube.get(known.path(namespace if known.namespaced else "", name))
        if obj is None:
            return None
        ref = {"apiVersion": known.api_version, "kind": kind, "name": name}
        if namespace:
            ref["namespace"] = namespace
        uid = (obj.get("metadata") or {}).get("uid")
        if uid:
            ref["uid"] = str(uid)
        # Events about cluster-scoped objects live in "default", as for Nodes.
        return ref, namespace or "default"
