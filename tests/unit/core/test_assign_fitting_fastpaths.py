"""The fast paths give what the general code gives.

- ``fit_picks`` + ``fit_assignment`` (the fit path the cycle takes first) equal
  ``assign_flavors`` whenever they answer, and answer for every plain fit;
- ``available`` / ``available_below`` (read through ``QuotaNode.caps``) equal
  Kueue's recursion written out plainly, on random forests and usage;
- a Job's pod spec read through the PodSet memo equals a fresh read, and a
  spec that does not read raises the same error every time.
"""

from __future__ import annotations

import copy

import core_builders as B
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.api import parse_job as PJ
from kuota.api.parse import parse_job
from kuota.api.types import (
    ClusterQueue,
    FlavorFungibility,
    FlavorQuotas,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    ValidationError,
)
from kuota.core.assign.fitting import fit_assignment, fit_picks
from kuota.core.assign.flavors import (
    Mode,
    PodSetRequest,
    assign_flavors,
    plan_podsets,
    queue_view,
)
from kuota.core.quota import tree as Q

SETTINGS = settings(max_examples=150, deadline=None)
FLAVORS = {
    "a": ResourceFlavor("a"),
    "b": ResourceFlavor("b"),
    "t": ResourceFlavor("t", node_taints=(Taint("spot", "true", "NoSchedule"),)),
}


@st.composite
def forests(draw: st.DrawFn) -> tuple[Q.QuotaTree, list[ClusterQueue]]:
    """A root cohort (maybe with a child cohort) and 1-3 queues with two resource
    groups over flavors a/b/t, random limits and usage."""
    tree = Q.QuotaTree()
    root_quota = draw(st.integers(0, 6))
    root_groups = (
        ResourceGroup(("cpu",), (FlavorQuotas("a", (ResourceQuota("cpu", root_quota * 1000),)),)),
    )
    tree.set_cohort("root", parent=None, groups=root_groups)
    if draw(st.booleans()):
        tree.set_cohort("mid", parent="root", groups=())
    cqs: list[ClusterQueue] = []
    for i in range(draw(st.integers(1, 3))):
        cohort = draw(
            st.sampled_from([None, "root", "mid"] if "mid" in tree.cohorts else [None, "root"])
        )
        flavors = draw(st.sampled_from([("a",), ("a", "b"), ("b", "a"), ("t", "a")]))
        fqs = []
        for f in flavors:
            nominal = draw(st.integers(0, 6)) * 1000
            borrow = draw(st.none() | st.integers(0, 4).map(lambda x: x * 1000)) if cohort else None
            lend = (
                draw(st.none() | st.integers(0, nominal // 1000).map(lambda x: x * 1000))
                if cohort
                else None
            )
            fqs.append(FlavorQuotas(f, (ResourceQuota("cpu", nominal, borrow, lend),)))
        groups = (
            ResourceGroup(("cpu",), tuple(fqs)),
            ResourceGroup(("gpu",), (FlavorQuotas("b", (ResourceQuota("gpu", 4000),)),)),
        )
        fung = FlavorFungibility(
            when_can_borrow=draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"]))
        )
        cq = ClusterQueue(
            name=f"q{i}", cohort=cohort, resource_groups=groups, flavor_fungibility=fung
        )
        tree.set_queue(cq.name, cohort=cohort, groups=groups)
        cqs.append(cq)
    for cq in cqs:
        for f in ("a", "b", "t"):
            used = draw(st.integers(0, 5)) * 1000
            if used:
                Q.add_usage(tree.queues[cq.name], (f, "cpu"), used)
    return tree, cqs


podsets = st.lists(
    st.builds(
        lambda n, cpu, gpu, tolerate: PodSetRequest(
            f"ps{n}",
            1,
            tuple(sorted({"cpu": cpu * 1000, **({"gpu": gpu * 1000} if gpu else {})}.items())),
            tolerations=(Toleration("spot", "Exists"),) if tolerate else (),
        ),
        st.integers(0, 9),
        st.integers(0, 4),
        st.integers(0, 2),
        st.booleans(),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda p: p.name,
)


@SETTINGS
@given(forests(), podsets)
def test_fit_path_agrees_with_the_full_search(
    forest: tuple[Q.QuotaTree, list[ClusterQueue]], requests: list[PodSetRequest]
) -> None:
    tree, cqs = forest
    for cq in cqs:
        view = queue_view(cq)
        node = tree.queues[cq.name]
        plan = plan_podsets(view, requests)
        full = assign_flavors(view=view, node=node, flavors=FLAVORS, podsets=requests, plan=plan)
        picks = fit_picks(view=view, node=node, flavors=FLAVORS, plan=plan)
        if picks is not None:
            assert fit_assignment(plan, picks) == full
        else:
            # the fast path only gives up when something did not plainly fit
            assert (
                full.mode is not Mode.FIT
                or any(len(g.flavors) > 1 for p in plan for g in p.groups)
                or any(p.constrained for p in plan)
            )


def reference_available(node: Q.QuotaNode, fr: Q.FlavorResource) -> int:
    """Kueue's recursion, straight from the limits (no caps, no shortcuts)."""
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    lim = node.limits.get(fr, Q.Limits())
    local = node.local_quota(fr)
    from_parent = reference_available(node.parent, fr)
    if lim.borrowing_limit is not None:
        stored = node.subtree.get(fr, 0) - local
        used = max(0, node.usage.get(fr, 0) - local)
        from_parent = min(from_parent, stored - used + lim.borrowing_limit)
    return max(0, local - node.usage.get(fr, 0)) + from_parent


@SETTINGS
@given(forests())
def test_available_reads_the_caps_right(forest: tuple[Q.QuotaTree, list[ClusterQueue]]) -> None:
    tree, _ = forest
    for node in [*tree.queues.values(), *tree.cohorts.values()]:
        for fr in [(f, "cpu") for f in ("a", "b", "t")] + [("b", "gpu")]:
            want = reference_available(node, fr)
            assert Q.available(node, fr) == want, (node.name, fr)
            if node.parent is not None:
                above = Q.available(node.parent, fr)
                assert Q.available_below(node, fr, above) == want
            # a node copied out of the tree (no caps) gives the same
            loose = copy.copy(node)
            loose.caps = {}
            assert Q.available(loose, fr) == want


def job(pod: dict[str, object], *, name: str = "j", parallelism: int = 1) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {"kuota.dev/created-at": "1"},
        },
        "spec": {"parallelism": parallelism, "template": {"spec": pod}},
    }


POD = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}
BAD = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "lots"}}}]}


