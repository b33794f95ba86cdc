"""Direct ResourceClaims through the fold (issue #17): charged once, not per pod;
carried per ClusterQueue from its first admitted user to its last; charged at
what it holds once allocated; an unknown claim waits for it; article 004."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import yaml
from builders import manifests
from builders.workloads import pytorch_job
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
from test_fold_node_placement import cluster as node_cluster
from test_fold_node_placement import gpus

REFERENCE = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "references"
    / "004-resourceclaim-h100-mig-slice.yaml"
)
GPU = ("default", "nvidia-gpu")
CPU = ("default", "cpu")


def claim(name: str = "shared", namespace: str = "team-a", **kw: Any) -> dict[str, Any]:
    return manifests.resource_claim(name, namespace=namespace, device_class="gpu.nvidia.com", **kw)


def user(name: str, pods: int = 1, cpu: str = "1", queue: str = "lq", ns: str = "team-a") -> Any:
    return (
        job(ns, name).queue(queue).parallelism(pods).requests(cpu=cpu).direct_claim("gpu", "shared")
    )


def cluster(cpu: int = 8, gpu: int = 1, *extra: Any) -> Driver:
    d = Driver()
    d.apply(
        configuration(class_mapping("nvidia-gpu", "gpu.nvidia.com")),
        device_class("gpu.nvidia.com"),
        flavor("default"),
        cq("cq").flavor("default", {"cpu": cpu, "nvidia-gpu": gpu}),
        lq("team-a", "lq", "cq"),
        *extra,
    )
    return d


# --------------------------------------------------------------------------- charged once


def test_a_claim_shared_by_the_pods_of_a_job_is_charged_once() -> None:
    d = cluster(8, 1, claim(count=1))
    out = d.apply(user("a", pods=3))
    assert admitted(out) == ["team-a/a"]
    assert last(out, "Admitted").usage == {"default": {"cpu": "3", "nvidia-gpu": "1"}}


def test_two_jobs_sharing_a_claim_are_charged_once_and_it_is_held_until_the_last_stops() -> None:
    d = cluster(8, 1, claim(count=1))
    out = d.apply(user("a", pods=2), user("b", pods=2))
    assert admitted(out) == ["team-a/a", "team-a/b"]
    assert last(out, "Admitted", "team-a/b").usage == {"default": {"cpu": "2"}}
    assert d.usage("cq") == {CPU: 4000, GPU: 1000}
    d.finish("team-a/a")  # the first user, who paid, stops: b still uses the claim
    assert d.usage("cq") == {CPU: 2000, GPU: 1000}
    d.finish("team-a/b")
    assert d.usage("cq") == {}


def test_a_stopped_user_keeps_the_claim_charged_until_its_pods_are_gone() -> None:
    d = Driver(auto_stop=False)
    d.apply(
        configuration(class_mapping("nvidia-gpu", "gpu.nvidia.com")),
        device_class("gpu.nvidia.com"),
        flavor("default"),
        cq("cq").flavor("default", {"cpu": 8, "nvidia-gpu": 1}),
        lq("team-a", "lq", "cq"),
        claim(),
        user("a"),
    )
    stop = d.delete("Job", "a", "team-a")
    assert d.usage("cq") == {CPU: 1000, GPU: 1000}  # draining: its pods may run
    d.stopped(last(stop, "Finished"))
    assert d.usage("cq") == {}


def test_a_waiting_user_charged_nothing_is_charged_again_when_the_carrier_goes() -> None:
    d = cluster(4, 1, claim())
    assert admitted(d.apply(user("a", cpu="4"))) == ["team-a/a"]
    out = d.apply(user("c", cpu="2"))
    assert last(out, "Inadmissible").reason == "InsufficientQuota"  # cpu, not the claim
    out = d.finish("team-a/a")
    assert admitted(out) == ["team-a/c"]
    assert last(out, "Admitted").usage == {"default": {"cpu": "2", "nvidia-gpu": "1"}}
    assert d.usage("cq") == {CPU: 2000, GPU: 1000}


def test_a_claim_too_big_for_the_queue_is_never_made_free_by_sharing() -> None:
    d = cluster(8, 1, claim(count=2))
    out = d.apply(user("a"), user("b"))
    assert admitted(out) == []
    assert last(out, "Inadmissible", "team-a/b").reason == "InsufficientQuota"
    assert d.usage("cq") == {}


def test_users_in_two_cluster_queues_each_pay_for_the_claim() -> None:
    d = cluster(8, 1, claim(), cq("cq-b").flavor("default", {"cpu": 8, "nvidia-gpu": 1}))
    d.apply(lq("team-a", "lq-b", "cq-b"))
    out = d.apply(user("a"), user("b", queue="lq-b"))
    assert admitted(out) == ["team-a/a", "team-a/b"]
    assert d.usage("cq") == {CPU: 1000, GPU: 1000}
    assert d.usage("cq-b") == {CPU: 1000, GPU: 1000}
    d.finish("team-a/a")
    assert d.usage("cq") == {}
    assert d.usage("cq-b") == {CPU: 1000, GPU: 1000}


def test_a_user_in_a_queue_without_quota_for_the_claim_waits_even_if_another_paid() -> None:
    d = cluster(8, 1, claim(), cq("cq-b").flavor("default", {"cpu": 8, "nvidia-gpu": 0}))
    d.apply(lq("team-a", "lq-b", "cq-b"))
    out = d.apply(user("a"), user("b", queue="lq-b"))
    assert admitted(out) == ["team-a/a"]
    assert last(out, "Inadmissible", "team-a/b").reason == "InsufficientQuota"


# --------------------------------------------------------------------------- unknown, allocated


def test_an_unknown_claim_waits_and_is_admitted_when_it_arrives() -> None:
    d = cluster(8, 1)
    out = d.apply(user("a", pods=2))
    assert [(x.type, x.reason) for x in out] == [("Inadmissible", "UnknownResourceClaim")]
    assert 'ResourceClaim team-a/shared (pod claim "gpu") not found' in out[0].message
    out = d.apply(claim())
    assert admitted(out) == ["team-a/a"]
    assert last(out, "Admitted").usage == {"default": {"cpu": "2", "nvidia-gpu": "1"}}


def test_a_claim_deleted_before_admission_waits_again() -> None:
    d = cluster(1, 1, claim(), user("a", cpu="2"))
    assert d.state("team-a/a") == "Inadmissible"
    out = d.delete("ResourceClaim", "shared", "team-a")
    assert last(out, "Inadmissible").reason == "UnknownResourceClaim"


MIG_CLASS = manifests.device_class(
    "mig.nvidia.com",
    cel=["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"],
)


def mixed_slice() -> dict[str, Any]:
    """One 80Gi GPU split as a 1g.10gb and a 3g.40gb slice, on node-a."""
    return manifests.resource_slice(
        "node-a",
        devices=[
            manifests.device("mig-1g-0", attributes={"type": "mig"}, consumes={"memory": "10Gi"}),
            manifests.device("mig-3g-0", attributes={"type": "mig"}, consumes={"memory": "40Gi"}),
        ],
        counters={"gpu-0-cs": {"memory": "80Gi"}},
    )


def memory_cluster() -> Driver:
    d = Driver()
    d.apply(
        manifests.configuration(
            resources={
                "deviceClassMappings": [
                    {
                        "name": "gpu-memory",
                        "deviceClassNames": ["mig.nvidia.com"],
                        "sources": [{"counter": {"name": "memory", "driver": "gpu.nvidia.com"}}],
                    }
                ]
            }
        ),
        MIG_CLASS,
        mixed_slice(),
        flavor("default"),
        cq("cq").flavor("default", {"cpu": 8, "gpu-memory": "80Gi"}),
        lq("team-a", "lq", "cq"),
    )
    return d


def test_an_allocated_claim_is_charged_at_what_it_holds() -> None:
    d = memory_cluster()
    asks = manifests.resource_claim("shared", namespace="team-a", device_class="mig.nvidia.com")
    holds = manifests.resource_claim(
        "shared",
        namespace="team-a",
        device_class="mig.nvidia.com",
        allocated=[("node-a", "mig-1g-0")],
        node="node-a",
    )
    d.apply(asks)
    pending = job("team-a", "p").queue("missing").requests(cpu="1").direct_claim("gpu", "shared")
    d.apply(pending)  # a user (held: no LocalQueue) so the claim is read
    d.apply(holds)
    out = d.apply(user("a"))
    assert last(out, "Admitted").usage == {"default": {"cpu": "1", "gpu-memory": "10Gi"}}


def test_an_unallocated_claim_is_charged_at_what_it_asks() -> None:
    d = memory_cluster()
    d.apply(manifests.resource_claim("shared", namespace="team-a", device_class="mig.nvidia.com"))
    out = d.apply(user("a"))
    assert last(out, "Admitted").usage == {"default": {"cpu": "1", "gpu-memory": "40Gi"}}


def test_a_pending_user_is_charged_again_when_the_claim_is_allocated() -> None:
    d = memory_cluster()
    d.apply(
        manifests.resource_claim(
            "shared", namespace="team-a", device_class="mig.nvidia.com", count=2
        ),
        cq("cq").flavor("default", {"cpu": 8, "gpu-memory": "60Gi"}),
    )
    out = d.apply(user("a"))  # asks 2 slices: the largest twice, 80Gi > 60Gi
    assert last(out, "Inadmissible").reason == "InsufficientQuota"
    out = d.apply(
        manifests.resource_claim(
            "shared",
            namespace="team-a",
            device_class="mig.nvidia.com",
            count=2,
            allocated=[("node-a", "mig-1g-0"), ("node-a", "mig-3g-0")],
        )
    )
    assert admitted(out) == ["team-a/a"]
    assert last(out, "Admitted").usage == {"default": {"cpu": "1", "gpu-memory": "50Gi"}}


def test_a_fold_carrying_a_claim_pickles_and_continues_alike() -> None:
    d = cluster(8, 1, claim(), user("a"), user("b"))
    copies = [copy.deepcopy(d.fold), pickle.loads(pickle.dumps(d.fold))]
    d.finish("team-a/a")
    for fold in copies:
        other = Driver(fold)
        other.n, other.t = d.n - 1, d.t
        other.finish("team-a/a")
        assert other.usage("cq") == d.usage("cq") == {CPU: 1000, GPU: 1000}


# --------------------------------------------------------------------------- article 004


MIG_3G = manifests.device_class(
    "mig-3g.40gb",
    cel=[
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' "
        "&& device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"
    ],
)
ISSUE_SELECTOR = "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('39Gi'))"


def article_cluster() -> Driver:
    h100 = manifests.resource_slice(
        "node-h100",
        devices=[
            manifests.device(
                f"gpu-0-mig-3g40gb-{i}",
                attributes={"type": "mig", "profile": "3g.40gb"},
                capacity={"memory": "40Gi"},
                consumes={"memory": "40Gi"},
            )
            for i in range(2)
        ],
        counters={"gpu-0-cs": {"memory": "80Gi"}},
    )
    d = Driver()
    d.apply(
        configuration(class_mapping("nvidia.com/mig-3g.40gb", "mig-3g.40gb")),
        MIG_3G,
        h100,
        flavor("default"),
        cq("team-alpha-cq").flavor("default", {"cpu": 8, "nvidia.com/mig-3g.40gb": 1}),
        lq("team-alpha", "training-queue", "team-alpha-cq"),
    )
    return d


def article_job(name: str) -> Any:
    return (
        job("team-alpha", name)
        .queue("training-queue")
        .requests(cpu="1")
        .direct_claim("gpu", "h100-mig-slice")
    )


def test_article_004_claim_in_v1_form_is_charged_once_for_two_jobs() -> None:
    d = article_cluster()
    claim = manifests.resource_claim(
        "h100-mig-slice",
        namespace="team-alpha",
        requests=[
            manifests.device_request("gpu", device_class="mig-3g.40gb", cel=[ISSUE_SELECTOR])
        ],
    )
    out = d.apply(claim, article_job("train-1"), article_job("train-2"))
    assert admitted(out) == ["team-alpha/train-1", "team-alpha/train-2"]
    assert d.usage("team-alpha-cq") == {
        ("default", "cpu"): 2000,
        ("default", "nvidia.com/mig-3g.40gb"): 1000,
    }


def test_article_004_yaml_as_written_waits_with_a_clear_reason() -> None:
    with REFERENCE.open() as f:
        (claim,) = [doc for doc in yaml.safe_load_all(f) if doc is not None]
    d = article_cluster()
    out = d.apply(claim, article_job("train-1"))
    assert admitted(out) == []
    wait = last(out, "Inadmissible")
    assert wait.reason == "InvalidCEL"
    assert "ResourceClaim team-alpha/h100-mig-slice" in (wait.message or "")


# --------------------------------------------------------------------------- placement


def placement_cluster(*extra: Any) -> Driver:
    return node_cluster(gpus("node-a", 2), gpus("node-b", 2), *extra)


def node_claim(
    *devices: str, node: str = "node-b", name: str = "shared", ns: str = "team-a"
) -> Any:
    return manifests.resource_claim(
        name,
        namespace=ns,
        device_class="gpu.nvidia.com",
        allocated=[(node, d) for d in devices],
        node=node if devices else None,
    )


def placed_user(name: str, pods: int = 1) -> Any:
    return (
        job("team-a", name)
        .queue("lq")
        .claim("own", "one")
        .direct_claim("gpu", "shared")
        .parallelism(pods)
    )


def test_pods_of_an_allocated_claim_are_placed_on_its_node_only() -> None:
    d = placement_cluster(node_claim("gpu-0"))
    out = d.apply(placed_user("a", pods=1))
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}  # node-a sorts first
    # claim charged once (1) + the pod's own device (1)
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "2"}}


def test_a_full_claim_node_makes_them_wait_though_another_node_is_free() -> None:
    d = placement_cluster(node_claim("gpu-0"), node_claim("gpu-1", name="theirs", ns="other"))
    out = d.apply(placed_user("a"))
    assert admitted(out) == []
    assert last(out, "Inadmissible").reason == "NoNodePlacement"
    assert "node-b has 0 free" in (last(out, "Inadmissible").message or "")
    out = d.delete("ResourceClaim", "theirs", "other")
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}


def test_a_job_with_only_an_allocated_direct_claim_is_pinned_to_its_node() -> None:
    d = placement_cluster(node_claim("gpu-0"))
    out = d.apply(job("team-a", "a").queue("lq").direct_claim("gpu", "shared").parallelism(3))
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}  # where the scheduler puts them
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "1"}}


def test_pods_that_cannot_run_on_their_claims_node_wait_with_the_reason() -> None:
    d = placement_cluster(node_claim("gpu-0"))
    out = d.apply(
        job("team-a", "a").queue("lq").direct_claim("gpu", "shared").node_selector(zone="a")
    )
    assert admitted(out) == []
    wait = last(out, "Inadmissible")
    assert wait.reason == "NoNodePlacement"
    assert "must run on node node-b" in (wait.message or ""), wait.message


# ------------------------------------------------- a claim not allocated yet: placed and held


def only_claim_user(name: str, pods: int = 1, claim_name: str = "shared") -> Any:
    return job("team-a", name).queue("lq").direct_claim("gpu", claim_name).parallelism(pods)


def test_an_unallocated_claim_is_placed_with_its_first_user_on_one_node() -> None:
    d = placement_cluster(node_claim())
    out = d.apply(placed_user("a"))
    # the pod's own device and the claim's on one node: node-a, the first in order
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}
    # node-a's two devices are held (one for a's pod, one for the claim):
    # a 2-device Job goes to node-b
    out = d.apply(job("team-a", "two").queue("lq").claim("g", "two"))
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}


def test_no_node_with_a_free_device_for_the_claim_makes_its_user_wait() -> None:
    # node-a's and node-b's devices are all taken by claims of another namespace
    d = placement_cluster(
        node_claim("gpu-0", "gpu-1", node="node-a", name="x", ns="other"),
        node_claim("gpu-0", "gpu-1", node="node-b", name="y", ns="other"),
        node_claim(),
    )
    out = d.apply(only_claim_user("a", pods=2))
    assert admitted(out) == []
    wait = last(out, "Inadmissible")
    assert wait.reason == "NoNodePlacement"
    assert "needs 1 device of class gpu.nvidia.com" in (wait.message or ""), wait.message
    assert "node-a has 0 free, node-b has 0 free" in (wait.message or ""), wait.message
    out = d.delete("ResourceClaim", "y", "other")
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}  # all its pods, the claim's node


def test_pods_sharing_a_claim_that_fit_only_on_two_nodes_wait_naming_the_nodes_tried() -> None:
    d = placement_cluster(node_claim())
    # 2 pods, each its own device, sharing the claim's: 3 devices on one node of 2
    out = d.apply(placed_user("a", pods=2))
    assert admitted(out) == []
    wait = last(out, "Inadmissible")
    assert wait.reason == "NoNodePlacement"
    message = wait.message or ""
    assert "pods that share ResourceClaim shared" in message, message
    assert message.endswith("tried node-a, node-b"), message


def test_pods_sharing_a_claim_split_by_the_search_are_placed_again_on_one_node() -> None:
    # first fit puts the carrier (its device and the claim's) on node-a and the
    # second pod on node-b; pinned to each node in turn, they all fit on node-b
    d = node_cluster(gpus("node-a", 2), gpus("node-b", 3), node_claim())
    out = d.apply(placed_user("a", pods=2))
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}
    out = d.apply(job("team-a", "two").queue("lq").claim("g", "two"))
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}  # node-b's 3 are held


def test_a_second_user_is_pinned_to_the_held_claims_node_and_takes_nothing_for_it() -> None:
    d = placement_cluster(node_claim())
    d.apply(placed_user("a"))  # node-a: a's own device and the claim's
    out = d.apply(job("team-a", "two").queue("lq").claim("g", "two"))  # node-b: full
    assert last(out, "Admitted").nodes == {"main": ["node-b"]}
    out = d.apply(only_claim_user("b", pods=2))  # the claim only: node-a, nothing more
    assert last(out, "Admitted").nodes == {"main": ["node-a"]}
    out = d.apply(placed_user("c"))  # needs a device of its own on node-a: none free
    assert admitted(out) == []
    assert "node-a has 0 free" in (last(out, "Inadmissible").message or "")
    assert "node-b" not in (last(out, "Inadmissible").message or "")  # pinned to node-a
    d.finish("team-a/a")  # a's own device goes back; the claim's stays held for b
    assert d.state("team-a/c") == "Admitted"
    assert last(d.decisions, "Admitted", "team-a/c").nodes == {"main": ["node-a"]}


def test_the_claims_hold_ends_when_it_is_allocated_or_its_last_user_stops() -> None:
    d = node_cluster(gpus("node-a", 2), node_claim())
    d.apply(only_claim_user("a"))  # the claim's device held on node-a
    d.apply(job("team-a", "two").queue("lq").claim("g", "two"))
    assert d.state("team-a/two") == "Inadmissible"
    out = d.finish("team-a/a")  # its last user: the claim's device goes back
    assert admitted(out) == ["team-a/two"]
    d.finish("team-a/two")
    d.apply(only_claim_user("b"))  # held again, then allocated on gpu-1
    out = d.apply(node_claim("gpu-1", node="node-a"))
    d.apply(job("team-a", "one").queue("lq").claim("g", "one"))
    assert d.state("team-a/one") == "Admitted"  # gpu-0: the hold gave the claim's place back
    d.apply(job("team-a", "more").queue("lq").claim("g", "one"))
    assert d.state("team-a/more") == "Inadmissible"  # gpu-1 is the claim's, allocated


def test_deleting_an_unallocated_claim_ends_its_hold() -> None:
    d = node_cluster(gpus("node-a", 2), node_claim())
    d.apply(only_claim_user("a"))
    d.apply(job("team-a", "two").queue("lq").claim("g", "two"))
    assert d.state("team-a/two") == "Inadmissible"
    out = d.delete("ResourceClaim", "shared", "team-a")
    assert admitted(out) == ["team-a/two"]


def test_a_fold_holding_a_claim_pickles_and_continues_alike() -> None:
    d = node_cluster(gpus("node-a", 2), node_claim(), only_claim_user("a"))
    copies = [copy.deepcopy(d.fold), pickle.loads(pickle.dumps(d.fold))]
    for fold in [d.fold, *copies]:
        other = Driver(fold)
        other.n, other.t = d.n, d.t
        out = other.apply(job("team-a", "two").queue("lq").claim("g", "two"))
        assert admitted(out) == []
        out = other.finish("team-a/a")
        assert admitted(out) == ["team-a/two"]


def test_two_podsets_naming_one_claim_are_charged_it_once() -> None:
    ddp = pytorch_job("ddp", namespace="team-a", queue="lq", master=1, workers=3, gpus=0)
    for spec in ddp["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["resourceClaims"] = [
            {"name": "gpu", "resourceClaimName": "shared"}
        ]
    d = cluster(8, 1, claim())
    out = d.apply(ddp)
    assert [x.type for x in out] == ["Admitted"], out
    assert d.usage("cq") == {GPU: 1000}
