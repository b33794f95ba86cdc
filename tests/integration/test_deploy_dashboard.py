"""The ``kuota-dashboard`` Deployment and its access, in both overlays and live.

Rendered with the stack's ``kubectl kustomize`` (a missing stack fails), so
what is checked is what a user applies; ``test_deploy_manifests`` dry-runs the
same overlays on the apiserver. Then the deployed form for real: ``kuota
dashboard`` with a TLS pair and a token file, as the Deployment runs it, on
the stack's Kafka and Redis: HTTPS only, 401 without the token, the page with
it, ``/healthz`` for probes without it.
"""

from __future__ import annotations

import os
import shlex
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_deploy_manifests import NAMESPACE, container, documents, find, one, render

from kuota.store import acl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NAME = "kuota-dashboard"
OVERLAYS = ("dev", "production")


def _overlay(name: str) -> list[dict[str, Any]]:
    return documents(render(f"overlays/{name}"))


def _flag(args: list[str], flag: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]
    return value


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_runs_without_kubernetes_api_access(overlay: str) -> None:
    docs = _overlay(overlay)
    sa = one(docs, "ServiceAccount", NAME)
    assert sa.get("automountServiceAccountToken") is False
    pod = one(docs, "Deployment", NAME)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == NAME and pod["automountServiceAccountToken"] is False
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for binding in find(docs, kind):
            names = {s.get("name") for s in binding.get("subjects") or []}
            assert NAME not in names, f"{kind} {binding['metadata']['name']} binds {NAME}"
    # and no NetworkPolicy lets it reach the apiserver
    api = one(docs, "NetworkPolicy", "kuota-allow-apiserver")
    assert NAME not in api["spec"]["podSelector"]["matchExpressions"][0]["values"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_serves_tls_with_a_token_from_secrets(overlay: str) -> None:
    docs = _overlay(overlay)
    deployment = one(docs, "Deployment", NAME)
    c = container(deployment)
    args = c["command"]
    assert args[:2] == ["kuota", "dashboard"] and "--insecure" not in args
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    for flag, secret in (
        ("--token-file", "kuota-dashboard-token"),
        ("--tls-cert", "kuota-dashboard-tls"),
        ("--tls-key", "kuota-dashboard-tls"),
    ):
        path = Path(_flag(args, flag))
        volume = volumes[mounts[str(path.parent)]]
        assert volume["secret"]["secretName"] == secret, flag
        assert path.name in {i["path"] for i in volume["secret"]["items"]}, flag
    port = int(_flag(args, "--port"))
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"dashboard": port}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "dashboard", "scheme": "HTTPS"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    service = one(docs, "Service", NAME)
    assert service["spec"]["ports"][0]["targetPort"] == "dashboard"
    ingress = one(docs, "NetworkPolicy", NAME)
    assert ingress["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": "dashboard"}]
    deny = one(docs, "NetworkPolicy", "kuota-default-deny")
    assert NAME in deny["spec"]["podSelector"]["matchExpressions"][0]["values"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_it_logs_in_to_redis_as_its_read_only_user(overlay: str) -> None:
    c = container(one(_overlay(overlay), "Deployment", NAME))
    env = {e["name"]: e for e in c["env"]}
    assert env["KUOTA_REDIS_USERNAME"]["value"] == NAME
    ref = env["KUOTA_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "kuota-redis-users", "key": "dashboard-password"}
    assert "dashboard" in acl.SERVICES
    rules = acl.rules("dashboard")
    assert "+hgetall" in rules and not [r for r in rules if r in ("+hset", "+hdel", "+del")]
    assert all(r.startswith("%R~") for r in rules if "~" in r), "read-only keys"


def test_production_logs_in_to_kafka_as_its_user_with_a_cert_managers_pair() -> None:
    docs = _overlay("production")
    deployment = one(docs, "Deployment", NAME)
    env = {e["name"]: e for e in container(deployment)["env"]}
    assert env["KUOTA_KAFKA_SASL_USERNAME"]["value"] == NAME
    assert env["KUOTA_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == NAME
    assert "KUOTA_KAFKA_CA_FILE" in env
    cert = one(docs, "Certificate", NAME)["spec"]
    assert cert["secretName"] == "kuota-dashboard-tls"
    assert f"{NAME}.{NAMESPACE}.svc" in cert["dnsNames"]
    users = documents((Path(__file__).parents[2] / "deploy/kafka/strimzi/users.yaml").read_text())
    (user,) = [u for u in users if u["metadata"]["name"] == NAME]
    ops = {
        (a["resource"]["type"], a["resource"]["name"]): set(a["operations"])
        for a in user["spec"]["authorization"]["acls"]
    }
    assert not [o for o in ops.values() if o & {"Write", "Create", "Delete", "Alter", "All"}]


# --------------------------------------------------------------------------- live


def _pair(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def test_the_deployed_form_needs_tls_and_the_token(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str
) -> None:
    cert, key = _pair(tmp_path)
    token = tmp_path / "token"
    token.write_text("t0ken-of-the-test\n")
    env = dict(os.environ)
    env.pop("KUOTA_DASHBOARD_TOKEN", None)
    env |= {"KUOTA_KAFKA_BOOTSTRAP": kafka_bootstrap, "KUOTA_REDIS_URL": redis_url}
    args = [
        str(Path(sys.executable).parent / "kuota"), "dashboard", "--host", "127.0.0.1",
        "--port", "0", "--token-file", str(token), "--tls-cert", str(cert), "--tls-key", str(key),
    ]  # fmt: skip
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        assert line.startswith("kuota: dashboard on https://127.0.0.1:"), (
            f"{shlex.join(args)} printed {line!r}"
        )
        url = line.rsplit(" ", 1)[1]
        context = ssl.create_default_context(cafile=str(cert))

        def get(path: str, **headers: str) -> tuple[int, bytes]:
            request = urllib.request.Request(url + path, headers=headers)
            try:
                with urllib.request.urlopen(request, context=context, timeout=10) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as err:
                return err.code, err.read()

        assert get("healthz") == (200, b"ok\n")
        status, body = get("")
        assert status == 401 and b"bearer token is required" in body
        assert get("", Authorization="Bearer wrong")[0] == 401
        status, body = get("", Authorization="Bearer t0ken-of-the-test")
        assert status == 200 and b"/static/plotly.min.js" in body
        status, body = get("api/state", Authorization="Bearer t0ken-of-the-test")
        assert status == 200 and b'"cluster_queues"' in body
        # plain HTTP on the same port is not served
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(url.replace("https://", "http://") + "healthz", timeout=5)
    finally:
        proc.terminate()
        assert proc.wait(10) in (0, -15)
