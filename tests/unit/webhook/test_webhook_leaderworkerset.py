"""The webhook's answers for LeaderWorkerSets and their pods: a labelled LWS gets its
queue and priority-class labels copied into both pod templates (the object's values
win), an unlabelled one is left alone, ``startupPolicy: LeaderReady`` is refused;
a labelled pod with the LWS name and group-index labels is put in its group's pod
group (``leaderworkerset-<name>-<index>``, the size annotation as the count) over
whatever its template said, and gated; one without a usable size is refused; a long
name is cut and hashed; the fold reads the group's pods as one gang whose podsets
are their shapes. The server answers on Kueue's path."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from builders.admission import admission_review, apply_patch, patch_of

from kuota import kinds
from kuota.api.parse_job import MAX_PODS
from kuota.api.parse_workloads import (
    leader_worker_group_name,
    pod_group_workload,
    pod_workload_key,
    read_leader_worker_set,
    read_pod,
)
from kuota.api.types import PodMember, WorkloadGroup
from kuota.kube.admission_review import mutate_job
from kuota.kube.cluster_view import ClusterView
from kuota_webhook.server import PATHS, webhook_app

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
GROUP = "kueue.x-k8s.io/pod-group-name"
COUNT = "kueue.x-k8s.io/pod-group-total-count"
ROLE = "kueue.x-k8s.io/role-hash"
MANAGED = "kueue.x-k8s.io/managed"
GATE = {"name": "kueue.x-k8s.io/admission"}
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
GPU = "example.com/gpu"
ALICE = "system:serviceaccount:team-a:alice"
ACTUATOR = "system:serviceaccount:kuota-system:kuota-actuator"
LWS_KIND = {"group": "leaderworkerset.x-k8s.io", "version": "v1", "kind": "LeaderWorkerSet"}
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def template(gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    resources = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    out: dict[str, Any] = {
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": resources}]}
    }
    if labels is not None:
        out["metadata"] = {"labels": labels}
    return out


def lws(
    *,
    labels: dict[str, str] | None = None,
    leader: dict[str, Any] | None = None,
    worker: dict[str, Any] | None = None,
    size: int = 3,
    replicas: int = 2,
    **spec: Any,
) -> dict[str, Any]:
    lwt: dict[str, Any] = {"size": size, "workerTemplate": worker or template(1)}
    if leader is not None:
        lwt["leaderTemplate"] = leader
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "team-a", "uid": "l1", "labels": labels or {}},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt, **spec},
    }


def review_lws(obj: dict[str, Any], *, old: dict[str, Any] | None = None) -> dict[str, Any]:
    return admission_review(obj, LWS_KIND, old=old, user=ALICE)


def review_pod(
    obj: dict[str, Any], *, old: dict[str, Any] | None = None, user: str = ALICE
) -> dict[str, Any]:
    return admission_review(obj, POD_KIND, old=old, user=user)


def templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return {k: lwt[k] for k in ("leaderTemplate", "workerTemplate") if k in lwt}


def message(answer: Any) -> str:
    text: str = answer.review["response"]["status"]["message"]
    return text


def lws_pod(
    from_template: dict[str, Any],
    *,
    name: str = "lws",
    group: int = 0,
    worker: int = 0,
    size: str | None = "3",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as the LWS controller makes it from ``from_template``: the template's
    metadata and spec, the LWS labels and the size annotation (``size`` None: none)."""
    md = copy.deepcopy(from_template.get("metadata") or {})
    labels = {
        **md.get("labels", {}),
        LWS_NAME: name,
        LWS_INDEX: str(group),
        LWS_WORKER: str(worker),
    }
    ann = {**md.get("annotations", {}), **(annotations or {})}
    if size is not None:
        ann[LWS_SIZE] = size
    pod_name = f"{name}-{group}" if worker == 0 else f"{name}-{group}-{worker}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": "team-a",
            "uid": f"u-{pod_name}",
            "labels": labels,
            "annotations": ann,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": name,
                    "uid": "s1",
                    "controller": True,
                }
            ],
        },
        "spec": copy.deepcopy(from_template["spec"]),
    }


