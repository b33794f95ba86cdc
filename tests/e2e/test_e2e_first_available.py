"""End to end, ``firstAvailable`` (#17): the four services on the real stack,
pods on kwok nodes with real ResourceSlices, DRA devices allocated by
kube-scheduler.

Besides what ``e2e_harness.assert_pipeline`` checks for every scenario (each
Job charged what the scenario says: 40Gi for "a 3g.40gb slice, else a
1g.10gb", 10Gi for "5 whole GPUs, else a 1g.10gb", which no node can give),
this checks that kube-scheduler allocated each claim the alternative kuota
charged (the claim's ``status.allocation`` names the subrequest); that a Job
charged a 3g.40gb slice waits (``NoNodePlacement``) while none is free, though
1g.10gb slices are, and gets one once it is freed; and that kube-scheduler
never reported a pod it could not give its claims to.
(docs/design/dra-placement.md, "firstAvailable and All".)
"""

from __future__ import annotations

import pytest
from e2e_harness import (
    Run,
    assert_pipeline,
    claim_failures,
    counter_peaks,
    job_devices,
    run_fixture,
    run_scenario,
    wait_message,
)

from kuota.quantity import parse_quantity

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()


async def test_the_alternative_charged_is_the_one_allocated(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "first-available")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-fa"
    n0, n1 = e2e_run.nodes
    fill_0, fill_1, flex_1, flex_2, tiny = (
        f"{ns}/{n}" for n in ("fill-0", "fill-1", "flex-1", "flex-2", "tiny")
    )
    assert o.admitted_order() == [fill_0, fill_1, flex_1, tiny, flex_2]
    # flex-2's quota fits, but no 3g.40gb slice is free: it waits for the
    # alternative it was charged rather than take a 1g.10gb slice
    assert wait_message(o, flex_2, "NoNodePlacement") == (
        f"no node in flavor {e2e_run.id}-fa can take pod 1 of 1: needs 1 device of class "
        f"mig-3g.40gb-{e2e_run.id}; {n0} has 0 free, {n1} has 0 free"
    )
    # kube-scheduler allocated the alternative charged (request/subrequest)
    allocated = {
        key: [(r["request"], r["pool"], r["device"]) for r in job_devices(o, key)]
        for key in (flex_1, flex_2, tiny)
    }
    assert allocated == {
        flex_1: [("gpu/slice-3g", n1, "gpu-3-mig-3g40gb-0")],
        flex_2: [("gpu/slice-3g", n1, "gpu-3-mig-3g40gb-0")],
        tiny: [("gpu/slice-1g", n1, "gpu-3-mig-1g10gb-0")],
    }, allocated
    # gpu-3 carried a 3g.40gb slice and tiny's 1g.10gb at once, within its
    # counter; flex-2's pod got the 3g.40gb slice only once flex-1's was done
    peaks = counter_peaks(o)
    assert peaks[(n1, "gpu-3-memory", "memory")] == parse_quantity("50Gi"), peaks
    # kube-scheduler never failed to allocate a claim for a pod kuota admitted
    failed = await claim_failures(e2e_run, ns)
    assert not failed, failed
