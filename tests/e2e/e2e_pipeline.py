"""The e2e run: one pipeline of the four real services, its recorders, its cleanup.

``run_fixture`` builds the module-scoped ``e2e_run`` fixture: it starts the
services with ``scripts/kuota-services``' Python API under a unique name
``e2e-<hex>`` (own topics, ports, webhook, Job and ClusterQueue selectors),
applies the run's hardware (``e2e_hardware.py``) and starts background tasks
that record the journal and decision topics from offset 0, every change of the
run's Jobs and every DRA allocation in the run's namespaces. ``Run.until``
waits on those recordings. Part of ``e2e_harness.py`` (which re-exports every name).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiokafka import AIOKafkaConsumer, TopicPartition
from e2e_hardware import NODES, PIPELINE_LABEL, configuration, hardware
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kuota.bus.settings import KafkaSettings
from kuota.events.schema import Decision, JournalEvent, ObjectUpserted, parse_decision, parse_event
from kuota.kube.watch import Resource, Watcher

REPO = Path(__file__).resolve().parents[2]
KUEUE = ("kueue.x-k8s.io", "v1beta2")
WAIT = 60.0  # any other wait


def load_launcher() -> ModuleType:
    """``scripts/kuota-services`` (no .py suffix) as a module."""
    if "kuota_services" in sys.modules:
        return sys.modules["kuota_services"]
    path = REPO / "scripts" / "kuota-services"
    loader = SourceFileLoader("kuota_services", str(path))
    spec = importlib.util.spec_from_loader("kuota_services", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kuota_services"] = module
    loader.exec_module(module)
    return module


# ====================================================================== recorders


@dataclass
class JobChange:
    at: float  # wall clock when the watch delivered it
    type: str  # UPSERT | DELETE
    obj: dict[str, Any]


@dataclass
class Run:
    id: str
    driver: str
    pipeline: Any  # kuota_services.Pipeline
    api: client.ApiClient
    env: dict[str, str]
    infra: list[dict[str, Any]]  # hardware + Configuration, for the simulator
    kafka: Any  # kuota.bus.settings.KafkaSettings of the run's topics
    journal: list[tuple[int, JournalEvent]] = field(default_factory=list)
    decisions: list[tuple[int, Decision]] = field(default_factory=list)
    job_changes: list[JobChange] = field(default_factory=list)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)  # ns/name -> allocated claim
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def nodes(self) -> list[str]:
        return [f"{self.id}-{n}" for n in range(NODES)]

    def check_tasks(self) -> None:
        for t in self.tasks:
            if t.done() and not t.cancelled() and t.exception() is not None:
                pytest.fail(f"recorder {t.get_name()} failed: {t.exception()!r}")

    async def until(
        self, pred: Callable[[], Any], what: str | Callable[[], str], timeout: float = WAIT
    ) -> Any:
        """Until ``pred()`` is truthy (re-checked whenever a recorder saw something)."""
        deadline = time.monotonic() + timeout
        while True:
            self.changed.clear()
            got = pred()
            if got:
                return got
            self.check_tasks()
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(
                    f"{what if isinstance(what, str) else what()}: not within {timeout:.0f}s"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))


async def _record_topic(
    run: Run, topic: str, parse: Callable[[bytes], Any], into: list[tuple[int, Any]]
) -> None:
    consumer = AIOKafkaConsumer(
        isolation_level="read_committed",
        enable_auto_commit=False,
        **run.kafka.client_kwargs(),
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        while True:
            batch = await consumer.getmany(tp, timeout_ms=200)
            for record in batch.get(tp, []):
                with contextlib.suppress(ValueError):
                    into.append((record.offset, parse(record.value or b"")))
            if batch:
                run.changed.set()
    finally:
        await consumer.stop()


async def _record_jobs(run: Run) -> None:
    watcher = Watcher(
        run.api, Resource("Job", "/apis/batch/v1/jobs", label_selector=f"{PIPELINE_LABEL}={run.id}")
    )
    async for change in watcher.changes():
        run.job_changes.append(JobChange(time.time(), change.type, change.object))
        run.changed.set()


async def _record_claims(run: Run) -> None:
    watcher = Watcher(run.api, Resource("ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims"))
    async for change in watcher.changes():
        md = change.object.get("metadata") or {}
        ns = md.get("namespace") or ""
        if not ns.startswith(f"{run.id}-") or change.type != "UPSERT":
            continue
        allocation = (change.object.get("status") or {}).get("allocation")
        if allocation:
            run.claims[f"{ns}/{md.get('name')}"] = change.object
            run.changed.set()


# ====================================================================== kube helpers


async def kubectl_apply(run: Run, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Server-side apply with the stack's kubectl; the stored objects (with versions)."""
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    proc = await asyncio.create_subprocess_exec(
        run.env["KUOTA_KUBECTL"],
        f"--kubeconfig={run.env['KUBECONFIG']}",
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kuota-e2e",
        "-o",
        "json",
        "-f",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(data.encode())
    assert proc.returncode == 0, f"kubectl apply failed: {err.decode().strip()}"
    doc = json.loads(out)
    items: list[dict[str, Any]] = doc.get("items", [doc]) if doc.get("kind") == "List" else [doc]
    return items


JOURNALED_KINDS = frozenset(
    {
        "Namespace",
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaimTemplate",
        "ResourceClaim",  # a scenario's direct claim (direct-claim.yaml)
        "DeviceTaintRule",  # device-taint-rule.yaml
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
    }
)


async def wait_journaled(run: Run, applied: list[dict[str, Any]]) -> None:
    """Until the journal holds each applied object at (at least) its stored version."""
    want = {
        (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): int(
            o["metadata"]["resourceVersion"]
        )
        for o in applied
        if o.get("kind") in JOURNALED_KINDS
    }

    def missing() -> list[tuple[str, str, str]]:
        seen: dict[tuple[str, str, str], int] = {}
        for _, e in run.journal:
            if isinstance(e, ObjectUpserted):
                md = e.object.get("metadata") or {}
                key = (str(e.object.get("kind")), md.get("namespace") or "", md.get("name") or "")
                if key in want:
                    with contextlib.suppress(ValueError, TypeError):
                        seen[key] = max(seen.get(key, 0), int(md.get("resourceVersion")))
        return [k for k, rv in want.items() if seen.get(k, -1) < rv]

    await run.until(lambda: not missing(), lambda: f"ingest journals {missing()[:3]}")


async def wait_nodes_ready(run: Run) -> None:
    """Until kwok has taken the run's nodes over (Ready), so pods can be scheduled."""
    core = client.CoreV1Api(run.api)
    deadline = time.monotonic() + WAIT
    while True:
        ready = []
        for name in run.nodes:
            with contextlib.suppress(ApiException):
                node = await core.read_node(name)
                conds = {c.type: c.status for c in node.status.conditions or []}
                if conds.get("Ready") == "True":
                    ready.append(name)
        if len(ready) == len(run.nodes):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"kwok nodes not Ready within {WAIT:.0f}s: ready {ready} of {run.nodes}")
        await asyncio.sleep(0.2)


