"""Kubernetes resource quantities as exact integers.

Theory of operation: every amount inside the core is an ``int`` counted in
*milli-units* (1 CPU = 1000, 1 GPU = 1000, 1 byte of memory = 1000). One unit
for every resource keeps arithmetic exact (no floats, so replays are bit for
bit identical) and lets CPU millicores, device counts and byte counters share
one code path. ``parse_quantity`` follows the Kubernetes quantity grammar
(binary suffixes Ki..Ei, decimal suffixes n u m "" k M G T P E, and decimal
exponents such as ``1e3``) and rejects anything it cannot represent exactly in
milli-units or that is absurdly large.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

MILLI = 1000

# Amounts above this (in milli-units) are rejected as absurd: 2**63 milli-units
# is about 9.2e15 units, e.g. 8 PiB of memory; no quota or request is that big.
MAX_MILLI = 2**63 - 1

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(
    r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$"
)


class QuantityError(ValueError):
    """A quantity string that is malformed, negative where not allowed, or absurd."""


def parse_quantity(value: object, *, allow_negative: bool = False) -> int:
    """Parse a Kubernetes quantity (``"500m"``, ``"80Gi"``, ``4``) into milli-units.

    Fractions of a milli-unit are rounded up, as Kubernetes rounds requests up.
    """
    # Fast paths: manifests repeat a handful of quantity strings many times.
    if type(value) is int and 0 <= value <= MAX_MILLI // MILLI:
        return value * MILLI
    if type(value) is str:
        result = _parse_str_cached(value)
        if result < 0 and not allow_negative:
            raise QuantityError(f"quantity {value!r} must not be negative")
        return result
    return _parse(value, allow_negative=allow_negative)


@lru_cache(maxsize=4096)
def _parse_str_cached(value: str) -> int:
    # Parsed with negatives allowed; the caller applies its own sign rule.
    # QuantityError is raised (and not cached) for malformed strings.
    return _parse(value, allow_negative=True)


def _parse(value: object, *, allow_negative: bool) -> int:
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or string, not {value!r}")
    if isinstance(value, int):
        amount = Fraction(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"quantity {value!r} is not finite")
        amount = Fraction(str(value))
    elif isinstance(value, str):
        m = _RE.match(value.strip())
        if not m:
            raise QuantityError(f"quantity {value!r} is not a valid Kubernetes quantity")
        sign, number, suffix, exponent = m.groups()
        if len(number) > 40 or (exponent is not None and abs(int(exponent)) > 30):
            raise QuantityError(f"quantity {value!r} is absurdly large or precise")
        amount = Fraction(number)
        if suffix in _BINARY:
            amount *= _BINARY[suffix]
        elif suffix is not None:
            amount *= _DECIMAL[suffix]
        elif exponent is not None:
            amount *= Fraction(10) ** int(exponent)
        if sign == "-":
            amount = -amount
    else:
        raise QuantityError(f"quantity must be a number or string, not {type(value).__name__}")
    milli = amount * MILLI
    result = -((-milli.numerator) // milli.denominator)  # ceiling
    if result < 0 and not allow_negative:
        raise QuantityError(f"quantity {value!r} must not be negative")
    if abs(result) > MAX_MILLI:
        raise QuantityError(f"quantity {value!r} is absurdly large")
    return result


_BIN_OUT = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)


def format_quantity(milli: int) -> str:
    """Render milli-units back as a short Kubernetes quantity (``80Gi``, ``500m``, ``4``)."""
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if units:
        for suffix, size in _BIN_OUT:
            if units % size == 0 and abs(units) >= size:
                return f"{units // size}{suffix}"
    return str(units)
