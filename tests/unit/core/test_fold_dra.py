"""DRA through the fold: charged claims, DRA reasons, and retries when the
inventory or the configuration changes (article 000's device-count quota)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from core_builders import (
    Driver,
    admitted,
    claim_template,
    class_mapping,
    configuration,
    cq,
    device_class,
    flavor,
    job,
    last,
    lq,
)


def gpu_claim_job(name: str, pods: int = 1, template: str = "single-gpu") -> Any:
    return job("team-a", name).queue("lq").claim("gpu", template).parallelism(pods)


def cluster(*extra: Any) -> Driver:
    d = Driver()
    d.apply(
        configuration(class_mapping("nvidia-gpu", "gpu.nvidia.com")),
        device_class("gpu.nvidia.com"),
        flavor("default"),
        cq("cq").flavor("default", {"nvidia-gpu": 4}),
        lq("team-a", "lq", "cq"),
        *extra,
    )
    return d


def test_claims_are_charged_per_pod_times_count() -> None:
    d = cluster(claim_template("team-a", "single-gpu", "gpu.nvidia.com"))
    out = d.apply(gpu_claim_job("a", pods=3), gpu_claim_job("b", pods=2))
    assert admitted(out) == ["team-a/a"]
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "3"}}
    assert last(out, "Inadmissible").reason == "InsufficientQuota"


def test_a_missing_template_is_retried_when_it_appears() -> None:
    d = cluster()
    out = d.apply(gpu_claim_job("a"))
    assert [(x.type, x.reason) for x in out] == [("Inadmissible", "UnknownResourceClaimTemplate")]
    out = d.apply(claim_template("team-a", "single-gpu", "gpu.nvidia.com"))
    assert admitted(out) == ["team-a/a"]


def test_an_unmapped_device_class_is_retried_when_the_configuration_changes() -> None:
    d = cluster(device_class("mig.nvidia.com"), claim_template("team-a", "mig", "mig.nvidia.com"))
    out = d.apply(gpu_claim_job("a", template="mig"))
    assert [(x.type, x.reason) for x in out] == [("Inadmissible", "DeviceClassNotMapped")]
    out = d.apply(configuration(class_mapping("nvidia-gpu", "gpu.nvidia.com", "mig.nvidia.com")))
    assert admitted(out) == ["team-a/a"]


def test_a_template_change_recharges_pending_workloads() -> None:
    d = cluster(claim_template("team-a", "single-gpu", "gpu.nvidia.com", count=8))
    d.apply(gpu_claim_job("a"))
    assert d.state("team-a/a") == "Inadmissible"
    out = d.apply(claim_template("team-a", "single-gpu", "gpu.nvidia.com", count=2))
    assert admitted(out) == ["team-a/a"]
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "2"}}


def test_an_admitted_workload_keeps_its_charge_when_the_template_changes() -> None:
    d = cluster(claim_template("team-a", "single-gpu", "gpu.nvidia.com", count=2))
    d.apply(gpu_claim_job("a"))
    assert d.apply(claim_template("team-a", "single-gpu", "gpu.nvidia.com", count=1)) == []
    assert d.usage("cq") == {("default", "nvidia-gpu"): 2000}


def test_an_invalid_dra_object_is_rejected() -> None:
    d = cluster()
    bad = claim_template("team-a", "t", "gpu.nvidia.com")
    bad["spec"] = "nope"
    out = d.apply(bad)
    assert [(x.type, x.reason, x.object) for x in out] == [
        ("Rejected", "InvalidObject", "ResourceClaimTemplate team-a/t")
    ]


def test_deleting_the_configuration_falls_back_to_defaults() -> None:
    d = cluster(claim_template("team-a", "single-gpu", "gpu.nvidia.com"))
    d.delete("Configuration", "")
    out = d.apply(gpu_claim_job("a"))
    assert last(out, "Inadmissible").reason == "DeviceClassNotMapped"


def test_a_fold_that_evaluated_cel_selectors_pickles() -> None:
    d = cluster(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "node-a"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "pool": {"name": "node-a", "generation": 0, "resourceSliceCount": 1},
                "nodeName": "node-a",
                "devices": [{"name": "gpu-0", "attributes": {"productName": {"string": "A100"}}}],
            },
        }
    )
    template = claim_template("team-a", "a100", "gpu.nvidia.com")
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    request["selectors"] = [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'A100'"}}
    ]
    d.apply(template)
    assert admitted(d.apply(gpu_claim_job("a", template="a100"))) == ["team-a/a"]
    copies = [copy.deepcopy(d.fold), pickle.loads(pickle.dumps(d.fold))]
    # The copies drop their CEL contexts and rebuild them: they must go on deciding
    # exactly like the original.
    expected = d.apply(gpu_claim_job("b", template="a100"))
    assert expected, "the second job must be decided (admitted or held)"
    for c in copies:
        assert c.apply(d.events[-1], offset=len(d.events) - 1) == expected
