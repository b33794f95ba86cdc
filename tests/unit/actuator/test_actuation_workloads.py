"""Per-kind actuation planning (kuota.actuation.workloads): the suspend field of
each kind, flavors injected into every podset's pod template and restored on a
stop, and a gated Pod's admission."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from actuator_builders import decision, flavor, tol
from builders.workloads import job_set, leader_worker_set, pod, pytorch_job, ray_cluster, ray_job

from kuota.actuation.patch import ANN_ORIGINAL
from kuota.actuation.workloads import (
    SUSPEND_FIELDS,
    PatchError,
    admit,
    admit_pod,
    flavors_by_podset,
    pod_templates,
    stop,
    suspended,
    with_suspend,
)
from kuota.api.parse import parse_object
from kuota.api.types import PodMember, WorkloadSpec

GPU = "nvidia.com/gpu"
H100 = flavor("h100", {"gpu": "h100"}, [tol(GPU)])
SPOT = flavor("spot", {"lifecycle": "spot"}, [tol("spot")])
FLAVORS = {f.name: f for f in (H100, SPOT)}

KINDS = [
    pytorch_job("p", suspend=True),
    ray_cluster("r", workers={"a": 1, "b": 2}, suspend=True),
    ray_job("j", workers={"w": 1}, suspend=True),
    job_set("s", jobs={"driver": (1, 1), "workers": (2, 2)}, suspend=True),
]
IDS = [m["kind"] for m in KINDS]


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


@pytest.mark.parametrize("manifest", KINDS, ids=IDS)
def test_templates_are_the_parsers_podsets(manifest: dict[str, Any]) -> None:
    spec = parse_object(manifest, at=0.0)
    assert isinstance(spec, WorkloadSpec)
    names = [name for name, _ in pod_templates(manifest)]
    assert names == [p.name for p in spec.podsets]


@pytest.mark.parametrize("manifest", KINDS, ids=IDS)
def test_each_kind_is_suspended_and_unsuspended_by_its_own_field(manifest: dict[str, Any]) -> None:
    assert suspended(manifest) is True
    running = with_suspend(manifest, False)
    assert suspended(running) is False
    assert _get(running, SUSPEND_FIELDS[manifest["kind"]]) is False
    assert suspended(manifest) is True, "the input is not changed"
    parsed = parse_object(running, at=0.0)
    assert isinstance(parsed, WorkloadSpec) and parsed.suspended is False


def test_pytorch_job_suspend_is_written_under_run_policy() -> None:
    m = pytorch_job("p")  # no runPolicy at all
    assert suspended(m) is False
    assert with_suspend(m, True)["spec"]["runPolicy"] == {"suspend": True}


@pytest.mark.parametrize("manifest", KINDS, ids=IDS)
def test_admit_injects_every_podsets_flavor_and_stop_restores_the_manifest(
    manifest: dict[str, Any],
) -> None:
    original = copy.deepcopy(manifest)
    names = [name for name, _ in pod_templates(manifest)]
    # the first podset on spot, the others on h100
    by_podset = {name: [SPOT if i == 0 else H100] for i, name in enumerate(names)}
    started = admit(manifest, by_podset)
    assert manifest == original, "the input is not changed"
    assert suspended(started) is False
    for i, (name, path) in enumerate(pod_templates(started)):
        pod_spec = _get(started, path)
        want = {"lifecycle": "spot"} if i == 0 else {"gpu": "h100"}
        assert pod_spec["nodeSelector"] == want, name
        assert [t["key"] for t in pod_spec["tolerations"]] == ["spot" if i == 0 else GPU]
    originals = json.loads(started["metadata"]["annotations"][ANN_ORIGINAL])
    assert sorted(originals) == sorted(names)
    stopped = stop(started)
    assert suspended(stopped) is True
    if manifest["kind"] == "RayJob":  # the default submitter template stays, as in Kueue
        del stopped["spec"]["submitterPodTemplate"]
    stopped["metadata"].pop("annotations")
    assert stopped == original, "a stop restores every template"


def test_admitting_again_does_not_stack_flavors() -> None:
    m = pytorch_job("p", suspend=True)
    once = admit(m, {"master": [H100], "worker": [H100]})
    again = admit(with_suspend(once, True), {"master": [SPOT], "worker": [SPOT]})
    master = again["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert master["nodeSelector"] == {"lifecycle": "spot"}
    assert [t["key"] for t in master["tolerations"]] == ["spot"]


def test_a_template_selector_conflicting_with_a_flavor_fails_to_start() -> None:
    m = pytorch_job("p", suspend=True)
    m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {"gpu": "a100"}
    with pytest.raises(PatchError) as err:
        admit(m, {"master": [H100], "worker": [H100]})
    assert err.value.reason == "FailedToStart" and "podset worker" in err.value.message


def test_a_decision_naming_a_podset_the_object_lacks_is_refused() -> None:
    with pytest.raises(PatchError) as err:
        admit(ray_cluster("r", workers={"a": 1}), {"head": [H100], "gone": [H100]})
    assert err.value.reason == "PodSetsChanged"


def test_flavors_by_podset_reads_the_decision() -> None:
    d = decision(
        "Admitted",
        workload="ns/pytorchjob/p",
        flavors={"master": {GPU: "h100"}, "worker": {GPU: "spot", "cpu": "h100"}},
    )
    assert flavors_by_podset(d, FLAVORS) == {"master": [H100], "worker": [H100, SPOT]}
    with pytest.raises(PatchError) as err:
        flavors_by_podset(d, {"h100": H100})
    assert err.value.reason == "FlavorNotFound"


def test_a_gated_pod_is_admitted_with_its_podsets_flavors_and_without_its_gate() -> None:
    m = pod("g-0", group="g", total=2)
    m["spec"]["schedulingGates"].append({"name": "other.example/gate"})
    member = parse_object(m, at=0.0)
    assert isinstance(member, PodMember) and member.gated
    d = decision("Admitted", workload="ns/podgroup/g", flavors={member.role: {GPU: "h100"}})
    started = admit_pod(m, d, FLAVORS)
    assert started["spec"]["nodeSelector"] == {"gpu": "h100"}
    assert started["spec"]["schedulingGates"] == [{"name": "other.example/gate"}]
    after = parse_object(started, at=0.0)
    assert isinstance(after, PodMember) and not after.gated
    single = admit_pod(pod("solo"), decision("Admitted", flavors={"main": {GPU: "h100"}}), FLAVORS)
    assert "schedulingGates" not in single["spec"]


def test_kinds_without_a_suspend_field_say_so() -> None:
    for m in (pod("x"), leader_worker_set("l")):
        assert suspended(m) is None
        with pytest.raises(PatchError) as err:
            with_suspend(m, True)
        assert err.value.reason == "NotSuspendable"
