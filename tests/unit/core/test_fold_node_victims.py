"""Node-aware preemption (#17): a preemptor whose pods need devices no node has
free gets victims that free quota AND a node that can then take its pods;
victims on other nodes are never evicted; when no victim set makes room on a
node, no one is evicted and the head waits saying so. Inline and plans mode
choose the same victims (a plan's victims are checked on a node too)."""

from __future__ import annotations

from typing import Any

from builders import manifests
from core_builders import Driver, admitted, claim_template, cq, last, wpc
from test_fold_node_claims import claim
from test_fold_node_placement import GPU, cluster, gpu_job, gpus

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision

PRIORITIES = (wpc("p1", 1), wpc("p2", 2), wpc("p5", 5), wpc("high", 100))


def within_cq(quota: int = 4) -> Any:
    queue = cq("cq").flavor("default", {"nvidia-gpu": quota})
    queue.m["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    return queue


def spread(
    mode: str = "inline", jobs: Any = None, *, nodes: bool = True, started: bool = False
) -> Driver:
    """Two nodes of 2 GPUs, a ClusterQueue of 4 GPUs full of 1-GPU Jobs placed
    first fit: by default a1 (priority 1) and a2 (5) on node-a, b1 (2) and b2
    (5, the newest) on node-b. ``started``: each Job's pods are scheduled (a
    claim allocated on the GPU it was placed on) and ready before the next."""
    if mode == "inline":
        d = cluster(gpus("node-a", 2), gpus("node-b", 2), quota=4, nodes=nodes)
    else:
        d = _replay(Driver(Fold(preemption=mode)), nodes=nodes)
    d.apply(within_cq(), *PRIORITIES, claim_template("team-a", "three", GPU, count=3))
    for name, prio in jobs or (("a1", "p1"), ("a2", "p5"), ("b1", "p2"), ("b2", "p5")):
        out = d.apply(gpu_job(name).priority(prio))
        assert admitted(out) == [f"team-a/{name}"]
        if started:
            (node,) = last(out, "Admitted").nodes["main"]
            used = sum(
                1 for x in d.decisions if x.type == "Admitted" and x.nodes == {"main": [node]}
            )
            ready_with_claims(d, f"team-a/{name}", node, f"gpu-{used - 1}")
        if mode != "inline":
            plan_now(d)
    return d


def _replay(d: Driver, *, nodes: bool) -> Driver:
    """``d`` (an empty fold) given the objects ``cluster`` applies."""
    base = cluster(gpus("node-a", 2), gpus("node-b", 2), quota=4, nodes=nodes)
    for event in base.events:
        d.feed(event)
    d.n, d.t = base.n, base.t
    return d


def plan_now(d: Driver) -> list[Decision]:
    """What the preemption service writes for the fold's state, folded back."""
    out: list[Decision] = []
    while plans := d.fold.preemption_plans():
        for plan in plans:
            out += d.plan(plan.preemptor, list(plan.victims))
    return out


def victims_of(out: list[Decision], preemptor: str = "team-a/big") -> list[str]:
    return sorted(
        x.workload or "" for x in out if x.type == "Preempted" and x.preemptor == preemptor
    )


def big(template: str = "two") -> Any:
    return gpu_job("big", template=template).priority("high")


# --------------------------------------------------------------------------- inline


def test_on_quota_alone_the_cheapest_victims_are_on_two_nodes() -> None:
    """Without Nodes (quota alone, as Kueue): a1 and b1, the lowest priorities."""
    d = spread(nodes=False)
    out = d.apply(big())
    assert victims_of(out) == ["team-a/a1", "team-a/b1"]


def test_the_victims_free_one_node_and_the_preemptor_is_admitted_there() -> None:
    d = spread()
    out = d.apply(big())
    # a1 and b1 free 2 GPUs of quota, one per node: b2 (next in Kueue's order)
    # frees node-b, and a1 is then not needed
    assert victims_of(out) == ["team-a/b1", "team-a/b2"]
    assert last(out, "Admitted", "team-a/big").nodes == {"main": ["node-b"]}
    assert last(out, "Admitted", "team-a/big").victims == ["team-a/b1", "team-a/b2"]


def test_when_no_victims_make_room_on_a_node_no_one_is_evicted() -> None:
    d = spread(jobs=(("a1", "p1"), ("ha", "high"), ("b1", "p1"), ("hb", "high")))
    out = d.apply(big())
    assert victims_of(out) == []
    verdict = last(out, "Inadmissible", "team-a/big")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message == (
        "preempting would free its quota but no node: no node in flavor default can "
        f"take pod 1 of 1: needs 2 devices of class {GPU}; node-a has 1 free, node-b has 1 free"
    )
    assert d.state("team-a/a1") == d.state("team-a/b1") == "Admitted"
    # ha's end frees quota and a GPU of node-a: a1 alone now makes room there
    out = d.finish("team-a/ha")
    assert victims_of(out) == ["team-a/a1"]
    assert last(out, "Admitted", "team-a/big").nodes == {"main": ["node-a"]}


def test_no_node_has_enough_devices_at_all() -> None:
    d = spread()
    out = d.apply(big("three"))
    assert victims_of(out) == []
    assert last(out, "Inadmissible", "team-a/big").message.startswith(
        "preempting would free its quota but no node: no node in flavor default can take"
        f" pod 1 of 1: needs 3 devices of class {GPU}; "
    )


def test_a_preemptor_a_node_can_take_already_preempts_for_quota_alone() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 2), quota=2)
    d.apply(within_cq(2), *PRIORITIES)
    for name in ("a1", "a2"):
        d.apply(gpu_job(name).priority("p1"))  # node-a; node-b is free
    out = d.apply(big())
    assert victims_of(out) == ["team-a/a1", "team-a/a2"]
    assert admitted(out) == ["team-a/big"]


