"""The trusted journal-event constructors build exactly what validation builds.

The simulation engine writes its events (Tick, ObjectUpserted, ObjectDeleted,
PodsReady, WorkloadFinished) without pydantic validation; these tests hold each
constructor to ``Model.model_validate`` of the same fields: equal, same field
values, types and order, same ``model_fields_set``, same JSON, and an
``object`` map not shared with the caller's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from test_events_schema_trusted_decision import assert_same as assert_same_fields

from kuota.core.fold.fold import Fold
from kuota.events.schema import (
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    Tick,
    WorkloadFinished,
    parse_event,
    trusted_deleted,
    trusted_finished,
    trusted_pods_ready,
    trusted_tick,
    trusted_upserted,
)
from kuota.sim.engine import ScenarioError, Simulator
from kuota.sim.scenario import load_scenario

REPO = Path(__file__).resolve().parents[3]

_text = st.text(max_size=12)
_at = st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


def assert_same(trusted: BaseModel, validated: BaseModel) -> None:
    assert type(trusted) is type(validated)
    assert_same_fields(trusted, validated)
    if not isinstance(validated, ObjectUpserted):  # a dict field makes it unhashable
        assert hash(trusted) == hash(validated)  # frozen models hash their fields
    # what a journal reader decodes from the written record
    assert parse_event(trusted.model_dump_json()) == validated


@settings(max_examples=100, deadline=None)
@given(_text, _at)
def test_trusted_tick(id: str, at: float) -> None:
    assert_same(trusted_tick(id, at), Tick.model_validate({"id": id, "at": at}))


@settings(max_examples=100, deadline=None)
@given(_text, _at, st.dictionaries(_text, _json, max_size=4))
def test_trusted_upserted(id: str, at: float, obj: dict[str, Any]) -> None:
    validated = ObjectUpserted.model_validate({"id": id, "at": at, "object": obj})
    trusted = trusted_upserted(id, at, obj)
    assert_same(trusted, validated)
    assert trusted.object is not obj  # copied, as validation copies it
    obj["added-later"] = 1
    assert "added-later" not in trusted.object


@settings(max_examples=100, deadline=None)
@given(_text, _at, _text, _text, _text)
def test_trusted_deleted(id: str, at: float, kind: str, name: str, namespace: str) -> None:
    validated = ObjectDeleted.model_validate(
        {"id": id, "at": at, "kind": kind, "name": name, "namespace": namespace}
    )
    assert_same(trusted_deleted(id, at, kind, name, namespace), validated)


@settings(max_examples=100, deadline=None)
@given(_text, _at, _text, _text)
def test_trusted_pods_ready_and_finished(id: str, at: float, namespace: str, name: str) -> None:
    fields = {"id": id, "at": at, "namespace": namespace, "name": name}
    assert_same(
        trusted_pods_ready(id, at, namespace, name),
        PodsReady.model_validate({**fields, "ready": True}),
    )
    assert_same(
        trusted_finished(id, at, namespace, name),
        WorkloadFinished.model_validate({**fields, "succeeded": True}),
    )


def test_trusted_events_are_frozen() -> None:
    event = trusted_tick("sim-0", 1.0)
    with pytest.raises(ValueError, match="frozen"):
        event.at = 2.0  # type: ignore[misc]


def test_engine_refuses_a_manifest_validation_would_refuse() -> None:
    # ObjectUpserted.object is a dict[str, Any]: the engine, which no longer
    # validates its events, says so up front instead
    bad: dict[Any, Any] = {"kind": "Namespace", "metadata": {"name": "a"}, 1: "x"}
    with pytest.raises(ScenarioError, match="top-level key must be a string"):
        Simulator([bad], fold=Fold())


def test_the_engines_events_revalidate_to_themselves() -> None:
    """Every event the engine applies in the reference scenarios, re-validated
    from its own fields, is the event the engine built (trusted)."""
    kinds: set[str] = set()
    for path in sorted((REPO / "examples" / "scenarios").glob("*.yaml")):
        manifests = load_scenario(path.read_text(), source=str(path))
        for step in Simulator(manifests, fold=Fold()).steps(until="2h"):
            event = step.event
            fields = {k: event.__dict__[k] for k in event.model_fields_set}
            assert_same(event, type(event).model_validate(fields))
            kinds.add(event.type)
    assert kinds >= {"ObjectUpserted", "PodsReady", "WorkloadFinished"}
