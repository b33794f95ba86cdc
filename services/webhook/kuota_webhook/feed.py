"""The webhook's own watches, feeding its ``ClusterView``: Namespaces, Jobs, the Configuration.

Theory of operation: one list+watch (``kuota.kube.watch.Watcher``) per input
(every Namespace; every Job, narrowed by ``KUOTA_JOB_LABEL_SELECTOR``; the
Configuration ConfigMap's namespace, of which only the named one is kept) hands
each change to ``ClusterView.observe``; a Configuration file is read again
whenever its content changes. The watcher's copy of each object is cut down
to the metadata the view and the relist read (name, namespace, uid, labels,
resourceVersion), so the webhook holds no Job specs. An unlabelled Job in a
system namespace is never kuota's and is not kept. A watch that fails is
retried with a backoff, forever: the webhook keeps answering meanwhile. Once
every input has been read once, ``complete`` marks the view complete (the
webhook then answers "not managed", and reports ready). Nothing here needs
Kafka or Redis.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from kuota import kinds
from kuota.kinds import QUEUE_NAME_LABEL, SYSTEM_NAMESPACES
from kuota.kube.cluster_view import ClusterView
from kuota.kube.translate import config_file_object
from kuota.kube.watch import Resource, Watcher
from kuota_webhook import metrics

log = logging.getLogger("kuota_webhook.feed")

_KEPT = ("name", "namespace", "uid", "labels", "resourceVersion")


@dataclass(frozen=True, slots=True)
class Input:
    resource: Resource
    only_name: str | None = None  # keep only this object (the Configuration ConfigMap)


def inputs(job_selector: str | None, config_map: tuple[str, str] | None) -> list[Input]:
    out = [
        Input(Resource("Namespace", kinds.get("Namespace").path())),
        Input(Resource("Job", kinds.get("Job").path(), label_selector=job_selector)),
    ]
    if config_map is not None:
        ns, name = config_map
        out.append(Input(Resource("ConfigMap", kinds.get("ConfigMap").path(ns)), name))
    return out


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What the watcher keeps of an object: the metadata the view and a relist read."""
    md = obj.get("metadata")
    md = md if isinstance(md, dict) else {}
    return {"kind": obj.get("kind"), "metadata": {k: md[k] for k in _KEPT if k in md}}


def _system_unlabelled_job(kind: str, obj: dict[str, Any]) -> bool:
    if kind != "Job":
        return False
    md = obj.get("metadata")
    md = md if isinstance(md, dict) else {}
    labels = md.get("labels")
    labelled = isinstance(labels, dict) and bool(labels.get(QUEUE_NAME_LABEL))
    return not labelled and md.get("namespace") in SYSTEM_NAMESPACES


class Feed:
    def __init__(
        self,
        api: ApiClient,
        view: ClusterView,
        *,
        job_selector: str | None = None,
        config_map: tuple[str, str] | None = None,
        config_file: str | None = None,
    ) -> None:
        self._api = api
        self.view = view
        self.inputs = inputs(job_selector, config_map)
        self.config_file_path = config_file
        self.config_file_read = False
        self._watchers: dict[str, Watcher] = {}

    def listed(self, kind: str) -> bool:
        w = self._watchers.get(kind)
        return w is not None and w.relists >= 1

    def inputs_read(self) -> bool:
        return all(self.listed(i.resource.kind) for i in self.inputs) and (
            self.config_file_read or self.config_file_path is None
        )

    def sizes(self) -> dict[str, int]:
        return {kind: len(w.known) for kind, w in self._watchers.items()}

    def tasks(self) -> list[asyncio.Task[None]]:
        out = [
            asyncio.create_task(self.watch(i), name=f"watch {i.resource.kind}") for i in self.inputs
        ]
        if self.config_file_path is not None:
            out.append(
                asyncio.create_task(self.config_file(self.config_file_path), name="config file")
            )
        return out

    async def complete(self, period: float = 0.05) -> None:
        while not self.inputs_read():
            await asyncio.sleep(period)
        self.view.mark_complete()
        metrics.VIEW_COMPLETE.set(1)

    async def watch(self, inp: Input) -> None:
        """List+watch one input forever; a failure is retried with a backoff."""
        kind = inp.resource.kind
        backoff = 1.0
        while True:
            w = Watcher(self._api, inp.resource)
            self._watchers[kind] = w
            try:
                async for change in w.changes():
                    backoff = 1.0
                    metrics.WATCH_UP.labels(kind).set(1)
                    self.observe(w, inp, change.type, change.object)
            except asyncio.CancelledError:
                raise
            except ApiException as e:
                log.warning(
                    "%s: list failed (HTTP %s %s); retrying in %.0fs",
                    kind,
                    e.status,
                    (e.reason or "").strip()[:200],
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
            metrics.WATCH_UP.labels(kind).set(0)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def observe(self, w: Watcher, inp: Input, change_type: str, obj: dict[str, Any]) -> None:
        md = obj.get("metadata")
        md = md if isinstance(md, dict) else {}
        key = (md.get("namespace") or "", md.get("name") or "")
        if change_type != "DELETE" and key in w.known:
            w.known[key] = slim(obj)
        if inp.only_name is not None and md.get("name") != inp.only_name:
            return
        kind = inp.resource.kind
        if _system_unlabelled_job(kind, obj):
            w.known.pop(key, None)  # never kuota's: not kept (a relist reports it again)
            return
        self.view.observe(kind, change_type, obj)

    async def config_file(self, path: str, *, poll_seconds: float = 2.0) -> None:
        """Read the Configuration file now and whenever its content changes."""
        last: str | None = None
        while True:
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except OSError as e:
                if last != "unreadable":
                    log.warning("KUOTA_CONFIG_FILE=%s: %s; keeping the last one", path, e)
                last = "unreadable"
            else:
                digest = hashlib.sha256(raw).hexdigest()
                if digest != last:
                    last = digest
                    obj = config_file_object(raw.decode(errors="replace"))
                    if isinstance(obj, str):
                        log.warning("KUOTA_CONFIG_FILE=%s: %s; keeping the last one", path, obj)
                    else:
                        self.view.observe(str(obj["kind"]), "UPSERT", obj)
            self.config_file_read = True
            await asyncio.sleep(poll_seconds)


LIST_TIMEOUT = 5.0  # seconds for one namespace's Jobs; the registration waits 10


async def namespace_jobs(api: ApiClient, namespace: str) -> list[dict[str, Any]] | str:
    """Every Job of ``namespace``, read now from the apiserver (a quorum list, paged),
    or why not. The template guard's read: the view keeps no specs and may lag
    the actuator's unsuspension of a Job."""
    lister = Watcher(api, Resource("Job", kinds.get("Job").path(namespace)))
    try:
        async with asyncio.timeout(LIST_TIMEOUT):
            return await lister.list_once()
    except TimeoutError:
        return f"no answer in {LIST_TIMEOUT:g}s"
    except ApiException as e:
        return f"HTTP {e.status}: {str(e.reason)[:200]}"
    except (aiohttp.ClientError, OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
