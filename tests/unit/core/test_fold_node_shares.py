"""Quota AND a placement with consumable capacity (KEP-5075): a Job asking for a
share of a device several claims may use at once (``allowMultipleAllocations``)
is admitted only when a node's shared device has the capacity left; what kuota
placed and what allocated claims consumed are spent until given back."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from builders import manifests
from core_builders import Driver, admitted, configuration, cq, device_class, flavor, job, last, lq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuota.events.schema import Decision

GPU = "gpu.nvidia.com"
SHARE_MEMORY = {
    "name": "gpu-share-memory",
    "deviceClassNames": [GPU],
    "sources": [{"capacity": {"name": "memory", "driver": GPU}}],
}


def shared_gpus(node: str, n: int = 1, memory: str = "80Gi") -> dict[str, Any]:
    devices = []
    for i in range(n):
        d = manifests.device(f"gpu-{i}", capacity={"memory": memory})
        d["allowMultipleAllocations"] = True
        devices.append(d)
    return manifests.resource_slice(node, devices=devices, node=node)


def share_template(name: str, memory: str) -> dict[str, Any]:
    request = manifests.device_request("gpu", device_class=GPU)
    request["exactly"]["capacity"] = {"requests": {"memory": memory}}
    return manifests.resource_claim_template(name, namespace="team-a", requests=[request])


def share_job(name: str, template: str = "s40", pods: int = 1) -> Any:
    return job("team-a", name).queue("lq").claim("gpu", template).parallelism(pods)


def cluster(*extra: Any, quota: str = "400Gi") -> Driver:
    d = Driver()
    d.apply(
        configuration(SHARE_MEMORY),
        device_class(GPU),
        flavor("default"),
        cq("cq").flavor("default", {"gpu-share-memory": quota}),
        lq("team-a", "lq", "cq"),
        share_template("s40", "40Gi"),
        share_template("s30", "30Gi"),
        share_template("s20", "20Gi"),
        manifests.node("node-a"),
        manifests.node("node-b"),
        *extra,
    )
    return d


def shared_claim(name: str, node: str, memory: str, namespace: str = "other") -> dict[str, Any]:
    """A claim allocated a share of ``node``'s gpu-0, consuming ``memory``."""
    claim = manifests.resource_claim(
        name, namespace=namespace, device_class=GPU, allocated=[(node, "gpu-0")], node=node
    )
    result = claim["status"]["allocation"]["devices"]["results"][0]
    result["shareID"] = f"share-{name}"
    result["consumedCapacity"] = {"memory": memory}
    return claim


def waits(out: list[Decision]) -> str:
    verdict = last(out, "Inadmissible")
    assert verdict.reason == "NoNodePlacement", verdict
    return verdict.message


def test_shares_fill_a_device_and_the_next_waits_for_one_to_finish() -> None:
    d = cluster(shared_gpus("node-a"))
    out = d.apply(share_job("a"), share_job("b"))
    assert admitted(out) == ["team-a/a", "team-a/b"]
    assert last(out, "Admitted", "team-a/b").nodes == {"main": ["node-a"]}
    out = d.apply(share_job("c"))
    assert "node-a has 0 free" in waits(out), waits(out)
    assert d.state("team-a/c") == "Inadmissible"  # quota fits (400Gi): the node does not
    out = d.finish("team-a/a")
    assert admitted(out) == ["team-a/c"]


def test_a_gang_of_shares_spreads_over_two_devices() -> None:
    d = cluster(shared_gpus("node-a"), shared_gpus("node-b"))
    out = d.apply(share_job("gang", "s30", pods=4))
    assert last(out, "Admitted").nodes == {"main": ["node-a", "node-b"]}
    # 20Gi left on each device: a 30Gi share fits on neither, a 20Gi one on both
    out = d.apply(share_job("more", "s30"))
    assert waits(out).endswith(
        "needs 1 device of class gpu.nvidia.com with 30Gi of memory; "
        "node-a has 0 free, node-b has 0 free"
    ), waits(out)
    out = d.apply(share_job("small", "s20", pods=2))
    assert last(out, "Admitted", "team-a/small").nodes == {"main": ["node-a", "node-b"]}


