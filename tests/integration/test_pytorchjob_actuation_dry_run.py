"""The actuator's PyTorchJob writes, dry-run on the real apiserver with the
training-operator's CRD and validating webhook (#18): the admission's merge patch
(``spec.runPolicy.suspend`` false, each replica type's template with the flavor's
node selector and toleration, kuota's records) and the stop's (suspended, templates
restored) are accepted and stored as planned, both carrying the resourceVersion
read (a moved one is a 409)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from builders.workloads import pytorch_job
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from operator_helpers import api_client, require_operator
from stack_helpers import temp_namespace

from kuota.actuation.patch import DecisionOrder, UpdateJob
from kuota.actuation.plan_workloads import plan_workload
from kuota.actuation.scheduling import read_flavor
from kuota.api.types import ResourceFlavor
from kuota.events.schema import Decision
from kuota_actuator.apply import merge_patch, with_precondition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
GPU = "nvidia.com/gpu"
MERGE = "application/merge-patch+json"  # as the actuator writes (kuota_actuator.kubeapi)


@pytest.fixture
async def api(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    require_operator("KUOTA_TRAINING_HEALTH_URL", "training")
    async with api_client(kubeconfig) as a:
        yield a


def decision(type_: str, key: str, uid: str, n: int, **fields: Any) -> Decision:
    return Decision(id=f"d{n}", cause=f"e{n}", at=1.0, type=type_, workload=key, uid=uid, **fields)


async def test_admission_and_stop_patches_are_accepted_as_planned(
    api: client.ApiClient,
) -> None:
    objects = client.CustomObjectsApi(api)
    ns = f"kuota-ptdry-{uuid.uuid4().hex[:6]}"
    spec = {"nodeLabels": {"gpu": "h100"}, "tolerations": [{"key": GPU, "operator": "Exists"}]}
    h100 = read_flavor({"metadata": {"name": "h100"}, "spec": spec})
    assert isinstance(h100, ResourceFlavor)
    async with temp_namespace(api, ns, {"kuota.dev/test": "pytorchjob-dry-run"}):
        manifest = pytorch_job("p", namespace=ns, suspend=True)
        for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
            for c in replica["template"]["spec"]["containers"]:
                c.update(name="pytorch", image="registry.k8s.io/pause:3.10")  # its webhook's rule
        stored: dict[str, Any] = await objects.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, manifest
        )
        key, uid = f"{ns}/pytorchjob/p", stored["metadata"]["uid"]
        flavors = {"master": {GPU: "h100"}, "worker": {GPU: "h100"}}

        async def dry_run(d: Decision, order: int) -> tuple[dict[str, Any], dict[str, Any]]:
            """GET, plan, dry-run PATCH; again after a 409 (the operator writes its status)."""
            for _ in range(10):
                now: dict[str, Any] = await objects.get_namespaced_custom_object(
                    GROUP, VERSION, ns, PLURAL, "p"
                )
                step = plan_workload(now, d, order=DecisionOrder(order, 0), flavors={"h100": h100})
                assert isinstance(step, UpdateJob)
                body = with_precondition(merge_patch(now, step.job), now)
                try:
                    got: dict[str, Any] = await objects.patch_namespaced_custom_object(
                        GROUP, VERSION, ns, PLURAL, "p", body, dry_run="All", _content_type=MERGE
                    )
                    return got, body
                except ApiException as e:
                    if e.status != 409:
                        raise
            pytest.fail("10 conflicts in a row")

        generation = stored["metadata"]["generation"]
        admitted = decision("Admitted", key, uid, 1, flavors=flavors, generation=generation)
        started, body = await dry_run(admitted, 1)
        assert started["spec"]["runPolicy"]["suspend"] is False
        for rtype in ("Master", "Worker"):
            pod = started["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]
            assert pod["nodeSelector"] == {"gpu": "h100"}, rtype
            assert pod["tolerations"] == [{"key": GPU, "operator": "Exists"}], rtype
        assert started["metadata"]["annotations"]["kuota.dev/decision-id"] == "d1"

        # the stop, planned from the started object: suspended, templates back
        stopped = plan_workload(
            started, decision("Preempted", key, uid, 2), order=DecisionOrder(2, 0), flavors={}
        )
        assert isinstance(stopped, UpdateJob)
        now = await objects.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "p")
        after: dict[str, Any] = await objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            PLURAL,
            "p",
            with_precondition(merge_patch(now, stopped.job), now),
            dry_run="All",
            _content_type=MERGE,
        )
        assert after["spec"]["runPolicy"]["suspend"] is True
        for rtype in ("Master", "Worker"):
            pod = after["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]
            assert "nodeSelector" not in pod and "tolerations" not in pod, rtype
        assert "kuota.dev/original-pod-template-scheduling" not in (
            after["metadata"].get("annotations") or {}
        )

        # a resourceVersion that moved is refused: no write from a stale read
        stale = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "1"}}
        with pytest.raises(ApiException) as err:
            await objects.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                PLURAL,
                "p",
                with_precondition(body, stale),
                dry_run="All",
                _content_type=MERGE,
            )
        assert err.value.status == 409
