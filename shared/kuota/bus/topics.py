"""The topic layout (docs/events.md): names, keys, replication.

Theory of operation: three topics under ``KUOTA_TOPIC_PREFIX`` (default
``kuota.``): ``journal`` (JournalEvent JSON, what kuota knows; kept forever),
``decisions`` (Decision JSON, what kuota chose; forever) and ``deadletter``
(records a consumer could not process, with the reason; 30 days). A journal
record's key is its *shard key*: everything that can share quota must be
folded in one order, so the key will be the cohort tree's root; until
sharding is configured every record has the key ``kuota`` and the journal one
partition, and moving to a shard per tree changes ``shard_key`` and the
partition count, not the records. :func:`ensure_topics` creates missing topics
with the replication ``kuota.bus.settings`` reads; topics that exist are left
as they are, and a user without ``Create`` (production: Strimzi's KafkaTopics
exist first) needs only ``Describe``. A refused creation is an error that says so.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError, TopicAuthorizationFailedError, for_code

from kuota.bus import connect
from kuota.bus.settings import KafkaSettings

FOREVER = "-1"
THIRTY_DAYS_MS = str(30 * 24 * 3600 * 1000)
DEFAULT_SHARD_KEY = b"kuota"
# The journal's max.message.bytes (Kafka's default, made explicit): ingest keeps
# every record under it (kuota_ingest.journal.MAX_EVENT_BYTES).
JOURNAL_MAX_MESSAGE_BYTES = 1_048_588


@dataclass(frozen=True, slots=True)
class Topics:
    journal: str
    decisions: str
    deadletter: str

    @classmethod
    def from_settings(cls, settings: KafkaSettings) -> Topics:
        return cls(
            journal=settings.topic("journal"),
            decisions=settings.topic("decisions"),
            deadletter=settings.topic("deadletter"),
        )


def shard_key(_object_key: str) -> bytes:
    """The journal key for an object. One shard today (see module docstring)."""
    return DEFAULT_SHARD_KEY


def wanted_topics(settings: KafkaSettings, replication_factor: int | None = None) -> list[NewTopic]:
    """The topics as ``ensure_topics`` creates them."""
    topics = Topics.from_settings(settings)
    rf = settings.replication_factor if replication_factor is None else replication_factor
    min_isr = str(min(rf, settings.topic_min_insync))
    forever = {"retention.ms": FOREVER, "cleanup.policy": "delete", "min.insync.replicas": min_isr}
    return [
        NewTopic(
            topics.journal,
            settings.journal_partitions,
            rf,
            topic_configs={**forever, "max.message.bytes": str(JOURNAL_MAX_MESSAGE_BYTES)},
        ),
        NewTopic(topics.decisions, settings.journal_partitions, rf, topic_configs=dict(forever)),
        NewTopic(
            topics.deadletter,
            1,
            rf,
            topic_configs={"retention.ms": THIRTY_DAYS_MS, "min.insync.replicas": min_isr},
        ),
    ]


async def ensure_topics(
    settings: KafkaSettings, *, replication_factor: int | None = None
) -> Topics:
    """Create the topics if they are missing (idempotent). The replication
    factor is the settings' unless given. A broker that refuses kuota's
    credentials or TLS settings raises ``connect.KafkaAuthError``."""
    topics = Topics.from_settings(settings)
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await connect.start(admin, settings)
    try:
        existing = set(await admin.list_topics())
        wanted = wanted_topics(settings, replication_factor)
        missing = [t for t in wanted if t.name not in existing]
        if missing:
            # Another service may create them meanwhile.
            with contextlib.suppress(TopicAlreadyExistsError):
                response = await admin.create_topics(missing)
                _raise_refusals(response, settings)
    finally:
        await admin.close()
    return topics


class TopicsNotCreatedError(TopicAuthorizationFailedError):  # type: ignore[misc]
    """A missing topic the user may not create (not retriable: create it first)."""


def _raise_refusals(response: object, settings: KafkaSettings) -> None:
    """The per-topic errors of a CreateTopics response, as one clear error."""
    refused: list[str] = []
    for entry in getattr(response, "topic_errors", None) or []:
        name, code = entry[0], entry[1]
        if code in (0, TopicAlreadyExistsError.errno):
            continue
        if code == TopicAuthorizationFailedError.errno:
            refused.append(name)
            continue
        message = entry[2] if len(entry) > 2 and entry[2] else ""
        error = for_code(code)
        raise error(f"creating topic {name}: {message or error.__name__}")
    if refused:
        raise TopicsNotCreatedError(
            f"{settings.describe()}: topic(s) {', '.join(refused)} do not exist and this "
            "user may not create them: create them first (deploy/kafka/strimzi/topics.yaml), "
            "or grant Create on them (docs/security.md)"
        )
