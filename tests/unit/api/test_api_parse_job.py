"""Jobs -> WorkloadSpec: pod counts, per-pod requests, claims, placement, time."""

from __future__ import annotations

from typing import Any

import pytest
from api_builders import JobBuilder as Job

from kuota.api.parse import parse_job, parse_object
from kuota.api.types import (
    ClaimRef,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectRef,
    PodSet,
    Toleration,
    ValidationError,
    WorkloadSpec,
)

GiB = 2**30 * 1000  # one GiB in milli-units


def workload(manifest: dict[str, Any], *, at: float = 50.0) -> WorkloadSpec:
    result = parse_job(manifest, at=at)
    assert isinstance(result, WorkloadSpec), result
    return result


def main(manifest: dict[str, Any]) -> PodSet:
    (podset,) = workload(manifest).podsets
    assert podset.name == "main"
    return podset


def test_a_simple_job() -> None:
    manifest = (
        Job()
        .label("kueue.x-k8s.io/priority-class", "high")
        .set("metadata.uid", "u-1")
        .container({"cpu": "2", "nvidia.com/gpu": 1})
        .build()
    )
    assert workload(manifest) == WorkloadSpec(
        namespace="team-a",
        name="train",
        uid="u-1",
        queue_name="training-queue",
        priority_class="high",
        creation_seconds=50.0,
        podsets=(PodSet(name="main", count=1, requests=(("cpu", 2000), ("nvidia.com/gpu", 1000))),),
    )
    assert parse_object(manifest, at=50.0) == workload(manifest)


def test_without_queue_name_the_job_is_not_ours() -> None:
    assert parse_job(Job(queue=None).container({"cpu": 1}).build(), at=0) is None
    assert parse_job(Job(queue="").container({"cpu": 1}).build(), at=0) is None
    # ...even when the rest of it is garbage: it is someone else's Job.
    assert parse_object(Job(queue=None).set("spec", 5).build()) is None


def test_defaults_uid_namespace_and_creation_time() -> None:
    spec = workload(Job().drop("metadata.namespace").container({"cpu": 1}).build(), at=12.5)
    assert (spec.namespace, spec.uid, spec.creation_seconds, spec.priority_class) == (
        "default",
        "default/train",
        12.5,
        None,
    )
    assert spec.key == "default/train"


COUNTS: list[tuple[str, Job, int]] = [
    ("default-one", Job(), 1),
    ("parallelism", Job().parallelism(4), 4),
    ("completions-cap", Job().parallelism(8).completions(3), 3),
    ("completions-larger", Job().parallelism(4).completions(100), 4),
    ("only-completions", Job().completions(5), 1),
    ("zero", Job().parallelism(0), 0),
    ("json-float", Job().parallelism(2.0), 2),
    ("at-the-limit", Job().parallelism(100_000), 100_000),
]


@pytest.mark.parametrize(("builder", "count"), [c[1:] for c in COUNTS], ids=[c[0] for c in COUNTS])
def test_pod_count(builder: Job, count: int) -> None:
    assert main(builder.container({"cpu": 1}).build()).count == count


