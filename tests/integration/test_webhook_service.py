"""kuota-webhook as a process of its own on the real kube-apiserver (#23 items 7, 8).

- The door does not depend on ingest: with kuota-ingest killed (SIGKILL) the
  webhook, a separate process with no Kafka or Redis setting, still suspends
  every labelled Job at creation and leaves an unlabelled one alone.
- The serving certificate rotates without an outage: the webhook is registered
  with a CA and serves certificate A from a directory laid out as a Secret
  volume (``tls.crt -> ..data/tls.crt``); while Jobs are being created, the
  directory's ``..data`` is swapped atomically to certificate B from the same
  CA (what the kubelet does when cert-manager renews the Secret). Every
  creation succeeds and is suspended, the webhook logs the reload, and a new
  handshake gets B.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import ssl
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from stack_helpers import temp_namespace
from test_ingest_service import IngestProcess, _job, ingest_environment, webhook_certs
from webhook_process import WebhookProcess, registered, webhook_environment

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

RUN_LABEL = "kuota.dev/test-run"


@pytest_asyncio.fixture
async def api(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    a = await config.new_client_from_config(config_file=kubeconfig)
    try:
        yield a
    finally:
        await a.close()


@pytest_asyncio.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"webhook-{uuid.uuid4().hex[:8]}"
    async with temp_namespace(api, name, {RUN_LABEL: name}):
        yield name


def job(namespace: str, name: str, queue: str | None = "lq") -> dict[str, object]:
    return _job(name, queue=queue, suspend=False, labels={RUN_LABEL: namespace})


async def wait_called(batch: client.BatchV1Api, namespace: str) -> None:
    """The apiserver picks a new registration up asynchronously: probe with dry runs."""
    deadline = time.monotonic() + 20
    while True:
        probe = await batch.create_namespaced_job(namespace, job(namespace, "probe"), dry_run="All")
        if probe.spec.suspend:
            return
        assert time.monotonic() < deadline, "the webhook was not called within 20s"
        await asyncio.sleep(0.2)


async def test_jobs_are_suspended_at_creation_with_ingest_killed(
    kafka_bootstrap: str,
    redis_url: str,
    kubeconfig: str,
    api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    certs = webhook_certs(tmp_path / "certs")
    selector = f"{RUN_LABEL}={namespace}"
    hook_env = webhook_environment(kubeconfig, certs, KUOTA_JOB_LABEL_SELECTOR=selector)
    assert not {"KUOTA_KAFKA_BOOTSTRAP", "KUOTA_REDIS_URL"} & set(hook_env)
    hook = WebhookProcess(hook_env, tmp_path / "webhook.log")
    ingest = IngestProcess(
        ingest_environment(
            kafka_bootstrap, redis_url, kubeconfig, certs, KUOTA_JOB_LABEL_SELECTOR=selector
        ),
        tmp_path / "ingest.log",
    )
    batch = client.BatchV1Api(api)
    try:
        await hook.start()
        await ingest.start()
        with registered(
            f"kuota-test-{namespace}", hook.url, certs["KUOTA_WEBHOOK_CA_FILE"], selector
        ):
            await wait_called(batch, namespace)
            assert ingest.proc is not None
            ingest.proc.send_signal(signal.SIGKILL)
            assert ingest.proc.wait(10) == -signal.SIGKILL

            for i in range(10):
                created = await batch.create_namespaced_job(namespace, job(namespace, f"q{i}"))
                assert created.spec.suspend is True, f"q{i}: created running with ingest down"
            stored = await batch.read_namespaced_job("q9", namespace)
            assert stored.spec.suspend is True
            plain = await batch.create_namespaced_job(namespace, job(namespace, "plain", None))
            assert plain.spec.suspend is False, "a Job without the queue label is left alone"
            m = hook.metrics()
            assert m['kuota_webhook_requests_total{outcome="suspended"}'] >= 10
            assert m["kuota_webhook_view_complete"] == 1
    finally:
        ingest.stop()
        code = hook.stop()
    assert code == 0, f"kuota-webhook exited with {code}:\n{hook.log_text()[-3000:]}"
    assert "webhook suspended" in hook.log_text()


def secret_volume(folder: Path, pair: Path, version: str) -> None:
    """Lay ``pair``'s tls.crt/tls.key out in ``folder`` as the kubelet does a Secret
    volume: files in ``..<version>``, ``..data`` a symlink to it (swapped atomically),
    ``tls.crt -> ..data/tls.crt``."""
    target = folder / f"..{version}"
    target.mkdir()
    for name in ("tls.crt", "tls.key"):
        shutil.copy(pair / name, target / name)
    tmp = folder / "..data_tmp"
    tmp.symlink_to(target.name)
    tmp.replace(folder / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(f"..data/{name}")


def served_certificate(port: int, ca: str) -> bytes:
    ctx = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der
    return der


def der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


async def test_the_serving_certificate_rotates_without_an_outage(
    kubeconfig: str, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    a = Path(webhook_certs(tmp_path / "a")["KUOTA_WEBHOOK_CA_FILE"]).parent
    b = tmp_path / "b"
    b.mkdir()
    for name in ("ca.crt", "ca.key"):  # the same CA: webhook-certs makes a new serving pair
        shutil.copy(a / name, b / name)
    webhook_certs(b)
    assert der(a / "tls.crt") != der(b / "tls.crt")
    live = tmp_path / "live"
    live.mkdir()
    secret_volume(live, a, "1")
    certs = {
        "KUOTA_WEBHOOK_CERT_FILE": str(live / "tls.crt"),
        "KUOTA_WEBHOOK_KEY_FILE": str(live / "tls.key"),
    }
    selector = f"{RUN_LABEL}={namespace}"
    env = webhook_environment(
        kubeconfig, certs, KUOTA_JOB_LABEL_SELECTOR=selector, KUOTA_WEBHOOK_CERT_CHECK_SECONDS="0.2"
    )
    hook = WebhookProcess(env, tmp_path / "webhook.log")
    port = int(env["KUOTA_WEBHOOK_PORT"])
    ca = str(a / "ca.crt")
    batch = client.BatchV1Api(api)
    failures: list[str] = []
    created: list[str] = []
    swapped = asyncio.Event()

    async def create_all_along() -> None:
        i = 0
        after = 0
        while after < 15:  # keeps creating until 15 creations after the reload
            name = f"r{i}"
            i += 1
            try:
                j = await batch.create_namespaced_job(namespace, job(namespace, name))
            except ApiException as e:
                failures.append(f"{name}: {e.status} {e.body}")
                continue
            created.append(name)
            if j.spec.suspend is not True:
                failures.append(f"{name}: created running")
            if swapped.is_set():
                after += 1
            await asyncio.sleep(0.05)

    try:
        await hook.start()
        assert served_certificate(port, ca) == der(a / "tls.crt")
        with registered(f"kuota-test-{namespace}", hook.url, ca, selector):
            await wait_called(batch, namespace)
            creating = asyncio.create_task(create_all_along())
            await asyncio.sleep(1.0)
            secret_volume(live, b, "2")  # cert-manager renewed: the kubelet swaps ..data
            deadline = time.monotonic() + 10
            while "serving certificate" not in hook.log_text() or " reloaded" not in (
                hook.log_text()
            ):
                assert time.monotonic() < deadline, "no reload within 10s:\n" + hook.log_text()
                await asyncio.sleep(0.05)
            swapped.set()
            await asyncio.wait_for(creating, 60)
            assert served_certificate(port, ca) == der(b / "tls.crt"), "new handshakes get B"
            m = hook.metrics()
            assert m['kuota_webhook_certificate_reloads_total{result="loaded"}'] == 1
    finally:
        code = hook.stop()
    assert failures == [], failures
    assert len(created) >= 30, created
    assert code == 0, f"kuota-webhook exited with {code}:\n{hook.log_text()[-3000:]}"
