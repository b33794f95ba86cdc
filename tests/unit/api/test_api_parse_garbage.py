"""Garbage in: a ValidationError out, naming the field; never an exception."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from api_builders import (
    ClusterQueueBuilder,
    JobBuilder,
    configuration,
    kueue_operator,
    load_reference,
    local_queue,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.api.nodes import Node
from kuota.api.parse import object_ref, parse_object
from kuota.api.types import (
    ClusterQueue,
    Cohort,
    Configuration,
    LocalQueue,
    Namespace,
    ObjectRef,
    ResourceFlavor,
    ValidationError,
    WorkloadPriorityClass,
    WorkloadSpec,
)

PARSED = (
    Node,
    ResourceFlavor,
    ClusterQueue,
    Cohort,
    LocalQueue,
    WorkloadPriorityClass,
    Namespace,
    Configuration,
    WorkloadSpec,
)


@pytest.mark.parametrize(
    "manifest", [None, "", "kind: Job", 5, 1.5, True, [], [{"kind": "Job"}], b"bytes"]
)
def test_not_a_mapping(manifest: object) -> None:
    result = parse_object(manifest)
    assert isinstance(result, ValidationError)
    assert (result.ref, result.field) == (ObjectRef("", ""), "")
    assert "mapping" in result.message


GARBAGE: list[tuple[str, dict[str, Any], str, str]] = [
    ("no-kind", {"apiVersion": "v1", "metadata": {"name": "x"}}, "kind", "required"),
    ("kind-number", {"kind": 7}, "kind", "string"),
    (
        "unknown-kind",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}},
        "kind",
        "unsupported kind",
    ),
    (
        "other-kueue-kind",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload"},
        "kind",
        "unsupported kind",
    ),
    (
        "wrong-group",
        {"apiVersion": "batch/v1", "kind": "ClusterQueue", "metadata": {"name": "x"}},
        "apiVersion",
        "unsupported",
    ),
    ("apiVersion-number", {"apiVersion": 1, "kind": "Namespace"}, "apiVersion", "string"),
    (
        "metadata-string",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": "x"},
        "metadata",
        "mapping",
    ),
    (
        "metadata-missing",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor"},
        "metadata",
        "required",
    ),
    ("cq-spec-string", ClusterQueueBuilder().set("spec", "8 gpus").build(), "spec", "mapping"),
    (
        "cq-groups-string",
        ClusterQueueBuilder().set("spec.resourceGroups", "gpu").build(),
        "spec.resourceGroups",
        "list",
    ),
    (
        "cq-group-number",
        ClusterQueueBuilder().set("spec.resourceGroups", [3]).build(),
        "spec.resourceGroups[0]",
        "mapping",
    ),
    (
        "cq-covered-string",
        ClusterQueueBuilder()
        .set("spec.resourceGroups", [{"coveredResources": "nvidia.com/gpu"}])
        .build(),
        "spec.resourceGroups[0].coveredResources",
        "list",
    ),
    (
        "cq-selector-list",
        ClusterQueueBuilder().set("spec.namespaceSelector", ["team"]).build(),
        "spec.namespaceSelector",
        "mapping",
    ),
    ("lq-spec-list", local_queue().set("spec", ["q"]).build(), "spec", "mapping"),
    ("job-spec-number", JobBuilder().set("spec", 1).build(), "spec", "mapping"),
    (
        "job-labels-list",
        JobBuilder(queue=None).set("metadata.labels", ["kueue.x-k8s.io/queue-name=q"]).build(),
        "metadata.labels",
        "mapping",
    ),
    (
        "job-parallelism-million",
        JobBuilder().container({"cpu": 1}).parallelism(10**6).build(),
        "spec.parallelism",
        "at most",
    ),
    (
        "job-gpu-huge",
        JobBuilder().container({"nvidia.com/gpu": 10**40}).build(),
        "spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]",
        "absurd",
    ),
    (
        "job-gpu-nan",
        JobBuilder().container({"nvidia.com/gpu": float("nan")}).build(),
        "spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]",
        "finite",
    ),
    ("config-resources-list", configuration(resources=["gpu"]), "resources", "mapping"),
    ("config-wfpr-string", configuration(waitForPodsReady="on"), "waitForPodsReady", "mapping"),
    (
        "operator-no-spec",
        {"apiVersion": "kueue.openshift.io/v1", "kind": "Kueue", "metadata": {"name": "cluster"}},
        "spec",
        "required",
    ),
    ("operator-config-string", kueue_operator("x"), "spec.config", "mapping"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("manifest", "field", "fragment"), [c[1:] for c in GARBAGE], ids=[c[0] for c in GARBAGE]
)
def test_garbage_names_the_field(manifest: dict[str, Any], field: str, fragment: str) -> None:
    result = parse_object(manifest)
    assert isinstance(result, ValidationError), result
    assert (result.field, fragment in result.message) == (field, True), result.message


@pytest.mark.parametrize(
    ("manifest", "ref"),
    [
        ({}, ObjectRef("", "")),
        ({"kind": ["Job"], "metadata": {"name": 5}}, ObjectRef("", "")),
        ({"kind": "Job", "metadata": {"name": "j"}}, ObjectRef("Job", "j", "default")),
        (
            {"kind": "LocalQueue", "metadata": {"name": "q", "namespace": "t"}},
            ObjectRef("LocalQueue", "q", "t"),
        ),
        (
            {"kind": "ClusterQueue", "metadata": {"name": "cq", "namespace": "ignored"}},
            ObjectRef("ClusterQueue", "cq"),
        ),
        ({"kind": "Widget", "metadata": {"name": "w", "namespace": 3}}, ObjectRef("Widget", "w")),
    ],
)
def test_object_ref(manifest: object, ref: ObjectRef) -> None:
    assert object_ref(manifest) == ref


@pytest.mark.parametrize(
    "kind", ["DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim"]
)
def test_dra_kinds_belong_to_the_dra_module(kind: str) -> None:
    assert (
        parse_object({"apiVersion": "resource.k8s.io/v1", "kind": kind, "spec": "anything"}) is None
    )
    assert parse_object({"kind": kind}) is None
    assert parse_object({"apiVersion": "resource.k8s.io/v1beta2", "kind": kind}) is None


# --------------------------------------------------------------------------- properties

FIELD_NAMES = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "resourceGroups",
    "coveredResources",
    "flavors",
    "resources",
    "nominalQuota",
    "borrowingLimit",
    "lendingLimit",
    "cohort",
    "cohortName",
    "namespaceSelector",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "preemption",
    "flavorFungibility",
    "fairSharing",
    "weight",
    "template",
    "containers",
    "initContainers",
    "requests",
    "limits",
    "parallelism",
    "completions",
    "resourceClaims",
    "tolerations",
    "nodeSelector",
    "affinity",
    "waitForPodsReady",
    "timeout",
    "deviceClassMappings",
    "deviceClassNames",
    "sources",
    "counter",
    "config",
    "gangScheduling",
    "data",
    "value",
    "clusterQueue",
    "kueue.x-k8s.io/queue-name",
    "taints",
    "effect",
    "unschedulable",
    "allocatable",
]
KINDS = [
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "Namespace",
    "Job",
    "Configuration",
    "Kueue",
    "ConfigMap",
    "DeviceClass",
    "Pod",
    "Node",
]
API_VERSIONS = [
    "kueue.x-k8s.io/v1beta2",
    "kueue.x-k8s.io/v1beta1",
    "batch/v1",
    "v1",
    "config.kueue.x-k8s.io/v1beta1",
    "kueue.openshift.io/v1",
    "resource.k8s.io/v1",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(
        ["8", "-1", "1e30", "500m", "1Gi", "5m", "In", "Always", "true", "Never", "TryNextFlavor"]
    )
)
json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)
manifests: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"kind": st.sampled_from(KINDS), "apiVersion": st.sampled_from(API_VERSIONS)},
    optional={
        "metadata": json_like,
        "spec": json_like,
        "value": json_like,
        "data": json_like,
        "status": json_like,
    },
)


def _no_crash(result: object) -> None:
    assert result is None or isinstance(result, (ValidationError, *PARSED))
    if isinstance(result, ValidationError):
        # Every error came from a reader that knew the field, not the catch-all.
        assert not result.message.startswith("cannot parse"), result


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_like)
def test_parse_object_never_raises_on_json(value: Any) -> None:
    _no_crash(parse_object(value))
    assert isinstance(object_ref(value), ObjectRef)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests)
def test_parse_object_never_raises_on_kinds_with_garbage(manifest: dict[str, Any]) -> None:
    _no_crash(parse_object(manifest))
    assert parse_object(manifest) == parse_object(manifest)


def _paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out += _paths(child, (*prefix, i))
    return out


VALID = [
    *load_reference("004-clusterqueue-and-localqueue-team-alpha.yaml"),
    *load_reference("004-resourceflavor-nvidia-h100.yaml"),
    *load_reference("000-kueue-gpu-memory-counter-device-class-mapping.yaml"),
    ClusterQueueBuilder()
    .cohort("pool")
    .gpus(8, borrowing=4, lending=2)
    .set(
        "spec.preemption",
        {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}},
    )
    .set(
        "spec.namespaceSelector.matchExpressions",
        [{"key": "team", "operator": "In", "values": ["a"]}],
    )
    .build(),
    JobBuilder()
    .container({"cpu": 1}, {"memory": "1Gi"})
    .init_container({"cpu": 2}, sidecar=True)
    .claim("gpu", template="single-gpu")
    .affinity_term(("gpu", "In", ["h100"]))
    .toleration(key="a", operator="Exists")
    .node_selector({"zone": "b"})
    .build(),
    configuration(
        "v1beta1",
        waitForPodsReady={"enable": True, "requeuingStrategy": {"backoffLimitCount": 2}},
        admissionFairSharing={"resourceWeights": {"cpu": 1}},
    ),
]


@settings(max_examples=250, deadline=None)
@given(st.data())
def test_one_bad_field_in_a_valid_object_never_raises(data: st.DataObject) -> None:
    manifest = data.draw(st.sampled_from(VALID))
    assert not isinstance(parse_object(manifest), ValidationError)
    mutated: Any = copy.deepcopy(manifest)
    path = data.draw(st.sampled_from(_paths(mutated)))
    node = mutated
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = data.draw(json_like)
    _no_crash(parse_object(mutated))