# --------------------------------------------------------------------------- plans


def test_plans_mode_chooses_the_same_victims_as_inline() -> None:
    inline = spread()
    want = victims_of(inline.apply(big()))
    d = spread("plans")
    out = d.apply(big())
    assert last(out, "Inadmissible", "team-a/big").reason == "WaitingForPreemptionPlan"
    (plan,) = d.fold.preemption_plans()
    assert sorted(plan.victims) == want == ["team-a/b1", "team-a/b2"]
    out = plan_now(d)
    assert victims_of(out) == want
    assert last(out, "Admitted", "team-a/big").nodes == {"main": ["node-b"]}


def test_a_plan_whose_victims_free_no_node_is_refused() -> None:
    d = spread("plans")
    d.apply(big())
    # enough quota, one GPU per node: valid for quota alone, not for a node
    out = d.plan("team-a/big", ["team-a/a1", "team-a/b1"])
    assert victims_of(out) == []
    assert d.state("team-a/a1") == d.state("team-a/b1") == "Admitted"
    assert d.fold.awaits_plan("team-a/big")


def test_an_empty_plan_for_want_of_a_node_gives_the_node_reason() -> None:
    d = spread("plans", jobs=(("a1", "p1"), ("ha", "high"), ("b1", "p1"), ("hb", "high")))
    d.apply(big())
    (plan,) = d.fold.preemption_plans()
    assert plan.victims == ()
    out = d.plan("team-a/big", [])
    verdict = last(out, "Inadmissible", "team-a/big")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message.startswith("preempting would free its quota but no node: ")
    assert not d.fold.awaits_plan("team-a/big")


# --------------------------------------------------------------------------- claims


def ready_with_claims(d: Driver, key: str, node: str, *devices: str) -> None:
    """``key``'s pods are scheduled (a claim of team-a allocated ``devices`` of
    ``node``) and ready: its hold ends, the claim stands for it."""
    name = key.split("/")[1]
    d.apply(claim(f"{name}-gpu", *devices, node=node, namespace="team-a"))
    d.ready(key)


def test_a_victim_whose_hold_ended_frees_the_claims_allocated_for_it() -> None:
    d = spread(started=True)
    assert not d.fold._device_holds  # every hold ended: claims stand for them
    d.auto_stop = False
    out = d.apply(big())
    assert victims_of(out) == ["team-a/b1", "team-a/b2"]
    stops = [x for x in out if x.type == "Preempted"]
    # their pods are deleted, and with them their claims; then the stop reports
    out = d.delete("ResourceClaim", "b1-gpu", "team-a")
    out += d.delete("ResourceClaim", "b2-gpu", "team-a")
    assert admitted(out) == []  # their quota is held until their pods are gone
    for stop in stops:
        out += d.stopped(stop)
    assert admitted(out)[0] == "team-a/big"
    assert last(out, "Admitted", "team-a/big").nodes == {"main": ["node-b"]}


