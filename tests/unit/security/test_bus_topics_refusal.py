"""ensure_topics' reading of a CreateTopics response: a refused creation is
said, not ignored (a user without Create, #23 item 9; the broker side is in
tests/integration/test_security_kafka_acls.py)."""

from __future__ import annotations

import pytest
from aiokafka.errors import InvalidReplicationFactorError
from aiokafka.protocol.admin import CreateTopicsResponse_v3

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import TopicsNotCreatedError, _raise_refusals

S = KafkaSettings(bootstrap="k:9093", security_protocol="SASL_SSL", sasl_username="kuota-ingest")


def response(*errors: tuple[str, int, str | None]) -> CreateTopicsResponse_v3:
    return CreateTopicsResponse_v3(throttle_time_ms=0, topic_errors=list(errors))


def test_created_or_already_there_is_fine() -> None:
    _raise_refusals(response(("kuota.journal", 0, None), ("kuota.decisions", 36, "exists")), S)


def test_a_refused_creation_names_the_topics_the_user_and_the_fix() -> None:
    with pytest.raises(TopicsNotCreatedError) as err:
        _raise_refusals(
            response(("kuota.journal", 29, "denied"), ("kuota.deadletter", 29, None)), S
        )
    text = str(err.value)
    assert "kuota.journal, kuota.deadletter do not exist" in text
    assert "'kuota-ingest'" in text and "topics.yaml" in text
    assert not err.value.retriable


def test_another_error_is_raised_as_itself() -> None:
    with pytest.raises(InvalidReplicationFactorError, match=r"kuota\.journal: rf 3 > 1 broker"):
        _raise_refusals(response(("kuota.journal", 38, "rf 3 > 1 broker")), S)
