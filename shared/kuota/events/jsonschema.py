"""Export the public contract as JSON Schema (``docs/schemas/``).

``python -m kuota.events.jsonschema [DIR]`` writes one file per record kind and
schema version; ``tests/unit/events/test_events_jsonschema.py`` fails when the files
drift from the pydantic models, so a model change must come with its schema.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from kuota.events.schema import SCHEMA_VERSION, Decision, JournalEvent


def schemas() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema, for the current schema version."""
    journal: dict[str, Any] = TypeAdapter(JournalEvent).json_schema()
    journal["title"] = f"kuota journal event, schema version {SCHEMA_VERSION}"
    decision = Decision.model_json_schema()
    decision["title"] = f"kuota decision, schema version {SCHEMA_VERSION}"
    return {
        f"journal-event.v{SCHEMA_VERSION}.json": journal,
        f"decision.v{SCHEMA_VERSION}.json": decision,
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "docs/schemas")
    out.mkdir(parents=True, exist_ok=True)
    for name, schema in schemas().items():
        (out / name).write_text(render(schema))
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
