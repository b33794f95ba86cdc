"""End to end, admission fair sharing: two LocalQueues of one
UsageBasedAdmissionFairSharing ClusterQueue, through the real pipeline.

Same harness and common checks as ``test_e2e_queueing.py``; the run's
Configuration has ``admissionFairSharing`` (``e2e_hardware.configuration``).
The LocalQueue that has used less goes first, though the other's Jobs are
older; re-folding the recorded journal gives each LocalQueue's usage and the
same order (what ``kuota explain`` shows).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from e2e_harness import Run, assert_pipeline, run_fixture, run_scenario
from kubernetes_asyncio import client

from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import PLANS
from kuota.quantity import parse_quantity

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()


async def test_the_local_queue_that_used_less_goes_first(e2e_run: Run) -> None:
    o = await run_scenario(e2e_run, "admission-fair-sharing")
    assert_pipeline(o)
    a, b = f"{e2e_run.id}-team-a", f"{e2e_run.id}-team-b"
    # a-1's entry penalty put team-a's LocalQueue behind team-b's: b-1 and b-2
    # (submitted after a-2 and a-3) were admitted first, as the simulator says.
    assert o.admitted_order() == [f"{a}/a-1", f"{b}/b-1", f"{b}/b-2", f"{a}/a-2", f"{a}/a-3"]
    assert o.admitted_order(o.sim_decisions) == o.admitted_order()
    assert o.peak[(f"{e2e_run.id}-afs", "whole-gpus")] <= 2000, o.peak
    # The journal, folded again: team-a's LocalQueue has used more than team-b's.
    fold = Fold(preemption=PLANS)
    for offset, event in e2e_run.journal:
        fold.apply(event, offset=offset)
    usage = dict((name, u) for name, u, _ in fold.local_queue_usage(f"{e2e_run.id}-afs"))
    assert usage[f"{a}/gpus"] > usage[f"{b}/gpus"] > 0.0, usage
    # The actuator wrote each LocalQueue's status.fairSharing as Kueue does (samples
    # every 5s): team-a's consumed GPUs above team-b's.
    objects = client.CustomObjectsApi(e2e_run.api)

    async def consumed(ns: str) -> int:
        lq = await objects.get_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", ns, "localqueues", "gpus"
        )
        fair = (lq.get("status") or {}).get("fairSharing") or {}
        status = fair.get("admissionFairSharingStatus") or {}
        return parse_quantity((status.get("consumedResources") or {}).get("whole-gpus", "0"))

    # The status is a sample taken every 5s: one taken while the Jobs still ran
    # may show the two LocalQueues level (a CI run read 31 and 31); wait for one
    # that shows what the journal says (30s is six samples).
    deadline = time.monotonic() + 30
    seen = (await consumed(a), await consumed(b))
    while not seen[0] > seen[1] > 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        seen = (await consumed(a), await consumed(b))
    assert seen[0] > seen[1] > 0, seen
