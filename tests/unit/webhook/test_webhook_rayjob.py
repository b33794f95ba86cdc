"""The webhook's answers for RayJobs (#18) and for the objects KubeRay makes for one:
a labelled RayJob is created suspended (``spec.suspend``) and a user's unsuspend is
refused, as for a RayCluster; one that would keep its cluster
(``shutdownAfterJobFinishes`` not true) is refused at creation, as Kueue's webhook
does (KubeRay fails a suspended RayJob that keeps its cluster); one with a
``clusterSelector`` is not a workload and is let through; the RayCluster and the
submitter Job KubeRay creates for a RayJob carry its labels (the queue label, and its
``kuota.dev/`` annotations) and are let through untouched; the server answers on
``/mutate-ray-io-v1-rayjob``."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from builders.admission import admission_review, patch_of

from kuota import kinds
from kuota.kube.admission_review import mutate_job
from kuota.kube.cluster_view import ClusterView
from kuota_webhook.server import webhook_app

QUEUE = "kueue.x-k8s.io/queue-name"
ALICE = "system:serviceaccount:team-a:alice"
KUBERAY = "system:serviceaccount:kuberay:kuberay-operator"
ACTUATOR = "system:serviceaccount:kuota-system:kuota-actuator"
RAY = {"group": "ray.io", "version": "v1", "kind": "RayJob"}
OWNER = {
    "apiVersion": "ray.io/v1",
    "kind": "RayJob",
    "name": "rj",
    "uid": "rj-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def ray_job(*, suspend: bool | None = None, shutdown: bool | None = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"entrypoint": "python x.py", "rayClusterSpec": {"headGroupSpec": {}}}
    if suspend is not None:
        spec["suspend"] = suspend
    if shutdown is not None:
        spec["shutdownAfterJobFinishes"] = shutdown
    md = {"name": "rj", "namespace": "team-a", "uid": "rj-uid", "labels": {QUEUE: "lq"}}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": md, "spec": spec}


def review(
    obj: dict[str, Any],
    *,
    old: dict[str, Any] | None = None,
    user: str = ALICE,
    kind: dict[str, str] = RAY,
) -> dict[str, Any]:
    return admission_review(obj, kind, old=old, user=user)


def test_a_labelled_ray_job_is_created_suspended_and_held() -> None:
    answer = mutate_job(review(ray_job()))
    assert answer.outcome == "suspended"
    assert patch_of(answer.review) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    held = ray_job(suspend=True)
    refused = mutate_job(review(ray_job(suspend=False), old=held))
    assert refused.outcome == "refused"
    message = refused.review["response"]["status"]["message"]
    assert message.startswith("spec.suspend: Forbidden"), message
    ok = mutate_job(
        review(ray_job(suspend=False), old=held, user=ACTUATOR), trusted_users={ACTUATOR}
    )
    assert ok.outcome == "unchanged", "the actuator unsuspends it"
    already = mutate_job(review(ray_job(suspend=True)))
    assert (already.outcome, patch_of(already.review)) == ("unchanged", None)


def test_a_ray_job_that_keeps_its_cluster_is_refused_at_creation() -> None:
    for shutdown in (False, None):
        answer = mutate_job(review(ray_job(shutdown=shutdown)))
        assert answer.outcome == "refused", shutdown
        message = answer.review["response"]["status"]["message"]
        assert message.startswith("spec.shutdownAfterJobFinishes: Invalid value"), message
    # an update of a stored one is not refused for it (the apiserver stored it already)
    old = ray_job(suspend=True, shutdown=False)
    new = ray_job(suspend=True, shutdown=False)
    new["metadata"]["annotations"] = {"kuota.dev/active": "false"}
    assert mutate_job(review(new, old=old)).outcome == "unchanged"


def test_a_ray_job_with_a_cluster_selector_is_not_a_workload() -> None:
    rj = ray_job(shutdown=False)
    rj["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    del rj["spec"]["rayClusterSpec"]
    answer = mutate_job(review(rj))
    assert (answer.outcome, patch_of(answer.review)) == ("unchanged", None)
    assert "clusterSelector" in answer.why


def test_an_unlabelled_ray_job_is_not_kuotas() -> None:
    rj = ray_job(shutdown=False)
    rj["metadata"]["labels"] = {}
    answer = mutate_job(review(rj))
    assert (answer.outcome, patch_of(answer.review)) == ("unchanged", None)


def test_kuberays_ray_cluster_of_a_ray_job_is_let_through_an_owned_job_is_not() -> None:
    """KubeRay v1.5.0 copies the RayJob's labels and annotations onto the RayCluster it
    creates (the queue label and kuota's own annotations with them): without the owner
    rule it would be suspended (never running) and its kuota.dev/ annotations refused."""
    copied = {
        "name": "rj-x7k2p",
        "namespace": "team-a",
        "labels": {QUEUE: "lq", "ray.io/originated-from-crd": "RayJob"},
        "annotations": {"kuota.dev/decision-id": "d1"},
        "ownerReferences": [OWNER],
    }
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": copied,
        "spec": {"headGroupSpec": {}},
    }
    kind = {"group": "ray.io", "version": "v1", "kind": "RayCluster"}
    answer = mutate_job(review(cluster, user=KUBERAY, kind=kind))
    assert (answer.outcome, patch_of(answer.review)) == ("unchanged", None)
    assert answer.why == "a RayJob's RayCluster: the RayJob is the workload"
    orphan = {
        **cluster,
        "metadata": {**copied, "ownerReferences": [{**OWNER, "controller": False}]},
    }
    refused = mutate_job(review(orphan, user=KUBERAY, kind=kind))
    assert refused.outcome == "refused", "not its controller: a labelled RayCluster of its own"
    # A Job's owner is not trusted (a user may write one): a labelled Job with a
    # RayJob controller reference is held like any other (KubeRay's own submitter Job
    # carries no queue label, so it never comes here outside a managed namespace).
    forged = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**copied, "name": "rj", "annotations": {}},
        "spec": {"template": {"spec": {"containers": [{"name": "ray-job-submitter"}]}}},
    }
    job_kind = {"group": "batch", "version": "v1", "kind": "Job"}
    answer = mutate_job(review(forged, user=KUBERAY, kind=job_kind))
    assert answer.outcome == "suspended", answer.why


async def test_the_server_answers_on_the_rayjob_path() -> None:
    app = webhook_app(view=ClusterView(complete=True))
    async with TestClient(TestServer(app)) as c:
        path = kinds.get("RayJob").mutate_path()
        assert path == "/mutate-ray-io-v1-rayjob"
        resp = await c.post(path, json=review(ray_job()))
        assert resp.status == 200
        body = await resp.json()
        assert patch_of(body) == [{"op": "add", "path": "/spec/suspend", "value": True}]
