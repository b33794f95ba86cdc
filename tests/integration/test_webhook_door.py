"""The door (#22) on the real kube-apiserver with the real kuota-webhook: a user
with the namespace ``edit`` ClusterRole (``alice``, her own ServiceAccount
token) tries each bypass and gets 403 with the webhook's message; kuota's
actuator identity (``KUOTA_WEBHOOK_TRUSTED_USERS``) does the same writes.

The test namespace is managed (a Configuration file with
``manageJobsWithoutQueueName`` and a ``managedJobsNamespaceSelector`` that
matches only it), so an unlabelled Job there is created suspended and guarded
like a queued one. The registration is scripts/webhook-register's two entries,
narrowed to this test's Jobs (``--match-label``), in the strict form
(``--managed-from``: the unlabelled entry Fail, for the managed namespace only).
A running Job may not change its parallelism; a suspended one may.
"""

from __future__ import annotations

import asyncio
import json
import re
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
from test_ingest_service import RUN_LABEL, _job, webhook_certs
from webhook_process import WebhookProcess, registered, webhook_environment

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

QUEUE = "kueue.x-k8s.io/queue-name"
LABEL = f"metadata.labels[{QUEUE}]"
DENIED = re.compile(r'admission webhook "([a-z0-9.-]+)" denied the request: ')
KUOTA_ROLE = {  # the actuator's writes on Jobs, in the test namespace
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


def _binding(name: str, sa: str, namespace: str, kind: str, role: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
    }


@pytest_asyncio.fixture
async def namespace(admin: client.ApiClient) -> AsyncIterator[str]:
    name = f"door-{uuid.uuid4().hex[:8]}"
    async with temp_namespace(admin, name, {RUN_LABEL: name}):
        core = client.CoreV1Api(admin)
        rbac = client.RbacAuthorizationV1Api(admin)
        await rbac.create_namespaced_role(name, KUOTA_ROLE)
        for sa in ("alice", "kuota-actuator"):
            await core.create_namespaced_service_account(name, {"metadata": {"name": sa}})
        # alice: the namespace `edit` ClusterRole, what a team member usually gets
        await rbac.create_namespaced_role_binding(
            name, _binding("alice-edit", "alice", name, "ClusterRole", "edit")
        )
        await rbac.create_namespaced_role_binding(
            name, _binding("kuota-jobs", "kuota-actuator", name, "Role", "job-writer")
        )
        yield name


@pytest_asyncio.fixture
async def accounts(
    kubeconfig: str, namespace: str, tmp_path: Path
) -> AsyncIterator[dict[str, client.BatchV1Api]]:
    out: dict[str, client.BatchV1Api] = {}
    apis = []
    try:
        for sa in ("alice", "kuota-actuator"):
            path = token_kubeconfig(kubeconfig, namespace, sa, tmp_path / f"{sa}.kubeconfig")
            api = await config.new_client_from_config(config_file=str(path))
            apis.append(api)
            out[sa] = client.BatchV1Api(api)
        deadline = time.monotonic() + 20
        for sa in out:  # the authorizer learns new bindings through a watch
            while True:
                try:
                    await out[sa].list_namespaced_job(namespace)
                    break
                except ApiException as e:
                    assert e.status == 403 and time.monotonic() < deadline, e
                    await asyncio.sleep(0.2)
        yield out
    finally:
        for api in apis:
            await api.close()


@pytest_asyncio.fixture
async def webhook(kubeconfig: str, namespace: str, tmp_path: Path) -> AsyncIterator[WebhookProcess]:
    certs = webhook_certs(tmp_path / "webhook")
    config_file = tmp_path / "kueue-config.yaml"
    config_file.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
        "kind: Configuration\n"
        "manageJobsWithoutQueueName: true\n"
        "managedJobsNamespaceSelector:\n"
        f"  matchLabels:\n    {RUN_LABEL}: {namespace}\n"
    )
    env = webhook_environment(
        kubeconfig,
        certs,
        KUOTA_WEBHOOK_TRUSTED_USERS=f"system:serviceaccount:{namespace}:kuota-actuator",
        KUOTA_JOB_LABEL_SELECTOR=f"{RUN_LABEL}={namespace}",
        KUOTA_CONFIG_FILE=str(config_file),
    )
    p = WebhookProcess(env, tmp_path / "webhook.log")
    try:
        await p.start()
        with registered(
            f"kuota-door-{namespace}",
            p.url,
            certs["KUOTA_WEBHOOK_CA_FILE"],
            f"{RUN_LABEL}={namespace}",
            "--managed-from",  # the strict form: Fail for the unlabelled Jobs of this namespace
            str(config_file),
        ):
            yield p
    finally:
        code = p.stop()
        assert code in (0, None), f"kuota-webhook exited with {code}:\n{p.log_text()[-3000:]}"


