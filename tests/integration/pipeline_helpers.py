"""The real admission and preemption services as processes on the local Kafka
and Redis, for one test: its own topic prefix (so its own topics, consumer
groups, transactional ids and Redis snapshot), its own metrics ports, its own
log files; a reader that keeps every committed decision; a journal writer.
Nothing of the core is replaced: the services run as installed
(``.venv/bin/kuota-admission``, ``.venv/bin/kuota-preemption``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from builders.driver import is_stop
from stack_helpers import delete_pipeline_topics

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import Topics, ensure_topics, shard_key
from kuota.events.schema import (
    Decision,
    JournalEvent,
    PreemptionPlan,
    WorkloadStopped,
    parse_decision,
    parse_event,
)

REPO = Path(__file__).resolve().parents[2]
WAIT = 90.0  # seconds a wait may take before the test fails (a bound, not a speed check)


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free port on 127.0.0.1 not handed out before in this process: the
    kernel may give a just-closed port again, and two services of one test
    would then collide at start."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def pipeline_env(
    kafka_bootstrap: str, redis_url: str, **settings: str
) -> tuple[str, dict[str, str]]:
    """A topic prefix of its own and the services' environment on it (this
    process's, the stack's addresses, ``settings``)."""
    prefix = f"test-{uuid.uuid4().hex[:10]}."
    env = dict(os.environ)
    env.update(
        KUOTA_KAFKA_BOOTSTRAP=kafka_bootstrap,
        KUOTA_REDIS_URL=redis_url,
        KUOTA_TOPIC_PREFIX=prefix,
        **settings,
    )
    return prefix, env


async def produce_raw(settings: KafkaSettings, topic: str, value: bytes) -> int:
    """Write ``value`` as it is (garbage included); its offset."""
    producer = AIOKafkaProducer(**settings.client_kwargs())
    await producer.start()
    try:
        meta = await producer.send_and_wait(topic, value=value, key=b"kuota")
        return int(meta.offset)
    finally:
        await producer.stop()


async def read_topic(
    settings: KafkaSettings,
    topic: str,
    *,
    expect: int = 0,
    timeout: float = 0.0,
    settle: float = 1.0,
    isolation: str = "read_committed",
) -> list[Any]:
    """Every record of ``topic`` (committed ones unless told): wait up to
    ``timeout`` seconds for ``expect`` of them, then keep polling ``settle``
    seconds so that extras (duplicates) show up."""
    consumer = AIOKafkaConsumer(
        topic,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **settings.client_kwargs(),
    )
    await consumer.start()
    out: list[Any] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(out) < expect and loop.time() < deadline:
            for recs in (await consumer.getmany(timeout_ms=300)).values():
                out.extend(recs)
        until = loop.time() + settle
        while loop.time() < until:
            for recs in (await consumer.getmany(timeout_ms=300)).values():
                out.extend(recs)
    finally:
        await consumer.stop()
    return out


class Service:
    """One kuota service as a subprocess, its log in a file (``---- start`` per run)."""

    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.bin = REPO / ".venv" / "bin" / f"kuota-{name}"
        self.env = env
        self.log = log
        self.port = int(env["KUOTA_METRICS_PORT"])
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert self.bin.exists(), f"{self.bin} is missing: run .venv/bin/pip install -e '.[dev]'"
        assert not self.running, f"kuota-{self.name} is already running"
        with self.log.open("ab") as f:
            f.write(b"---- start\n")
            f.flush()
            self.proc = subprocess.Popen([str(self.bin)], env=self.env, stdout=f, stderr=f)
        self.starts += 1

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def last_run(self) -> str:
        return self.text().rsplit("---- start\n", 1)[-1]

    async def wait_log(
        self, pattern: str, timeout: float = WAIT, poll: float = 0.05
    ) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.last_run())
            if m:
                return m
            assert self.running, (
                f"kuota-{self.name} exited ({self.proc and self.proc.returncode}) before "
                f"logging {pattern!r}:\n{self.last_run()}"
            )
            await asyncio.sleep(poll)
        raise AssertionError(f"no log line {pattern!r} within {timeout}s:\n{self.last_run()}")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    def metric(self, name: str) -> float | None:
        m = re.search(rf"^{re.escape(name)} (\S+)$", self.metrics(), re.M)
        return float(m.group(1)) if m else None

    async def wait_metric(self, name: str, at_least: float, timeout: float = WAIT) -> float:
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            assert self.running, f"kuota-{self.name} exited:\n{self.last_run()}"
            with contextlib.suppress(OSError):
                value = self.metric(name)
            if value is not None and value >= at_least:
                return value
            await asyncio.sleep(0.1)
        raise AssertionError(f"{name} = {value}, not >= {at_least} in {timeout}s:\n{self.text()}")

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill9(self) -> int:
        """SIGKILL (also of a SIGSTOPped process); its exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 30.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"no exit {timeout}s after SIGTERM:\n{self.last_run()}") from None


