"""Least privilege is also enough: kuota's services run on their ServiceAccounts alone.

With deploy/base's RBAC applied for real (``rbac_helpers.applied_rbac``; the
matrix of what each account may do is ``test_deploy_rbac.py``),
``kuota-ingest`` and ``kuota-actuator`` run as subprocesses with a kubeconfig
holding nothing but their ServiceAccount's token (TokenRequest): ingest lists
every source and journals the Configuration ConfigMap; the actuator applies an
Admitted and a Preempted decision to a Job, writes Events and the
ClusterQueue's status — without a 403 in their logs. The control: ingest on
``kuota-admission``'s token (no grants) is refused and says so.

Everything a run creates is deleted at the end (cluster-scoped objects by
name, the namespace without waiting).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from rbac_helpers import CONFIG, Rbac, applied_rbac
from test_deploy_manifests import RUN_LABEL, kubectl, relocate, render

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
live = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rbac(kubeconfig: str) -> AsyncIterator[Rbac]:
    async with applied_rbac(kubeconfig) as r:
        yield r


# ------------------------------------------------------------ the services, as their accounts


def token_kubeconfig(admin: str, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig for the stack's apiserver that authenticates as ``sa`` (TokenRequest)."""
    token = kubectl(
        "create", "token", sa, "-n", namespace, "--duration=30m", kubeconfig=admin
    ).stdout.strip()
    cfg = yaml.safe_load(Path(admin).read_text())
    contexts = {c["name"]: c["context"] for c in cfg["contexts"]}
    clusters = {c["name"]: c["cluster"] for c in cfg["clusters"]}
    cluster_cfg = dict(clusters[contexts[cfg["current-context"]]["cluster"]])
    ca = cluster_cfg.get("certificate-authority")
    if ca and not Path(ca).is_absolute():
        cluster_cfg["certificate-authority"] = str(Path(admin).parent / ca)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stack", "cluster": cluster_cfg}],
                "users": [{"name": sa, "user": {"token": token}}],
                "contexts": [{"name": sa, "context": {"cluster": "stack", "user": sa}}],
                "current-context": sa,
            }
        )
    )
    return path


class Service:
    """A kuota service as a subprocess, its output in a log file."""

    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        binary = Path(sys.executable).with_name(f"kuota-{name}")
        assert binary.exists(), f"{binary} missing: run .venv/bin/pip install -e '.[dev]'"
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [str(binary)], env=env, stdout=self._out, stderr=subprocess.STDOUT
        )

    def text(self) -> str:
        return self.log.read_text()

    def alive(self) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"kuota-{self.name} exited {self.proc.returncode}:\n{self.text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._out.close()

    def forbidden(self) -> list[str]:
        """Warnings and errors about a refused API call (the apiserver says
        "... is forbidden: User ... cannot ...", with status 403)."""
        return [
            line
            for line in self.text().splitlines()
            if (" WARNING " in line or " ERROR " in line)
            and re.search(r"forbidden|HTTP 403|\b403: ", line, re.IGNORECASE)
        ]


