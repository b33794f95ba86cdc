"""The mutating webhook's answers (``kuota.kube.admission_review``), its HTTP
handler (``kuota_webhook.server``, served in-process without TLS: the review,
/healthz, /readyz), and the settings' startup errors (``kuota_webhook.settings``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kuota.bus.settings import SettingsError
from kuota.kube.admission_review import mutate_job
from kuota.kube.cluster_view import ClusterView
from kuota_webhook.server import PATH, webhook_app
from kuota_webhook.settings import WebhookSettings

QUEUE = "kueue.x-k8s.io/queue-name"
ALICE = "system:serviceaccount:team-a:alice"
ACTUATOR = "system:serviceaccount:kuota-system:kuota-actuator"


def review(
    *,
    operation: str = "CREATE",
    labels: dict[str, str] | None = None,
    suspend: bool | None = None,
    kind: tuple[str, str] = ("batch", "Job"),
    annotations: dict[str, str] | None = None,
    user: str = ALICE,
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {}}
    if suspend is not None:
        spec["suspend"] = suspend
    md: dict[str, Any] = {"name": "j", "labels": labels or {}}
    if annotations is not None:
        md["annotations"] = annotations
    request: dict[str, Any] = {
        "uid": "rev-1",
        "kind": {"group": kind[0], "version": "v1", "kind": kind[1]},
        "operation": operation,
        "namespace": "team-a",
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": {"metadata": md, "spec": spec},
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]] | None:
    response = answer["response"]
    if "patch" not in response:
        return None
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


SUSPEND = [{"op": "add", "path": "/spec/suspend", "value": True}]
GATE = [  # a Pod (#18): held by Kueue's scheduling gate, marked managed
    {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "kueue.x-k8s.io/admission"}]},
    {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1managed", "value": "true"},
]


@pytest.mark.parametrize(
    ("body", "outcome", "patch"),
    [
        (review(labels={QUEUE: "lq"}, suspend=False), "suspended", SUSPEND),
        (review(labels={QUEUE: "lq"}), "suspended", SUSPEND),
        (review(labels={QUEUE: "lq"}, suspend=True), "unchanged", None),
        (review(labels={"other": "x"}, suspend=False), "unchanged", None),
        (review(operation="UPDATE", labels={QUEUE: "lq"}, suspend=False), "unchanged", None),
        (review(kind=("", "Pod"), labels={QUEUE: "lq"}), "gated", GATE),
        (review(kind=("apps", "Deployment"), labels={QUEUE: "lq"}), "unchanged", None),
    ],
    ids=["label+false", "label+absent", "label+true", "no label", "update", "pod", "other"],
)
def test_answers(body: dict[str, Any], outcome: str, patch: Any) -> None:
    a = mutate_job(body)
    assert a.outcome == outcome
    assert a.review["apiVersion"] == "admission.k8s.io/v1"
    assert a.review["kind"] == "AdmissionReview"
    assert a.review["response"]["uid"] == "rev-1"
    assert a.review["response"]["allowed"] is True
    assert patch_of(a.review) == patch
    assert "warnings" not in a.review["response"]


# --------------------------------------------------------------------------- kuota.dev/ annotations

CREATED_AT = "kuota.dev/created-at"
DECISION = "kuota.dev/decision-id"
TRUSTED = frozenset({ACTUATOR})


def stored(annotations: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The Job as stored, the ``oldObject`` of an UPDATE."""
    md = {"name": "j", "labels": {QUEUE: "lq"} if labels is None else labels}
    return {"metadata": {**md, "annotations": annotations}, "spec": {"suspend": True}}


def refusal(a: Any) -> str:
    """The message of a refused answer (and the shape the apiserver wants)."""
    assert a.outcome == "refused"
    response = a.review["response"]
    assert response["uid"] == "rev-1" and response["allowed"] is False
    assert "patch" not in response, "a refusal mutates nothing"
    assert (response["status"]["code"], response["status"]["reason"]) == (403, "Forbidden")
    message: str = response["status"]["message"]
    return message


