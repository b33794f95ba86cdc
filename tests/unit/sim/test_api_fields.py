"""The fast paths the simulation's hot loop takes through Job reading.

``integer`` and the ``created-at`` reader have fast paths for the common
values; these tests hold them to the slow paths.
"""

from __future__ import annotations

from typing import Any

import pytest

from kuota.api import parse_job
from kuota.api.fields import FieldError, integer


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
