"""The admission shell with a fake processor and a fake snapshot store:
configuration, the recovery order (fence, committed offset, snapshot, silent
replay, live), snapshots only after the transaction that covers them, and the
metrics."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Sequence
from typing import Any

import pytest
from admission_helpers import TOPICS, journal, oracle, rec, records
from aiokafka import ConsumerRecord
from redis.exceptions import ConnectionError as RedisConnectionError

from kuota.bus.processor import OutRecord, Replayer
from kuota.bus.settings import SettingsError
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, ObjectUpserted, parse_decision
from kuota.store.snapshots import Snapshot
from kuota_admission.loop import FatalError, Service, choose_start
from kuota_admission.metrics import AdmissionMetrics
from kuota_admission.records import JournalFolder
from kuota_admission.settings import load_config

ENV = {
    "KUOTA_KAFKA_BOOTSTRAP": "127.0.0.1:1",
    "KUOTA_REDIS_URL": "redis://127.0.0.1:1/0",
    "KUOTA_SNAPSHOT_KEY": "k",
}

# ---------------------------------------------------------------------- configuration


def test_defaults_and_names_follow_the_topic_prefix() -> None:
    cfg = load_config(ENV)
    assert (cfg.metrics_port, cfg.snapshot_every, cfg.snapshot_seconds) == (9102, 5000, 30.0)
    assert cfg.group_id == "kuota-admission"
    assert cfg.transactional_id(0) == "kuota-admission-0"
    assert cfg.snapshot_name(0) == "kuota-admission-0"
    other = load_config({**ENV, "KUOTA_TOPIC_PREFIX": "test-1a2b."})
    assert other.group_id == "test-1a2b-admission"
    assert other.transactional_id(0) == "test-1a2b-admission-0"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "KUOTA_KAFKA_BOOTSTRAP is not set"),
        ({"KUOTA_KAFKA_BOOTSTRAP": "h:1"}, "KUOTA_REDIS_URL is not set"),
        ({**ENV, "KUOTA_SNAPSHOT_EVERY": "0"}, "KUOTA_SNAPSHOT_EVERY='0' must be at least 1"),
        ({**ENV, "KUOTA_SNAPSHOT_SECONDS": "soon"}, "is not a number"),
        ({**ENV, "KUOTA_METRICS_PORT": "70000"}, "is not a port"),
        ({**ENV, "KUOTA_LOG_LEVEL": "chatty"}, "is not a log level"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_config(env)


# ---------------------------------------------------------------------- choosing the start


def test_choose_start() -> None:
    fold = Fold(preemption="plans")
    assert choose_start(None, "no snapshot", None)[1:] == (
        0,
        "no snapshot; replaying the journal from offset 0",
    )
    got, start, _ = choose_start(Snapshot(7, fold), "ok", 9)
    assert got is fold and start == 7
    assert choose_start(Snapshot(9, fold), "ok", 9)[1] == 9
    ahead = choose_start(Snapshot(10, fold), "ok", 9)
    assert ahead[0] is not fold and ahead[1] == 0 and "ahead of the committed offset" in ahead[2]
    orphan = choose_start(Snapshot(5, fold), "ok", None)
    assert orphan[0] is not fold and orphan[1] == 0 and "no committed offset" in orphan[2]
    alien = choose_start(Snapshot(5, {"not": "a fold"}), "ok", 9)
    assert alien[1] == 0 and "not a Fold" in alien[2]
    inline = choose_start(Snapshot(5, Fold()), "ok", 9)  # a fold that preempts by itself
    assert inline[0].preemption_mode == "plans" and inline[1] == 0
    assert "'inline'-mode fold" in inline[2]


# ---------------------------------------------------------------------- the service loop


class FakeProcessor:
    """A journal in memory; run_once 'commits' a batch (outputs + offset) at once."""

    def __init__(
        self,
        journal: list[ConsumerRecord[bytes, bytes]],
        *,
        committed: int | None,
        handle: Any,
        stop: asyncio.Event,
        max_batch: int = 3,
        partitions: Sequence[int] = (0,),
    ) -> None:
        self.journal = journal
        self.committed = committed
        self.handle = handle
        self.stop = stop
        self.max_batch = max_batch
        self.partitions = partitions
        self.calls: list[str] = []
        self.produced: list[OutRecord] = []
        self.replayed: list[int] = []
        self.position = 0

    async def start_producer(self) -> None:
        self.calls.append("start_producer")

    async def start_consumer(self) -> None:
        self.calls.append("start_consumer")
        self.position = self.committed or 0

    async def committed_offsets(self) -> dict[int, int | None]:
        self.calls.append("committed_offsets")
        return {p: self.committed for p in self.partitions}

    async def replay(self, *, partition: int, start: int, end: int, apply: Replayer) -> int:
        self.calls.append(f"replay {start}..{end}")
        batch = [r for r in self.journal if start <= r.offset < end]
        apply(batch)
        self.replayed += [r.offset for r in batch]
        return len(batch)

    async def run_once(self, timeout_ms: int = 500) -> int:
        batch = [r for r in self.journal if r.offset >= self.position][: self.max_batch]
        if not batch:
            self.stop.set()  # the journal is drained: end the test's run
            return 0
        out = self.handle(batch)
        self.produced += out  # the transaction: outputs and offset together
        self.position = self.committed = batch[-1].offset + 1
        return len(batch)

    async def lag(self, partition: int) -> int | None:
        return len(self.journal) - self.position


class FakeStore:
    def __init__(self, snapshot: Snapshot | None = None, *, fail: bool = False) -> None:
        self.blob = None if snapshot is None else (snapshot.offset, pickle.dumps(snapshot.state))
        self.saved: list[tuple[int, int | None]] = []  # (snapshot offset, committed then)
        self.fail = fail
        self.proc: FakeProcessor | None = None

    async def load(self) -> tuple[Snapshot | None, str]:
        if self.blob is None:
            return None, "no snapshot"
        return Snapshot(self.blob[0], pickle.loads(self.blob[1])), "ok"

    async def save(self, snapshot: Snapshot) -> int:
        if self.fail:
            raise RedisConnectionError("redis is down")
        assert self.proc is not None
        self.saved.append((snapshot.offset, self.proc.committed))
        self.blob = (snapshot.offset, pickle.dumps(snapshot.state))
        return len(self.blob[1])


def _service(every: int = 4) -> Service:
    cfg = load_config({**ENV, "KUOTA_SNAPSHOT_EVERY": str(every)})
    return Service(cfg, AdmissionMetrics())


async def _serve(
    journal_recs: list[ConsumerRecord[bytes, bytes]],
    *,
    committed: int | None,
    store: FakeStore,
    every: int = 4,
) -> tuple[FakeProcessor, JournalFolder]:
    stop = asyncio.Event()
    folder = JournalFolder(topics=TOPICS)
    proc = FakeProcessor(journal_recs, committed=committed, handle=folder.handle, stop=stop)
    store.proc = proc
    await _service(every).serve(proc, store, folder, stop)  # type: ignore[arg-type]
    return proc, folder


def decisions(out: list[OutRecord]) -> list[Decision]:
    return [parse_decision(o.value) for o in out if o.topic == TOPICS.decisions]


async def test_first_start_decides_everything_and_snapshots_after_each_commit() -> None:
    evs = journal()
    store = FakeStore()
    proc, folder = await _serve(records(evs), committed=None, store=store)
    assert proc.calls[:4] == [
        "start_producer",
        "committed_offsets",
        "replay 0..0",
        "start_consumer",
    ]
    assert decisions(proc.produced) == oracle(list(enumerate(evs)))
    assert store.saved, "snapshots were saved"
    for offset, committed in store.saved:
        assert offset == committed, "a snapshot is saved after its transaction, never ahead"
    assert store.saved[-1][0] == len(evs), "a final snapshot at shutdown"
    assert folder.next_offset == len(evs)


@pytest.mark.parametrize(("snap_at", "committed"), [(0, 0), (2, 5), (5, 5), (3, 9)])
async def test_restart_replays_silently_to_the_committed_offset_then_goes_live(
    snap_at: int, committed: int
) -> None:
    evs = journal()
    recs = records(evs)
    before = Fold(preemption="plans")
    for i, e in enumerate(evs[:snap_at]):
        before.apply(e, offset=i)
    store = FakeStore(Snapshot(snap_at, before))
    proc, _ = await _serve(recs, committed=committed, store=store)

    assert f"replay {snap_at}..{committed}" in proc.calls
    assert proc.calls.index("start_consumer") > proc.calls.index(f"replay {snap_at}..{committed}")
    assert proc.replayed == list(range(snap_at, committed)), "exactly the uncovered, committed part"
    want = [d for d in oracle(list(enumerate(evs))) if (d.cause_offset or 0) >= committed]
    assert decisions(proc.produced) == want, "only the uncommitted part is produced"


async def test_a_snapshot_ahead_of_the_committed_offset_is_not_trusted() -> None:
    evs = journal()
    ahead = Fold(preemption="plans")
    for i, e in enumerate(evs):
        ahead.apply(e, offset=i)
    proc, _ = await _serve(records(evs), committed=4, store=FakeStore(Snapshot(len(evs), ahead)))
    assert "replay 0..4" in proc.calls
    want = [d for d in oracle(list(enumerate(evs))) if (d.cause_offset or 0) >= 4]
    assert decisions(proc.produced) == want


async def test_a_failing_snapshot_store_does_not_stop_admission(
    caplog: pytest.LogCaptureFixture,
) -> None:
    evs = journal()
    proc, _ = await _serve(records(evs), committed=None, store=FakeStore(fail=True))
    assert decisions(proc.produced) == oracle(list(enumerate(evs)))
    assert "not saved: redis is down" in caplog.text


async def test_more_than_one_journal_partition_is_refused() -> None:
    stop = asyncio.Event()
    folder = JournalFolder(topics=TOPICS)
    proc = FakeProcessor([], committed=None, handle=folder.handle, stop=stop, partitions=(0, 1))
    with pytest.raises(FatalError, match="exactly one partition"):
        await _service().serve(proc, FakeStore(), folder, stop)  # type: ignore[arg-type]


async def test_garbage_on_replay_is_skipped_and_not_dead_lettered_again() -> None:
    evs = journal()
    recs = records(evs)
    recs.insert(1, rec(1, b"garbage"))
    recs = [rec(i, r.value) for i, r in enumerate(recs)]
    proc, _ = await _serve(recs, committed=3, store=FakeStore())
    assert not [o for o in proc.produced if o.topic == TOPICS.deadletter]
    full = JournalFolder(topics=TOPICS).handle(recs)
    assert [o for o in full if o.topic == TOPICS.deadletter], "live, it was dead-lettered"


# ---------------------------------------------------------------------- metrics


def _job_event(name: str, created: str, at: float) -> ObjectUpserted:
    evs = journal()
    job = dict(evs[3].object)
    job["metadata"] = {**job["metadata"], "name": name, "creationTimestamp": created}
    return ObjectUpserted(id=f"Job/ns/{name}@1", at=at, object=job)


def test_metrics_count_live_decisions_only_and_measure_the_wait() -> None:
    m = AdmissionMetrics()
    ev = _job_event("w", "2026-01-01T00:00:00Z", 1_767_225_600.0)
    m.folded(ev, 0.001, live=True)
    admitted = Decision(
        id="x",
        cause="c",
        at=1_767_225_600.0 + 12,
        type="Admitted",
        workload="ns/w",
        cluster_queue="cq",
    )
    m.decided(admitted, live=True)
    s = m.registry.get_sample_value
    assert s("kuota_admitted_workloads_total", {"cluster_queue": "cq"}) == 1
    assert s("kuota_admission_wait_time_seconds_sum", {"cluster_queue": "cq"}) == 12
    m.decided(admitted.model_copy(update={"workload": "ns/other"}), live=False)
    assert s("kuota_admitted_workloads_total", {"cluster_queue": "cq"}) == 1, "replay not counted"
    preempted = Decision(
        id="y",
        cause="c",
        at=2.0,
        type="Preempted",
        workload="ns/w",
        cluster_queue="cq",
        reason="InClusterQueue",
        preemptor="ns/hi",
    )
    m.decided(
        Decision(
            id="z", cause="c", at=1.0, type="Inadmissible", workload="ns/hi", cluster_queue="cq-hi"
        ),
        live=False,
    )
    m.decided(preempted, live=True)
    assert s("kuota_evicted_workloads_total", {"cluster_queue": "cq", "reason": "Preempted"}) == 1
    assert (
        s(
            "kuota_preempted_workloads_total",
            {"preempting_cluster_queue": "cq-hi", "reason": "InClusterQueue"},
        )
        == 1
    )


def test_gauges_follow_the_summary_and_drop_vanished_queues() -> None:
    evs = journal()
    fold = Fold()
    for i, e in enumerate(evs[:6]):
        fold.apply(e, offset=i)
    m = AdmissionMetrics()
    m.refresh(fold, next_offset=6, lag=4)
    s = m.registry.get_sample_value
    usage = {"cluster_queue": "cq", "flavor": "f", "resource": "nvidia.com/gpu"}
    assert s("kuota_cluster_queue_resource_usage", usage) == 2.0
    assert s("kuota_pending_workloads", {"cluster_queue": "cq", "status": "pending"}) == 1
    assert s("kuota_consumer_lag") == 4
    m.refresh(Fold(), next_offset=6, lag=0)
    assert s("kuota_cluster_queue_resource_usage", usage) is None
    assert s("kuota_consumer_lag") == 0
