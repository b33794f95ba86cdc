"""Per-workload lanes: order within a Job, parallelism across Jobs, commit prefix."""

from __future__ import annotations

import asyncio

from actuator_builders import decision
from aiokafka import ConsumerRecord, TopicPartition

from kuota.events.schema import Decision
from kuota_actuator.lanes import Lanes

TP = TopicPartition("kuota.decisions", 0)


def record(offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(TP.topic, TP.partition, offset, 0, 0, None, b"", None, 0, 0, [])


async def test_one_workload_in_order_others_in_parallel_and_a_prefix_commit() -> None:
    stop = asyncio.Event()
    gates = {"team/slow": asyncio.Event()}
    applied: list[tuple[str, int]] = []

    async def apply(d: Decision, offset: int) -> None:
        gate = gates.get(d.workload or "")
        if gate is not None and offset == 0:
            await gate.wait()  # the slow Job's first decision waits (the apiserver is away)
        applied.append((d.workload or "", offset))

    lanes = Lanes(apply, stop)
    lanes.submit(TP, record(0), decision("Admitted", workload="team/slow"))
    lanes.submit(TP, record(1), decision("Admitted", workload="team/fast"))
    lanes.submit(TP, record(2), decision("Evicted", workload="team/slow"))
    lanes.submit(TP, record(3), None)  # undecodable: done at once
    await asyncio.sleep(0.05)
    assert applied == [("team/fast", 1)]  # not held up behind the slow Job
    decisions, commit = lanes.done_prefix()
    assert (decisions, commit) == ([], {})  # offset 0 still in flight: commit nothing
    gates["team/slow"].set()
    await lanes.drain(timeout=1)
    assert applied == [("team/fast", 1), ("team/slow", 0), ("team/slow", 2)]
    decisions, commit = lanes.done_prefix()
    assert [d.type for d in decisions] == ["Admitted", "Admitted", "Evicted"]
    assert commit == {TP: 4}
    assert not lanes.busy and lanes.in_flight == 0


async def test_an_unexpected_error_stops_the_lane_and_is_kept() -> None:
    async def apply(d: Decision, offset: int) -> None:
        raise RuntimeError("kafka is gone")

    lanes = Lanes(apply, asyncio.Event())
    lanes.submit(TP, record(0), decision("Admitted"))
    await lanes.drain(timeout=1)
    assert isinstance(lanes.error, RuntimeError)
    assert lanes.done_prefix() == ([], {})
