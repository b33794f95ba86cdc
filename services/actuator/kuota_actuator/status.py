"""ClusterQueue status from the read model: the ``/status`` subresource and Redis.

Every ``interval`` seconds, the writer computes Kueue's status fields for
every ClusterQueue (``kuota.status.model``), compares them with what the
apiserver has (the ClusterQueue mirror, kept by a watch) and merge-patches
``/status`` only where they differ, so an idle system writes nothing and a
status clobbered by someone else is put back. The same documents, with an
``updated_at``, go to the Redis hash ``<instance>:status:clusterqueues`` (one
JSON field per ClusterQueue) for ``kuota status``, again only when they changed.

Quota, usage and borrowing come from the decisions alone (the read model's
``QuotaChanged``, ``Admitted`` ...): the watched ClusterQueues say only which
objects exist and what their ``/status`` shows now, never which quota is in
force (docs/design/quota-view.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from kuota import kinds
from kuota.core.quota.rows import quota_fields
from kuota.status.model import ClusterQueueReadModel, statuses
from kuota_actuator.kubeapi import ApiError, Kube, Mirror
from kuota_actuator.metrics import ActuatorMetrics

log = logging.getLogger("kuota.actuator")

REDIS_KEY = "kuota:status:clusterqueues"
CQ_PATH = kinds.get("ClusterQueue").path()
LQ_KIND = kinds.get("LocalQueue")
_DEFAULTS: dict[str, Any] = {
    "pendingWorkloads": 0,
    "reservingWorkloads": 0,
    "admittedWorkloads": 0,
    "flavorsReservation": [],
    "flavorsUsage": [],
}


def _observed(obj: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    return {k: status.get(k) if status.get(k) is not None else _DEFAULTS.get(k) for k in fields}


class StatusWriter:
    def __init__(
        self,
        kube: Kube,
        redis: aioredis.Redis | None,
        model: ClusterQueueReadModel,
        cluster_queues: Mirror,
        metrics: ActuatorMetrics,
        *,
        redis_key: str = REDIS_KEY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kube = kube
        self.redis = redis
        self.model = model
        self.mirror = cluster_queues
        self.metrics = metrics
        self.redis_key = redis_key
        self._clock = clock
        self._sent: dict[str, tuple[str, str]] = {}  # cq -> (status JSON, resourceVersion seen)
        self._in_redis: dict[str, str] = {}  # cq -> document JSON without updated_at
        self._lq_sent: dict[str, str] = {}  # "ns/name" -> fairSharing JSON patched

    async def sync_once(self) -> int:
        """Write what changed; returns how many writes were made."""
        objects = self.mirror.objects
        desired = statuses(self.model)
        writes = 0
        for name, obj in sorted(objects.items()):
            want = desired.get(name)
            if want is None:
                want = self.model.status(name)  # no decision yet: zeros, as Kueue starts
            if _observed(obj, want) == want:
                self._sent.pop(name, None)
                continue
            rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            key = (json.dumps(want, sort_keys=True), rv)
            if self._sent.get(name) == key:
                continue  # patched already; the watch has not shown it yet
            try:
                await self.kube.merge_patch(f"{CQ_PATH}/{name}/status", {"status": want})
                self._sent[name] = key
                writes += 1
                self.metrics.status_writes.labels("apiserver", "ok").inc()
                log.info(
                    "ClusterQueue %s status: pending %d, admitted %d",
                    name,
                    want["pendingWorkloads"],
                    want["admittedWorkloads"],
                )
            except ApiError as err:
                self.metrics.status_writes.labels("apiserver", "error").inc()
                log.warning("ClusterQueue %s: status not written: %s", name, err)
        writes += await self._write_local_queues()
        writes += await self._write_redis(desired)
        self.metrics.refresh(self.model)
        return writes

    async def _write_local_queues(self) -> int:
        """Admission fair sharing: each sampled LocalQueue's ``status.fairSharing``,
        patched when it changed (a LocalQueue deleted meanwhile is skipped)."""
        writes = 0
        for key, fair in self.model.local_queue_statuses().items():
            text = json.dumps(fair, sort_keys=True)
            if self._lq_sent.get(key) == text:
                continue
            namespace, _, name = key.partition("/")
            try:
                await self.kube.merge_patch(
                    f"{LQ_KIND.path(namespace, name)}/status", {"status": {"fairSharing": fair}}
                )
                writes += 1
                self.metrics.status_writes.labels("apiserver", "ok").inc()
            except ApiError as err:
                self.metrics.status_writes.labels("apiserver", "error").inc()
                log.warning("LocalQueue %s: status not written: %s", key, err)
                if err.status != 404:
                    continue  # tried again next time
            self._lq_sent[key] = text
        return writes

    async def _write_redis(self, desired: dict[str, dict[str, Any]]) -> int:
        if self.redis is None:
            return 0
        changed: dict[str, str] = {}
        docs: dict[str, str] = {}
        for name, status in desired.items():
            doc = {"name": name, **status, "pendingByStatus": self.model.pending(name)}
            rows = self.model.quota(name)
            if rows is not None:  # for `kuota status`: Redis only, not the Kubernetes status
                doc["cohort"] = self.model.cohort(name)
                doc["quota"] = [quota_fields(r) for r in rows]  # the ClusterQueue's order
            fair = self.model.local_queues(name)
            if fair:  # admission fair sharing, in the order the LocalQueues go
                doc["admissionFairSharing"] = [
                    {"localQueue": lq, "weightedUsage": usage, "consumedResources": consumed}
                    for lq, usage, consumed in fair
                ]
            text = json.dumps(doc, sort_keys=True)
            docs[name] = text
            if self._in_redis.get(name) != text:
                changed[name] = json.dumps({**doc, "updated_at": self._clock()}, sort_keys=True)
        gone = sorted(set(self._in_redis) - set(docs))
        if not changed and not gone:
            return 0
        try:
            if changed:
                await self.redis.hset(self.redis_key, mapping=changed)  # type: ignore[misc]
            if gone:
                await self.redis.hdel(self.redis_key, *gone)  # type: ignore[misc]
        except (RedisError, OSError) as err:
            self.metrics.status_writes.labels("redis", "error").inc()
            log.warning("Redis %s not written: %s", self.redis_key, err)
            return 0
        for name in changed:
            self._in_redis[name] = docs[name]
        for name in gone:
            self._in_redis.pop(name, None)
        self.metrics.status_writes.labels("redis", "ok").inc()
        return len(changed) + len(gone)

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        while not stop.is_set():
            try:
                await self.sync_once()
            except Exception as err:  # never let status writing stop actuation
                log.warning("status sync failed: %s", err)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
