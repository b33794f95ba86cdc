"""The end-to-end harness: kuota's four services on the real stack, one scenario at a time.

Theory of operation. A test module gets one *run* (``e2e_run`` fixture, built by
``run_fixture``): its own pipeline of the four real services, started with
``scripts/kuota-services``' Python API under a unique name ``e2e-<hex>``, so
it has its own topics (prefix ``e2e-<hex>.``), free metrics and webhook
ports, a webhook registration matching only Jobs labelled
``kuota.dev/pipeline=e2e-<hex>``, an ingest that watches only those Jobs and an
actuator that writes only those ClusterQueues' status. The run also brings its
own hardware: two kwok nodes and, on them, partitionable GPUs of a driver
named after the run (``e2e-<hex>.gpu.kuota.dev``), its DeviceClasses
(``gpu-<run>`` and ``mig-<run>`` charged by the ``memory`` counter as
``gpu-memory``; ``wgpu-<run>``, whole GPUs with ``extendedResourceName:
nvidia.com/gpu``, charged by device count as ``whole-gpus``) and its Kueue
Configuration (a file, ``KUOTA_CONFIG_FILE``). Nothing else on the shared
apiserver can see or disturb it.

While the run lives, background tasks record the journal and the decision
topic (from offset 0), every change of the run's Jobs (a watch), and every DRA
allocation of a ResourceClaim in the run's namespaces.

``run_scenario`` plays one file of ``tests/e2e/scenarios/``: Kubernetes
manifests with the simulator's timing annotations (``kuota.dev/submit-at``,
``kuota.dev/run-for``) and the test's expectations (``e2e.kuota.dev/charge``:
what the Job must be charged, ``e2e.kuota.dev/device``: ``whole`` or ``mig``,
``e2e.kuota.dev/expect``: ``Inadmissible/<Reason>`` for a Job that must never
be admitted, ``e2e.kuota.dev/admissions``: how often it is admitted, 2 for a
Job preempted once). It applies the queue objects, waits until ingest has
journaled them, then creates each Job at its time — *without*
``spec.suspend``: the webhook must suspend it — with kwok annotations so its
pods run for ``run-for``. While it plays, a sampler lists the run's Jobs every
``SAMPLE_PERIOD`` and checks that the admitted (unsuspended, not finished)
usage never exceeds quota; the Job watch gives the same check at every single
change. It ends when every Job reached its expected end, and returns an
``Outcome``: what the cluster and the decision topic show, and what
``kuota.sim`` decides for the very same manifests.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib.util
import itertools
import json
import os
import socket
import string
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiokafka import AIOKafkaConsumer, TopicPartition
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kuota.bus.settings import KafkaSettings
from kuota.core.fold import Fold
from kuota.core.quantity import format_quantity, parse_quantity
from kuota.events.schema import Decision, JournalEvent, ObjectUpserted, parse_decision, parse_event
from kuota.kube.watch import Resource, Watcher
from kuota.sim.duration import micros_to_seconds, parse_duration
from kuota.sim.engine import Simulator

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).resolve().parent / "scenarios"
PIPELINE_LABEL = "kuota.dev/pipeline"
NODE_POOL_LABEL = "e2e.kuota.dev/node-pool"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
CHARGE = "e2e.kuota.dev/charge"
DEVICE = "e2e.kuota.dev/device"
EXPECT = "e2e.kuota.dev/expect"
ADMISSIONS = "e2e.kuota.dev/admissions"
KWOK_READY = "pod-ready.stage.kwok.x-k8s.io/delay"
KWOK_COMPLETE = "pod-complete.stage.kwok.x-k8s.io/delay"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
NODES = 2
GPUS_PER_NODE = 4
MIG_PER_GPU = 7
SAMPLE_PERIOD = 0.1  # seconds between two samples of the Jobs (the bound asked: 0.2)
SETTLE_TIMEOUT = 90.0  # after the last Job's submission, for every Job to reach its end
WAIT = 60.0  # any other wait

# (ClusterQueue, resource) -> milli-units
Usage = dict[tuple[str, str], int]


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ====================================================================== the run's hardware


def hardware(run: str, driver: str) -> list[dict[str, Any]]:
    """Nodes, ResourceSlices and DeviceClasses of one run (labelled with the run)."""
    labels = {PIPELINE_LABEL: run}
    objs: list[dict[str, Any]] = []
    for n in range(NODES):
        node = f"{run}-{n}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {
                        **labels,
                        NODE_POOL_LABEL: run,
                        "kubernetes.io/hostname": node,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                    },
                },
                "status": {
                    "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                    "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                },
            }
        )
        pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
        devices: list[dict[str, Any]] = []
        for g in range(GPUS_PER_NODE):
            counter = f"gpu-{g}-memory"
            devices.append(
                {
                    "name": f"gpu-{g}",
                    "attributes": {"type": {"string": "gpu"}, "index": {"int": g}},
                    "capacity": {"memory": {"value": "80Gi"}},
                    "consumesCounters": [
                        {"counterSet": counter, "counters": {"memory": {"value": "80Gi"}}}
                    ],
                }
            )
            for m in range(MIG_PER_GPU):
                devices.append(
                    {
                        "name": f"gpu-{g}-mig-1g10gb-{m}",
                        "attributes": {
                            "type": {"string": "mig"},
                            "profile": {"string": "1g.10gb"},
                            "parentIndex": {"int": g},
                        },
                        "capacity": {"memory": {"value": "10Gi"}},
                        "consumesCounters": [
                            {"counterSet": counter, "counters": {"memory": {"value": "10Gi"}}}
                        ],
                    }
                )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-counters", "labels": labels},
                "spec": {
                    "driver": driver,
                    "nodeName": node,
                    "pool": pool,
                    "sharedCounters": [
                        {"name": f"gpu-{g}-memory", "counters": {"memory": {"value": "80Gi"}}}
                        for g in range(GPUS_PER_NODE)
                    ],
                },
            }
        )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-devices", "labels": labels},
                "spec": {"driver": driver, "nodeName": node, "pool": pool, "devices": devices},
            }
        )

    def device_class(name: str, kind: str, extended: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{driver}' && "
                        f"device.attributes['{driver}'].type == '{kind}'"
                    }
                }
            ]
        }
        if extended:
            spec["extendedResourceName"] = extended
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }

    objs += [
        device_class(f"gpu-{run}", "gpu"),
        device_class(f"mig-{run}", "mig"),
        device_class(f"wgpu-{run}", "gpu", extended="nvidia.com/gpu"),
    ]
    return objs


def configuration(run: str, driver: str) -> dict[str, Any]:
    """Kueue's Configuration for the run: memory counters and whole-GPU counts."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {
            "deviceClassMappings": [
                {
                    "name": "gpu-memory",
                    "deviceClassNames": [f"gpu-{run}", f"mig-{run}"],
                    "sources": [{"counter": {"name": "memory", "driver": driver}}],
                },
                {"name": "whole-gpus", "deviceClassNames": [f"wgpu-{run}"]},
            ]
        },
    }


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


