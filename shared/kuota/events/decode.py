"""Record bytes -> a journal event or a decision, or one clear ``DecodeError``.

Theory of operation: every consumer of kuota's topics (admission and
preemption on the journal, the actuator and the audit on the decisions) reads
records through :func:`decode_event` / :func:`decode_decision`. Whatever the
bytes are, the result is either a frozen event of this build's schema or a
:class:`DecodeError` whose ``reason`` is one line a person can act on: the
record is empty, is not JSON, is JSON but not a journal event (the first bad
field is named), carries a ``schema_version`` this build does not read, or has
an event time that is not a finite number (``1e999`` and ``NaN`` parse as
floats, and one infinite ``at`` would move the fold's clock past every timer
forever). Nothing else escapes: a consumer that catches ``DecodeError``
dead-letters the record with that reason and goes on (docs/design/bad-input.md).
"""

from __future__ import annotations

import math
from typing import TypeVar

from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticError

from kuota.events.schema import SCHEMA_VERSION, Decision, JournalEvent

__all__ = ["MAX_REASON", "DecodeError", "decode_decision", "decode_event"]

MAX_REASON = 1000  # characters of a reason kept (a header, a log line)

_T = TypeVar("_T", bound=BaseModel)
_event_adapter: TypeAdapter[JournalEvent] = TypeAdapter(JournalEvent)
_decision_adapter: TypeAdapter[Decision] = TypeAdapter(Decision)


class DecodeError(ValueError):
    """A record that is not an event (or decision) this build can read; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        reason = reason[:MAX_REASON]
        super().__init__(reason)
        self.reason = reason


def decode_event(value: bytes | bytearray | memoryview | str | None) -> JournalEvent:
    """The journal event in a record's value, or :class:`DecodeError`."""
    return _decode(value, _event_adapter, "journal event")


def decode_decision(value: bytes | bytearray | memoryview | str | None) -> Decision:
    """The decision in a record's value, or :class:`DecodeError`."""
    return _decode(value, _decision_adapter, "decision")


def _decode(value: object, adapter: TypeAdapter[_T], what: str) -> _T:
    if isinstance(value, memoryview | bytearray):
        value = bytes(value)
    if value is None or (isinstance(value, bytes | str) and not value):
        raise DecodeError("empty record value")
    if not isinstance(value, bytes | str):
        raise DecodeError(f"record value is a {type(value).__name__}, not bytes")
    try:
        obj = adapter.validate_json(value)
    except PydanticError as err:
        raise DecodeError(_reason(err, what)) from None
    except (ValueError, RecursionError, MemoryError) as err:  # defensive: never seen
        raise DecodeError(f"not a {what}: {type(err).__name__}: {err}") from None
    version = getattr(obj, "schema_version", None)
    if version != SCHEMA_VERSION:
        raise DecodeError(
            f"schema_version {version} is not supported (this build reads {SCHEMA_VERSION})"
        )
    at = getattr(obj, "at", 0.0)
    if not math.isfinite(at):
        raise DecodeError(f"not a {what}: at: {at!r} is not a finite event time")
    return obj


def _reason(err: PydanticError, what: str) -> str:
    errors = err.errors(include_url=False, include_input=False)
    if not errors:
        return f"not a {what}: {err}"
    first = errors[0]
    if first["type"] == "json_invalid":
        return f"not a {what}: not JSON ({first['msg'].removeprefix('Invalid JSON: ')})"
    where = ".".join(str(p) for p in first["loc"]) or "record"
    return f"not a {what} ({len(errors)} error(s)); {where}: {first['msg']}"
