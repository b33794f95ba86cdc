"""Queue order comes from the apiserver, not from users: the real kube-apiserver,
the real kuota-webhook and kuota-ingest (the journal), and two ServiceAccounts of a
per-test namespace acting with their own tokens (TokenRequest): ``alice``, a
user, and ``kuota-actuator``, the identity this ingest trusts
(``KUOTA_WEBHOOK_TRUSTED_USERS``).

- alice's Job that back-dates ``kuota.dev/created-at`` is refused, and the
  message names the annotation and why; her update that adds, changes or
  removes a ``kuota.dev/`` annotation is refused the same way, while her other
  edits and ``kuota.dev/active`` (the user's lever) pass;
- the trusted identity writes its annotations on the same Job;
- even a Job that reaches the cluster with a back-dated ``created-at`` (here:
  created by the trusted identity) is journaled without it, so the fold
  orders it by its ``creationTimestamp``, after a Job created a second earlier.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from stack_helpers import temp_namespace
from test_deploy_rbac_services import token_kubeconfig
from test_ingest_service import (
    RUN_LABEL,
    IngestProcess,
    Journal,
    _job,
    ingest_environment,
    webhook_certs,
)
from webhook_process import WebhookProcess, registered, webhook_environment

from kuota.api.duration import parse_rfc3339
from kuota.api.parse import parse_job
from kuota.api.types import WorkloadSpec
from kuota.events.schema import ObjectUpserted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CREATED_AT = "kuota.dev/created-at"
DECISION = "kuota.dev/decision-id"
DENIED = 'admission webhook "mutate-batch-v1-job.kuota.dev" denied the request: '
JOB_WRITER = {  # what both accounts may do in the test namespace
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": {"name": "job-writer"},
    "rules": [
        {
            "apiGroups": ["batch"],
            "resources": ["jobs"],
            "verbs": ["get", "list", "create", "update", "patch"],
        }
    ],
}


@pytest_asyncio.fixture
async def namespace(admin: client.ApiClient) -> AsyncIterator[str]:
    name = f"webhook-{uuid.uuid4().hex[:8]}"
    async with temp_namespace(admin, name, {RUN_LABEL: name}):
        core = client.CoreV1Api(admin)
        rbac = client.RbacAuthorizationV1Api(admin)
        await rbac.create_namespaced_role(name, JOB_WRITER)
        for sa in ("alice", "kuota-actuator"):
            await core.create_namespaced_service_account(name, {"metadata": {"name": sa}})
            binding = {
                "metadata": {"name": f"job-writer-{sa}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "job-writer",
                },
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": name}],
            }
            await rbac.create_namespaced_role_binding(name, binding)
        yield name


@pytest_asyncio.fixture
async def accounts(
    kubeconfig: str, namespace: str, tmp_path: Path
) -> AsyncIterator[dict[str, client.BatchV1Api]]:
    """``alice`` and ``kuota-actuator``, each with nothing but its own token."""
    out: dict[str, client.BatchV1Api] = {}
    apis = []
    try:
        for sa in ("alice", "kuota-actuator"):
            path = token_kubeconfig(kubeconfig, namespace, sa, tmp_path / f"{sa}.kubeconfig")
            api = await config.new_client_from_config(config_file=str(path))
            apis.append(api)
            out[sa] = client.BatchV1Api(api)
        # The authorizer learns the new bindings through a watch: wait until alice's answers.
        deadline = time.monotonic() + 20
        while True:
            try:
                await out["alice"].list_namespaced_job(namespace)
                break
            except ApiException as e:
                assert e.status == 403 and time.monotonic() < deadline, e
                await asyncio.sleep(0.2)
        yield out
    finally:
        for api in apis:
            await api.close()


@pytest_asyncio.fixture
async def ingest(
    kafka_bootstrap: str, redis_url: str, kubeconfig: str, namespace: str, tmp_path: Path
) -> AsyncIterator[IngestProcess]:
    """kuota-ingest watching only this test's Jobs, beside a kuota-webhook trusting
    this namespace's ``kuota-actuator``, registered for them."""
    certs = webhook_certs(tmp_path / "webhook")
    selector = f"{RUN_LABEL}={namespace}"
    env = ingest_environment(
        kafka_bootstrap, redis_url, kubeconfig, certs, KUOTA_JOB_LABEL_SELECTOR=selector
    )
    hook_env = webhook_environment(
        kubeconfig,
        certs,
        KUOTA_WEBHOOK_TRUSTED_USERS=f"system:serviceaccount:{namespace}:kuota-actuator",
        KUOTA_JOB_LABEL_SELECTOR=selector,
    )
    p = IngestProcess(env, tmp_path / "ingest.log")
    hook = WebhookProcess(hook_env, tmp_path / "webhook.log")
    p.webhook = hook  # type: ignore[attr-defined]
    try:
        await hook.start()
        await p.start()
        with registered(
            f"kuota-test-{namespace}", hook.url, certs["KUOTA_WEBHOOK_CA_FILE"], selector
        ):
            yield p
    finally:
        code, hook_code = p.stop(), hook.stop()
        assert code in (0, None), f"kuota-ingest exited with {code}:\n{p.log_text()[-3000:]}"
        assert hook_code in (0, None), f"kuota-webhook exited with {hook_code}"