# ====================================================================== the run fixture


def run_fixture(config_extra: dict[str, Any] | None = None) -> Any:
    """A module-scoped ``e2e_run`` fixture: one pipeline + hardware per test module;
    ``config_extra``: top-level sections added to the run's Kueue Configuration
    (``waitForPodsReady``, say)."""

    @pytest_asyncio.fixture(scope="module", loop_scope="module")
    async def e2e_run(kafka_bootstrap: str, redis_url: str, kubeconfig: str) -> AsyncIterator[Run]:
        launcher = load_launcher()
        run_id = f"e2e-{uuid.uuid4().hex[:8]}"
        driver = f"{run_id}.gpu.kuota.dev"
        env = {k: v for k, v in os.environ.items()}
        for key, value in launcher.stack_env().items():
            env.setdefault(key, value)
        env["KUBECONFIG"] = kubeconfig
        assert env.get("KUOTA_KUBECTL"), "KUOTA_KUBECTL unset: run `scripts/stack up`"
        tmp = Path(launcher.stack_dir()) / "run" / run_id
        tmp.mkdir(parents=True, exist_ok=True)
        config_file = tmp / "kueue-config.yaml"
        cfg = configuration(run_id, driver) | (config_extra or {})
        config_file.write_text(yaml.safe_dump(cfg))
        metrics_ports, webhook_port = launcher.free_ports()  # distinct ports
        pipeline = launcher.Pipeline(
            name=run_id,
            topic_prefix=f"{run_id}.",
            ports=metrics_ports,
            webhook_port=webhook_port,
            config_file=str(config_file),
            config_map=None,
            env={"KUBECONFIG": kubeconfig, "KUOTA_STATUS_INTERVAL": "0.5"},
        )
        cfg_k8s = client.Configuration()
        await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg_k8s)
        api = client.ApiClient(cfg_k8s)
        hw = hardware(run_id, driver)
        run = Run(
            id=run_id,
            driver=driver,
            pipeline=pipeline,
            api=api,
            env=env,
            infra=[*hw, {**cfg, "metadata": {"name": "kuota-config-file"}}],
            kafka=KafkaSettings.from_env(
                {"KUOTA_KAFKA_BOOTSTRAP": kafka_bootstrap, "KUOTA_TOPIC_PREFIX": f"{run_id}."}
            ),
        )
        started = time.monotonic()
        try:
            applied_hw = await kubectl_apply(run, hw)
            await asyncio.to_thread(launcher.up, pipeline, quiet=True)
            prefix = pipeline.topic_prefix
            run.tasks = [
                asyncio.create_task(
                    _record_topic(run, f"{prefix}journal", parse_event, run.journal),
                    name="journal",
                ),
                asyncio.create_task(
                    _record_topic(run, f"{prefix}decisions", parse_decision, run.decisions),
                    name="decisions",
                ),
                asyncio.create_task(_record_jobs(run), name="jobs"),
                asyncio.create_task(_record_claims(run), name="claims"),
            ]
            await wait_journaled(run, applied_hw)
            await wait_nodes_ready(run)
            await run.until(
                lambda: any(
                    isinstance(e, ObjectUpserted) and e.object.get("kind") == "Configuration"
                    for _, e in run.journal
                ),
                "ingest journals the Configuration file",
            )
            print(
                f"\n[e2e] {run_id}: pipeline and hardware up in {time.monotonic() - started:.1f}s"
            )
            yield run
        finally:
            for t in run.tasks:
                t.cancel()
            for t in run.tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            try:
                await asyncio.to_thread(launcher.down, pipeline, quiet=True)
            finally:
                await _cleanup(run)
                await api.close()
                config_file.unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    tmp.rmdir()  # the pid files are gone with the services; logs are kept

    return e2e_run


