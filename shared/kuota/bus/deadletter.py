"""Dead letters: a record a consumer cannot process, kept with why and where from.

Theory of operation: a consumer that meets a record it cannot decode (or whose
fold raised) neither stops nor drops it silently: it writes the record's
original key and value bytes to ``<prefix>deadletter`` with the headers
``kuota-reason`` (one line, at most 1,000 characters), ``kuota-source``
(``<topic>/<partition>/<offset>``), ``kuota-consumer`` (the group that gave up)
and, for a value over ``MAX_VALUE`` bytes (then cut to that), ``kuota-truncated``
(its original length), and goes on. The journal's two readers each
dead-letter an undecodable record, told apart by ``kuota-consumer``.
Admission and preemption write it in the transaction that commits past the
record; the actuator writes it before it commits (at least once). The format:
docs/events.md ("Dead letters"); why: docs/design/bad-input.md.
"""

from __future__ import annotations

from typing import Protocol

from kuota.bus.processor import OutRecord
from kuota.events.decode import MAX_REASON

REASON_HEADER = "kuota-reason"
SOURCE_HEADER = "kuota-source"
CONSUMER_HEADER = "kuota-consumer"
TRUNCATED_HEADER = "kuota-truncated"
# Values above this many bytes are cut (the original stays at ``kuota-source``):
# Kafka's default record limit is 1 MB, and the headers need room.
MAX_VALUE = 1_000_000

__all__ = [
    "CONSUMER_HEADER",
    "REASON_HEADER",
    "SOURCE_HEADER",
    "TRUNCATED_HEADER",
    "dead_letter_record",
    "source_of",
]


class _Record(Protocol):
    """What a dead letter needs of a consumed record (aiokafka's ``ConsumerRecord``)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


def source_of(record: _Record) -> str:
    return f"{record.topic}/{record.partition}/{record.offset}"


def dead_letter_record(topic: str, record: _Record, reason: str, *, consumer: str) -> OutRecord:
    """The dead letter for ``record``: its original key and value, the headers above."""
    value = record.value or b""
    headers = [
        (REASON_HEADER, reason[:MAX_REASON].encode(errors="replace")),
        (SOURCE_HEADER, source_of(record).encode()),
        (CONSUMER_HEADER, consumer.encode()),
    ]
    if len(value) > MAX_VALUE:
        # A record near Kafka's size limit plus our headers would not fit, and a
        # dead letter that cannot be produced would stop its consumer for good.
        headers.append((TRUNCATED_HEADER, str(len(value)).encode()))
        value = value[:MAX_VALUE]
    return OutRecord(topic=topic, key=record.key, value=value, headers=tuple(headers))
