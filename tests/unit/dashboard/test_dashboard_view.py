"""The dashboard's view model: bars in GiB and counts, cohorts, reasons, positions."""

from __future__ import annotations

import json

from kuota.audit.status import parse_status
from kuota.dashboard.view import (
    Reasons,
    cohort_views,
    decision_view,
    display,
    pending_views,
    queue_views,
)
from kuota.events.schema import Decision


def _doc(
    name: str, cohort: str | None, usage: list[tuple[str, str, str]], quota: list[dict[str, str]]
) -> str:
    flavors: dict[str, list[dict[str, str]]] = {}
    for flavor, resource, total in usage:
        flavors.setdefault(flavor, []).append({"name": resource, "total": total})
    return json.dumps(
        {
            "name": name,
            "cohort": cohort,
            "admittedWorkloads": 2,
            "pendingWorkloads": 1,
            "pendingByStatus": {"inadmissible": 1},
            "flavorsUsage": [{"name": f, "resources": rs} for f, rs in flavors.items()],
            "quota": quota,
            "updated_at": 100.0,
        }
    )


RAW = {
    b"training": _doc(
        "training",
        "pool",
        [("h100", "gpu-memory", "100Gi"), ("h100", "whole-gpus", "3")],
        [
            {
                "flavor": "h100",
                "resource": "gpu-memory",
                "nominalQuota": "80Gi",
                "borrowingLimit": "40Gi",
            },
            {"flavor": "h100", "resource": "whole-gpus", "nominalQuota": "4"},
        ],
    ),
    b"inference": _doc(
        "inference",
        "pool",
        [("h100", "gpu-memory", "20Gi")],
        [{"flavor": "h100", "resource": "gpu-memory", "nominalQuota": "80Gi"}],
    ),
    b"broken": b"{not json",
}


def test_memory_is_shown_in_gib_and_devices_as_counts() -> None:
    assert display("gpu-memory", 80 * 1024**3 * 1000) == 80.0
    assert display("nvidia.com/gpu", 3000) == 3.0
    assert display("whole-gpus", 1500) == 1.5
    assert display("whole-gpus", None) is None


def test_queue_bars_carry_usage_nominal_and_the_borrowing_limit() -> None:
    views = {v["name"]: v for v in queue_views(parse_status(RAW))}
    memory, gpus = views["training"]["bars"]
    assert memory == {
        "flavor": "h100",
        "resource": "gpu-memory",
        "unit": "GiB",
        "usage": 100.0,
        "nominal": 80.0,
        "borrowing_limit": 40.0,
        "limit": 120.0,
        "borrowed": 20.0,
    }
    assert (gpus["unit"], gpus["usage"], gpus["nominal"], gpus["limit"]) == (
        "count",
        3.0,
        4.0,
        None,
    )
    assert gpus["borrowed"] == 0.0
    assert views["training"]["cohort"] == "pool"
    assert views["training"]["pending_by_status"] == {"inadmissible": 1}
    # An unreadable document is a row with its problem, not an error.
    assert views["broken"]["problem"] and views["broken"]["bars"] == []


def test_a_cohort_sums_its_members() -> None:
    (pool,) = cohort_views(parse_status(RAW))
    assert pool["name"] == "pool"
    assert pool["members"] == ["inference", "training"]
    by = {(b["flavor"], b["resource"]): b for b in pool["bars"]}
    assert by[("h100", "gpu-memory")]["usage"] == 120.0
    assert by[("h100", "gpu-memory")]["nominal"] == 160.0
    assert by[("h100", "whole-gpus")]["nominal"] == 4.0


def _d(type_: str, workload: str, **kw: object) -> Decision:
    return Decision(
        id=f"{type_}-{workload}", cause="c", at=1.0, type=type_, workload=workload, **kw
    )  # type: ignore[arg-type]


def test_reasons_keep_the_last_inadmissible_until_admitted() -> None:
    r = Reasons()
    r.apply(_d("Inadmissible", "ns/a", reason="QuotaExceeded", message="first"))
    r.apply(_d("Inadmissible", "ns/a", reason="BorrowingLimitReached", message="second"))
    r.apply(_d("Inadmissible", "ns/b", reason="QuotaExceeded"))
    assert r.last["ns/a"].message == "second"
    r.apply(_d("Admitted", "ns/a", cluster_queue="cq"))
    assert set(r.last) == {"ns/b"}
    r.apply(_d("Finished", "ns/b"))
    assert r.last == {}


def test_pending_rows_have_1_based_positions_and_reasons() -> None:
    r = Reasons()
    r.apply(_d("Inadmissible", "team/b", reason="QuotaExceeded", message="needs 1 GPU"))
    rows = pending_views([("cq", [("team/a", "lq"), ("team/b", "lq")]), ("other", [])], r)
    assert [(x["workload"], x["position"], x["queued"], x["reason"]) for x in rows] == [
        ("team/a", 1, 2, None),
        ("team/b", 2, 2, "QuotaExceeded"),
    ]
    assert rows[1]["namespace"] == "team" and rows[1]["message"] == "needs 1 GPU"


def test_a_decision_line() -> None:
    v = decision_view(_d("Admitted", "ns/a", cluster_queue="cq", usage={"f": {"r": "1"}}), 7)
    assert v["offset"] == 7 and v["type"] == "Admitted" and v["cluster_queue"] == "cq"
    assert v["usage"] == {"f": {"r": "1"}}
