"""A label selector as ``kubectl -l`` and ``?labelSelector=`` write it, read and matched.

Theory of operation: ingest narrows the Jobs a pipeline handles with
``KUOTA_JOB_LABEL_SELECTOR`` but watches every Job and applies the selector
itself, so a Job it journaled that leaves the selector is still seen (a stop,
not a delete: docs/design/ingest.md). :func:`parse_selector` reads the
apiserver's string form (comma-separated requirements: ``k``, ``!k``,
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``) into a
``LabelSelector``; ``kuota.api.managed.label_selector_matches`` matches it with
``metav1.LabelSelector`` semantics (``k!=v`` also matches a Job without ``k``,
as the apiserver's does). A string it cannot read raises ``ValueError``. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kuota.api.managed import label_selector_matches
from kuota.api.types import LabelSelector, NodeSelectorRequirement

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(\s*({_VALUE}(?:\s*,\s*{_VALUE})*)\s*\)$")
_EQ = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS = re.compile(rf"^(!?)\s*({_KEY})$")


def _requirements(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_selector(text: str) -> LabelSelector:
    """The selector ``text`` says; ``ValueError`` naming the part it cannot read."""
    reqs: list[NodeSelectorRequirement] = []
    for part in _requirements(text.strip()):
        if m := _SET.match(part):
            values = tuple(v.strip() for v in m.group(3).split(","))
            operator = "In" if m.group(2) == "in" else "NotIn"
            reqs.append(NodeSelectorRequirement(m.group(1), operator, values))
        elif m := _EQ.match(part):
            operator = "NotIn" if m.group(2) == "!=" else "In"
            reqs.append(NodeSelectorRequirement(m.group(1), operator, (m.group(3),)))
        elif m := _EXISTS.match(part):
            operator = "DoesNotExist" if m.group(1) else "Exists"
            reqs.append(NodeSelectorRequirement(m.group(2), operator))
        else:
            raise ValueError(f"label selector {text!r}: cannot read {part!r}")
    return LabelSelector(match_expressions=tuple(reqs))


def selects(selector: LabelSelector, obj: Mapping[str, object]) -> bool:
    """Whether ``selector`` matches the labels of the object ``obj``."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        labels = {}
    return label_selector_matches(selector, {str(k): str(v) for k, v in labels.items()})
