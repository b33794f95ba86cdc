"""Reading what the audit needs from Kafka and Redis.

Theory of operation: the audit reads as admission does, with
``read_committed`` consumers that join no group (an audit never moves anybody's
offsets), assigned one partition each. :func:`audit_range` decides which
journal offsets are audited: up to the admission group's committed offset
(``<instance>-admission``), or, when it has committed nothing, the journal's
end, saying so. :func:`read_batches` yields one partition's records in
``[start, end)`` and raises :class:`AuditSourceError` when ``start`` is no
longer in the log or the reader stops advancing. :func:`load_snapshot` loads
admission's signed snapshot from Redis (``kuota:snapshot:<instance>-admission-0``).
One journal partition, like admission: a topic with more is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, OffsetOutOfRangeError

from kuota.audit.explain import Explainer, Explanation, relevant
from kuota.audit.replay import (
    Auditor,
    AuditResult,
    JournalRecord,
    Progress,
    RecordedDecision,
    decode_decision,
    decode_event,
    service_fold,
)
from kuota.bus import connect
from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import Topics
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision

__all__ = [
    "AuditRange",
    "AuditSourceError",
    "KafkaError",
    "admission_group",
    "audit_range",
    "committed_offset",
    "explain_workload",
    "instance",
    "journal_and_decisions",
    "journal_records",
    "load_snapshot",
    "read_batches",
    "recorded_decisions",
    "records_from",
    "run_audit",
    "single_partition",
    "snapshot_name",
    "stable_end",
]

PARTITION = 0


class AuditSourceError(RuntimeError):
    """The topics cannot be read as the audit needs (one line for people)."""


def instance(settings: KafkaSettings) -> str:
    """The deployment's name: the topic prefix without its dot (``kuota``), as
    the services name their groups, transactional ids and snapshots."""
    return settings.topic_prefix.rstrip(".").replace(".", "-") or "kuota"


def admission_group(settings: KafkaSettings) -> str:
    return f"{instance(settings)}-admission"


def snapshot_name(settings: KafkaSettings) -> str:
    return f"{instance(settings)}-admission-{PARTITION}"


@dataclass(frozen=True, slots=True)
class AuditRange:
    end: int  # first journal offset not audited
    reason: str  # why it ends there, for people
    decisions_end: int  # the decision topic's last stable offset, read after ``end``


def consumer(settings: KafkaSettings) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="none",
        **settings.client_kwargs(),
    )


async def partitions(settings: KafkaSettings, topic: str) -> list[int]:
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await connect.start(admin, settings)  # a refused password or CA: said so
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    for t in described:
        if t["topic"] == topic and t["error_code"] == 0:
            return sorted(p["partition"] for p in t["partitions"])
    raise AuditSourceError(f"topic {topic} does not exist (KUOTA_TOPIC_PREFIX?)")


async def single_partition(settings: KafkaSettings, topic: str) -> TopicPartition:
    parts = await partitions(settings, topic)
    if parts != [PARTITION]:
        raise AuditSourceError(
            f"{topic} has partitions {parts}; the audit reads exactly one partition today "
            "(as kuota-admission folds one)"
        )
    return TopicPartition(topic, PARTITION)


async def committed_offset(settings: KafkaSettings, group: str, tp: TopicPartition) -> int | None:
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await connect.start(admin, settings)  # a refused password or CA: said so
    try:
        offsets = await admin.list_consumer_group_offsets(group, partitions=[tp])
    finally:
        await admin.close()
    meta = offsets.get(tp)
    return int(meta.offset) if meta is not None and meta.offset >= 0 else None


async def stable_end(settings: KafkaSettings, tp: TopicPartition) -> int:
    """The partition's end for a ``read_committed`` reader (its last stable offset)."""
    c = consumer(settings)
    await c.start()
    try:
        ends = await c.end_offsets([tp])
        return int(ends[tp])
    finally:
        await c.stop()


