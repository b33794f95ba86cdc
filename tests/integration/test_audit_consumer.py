"""The example subscriber (``examples/consumer/ledger.py``) on the real broker:
every admission exactly once across a crash and a restart.

Decisions (from the in-process fold of a journal) are written to the
decision topic in Kafka transactions, as admission writes them, plus one
aborted transaction of forged admissions that a ``read_committed`` reader must
never see. The ledger runs as a process with one decision per batch (so it is
slow enough to kill mid-stream), is killed with SIGKILL, and its group's
committed offset is rewound by 20 offsets — the state a crash between its
SQLite commit and its Kafka commit leaves — before it is restarted. The ledger
must end with every admission once, no forged one, the GPU-hours the
decisions imply, and must say it skipped the redelivered records.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata
from stack_helpers import delete_pipeline_topics
from test_admission_service import Journal, expected

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.events.schema import Decision

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LEDGER = REPO / "examples" / "consumer" / "ledger.py"
REWIND = 20
ENDS = ("Finished", "Preempted", "Evicted", "Deactivated")


def gpu_hours(decisions: list[Decision]) -> dict[str, float]:
    """The oracle: per namespace, GPUs x (end - admission) / 3600."""
    running: dict[str, tuple[float, float]] = {}
    out: dict[str, float] = {}
    for d in decisions:
        key = d.workload or ""
        if d.type == "Admitted":
            gpus = sum(float(q) for res in (d.usage or {}).values() for r, q in res.items()
                       if r == "nvidia.com/gpu")  # fmt: skip
            running[key] = (d.at, gpus)
        elif d.type in ENDS and key in running:
            since, gpus = running.pop(key)
            team = key.split("/")[0]
            out[team] = out.get(team, 0.0) + gpus * (d.at - since) / 3600
    return out


class Ledger:
    def __init__(self, env: dict[str, str], log: Path, db: Path) -> None:
        self.env, self.log, self.db = env, log, db
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as f:
            f.write(b"---- start\n")
            self.proc = subprocess.Popen(
                [sys.executable, str(LEDGER)], env=self.env, stdout=f, stderr=f
            )

    def last_run(self) -> str:
        return self.log.read_text(errors="replace").rsplit("---- start\n", 1)[-1]

    def admissions(self) -> list[str]:
        if not self.db.exists():
            return []
        con = sqlite3.connect(self.db, timeout=5)
        try:
            return [r[0] for r in con.execute("SELECT id FROM admissions")]
        except sqlite3.OperationalError:  # tables not created yet
            return []
        finally:
            con.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


async def wait_for(cond, what: str, timeout: float, ledger: Ledger) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        assert ledger.alive(), f"the ledger exited while waiting for {what}:\n{ledger.last_run()}"
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what} within {timeout}s; ledger log:\n{ledger.last_run()[-3000:]}")


async def test_every_admission_is_in_the_ledger_exactly_once_across_a_kill(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"test-{uuid.uuid4().hex[:10]}."
    env = dict(os.environ)
    env.update(
        KUOTA_KAFKA_BOOTSTRAP=kafka_bootstrap,
        KUOTA_TOPIC_PREFIX=prefix,
        LEDGER_DB=str(tmp_path / "ledger.sqlite"),
        LEDGER_GROUP=f"{prefix}ledger",
        LEDGER_BATCH="1",
    )
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    tp = TopicPartition(topics.decisions, 0)
    j = Journal()
    events = j.queues() + j.jobs_and_finishes(120)
    decisions = expected(list(enumerate(events)))
    admitted = [d.id for d in decisions if d.type == "Admitted"]
    assert len(admitted) > 100 and any(d.type == "Finished" for d in decisions)

    producer = AIOKafkaProducer(transactional_id=f"{prefix}writer", **settings.client_kwargs())
    await producer.start()
    ledger = Ledger(env, tmp_path / "ledger.log", tmp_path / "ledger.sqlite")
    try:
        half = len(decisions) // 2
        for chunk_start in range(0, len(decisions), 25):
            if chunk_start == (half // 25) * 25:
                # An aborted transaction in the middle: forged admissions.
                await producer.begin_transaction()
                for i in range(3):
                    forged = decisions[0].model_copy(update={"id": f"aborted-{i}", "at": 1.0})
                    await producer.send(tp.topic, value=forged.model_dump_json().encode())
                await producer.abort_transaction()
            async with producer.transaction():
                for d in decisions[chunk_start : chunk_start + 25]:
                    await producer.send(
                        tp.topic,
                        key=(d.workload or "").encode(),
                        value=d.model_dump_json().encode(),
                        headers=[("kuota-type", d.type.encode())],
                    )

        ledger.start()
        third = len(admitted) // 3
        await wait_for(lambda: len(ledger.admissions()) >= third, "a third", 60, ledger)
        assert ledger.proc is not None
        ledger.proc.send_signal(signal.SIGKILL)
        ledger.proc.wait(timeout=10)
        seen = len(ledger.admissions())
        assert seen < len(admitted), f"the kill must land mid-stream ({seen} of {len(admitted)})"

        # The state a crash between the SQLite commit and the Kafka commit leaves:
        # the last REWIND records processed but not committed. Once the killed
        # member's session expires the group is empty and accepts the commit.
        rewinder = AIOKafkaConsumer(
            group_id=env["LEDGER_GROUP"],
            enable_auto_commit=False,
            isolation_level="read_committed",
            **settings.client_kwargs(),
        )
        await rewinder.start()
        try:
            rewinder.assign([tp])
            committed = await rewinder.committed(tp)
            assert committed is not None and committed > REWIND, committed
            # The records in the rewound offsets (markers and aborted ones take offsets).
            rewinder.seek(tp, committed - REWIND)
            rewound = 0
            while await rewinder.position(tp) < committed:
                batch = await rewinder.getmany(tp, timeout_ms=1000)
                rewound += sum(1 for r in batch.get(tp, []) if r.offset < committed)
            assert rewound > 0
            deadline = time.monotonic() + 45
            while True:
                try:
                    await rewinder.commit({tp: OffsetAndMetadata(committed - REWIND, "")})
                    break
                except KafkaError as err:
                    assert time.monotonic() < deadline, f"could not rewind the group: {err}"
                    await asyncio.sleep(0.5)
        finally:
            await rewinder.stop()

        ledger.start()
        await wait_for(
            lambda: len(ledger.admissions()) == len(admitted), "every admission", 90, ledger
        )
        # Let it also fold the Finished decisions after the last admission: its
        # committed offset reaches the last record (the last offset of the topic
        # is the final transaction's commit marker).
        probe = AIOKafkaConsumer(
            group_id=env["LEDGER_GROUP"], enable_auto_commit=False, **settings.client_kwargs()
        )
        await probe.start()
        try:
            stable = (await probe.end_offsets([tp]))[tp]
            deadline = time.monotonic() + 60
            while (await probe.committed(tp) or 0) < stable - 1:
                assert time.monotonic() < deadline, "the ledger did not catch up"
                assert ledger.alive(), ledger.last_run()
                await asyncio.sleep(0.2)
        finally:
            await probe.stop()
        assert ledger.proc is not None
        ledger.proc.send_signal(signal.SIGTERM)
        assert ledger.proc.wait(timeout=30) == 0, ledger.last_run()
    finally:
        if ledger.alive():
            assert ledger.proc is not None
            ledger.proc.kill()
            ledger.proc.wait()
        await producer.stop()
        await delete_pipeline_topics(settings, topics)

    ids = ledger.admissions()
    assert sorted(ids) == sorted(admitted), "every admission once, nothing forged or aborted"
    redelivered = sum(int(n) for n in re.findall(r"(\d+) redelivered", ledger.last_run()))
    assert redelivered >= rewound, f"the {rewound} rewound records came again, skipped"
    con = sqlite3.connect(ledger.db)
    try:
        hours = dict(con.execute("SELECT team, gpu_hours FROM ledger"))
    finally:
        con.close()
    want = gpu_hours(decisions)
    assert hours.keys() == want.keys()
    for team, value in want.items():
        assert hours[team] == pytest.approx(value), team
    print(f"ledger: {len(ids)} admissions once; {redelivered} redelivered records skipped; {hours}")
