"""The exported JSON Schemas match the models, and recorded v1 records still parse."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kuota.events import decision_id, parse_decision, parse_event
from kuota.events.jsonschema import render, schemas

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", sorted(schemas()))
def test_exported_schema_matches_the_models(name: str) -> None:
    path = REPO / "docs" / "schemas" / name
    assert path.is_file(), f"{path} missing: run .venv/bin/python -m kuota.events.jsonschema"
    assert path.read_text() == render(schemas()[name]), (
        f"{path} drifted from the pydantic models: re-export with "
        "`.venv/bin/python -m kuota.events.jsonschema` (additive changes only within a version)"
    )


GOLDEN = REPO / "tests" / "fixtures" / "events" / "v1"
# Optional journal fields added within v1 after the first fixtures were recorded
# (docs/events.md, compatibility rules): WorkloadFinished/PodsReady ``workload``.
ADDED_JOURNAL_FIELDS = {"workload"}


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("journal-*.json")), ids=lambda p: p.stem)
def test_golden_journal_events_round_trip(path: Path) -> None:
    raw = json.loads(path.read_text())
    event = parse_event(path.read_bytes())
    assert event.schema_version == 1
    dumped = json.loads(event.model_dump_json())
    # a field added (additively) after the fixture was recorded reads as its default
    added = {k: v for k, v in dumped.items() if k not in raw}
    assert set(added) <= ADDED_JOURNAL_FIELDS, f"{path.name} lost {set(added)}"
    assert all(v is None for v in added.values())
    assert {k: v for k, v in dumped.items() if k in raw} == raw


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("decision-*.json")), ids=lambda p: p.stem)
def test_golden_decisions_round_trip(path: Path) -> None:
    raw = json.loads(path.read_text())
    decision = parse_decision(path.read_bytes())
    assert decision.schema_version == 1
    dumped = json.loads(decision.model_dump_json(exclude_none=True))
    assert dumped == raw


def test_goldens_cover_every_type() -> None:
    journal = {json.loads(p.read_text())["type"] for p in GOLDEN.glob("journal-*.json")}
    decisions = {json.loads(p.read_text())["type"] for p in GOLDEN.glob("decision-*.json")}
    assert {"ObjectUpserted", "ObjectDeleted", "Tick", "WorkloadFinished", "PodsReady"} <= journal
    assert {"Admitted", "Preempted", "Inadmissible", "Finished"} <= decisions


def test_decision_ids_are_sha256_of_the_cause_and_position() -> None:
    # The id is part of the log's contract (consumers deduplicate on it): it must
    # not change with how it is computed, and each call starts from a fresh hash.
    expected = hashlib.sha256(b"sim-12\x003").hexdigest()[:24]
    assert decision_id("sim-12", 3) == expected
    assert decision_id("sim-12", 3) == expected  # no state carried between calls
    assert decision_id("sim-12", 4) != expected
    assert (
        decision_id("evt-\u00e9", 0) == hashlib.sha256("evt-\u00e9\x000".encode()).hexdigest()[:24]
    )
