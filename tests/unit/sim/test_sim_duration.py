from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuota.sim.duration import (
    DurationError,
    exact_seconds,
    format_seconds,
    json_seconds,
    micros_to_seconds,
    parse_duration,
    seconds_to_micros_ceil,
)

S = 1_000_000

GOOD = {
    "seconds": ("30s", 30 * S),
    "minutes and seconds": ("1m30s", 90 * S),
    "milliseconds": ("500ms", 500_000),
    "hours": ("2h", 7200 * S),
    "all units": ("1h2m3.5s", 3723 * S + 500_000),
    "micro sign": ("7µs", 7),
    "us": ("7us", 7),
    "nanoseconds round up": ("1ns", 1),
    "bare integer text": ("45", 45 * S),
    "bare decimal text": ("1.5", 1_500_000),
    "bare int": (45, 45 * S),
    "bare float": (0.25, 250_000),
    "zero": ("0", 0),
    "zero seconds": ("0s", 0),
    "explicit plus": ("+5s", 5 * S),
    "surrounding spaces": (" 10s ", 10 * S),
    "leading dot": (".5s", 500_000),
    "bare leading dot": (".5", 500_000),
    "trailing dot": ("7.", 7 * S),
    "more than 6 decimals round up": ("0.1234561", 123_457),
    "float with many decimals": (0.1234561, 123_457),
    "float exponent": (1e-7, 1),
    "large float": (1e6, 10**6 * S),
}

BAD = {
    "empty": ("", "empty"),
    "unknown unit": ("5x", "not a duration"),
    "days are not Go": ("1d", "not a duration"),
    "unit without number": ("s", "not a duration"),
    "negative": ("-1s", "negative"),
    "negative bare": (-3, "negative"),
    "bool": (True, "not a duration"),
    "list": ([1], "not a duration"),
    "infinite": (float("inf"), "finite"),
    "trailing garbage": ("10s!", "not a duration"),
    "absurd": ("900000h", "absurdly long"),
    "beyond Go": ("999999999h", "not a duration"),
}


@pytest.mark.parametrize(("text", "micros"), GOOD.values(), ids=GOOD.keys())
def test_parse_duration_accepts(text: object, micros: int) -> None:
    assert parse_duration(text) == micros


@pytest.mark.parametrize(("text", "fragment"), BAD.values(), ids=BAD.keys())
def test_parse_duration_refuses(text: object, fragment: str) -> None:
    with pytest.raises(DurationError, match=fragment):
        parse_duration(text)


FORMAT = {
    "integer": (30.0, "30", 30),
    "half": (1.5, "1.5", 1.5),
    "three decimals": (0.1234, "0.123", 0.123),
    "float noise": (0.1 + 0.2, "0.3", 0.3),
    "rounds to integer": (2.9999, "3", 3),
}


@pytest.mark.parametrize(("seconds", "text", "number"), FORMAT.values(), ids=FORMAT.keys())
def test_format_seconds(seconds: float, text: str, number: float) -> None:
    assert format_seconds(seconds) == text
    value = json_seconds(seconds)
    assert value == number
    assert type(value) is type(number)


@pytest.mark.parametrize(
    ("micros", "text"), [(0, "0"), (30 * S, "30"), (1_500_000, "1.5"), (1, "0.000001")]
)
def test_exact_seconds(micros: int, text: str) -> None:
    assert exact_seconds(micros) == text


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_float_durations_are_exact_decimal_microseconds_rounded_up(seconds: float) -> None:
    exact = Fraction(repr(seconds)) * S
    assert parse_duration(seconds) == -((-exact.numerator) // exact.denominator)
    if "e" not in repr(seconds):  # text durations are decimals, without exponents
        assert parse_duration(repr(seconds)) == parse_duration(seconds)


@given(st.floats(min_value=0, max_value=1e8, allow_nan=False))
def test_wakeup_instant_is_never_early(seconds: float) -> None:
    micros = seconds_to_micros_ceil(seconds)
    assert micros_to_seconds(micros) >= seconds
    assert micros == 0 or micros_to_seconds(micros - 1) < seconds + 1e-6


@given(st.integers(min_value=0, max_value=10**15))
def test_instants_round_trip(micros: int) -> None:
    assert seconds_to_micros_ceil(micros_to_seconds(micros)) == micros
