"""Pinning a podset to the nodes its DRA pods were placed on (#17): an Admitted
decision's ``nodes`` become a required node affinity on ``metadata.name`` in the
podset's pod template (every kind with templates but a JobSet), remembered and
restored with the flavors' fields; a gated Pod is narrowed as far as Kubernetes
lets it be. docs/design/dra-placement.md, "Making the prediction true"."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from actuator_builders import admitted, converge, decision, flavor, job, order, tol
from builders.workloads import job_set, pod, pytorch_job, ray_cluster, ray_job

from kuota.actuation.patch import ANN_ORIGINAL, DecisionOrder, UpdateJob, plan
from kuota.actuation.plan_pods import PodSteps, UpdatePod, plan_pods
from kuota.actuation.plan_workloads import plan_workload
from kuota.actuation.scheduling import SchedulingFields, inject, own_fields, pin_to_nodes
from kuota.actuation.workloads import admit, admit_pod, pod_templates, stop, user_templates
from kuota.api.parse import parse_object
from kuota.api.parse_workloads import role_of
from kuota.api.types import PodMember

GPU = "nvidia.com/gpu"
H100 = flavor("h100", {"gpu": "h100"}, [tol(GPU)])
FLAVORS = {"h100": H100}
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def on(node: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": "In", "values": [node]}


def expr(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}


def terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = spec["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    return found


def template(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def record(manifest: dict[str, Any]) -> Any:
    return json.loads(manifest["metadata"]["annotations"][ANN_ORIGINAL])


def pinned(nodes: list[str], **fields: Any) -> Any:
    return admitted({GPU: "h100"}, nodes={"main": nodes}, **fields)


def with_affinity(affinity: dict[str, Any]) -> dict[str, Any]:
    manifest = job().build()
    template(manifest)["affinity"] = copy.deepcopy(affinity)
    return manifest


# --------------------------------------------------------------------------- pin_to_nodes


def test_no_affinity_becomes_one_term_on_the_node() -> None:
    assert pin_to_nodes(None, ["n1"]) == required({"matchFields": [on("n1")]})


def test_each_node_is_a_term_of_its_own_one_name_each() -> None:
    # The apiserver refuses a matchFields requirement In more than one name.
    got = pin_to_nodes({}, ["n2", "n1", "n2"])
    assert got == required({"matchFields": [on("n1")]}, {"matchFields": [on("n2")]})


def test_every_existing_term_is_narrowed_and_keeps_its_expressions() -> None:
    mine = required(
        {"matchExpressions": [expr("zone", "a")]},
        {"matchExpressions": [expr("zone", "b")], "matchFields": [on("n1")]},
    )
    got = pin_to_nodes(mine, ["n1"])
    assert got == required(
        {"matchExpressions": [expr("zone", "a")], "matchFields": [on("n1")]},
        {"matchExpressions": [expr("zone", "b")], "matchFields": [on("n1")]},
    )
    # two nodes: a term already on one of them is kept, the other one is repeated
    assert pin_to_nodes(mine, ["n1", "n2"]) == required(
        {"matchExpressions": [expr("zone", "a")], "matchFields": [on("n1")]},
        {"matchExpressions": [expr("zone", "a")], "matchFields": [on("n2")]},
        {"matchExpressions": [expr("zone", "b")], "matchFields": [on("n1")]},
    )
    assert mine == required(
        {"matchExpressions": [expr("zone", "a")]},
        {"matchExpressions": [expr("zone", "b")], "matchFields": [on("n1")]},
    ), "the input is not changed"


def test_preferred_and_pod_affinity_are_untouched() -> None:
    preferred = [{"weight": 1, "preference": {"matchExpressions": [expr("disk", "ssd")]}}]
    pods = {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}
    mine = {"nodeAffinity": {PREFERRED: preferred}, "podAffinity": pods}
    got = pin_to_nodes(mine, ["n1"])
    assert got == {
        "nodeAffinity": {
            PREFERRED: preferred,
            REQUIRED: {"nodeSelectorTerms": [{"matchFields": [on("n1")]}]},
        },
        "podAffinity": pods,
    }


def test_two_terms_on_two_nodes_are_four_terms() -> None:
    # (zone a or zone b) and (n1 or n2)
    mine = required(
        {"matchExpressions": [expr("zone", "a")]}, {"matchExpressions": [expr("zone", "b")]}
    )
    assert pin_to_nodes(mine, ["n1", "n2"]) == required(
        {"matchExpressions": [expr("zone", "a")], "matchFields": [on("n1")]},
        {"matchExpressions": [expr("zone", "a")], "matchFields": [on("n2")]},
        {"matchExpressions": [expr("zone", "b")], "matchFields": [on("n1")]},
        {"matchExpressions": [expr("zone", "b")], "matchFields": [on("n2")]},
    )


@pytest.mark.parametrize("nodes", [["n1"], ["n1", "n2"]])
def test_pinning_twice_is_pinning_once(nodes: list[str]) -> None:
    for affinity in (None, required({"matchExpressions": [expr("zone", "a")]})):
        once = pin_to_nodes(affinity, nodes)
        assert pin_to_nodes(once, nodes) == once


def test_a_gated_pod_may_only_be_narrowed() -> None:
    two = required({"matchExpressions": [expr("zone", "a")]})
    assert pin_to_nodes(two, ["n1", "n2"], keep_terms=True) is None, "would add a term"
    assert pin_to_nodes(two, ["n1"], keep_terms=True) == pin_to_nodes(two, ["n1"])
    assert pin_to_nodes(None, ["n1", "n2"], keep_terms=True) == pin_to_nodes(None, ["n1", "n2"])


def test_inject_owns_the_affinity_only_when_pinning() -> None:
    current = SchedulingFields.read({"affinity": required({"matchFields": [on("x")]})})
    plain = inject(own_fields(None, current, pinning=False), [H100])
    assert not plain.owns_affinity
    assert json.loads(plain.to_json()) == {
        "nodeSelector": {"gpu": "h100"},
        "tolerations": [tol(GPU)],
    }
    original = own_fields(None, current, pinning=True)
    assert json.loads(original.to_json())["affinity"] == current.affinity
    assert inject(original, [H100], ["n1"]).affinity == pin_to_nodes(current.affinity, ["n1"])


# --------------------------------------------------------------------------- a Job


def test_a_job_without_affinity_gets_one_term_and_a_stop_takes_it_away() -> None:
    manifest = job().build()
    final, steps = converge(manifest, d := pinned(["n1"]), FLAVORS)
    assert isinstance(steps[-1], UpdateJob)
    assert "pinned to 1 node(s)" in steps[-1].what
    assert template(final)["affinity"] == required({"matchFields": [on("n1")]})
    assert template(final)["nodeSelector"] == {"gpu": "h100"}, "the flavor's labels too"
    assert record(final) == {"nodeSelector": None, "tolerations": None, "affinity": None}
    stopped, _ = converge(final, decision("Preempted", reason="InClusterQueue"), FLAVORS)
    assert stopped["spec"]["suspend"] is True
    assert template(stopped) == template(manifest), "no affinity key at all, as before"
    assert ANN_ORIGINAL not in stopped["metadata"]["annotations"]
    assert d.nodes == {"main": ["n1"]}


def test_a_job_with_two_terms_gets_the_field_in_each_and_the_exact_original_back() -> None:
    preferred = [{"weight": 5, "preference": {"matchExpressions": [expr("disk", "ssd")]}}]
    mine = required(
        {"matchExpressions": [expr("zone", "a")]},
        {"matchExpressions": [expr("zone", "b"), expr("rack", "r1")]},
    )
    mine["nodeAffinity"][PREFERRED] = preferred
    manifest = with_affinity(mine)
    final, _ = converge(manifest, pinned(["n1"]), FLAVORS)
    assert terms(template(final)) == [
        {"matchExpressions": [expr("zone", "a")], "matchFields": [on("n1")]},
        {"matchExpressions": [expr("zone", "b"), expr("rack", "r1")], "matchFields": [on("n1")]},
    ]
    assert template(final)["affinity"]["nodeAffinity"][PREFERRED] == preferred, "untouched"
    assert record(final)["affinity"] == mine
    for stop_type, reason in (("Evicted", "PodsReadyTimeout"), ("Deactivated", None)):
        stopped, _ = converge(final, decision(stop_type, reason=reason), FLAVORS)
        assert template(stopped) == template(manifest)


def test_a_decision_without_nodes_leaves_the_template_as_it_was() -> None:
    mine = required({"matchExpressions": [expr("zone", "a")]})
    manifest = with_affinity(mine)
    final, _ = converge(manifest, admitted({GPU: "h100"}), FLAVORS)
    assert template(final)["affinity"] == mine
    assert final["metadata"]["annotations"][ANN_ORIGINAL] == (
        '{"nodeSelector":null,"tolerations":null}'
    ), "the record as before pinning existed"
    # nodes for no podset of the Job's: the same
    other, _ = converge(manifest, admitted({GPU: "h100"}, nodes={}), FLAVORS)
    assert template(other) == template(final)
    none, _ = converge(manifest, admitted({GPU: "h100"}, nodes={"main": []}), FLAVORS)
    assert template(none) == template(final)


def test_admitting_again_with_the_same_nodes_does_not_add_the_requirement_twice() -> None:
    mine = required({"matchExpressions": [expr("zone", "a")]})
    first, _ = converge(with_affinity(mine), pinned(["n1"]), FLAVORS)
    # a second admission over the running Job (a stop that was never applied)
    again, steps = converge(first, pinned(["n1"]), FLAVORS, record=1)
    assert template(again)["affinity"] == template(first)["affinity"]
    assert terms(template(again)) == [
        {"matchExpressions": [expr("zone", "a")], "matchFields": [on("n1")]}
    ]
    assert record(again) == record(first)
    # the same decision redelivered: skipped
    d = pinned(["n1"])
    once, _ = converge(with_affinity(mine), d, FLAVORS)
    twice, steps = converge(once, d, FLAVORS)
    assert twice == once and len(steps) == 1


def test_a_job_admitted_elsewhere_after_a_stop_is_on_the_new_nodes_only() -> None:
    first, _ = converge(job().build(), pinned(["n1"]), FLAVORS)
    stopped, _ = converge(first, decision("Preempted", reason="InClusterQueue"), FLAVORS)
    again, _ = converge(stopped, pinned(["n2", "n3"]), FLAVORS)
    assert terms(template(again)) == [{"matchFields": [on("n2")]}, {"matchFields": [on("n3")]}]


def test_a_running_job_readmitted_moves_from_the_old_pin() -> None:
    """A stop never applied: the new admission suspends and starts from the record,
    to new nodes, or, without nodes, back to the user's affinity."""
    mine = required({"matchExpressions": [expr("zone", "a")]})
    first, _ = converge(with_affinity(mine), pinned(["n1"]), FLAVORS)
    moved, steps = converge(first, pinned(["n2"]), FLAVORS, record=1)
    assert len(steps) > 1, "suspended first: the template is frozen while it runs"
    assert terms(template(moved)) == [
        {"matchExpressions": [expr("zone", "a")], "matchFields": [on("n2")]}
    ]
    unpinned, _ = converge(moved, admitted({GPU: "h100"}), FLAVORS, record=2)
    assert template(unpinned)["affinity"] == mine
    assert record(unpinned)["affinity"] == mine


