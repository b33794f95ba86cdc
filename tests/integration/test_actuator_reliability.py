"""The actuator when the apiserver goes away, and across kill -9 (issue #8), on the real stack.

``kuota-actuator`` runs as a subprocess whose kubeconfig points at a TCP proxy
that this test starts in front of the stack's kube-apiserver and can cut:

- **unreachable, then back**: with the proxy cut for 35 s (longer than the
  ~30 s after which the old actuator gave up), an Admitted decision neither
  fails (no ``ActuationFailed`` on the journal) nor is committed; once the
  proxy is back the Job is unsuspended, once, with its flavor injected;
- **kill -9 without double actuation**: a Job admitted and then preempted, the
  actuator killed with SIGKILL and its consumer group rewound to the start of
  the decision topic; the restarted actuator re-reads the Admitted decision
  and must NOT unsuspend the stopped Job again (the decision-order annotation
  is the guard); a burst of admissions cut by another SIGKILL converges, each
  Job unsuspended exactly once (counted from a watch of the namespace).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from kubernetes_asyncio import client
from test_actuator_service import (
    ACTUATOR,
    RUN_LABEL,
    Producer,
    Stack,
    admitted_decision,
    api,  # noqa: F401 - the fixture
    committed,
    end_offset,
    eventually,
    free_port,
    job_manifest,
    journal_events,
    namespace,  # noqa: F401 - the fixture
    sample,
    scrape,
)

from kuota.actuation.patch import ANN_DECISION_ID
from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.events.schema import ActuationFailed, Decision
from kuota.kube.watch import Resource, Watcher

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

REPO = Path(__file__).resolve().parents[2]
OUTAGE = 35.0  # longer than the ~30 s after which the actuator used to give up


class CuttableProxy:
    """A TCP proxy on 127.0.0.1 in front of ``target``; ``cut()`` drops the listener and
    every open connection, ``restore()`` listens again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        self.connections = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        self._conns.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._conns.discard(writer)
            self._conns.discard(up_writer)

    async def restore(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._conns):
            w.transport.abort()
        self._conns.clear()