REQUESTS: list[tuple[str, Job, dict[str, int]]] = [
    (
        "containers-summed",
        Job().container({"cpu": "500m"}).container({"cpu": "1.5", "memory": "1Gi"}),
        {"cpu": 2000, "memory": GiB},
    ),
    (
        "limits-only",
        Job().container(limits={"cpu": "2", "nvidia.com/gpu": 1}),
        {"cpu": 2000, "nvidia.com/gpu": 1000},
    ),
    (
        "request-below-limit-wins",
        Job().container({"cpu": "1"}, {"cpu": "4", "memory": "2Gi"}),
        {"cpu": 1000, "memory": 2 * GiB},
    ),
    (
        "init-larger-than-sum",
        Job()
        .container({"cpu": 1})
        .container({"cpu": 1})
        .init_container({"cpu": 3, "memory": "1Gi"}),
        {"cpu": 3000, "memory": GiB},
    ),
    (
        "init-smaller-than-sum",
        Job().container({"cpu": 2}).init_container({"cpu": 1}),
        {"cpu": 2000},
    ),
    (
        "init-max-not-sum",
        Job().container({"cpu": 1}).init_container({"cpu": 2}).init_container({"cpu": 3}),
        {"cpu": 3000},
    ),
    (
        "init-limits-only",
        Job().container({"cpu": 1}).init_container(limits={"cpu": 5}),
        {"cpu": 5000},
    ),
    (
        "sidecar-adds-to-containers",
        Job().container({"cpu": 1}).init_container({"cpu": "500m"}, sidecar=True),
        {"cpu": 1500},
    ),
    # A plain init container after a sidecar runs beside it: 2 + 3 = 5 > 1 + 2.
    (
        "init-after-sidecar",
        Job()
        .container({"cpu": 1})
        .init_container({"cpu": 2}, sidecar=True)
        .init_container({"cpu": 3}),
        {"cpu": 5000},
    ),
    # ...but one before the sidecar runs alone: max(3, 1 + 2) = 3.
    (
        "init-before-sidecar",
        Job()
        .container({"cpu": 1})
        .init_container({"cpu": 3})
        .init_container({"cpu": 2}, sidecar=True),
        {"cpu": 3000},
    ),
    (
        "overhead",
        Job().container({"cpu": 1}).overhead({"cpu": "250m", "memory": "120Mi"}),
        {"cpu": 1250, "memory": 120 * 2**20 * 1000},
    ),
    ("no-resources", Job().container(), {}),
    ("zero-kept", Job().container({"cpu": 0}), {"cpu": 0}),
]


@pytest.mark.parametrize(
    ("builder", "want"), [c[1:] for c in REQUESTS], ids=[c[0] for c in REQUESTS]
)
def test_per_pod_requests(builder: Job, want: dict[str, int]) -> None:
    podset = main(builder.build())
    assert podset.requests == tuple(sorted(want.items()))


def test_claims_placement_and_tolerations() -> None:
    podset = main(
        Job()
        .container({"cpu": 1})
        .claim("gpu", template="single-gpu")
        .claim("shared", claim="team-slice")
        .node_selector({"zone": "b", "cloud.google.com/gke-accelerator": "nvidia-tesla-h100"})
        .affinity_term(("gpu", "In", ["h100", "a100"]), ("spot", "DoesNotExist", []))
        .affinity_term(("gpu-mem", "Gt", ["40"]))
        .toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
        .build()
    )
    assert podset.claims == (
        ClaimRef("gpu", resource_claim_template_name="single-gpu"),
        ClaimRef("shared", resource_claim_name="team-slice"),
    )
    assert podset.node_selector == (
        ("cloud.google.com/gke-accelerator", "nvidia-tesla-h100"),
        ("zone", "b"),
    )
    assert podset.required_affinity == (
        NodeSelectorTerm(
            (
                NodeSelectorRequirement("gpu", "In", ("h100", "a100")),
                NodeSelectorRequirement("spot", "DoesNotExist"),
            )
        ),
        NodeSelectorTerm((NodeSelectorRequirement("gpu-mem", "Gt", ("40",)),)),
    )
    assert podset.tolerations == (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),)


CREATION: list[tuple[str, Job, float]] = [
    (
        "annotation-wins",
        Job()
        .annotation("kuota.dev/created-at", "17.25")
        .set("metadata.creationTimestamp", "2026-01-01T00:00:00Z"),
        17.25,
    ),
    ("annotation-number", Job().annotation("kuota.dev/created-at", 3), 3.0),
    ("timestamp", Job().set("metadata.creationTimestamp", "2026-01-01T00:00:00Z"), 1767225600.0),
    (
        "timestamp-offset",
        Job().set("metadata.creationTimestamp", "2026-01-01T01:00:00.5+01:00"),
        1767225600.5,
    ),
    ("event-time", Job(), 50.0),
]


