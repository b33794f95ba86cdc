"""Go durations and RFC 3339 timestamps, read without a clock.

Theory of operation: Kueue's Configuration writes timeouts as Go
``time.Duration`` strings (``"5m"``, ``"1h30m"``, ``"500ms"``) and Kubernetes
writes ``metadata.creationTimestamp`` in RFC 3339. Both become exact numbers by
arithmetic alone: durations as a ``Fraction`` of seconds, timestamps through
``calendar.timegm`` (UTC, never the local timezone, never ``time.time()``), so
that the fold that consumes them stays deterministic.
"""

from __future__ import annotations

import calendar
import math
import re
from fractions import Fraction

# Go's time.ParseDuration units, in nanoseconds ("µs" is U+00B5, "μs" U+03BC).
_UNIT_NS = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,
    "μs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_MAX_NS = 2**63 - 1  # Go's Duration is an int64 of nanoseconds (about 292 years)

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"
)


class DurationError(ValueError):
    """A duration or timestamp that does not parse."""


def parse_go_duration(text: str) -> Fraction:
    """Parse a Go duration (``"1h30m"``, ``"-1.5s"``, ``"0"``) into exact seconds."""
    if not isinstance(text, str):
        raise DurationError(f"duration must be a string, not {type(text).__name__}")
    s = text.strip()
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return Fraction(0)
    if not s:
        raise DurationError(f"invalid duration {text!r}")
    total_ns = Fraction(0)
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m:
            raise DurationError(f"invalid duration {text!r} (want e.g. 90s, 5m, 1h30m, 500ms)")
        number, unit = m.groups()
        if len(number) > 30:
            raise DurationError(f"duration {text!r} is absurdly long")
        total_ns += Fraction(number) * _UNIT_NS[unit]
        pos = m.end()
    if total_ns > _MAX_NS:
        raise DurationError(f"duration {text!r} overflows a Go duration")
    return sign * total_ns / 10**9


def duration_seconds(value: object) -> int:
    """A non-negative timeout in whole seconds, rounded up.

    Accepts a Go duration string or a plain number of seconds (an int, as some
    of our users write ``timeout: 300``).
    """
    if isinstance(value, bool):
        raise DurationError("duration must be a Go duration string or seconds, not a boolean")
    if isinstance(value, int):
        seconds = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise DurationError(f"duration {value!r} is not finite")
        seconds = Fraction(str(value))
    elif isinstance(value, str):
        seconds = parse_go_duration(value)
    else:
        raise DurationError(
            f"duration must be a Go duration string or seconds, not {type(value).__name__}"
        )
    if seconds < 0:
        raise DurationError(f"duration {value!r} must not be negative")
    if seconds * 10**9 > _MAX_NS:
        raise DurationError(f"duration {value!r} overflows a Go duration")
    return math.ceil(seconds)


def parse_rfc3339(text: str) -> float:
    """Seconds since the Unix epoch for an RFC 3339 timestamp (``2026-01-02T03:04:05Z``)."""
    if not isinstance(text, str):
        raise DurationError(f"timestamp must be a string, not {type(text).__name__}")
    m = _RFC3339.match(text.strip())
    if not m:
        raise DurationError(f"timestamp {text!r} is not RFC 3339 (want 2026-01-02T03:04:05Z)")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, zone = m.group(7), m.group(8)
    if not (year >= 1 and 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        raise DurationError(f"timestamp {text!r} has no such date")
    if hour > 23 or minute > 59 or second > 60:  # 60: a leap second, as RFC 3339 allows
        raise DurationError(f"timestamp {text!r} has no such time of day")
    offset = 0
    if zone not in ("Z", "z"):
        zh, zm = int(zone[1:3]), int(zone[4:6])
        if zh > 23 or zm > 59:
            raise DurationError(f"timestamp {text!r} has an invalid UTC offset")
        offset = (zh * 3600 + zm * 60) * (1 if zone[0] == "+" else -1)
    epoch = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) - offset
    return float(epoch + (Fraction(fraction) if fraction else 0))
