"""A consumer group's committed offsets, read without joining the group.

Theory of operation: an admin client describes the topic (retried for up to
``wait`` seconds: a topic created a moment ago may not be in the metadata
yet) and lists the group's offsets for its partitions. A plain consumer's
``partitions_for_topic`` is not a substitute: a consumer that subscribes to
nothing never loads the topic's metadata, so it answers None and a restart
would take "nothing committed" for an answer (the actuator's read model was
rebuilt from 0 decisions after every restart that way until this module).
"""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from kuota.bus.settings import KafkaSettings


async def group_offsets(
    settings: KafkaSettings, topic: str, group: str, *, wait: float = 10.0
) -> dict[int, int | None]:
    """``group``'s committed offset per partition of ``topic`` (None: nothing
    committed yet on that partition). Empty only if the topic still has no
    partitions after ``wait`` seconds."""
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            described = await admin.describe_topics([topic])
            parts = sorted(
                p["partition"]
                for t in described
                if t["topic"] == topic and t["error_code"] == 0
                for p in t["partitions"]
            )
            if parts or loop.time() > deadline:
                break
            await asyncio.sleep(0.2)
        tps = [TopicPartition(topic, p) for p in parts]
        offsets = await admin.list_consumer_group_offsets(group, partitions=tps) if tps else {}
    finally:
        await admin.close()
    out: dict[int, int | None] = {}
    for tp in tps:
        meta = offsets.get(tp)
        out[tp.partition] = meta.offset if meta is not None and meta.offset >= 0 else None
    return out