def test_a_claim_allocated_elsewhere_spends_what_the_scheduler_recorded() -> None:
    d = cluster(shared_gpus("node-a"))
    d.apply(shared_claim("theirs", "node-a", "60Gi"))
    out = d.apply(share_job("a"))
    assert "node-a has 0 free" in waits(out)
    out = d.apply(share_job("small", "s20"))  # 60 + 20: it fits, before the 40Gi one
    assert admitted(out) == ["team-a/small"]
    d.finish("team-a/small")
    out = d.apply(shared_claim("theirs", "node-a", "40Gi"))
    assert admitted(out) == ["team-a/a"]


def test_a_deleted_claim_gives_its_share_back() -> None:
    d = cluster(shared_gpus("node-a"))
    d.apply(shared_claim("theirs", "node-a", "60Gi"))
    d.apply(share_job("a"))
    assert d.fold._claim_at
    out = d.delete("ResourceClaim", "theirs", "other")
    assert admitted(out) == ["team-a/a"]
    assert not d.fold._claim_shares and not d.fold._claim_at  # nothing kept of it


def test_a_claim_seen_before_its_slice_still_counts() -> None:
    d = cluster()
    d.apply(shared_claim("theirs", "node-a", "60Gi"))
    d.apply(shared_gpus("node-a"))
    out = d.apply(share_job("a"))
    assert "node-a has 0 free" in waits(out)


def test_a_whole_device_claim_is_not_shared_away() -> None:
    # a device without allowMultipleAllocations is taken whole, as before
    whole = manifests.resource_slice(
        "node-a", devices=[manifests.device("gpu-0", capacity={"memory": "80Gi"})], node="node-a"
    )
    d = cluster(whole)
    out = d.apply(share_job("a"), share_job("b"))
    assert admitted(out) == ["team-a/a"]
    assert "node-a has 0 free" in waits(out)


def test_pickled_and_copied_states_decide_alike() -> None:
    d = cluster(shared_gpus("node-a"))
    d.apply(share_job("a"), shared_claim("theirs", "node-a", "20Gi"))
    for state in (pickle.loads(pickle.dumps(d.fold)), copy.deepcopy(d.fold)):
        assert state._share_holds == d.fold._share_holds
        assert state._claim_shares == d.fold._claim_shares
    out = d.apply(share_job("b"))
    assert "node-a has 0 free" in waits(out)  # 40 + 20 + 40 > 80


# --------------------------------------------------------------------------- property


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("ask"), st.sampled_from([10, 20, 30, 40, 50, 80, 90])),
            st.tuples(st.just("finish"), st.integers(min_value=0, max_value=30)),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_admitted_shares_never_overfill_a_node_and_a_wait_is_true(
    steps: list[tuple[str, int]],
) -> None:
    """One 80Gi shared device per node, quota far above: at every step the
    shares admitted on a node sum to at most 80Gi; a share told NoNodePlacement
    fits on no node then; and the same events decide the same again."""
    templates = [share_template(f"g{gi}", f"{gi}Gi") for gi in (10, 20, 30, 40, 50, 80, 90)]
    d = cluster(shared_gpus("node-a"), shared_gpus("node-b"), *templates, quota="4000Gi")
    asked: dict[str, int] = {}
    on: dict[str, str] = {}  # admitted, running: workload -> node
    for n, (what, value) in enumerate(steps):
        if what == "ask":
            key = f"team-a/j{n}"
            asked[key] = value
            out = d.apply(share_job(f"j{n}", f"g{value}"))
        else:
            running = sorted(on)
            if not running:
                continue
            key = running[value % len(running)]
            on.pop(key)
            out = d.finish(key)
        for decision in out:
            if decision.workload not in asked:
                continue
            used = {node: sum(asked[k] for k, at in on.items() if at == node) for node in NODES}
            if decision.type == "Admitted":
                (node,) = decision.nodes["main"]
                assert used[node] + asked[decision.workload] <= 80, (used, decision)
                on[decision.workload] = node
            elif decision.type == "Inadmissible" and decision.reason == "NoNodePlacement":
                need = asked[decision.workload]
                assert all(used[node] + need > 80 for node in NODES), (used, decision)
    replay = Driver()
    for event in d.events:
        replay.feed(event)
    assert [x.model_dump_json() for x in replay.decisions] == [
        x.model_dump_json() for x in d.decisions
    ]


NODES = ("node-a", "node-b")
