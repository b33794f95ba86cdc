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
    assert applied == ["Admitted team/other"], "only the preemptor waits for its victim"
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


async def test_an_unrelated_admission_does_not_wait_for_other_jobs_stops() -> None:
    """The fold keeps a stopped workload's quota until its pods are gone (its
    WorkloadStopped), so a stop that waits for the Job controller, or for a pod's
    termination grace period, holds up no other Job's admission."""
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
    assert applied == [
        "Admitted team/early",
        "Admitted team/unrelated",
        "Requeued team/unrelated2",
    ], applied
    assert lanes.done_prefix()[1] == {TP: 1}, "nothing past the stop in flight commits"
    stopped.set()
    await lanes.drain(timeout=1)
    assert applied.index("Admitted team/b") > applied.index("Preempted team/victim")
    assert lanes.done_prefix()[1] == {TP: 6}
