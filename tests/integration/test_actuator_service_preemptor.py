"""A preemption's Events in the victim's namespace name the preemptor by uid (#23 item 11).

Two tenants, two namespaces, the real actuator (``.venv/bin/kuota-actuator``)
on the local stack: tenant A's Job is admitted and running, then preempted for
tenant B's Job. The ``Stopped`` and ``Preempted`` Events the actuator writes
into A's namespace carry B's Job uid (read from the actuator's Job cache) and
neither B's namespace nor its Job's name. The setting that keeps the name
(``KUOTA_ACTUATOR_EVENTS_NAME_PREEMPTOR``) is covered by
``tests/unit/actuator/test_actuator_events_preemptor.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from test_actuator_service import (
    ACTUATOR,
    REPO,
    RUN_LABEL,
    Producer,
    Stack,
    admitted_decision,
    eventually,
    free_port,
    job_manifest,
)
from test_crds import apply_crds

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import ensure_topics
from kuota.events.schema import Decision

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture
async def tenants(admin: client.ApiClient) -> AsyncIterator[tuple[str, str]]:
    """Tenant A's namespace (the victim's) and tenant B's (the preemptor's)."""
    await apply_crds(admin)
    core = client.CoreV1Api(admin)
    run = uuid.uuid4().hex[:8]
    names = (f"kuota-victim-{run}", f"kuota-preemptor-{run}")
    for name in names:
        await core.create_namespace(
            {"metadata": {"name": name, "labels": {"kuota.dev/test": "act"}}}
        )
    try:
        yield names
    finally:
        for name in names:
            try:
                await core.delete_namespace(name, propagation_policy="Background")
            except ApiException as e:
                if e.status != 404:
                    raise


async def test_a_victims_events_name_the_preemptor_by_uid_only(
    admin: client.ApiClient,
    tenants: tuple[str, str],
    kafka_bootstrap: str,
    redis_url: str,
    kubeconfig: str,
) -> None:
    victim_ns, preemptor_ns = tenants
    batch, core = client.BatchV1Api(admin), client.CoreV1Api(admin)
    run = uuid.uuid4().hex[:8]
    prefix = f"test-{run}."
    settings = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=prefix)
    topics = await ensure_topics(settings)
    stack = Stack(admin, run)
    await stack.create()
    victim = await batch.create_namespaced_job(victim_ns, job_manifest("small"))
    preemptor = await batch.create_namespaced_job(preemptor_ns, job_manifest("big"))
    preemptor_uid = preemptor.metadata.uid
    workload = f"{victim_ns}/small"

    log_path = REPO / ".stack" / "logs" / f"test-actuator-preemptor-{run}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "KUOTA_TOPIC_PREFIX": prefix,
        "KUOTA_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "KUOTA_REDIS_URL": redis_url,
        "KUBECONFIG": kubeconfig,
        "KUOTA_METRICS_PORT": str(free_port()),
        "KUOTA_CLUSTERQUEUE_SELECTOR": f"{RUN_LABEL}={run}",
    }
    env.pop("KUOTA_ACTUATOR_EVENTS_NAME_PREEMPTOR", None)  # the default
    log_file = log_path.open("w")
    proc = subprocess.Popen([str(ACTUATOR)], env=env, stdout=log_file, stderr=subprocess.STDOUT)
    producer = Producer(settings, topics.decisions)
    await producer.producer.start()

    def alive() -> None:
        if proc.poll() is not None:
            pytest.fail(
                f"kuota-actuator exited ({proc.returncode}): {log_path.read_text()[-3000:]}"
            )

    async def job() -> dict[str, Any]:
        got = await batch.read_namespaced_job("small", victim_ns)
        return dict(admin.sanitize_for_serialization(got))

    async def victim_events() -> dict[str, str]:
        evs = await core.list_namespaced_event(victim_ns)
        return {
            e.reason: e.message
            for e in evs.items
            if e.source and e.source.component == "kuota-actuator"
        }

    try:
        await producer.send(admitted_decision(run, stack, workload, victim.metadata.uid, 1))

        async def running() -> bool:
            alive()
            return (await job())["spec"].get("suspend") is False

        await eventually(running, "the victim's Job unsuspended")
        preempted = await producer.send(
            Decision(
                id=f"pre-{run}",
                cause="test/preempt",
                cause_offset=2,
                at=time.time(),
                type="Preempted",
                workload=workload,
                uid=victim.metadata.uid,
                cluster_queue=stack.cq,
                reason="InClusterQueue",
                message=(
                    f"Preempted to accommodate a workload ({preemptor_ns}/big) "
                    "due to prioritization in the ClusterQueue"
                ),
                preemptor=f"{preemptor_ns}/big",
            )
        )

        async def both() -> dict[str, str] | None:
            alive()
            got = await victim_events()
            return got if "Preempted" in got and "Stopped" in got else None

        events = await eventually(both, f"Stopped and Preempted events in {victim_ns}")
        want = (
            f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: {preemptor_uid})"
            " due to prioritization in the ClusterQueue"
        )
        for reason in ("Stopped", "Preempted"):
            message = events[reason]
            assert message == want, f"{reason}: {message}"
            assert preemptor_ns not in message and "big" not in message, message
        everything = " ".join((await victim_events()).values())
        assert preemptor_ns not in everything, everything
        assert (await job())["spec"]["suspend"] is True, f"{preempted.id} not applied"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text()[-3000:]
        assert "Traceback" not in log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log_file.close()
        await producer.producer.stop()
        await stack.delete()