def test_a_user_who_back_dates_created_at_is_refused_with_the_reason() -> None:
    body = review(labels={QUEUE: "lq"}, annotations={CREATED_AT: "0"})
    message = refusal(mutate_job(body, trusted_users=TRUSTED))
    assert message == (
        f'metadata.annotations[kuota.dev/created-at]: Forbidden: user "{ALICE}" may not set '
        "it: only kuota writes kuota.dev/ annotations (queue order comes from "
        "metadata.creationTimestamp, which the apiserver sets); remove it; "
        "kuota.dev/active is the one kuota.dev/ annotation users may set"
    )


def test_every_kuota_annotation_is_named_once_sorted() -> None:
    ann = {DECISION: "d", CREATED_AT: "0", "kuota.dev/run-for": "1s", "owner": "x"}
    message = refusal(mutate_job(review(labels={QUEUE: "lq"}, annotations=ann)))
    named = [part.split("]")[0] for part in message.split("metadata.annotations[")[1:]]
    assert named == [CREATED_AT, DECISION, "kuota.dev/run-for"]
    assert "the actuator's record of the decision it applied" in message
    assert "a simulator annotation, meaningless on a cluster" in message
    assert "owner" not in message, "other annotations are the user's business"


@pytest.mark.parametrize(
    ("body", "outcome"),
    [
        (review(labels={QUEUE: "lq"}, annotations={"kuota.dev/active": "false"}), "suspended"),
        (review(labels={QUEUE: "lq"}, annotations={CREATED_AT: "0"}, user=ACTUATOR), "suspended"),
        (review(labels={}, annotations={CREATED_AT: "0"}), "unchanged"),
        (review(labels={QUEUE: "lq"}, annotations={"example.com/kuota.dev/x": "1"}), "suspended"),
    ],
    ids=["active is the user's", "kuota's identity", "not queued", "another prefix"],
)
def test_create_allowed(body: dict[str, Any], outcome: str) -> None:
    a = mutate_job(body, trusted_users=TRUSTED)
    assert a.outcome == outcome
    assert a.review["response"]["allowed"] is True


def test_with_no_trusted_users_kuotas_identity_is_a_user_too() -> None:
    body = review(labels={QUEUE: "lq"}, annotations={CREATED_AT: "0"}, user=ACTUATOR)
    assert ACTUATOR in refusal(mutate_job(body))
    anonymous = review(labels={QUEUE: "lq"}, annotations={CREATED_AT: "0"}, user="")
    assert "an anonymous user may not set it" in refusal(mutate_job(anonymous))


Q = {QUEUE: "lq"}
UPDATE_REFUSED = [
    ("set", stored({}), {DECISION: "d"}),
    ("change", stored({DECISION: "d"}), {DECISION: "e"}),
    ("remove", stored({DECISION: "d", "team": "x"}), {"team": "x"}),
    ("set", stored({DECISION: "d"}, labels={}), {DECISION: "d"}),  # queued by this update
    ("set", stored({}), {CREATED_AT: "0"}),
]


@pytest.mark.parametrize(
    ("verb", "old", "new"),
    UPDATE_REFUSED,
    ids=["add", "change", "remove", "label added", "created-at"],
)
def test_a_users_update_of_a_kuota_annotation_is_refused(
    verb: str, old: dict[str, Any], new: dict[str, str]
) -> None:
    body = review(operation="UPDATE", labels=Q, annotations=new, old=old)
    message = refusal(mutate_job(body, trusted_users=TRUSTED))
    assert f'user "{ALICE}" may not {verb} it' in message
    fix = {"set": "remove it", "change": "keep the value kuota wrote", "remove": "keep it"}[verb]
    assert f"); {fix}" in message
    # kuota's own identity may do exactly the same
    trusted = review(operation="UPDATE", labels=Q, annotations=new, old=old, user=ACTUATOR)
    a = mutate_job(trusted, trusted_users=TRUSTED)
    assert (a.outcome, a.review["response"]["allowed"]) == ("unchanged", True)
    assert "patch" not in a.review["response"], "an UPDATE is never mutated"


