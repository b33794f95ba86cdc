"""kuota-ingest as a process on the real stack: watches -> journal, ticks,
the digest rule, finished Jobs on kwok, restart without re-journaling (the
webhook is a process of its own: test_webhook_service.py).

Each test starts ``.venv/bin/kuota-ingest`` with its own topic prefix (so its
own journal and its own Redis memory), free ports and certificates from
``scripts/webhook-certs`` in a temporary directory, reads the journal with a
``read_committed`` consumer, and stops the process at the end (SIGTERM, then
SIGKILL if it lingers). Objects live in a per-test namespace or carry a
per-test name; the webhook registration matches only Jobs with a per-test
label and is deleted at the end.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from crd_helpers import apply_crds
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from pipeline_helpers import free_port
from stack_helpers import temp_namespace

from kuota.api.parse import parse_object
from kuota.api.types import Configuration
from kuota.events.schema import (
    JournalEvent,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    Tick,
    WorkloadFinished,
    parse_event,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
INGEST = REPO / ".venv" / "bin" / "kuota-ingest"
QUEUE = "kueue.x-k8s.io/queue-name"
RUN_LABEL = "kuota.dev/test-run"
KUEUE = {"group": "kueue.x-k8s.io", "version": "v1beta2"}
KWOK_POD = {  # scheduled on a kwok node, Running after 1s, Succeeded 3s later
    "metadata": {
        "annotations": {
            "pod-ready.stage.kwok.x-k8s.io/delay": "1s",
            "pod-complete.stage.kwok.x-k8s.io/delay": "3s",
        }
    },
    "spec": {
        "restartPolicy": "Never",
        "nodeSelector": {"type": "kwok"},
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
    },
}

NOWHERE_POD = {
    "spec": {
        "restartPolicy": "Never",
        "nodeSelector": {"kuota.dev/no-such-node": "true"},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
    }
}


# --------------------------------------------------------------------------- the process


class IngestProcess:
    """One kuota-ingest subprocess with its log file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds = 0.0

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.env['KUOTA_METRICS_PORT']}/metrics"

    async def start(self) -> IngestProcess:
        assert INGEST.exists(), f"{INGEST} missing: run .venv/bin/pip install -e '.[dev]'"
        offset = self.log.stat().st_size if self.log.exists() else 0
        t0 = time.monotonic()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(INGEST)], env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = t0 + 40
        while True:
            text = self.log.read_bytes()[offset:].decode(errors="replace")
            if " ready in " in text:
                break
            if self.proc.poll() is not None:
                pytest.fail(f"kuota-ingest exited with {self.proc.returncode}:\n{text}")
            assert time.monotonic() < deadline, f"kuota-ingest not ready within 40s:\n{text}"
            await asyncio.sleep(0.1)
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after 15s; returns the exit code."""
        proc = self.proc
        if proc is None:
            return 0
        self.proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
                return -9
        return proc.returncode

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
            text = resp.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def webhook_certs(folder: Path) -> dict[str, str]:
    """A CA and the webhook's certificate and key (``scripts/webhook-certs``)."""
    out = subprocess.run(
        [str(REPO / "scripts" / "webhook-certs"), str(folder)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    files = dict(line.split("=", 1) for line in out.split())
    for path in files.values():
        assert Path(path).is_file(), f"webhook-certs did not write {path}"
    return files


def ingest_environment(
    kafka_bootstrap: str, redis_url: str, kubeconfig: str, certs: dict[str, str], **extra: str
) -> dict[str, str]:
    """kuota-ingest's environment: this test's topic prefix, free ports, the
    webhook's certificate; no ambient ``KUOTA_*`` variable; ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUOTA_")}
    env.update(
        KUOTA_KAFKA_BOOTSTRAP=kafka_bootstrap,
        KUOTA_REDIS_URL=redis_url,
        KUBECONFIG=kubeconfig,
        KUOTA_TOPIC_PREFIX=f"test-{uuid.uuid4().hex[:12]}.",
        KUOTA_METRICS_PORT=str(free_port()),
        KUOTA_METRICS_HOST="127.0.0.1",
        KUOTA_WEBHOOK_PORT=str(free_port()),
        KUOTA_WEBHOOK_HOST="127.0.0.1",
        KUOTA_WEBHOOK_CERT_FILE=certs["KUOTA_WEBHOOK_CERT_FILE"],
        KUOTA_WEBHOOK_KEY_FILE=certs["KUOTA_WEBHOOK_KEY_FILE"],
        KUOTA_LOG_LEVEL="INFO",
        KUOTA_SEEN_KEY=os.environ["KUOTA_SEEN_KEY"],  # the session's (tests/conftest.py)
    )
    env.update(extra)
    return env


@pytest.fixture
def certs(tmp_path: Path) -> dict[str, str]:
    return webhook_certs(tmp_path / "webhook")


@pytest.fixture
def ingest_env(
    kafka_bootstrap: str, redis_url: str, kubeconfig: str, certs: dict[str, str]
) -> dict[str, str]:
    return ingest_environment(
        kafka_bootstrap, redis_url, kubeconfig, certs, KUOTA_TICK_SECONDS="0.5"
    )


@pytest_asyncio.fixture
async def ingest(
    ingest_env: dict[str, str], tmp_path: Path, redis_url: str
) -> AsyncIterator[IngestProcess]:
    p = IngestProcess(ingest_env, tmp_path / "ingest.log")
    try:
        yield p
    finally:
        code = p.stop()
        prefix = ingest_env["KUOTA_TOPIC_PREFIX"]
        r = aioredis.from_url(redis_url)
        await r.delete(f"kuota:ingest:seen:{prefix}journal")
        await r.aclose()
        admin = AIOKafkaAdminClient(bootstrap_servers=ingest_env["KUOTA_KAFKA_BOOTSTRAP"])
        await admin.start()
        try:
            mine = [t for t in await admin.list_topics() if t.startswith(prefix)]
            if mine:
                await admin.delete_topics(mine)
        finally:
            await admin.close()
        assert code in (0, None), f"kuota-ingest exited with {code}:\n{p.log_text()[-3000:]}"


# --------------------------------------------------------------------------- the journal


class Journal:
    """Every committed record of one journal topic, read in the background."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.events: list[JournalEvent] = []
        self._consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Journal:
        await self._consumer.start()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        async for record in self._consumer:
            assert record.value is not None
            event = parse_event(record.value)
            assert dict(record.headers)["kuota-type"] == event.type.encode()
            self.events.append(event)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._consumer.stop()

    async def wait(
        self, pred: Callable[[JournalEvent], bool], what: str, timeout: float = 30
    ) -> JournalEvent:
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if pred(e):
                    return e
            if time.monotonic() > deadline:
                recent = [e.id for e in self.events if not isinstance(e, Tick)][-15:]
                pytest.fail(f"no journal event {what} within {timeout}s; last: {recent}")
            await asyncio.sleep(0.1)

    def with_id(self, event_id: str) -> list[JournalEvent]:
        return [e for e in self.events if e.id == event_id]

    def upserts_of(self, kind: str, namespace: str, name: str) -> list[ObjectUpserted]:
        prefix = f"{kind}/{namespace}/{name}@"
        return [e for e in self.events if isinstance(e, ObjectUpserted) and e.id.startswith(prefix)]


@pytest_asyncio.fixture
async def journal(ingest_env: dict[str, str]) -> AsyncIterator[Journal]:
    j = Journal(ingest_env["KUOTA_KAFKA_BOOTSTRAP"], f"{ingest_env['KUOTA_TOPIC_PREFIX']}journal")
    # the topic is created by ingest; the consumer subscribes and waits for it
    yield j
    await j.stop()


# --------------------------------------------------------------------------- kube


@pytest_asyncio.fixture
async def api(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    a = await config.new_client_from_config(config_file=kubeconfig)
    try:
        await apply_crds(a)
        yield a
    finally:
        await a.close()


@pytest_asyncio.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"ingest-{uuid.uuid4().hex[:8]}"
    async with temp_namespace(api, name, {RUN_LABEL: name}):
        yield name


def _job(
    name: str,
    *,
    queue: str | None,
    suspend: bool,
    labels: dict[str, str] | None = None,
    pod: dict[str, Any] | None = None,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if queue is not None:
        all_labels[QUEUE] = queue
    return {
        "metadata": {"name": name, "labels": all_labels},
        "spec": {
            "suspend": suspend,
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": pod
            or {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }


def _rv(obj: Any) -> str:
    md = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    return str(md["resourceVersion"] if isinstance(md, dict) else md.resource_version)


# --------------------------------------------------------------------------- tests


async def test_watches_ticks_digest_finish_and_restart(
    ingest: IngestProcess, journal: Journal, api: client.ApiClient, namespace: str
) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    custom, resource = client.CustomObjectsApi(api), client.ResourceV1Api(api)
    run = namespace.removeprefix("ingest-")
    cq_name, lq_name, dc_name = f"cq-{run}", "lq", f"gpu-{run}.example.com"

    await ingest.start()
    await journal.start()
    ns_obj = await core.read_namespace(namespace)
    cq = await custom.create_cluster_custom_object(
        **KUEUE,
        plural="clusterqueues",
        body={
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq_name, "labels": {RUN_LABEL: run}},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}
                        ],
                    }
                ],
            },
        },
    )
    lq = await custom.create_namespaced_custom_object(
        **KUEUE,
        namespace=namespace,
        plural="localqueues",
        body={
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": lq_name},
            "spec": {"clusterQueue": cq_name},
        },
    )
    dc = await resource.create_device_class(
        {
            "metadata": {"name": dc_name, "labels": {RUN_LABEL: run}},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "x.example.com"'}}]},
        }
    )
    # "flip" never runs (no node matches), so its readiness never changes
    flip = await batch.create_namespaced_job(
        namespace, _job("flip", queue=lq_name, suspend=True, pod=NOWHERE_POD)
    )
    try:
        # ---- every watched kind arrives, with the conventional ids
        for event_id in (
            f"Namespace//{namespace}@{_rv(ns_obj)}",
            f"ClusterQueue//{cq_name}@{_rv(cq)}",
            f"LocalQueue/{namespace}/{lq_name}@{_rv(lq)}",
            f"DeviceClass//{dc_name}@{_rv(dc)}",
            f"Job/{namespace}/flip@{_rv(flip)}",
        ):
            ev = await journal.wait(lambda e, i=event_id: e.id == i, event_id)
            assert isinstance(ev, ObjectUpserted)
        job_ev = journal.with_id(f"Job/{namespace}/flip@{_rv(flip)}")[0]
        assert isinstance(job_ev, ObjectUpserted)
        assert "status" not in job_ev.object
        assert "managedFields" not in job_ev.object["metadata"]
        assert job_ev.object["kind"] == "Job" and job_ev.object["apiVersion"] == "batch/v1"

        # ---- flipping spec.suspend is an upsert (the backstop reads it, issue #22),
        # as is a label change after it
        flipped = await batch.patch_namespaced_job("flip", namespace, {"spec": {"suspend": False}})
        labelled = await batch.patch_namespaced_job(
            "flip", namespace, {"metadata": {"labels": {"touched": "yes"}}}
        )
        await journal.wait(
            lambda e: e.id == f"Job/{namespace}/flip@{_rv(labelled)}", "the label change"
        )
        ids = [e.id for e in journal.upserts_of("Job", namespace, "flip")]
        assert ids == [
            f"Job/{namespace}/flip@{_rv(flip)}",
            f"Job/{namespace}/flip@{_rv(flipped)}",
            f"Job/{namespace}/flip@{_rv(labelled)}",
        ], f"create, the suspend flip and the label change, got {ids}"
        (flip_ev,) = journal.with_id(f"Job/{namespace}/flip@{_rv(flipped)}")
        assert isinstance(flip_ev, ObjectUpserted) and flip_ev.object["spec"]["suspend"] is False

        # ---- a Job that completes on kwok: exactly one WorkloadFinished
        done = await batch.create_namespaced_job(
            namespace, _job("done", queue=lq_name, suspend=False, pod=KWOK_POD)
        )
        uid = done.metadata.uid
        finished = await journal.wait(
            lambda e: e.id == f"finished/{namespace}/done/{uid}", "WorkloadFinished", timeout=60
        )
        assert isinstance(finished, WorkloadFinished) and finished.succeeded
        assert (finished.namespace, finished.name) == (namespace, "done")
        ready = [
            e
            for e in journal.events
            if isinstance(e, PodsReady) and e.name == "done" and e.namespace == namespace
        ]
        assert [e.ready for e in ready] == [True], [e.id for e in ready]
        assert journal.events.index(ready[0]) < journal.events.index(finished)

        # ---- deletions
        await custom.delete_namespaced_custom_object(
            **KUEUE, namespace=namespace, plural="localqueues", name=lq_name
        )
        deleted = await journal.wait(
            lambda e: isinstance(e, ObjectDeleted)
            and e.kind == "LocalQueue"
            and (e.namespace, e.name) == (namespace, lq_name),
            "ObjectDeleted LocalQueue",
        )
        assert re.fullmatch(rf"LocalQueue/{namespace}/{lq_name}@\d+/deleted", deleted.id)

        # ---- ticks: event time moves forward
        await asyncio.sleep(1.2)
        ticks = [e for e in journal.events if isinstance(e, Tick)]
        assert len(ticks) >= 3, f"only {len(ticks)} ticks"
        assert all(t.id == f"tick@{t.at!r}" for t in ticks)
        ats = [e.at for e in journal.events]
        assert ats == sorted(ats), "event time never goes backwards in the journal"

        # later status updates of the finished Job journal nothing more for it
        finished_events = [
            e
            for e in journal.events
            if isinstance(e, WorkloadFinished) and e.name == "done" and e.namespace == namespace
        ]
        assert len(finished_events) == 1

        m = ingest.metrics()
        assert m['kuota_ingest_events_total{type="ObjectUpserted"}'] >= 5
        assert m['kuota_ingest_events_total{type="WorkloadFinished"}'] >= 1
        assert m['kuota_ingest_watch_relists_total{kind="Job"}'] >= 1
        assert m['kuota_ingest_skipped_changes_total{kind="Job"}'] >= 1
        assert m["kuota_ingest_last_tick_timestamp_seconds"] >= ticks[-1].at

        # ---- restart: nothing unchanged is journaled again; a delete while down is not lost
        assert ingest.stop() == 0, ingest.log_text()[-2000:]
        assert "stopped (" in ingest.log_text()
        before = len(journal.events)
        await resource.delete_device_class(dc_name)
        await ingest.start()
        dc_deleted = await journal.wait(
            lambda e: isinstance(e, ObjectDeleted)
            and e.kind == "DeviceClass"
            and e.name == dc_name,
            "ObjectDeleted of the DeviceClass deleted while ingest was down",
        )
        assert dc_deleted.id == f"DeviceClass//{dc_name}@{_rv(dc)}/deleted"
        await asyncio.sleep(1.5)
        again = [
            e.id
            for e in journal.events[before:]
            if isinstance(e, ObjectUpserted | WorkloadFinished | PodsReady)
            and (namespace in e.id or cq_name in e.id)
        ]
        assert again == [], f"re-journaled after a restart: {again}"
        print(f"\ningest startup: {ingest.startup_seconds:.2f}s to ready (after restart)")
    finally:
        for delete in (
            custom.delete_cluster_custom_object(**KUEUE, plural="clusterqueues", name=cq_name),
            resource.delete_device_class(dc_name),
        ):
            try:
                await delete
            except ApiException as e:
                if e.status != 404:
                    raise


