"""Kafka stand-ins: a producer that records what it is sent, and records.

``consumer_record`` is one aiokafka ``ConsumerRecord`` as a consumer hands it
over (partition 0, no headers unless told).

:class:`FakeProducer` is an aiokafka producer that records what the code
under test sends: ``send`` returns a future that completes a moment later (the broker's ack),
logging ``send <event id>`` then ``ack <event id>`` in ``log`` so a test sees
what was acknowledged before what; ``send_and_wait`` completes at once. Every
record goes to ``records`` as ``(topic, keyword arguments)`` and, when given,
to ``on_send`` (a test that interleaves sends with other steps logs there).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiokafka import ConsumerRecord

from kuota.events.schema import parse_event


def consumer_record(
    topic: str,
    offset: int,
    value: bytes | None,
    *,
    key: bytes | None = b"kuota",
    partition: int = 0,
    headers: list[tuple[str, bytes]] | None = None,
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=0,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=len(key or b""),
        serialized_value_size=len(value or b""),
        headers=headers or [],
    )


class FakeProducer:
    def __init__(self, on_send: Callable[[str, dict[str, Any]], object] | None = None) -> None:
        self.on_send = on_send
        self.log: list[str] = []
        self.sent: list[bytes] = []
        self.records: list[tuple[str, dict[str, Any]]] = []

    def _record(self, topic: str, kw: dict[str, Any]) -> None:
        self.records.append((topic, kw))
        if self.on_send is not None:
            self.on_send(topic, kw)

    async def send(self, topic: str, **kw: Any) -> asyncio.Future[None]:
        self._record(topic, kw)
        self.sent.append(kw["value"])
        event_id = parse_event(kw["value"]).id
        self.log.append(f"send {event_id}")
        return asyncio.ensure_future(self._ack(event_id))

    async def send_and_wait(self, topic: str, **kw: Any) -> None:
        self._record(topic, kw)

    async def _ack(self, what: str) -> None:
        await asyncio.sleep(0.01)
        self.log.append(f"ack {what}")