def created(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as stored after the webhook's CREATE answer (which must allow it)."""
    answer = mutate_job(review_pod(pod))
    assert answer.review["response"]["allowed"] is True, answer.review
    return apply_patch(pod, patch_of(answer.review))


# --------------------------------------------------------------------------- the LWS


def test_a_labelled_lws_gets_its_queue_and_priority_in_both_templates() -> None:
    obj = lws(
        labels={QUEUE: "lq", PRIORITY: "high", "team": "a"},
        leader=template(2),  # no metadata at all
        worker={**template(1), "metadata": {"annotations": {"x": "y"}}},  # no labels
    )
    answer = mutate_job(review_lws(obj))
    assert answer.review["response"]["allowed"] is True
    assert answer.outcome == "labelled"
    stored = apply_patch(obj, patch_of(answer.review))
    for name, t in templates(stored).items():
        assert t["metadata"]["labels"] == {QUEUE: "lq", PRIORITY: "high"}, name
    assert templates(stored)["workerTemplate"]["metadata"]["annotations"] == {"x": "y"}
    assert stored["metadata"] == obj["metadata"], "the object's own labels as they were"
    assert stored["spec"]["leaderWorkerTemplate"]["size"] == 3
    again = mutate_job(review_lws(stored, old=stored))
    assert (again.outcome, patch_of(again.review)) == ("unchanged", None), "once"


def test_the_objects_labels_win_over_a_templates_own() -> None:
    obj = lws(
        labels={QUEUE: "lq"},
        leader=template(2, {QUEUE: "elsewhere", "role": "leader"}),
        worker=template(1, {QUEUE: "lq", PRIORITY: "own"}),
    )
    stored = apply_patch(obj, patch_of(mutate_job(review_lws(obj)).review))
    leader, worker = templates(stored)["leaderTemplate"], templates(stored)["workerTemplate"]
    assert leader["metadata"]["labels"] == {QUEUE: "lq", "role": "leader"}
    # no priority on the object: the template's own stays (the pods' own choice)
    assert worker["metadata"]["labels"] == {QUEUE: "lq", PRIORITY: "own"}


def test_without_a_leader_template_only_the_worker_template_is_labelled() -> None:
    obj = lws(labels={QUEUE: "lq"})
    answer = mutate_job(review_lws(obj))
    assert patch_of(answer.review) == [
        {
            "op": "add",
            "path": "/spec/leaderWorkerTemplate/workerTemplate/metadata",
            "value": {"labels": {QUEUE: "lq"}},
        }
    ]
    assert "leaderTemplate" not in templates(apply_patch(obj, patch_of(answer.review)))


def test_an_update_copies_the_new_queue_into_the_templates() -> None:
    before = lws(
        labels={QUEUE: "lq"}, leader=template(2, {QUEUE: "lq"}), worker=template(1, {QUEUE: "lq"})
    )
    after = copy.deepcopy(before)
    after["metadata"]["labels"][QUEUE] = "other"
    answer = mutate_job(review_lws(after, old=before))
    assert answer.outcome == "labelled"
    stored = apply_patch(after, patch_of(answer.review))
    assert {t["metadata"]["labels"][QUEUE] for t in templates(stored).values()} == {"other"}


@pytest.mark.parametrize("labels", [{}, {"team": "a"}, {QUEUE: ""}], ids=["none", "other", "empty"])
def test_an_lws_without_the_queue_label_is_left_alone(labels: dict[str, str]) -> None:
    obj = lws(labels=labels, leader=template(2), worker=template(1, {QUEUE: "mine"}))
    for body in (review_lws(obj), review_lws(obj, old=lws(labels={QUEUE: "lq"}))):
        answer = mutate_job(body)
        assert (answer.outcome, patch_of(answer.review)) == ("unchanged", None)
        assert answer.review["response"]["allowed"] is True


def test_leader_ready_is_refused_for_a_queued_lws() -> None:
    refused = mutate_job(review_lws(lws(labels={QUEUE: "lq"}, startupPolicy="LeaderReady")))
    assert refused.outcome == "refused" and refused.review["response"]["allowed"] is False
    assert message(refused).startswith('spec.startupPolicy: Invalid value "LeaderReady"')
    ok = mutate_job(review_lws(lws(labels={QUEUE: "lq"}, startupPolicy="LeaderCreated")))
    assert ok.outcome == "labelled"
    unqueued = mutate_job(review_lws(lws(startupPolicy="LeaderReady")))
    assert unqueued.outcome == "unchanged", "not kuota's: its own business"


def test_the_owner_rule_holds_for_an_lws() -> None:
    obj = lws(labels={QUEUE: "lq"})
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "p",
            "uid": "p1",
            "controller": True,
        }
    ]
    answer = mutate_job(review_lws(obj))
    assert (answer.outcome, patch_of(answer.review)) == ("unchanged", None)


