"""Tests that need the pure-Python core.

They subclass the Fold to compare an optimised rule with the plain one, and a
class compiled by mypyc takes no Python subclass (docs/design/native-core.md).
``make test`` runs this folder in a second pass with ``KUOTA_NATIVE=0``; the
first pass (every other test, on the compiled core) does not collect it
(``norecursedirs`` in pyproject.toml). Collected on a compiled core, it fails
at once rather than skipping.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import kuota.core.fold.fold

if not (kuota.core.fold.fold.__file__ or "").endswith(".py"):
    raise pytest.UsageError("tests/pure needs the pure-Python core: run it with KUOTA_NATIVE=0")

# The hypothesis strategies these tests share with tests/unit/core.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit" / "core"))
