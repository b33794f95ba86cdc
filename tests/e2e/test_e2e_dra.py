"""End to end, DRA charging: the four services on the real stack, pods on kwok nodes.

One pipeline for the module (``e2e_harness.run_fixture``); each test plays one
scenario of ``tests/e2e/scenarios/`` and checks, besides its own story, what
``e2e_harness.assert_pipeline`` checks for every scenario: the webhook suspended
each Job at creation; admitted Jobs were charged what the scenario says,
unsuspended with the flavor's node labels injected, ran on the run's kwok
nodes with DRA devices allocated by kube-scheduler, and completed; the
admitted usage never exceeded quota, sampled every 100 ms and replayed at
every change of every Job; and ``kuota.sim`` admits in the same order.
"""

from __future__ import annotations

import pytest
from e2e_harness import Outcome, Run, assert_pipeline, run_fixture, run_scenario

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()

GI = 1024**3 * 1000  # milli-units of one Gi


def charged(o: Outcome, key: str) -> dict[str, str]:
    (d,) = o.of_type("Admitted", key)
    return {r: q for per in (d.usage or {}).values() for r, q in per.items()}


async def test_whole_gpu_device_quota(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "whole-gpu")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-whole"
    # BestEffortFIFO: w-4 (1 GPU) goes before the older w-3 (2 GPUs) that does not fit.
    assert o.admitted_order() == [f"{ns}/w-1", f"{ns}/w-2", f"{ns}/w-4", f"{ns}/w-3"]
    assert o.peak[(ns, "whole-gpus")] == 2000, o.peak
    waiting = o.of_type("Inadmissible", f"{ns}/w-3")
    assert waiting and waiting[0].reason == "InsufficientQuota", waiting


async def test_mig_memory_counters(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "mig-memory")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-mig"
    # An 80 GB whole GPU is charged 80Gi of gpu-memory, next to 10Gi per 1g.10gb slice.
    assert charged(o, f"{ns}/train-1") == {"gpu-memory": "80Gi"}
    assert charged(o, f"{ns}/infer-1") == {"gpu-memory": "30Gi"}
    assert charged(o, f"{ns}/infer-2") == {"gpu-memory": "40Gi"}
    assert o.admitted_order()[-1] == f"{ns}/train-2", "train-2 waits for train-1's 80Gi"
    # 80Gi + 70Gi of slices at once, then 80Gi + 70Gi again: never the 230Gi a
    # count of "devices x 80Gi" would suggest, never over the 160Gi quota.
    assert o.peak[(ns, "gpu-memory")] == 150 * GI, o.peak
    assert o.of_type("Inadmissible", f"{ns}/train-2"), "train-2 waited, and was told why"


async def test_extended_resources_share_quota_with_templates(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "extended-resources")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-ext"
    # nvidia.com/gpu: 1 and a template of the same class draw from one quota.
    for job in ("ext-1", "tpl-1", "ext-2"):
        assert charged(o, f"{ns}/{job}") == {"whole-gpus": "1"}, job
    assert o.admitted_order() == [f"{ns}/ext-1", f"{ns}/tpl-1", f"{ns}/ext-2"]
    assert o.peak[(ns, "whole-gpus")] == 2000, o.peak
    # kube-scheduler allocated the extended resource through DRA (its own claim).
    for job in ("ext-1", "ext-2"):
        for pod in o.pods[f"{ns}/{job}"]:
            status = pod["status"].get("extendedResourceClaimStatus") or {}
            assert status.get("resourceClaimName"), f"{job}: no extended-resource claim: {status}"


async def test_malformed_template_is_reported_and_others_go_on(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "malformed-template")
    assert_pipeline(o)
    ns = f"{e2e_run.id}-bad"
    bad = f"{ns}/bad-1"
    (verdict,) = o.of_type("Inadmissible", bad)
    assert verdict.reason == "InvalidCEL", verdict
    assert "model" in (verdict.message or ""), verdict.message
    warnings = [
        e for e in o.events[bad] if e.get("type") == "Warning" and e.get("reason") == "Pending"
    ]
    assert warnings, f"no Pending warning Event on {bad}: {o.events[bad]}"
    assert "InvalidCEL" in warnings[0]["message"] or "model" in warnings[0]["message"], warnings
    assert o.admitted_order() == [f"{ns}/good-1", f"{ns}/good-2"]