# --------------------------------------------------------------------------- its pods


def test_an_lws_pod_is_put_in_its_groups_pod_group_and_gated() -> None:
    pod = lws_pod(template(1, {QUEUE: "lq", PRIORITY: "high"}), group=1, worker=2)
    answer = mutate_job(review_pod(pod))
    assert answer.outcome == "gated"
    assert "leaderworkerset-lws-1" in answer.why
    stored = apply_patch(pod, patch_of(answer.review))
    md = stored["metadata"]
    assert md["labels"][GROUP] == "leaderworkerset-lws-1"
    assert md["annotations"][COUNT] == "3"
    assert ROLE not in md["annotations"]
    assert md["labels"][MANAGED] == "true"
    assert stored["spec"]["schedulingGates"] == [GATE]
    assert md["labels"][QUEUE] == "lq" and md["labels"][LWS_INDEX] == "1", "the rest as it was"
    assert pod_workload_key(stored) == "team-a/podgroup/leaderworkerset-lws-1"
    member = read_pod(stored, at=0.0)
    assert isinstance(member, PodMember)
    assert (member.group, member.total, member.pod_group, member.gated) == (
        "leaderworkerset-lws-1",
        3,
        True,
        True,
    )


def test_a_users_group_count_and_role_are_overwritten_by_the_lws_labels() -> None:
    """Nothing a user writes in the template moves the pod out of its LWS group."""
    own = template(1, {QUEUE: "lq", GROUP: "somewhere-else"})
    own["metadata"]["annotations"] = {COUNT: "1", ROLE: "main"}
    pod = lws_pod(own, group=0, worker=1)
    stored = created(pod)
    md = stored["metadata"]
    assert (md["labels"][GROUP], md["annotations"][COUNT]) == ("leaderworkerset-lws-0", "3")
    assert ROLE not in md["annotations"], "the shape names the podset"
    assert pod_workload_key(stored) == "team-a/podgroup/leaderworkerset-lws-0"
    # a count the user wrote wrong is not held against the pod: the size decides
    own["metadata"]["annotations"][COUNT] = "many"
    assert created(lws_pod(own))["metadata"]["annotations"][COUNT] == "3"