def proxied_kubeconfig(kubeconfig: str, port: int, path: Path) -> Path:
    """The stack's kubeconfig with its server moved to the proxy (same TLS name: 127.0.0.1)."""
    cfg = yaml.safe_load(Path(kubeconfig).read_text())
    for c in cfg["clusters"]:
        ca = c["cluster"].get("certificate-authority")
        if ca and not Path(ca).is_absolute():
            c["cluster"]["certificate-authority"] = str(Path(kubeconfig).parent / ca)
        c["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(cfg))
    return path


class Actuator:
    """``kuota-actuator`` as a subprocess with its own topic prefix."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = int(env["KUOTA_METRICS_PORT"])

    def start(self) -> None:
        assert ACTUATOR.exists(), f"{ACTUATOR} missing: run .venv/bin/pip install -e '.[dev]'"
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [str(ACTUATOR)], env=self.env, stdout=out, stderr=subprocess.STDOUT
            )

    def alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            pytest.fail(f"kuota-actuator exited: {self.log.read_text()[-3000:]}")

    async def live(self, starts: int) -> None:
        async def probe() -> bool:
            self.alive()
            return self.log.read_text().count("live: consuming") >= starts

        await eventually(probe, "the actuator live", timeout=90)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def actuator_env(
    prefix: str, kafka_bootstrap: str, redis_url: str, kubeconfig: Path | str, run: str
) -> dict[str, str]:
    return {
        **os.environ,
        "KUOTA_TOPIC_PREFIX": prefix,
        "KUOTA_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "KUOTA_REDIS_URL": redis_url,
        "KUBECONFIG": str(kubeconfig),
        "KUOTA_METRICS_PORT": str(free_port()),
        "KUOTA_CLUSTERQUEUE_SELECTOR": f"{RUN_LABEL}={run}",
        "KUOTA_JOB_LABEL_SELECTOR": f"{RUN_LABEL}={run}",
        "KUOTA_ACTUATOR_MAX_BACKOFF": "2",
    }


def labelled(manifest: dict[str, Any], run: str, name: str) -> dict[str, Any]:
    manifest["metadata"]["name"] = name
    manifest["metadata"]["labels"][RUN_LABEL] = run
    return manifest


async def test_apiserver_unreachable_then_back(
    api: client.ApiClient,  # noqa: F811
    namespace: str,  # noqa: F811
    kafka_bootstrap: str,
    redis_url: str,
    kubeconfig: str,
    tmp_path: Path,
) -> None:
    batch = client.BatchV1Api(api)
    run = uuid.uuid4().hex[:8]
    prefix = f"test-{run}."
    settings = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=prefix)
    topics = await ensure_topics(settings)
    stack = Stack(api, run)
    await stack.create()
    created = await batch.create_namespaced_job(
        namespace, labelled(job_manifest("train"), run, "train")
    )
    workload = f"{namespace}/train"
    server = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    host, port = server.removeprefix("https://").rsplit(":", 1)
    proxy = CuttableProxy((host, int(port)))
    await proxy.restore()
    kcfg = proxied_kubeconfig(kubeconfig, proxy.port, tmp_path / "proxied.kubeconfig")
    env = actuator_env(prefix, kafka_bootstrap, redis_url, kcfg, run)
    svc = Actuator(env, REPO / ".stack" / "logs" / f"test-actuator-outage-{run}.log")
    producer = Producer(settings, topics.decisions)
    await producer.producer.start()
    group = f"{prefix.rstrip('.')}-actuator"
    try:
        svc.start()
        await svc.live(1)
        assert proxy.connections > 0, "the actuator does not talk through the proxy"

        await proxy.cut()
        cut_at = time.monotonic()
        decision = await producer.send(
            admitted_decision(run, stack, workload, created.metadata.uid, 1)
        )
        end = await end_offset(settings, topics.decisions)
        while time.monotonic() - cut_at < OUTAGE:
            svc.alive()
            await asyncio.sleep(1)
        job = await batch.read_namespaced_job("train", namespace)
        assert job.spec.suspend is True, "unsuspended while the apiserver was unreachable?"
        assert await committed(settings, group, topics.decisions) < end, (
            "the decision was committed before it was applied"
        )
        failures = [
            e
            for _, e in await journal_events(settings, topics.journal)
            if isinstance(e, ActuationFailed)
        ]
        assert failures == [], f"gave up during the outage: {failures}"
        text = scrape(svc.port)
        assert (sample(text, "kuota_actuator_apiserver_unreachable") or 0) == 1
        assert (sample(text, "kuota_actuation_retries_total", cause="transient") or 0) >= 5

        await proxy.restore()
        back_at = time.monotonic()

        async def unsuspended() -> Any:
            svc.alive()
            j = await batch.read_namespaced_job("train", namespace)
            return j if j.spec.suspend is False else None

        job = await eventually(unsuspended, "the Job unsuspended once the apiserver is back")
        recovered = time.monotonic() - back_at
        assert job.metadata.annotations[ANN_DECISION_ID] == decision.id
        assert job.spec.template.spec.node_selector == {"type": "kwok"}

        async def consumed() -> bool:
            svc.alive()
            return await committed(settings, group, topics.decisions) >= end

        await eventually(consumed, "the decision committed once applied")
        text = scrape(svc.port)
        assert sample(text, "kuota_actuator_apiserver_unreachable") == 0
        assert (
            sample(text, "kuota_actuator_decisions_total", type="Admitted", outcome="applied") == 1
        )
        print(f"\nreconciled {recovered:.1f}s after the apiserver came back")
        svc.stop()
        assert svc.proc is not None and svc.proc.returncode == 0, svc.log.read_text()[-3000:]
        assert "Traceback" not in svc.log.read_text()
    finally:
        svc.stop()
        await proxy.cut()
        await producer.producer.stop()
        await stack.delete()


async def rewind(settings: KafkaSettings, group: str, topic: str) -> None:
    """Commit offset 0 for ``group`` once its killed member has left (session timeout):
    everything is redelivered to the next member."""
    deadline = time.monotonic() + 60
    while True:
        c = AIOKafkaConsumer(group_id=group, enable_auto_commit=False, **settings.client_kwargs())
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.commit({tp: 0})
            return
        except KafkaError:
            if time.monotonic() > deadline:
                raise
        finally:
            await c.stop()
        await asyncio.sleep(1)


async def test_kill9_and_restart_never_actuates_twice(
    api: client.ApiClient,  # noqa: F811
    namespace: str,  # noqa: F811
    kafka_bootstrap: str,
    redis_url: str,
    kubeconfig: str,
) -> None:
    batch = client.BatchV1Api(api)
    run = uuid.uuid4().hex[:8]
    prefix = f"test-{run}."
    settings = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=prefix)
    topics = await ensure_topics(settings)
    stack = Stack(api, run)
    await stack.create()
    group = f"{prefix.rstrip('.')}-actuator"
    n_burst = 30
    uids: dict[str, str] = {}
    for name in ["victim", *(f"burst-{i:02d}" for i in range(n_burst))]:
        manifest = labelled(job_manifest(name), run, name)
        manifest["spec"]["parallelism"] = 0  # no pods: the stop needs no Job controller
        created = await batch.create_namespaced_job(namespace, manifest)
        uids[name] = created.metadata.uid

    # Every transition to running, per Job, as the apiserver reports it.
    starts: dict[str, int] = {}
    seen: dict[str, bool] = {}

    async def watch() -> None:
        w = Watcher(api, Resource("Job", f"/apis/batch/v1/namespaces/{namespace}/jobs"))
        async for change in w.changes():
            name = change.object["metadata"]["name"]
            running = (change.object.get("spec") or {}).get("suspend") is False
            if running and not seen.get(name, False):
                starts[name] = starts.get(name, 0) + 1
            seen[name] = running

    watcher = asyncio.create_task(watch())
    env = actuator_env(prefix, kafka_bootstrap, redis_url, kubeconfig, run)
    svc = Actuator(env, REPO / ".stack" / "logs" / f"test-actuator-kill9-{run}.log")
    producer = Producer(settings, topics.decisions)
    await producer.producer.start()
    try:
        svc.start()
        await svc.live(1)
        victim = f"{namespace}/victim"
        await producer.send(admitted_decision(run, stack, victim, uids["victim"], 1))

        async def job_state(name: str, running: bool) -> Any:
            svc.alive()
            j = await batch.read_namespaced_job(name, namespace)
            return j if (j.spec.suspend is False) == running else None

        await eventually(lambda: job_state("victim", True), "the victim admitted")
        preempted = Decision(
            id=f"pre-{run}",
            cause="test/preempt",
            cause_offset=2,
            at=time.time(),
            type="Preempted",
            workload=victim,
            uid=uids["victim"],
            cluster_queue=stack.cq,
            reason="InClusterQueue",
            preemptor=f"{namespace}/big",
        )
        await producer.send(preempted)

        async def stopped() -> Any:
            j = await job_state("victim", False)
            ann = (j.metadata.annotations or {}) if j is not None else {}
            return j if ann.get(ANN_DECISION_ID) == preempted.id else None

        await eventually(stopped, "the victim stopped by the Preempted decision")

        # A burst of admissions, cut by kill -9 part way through.
        for i in range(n_burst):
            name = f"burst-{i:02d}"
            await producer.send(
                admitted_decision(run, stack, f"{namespace}/{name}", uids[name], 10 + i)
            )

        async def some_started() -> bool:
            return sum(1 for k in starts if k.startswith("burst-")) >= 3

        await eventually(some_started, "the burst under way")
        svc.kill9()
        await rewind(settings, group, topics.decisions)  # everything is redelivered

        svc.start()
        await svc.live(2)

        async def all_started() -> bool:
            svc.alive()
            return sum(1 for k in starts if k.startswith("burst-")) >= n_burst

        await eventually(all_started, "every Job of the burst unsuspended after the restart")
        end = await end_offset(settings, topics.decisions)

        async def consumed() -> bool:
            svc.alive()
            return await committed(settings, group, topics.decisions) >= end

        await eventually(consumed, "every decision consumed again")
        await asyncio.sleep(1)  # a late double write would show in the watch by now
        victim_job = await batch.read_namespaced_job("victim", namespace)
        assert victim_job.spec.suspend is True, "the redelivered Admitted re-admitted the victim"
        assert victim_job.metadata.annotations[ANN_DECISION_ID] == preempted.id
        twice = {k: v for k, v in starts.items() if v != 1}
        assert twice == {}, f"unsuspended more than once: {twice}"
        assert len(starts) == n_burst + 1
        text = scrape(svc.port)
        # After the rewind the restarted actuator saw the victim's two decisions and at
        # least the burst's first admissions again: each a skip, none a write.
        skipped = sample(text, "kuota_actuator_decisions_total", type="Admitted", outcome="skipped")
        assert (skipped or 0) >= 4, text
        failures = [
            e
            for _, e in await journal_events(settings, topics.journal)
            if isinstance(e, ActuationFailed)
        ]
        assert failures == [], failures
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        svc.stop()
        await producer.producer.stop()
        await stack.delete()
