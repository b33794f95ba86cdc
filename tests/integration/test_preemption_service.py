"""kuota-preemption (the shell) as a process on the real Kafka.

It folds the journal, serves /metrics, says whether the core's preemption
search is available, and — with a stand-in ``plan_preemptions`` injected
through ``sitecustomize`` — writes the plans it returns to the journal as
``PreemptionPlan`` events with the deterministic id ``plan/<preemptor>/<based_on>``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from stack_helpers import delete_pipeline_topics

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import Topics, ensure_topics, shard_key
from kuota.events.schema import JournalEvent, ObjectUpserted, PreemptionPlan, Tick, parse_event

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin" / "kuota-preemption"
GPU = "nvidia.com/gpu"

STAND_IN = """

def plan_preemptions(fold):
    # Stand-in for the core's search: one plan while team-a/big waits.
    if fold.workload_state("team-a/big") in ("Pending", "Inadmissible"):
        return [{"preemptor": "team-a/big", "victims": ["team-a/small"],
                 "reasons": {"team-a/small": "InClusterQueue"}}]
    return []

# Replace only the search function: the fold itself imports the real module.
import kuota.core.preemption as mod
mod.plan_preemptions = plan_preemptions
"""


def _core_has_search() -> bool:
    if importlib.util.find_spec("kuota.core.preemption") is None:
        return False
    module = importlib.import_module("kuota.core.preemption")
    return callable(getattr(module, "plan_preemptions", None))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _obj(kind: str, name: str, ns: str = "", **rest: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": "1"}
    if ns:
        meta["namespace"] = ns
    api = "batch/v1" if kind == "Job" else "kueue.x-k8s.io/v1beta2"
    return {"apiVersion": api, "kind": kind, "metadata": meta, **rest}


def _job(name: str, gpus: int, created: float) -> dict[str, Any]:
    job = _obj(
        "Job",
        name,
        "team-a",
        spec={
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
    )
    job["metadata"].update(
        uid=f"uid-{name}",
        labels={"kueue.x-k8s.io/queue-name": "lq"},
        annotations={"kuota.dev/created-at": str(created)},
    )
    return job


def journal() -> list[JournalEvent]:
    objs = [
        _obj("ResourceFlavor", "gpu-a", spec={}),
        _obj(
            "ClusterQueue",
            "cq",
            spec={
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {"name": "gpu-a", "resources": [{"name": GPU, "nominalQuota": 4}]}
                        ],
                    }
                ],
            },
        ),
        _obj("LocalQueue", "lq", "team-a", spec={"clusterQueue": "cq"}),
        _job("small", 3, 10.0),
        _job("big", 4, 11.0),  # does not fit while small runs
    ]
    out: list[JournalEvent] = []
    for i, o in enumerate(objs):
        m = o["metadata"]
        rid = f"{o['kind']}/{m.get('namespace', '')}/{m['name']}@1"
        out.append(ObjectUpserted(id=rid, at=100.0 + i, object=o))
    out.append(Tick(id="tick@110.0", at=110.0))
    return out


class Shell:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.port = int(env["KUOTA_METRICS_PORT"])
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert BIN.exists(), f"{BIN} is missing: run .venv/bin/pip install -e '.[dev]'"
        with self.log.open("ab") as f:
            self.proc = subprocess.Popen([str(BIN)], env=self.env, stdout=f, stderr=f)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    async def wait_metric(self, name: str, at_least: float, timeout: float = 30.0) -> float:
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, (
                f"kuota-preemption exited ({self.proc and self.proc.returncode}):\n{self.text()}"
            )
            try:
                m = re.search(rf"^{name} (\S+)$", self.metrics(), re.M)
                value = float(m.group(1)) if m else None
            except OSError:
                value = None
            if value is not None and value >= at_least:
                return value
            await asyncio.sleep(0.1)
        raise AssertionError(f"{name} = {value}, not >= {at_least} in {timeout}s:\n{self.text()}")

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"no exit 30 s after SIGTERM:\n{self.text()}") from None


async def _produce(settings: KafkaSettings, topics: Topics, events: list[JournalEvent]) -> None:
    producer = AIOKafkaProducer(**settings.client_kwargs())
    await producer.start()
    try:
        for ev in events:
            await producer.send_and_wait(
                topics.journal, ev.model_dump_json().encode(), key=shard_key(ev.id)
            )
        await producer.send_and_wait(topics.journal, b"not json", key=b"kuota")
    finally:
        await producer.stop()


async def _journal(settings: KafkaSettings, topics: Topics, expect: int) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topics.journal,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **settings.client_kwargs(),
    )
    await consumer.start()
    out: list[Any] = []
    try:
        deadline = time.monotonic() + 30
        while len(out) < expect and time.monotonic() < deadline:
            for recs in (await consumer.getmany(timeout_ms=300)).values():
                out.extend(recs)
        for recs in (await consumer.getmany(timeout_ms=1500)).values():
            out.extend(recs)
    finally:
        await consumer.stop()
    return out


@pytest.fixture
async def setup(
    kafka_bootstrap: str, tmp_path: Path
) -> AsyncIterator[tuple[dict[str, str], KafkaSettings, Topics]]:
    prefix = f"test-{uuid.uuid4().hex[:10]}."
    env = dict(os.environ)
    env.update(
        KUOTA_KAFKA_BOOTSTRAP=kafka_bootstrap,
        KUOTA_TOPIC_PREFIX=prefix,
        KUOTA_METRICS_PORT=str(_free_port()),
    )
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    try:
        yield env, settings, topics
    finally:
        await delete_pipeline_topics(settings, topics)


async def test_shell_folds_serves_metrics_and_reports_the_search(
    setup: tuple[dict[str, str], KafkaSettings, Topics], tmp_path: Path
) -> None:
    env, settings, topics = setup
    events = journal()
    await _produce(settings, topics, events)
    shell = Shell(env, tmp_path / "preemption.log")
    shell.start()
    try:
        await shell.wait_metric("kuota_journal_position", len(events) + 1)
        metrics = shell.metrics()
        assert "kuota_consumer_lag 0.0" in metrics
        assert "kuota_skipped_records_total 1.0" in metrics, "the garbage record is skipped"
        assert 'kuota_journal_events_total{type="ObjectUpserted"} 5.0' in metrics
        if _core_has_search():
            assert "kuota_preemption_search_available 1.0" in metrics
            assert "preemption search: kuota.core.preemption.plan_preemptions" in shell.text()
        else:
            assert "kuota_preemption_search_available 0.0" in metrics
            assert "preemption search not available in core yet" in shell.text()
            assert "kuota_preemption_plans_total 0.0" in metrics
    finally:
        rc = shell.terminate()
    assert rc == 0, shell.text()
    assert "Traceback" not in shell.text()


async def test_plans_from_the_core_are_written_to_the_journal(
    setup: tuple[dict[str, str], KafkaSettings, Topics], tmp_path: Path
) -> None:
    env, settings, topics = setup
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STAND_IN)
    env = {**env, "PYTHONPATH": f"{site}{os.pathsep}{env.get('PYTHONPATH', '')}"}
    events = journal()
    await _produce(settings, topics, events)
    shell = Shell(env, tmp_path / "preemption.log")
    shell.start()
    try:
        await shell.wait_metric("kuota_preemption_plans_total", 1)
    finally:
        assert shell.terminate() == 0, shell.text()

    records = await _journal(settings, topics, expect=len(events) + 2)
    plans = [
        parse_event(r.value) for r in records[len(events) + 1 :] if r.value and b"Plan" in r.value
    ]
    assert plans, f"no PreemptionPlan on the journal:\n{shell.text()}"
    ids = {e.id for e in events}
    for plan in plans:
        assert isinstance(plan, PreemptionPlan)
        assert plan.preemptor == "team-a/big" and plan.victims == ["team-a/small"]
        assert plan.based_on in ids, "based on a journal event it folded"
        assert plan.id == f"plan/team-a/big/{plan.based_on}"
    # Its own plans coming back are not a reason to search again: one batch,
    # one plan, then quiet.
    assert len(plans) == len({p.based_on for p in plans}), "one plan per folded state"
