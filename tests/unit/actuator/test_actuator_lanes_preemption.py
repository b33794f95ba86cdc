"""A preemptor's Admitted waits for its victims' stops (tests/e2e found them racing)."""

from __future__ import annotations

import asyncio

from actuator_builders import decision
from aiokafka import ConsumerRecord, TopicPartition

from kuota.events.schema import Decision
from kuota_actuator.lanes import Lanes

TP = TopicPartition("kuota.decisions", 0)


def record(offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(TP.topic, TP.partition, offset, 0, 0, None, b"", None, 0, 0, [])


async def test_the_preemptor_is_unsuspended_only_after_its_victims_are_stopped() -> None:
    stopped = asyncio.Event()
    applied: list[str] = []

    async def apply(d: Decision, offset: int) -> None:
        if d.type == "Preempted":
            await stopped.wait()  # the Job controller takes the victim's pods down
        applied.append(f"{d.type} {d.workload}")

    lanes = Lanes(apply, asyncio.Event())
    lanes.submit(TP, record(0), decision("Preempted", workload="team/low"))
    lanes.submit(TP, record(1), decision("Requeued", workload="team/low"))
    lanes.submit(TP, record(2), decision("Admitted", workload="team/high", victims=["team/low"]))
    lanes.submit(TP, record(3), decision("Admitted", workload="team/other"))
    await asyncio.sleep(0.05)
    assert applied == ["Admitted team/other"], "only the unrelated Job may go ahead"
    stopped.set()
    await lanes.drain(timeout=1)
    assert applied.index("Admitted team/high") > applied.index("Preempted team/low")
    assert applied.index("Admitted team/high") > applied.index("Requeued team/low")
    decisions, commit = lanes.done_prefix()
    assert len(decisions) == 4 and commit == {TP: 4}


async def test_an_admission_without_victims_waits_for_nobody() -> None:
    gate = asyncio.Event()
    applied: list[str] = []

    async def apply(d: Decision, offset: int) -> None:
        if d.workload == "team/low":
            await gate.wait()
        applied.append(d.workload or "")

    lanes = Lanes(apply, asyncio.Event())
    lanes.submit(TP, record(0), decision("Preempted", workload="team/low"))
    lanes.submit(TP, record(1), decision("Admitted", workload="team/high"))
    await asyncio.sleep(0.05)
    assert applied == ["team/high"]
    gate.set()
    await lanes.drain(timeout=1)
