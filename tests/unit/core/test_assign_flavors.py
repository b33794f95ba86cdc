"""Flavor eligibility (selectors, affinity, taints) and assignment details that
the fold tests do not reach: several podsets, shortfalls for preemption,
signatures that ignore moving figures."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kuota.api.types import (
    ClusterQueue,
    FlavorQuotas,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
)
from kuota.core.assign.flavors import (
    Mode,
    PodSetRequest,
    assign_flavors,
    could_fit_now,
    flavor_mismatch,
    queue_view,
)
from kuota.core.quota import tree as Q

GPU = ResourceFlavor("gpu", node_labels=(("gpu", "h100"), ("zone", "a")))


def ps(
    *,
    selector: dict[str, str] | None = None,
    terms: list[list[tuple[str, str, tuple[str, ...]]]] | None = None,
    tolerations: tuple[Toleration, ...] = (),
) -> PodSetRequest:
    affinity = tuple(
        NodeSelectorTerm(tuple(NodeSelectorRequirement(k, op, v) for k, op, v in t))
        for t in (terms or [])
    )
    return PodSetRequest(
        "main", 1, (("cpu", 1000),), tuple(sorted((selector or {}).items())), affinity, tolerations
    )


@dataclass
class Match:
    name: str
    flavor: ResourceFlavor
    podset: PodSetRequest
    why: str | None  # None: eligible


TAINTED = ResourceFlavor("spot", node_taints=(Taint("spot", "true", "NoSchedule"),))
EXECUTE = ResourceFlavor("drain", node_taints=(Taint("maint", "", "NoExecute"),))
SELF_TOLERATING = ResourceFlavor(
    "own",
    node_taints=(Taint("spot", "true", "NoSchedule"),),
    tolerations=(Toleration("spot", "Exists"),),
)
MATCHES = [
    Match("no constraints", GPU, ps(), None),
    Match("selector agrees", GPU, ps(selector={"gpu": "h100"}), None),
    Match("selector disagrees", GPU, ps(selector={"gpu": "a100"}), "doesn't match node affinity"),
    Match("selector key the flavor lacks is ignored", GPU, ps(selector={"rack": "7"}), None),
    Match("In", GPU, ps(terms=[[("gpu", "In", ("a100", "h100"))]]), None),
    Match("In fails", GPU, ps(terms=[[("gpu", "In", ("a100",))]]), "doesn't match"),
    Match("NotIn", GPU, ps(terms=[[("gpu", "NotIn", ("h100",))]]), "doesn't match"),
    Match("Exists", GPU, ps(terms=[[("zone", "Exists", ())]]), None),
    Match(
        "DoesNotExist on a label it has", GPU, ps(terms=[[("zone", "DoesNotExist", ())]]), "doesn't"
    ),
    Match("Gt", ResourceFlavor("n", (("gen", "5"),)), ps(terms=[[("gen", "Gt", ("4",))]]), None),
    Match(
        "Lt fails",
        ResourceFlavor("n", (("gen", "5"),)),
        ps(terms=[[("gen", "Lt", ("4",))]]),
        "doesn't",
    ),
    Match(
        "terms are ORed",
        GPU,
        ps(terms=[[("gpu", "In", ("a100",))], [("zone", "In", ("a",))]]),
        None,
    ),
    Match(
        "expressions of a term are ANDed",
        GPU,
        ps(terms=[[("gpu", "In", ("h100",)), ("zone", "In", ("b",))]]),
        "doesn't match",
    ),
    Match(
        "a term left empty by ignored keys matches everything",
        GPU,
        ps(terms=[[("gpu", "In", ("a100",))], [("rack", "In", ("7",))]]),
        None,
    ),
    Match("untolerated NoSchedule", TAINTED, ps(), "untolerated taint spot=true:NoSchedule"),
    Match("tolerated by key", TAINTED, ps(tolerations=(Toleration("spot", "Exists"),)), None),
    Match(
        "tolerated by value", TAINTED, ps(tolerations=(Toleration("spot", "Equal", "true"),)), None
    ),
    Match(
        "wrong value",
        TAINTED,
        ps(tolerations=(Toleration("spot", "Equal", "false"),)),
        "untolerated taint",
    ),
    Match(
        "wrong effect",
        TAINTED,
        ps(tolerations=(Toleration("spot", "Exists", "", "NoExecute"),)),
        "untolerated taint",
    ),
    Match("tolerate everything", TAINTED, ps(tolerations=(Toleration("", "Exists"),)), None),
    Match("NoExecute counts", EXECUTE, ps(), "untolerated taint maint:NoExecute in flavor drain"),
    Match("the flavor's own tolerations count", SELF_TOLERATING, ps(), None),
]


@pytest.mark.parametrize("case", MATCHES, ids=[c.name for c in MATCHES])
def test_flavor_mismatch(case: Match) -> None:
    why = flavor_mismatch(case.flavor, case.podset)
    if case.why is None:
        assert why is None
    else:
        assert why is not None and case.why in why


def queue(*flavors: tuple[str, int], cohort: str | None = None) -> tuple[ClusterQueue, Q.QuotaTree]:
    cq = ClusterQueue(
        name="cq",
        cohort=cohort,
        resource_groups=(
            ResourceGroup(
                ("cpu",),
                tuple(FlavorQuotas(f, (ResourceQuota("cpu", n * 1000),)) for f, n in flavors),
            ),
        ),
    )
    tree = Q.QuotaTree()
    tree.set_queue("cq", cohort=cohort, groups=cq.resource_groups)
    return cq, tree


FLAVORS = {"a": ResourceFlavor("a"), "b": ResourceFlavor("b")}


def cpu(name: str, milli: int) -> PodSetRequest:
    return PodSetRequest(name, 1, (("cpu", milli),))


def test_podsets_add_up_within_a_flavor() -> None:
    cq, tree = queue(("a", 3), ("b", 2))
    got = assign_flavors(
        view=queue_view(cq),
        node=tree.queues["cq"],
        flavors=FLAVORS,
        podsets=[cpu("leader", 2000), cpu("workers", 2000)],
    )
    assert got.fits
    assert [p.flavors for p in got.podsets] == [(("cpu", "a"),), (("cpu", "b"),)]
    assert dict(got.usage) == {("a", "cpu"): 2000, ("b", "cpu"): 2000}


def test_earlier_podsets_are_named_in_the_message() -> None:
    cq, tree = queue(("a", 3))
    got = assign_flavors(
        view=queue_view(cq),
        node=tree.queues["cq"],
        flavors=FLAVORS,
        podsets=[cpu("leader", 2000), cpu("workers", 2000)],
    )
    assert not got.fits
    assert got.message == (
        "couldn't assign flavors to podset workers: insufficient quota for cpu in flavor a: "
        "requested 2 plus 2 for earlier podsets, maximum capacity 3"
    )


def test_shortfalls_say_what_preemption_would_need() -> None:
    cq, tree = queue(("a", 4))
    Q.add_usage(tree.queues["cq"], ("a", "cpu"), 3000)
    got = assign_flavors(
        view=queue_view(cq), node=tree.queues["cq"], flavors=FLAVORS, podsets=[cpu("main", 2000)]
    )
    assert got.mode is Mode.PREEMPT
    (short,) = got.podsets[0].shortfalls
    assert (short.flavor, short.resource, short.requested, short.available, short.missing) == (
        "a",
        "cpu",
        2000,
        1000,
        1000,
    )
    assert got.blocking == ((("a", "cpu"), 2000),)
    assert not could_fit_now(tree.queues["cq"], got.blocking)
    Q.remove_usage(tree.queues["cq"], ("a", "cpu"), 1000)
    assert could_fit_now(tree.queues["cq"], got.blocking)


def test_signature_ignores_how_much_is_available() -> None:
    cq, tree = queue(("a", 4))
    node = tree.queues["cq"]
    Q.add_usage(node, ("a", "cpu"), 3000)
    first = assign_flavors(
        view=queue_view(cq), node=node, flavors=FLAVORS, podsets=[cpu("main", 2000)]
    )
    Q.add_usage(node, ("a", "cpu"), 1000)
    second = assign_flavors(
        view=queue_view(cq), node=node, flavors=FLAVORS, podsets=[cpu("main", 2000)]
    )
    assert first.message != second.message
    assert first.signature == second.signature


def test_requests_beyond_every_cap_register_no_waiter() -> None:
    cq, tree = queue(("a", 1))
    got = assign_flavors(
        view=queue_view(cq), node=tree.queues["cq"], flavors=FLAVORS, podsets=[cpu("main", 2000)]
    )
    assert got.mode is Mode.NO_FIT and got.blocking == ()
