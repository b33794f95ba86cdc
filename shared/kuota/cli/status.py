"""``kuota status``: ClusterQueues and cohorts from the actuator's Redis read model.

Theory of operation: read the hash ``<instance>:status:clusterqueues`` that
the actuator keeps (see :mod:`kuota.audit.status`), render it as rich tables
(or one JSON document with ``--json``) and say how fresh it is: the age of the
newest change, and, when Kafka is configured, how many committed decisions
the actuator has not folded yet (its group's lag on the decision topic). With
lag 0 the figures are at most one status interval (``KUOTA_STATUS_INTERVAL``)
old. Needs ``KUOTA_REDIS_URL``; ``KUOTA_TOPIC_PREFIX`` picks the instance.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kuota.cli._common import fail, run_async, stdout_console

if TYPE_CHECKING:
    from kuota.bus.settings import KafkaSettings


def status(
    json_out: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
) -> None:
    """ClusterQueues and cohorts: usage, nominal, borrowing and pending workloads."""
    from kuota.audit.render import status_tables
    from kuota.audit.status import parse_status, redis_key, status_dict
    from kuota.bus.settings import KafkaSettings, SettingsError

    redis_url = os.environ.get("KUOTA_REDIS_URL", "").strip()
    if not redis_url:
        raise fail(
            "KUOTA_REDIS_URL is not set (for the local stack: `scripts/stack up` then "
            "`. .stack/stack.env`)"
        )
    prefix = os.environ.get("KUOTA_TOPIC_PREFIX", "kuota.")
    instance = prefix.rstrip(".").replace(".", "-") or "kuota"
    key = redis_key(instance)
    try:
        settings: KafkaSettings | None = KafkaSettings.from_env()
    except SettingsError:
        settings = None  # no Kafka: report the read model without the actuator's lag
    raw, lag = run_async(lambda: _read(redis_url, key, settings, instance))
    now = time.time()
    queues = parse_status(raw)
    doc = status_dict(queues, key=key, now=now, actuator_lag=lag)
    if json_out:
        sys.stdout.write(json.dumps(doc) + "\n")
        return
    out = stdout_console()
    if not queues:
        out.print(f"no ClusterQueues in {key} (is kuota-actuator running?)", markup=False)
    else:
        out.print(status_tables(queues))
    age = doc["last_change_age_s"]
    fresh = f"last change {age:.1f} s ago" if age is not None else "no change recorded"
    if lag is None:
        behind = "actuator lag unknown (no Kafka settings or no committed offset)"
    elif lag == 0:
        behind = "actuator has folded every committed decision (lag 0)"
    else:
        behind = f"actuator is {lag} decisions behind"
    out.print(f"read model {key}: {fresh}; {behind}", markup=False, style="dim")


async def _read(
    redis_url: str, key: str, settings: KafkaSettings | None, instance: str
) -> tuple[dict[Any, Any], int | None]:
    from kuota.store.settings import redis_client

    client: Any = redis_client(redis_url, socket_timeout=5)
    try:
        raw: dict[Any, Any] = await client.hgetall(key)
    finally:
        await client.aclose()
    lag = await _actuator_lag(settings, instance) if settings is not None else None
    return raw, lag


async def _actuator_lag(settings: KafkaSettings, instance: str) -> int | None:
    """Committed decisions the actuator's group has not consumed (None: unknown)."""
    import asyncio

    from aiokafka.errors import KafkaError

    from kuota.audit.kafka import (
        AuditSourceError,
        committed_offset,
        records_from,
        single_partition,
    )
    from kuota.bus.topics import Topics

    async def lag() -> int | None:
        tp = await single_partition(settings, Topics.from_settings(settings).decisions)
        committed = await committed_offset(settings, f"{instance}-actuator", tp)
        if committed is None:
            return None
        return (await records_from(settings, tp, committed))[0]

    try:
        return await asyncio.wait_for(lag(), timeout=5)
    except (TimeoutError, KafkaError, OSError, AuditSourceError):
        return None
