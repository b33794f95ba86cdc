"""Versioned journal events and decisions: the public contract.

The journal (what kuota knows) carries ``JournalEvent`` records; the decision
topic (what kuota chose) carries ``Decision`` records. Both are frozen pydantic
models with a ``schema_version``; a released version is never edited, only
extended additively (docs/events.md). ``kuota.events.decode`` reads records
and refuses a version this build does not read; ``kuota.events.jsonschema``
exports the schemas to ``docs/schemas/``.
"""

from kuota.events.decode import DecodeError, decode_decision, decode_event
from kuota.events.schema import (
    DECISION_TYPES,
    SCHEMA_VERSION,
    ActuationFailed,
    Decision,
    JournalEvent,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    PreemptionPlan,
    Tick,
    WorkloadFinished,
    WorkloadStopped,
    decision_id,
    parse_decision,
    parse_event,
)

__all__ = [
    "DECISION_TYPES",
    "SCHEMA_VERSION",
    "ActuationFailed",
    "Decision",
    "DecodeError",
    "JournalEvent",
    "ObjectDeleted",
    "ObjectUpserted",
    "PodsReady",
    "PreemptionPlan",
    "Tick",
    "WorkloadFinished",
    "WorkloadStopped",
    "decision_id",
    "decode_decision",
    "decode_event",
    "parse_decision",
    "parse_event",
]
