"""The Kubeflow training-operator (v1.8.1, the stack's ``training`` component) on
the stack's apiserver and kwok, kuota's services left out: what a PyTorchJob does
there, the facts kuota's suspend/resume of PyTorchJobs rests on.

- created with ``spec.runPolicy.suspend: true``, the operator marks it
  Created and Suspended and makes no pod;
- unsuspended, it makes one pod per replica (1 master + 1 worker) that kwok
  runs on this test's node, and the job's condition Running turns True;
- suspended again, it deletes the pods and Suspended turns True again;
- its validating webhook, registered against 127.0.0.1, answers: a master
  with two replicas is refused at create.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from operator_helpers import (
    KEEP_RUNNING,
    TEST_LABEL,
    api_client,
    conditions,
    eventually,
    kwok_node,
    merge_patch,
    on_node,
    pods,
    require_operator,
)
from stack_helpers import temp_namespace

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
JOB_LABEL = "training.kubeflow.org/job-name"


@pytest.fixture
async def api(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    require_operator("KUOTA_TRAINING_HEALTH_URL", "training")
    async with api_client(kubeconfig) as a:
        yield a


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"kuota-pt-{uuid.uuid4().hex[:8]}"
    async with temp_namespace(api, name, {TEST_LABEL: "training-operator"}):
        yield name


def pytorchjob(name: str, node: str, *, masters: int = 1, suspend: bool = True) -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        return {
            "replicas": n,
            "restartPolicy": "OnFailure",
            "template": {
                "metadata": {"annotations": dict(KEEP_RUNNING)},
                "spec": {
                    **on_node(node),
                    "containers": [
                        {
                            "name": "pytorch",  # the operator's default container name
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ],
                },
            },
        }

    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"suspend": suspend},
            "pytorchReplicaSpecs": {"Master": replica(masters), "Worker": replica(1)},
        },
    }


async def test_pytorchjob_suspend_resume_suspend(api: client.ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    name = "pt"
    selector = f"{JOB_LABEL}={name}"

    async def job() -> dict[str, Any]:
        got: dict[str, Any] = await custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
        return got

    async def condition(kind: str, status: str) -> dict[str, Any] | None:
        j = await job()
        return j if conditions(j).get(kind) == status else None

    async with kwok_node(api, "kuota-pt") as node:
        await custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, pytorchjob(name, node)
        )
        seen = await eventually(lambda: condition("Suspended", "True"), "PyTorchJob Suspended")
        assert conditions(seen).get("Created") == "True", conditions(seen)
        assert await pods(api, namespace, selector) == [], "a suspended PyTorchJob made pods"

        await merge_patch(
            api,
            (GROUP, VERSION),
            namespace,
            PLURAL,
            name,
            {"spec": {"runPolicy": {"suspend": False}}},
        )

        async def running_pods() -> list[Any] | None:
            got = await pods(api, namespace, selector)
            running = [p for p in got if p.status.phase == "Running"]
            return got if len(got) == 2 and len(running) == 2 else None

        got = await eventually(running_pods, "master and worker pods Running on kwok")
        assert {p.spec.node_name for p in got} == {node}
        types = sorted(p.metadata.labels["training.kubeflow.org/replica-type"] for p in got)
        assert types == ["master", "worker"], types
        resumed = await eventually(lambda: condition("Running", "True"), "PyTorchJob Running")
        assert conditions(resumed).get("Suspended") == "False", conditions(resumed)

        await merge_patch(
            api,
            (GROUP, VERSION),
            namespace,
            PLURAL,
            name,
            {"spec": {"runPolicy": {"suspend": True}}},
        )

        async def no_pods() -> bool:
            return await pods(api, namespace, selector) == []

        await eventually(no_pods, "the pods of the suspended PyTorchJob deleted")
        again = await eventually(lambda: condition("Suspended", "True"), "Suspended again")
        assert conditions(again).get("Running") == "False", conditions(again)


async def test_pytorchjob_webhook_refuses_two_masters(
    api: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as refused:
        await custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, pytorchjob("two-masters", "nowhere", masters=2)
        )
    assert refused.value.status == 403, refused.value  # a webhook's denial
    body = str(refused.value.body)
    assert "validator.pytorchjob.training-operator.kubeflow.org" in body, body
    assert "must be 1" in body, body
