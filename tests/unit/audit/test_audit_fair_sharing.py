"""Admission fair sharing in ``kuota explain`` and ``kuota status``: each
LocalQueue's usage and the order it gives, from the re-folded journal
(explain) and from the LocalQueueUsage decisions (the actuator's read model)."""

from __future__ import annotations

import json
from typing import Any

from audit_builders import fold_all, records
from builders import manifests as m
from builders.driver import Driver
from rich.console import Console

from kuota.audit.explain import Explainer, relevant
from kuota.audit.render import explanation, status_tables
from kuota.audit.status import parse_status, queue_fields
from kuota.status.model import ClusterQueueReadModel, statuses

HOUR = 3600.0


def text(renderable: Any) -> str:
    console = Console(record=True, width=200)
    console.print(renderable)
    return console.export_text()


def journal() -> Driver:
    """team-a used the fair ClusterQueue for an hour; both teams then wait."""
    cq = m.cluster_queue("shared", quotas={"cpu": 2}, flavor="default")
    cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    d = Driver()
    d.apply(
        m.configuration(
            admissionFairSharing={"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m"}
        ),
        m.flavor("default"),
        cq,
        m.local_queue("lq", namespace="team-a", cluster_queue="shared"),
        m.local_queue("lq", namespace="team-b", cluster_queue="shared"),
        at=0.0,
    )
    d.apply(m.job("old", namespace="team-a", requests={"cpu": 2}, created=1.0), at=1.0)
    d.apply(m.job("a2", namespace="team-a", requests={"cpu": 1}, created=2.0), at=2.0)
    d.apply(m.job("b2", namespace="team-b", requests={"cpu": 1}, created=3.0), at=3.0)
    d.tick(at=HOUR)
    return d


def test_explain_shows_the_local_queues_usage_and_their_order() -> None:
    recs = records(journal().events)
    ds = fold_all(recs)
    ex = Explainer("team-a/a2", relevant("team-a/a2", ds))
    for r in recs:
        ex.event(r)
    w = ex.explain().waiting
    assert w is not None
    assert [name for name, _, _ in w.fair_sharing] == ["team-b/lq", "team-a/lq"]
    assert w.fair_sharing[0][1] == 0.0 < w.fair_sharing[1][1]
    # team-b's is tried first though team-a's is older
    assert (w.position, w.ahead) == (1, ("team-b/b2",))
    out = text(explanation(ex.explain()))
    assert "admission fair sharing (lowest usage first): team-b/lq 0.000, team-a/lq" in out
    as_json = ex.explain().to_dict()["waiting"]["admission_fair_sharing"]
    assert [e["local_queue"] for e in as_json] == ["team-b/lq", "team-a/lq"]


def test_status_shows_the_sampled_usage_in_order() -> None:
    model = ClusterQueueReadModel()
    for d in journal().decisions:
        model.apply(d)
    rows = model.local_queues("shared")
    assert [name for name, _, _ in rows] == ["team-b/lq", "team-a/lq"]
    assert rows[1][2]["cpu"].endswith("m") and rows[0][2] == {}
    # the document the actuator writes to Redis, read back by `kuota status`
    doc = {
        "name": "shared",
        **statuses(model)["shared"],
        "admissionFairSharing": [
            {"localQueue": n, "weightedUsage": u, "consumedResources": c} for n, u, c in rows
        ],
    }
    (q,) = parse_status({b"shared": json.dumps(doc).encode()})
    assert [lq for lq, _, _ in q.local_queues] == ["team-b/lq", "team-a/lq"]
    out = text(status_tables([q]))
    assert "Admission fair sharing" in out and "team-a/lq" in out
    assert queue_fields(q)["admission_fair_sharing"][0]["local_queue"] == "team-b/lq"


def test_weight_zero_is_last_and_shown_as_such() -> None:
    model = ClusterQueueReadModel()
    d = Driver()
    cq = m.cluster_queue("shared", quotas={"cpu": 2}, flavor="default")
    cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    zero = m.local_queue("zero", namespace="team-z", cluster_queue="shared")
    zero["spec"]["fairSharing"] = {"weight": "0"}
    d.apply(
        m.configuration(admissionFairSharing={"usageHalfLifeTime": "1h"}),
        m.flavor("default"),
        cq,
        zero,
        m.local_queue("lq", namespace="team-a", cluster_queue="shared"),
        at=0.0,
    )
    d.tick(at=HOUR)
    for x in d.decisions:
        model.apply(x)
    rows = model.local_queues("shared")
    assert [(n, u) for n, u, _ in rows] == [("team-a/lq", 0.0), ("team-z/zero", None)]