def job(namespace: str, name: str, *, queue: str | None = "lq", suspend: bool = False) -> Any:
    return _job(name, queue=queue, suspend=suspend, labels={RUN_LABEL: namespace})


async def refused(call: Any) -> tuple[str, str]:
    """(the webhook entry that refused, its message) for a write the door refused."""
    with pytest.raises(ApiException) as err:
        await call
    assert err.value.status == 403, err.value.body
    message: str = json.loads(err.value.body)["message"]
    m = DENIED.match(message)
    assert m, message
    return m.group(1), message[m.end() :]


async def wait_door(batch: client.BatchV1Api, namespace: str) -> None:
    """Both entries answer (the apiserver picks registrations up asynchronously, and
    the webhook reads the Configuration file and the Namespace at start)."""
    deadline = time.monotonic() + 30
    for queue in ("lq", None):
        while True:
            probe = await batch.create_namespaced_job(
                namespace, job(namespace, "probe", queue=queue), dry_run="All"
            )
            if probe.spec.suspend:
                break
            assert time.monotonic() < deadline, f"no suspend within 30s (queue {queue})"
            await asyncio.sleep(0.3)


def _label(value: str | None) -> dict[str, Any]:
    return {"metadata": {"labels": {QUEUE: value}}}


UNSUSPEND = {"spec": {"suspend": False}}
SUSPEND = {"spec": {"suspend": True}}