class Decisions:
    """Every committed record of the decisions topic, read in the background."""

    def __init__(self, settings: KafkaSettings, topic: str) -> None:
        self.settings = settings
        self.topic = topic
        # called with each decision read (Pipeline.report_stops: the actuator's part)
        self.on_decision: Callable[[Decision], None] | None = None
        self.all: list[Decision] = []
        self.timestamps: list[int] = []  # Kafka record timestamps (ms), same order
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(
            self.topic,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **self.settings.client_kwargs(),
        )
        await consumer.start()

        async def loop() -> None:
            try:
                while True:
                    for recs in (await consumer.getmany(timeout_ms=200)).values():
                        for r in recs:
                            d = parse_decision(r.value)
                            self.all.append(d)
                            self.timestamps.append(r.timestamp)
                            if self.on_decision is not None:
                                self.on_decision(d)
            finally:
                await consumer.stop()

        self._task = asyncio.create_task(loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def until(
        self, found: Callable[[list[Decision]], Any], what: str, timeout: float = WAIT
    ) -> Any:
        """Wait until ``found(decisions)`` is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._task is not None and not self._task.done(), "the reader stopped"
            value = found(self.all)
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"no {what} within {timeout}s; decisions:\n{brief(self.all)}")

    async def admitted(self, key: str, timeout: float = WAIT) -> Decision:
        d: Decision = await self.until(
            lambda ds: next((d for d in ds if d.type == "Admitted" and d.workload == key), None),
            f"Admitted {key}",
            timeout,
        )
        return d

    async def settle(self, seconds: float = 2.0) -> None:
        """Let later (duplicate) decisions show up before counting."""
        await asyncio.sleep(seconds)


def brief(ds: list[Decision]) -> str:
    return "\n".join(
        f"  {d.type} {d.workload or d.object} reason={d.reason} victims={d.victims} "
        f"preemptor={d.preemptor} cause={d.cause}"
        for d in ds
    )


@dataclass
class Pipeline:
    settings: KafkaSettings
    topics: Topics
    admission: Service
    preemption: Service
    decisions: Decisions
    snapshot_key: str
    offsets: dict[str, int] = field(default_factory=dict)  # journal event id -> offset

    async def produce(self, events: list[JournalEvent]) -> None:
        producer = AIOKafkaProducer(**self.settings.client_kwargs())
        await producer.start()
        try:
            for ev in events:
                meta = await producer.send_and_wait(
                    self.topics.journal,
                    value=ev.model_dump_json().encode(),
                    key=shard_key(ev.id),
                    headers=[("kuota-type", ev.type.encode())],
                )
                self.offsets[ev.id] = meta.offset
        finally:
            await producer.stop()

    async def produce_raw(self, value: bytes) -> int:
        return await produce_raw(self.settings, self.topics.journal, value)

    def report_stops(self) -> None:
        """Play the actuator's part that these tests have no cluster for: answer each
        stop decision (``builders.driver.is_stop``) with its ``WorkloadStopped`` (the
        Job's pods gone), so a stopped workload's quota is released as in a real run."""
        pending: set[asyncio.Task[None]] = set()

        def on_decision(d: Decision) -> None:
            if not is_stop(d) or d.workload is None:
                return
            report = WorkloadStopped(
                id=f"workloadstopped/{d.id}",
                at=d.at or 0.0,
                workload=d.workload,
                uid=d.uid or "",
                decision_id=d.id,
            )
            task = asyncio.ensure_future(self.produce([report]))
            pending.add(task)
            task.add_done_callback(pending.discard)

        self.decisions.on_decision = on_decision

    async def read(self, topic: str, *, settle: float = 1.0) -> list[Any]:
        """Every committed record of ``topic`` so far."""
        return await read_topic(self.settings, topic, settle=settle)

    async def plans(self) -> list[PreemptionPlan]:
        """The PreemptionPlan events on the journal, in order."""
        out: list[PreemptionPlan] = []
        for r in await self.read(self.topics.journal):
            if dict(r.headers).get("kuota-type") == b"PreemptionPlan":
                ev = parse_event(r.value)
                assert isinstance(ev, PreemptionPlan)
                out.append(ev)
        return out


@contextlib.asynccontextmanager
async def pipeline(kafka_bootstrap: str, redis_url: str, logs: Path) -> AsyncIterator[Pipeline]:
    """A pipeline of its own (services not started); everything removed afterwards."""
    prefix, env = pipeline_env(
        kafka_bootstrap, redis_url, KUOTA_SNAPSHOT_EVERY="20", KUOTA_SNAPSHOT_SECONDS="5"
    )
    settings = KafkaSettings.from_env(env)
    topics = await ensure_topics(settings)
    instance = prefix.rstrip(".")
    pipe = Pipeline(
        settings,
        topics,
        Service("admission", {**env, "KUOTA_METRICS_PORT": str(free_port())}, logs / "adm.log"),
        Service("preemption", {**env, "KUOTA_METRICS_PORT": str(free_port())}, logs / "pre.log"),
        Decisions(settings, topics.decisions),
        f"kuota:snapshot:{instance}-admission-0",
    )
    await pipe.decisions.start()
    try:
        yield pipe
    finally:
        await pipe.decisions.stop()
        for svc in (pipe.admission, pipe.preemption):
            if svc.proc is not None and svc.proc.poll() is None:
                svc.proc.kill()
                svc.proc.wait()
            if svc.log.exists():  # shown by pytest when the test failed
                print(f"==== kuota-{svc.name}\n{svc.text()[-6000:]}")
        r = aioredis.from_url(redis_url)
        try:
            await r.delete(pipe.snapshot_key)
        finally:
            await r.aclose()
        await delete_pipeline_topics(settings, topics)
