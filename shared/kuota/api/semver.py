"""Semantic versions as Kubernetes' DRA reads them (attribute values and CEL's ``semver()``).

A version parses to ``(major, minor, patch, pre-release identifiers)``, or ``None``.
"""

from __future__ import annotations

import re

__all__ = ["Semver", "parse_semver"]

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
Semver = tuple[int, int, int, tuple[str, ...]]


def parse_semver(text: str, *, normalize: bool = False) -> Semver | None:
    """Parse a semantic version 2.0.0 string; ``None`` if it is not one.

    ``normalize`` accepts what Kubernetes' ``semver(s, true)`` accepts: a leading
    ``v``, missing minor/patch, and leading zeros.
    """
    if not isinstance(text, str) or len(text) > 256:
        return None
    if normalize:
        text = text.removeprefix("v")
        core, sep, rest = _split_core(text)
        parts = core.split(".")
        if not 1 <= len(parts) <= 3 or not all(p.isdigit() and p.isascii() for p in parts):
            return None
        parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
        text = ".".join(parts) + sep + rest
    m = _SEMVER.match(text)
    if not m:
        return None
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def _split_core(text: str) -> tuple[str, str, str]:
    for i, ch in enumerate(text):
        if ch in "-+":
            return text[:i], ch, text[i + 1 :]
    return text, "", ""
