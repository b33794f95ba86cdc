"""The actuator service end to end on the real stack (Kafka, Redis, kube-apiserver, kwok).

Runs ``.venv/bin/kuota-actuator`` as a subprocess with its own topic prefix,
produces Decision records to ``<prefix>decisions`` and checks what lands in
the cluster:

- an Admitted decision unsuspends a suspended Job, injects the
  ResourceFlavor's nodeLabels and tolerations into its pod template, records
  the decision id and the original scheduling fields in annotations, writes
  ``Admitted`` / ``Started`` Events, and the pod runs on a kwok node;
- the same decision delivered again changes nothing (same resourceVersion);
- a Preempted decision suspends the Job and restores the pod template exactly;
- an Admitted decision for a Job that does not exist comes back on
  ``<prefix>journal`` as ``ActuationFailed``;
- the ClusterQueue's ``/status`` and the Redis status hash show the admitted
  workload and its usage, then the pending one after the preemption.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from test_crds import apply_crds

from kuota.actuation.patch import ANN_DECISION_ID, ANN_DECISION_OFFSET, ANN_ORIGINAL
from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.events.schema import ActuationFailed, Decision, WorkloadStopped, parse_event

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
ACTUATOR = REPO / ".venv" / "bin" / "kuota-actuator"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
WAIT = 60.0
RUN_LABEL = "kuota.dev/test-run"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists"}
FLAVOR_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]], what: str, timeout: float = WAIT
) -> T:
    """Poll ``probe`` until it returns something other than None/False."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def sample(text: str, name: str, **labels: str) -> float | None:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = ",".join(sorted((m.group(2) or "{}")[1:-1].split(","))) if m.group(2) else ""
        if got == want:
            return float(m.group(3))
    return None


@pytest.fixture
async def api(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api_client:
        await apply_crds(api_client)
        yield api_client


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    core = client.CoreV1Api(api)
    name = f"kuota-act-{uuid.uuid4().hex[:8]}"
    await core.create_namespace({"metadata": {"name": name, "labels": {"kuota.dev/test": "act"}}})
    try:
        yield name
    finally:
        try:
            await core.delete_namespace(name, propagation_policy="Background")
        except ApiException as e:
            if e.status != 404:
                raise


class Stack:
    """The queue objects of one run, deleted at the end."""

    def __init__(self, api: client.ApiClient, run: str) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.run = run
        self.flavor = f"kwok-{run}"
        self.cq = f"cq-{run}"

    async def create(self) -> None:
        await self.objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            "resourceflavors",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ResourceFlavor",
                "metadata": {"name": self.flavor},
                "spec": {"nodeLabels": {"type": "kwok"}, "tolerations": [FLAVOR_TOLERATION]},
            },
        )
        await self.objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            "clusterqueues",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ClusterQueue",
                "metadata": {"name": self.cq, "labels": {RUN_LABEL: self.run}},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": self.flavor,
                                    "resources": [{"name": "cpu", "nominalQuota": "4"}],
                                }
                            ],
                        }
                    ],
                },
            },
        )

    async def cq_status(self) -> dict[str, Any]:
        obj = await self.objects.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", self.cq)
        status: dict[str, Any] = obj.get("status") or {}
        return status

    async def delete(self) -> None:
        for plural, name in (("clusterqueues", self.cq), ("resourceflavors", self.flavor)):
            try:
                await self.objects.delete_cluster_custom_object(GROUP, VERSION, plural, name)
            except ApiException as e:
                if e.status != 404:
                    raise


def admitted_decision(run: str, stack: Stack, workload: str, uid: str, n: int) -> Decision:
    """The n-th Admitted of a run, into the stack's ClusterQueue and flavor."""
    return Decision(
        id=f"adm-{run}-{n}",
        cause=f"test/admit-{n}",
        cause_offset=n,
        at=time.time(),
        type="Admitted",
        workload=workload,
        uid=uid,
        cluster_queue=stack.cq,
        flavors={"main": {"cpu": stack.flavor}},
        usage={stack.flavor: {"cpu": "1"}},
    )


def job_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    # kwok (scripts/kube/stages/pod.yaml): keep the pod Running
                    "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}
                },
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [KWOK_TOLERATION],
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


