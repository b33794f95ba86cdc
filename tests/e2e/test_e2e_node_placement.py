"""End to end, quota AND a node (#17): the four services on the real stack, pods
on kwok nodes with real ResourceSlices, DRA devices allocated by kube-scheduler.

Besides what ``e2e_harness.assert_pipeline`` checks for every scenario (each
admitted Job ran to completion on the run's nodes with its devices allocated,
quota never exceeded, the simulator agrees), this checks that a Job whose quota
fits but that no node can take waits with a reason naming the nodes, that the
others go on past it, that each admitted Job's pods ran on the nodes its
Admitted decision named (the actuator pins them), and that kube-scheduler never
reported a pod it could not give its claims to. The second scenario does the
same for a pod that names a ResourceClaim not allocated yet: the claim's device
is placed with the pod's own, on one node.
"""

from __future__ import annotations

import pytest
from e2e_hardware import MIG_3G
from e2e_harness import (
    Run,
    assert_pipeline,
    claim_failures,
    run_fixture,
    run_scenario,
    wait_message,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()


async def test_fragmentation_waits_for_a_node_not_for_quota(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "node-fragmentation")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-frag"
    n0, n1 = e2e_run.nodes
    assert o.admitted_order() == [f"{ns}/f-1", f"{ns}/f-3", f"{ns}/f-2"]
    (first,) = o.of_type("Admitted", f"{ns}/f-1")
    assert first.nodes == {"main": [n0, n1]}, first
    assert wait_message(o, f"{ns}/f-2", "NoNodePlacement") == (
        f"no node in flavor {e2e_run.id}-frag can take pod 1 of 1: needs 2 devices of class "
        f"wgpu-{e2e_run.id}; {n0} has 1 free, {n1} has 1 free"
    )
    # each admitted Job's pods ran on the nodes its decision named
    for key in (f"{ns}/f-1", f"{ns}/f-2", f"{ns}/f-3"):
        (d,) = o.of_type("Admitted", key)
        assert d.nodes is not None, d
        for pod in o.pods[key]:
            assert pod["spec"]["nodeName"] in d.nodes["main"], (key, pod["spec"]["nodeName"])
    # kube-scheduler never failed to allocate a claim for a pod kuota admitted
    failed = await claim_failures(e2e_run, ns)
    assert not failed, failed


async def test_an_unallocated_direct_claim_is_placed_with_its_user(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "direct-claim-placed")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-placed"
    fill, train = f"{ns}/fill", f"{ns}/train"
    assert o.admitted_order() == [fill, train]
    # its quota fits at once, but no node has its GPU and the claim's slice
    message = wait_message(o, train, "NoNodePlacement")
    assert message.startswith(f"no node in flavor {ns} can take pod 1 of 1: needs "), message
    assert all(n in message for n in e2e_run.nodes), message
    # (admitted once fill's pods are done and their claims deallocated, which may
    # come before fill's Finished: not asserted)
    (d,) = o.of_type("Admitted", train)
    assert d.nodes is not None and len(d.nodes["main"]) == 1, d
    (node,) = d.nodes["main"]
    # kube-scheduler allocated the claim a 3g.40gb slice on the node kuota chose
    claim = e2e_run.claims.get(f"{ns}/slice")
    assert claim is not None, sorted(e2e_run.claims)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], f"-{MIG_3G}-" in result["device"]) == (node, True), result
    for pod in o.pods[train]:
        assert pod["spec"]["nodeName"] == node, pod["spec"]["nodeName"]
    failed = await claim_failures(e2e_run, ns)
    assert not failed, failed


async def test_a_device_taint_rule_keeps_a_nodes_devices_out(e2e_run: Run) -> None:
    """Last in the module: its rule taints the run's first node for good."""
    o = await run_scenario(e2e_run, "device-taint-rule")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-taint"
    n0, n1 = e2e_run.nodes
    assert o.admitted_order() == [f"{ns}/t-1", f"{ns}/t-2"]
    (first,) = o.of_type("Admitted", f"{ns}/t-1")
    assert first.nodes == {"main": [n1]}, first  # n0's GPUs are tainted by the rule
    message = wait_message(o, f"{ns}/t-2", "NoNodePlacement")
    assert message.startswith(f"no node in flavor {ns} can take pod 1 of 1: needs 1 device"), (
        message
    )
    # n0's GPUs, all tainted, are no candidates: counted, not named
    assert f"{n1} has 0 free, 1 other node has none" in message and n0 not in message, message
    (second,) = o.of_type("Admitted", f"{ns}/t-2")
    assert second.nodes == {"main": [n1]}, second
    for key in (f"{ns}/t-1", f"{ns}/t-2"):
        for pod in o.pods[key]:
            assert pod["spec"]["nodeName"] == n1, (key, pod["spec"]["nodeName"])
    failed = await claim_failures(e2e_run, ns)
    assert not failed, failed
