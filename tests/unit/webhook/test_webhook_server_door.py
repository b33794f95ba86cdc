"""The door (#22): what the webhook refuses on UPDATE of a managed Job, what it
suspends on CREATE in a managed namespace, the webhook's ``ClusterView`` that
tells it which namespaces and Jobs are managed, and the two-entry registration
(deploy/base and scripts/webhook-register agree)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota import kinds
from kuota.kube.admission_review import mutate_job
from kuota.kube.cluster_view import ClusterView
from kuota.kube.template_guard import PATH as TEMPLATE_PATH
from kuota.kube.translate import config_file_object

REPO = Path(__file__).resolve().parents[3]
QUEUE = "kueue.x-k8s.io/queue-name"
ALICE = "system:serviceaccount:team-a:alice"
ACTUATOR = "system:serviceaccount:kuota-system:kuota-actuator"
TRUSTED = frozenset({ACTUATOR})
WHO = f'user "{ALICE}"'
LABEL = f"metadata.labels[{QUEUE}]"


def job(
    *,
    queue: str | None = "lq",
    suspend: bool | None = True,
    annotations: dict[str, str] | None = None,
    uid: str = "uid-j",
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "j", "namespace": "team-a", "uid": uid, "labels": {}}
    if queue is not None:
        md["labels"][QUEUE] = queue
    if annotations:
        md["annotations"] = annotations
    spec: dict[str, Any] = {"template": {}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"metadata": md, "spec": spec}


def review(
    new: dict[str, Any],
    old: dict[str, Any] | None = None,
    *,
    user: str = ALICE,
    namespace: str = "team-a",
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": "rev-1",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "operation": "CREATE" if old is None else "UPDATE",
        "namespace": namespace,
        "userInfo": {"username": user},
        "object": new,
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def answer(body: dict[str, Any], view: ClusterView | None = None) -> tuple[str, str]:
    """(outcome, message) — the message of a refusal, "" otherwise."""
    a = mutate_job(body, trusted_users=TRUSTED, managed=view)
    response = a.review["response"]
    if a.outcome == "refused":
        assert response["allowed"] is False and response["status"]["code"] == 403
        assert "patch" not in response
        return a.outcome, str(response["status"]["message"])
    assert response["allowed"] is True
    return a.outcome, ""


def managed_view(manage: bool = True, **ns_labels: dict[str, str]) -> ClusterView:
    text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    text += f"manageJobsWithoutQueueName: {str(manage).lower()}\n"
    obj = config_file_object(text)
    assert isinstance(obj, dict), obj
    view = ClusterView()
    view.observe("Configuration", "UPSERT", obj)
    for name, labels in ns_labels.items():
        view.observe("Namespace", "UPSERT", {"metadata": {"name": name, "labels": labels}})
    view.mark_complete()  # the webhook's first LISTs are done
    return view


# --------------------------------------------------------------------------- 1. spec.suspend

UNSUSPEND_QUEUED = (
    f"spec.suspend: Forbidden: {WHO} may not set it to false: the Job is queued in "
    'LocalQueue "lq", and only kuota unsuspends it, when it admits it within its '
    "ClusterQueue's quota; leave it suspended and kuota starts it"
)


def test_a_user_may_not_unsuspend_a_queued_job() -> None:
    assert answer(review(job(suspend=False), job())) == ("refused", UNSUSPEND_QUEUED)
    # an absent spec.suspend is false too
    assert answer(review(job(suspend=None), job()))[0] == "refused"
    # kuota's actuator may; so may anyone whose update leaves it suspended or running
    assert answer(review(job(suspend=False), job(), user=ACTUATOR)) == ("unchanged", "")
    assert answer(review(job(), job())) == ("unchanged", "")
    assert answer(review(job(suspend=False), job(suspend=False))) == ("unchanged", "")
    # suspending is not refused (the fold sees it; the door only keeps Jobs from starting)
    assert answer(review(job(), job(suspend=False))) == ("unchanged", "")


def test_a_user_may_not_unsuspend_an_unlabelled_job_in_a_managed_namespace() -> None:
    view = managed_view()
    outcome, message = answer(review(job(queue=None, suspend=False), job(queue=None)), view)
    assert outcome == "refused"
    assert message == (
        f'spec.suspend: Forbidden: {WHO} may not set it to false: namespace "team-a" is '
        "managed by kuota (manageJobsWithoutQueueName): its Jobs wait for admission, "
        "labelled or not, and only kuota unsuspends it, when it admits it within its "
        "ClusterQueue's quota; leave it suspended and kuota starts it"
    )
    # the same Job in an unmanaged namespace is not kuota's
    plain = managed_view(manage=False)
    assert answer(review(job(queue=None, suspend=False), job(queue=None)), plain)[0] == (
        "unchanged"
    )


def test_a_job_kuota_queued_stays_guarded_without_its_label() -> None:
    """The label is gone (a trusted hand or the webhook down): kuota's annotation on
    the stored Job, or the view's memory of its uid, still make it kuota's."""
    old = job(queue=None, annotations={"kuota.dev/decision-id": "d-1"})
    outcome, message = answer(
        review(job(queue=None, suspend=False), old), ClusterView(complete=True)
    )
    assert outcome == "refused" and "kuota has queued the Job" in message
    view = ClusterView(complete=True)
    view.observe("Job", "UPSERT", job(uid="uid-7"))  # seen with its label
    old = job(queue=None, uid="uid-7")
    assert answer(review(job(queue=None, suspend=False, uid="uid-7"), old), view)[0] == "refused"
    view.observe("Job", "DELETE", job(uid="uid-7"))
    assert answer(review(job(queue=None, suspend=False, uid="uid-7"), old), view)[0] == (
        "unchanged"
    )


# --------------------------------------------------------------------------- 2./3. the queue label


def test_a_running_job_may_not_change_its_queue() -> None:
    outcome, message = answer(review(job(queue="other", suspend=False), job(suspend=False)))
    assert outcome == "refused"
    assert message == (
        f'{LABEL}: Forbidden: {WHO} may not change it from "lq" to "other" while the Job is '
        'not suspended: it was admitted through LocalQueue "lq" and runs on that quota; '
        "only a suspended Job may move to another LocalQueue"
    )


def test_a_suspended_job_may_move_to_another_local_queue() -> None:
    assert answer(review(job(queue="other"), job())) == ("unchanged", "")
    # suspending and moving in one update is a suspended Job's move
    assert answer(review(job(queue="other"), job(suspend=False))) == ("unchanged", "")
    # a suspended unlabelled Job may join a queue
    assert answer(review(job(), job(queue=None))) == ("unchanged", "")


REMOVE = (
    f'{LABEL}: Forbidden: {WHO} may not remove it: the Job is queued in LocalQueue "lq" and '
    "stays kuota's without the label (a Job does not leave the queue by losing it); delete "
    "the Job, or, while it is suspended, set the label to another LocalQueue"
)


@pytest.mark.parametrize("suspend", [True, False], ids=["suspended", "running"])
def test_the_queue_label_may_not_be_removed(suspend: bool) -> None:
    new = job(queue=None, suspend=suspend)
    assert answer(review(new, job(suspend=suspend))) == ("refused", REMOVE)
    empty = job(queue="", suspend=suspend)  # an empty value is no queue either
    assert answer(review(empty, job(suspend=suspend))) == ("refused", REMOVE)
    assert answer(review(new, job(suspend=suspend), user=ACTUATOR)) == ("unchanged", "")


def test_a_running_unqueued_job_may_not_join_a_queue() -> None:
    outcome, message = answer(review(job(suspend=False), job(queue=None, suspend=False)))
    assert outcome == "refused"
    assert message == (
        f"{LABEL}: Forbidden: {WHO} may not add it to a Job that is not suspended: kuota "
        "would count a Job it never admitted; suspend the Job first (spec.suspend: true), "
        "then add the label"
    )


def test_every_reason_is_in_the_one_message() -> None:
    """Unsuspending and relabelling at once: both refusals, joined."""
    outcome, message = answer(review(job(queue="other", suspend=False), job()))
    assert outcome == "refused"
    assert message.startswith("spec.suspend: Forbidden:")
    assert f'; {LABEL}: Forbidden: {WHO} may not change it from "lq" to "other"' in message


# --------------------------------------------------------------------------- CREATE


def test_create_in_a_managed_namespace_is_suspended() -> None:
    view = managed_view()
    a = mutate_job(review(job(queue=None, suspend=False)), managed=view)
    assert (a.outcome, a.why) == ("suspended", "namespace team-a is managed")
    assert answer(review(job(queue=None, suspend=True)), view) == ("unchanged", "")
    # kube-system and kuota-system never are, and Kueue's default leaves out kueue-system
    for ns in ("kube-system", "kuota-system", "kueue-system"):
        body = review(job(queue=None, suspend=False), namespace=ns)
        assert mutate_job(body, managed=view).outcome == "unchanged", ns
    # off (Kueue's default): an unlabelled Job is not kuota's
    body = review(job(queue=None, suspend=False))
    assert mutate_job(body, managed=managed_view(manage=False)).outcome == "unchanged"
    assert mutate_job(body).outcome == "unchanged"


# --------------------------------------------------------------------------- the view


def test_the_view_follows_the_selector_and_the_configuration() -> None:
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "manageJobsWithoutQueueName: true\n"
        "managedJobsNamespaceSelector:\n  matchLabels:\n    team: 'yes'\n"
    )
    obj = config_file_object(text)
    assert isinstance(obj, dict)
    view = ClusterView()
    view.observe("Configuration", "UPSERT", obj)
    view.observe("Namespace", "UPSERT", {"metadata": {"name": "a", "labels": {"team": "yes"}}})
    view.observe("Namespace", "UPSERT", {"metadata": {"name": "b", "labels": {}}})
    assert (view.namespace_managed("a"), view.namespace_managed("b")) == (True, False)
    view.observe("Namespace", "UPSERT", {"metadata": {"name": "b", "labels": {"team": "yes"}}})
    assert view.namespace_managed("b"), "a relabelled namespace is managed at once"
    # an unreadable Configuration keeps the last one
    bad = {**obj, "manageJobsWithoutQueueName": "sometimes"}
    view.observe("Configuration", "UPSERT", bad)
    assert view.namespace_managed("a")
    # deleting it restores Kueue's defaults: off
    view.observe("Configuration", "DELETE", obj)
    assert not view.namespace_managed("a")


def test_the_view_reads_the_configmap_kind_too() -> None:
    data = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
    data += "manageJobsWithoutQueueName: true\n"
    cm = {
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": data},
    }
    view = ClusterView()
    view.observe("ConfigMap", "UPSERT", cm)  # a LIST item: no kind, no apiVersion
    assert view.namespace_managed("team-a")


# --------------------------------------------------------------------------- registration


def _entries(docs: list[Any]) -> dict[str, Any]:
    hooks = [d for d in docs if d and d["kind"] == "MutatingWebhookConfiguration"]
    return {w["name"]: w for d in hooks for w in d["webhooks"]}


PYTORCH_ENTRY = "mutate-kubeflow-org-v1-pytorchjob.kuota.dev"
RAY_ENTRY = "mutate-ray-io-v1-raycluster.kuota.dev"
RAYJOB_ENTRY = "mutate-ray-io-v1-rayjob.kuota.dev"
JOBSET_ENTRY = "mutate-jobset-x-k8s-io-v1alpha2-jobset.kuota.dev"
LWS_ENTRY = "mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset.kuota.dev"
POD_ENTRY = "mutate--v1-pod.kuota.dev"
TEMPLATE_ENTRY = "guard-resource-k8s-io-resourceclaimtemplate.kuota.dev"


def _check(entries: dict[str, Any]) -> None:
    assert set(entries) == {
        "mutate-batch-v1-job.kuota.dev",
        "unlabelled-batch-v1-job.kuota.dev",
        PYTORCH_ENTRY,
        RAY_ENTRY,
        RAYJOB_ENTRY,
        JOBSET_ENTRY,
        LWS_ENTRY,
        POD_ENTRY,
        TEMPLATE_ENTRY,
    }
    queued, other, pytorch = (
        entries["mutate-batch-v1-job.kuota.dev"],
        entries["unlabelled-batch-v1-job.kuota.dev"],
        entries[PYTORCH_ENTRY],
    )
    # PyTorchJobs (#18): labelled ones only, failing closed, on their own path
    assert pytorch["failurePolicy"] == "Fail"
    assert pytorch["objectSelector"]["matchExpressions"] == [{"key": QUEUE, "operator": "Exists"}]
    assert pytorch["rules"][0]["resources"] == ["pytorchjobs"]
    assert pytorch["rules"][0]["apiGroups"] == ["kubeflow.org"]
    where = pytorch["clientConfig"].get("url") or pytorch["clientConfig"]["service"]["path"]
    assert where.endswith(kinds.get("PyTorchJob").mutate_path())
    ray = entries[RAY_ENTRY]
    assert (ray["failurePolicy"], ray["rules"][0]["resources"]) == ("Fail", ["rayclusters"])
    where = ray["clientConfig"].get("url") or ray["clientConfig"]["service"]["path"]
    assert where.endswith(kinds.get("RayCluster").mutate_path())
    rj = entries[RAYJOB_ENTRY]
    assert (rj["failurePolicy"], rj["rules"][0]["resources"]) == ("Fail", ["rayjobs"])
    assert (rj["rules"][0]["apiGroups"], rj["rules"][0]["apiVersions"]) == (["ray.io"], ["v1"])
    assert rj["objectSelector"]["matchExpressions"] == [{"key": QUEUE, "operator": "Exists"}]
    where = rj["clientConfig"].get("url") or rj["clientConfig"]["service"]["path"]
    assert where.endswith("/mutate-ray-io-v1-rayjob")
    assert where.endswith(kinds.get("RayJob").mutate_path())
    js = entries[JOBSET_ENTRY]
    assert (js["failurePolicy"], js["rules"][0]["resources"]) == ("Fail", ["jobsets"])
    assert js["rules"][0]["apiVersions"] == ["v1alpha2"]
    assert js["objectSelector"]["matchExpressions"] == [{"key": QUEUE, "operator": "Exists"}]
    where = js["clientConfig"].get("url") or js["clientConfig"]["service"]["path"]
    assert where.endswith(kinds.get("JobSet").mutate_path())
    # LeaderWorkerSets with the queue label: their templates labelled, failing closed
    lws = entries[LWS_ENTRY]
    assert (lws["failurePolicy"], lws["rules"][0]["resources"]) == ("Fail", ["leaderworkersets"])
    assert lws["rules"][0]["apiGroups"] == ["leaderworkerset.x-k8s.io"]
    assert lws["rules"][0]["apiVersions"] == ["v1"]
    assert lws["objectSelector"]["matchExpressions"] == [{"key": QUEUE, "operator": "Exists"}]
    where = lws["clientConfig"].get("url") or lws["clientConfig"]["service"]["path"]
    assert where.endswith("/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset")
    assert where.endswith(kinds.get("LeaderWorkerSet").mutate_path())
    # Pods with the queue label (#18, pod groups): gated at creation, failing closed
    pods = entries[POD_ENTRY]
    assert (pods["failurePolicy"], pods["rules"][0]["resources"]) == ("Fail", ["pods"])
    assert (pods["rules"][0]["apiGroups"], pods["rules"][0]["apiVersions"]) == ([""], ["v1"])
    assert pods["objectSelector"]["matchExpressions"] == [{"key": QUEUE, "operator": "Exists"}]
    where = pods["clientConfig"].get("url") or pods["clientConfig"]["service"]["path"]
    assert where.endswith("/mutate--v1-pod") and where.endswith(kinds.get("Pod").mutate_path())
    # a ResourceClaimTemplate's DELETE (template-guard.md): failing closed, no queue label
    guard = entries[TEMPLATE_ENTRY]
    assert guard["failurePolicy"] == "Fail"
    (rule,) = guard["rules"]
    assert (rule["operations"], rule["resources"]) == (["DELETE"], ["resourceclaimtemplates"])
    assert rule["apiGroups"] == ["resource.k8s.io"]
    assert "objectSelector" not in guard, "every template of the namespaces, labelled or not"
    where = guard["clientConfig"].get("url") or guard["clientConfig"]["service"]["path"]
    assert where.endswith(TEMPLATE_PATH)
    assert queued["failurePolicy"] == "Fail" and other["failurePolicy"] == "Ignore"
    assert queued["objectSelector"]["matchExpressions"] == [{"key": QUEUE, "operator": "Exists"}]
    assert other["objectSelector"]["matchExpressions"] == [
        {"key": QUEUE, "operator": "DoesNotExist"}
    ]
    for hook in (queued, other, pytorch, ray, js, lws, pods, guard):
        (rule,) = hook["rules"]
        assert rule["operations"] == (["DELETE"] if hook is guard else ["CREATE", "UPDATE"])
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert expr == {
            "key": kinds.NAMESPACE_NAME_LABEL,
            "operator": "NotIn",
            "values": list(kinds.SYSTEM_NAMESPACES),
        }
        assert (hook["sideEffects"], hook["reinvocationPolicy"]) == ("None", "Never")


def test_the_registration_has_two_entries_and_leaves_out_the_system_namespaces(
    tmp_path: Path,
) -> None:
    _check(_entries(list(yaml.safe_load_all((REPO / "deploy/base/webhook.yaml").read_text()))))
    ca = tmp_path / "ca.crt"
    ca.write_text("x\n")
    env = {**os.environ, "KUOTA_KUBECTL": "/bin/true", "KUBECONFIG": "/dev/null"}
    env["KUOTA_STACK_DIR"] = str(tmp_path)
    out = subprocess.run(
        [str(REPO / "scripts/webhook-register"), "--print", "--ca", str(ca)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    _check(_entries(list(yaml.safe_load_all(out))))
