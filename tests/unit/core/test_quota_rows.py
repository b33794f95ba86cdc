"""kuota.core.quota.rows: the one iterator over a quota spec, the one row type
and its wire forms and texts (docs/design/quota-rows.md)."""

from __future__ import annotations

import pytest

from kuota.api.parse import parse_object
from kuota.api.types import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    ResourceGroup,
    ResourceQuota,
)
from kuota.core.quota.rows import (
    QuotaRow,
    flavor_resources,
    nominal_text,
    quota_fields,
    quota_of,
    read_quantity,
    row_json,
    row_line,
    rows_from_quota,
    usage_fields,
)
from kuota.core.quota.tree import Limits, limits_from_groups
from kuota.quantity import format_quantity

GPU = "nvidia.com/gpu"
GI = 2**30 * 1000


def groups() -> tuple[ResourceGroup, ...]:
    return (
        ResourceGroup(
            ("cpu", "memory"),
            (
                FlavorQuotas(
                    "on-demand", (ResourceQuota("cpu", 8000), ResourceQuota("memory", 64 * GI))
                ),
                FlavorQuotas(
                    "spot", (ResourceQuota("cpu", 4000, 2000), ResourceQuota("memory", 0))
                ),
            ),
        ),
        ResourceGroup((GPU,), (FlavorQuotas("h100", (ResourceQuota(GPU, 8000, None, 2000),)),)),
    )


def test_flavor_resources_walks_the_spec_in_order() -> None:
    want = [
        ("on-demand", "cpu", 8000),
        ("on-demand", "memory", 64 * GI),
        ("spot", "cpu", 4000),
        ("spot", "memory", 0),
        ("h100", GPU, 8000),
    ]
    cq = ClusterQueue("cq", cohort="pool", resource_groups=groups())
    for source in (cq, Cohort("pool", resource_groups=groups()), groups()):
        assert [(f, r, q.nominal_quota) for f, r, q in flavor_resources(source)] == want
    assert list(flavor_resources(ClusterQueue("empty"))) == []


def test_the_tree_limits_come_from_the_same_walk() -> None:
    limits = limits_from_groups(groups())
    assert [fr for fr, _ in limits.items()] == [(f, r) for f, r, _ in flavor_resources(groups())]
    assert len(limits) == 5
    assert limits[("spot", "cpu")] == Limits(4000, 2000, None)
    assert limits[("h100", GPU)] == Limits(8000, None, 2000)


def test_the_quota_changed_wire_form_round_trips() -> None:
    manifest = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "cohortName": "pool",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", GPU],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "500m"},
                                {"name": GPU, "nominalQuota": 4, "borrowingLimit": "2"},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    cq = parse_object(manifest)
    assert isinstance(cq, ClusterQueue)
    quota = quota_of(cq)
    assert quota == {
        "h100": {"cpu": {"nominalQuota": "500m"}, GPU: {"nominalQuota": "4", "borrowingLimit": "2"}}
    }
    assert rows_from_quota("cq", quota) == (
        QuotaRow("cq", "h100", "cpu", 500),
        QuotaRow("cq", "h100", GPU, 4000, 2000),
    )


def test_unreadable_wire_quantities_never_raise() -> None:
    quota = {"f": {"cpu": {"nominalQuota": "lots", "borrowingLimit": "-1"}}}
    assert rows_from_quota("cq", quota) == (QuotaRow("cq", "f", "cpu", 0, None, None),)
    assert [read_quantity(v) for v in (None, "x", "2", 3)] == [None, None, 2000, 3000]


def test_borrowed_is_usage_beyond_a_known_nominal_quota() -> None:
    assert QuotaRow("cq", "f", "cpu", 8000, usage=12000).borrowed == 4000
    assert QuotaRow("cq", "f", "cpu", 8000, usage=3000).borrowed == 0
    assert QuotaRow("cq", "f", "cpu", None, usage=3000).borrowed == 0, "unknown: not borrowed"


def test_the_status_document_fields() -> None:
    row = QuotaRow("cq", "h100", GPU, 4000, 2000, None, usage=6000)
    assert quota_fields(row) == {
        "flavor": "h100",
        "resource": GPU,
        "nominalQuota": "4",
        "borrowingLimit": "2",
        "lendingLimit": None,
    }
    assert usage_fields(row) == {"name": GPU, "total": "6", "borrowed": "2"}
    assert row_json(row) == {
        "flavor": "h100",
        "resource": GPU,
        "usage": "6",
        "nominal": "4",
        "borrowing_limit": "2",
        "lending_limit": None,
        "borrowed": "2",
    }


# Moved from tests/unit/sim/test_sim_report.py (test_quota_text: "12/8 (+4)" and
# "0/160Gi"), now the cells of the one table: usage, nominal (+limit).
@pytest.mark.parametrize(
    ("usage", "nominal", "limit", "cells"),
    [
        (12000, 8000, 4000, ("12", "8 (+4)")),
        (0, 160 * GI, None, ("0", "160Gi")),
        (1000, None, None, ("1", "?")),
    ],
)
def test_usage_and_nominal_cells(
    usage: int, nominal: int | None, limit: int | None, cells: tuple[str, str]
) -> None:
    row = QuotaRow("cq", "f", "r", nominal, limit, None, usage)
    assert (format_quantity(row.usage), nominal_text(row)) == cells


def test_the_one_line_form() -> None:
    assert row_line(QuotaRow("cq", "h100", GPU, 8000, 4000, None, 12000)) == (
        "h100/nvidia.com/gpu 12/8 (borrowing 4) [limit +4]"
    )
    assert row_line(QuotaRow("cq", "a", "cpu", 4000, usage=4000)) == "a/cpu 4/4"
