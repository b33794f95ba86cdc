"""End to end, consumable capacity: claims sharing one GPU, placed by kube-scheduler.

The run's first kwok node has one shared GPU (``e2e_hardware.SHARED_GPU``:
``allowMultipleAllocations``, 80Gi of memory in 10Gi steps). kuota charges
each claim what it asks, rounded per the device's requestPolicy; the real
kube-scheduler (DRAConsumableCapacity, beta and on in 1.36) allocates the four
20Gi claims of one Job to that one device, each consuming 20Gi, and rounds a
15Gi claim to 20Gi as kuota charged it. ``assert_pipeline`` checks the rest
(suspended at creation, charged as annotated, within quota at every sample,
the simulator's order). The second test gives the ClusterQueue twice the
device's memory: a 40Gi share waits for a node (NoNodePlacement) while the
device is full, and kube-scheduler never fails to allocate a share kuota
admitted.
"""

from __future__ import annotations

import pytest
from e2e_harness import (
    SHARED_GPU,
    Outcome,
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

GI = 1024**3 * 1000  # milli-units of one Gi


def allocations(o: Outcome, job: str) -> list[dict[str, object]]:
    """The device results of the claims of ``job``'s pods that succeeded."""
    out = []
    for pod in o.pods[job]:
        if pod["status"].get("phase") != "Succeeded":
            continue
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        for claim in o.claims.get(key, []):
            out.extend(claim["status"]["allocation"]["devices"]["results"])
    return out


async def test_four_20gi_claims_share_one_device(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "gpu-shares")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-shares"
    assert o.admitted_order() == [f"{ns}/serve-1", f"{ns}/serve-2"]
    assert o.peak[(ns, "gpu-share-memory")] == 80 * GI, o.peak
    waiting = o.of_type("Inadmissible", f"{ns}/serve-2")
    assert waiting and waiting[0].reason == "InsufficientQuota", waiting

    four = allocations(o, f"{ns}/serve-1")
    assert len(four) == 4, four
    # One device, four allocations of it, each consuming 20Gi of its memory.
    assert {(r["pool"], r["device"]) for r in four} == {(e2e_run.nodes[0], SHARED_GPU)}, four
    assert [r.get("consumedCapacity") for r in four] == [{"memory": "20Gi"}] * 4, four
    assert len({r.get("shareID") for r in four}) == 4, f"one share each: {four}"

    # 15Gi asked, 20Gi charged by kuota (the annotation) and consumed by the scheduler.
    (one,) = allocations(o, f"{ns}/serve-2")
    assert one["device"] == SHARED_GPU, one
    assert one.get("consumedCapacity") == {"memory": "20Gi"}, one
    # kube-scheduler never failed to give a pod kuota admitted its share
    failed = await claim_failures(e2e_run, ns)
    assert not failed, failed


async def test_a_share_waits_for_capacity_on_a_node_not_for_quota(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "gpu-shares-placed")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-sharenode"
    n0 = e2e_run.nodes[0]
    assert o.admitted_order() == [f"{ns}/fill", f"{ns}/more"]
    # the quota fits (160Gi), the shared device's 80Gi do not: it waits for a node
    assert wait_message(o, f"{ns}/more", "NoNodePlacement") == (
        f"no node in flavor {ns} can take pod 1 of 1: needs 1 device of class "
        f"mps-{e2e_run.id} with 40Gi of memory; {n0} has 0 free, 1 other node has none"
    )
    for key in (f"{ns}/fill", f"{ns}/more"):
        (d,) = o.of_type("Admitted", key)
        assert d.nodes == {"main": [n0]}, d
        for pod in o.pods[key]:
            assert pod["spec"]["nodeName"] == n0, (key, pod["spec"]["nodeName"])
    (one,) = allocations(o, f"{ns}/more")
    assert (one["device"], one.get("consumedCapacity")) == (SHARED_GPU, {"memory": "40Gi"}), one
    # kube-scheduler never failed to give a pod kuota admitted its share
    failed = await claim_failures(e2e_run, ns)
    assert not failed, failed
