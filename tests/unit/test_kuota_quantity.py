"""kuota.quantity: Kubernetes quantities as exact integers of milli-units."""

from __future__ import annotations

import pytest

from kuota.quantity import MAX_MILLI, QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("value", "milli"),
    [
        (4, 4000),
        ("4", 4000),
        ("500m", 500),
        ("1.5", 1500),
        (".5", 500),
        ("80Gi", 80 * 2**30 * 1000),
        ("1Ki", 1024 * 1000),
        ("2k", 2_000_000),
        ("1M", 10**9),
        ("1e3", 10**6),
        ("1E-3", 1),
        ("+3", 3000),
        (" 2 ", 2000),
        (1.25, 1250),
    ],
)
def test_parse_counts_milli_units(value: object, milli: int) -> None:
    assert parse_quantity(value) == milli


def test_fractions_of_a_milli_unit_round_up() -> None:
    assert parse_quantity("1u") == 1  # 0.001 milli-units
    assert parse_quantity("1n") == 1
    assert parse_quantity("0.0001") == 1
    assert parse_quantity("-1u", allow_negative=True) == 0  # the ceiling of -0.001


def test_negatives_only_where_allowed() -> None:
    for value in ("-1", -1, "-500m"):
        with pytest.raises(QuantityError, match="must not be negative"):
            parse_quantity(value)
    assert parse_quantity("-1", allow_negative=True) == -1000
    assert parse_quantity(-1, allow_negative=True) == -1000
    # A cached string keeps its sign rule per call.
    assert parse_quantity("-2", allow_negative=True) == -2000
    with pytest.raises(QuantityError):
        parse_quantity("-2")


@pytest.mark.parametrize(
    "value", ["", "1Gb", "1 Gi", "Gi", "1.2.3", "0x10", "1e", "--1", "1ki", "1Ki1", "1e3Ki"]
)
def test_malformed_strings_are_refused(value: str) -> None:
    with pytest.raises(QuantityError, match="not a valid Kubernetes quantity"):
        parse_quantity(value)


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_values_that_are_not_quantities_are_refused(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_absurd_amounts_are_refused() -> None:
    with pytest.raises(QuantityError, match="absurdly large"):
        parse_quantity("99999999999Ei")
    with pytest.raises(QuantityError, match="absurdly large or precise"):
        parse_quantity("1e31")
    with pytest.raises(QuantityError, match="absurdly large or precise"):
        parse_quantity("1" * 41)
    assert parse_quantity(MAX_MILLI // 1000) == MAX_MILLI // 1000 * 1000
    with pytest.raises(QuantityError):
        parse_quantity(MAX_MILLI // 1000 + 1)


@pytest.mark.parametrize(
    ("milli", "text"),
    [
        (0, "0"),
        (500, "500m"),
        (1500, "1500m"),
        (4000, "4"),
        (80 * 2**30 * 1000, "80Gi"),
        (1536 * 1000, "1536"),  # 1.5Ki is not whole in Ki
        (2**20 * 1000, "1Mi"),
        (2**60 * 1000, "1Ei"),
        (-2048 * 1000, "-2Ki"),
    ],
)
def test_format_gives_the_shortest_whole_suffix(milli: int, text: str) -> None:
    assert format_quantity(milli) == text


@pytest.mark.parametrize("text", ["500m", "4", "80Gi", "3Ki", "7Pi", "1536"])
def test_format_and_parse_round_trip(text: str) -> None:
    assert format_quantity(parse_quantity(text)) == text
