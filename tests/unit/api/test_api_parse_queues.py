"""ClusterQueue: every field, every version, every webhook rule."""

from __future__ import annotations

from typing import Any

import pytest
from api_builders import (
    ClusterQueueBuilder as CQ,
)
from api_builders import (
    flavor,
    quota,
)

from kuota.api.parse import parse_object
from kuota.api.types import (
    BorrowWithinCohort,
    ClusterQueue,
    FlavorFungibility,
    LabelSelector,
    NodeSelectorRequirement,
    PreemptionPolicy,
    ValidationError,
)


def parsed(manifest: dict[str, Any]) -> Any:
    result = parse_object(manifest)
    assert not isinstance(result, ValidationError), str(result)
    return result


# --------------------------------------------------------------------------- ClusterQueue fields

CQ_FIELDS: list[tuple[str, dict[str, Any], str, object]] = [
    ("cohortName-v1beta2", CQ().cohort("pool").build(), "cohort", "pool"),
    (
        "cohort-v1beta1",
        CQ(version="v1beta1").cohort("pool", key="cohort").build(),
        "cohort",
        "pool",
    ),
    ("cohort-under-v1beta2", CQ().cohort("pool", key="cohort").build(), "cohort", "pool"),
    (
        "same-cohort-twice",
        CQ().cohort("pool").cohort("pool", key="cohort").build(),
        "cohort",
        "pool",
    ),
    ("no-cohort", CQ().build(), "cohort", None),
    ("empty-cohortName", CQ().cohort("").build(), "cohort", None),
    ("namespaceSelector-absent", CQ().build(), "namespace_selector", None),
    (
        "namespaceSelector-null",
        CQ().set("spec.namespaceSelector", None).build(),
        "namespace_selector",
        None,
    ),
    (
        "namespaceSelector-empty",
        CQ().set("spec.namespaceSelector", {}).build(),
        "namespace_selector",
        LabelSelector(),
    ),
    (
        "namespaceSelector-labels-sorted",
        CQ().set("spec.namespaceSelector.matchLabels", {"team": "a", "env": "prod"}).build(),
        "namespace_selector",
        LabelSelector(match_labels=(("env", "prod"), ("team", "a"))),
    ),
    (
        "namespaceSelector-expressions",
        CQ()
        .set(
            "spec.namespaceSelector.matchExpressions",
            [{"key": "team", "operator": "In", "values": ["a", "b"]}],
        )
        .build(),
        "namespace_selector",
        LabelSelector(match_expressions=(NodeSelectorRequirement("team", "In", ("a", "b")),)),
    ),
    ("queueing-default", CQ().build(), "queueing_strategy", "BestEffortFIFO"),
    (
        "queueing-strict",
        CQ().set("spec.queueingStrategy", "StrictFIFO").build(),
        "queueing_strategy",
        "StrictFIFO",
    ),
    (
        "fungibility-default",
        CQ().build(),
        "flavor_fungibility",
        FlavorFungibility("MayStopSearch", "TryNextFlavor"),
    ),
    (
        "fungibility-v1beta1-Borrow-is-MayStopSearch",
        CQ(version="v1beta1").set("spec.flavorFungibility", {"whenCanBorrow": "Borrow"}).build(),
        "flavor_fungibility",
        FlavorFungibility("MayStopSearch", "TryNextFlavor"),
    ),
    (
        "fungibility-v1beta1-Preempt-is-MayStopSearch",
        CQ(version="v1beta1")
        .set(
            "spec.flavorFungibility",
            {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "Preempt"},
        )
        .build(),
        "flavor_fungibility",
        FlavorFungibility("TryNextFlavor", "MayStopSearch"),
    ),
    (
        "fungibility-v1beta2-names",
        CQ()
        .set(
            "spec.flavorFungibility",
            {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
        )
        .build(),
        "flavor_fungibility",
        FlavorFungibility("TryNextFlavor", "MayStopSearch"),
    ),
    (
        "fungibility-preference-with-both-TryNextFlavor",
        CQ()
        .set(
            "spec.flavorFungibility",
            {
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            },
        )
        .build(),
        "flavor_fungibility",
        FlavorFungibility("TryNextFlavor", "TryNextFlavor"),
    ),
    ("preemption-default", CQ().build(), "preemption", PreemptionPolicy()),
    (
        "preemption-all",
        CQ()
        .set(
            "spec.preemption",
            {
                "withinClusterQueue": "LowerOrNewerEqualPriority",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            },
        )
        .build(),
        "preemption",
        PreemptionPolicy(
            "LowerOrNewerEqualPriority", "Any", BorrowWithinCohort("LowerPriority", 100)
        ),
    ),
    ("weight-default", CQ().build(), "fair_sharing_weight", 1000),
    ("weight-half", CQ().set("spec.fairSharing.weight", "0.5").build(), "fair_sharing_weight", 500),
    ("weight-zero", CQ().set("spec.fairSharing.weight", 0).build(), "fair_sharing_weight", 0),
    (
        "weight-tiny-stays-positive",
        CQ().set("spec.fairSharing.weight", "1n").build(),
        "fair_sharing_weight",
        1,
    ),
    ("weight-two", CQ().set("spec.fairSharing.weight", 2).build(), "fair_sharing_weight", 2000),
    ("stopPolicy-default", CQ().build(), "stop_policy", "None"),
    (
        "stopPolicy-hold",
        CQ().set("spec.stopPolicy", "HoldAndDrain").build(),
        "stop_policy",
        "HoldAndDrain",
    ),
]


@pytest.mark.parametrize(
    ("manifest", "attr", "want"), [c[1:] for c in CQ_FIELDS], ids=[c[0] for c in CQ_FIELDS]
)
def test_cluster_queue_field(manifest: dict[str, Any], attr: str, want: object) -> None:
    cq = parsed(manifest)
    assert isinstance(cq, ClusterQueue)
    assert getattr(cq, attr) == want


def test_cluster_queue_resource_groups_in_order_and_milli_units() -> None:
    cq = parsed(
        CQ()
        .cohort("pool")
        .group(
            ["cpu", "memory"],
            flavor("spot", quota("cpu", "500m"), quota("memory", "1Gi", lending="512Mi")),
            flavor("on-demand", quota("cpu", 4, borrowing="2"), quota("memory", "8Gi")),
        )
        .gpus(8, borrowing=4)
        .build()
    )
    assert [g.covered_resources for g in cq.resource_groups] == [
        ("cpu", "memory"),
        ("nvidia.com/gpu",),
    ]
    spot, on_demand = cq.resource_groups[0].flavors
    assert [f.name for f in (spot, on_demand)] == ["spot", "on-demand"]
    assert spot.resources[0].nominal_quota == 500
    assert spot.resources[1].nominal_quota == 2**30 * 1000
    assert spot.resources[1].lending_limit == 2**29 * 1000
    assert on_demand.resources[0].borrowing_limit == 2000
    assert on_demand.resources[1].borrowing_limit is None
    assert cq.resource_groups[1].flavors[0].resources[0].borrowing_limit == 4000


# ------------------------------------------------------------------ ClusterQueue validation


def many_groups(n: int, flavors_each: int = 1) -> dict[str, Any]:
    b = CQ()
    for g in range(n):
        b.group([f"r{g}"], *(flavor(f"f{g}-{i}", quota(f"r{g}", 1)) for i in range(flavors_each)))
    return b.build()


RG = "spec.resourceGroups"
F00 = f"{RG}[0].flavors[0]"
CQ_ERRORS: list[tuple[str, dict[str, Any], str, str]] = [
    ("name-not-dns", CQ("Team_A").gpus().build(), "metadata.name", "DNS-1123"),
    ("name-missing", CQ().drop("metadata.name").build(), "metadata.name", "required"),
    ("spec-not-a-mapping", CQ().set("spec", "big").build(), "spec", "mapping"),
    ("groups-not-a-list", CQ().set("spec.resourceGroups", {"a": 1}).build(), RG, "list"),
    ("seventeen-groups", many_groups(17), RG, "at most 16"),
    ("sixty-five-flavors", many_groups(1, 65), f"{RG}[0].flavors", "at most 64"),
    ("over-256-flavors", many_groups(5, 60), RG, "256 flavors"),
    (
        "no-covered",
        CQ().group([], flavor("h100")).build(),
        f"{RG}[0].coveredResources",
        "at least one",
    ),
    ("no-flavors", CQ().group(["cpu"]).build(), f"{RG}[0].flavors", "at least one flavor"),
    (
        "bad-resource-name",
        CQ().group(["nvidia.com/gpu/x"], flavor("a", quota("nvidia.com/gpu/x", 1))).build(),
        f"{RG}[0].coveredResources[0]",
        "qualified name",
    ),
    (
        "too-few-resources",
        CQ().group(["cpu", "memory"], flavor("a", quota("cpu", 1))).build(),
        f"{F00}.resources",
        "2 coveredResources",
    ),
    (
        "too-many-resources",
        CQ().group(["cpu"], flavor("a", quota("cpu", 1), quota("memory", 1))).build(),
        f"{F00}.resources",
        "1 coveredResources",
    ),
    (
        "resources-out-of-order",
        CQ().group(["cpu", "memory"], flavor("a", quota("memory", 1), quota("cpu", 1))).build(),
        f"{F00}.resources[0].name",
        "must match coveredResources[0]",
    ),
    (
        "resource-in-two-groups",
        CQ()
        .group(["cpu"], flavor("a", quota("cpu", 1)))
        .group(["cpu"], flavor("b", quota("cpu", 1)))
        .build(),
        f"{RG}[1].coveredResources[0]",
        "one resource group",
    ),
    (
        "flavor-twice-in-group",
        CQ().group(["cpu"], flavor("a", quota("cpu", 1)), flavor("a", quota("cpu", 2))).build(),
        f"{RG}[0].flavors[1].name",
        "duplicate flavor",
    ),
    (
        "flavor-in-two-groups",
        CQ()
        .group(["cpu"], flavor("a", quota("cpu", 1)))
        .group(["memory"], flavor("a", quota("memory", 1)))
        .build(),
        f"{RG}[1].flavors[0].name",
        "duplicate flavor",
    ),
    (
        "flavor-name-not-dns",
        CQ().group(["cpu"], flavor("H100", quota("cpu", 1))).build(),
        f"{F00}.name",
        "DNS-1123",
    ),
    (
        "nominal-missing",
        CQ().group(["cpu"], flavor("a", {"name": "cpu"})).build(),
        f"{F00}.resources[0].nominalQuota",
        "required",
    ),
    ("nominal-negative", CQ().gpus("-1").build(), f"{F00}.resources[0].nominalQuota", "negative"),
    ("nominal-absurd", CQ().gpus("1e30").build(), f"{F00}.resources[0].nominalQuota", "absurd"),
    (
        "nominal-garbage",
        CQ().gpus("eight").build(),
        f"{F00}.resources[0].nominalQuota",
        "not a valid",
    ),
    (
        "nominal-boolean",
        CQ().gpus(True).build(),
        f"{F00}.resources[0].nominalQuota",
        "number or string",
    ),
    (
        "borrowing-without-cohort",
        CQ().gpus(8, borrowing=4).build(),
        f"{F00}.resources[0].borrowingLimit",
        "without a cohort",
    ),
    (
        "lending-without-cohort",
        CQ().gpus(8, lending=4).build(),
        f"{F00}.resources[0].lendingLimit",
        "without a cohort",
    ),
    (
        "lending-above-nominal",
        CQ().cohort("pool").gpus(8, lending=9).build(),
        f"{F00}.resources[0].lendingLimit",
        "nominalQuota",
    ),
    (
        "borrowing-negative",
        CQ().cohort("pool").gpus(8, borrowing="-2").build(),
        f"{F00}.resources[0].borrowingLimit",
        "negative",
    ),
    (
        "cohort-conflict",
        CQ().cohort("a").cohort("b", key="cohort").build(),
        "spec.cohort",
        "conflicts",
    ),
    ("cohort-not-dns", CQ().cohort("Pool!").build(), "spec.cohortName", "DNS-1123"),
    ("cohort-number", CQ().set("spec.cohortName", 7).build(), "spec.cohortName", "string"),
    (
        "queueing-unknown",
        CQ().set("spec.queueingStrategy", "LIFO").build(),
        "spec.queueingStrategy",
        "unsupported value",
    ),
    (
        "borrow-unknown",
        CQ().set("spec.flavorFungibility.whenCanBorrow", "Sometimes").build(),
        "spec.flavorFungibility.whenCanBorrow",
        "unsupported value",
    ),
    (
        "preference-needs-TryNextFlavor",
        CQ().set("spec.flavorFungibility.preference", "BorrowingOverPreemption").build(),
        "spec.flavorFungibility.preference",
        "TryNextFlavor",
    ),
    (
        "borrowWithinCohort-needs-reclaim",
        CQ().set("spec.preemption.borrowWithinCohort.policy", "LowerPriority").build(),
        "spec.preemption.borrowWithinCohort.policy",
        "reclaimWithinCohort",
    ),
    (
        "threshold-string",
        CQ()
        .set(
            "spec.preemption",
            {
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": "high"},
            },
        )
        .build(),
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
        "integer",
    ),
    (
        "within-unknown",
        CQ().set("spec.preemption.withinClusterQueue", "Any").build(),
        "spec.preemption.withinClusterQueue",
        "unsupported",
    ),
    (
        "weight-negative",
        CQ().set("spec.fairSharing.weight", "-1").build(),
        "spec.fairSharing.weight",
        "negative",
    ),
    (
        "weight-garbage",
        CQ().set("spec.fairSharing.weight", [1]).build(),
        "spec.fairSharing.weight",
        "number or string",
    ),
    (
        "stopPolicy-unknown",
        CQ().set("spec.stopPolicy", "Pause").build(),
        "spec.stopPolicy",
        "unsupported",
    ),
    (
        "selector-In-without-values",
        CQ()
        .set("spec.namespaceSelector.matchExpressions", [{"key": "team", "operator": "In"}])
        .build(),
        "spec.namespaceSelector.matchExpressions[0].values",
        "non-empty",
    ),
    (
        "selector-Gt-not-for-labels",
        CQ()
        .set(
            "spec.namespaceSelector.matchExpressions",
            [{"key": "n", "operator": "Gt", "values": ["1"]}],
        )
        .build(),
        "spec.namespaceSelector.matchExpressions[0].operator",
        "unsupported operator",
    ),
    (
        "selector-label-value",
        CQ().set("spec.namespaceSelector.matchLabels", {"team": "a b"}).build(),
        "spec.namespaceSelector.matchLabels[team]",
        "label value",
    ),
    ("apiVersion-unknown", CQ(version="v1").build(), "apiVersion", "kueue.x-k8s.io/v1beta2"),
]


@pytest.mark.parametrize(
    ("manifest", "field", "fragment"), [c[1:] for c in CQ_ERRORS], ids=[c[0] for c in CQ_ERRORS]
)
def test_cluster_queue_validation(manifest: dict[str, Any], field: str, fragment: str) -> None:
    result = parse_object(manifest)
    assert isinstance(result, ValidationError), result
    assert result.ref.kind == "ClusterQueue"
    assert (result.field, fragment in result.message) == (field, True), result.message
