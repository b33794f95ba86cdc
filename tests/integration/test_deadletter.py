"""Poison records and bad configuration on the real Kafka, through the real services.

The journal (own topic prefix, so nothing is shared with other suites) gets
garbage bytes, a truncated JSON event and a valid JSON object of the wrong
schema between good events, while kuota-admission and kuota-preemption run as
processes. Asserted:

- the good workloads are admitted, in journal order, with the decisions the
  in-process fold gives for the good events alone;
- ``<prefix>deadletter`` holds, for each consumer (header ``kuota-consumer``),
  the three records' EXACT original bytes, in order, each with a reason and
  its source ``<journal>/0/<offset>``;
- no service crashed (both still serve, both exit 0 on SIGTERM);
- no other workload is delayed: the good Job produced right after the poison
  is decided about as fast as one produced alone (same transaction batch, no
  timeout in between — a timeout would cost seconds: poll 0.5 s, Kafka
  transaction 60 s).

Another test runs the real actuator on ``<prefix>decisions`` with the same
poison: dead-lettered with consumer ``<instance>-actuator``, and its group
commits past it. A third sends a cohort cycle and a malformed ClusterQueue through the
real admission service: Rejected decisions naming them, the cycle's workload
Inadmissible (CohortCycle), the rest admitted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from crd_helpers import apply_crds
from kubernetes_asyncio import client, config

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import Topics, ensure_topics
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, JournalEvent, ObjectUpserted, parse_decision

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
GPU = "nvidia.com/gpu"
NS = "team-dl"
T0 = 1_767_225_600.0

GARBAGE = b"\x00\xffnot json at all {"
TRUNCATED = b'{"schema_version": 1, "type": "ObjectUpserted", "id": "cut", "at": 1767225'
WRONG_SCHEMA = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}'


# ---------------------------------------------------------------------- manifests


def _kueue(kind: str, name: str, spec: dict[str, Any], ns: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, "spec": spec}


def _cq(name: str, gpus: Any, cohort: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [{"name": "gpu-a", "resources": [{"name": GPU, "nominalQuota": gpus}]}],
            }
        ],
    }
    if cohort:
        spec["cohort"] = cohort
    return _kueue("ClusterQueue", name, spec)


def _job(name: str, queue: str = "lq", gpus: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": {"kueue.x-k8s.io/queue-name": queue},
            "annotations": {"kuota.dev/created-at": "0"},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {GPU: str(gpus)}}}
                    ],
                }
            },
        },
    }


# ---------------------------------------------------------------------- the rig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name, self.env, self.log = name, env, log
        self.port = int(env["KUOTA_METRICS_PORT"])
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = BIN / f"kuota-{self.name}"
        assert exe.exists(), f"{exe} is missing: run .venv/bin/pip install -e '.[dev]'"
        with self.log.open("ab") as f:
            self.proc = subprocess.Popen([str(exe)], env=self.env, stdout=f, stderr=f)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"kuota-{self.name}: no exit 30 s after SIGTERM") from None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Rig:
    settings: KafkaSettings
    topics: Topics
    admission: Service
    preemption: Service
    producer: AIOKafkaProducer
    written: list[tuple[int, JournalEvent]] = field(default_factory=list)
    t: float = T0

    async def event(self, obj: dict[str, Any]) -> int:
        self.t += 1.0
        meta = obj["metadata"]
        ev = ObjectUpserted(
            id=f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}", at=self.t, object=obj
        )
        meta_ = await self.producer.send_and_wait(
            self.topics.journal, ev.model_dump_json().encode(), key=b"kuota"
        )
        self.written.append((meta_.offset, ev))
        return int(meta_.offset)

    async def raw(self, value: bytes) -> int:
        meta = await self.producer.send_and_wait(self.topics.journal, value, key=b"kuota")
        return int(meta.offset)


@pytest.fixture
async def rig(kafka_bootstrap: str, redis_url: str, tmp_path: Path) -> AsyncIterator[Rig]:
    prefix = f"test-dl-{uuid.uuid4().hex[:8]}."
    env = dict(os.environ)
    env.update(
        KUOTA_KAFKA_BOOTSTRAP=kafka_bootstrap,
        KUOTA_REDIS_URL=redis_url,
        KUOTA_TOPIC_PREFIX=prefix,
        KUOTA_MAX_BATCH="50",
    )
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    producer = AIOKafkaProducer(**settings.client_kwargs())
    await producer.start()
    rig = Rig(
        settings,
        topics,
        Service(
            "admission", env | {"KUOTA_METRICS_PORT": str(_free_port())}, tmp_path / "admission.log"
        ),
        Service(
            "preemption",
            env | {"KUOTA_METRICS_PORT": str(_free_port())},
            tmp_path / "preemption.log",
        ),
        producer,
    )
    try:
        yield rig
    finally:
        for svc in (rig.admission, rig.preemption):
            if svc.alive():
                assert svc.proc is not None
                svc.proc.kill()
                svc.proc.wait()
            print(f"---- kuota-{svc.name} log (tail)\n{svc.text()[-4000:]}")
        await producer.stop()
        redis = aioredis.from_url(redis_url)
        await redis.delete(f"kuota:snapshot:{prefix.rstrip('.')}-admission-0")
        await redis.aclose()
        admin = AIOKafkaAdminClient(**settings.client_kwargs())
        await admin.start()
        try:
            await admin.delete_topics([topics.journal, topics.decisions, topics.deadletter])
        finally:
            await admin.close()


class Reader:
    """A read_committed consumer of one topic from the beginning, kept open."""

    def __init__(self, settings: KafkaSettings, topic: str) -> None:
        self.consumer = AIOKafkaConsumer(
            topic,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **settings.client_kwargs(),
        )
        self.records: list[Any] = []

    async def __aenter__(self) -> Reader:
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def until(self, done: Any, *, timeout: float = 60.0, what: str = "") -> float:
        """Poll until ``done(records)``; the seconds it took."""
        t0 = time.monotonic()
        while not done(self.records):
            assert time.monotonic() - t0 < timeout, (
                f"no {what} within {timeout}s: {len(self.records)} records"
            )
            for recs in (await self.consumer.getmany(timeout_ms=50)).values():
                self.records.extend(recs)
        return time.monotonic() - t0

    def decisions(self) -> list[Decision]:
        return [parse_decision(r.value) for r in self.records]


def _admitted(workload: str) -> Any:
    return lambda recs: any(
        d.type == "Admitted" and d.workload == workload
        for d in (parse_decision(r.value) for r in recs)
    )


# ---------------------------------------------------------------------- tests


async def test_poison_records_are_dead_lettered_and_nothing_waits(rig: Rig) -> None:
    await rig.event(_kueue("ResourceFlavor", "gpu-a", {}))
    await rig.event(_cq("cq", 8))
    await rig.event(_kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, NS))
    await rig.event(_job("j0"))
    rig.admission.start()
    rig.preemption.start()
    async with Reader(rig.settings, rig.topics.decisions) as decisions:
        await decisions.until(_admitted(f"{NS}/j0"), what="decision for j0 (service start)")

        # Baseline: a good Job alone, once the services are live.
        t0 = time.monotonic()
        await rig.event(_job("j1"))
        await decisions.until(_admitted(f"{NS}/j1"), what="decision for j1")
        alone = time.monotonic() - t0

        # Poison between good events; j3 comes right after the poison.
        poison: list[tuple[int, bytes]] = []
        t0 = time.monotonic()
        poison.append((await rig.raw(GARBAGE), GARBAGE))
        await rig.event(_job("j2"))
        poison.append((await rig.raw(TRUNCATED), TRUNCATED))
        poison.append((await rig.raw(WRONG_SCHEMA), WRONG_SCHEMA))
        await rig.event(_job("j3"))
        await decisions.until(_admitted(f"{NS}/j3"), what="decision for j3 after the poison")
        after_poison = time.monotonic() - t0
        print(
            f"decision latency: alone {alone:.2f} s, "
            f"right after three poison records {after_poison:.2f} s"
        )

        # In order, exactly what the fold gives for the good events alone.
        fold = Fold(preemption="plans")  # the admission service's mode
        want = [d for off, ev in rig.written for d in fold.apply(ev, offset=off)]
        got = decisions.decisions()
        assert [(d.type, d.workload, d.cause_offset) for d in got] == [
            (d.type, d.workload, d.cause_offset) for d in want
        ]
        assert [d.workload for d in got if d.type == "Admitted"] == [f"{NS}/j{i}" for i in range(4)]
    # Not held up by a timeout (seconds): decided about as fast as a Job alone.
    assert after_poison < max(5.0, 3 * alone + 1.0), (alone, after_poison)

    async with Reader(rig.settings, rig.topics.deadletter) as dead:
        await dead.until(
            lambda recs: len(recs) >= 6, what="6 dead letters (3 records x 2 consumers)"
        )
        await asyncio.sleep(1.0)
        for recs in (await dead.consumer.getmany(timeout_ms=500)).values():
            dead.records.extend(recs)
    by_consumer: dict[bytes, list[Any]] = {}
    for r in dead.records:
        by_consumer.setdefault(dict(r.headers)["kuota-consumer"], []).append(r)
    instance = rig.topics.journal.removesuffix(".journal").replace(".", "-")
    assert sorted(by_consumer) == [
        f"{instance}-admission".encode(),
        f"{instance}-preemption".encode(),
    ]
    for consumer, letters in by_consumer.items():
        assert [r.value for r in letters] == [v for _, v in poison], (
            f"{consumer!r}: the exact bytes"
        )
        assert [r.key for r in letters] == [b"kuota"] * 3
        for (offset, _), r in zip(poison, letters, strict=True):
            headers = dict(r.headers)
            assert headers["kuota-source"] == f"{rig.topics.journal}/0/{offset}".encode()
            assert headers["kuota-reason"], "a reason"
        reasons = [dict(r.headers)["kuota-reason"].decode() for r in letters]
        assert "not JSON" in reasons[0] and "not JSON" in reasons[1], reasons
        assert reasons[2].startswith("not a journal event"), reasons

    # Nobody crashed: both still serve and stop cleanly.
    assert rig.admission.alive() and rig.preemption.alive()
    assert "kuota_deadletter_records_total 3.0" in rig.admission.metrics()
    assert "kuota_skipped_records_total 3.0" in rig.preemption.metrics()
    assert rig.admission.terminate() == 0
    assert rig.preemption.terminate() == 0
    assert "Traceback" not in rig.admission.text() + rig.preemption.text()


async def test_bad_configuration_is_rejected_by_the_running_admission(rig: Rig) -> None:
    await rig.event(_kueue("ResourceFlavor", "gpu-a", {}))
    await rig.event(_kueue("Cohort", "a", {"parentName": "b"}))
    await rig.event(_cq("cq-cycle", 4, cohort="a"))
    await rig.event(_kueue("LocalQueue", "lq-cycle", {"clusterQueue": "cq-cycle"}, NS))
    await rig.event(_cq("cq", 4))
    await rig.event(_kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, NS))
    rig.admission.start()
    await rig.event(_kueue("Cohort", "b", {"parentName": "a"}))  # closes the cycle
    await rig.event(_cq("cq-huge", "99999999999Ei"))
    await rig.event(_job("in-cycle", queue="lq-cycle"))
    await rig.event(_job("fine"))
    async with Reader(rig.settings, rig.topics.decisions) as decisions:
        await decisions.until(_admitted(f"{NS}/fine"), what="decision for the good Job")
        got = [(d.type, d.object or d.workload, d.reason) for d in decisions.decisions()]
        messages = {d.object or d.workload: d.message or "" for d in decisions.decisions()}
    assert got == [
        # the quota in force of the two valid ClusterQueues journaled before it started
        ("QuotaChanged", "ClusterQueue cq-cycle", None),
        ("QuotaChanged", "ClusterQueue cq", None),
        ("Rejected", "Cohort b", "CohortCycle"),
        ("Rejected", "ClusterQueue cq-huge", "InvalidObject"),
        ("Inadmissible", f"{NS}/in-cycle", "CohortCycle"),
        ("Admitted", f"{NS}/fine", None),
    ]
    assert "(b -> a -> b)" in messages["Cohort b"]
    assert (
        "nominalQuota" in messages["ClusterQueue cq-huge"]
        and "absurdly large" in messages["ClusterQueue cq-huge"]
    )
    assert rig.admission.alive()
    assert rig.admission.terminate() == 0


async def test_the_actuator_dead_letters_poison_on_the_decision_topic(
    rig: Rig, kubeconfig: str
) -> None:
    """The third consumer: garbage on ``<prefix>decisions`` is dead-lettered by the
    real actuator with consumer ``<instance>-actuator``, and its group commits past
    it together with the good decision after it."""
    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        await apply_crds(api)  # the actuator lists ResourceFlavors before it goes live
    run = uuid.uuid4().hex[:8]
    actuator = Service(
        "actuator",
        rig.admission.env
        | {
            "KUBECONFIG": kubeconfig,
            "KUOTA_METRICS_PORT": str(_free_port()),
            "KUOTA_CLUSTERQUEUE_SELECTOR": f"kuota.dev/deadletter-run={run}",
            "KUOTA_JOB_LABEL_SELECTOR": f"kuota.dev/deadletter-run={run}",
        },
        rig.admission.log.with_name("actuator.log"),
    )
    actuator.start()
    try:
        good = Decision(
            id=f"dl-{run}",
            cause="test/dl",
            cause_offset=0,
            at=time.time(),
            type="Inadmissible",
            workload=f"{NS}/nobody",
            reason="InsufficientQuota",
            message="a decision that changes no Job",
        )
        offsets = []
        for value in (GARBAGE, TRUNCATED, WRONG_SCHEMA, good.model_dump_json().encode()):
            meta = await rig.producer.send_and_wait(rig.topics.decisions, value, key=b"k")
            offsets.append(int(meta.offset))
        async with Reader(rig.settings, rig.topics.deadletter) as dead:
            await dead.until(lambda recs: len(recs) >= 3, timeout=90, what="3 dead letters")
        instance = rig.topics.journal.removesuffix(".journal").replace(".", "-")
        assert [r.value for r in dead.records] == [GARBAGE, TRUNCATED, WRONG_SCHEMA]
        for offset, r in zip(offsets, dead.records, strict=False):
            headers = dict(r.headers)
            assert headers["kuota-consumer"] == f"{instance}-actuator".encode()
            assert headers["kuota-source"] == f"{rig.topics.decisions}/0/{offset}".encode()
            assert headers["kuota-reason"].startswith(b"not a decision")
        # The group commits past the poison and the good decision behind it.
        admin = AIOKafkaAdminClient(**rig.settings.client_kwargs())
        await admin.start()
        try:
            tp = TopicPartition(rig.topics.decisions, 0)
            deadline = time.monotonic() + 30
            committed = -1
            while committed < offsets[-1] + 1 and time.monotonic() < deadline:
                got = await admin.list_consumer_group_offsets(f"{instance}-actuator")
                committed = got[tp].offset if tp in got else -1
                await asyncio.sleep(0.2)
        finally:
            await admin.close()
        assert committed == offsets[-1] + 1
        assert actuator.alive()
        assert actuator.terminate() == 0
    finally:
        if actuator.alive():
            assert actuator.proc is not None
            actuator.proc.kill()
            actuator.proc.wait()
        print(f"---- kuota-actuator log (tail)\n{actuator.text()[-4000:]}")


async def test_a_poison_record_near_the_size_limit_does_not_stop_admission(rig: Rig) -> None:
    """Original bytes plus the headers would not fit in one Kafka record: the
    dead letter is cut (header ``kuota-truncated``) and admission goes on."""
    await rig.event(_kueue("ResourceFlavor", "gpu-a", {}))
    await rig.event(_cq("cq", 8))
    await rig.event(_kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, NS))
    big = b"\xff" * 1_048_400  # fills the producer's 1 MiB request: no room for headers
    offset = await rig.raw(big)
    await rig.event(_job("after-big"))
    rig.admission.start()
    async with Reader(rig.settings, rig.topics.decisions) as decisions:
        await decisions.until(_admitted(f"{NS}/after-big"), what="the Job after the big record")
    async with Reader(rig.settings, rig.topics.deadletter) as dead:
        await dead.until(lambda recs: len(recs) >= 1, what="the big record's dead letter")
    (letter,) = dead.records
    headers = dict(letter.headers)
    assert headers["kuota-source"] == f"{rig.topics.journal}/0/{offset}".encode()
    assert headers["kuota-truncated"] == str(len(big)).encode()
    assert letter.value == big[: len(letter.value)] and len(letter.value) >= 1_000_000
    assert rig.admission.alive() and rig.admission.terminate() == 0
