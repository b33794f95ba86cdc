"""One view of quota: ClusterQueue status and the Redis read model follow the
fold's own QuotaChanged decisions, never a second reading of the live object
(docs/design/quota-view.md)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from builders.journal import journaled_job, upserted
from builders.manifests import GPU, cluster_queue, flavor, local_queue
from prometheus_client import CollectorRegistry
from test_actuator_shell import FakeKube

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, JournalEvent, ObjectDeleted, WorkloadFinished
from kuota.status.model import ClusterQueueReadModel
from kuota_actuator.metrics import ActuatorMetrics
from kuota_actuator.status import CQ_PATH, StatusWriter

NS = "team"


def cq(gpus: Any, rv: int, *, borrowing: int | None = None, **spec: Any) -> dict[str, Any]:
    """ClusterQueue ``cq`` in cohort ``pool`` at resourceVersion ``rv``."""
    m = cluster_queue("cq", gpus=(gpus, borrowing), cohort="pool", resource_version=str(rv))
    m["spec"].update(spec)
    return m


FLAVOR = flavor("h100", resource_version="1")
LOCAL_QUEUE = local_queue("lq", namespace=NS, cluster_queue="cq", resource_version="1")


def job(name: str, created: float) -> dict[str, Any]:
    return journaled_job(name, namespace=NS, gpus=1, created=created)


class Journal:
    """A Fold fed one event at a time; every decision kept, in order."""

    def __init__(self) -> None:
        self.fold = Fold()
        self.decisions: list[Decision] = []
        self.t = 0.0

    def feed(self, event: JournalEvent) -> list[Decision]:
        out = self.fold.apply(event)
        self.decisions += out
        return out

    def upsert(self, obj: dict[str, Any]) -> list[Decision]:
        self.t += 1
        return self.feed(upserted(copy.deepcopy(obj), self.t))

    def finish(self, name: str) -> list[Decision]:
        self.t += 1
        return self.feed(WorkloadFinished(id=f"fin/{name}", at=self.t, namespace=NS, name=name))


def setup(gpus: int) -> Journal:
    j = Journal()
    for obj in (FLAVOR, cq(gpus, 1), LOCAL_QUEUE):
        j.upsert(obj)
    for n in range(3):
        j.upsert(job(f"j{n}", float(n)))
    return j


def fold_view(fold: Fold) -> dict[str, Any]:
    """What the fold's own summary says of each ClusterQueue's quota and usage."""
    return {
        s.name: (
            s.cohort,
            [
                (r.flavor, r.resource, r.nominal, r.borrowing_limit, r.lending_limit)
                for r in s.resources
            ],
            {(r.flavor, r.resource): r.usage for r in s.resources if r.usage},
        )
        for s in fold.summary()
    }


def model_view(model: ClusterQueueReadModel) -> dict[str, Any]:
    return {
        name: (
            model.cohort(name),
            [
                (r.flavor, r.resource, r.nominal, r.borrowing_limit, r.lending_limit)
                for r in model.quota(name) or ()
            ],
            model.usage(name),
        )
        for name in model.cluster_queues()
        if model.quota(name) is not None
    }


# --------------------------------------------------------------------------- the decision


def test_the_fold_announces_each_quota_version_before_what_it_causes() -> None:
    j = Journal()
    j.upsert(FLAVOR)
    (created,) = j.upsert(cq(1, 1, borrowing=2))
    assert (created.type, created.cluster_queue, created.object) == (
        "QuotaChanged",
        "cq",
        "ClusterQueue cq",
    )
    assert created.workload is None and created.cohort == "pool"
    assert created.quota == {"h100": {GPU: {"nominalQuota": "1", "borrowingLimit": "2"}}}
    j.upsert(LOCAL_QUEUE)
    j.upsert(job("a", 0.0))
    j.upsert(job("b", 1.0))  # waits for quota
    raised = j.upsert(cq(2, 2, borrowing=2))
    assert [(d.type, d.workload) for d in raised] == [
        ("QuotaChanged", None),
        ("Admitted", f"{NS}/b"),
    ], "the quota first: a reader charges the admission against it"
    assert raised[0].quota == {"h100": {GPU: {"nominalQuota": "2", "borrowingLimit": "2"}}}
    # A change that leaves quota and cohort alone says nothing.
    assert j.upsert(cq(2, 3, borrowing=2, queueingStrategy="StrictFIFO")) == []
    # An invalid edit is Rejected; the version in force stays (no QuotaChanged).
    (rejected,) = j.upsert(cq("lots", 4))
    assert rejected.type == "Rejected"
    j.t += 1
    (gone,) = j.feed(ObjectDeleted(id="del/cq", at=j.t, kind="ClusterQueue", name="cq"))
    assert (gone.type, gone.reason, gone.quota) == ("QuotaChanged", "Deleted", None)


def test_the_read_model_holds_the_folds_quota_and_usage_at_every_step() -> None:
    j = Journal()
    model = ClusterQueueReadModel()
    jobs = [job(f"j{n}", float(n)) for n in range(4)]
    steps: list[Any] = [FLAVOR, cq(2, 1), LOCAL_QUEUE, *jobs]
    steps += [cq(3, 2), "j0", cq(1, 3, borrowing=1), "j1"]
    steps += [cq("x", 4), cq(5, 5), "j2", "delete"]
    for step in steps:
        if step == "delete":
            j.t += 1
            out = j.feed(ObjectDeleted(id="del/cq", at=j.t, kind="ClusterQueue", name="cq"))
        elif isinstance(step, str):
            out = j.finish(step)
        else:
            out = j.upsert(step)
        for d in out:
            model.apply(d)
        assert model_view(model) == fold_view(j.fold), f"after {step!r}"
        fold_rows = {s.name: s.resources for s in j.fold.summary()}
        for name in model.cluster_queues():
            if model.quota(name) is not None:  # one row type: the very rows of the fold
                assert model.rows(name) == fold_rows[name], f"after {step!r}"
    assert "cq" not in model_view(model)
    # created, 3, 1 (+ borrowing limit), 5, deleted; the invalid "x" is Rejected
    assert [d.type for d in j.decisions].count("QuotaChanged") == 5


# --------------------------------------------------------------------------- the status writer


class FakeMirror:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}


class FakeRedis:
    def __init__(self) -> None:
        self.hash: dict[str, str] = {}

    async def hset(self, key: str, mapping: dict[str, str]) -> int:
        self.hash.update(mapping)
        return len(mapping)

    async def hdel(self, key: str, *fields: str) -> int:
        for f in fields:
            self.hash.pop(f, None)
        return len(fields)


@pytest.fixture
def rig() -> tuple[FakeKube, FakeMirror, FakeRedis, ClusterQueueReadModel, StatusWriter]:
    kube, mirror, redis, model = FakeKube(), FakeMirror(), FakeRedis(), ClusterQueueReadModel()
    writer = StatusWriter(
        kube,
        redis,  # type: ignore[arg-type]
        model,
        mirror,  # type: ignore[arg-type]
        ActuatorMetrics(CollectorRegistry()),
        clock=lambda: 1000.0,
    )
    return kube, mirror, redis, model, writer


def watched(obj: dict[str, Any], kube: FakeKube, mirror: FakeMirror) -> None:
    """The ClusterQueue as the apiserver has it now (the watch delivered it)."""
    kube.objects[f"{CQ_PATH}/cq"] = copy.deepcopy(obj)
    mirror.objects["cq"] = copy.deepcopy(obj)


def written(kube: FakeKube, redis: FakeRedis) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    usage = kube.objects[f"{CQ_PATH}/cq"]["status"]["flavorsUsage"][0]["resources"]
    return usage, json.loads(redis.hash["cq"])


async def test_status_during_a_quota_edit_follows_the_fold(rig: Any) -> None:
    kube, mirror, redis, model, writer = rig
    j = setup(gpus=4)  # three one-GPU Jobs admitted against nominal 4
    for d in j.decisions:
        model.apply(d)
    watched(cq(4, 1), kube, mirror)
    await writer.sync_once()
    usage, doc = written(kube, redis)
    assert usage == [{"name": GPU, "total": "3", "borrowed": "0"}]
    assert doc["quota"][0]["nominalQuota"] == "4" and doc["cohort"] == "pool"

    # The user lowers the quota to 2: the watch has it, the decisions not yet.
    edited = cq(2, 2)
    watched(edited, kube, mirror)
    await writer.sync_once()
    usage, doc = written(kube, redis)
    assert usage == [{"name": GPU, "total": "3", "borrowed": "0"}], "not the live object's 2"
    assert doc["quota"][0]["nominalQuota"] == "4"

    # The fold takes the edit: the admitted keep their admission, 1 is now borrowed.
    decisions = j.upsert(edited)
    assert [d.type for d in decisions] == ["QuotaChanged"]
    for d in decisions:
        model.apply(d)
    await writer.sync_once()
    usage, doc = written(kube, redis)
    assert usage == [{"name": GPU, "total": "3", "borrowed": "1"}]
    assert doc["quota"][0]["nominalQuota"] == "2"
    (summary,) = j.fold.summary()
    assert (summary.resources[0].nominal, summary.resources[0].usage) == (2000, 3000)

    # An invalid edit: the fold keeps quota 2 (Rejected); so does the status.
    broken = cq("lots", 3)
    watched(broken, kube, mirror)
    for d in j.upsert(broken):
        assert d.type == "Rejected"
        model.apply(d)
    await writer.sync_once()
    usage, doc = written(kube, redis)
    assert usage == [{"name": GPU, "total": "3", "borrowed": "1"}]
    assert doc["quota"][0]["nominalQuota"] == "2"
