"""Quota AND a placement (#17) with the rules beyond class and selectors: a
device with an untolerated taint is skipped, a claim's matchAttribute (or
distinctAttribute) constraint changes where (and whether) a workload is placed, an adminAccess
request needs a device on the node but holds none."""

from __future__ import annotations

from typing import Any

from builders import manifests
from core_builders import admitted, last
from test_fold_node_placement import GPU, cluster, gpu_job, gpus

PARENT = f"{GPU}/parent"
UNHEALTHY = {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}


def template(name: str, count: int = 2, **exactly: Any) -> dict[str, Any]:
    """A template of one request ``gpu`` of ``count`` devices of the GPU class,
    with extra ``exactly`` fields (tolerations, adminAccess)."""
    request = manifests.device_request("gpu", device_class=GPU, count=count)
    request["exactly"].update(exactly)
    return manifests.resource_claim_template(name, namespace="team-a", requests=[request])


def same_parent(name: str) -> dict[str, Any]:
    out = template(name)
    out["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": PARENT}]
    return out


def migs(node: str, *parents: str) -> dict[str, Any]:
    devices = [
        manifests.device(f"mig-{i}", attributes={"parent": p}) for i, p in enumerate(parents)
    ]
    return manifests.resource_slice(node, devices=devices, node=node)


def distinct_parents(name: str) -> dict[str, Any]:
    out = template(name)
    out["spec"]["spec"]["devices"]["constraints"] = [{"distinctAttribute": PARENT}]
    return out


def test_a_distinct_attribute_constraint_moves_the_pod_and_then_refuses_it() -> None:
    d = cluster(
        migs("node-a", "gpu-0", "gpu-0"),
        migs("node-b", "gpu-0", "gpu-1"),
        distinct_parents("apart"),
    )
    out = d.apply(gpu_job("first", template="apart"))
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}  # node-a's two share gpu-0
    out = d.apply(gpu_job("second", template="apart"))
    assert admitted(out) == []
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message == (
        f"no node in flavor default can take pod 1 of 1: needs 2 devices of class {GPU}, "
        f"all with distinct {PARENT}; node-a has 2 free (1 distinct {PARENT}), "
        f"node-b has 0 free (0 distinct {PARENT})"
    )
    out = d.finish("team-a/first")
    assert admitted(out) == ["team-a/second"]


def test_a_tainted_device_is_skipped_unless_the_claim_tolerates_it() -> None:
    tainted = manifests.device("gpu-0")
    tainted["taints"] = [UNHEALTHY]
    node_a = manifests.resource_slice(
        "node-a", devices=[tainted, manifests.device("gpu-1")], node="node-a"
    )
    d = cluster(node_a, gpus("node-b", 1))
    out = d.apply(gpu_job("big", template="two"))
    assert admitted(out) == []
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message == (
        f"no node in flavor default can take pod 1 of 1: needs 2 devices of class {GPU}; "
        "node-a has 1 free, node-b has 1 free"
    )
    tolerant = [{"key": "example.com/unhealthy", "operator": "Exists"}]
    d.apply(template("tolerant", tolerations=tolerant))
    out = d.apply(gpu_job("ok", template="tolerant"))
    assert admitted(out) == ["team-a/ok"]
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}


def test_a_match_attribute_constraint_moves_the_pod_and_then_refuses_it() -> None:
    d = cluster(
        migs("node-a", "gpu-0", "gpu-1"), migs("node-b", "gpu-0", "gpu-0"), same_parent("pair")
    )
    out = d.apply(gpu_job("first", template="pair"))
    assert admitted(out) == ["team-a/first"]
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}  # node-a's two differ
    out = d.apply(gpu_job("second", template="pair"))
    assert admitted(out) == []
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message == (
        f"no node in flavor default can take pod 1 of 1: needs 2 devices of class {GPU}, "
        f"all with the same {PARENT}; node-a has 2 free (at most 1 with the same {PARENT}), "
        f"node-b has 0 free (at most 0 with the same {PARENT})"
    )
    out = d.apply(gpu_job("loose", template="two"))  # the same request, unconstrained
    assert admitted(out) == ["team-a/loose"]
    assert last(out, "Admitted", "team-a/loose").nodes == {"main": ["node-a"]}