class Producer:
    """Produces decisions, stamping ``at`` just before sending (for the latency figure)."""

    def __init__(self, settings: KafkaSettings, topic: str) -> None:
        self.topic = topic
        self.producer = AIOKafkaProducer(enable_idempotence=True, **settings.client_kwargs())

    async def send(self, d: Decision, *, restamp: bool = True) -> Decision:
        if restamp:
            d = d.model_copy(update={"at": time.time()})
        await self.producer.send_and_wait(
            self.topic, value=d.model_dump_json().encode(), key=(d.workload or "").encode()
        )
        return d


async def committed(settings: KafkaSettings, group: str, topic: str) -> int:
    probe = AIOKafkaConsumer(group_id=group, enable_auto_commit=False, **settings.client_kwargs())
    await probe.start()
    try:
        return (await probe.committed(TopicPartition(topic, 0))) or 0
    finally:
        await probe.stop()


async def end_offset(settings: KafkaSettings, topic: str) -> int:
    probe = AIOKafkaConsumer(**settings.client_kwargs())
    await probe.start()
    try:
        tp = TopicPartition(topic, 0)
        return int((await probe.end_offsets([tp]))[tp])
    finally:
        await probe.stop()


async def journal_events(settings: KafkaSettings, topic: str) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topic,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **settings.client_kwargs(),
    )
    await consumer.start()
    out: list[Any] = []
    try:
        batch = await consumer.getmany(timeout_ms=1000)
        for recs in batch.values():
            for r in recs:
                headers = dict(r.headers)
                out.append((headers.get("kuota-type"), parse_event(r.value or b"")))
    finally:
        await consumer.stop()
    return out


