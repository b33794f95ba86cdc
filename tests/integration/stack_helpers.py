"""Clean-up helpers shared by the integration tests that use the real stack.

A test pipeline gets its own topics (a unique ``KUOTA_TOPIC_PREFIX``) and a test
its own namespace; these remove them again, whatever the test did.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiokafka.admin import AIOKafkaAdminClient
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import Topics


async def delete_pipeline_topics(settings: KafkaSettings, topics: Topics) -> None:
    """Delete a test pipeline's journal, decision and dead-letter topics."""
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    try:
        await admin.delete_topics([topics.journal, topics.decisions, topics.deadletter])
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def temp_namespace(
    api: client.ApiClient, name: str, labels: dict[str, str]
) -> AsyncIterator[str]:
    """A namespace for one test, deleted (in the background) afterwards."""
    core = client.CoreV1Api(api)
    await core.create_namespace({"metadata": {"name": name, "labels": labels}})
    try:
        yield name
    finally:
        try:
            await core.delete_namespace(name, propagation_policy="Background")
        except ApiException as e:
            if e.status != 404:
                raise