async def eventually(probe: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.25)
    pytest.fail(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def service_env(kafka_bootstrap: str, redis_url: str, kubeconfig: Path, run: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUOTA_")}
    return {
        **env,
        "KUOTA_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "KUOTA_REDIS_URL": redis_url,
        "KUOTA_TOPIC_PREFIX": f"test-{run}.",
        "KUBECONFIG": str(kubeconfig),
        "KUOTA_METRICS_PORT": "0",
        "KUOTA_SNAPSHOT_KEY": os.environ["KUOTA_SNAPSHOT_KEY"],  # the session's (conftest)
        "KUOTA_SEEN_KEY": os.environ["KUOTA_SEEN_KEY"],
    }


@live
async def test_ingest_runs_on_its_service_account_alone(
    rbac: Rbac, kubeconfig: str, kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """Every watch of kuota-ingest lists (it says ``ready``), the Configuration
    ConfigMap included, with nothing but the token of ``kuota-ingest``."""
    ns = rbac.namespace
    (config_map,) = [
        d
        for d in relocate(render("overlays/production"), ns)
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == CONFIG
    ]
    kubectl(
        "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(config_map), kubeconfig=kubeconfig
    )
    run = uuid.uuid4().hex[:8]
    env = service_env(
        kafka_bootstrap,
        redis_url,
        token_kubeconfig(kubeconfig, ns, "kuota-ingest", tmp_path / "ingest.kubeconfig"),
        run,
    )
    env["KUOTA_CONFIG_CONFIGMAP"] = f"{ns}/{CONFIG}"
    env["KUOTA_WEBHOOK_PORT"] = "0"
    svc = Service("ingest", env, tmp_path / "ingest.log")
    try:

        async def ready() -> str | None:
            svc.alive()
            return next((line for line in svc.text().splitlines() if " ready in " in line), None)

        line = await eventually(ready, f"kuota-ingest ready as kuota-ingest ({svc.log})")
        assert "waiting for kinds not served" not in line, line

        async def config_journaled() -> bool:
            return f"ConfigMap/{ns}/{CONFIG}@" in svc.text()

        await eventually(config_journaled, "the Configuration ConfigMap journaled")
        assert svc.forbidden() == [], svc.forbidden()
    finally:
        svc.stop()


@live
async def test_actuator_runs_on_its_service_account_alone(
    rbac: Rbac, kubeconfig: str, kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """With only the token of ``kuota-actuator``: an Admitted decision unsuspends a
    Job (flavors injected) and writes Events and the ClusterQueue's status; a
    Preempted decision suspends it again and restores its template."""
    from aiokafka import AIOKafkaProducer

    from kuota.actuation.patch import ANN_DECISION_ID
    from kuota.bus.settings import KafkaSettings
    from kuota.bus.topics import ensure_topics
    from kuota.events.schema import Decision

    ns = rbac.namespace
    run = uuid.uuid4().hex[:8]
    objects = client.CustomObjectsApi(rbac.api)
    batch, core = client.BatchV1Api(rbac.api), client.CoreV1Api(rbac.api)
    flavor, cq = f"kwok-{run}", f"cq-{run}"
    await objects.create_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"type": "kwok"}},
        },
    )
    await objects.create_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq, "labels": {RUN_LABEL: run}},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                        ],
                    }
                ],
            },
        },
    )
    job = await batch.create_namespaced_job(
        ns,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {
                "suspend": True,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "1"}},
                            }
                        ],
                    },
                },
            },
        },
    )
    settings = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=f"test-{run}.")
    topics = await ensure_topics(settings)
    producer = AIOKafkaProducer(enable_idempotence=True, **settings.client_kwargs())
    await producer.start()
    env = service_env(
        kafka_bootstrap,
        redis_url,
        token_kubeconfig(kubeconfig, ns, "kuota-actuator", tmp_path / "actuator.kubeconfig"),
        run,
    )
    env["KUOTA_CLUSTERQUEUE_SELECTOR"] = f"{RUN_LABEL}={run}"
    svc = Service("actuator", env, tmp_path / "actuator.log")
    workload = f"{ns}/train"

    async def send(d: Decision) -> None:
        await producer.send_and_wait(
            topics.decisions, value=d.model_dump_json().encode(), key=workload.encode()
        )

    async def read_job() -> Any:
        svc.alive()
        return await batch.read_namespaced_job("train", ns)

    try:

        async def live() -> bool:
            svc.alive()
            return "live: consuming" in svc.text()

        await eventually(live, f"kuota-actuator live ({svc.log})")
        await send(
            Decision(
                id=f"adm-{run}",
                cause="test/admit",
                cause_offset=1,
                at=time.time(),
                type="Admitted",
                workload=workload,
                uid=job.metadata.uid,
                cluster_queue=cq,
                flavors={"main": {"cpu": flavor}},
                usage={flavor: {"cpu": "1"}},
            )
        )

        async def unsuspended() -> Any:
            j = await read_job()
            return j if j.spec.suspend is False else None

        j = await eventually(unsuspended, "the Job unsuspended by the Admitted decision")
        assert j.spec.template.spec.node_selector == {"type": "kwok"}

        async def events() -> set[str]:
            evs = await core.list_namespaced_event(ns, field_selector="involvedObject.name=train")
            return {
                e.reason for e in evs.items if e.source and e.source.component == "kuota-actuator"
            }

        async def admitted_events() -> set[str] | None:
            got = await events()
            return got if {"Admitted", "Started"} <= got else None

        await eventually(admitted_events, "Admitted and Started Events")

        async def cq_status() -> Any:
            svc.alive()
            obj = await objects.get_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", cq
            )
            status = obj.get("status") or {}
            return status if status.get("admittedWorkloads") == 1 else None

        await eventually(cq_status, "ClusterQueue /status admittedWorkloads=1")

        await send(
            Decision(
                id=f"pre-{run}",
                cause="test/preempt",
                cause_offset=2,
                at=time.time(),
                type="Preempted",
                workload=workload,
                uid=job.metadata.uid,
                cluster_queue=cq,
                reason="InClusterQueue",
                preemptor=f"{ns}/big",
            )
        )

        async def stopped() -> Any:
            j = await read_job()
            done = (j.metadata.annotations or {}).get(ANN_DECISION_ID) == f"pre-{run}"
            return j if done else None

        j = await eventually(stopped, "the Job stopped and restored by the Preempted decision")
        assert j.spec.suspend is True
        assert not j.spec.template.spec.node_selector
        assert svc.forbidden() == [], svc.forbidden()
    finally:
        svc.stop()
        await producer.stop()
        for plural, name in (("clusterqueues", cq), ("resourceflavors", flavor)):
            try:
                await objects.delete_cluster_custom_object(
                    "kueue.x-k8s.io", "v1beta2", plural, name
                )
            except ApiException as e:
                if e.status != 404:
                    raise


@live
async def test_ingest_on_a_token_without_grants_is_refused_and_says_so(
    rbac: Rbac, kubeconfig: str, kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """The control for the two tests above: as ``kuota-admission`` (no grants),
    ingest never gets ready and its log shows the refusals they look for."""
    env = service_env(
        kafka_bootstrap,
        redis_url,
        token_kubeconfig(kubeconfig, rbac.namespace, "kuota-admission", tmp_path / "k"),
        uuid.uuid4().hex[:8],
    )
    env["KUOTA_WEBHOOK_PORT"] = "0"
    svc = Service("ingest", env, tmp_path / "ingest.log")
    try:

        async def refused() -> list[str]:
            svc.alive()
            return svc.forbidden()

        await eventually(refused, "a refusal in the log")
        assert " ready in " not in svc.text()
    finally:
        svc.stop()