KUEUE_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: example.com/gpu
    deviceClassNames: [gpu.example.com]
"""


async def test_configuration_from_a_file_is_reread_on_change(
    ingest: IngestProcess, journal: Journal, tmp_path: Path
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(KUEUE_CONFIG)
    ingest.env["KUOTA_CONFIG_FILE"] = str(path)
    await ingest.start()
    await journal.start()

    def config_upserts() -> list[ObjectUpserted]:
        return [
            e
            for e in journal.events
            if isinstance(e, ObjectUpserted) and e.object.get("kind") == "Configuration"
        ]

    first = await journal.wait(
        lambda e: e.id.startswith("Configuration//kuota-config-file@sha256-"), "the file's config"
    )
    assert isinstance(first, ObjectUpserted)
    mappings = first.object["resources"]["deviceClassMappings"]
    assert mappings[0]["deviceClassNames"] == ["gpu.example.com"]

    path.write_text(KUEUE_CONFIG.replace("gpu.example.com", "mig.example.com"))
    await journal.wait(lambda e: len(config_upserts()) == 2, "the changed file", timeout=15)
    second = config_upserts()[1]
    assert second.object["resources"]["deviceClassMappings"][0]["deviceClassNames"] == [
        "mig.example.com"
    ]
    path.write_text("kind: [broken")  # a bad edit is logged and the last config stays
    await asyncio.sleep(3)
    assert len(config_upserts()) == 2
    assert "keeping the last one" in ingest.log_text()


async def test_configuration_from_a_configmap(
    ingest: IngestProcess, journal: Journal, api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    ingest.env["KUOTA_CONFIG_CONFIGMAP"] = f"{namespace}/kueue-manager-config"
    await ingest.start()
    await journal.start()
    await core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "unrelated"}, "data": {"x": "1"}}
    )
    cm = await core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {"name": "kueue-manager-config"},
            "data": {"controller_manager_config.yaml": KUEUE_CONFIG},
        },
    )
    ev = await journal.wait(
        lambda e: e.id == f"ConfigMap/{namespace}/kueue-manager-config@{_rv(cm)}",
        "the kueue-manager-config ConfigMap",
    )
    assert isinstance(ev, ObjectUpserted)
    assert ev.object["data"]["controller_manager_config.yaml"] == KUEUE_CONFIG
    parsed = parse_object(ev.object)
    assert isinstance(parsed, Configuration), parsed
    await core.delete_namespaced_config_map("kueue-manager-config", namespace)
    await journal.wait(
        lambda e: isinstance(e, ObjectDeleted) and e.kind == "ConfigMap",
        "ObjectDeleted of the ConfigMap",
    )
    others = [
        e.id
        for e in journal.events
        if e.id.startswith("ConfigMap/") and "kueue-manager" not in e.id
    ]
    assert others == [], f"other ConfigMaps of the namespace were journaled: {others}"


async def test_device_taint_rules_are_journaled_and_their_deletion_too(
    ingest: IngestProcess, journal: Journal, api: client.ApiClient, namespace: str
) -> None:
    """The stack serves DeviceTaintRules (resource.k8s.io/v1beta2, DRADeviceTaintRules:
    scripts/stack.d/kube.sh); ingest watches them (#17)."""
    custom = client.CustomObjectsApi(api)
    run = namespace.removeprefix("ingest-")
    name = f"taint-{run}"
    where = {"group": "resource.k8s.io", "version": "v1beta2", "plural": "devicetaintrules"}
    await ingest.start()
    await journal.start()
    rule = await custom.create_cluster_custom_object(
        **where,
        body={
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name, "labels": {RUN_LABEL: run}},
            "spec": {
                # a driver no slice has: the rule taints nothing another test sees
                "deviceSelector": {"driver": f"{run}.example.com"},
                "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
            },
        },
    )
    try:
        event_id = f"DeviceTaintRule//{name}@{rule['metadata']['resourceVersion']}"
        ev = await journal.wait(lambda e: e.id == event_id, event_id)
        assert isinstance(ev, ObjectUpserted)
        assert ev.object["apiVersion"] == "resource.k8s.io/v1beta2"
        assert ev.object["spec"]["taint"]["key"] == "example.com/maintenance"
        # the gauge is refreshed every 0.25 s, apart from the watch: polled
        up = 'kuota_ingest_watch_up{kind="DeviceTaintRule"}'
        deadline = time.monotonic() + 10
        while ingest.metrics()[up] != 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
        assert ingest.metrics()[up] == 1
    finally:
        await custom.delete_cluster_custom_object(**where, name=name)
    await journal.wait(
        lambda e: isinstance(e, ObjectDeleted) and (e.kind, e.name) == ("DeviceTaintRule", name),
        "ObjectDeleted DeviceTaintRule",
    )
