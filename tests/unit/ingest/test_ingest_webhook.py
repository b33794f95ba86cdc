"""The mutating webhook's answers (``kuota.kube.admission_review``), its HTTP
handler (``kuota_ingest.webhook``, served in-process without TLS), and the
settings' startup errors (``kuota_ingest.settings``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kuota.bus.settings import SettingsError
from kuota.kube.admission_review import mutate_job
from kuota_ingest.settings import IngestSettings
from kuota_ingest.webhook import PATH, webhook_app

QUEUE = "kueue.x-k8s.io/queue-name"


def review(
    *,
    operation: str = "CREATE",
    labels: dict[str, str] | None = None,
    suspend: bool | None = None,
    kind: tuple[str, str] = ("batch", "Job"),
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "rev-1",
            "kind": {"group": kind[0], "version": "v1", "kind": kind[1]},
            "operation": operation,
            "namespace": "team-a",
            "object": {"metadata": {"name": "j", "labels": labels or {}}, "spec": spec},
        },
    }


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]] | None:
    response = answer["response"]
    if "patch" not in response:
        return None
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


SUSPEND = [{"op": "add", "path": "/spec/suspend", "value": True}]


@pytest.mark.parametrize(
    ("body", "outcome", "patch"),
    [
        (review(labels={QUEUE: "lq"}, suspend=False), "suspended", SUSPEND),
        (review(labels={QUEUE: "lq"}), "suspended", SUSPEND),
        (review(labels={QUEUE: "lq"}, suspend=True), "unchanged", None),
        (review(labels={"other": "x"}, suspend=False), "unchanged", None),
        (review(operation="UPDATE", labels={QUEUE: "lq"}, suspend=False), "unchanged", None),
        (review(kind=("", "Pod"), labels={QUEUE: "lq"}), "unchanged", None),
    ],
    ids=["label+false", "label+absent", "label+true", "no label", "update", "pod"],
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


# --------------------------------------------------------------------------- settings

BASE = {"KUOTA_KAFKA_BOOTSTRAP": "127.0.0.1:1", "KUOTA_REDIS_URL": "redis://127.0.0.1:1/0"}


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    p = tmp_path / "kubeconfig"
    p.write_text("apiVersion: v1\n")
    return str(p)


def test_settings_defaults(kubeconfig: str) -> None:
    s = IngestSettings.from_env({**BASE, "KUBECONFIG": kubeconfig})
    assert (s.metrics_port, s.webhook_port, s.tick_seconds) == (9101, 9443, 1.0)
    assert s.seen_key == "kuota:ingest:seen"
    assert not s.webhook_enabled, "no certificate: no webhook"
    s = IngestSettings.from_env({**BASE, "KUBECONFIG": kubeconfig, "KUOTA_TOPIC_PREFIX": "t-1."})
    assert s.seen_key == "kuota:ingest:seen:t-1.journal", "a test's memory is its own"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KUOTA_REDIS_URL": ""}, "KUOTA_REDIS_URL is not set"),
        ({"KUBECONFIG": "/nonexistent"}, "no such file"),
        ({"KUOTA_TICK_SECONDS": "0"}, "must be positive"),
        ({"KUOTA_TICK_SECONDS": "soon"}, "not a number"),
        ({"KUOTA_METRICS_PORT": "70000"}, "not a port"),
        ({"KUOTA_WEBHOOK_CERT_FILE": "/x"}, "or neither"),
        ({"KUOTA_WEBHOOK_CERT_FILE": "/x", "KUOTA_WEBHOOK_KEY_FILE": "/y"}, "no such file"),
        ({"KUOTA_CONFIG_CONFIGMAP": "just-a-name"}, "namespace/name"),
        ({"KUOTA_CONFIG_CONFIGMAP": "a/b", "KUOTA_CONFIG_FILE": "/f"}, "not both"),
        ({"KUOTA_CONFIG_FILE": "/nonexistent"}, "no such file"),
    ],
)
def test_settings_errors_are_one_clear_line(
    kubeconfig: str, env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as err:
        IngestSettings.from_env({**BASE, "KUBECONFIG": kubeconfig, **env})
    assert "\n" not in str(err.value)