async def _cleanup(run: Run) -> None:
    """Delete everything labelled with the run, its topics and its Redis keys."""
    selector = f"{PIPELINE_LABEL}={run.id}"
    core = client.CoreV1Api(run.api)
    objects = client.CustomObjectsApi(run.api)
    resource = client.ResourceV1Api(run.api)
    with contextlib.suppress(ApiException):
        for ns in (await core.list_namespace(label_selector=selector)).items:
            with contextlib.suppress(ApiException):
                await core.delete_namespace(ns.metadata.name, propagation_policy="Background")
    # Nodes last: pods left on a deleted node keep the pod garbage collector busy.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(ApiException):
            if not (await core.list_namespace(label_selector=selector)).items:
                break
        await asyncio.sleep(0.5)
    # LocalQueues and the rest of the namespaced objects went with the namespaces.
    for plural in ("clusterqueues", "resourceflavors", "cohorts", "workloadpriorityclasses"):
        with contextlib.suppress(ApiException):
            await objects.delete_collection_cluster_custom_object(
                *KUEUE, plural, label_selector=selector
            )
    with contextlib.suppress(ApiException):
        await resource.delete_collection_resource_slice(label_selector=selector)
    with contextlib.suppress(ApiException):
        await resource.delete_collection_device_class(label_selector=selector)
    with contextlib.suppress(ApiException):
        await core.delete_collection_node(label_selector=selector)
    from aiokafka.admin import AIOKafkaAdminClient

    prefix = run.pipeline.topic_prefix
    admin = AIOKafkaAdminClient(**run.kafka.client_kwargs())
    with contextlib.suppress(Exception):
        await admin.start()
        await admin.delete_topics([f"{prefix}journal", f"{prefix}decisions", f"{prefix}deadletter"])
    with contextlib.suppress(Exception):
        await admin.close()
    import redis.asyncio as aioredis

    r = aioredis.from_url(run.env["KUOTA_REDIS_URL"])
    with contextlib.suppress(Exception):
        await r.delete(
            f"kuota:snapshot:{run.id}-admission-0",
            f"kuota:ingest:seen:{prefix}journal",
            f"{run.id}:status:clusterqueues",
        )
    await r.aclose()