def run_fixture() -> Any:
    """A module-scoped ``e2e_run`` fixture: one pipeline + hardware per test module."""

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
        cfg = configuration(run_id, driver)
        config_file.write_text(yaml.safe_dump(cfg))
        pipeline = launcher.Pipeline(
            name=run_id,
            topic_prefix=f"{run_id}.",
            ports={s: free_port() for s in launcher.SERVICES},
            webhook_port=free_port(),
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
            infra=[o for o in hw if o["kind"] != "Node"]
            + [{**cfg, "metadata": {"name": "kuota-config-file"}}],
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


# ====================================================================== scenarios


@dataclass
class QuotaModel:
    """The scenario's ClusterQueues: who may use how much."""

    # cq -> resource -> (nominal, borrowing limit or None)
    limits: dict[str, dict[str, tuple[int, int | None]]]
    cohort_of: dict[str, str | None]
    queue_of: dict[tuple[str, str], str]  # (namespace, LocalQueue) -> ClusterQueue

    @classmethod
    def of(cls, docs: list[dict[str, Any]]) -> QuotaModel:
        limits: dict[str, dict[str, tuple[int, int | None]]] = {}
        cohort_of: dict[str, str | None] = {}
        queue_of: dict[tuple[str, str], str] = {}
        for d in docs:
            if d["kind"] == "ClusterQueue":
                name = d["metadata"]["name"]
                spec = d.get("spec") or {}
                cohort_of[name] = spec.get("cohortName") or spec.get("cohort")
                res: dict[str, tuple[int, int | None]] = {}
                for g in spec.get("resourceGroups") or []:
                    for f in g.get("flavors") or []:
                        for r in f.get("resources") or []:
                            limit = r.get("borrowingLimit")
                            res[r["name"]] = (
                                parse_quantity(str(r["nominalQuota"])),
                                None if limit is None else parse_quantity(str(limit)),
                            )
                limits[name] = res
            elif d["kind"] == "LocalQueue":
                md = d["metadata"]
                queue_of[(md["namespace"], md["name"])] = d["spec"]["clusterQueue"]
        return cls(limits, cohort_of, queue_of)

    def violations(self, usage: Usage) -> list[str]:
        """What in this usage is over quota (empty: nothing)."""
        out = []
        cohort_use: dict[tuple[str, str], int] = {}
        cohort_cap: dict[tuple[str, str], int] = {}
        for cq, res in self.limits.items():
            cohort = self.cohort_of.get(cq)
            for r, (nominal, limit) in res.items():
                used = usage.get((cq, r), 0)
                if cohort is None:
                    cap: int | None = nominal
                else:
                    cap = None if limit is None else nominal + limit
                    cohort_use[(cohort, r)] = cohort_use.get((cohort, r), 0) + used
                    cohort_cap[(cohort, r)] = cohort_cap.get((cohort, r), 0) + nominal
                if cap is not None and used > cap:
                    out.append(f"{cq} uses {used / 1000:g} {r} > {cap / 1000:g}")
        for (cohort, r), used in cohort_use.items():
            if used > cohort_cap[(cohort, r)]:
                out.append(
                    f"cohort {cohort} uses {used / 1000:g} {r} > {cohort_cap[(cohort, r)] / 1000:g}"
                )
        return out


def parse_charge(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, qty = part.partition("=")
        out[name.strip()] = parse_quantity(qty.strip())
    return out


def job_done(obj: Mapping[str, Any]) -> bool:
    """The Job has finished: a Complete or Failed condition is True."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def job_running(obj: Mapping[str, Any]) -> bool:
    """Admitted and holding quota: unsuspended and not finished."""
    return not (obj.get("spec") or {}).get("suspend", False) and not job_done(obj)


def job_key(obj: Mapping[str, Any]) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace')}/{md.get('name')}"


@dataclass
class ScenarioJob:
    key: str
    manifest: dict[str, Any]
    submit_at: float
    run_for: float
    charge: dict[str, int]  # resource -> milli
    device: str | None
    expect: str  # "Finished" or "Inadmissible/<Reason>"
    cluster_queue: str
    admissions: int = 1  # how often it is admitted (more than once: it was preempted)
    created: dict[str, Any] | None = None  # the create call's answer
    created_at: float = 0.0  # wall clock


@dataclass
class Outcome:
    name: str
    run: Run
    jobs: dict[str, ScenarioJob]
    quota: QuotaModel
    flavors: dict[str, dict[str, str]]  # ResourceFlavor -> nodeLabels
    decisions: list[Decision]  # this scenario's, in topic order
    sim_decisions: list[Decision]
    final_jobs: dict[str, dict[str, Any]]
    pods: dict[str, list[dict[str, Any]]]  # job key -> pods
    claims: dict[str, list[dict[str, Any]]]  # pod "ns/name" -> allocated claims
    events: dict[str, list[dict[str, Any]]]  # job key -> Events
    samples: list[tuple[float, Usage]]
    sample_violations: list[str]
    change_violations: list[str]
    peak: Usage
    unsuspended_at: dict[str, float]  # first time seen unsuspended
    stopped_at: dict[str, list[float]]  # seen suspended again after running (preempted)
    finished_at: dict[str, float]  # first time seen Complete or Failed
    duration: float

    def admitted_order(self, decisions: list[Decision] | None = None) -> list[str]:
        return [
            d.workload or ""
            for d in (self.decisions if decisions is None else decisions)
            if d.type == "Admitted"
        ]

    def admissions(self, decisions: list[Decision] | None = None) -> list[tuple[str, list[str]]]:
        """(workload, victims) of every Admitted decision, in order."""
        return [
            (d.workload or "", list(d.victims or ()))
            for d in (self.decisions if decisions is None else decisions)
            if d.type == "Admitted"
        ]

    def preemptions(self, decisions: list[Decision] | None = None) -> list[tuple[str, str, str]]:
        """(victim, preemptor, reason) of every Preempted decision, in order."""
        return [
            (d.workload or "", d.preemptor or "", d.reason or "")
            for d in (self.decisions if decisions is None else decisions)
            if d.type == "Preempted"
        ]

    def of_type(self, kind: str, key: str) -> list[Decision]:
        return [d for d in self.decisions if d.type == kind and d.workload == key]


def load_scenario(name: str, run: Run) -> list[dict[str, Any]]:
    text = (SCENARIOS / f"{name}.yaml").read_text()
    text = string.Template(text).substitute(run=run.id, driver=run.driver, pool=run.id)
    docs = [copy.deepcopy(d) for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    for d in docs:  # every object belongs to the run (ingest, actuator, cleanup)
        d.setdefault("metadata", {}).setdefault("labels", {})[PIPELINE_LABEL] = run.id
    return docs


def usage_of(jobs: Mapping[str, ScenarioJob], objs: Mapping[str, Mapping[str, Any]]) -> Usage:
    usage: Usage = {}
    for key, obj in objs.items():
        job = jobs.get(key)
        if job is None or not job_running(obj):
            continue
        for r, amount in job.charge.items():
            usage[(job.cluster_queue, r)] = usage.get((job.cluster_queue, r), 0) + amount
    return usage


async def _sample(
    run: Run,
    jobs: dict[str, ScenarioJob],
    quota: QuotaModel,
    samples: list[tuple[float, Usage]],
    violations: list[str],
) -> None:
    """Every SAMPLE_PERIOD, one consistent LIST of the run's Jobs, usage checked.

    A LIST is started every period whether or not the previous one has answered
    (at most four in flight), so a slow apiserver delays answers, not samples;
    each sample is stamped with the time its LIST was sent.
    """
    batch = client.BatchV1Api(run.api)
    namespaces = {k.split("/", 1)[0] for k in jobs}
    in_flight: set[asyncio.Task[None]] = set()

    async def one(sent: float) -> None:
        listed = await batch.list_job_for_all_namespaces(
            label_selector=f"{PIPELINE_LABEL}={run.id}", _preload_content=False
        )
        data = json.loads(await listed.read())
        objs = {
            job_key(o): o
            for o in data.get("items") or []
            if (o.get("metadata") or {}).get("namespace") in namespaces
        }
        usage = usage_of(jobs, objs)
        samples.append((sent, usage))
        for v in quota.violations(usage):
            violations.append(f"sample sent at {sent:.3f}: {v}")

    try:
        next_at = time.monotonic()
        while True:
            if len(in_flight) < 4:
                task = asyncio.create_task(one(time.time()))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            next_at += SAMPLE_PERIOD
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        for task in list(in_flight):
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
        samples.sort(key=lambda s: s[0])


async def run_scenario(run: Run, name: str) -> Outcome:
    docs = load_scenario(name, run)
    setup = [d for d in docs if d["kind"] != "Job"]
    quota = QuotaModel.of(docs)
    flavors = {
        d["metadata"]["name"]: dict((d.get("spec") or {}).get("nodeLabels") or {})
        for d in docs
        if d["kind"] == "ResourceFlavor"
    }
    jobs: dict[str, ScenarioJob] = {}
    for d in docs:
        if d["kind"] != "Job":
            continue
        md = d["metadata"]
        ann = md.get("annotations") or {}
        run_for = micros_to_seconds(parse_duration(ann["kuota.dev/run-for"]))
        manifest = copy.deepcopy(d)
        manifest["spec"].pop("suspend", None)  # the webhook must suspend it
        pod_ann = (
            manifest["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})
        )
        pod_ann[KWOK_READY] = "200ms"
        pod_ann[KWOK_COMPLETE] = f"{run_for:g}s"
        key = f"{md['namespace']}/{md['name']}"
        jobs[key] = ScenarioJob(
            key=key,
            manifest=manifest,
            submit_at=micros_to_seconds(parse_duration(ann.get("kuota.dev/submit-at", "0s"))),
            run_for=run_for,
            charge=parse_charge(ann.get(CHARGE, "")),
            device=ann.get(DEVICE),
            expect=ann.get(EXPECT, "Finished"),
            cluster_queue=quota.queue_of[(md["namespace"], md["labels"][QUEUE_LABEL])],
            admissions=int(ann.get(ADMISSIONS, "1")),
        )
    namespaces = {k.split("/", 1)[0] for k in jobs}

    applied = await kubectl_apply(run, setup)
    await wait_journaled(run, applied)

    first_decision = len(run.decisions)
    first_change = len(run.job_changes)
    samples: list[tuple[float, Usage]] = []
    sample_violations: list[str] = []
    sampler = asyncio.create_task(_sample(run, jobs, quota, samples, sample_violations))
    batch = client.BatchV1Api(run.api)
    t0 = time.time()
    try:
        for job in sorted(jobs.values(), key=lambda j: j.submit_at):
            delay = t0 + job.submit_at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            ns = job.manifest["metadata"]["namespace"]
            created = await batch.create_namespaced_job(ns, job.manifest, _preload_content=False)
            job.created = json.loads(await created.read())
            job.created_at = time.time()

        def scenario_decisions() -> list[Decision]:
            return [
                d
                for _, d in run.decisions[first_decision:]
                if d.workload and d.workload.split("/", 1)[0] in namespaces
            ]

        def settled() -> bool:
            ds = scenario_decisions()
            for job in jobs.values():
                if job.expect == "Finished":
                    ok = any(d.type == "Finished" and d.workload == job.key for d in ds)
                else:
                    reason = job.expect.split("/", 1)[1]
                    ok = any(
                        d.type == "Inadmissible" and d.workload == job.key and d.reason == reason
                        for d in ds
                    )
                if not ok:
                    return False
            return True

        def pending() -> str:
            ds = scenario_decisions()
            late = []
            for job in jobs.values():
                last = [d.type for d in ds if d.workload == job.key]
                late.append(f"{job.key} (expect {job.expect}; decisions {last})")
            return "; ".join(late)

        try:
            await run.until(settled, f"scenario {name} settles", timeout=SETTLE_TIMEOUT)
        except pytest.fail.Exception:
            pytest.fail(f"scenario {name} did not settle in {SETTLE_TIMEOUT:.0f}s: {pending()}")
        # the Job controller's last writes (Complete) are in by now; one more sample
        await asyncio.sleep(2 * SAMPLE_PERIOD)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    duration = time.time() - t0
    decisions = scenario_decisions()

    # Every change of the run's Jobs, replayed in watch order: the exact check.
    state: dict[str, dict[str, Any]] = {}
    change_violations: list[str] = []
    peak: Usage = {}
    unsuspended_at: dict[str, float] = {}
    stopped_at: dict[str, list[float]] = {}
    finished_at: dict[str, float] = {}
    for ch in run.job_changes[first_change:]:
        key = job_key(ch.obj)
        if key not in jobs:
            continue
        if ch.type == "DELETE":
            state.pop(key, None)
            continue
        before = state.get(key)
        state[key] = ch.obj
        suspended = bool((ch.obj.get("spec") or {}).get("suspend", False))
        if not suspended:
            unsuspended_at.setdefault(key, ch.at)
        elif before is not None and not (before.get("spec") or {}).get("suspend", False):
            stopped_at.setdefault(key, []).append(ch.at)
        if job_done(ch.obj):
            finished_at.setdefault(key, ch.at)
        usage = usage_of(jobs, state)
        for k, v in usage.items():
            peak[k] = max(peak.get(k, 0), v)
        rv = (ch.obj.get("metadata") or {}).get("resourceVersion")
        for v in quota.violations(usage):
            change_violations.append(f"after {key}@{rv}: {v}")

    final_jobs, pods, claims, events = await _collect(run, jobs, namespaces)
    sim = Simulator(run.infra + docs, fold=Fold()).run()
    sim_decisions = [d for d in sim if d.workload and d.workload.split("/", 1)[0] in namespaces]
    outcome = Outcome(
        name=name,
        run=run,
        jobs=jobs,
        quota=quota,
        flavors=flavors,
        decisions=decisions,
        sim_decisions=sim_decisions,
        final_jobs=final_jobs,
        pods=pods,
        claims=claims,
        events=events,
        samples=samples,
        sample_violations=sample_violations,
        change_violations=change_violations,
        peak=peak,
        unsuspended_at=unsuspended_at,
        stopped_at=stopped_at,
        finished_at=finished_at,
        duration=duration,
    )
    _report(outcome)
    return outcome


async def _collect(
    run: Run, jobs: Mapping[str, ScenarioJob], namespaces: set[str]
) -> tuple[
    dict[str, dict[str, Any]],
    dict[str, list[dict[str, Any]]],
    dict[str, list[dict[str, Any]]],
    dict[str, list[dict[str, Any]]],
]:
    batch = client.BatchV1Api(run.api)
    core = client.CoreV1Api(run.api)
    final_jobs: dict[str, dict[str, Any]] = {}
    pods: dict[str, list[dict[str, Any]]] = {k: [] for k in jobs}
    events: dict[str, list[dict[str, Any]]] = {k: [] for k in jobs}
    for ns in sorted(namespaces):
        resp = await batch.list_namespaced_job(ns, _preload_content=False)
        for o in json.loads(await resp.read()).get("items") or []:
            final_jobs[job_key(o)] = o
        resp = await core.list_namespaced_pod(ns, _preload_content=False)
        for p in json.loads(await resp.read()).get("items") or []:
            owner = (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name")
            if f"{ns}/{owner}" in pods:
                pods[f"{ns}/{owner}"].append(p)
        resp = await core.list_namespaced_event(ns, _preload_content=False)
        for e in json.loads(await resp.read()).get("items") or []:
            inv = e.get("involvedObject") or {}
            if inv.get("kind") == "Job" and f"{ns}/{inv.get('name')}" in events:
                events[f"{ns}/{inv.get('name')}"].append(e)
    claims: dict[str, list[dict[str, Any]]] = {}
    for claim in run.claims.values():
        ns = claim["metadata"]["namespace"]
        for ref in claim["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Pod":
                claims.setdefault(f"{ns}/{ref['name']}", []).append(claim)
    return final_jobs, pods, claims, events


def _report(o: Outcome) -> None:
    lat = [
        o.unsuspended_at[k] - j.created_at
        for k, j in o.jobs.items()
        if k in o.unsuspended_at and j.created_at
    ]
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(o.samples)]
    peaks = ", ".join(f"{cq}/{r}: {format_quantity(v)}" for (cq, r), v in sorted(o.peak.items()))
    print(
        f"\n[e2e] {o.name}: {o.duration:.1f}s, {len(o.decisions)} decisions, "
        f"admitted {o.admitted_order()}, "
        f"create->unsuspended {min(lat, default=0) * 1000:.0f}..{max(lat, default=0) * 1000:.0f}ms "
        f"(no wait: {sorted(round(x * 1000) for x in lat)[:3]}ms), "
        f"{len(o.samples)} samples (max gap {max(gaps, default=0) * 1000:.0f}ms), "
        f"peak {peaks}"
    )
    for d in o.decisions:
        if d.type == "Admitted" and d.victims and d.workload:
            started = _unsuspended_after(o, d.workload, d)
            for victim in d.victims:
                stops = o.stopped_at.get(victim) or []
                if started is not None and stops:
                    print(
                        f"[e2e]   {d.workload} unsuspended {(started - min(stops)) * 1000:.0f}ms "
                        f"after its victim {victim} was suspended"
                    )
    t0 = min((j.created_at for j in o.jobs.values() if j.created_at), default=0.0)

    def at(t: float | None) -> str:
        return "-" if t is None else f"{t - t0:.1f}"

    print(
        "[e2e]   timeline (s): "
        + "; ".join(
            f"{k.split('/', 1)[1]} created {at(j.created_at)} unsuspended "
            f"{at(o.unsuspended_at.get(k))} finished {at(o.finished_at.get(k))}"
            for k, j in o.jobs.items()
        )
    )


# ====================================================================== assertions


def assert_pipeline(o: Outcome) -> None:
    """What every scenario must show, whatever its story."""
    # The webhook suspended every Job at creation (none was created suspended).
    for key, job in o.jobs.items():
        assert job.created is not None
        assert job.created["spec"].get("suspend") is True, (
            f"{key}: stored with spec.suspend={job.created['spec'].get('suspend')!r}; "
            "kuota-ingest's webhook must suspend queued Jobs at creation"
        )
    # Quota held at every sample and at every change of every Job.
    assert not o.sample_violations, f"usage over quota in samples: {o.sample_violations[:5]}"
    assert not o.change_violations, f"usage over quota after a change: {o.change_violations[:5]}"
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(o.samples))
    assert len(o.samples) >= o.duration / 0.2 * 0.8, (
        f"only {len(o.samples)} samples in {o.duration:.1f}s"
    )
    assert gaps and gaps[int(len(gaps) * 0.95)] <= 0.2, (
        f"sampling too sparse: 95th percentile gap {gaps[int(len(gaps) * 0.95)] * 1000:.0f}ms"
    )

    for key, job in o.jobs.items():
        admitted = o.of_type("Admitted", key)
        final = o.final_jobs.get(key)
        assert final is not None, f"{key}: the Job is gone"
        if job.expect != "Finished":
            assert not admitted, f"{key} was admitted: {admitted}"
            assert final["spec"].get("suspend") is True, f"{key} must stay suspended"
            assert not o.pods[key], f"{key} must have no pods, has {len(o.pods[key])}"
            continue
        assert len(admitted) == job.admissions, (
            f"{key}: admitted {len(admitted)} times, expected {job.admissions}: {admitted}"
        )
        for d in admitted:
            # Charged what the scenario says (80Gi for a whole GPU, 10Gi per slice, ...).
            charged = {
                r: parse_quantity(q) for per in (d.usage or {}).values() for r, q in per.items()
            }
            assert charged == job.charge, f"{key}: charged {d.usage}, expected {job.charge}"
            assert d.cluster_queue == job.cluster_queue, d
        d = admitted[-1]
        # Unsuspended, with the flavor's node labels injected into the pod template.
        assert final["spec"].get("suspend") is False, f"{key}: still suspended after Admitted"
        flavor_names = {f for per in (d.flavors or {}).values() for f in per.values()}
        selector = final["spec"]["template"]["spec"].get("nodeSelector") or {}
        for flavor in flavor_names:
            for label, value in o.flavors[flavor].items():
                assert selector.get(label) == value, (
                    f"{key}: nodeSelector {selector} lacks {label}={value} of flavor {flavor}"
                )
        conditions = {
            c["type"]: c["status"] for c in (final.get("status") or {}).get("conditions") or []
        }
        assert conditions.get("Complete") == "True", f"{key}: not Complete: {conditions}"
        # Its pods ran on the run's kwok nodes (which the injected selector picks)
        # and completed; each got its DRA devices allocated by kube-scheduler.
        pods = o.pods[key]
        want_pods = int(job.manifest["spec"].get("completions") or 1)
        done = [p for p in pods if p["status"].get("phase") == "Succeeded"]
        assert len(done) >= want_pods, (
            f"{key}: {len(done)} pods Succeeded of {want_pods}: "
            f"{[(p['metadata']['name'], p['status'].get('phase')) for p in pods]}"
        )
        for p in done:
            node = p["spec"].get("nodeName")
            assert node in o.run.nodes, f"{key}: pod on {node}, not on {o.run.nodes}"
            pod = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            if job.device is None:
                continue
            allocated = [
                r
                for c in o.claims.get(pod, [])
                for r in c["status"]["allocation"]["devices"]["results"]
            ]
            assert allocated, f"{key}: pod {pod} got no DRA allocation"
            for r in allocated:
                assert r["driver"] == o.run.driver, r
                assert r["pool"] == node, f"{pod}: device {r} not from its node {node}"
                is_mig = "-mig-" in r["device"]
                assert is_mig == (job.device == "mig"), f"{pod}: wanted {job.device}, got {r}"
    # Parity: the in-process simulator, fed the same manifests, admits in the
    # same order, preempts the same victims for the same preemptors.
    simulated = o.admissions(o.sim_decisions)
    assert o.admissions() == simulated, (
        f"pipeline admitted (workload, victims) {o.admissions()}, kuota simulate {simulated}"
    )
    assert o.preemptions() == o.preemptions(o.sim_decisions), (
        f"pipeline preempted {o.preemptions()}, kuota simulate {o.preemptions(o.sim_decisions)}"
    )
    # A preemptor's Job is unsuspended only after its victims' Jobs were suspended.
    for d in o.decisions:
        if d.type != "Admitted" or not d.victims or d.workload not in o.jobs:
            continue
        started = _unsuspended_after(o, d.workload or "", d)
        for victim in d.victims:
            stops = o.stopped_at.get(victim) or []
            assert stops, f"victim {victim} of {d.workload} was never suspended"
            assert started is not None and min(stops) <= started, (
                f"{d.workload} unsuspended at {started}, before its victim {victim} "
                f"was suspended at {min(stops)}"
            )


def _unsuspended_after(o: Outcome, key: str, admitted: Decision) -> float | None:
    """When the Job was first seen unsuspended after this admission was decided."""
    times = [
        ch.at
        for ch in o.run.job_changes
        if job_key(ch.obj) == key
        and not (ch.obj.get("spec") or {}).get("suspend", False)
        and ch.at >= admitted.at
    ]
    return min(times) if times else None