@pytest.mark.parametrize(
    ("builder", "seconds"), [c[1:] for c in CREATION], ids=[c[0] for c in CREATION]
)
def test_creation_seconds(builder: Job, seconds: float) -> None:
    assert workload(builder.container({"cpu": 1}).build(), at=50.0).creation_seconds == seconds


@pytest.mark.parametrize(
    ("value", "active"), [(None, True), ("true", True), ("false", False), ("False", False)]
)
def test_active_annotation(value: str | None, active: bool) -> None:
    job = Job().container({"cpu": 1})
    if value is not None:
        job.annotation("kuota.dev/active", value)
    # spec.suspend is Kueue's lever, not the user's intent: it does not deactivate.
    assert workload(job.set("spec.suspend", True).build()).active is active


PS = "spec.template.spec"
JOB_ERRORS: list[tuple[str, Job, str, str]] = [
    ("no-containers", Job(), f"{PS}.containers", "at least one container"),
    ("no-spec", Job().drop("spec"), "spec", "required"),
    ("template-not-mapping", Job().set("spec.template", []), "spec.template", "mapping"),
    (
        "parallelism-huge",
        Job().container({"cpu": 1}).parallelism(2_000_000),
        "spec.parallelism",
        "at most 100000",
    ),
    (
        "parallelism-negative",
        Job().container({"cpu": 1}).parallelism(-1),
        "spec.parallelism",
        "at least 0",
    ),
    (
        "parallelism-string",
        Job().container({"cpu": 1}).parallelism("4"),
        "spec.parallelism",
        "integer",
    ),
    (
        "parallelism-boolean",
        Job().container({"cpu": 1}).parallelism(True),
        "spec.parallelism",
        "integer",
    ),
    (
        "parallelism-fraction",
        Job().container({"cpu": 1}).parallelism(2.5),
        "spec.parallelism",
        "integer",
    ),
    (
        "completions-negative",
        Job().container({"cpu": 1}).completions(-3),
        "spec.completions",
        "at least 0",
    ),
    (
        "request-negative",
        Job().container({"cpu": "-1"}),
        f"{PS}.containers[0].resources.requests[cpu]",
        "negative",
    ),
    (
        "request-absurd",
        Job().container({"memory": "99999999Ei"}),
        f"{PS}.containers[0].resources.requests[memory]",
        "absurd",
    ),
    (
        "request-garbage",
        Job().container({"cpu": "two"}),
        f"{PS}.containers[0].resources.requests[cpu]",
        "not a valid",
    ),
    (
        "request-list",
        Job().container({"cpu": [1]}),
        f"{PS}.containers[0].resources.requests[cpu]",
        "number or string",
    ),
    (
        "requests-not-mapping",
        Job().container().set(f"{PS}.containers[0].resources.requests", "lots"),
        f"{PS}.containers[0].resources.requests",
        "mapping",
    ),
    (
        "request-above-limit",
        Job().container({"cpu": 4}, {"cpu": 2}),
        f"{PS}.containers[0].resources.requests[cpu]",
        "limit",
    ),
    (
        "limit-negative",
        Job().container(limits={"nvidia.com/gpu": "-1"}),
        f"{PS}.containers[0].resources.limits[nvidia.com/gpu]",
        "negative",
    ),
    (
        "bad-resource-name",
        Job().container({"gpu!": 1}),
        f"{PS}.containers[0].resources.requests[gpu!]",
        "qualified name",
    ),
    (
        "init-restart-policy",
        Job()
        .container({"cpu": 1})
        .init_container({"cpu": 1})
        .set(f"{PS}.initContainers[0].restartPolicy", "Never"),
        f"{PS}.initContainers[0].restartPolicy",
        "unsupported",
    ),
    (
        "overhead-negative",
        Job().container({"cpu": 1}).overhead({"cpu": "-1"}),
        f"{PS}.overhead[cpu]",
        "negative",
    ),
    (
        "container-not-mapping",
        Job().set(f"{PS}.containers", ["busybox"]),
        f"{PS}.containers[0]",
        "mapping",
    ),
    (
        "claim-both",
        Job().container().claim("gpu", template="t", claim="c"),
        f"{PS}.resourceClaims[0]",
        "exactly one",
    ),
    ("claim-neither", Job().container().claim("gpu"), f"{PS}.resourceClaims[0]", "exactly one"),
    (
        "claim-duplicate",
        Job().container().claim("gpu", template="a").claim("gpu", template="b"),
        f"{PS}.resourceClaims[1].name",
        "duplicate",
    ),
    (
        "claim-bad-name",
        Job().container().claim("GPU", template="a"),
        f"{PS}.resourceClaims[0].name",
        "DNS-1123",
    ),
    (
        "affinity-no-terms",
        Job()
        .container()
        .set(f"{PS}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", {}),
        f"{PS}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        "at least one",
    ),
    (
        "affinity-bad-operator",
        Job().container().affinity_term(("gpu", "Like", ["h"])),
        f"{PS}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator",
        "unsupported",
    ),
    (
        "affinity-Gt-two-values",
        Job().container().affinity_term(("mem", "Gt", ["1", "2"])),
        f"{PS}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
        "one integer",
    ),
    (
        "toleration-bad-operator",
        Job().container().toleration(key="a", operator="Near"),
        f"{PS}.tolerations[0].operator",
        "unsupported",
    ),
    (
        "node-selector-list",
        Job().container().set(f"{PS}.nodeSelector", ["zone=b"]),
        f"{PS}.nodeSelector",
        "mapping",
    ),
    (
        "created-at-garbage",
        Job().container().annotation("kuota.dev/created-at", "yesterday"),
        "metadata.annotations[kuota.dev/created-at]",
        "not a number",
    ),
    (
        "created-at-nan",
        Job().container().annotation("kuota.dev/created-at", "nan"),
        "metadata.annotations[kuota.dev/created-at]",
        "finite",
    ),
    (
        "timestamp-garbage",
        Job().container().set("metadata.creationTimestamp", "last tuesday"),
        "metadata.creationTimestamp",
        "RFC 3339",
    ),
    (
        "timestamp-no-such-day",
        Job().container().set("metadata.creationTimestamp", "2026-02-30T00:00:00Z"),
        "metadata.creationTimestamp",
        "no such date",
    ),
    (
        "active-garbage",
        Job().container().annotation("kuota.dev/active", "maybe"),
        "metadata.annotations[kuota.dev/active]",
        "true",
    ),
    (
        "queue-name-bad",
        Job(queue="Training Queue").container(),
        "metadata.labels[kueue.x-k8s.io/queue-name]",
        "DNS-1123",
    ),
    (
        "priority-not-string",
        Job().container().label("kueue.x-k8s.io/priority-class", 5),  # type: ignore[arg-type]
        "metadata.labels[kueue.x-k8s.io/priority-class]",
        "string",
    ),
    ("name-missing", Job().container().drop("metadata.name"), "metadata.name", "required"),
    ("namespace-bad", Job(namespace="Team A").container(), "metadata.namespace", "DNS-1123 label"),
]


@pytest.mark.parametrize(
    ("builder", "field", "fragment"), [c[1:] for c in JOB_ERRORS], ids=[c[0] for c in JOB_ERRORS]
)
def test_job_validation(builder: Job, field: str, fragment: str) -> None:
    manifest = builder.build()
    result = parse_job(manifest, at=0)
    assert isinstance(result, ValidationError), result
    assert result.ref.kind == "Job"
    assert (result.field, fragment in result.message) == (field, True), result.message
    assert parse_object(manifest) == result


def test_validation_error_names_the_job() -> None:
    result = parse_job(Job(namespace="team-b").parallelism(-1).container().build(), at=0)
    assert isinstance(result, ValidationError)
    assert result.ref == ObjectRef("Job", "train", "team-b")
    assert str(result).startswith("Job team-b/train: spec.parallelism: ")


def test_parse_job_rejects_other_kinds() -> None:
    result = parse_job(
        {"kind": "Pod", "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/queue-name": "q"}}},
        at=0,
    )
    assert isinstance(result, ValidationError)
    assert result.field == "kind"