@pytest.mark.parametrize(
    ("old", "new", "labels"),
    [
        (stored({DECISION: "d"}), {DECISION: "d", "team": "y"}, Q),  # kept as kuota wrote it
        (stored({}), {"kuota.dev/active": "false"}, Q),  # the user's lever
        (stored({"kuota.dev/active": "false"}), {}, Q),
        (stored({}, labels={}), {DECISION: "d"}, {}),  # never queued
    ],
    ids=["kept", "active set", "active removed", "not queued"],
)
def test_a_users_update_that_keeps_kuotas_annotations_is_allowed(
    old: dict[str, Any], new: dict[str, str], labels: dict[str, str]
) -> None:
    # Still suspended: unsuspending is the door's business (test_webhook_server_door).
    body = review(operation="UPDATE", labels=labels, suspend=True, annotations=new, old=old)
    a = mutate_job(body, trusted_users=TRUSTED)
    assert (a.outcome, a.review["response"]["allowed"]) == ("unchanged", True)
    assert "patch" not in a.review["response"], "an UPDATE never re-suspends"


def test_removing_the_queue_label_keeps_kuotas_annotations_but_is_refused() -> None:
    """The annotation rule lets the kept annotation pass; the queue-label rule (#22)
    refuses the removal itself, and only that."""
    old = stored({DECISION: "d"})
    body = review(operation="UPDATE", labels={}, suspend=True, annotations={DECISION: "d"}, old=old)
    message = refusal(mutate_job(body, trusted_users=TRUSTED))
    assert message.startswith(f"metadata.labels[{QUEUE}]: Forbidden: user")
    assert "annotations" not in message


def test_rules_are_one_list_a_new_rule_joins() -> None:
    """The seam later rules (spec.suspend, the queue label) plug into."""
    from kuota.kube.admission_review import RULES, Change, kuota_annotations, refusals

    assert kuota_annotations in RULES
    change = Change("UPDATE", ALICE, False, stored({}), stored({CREATED_AT: "0"}))

    def no_suspend(c: Change) -> list[str]:
        return [] if c.trusted else ["spec.suspend: Forbidden: kuota's lever"]

    reasons = refusals(change, (*RULES, no_suspend))
    assert len(reasons) == 3 and reasons[-1].startswith("spec.suspend")
    assert refusals(Change("UPDATE", ACTUATOR, True, stored({}), stored({CREATED_AT: "0"}))) == []


def _no_uid() -> dict[str, Any]:
    r = review()
    del r["request"]["uid"]
    return r


def _no_spec() -> dict[str, Any]:
    r = review(labels={QUEUE: "lq"})
    r["request"]["object"]["spec"] = None
    return r


@pytest.mark.parametrize(
    "body", [None, 1, "x", [], {}, {"request": 1}, _no_uid(), _no_spec()], ids=repr
)
def test_malformed_reviews_are_allowed_with_a_warning(body: Any) -> None:
    a = mutate_job(body)
    assert a.outcome == "malformed"
    assert a.review["response"]["allowed"] is True
    assert a.review["response"]["warnings"], "a malformed review carries a warning"
    assert "patch" not in a.review["response"]


async def test_http_handler() -> None:
    async with TestClient(TestServer(webhook_app())) as http:
        resp = await http.post(PATH, json=review(labels={QUEUE: "lq"}, suspend=False))
        assert resp.status == 200
        assert patch_of(await resp.json()) == SUSPEND
        resp = await http.post(PATH, data=b"\xffnot json")
        assert resp.status == 200
        body = await resp.json()
        assert body["response"]["allowed"] is True and body["response"]["warnings"]
        resp = await http.get("/healthz")
        assert resp.status == 200
        assert (await http.get("/readyz")).status == 200, "labels only: always complete"
    async with TestClient(TestServer(webhook_app(TRUSTED))) as http:
        back_dated = review(labels={QUEUE: "lq"}, annotations={CREATED_AT: "0"})
        resp = await http.post(PATH, json=back_dated)
        assert resp.status == 200, "a refusal is an answer, not an HTTP error"
        assert "kuota.dev/created-at" in refusal_of(await resp.json())
        resp = await http.post(
            PATH,
            json=review(labels={QUEUE: "lq"}, annotations={CREATED_AT: "0"}, user=ACTUATOR),
        )
        assert patch_of(await resp.json()) == SUSPEND, "kuota's identity, as configured"


