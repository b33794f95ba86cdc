"""Who gets admitted, where, and why not: one table per rule of Kueue's admission.

Each case applies queue objects, then Jobs one by one (each Job its own event),
and checks the Admitted decisions (workload, and flavor where it matters) and
the reason of the last Inadmissible decision of the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from core_builders import (
    Driver,
    cohort,
    cq,
    flavor,
    job,
    last,
    lq,
    namespace,
    wpc,
)

GPU = "nvidia.com/gpu"


@dataclass
class Case:
    name: str
    objects: list[Any]
    jobs: list[Any]
    admitted: list[str]  # in decision order
    reasons: dict[str, str] = field(default_factory=dict)  # workload -> last Inadmissible reason
    flavors: dict[str, str] = field(default_factory=dict)  # workload -> flavor of its GPUs (or cpu)
    messages: dict[str, str] = field(default_factory=dict)  # workload -> message substring


def gpu_job(name: str, n: int = 1, ns: str = "ns", queue: str = "lq") -> Any:
    return job(ns, name).queue(queue).requests(gpu=n)


def cpu_job(name: str, n: Any = 1, ns: str = "ns", queue: str = "lq") -> Any:
    return job(ns, name).queue(queue).requests(cpu=n)


def many(prefix: str, count: int, make: Any = gpu_job, **kw: Any) -> list[Any]:
    return [make(f"{prefix}{i}", **kw) for i in range(count)]


def keys(prefix: str, count: int, ns: str = "ns") -> list[str]:
    return [f"{ns}/{prefix}{i}" for i in range(count)]


FLAVORS = [flavor("default"), flavor("h100"), flavor("a100"), flavor("spot"), flavor("ondemand")]


def one_queue(*quotas: Any, **kw: Any) -> list[Any]:
    """One ClusterQueue ``cq`` (flavor ``default``) with LocalQueue ns/lq."""
    return [*FLAVORS, cq("cq").flavor("default", **kw), lq("ns", "lq", "cq")]


def pair(a: Any, b: Any) -> list[Any]:
    """team-a and team-b in cohort pool; LocalQueues ns/lq -> a, other/lq -> b."""
    return [*FLAVORS, a, b, lq("ns", "lq", "team-a"), lq("other", "lq", "team-b")]


CASES = [
    Case(
        "nominal quota admits until full",
        one_queue(cpu=4),
        many("j", 5, cpu_job),
        keys("j", 4),
        {"ns/j4": "InsufficientQuota"},
        messages={"ns/j4": "requested 1, 0 available, nominal quota reached"},
    ),
    Case(
        "a gang larger than the queue can ever hold",
        one_queue(cpu=2),
        [cpu_job("big").parallelism(3)],
        [],
        {"ns/big": "InsufficientQuota"},
        messages={"ns/big": "requested 3, maximum capacity 2"},
    ),
    Case(
        "milli-cpu requests are exact",
        one_queue(cpu="1"),
        [cpu_job("a", "500m"), cpu_job("b", "500m"), cpu_job("c", "1m")],
        ["ns/a", "ns/b"],
        {"ns/c": "InsufficientQuota"},
        messages={"ns/c": "requested 1m, 0 available"},
    ),
    Case(
        "borrowing up to the borrowing limit",
        pair(
            cq("team-a").cohort("pool").flavor("h100", gpu=(8, 4)),
            cq("team-b").cohort("pool").flavor("h100", gpu=8),
        ),
        many("j", 13),
        keys("j", 12),
        {"ns/j12": "InsufficientQuota"},
        messages={"ns/j12": "requested 1, 0 available, borrowing limit reached"},
    ),
    Case(
        "borrowing without a limit takes the whole cohort",
        pair(
            cq("team-a").cohort("pool").flavor("h100", gpu=8),
            cq("team-b").cohort("pool").flavor("h100", gpu=8),
        ),
        many("j", 17),
        keys("j", 16),
        {"ns/j16": "InsufficientQuota"},
        messages={"ns/j16": "no unused quota left in cohort pool"},
    ),
    Case(
        "a lending limit caps what a queue lends",
        pair(
            cq("team-a").cohort("pool").flavor("h100", gpu=8),
            cq("team-b").cohort("pool").flavor("h100", gpu=(8, None, 2)),
        ),
        many("j", 11),
        keys("j", 10),
        {"ns/j10": "InsufficientQuota"},
    ),
    Case(
        "a queue without a cohort cannot borrow",
        [*FLAVORS, cq("solo").flavor("h100", gpu=2), lq("ns", "lq", "solo")],
        many("j", 3),
        keys("j", 2),
        {"ns/j2": "InsufficientQuota"},
    ),
    Case(
        "hierarchical cohorts: a parent's own quota is shared below",
        [
            *FLAVORS,
            cohort("org").flavor("h100", gpu=4),
            cohort("team").parent("org"),
            cq("a").cohort("team").flavor("h100", gpu=2),
            lq("ns", "lq", "a"),
        ],
        many("j", 7),
        keys("j", 6),
        {"ns/j6": "InsufficientQuota"},
        messages={"ns/j6": "no unused quota left in cohort org"},
    ),
    Case(
        "hierarchical cohorts: a cohort's borrowing limit caps its subtree",
        [
            *FLAVORS,
            cohort("org").flavor("h100", gpu=4),
            cohort("team").parent("org").flavor("h100", gpu=(0, 1)),
            cq("a").cohort("team").flavor("h100", gpu=2),
            lq("ns", "lq", "a"),
        ],
        many("j", 4),
        keys("j", 3),
        {"ns/j3": "InsufficientQuota"},
        messages={"ns/j3": "borrowing limit of cohort team reached"},
    ),
    Case(
        "hierarchical cohorts: a sibling subtree's unused quota can be borrowed",
        [
            *FLAVORS,
            cohort("org"),
            cohort("left").parent("org"),
            cohort("right").parent("org"),
            cq("a").cohort("left").flavor("h100", gpu=1),
            cq("b").cohort("right").flavor("h100", gpu=3),
            lq("ns", "lq", "a"),
        ],
        many("j", 5),
        keys("j", 4),
        {"ns/j4": "InsufficientQuota"},
    ),
    Case(
        "flavors are tried in the queue's order",
        [
            *FLAVORS,
            cq("cq").flavor("spot", gpu=2).flavor("ondemand", gpu=2),
            lq("ns", "lq", "cq"),
        ],
        many("j", 5),
        keys("j", 4),
        {"ns/j4": "InsufficientQuota"},
        {"ns/j0": "spot", "ns/j1": "spot", "ns/j2": "ondemand", "ns/j3": "ondemand"},
        {"ns/j4": "in flavor spot: requested 1, 0 available, nominal quota reached; "},
    ),
    Case(
        "whenCanBorrow MayStopSearch borrows in the first flavor",
        pair(
            cq("team-a").cohort("pool").flavor("spot", gpu=1).flavor("ondemand", gpu=4),
            cq("team-b").cohort("pool").flavor("spot", gpu=4).flavor("ondemand", gpu=0),
        ),
        many("j", 2),
        keys("j", 2),
        flavors={"ns/j0": "spot", "ns/j1": "spot"},
    ),
    Case(
        "whenCanBorrow TryNextFlavor prefers a flavor without borrowing",
        pair(
            cq("team-a")
            .cohort("pool")
            .flavor("spot", gpu=1)
            .flavor("ondemand", gpu=4)
            .fungibility(borrow="TryNextFlavor"),
            cq("team-b").cohort("pool").flavor("spot", gpu=4).flavor("ondemand", gpu=0),
        ),
        many("j", 2),
        keys("j", 2),
        flavors={"ns/j0": "spot", "ns/j1": "ondemand"},
    ),
    Case(
        "whenCanBorrow TryNextFlavor falls back to the first borrowing flavor",
        pair(
            cq("team-a")
            .cohort("pool")
            .flavor("spot", gpu=1)
            .flavor("ondemand", gpu=1)
            .fungibility(borrow="TryNextFlavor"),
            cq("team-b").cohort("pool").flavor("spot", gpu=4).flavor("ondemand", gpu=4),
        ),
        many("j", 3),
        keys("j", 3),
        flavors={"ns/j0": "spot", "ns/j1": "ondemand", "ns/j2": "spot"},
    ),
    Case(
        "v1beta1 Borrow is MayStopSearch",
        pair(
            cq("team-a")
            .cohort("pool")
            .flavor("spot", gpu=1)
            .flavor("ondemand", gpu=4)
            .fungibility(borrow="Borrow"),
            cq("team-b").cohort("pool").flavor("spot", gpu=4).flavor("ondemand", gpu=0),
        ),
        many("j", 2),
        keys("j", 2),
        flavors={"ns/j1": "spot"},
    ),
    Case(
        "a nodeSelector picks the flavor whose labels match",
        [
            flavor("a100").label("gpu", "a100"),
            flavor("h100").label("gpu", "h100"),
            cq("cq").flavor("a100", gpu=4).flavor("h100", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j").node_selector(gpu="h100")],
        ["ns/j"],
        flavors={"ns/j": "h100"},
    ),
    Case(
        "selector keys a flavor does not label are ignored",
        [
            flavor("a100").label("gpu", "a100"),
            flavor("h100").label("gpu", "h100"),
            cq("cq").flavor("a100", gpu=4).flavor("h100", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j").node_selector(zone="eu-1")],
        ["ns/j"],
        flavors={"ns/j": "a100"},
    ),
    Case(
        "required node affinity In matches a flavor",
        [
            flavor("a100").label("gpu", "a100"),
            flavor("h100").label("gpu", "h100"),
            cq("cq").flavor("a100", gpu=4).flavor("h100", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j").affinity([{"key": "gpu", "operator": "In", "values": ["h100", "b200"]}])],
        ["ns/j"],
        flavors={"ns/j": "h100"},
    ),
    Case(
        "required node affinity NotIn excludes a flavor",
        [
            flavor("a100").label("gpu", "a100"),
            flavor("h100").label("gpu", "h100"),
            cq("cq").flavor("a100", gpu=4).flavor("h100", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j").affinity([{"key": "gpu", "operator": "NotIn", "values": ["a100"]}])],
        ["ns/j"],
        flavors={"ns/j": "h100"},
    ),
    Case(
        "no flavor matches the selector",
        [
            flavor("a100").label("gpu", "a100"),
            cq("cq").flavor("a100", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j").node_selector(gpu="v100")],
        [],
        {"ns/j": "NoMatchingFlavor"},
        messages={"ns/j": "flavor a100 doesn't match node affinity"},
    ),
    Case(
        "an untolerated NoSchedule taint excludes a flavor",
        [
            flavor("spot").taint("spot", "true"),
            flavor("ondemand"),
            cq("cq").flavor("spot", gpu=4).flavor("ondemand", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j")],
        ["ns/j"],
        flavors={"ns/j": "ondemand"},
    ),
    Case(
        "a tolerated taint keeps the flavor",
        [
            flavor("spot").taint("spot", "true"),
            flavor("ondemand"),
            cq("cq").flavor("spot", gpu=4).flavor("ondemand", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j").toleration("spot")],
        ["ns/j"],
        flavors={"ns/j": "spot"},
    ),
    Case(
        "a PreferNoSchedule taint does not exclude",
        [
            flavor("spot").taint("spot", "true", "PreferNoSchedule"),
            cq("cq").flavor("spot", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j")],
        ["ns/j"],
        flavors={"ns/j": "spot"},
    ),
    Case(
        "only tainted flavors",
        [
            flavor("spot").taint("spot", "true"),
            cq("cq").flavor("spot", gpu=4),
            lq("ns", "lq", "cq"),
        ],
        [gpu_job("j")],
        [],
        {"ns/j": "NoMatchingFlavor"},
        messages={"ns/j": "untolerated taint spot=true:NoSchedule in flavor spot"},
    ),
    Case(
        "resource groups: each group picks its own flavor",
        [
            *FLAVORS,
            cq("cq").flavor("default", cpu=4).group().flavor("a100", gpu=1).flavor("h100", gpu=2),
            lq("ns", "lq", "cq"),
        ],
        [job("ns", "j").queue("lq").requests(cpu=1, gpu=2)],
        ["ns/j"],
        flavors={"ns/j": "h100"},
    ),
    Case(
        "the LocalQueue does not exist",
        one_queue(cpu=4),
        [cpu_job("j", queue="nope")],
        [],
        {"ns/j": "LocalQueueDoesNotExist"},
        messages={"ns/j": "LocalQueue nope doesn't exist in namespace ns"},
    ),
    Case(
        "the ClusterQueue does not exist",
        [*FLAVORS, lq("ns", "lq", "ghost")],
        [cpu_job("j")],
        [],
        {"ns/j": "ClusterQueueDoesNotExist"},
        messages={"ns/j": "ClusterQueue ghost doesn't exist"},
    ),
    Case(
        "a namespaceSelector that does not match",
        [
            *FLAVORS,
            namespace("ns", team="b"),
            cq("cq").flavor("default", cpu=4).selector({"matchLabels": {"team": "a"}}),
            lq("ns", "lq", "cq"),
        ],
        [cpu_job("j")],
        [],
        {"ns/j": "NamespaceNotSelected"},
    ),
    Case(
        "a namespaceSelector that matches the namespace's labels",
        [
            *FLAVORS,
            namespace("ns", team="a"),
            cq("cq").flavor("default", cpu=4).selector({"matchLabels": {"team": "a"}}),
            lq("ns", "lq", "cq"),
        ],
        [cpu_job("j")],
        ["ns/j"],
    ),
    Case(
        "kubernetes.io/metadata.name selects a known namespace",
        [
            *FLAVORS,
            namespace("ns"),
            cq("cq")
            .flavor("default", cpu=4)
            .selector(
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ns"]}
                    ]
                }
            ),
            lq("ns", "lq", "cq"),
        ],
        [cpu_job("j")],
        ["ns/j"],
    ),
    Case(
        "an unknown namespace has no labels",
        [
            *FLAVORS,
            cq("cq").flavor("default", cpu=4).selector({"matchLabels": {"team": "a"}}),
            lq("ns", "lq", "cq"),
        ],
        [cpu_job("j")],
        [],
        {"ns/j": "NamespaceNotSelected"},
    ),
    Case(
        "no namespaceSelector admits every namespace (a deliberate departure from Kueue's "
        "nothing selector, so the reference articles' queues work as printed)",
        [*FLAVORS, cq("cq").flavor("default", cpu=4).selector(None), lq("ns", "lq", "cq")],
        [cpu_job("j")],
        ["ns/j"],
        {},
    ),
    Case(
        "a requested resource the queue does not cover",
        one_queue(cpu=4),
        [job("ns", "j").queue("lq").requests(cpu=1, memory="1Gi")],
        [],
        {"ns/j": "ResourceNotCovered"},
        messages={"ns/j": "resource memory unavailable in ClusterQueue cq"},
    ),
    Case(
        "a zero request of an uncovered resource is ignored",
        one_queue(cpu=4),
        [job("ns", "j").queue("lq").requests(cpu=1, memory=0)],
        ["ns/j"],
    ),
    Case(
        "an unknown priority class",
        one_queue(cpu=4),
        [cpu_job("j").priority("urgent")],
        [],
        {"ns/j": "PriorityClassNotFound"},
    ),
    Case(
        "a known priority class",
        [*one_queue(cpu=4), wpc("urgent", 1000)],
        [cpu_job("j").priority("urgent")],
        ["ns/j"],
    ),
    Case(
        "a flavor the queue names does not exist",
        [flavor("other"), cq("cq").flavor("default", cpu=4), lq("ns", "lq", "cq")],
        [cpu_job("j")],
        [],
        {"ns/j": "FlavorNotFound"},
        messages={"ns/j": "ResourceFlavor default not found"},
    ),
    Case(
        "a stopped ClusterQueue",
        [*FLAVORS, cq("cq").flavor("default", cpu=4).stop("Hold"), lq("ns", "lq", "cq")],
        [cpu_job("j")],
        [],
        {"ns/j": "ClusterQueueStopped"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_admission(case: Case) -> None:
    d = Driver()
    # The queue objects decide nothing but the quota they put in force.
    assert [x for x in d.apply(*case.objects) if x.type != "QuotaChanged"] == []
    for j in case.jobs:
        d.apply(j)
    got = [x.workload for x in d.decisions if x.type == "Admitted"]
    assert got == case.admitted
    for key, reason in case.reasons.items():
        assert last(d.decisions, "Inadmissible", key).reason == reason
        assert d.state(key) == "Inadmissible"
    for key, text in case.messages.items():
        message = last(d.decisions, "Inadmissible", key).message
        assert message is not None and text in message, message
    for key, want in case.flavors.items():
        flavors = last(d.decisions, "Admitted", key).flavors
        assert flavors is not None
        main = flavors["main"]
        assert main.get(GPU, main.get("cpu")) == want, main
    for key in case.admitted:
        assert d.state(key) == "Admitted"