async def test_a_namespace_editor_cannot_get_past_the_queue(
    webhook: WebhookProcess,
    accounts: dict[str, client.BatchV1Api],
    namespace: str,
    admin: client.ApiClient,
) -> None:
    alice, kuota = accounts["alice"], accounts["kuota-actuator"]
    who = f'user "system:serviceaccount:{namespace}:alice"'
    await wait_door(alice, namespace)
    queued_entry, other_entry = "mutate-batch-v1-job.kuota.dev", "unlabelled-batch-v1-job.kuota.dev"

    # 1. unsuspend a queued Job
    created = await alice.create_namespaced_job(namespace, job(namespace, "a"))
    assert created.spec.suspend is True
    entry, message = await refused(alice.patch_namespaced_job("a", namespace, UNSUSPEND))
    assert entry == queued_entry
    assert message == (
        f"spec.suspend: Forbidden: {who} may not set it to false: the Job is queued in "
        'LocalQueue "lq", and only kuota unsuspends it, when it admits it within its '
        "ClusterQueue's quota; leave it suspended and kuota starts it"
    )

    # 3. remove the label of a suspended Job
    remove = (
        f'{LABEL}: Forbidden: {who} may not remove it: the Job is queued in LocalQueue "lq" '
        "and stays kuota's without the label (a Job does not leave the queue by losing it); "
        "delete the Job, or, while it is suspended, set the label to another LocalQueue"
    )
    entry, message = await refused(alice.patch_namespaced_job("a", namespace, _label(None)))
    assert message == remove

    # a suspended Job may move to another LocalQueue
    moved = await alice.patch_namespaced_job("a", namespace, _label("other"))
    assert moved.metadata.labels[QUEUE] == "other" and moved.spec.suspend is True
    await alice.patch_namespaced_job("a", namespace, _label("lq"))

    # kuota's identity unsuspends (the actuator admitting it) ...
    running = await kuota.patch_namespaced_job("a", namespace, UNSUSPEND)
    assert running.spec.suspend is False

    # 2. ... then a running Job may not change its queue, nor 3. lose its label
    entry, message = await refused(alice.patch_namespaced_job("a", namespace, _label("other")))
    assert message == (
        f'{LABEL}: Forbidden: {who} may not change it from "lq" to "other" while the Job is '
        'not suspended: it was admitted through LocalQueue "lq" and runs on that quota; '
        "only a suspended Job may move to another LocalQueue"
    )
    entry, message = await refused(alice.patch_namespaced_job("a", namespace, _label(None)))
    assert message == remove
    # 5. nor grow (or shrink): the extra pods would run before kuota re-decides its size
    grow = {"spec": {"parallelism": 2}}
    entry, message = await refused(alice.patch_namespaced_job("a", namespace, grow))
    assert entry == queued_entry
    assert message == (
        f"spec.parallelism: Forbidden: {who} may not change it from 1 to 2 while the Job is "
        'not suspended: the Job is queued in LocalQueue "lq" and its admission covers its '
        "current size; suspend the Job first (spec.suspend: true); kuota re-reads a "
        "suspended Job and admits it for its new size"
    )
    # suspending it and moving it in one update is a suspended Job's move: allowed
    both = {"metadata": {"labels": {QUEUE: "other"}}, "spec": {"suspend": True}}
    assert (await alice.patch_namespaced_job("a", namespace, both)).spec.suspend is True
    # a suspended Job may change its size (kuota re-reads it)
    assert (await alice.patch_namespaced_job("a", namespace, grow)).spec.parallelism == 2

    # 4. a forged kuota.dev/ annotation (the honest-pipeline rule, same list)
    forged = {"metadata": {"annotations": {"kuota.dev/decision-id": "forged"}}}
    entry, message = await refused(alice.patch_namespaced_job("a", namespace, forged))
    assert message.startswith(
        f"metadata.annotations[kuota.dev/decision-id]: Forbidden: {who} may not set it"
    )

    # Managed namespace: an unlabelled Job is created suspended, and guarded
    plain = await alice.create_namespaced_job(namespace, job(namespace, "b", queue=None))
    assert plain.spec.suspend is True, "manageJobsWithoutQueueName: suspended at creation"
    entry, message = await refused(alice.patch_namespaced_job("b", namespace, UNSUSPEND))
    assert entry == other_entry
    assert message == (
        f'spec.suspend: Forbidden: {who} may not set it to false: namespace "{namespace}" is '
        "managed by kuota (manageJobsWithoutQueueName): its Jobs wait for admission, "
        "labelled or not, and only kuota unsuspends it, when it admits it within its "
        "ClusterQueue's quota; leave it suspended and kuota starts it"
    )
    # adding a label to it while suspended queues it
    joined = await alice.patch_namespaced_job("b", namespace, _label("lq"))
    assert joined.metadata.labels[QUEUE] == "lq"

    # 3'. a running unlabelled Job (kuota's identity started it) may not join a queue
    await kuota.create_namespaced_job(namespace, job(namespace, "c", queue=None))
    await kuota.patch_namespaced_job("c", namespace, UNSUSPEND)
    entry, message = await refused(alice.patch_namespaced_job("c", namespace, _label("lq")))
    assert message == (
        f"{LABEL}: Forbidden: {who} may not add it to a Job that is not suspended: kuota "
        "would count a Job it never admitted; suspend the Job first (spec.suspend: true), "
        "then add the label"
    )
    await alice.patch_namespaced_job("c", namespace, SUSPEND)
    assert (await alice.patch_namespaced_job("c", namespace, _label("lq"))).metadata.labels

    # kuota's identity is not refused any of it
    await kuota.patch_namespaced_job("b", namespace, UNSUSPEND)
    await kuota.patch_namespaced_job("a", namespace, _label(None))

    # kuota's identity may resize a running Job (nothing but the actuator is trusted)
    await kuota.patch_namespaced_job("b", namespace, {"spec": {"parallelism": 2}})

    # the strict registration: the unlabelled entry fails closed, for the managed namespace
    reg = await client.AdmissionregistrationV1Api(admin).read_mutating_webhook_configuration(
        f"kuota-door-{namespace}"
    )
    hooks = {w.name: w for w in reg.webhooks}
    strict = hooks[other_entry]
    assert (hooks[queued_entry].failure_policy, strict.failure_policy) == ("Fail", "Fail")
    assert strict.namespace_selector.match_labels == {RUN_LABEL: namespace}

    m = webhook.metrics()
    assert m['kuota_webhook_requests_total{outcome="refused"}'] >= 9
    assert m['kuota_webhook_requests_total{outcome="suspended"}'] >= 3


