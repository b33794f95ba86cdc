"""The cli tests build their export files with the audit tests' helper
(``write_export`` in tests/unit/audit/test_audit_files.py), so that folder is
importable from here, as it is for the tests in it."""

from __future__ import annotations

import sys
from pathlib import Path

AUDIT_TESTS = str(Path(__file__).resolve().parents[1] / "audit")
if AUDIT_TESTS not in sys.path:
    sys.path.insert(0, AUDIT_TESTS)
