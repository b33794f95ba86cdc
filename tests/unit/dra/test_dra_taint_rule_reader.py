"""DeviceTaintRule read from its manifest (#17): the taint, what the selector
selects (nothing without one, every device with an empty one), and the fields a
rule may not have any more refused with a reason."""

from __future__ import annotations

from typing import Any

import pytest
from builders import manifests

from kuota.api.dra import DeviceTaintRule, parse_dra_object
from kuota.api.dra_rules import DeviceTaint
from kuota.api.types import ValidationError


def test_a_rule_is_read_with_its_taint_and_selector() -> None:
    rule = parse_dra_object(
        manifests.device_taint_rule(
            "r", value="ecc", effect="NoExecute", selector={"driver": "d", "pool": "p"}
        )
    )
    assert rule == DeviceTaintRule(
        "r", DeviceTaint("example.com/maintenance", "ecc", "NoExecute"), driver="d", pool="p"
    )
    assert isinstance(rule, DeviceTaintRule)
    assert rule.matches("d", "p", "gpu-0")
    assert not rule.matches("d", "other", "gpu-0")
    assert not rule.matches("other", "p", "gpu-0")


def test_without_a_selector_a_rule_selects_nothing_and_an_empty_one_everything() -> None:
    none = parse_dra_object(manifests.device_taint_rule("none"))
    every = parse_dra_object(manifests.device_taint_rule("every", selector={}))
    assert isinstance(none, DeviceTaintRule) and isinstance(every, DeviceTaintRule)
    assert not none.matches("d", "p", "x")
    assert every.matches("d", "p", "x")


def _broken(**spec: Any) -> dict[str, Any]:
    out = manifests.device_taint_rule("bad", selector={})
    out["spec"].update(spec)
    return out


@pytest.mark.parametrize(
    ("manifest", "field", "says"),
    [
        (_broken(taint=None), "spec.taint", "required"),
        (_broken(taint={"key": "k"}), "spec.taint.effect", "required"),
        (_broken(taint={"key": "not a key!", "effect": "NoSchedule"}), "spec.taint.key", ""),
        (
            _broken(deviceSelector={"deviceClassName": "gpu"}),
            "spec.deviceSelector.deviceClassName",
            "removed",
        ),
        (_broken(deviceSelector={"selectors": []}), "spec.deviceSelector.selectors", "removed"),
        (_broken(deviceSelector={"pool": 3}), "spec.deviceSelector.pool", ""),
        (_broken(deviceSelector="all"), "spec.deviceSelector", "object"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_field(
    manifest: dict[str, Any], field: str, says: str
) -> None:
    out = parse_dra_object(manifest)
    assert isinstance(out, ValidationError), out
    assert out.field == field, out
    assert says in out.message, out
