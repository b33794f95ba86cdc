"""The webhook's answers for PyTorchJobs and RayClusters (#18): a labelled one is created suspended
by ``spec.runPolicy.suspend`` (its parent added when absent), a user's unsuspend,
label removal or kuota.dev/ annotation is refused as for a Job, kuota's own
identity may do them, and an unlabelled one is not kuota's (no managed namespaces
for the training kinds); the server answers on the kind's own path."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from builders.admission import admission_review, patch_of

from kuota import kinds
from kuota.kube.admission_review import mutate_job
from kuota.kube.cluster_view import ClusterView
from kuota_webhook.server import webhook_app

QUEUE = "kueue.x-k8s.io/queue-name"
ALICE = "system:serviceaccount:team-a:alice"
ACTUATOR = "system:serviceaccount:kuota-system:kuota-actuator"


def pytorchjob(
    *, labels: dict[str, str] | None = None, suspend: bool | None = None, **ann: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}}
    if suspend is not None:
        spec["runPolicy"] = {"suspend": suspend, "cleanPodPolicy": "None"}
    md: dict[str, Any] = {"name": "p", "labels": labels or {}, "uid": "u1"}
    if ann:
        md["annotations"] = dict(ann)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": md, "spec": spec}


def review(
    obj: dict[str, Any], *, old: dict[str, Any] | None = None, user: str = ALICE
) -> dict[str, Any]:
    return admission_review(
        obj, {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}, old=old, user=user
    )


@pytest.mark.parametrize(
    ("suspend", "patch"),
    [
        (None, [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]),
        (False, [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}]),
        (True, None),
    ],
)
def test_a_labelled_pytorchjob_is_created_suspended(
    suspend: bool | None, patch: list[dict[str, Any]] | None
) -> None:
    answer = mutate_job(review(pytorchjob(labels={QUEUE: "lq"}, suspend=suspend)))
    assert answer.review["response"]["allowed"] is True
    assert patch_of(answer.review) == patch
    assert answer.outcome == ("suspended" if patch else "unchanged")


def test_a_users_unsuspend_relabel_and_annotation_are_refused() -> None:
    held = pytorchjob(labels={QUEUE: "lq"}, suspend=True)
    unsuspended = pytorchjob(labels={QUEUE: "lq"}, suspend=False)
    answer = mutate_job(review(unsuspended, old=held))
    assert answer.outcome == "refused"
    message = answer.review["response"]["status"]["message"]
    assert message.startswith("spec.runPolicy.suspend: Forbidden")
    assert "only kuota unsuspends it" in message
    # kuota's own identity starts it
    ok = mutate_job(review(unsuspended, old=held, user=ACTUATOR), trusted_users={ACTUATOR})
    assert ok.review["response"]["allowed"] is True and ok.outcome == "unchanged"
    # the label may not go, nor a kuota.dev/ annotation be forged
    gone = mutate_job(review(pytorchjob(suspend=False), old=unsuspended))
    assert gone.outcome == "refused"
    assert "may not remove it" in gone.review["response"]["status"]["message"]
    forged = pytorchjob(labels={QUEUE: "lq"}, suspend=True, **{"kuota.dev/decision-id": "x"})
    assert mutate_job(review(forged, old=held)).outcome == "refused"
    # a suspended one may move to another LocalQueue
    moved = pytorchjob(labels={QUEUE: "other"}, suspend=True)
    assert mutate_job(review(moved, old=held)).outcome == "unchanged"


def test_an_unlabelled_pytorchjob_is_not_kuotas_even_in_a_managed_namespace() -> None:
    class Everything:
        def namespace_managed(self, namespace: str) -> bool:
            return True

        def known(self, uid: str) -> bool:
            return False

        def complete(self) -> bool:
            return False

    answer = mutate_job(review(pytorchjob(suspend=False)), managed=Everything())
    assert answer.outcome == "unchanged" and patch_of(answer.review) is None
    # other kinds than those kuota queues are let through unchanged
    other = review(pytorchjob(labels={QUEUE: "lq"}))
    other["request"]["kind"] = {"group": "kubeflow.org", "version": "v1", "kind": "TFJob"}
    assert mutate_job(other).outcome == "unchanged"


async def test_the_server_answers_on_the_pytorchjob_path() -> None:
    app = webhook_app(view=ClusterView(complete=True))
    async with TestClient(TestServer(app)) as c:
        path = kinds.get("PyTorchJob").mutate_path()
        assert path == "/mutate-kubeflow-org-v1-pytorchjob"
        resp = await c.post(path, json=review(pytorchjob(labels={QUEUE: "lq"})))
        assert resp.status == 200
        body = await resp.json()
        assert patch_of(body) == [
            {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}
        ]


def test_a_labelled_ray_cluster_is_created_suspended_and_held() -> None:
    rc = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "r", "labels": {QUEUE: "lq"}},
        "spec": {"headGroupSpec": {}},
    }
    body = review(rc)
    body["request"]["kind"] = {"group": "ray.io", "version": "v1", "kind": "RayCluster"}
    answer = mutate_job(body)
    assert patch_of(answer.review) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    held = {**rc, "spec": {"suspend": True}}
    update = review({**rc, "spec": {"suspend": False}}, old=held)
    update["request"]["kind"] = body["request"]["kind"]
    refused = mutate_job(update)
    assert refused.outcome == "refused"
    assert refused.review["response"]["status"]["message"].startswith("spec.suspend: Forbidden")


def test_a_labelled_job_set_is_created_suspended_and_held() -> None:
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "s", "labels": {QUEUE: "lq"}, "uid": "s1"},
        "spec": {"replicatedJobs": [{"name": "w", "template": {}}]},
    }
    kind = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}
    body = review(js)
    body["request"]["kind"] = kind
    answer = mutate_job(body)
    assert answer.outcome == "suspended"
    assert patch_of(answer.review) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    held = {**js, "spec": {**js["spec"], "suspend": True}}
    update = review({**js, "spec": {**js["spec"], "suspend": False}}, old=held)
    update["request"]["kind"] = kind
    refused = mutate_job(update)
    assert refused.outcome == "refused"
    assert refused.review["response"]["status"]["message"].startswith("spec.suspend: Forbidden")
    by_kuota = review({**js, "spec": {**js["spec"], "suspend": False}}, old=held, user=ACTUATOR)
    by_kuota["request"]["kind"] = kind
    ok = mutate_job(by_kuota, trusted_users={ACTUATOR})
    assert ok.outcome == "unchanged", "the actuator unsuspends it"
    unlabelled = review({**js, "metadata": {"name": "s", "uid": "s2"}})
    unlabelled["request"]["kind"] = kind
    assert patch_of(mutate_job(unlabelled).review) is None, "labelled JobSets only"
