"""The webhook's answers for Pods (#18, pod groups): a labelled Pod is created with
Kueue's admission scheduling gate (once) and its ``kueue.x-k8s.io/managed`` label;
only kuota removes the gate (a user's removal is refused, kuota's own identity's
is not); a running Pod keeps its queue label, a Pod its group; bad group metadata
is refused at once; a Job's (or another admitted kind's) pod with the label copied
is let through untouched; the server answers on Kueue's path ``/mutate--v1-pod``."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from builders.admission import admission_review, patch_of

from kuota import kinds
from kuota.kube.admission_pods import gate_patch
from kuota.kube.admission_review import mutate_job
from kuota.kube.cluster_view import ClusterView
from kuota_webhook.server import PATHS, webhook_app

QUEUE = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io/pod-group-name"
COUNT = "kueue.x-k8s.io/pod-group-total-count"
MANAGED = "kueue.x-k8s.io/managed"
GATE = {"name": "kueue.x-k8s.io/admission"}
ALICE = "system:serviceaccount:team-a:alice"
ACTUATOR = "system:serviceaccount:kuota-system:kuota-actuator"
TRUSTED = frozenset({ACTUATOR})


def pod(
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    gates: list[dict[str, str]] | None = None,
    phase: str | None = None,
    owner: tuple[str, str] | None = None,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "p-0", "uid": "u1", "labels": labels or {}}
    if annotations is not None:
        md["annotations"] = annotations
    if owner is not None:
        md["ownerReferences"] = [
            {"apiVersion": owner[0], "kind": owner[1], "name": "o", "uid": "o1", "controller": True}
        ]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


def in_group(**kw: Any) -> dict[str, Any]:
    labels = {QUEUE: "lq", GROUP: "g", **kw.pop("labels", {})}
    annotations = {COUNT: "3", **kw.pop("annotations", {})}
    return pod(labels=labels, annotations=annotations, **kw)


def review(
    obj: dict[str, Any], *, old: dict[str, Any] | None = None, user: str = ALICE
) -> dict[str, Any]:
    return admission_review(obj, {"group": "", "version": "v1", "kind": "Pod"}, old=old, user=user)


def apply_json_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add``, as the apiserver applies the webhook's patch."""
    out = copy.deepcopy(obj)
    for op in ops:
        assert op["op"] == "add"
        *parents, last = [
            t.replace("~1", "/").replace("~0", "~") for t in op["path"][1:].split("/")
        ]
        node = out
        for token in parents:
            node = node[token]
        if last == "-":
            node.append(op["value"])
        else:
            node[last] = op["value"]
    return out


def message(answer: Any) -> str:
    text: str = answer.review["response"]["status"]["message"]
    return text


# --------------------------------------------------------------------------- CREATE


@pytest.mark.parametrize(
    "gates",
    [None, [], [{"name": "example.com/other"}], [GATE]],
    ids=["no gates", "empty", "another gate", "already gated"],
)
def test_a_labelled_pod_is_created_gated_once_and_marked_managed(
    gates: list[dict[str, str]] | None,
) -> None:
    created = in_group(gates=gates)
    answer = mutate_job(review(created))
    assert answer.review["response"]["allowed"] is True
    assert answer.outcome == "gated"
    stored = apply_json_patch(created, patch_of(answer.review) or [])
    names = [g["name"] for g in stored["spec"]["schedulingGates"]]
    assert names.count(GATE["name"]) == 1, names
    assert [n for n in names if n != GATE["name"]] == [g["name"] for g in gates or [] if g != GATE]
    assert stored["metadata"]["labels"][MANAGED] == "true"
    assert stored["metadata"]["labels"][QUEUE] == "lq", "the rest as it was"
    assert gate_patch(stored) == [], "held already: the same patch again is nothing"


def test_a_single_pod_and_a_wrong_managed_value_are_gated_too() -> None:
    single = pod(labels={QUEUE: "lq", MANAGED: "false"})
    answer = mutate_job(review(single))
    stored = apply_json_patch(single, patch_of(answer.review) or [])
    assert stored["spec"]["schedulingGates"] == [GATE]
    assert stored["metadata"]["labels"][MANAGED] == "true"


def test_an_unlabelled_pod_is_not_kuotas() -> None:
    answer = mutate_job(review(pod(labels={"app": "web"})))
    assert (answer.outcome, patch_of(answer.review)) == ("unchanged", None)


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("batch/v1", "Job"), ("kubeflow.org/v1", "PyTorchJob"), ("ray.io/v1", "RayCluster")],
)
def test_the_pod_of_a_workload_admitted_itself_is_let_through_untouched(
    api_version: str, kind: str
) -> None:
    """The queue label copied into a Job's template: the Job is queued, not its pods."""
    created = pod(labels={QUEUE: "lq"}, owner=(api_version, kind))
    answer = mutate_job(review(created))
    assert answer.outcome == "unchanged" and patch_of(answer.review) is None
    assert kind in answer.why
    running = pod(labels={QUEUE: "other"}, owner=(api_version, kind))
    assert mutate_job(review(running, old=created)).outcome == "unchanged"


def test_a_replica_sets_pod_is_gated_as_kueue_gates_a_deployments() -> None:
    answer = mutate_job(review(pod(labels={QUEUE: "lq"}, owner=("apps/v1", "ReplicaSet"))))
    assert answer.outcome == "gated"