TEMPLATE_ENTRY = "guard-resource-k8s-io-resourceclaimtemplate.kuota.dev"


def _template(namespace: str, name: str) -> dict[str, Any]:
    request = {"name": "g", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "labels": {RUN_LABEL: namespace}},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


async def test_a_namespace_editor_cannot_swap_a_running_jobs_claim_template(
    webhook: WebhookProcess, accounts: dict[str, client.BatchV1Api], namespace: str
) -> None:
    """#23 item 4, closed at the door: the template of a Job kuota started is not
    deleted (and so not recreated with more devices) while the Job runs."""
    alice, kuota = accounts["alice"], accounts["kuota-actuator"]
    templates = client.CustomObjectsApi(alice.api_client)
    group = ("resource.k8s.io", "v1", namespace, "resourceclaimtemplates")
    await wait_door(alice, namespace)
    for name in ("gpu", "spare"):
        await templates.create_namespaced_custom_object(*group, _template(namespace, name))
    pod = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "g"}]},
                }
            ],
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "gpu"}],
        }
    }
    manifest = _job("t", queue="lq", suspend=False, labels={RUN_LABEL: namespace}, pod=pod)
    assert (await alice.create_namespaced_job(namespace, manifest)).spec.suspend is True
    # kuota starts it, as the actuator does: unsuspended with its decision's id
    started = {"metadata": {"annotations": {"kuota.dev/decision-id": "d-1"}}, **UNSUSPEND}
    await kuota.patch_namespaced_job("t", namespace, started)
    deadline = time.monotonic() + 30
    while True:  # the apiserver picks the registration up asynchronously
        try:
            await templates.delete_namespaced_custom_object(*group, "gpu", dry_run="All")
        except ApiException as e:
            assert e.status == 403, e.body
            break
        assert time.monotonic() < deadline, "the template guard never answered"
        await asyncio.sleep(0.3)
    entry, message = await refused(templates.delete_namespaced_custom_object(*group, "gpu"))
    assert entry == TEMPLATE_ENTRY
    assert message.startswith(
        f'user "system:serviceaccount:{namespace}:alice" may not delete ResourceClaimTemplate '
        f'"{namespace}/gpu": it is in use by the running Job t, which kuota admitted charged '
        "for the devices this template asks for"
    )
    # a template no running Job names goes; the Job's goes once kuota stopped the Job
    # (suspended, kuota charges it again for whatever template it finds)
    await templates.delete_namespaced_custom_object(*group, "spare")
    await kuota.patch_namespaced_job("t", namespace, SUSPEND)
    await templates.delete_namespaced_custom_object(*group, "gpu")
    m = webhook.metrics()
    assert m['kuota_webhook_requests_total{outcome="refused"}'] >= 2
