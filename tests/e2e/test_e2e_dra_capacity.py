"""End to end, consumable capacity: claims sharing one GPU, placed by kube-scheduler.

The run's first kwok node has one shared GPU (``e2e_hardware.SHARED_GPU``:
``allowMultipleAllocations``, 80Gi of memory in 10Gi steps). kuota charges
each claim what it asks, rounded per the device's requestPolicy; the real
kube-scheduler (DRAConsumableCapacity, beta and on in 1.36) allocates the four
20Gi claims of one Job to that one device, each consuming 20Gi, and rounds a
15Gi claim to 20Gi as kuota charged it. ``assert_pipeline`` checks the rest
(suspended at creation, charged as annotated, within quota at every sample,
the simulator's order).
"""

from __future__ import annotations

import pytest
from e2e_harness import SHARED_GPU, Outcome, Run, assert_pipeline, run_fixture, run_scenario

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
