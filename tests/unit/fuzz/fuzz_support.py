"""Seeds, mutations and settings shared by the fuzz tests.

Seeds are the valid manifests the project ships: ``deploy/samples``,
``examples/scenarios``, ``examples/demo``, the reference YAML in ``tests/fixtures/references`` and
the v1 golden journal/decision fixtures. A mutation walks to one place in a
seed (a key or a list item at any depth) and replaces, deletes, renames,
retypes or multiplies it, with values that have broken parsers before: huge
and negative quantities, counts in the millions, NaN, deep nesting, odd
unicode. Hypothesis runs derandomized with no example database, so CI and a
laptop run the same examples (``FUZZ``); raise ``KUOTA_FUZZ_EXAMPLES`` to fuzz
longer locally.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = int(os.environ.get("KUOTA_FUZZ_EXAMPLES", "100"))

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _yaml_docs(paths: list[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(paths):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and isinstance(doc.get("kind"), str):
                out.append(doc)
    return out


def seed_manifests() -> list[dict[str, Any]]:
    """Every valid manifest the project ships, YAML-decoded (JSON-shaped)."""
    paths = [
        *REPO.glob("deploy/samples/*.yaml"),
        *REPO.glob("examples/scenarios/*.yaml"),
        *REPO.glob("examples/demo/*.yaml"),  # its Nodes too (#17)
        *REPO.glob("tests/fixtures/references/*.yaml"),
    ]
    docs = _yaml_docs(paths)
    for d in docs:  # namespaced and written without one: where kubectl apply puts it
        meta = d.setdefault("metadata", {})
        if d["kind"] in ("ResourceClaimTemplate", "ResourceClaim", "Job", "LocalQueue"):
            meta.setdefault("namespace", "default")
    # Through JSON, as the journal carries them (YAML dates become strings).
    return [json.loads(json.dumps(d, default=str)) for d in docs]


def golden_records(prefix: str) -> list[bytes]:
    """The v1 golden fixtures (``journal-*`` or ``decision-*``) as record bytes."""
    folder = REPO / "tests" / "fixtures" / "events" / "v1"
    return [p.read_bytes() for p in sorted(folder.glob(f"{prefix}-*.json"))]


SEEDS = seed_manifests()
SEED_KINDS = sorted({m["kind"] for m in SEEDS})

# Values that have broken parsers before (or would): the list first.
NASTY: list[Any] = [
    "1e30",
    "-1",
    -1,
    "99999999999Ei",
    5_000_000,
    10_000_000,
    2**63,
    -(2**63),
    1e308,
    float("nan"),
    float("inf"),
    "NaN",
    "0.0000000001",
    "1e-30",
    ".5",
    "5.",
    "",
    " ",
    "\u0000",
    "\udcff",
    "x" * 300,
    "A" * 70,
    "UPPER-case",
    "-leading",
    "a/b/c",
    "kueue.x-k8s.io/v9",
    "device.attributes['x'].y ==",
    "device.driver == 1",
    "1 +",
    "size(",
    "''.foo()",
    True,
    False,
    None,
    0,
    1.5,
    [],
    {},
    [None],
    {"": None},
    {"a": {"b": {"c": {"d": {"e": {}}}}}},
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(NASTY),
)
json_like = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)

_OPS = ("replace", "delete", "rename", "wrap", "multiply", "nasty")


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _mutate_at(doc: Any, path: tuple[Any, ...], op: str, value: Any) -> None:
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if op == "delete":
        if isinstance(parent, dict):
            del parent[last]
        else:
            parent.pop(last)
    elif op == "rename" and isinstance(parent, dict):
        parent[f"{last}x" if isinstance(last, str) else "x"] = parent.pop(last)
    elif op == "wrap":
        parent[last] = [parent[last]] if not isinstance(parent[last], list) else {"v": parent[last]}
    elif op == "multiply":
        old = parent[last]
        parent[last] = (
            [copy.deepcopy(old) for _ in range(3)] if not isinstance(old, list) else old * 3
        )
    else:
        parent[last] = value


@st.composite
def mutated_manifests(draw: st.DrawFn, seeds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A seed manifest with one to three mutations."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds or SEEDS)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(_OPS))
        value = draw(st.sampled_from(NASTY)) if op == "nasty" else draw(json_like)
        _mutate_at(doc, path, op, copy.deepcopy(value))  # NASTY's lists stay unchanged
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A seed record with bytes flipped, cut, inserted or duplicated."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not data:
            break
        i = draw(st.integers(min_value=0, max_value=len(data) - 1))
        op = draw(st.sampled_from(("flip", "cut", "truncate", "insert", "dup")))
        if op == "flip":
            data[i] = draw(st.integers(min_value=0, max_value=255))
        elif op == "cut":
            del data[i : i + draw(st.integers(min_value=1, max_value=8))]
        elif op == "truncate":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(
                st.sampled_from([b"{", b"}", b"[", b'"', b",", b"\\u0000", b"\xff", b"1e999"])
            )
        else:
            data[i:i] = data[max(0, i - 8) : i]
    return bytes(data)
