"""Admission fair sharing: the actuator writes each sampled LocalQueue's
``status.fairSharing`` as Kueue does (``admissionFairSharingStatus``:
``consumedResources``, ``lastUpdate``), from the fold's LocalQueueUsage
decisions, only when it changed; ``kuota status`` gets the order in Redis."""

from __future__ import annotations

import json
from typing import Any

from builders import manifests as m
from builders.driver import Driver
from prometheus_client import CollectorRegistry
from test_actuator_quota_view import FakeMirror, FakeRedis
from test_actuator_shell import FakeKube

from kuota.status.model import ClusterQueueReadModel
from kuota_actuator.kubeapi import ApiError
from kuota_actuator.metrics import ActuatorMetrics
from kuota_actuator.status import LQ_KIND, StatusWriter

HOUR = 3600.0


def lq_path(ns: str, name: str = "lq") -> str:
    return LQ_KIND.path(ns, name)


def stored_lq(ns: str) -> dict[str, Any]:
    obj = m.local_queue("lq", namespace=ns, cluster_queue="shared", resource_version="1")
    return obj


def fold_decisions() -> Driver:
    cq = m.cluster_queue("shared", quotas={"cpu": 2}, flavor="default")
    cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    d = Driver()
    d.apply(
        m.configuration(admissionFairSharing={"usageHalfLifeTime": "1h"}),
        m.flavor("default"),
        cq,
        m.local_queue("lq", namespace="team-a", cluster_queue="shared"),
        m.local_queue("lq", namespace="team-b", cluster_queue="shared"),
        at=0.0,
    )
    d.apply(m.job("x", namespace="team-a", requests={"cpu": 2}, created=1.0), at=1.0)
    d.tick(at=HOUR)
    return d


async def test_local_queue_status_is_kueues_fair_sharing() -> None:
    kube, redis, model = FakeKube(), FakeRedis(), ClusterQueueReadModel()
    for ns in ("team-a", "team-b"):
        kube.objects[lq_path(ns)] = stored_lq(ns)
    writer = StatusWriter(
        kube,
        redis,  # type: ignore[arg-type]
        model,
        FakeMirror(),  # type: ignore[arg-type]
        ActuatorMetrics(CollectorRegistry()),
        clock=lambda: 1000.0,
    )
    for d in fold_decisions().decisions:
        model.apply(d)
    await writer.sync_once()
    fair = kube.objects[lq_path("team-a")]["status"]["fairSharing"]
    assert fair["weightedShare"] == 0
    status = fair["admissionFairSharingStatus"]
    assert status["consumedResources"]["cpu"].endswith("m")
    assert status["lastUpdate"] == "1970-01-01T01:00:00Z"  # the sample's event time
    assert kube.objects[lq_path("team-b")]["status"]["fairSharing"][
        "admissionFairSharingStatus"
    ] == {"consumedResources": {}, "lastUpdate": "1970-01-01T01:00:00Z"}
    # the ClusterQueue's Redis document lists the LocalQueues in their order
    doc = json.loads(redis.hash["shared"])
    assert [e["localQueue"] for e in doc["admissionFairSharing"]] == ["team-b/lq", "team-a/lq"]
    # nothing changed: nothing written again
    before = kube.objects[lq_path("team-a")]["metadata"]["resourceVersion"]
    assert await writer.sync_once() == 0
    assert kube.objects[lq_path("team-a")]["metadata"]["resourceVersion"] == before


async def test_a_failed_write_is_tried_again_and_a_gone_queue_is_not() -> None:
    kube, model = FakeKube(), ClusterQueueReadModel()
    kube.objects[lq_path("team-a")] = stored_lq("team-a")
    writer = StatusWriter(
        kube,
        None,
        model,
        FakeMirror(),  # type: ignore[arg-type]
        ActuatorMetrics(CollectorRegistry()),
    )
    for d in fold_decisions().decisions:
        model.apply(d)
    kube.patch_failures = [ApiError(500, "boom"), ApiError(404, "gone")]
    await writer.sync_once()  # team-a: 500, team-b: 404
    assert "status" not in kube.objects[lq_path("team-a")]
    await writer.sync_once()  # team-a again; team-b (gone) not
    assert "fairSharing" in kube.objects[lq_path("team-a")]["status"]
    assert kube.patch_failures == []
