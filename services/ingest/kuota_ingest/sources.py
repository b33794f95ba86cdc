"""What ingest watches, and the loops that turn each source into journal items.

Every source goes through ``Sources.observe``: translate the change against
what is remembered about the object (``kuota.kube.translate``), update the
memory at once (so the next change of that object is judged against it), and
queue the events for the journal writer, which persists the memory to Redis
after Kafka acknowledges them.

After a restart the memory comes back from Redis and each watcher is seeded
with a placeholder per remembered object: its first LIST then reports only
objects whose resourceVersion moved, and reports remembered objects that are gone as
deletes. So a restart re-journals nothing unchanged and misses no delete that
happened while ingest was down.

Pods (#18): only those with the queue label are watched, and of them only pod
group members are journaled: a Pod whose controller owner is a workload kind
admitted itself (``kuota.kinds.managed_owner``: a Job's pod with the label
copied into its template) never is, and one journaled before that gains such an
owner (or leaves ``KUOTA_JOB_LABEL_SELECTOR``) is journaled as deleted. The same
owner rule holds for every workload kind: the RayCluster and the submitter Job
KubeRay makes for a RayJob (the RayJob's labels, the queue label too, copied
onto the RayCluster) are the RayJob's, never journaled.
:class:`kuota.kube.pod_status.PodGroups` turns each group's Pods into the
group's ``PodsReady`` / ``WorkloadFinished``; to fill it after a restart the Pod
watcher is seeded without resourceVersions, so its first LIST reports every Pod
once (an unchanged one is not journaled again).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from kuota import kinds
from kuota.api.types import LabelSelector
from kuota.kinds import QUEUE_NAME_LABEL, SYSTEM_NAMESPACES, Kind, managed_owner
from kuota.kube.label_selector import parse_selector, selects
from kuota.kube.pod_status import PodGroups
from kuota.kube.translate import (
    Seen,
    Translation,
    config_file_object,
    object_key,
    stub,
    tick,
    translate_delete,
    translate_upsert,
)
from kuota.kube.watch import Resource, Watcher, identity
from kuota_ingest import metrics
from kuota_ingest.journal import Item, JournalWriter

log = logging.getLogger("kuota_ingest.sources")


#: The kinds whose objects may be another workload's own (kuota.kinds.managed_owner);
#: not Job: a Job's owner is not trusted (kuota.api.parse_job.read_job).
_WORKLOAD_KINDS = kinds.names("workload") - {"Job"}


@dataclass(frozen=True, slots=True)
class Watched:
    resource: Resource
    crd: str | None = None  # the CRD that serves it ("clusterqueues.kueue.x-k8s.io"), if any
    only_key: str | None = None  # keep only this object ("ConfigMap/<ns>/<name>")
    # KUOTA_JOB_LABEL_SELECTOR (as written, as read), applied here, not by the apiserver
    selector: tuple[str, LabelSelector] | None = None
    gate: str | None = None  # a built-in API served only when enabled: how (kinds.Kind.gate)


def _watched(kind: Kind) -> Watched:
    """The kind's list+watch, narrowed by the apiserver to its selector (a Pod's: the
    queue label), if it has one."""
    resource = Resource(kind.kind, kind.path(), label_selector=kind.selector or None)
    return Watched(
        resource, f"{kind.plural}.{kind.group}" if kind.crd else None, gate=kind.gate or None
    )


#: Every kind of kuota.kinds.WATCHED, in its order.
WATCHED: tuple[Watched, ...] = tuple(_watched(k) for k in kinds.WATCHED)


def workload_watch(kind: str, extra_selector: str | None) -> Watched:
    """:func:`jobs_watch` for any workload kind ingest watches (a PyTorchJob, #18):
    every object of the kind, narrowed by ``KUOTA_JOB_LABEL_SELECTOR`` by ingest."""
    watched = _watched(kinds.get(kind))
    if not extra_selector:
        return watched
    return replace(watched, selector=(extra_selector, parse_selector(extra_selector)))


def jobs_watch(extra_selector: str | None) -> Watched:
    """The Job watch: every Job (a Job whose queue label is removed, or one without
    a label in a managed namespace, must be seen), narrowed by
    ``KUOTA_JOB_LABEL_SELECTOR`` when it is set: by ingest, not the apiserver, so a
    journaled Job that leaves the selector is a stop, not a delete (#23 item 1).
    ``ValueError`` for a selector that does not read."""
    return workload_watch("Job", extra_selector)


def _unlabelled_system_job(kind: str, obj: object, remembered: bool) -> bool:
    """An unlabelled Job in a namespace the webhook leaves out, not journaled before:
    never kuota's, so not journaled (a remembered one goes on, its label removal too)."""
    if kind != "Job" or remembered or not isinstance(obj, dict):
        return False
    md = obj.get("metadata")
    md = md if isinstance(md, dict) else {}
    labels = md.get("labels")
    if isinstance(labels, dict) and labels.get(QUEUE_NAME_LABEL):
        return False
    return md.get("namespace") in SYSTEM_NAMESPACES


def config_map_watch(namespace: str, name: str) -> Watched:
    path = kinds.get("ConfigMap").path(namespace)
    return Watched(Resource("ConfigMap", path), None, f"ConfigMap/{namespace}/{name}")


class Clock:
    """Ingest's wall clock, never going backwards (the fold's time is ours)."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._last = 0.0

    def __call__(self) -> float:
        self._last = max(self._last, self._now())
        return self._last


class Sources:
    def __init__(
        self,
        api: ApiClient,
        writer: JournalWriter,
        *,
        memory: dict[str, Seen],
        clock: Clock,
        crd_retry_seconds: float = 30.0,
    ) -> None:
        self._api = api
        self._writer = writer
        self.memory = memory
        self._clock = clock
        self._crd_retry = crd_retry_seconds
        self._relists_done: dict[str, int] = {}
        self._watchers: dict[str, Watcher] = {}
        self.missing: set[str] = set()  # kinds whose CRD is not installed
        self.config_file_read = False  # config_file has read the file once
        self.pod_groups = PodGroups()  # each pod group's Pods: its PodsReady / Finished

    # ------------------------------------------------------------------ shared

    def relist_counts(self) -> dict[str, int]:
        out = dict(self._relists_done)
        for kind, w in self._watchers.items():
            out[kind] = out.get(kind, 0) + w.relists
        return out

    async def observe(
        self,
        kind: str,
        change_type: str,
        obj: Any,
        selector: tuple[str, LabelSelector] | None = None,
    ) -> None:
        key = object_key(kind, obj) if isinstance(obj, dict) else None
        prev = self.memory.get(key) if key is not None else None
        if _unlabelled_system_job(kind, obj, prev is not None):
            return
        outside = None
        if selector is not None and isinstance(obj, dict) and not selects(selector[1], obj):
            if prev is None:
                return  # never this pipeline's
            outside = selector[0]  # journaled before: it left the selector, a stop
            if kind == "Pod":
                change_type = "DELETE"  # a Pod has no stop of its own: it leaves its group
        if kind in _WORKLOAD_KINDS and isinstance(obj, dict) and managed_owner(obj) is not None:
            if prev is None:
                return  # its owner's (a Job's pod, a RayJob's RayCluster): never journaled
            change_type = "DELETE"  # it was a workload (or a group's Pod): no more
        at = self._clock()
        if change_type == "DELETE":
            t = translate_delete(kind, obj, prev, at=at)
        else:
            t = translate_upsert(kind, obj, prev, at=at, outside=outside)
        if kind == "Pod" and isinstance(obj, dict) and t.problem is None:
            groups = self.pod_groups
            more = (
                groups.delete(obj, at=at) if change_type == "DELETE" else groups.upsert(obj, at=at)
            )
            if more:
                t = replace(t, events=(*t.events, *more))
        await self._apply(kind, key, prev, t)

    async def _apply(self, kind: str, key: str | None, prev: Seen | None, t: Translation) -> None:
        if t.problem is not None:
            log.warning("ignored a change: %s", t.problem)
            return
        if key is None:
            return
        if t.seen is None:
            self.memory.pop(key, None)
        else:
            self.memory[key] = t.seen
        if t.skipped:
            metrics.SKIPPED.labels(kind).inc()
        if t.events or t.seen != prev:
            await self._writer.put(Item(t.events, key=key, seen=t.seen))

    # ------------------------------------------------------------------ watches

    def _seeded(self, watched: Watched) -> Watcher:
        """A fresh watcher that already knows every remembered object of its kind."""
        kind = watched.resource.kind
        w = Watcher(self._api, watched.resource, remember=identity)  # no whole objects kept
        prefix = f"{kind}/"
        for key, seen in self.memory.items():
            if not key.startswith(prefix):
                continue
            if watched.only_key is not None and key != watched.only_key:
                continue
            obj = stub(kind, key, seen)
            md = obj["metadata"]
            if kind == "Pod":
                md["resourceVersion"] = ""  # reported again: the pod groups' memory
            w.known[(md.get("namespace", ""), md["name"])] = obj
        old = self._watchers.get(kind)
        if old is not None:
            self._relists_done[kind] = self._relists_done.get(kind, 0) + old.relists
        self._watchers[kind] = w
        return w

    async def watch(self, watched: Watched) -> None:
        """List+watch one kind forever; a failure to start is retried, not fatal.

        The watcher itself survives broken watches and ``410 Gone``; what
        reaches this loop is a failed first LIST: a Kueue CRD that is not
        installed (looked for again every ``crd_retry_seconds``), RBAC, or the
        apiserver being away."""
        kind = watched.resource.kind
        backoff = 1.0
        while True:
            w = self._seeded(watched)
            try:
                async for change in w.changes():
                    backoff = 1.0
                    if watched.only_key is not None and (
                        object_key(kind, change.object) != watched.only_key
                    ):
                        continue
                    await self.observe(kind, change.type, change.object, watched.selector)
            except asyncio.CancelledError:
                raise
            except ApiException as e:
                if e.status == 404 and (watched.crd is not None or watched.gate is not None):
                    if kind not in self.missing:
                        self.missing.add(kind)
                        if watched.crd is not None:
                            log.warning(
                                "%s: CRD %s is not installed; "
                                "looking again every %.0fs (install it: kubectl apply "
                                "--server-side -k deploy/crds)",
                                kind,
                                watched.crd,
                                self._crd_retry,
                            )
                        else:
                            log.warning(
                                "%s: the apiserver does not serve %s; looking again "
                                "every %.0fs (it is served with %s)",
                                kind,
                                watched.resource.path,
                                self._crd_retry,
                                watched.gate,
                            )
                    await asyncio.sleep(self._crd_retry)
                    continue
                log.warning(
                    "%s: list failed (HTTP %s %s); retrying in %.0fs",
                    kind,
                    e.status,
                    (e.reason or "").strip(),
                    backoff,
                )
            except Exception as e:  # a watch must outlive any one failure
                log.warning(
                    "%s: watch stopped (%s: %s); retrying in %.0fs",
                    kind,
                    type(e).__name__,
                    e,
                    backoff,
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def listed(self, kind: str) -> bool:
        """The kind's current watcher has done its first LIST."""
        w = self._watchers.get(kind)
        return w is not None and w.relists >= 1

    async def monitor(self, kinds: list[str], period: float = 0.25) -> None:
        """Keep ``kuota_ingest_watch_up`` current and log when a kind starts being served."""
        up: dict[str, bool] = {}
        while True:
            for kind in kinds:
                now = self.listed(kind)
                metrics.WATCH_UP.labels(kind).set(1 if now else 0)
                if now and not up.get(kind):
                    if kind in self.missing:
                        log.info("%s: the CRD is installed now, or the API served; watching", kind)
                    self.missing.discard(kind)
                up[kind] = now
            await asyncio.sleep(period)

    # ------------------------------------------------------------------ the rest

    async def config_file(self, path: str, *, poll_seconds: float = 2.0) -> None:
        """Journal the Configuration file now and whenever its content changes."""
        last_hash: str | None = None
        while True:
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except OSError as e:
                if last_hash != "unreadable":
                    log.warning("KUOTA_CONFIG_FILE=%s: %s; keeping the last one", path, e)
                last_hash = "unreadable"
                self.config_file_read = True
                await asyncio.sleep(poll_seconds)
                continue
            digest = hashlib.sha256(raw).hexdigest()
            if digest != last_hash:
                last_hash = digest
                await self.config_text(raw.decode(errors="replace"), path)
            self.config_file_read = True
            await asyncio.sleep(poll_seconds)

    async def config_text(self, text: str, path: str) -> None:
        obj = config_file_object(text)
        if isinstance(obj, str):
            log.warning("KUOTA_CONFIG_FILE=%s: %s; keeping the last one", path, obj)
            return
        log.info("KUOTA_CONFIG_FILE=%s: read (%s)", path, obj["metadata"]["resourceVersion"])
        await self.observe(str(obj["kind"]), "UPSERT", obj)

    async def ticks(self, every: float) -> None:
        while True:
            await self._writer.put(Item((tick(self._clock()),)))
            await asyncio.sleep(every)


def file_config_error(path: str) -> str | None:
    """Why the Configuration file cannot be used at startup, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        return str(e)
    obj = config_file_object(text)
    return obj if isinstance(obj, str) else None
