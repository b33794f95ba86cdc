"""End to end, MIG packing on shared counters (#17): the four services on the
real stack, pods on kwok nodes with real ResourceSlices, DRA devices allocated
by kube-scheduler.

Besides what ``e2e_harness.assert_pipeline`` checks for every scenario, this
checks that a whole GPU whose quota fits waits (``NoNodePlacement``) while the
1g.10gb slices of other Jobs have spent a part of every GPU's memory counter
that is not taken whole, and is admitted once a slice's pod is done and its
GPU is whole again; that kube-scheduler allocated the devices kuota's
placement counted on (slices packed on one GPU until its counter is spent,
the eighth on the next GPU, the waiting whole GPU on that one), never spending
more of a counter than it has; and that it never reported a pod it could not
give its claims to.
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


async def test_whole_gpu_waits_for_a_gpu_whose_counter_slices_have_not_spent(
    e2e_run: Run,
) -> None:
    o = await run_scenario(e2e_run, "mig-packing")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-pack"
    n0, n1 = e2e_run.nodes
    train_a, infer_a, infer_b, train_b, train_c = (
        f"{ns}/{n}" for n in ("train-a", "infer-a", "infer-b", "train-b", "train-c")
    )
    assert o.admitted_order() == [train_a, infer_a, infer_b, train_b, train_c]
    # train-c's quota fits, but no GPU has its 80Gi: it waits for a node, not for quota
    assert wait_message(o, train_c, "NoNodePlacement") == (
        f"no node in flavor {e2e_run.id}-pack can take pod 1 of 1: needs 1 device of class "
        f"gpu-{e2e_run.id}; {n0} has 0 free, {n1} has 0 free"
    )
    # ... until infer-b's slice freed gpu-1's counter: kuota admits it as soon as
    # the slice's claim is deallocated (its pod done), which can be before the
    # Job controller marks infer-b Complete, so its Finished is not waited for
    for key, node in ((train_a, n0), (infer_a, n1), (infer_b, n1), (train_b, n1), (train_c, n1)):
        (d,) = o.of_type("Admitted", key)
        assert d.nodes == {"main": [node]}, (key, d.nodes)
    # kube-scheduler allocated what the placement counted on: the slices packed
    # on gpu-0 (all seven), the eighth on gpu-1, which train-c got whole once
    # infer-b's pod was done (counter_peaks: never both at once)
    devices = {
        key: sorted((r["pool"], r["device"]) for r in job_devices(o, key))
        for key in (infer_a, infer_b, train_b, train_c)
    }
    assert devices == {
        infer_a: [(n1, f"gpu-0-mig-1g10gb-{m}") for m in range(6)],
        infer_b: [(n1, "gpu-0-mig-1g10gb-6"), (n1, "gpu-1-mig-1g10gb-0")],
        train_b: [(n1, "gpu-2"), (n1, "gpu-3")],
        train_c: [(n1, "gpu-1")],
    }, devices
    # no counter was ever spent beyond its 80Gi; gpu-0 carried 70Gi of slices
    peaks = counter_peaks(o)
    assert peaks[(n1, "gpu-0-memory", "memory")] == parse_quantity("70Gi"), peaks
    assert peaks[(n1, "gpu-1-memory", "memory")] == parse_quantity("80Gi"), peaks
    # kube-scheduler never failed to allocate a claim for a pod kuota admitted
    failed = await claim_failures(e2e_run, ns)
    assert not failed, failed
