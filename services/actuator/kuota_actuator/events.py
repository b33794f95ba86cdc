"""Kubernetes Events, written in the background, best effort.

Theory of operation: actuation never waits for an Event. :meth:`EventSink.emit`
puts the Event (or the means to resolve its ``involvedObject``, for a Rejected
object or a Job whose uid is not known yet) on a bounded queue and returns at
once; a full queue drops it (``kuota_actuator_events_dropped_total``). A few
workers POST them. Event names derive from the decision id, so a redelivered
decision's Event is a 409 (counted ``duplicate``), never a second Event. Job
writes come first: while ``busy()`` says half the actuator's API slots or more
are in use, a worker holds its Event back for up to ``yield_for`` seconds, then
writes anyway, so Events still trickle out under sustained load. The reasons
(Kueue's, built by ``kuota.actuation.patch``): docs/design/actuator.md. A
Preempted decision's Events live in the victim's namespace: unless
``name_preemptor`` (``KUOTA_ACTUATOR_EVENTS_NAME_PREEMPTOR``), the worker puts
the preemptor's Job uid (cache, else a GET, else UNKNOWN) where the message
names its namespace/name, as Kueue names it by UID (docs/security.md, item 11).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kuota import kinds
from kuota.actuation.patch import MAX_EVENT_MESSAGE, EventSpec
from kuota.events.schema import Decision
from kuota_actuator.kubeapi import ApiError, Conflict, Kube
from kuota_actuator.metrics import ActuatorMetrics

log = logging.getLogger("kuota.actuator")

COMPONENT = "kuota-actuator"

# The object an Event is about, and the namespace the Event lives in.
Target = tuple[dict[str, str], str]
Resolve = Callable[[], Awaitable[Target | None]]
UidOf = Callable[[str], str | None]  # a workload key -> its Job's uid, if known


@dataclass(frozen=True, slots=True)
class _Item:
    decision_id: str
    specs: tuple[EventSpec, ...]
    target: Target | None
    resolve: Resolve | None
    at: str
    preemptor: str | None = None  # a key to replace by its uid in the messages


def preemptor_text(uid: str | None) -> str:
    """How a victim's Events name the preemptor: by uid, in Kueue's form (kuota has
    no Workload object: the workload's uid is its Job's)."""
    known = uid or "UNKNOWN"
    return f"UID: {known}, JobUID: {known}"


def hide_preemptor(
    specs: tuple[EventSpec, ...], key: str, uid: str | None
) -> tuple[EventSpec, ...]:
    """``specs`` with every mention of the workload ``key`` (``namespace/name``, as a
    whole word) replaced by :func:`preemptor_text`; specs that do not name it are kept."""
    pattern = re.compile(rf"(?<![a-z0-9.-]){re.escape(key)}(?![a-z0-9.-])")
    text = preemptor_text(uid)
    out = []
    for spec in specs:
        message = pattern.sub(lambda _: text, spec.message)
        if message != spec.message:
            spec = EventSpec(spec.reason, message[:MAX_EVENT_MESSAGE], spec.type)
        out.append(spec)
    return tuple(out)


def job_ref(job: dict[str, Any]) -> Target:
    meta = job.get("metadata") or {}
    ns = str(meta.get("namespace", ""))
    ref = {
        "apiVersion": str(job.get("apiVersion") or "batch/v1"),
        "kind": str(job.get("kind") or "Job"),
        "namespace": ns,
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
    }
    return ref, ns


class EventSink:
    def __init__(
        self,
        kube: Kube,
        metrics: ActuatorMetrics,
        *,
        capacity: int = 10_000,
        workers: int = 4,
        busy: Callable[[], bool] = lambda: False,
        yield_for: float = 1.0,
        name_preemptor: bool = False,
        uid_of: UidOf = lambda _key: None,
    ) -> None:
        self._name_preemptor = name_preemptor
        self._uid_of = uid_of
        self._busy = busy
        self._yield_for = yield_for
        self.kube = kube
        self.metrics = metrics
        self._queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=capacity)
        self._workers = workers
        self._instance = os.environ.get("HOSTNAME", "") or COMPONENT

    def emit(
        self,
        decision_id: str,
        specs: tuple[EventSpec, ...],
        *,
        target: Target | None = None,
        resolve: Resolve | None = None,
        decision: Decision | None = None,
    ) -> bool:
        """Queue Events (never blocks); False if dropped because the queue is full.
        ``decision``: the one they are for; a Preempted one's preemptor is hidden."""
        if not specs or (target is None and resolve is None):
            return True
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        hide = None
        if decision is not None and decision.type == "Preempted" and not self._name_preemptor:
            hide = decision.preemptor or None
        try:
            self._queue.put_nowait(_Item(decision_id, specs, target, resolve, at, hide))
        except asyncio.QueueFull:
            for spec in specs:
                self.metrics.events_dropped.labels(spec.reason).inc()
            return False
        self.metrics.event_queue.set(self._queue.qsize())
        return True

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    async def run(self, stop: asyncio.Event) -> None:
        workers = [
            asyncio.create_task(self._work(), name=f"events-{n}") for n in range(self._workers)
        ]
        try:
            await stop.wait()
            # A short grace to write what is queued; the rest is dropped (best effort).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), 2.0)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def drain(self) -> None:
        """Until everything queued so far is written (tests)."""
        await self._queue.join()

    async def _work(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                waited = 0.0
                while self._busy() and waited < self._yield_for:
                    await asyncio.sleep(0.05)
                    waited += 0.05
                await self._write(item)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # never let one Event stop the workers
                log.warning("%s: events not written: %r", item.decision_id, err)
            finally:
                self._queue.task_done()
                self.metrics.event_queue.set(self._queue.qsize())

    async def _write(self, item: _Item) -> None:
        target = item.target
        if target is None and item.resolve is not None:
            try:
                target = await item.resolve()
            except ApiError as err:
                log.warning("%s: event target not found: %s", item.decision_id, err)
                target = None
        if target is None:
            return
        ref, namespace = target
        specs = item.specs
        if item.preemptor is not None and any(item.preemptor in s.message for s in specs):
            specs = hide_preemptor(specs, item.preemptor, await self._uid(item.preemptor))
        for spec in specs:
            name = f"{ref['name']}.{item.decision_id[:16]}.{spec.reason.lower()}"[:253]
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": ref,
                "reason": spec.reason,
                "message": spec.message,
                "type": spec.type,
                "source": {"component": COMPONENT},
                "firstTimestamp": item.at,
                "lastTimestamp": item.at,
                "count": 1,
                "reportingComponent": COMPONENT,
                "reportingInstance": self._instance,
            }
            try:
                await self.kube.post(f"/api/v1/namespaces/{namespace}/events", body)
                self.metrics.events.labels(spec.reason, "created").inc()
            except Conflict:
                self.metrics.events.labels(spec.reason, "duplicate").inc()
            except ApiError as err:
                self.metrics.events.labels(spec.reason, "error").inc()
                log.warning("%s: event %s not written: %s", item.decision_id, spec.reason, err)

    async def _uid(self, key: str) -> str | None:
        """The Job ``key``'s uid: from the actuator's cache, else a GET (None: unknown)."""
        uid = self._uid_of(key)
        if uid:
            return uid
        namespace, _, name = key.partition("/")
        try:
            job = await self.kube.get(kinds.get("Job").path(namespace, name))
        except (ApiError, ValueError) as err:
            log.debug("preemptor %s: uid not found: %s", key, err)
            return None
        found = ((job or {}).get("metadata") or {}).get("uid")
        return str(found) if found else None
