"""Ingest's Job watch leaves out unlabelled Jobs of the system namespaces (never
kuota's: not journaled, not remembered), and journals a labelled one there, its
label removal too (``kuota_ingest.sources``)."""

from __future__ import annotations

from typing import Any

from builders.kafka import FakeProducer
from test_ingest_sources import FakeRedis

from kuota_ingest.journal import JournalWriter
from kuota_ingest.sources import Clock, Sources

QUEUE = "kueue.x-k8s.io/queue-name"


def _sources() -> Sources:
    producer = FakeProducer()
    writer = JournalWriter(producer, topic="j", redis=FakeRedis(producer.log), seen_key="seen")  # type: ignore[arg-type]
    return Sources(None, writer, memory={}, clock=Clock())  # type: ignore[arg-type]


def _job(name: str, namespace: str, labels: dict[str, str], rv: str = "1") -> dict[str, Any]:
    md = {"name": name, "namespace": namespace, "uid": f"u-{name}", "labels": labels}
    return {"metadata": {**md, "resourceVersion": rv}, "spec": {"template": {}}}


async def test_unlabelled_system_jobs_are_not_journaled() -> None:
    sources = _sources()
    await sources.observe("Job", "UPSERT", _job("s", "kube-system", {}))
    assert sources.memory == {}, "never kuota's: not journaled, not remembered"
    await sources.observe("Job", "UPSERT", _job("j", "team-a", {}))
    await sources.observe("Job", "UPSERT", _job("k", "team-a", {QUEUE: "lq"}))
    assert set(sources.memory) == {"Job/team-a/j", "Job/team-a/k"}
    # a labelled Job in kube-system is journaled as before, and its label removal too
    await sources.observe("Job", "UPSERT", _job("s", "kube-system", {QUEUE: "q"}))
    assert "Job/kube-system/s" in sources.memory
    await sources.observe("Job", "UPSERT", _job("s", "kube-system", {}, rv="2"))
    assert sources.memory["Job/kube-system/s"].rv == "2"