def test_an_admin_access_request_needs_a_device_but_holds_none() -> None:
    d = cluster(gpus("node-a", 1), template("watch", count=1, adminAccess=True))
    out = d.apply(gpu_job("user", template="one"))
    assert admitted(out) == ["team-a/user"]
    # node-a's only GPU is held for team-a/user; an admin claim may still use it
    out = d.apply(gpu_job("monitor", template="watch"))
    assert admitted(out) == ["team-a/monitor"]
    assert last(out, "Admitted", "team-a/monitor").nodes == {"main": ["node-a"]}
    assert d.usage("cq") == {("default", "nvidia-gpu"): 1000}  # admin access charges nothing
    d.finish("team-a/user")
    # the monitor holds nothing: the GPU is free again for a regular claim
    out = d.apply(gpu_job("next", template="one"))
    assert admitted(out) == ["team-a/next"]


def test_an_admin_access_request_without_a_device_waits_for_a_node() -> None:
    d = cluster(
        manifests.resource_slice("node-a", devices=[], node="node-a"),
        template("watch", count=1, adminAccess=True),
    )
    out = d.apply(gpu_job("monitor", template="watch"))
    assert admitted(out) == []
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    assert f"needs 1 device of class {GPU} (admin access)" in verdict.message
    out = d.apply(gpus("node-b", 1))
    assert admitted(out) == ["team-a/monitor"]


# ------------------------------------------------------------------ DeviceTaintRules


def test_a_device_taint_rule_keeps_its_devices_out_until_it_is_deleted() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 2))
    # node-a's pool is tainted by an administrator's rule: the Job goes to node-b
    d.apply(manifests.device_taint_rule("drain-a", selector={"pool": "node-a"}))
    out = d.apply(gpu_job("first", template="two"))
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}
    out = d.apply(gpu_job("second", template="two"))
    assert admitted(out) == []
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message.endswith("node-b has 0 free, 1 other node has none"), verdict.message
    out = d.delete("DeviceTaintRule", "drain-a")
    assert admitted(out) == ["team-a/second"]
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}


def test_a_rule_selects_by_driver_pool_and_device_and_is_tolerated_like_a_slices() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 2))
    # one device of node-a, one of node-b: no node has 2 untainted
    d.apply(
        manifests.device_taint_rule(
            "a0", selector={"driver": manifests.GPU_DRIVER, "pool": "node-a", "device": "gpu-0"}
        ),
        manifests.device_taint_rule("b1", selector={"device": "gpu-1", "pool": "node-b"}),
        # another driver's devices, and a rule without a selector: neither taints these
        manifests.device_taint_rule("other", selector={"driver": "other.example.com"}),
        manifests.device_taint_rule("none"),
    )
    out = d.apply(gpu_job("big", template="two"))
    assert admitted(out) == []
    assert "node-a has 1 free, node-b has 1 free" in last(out, "Inadmissible").message
    tolerant = [{"key": "example.com/maintenance", "operator": "Exists"}]
    d.apply(template("tolerant", tolerations=tolerant))
    out = d.apply(gpu_job("ok", template="tolerant"))
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}


def test_an_empty_selector_taints_every_device_and_effect_none_taints_nothing() -> None:
    d = cluster(gpus("node-a", 1))
    d.apply(manifests.device_taint_rule("watch", effect="None", selector={}))
    out = d.apply(gpu_job("a"))
    assert admitted(out) == ["team-a/a"]
    d.finish("team-a/a")
    d.apply(manifests.device_taint_rule("all", selector={}))
    out = d.apply(gpu_job("b"))
    assert admitted(out) == []
    assert last(out, "Inadmissible").reason == "NoNodePlacement"