def test_a_job_pinned_once_that_was_admitted_unpinned_before_keeps_the_users_affinity() -> None:
    """The record of an unpinned admission has no affinity: a later pin takes the
    template's own, which kuota never wrote."""
    mine = required({"matchExpressions": [expr("zone", "a")]})
    first, _ = converge(with_affinity(mine), admitted({GPU: "h100"}), FLAVORS)
    step = plan(first, d := pinned(["n1"]), order=order(d, 1), flavors=FLAVORS)
    assert isinstance(step, UpdateJob) and not step.final, "suspend first"
    assert record(step.job)["affinity"] == mine
    final, _ = converge(first, d, FLAVORS, record=1)
    assert record(final)["affinity"] == mine


# --------------------------------------------------------------------------- other kinds

ORDER = DecisionOrder(10, 0)


def specs(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, path in pod_templates(obj):
        node: Any = obj
        for step in path:
            node = node[step]
        out[name] = node
    return out


def kind_admitted(key: str, podsets: list[str], nodes: dict[str, list[str]]) -> Any:
    flavors = {p: {GPU: "h100"} for p in podsets}
    return decision("Admitted", workload=key, uid="u1", flavors=flavors, nodes=nodes)


def test_a_pytorchjob_pins_only_the_podset_placed_on_nodes() -> None:
    obj = pytorch_job("p", suspend=True)
    obj["metadata"]["uid"] = "u1"
    before = copy.deepcopy(specs(obj))
    d = kind_admitted("ns/pytorchjob/p", ["master", "worker"], {"worker": ["n1", "n2"]})
    step = plan_workload(obj, d, order=ORDER, flavors=FLAVORS)
    assert isinstance(step, UpdateJob)
    after = specs(step.job)
    assert "affinity" not in after["master"]
    assert after["master"]["nodeSelector"] == {"gpu": "h100"}
    assert terms(after["worker"]) == [{"matchFields": [on("n1")]}, {"matchFields": [on("n2")]}]
    kept = record(step.job)
    assert "affinity" not in kept["master"] and kept["worker"]["affinity"] is None
    assert specs(user_templates(step.job)) == before, "what ingest journals: the user's"
    pre = decision("Preempted", workload="ns/pytorchjob/p", uid="u1", reason="InClusterQueue")
    stopped = plan_workload(step.job, pre, order=DecisionOrder(11, 0), flavors={})
    assert isinstance(stopped, UpdateJob)
    assert specs(stopped.job) == before


@pytest.mark.parametrize(
    ("obj", "podsets"),
    [
        (ray_cluster("r", suspend=True), ["head", "workers"]),
        (ray_job("r", suspend=True, mode="HTTPMode"), ["head", "workers"]),
    ],
)
def test_ray_head_and_worker_groups_are_pinned_each_to_its_own(
    obj: dict[str, Any], podsets: list[str]
) -> None:
    by_podset = {p: [H100] for p in podsets}
    new = admit(obj, by_podset, {"head": ["h"], "workers": ["w1", "w2"]})
    got = specs(new)
    assert terms(got["head"]) == [{"matchFields": [on("h")]}]
    assert terms(got["workers"]) == [{"matchFields": [on("w1")]}, {"matchFields": [on("w2")]}]
    assert admit(new, by_podset, {"head": ["h"], "workers": ["w1", "w2"]}) == new, "no stacking"
    assert specs(stop(new)) == specs(obj)


def test_a_jobset_is_not_pinned_its_webhook_freezes_the_affinity() -> None:
    obj = job_set("s", suspend=True)
    new = admit(obj, {"leader": [H100], "workers": [H100]}, {"workers": ["n1"]})
    assert all("affinity" not in s for s in specs(new).values())
    assert all("affinity" not in fields for fields in record(new).values())
    assert specs(new) == specs(admit(obj, {"leader": [H100], "workers": [H100]}))


def test_nodes_for_a_podset_the_object_lacks_are_a_changed_podset() -> None:
    from kuota.actuation.workloads import PatchError

    with pytest.raises(PatchError) as err:
        admit(pytorch_job("p", suspend=True), {"master": [H100]}, {"launcher": ["n1"]})
    assert err.value.reason == "PodSetsChanged"


# --------------------------------------------------------------------------- Pods


def gated(name: str, affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    m = pod(name, group="g", total=2)
    m["metadata"].update(uid=f"uid-{name}", resourceVersion="10")
    if affinity is not None:
        m["spec"]["affinity"] = copy.deepcopy(affinity)
    return m


def pods_admitted(pods: list[dict[str, Any]], nodes: list[str]) -> Any:
    member = parse_object(pods[0], at=0.0)
    assert isinstance(member, PodMember)
    role = role_of(member.podset)
    return decision(
        "Admitted",
        workload="ns/podgroup/g",
        uid="uid-a",
        cluster_queue="cq",
        flavors={role: {GPU: "h100"}},
        nodes={role: nodes},
    )


def written(step: Any) -> list[dict[str, Any]]:
    assert isinstance(step, PodSteps), step
    return [w.pod for w in step.writes if isinstance(w, UpdatePod)]


def test_gated_pods_without_terms_are_pinned_at_ungating() -> None:
    pods = [gated("a"), gated("b")]
    step = plan_pods(pods, pods_admitted(pods, ["n1", "n2"]), order=ORDER, flavors=FLAVORS)
    for new in written(step):
        assert "schedulingGates" not in new["spec"]
        assert new["spec"]["nodeSelector"] == {"gpu": "h100"}
        assert terms(new["spec"]) == [{"matchFields": [on("n1")]}, {"matchFields": [on("n2")]}]


def test_a_gated_pods_own_terms_are_narrowed_on_one_node_and_left_on_several() -> None:
    mine = required({"matchExpressions": [expr("zone", "a")]})
    pods = [gated("a", mine), gated("b", mine)]
    one = written(plan_pods(pods, pods_admitted(pods, ["n1"]), order=ORDER, flavors=FLAVORS))
    assert all(
        terms(p["spec"]) == [{"matchExpressions": [expr("zone", "a")], "matchFields": [on("n1")]}]
        for p in one
    )
    # the OR of two nodes would need new terms, which Kubernetes refuses on a Pod
    two = admit_pod(pods[0], pods_admitted(pods, ["n1", "n2"]), FLAVORS)
    assert two["spec"]["affinity"] == mine and "schedulingGates" not in two["spec"]


def test_a_pod_without_nodes_is_ungated_as_before() -> None:
    pods = [gated("a"), gated("b")]
    d = pods_admitted(pods, ["n1"])
    plain = d.model_copy(update={"nodes": None})
    new = admit_pod(pods[0], plain, FLAVORS)
    assert "affinity" not in new["spec"]
    assert admit_pod(pods[0], d, FLAVORS)["spec"]["affinity"] == required(
        {"matchFields": [on("n1")]}
    )
