"""The example ledger consumer skips records that are not decisions instead of crashing."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

LEDGER = Path(__file__).resolve().parents[3] / "examples" / "consumer" / "ledger.py"


@pytest.fixture(scope="module")
def ledger() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ledger_example", LEDGER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "value",
    [
        b"\x00\xff garbage",
        b'{"id": "d1", "type": "Admitted"',
        b"[1, 2, 3]",
        b'{"type": "Admitted", "at": 1}',
        b'{"id": "d1", "type": "Admitted", "at": "noon"}',
        None,
    ],
)
def test_non_decisions_are_skipped_with_a_warning(
    ledger: ModuleType, value: bytes | None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ledger.decode(value, "kuota.decisions[0]@7") is None
    assert "skipped kuota.decisions[0]@7" in capsys.readouterr().err


def test_a_decision_still_decodes_and_is_charged(ledger: ModuleType) -> None:
    record = {
        "id": "d1",
        "type": "Admitted",
        "at": 10.0,
        "workload": "team-a/j1",
        "usage": {"gpu-a": {"nvidia.com/gpu": "2"}},
    }
    decoded = ledger.decode(json.dumps(record).encode(), "t[0]@0")
    assert decoded == record
    db = sqlite3.connect(":memory:")
    db.executescript(ledger.SCHEMA)
    assert ledger.apply(db, decoded) is True
    assert db.execute("SELECT gpus FROM running WHERE workload = 'team-a/j1'").fetchone() == (2.0,)
    assert ledger.apply(db, decoded) is False  # a redelivery is not charged twice