def test_a_claim_that_may_be_another_workloads_is_not_counted_freed() -> None:
    """b1 and b2 were admitted together on node-b and both claims came after:
    either claim may be either's. Only their holds... which ended: so neither
    frees a GPU the search can count, and no one is evicted."""
    d = spread()
    d.apply(claim("x-gpu", "gpu-0", node="node-b", namespace="team-a"))
    d.apply(claim("y-gpu", "gpu-1", node="node-b", namespace="team-a"))
    for key in ("team-a/b1", "team-a/b2"):
        d.ready(key)
    # the holds of a1 and a2 last (no claim since); b1's and b2's ended
    assert sorted(d.fold._device_holds) == ["team-a/a1", "team-a/a2"]
    out = d.apply(big())
    assert victims_of(out) == ["team-a/a1", "team-a/a2"]  # node-a, by their holds
    assert last(out, "Admitted", "team-a/big").nodes == {"main": ["node-a"]}


def test_a_claim_of_another_namespace_on_the_victims_node_stays_taken() -> None:
    d = cluster(gpus("node-a", 2), gpus("node-b", 2), quota=4)
    d.apply(within_cq(), *PRIORITIES)
    d.apply(claim("theirs", "gpu-0", node="node-b"))  # not kuota's: node-b has 1 left
    for name in ("a1", "a2", "b1"):
        d.apply(gpu_job(name).priority("p1"))
    d.apply(manifests.node("node-b"))  # nothing changes
    out = d.apply(big())
    assert victims_of(out) == ["team-a/a1", "team-a/a2"]
    assert last(out, "Admitted", "team-a/big").nodes == {"main": ["node-a"]}


# --------------------------------------------------------------------------- fair sharing


FAIR = manifests.configuration(
    resources={"deviceClassMappings": [{"name": "nvidia-gpu", "deviceClassNames": [GPU]}]},
    fairSharing={"enable": True},
)


def test_fair_sharing_preemption_frees_a_node_too() -> None:
    d = spread()
    d.apply(FAIR)
    assert d.fold._config.fair_sharing.enable
    out = d.apply(big())
    assert victims_of(out) == ["team-a/b1", "team-a/b2"]
    assert last(out, "Admitted", "team-a/big").nodes == {"main": ["node-b"]}


def test_fair_sharing_on_quota_alone_takes_the_cheapest() -> None:
    d = spread(nodes=False)
    d.apply(FAIR)
    out = d.apply(big())
    assert victims_of(out) == ["team-a/a1", "team-a/b1"]


def test_the_room_is_kept_for_the_preemptor_until_it_is_admitted() -> None:
    """The victims' pods are gone (their stop reported) before their claims are
    deallocated: the GPUs their claims free go to the preemptor, not to the
    victims requeued behind it, though each of them fits on one GPU."""
    d = spread(started=True)
    out = d.apply(big())
    assert victims_of(out) == ["team-a/b1", "team-a/b2"]
    assert admitted(out) == []  # the driver reports their stops at once
    assert last(out, "Inadmissible", "team-a/big").reason == "NoNodePlacement"
    out = d.delete("ResourceClaim", "b1-gpu", "team-a")
    assert admitted(out) == []  # node-b's gpu-0 is kept for big
    out = d.delete("ResourceClaim", "b2-gpu", "team-a")
    assert admitted(out) == ["team-a/big"]
    assert last(out, "Admitted", "team-a/big").nodes == {"main": ["node-b"]}
    assert "team-a/big" not in d.fold._devices_reserved.values()  # ended at its admission


def test_a_preemptor_gone_gives_its_room_back() -> None:
    d = spread(started=True)
    d.auto_stop = False
    out = d.apply(big())
    assert victims_of(out) == ["team-a/b1", "team-a/b2"]
    assert set(d.fold._devices_reserved.values()) == {"team-a/big"}
    d.delete("Job", "big", "team-a")
    assert d.fold._devices_reserved == {}
    for stop in [x for x in out if x.type == "Preempted"]:
        d.stopped(stop)
    out = d.delete("ResourceClaim", "b1-gpu", "team-a")
    out += d.delete("ResourceClaim", "b2-gpu", "team-a")
    assert sorted(admitted(out)) == ["team-a/b1", "team-a/b2"]  # nothing kept for big


def test_victims_that_free_no_device_leave_the_quota_reason_to_the_node() -> None:
    """a1 and b1 were admitted before the fold knew any Node: they hold nothing,
    so evicting them frees quota the search can count, but no device."""
    d = cluster(gpus("node-a", 1), gpus("node-b", 1), quota=2, nodes=False)
    d.apply(within_cq(2), *PRIORITIES)
    for name in ("a1", "b1"):
        d.apply(gpu_job(name).priority("p1"))
    d.apply(manifests.node("node-a"), manifests.node("node-b"))
    out = d.apply(big())
    assert victims_of(out) == []
    verdict = last(out, "Inadmissible", "team-a/big")
    assert verdict.reason == "NoNodePlacement"
    assert verdict.message.startswith("preempting would free its quota but no node: ")
