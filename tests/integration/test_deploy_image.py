"""The container image, checked by reading it (no Docker engine here), and its
healthcheck command, checked by running it.

- ``Dockerfile``: a ``python:3.11-slim`` base, a non-root numeric ``USER`` in
  the final stage, a ``HEALTHCHECK`` running ``kuota healthcheck``, the four
  service commands as console scripts of pyproject.toml whose modules import
  and have ``main``; everything it COPYs from the context is let in by
  ``.dockerignore`` (an allow-list) and exists; the ports it EXPOSEs are the
  services' defaults; the Deployments and compose use the image's user.
- ``kuota healthcheck``: against a live Prometheus endpoint (exit 0), a closed
  port and a page that is not Prometheus' (exit 1), no port to probe (exit 2);
  the port comes from --port, ``KUOTA_METRICS_PORT``, or PID 1's service.
"""

from __future__ import annotations

import fnmatch
import http.server
import importlib
import shlex
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, start_http_server
from test_deploy_manifests import REPO, SERVICES, container, documents, find, render

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KUOTA = str(Path(sys.executable).with_name("kuota"))


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    stage: int


def dockerfile() -> list[Instruction]:
    """Instructions with line continuations joined and comments dropped."""
    out: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        out.append(Instruction(keyword, args.strip(), stage))
    assert not pending, "Dockerfile ends inside a continuation"
    return out


def scripts() -> dict[str, str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def test_base_image_and_stages() -> None:
    ins = dockerfile()
    args = {
        i.args.split("=")[0]: i.args.split("=", 1)[1]
        for i in ins
        if i.keyword == "ARG" and "=" in i.args
    }
    froms = [
        i.args.split()[0].replace("${PYTHON_IMAGE}", args.get("PYTHON_IMAGE", "?"))
        for i in ins
        if i.keyword == "FROM"
    ]
    assert froms and all(f == "python:3.11-slim" for f in froms), froms
    final = max(i.stage for i in ins)
    copies = [i.args for i in ins if i.keyword == "COPY" and i.stage == final]
    assert copies == ["--from=build /opt/kuota /opt/kuota"], "the final stage takes only the venv"


def test_one_version_everywhere() -> None:
    """The image's label and tags in compose and Kustomize are the package's version."""
    import yaml

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    labels = " ".join(i.args for i in dockerfile() if i.keyword == "LABEL")
    assert f'org.opencontainers.image.version="{version}"' in labels
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    for name in (*SERVICES, "webhook"):
        assert compose["services"][name]["image"] == f"kuota:{version}", name
    for overlay in ("dev", "production"):
        docs = documents(render(f"overlays/{overlay}"))
        for name in (*SERVICES, "webhook"):
            (deployment,) = find(docs, "Deployment", f"kuota-{name}")
            assert container(deployment)["image"] == f"kuota:{version}", (overlay, name)


def test_final_stage_runs_as_a_numeric_non_root_user() -> None:
    ins = dockerfile()
    final = max(i.stage for i in ins)
    users = [i.args for i in ins if i.keyword == "USER" and i.stage == final]
    assert users, "no USER in the final stage"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) != 0, f"USER {users[-1]}: numeric and not root"
    assert group.isdigit() and int(group) != 0
    # Kubernetes and compose run the image as that user.
    for overlay in ("dev", "production"):
        docs = documents(render(f"overlays/{overlay}"))
        for name in (*SERVICES, "webhook"):
            (deployment,) = find(docs, "Deployment", f"kuota-{name}")
            ctx = deployment["spec"]["template"]["spec"]["securityContext"]
            assert (ctx["runAsUser"], ctx["runAsGroup"]) == (int(user), int(group)), name
            assert container(deployment)["image"].startswith("kuota:")


def test_healthcheck_runs_kuota_healthcheck() -> None:
    ins = dockerfile()
    (health,) = [i.args for i in ins if i.keyword == "HEALTHCHECK"]
    cmd = health[health.index("CMD") :]
    assert cmd.split(None, 1)[1].strip() == '["kuota", "healthcheck"]', health
    assert scripts()["kuota"] == "kuota.cli:main"
    from kuota.cli import app

    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    assert "healthcheck" in names


def test_the_four_service_commands_are_console_scripts() -> None:
    entry = scripts()
    for name in (*SERVICES, "webhook"):
        target = entry[f"kuota-{name}"]
        module, _, func = target.partition(":")
        assert module == f"kuota_{name}.main"
        assert callable(getattr(importlib.import_module(module), func))
    header = (REPO / "Dockerfile").read_text().split("FROM", 1)[0]
    for name in (*SERVICES, "webhook"):
        assert f"kuota-{name}" in header, f"the Dockerfile's header does not mention kuota-{name}"


