"""Issue #8's bad-input list, through the fold: each gives a reason, nothing stops.

Every case ends with a good workload decided in the same journal right after the
bad input: one bad object never delays another workload. The rules are in
docs/design/bad-input.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from bad_input_builders import (
    FLAVOR,
    GPU,
    NS,
    a100,
    job,
    journal,
    rejected,
    setup_gpu_queue,
)
from builders.driver import Driver
from builders.manifests import (
    cluster_queue,
    cohort,
    device_class,
    flavor,
    local_queue,
    resource_claim_template,
    resource_slice,
)

from kuota.audit.explain import Explainer, relevant
from kuota.audit.replay import JournalRecord
from kuota.events.schema import ObjectUpserted

# --------------------------------------------------------------------------- helpers


def good_job_admitted(j: Driver, name: str = "good") -> None:
    """A plain cpu Job right after the bad input is admitted by that very event."""
    out = j.apply(job(name, requests={"cpu": "1"}))
    assert [(d.type, d.workload) for d in out] == [("Admitted", f"team-a/{name}")]


def only_rejected(out: list[Any]) -> tuple[str, str, str]:
    got = rejected(out)
    assert len(got) == 1, out
    obj, reason, message = got[0]
    assert obj and reason and message
    return obj, reason, message


# --------------------------------------------------------------------------- malformed manifests


def _cq_with(spec: Any) -> dict[str, Any]:
    m = cluster_queue("bad-cq", quotas={"cpu": 1}, flavor=FLAVOR)
    m["spec"] = spec
    return m


def _job_with(**spec: Any) -> dict[str, Any]:
    m = job("bad-job", requests={"cpu": "1"})
    m["spec"].update(spec)
    return m


MALFORMED = [
    ("cq spec a string", _cq_with("x"), "ClusterQueue bad-cq", "spec"),
    (
        "cq groups a mapping",
        _cq_with({"resourceGroups": {"a": 1}}),
        "ClusterQueue bad-cq",
        "spec.resourceGroups",
    ),
    (
        "cq unknown strategy",
        _cq_with({"queueingStrategy": "Random"}),
        "ClusterQueue bad-cq",
        "spec.queueingStrategy",
    ),
    ("job template a number", _job_with(template=5), "Job team-a/bad-job", "spec.template"),
    (
        "job no containers",
        _job_with(template={"spec": {"containers": []}}),
        "Job team-a/bad-job",
        "containers",
    ),
    (
        "job parallelism text",
        _job_with(parallelism="many"),
        "Job team-a/bad-job",
        "spec.parallelism",
    ),
    (
        "local queue without spec",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "x", "namespace": "team-a"},
        },
        "LocalQueue team-a/x",
        "spec",
    ),
    (
        "cohort parent a number",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": "c"},
            "spec": {"parentName": 7},
        },
        "Cohort c",
        "spec.parentName",
    ),
    (
        "unknown apiVersion",
        {
            "apiVersion": "kueue.x-k8s.io/v9",
            "kind": "ClusterQueue",
            "metadata": {"name": "v9"},
            "spec": {},
        },
        "ClusterQueue v9",
        "apiVersion",
    ),
    (
        "device class selectors a string",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "dc"},
            "spec": {"selectors": "x"},
        },
        "DeviceClass dc",
        "spec.selectors",
    ),
    (
        "configuration mappings a number",
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "metadata": {"name": "cfg"},
            "resources": {"deviceClassMappings": 3},
        },
        "Configuration cfg",
        "resources.deviceClassMappings",
    ),
]


@pytest.mark.parametrize(
    ("name", "manifest", "obj", "field"), MALFORMED, ids=[c[0] for c in MALFORMED]
)
def test_a_malformed_manifest_is_rejected_naming_object_and_field(
    name: str, manifest: dict[str, Any], obj: str, field: str
) -> None:
    j = journal()
    setup_gpu_queue(j)
    got_obj, reason, message = only_rejected(j.apply(manifest))
    assert (got_obj, reason) == (obj, "InvalidObject")
    assert f"{obj}: " in message and field in message, message
    good_job_admitted(j)


def test_a_malformed_update_keeps_the_valid_version_in_force() -> None:
    j = journal()
    setup_gpu_queue(j)
    only_rejected(j.apply(_cq_with({"resourceGroups": "broken"}) | {"metadata": {"name": "cq"}}))
    good_job_admitted(j)  # cq keeps its last valid quota


# --------------------------------------------------------------------------- CEL


CEL = [
    ("does not parse", "device.attributes['gpu.nvidia.com'].type ==", "compilation failed"),
    ("unbalanced", "size(device.driver", "compilation failed"),
    ("does not type-check", "device.driver + 1 == 2", "failed on device"),
    ("not a bool", "device.driver", "must evaluate to bool"),
    ("missing attribute", "device.attributes['gpu.nvidia.com'].nope == 'x'", "failed on device"),
]


@pytest.mark.parametrize(("name", "expression", "why"), CEL, ids=[c[0] for c in CEL])
def test_bad_cel_in_a_claim_is_an_inadmissible_reason(name: str, expression: str, why: str) -> None:
    j = journal()
    setup_gpu_queue(j)
    out = j.apply(
        resource_claim_template(
            "bad", namespace=NS, device_class="gpu.nvidia.com", cel=[expression]
        ),
        job("cel", claims={"gpu": "bad"}),
    )
    assert [(d.type, d.workload, d.reason) for d in out] == [
        ("Inadmissible", "team-a/cel", "InvalidCEL")
    ]
    assert why in (out[0].message or "") and expression in (out[0].message or "")
    assert "ResourceClaimTemplate team-a/bad" in (out[0].message or "")
    good_job_admitted(j)


@pytest.mark.parametrize(("name", "expression", "why"), CEL, ids=[c[0] for c in CEL])
def test_bad_cel_in_a_device_class_is_an_inadmissible_reason(
    name: str, expression: str, why: str
) -> None:
    j = journal()
    setup_gpu_queue(j, extra_classes=("bad.class",))
    out = j.apply(
        device_class("bad.class", cel=[expression]),
        resource_claim_template(
            "t",
            namespace=NS,
            device_class="bad.class",
            cel=["device.attributes['gpu.nvidia.com'].productName != ''"],
        ),
        job("cel", claims={"gpu": "t"}),
    )
    assert rejected(out) == []  # the class is what the cluster holds; using it is what fails
    assert [(d.type, d.workload, d.reason) for d in out] == [
        ("Inadmissible", "team-a/cel", "InvalidCEL")
    ]
    assert why in (out[0].message or "")
    good_job_admitted(j)


def test_cel_that_does_not_compile_fails_even_where_devices_are_only_counted() -> None:
    """A whole-device claim without selectors is charged by count (Kueue's model) and
    evaluates nothing; a class whose CEL does not even compile still fails it. A
    runtime error (cel-rust type-checks at run time) surfaces when devices are
    evaluated: request selectors or counter charging (docs/design/bad-input.md)."""
    j = journal()
    setup_gpu_queue(j, extra_classes=("broken.class", "odd.class"))
    out = j.apply(
        device_class("broken.class", cel=["device.driver =="]),
        resource_claim_template("broken", namespace=NS, device_class="broken.class"),
        job("broken", claims={"gpu": "broken"}),
    )
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "InvalidCEL")]
    out = j.apply(
        device_class("odd.class", cel=["device.driver + 1 == 2"]),
        resource_claim_template("odd", namespace=NS, device_class="odd.class"),
        job("odd", claims={"gpu": "odd"}),
    )
    assert [(d.type, d.usage) for d in out] == [("Admitted", {"default": {"nvidia-gpu": "1"}})]


# --------------------------------------------------------------------------- huge / negative


@pytest.mark.parametrize("amount", ["1e30", "-1", "99999999999Ei", 1e30, -1, "NaN", float("inf")])
def test_a_huge_or_negative_request_rejects_the_job(amount: Any) -> None:
    j = journal()
    setup_gpu_queue(j)
    obj, reason, message = only_rejected(j.apply(job("huge", requests={"cpu": amount})))
    assert (obj, reason) == ("Job team-a/huge", "InvalidObject")
    assert "requests[cpu]" in message
    assert any(
        w in message
        for w in ("absurdly large", "must not be negative", "not a valid", "not finite")
    )
    assert j.state("team-a/huge") is None  # never queued, never charged
    good_job_admitted(j)


@pytest.mark.parametrize("amount", ["1e30", "-1", "99999999999Ei", 1e30, -1])
def test_a_huge_or_negative_quota_rejects_the_queue_and_keeps_the_old_one(amount: Any) -> None:
    j = journal()
    setup_gpu_queue(j)
    obj, reason, message = only_rejected(
        j.apply(cluster_queue("cq", quotas={"cpu": amount}, flavor=FLAVOR))
    )
    assert (obj, reason) == ("ClusterQueue cq", "InvalidObject")
    assert "nominalQuota" in message
    obj, _, message = only_rejected(j.apply(cohort("pool", quotas={"cpu": amount}, flavor=FLAVOR)))
    assert obj == "Cohort pool" and "nominalQuota" in message
    good_job_admitted(j)


def test_parallelism_in_the_millions_rejects_the_job() -> None:
    j = journal()
    setup_gpu_queue(j)
    obj, _, message = only_rejected(
        j.apply(job("wide", requests={"cpu": "1m"}, parallelism=10_000_000))
    )
    assert obj == "Job team-a/wide" and "spec.parallelism" in message and "100000" in message
    good_job_admitted(j)


def test_a_device_count_in_the_millions_is_inadmissible() -> None:
    j = journal()
    setup_gpu_queue(j)
    out = j.apply(
        resource_claim_template(
            "many", namespace=NS, device_class="gpu.nvidia.com", count=5_000_000
        ),
        job("many", claims={"gpu": "many"}),
    )
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "InvalidRequest")]
    assert "5000000 devices requested" in (out[0].message or "")
    good_job_admitted(j)


def test_a_negative_device_count_rejects_the_template_and_the_job_waits_for_it() -> None:
    j = journal()
    setup_gpu_queue(j)
    out = j.apply(
        resource_claim_template("neg", namespace=NS, device_class="gpu.nvidia.com", count=-1),
        job("neg", claims={"gpu": "neg"}),
    )
    obj, _, message = only_rejected(out)
    assert obj == "ResourceClaimTemplate team-a/neg" and "exactly.count" in message
    assert [(d.type, d.reason) for d in out if d.type == "Inadmissible"] == [
        ("Inadmissible", "UnknownResourceClaimTemplate")
    ]
    good_job_admitted(j)


def test_an_extended_resource_count_in_the_millions_is_inadmissible() -> None:
    j = journal()
    j.apply(
        flavor(FLAVOR, spec={}),
        cluster_queue("cq", quotas={GPU: 8, "cpu": 8}, flavor=FLAVOR),
        local_queue("lq", namespace=NS, cluster_queue="cq"),
    )
    out = j.apply(job("wide", requests={GPU: 5_000_000}))
    assert [(d.type, d.workload) for d in out] == [("Inadmissible", "team-a/wide")]
    assert out[0].reason and out[0].message
    good_job_admitted(j)


# --------------------------------------------------------------------------- ResourceSlices


def test_the_same_device_twice_in_one_pool_rejects_the_second_slice() -> None:
    j = journal()
    setup_gpu_queue(j)
    out = j.apply(
        resource_slice("n1-a", pool="n1", slices=2, devices=[a100("gpu-0")]),
        resource_slice("n1-b", pool="n1", slices=2, devices=[a100("gpu-0")]),
    )
    obj, _, message = only_rejected(out)
    assert obj == "ResourceSlice n1-b"
    assert "device 'gpu-0'" in message and "also published by ResourceSlice 'n1-a'" in message
    good_job_admitted(j)


def test_counters_consumed_beyond_the_shared_set_ignore_the_pool_with_a_rejection() -> None:
    j = journal()
    setup_gpu_queue(j, memory="400Gi")
    # Two slices of one pool: the counters in one, a device consuming more in the other.
    out = j.apply(
        resource_slice(
            "n2-counters",
            pool="n2",
            slices=2,
            counters={"gpu-0-cs": {"memory": "40Gi"}},
            devices=[],
        ),
        resource_slice(
            "n2-devices", pool="n2", slices=2, devices=[a100("mig-9", kind="mig", memory="80Gi")]
        ),
    )
    obj, _, message = only_rejected(out)
    assert obj == "ResourceSlice n2-devices"
    assert "pool 'n2'" in message and "ignored" in message and "consumes more 'memory'" in message
    # Charging stays safe: a MIG slice is charged the 10Gi of the valid pool's device,
    # never the contradicting 80Gi; the ignored pool's device is never counted.
    out = j.apply(
        resource_claim_template("mig", namespace=NS, device_class="mig.nvidia.com"),
        job("mig", claims={"gpu": "mig"}),
    )
    assert [(d.type, d.usage) for d in out] == [("Admitted", {"default": {"gpu-memory": "10Gi"}})]
    out = j.apply(
        resource_claim_template("two-migs", namespace=NS, device_class="mig.nvidia.com", count=2),
        job("two", claims={"gpu": "two-migs"}),
    )
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "InsufficientDevices")]
    assert "1 device(s)" in (out[0].message or "")
    good_job_admitted(j)


def test_a_device_consuming_beyond_its_own_slice_is_rejected() -> None:
    j = journal()
    setup_gpu_queue(j)
    out = j.apply(
        resource_slice(
            "n3",
            pool="n3",
            counters={"gpu-0-cs": {"memory": "40Gi"}},
            devices=[a100("gpu-0", memory="80Gi")],
        )
    )
    obj, _, message = only_rejected(out)
    assert obj == "ResourceSlice n3" and "consumes more than counter set" in message
    good_job_admitted(j)


def test_the_same_device_name_in_two_pools_is_two_devices() -> None:
    """A device is (driver, pool, name), as in Kubernetes: not a contradiction."""
    j = journal()
    setup_gpu_queue(j)
    out = j.apply(resource_slice("node-1", pool="node-1", devices=[a100("gpu-0")]))
    assert rejected(out) == []
    out = j.apply(
        resource_claim_template(
            "two",
            namespace=NS,
            device_class="gpu.nvidia.com",
            cel=["device.attributes['gpu.nvidia.com'].productName == 'A100'"],
            count=2,
        ),
        job("two", claims={"gpu": "two"}),
    )
    assert [d.type for d in out] == ["Admitted"]


# --------------------------------------------------------------------------- DeviceClasses


def test_an_unknown_device_class_is_inadmissible_until_it_exists() -> None:
    j = journal()
    setup_gpu_queue(j, extra_classes=("late.class",))
    out = j.apply(
        resource_claim_template("late", namespace=NS, device_class="late.class"),
        job("late", claims={"gpu": "late"}),
    )
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "UnknownDeviceClass")]
    assert 'DeviceClass "late.class" not found' in (out[0].message or "")
    good_job_admitted(j)
    out = j.apply(device_class("late.class", cel=["device.driver == 'gpu.nvidia.com'"]))
    assert [(d.type, d.workload) for d in out] == [("Admitted", "team-a/late")]


def test_an_extended_resource_of_an_unknown_device_class_is_inadmissible() -> None:
    """``deviceclass.resource.kubernetes.io/<class>`` without that class is a plain
    extended resource, as for the scheduler: no quota covers it."""
    j = journal()
    setup_gpu_queue(j)
    out = j.apply(job("ext", requests={"deviceclass.resource.kubernetes.io/nope.class": 1}))
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "ResourceNotCovered")]
    assert "deviceclass.resource.kubernetes.io/nope.class" in (out[0].message or "")
    good_job_admitted(j)


def test_a_device_class_no_mapping_names_is_inadmissible() -> None:
    j = journal()
    setup_gpu_queue(j)
    out = j.apply(
        resource_claim_template("nope", namespace=NS, device_class="nope.class"),
        job("nope", claims={"gpu": "nope"}),
    )
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "DeviceClassNotMapped")]
    good_job_admitted(j)


# --------------------------------------------------------------------------- circular cohorts


def _cycle_rig() -> Driver:
    j = journal()
    j.apply(
        flavor(FLAVOR, spec={}),
        cohort("a", parent="b"),
        cohort("b", parent="c"),
        cluster_queue("in-cycle", quotas={"cpu": 4}, flavor=FLAVOR, cohort="a"),
        local_queue("lq-cycle", namespace=NS, cluster_queue="in-cycle"),
        cluster_queue("cq", quotas={"cpu": 4}, flavor=FLAVOR),
        local_queue("lq", namespace=NS, cluster_queue="cq"),
        cluster_queue("beside", quotas={"cpu": 4}, flavor=FLAVOR, cohort="other"),
        local_queue("lq-beside", namespace=NS, cluster_queue="beside"),
    )
    return j


def test_a_cohort_cycle_is_rejected_naming_the_cycle_and_stops_only_its_queues() -> None:
    j = _cycle_rig()
    running = j.apply(job("running", queue="lq-cycle", requests={"cpu": "1"}))
    assert [d.type for d in running] == ["Admitted"]
    out = j.apply(cohort("c", parent="a"))
    obj, reason, message = only_rejected(out)
    assert (obj, reason) == ("Cohort c", "CohortCycle")
    assert "(c -> a -> b -> c)" in message
    # Its queues admit nothing and say why; what was admitted stays admitted.
    out = j.apply(job("stuck", queue="lq-cycle", requests={"cpu": "1"}))
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "CohortCycle")]
    assert "ClusterQueue in-cycle is inactive: Cohort a is in a cycle of cohorts" in (
        out[0].message or ""
    )
    assert j.state("team-a/running") == "Admitted"
    # Everything else carries on.
    good_job_admitted(j)
    out = j.apply(job("beside", queue="lq-beside", requests={"cpu": "1"}))
    assert [d.type for d in out] == ["Admitted"]
    # Breaking the cycle puts the pending version in force and frees the queue.
    out = j.apply(cohort("b"))
    assert [(d.type, d.workload) for d in out] == [("Admitted", "team-a/stuck")]
    assert j.fold._tree.cohort_parent("c") == "a"


def test_deleting_a_cohort_of_the_cycle_breaks_it() -> None:
    j = _cycle_rig()
    only_rejected(j.apply(cohort("c", parent="a")))
    j.apply(job("stuck", queue="lq-cycle", requests={"cpu": "1"}))
    out = j.delete("Cohort", "b")
    assert [(d.type, d.workload) for d in out] == [("Admitted", "team-a/stuck")]


def test_a_cluster_queue_moving_into_a_cycle_becomes_inactive() -> None:
    j = _cycle_rig()
    only_rejected(j.apply(cohort("c", parent="a")))
    out = j.apply(job("x", requests={"cpu": "1"}))
    assert [d.type for d in out] == ["Admitted"]
    j.apply(cluster_queue("cq", quotas={"cpu": 4}, flavor=FLAVOR, cohort="b"))
    out = j.apply(job("y", requests={"cpu": "1"}))
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "CohortCycle")]


# --------------------------------------------------------------------------- visibility


def test_kuota_explain_shows_why_a_malformed_job_is_not_queued() -> None:
    j = journal()
    setup_gpu_queue(j)
    j.apply(job("huge", requests={"cpu": "99999999999Ei"}))
    explainer = Explainer("team-a/huge", relevant("team-a/huge", j.decisions))
    for i, event in enumerate(j.events):
        # The steps' quota summaries need the journal's offsets only (objects elided).
        explainer.event(JournalRecord(i, ObjectUpserted(id=event.id, at=event.at, object={})))
    text = json.dumps(explainer.explain(), default=str)
    assert "Job team-a/huge" in text and "absurdly large" in text, text


def test_a_huge_bad_value_gives_a_short_rejection() -> None:
    """The message may quote the bad value; it is cut so the decision stays far
    below Kafka's record size limit (a decision too big to produce would stop
    admission on every restart)."""
    j = journal()
    setup_gpu_queue(j)
    m = cluster_queue("big", quotas={"cpu": 1}, flavor=FLAVOR)
    m["spec"]["queueingStrategy"] = "\u00e9" * 400_000
    obj, _, message = only_rejected(j.apply(m))
    assert obj == "ClusterQueue big" and "spec.queueingStrategy" in message
    assert len(message) < 2100 and message.endswith("more characters)")
    assert len(j.decisions[-1].model_dump_json().encode()) < 10_000
    good_job_admitted(j)


def test_a_huge_cel_expression_gives_a_bounded_inadmissible_message() -> None:
    """CEL longer than Kubernetes' limit is refused without being quoted whole."""
    j = journal()
    setup_gpu_queue(j)
    expression = "device.driver == '" + "x" * 600_000 + "' +"
    out = j.apply(
        resource_claim_template(
            "huge", namespace=NS, device_class="gpu.nvidia.com", cel=[expression]
        ),
        job("cel", claims={"gpu": "huge"}),
    )
    assert [(d.type, d.reason) for d in out] == [("Inadmissible", "InvalidCEL")]
    assert "600021 characters long, more than the limit of 10240" in (out[0].message or "")
    assert len(out[0].model_dump_json().encode()) < 2_000
    good_job_admitted(j)