async def test_ready_only_once_the_view_is_complete() -> None:
    view = ClusterView()
    async with TestClient(TestServer(webhook_app(TRUSTED, view))) as http:
        assert (await http.get("/healthz")).status == 200, "serving"
        resp = await http.get("/readyz")
        assert resp.status == 503 and "first LISTs" in await resp.text()
        view.mark_complete()
        assert (await http.get("/readyz")).status == 200


def refusal_of(body: dict[str, Any]) -> str:
    response = body["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    return str(response["status"]["message"])


# --------------------------------------------------------------------------- settings


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out = {}
    for var, name in (
        ("KUBECONFIG", "kubeconfig"),
        ("KUOTA_WEBHOOK_CERT_FILE", "tls.crt"),
        ("KUOTA_WEBHOOK_KEY_FILE", "tls.key"),
    ):
        (tmp_path / name).write_text("x\n")
        out[var] = str(tmp_path / name)
    return out


def test_settings_defaults(files: dict[str, str]) -> None:
    s = WebhookSettings.from_env(files)
    assert (s.metrics_port, s.port, s.host, s.cert_check_seconds) == (9105, 9443, "0.0.0.0", 10.0)
    assert s.trusted_users == {ACTUATOR}, "deploy/base's actuator"
    assert (s.config_file, s.config_map, s.job_label_selector) == (None, None, None)
    s = WebhookSettings.from_env(
        {
            **files,
            "KUOTA_WEBHOOK_TRUSTED_USERS": " kuota-admin, u2,",
            "KUOTA_CONFIG_CONFIGMAP": "kuota-system/kuota-config",
        }
    )
    assert s.trusted_users == {"kuota-admin", "u2"}
    assert s.config_map == ("kuota-system", "kuota-config")


def test_settings_need_neither_kafka_nor_redis(files: dict[str, str]) -> None:
    """The point of the process (#23 item 7): nothing of the journal's."""
    WebhookSettings.from_env(files)  # no KUOTA_KAFKA_BOOTSTRAP, no KUOTA_REDIS_URL
    text = (Path(__file__).resolve().parents[3] / "services/webhook/kuota_webhook").glob("*.py")
    for module in text:
        source = module.read_text()
        for name in ("aiokafka", "kuota.bus.topics", "kuota.store", "redis"):
            assert f"import {name}" not in source and f"from {name}" not in source, module


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KUBECONFIG": "/nonexistent"}, "no such file"),
        ({"KUOTA_WEBHOOK_CERT_FILE": ""}, "KUOTA_WEBHOOK_CERT_FILE is not set"),
        ({"KUOTA_WEBHOOK_KEY_FILE": ""}, "KUOTA_WEBHOOK_KEY_FILE is not set"),
        ({"KUOTA_WEBHOOK_KEY_FILE": "/y"}, "no such file"),
        ({"KUOTA_WEBHOOK_PORT": "0"}, "must listen"),
        ({"KUOTA_WEBHOOK_PORT": "70000"}, "not a port"),
        ({"KUOTA_WEBHOOK_CERT_CHECK_SECONDS": "0"}, "must be positive"),
        ({"KUOTA_METRICS_PORT": "70000"}, "not a port"),
        ({"KUOTA_CONFIG_CONFIGMAP": "just-a-name"}, "namespace/name"),
        ({"KUOTA_CONFIG_CONFIGMAP": "a/b", "KUOTA_CONFIG_FILE": "/f"}, "not both"),
        ({"KUOTA_CONFIG_FILE": "/nonexistent"}, "no such file"),
        ({"KUOTA_WEBHOOK_TRUSTED_USERS": " , "}, "names no user"),
    ],
)
def test_settings_errors_are_one_clear_line(
    files: dict[str, str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as err:
        WebhookSettings.from_env({**files, **env})
    assert "\n" not in str(err.value)