async def test_actuator_applies_decisions(
    api: client.ApiClient, namespace: str, kafka_bootstrap: str, redis_url: str, kubeconfig: str
) -> None:
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    run = uuid.uuid4().hex[:8]
    prefix = f"test-{run}."
    instance = prefix.rstrip(".")
    settings = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=prefix)
    topics = await ensure_topics(settings)
    stack = Stack(api, run)
    await stack.create()
    job_name = "train"
    created = await batch.create_namespaced_job(namespace, job_manifest(job_name))
    uid = created.metadata.uid
    workload = f"{namespace}/{job_name}"

    port = free_port()
    log_path = REPO / ".stack" / "logs" / f"test-actuator-{run}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "KUOTA_TOPIC_PREFIX": prefix,
        "KUOTA_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "KUOTA_REDIS_URL": redis_url,
        "KUBECONFIG": kubeconfig,
        "KUOTA_METRICS_PORT": str(port),
        # Only this run's ClusterQueues: other tests' actuators own theirs.
        "KUOTA_CLUSTERQUEUE_SELECTOR": f"{RUN_LABEL}={run}",
    }
    assert ACTUATOR.exists(), f"{ACTUATOR} missing: run .venv/bin/pip install -e '.[dev]'"
    log_file = log_path.open("w")
    proc = subprocess.Popen([str(ACTUATOR)], env=env, stdout=log_file, stderr=subprocess.STDOUT)
    producer = Producer(settings, topics.decisions)
    await producer.producer.start()
    redis = aioredis.from_url(redis_url)
    redis_key = f"{instance}:status:clusterqueues"

    async def job() -> dict[str, Any]:
        got = await batch.read_namespaced_job(job_name, namespace)
        return dict(api.sanitize_for_serialization(got))

    def alive() -> None:
        if proc.poll() is not None:
            pytest.fail(
                f"kuota-actuator exited ({proc.returncode}): {log_path.read_text()[-3000:]}"
            )

    try:

        async def live() -> bool:
            alive()
            return "live: consuming" in log_path.read_text()

        # Not needed for correctness (the group starts at the earliest offset),
        # but then the latency figure below is the steady-state one.
        await eventually(live, "the actuator live")

        # ------------------------------------------------- the quota in force
        # As the fold announces a ClusterQueue's quota: the status's only source of it.
        await producer.send(
            Decision(
                id=f"quota-{run}",
                cause="test/cq",
                cause_offset=0,
                at=time.time(),
                type="QuotaChanged",
                cluster_queue=stack.cq,
                object=f"ClusterQueue {stack.cq}",
                quota={stack.flavor: {"cpu": {"nominalQuota": "4"}}},
            )
        )

        # ---------------------------------------------------------------- Admitted
        admitted = await producer.send(admitted_decision(run, stack, workload, uid, 1))

        async def unsuspended() -> dict[str, Any] | None:
            alive()
            j = await job()
            return j if j["spec"].get("suspend") is False else None

        j = await eventually(unsuspended, "Job unsuspended by the Admitted decision")
        pod_spec = j["spec"]["template"]["spec"]
        assert pod_spec["nodeSelector"] == {"type": "kwok"}
        assert pod_spec["tolerations"] == [KWOK_TOLERATION, FLAVOR_TOLERATION]
        ann = j["metadata"]["annotations"]
        assert ann[ANN_DECISION_ID] == admitted.id
        assert ann[ANN_DECISION_OFFSET].startswith("1/")
        assert json.loads(ann[ANN_ORIGINAL]) == {
            "nodeSelector": None,
            "tolerations": [KWOK_TOLERATION],
        }

        async def running_pod() -> Any:
            pods = await core.list_namespaced_pod(
                namespace, label_selector=f"batch.kubernetes.io/job-name={job_name}"
            )
            for p in pods.items:
                if p.status.phase == "Running" and p.spec.node_name:
                    return p
            return None

        pod = await eventually(running_pod, "the Job's pod Running")
        assert pod.spec.node_name.startswith("kwok-"), pod.spec.node_name
        assert pod.spec.node_selector == {"type": "kwok"}

        async def job_events() -> dict[str, str]:
            evs = await core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={job_name}"
            )
            return {
                e.reason: e.message
                for e in evs.items
                if e.source and e.source.component == "kuota-actuator"
            }

        events = await eventually(
            lambda: _when(job_events(), lambda e: "Admitted" in e and "Started" in e),
            "Admitted and Started events",
        )
        created_at = created.metadata.creation_timestamp.timestamp()
        assert events["Admitted"] == (
            f"Admitted by ClusterQueue {stack.cq}, wait time since creation was "
            f"{max(0.0, admitted.at - created_at):.0f}s"
        )

        async def cq_admitted() -> dict[str, Any] | None:
            s = await stack.cq_status()
            return s if s.get("admittedWorkloads") == 1 else None

        status = await eventually(cq_admitted, "ClusterQueue status admittedWorkloads=1")
        assert status["pendingWorkloads"] == 0
        assert status["flavorsUsage"] == [
            {"name": stack.flavor, "resources": [{"name": "cpu", "total": "1", "borrowed": "0"}]}
        ]

        async def redis_doc() -> dict[str, Any] | None:
            raw = await redis.hget(redis_key, stack.cq)  # type: ignore[misc]
            doc = json.loads(raw) if raw else None
            return doc if doc and doc.get("admittedWorkloads") == 1 else None

        doc = await eventually(redis_doc, f"Redis {redis_key} field {stack.cq}")
        assert doc["updated_at"] > 0 and doc["flavorsUsage"] == status["flavorsUsage"]
        assert doc["quota"] == [
            {
                "flavor": stack.flavor,
                "resource": "cpu",
                "nominalQuota": "4",
                "borrowingLimit": None,
                "lendingLimit": None,
            }
        ]

        # ------------------------------------------------------ the same again
        # The Job controller writes the Job's status while its pod starts; wait
        # until it has settled, so only the actuator could change it now.
        async def settled() -> dict[str, Any] | None:
            j = await job()
            return j if (j.get("status") or {}).get("ready") == 1 else None

        await eventually(settled, "Job status ready=1")
        await asyncio.sleep(1)
        rv = (await job())["metadata"]["resourceVersion"]
        await producer.send(admitted, restamp=False)
        end = await end_offset(settings, topics.decisions)
        group = f"{instance}-actuator"

        async def consumed() -> bool:
            alive()
            return await committed(settings, group, topics.decisions) >= end

        await eventually(consumed, "the redelivered decision consumed")
        assert (await job())["metadata"]["resourceVersion"] == rv, "a duplicate changed the Job"
        text = scrape(port)
        assert (
            sample(text, "kuota_actuator_decisions_total", type="Admitted", outcome="skipped") == 1
        )
        assert (
            sample(text, "kuota_actuator_decisions_total", type="Admitted", outcome="applied") == 1
        )
        assert (sample(text, "kuota_actuation_latency_seconds_count", type="Admitted") or 0) == 1
        first = sample(text, "kuota_actuation_latency_seconds_sum", type="Admitted") or 0.0

        # ---------------------------------------------------------------- Preempted
        preempted = Decision(
            id=f"pre-{run}",
            cause="test/preempt",
            cause_offset=2,
            at=time.time(),
            type="Preempted",
            workload=workload,
            uid=uid,
            cluster_queue=stack.cq,
            reason="InClusterQueue",
            preemptor=f"{namespace}/big",
        )
        preempted = await producer.send(preempted)

        async def stopped() -> dict[str, Any] | None:
            alive()
            j = await job()
            done = j["metadata"].get("annotations", {}).get(ANN_DECISION_ID) == preempted.id
            return j if done else None

        j = await eventually(stopped, "Job stopped by the Preempted decision")
        assert j["spec"]["suspend"] is True
        assert "nodeSelector" not in j["spec"]["template"]["spec"]
        assert j["spec"]["template"]["spec"]["tolerations"] == [KWOK_TOLERATION]
        assert ANN_ORIGINAL not in j["metadata"]["annotations"]
        events = await eventually(
            lambda: _when(job_events(), lambda e: "Preempted" in e and "Stopped" in e),
            "Stopped and Preempted events",
        )
        assert "prioritization in the ClusterQueue" in events["Preempted"]

        async def cq_pending() -> dict[str, Any] | None:
            s = await stack.cq_status()
            return s if s.get("admittedWorkloads") == 0 and s.get("pendingWorkloads") == 1 else None

        status = await eventually(cq_pending, "ClusterQueue status after the preemption")
        # Its quota stays charged until its pods are gone (#23 items 2-3): the
        # actuator journals WorkloadStopped for the stop, the fold answers with
        # QuotaReleased (played here), and only then is the usage 0.
        assert status["flavorsUsage"][0]["resources"][0]["total"] == "1"

        async def pods_gone() -> WorkloadStopped | None:
            alive()
            for kind, ev in await journal_events(settings, topics.journal):
                if isinstance(ev, WorkloadStopped) and ev.decision_id == preempted.id:
                    assert kind == b"WorkloadStopped"
                    return ev
            return None

        gone = await eventually(pods_gone, "WorkloadStopped for the Preempted decision")
        assert (gone.workload, gone.uid) == (workload, uid)
        await producer.send(
            Decision(
                id=f"released-{run}",
                cause=gone.id,
                cause_offset=3,
                at=time.time(),
                type="QuotaReleased",
                workload=workload,
                uid=uid,
                cluster_queue=stack.cq,
                reason="PodsGone",
                usage={stack.flavor: {"cpu": "1"}},
                stop_id=preempted.id,
            )
        )

        async def cq_free() -> dict[str, Any] | None:
            s = await stack.cq_status()
            usage = s.get("flavorsUsage") or [{"resources": [{}]}]
            return s if usage[0]["resources"][0].get("total") == "0" else None

        await eventually(cq_free, "ClusterQueue status after QuotaReleased")

        # ------------------------------------------------------ a missing Job
        missing = Decision(
            id=f"missing-{run}",
            cause="test/missing",
            cause_offset=3,
            at=time.time(),
            type="Admitted",
            workload=f"{namespace}/no-such-job",
            uid="nope",
            cluster_queue=f"other-{run}",
            flavors={"main": {"cpu": stack.flavor}},
            usage={stack.flavor: {"cpu": "1"}},
        )
        missing = await producer.send(missing)

        async def failure() -> ActuationFailed | None:
            alive()
            for kind, ev in await journal_events(settings, topics.journal):
                if isinstance(ev, ActuationFailed) and ev.decision_id == missing.id:
                    assert kind == b"ActuationFailed"
                    return ev
            return None

        ev = await eventually(failure, "ActuationFailed on the journal")
        assert (ev.workload, ev.reason, ev.decision_type) == (
            f"{namespace}/no-such-job",
            "JobNotFound",
            "Admitted",
        )
        assert ev.at == missing.at

        text = scrape(port)
        stop = sample(text, "kuota_actuation_latency_seconds_sum", type="Preempted") or 0.0
        done = sample(text, "kuota_actuation_completion_seconds_sum", type="Preempted") or 0.0
        print(
            "\nactuation latency (decision at -> effective Job write): Admitted "
            f"{first * 1000:.0f} ms, Preempted {stop * 1000:.0f} ms (suspend; template "
            f"restored at {done * 1000:.0f} ms)"
        )
        assert sample(text, "kuota_actuation_failures_total", reason="JobNotFound") == 1

        # ---------------------------------------------------------------- shutdown
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text()[-3000:]
        out = log_path.read_text()
        assert "Traceback" not in out, out[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log_file.close()
        await producer.producer.stop()
        await redis.delete(redis_key)
        await redis.aclose()
        await stack.delete()


async def _when(value: Awaitable[T], pred: Callable[[T], bool]) -> T | None:
    got = await value
    return got if pred(got) else None
