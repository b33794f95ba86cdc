"""ResourceClaimTemplate changes in the fold (#23 items 4 and 6,
kuota.core.fold.claim_templates): an admitted workload whose template now asks
for more is evicted and requeued (ClaimTemplateChanged) and charged for the new
shape; one whose template is gone keeps its charge; a change charges again only
the workloads of the template's namespace that name it."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from core_builders import (
    Driver,
    admitted,
    claim_template,
    class_mapping,
    configuration,
    cq,
    device_class,
    flavor,
    job,
    last,
    lq,
)

import kuota.core.fold.placement as placement
from kuota.core.fold.claim_templates import CLAIM_TEMPLATE_CHANGED

TPL = "gpu"


def gpu_job(name: str, ns: str = "team-a", pods: int = 1, template: str = TPL) -> Any:
    return job(ns, name).queue("lq").claim("gpu", template).parallelism(pods)


def cluster(quota: int = 4, *extra: Any) -> Driver:
    d = Driver()
    d.apply(
        configuration(class_mapping("nvidia-gpu", "gpu.nvidia.com")),
        device_class("gpu.nvidia.com"),
        device_class("other.example.com"),
        flavor("default"),
        cq("cq").flavor("default", {"nvidia-gpu": quota}),
        lq("team-a", "lq", "cq"),
        lq("team-b", "lq", "cq"),
        *extra,
    )
    return d


def types(out: list[Any]) -> list[tuple[str, str | None, str | None]]:
    return [(x.type, x.workload, x.reason) for x in out]


def test_a_grown_template_stops_the_admitted_job_and_charges_the_new_shape() -> None:
    d = cluster(4, claim_template("team-a", TPL, "gpu.nvidia.com", count=1))
    out = d.apply(gpu_job("a"))
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "1"}}
    out = d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=2))
    assert types(out) == [
        ("Evicted", "team-a/a", CLAIM_TEMPLATE_CHANGED),
        ("Requeued", "team-a/a", CLAIM_TEMPLATE_CHANGED),
        ("QuotaReleased", "team-a/a", "PodsGone"),  # its old pods gone (the driver: at once)
        ("Admitted", "team-a/a", None),
    ]
    message = last(out, "Evicted").message
    assert message is not None
    assert "ResourceClaimTemplate team-a/gpu changed while the Job was admitted" in message
    assert "podset main: nvidia-gpu 1 -> 2" in message
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "2"}}
    assert d.usage("cq") == {("default", "nvidia-gpu"): 2000}


def test_a_deleted_template_keeps_the_charge_and_its_return_is_checked() -> None:
    d = cluster(4, claim_template("team-a", TPL, "gpu.nvidia.com", count=1))
    d.apply(gpu_job("a", pods=2))
    assert d.delete("ResourceClaimTemplate", TPL, "team-a") == []
    assert d.state("team-a/a") == "Admitted"
    assert d.usage("cq") == {("default", "nvidia-gpu"): 2000}, "kept until the pods are gone"
    # Recreated as it was: nothing to do. Recreated asking twice as much: stopped.
    assert d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=1)) == []
    assert d.delete("ResourceClaimTemplate", TPL, "team-a") == []
    out = d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=2))
    assert types(out)[:2] == [
        ("Evicted", "team-a/a", CLAIM_TEMPLATE_CHANGED),
        ("Requeued", "team-a/a", CLAIM_TEMPLATE_CHANGED),
    ]
    assert "nvidia-gpu 2 -> 4" in (last(out, "Evicted").message or "")
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "4"}}


def test_a_template_grown_past_the_quota_releases_it_and_the_job_waits() -> None:
    d = cluster(2, claim_template("team-a", TPL, "gpu.nvidia.com", count=1))
    d.apply(gpu_job("a"))
    out = d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=3))
    assert types(out) == [
        ("Evicted", "team-a/a", CLAIM_TEMPLATE_CHANGED),
        ("Requeued", "team-a/a", CLAIM_TEMPLATE_CHANGED),
        ("QuotaReleased", "team-a/a", "PodsGone"),
        ("Inadmissible", "team-a/a", "InsufficientQuota"),
    ]
    assert d.usage("cq") == {}, "never the old charge"


def test_a_template_that_can_no_longer_be_charged_stops_the_job_with_why() -> None:
    d = cluster(4, claim_template("team-a", TPL, "gpu.nvidia.com", count=1))
    d.apply(gpu_job("a"))
    out = d.apply(claim_template("team-a", TPL, "other.example.com", count=1))
    assert types(out) == [
        ("Evicted", "team-a/a", CLAIM_TEMPLATE_CHANGED),
        ("Requeued", "team-a/a", CLAIM_TEMPLATE_CHANGED),
        ("QuotaReleased", "team-a/a", "PodsGone"),
        ("Inadmissible", "team-a/a", "DeviceClassNotMapped"),
    ]
    assert "it can no longer be charged: DeviceClassNotMapped" in (
        last(out, "Evicted").message or ""
    )


def test_a_template_that_shrinks_or_is_unchanged_keeps_the_admission() -> None:
    d = cluster(4, claim_template("team-a", TPL, "gpu.nvidia.com", count=2))
    d.apply(gpu_job("a"))
    assert d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=1)) == []
    # Back to what was charged: still no more than the admission.
    assert d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=2)) == []
    assert d.usage("cq") == {("default", "nvidia-gpu"): 2000}


def test_only_the_templates_namespace_and_its_users_are_touched() -> None:
    d = cluster(
        4,
        claim_template("team-a", TPL, "gpu.nvidia.com", count=1),
        claim_template("team-b", TPL, "gpu.nvidia.com", count=1),
        claim_template("team-a", "other", "gpu.nvidia.com", count=1),
    )
    d.apply(gpu_job("a"), gpu_job("b", ns="team-b"), gpu_job("c", template="other"))
    assert d.usage("cq") == {("default", "nvidia-gpu"): 3000}
    # team-b's template of the same name, and team-a's other template, grow: only
    # the Job using each is stopped.
    out = d.apply(claim_template("team-b", TPL, "gpu.nvidia.com", count=2))
    assert [(x.type, x.workload) for x in out if x.type == "Evicted"] == [("Evicted", "team-b/b")]
    out = d.apply(claim_template("team-a", "other", "gpu.nvidia.com", count=2))
    assert [(x.type, x.workload) for x in out if x.type == "Evicted"] == [("Evicted", "team-a/c")]
    assert d.state("team-a/a") == "Admitted"


def test_a_template_change_charges_only_its_namespaces_pending_groups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d = cluster(0, *(claim_template(f"ns-{i}", TPL, "gpu.nvidia.com") for i in range(5)))
    for i in range(5):
        d.apply(lq(f"ns-{i}", "lq", "cq"), gpu_job("j", ns=f"ns-{i}"))
    assert all(d.state(f"ns-{i}/j") == "Inadmissible" for i in range(5))
    calls: list[str] = []
    real = placement.charge_podset

    def counted(**kw: Any) -> Any:
        calls.append(kw["namespace"])
        return real(**kw)

    monkeypatch.setattr(placement, "charge_podset", counted)  # a spy: the real charge runs
    d.apply(claim_template("ns-3", TPL, "gpu.nvidia.com", count=2))
    assert calls == ["ns-3"]
    calls.clear()
    d.apply(device_class("third.example.com"))  # cluster-wide: every pending group
    assert sorted(set(calls)) == [f"ns-{i}" for i in range(5)]


def test_an_empty_charge_group_is_dropped_not_reused_stale() -> None:
    d = cluster(4, claim_template("team-a", TPL, "gpu.nvidia.com", count=8))
    d.apply(gpu_job("a"))
    assert d.state("team-a/a") == "Inadmissible"
    d.delete("Job", "a", "team-a")  # its charge group is left empty
    d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=2))
    out = d.apply(gpu_job("b"))  # the same podsets: charged afresh
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "2"}}


def test_copies_after_a_template_swap_decide_like_the_original() -> None:
    d = cluster(4, claim_template("team-a", TPL, "gpu.nvidia.com", count=1))
    d.apply(gpu_job("a"), gpu_job("b"))
    d.delete("ResourceClaimTemplate", TPL, "team-a")
    copies = [copy.deepcopy(d.fold), pickle.loads(pickle.dumps(d.fold))]
    first = len(d.events)
    expected = d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=3))
    assert [x.type for x in expected].count("Evicted") == 2
    assert admitted(expected) == ["team-a/a"], "one fits the new shape, b waits"
    for c in copies:  # the template event, then the pods-gone reports the driver fed
        got = [x for i, e in enumerate(d.events[first:]) for x in c.apply(e, offset=first + i)]
        assert got == expected


def test_a_template_no_workload_names_costs_no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    d = cluster(4, claim_template("team-a", TPL, "gpu.nvidia.com"))
    d.apply(gpu_job("a"))
    inventory = d.fold._inventory
    assert inventory.template_read("team-a", TPL), "charging a read it"
    calls: list[str] = []
    real = placement.charge_podset

    def counted(**kw: Any) -> Any:
        calls.append(kw["namespace"])
        return real(**kw)

    monkeypatch.setattr(placement, "charge_podset", counted)  # a spy: the real charge runs
    for i in range(20):  # a tenant's churn of templates nobody names
        d.apply(claim_template("team-b", f"churn-{i}", "gpu.nvidia.com"))
        d.delete("ResourceClaimTemplate", f"churn-{i}", "team-b")
    assert calls == [] and not inventory.template_read("team-b", "churn-0")
    # The Job's template changes: its user is checked (one charge), still read.
    d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=1))
    d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=2))
    assert calls == ["team-a"] * 2 and inventory.template_read("team-a", TPL)
    calls.clear()
    # Its Job gone (the Job's stop re-placed it and charged it; it is deleted now),
    # the next change finds no user and forgets it; the one after costs nothing.
    d.delete("Job", "a", "team-a")
    d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=3))
    assert not inventory.template_read("team-a", TPL)
    calls.clear()
    d.apply(claim_template("team-a", TPL, "gpu.nvidia.com", count=4))
    assert calls == []
    out = d.apply(gpu_job("b"))  # a new user is charged afresh, and reads it again
    assert last(out, "Admitted").usage == {"default": {"nvidia-gpu": "4"}}
    assert inventory.template_read("team-a", TPL)