async def records_from(
    settings: KafkaSettings, tp: TopicPartition, start: int, *, cap: int = 10_000
) -> tuple[int, bool]:
    """How many committed records ``tp`` holds from ``start`` to its end, and
    whether that is exact (False: more than ``cap``; the count is then the
    offset distance, markers included). Offsets alone over-count: every
    transaction leaves a commit marker that takes an offset but is no record."""
    end = await stable_end(settings, tp)
    if end <= start:
        return 0, True
    if end - start > cap:
        return end - start, False
    n = 0
    async with contextlib.aclosing(read_batches(settings, tp, start=start, end=end)) as batches:
        async for batch in batches:
            n += len(batch)
    return n, True


async def audit_range(
    settings: KafkaSettings, journal: TopicPartition, decisions: TopicPartition
) -> AuditRange:
    group = admission_group(settings)
    committed = await committed_offset(settings, group, journal)
    # Read after the committed offset: the decisions of every event below it
    # committed in the same transactions, so they are below this end.
    decisions_end = await stable_end(settings, decisions)
    if committed is not None:
        return AuditRange(committed, f"committed offset of group {group}", decisions_end)
    end = await stable_end(settings, journal)
    return AuditRange(
        end,
        f"end of the journal (group {group} has committed no offset: is kuota-admission running?)",
        decisions_end,
    )


async def read_batches(
    settings: KafkaSettings,
    tp: TopicPartition,
    *,
    start: int,
    end: int,
    max_records: int = 2000,
    stall_timeout_s: float = 30.0,
) -> AsyncGenerator[list[ConsumerRecord[bytes, bytes]], None]:
    """Records of ``tp`` at offsets ``[start, end)``, in batches."""
    if end <= start:
        return
    reader = consumer(settings)
    await reader.start()
    try:
        reader.assign([tp])
        reader.seek(tp, start)
        loop = asyncio.get_running_loop()
        position = start
        last_progress = loop.time()
        while position < end:
            try:
                fetched = await reader.getmany(tp, timeout_ms=500, max_records=max_records)
            except OffsetOutOfRangeError as err:
                raise AuditSourceError(
                    f"offset {start} of {tp.topic}[{tp.partition}] is no longer in the log: {err}"
                ) from err
            records = [r for r in fetched.get(tp, []) if r.offset < end]
            if records:
                yield records
            new_position = await reader.position(tp)
            if new_position > position:
                position = new_position
                last_progress = loop.time()
            elif loop.time() - last_progress > stall_timeout_s:
                raise AuditSourceError(
                    f"reading {tp.topic}[{tp.partition}] stalled at offset {position} "
                    f"(target {end})"
                )
    finally:
        await reader.stop()


async def load_snapshot(redis_url: str, name: str) -> tuple[Fold, int]:
    """The admission service's snapshot: its Fold and the offset of the next record."""
    from redis.exceptions import RedisError

    import kuota.api
    import kuota.core
    from kuota.store.settings import redis_client
    from kuota.store.snapshots import SnapshotStore, code_build

    client: Any = redis_client(redis_url)
    try:
        # The same build stamp as the admission service: a snapshot is only
        # trusted by code that folds exactly like the code that wrote it.
        store = SnapshotStore(client, name=name, build=code_build(kuota.core, kuota.api))
        snapshot, reason = await store.load()
    except (RedisError, OSError) as err:
        raise AuditSourceError(f"snapshot {name}: Redis unavailable: {err}") from None
    except (ImportError, TypeError) as err:  # pickled by a build whose classes differ
        raise AuditSourceError(f"snapshot {name} cannot be loaded by this build: {err}") from None
    finally:
        await client.aclose()
    if snapshot is None:
        raise AuditSourceError(f"snapshot {name}: {reason}")
    if not isinstance(snapshot.state, Fold):
        raise AuditSourceError(
            f"snapshot {name} holds a {type(snapshot.state).__name__}, not a Fold"
        )
    return snapshot.state, snapshot.offset


def where(record: ConsumerRecord[bytes, bytes]) -> str:
    return f"{record.topic}[{record.partition}]@{record.offset}"