def test_a_pod_moving_out_of_its_lws_group_is_refused() -> None:
    stored = created(lws_pod(template(1, {QUEUE: "lq"}), group=1))
    moved = copy.deepcopy(stored)
    moved["metadata"]["labels"][GROUP] = "mine"
    refused = mutate_job(review_pod(moved, old=stored))
    assert refused.outcome == "refused"
    assert message(refused).startswith(f"metadata.labels[{GROUP}]: Forbidden")
    ungated = copy.deepcopy(stored)
    ungated["spec"]["schedulingGates"] = []
    refused = mutate_job(review_pod(ungated, old=stored))
    assert message(refused).startswith("spec.schedulingGates: Forbidden")
    ok = mutate_job(review_pod(ungated, old=stored, user=ACTUATOR), trusted_users={ACTUATOR})
    assert ok.outcome == "unchanged" and ok.review["response"]["allowed"] is True


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (None, f"metadata.annotations[{LWS_SIZE}]: Required"),
        ("three", f"metadata.annotations[{LWS_SIZE}]: Invalid value 'three'"),
        ("0", f"metadata.annotations[{LWS_SIZE}]: Invalid value '0'"),
        ("-1", f"metadata.annotations[{LWS_SIZE}]: Invalid value '-1'"),
        ("²", f"metadata.annotations[{LWS_SIZE}]: Invalid value '²'"),
        (str(MAX_PODS + 1), f"metadata.annotations[{LWS_SIZE}]: Invalid value '{MAX_PODS + 1}'"),
        ("9" * 5000, f"metadata.annotations[{LWS_SIZE}]: Invalid value '999"),
    ],
    ids=["missing", "word", "zero", "negative", "superscript", "too many", "5000 digits"],
)
def test_an_lws_pod_without_a_usable_size_is_refused(size: str | None, text: str) -> None:
    answer = mutate_job(review_pod(lws_pod(template(1, {QUEUE: "lq"}), size=size)))
    assert answer.outcome == "refused" and answer.review["response"]["allowed"] is False
    assert message(answer).startswith(text), message(answer)
    assert "pods" in message(answer)


@pytest.mark.parametrize(
    ("labels", "text"),
    [
        ({LWS_INDEX: "one"}, f"metadata.labels[{LWS_INDEX}]: Invalid value 'one'"),
        ({LWS_INDEX: "-1"}, f"metadata.labels[{LWS_INDEX}]: Invalid value '-1'"),
        ({LWS_NAME: ""}, f"metadata.labels[{LWS_NAME}]: Invalid value ''"),
    ],
)
def test_an_lws_pod_with_bad_lws_labels_is_refused(labels: dict[str, str], text: str) -> None:
    pod = lws_pod(template(1, {QUEUE: "lq"}))
    pod["metadata"]["labels"].update(labels)
    answer = mutate_job(review_pod(pod))
    assert answer.outcome == "refused"
    assert message(answer).startswith(text), message(answer)


def test_an_lws_pod_without_the_queue_label_is_left_alone_as_any_pod() -> None:
    """As in Kueue, the queue label comes from the template: an unlabelled LWS's pods
    are not kuota's, whatever LWS labels (or a bad size) they carry."""
    for size in ("3", None, "x"):
        answer = mutate_job(review_pod(lws_pod(template(1, {"team": "a"}), size=size)))
        assert (answer.outcome, patch_of(answer.review)) == ("unchanged", None)
        assert answer.review["response"]["allowed"] is True


def test_a_pod_with_only_one_of_the_lws_labels_is_a_plain_pod() -> None:
    pod = lws_pod(template(1, {QUEUE: "lq"}))
    del pod["metadata"]["labels"][LWS_INDEX]
    stored = created(pod)
    assert GROUP not in stored["metadata"]["labels"], "a single Pod"
    assert stored["spec"]["schedulingGates"] == [GATE]


def test_an_update_of_an_lws_pod_is_not_mutated() -> None:
    stored = created(lws_pod(template(1, {QUEUE: "lq"})))
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"]["labels"]["team"] = "a"
    answer = mutate_job(review_pod(relabelled, old=stored))
    assert (answer.outcome, patch_of(answer.review)) == ("unchanged", None)


# --------------------------------------------------------------------------- group names


