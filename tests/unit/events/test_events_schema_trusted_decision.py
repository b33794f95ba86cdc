"""``trusted_decision`` builds exactly the Decision that validation builds.

The fold constructs its decisions without pydantic validation (a third of the
cost); these tests hold it to the validated model: same values, types, field
order, fields set, JSON, and no map or list shared with the input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from kuota.core.fold.fold import Fold
from kuota.events.schema import DECISION_TYPES, Decision, trusted_decision
from kuota.sim.engine import simulate
from kuota.sim.scenario import load_scenario

REPO = Path(__file__).resolve().parents[3]

_text = st.text(min_size=0, max_size=12)
_maps = st.dictionaries(_text, st.dictionaries(_text, _text, max_size=3), max_size=3)
_optional = {
    "cause_offset": st.none() | st.integers(min_value=0, max_value=2**40),
    "workload": st.none() | _text,
    "uid": st.none() | _text,
    "cluster_queue": st.none() | _text,
    "flavors": st.none() | _maps,
    "usage": st.none() | _maps,
    "reason": st.none() | _text,
    "message": st.none() | _text,
    "preemptor": st.none() | _text,
    "policy": st.none() | _text,
    "victims": st.none() | st.lists(_text, max_size=4),
    "object": st.none() | _text,
    "requeue_at": st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(10**6), 10**6),
    "cohort": st.none() | _text,
    "quota": st.none() | st.dictionaries(_text, _maps, max_size=3),
}


@st.composite
def decision_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": draw(_text),
        "cause": draw(_text),
        "at": draw(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**9), 10**9)),
        "type": draw(st.sampled_from(DECISION_TYPES)),
    }
    for name in draw(st.lists(st.sampled_from(sorted(_optional)), unique=True)):
        fields[name] = draw(_optional[name])
    if draw(st.booleans()):
        fields["schema_version"] = 1
    return dict(sorted(fields.items(), key=lambda _: draw(st.integers())))  # any key order


def assert_same(trusted: BaseModel, validated: BaseModel) -> None:
    """Equal as pydantic models, field for field: values, their types and order,
    the fields set, JSON and repr (also used by test_events_schema_trusted_events)."""
    assert trusted == validated
    assert list(trusted.__dict__.items()) == list(validated.__dict__.items())
    assert [type(v) for v in trusted.__dict__.values()] == [
        type(v) for v in validated.__dict__.values()
    ]
    assert trusted.model_fields_set == validated.model_fields_set
    assert trusted.model_dump_json() == validated.model_dump_json()
    assert trusted.model_dump_json(exclude_unset=True) == validated.model_dump_json(
        exclude_unset=True
    )
    assert repr(trusted) == repr(validated)


@settings(max_examples=400, deadline=None)
@given(decision_fields())
def test_trusted_decision_is_the_validated_decision(fields: dict[str, Any]) -> None:
    validated = Decision.model_validate(dict(fields))
    trusted = trusted_decision(fields)
    assert_same(trusted, validated)
    for name in ("flavors", "usage"):
        given_map = fields.get(name)
        if given_map:
            assert trusted.__dict__[name] is not given_map
            for key, inner in given_map.items():
                assert trusted.__dict__[name][key] is not inner
    if fields.get("victims") is not None:
        assert trusted.victims is not fields["victims"]
    for flavor, resources in (fields.get("quota") or {}).items():
        for resource, row in resources.items():
            assert trusted.__dict__["quota"][flavor][resource] is not row


def test_a_trusted_decision_is_frozen_and_copies_like_a_validated_one() -> None:
    fields = {"id": "a", "cause": "sim-1", "at": 2.0, "type": "Admitted", "workload": "n/w"}
    trusted = trusted_decision(fields)
    validated = Decision.model_validate(fields)
    try:
        trusted.workload = "other"  # type: ignore[misc]
    except Exception as err:  # pydantic's frozen-instance error, as for the validated one
        assert type(err).__name__ == "ValidationError"
    else:
        raise AssertionError("a trusted Decision must be frozen")
    assert_same(
        trusted.model_copy(update={"reason": "X"}), validated.model_copy(update={"reason": "X"})
    )
    assert trusted.model_fields_set == {"id", "cause", "at", "type", "workload"}


def test_the_folds_decisions_revalidate_to_themselves() -> None:
    """Every decision of the reference scenarios, re-validated from its own
    fields, is equal to what the fold returned (through trusted_decision)."""
    seen = 0
    for path in sorted((REPO / "examples" / "scenarios").glob("*.yaml")):
        manifests = load_scenario(path.read_text(), source=str(path))
        for decision in simulate(manifests, fold=Fold(), until="2h"):
            fields = {k: decision.__dict__[k] for k in decision.model_fields_set}
            assert_same(decision, Decision.model_validate(fields))
            seen += 1
    assert seen > 50