async def run_audit(
    settings: KafkaSettings,
    auditor: Auditor,
    *,
    journal: TopicPartition,
    decisions: TopicPartition,
    start: int,
    end: int,
    decisions_end: int,
    progress: Progress | None = None,
) -> AuditResult:
    """Feed ``auditor`` the journal ``[start, end)`` and the decision topic up
    to ``decisions_end``. Before each journal batch, decisions are read until
    one is caused past the batch (they are in cause order), so the auditor
    can match the batch's decisions as it folds it; stops at the first
    divergence."""
    buffered: deque[RecordedDecision] = deque()
    exhausted = decisions_end <= 0

    def pull() -> RecordedDecision | None:
        return buffered.popleft() if buffered else None

    async with (
        contextlib.aclosing(read_batches(settings, journal, start=start, end=end)) as events,
        contextlib.aclosing(
            read_batches(settings, decisions, start=0, end=decisions_end)
        ) as recorded,
    ):

        async def more() -> bool:
            """One more batch of decisions into the buffer; False at the end."""
            nonlocal exhausted
            if exhausted:
                return False
            try:
                batch = await anext(recorded)
            except StopAsyncIteration:
                exhausted = True
                return False
            first = auditor.compare_from
            for r in batch:
                rd = decode_decision(where(r), r.value)
                d = rd.decision
                if d is not None and d.cause_offset is not None and d.cause_offset < first:
                    auditor.result.ignored += 1  # before a snapshot: not held in memory
                else:
                    buffered.append(rd)
            return True

        def past(offset: int) -> bool:
            last = buffered[-1].decision if buffered else None
            return last is not None and last.cause_offset is not None and last.cause_offset > offset

        n = 0
        async for batch in events:
            last = batch[-1].offset
            while not past(last) and await more():
                pass
            if auditor.feed((decode_event(r.offset, r.value) for r in batch), pull) is not None:
                break
            n += len(batch)
            if progress is not None:
                progress(n, last)
        while not auditor.done and (buffered or await more()):
            if buffered:  # a batch can hold only decisions from before a snapshot
                auditor.recorded(buffered.popleft())
    return auditor.finish()


async def journal_records(
    settings: KafkaSettings, tp: TopicPartition, *, start: int, end: int
) -> AsyncGenerator[list[JournalRecord], None]:
    """The journal ``[start, end)`` decoded as admission decodes it, in batches."""
    async with contextlib.aclosing(read_batches(settings, tp, start=start, end=end)) as batches:
        async for batch in batches:
            yield [decode_event(r.offset, r.value) for r in batch]


async def recorded_decisions(
    settings: KafkaSettings, tp: TopicPartition, *, end: int
) -> AsyncGenerator[list[RecordedDecision], None]:
    """The decision topic up to ``end``, in batches."""
    async with contextlib.aclosing(read_batches(settings, tp, start=0, end=end)) as batches:
        async for batch in batches:
            yield [decode_decision(where(r), r.value) for r in batch]


async def journal_and_decisions(
    settings: KafkaSettings,
) -> tuple[TopicPartition, TopicPartition, AuditRange]:
    """The journal and decision topics' one partition each, and how far to read them."""
    topics = Topics.from_settings(settings)
    journal = await single_partition(settings, topics.journal)
    decisions = await single_partition(settings, topics.decisions)
    return journal, decisions, await audit_range(settings, journal, decisions)


async def explain_workload(
    settings: KafkaSettings,
    key: str,
    preemption: str,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Explanation:
    """``kuota explain`` from Kafka: the workload's recorded decisions up to the
    audit range, then the journal re-folded (in ``preemption`` mode) as far as
    they need; ``progress(done, total)`` after each journal batch. The CLI and
    the dashboard's workload page both call this."""
    journal, decisions, rng = await journal_and_decisions(settings)
    mine: list[Decision] = []
    async for batch in recorded_decisions(settings, decisions, end=rng.decisions_end):
        for r in batch:
            d = r.decision
            if d is None or (d.cause_offset is not None and d.cause_offset >= rng.end):
                continue
            if d.workload == key or d.preemptor == key:
                mine.append(d)
    explainer = Explainer(key, relevant(key, mine), service_fold(preemption))
    until = explainer.needed_until
    end = rng.end if until is None else min(rng.end, until + 1)
    if progress is not None:
        progress(0, end)
    async for records in journal_records(settings, journal, start=0, end=end):
        for record in records:
            explainer.event(record)
        if progress is not None:
            progress(records[-1].offset + 1, end)
    return explainer.explain()