def test_exposed_ports_are_the_services_defaults() -> None:
    from kuota.cli.healthcheck import SERVICE_METRICS_PORTS
    from kuota_webhook.settings import WebhookSettings

    (expose,) = [i.args for i in dockerfile() if i.keyword == "EXPOSE"]
    ports = {int(p) for p in expose.split()}
    files = {"KUBECONFIG": __file__, "KUOTA_WEBHOOK_CERT_FILE": __file__}
    webhook = WebhookSettings.from_env({**files, "KUOTA_WEBHOOK_KEY_FILE": __file__})
    assert webhook.metrics_port == SERVICE_METRICS_PORTS["kuota-webhook"]
    assert ports == {*SERVICE_METRICS_PORTS.values(), webhook.port}


def test_build_context_has_what_the_dockerfile_copies() -> None:
    rules = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def included(path: str) -> bool:
        keep = True
        for rule in rules:
            negate = rule.startswith("!")
            pattern = rule[1:] if negate else rule
            pattern = pattern.rstrip("/")
            hit = fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern + "/*")
            if pattern.startswith("**/"):
                hit = (
                    hit
                    or fnmatch.fnmatch(Path(path).name, pattern[3:])
                    or any(fnmatch.fnmatch(part, pattern[3:]) for part in Path(path).parts)
                )
            if hit:
                keep = negate
        return keep

    sources = []
    for i in dockerfile():
        if i.keyword == "COPY" and not i.args.startswith("--from"):
            sources += shlex.split(i.args)[:-1]
    assert sources, "nothing copied from the context"
    for src in sources:
        assert (REPO / src).exists(), src
        assert included(src.rstrip("/")), f".dockerignore leaves out {src}"
    # Everything the package needs is inside what is copied...
    assert included("shared/kuota/cli/__init__.py") and included(
        "services/ingest/kuota_ingest/main.py"
    )
    # ...and local state stays out.
    for path in (
        ".venv/bin/python",
        ".stack/stack.env",
        ".git/HEAD",
        "shared/kuota.egg-info/PKG-INFO",
        "shared/kuota/__pycache__/cli.cpython-311.pyc",
        "tests/conftest.py",
    ):
        assert not included(path), f".dockerignore lets {path} in"


# --------------------------------------------------------------------------- kuota healthcheck


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUOTA, "healthcheck", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


@pytest.fixture
def metrics_port() -> Iterator[int]:
    registry = CollectorRegistry()
    Counter("kuota_test_probes", "probes", registry=registry).inc()
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield port
    finally:
        server.shutdown()
        thread.join(5)


@pytest.fixture
def not_prometheus_port() -> Iterator[int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>hello</html>")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_healthcheck_answers_for_a_live_endpoint(metrics_port: int) -> None:
    by_flag = healthcheck("--port", str(metrics_port))
    assert by_flag.returncode == 0, by_flag.stderr
    by_env = healthcheck(env={"KUOTA_METRICS_PORT": str(metrics_port)})
    assert by_env.returncode == 0, by_env.stderr
    assert "KUOTA_METRICS_PORT" in by_env.stderr


def test_healthcheck_fails_for_a_dead_or_wrong_endpoint(not_prometheus_port: int) -> None:
    dead = healthcheck("--port", str(free_port()), "--timeout", "2")
    assert dead.returncode == 1, dead.stderr
    wrong = healthcheck("--port", str(not_prometheus_port))
    assert wrong.returncode == 1 and "not a Prometheus page" in wrong.stderr, wrong.stderr
    off = healthcheck(env={"KUOTA_METRICS_PORT": "0"})
    assert off.returncode == 1 and "off" in off.stderr


def test_healthcheck_without_a_port_to_probe_is_exit_2() -> None:
    # PID 1 here is no kuota service (in the image it is).
    none = healthcheck()
    assert none.returncode == 2 and "KUOTA_METRICS_PORT" in none.stderr, none.stderr
    bad = healthcheck(env={"KUOTA_METRICS_PORT": "nine"})
    assert bad.returncode == 2, bad.stderr


@pytest.mark.parametrize(
    ("cmdline", "want"),
    [
        (b"/opt/kuota/bin/python\x00/opt/kuota/bin/kuota-ingest\x00", 9101),
        (b"/sbin/docker-init\x00--\x00kuota-actuator\x00", 9104),
        (b"python3\x00/usr/local/bin/kuota-admission", 9102),
        (b"kuota-preemption\x00", 9103),
        (b"/bin/sh\x00-c\x00sleep 1\x00", None),
    ],
)
def test_healthcheck_port_from_pid_1(cmdline: bytes, want: int | None) -> None:
    from kuota.cli.healthcheck import metrics_port as choose

    port, source = choose(None, {}, cmdline)
    assert port == want, source
    assert choose(7, {"KUOTA_METRICS_PORT": "8"}, cmdline)[0] == 7
    assert choose(None, {"KUOTA_METRICS_PORT": "8"}, cmdline)[0] == 8
