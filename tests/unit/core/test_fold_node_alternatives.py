"""Quota AND a placement for firstAvailable and allocationMode All (#17): the
alternative charged is the one placed, and All is charged and held as every
matching device of the node chosen."""

from __future__ import annotations

from typing import Any

from builders import manifests
from core_builders import (
    Driver,
    admitted,
    class_mapping,
    configuration,
    cq,
    device_class,
    flavor,
    job,
    last,
    lq,
)

GPU = "gpu.nvidia.com"
GPU_USAGE = ("default", "nvidia-gpu")


def gpus(node: str, n: int) -> dict[str, Any]:
    return manifests.resource_slice(
        node, devices=[manifests.device(f"gpu-{i}") for i in range(n)], node=node
    )


def preferring(name: str, *counts: int) -> dict[str, Any]:
    """A template asking for ``counts[0]`` GPUs, else ``counts[1]``, ..."""
    subs = [{"name": f"{c}-gpus", "deviceClassName": GPU, "count": c} for c in counts]
    return manifests.resource_claim_template(
        name, namespace="team-a", requests=[{"name": "gpu", "firstAvailable": subs}]
    )


EVERY = manifests.resource_claim_template(
    "every",
    namespace="team-a",
    requests=[manifests.device_request("gpu", device_class=GPU, count=None, mode="All")],
)


def cluster(*extra: Any, nodes: tuple[str, ...] = ("node-a", "node-b")) -> Driver:
    d = Driver()
    d.apply(
        configuration(class_mapping("nvidia-gpu", GPU)),
        device_class(GPU),
        flavor("default"),
        cq("cq").flavor("default", {"nvidia-gpu": 16}),
        lq("team-a", "lq", "cq"),
        preferring("prefer-two", 2, 1),
        EVERY,
        *[manifests.node(n) for n in nodes],
        *extra,
    )
    return d


def gpu_job(name: str, template: str) -> Any:
    return job("team-a", name).queue("lq").claim("gpu", template)


def held(d: Driver, key: str) -> list[str]:
    return [f"{pool}/{name}" for _, pool, name in d.fold._device_holds[key]]


def test_first_available_is_admitted_where_its_first_alternative_fits_and_charged_it() -> None:
    d = cluster(gpus("node-a", 1), gpus("node-b", 2))
    out = d.apply(gpu_job("a", "prefer-two"))
    assert admitted(out) == ["team-a/a"]
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}
    assert d.usage("cq") == {GPU_USAGE: 2000}
    assert held(d, "team-a/a") == ["node-b/gpu-0", "node-b/gpu-1"]


def test_a_later_alternative_is_charged_and_placed_when_no_node_can_give_the_first() -> None:
    d = cluster(gpus("node-a", 1), gpus("node-b", 1))
    out = d.apply(gpu_job("a", "prefer-two"), gpu_job("b", "prefer-two"))
    assert admitted(out) == ["team-a/a", "team-a/b"]
    assert [last(out, "Admitted", k).nodes for k in ("team-a/a", "team-a/b")] == [
        {"main": ["node-a"]},
        {"main": ["node-b"]},
    ]
    assert d.usage("cq") == {GPU_USAGE: 2000}  # 1 GPU each


def test_no_later_alternative_while_a_node_can_give_an_earlier_one() -> None:
    """node-b can give 2 GPUs: the scheduler would take both there, so 2 are
    charged, and node-a, where only the second alternative (1 GPU) fits, is
    never chosen; the Job waits for node-b."""
    d = cluster(gpus("node-a", 1), gpus("node-b", 2))
    d.apply(gpu_job("a", "prefer-two"))
    out = d.apply(gpu_job("b", "prefer-two"))
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message.endswith(
        f"needs 2 devices of class {GPU}; node-a has 1 free, node-b has 0 free"
    )
    assert d.usage("cq") == {GPU_USAGE: 2000}  # a's 2; b takes none while it waits
    out = d.finish("team-a/a")
    assert admitted(out) == ["team-a/b"]
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}
    assert d.usage("cq") == {GPU_USAGE: 2000}


def test_all_is_charged_and_holds_every_matching_device_of_the_chosen_node() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 4))
    out = d.apply(gpu_job("all", "every"))
    assert admitted(out) == ["team-a/all"]
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}
    assert d.usage("cq") == {GPU_USAGE: 4000}
    assert held(d, "team-a/all") == [f"node-b/gpu-{i}" for i in range(4)]
    # node-a's 2 GPUs are not what was charged: a second one waits for node-b
    out = d.apply(gpu_job("again", "every"))
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message.endswith(
        f"needs all 4 devices of class {GPU} on one node (allocationMode All); "
        "node-a has 2 free, node-b has 0 free"
    )
    out = d.finish("team-a/all")
    assert admitted(out) == ["team-a/again"]


def test_all_waits_while_one_device_of_the_node_is_taken() -> None:
    d = cluster(gpus("node-b", 4), nodes=("node-b",))
    d.apply(manifests.resource_claim_template("one", namespace="team-a", device_class=GPU))
    d.apply(gpu_job("one", "one"))
    out = d.apply(gpu_job("all", "every"))
    assert last(out, "Inadmissible").message.endswith("node-b has 3 free")
    out = d.finish("team-a/one")
    assert admitted(out) == ["team-a/all"]


def test_without_nodes_both_are_charged_alike_and_admitted_on_quota_alone() -> None:
    d = cluster(gpus("node-a", 1), gpus("node-b", 4), nodes=())
    out = d.apply(gpu_job("all", "every"), gpu_job("pref", "prefer-two"))
    assert admitted(out) == ["team-a/all", "team-a/pref"]
    assert [last(out, "Admitted", k).nodes for k in ("team-a/all", "team-a/pref")] == [None, None]
    assert d.usage("cq") == {GPU_USAGE: 6000}  # 4 (node-b's) + 2


def test_the_alternative_charged_fits_beside_the_pods_other_claims() -> None:
    """2 GPUs else 1, beside a claim of 3 GPUs, on nodes of 4: the allocator
    would take the second alternative (2 + 3 fits no node), so it is charged."""
    three = manifests.resource_claim_template(
        "three", namespace="team-a", device_class=GPU, count=3
    )
    d = cluster(gpus("node-a", 4), three)
    out = d.apply(gpu_job("a", "prefer-two").claim("side", "three"))
    assert admitted(out) == ["team-a/a"]
    assert d.usage("cq") == {GPU_USAGE: 4000}
    assert held(d, "team-a/a") == [f"node-a/gpu-{i}" for i in range(4)]
