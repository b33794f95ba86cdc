"""The inventory's and the CEL environment's caches are bounded, and a change drops
only what it can make stale (#23 item 6): a template nothing, a DeviceClass the
extended-resource map, a slice every device match. Eviction is first in, first
out, so a replay evicts the same entries; answers never depend on it."""

from __future__ import annotations

import pickle

import pytest
from dra_builders import (
    ARTICLE_MANIFESTS as ARTICLE,
)
from dra_builders import (
    GPU_CLASS,
    WHOLE_DEVICES,
    a100_node,
    inventory,
    podset,
    template,
)

import kuota.core.dra.cel as cel_module
import kuota.core.dra.inventory as inventory_module
from kuota.core.dra.cel import DeviceEnv, compile_selector
from kuota.core.dra.charging import Charge, charge_podset
from kuota.core.dra.inventory import remember

SELECT = "device.attributes['gpu.nvidia.com'].productName == 'A100'"


def charged(inv: inventory_module.DraInventory, tpl: str = "single-gpu") -> object:
    ps = podset({}, tpl)
    return charge_podset(inventory=inv, config=WHOLE_DEVICES, namespace="team-a", podset=ps)


def test_remember_evicts_the_oldest_entry_first() -> None:
    cache: dict[str, int] = {}
    for i in range(5):
        remember(cache, f"k{i}", i, 3)
    assert list(cache) == ["k2", "k3", "k4"]
    assert remember(cache, "k2", 9, 3) == 9  # a replaced key is stored again, still bounded
    assert len(cache) == 3


def test_a_template_change_keeps_the_device_matches_and_names_the_template() -> None:
    inv = inventory(*ARTICLE, a100_node().build())
    assert charged(inv) == Charge((("nvidia-gpu", 1000),))
    matches = dict(inv._matches)
    assert matches, "the charge matched devices"
    before = inv.generation
    assert (
        inv.upsert(template("t2", namespace="team-b").request("g", "gpu.nvidia.com").build())
        is None
    )
    assert inv.generation == before + 1
    assert inv.changed_template == ("team-b", "t2")
    assert inv._matches == matches, "a template does not change what a selector matches"
    inv.delete(kind="ResourceClaimTemplate", name="t2", namespace="team-b")
    assert inv.changed_template == ("team-b", "t2") and inv._matches == matches


def test_a_device_class_change_drops_the_extended_map_and_a_slice_change_the_matches() -> None:
    inv = inventory(*ARTICLE, a100_node().build())
    charged(inv)
    inv.device_class_for_extended_resource("nvidia.com/gpu")
    assert inv._extended and inv._matches
    other = dict(GPU_CLASS, metadata={"name": "another.nvidia.com"})
    assert inv.upsert(other) is None
    assert inv.changed_template is None
    assert not inv._extended and inv._matches
    renamed = a100_node().build()
    renamed["spec"]["devices"][0]["attributes"]["productName"] = {"string": "A800"}
    assert inv.upsert(renamed) is None
    assert inv.changed_template is None and not inv._matches


def test_match_caches_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory_module, "MATCHES_MAX", 8)
    monkeypatch.setattr(inventory_module, "POOL_MATCHES_MAX", 4)
    inv = inventory(*ARTICLE, a100_node().build())
    for i in range(30):
        tpl = f"t{i}"
        inv.upsert(template(tpl).request("g", "gpu.nvidia.com", f"{SELECT} || {i} == -1").build())
        assert charged(inv, tpl) == Charge((("nvidia-gpu", 1000),)), "the same answer, capped"
    assert len(inv._matches) <= 8
    assert all(len(v.matches) <= 4 for v in inv._views.values())
    assert charged(inv, "t0") == Charge((("nvidia-gpu", 1000),)), "an evicted one is recomputed"


def test_a_device_keeps_a_bounded_number_of_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel_module, "RESULTS_PER_DEVICE", 16)
    monkeypatch.setattr(cel_module, "CONTEXTS_PER_DEVICE", 4)
    env = DeviceEnv(driver="d", attributes=[("n", 3)], capacity=[])
    for i in range(100):
        sel = compile_selector(
            f"device.attributes['d'].n == {i} || size(device.attributes['x{i}']) == 1"
        )
        assert not isinstance(sel, cel_module.SelectorError)
        assert env.matches(sel) is (i == 3)
    assert len(env._results) == 16 and len(env._contexts) == 4
    assert next(iter(env._results)).startswith("device.attributes['d'].n == 84 ")
    copy = pickle.loads(pickle.dumps(env))
    assert list(copy._results) == list(env._results), "the order travels with a snapshot"
