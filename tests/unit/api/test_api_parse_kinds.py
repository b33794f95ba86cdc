"""Cohort, LocalQueue, ResourceFlavor, WorkloadPriorityClass, Namespace."""

from __future__ import annotations

from typing import Any

import pytest
from api_builders import (
    CohortBuilder,
    flavor,
    local_queue,
    namespace,
    priority_class,
    quota,
    resource_flavor,
)

from kuota.api.parse import parse_object
from kuota.api.types import (
    Cohort,
    LocalQueue,
    Namespace,
    ObjectRef,
    ResourceFlavor,
    Taint,
    Toleration,
    ValidationError,
    WorkloadPriorityClass,
)


def parsed(manifest: dict[str, Any]) -> Any:
    result = parse_object(manifest)
    assert not isinstance(result, ValidationError), str(result)
    return result


# --------------------------------------------------------------------------- Cohort


def test_cohort_v1beta2_parent_name_and_quotas() -> None:
    cohort = parsed(
        CohortBuilder("team-pool")
        .parent("org")
        .group(["nvidia.com/gpu"], flavor("h100", quota("nvidia.com/gpu", 4, lending=8)))
        .set("spec.fairSharing.weight", "1.5")
        .build()
    )
    assert isinstance(cohort, Cohort)
    assert (cohort.name, cohort.parent, cohort.fair_sharing_weight) == ("team-pool", "org", 1500)
    # A Cohort may lend more than its own nominal quota (it lends its subtree's).
    assert cohort.resource_groups[0].flavors[0].resources[0].lending_limit == 8000


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1", "v1beta2"])
def test_cohort_parent_under_either_name(version: str) -> None:
    for key in ("parent", "parentName"):
        cohort = parsed(CohortBuilder(version=version).parent("org", key=key).build())
        assert cohort.parent == "org"


COHORT_ERRORS: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "borrowing-without-parent",
        CohortBuilder().group(["cpu"], flavor("a", quota("cpu", 1, borrowing=1))).build(),
        "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
        "without a parent",
    ),
    (
        "parent-conflict",
        CohortBuilder().parent("a").parent("b", key="parent").build(),
        "spec.parent",
        "conflicts",
    ),
    (
        "weight-negative",
        CohortBuilder().set("spec.fairSharing.weight", "-0.5").build(),
        "spec.fairSharing.weight",
        "negative",
    ),
]


@pytest.mark.parametrize(
    ("manifest", "field", "fragment"),
    [c[1:] for c in COHORT_ERRORS],
    ids=[c[0] for c in COHORT_ERRORS],
)
def test_cohort_validation(manifest: dict[str, Any], field: str, fragment: str) -> None:
    result = parse_object(manifest)
    assert isinstance(result, ValidationError)
    assert (result.ref, result.field) == (ObjectRef("Cohort", "gpu-pool"), field)
    assert fragment in result.message


# ------------------------------------------------ LocalQueue, flavor, priority, namespace

