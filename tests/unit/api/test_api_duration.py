"""Go durations and RFC 3339 timestamps."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuota.api.duration import DurationError, duration_seconds, parse_go_duration, parse_rfc3339

GO_DURATIONS = [
    ("0", Fraction(0)),
    ("90s", Fraction(90)),
    ("5m", Fraction(300)),
    ("1h30m", Fraction(5400)),
    ("1.5h", Fraction(5400)),
    ("500ms", Fraction(1, 2)),
    ("1m0.5s", Fraction(121, 2)),
    ("250us", Fraction(1, 4000)),
    ("250µs", Fraction(1, 4000)),
    ("10ns", Fraction(1, 10**8)),
    ("-1.5s", Fraction(-3, 2)),
    ("+2m", Fraction(120)),
    (".5m", Fraction(30)),
    ("1.s", Fraction(1)),
    ("2h45m30s", Fraction(9930)),
]


@pytest.mark.parametrize(("text", "seconds"), GO_DURATIONS, ids=[t for t, _ in GO_DURATIONS])
def test_go_duration(text: str, seconds: Fraction) -> None:
    assert parse_go_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "5", "h", "1d", "--1s", "1h 30m", "1e3s", "+", "1.5.5s", "five minutes", "3000000h"],
)
def test_go_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("value", "seconds"), [("90s", 90), (300, 300), (2.5, 3), ("1500ms", 2), ("0s", 0), ("1ns", 1)]
)
def test_duration_seconds_round_up(value: object, seconds: int) -> None:
    assert duration_seconds(value) == seconds


@pytest.mark.parametrize("value", [-1, "-5m", True, None, [1], float("inf"), float("nan")])
def test_duration_seconds_rejects(value: object) -> None:
    with pytest.raises(DurationError):
        duration_seconds(value)


@given(st.integers(0, 10**6), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999))
def test_go_duration_composes(hours: int, minutes: int, seconds: int, millis: int) -> None:
    text = f"{hours}h{minutes}m{seconds}s{millis}ms"
    assert parse_go_duration(text) == hours * 3600 + minutes * 60 + seconds + Fraction(millis, 1000)


RFC3339 = [
    ("1970-01-01T00:00:00Z", 0.0),
    ("2026-01-01T00:00:00Z", 1767225600.0),
    ("2026-01-01T00:00:00z", 1767225600.0),
    ("2026-01-01 00:00:00Z", 1767225600.0),
    ("2026-01-01T01:00:00+01:00", 1767225600.0),
    ("2025-12-31T19:30:00-04:30", 1767225600.0),
    ("2026-01-01T00:00:00.25Z", 1767225600.25),
    ("2024-02-29T12:00:00Z", 1709208000.0),
]


@pytest.mark.parametrize(("text", "epoch"), RFC3339, ids=[t for t, _ in RFC3339])
def test_rfc3339(text: str, epoch: float) -> None:
    assert parse_rfc3339(text) == epoch


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01",
        "2026-01-01T00:00:00",
        "2026-13-01T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "0000-01-01T00:00:00Z",
        "2026-01-01T00:00:00+25:00",
        "yesterday",
    ],
)
def test_rfc3339_rejects(text: str) -> None:
    with pytest.raises(DurationError):
        parse_rfc3339(text)
