"""Durations and instants for simulation scenarios.

Theory of operation: scenario files say *when* things happen with Go-style
durations (``"1m30s"``, ``"500ms"``, ``"2h"``) or a bare number of seconds
(``"30"``, ``45``, ``"1.5"``), as ``kubectl`` and Kueue users write them (the
Go grammar is ``kuota.api.duration``'s, shared with the Configuration). The
engine keeps time as an ``int`` count of microseconds so that ties are exact
(``"0.1s" + "0.2s"`` lands on the same instant as ``"300ms"``) and event
order never depends on float rounding; the journal events it emits carry
``at`` in float seconds, as the schema says.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from kuota.api.duration import DurationError as GoDurationError
from kuota.api.duration import parse_go_duration

MICROS_PER_SECOND = 1_000_000

_BARE = re.compile(r"^[+]?(\d+(?:\.\d*)?|\.\d+)$")

# A century of simulated time is more than any scenario needs; anything bigger
# is a typo (or an overflow attempt) and is refused.
MAX_MICROS = 100 * 366 * 24 * 3600 * MICROS_PER_SECOND


class DurationError(ValueError):
    """A duration that is malformed, negative or absurd."""


def parse_duration(value: object) -> int:
    """Parse a Go-style duration or a number of seconds into microseconds.

    Fractions of a microsecond are rounded up, so a non-zero duration never
    collapses onto the instant it starts from. Negative durations are refused.
    """
    if isinstance(value, bool):
        raise DurationError(f"{value!r} is not a duration")
    if isinstance(value, int):
        if value < 0:
            raise DurationError(f"{value!r} is negative")
        micros = value * MICROS_PER_SECOND
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise DurationError(f"{value!r} is not a finite duration")
        if value < 0:
            raise DurationError(f"{value!r} is negative")
        micros = _decimal_micros(repr(value))
    elif isinstance(value, str):
        micros = _text_micros(value.strip())
    else:
        raise DurationError(f"{value!r} is not a duration")
    if micros > MAX_MICROS:
        raise DurationError(f"{value!r} is absurdly long")
    return micros


def _decimal_micros(text: str) -> int:
    """Exact microseconds (rounded up) for decimal seconds text such as ``"1.5"``.

    Integer arithmetic on the digits for the usual case (at most 6 decimals, no
    exponent); ``Fraction`` otherwise.
    """
    whole, dot, fraction = text.partition(".")
    if whole.isdigit() or (not whole and dot):
        if fraction.isdigit() and len(fraction) <= 6:
            return int(whole or "0") * MICROS_PER_SECOND + int(fraction.ljust(6, "0"))
        if not fraction and whole:
            return int(whole) * MICROS_PER_SECOND
    return _ceil(Fraction(text) * MICROS_PER_SECOND)


def _ceil(amount: Fraction) -> int:
    return -((-amount.numerator) // amount.denominator)


@functools.lru_cache(maxsize=4096)
def _text_micros(text: str) -> int:
    """Microseconds for duration text; memoised, as scenario files repeat values."""
    if not text:
        raise DurationError("an empty string is not a duration")
    if text.startswith("-"):
        raise DurationError(f"{text!r} is negative")
    if _BARE.match(text):
        return _decimal_micros(text.lstrip("+"))
    try:
        seconds = parse_go_duration(text)
    except GoDurationError:
        raise DurationError(
            f"{text!r} is not a duration (write e.g. 30s, 1m30s, 500ms, 2h, or a number of seconds)"
        ) from None
    return _ceil(seconds * MICROS_PER_SECOND)


def micros_to_seconds(micros: int) -> float:
    """The float seconds a journal event carries for an engine instant."""
    return micros / MICROS_PER_SECOND


def seconds_to_micros_ceil(seconds: float) -> int:
    """The first engine instant whose event time is at or after ``seconds``.

    Used for a fold's wakeup time: a Tick at the returned instant is never
    earlier than the wakeup it serves, and a wakeup that is itself an engine
    instant (``micros_to_seconds(n)``) maps back to ``n``.
    """
    micros = max(0, round(seconds * MICROS_PER_SECOND))
    while micros_to_seconds(micros) < seconds:
        micros += 1
    while micros > 0 and micros_to_seconds(micros - 1) >= seconds:
        micros -= 1
    return micros


def exact_seconds(micros: int) -> str:
    """An engine instant as exact decimal seconds text (``"30"``, ``"1.5"``)."""
    whole, fraction = divmod(micros, MICROS_PER_SECOND)
    if fraction == 0:
        return str(whole)
    return f"{whole}.{fraction:06d}".rstrip("0")


def format_seconds(seconds: float) -> str:
    """Stable text for an instant: ints as ints, otherwise up to 3 decimals."""
    rounded = round(seconds, 3)
    if rounded == int(rounded):
        return str(int(rounded))
    return f"{rounded:.3f}".rstrip("0")


def json_seconds(seconds: float) -> int | float:
    """The JSON number for an instant, formatted as ``format_seconds`` does."""
    rounded = round(seconds, 3)
    if rounded == int(rounded):
        return int(rounded)
    return rounded
