"""The reference scenarios (``examples/scenarios``) through the real fold.

Each case states what the articles in ``shared/references`` describe: what a
workload is charged, when it is admitted, and the limits that are never
passed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision
from kuota.quantity import parse_quantity
from kuota.sim.engine import Simulator
from kuota.sim.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "examples" / "scenarios"


@cache
def run(name: str) -> tuple[Decision, ...]:
    text = (SCENARIOS / name).read_text(encoding="utf-8")
    simulator = Simulator(load_scenario(text, source=name), fold=Fold())
    decisions = simulator.run(max_steps=10_000)
    assert simulator.settled
    return tuple(decisions)


def first_admission(decisions: tuple[Decision, ...], workload: str) -> Decision:
    for d in decisions:
        if d.type == "Admitted" and d.workload == workload:
            return d
    raise AssertionError(f"{workload} was never admitted")


def charged(decision: Decision) -> dict[str, int]:
    """resource -> milli-units charged, summed over flavors."""
    out: dict[str, int] = {}
    for resources in (decision.usage or {}).values():
        for resource, amount in resources.items():
            out[resource] = out.get(resource, 0) + parse_quantity(amount)
    return out


def peak(decisions: tuple[Decision, ...], resource: str, *, prefix: str = "") -> int:
    """Highest concurrent charge of ``resource`` by workloads named ``prefix*``."""
    holding: dict[str, int] = {}
    best = 0
    for d in decisions:
        if d.workload is None or not d.workload.startswith(prefix):
            continue
        if d.type == "Admitted":
            holding[d.workload] = charged(d).get(resource, 0)
        elif d.type in ("Finished", "Preempted", "Evicted", "Deactivated"):
            holding.pop(d.workload, None)
        best = max(best, sum(holding.values()))
    return best


Q = parse_quantity

ADMISSIONS = {
    # article 000: a whole 80 GB GPU is charged ~80 GB, a 1g.10gb slice ~10 GB
    "mig: whole GPU charged 80Gi": (
        "mig-memory-quota.yaml",
        "training/train-1",
        0,
        {"gpu-memory": Q("80Gi"), "cpu": Q("4")},
    ),
    "mig: slice charged 10Gi": (
        "mig-memory-quota.yaml",
        "inference/infer-1",
        30,
        {"gpu-memory": Q("10Gi"), "cpu": Q("1")},
    ),
    "mig: seventh slice still fits": (
        "mig-memory-quota.yaml",
        "inference/infer-7",
        30,
        {"gpu-memory": Q("10Gi"), "cpu": Q("1")},
    ),
    "mig: second training job waits for the slices": (
        "mig-memory-quota.yaml",
        "training/train-2",
        330,
        {"gpu-memory": Q("80Gi"), "cpu": Q("4")},
    ),
    # consumable capacity: a 20Gi share of an MPS H100 is charged 20Gi
    "shares: a 20Gi share charged 20Gi": (
        "gpu-shares.yaml",
        "inference/infer-4",
        0,
        {"gpu-memory": Q("20Gi"), "cpu": Q("1")},
    ),
    "shares: 15Gi charged the next 10Gi step, once the first four finish": (
        "gpu-shares.yaml",
        "inference/infer-5",
        300,
        {"gpu-memory": Q("20Gi"), "cpu": Q("1")},
    ),
    # article 004: team-alpha borrows up to its limit, the rest waits
    "cohort: alpha-1 within nominal": (
        "cohort-borrowing.yaml",
        "team-alpha/alpha-1",
        0,
        {"nvidia.com/gpu": Q(4)},
    ),
    "cohort: alpha-3 borrows idle GPUs": (
        "cohort-borrowing.yaml",
        "team-alpha/alpha-3",
        0,
        {"nvidia.com/gpu": Q(4)},
    ),
    "cohort: beta jobs take the rest of the cohort": (
        "cohort-borrowing.yaml",
        "team-beta/beta-2",
        120,
        {"nvidia.com/gpu": Q(2)},
    ),
    "cohort: beta-3 waits for freed quota, then goes before a borrower": (
        "cohort-borrowing.yaml",
        "team-beta/beta-3",
        600,
        {"nvidia.com/gpu": Q(2)},
    ),
    "cohort: alpha-4 waits until it fits its nominal quota": (
        "cohort-borrowing.yaml",
        "team-alpha/alpha-4",
        660,
        {"nvidia.com/gpu": Q(4)},
    ),
    # article 000: device-count quota, each device counts 1
    "whole-gpu: two pods of one GPU": (
        "whole-gpu.yaml",
        "research/job-a",
        0,
        {"nvidia-gpu": Q(2), "cpu": Q(2)},
    ),
    "whole-gpu: one pod of two GPUs": (
        "whole-gpu.yaml",
        "research/job-b",
        0,
        {"nvidia-gpu": Q(2), "cpu": Q(1)},
    ),
    "whole-gpu: waits for job-a": (
        "whole-gpu.yaml",
        "research/job-c",
        300,
        {"nvidia-gpu": Q(1), "cpu": Q(1)},
    ),
    # extended resources and templates share one quota, nothing counted twice
    "extended: nvidia.com/gpu charged to the mapping": (
        "extended-resources.yaml",
        "ml/legacy-1",
        0,
        {"nvidia-gpu": Q(2), "cpu": Q(1)},
    ),
    "extended: template job": (
        "extended-resources.yaml",
        "ml/dra-1",
        0,
        {"nvidia-gpu": Q(1), "cpu": Q(1)},
    ),
    "extended: fills the quota": (
        "extended-resources.yaml",
        "ml/legacy-2",
        10,
        {"nvidia-gpu": Q(1), "cpu": Q(1)},
    ),
    "extended: template job waits for the extended-resource job": (
        "extended-resources.yaml",
        "ml/dra-2",
        300,
        {"nvidia-gpu": Q(1), "cpu": Q(1)},
    ),
    # docs/scenarios.md walks through this one
    "first steps: train-1 at once": (
        "first-steps.yaml",
        "team-a/train-1",
        0,
        {"nvidia.com/gpu": Q(3), "cpu": Q(4)},
    ),
    "first steps: the notebook behind the waiting train-2": (
        "first-steps.yaml",
        "team-a/notebook",
        120,
        {"nvidia.com/gpu": Q(1), "cpu": Q(1)},
    ),
    "first steps: train-2 when train-1 finishes": (
        "first-steps.yaml",
        "team-a/train-2",
        600,
        {"nvidia.com/gpu": Q(2), "cpu": Q(4)},
    ),
}


@pytest.mark.parametrize(
    ("scenario", "workload", "at", "charge"), ADMISSIONS.values(), ids=ADMISSIONS.keys()
)
def test_admission_time_and_charge(
    scenario: str, workload: str, at: float, charge: dict[str, int]
) -> None:
    admitted = first_admission(run(scenario), workload)
    assert (admitted.at, charged(admitted)) == (at, charge)


LIMITS = {
    "mig: gpu-memory never above 160Gi": ("mig-memory-quota.yaml", "gpu-memory", "", Q("160Gi")),
    "cohort: team-alpha borrows up to 12 GPUs and no more": (
        "cohort-borrowing.yaml",
        "nvidia.com/gpu",
        "team-alpha/",
        Q(12),
    ),
    "cohort: the cohort's 16 GPUs are all used": (
        "cohort-borrowing.yaml",
        "nvidia.com/gpu",
        "",
        Q(16),
    ),
    "whole-gpu: 4 A100s": ("whole-gpu.yaml", "nvidia-gpu", "", Q(4)),
    "shares: four 20Gi shares fill the 80Gi GPU": ("gpu-shares.yaml", "gpu-memory", "", Q("80Gi")),
    "extended: one quota of 4 for both paths": ("extended-resources.yaml", "nvidia-gpu", "", Q(4)),
    "first steps: 4 GPUs": ("first-steps.yaml", "nvidia.com/gpu", "", Q(4)),
}


@pytest.mark.parametrize(
    ("scenario", "resource", "prefix", "limit"), LIMITS.values(), ids=LIMITS.keys()
)
def test_peak_usage_reaches_the_limit_and_never_passes_it(
    scenario: str, resource: str, prefix: str, limit: int
) -> None:
    assert peak(run(scenario), resource, prefix=prefix) == limit


@pytest.mark.parametrize(
    "scenario",
    [
        "mig-memory-quota.yaml",
        "cohort-borrowing.yaml",
        "whole-gpu.yaml",
        "extended-resources.yaml",
        "first-steps.yaml",
    ],
)
def test_every_job_finishes_and_nothing_is_rejected_or_preempted(scenario: str) -> None:
    decisions = run(scenario)
    assert [d for d in decisions if d.type in ("Rejected", "Preempted", "Evicted")] == []
    jobs = {d.workload for d in decisions if d.workload}
    finished = {d.workload for d in decisions if d.type == "Finished"}
    assert finished == jobs


def test_borrowing_job_is_told_why_it_waits() -> None:
    decisions = run("cohort-borrowing.yaml")
    waiting = [
        d for d in decisions if d.type == "Inadmissible" and d.workload == "team-alpha/alpha-4"
    ]
    assert waiting, "alpha-4 should be reported inadmissible while it waits"
    assert waiting[0].at == 0
    assert waiting[0].message


def test_a_share_larger_than_the_gpu_is_inadmissible_with_the_reason() -> None:
    decisions = run("gpu-shares.yaml")
    told = [d for d in decisions if d.workload == "inference/too-big"]
    assert [(d.type, d.reason, d.at) for d in told] == [("Inadmissible", "CapacityOutOfRange", 20)]
    assert "90Gi is above the valid range's max 80Gi" in (told[0].message or "")


def test_no_extended_resource_is_charged_under_its_own_name() -> None:
    for d in run("extended-resources.yaml"):
        if d.type == "Admitted":
            assert "nvidia.com/gpu" not in charged(d), d


# --------------------------------------------------------------------------- gangs (#18)


def test_distributed_training_gangs_are_admitted_whole_or_not_at_all() -> None:
    decisions = run("distributed-training.yaml")
    small = first_admission(decisions, "ml/pytorchjob/ddp-small")
    assert small.at == 0 and (small.kind, small.api_version) == ("PyTorchJob", "kubeflow.org/v1")
    assert set(small.flavors or {}) == {"master", "worker"}
    assert charged(small) == {"nvidia.com/gpu": 4000}
    big = [d for d in decisions if d.workload == "ml/pytorchjob/ddp-big"]
    assert big and all(d.type == "Inadmissible" for d in big), "never partly admitted"
    assert (big[0].message or "").startswith(
        "PyTorchJob of 5 pods (master 1 + worker 4) needs nvidia.com/gpu 5 in all"
    )
    rc = first_admission(decisions, "ml/raycluster/rc")
    assert rc.at == 3600  # when ddp-small finished (run-for 1h)
    assert set(rc.flavors or {}) == {"head", "gpu-workers"}
    assert not [d for d in decisions if d.type == "Rejected"]
    assert peak(decisions, "nvidia.com/gpu") <= 4000


def test_pod_groups_wait_for_all_their_pods_and_lws_groups_are_gangs_of_their_own() -> None:
    decisions = run("pod-groups-and-jobsets.yaml")
    waiting = [
        d.message for d in decisions if d.workload == "ml/podgroup/g" and d.type != "Admitted"
    ]
    assert waiting[:2] == [
        "1 of 3 pods of pod group g exist; the group is admitted once all of them exist",
        "2 of 3 pods of pod group g exist; the group is admitted once all of them exist",
    ]
    assert first_admission(decisions, "ml/podgroup/g").at == 20  # when g-2 arrived
    js = first_admission(decisions, "ml/jobset/js")
    assert charged(js) == {"nvidia.com/gpu": 5000}
    for group in (0, 1):
        lws = first_admission(decisions, f"ml/leaderworkerset/lws/{group}")
        assert lws.at == 1810 and charged(lws) == {"nvidia.com/gpu": 2000}
    lone = [d for d in decisions if d.workload == "ml/podgroup/lone"]
    assert [d.reason for d in lone] == ["PodGroupIncomplete"], "its count is never reached"
    assert peak(decisions, "nvidia.com/gpu") <= 8000


def test_admission_fair_sharing_lets_the_less_used_team_go_first() -> None:
    decisions = run("admission-fair-sharing.yaml")
    admitted = [(d.at, d.workload) for d in decisions if d.type == "Admitted"]
    assert admitted == [
        (0, "team-a/a-1"),
        (3600, "team-b/b-1"),  # team-b's LocalQueue has used nothing
        (3600, "team-b/b-2"),
        (5400, "team-a/a-2"),  # submitted first, admitted last
        (5400, "team-a/a-3"),
    ]
    samples = [d for d in decisions if d.type == "LocalQueueUsage"]
    assert {d.object for d in samples} == {"LocalQueue team-a/lq", "LocalQueue team-b/lq"}
    assert all(d.at % 300 == 0 for d in samples)  # on the 5m grid


def gpu_hours(decisions: tuple[Decision, ...], end: float) -> dict[str, float]:
    started: dict[str, float] = {}
    used: dict[str, float] = {}
    for d in decisions:
        if d.workload is None:
            continue
        team = d.workload.partition("/")[0]
        if d.type == "Admitted":
            started[d.workload] = d.at
        elif d.type in ("Finished", "Preempted") and d.workload in started:
            used[team] = used.get(team, 0.0) + min(d.at, end) - started.pop(d.workload)
    for key, at in started.items():
        team = key.partition("/")[0]
        used[team] = used.get(team, 0.0) + end - at
    return used


def test_history_pays_back_the_burst() -> None:
    text = (SCENARIOS / "fair-sharing-history.yaml").read_text(encoding="utf-8")
    end = 5 * 3600.0
    shares = {}
    for history in (True, False):
        manifests = load_scenario(text, source="fair-sharing-history.yaml")
        if not history:
            for m in manifests:
                if m["kind"] == "Cohort":
                    m["metadata"].pop("annotations")
        used = gpu_hours(tuple(Simulator(manifests, fold=Fold()).run(until=end)), end)
        shares[history] = used["team-a"] / sum(used.values())
    # as the file's header says: 60% of the GPU-hours without history, 55% with
    assert round(shares[False], 3) == 0.600
    assert round(shares[True], 3) == 0.550


def test_node_fragmentation_waits_for_a_node_not_for_quota() -> None:
    decisions = run("node-fragmentation.yaml")
    order = [d.workload for d in decisions if d.type == "Admitted"]
    assert order == ["research/ddp", "research/single", "research/pair"]
    assert first_admission(decisions, "research/ddp").nodes == {"main": ["a100-a", "a100-b"]}
    (wait,) = [d for d in decisions if d.type == "Inadmissible" and d.workload == "research/pair"]
    assert wait.reason == "NoNodePlacement"
    assert wait.message == (
        "no node in flavor a100 can take pod 1 of 1: needs 2 devices of class gpu.nvidia.com; "
        "a100-a has 1 free, a100-b has 1 free"
    )
    pair = first_admission(decisions, "research/pair")
    assert pair.at == 1200  # when ddp finished, not when single did (at 420)


def test_a_share_waits_for_a_device_with_the_capacity_left() -> None:
    decisions = run("gpu-shares-on-nodes.yaml")
    order = [d.workload for d in decisions if d.type == "Admitted"]
    assert order == ["inference/chat", "inference/rerank", "inference/embed"]
    # two 50Gi shares cannot sit on one 80Gi device: one pod per node
    assert first_admission(decisions, "inference/chat").nodes == {"main": ["h100-a", "h100-b"]}
    assert first_admission(decisions, "inference/rerank").nodes == {"main": ["h100-a"]}
    (wait,) = [d for d in decisions if d.type == "Inadmissible" and d.workload == "inference/embed"]
    assert wait.reason == "NoNodePlacement"
    assert wait.message == (
        "no node in flavor h100-shared can take pod 1 of 1: needs 1 device of class "
        "mps.nvidia.com with 40Gi of memory; h100-a has 0 free, h100-b has 0 free"
    )
    assert first_admission(decisions, "inference/embed").at == 1200  # when chat finished
