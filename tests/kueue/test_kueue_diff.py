"""The short differential subset of ``make test``: four scenarios on Kueue v0.19.2 itself.

The module starts the Kueue stack (``scripts/kueue-stack up``: its own
kube-apiserver, etcd, scheduler, controller-manager, kwok and the cached Kueue
binary, on its own ports) unless it is already up, plays each scenario as real
Jobs there, folds the same manifests with kuota's core and asserts that the two
agree or differ only as ``docs/kueue-differences.md`` records
(``kueue_diff.DEPARTURES``). The six cover whole GPUs with a cohort's
reclaim, MIG memory counters, borrowing within a borrowing limit, priority
preemption, and distributed training (#18): PyTorchJobs and RayClusters run by
the real training-operator and KubeRay beside Kueue, admitted as gangs, one
never fitting, one preempted whole. ``make diff-kueue`` runs every scenario.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path[:0] = [
    str(Path(__file__).resolve().parent),
    str(Path(__file__).resolve().parents[1] / "e2e"),
]

import kueue_diff  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SUBSET = [
    "cohort-reclaim",
    "mig-memory",
    "cohort-borrowing",
    "priority-preemption",
    "training-gangs",
    "training-preemption",
]
STACK = [str(kueue_diff.REPO / "scripts" / "kueue-stack")]


@pytest.fixture(scope="module")
def kueue_stack() -> Iterator[kueue_diff.KueueStack]:
    was_up = subprocess.run([*STACK, "status"], capture_output=True).returncode == 0
    if not was_up:
        up = subprocess.run([*STACK, "up"], capture_output=True, text=True, timeout=1500)
        assert up.returncode == 0, f"scripts/kueue-stack up failed:\n{up.stderr[-4000:]}"
    try:
        yield kueue_diff.KueueStack.read()
    finally:
        if not was_up:
            subprocess.run([*STACK, "down", "--purge"], capture_output=True, timeout=120)


@pytest.mark.parametrize("name", SUBSET)
async def test_kueue_and_kuota_agree(kueue_stack: kueue_diff.KueueStack, name: str) -> None:
    row = await kueue_diff.diff_scenario(kueue_stack, name)
    print("\n" + row.line())
    assert row.kueue.admissions, f"Kueue admitted nothing in {name}: is its webhook registered?"
    assert row.verdict in ("agree", "departure"), row.line()
