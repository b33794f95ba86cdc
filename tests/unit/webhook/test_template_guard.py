"""The template guard (docs/design/template-guard.md): a user's DELETE of a
ResourceClaimTemplate that a running Job kuota started names is refused; any
other DELETE, another operation, kuota's own identity and a system namespace
pass; the server reads the namespace's Jobs through ``jobs_of``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from kuota.kube.template_guard import PATH, TemplateDelete, answer_delete, template_delete, users
from kuota_webhook.server import webhook_app

ALICE = "system:serviceaccount:team-a:alice"
ACTUATOR = "system:serviceaccount:kuota-system:kuota-actuator"
TRUSTED = frozenset({ACTUATOR})


def review(
    *, operation: str = "DELETE", user: str = ALICE, namespace: str = "team-a", name: str = "gpu"
) -> dict[str, Any]:
    request = {
        "uid": "rev-1",
        "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaimTemplate"},
        "operation": operation,
        "namespace": namespace,
        "name": name,
        "userInfo": {"username": user},
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def job(
    name: str,
    *,
    template: str = "gpu",
    suspend: bool = False,
    started: bool = True,
    done: str | None = None,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": "team-a"}
    if started:
        md["annotations"] = {"kuota.dev/decision-id": "d1"}
    pod = {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": template}]}
    out: dict[str, Any] = {"metadata": md, "spec": {"suspend": suspend, "template": {"spec": pod}}}
    if done:
        out["status"] = {"conditions": [{"type": done, "status": "True"}]}
    return out


def checked(body: dict[str, Any]) -> TemplateDelete:
    check = template_delete(body, trusted_users=TRUSTED)
    assert isinstance(check, TemplateDelete), check
    return check


def test_a_template_a_running_job_names_may_not_be_deleted() -> None:
    check = checked(review())
    a = answer_delete(check, [job("train"), job("on-slice", template="slice")])
    response = a.review["response"]
    assert a.outcome == "refused"
    assert (response["allowed"], response["status"]["code"]) == (False, 403)
    message = response["status"]["message"]
    assert message.startswith(
        f'user "{ALICE}" may not delete ResourceClaimTemplate "team-a/gpu": it is in use by '
        "the running Job train"
    )
    assert "on-slice" not in message, "a Job on another template is not named"


def test_what_does_not_hold_the_template() -> None:
    check = checked(review())
    idle = [
        job("queued", suspend=True),  # suspended: kuota re-charges it when the template changes
        job("done", done="Complete"),
        job("failed", done="Failed"),
        job("unmanaged", started=False),  # never started by kuota
        job("elsewhere", template="slice"),
    ]
    a = answer_delete(check, idle)
    assert (a.outcome, a.review["response"]["allowed"]) == ("unchanged", True)
    assert users("gpu", idle) == []


def test_many_users_are_counted_not_all_named() -> None:
    a = answer_delete(checked(review()), [job(f"j{i}") for i in range(5)])
    message = a.review["response"]["status"]["message"]
    assert "running Jobs j0, j1, j2 and 2 more," in message


def test_jobs_that_cannot_be_read_refuse_as_retryable() -> None:
    a = answer_delete(checked(review()), "HTTP 500: etcd is away")
    status = a.review["response"]["status"]
    assert (a.outcome, status["code"], status["reason"]) == ("refused", 503, "ServiceUnavailable")
    assert "HTTP 500: etcd is away" in status["message"] and "retry" in status["message"]


def test_nothing_to_check() -> None:
    for body, why in [
        (review(user=ACTUATOR), "trusted"),
        (review(operation="CREATE"), "operation CREATE"),
        (review(namespace="kube-system"), "not kuota's"),
    ]:
        a = template_delete(body, trusted_users=TRUSTED)
        assert not isinstance(a, TemplateDelete)
        assert a.outcome == "unchanged" and why in a.why
        assert a.review["response"]["allowed"] is True
    other_kind = review()
    other_kind["request"]["kind"]["kind"] = "ResourceClaim"
    a = template_delete(other_kind, trusted_users=TRUSTED)
    assert not isinstance(a, TemplateDelete) and a.outcome == "unchanged"
    for bad in (None, {"request": {}}, {"request": {"uid": "u", "kind": {}}}):
        a = template_delete(bad)
        assert not isinstance(a, TemplateDelete)
        assert a.review["response"]["allowed"] is True
    nameless = review()
    del nameless["request"]["name"]
    a = template_delete(nameless)
    assert not isinstance(a, TemplateDelete) and a.outcome == "malformed"


async def test_the_server_reads_the_namespace_jobs() -> None:
    asked: list[str] = []
    jobs: list[Mapping[str, Any]] = [job("train")]

    async def jobs_of(namespace: str) -> Sequence[Mapping[str, Any]] | str:
        asked.append(namespace)
        return jobs

    async with TestClient(TestServer(webhook_app(TRUSTED, None, jobs_of))) as http:
        body = await (await http.post(PATH, json=review())).json()
        assert body["response"]["allowed"] is False
        assert "the running Job train" in body["response"]["status"]["message"]
        jobs.clear()
        body = await (await http.post(PATH, json=review())).json()
        assert body["response"]["allowed"] is True
        body = await (await http.post(PATH, json=review(user=ACTUATOR))).json()
        assert body["response"]["allowed"] is True
        assert asked == ["team-a", "team-a"], "kuota's own DELETE reads nothing"
    async with TestClient(TestServer(webhook_app(TRUSTED))) as http:
        body = await (await http.post(PATH, json=review())).json()
        assert body["response"]["status"]["code"] == 503, "no client: cannot tell, refused"
