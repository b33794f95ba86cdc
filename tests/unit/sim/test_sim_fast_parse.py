"""The fast paths the simulation's hot loop takes through Job reading.

``read_job`` builds its ``WorkloadSpec`` by setting the frozen dataclass's
slots directly (``_fast_workload_spec_maker``), and ``integer`` and the
``created-at`` reader have fast paths for the common values; these tests hold
them to the plain constructor and the slow paths.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.api import parse_job
from kuota.api.fields import FieldError, integer
from kuota.api.types import PodSet, WorkloadSpec

_podsets = st.sampled_from(
    [(), (PodSet(name="main", count=2, requests=(("cpu", 4000),)),)],
)


@settings(max_examples=100, deadline=None)
@given(
    st.text(max_size=8),
    st.text(max_size=8),
    st.text(max_size=8),
    st.text(max_size=8),
    st.none() | st.text(max_size=8),
    st.floats(allow_nan=False),
    _podsets,
    st.booleans(),
)
def test_the_fast_workload_spec_is_the_constructed_one(
    namespace: str,
    name: str,
    uid: str,
    queue: str,
    priority: str | None,
    created: float,
    podsets: tuple[PodSet, ...],
    active: bool,
) -> None:
    values = (namespace, name, uid, queue, priority, created, podsets, active)
    assert parse_job._fast_workload_spec_maker() is not None  # the fast path is in use
    fast = parse_job._workload_spec(*values)
    slow = parse_job._slow_workload_spec(*values)
    assert type(fast) is WorkloadSpec
    assert fast == slow
    assert hash(fast) == hash(slow)
    assert dataclasses.astuple(fast) == dataclasses.astuple(slow)
    assert fast.owner_kind == "Job"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.name = "other"  # type: ignore[misc]


def test_the_fast_path_steps_aside_when_the_class_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parse_job, "_SPEC_FIELDS", (*parse_job._SPEC_FIELDS, "extra"))
    assert parse_job._fast_workload_spec_maker() is None


@pytest.mark.parametrize(
    ("value", "kwargs", "expected"),
    [
        (3, {}, 3),
        (3.0, {}, 3),
        (0, {"minimum": 0}, 0),
        (5, {"maximum": 5}, 5),
        (None, {"default": 1}, 1),
    ],
)
def test_integer_reads(value: object, kwargs: dict[str, Any], expected: int) -> None:
    assert integer(value, "f", **kwargs) == expected


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (-1, {"minimum": 0}, "at least 0"),
        (6, {"maximum": 5}, "at most 5"),
        (True, {}, "not a boolean"),
        ("3", {}, "not a string"),
        (None, {}, "required"),
    ],
)
def test_integer_refuses(value: object, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(FieldError, match=message):
        integer(value, "f", **kwargs)


@pytest.mark.parametrize(
    ("created", "expected"),
    [("30", 30.0), ("1.5", 1.5), (7, 7.0), (2.5, 2.5), (None, 99.0)],
)
def test_created_at_reads(created: object, expected: float) -> None:
    annotations = {} if created is None else {parse_job.CREATED_AT_ANNOTATION: created}
    assert parse_job._creation_seconds({}, annotations, 99.0) == expected


@pytest.mark.parametrize(
    ("created", "message"),
    [("soon", "not a number"), ("inf", "not a finite"), ("nan", "not a finite"), (True, "string")],
)
def test_created_at_refuses(created: object, message: str) -> None:
    with pytest.raises(FieldError, match=message):
        parse_job._creation_seconds({}, {parse_job.CREATED_AT_ANNOTATION: created}, 1.0)
