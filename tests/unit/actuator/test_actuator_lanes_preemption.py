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
    assert applied == [], "no admission before the earlier stop is applied"
    stopped.set()
    await lanes.drain(timeout=1)
    assert applied.index("Admitted team/high") > applied.index("Preempted team/low")
    assert applied.index("Admitted team/high") > applied.index("Requeued team/low")
    decisions, commit = lanes.done_prefix()
    assert len(decisions) == 4 and commit == {TP: 4}


async def test_an_admission_waits_for_no_earlier_decision_other_than_a_stop() -> None:
    gate = asyncio.Event()
    applied: list[str] = []

    async def apply(d: Decision, offset: int) -> None:
        if d.workload == "team/slow":
            await gate.wait()  # e.g. an admission retried while the apiserver is away
        applied.append(d.workload or "")

    lanes = Lanes(apply, asyncio.Event())
    lanes.submit(TP, record(0), decision("Admitted", workload="team/slow"))
    lanes.submit(TP, record(1), decision("Requeued", workload="team/slow2"))
    lanes.submit(TP, record(2), decision("Admitted", workload="team/high"))
    await asyncio.sleep(0.05)
    assert applied == ["team/slow2", "team/high"]
    gate.set()
    await lanes.drain(timeout=1)
    assert applied[-1] == "team/slow"


async def test_any_admission_waits_for_every_earlier_stop() -> None:
    """The fold frees a preempted workload's quota for EVERY later admission (make chaos
    found an unrelated Job unsuspended while the victim still ran, over quota)."""
    stopped = asyncio.Event()
    applied: list[str] = []

    async def apply(d: Decision, offset: int) -> None:
        if d.type in ("Preempted", "Evicted"):
            await stopped.wait()
        applied.append(f"{d.type} {d.workload}")

    lanes = Lanes(apply, asyncio.Event())
    lanes.submit(TP, record(0), decision("Admitted", workload="team/early"))
    lanes.submit(TP, record(1), decision("Preempted", workload="team/victim"))
    lanes.submit(TP, record(2), decision("Evicted", workload="team/other-victim"))
    lanes.submit(TP, record(3), decision("Admitted", workload="team/b", victims=["team/victim"]))
    lanes.submit(TP, record(4), decision("Admitted", workload="team/unrelated"))
    lanes.submit(TP, record(5), decision("Requeued", workload="team/unrelated2"))
    await asyncio.sleep(0.05)
    assert applied == ["Admitted team/early", "Requeued team/unrelated2"], applied
    stopped.set()
    await lanes.drain(timeout=1)
    for admitted in ("Admitted team/b", "Admitted team/unrelated"):
        assert applied.index(admitted) > applied.index("Preempted team/victim")
        assert applied.index(admitted) > applied.index("Evicted team/other-victim")
    assert lanes.done_prefix()[1] == {TP: 6}
    # Applied stops are no longer waited for.
    lanes.submit(TP, record(6), decision("Admitted", workload="team/later"))
    await lanes.drain(timeout=1)
    assert applied[-1] == "Admitted team/later"
