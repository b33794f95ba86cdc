"""``kuota status`` rendering from the read-model documents the actuator writes."""

from __future__ import annotations

import json
from typing import Any

from audit_builders import busy_journal, fold_all
from rich.console import Console

from kuota.audit.render import status_tables
from kuota.audit.status import cohort_totals, parse_status, redis_key, status_dict
from kuota.status.model import ClusterQueueReadModel, statuses


def actuator_hash(*, updated_at: float = 1000.0) -> dict[bytes, bytes]:
    """The Redis hash as kuota_actuator.status.StatusWriter writes it."""
    model = ClusterQueueReadModel()
    for d in fold_all(busy_journal().records()):
        model.apply(d)
    out: dict[bytes, bytes] = {}
    for name, status in statuses(model).items():
        # Without the optional cohort/quota fields (the actuator adds them from
        # QuotaChanged decisions): how a document without them reads.
        doc = {"name": name, **status, "pendingByStatus": model.pending(name)}
        out[name.encode()] = json.dumps({**doc, "updated_at": updated_at}).encode()
    return out


def text(renderable: Any) -> str:
    console = Console(record=True, width=200)
    console.print(renderable)
    return console.export_text()


def test_rows_from_the_actuator_documents() -> None:
    (q,) = parse_status(actuator_hash())
    assert (q.name, q.admitted, q.pending) == ("cq-gpu", 4, 3)
    assert q.pending_by_status == (("inadmissible", 3),)
    (r,) = q.resources
    assert (r.flavor, r.resource, r.usage, r.borrowed) == ("gpu-a", "nvidia.com/gpu", 4000, 0)
    assert r.nominal is None, "the actuator's documents do not carry nominal quota (yet)"
    out = text(status_tables([q]))
    assert "cq-gpu" in out and "gpu-a/nvidia.com/gpu" in out
    assert "3 (inadmissible 3)" in out
    assert "?" in out, "an unknown nominal is shown as unknown, not as 0"


def test_optional_cohort_and_quota_fields_are_shown() -> None:
    def doc(name: str, total: str, borrowed: str, nominal: str, limit: str | None) -> str:
        return json.dumps(
            {
                "name": name,
                "cohort": "pool",
                "admittedWorkloads": 2,
                "pendingWorkloads": 1,
                "pendingByStatus": {"active": 1},
                "flavorsUsage": [
                    {
                        "name": "h100",
                        "resources": [
                            {"name": "nvidia.com/gpu", "total": total, "borrowed": borrowed}
                        ],
                    }
                ],
                "quota": [
                    {
                        "flavor": "h100",
                        "resource": "nvidia.com/gpu",
                        "nominalQuota": nominal,
                        "borrowingLimit": limit,
                        "lendingLimit": None,
                    }
                ],
                "updated_at": 990.0,
            }
        )

    queues = parse_status(
        {"cq-a": doc("cq-a", "6", "2", "4", "4"), "cq-b": doc("cq-b", "1", "0", "8", None)}
    )
    assert [q.cohort for q in queues] == ["pool", "pool"]
    r = queues[0].resources[0]
    assert (r.usage, r.nominal, r.borrowing_limit, r.lending_limit) == (6000, 4000, 4000, None)
    assert queues[1].resources[0].borrowing_limit is None
    assert cohort_totals(queues) == {"pool": {("h100", "nvidia.com/gpu"): 7000}}
    out = text(status_tables(queues))
    assert "4 (+4)" in out and "Cohorts" in out and "cq-a, cq-b" in out
    summary = status_dict(queues, key="k", now=1000.0, actuator_lag=0)
    assert summary["last_change_age_s"] == 10.0 and summary["actuator_lag"] == 0
    assert summary["cohorts"] == {
        "pool": [{"flavor": "h100", "resource": "nvidia.com/gpu", "usage": "7"}]
    }
    assert summary["cluster_queues"][0]["resources"][0]["borrowed"] == "2"
    assert summary["cluster_queues"][0]["resources"][0]["nominal"] == "4"


def test_an_unreadable_document_is_shown_not_fatal() -> None:
    queues = parse_status({b"broken": b"{not json", **actuator_hash()})
    assert [q.name for q in queues] == ["broken", "cq-gpu"]
    assert queues[0].problem is not None
    assert "unreadable" in text(status_tables(queues))


def test_the_key_follows_the_instance() -> None:
    assert redis_key("kuota") == "kuota:status:clusterqueues"
    assert redis_key("test-abc") == "test-abc:status:clusterqueues"
