"""The journal's record limit, explicit (#23 item 5): what the writer sends for an
event (``kuota_ingest.journal.record_value``) is never over it, and the topic
``ensure_topics`` creates carries the matching ``max.message.bytes``."""

from __future__ import annotations

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import JOURNAL_MAX_MESSAGE_BYTES, wanted_topics
from kuota.events.schema import ObjectDeleted, ObjectUpserted, parse_event
from kuota_ingest import metrics
from kuota_ingest.journal import MAX_EVENT_BYTES, MAX_REQUEST_BYTES, record_value


def _job(blob: int) -> ObjectUpserted:
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {"q": "x" * blob}},
    }
    return ObjectUpserted(id="Job/ns/j@5", at=1.0, object=obj)


def test_an_event_under_the_limit_is_sent_as_it_is() -> None:
    event = _job(10)
    assert record_value(event) == event.model_dump_json().encode()


def test_an_upsert_over_the_limit_is_sent_as_its_stand_in() -> None:
    before = metrics.OVERSIZED.labels("Job")._value.get()
    value = record_value(_job(MAX_EVENT_BYTES))
    assert value is not None and len(value) < 2_000
    stand_in = parse_event(value)
    assert isinstance(stand_in, ObjectUpserted) and stand_in.id == "Job/ns/j@5"
    reason = stand_in.object["metadata"]["annotations"]["kuota.dev/not-journaled"]
    assert f"over the journal's limit of {MAX_EVENT_BYTES:,} bytes" in reason
    assert metrics.OVERSIZED.labels("Job")._value.get() == before + 1


def test_anything_else_over_the_limit_is_not_sent() -> None:
    event = ObjectDeleted(id="x", at=1.0, kind="Job", name="j", namespace="n" * 200)
    assert record_value(event, limit=100) is None


def test_the_limits_agree() -> None:
    assert MAX_EVENT_BYTES < MAX_REQUEST_BYTES <= JOURNAL_MAX_MESSAGE_BYTES
    settings = KafkaSettings.from_env({"KUOTA_KAFKA_BOOTSTRAP": "127.0.0.1:1"})
    journal = wanted_topics(settings)[0]
    assert journal.name == "kuota.journal"
    assert journal.topic_configs["max.message.bytes"] == str(JOURNAL_MAX_MESSAGE_BYTES)