OTHER_KINDS: list[tuple[str, dict[str, Any], object]] = [
    (
        "local-queue",
        local_queue().set("spec.stopPolicy", "Hold").build(),
        LocalQueue("team-a", "training-queue", "team-a-cq", "Hold"),
    ),
    (
        "local-queue-default-namespace",
        local_queue().drop("metadata.namespace").build(),
        LocalQueue("default", "training-queue", "team-a-cq"),
    ),
    ("flavor-empty", resource_flavor().build(), ResourceFlavor("h100")),
    (
        "flavor-full",
        resource_flavor()
        .set("spec.nodeLabels", {"zone": "b", "gpu": "h100"})
        .set(
            "spec.nodeTaints",
            [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        )
        .set(
            "spec.tolerations",
            [
                {"operator": "Exists"},
                {"key": "spot", "value": "yes", "effect": "NoExecute", "tolerationSeconds": 30},
            ],
        )
        .build(),
        ResourceFlavor(
            "h100",
            node_labels=(("gpu", "h100"), ("zone", "b")),
            node_taints=(Taint("nvidia.com/gpu", "present", "NoSchedule"),),
            tolerations=(
                Toleration(operator="Exists"),
                Toleration("spot", "Equal", "yes", "NoExecute"),
            ),
        ),
    ),
    ("priority", priority_class(value=1000).build(), WorkloadPriorityClass("high", 1000)),
    ("priority-negative", priority_class(value=-5).build(), WorkloadPriorityClass("high", -5)),
    (
        "priority-v1beta1",
        priority_class().set("apiVersion", "kueue.x-k8s.io/v1beta1").build(),
        WorkloadPriorityClass("high", 1000),
    ),
    (
        "namespace-labels-and-name-label",
        namespace().label("team", "a").build(),
        Namespace("team-a", (("kubernetes.io/metadata.name", "team-a"), ("team", "a"))),
    ),
    (
        "namespace-no-apiVersion",
        {"kind": "Namespace", "metadata": {"name": "x"}},
        Namespace("x", (("kubernetes.io/metadata.name", "x"),)),
    ),
]


@pytest.mark.parametrize(
    ("manifest", "want"), [c[1:] for c in OTHER_KINDS], ids=[c[0] for c in OTHER_KINDS]
)
def test_other_kinds(manifest: dict[str, Any], want: object) -> None:
    assert parse_object(manifest) == want


OTHER_ERRORS: list[tuple[str, dict[str, Any], str, str]] = [
    ("lq-no-spec", local_queue().drop("spec").build(), "spec", "required"),
    ("lq-no-cluster-queue", local_queue().set("spec", {}).build(), "spec.clusterQueue", "required"),
    (
        "lq-bad-namespace",
        local_queue(namespace="Team_A").build(),
        "metadata.namespace",
        "DNS-1123 label",
    ),
    (
        "lq-stop-unknown",
        local_queue().set("spec.stopPolicy", "Later").build(),
        "spec.stopPolicy",
        "unsupported",
    ),
    (
        "flavor-nine-labels",
        resource_flavor().set("spec.nodeLabels", {f"k{i}": "v" for i in range(9)}).build(),
        "spec.nodeLabels",
        "at most 8",
    ),
    (
        "flavor-label-not-string",
        resource_flavor().set("spec.nodeLabels", {"gpu": 3}).build(),
        "spec.nodeLabels[gpu]",
        "string",
    ),
    (
        "taint-no-effect",
        resource_flavor().set("spec.nodeTaints", [{"key": "gpu"}]).build(),
        "spec.nodeTaints[0].effect",
        "required",
    ),
    (
        "taint-bad-effect",
        resource_flavor().set("spec.nodeTaints", [{"key": "gpu", "effect": "Maybe"}]).build(),
        "spec.nodeTaints[0].effect",
        "unsupported",
    ),
    (
        "toleration-exists-with-value",
        resource_flavor()
        .set("spec.tolerations", [{"key": "a", "operator": "Exists", "value": "x"}])
        .build(),
        "spec.tolerations[0].value",
        "must be empty",
    ),
    (
        "toleration-empty-key-equal",
        resource_flavor().set("spec.tolerations", [{"value": "x"}]).build(),
        "spec.tolerations[0].operator",
        "Exists",
    ),
    (
        "toleration-seconds-not-noexecute",
        resource_flavor().set("spec.tolerations", [{"key": "a", "tolerationSeconds": 5}]).build(),
        "spec.tolerations[0].effect",
        "NoExecute",
    ),
    ("priority-missing", priority_class().drop("value").build(), "value", "required"),
    ("priority-string", priority_class(value="1000").build(), "value", "integer"),
    ("priority-overflow", priority_class(value=2**31).build(), "value", "at most"),
    ("namespace-bad-name", namespace("a.b").build(), "metadata.name", "DNS-1123 label"),
    (
        "namespace-labels-list",
        namespace().set("metadata.labels", ["a"]).build(),
        "metadata.labels",
        "mapping",
    ),
]


@pytest.mark.parametrize(
    ("manifest", "field", "fragment"),
    [c[1:] for c in OTHER_ERRORS],
    ids=[c[0] for c in OTHER_ERRORS],
)
def test_other_kinds_validation(manifest: dict[str, Any], field: str, fragment: str) -> None:
    result = parse_object(manifest)
    assert isinstance(result, ValidationError), result
    assert result.ref.kind == manifest["kind"]
    assert (result.field, fragment in result.message) == (field, True), result.message