def fresh(manifest: dict[str, object]) -> object:
    PJ._PODSETS.clear()
    return parse_job(copy.deepcopy(manifest), at=0)


@given(st.sampled_from([POD, BAD]), st.integers(1, 3), st.sampled_from(["j", "k"]))
def test_the_podset_memo_reads_what_reading_reads(
    pod: dict[str, object], parallelism: int, name: str
) -> None:
    manifest = job(pod, name=name, parallelism=parallelism)
    want = fresh(manifest)
    for _ in range(3):  # memoised reads, from equal but distinct dicts
        assert parse_job(copy.deepcopy(manifest), at=0) == want
    if pod is BAD:
        assert isinstance(want, ValidationError)
        assert not PJ._PODSETS  # an error is never memoised


def test_equal_values_of_other_types_are_not_confused() -> None:
    # 2 and 2.0 read the same quantity, True is not a number: the memo must not
    # hand one's result to the other (marshal writes the types).
    ints = job({"containers": [{"name": "m", "resources": {"requests": {"cpu": 2}}}]})
    floats = job({"containers": [{"name": "m", "resources": {"requests": {"cpu": 2.5}}}]})
    bools = job({"containers": [{"name": "m", "resources": {"requests": {"cpu": True}}}]})
    results = [fresh(m) for m in (ints, floats, bools)]
    PJ._PODSETS.clear()
    assert [parse_job(m, at=0) for m in (ints, floats, bools)] == results
    assert isinstance(results[2], ValidationError)


def test_admissions_with_one_cached_fit_share_no_maps() -> None:
    # The cycle hands the same nested maps of a cached Fit to every Admitted
    # decision; the Decision must hold its own copies, or changing one would
    # change the others.
    d = B.Driver()
    d.apply(B.flavor("a"), B.cq("q").flavor("a", cpu=4), B.lq("ns", "lq", "q"))
    first = d.apply(B.job("ns", "j1").queue("lq").requests(cpu=1))
    second = d.apply(B.job("ns", "j2").queue("lq").requests(cpu=1))
    (a,) = [x for x in first if x.type == "Admitted"]
    (b,) = [x for x in second if x.type == "Admitted"]
    assert a.flavors == b.flavors and a.usage == b.usage
    assert a.flavors is not b.flavors and a.usage is not b.usage
    assert a.flavors is not None and b.flavors is not None
    assert a.flavors["main"] is not b.flavors["main"]
