"""The Jobs the actuator acts on, from a list+watch, plus its own latest writes.

Theory of operation: a :class:`kuota.kube.watch.Watcher` lists the Jobs that
carry the queue label (ANDed with ``KUOTA_JOB_LABEL_SELECTOR``) and watches
them, so a decision is planned against the cached Job instead of a GET; no
copy keeps ``metadata.managedFields`` (the watcher drops them, ``note`` too). A
stale copy is safe: every write carries the resourceVersion it was computed
from, so it costs a 409 and a fresh GET, never a wrong write. To keep that
rare, the object the apiserver returns for the actuator's own write is kept as
an overlay until the watch catches up (resourceVersions compared as etcd
revisions). ``wait_change(key, timeout)`` wakes a waiting step on the watch
event instead of polling. A failed watcher is replaced after a backoff; until
the replacement has listed, the previous copy keeps answering. More:
docs/design/actuator.md (*Reading Jobs*).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from kubernetes_asyncio.client import ApiClient

from kuota import kinds
from kuota.kinds import QUEUE_NAME_LABEL
from kuota.kube.watch import Resource, Watcher

log = logging.getLogger("kuota.actuator")

JOBS_PATH = kinds.get("Job").path()
MAX_OVERLAY = 20_000  # own writes kept for Jobs the watch does not show (outside the selector)


def job_selector(extra: str | None) -> str:
    """The queue label, ANDed with ``extra`` (``KUOTA_JOB_LABEL_SELECTOR``)."""
    return QUEUE_NAME_LABEL if not extra else f"{QUEUE_NAME_LABEL},{extra}"


def workload_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without ``metadata.managedFields`` (a shallow copy), as the watch keeps
    it (``kuota.kube.watch``): most of a Job's bytes, and no write reads them."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def revision(obj: dict[str, Any] | None) -> int:
    """The object's resourceVersion as an etcd revision (-1 if absent or opaque)."""
    if obj is None:
        return -1
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or -1)
    except (TypeError, ValueError):
        return -1


class JobCache:
    """``kind``: the workload kind cached (a Job; a PyTorchJob for the drains, #18)."""

    def __init__(
        self, api: ApiClient | None, selector: str | None = None, *, kind: str = "Job"
    ) -> None:
        self._api = api
        path = JOBS_PATH if kind == "Job" else kinds.get(kind).path()
        self.resource = Resource(kind, path, label_selector=job_selector(selector))
        self._watcher: Watcher | None = None  # the one that answers (has listed)
        self._written: dict[str, dict[str, Any]] = {}
        self._waiters: dict[str, asyncio.Event] = {}
        self.synced = asyncio.Event()
        self.hits = 0
        self.misses = 0

    # ------------------------------------------------------------------ reads

    def get(self, key: str) -> dict[str, Any] | None:
        """The newest copy of Job ``namespace/name`` known here, or None."""
        ns, _, name = key.partition("/")
        watched = self._watcher.known.get((ns, name)) if self._watcher is not None else None
        mine = self._written.get(key)
        if mine is not None:
            if watched is None or revision(watched) < revision(mine):
                self.hits += 1
                return mine
            del self._written[key]  # the watch has caught up
        if watched is None:
            self.misses += 1
        else:
            self.hits += 1
        return watched

    def note(self, obj: dict[str, Any] | None) -> None:
        """Remember a Job the apiserver returned (a write's result, a GET)."""
        if not obj:
            return
        obj = _slim(obj)
        key = workload_key(obj)
        current = self.get(key)
        if current is not None and revision(current) >= revision(obj) >= 0:
            return
        self._written.pop(key, None)
        self._written[key] = obj
        while len(self._written) > MAX_OVERLAY:
            del self._written[next(iter(self._written))]
        self._wake(key)

    def __len__(self) -> int:
        return len(self._watcher.known) if self._watcher is not None else 0

    async def wait_change(self, key: str, timeout: float) -> bool:
        """Until the watch (or a write) shows Job ``key`` changed; False on timeout."""
        event = self._waiters.setdefault(key, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            if self._waiters.get(key) is event:
                del self._waiters[key]

    def _wake(self, key: str) -> None:
        event = self._waiters.get(key)
        if event is not None:
            event.set()

    # ------------------------------------------------------------------ the watch

    async def run(self) -> None:
        if self._api is None:
            return
        backoff = 0.5
        while True:
            watcher = Watcher(self._api, self.resource)
            promote = asyncio.create_task(self._promote(watcher))
            try:
                async for change in watcher.changes():
                    backoff = 0.5
                    key = workload_key(change.object)
                    if change.type == "DELETE":
                        self._written.pop(key, None)
                    self._wake(key)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any failure: list and watch again
                kind = self.resource.kind
                log.warning("%s list/watch failed (%s); retrying in %.1fs", kind, err, backoff)
                await asyncio.sleep(backoff)
                # a missing CRD (a training kind's) is looked for again, not hammered
                backoff = min(backoff * 2, 5.0 if kind == "Job" else 60.0)
            finally:
                promote.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await promote

    async def _promote(self, watcher: Watcher) -> None:
        # The Watcher fills ``known`` and then sets ``resource_version`` in one
        # step of its first list, before yielding anything.
        while watcher.resource_version is None:
            await asyncio.sleep(0.02)
        self._watcher = watcher
        if not self.synced.is_set():
            log.info(
                "%s cache synced: %d objects (%s)",
                self.resource.kind,
                len(watcher.known),
                self.resource.label_selector,
            )
        self.synced.set()
        for key in list(self._waiters):
            self._wake(key)