@pytest.mark.parametrize(
    ("labels", "annotations", "field"),
    [
        ({GROUP: "g"}, {}, f"metadata.annotations[{COUNT}]: Required"),
        ({}, {COUNT: "3"}, f"metadata.labels[{GROUP}]: Required"),
        ({GROUP: "g"}, {COUNT: "three"}, f"metadata.annotations[{COUNT}]: Invalid value"),
        ({GROUP: "g"}, {COUNT: "0"}, f"metadata.annotations[{COUNT}]: Invalid value"),
        # digits int() refuses: a refusal, not an error of the webhook (a 500)
        ({GROUP: "g"}, {COUNT: "²"}, f"metadata.annotations[{COUNT}]: Invalid value"),
        ({GROUP: "g"}, {COUNT: "9" * 5000}, f"metadata.annotations[{COUNT}]: Invalid value"),
    ],
    ids=["no count", "no group", "word", "zero", "superscript", "5000 digits"],
)
def test_bad_group_metadata_is_refused_at_creation(
    labels: dict[str, str], annotations: dict[str, str], field: str
) -> None:
    answer = mutate_job(review(pod(labels={QUEUE: "lq", **labels}, annotations=annotations)))
    assert answer.outcome == "refused" and answer.review["response"]["allowed"] is False
    assert message(answer).startswith(field), message(answer)


# --------------------------------------------------------------------------- UPDATE


def test_only_kuota_removes_the_admission_gate() -> None:
    held = in_group(gates=[GATE, {"name": "example.com/other"}])
    ungated = in_group(gates=[{"name": "example.com/other"}])
    answer = mutate_job(review(ungated, old=held))
    assert answer.outcome == "refused"
    text = message(answer)
    assert text.startswith("spec.schedulingGates: Forbidden")
    assert 'LocalQueue "lq" (pod group "g")' in text and "only kuota removes it" in text
    by_kuota = mutate_job(review(ungated, old=held, user=ACTUATOR), trusted_users=TRUSTED)
    assert by_kuota.outcome == "unchanged" and by_kuota.review["response"]["allowed"] is True
    # a user's other gate may go: kuota's stays
    theirs = in_group(gates=[GATE])
    assert mutate_job(review(theirs, old=held)).outcome == "unchanged"
    # an update that keeps the gate (a label of the user's own) goes through
    relabelled = in_group(gates=[GATE], labels={"team": "a"})
    assert mutate_job(review(relabelled, old=held)).outcome == "unchanged"


def test_a_running_pod_keeps_its_queue_label_a_held_one_may_move() -> None:
    running = in_group(gates=[])
    moved = in_group(gates=[], labels={QUEUE: "other"})
    refused = mutate_job(review(moved, old=running))
    assert refused.outcome == "refused"
    assert message(refused).startswith(f"metadata.labels[{QUEUE}]: Forbidden")
    assert "may not change it while the Pod runs" in message(refused)
    unlabelled = copy.deepcopy(running)
    del unlabelled["metadata"]["labels"][QUEUE]
    assert "may not remove it" in message(mutate_job(review(unlabelled, old=running)))
    held = in_group(gates=[GATE])
    moved_held = in_group(gates=[GATE], labels={QUEUE: "other"})
    assert mutate_job(review(moved_held, old=held)).outcome == "unchanged", (
        "a gated Pod may move to another LocalQueue (Kueue: while suspended)"
    )
    done = in_group(gates=[], phase="Succeeded")
    after = in_group(gates=[], phase="Succeeded", labels={QUEUE: "other"})
    assert mutate_job(review(after, old=done)).outcome == "unchanged", "an ended Pod too"


def test_a_pods_group_is_fixed_once_set() -> None:
    held = in_group(gates=[GATE])
    other = in_group(gates=[GATE], labels={GROUP: "h"})
    refused = mutate_job(review(other, old=held))
    assert refused.outcome == "refused"
    assert message(refused).startswith(f"metadata.labels[{GROUP}]: Forbidden")
    gone = copy.deepcopy(held)
    del gone["metadata"]["labels"][GROUP]
    assert "may not remove it" in message(mutate_job(review(gone, old=held)))


def test_an_update_of_a_pod_stored_with_bad_metadata_is_not_blocked_by_it() -> None:
    """A Pod stored before the webhook ran, with a count the fold rejects: its owner's
    finalizer removal (say) still goes through; a new bad count does not."""
    stored = in_group(gates=[], annotations={COUNT: "x"})
    finalized = copy.deepcopy(stored)
    finalized["metadata"]["finalizers"] = []
    assert mutate_job(review(finalized, old=stored)).outcome == "unchanged"
    worse = in_group(gates=[], annotations={COUNT: "0"})
    assert mutate_job(review(worse, old=stored)).outcome == "refused"


def test_a_user_may_not_write_kuotas_annotations_on_a_pod() -> None:
    held = in_group(gates=[GATE])
    forged = in_group(gates=[GATE], annotations={"kuota.dev/decision-id": "d1"})
    answer = mutate_job(review(forged, old=held))
    assert answer.outcome == "refused"
    assert "metadata.annotations[kuota.dev/decision-id]: Forbidden" in message(answer)
    by_kuota = mutate_job(review(forged, old=held, user=ACTUATOR), trusted_users=TRUSTED)
    assert by_kuota.outcome == "unchanged"


# --------------------------------------------------------------------------- the server


async def test_the_server_answers_on_kueues_pod_path() -> None:
    path = kinds.get("Pod").mutate_path()
    assert path == "/mutate--v1-pod" and path in PATHS
    app = webhook_app(view=ClusterView(complete=True))
    async with TestClient(TestServer(app)) as c:
        resp = await c.post(path, json=review(in_group()))
        assert resp.status == 200
        body = await resp.json()
        assert body["response"]["allowed"] is True
        assert {op["path"] for op in patch_of(body) or []} == {
            "/spec/schedulingGates",
            "/metadata/labels/kueue.x-k8s.io~1managed",
        }
