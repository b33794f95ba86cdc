"""Shared test harness: where tests find Kafka, Redis and the Kubernetes API.

Each service is chosen in this order, the first that applies wins:

1. explicit environment: ``KUOTA_KAFKA_BOOTSTRAP``, ``KUOTA_REDIS_URL``,
   ``KUOTA_KUBECONFIG`` (not the ambient ``KUBECONFIG``: a developer's shell that
   points at a real cluster must not have tests create objects there);
2. ``KUOTA_USE_TESTCONTAINERS=1`` and a reachable Docker engine (``docker info``
   succeeds): Kafka (``apache/kafka``, the stack's Kafka version) and Redis
   containers from testcontainers, started once per session;
3. the local stack's env file ``$KUOTA_STACK_DIR/stack.env`` (default
   ``<repo>/.stack/stack.env``), written by ``scripts/stack up``; its
   ``export K=V`` lines fill only variables that are still unset.

The fixtures ``kafka_bootstrap``, ``redis_url`` and ``kubeconfig`` hand the
chosen address to tests. A service that is not configured or does not answer
FAILS the test with a hint (``scripts/stack up``); it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parent.parent
KAFKA_VAR, REDIS_VAR, KUBE_VAR = "KUOTA_KAFKA_BOOTSTRAP", "KUOTA_REDIS_URL", "KUBECONFIG"

_stops: list[Callable[[], object]] = []  # testcontainers to stop at session end


def stack_dir() -> Path:
    return Path(os.environ.get("KUOTA_STACK_DIR") or REPO / ".stack")


def read_stack_env(path: Path) -> dict[str, str]:
    """Parse the ``export K=V`` lines of a stack.env file (no shell evaluation)."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line.startswith("export ") or "=" not in line:
            continue
        key, _, value = line[len("export ") :].partition("=")
        out[key.strip()] = value.strip().strip("'\"")
    return out


def _docker_reachable() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_containers(missing: list[str]) -> None:
    """Selection step 2: Kafka/Redis from testcontainers for the unset variables."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    if KAFKA_VAR in missing:
        # apache/kafka's image runs a single KRaft node; a fixed host port lets
        # the advertised listener be known before the container starts.
        version = os.environ.get("KUOTA_KAFKA_VERSION", "4.4.0")
        port = _free_port()
        kafka = (
            DockerContainer(f"apache/kafka:{version}")
            .with_bind_ports(port, port)
            .with_env("KAFKA_NODE_ID", "1")
            .with_env("KAFKA_PROCESS_ROLES", "broker,controller")
            .with_env("KAFKA_LISTENERS", f"PLAINTEXT://:{port},CONTROLLER://:9093")
            .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{port}")
            .with_env(
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
            )
            .with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
            .with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9093")
            .with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1")
            .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
            .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
            .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
            .with_env("KAFKA_NUM_PARTITIONS", "1")
        )
        kafka.start()
        _stops.append(kafka.stop)
        wait_for_logs(kafka, r"Kafka Server started", timeout=120)
        os.environ[KAFKA_VAR] = f"127.0.0.1:{port}"
    if REDIS_VAR in missing:
        from testcontainers.redis import RedisContainer

        redis = RedisContainer("redis:7.0")
        redis.start()
        _stops.append(redis.stop)
        host, port = redis.get_container_host_ip(), redis.get_exposed_port(6379)
        os.environ[REDIS_VAR] = f"redis://{host}:{port}/0"


def pytest_sessionstart(session: pytest.Session) -> None:
    missing = [v for v in (KAFKA_VAR, REDIS_VAR) if not os.environ.get(v)]
    if missing and os.environ.get("KUOTA_USE_TESTCONTAINERS") == "1" and _docker_reachable():
        _start_containers(missing)
    stack = read_stack_env(stack_dir() / "stack.env")
    explicit_kube = os.environ.get("KUOTA_KUBECONFIG")
    if explicit_kube:
        os.environ[KUBE_VAR] = explicit_kube
    elif KUBE_VAR in stack:
        os.environ[KUBE_VAR] = stack[KUBE_VAR]
    else:
        os.environ.pop(KUBE_VAR, None)
    for key, value in stack.items():
        os.environ.setdefault(key, value)
    # The HMAC keys the services require (a stack.env from before they existed
    # lacks them): random for this session, never a constant.
    for key in ("KUOTA_SNAPSHOT_KEY", "KUOTA_SEEN_KEY"):
        os.environ.setdefault(key, os.urandom(32).hex())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    while _stops:
        _stops.pop()()


def _require(var: str, what: str) -> str:
    value = os.environ.get(var)
    if not value:
        pytest.fail(
            f"{var} is not set and {stack_dir() / 'stack.env'} does not provide it: "
            f"start the local stack with `scripts/stack up` ({what})",
            pytrace=False,
        )
    return value


def _require_tcp(host: str, port: int, what: str, var: str, value: str) -> None:
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as e:
        pytest.fail(
            f"{what} at {host}:{port} ({var}={value}) is unreachable ({e}): the stack is down? "
            f"run `scripts/stack up` and `scripts/stack status`",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    value = _require(KAFKA_VAR, "kafka")
    host, _, port = value.split(",")[0].strip().rpartition(":")
    _require_tcp(host, int(port), "Kafka", KAFKA_VAR, value)
    return value


@pytest.fixture(scope="session")
def redis_url() -> str:
    value = _require(REDIS_VAR, "redis")
    u = urlsplit(value)
    _require_tcp(u.hostname or "127.0.0.1", u.port or 6379, "Redis", REDIS_VAR, value)
    return value


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    import yaml

    value = _require(KUBE_VAR, "kube")
    path = Path(value.split(os.pathsep)[0])
    if not path.is_file():
        pytest.fail(f"{KUBE_VAR}={value}: no such file; run `scripts/stack up kube`", pytrace=False)
    cfg = yaml.safe_load(path.read_text()) or {}
    contexts = {c["name"]: c["context"] for c in cfg.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in cfg.get("clusters") or []}
    ctx = contexts.get(cfg.get("current-context", ""), {})
    cluster = clusters.get(ctx.get("cluster", ""), {})
    server = urlsplit(cluster.get("server", ""))
    if not server.hostname:
        pytest.fail(f"{path}: no server for the current context", pytrace=False)
    port = server.port or (443 if server.scheme == "https" else 80)
    _require_tcp(server.hostname, port, "kube-apiserver", KUBE_VAR, value)
    return str(path)