def job(namespace: str, name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    manifest = _job(name, queue="lq", suspend=False, labels={RUN_LABEL: namespace})
    if annotations:
        manifest["metadata"]["annotations"] = annotations
    return manifest


async def refused(call: Any) -> str:
    """The apiserver's message for a write the webhook refused."""
    with pytest.raises(ApiException) as err:
        await call
    assert err.value.status == 403, err.value.body
    message: str = json.loads(err.value.body)["message"]
    assert message.startswith(DENIED), message
    return message.removeprefix(DENIED)


async def wait_webhook(batch: client.BatchV1Api, namespace: str) -> None:
    """The apiserver picks a new registration up asynchronously: probe with dry runs."""
    deadline = time.monotonic() + 20
    while True:
        probe = await batch.create_namespaced_job(namespace, job(namespace, "probe"), dry_run="All")
        if probe.spec.suspend:
            return
        assert time.monotonic() < deadline, "the webhook was not called within 20s"
        await asyncio.sleep(0.3)


async def test_users_may_not_write_kuota_annotations(
    ingest: IngestProcess, accounts: dict[str, client.BatchV1Api], namespace: str
) -> None:
    alice, kuota = accounts["alice"], accounts["kuota-actuator"]
    who = f'user "system:serviceaccount:{namespace}:alice"'
    await wait_webhook(alice, namespace)

    # Create: a back-dated Job is refused, with the annotation and the reason.
    message = await refused(
        alice.create_namespaced_job(namespace, job(namespace, "late", {CREATED_AT: "1"}))
    )
    assert message == (
        f"metadata.annotations[{CREATED_AT}]: Forbidden: {who} may not set it: only kuota "
        "writes kuota.dev/ annotations (queue order comes from metadata.creationTimestamp, "
        "which the apiserver sets); remove it; "
        "kuota.dev/active is the one kuota.dev/ annotation users may set"
    )
    with pytest.raises(ApiException) as err:
        await alice.read_namespaced_job("late", namespace)
    assert err.value.status == 404, "nothing was stored"

    mine = await alice.create_namespaced_job(namespace, job(namespace, "mine"))
    assert mine.spec.suspend is True, "a plain queued Job is still suspended"

    # Update: alice may not add a kuota.dev/ annotation; kuota's identity may.
    patch = {"metadata": {"annotations": {DECISION: "forged"}}}
    message = await refused(alice.patch_namespaced_job("mine", namespace, patch))
    assert f"metadata.annotations[{DECISION}]: Forbidden: {who} may not set it" in message
    assert "the actuator's record of the decision it applied" in message
    await kuota.patch_namespaced_job(
        "mine", namespace, {"metadata": {"annotations": {DECISION: "d-1"}}}
    )

    # ... nor change or remove what kuota wrote, nor back-date an existing Job.
    for change, verb in (({DECISION: "d-0"}, "change"), ({DECISION: None}, "remove")):
        patch = {"metadata": {"annotations": change}}
        message = await refused(alice.patch_namespaced_job("mine", namespace, patch))
        assert f"{who} may not {verb} it" in message, message
    patch = {"metadata": {"annotations": {CREATED_AT: "1"}}}
    assert CREATED_AT in await refused(alice.patch_namespaced_job("mine", namespace, patch))

    # Her other edits pass, with kuota's annotation kept; kuota.dev/active is hers.
    patch = {"metadata": {"labels": {"team": "x"}, "annotations": {"kuota.dev/active": "false"}}}
    edited = await alice.patch_namespaced_job("mine", namespace, patch)
    assert edited.metadata.labels["team"] == "x"
    assert edited.metadata.annotations == {DECISION: "d-1", "kuota.dev/active": "false"}
    # A full update (GET, modify, PUT) carries kuota's annotations along: allowed.
    edited.metadata.labels["team"] = "y"
    replaced = await alice.replace_namespaced_job("mine", namespace, edited)
    assert replaced.metadata.annotations[DECISION] == "d-1"
    assert replaced.spec.suspend is True, "an UPDATE is never mutated"

    hook: WebhookProcess = ingest.webhook  # type: ignore[attr-defined]
    m = hook.metrics()
    # >= : the apiserver may call the webhook twice for one PATCH (a retry from fresh state)
    assert m['kuota_webhook_requests_total{outcome="refused"}'] >= 5
    assert "webhook refused" in hook.log_text()


async def test_a_back_dated_job_is_journaled_without_created_at(
    ingest: IngestProcess, accounts: dict[str, client.BatchV1Api], namespace: str
) -> None:
    """Even with ``created-at`` on the cluster (the trusted identity may write it),
    the fold orders the Job by its creationTimestamp: after an earlier Job."""
    kuota = accounts["kuota-actuator"]
    journal = await Journal(
        ingest.env["KUOTA_KAFKA_BOOTSTRAP"], f"{ingest.env['KUOTA_TOPIC_PREFIX']}journal"
    ).start()
    try:
        await wait_webhook(kuota, namespace)
        first = await kuota.create_namespaced_job(namespace, job(namespace, "first"))
        # creationTimestamp has whole seconds: let the next Job be a second younger.
        first_s = first.metadata.creation_timestamp.timestamp()
        await asyncio.sleep(max(0.0, first_s + 1.05 - time.time()))
        back = await kuota.create_namespaced_job(
            namespace, job(namespace, "back-dated", {CREATED_AT: "1", "team": "x"})
        )
        assert back.metadata.annotations[CREATED_AT] == "1", "on the cluster it is there"
        assert back.spec.suspend is True

        specs: dict[str, WorkloadSpec] = {}
        for name in ("first", "back-dated"):
            event = await journal.wait(
                lambda e, n=name: isinstance(e, ObjectUpserted)
                and e.id.startswith(f"Job/{namespace}/{n}@"),
                f"upsert of {name}",
            )
            assert isinstance(event, ObjectUpserted)
            annotations = event.object["metadata"].get("annotations") or {}
            assert CREATED_AT not in annotations, "the journal never carries created-at"
            spec = parse_job(event.object, at=event.at)
            assert isinstance(spec, WorkloadSpec), spec
            stamp = event.object["metadata"]["creationTimestamp"]
            assert spec.creation_seconds == parse_rfc3339(stamp), "the apiserver's time"
            specs[name] = spec
        journaled = await journal.wait(
            lambda e: isinstance(e, ObjectUpserted) and "back-dated" in e.id, "back-dated"
        )
        assert isinstance(journaled, ObjectUpserted)
        # only the annotations the fold reads are journaled (#23 item 5): not "team"
        assert "annotations" not in journaled.object["metadata"]
        assert specs["back-dated"].creation_seconds > specs["first"].creation_seconds
    finally:
        await journal.stop()