def test_a_long_name_is_cut_and_hashed_into_a_dns_label() -> None:
    long = "a" * 60
    name = leader_worker_group_name("team-a", long, 12)
    assert len(name) <= 63 and DNS1123_LABEL.match(name), name
    assert name.startswith("leaderworkerset-aaaa") and "-12-" in name
    assert name == leader_worker_group_name("team-a", long, 12), "stable"
    others = {
        leader_worker_group_name("team-b", long, 12),
        leader_worker_group_name("team-a", long, 13),
        leader_worker_group_name("team-a", long + "b", 12),
        leader_worker_group_name("team-a", long[:-1] + "b", 12),
    }
    assert name not in others and len(others) == 4, "the full name, namespace, index decide"
    # the longest name that needs no hash, and one character more
    fits = "b" * (63 - len("leaderworkerset--9"))
    assert leader_worker_group_name("ns", fits, 9) == f"leaderworkerset-{fits}-9"
    cut = leader_worker_group_name("ns", fits + "b", 9)
    assert len(cut) <= 63 and DNS1123_LABEL.match(cut) and cut != f"leaderworkerset-{fits}b-9"
    # a name that is no DNS label part (a label value may hold '.', '_', capitals)
    odd = leader_worker_group_name("ns", "My_LWS.v2", 0)
    assert DNS1123_LABEL.match(odd) and odd.startswith("leaderworkerset-my-lws-v2-0-")
    assert DNS1123_LABEL.match(leader_worker_group_name("ns", "._.", 0))


def test_a_long_lws_names_pods_share_one_valid_group() -> None:
    long = "x" * 70
    pods = [
        created(lws_pod(template(1, {QUEUE: "lq"}), name=long, group=3, worker=w, size="2"))
        for w in range(2)
    ]
    names = {p["metadata"]["labels"][GROUP] for p in pods}
    assert len(names) == 1
    (group,) = names
    assert len(group) <= 63 and DNS1123_LABEL.match(group)
    assert all(isinstance(read_pod(p, at=0.0), PodMember) for p in pods), "the fold reads it"


# --------------------------------------------------------------------------- LWS to gang


@pytest.mark.parametrize("leader_gpus", [1, 4], ids=["leader alike", "leader bigger"])
def test_an_lws_groups_pods_are_the_gang_the_simulator_reads(leader_gpus: int) -> None:
    """The LWS through the webhook, its pods made as its controller makes them and
    through the webhook too: each group is one pod group of ``size`` pods charged
    what ``read_leader_worker_set`` charges a group; the podsets are the shapes
    (one when the leader is like the workers, two when it is not)."""
    obj = lws(labels={QUEUE: "lq"}, leader=template(leader_gpus), worker=template(1), size=3)
    stored = apply_patch(obj, patch_of(mutate_job(review_lws(obj)).review))
    t = templates(stored)
    for group in range(2):
        members = []
        for worker in range(3):
            source = t["leaderTemplate"] if worker == 0 else t["workerTemplate"]
            pod = created(lws_pod(source, group=group, worker=worker))
            member = read_pod(pod, at=0.0)
            assert isinstance(member, PodMember)
            members.append(member)
        workload = pod_group_workload(members)
        assert workload.name == f"leaderworkerset-lws-{group}"
        assert sum(p.count for p in workload.podsets) == 3
        assert len(workload.podsets) == (1 if leader_gpus == 1 else 2)
        gpus = sum(p.count * dict(p.requests)[GPU] for p in workload.podsets)
        read = read_leader_worker_set(stored, at=0.0)
        assert isinstance(read, WorkloadGroup)
        want = sum(p.count * dict(p.requests)[GPU] for p in read.specs[group].podsets)
        assert gpus == want == (leader_gpus + 2) * 1000  # milli-units


# --------------------------------------------------------------------------- the server


async def test_the_server_answers_on_kueues_lws_path() -> None:
    path = kinds.get("LeaderWorkerSet").mutate_path()
    assert path == "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset" and path in PATHS
    app = webhook_app(view=ClusterView(complete=True))
    async with TestClient(TestServer(app)) as c:
        resp = await c.post(path, json=review_lws(lws(labels={QUEUE: "lq"}, leader=template(2))))
        assert resp.status == 200
        body = await resp.json()
        assert body["response"]["allowed"] is True
        assert {op["path"] for op in patch_of(body) or []} == {
            "/spec/leaderWorkerTemplate/leaderTemplate/metadata",
            "/spec/leaderWorkerTemplate/workerTemplate/metadata",
        }
