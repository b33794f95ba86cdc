"""docker-compose.yml and the Deployments configure what the code reads.

The settings each service reads are taken from the code itself: every string
constant that is a whole setting name (``KUOTA_*`` or ``KUBECONFIG``) in the
service's package and in every ``kuota.*`` module it imports, transitively
(``settings_read``). So a setting renamed in the code and not in the
manifests — or the other way round — fails here, not for a user:

- every variable ``docker-compose.yml`` or a Deployment gives a service is one
  that service reads;
- the service's own settings reader (``IngestSettings.from_env``,
  ``load_config``) accepts the environment as given — a new required setting,
  a malformed value, a path that no volume provides, all fail;
- the ports: each metrics port is the published / container port named
  ``metrics`` and the default the image's healthcheck assumes; ingest's webhook
  port is published (compose) and named ``webhook`` (Kubernetes);
- Kafka and Redis addresses name the compose services / dev Services.

``problems_*`` return a list of sentences; the tests assert it is empty for
the real files and not empty for a renamed setting.
"""

from __future__ import annotations

import ast
import base64
import re
import tomllib
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from test_deploy_manifests import REPO, SERVICES, container, documents, find, render

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

COMPOSE = REPO / "docker-compose.yml"
SETTING = re.compile(r"^(KUOTA_[A-Z0-9_]+|KUBECONFIG)$")
#: The five services: the four of the journal and the webhook (no Kafka, no Redis).
ALL = (*SERVICES, "webhook")
IMPORTS_ROOTS = {"kuota": REPO / "shared"} | {f"kuota_{s}": REPO / "services" / s for s in ALL}
#: Secrets a production cluster creates itself (docs/deploy.md): name -> keys.
USER_SECRETS = {
    "kuota-redis": {"url": "rediss://redis.example:6379/0"},
    "kuota-redis-users": {
        "ingest-password": "p-ingest",
        "admission-password": "p-admission",
        "actuator-password": "p-actuator",
        "users.acl": "user default off",
    },
    "kuota-snapshot-key": {"key": "k"},
    "kuota-seen-key": {"key": "k"},
}


@cache
def strimzi_secrets() -> dict[str, dict[str, str]]:
    """The Secrets Strimzi makes for deploy/kafka/strimzi, by its naming rules:
    ``<cluster>-cluster-ca-cert`` (``ca.crt``) per Kafka, and one per KafkaUser,
    named after it (``password`` for SCRAM-SHA-512, ``user.crt`` / ``user.key``
    / ``ca.crt`` for TLS)."""
    out: dict[str, dict[str, str]] = {}
    for doc in documents(render("kafka/strimzi")):
        name = doc["metadata"]["name"]
        if doc["kind"] == "Kafka":
            out[f"{name}-cluster-ca-cert"] = {"ca.crt": "x"}
        elif doc["kind"] == "KafkaUser":
            auth = doc["spec"]["authentication"]["type"]
            keys = ["password"] if auth.startswith("scram") else ["user.crt", "user.key", "ca.crt"]
            out[name] = dict.fromkeys(keys, "p")
    return out


# --------------------------------------------------------------------------- what the code reads


def module_file(name: str) -> Path | None:
    root = IMPORTS_ROOTS.get(name.split(".")[0])
    if root is None:
        return None
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


@cache
def settings_read(service: str) -> frozenset[str]:
    """Setting names in kuota_<service> and every kuota module it imports."""
    package = REPO / "services" / service / f"kuota_{service}"
    todo = [p for p in package.glob("*.py")]
    seen: set[Path] = set()
    names: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and SETTING.match(node.value)
            ):
                names.add(node.value)
        for name in imported_modules(tree):
            found = module_file(name)
            if found is not None:
                todo.append(found)
    return frozenset(names)


def loader(service: str) -> Callable[[Mapping[str, str]], Any]:
    if service == "ingest":
        from kuota_ingest.settings import IngestSettings
        from kuota_ingest.sources import file_config_error

        def load(env: Mapping[str, str]) -> Any:
            settings = IngestSettings.from_env(env)
            if settings.config_file is not None:
                problem = file_config_error(settings.config_file)
                assert problem is None, f"KUOTA_CONFIG_FILE: {problem}"
            return settings

        return load
    if service == "webhook":
        from kuota_webhook.settings import WebhookSettings

        return WebhookSettings.from_env
    if service == "admission":
        from kuota_admission.settings import load_config as admission

        return admission
    if service == "preemption":
        from kuota_preemption.settings import load_config as preemption

        return preemption
    from kuota_actuator.settings import load_config as actuator

    return actuator


@pytest.fixture
def in_cluster_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The service-account token file the in-cluster settings look for."""
    import kuota_actuator.settings
    import kuota_ingest.settings
    import kuota_webhook.settings

    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setattr(kuota_ingest.settings, "SERVICE_ACCOUNT_TOKEN", token)
    monkeypatch.setattr(kuota_actuator.settings, "SERVICE_ACCOUNT_TOKEN", token)
    monkeypatch.setattr(kuota_webhook.settings, "SERVICE_ACCOUNT_TOKEN", token)
    return token


def is_path_setting(name: str) -> bool:
    return name == "KUBECONFIG" or name.endswith("_FILE")


def try_load(service: str, env: dict[str, str]) -> tuple[Any, str | None]:
    from kuota.bus.settings import SettingsError

    try:
        return loader(service)(env), None
    except (SettingsError, AssertionError) as err:
        return None, f"kuota-{service} refuses its environment: {err}"


def test_settings_read_come_from_the_code() -> None:
    """The scan finds what each service is documented to read, and only its own."""
    common = {
        "KUOTA_KAFKA_BOOTSTRAP",
        "KUOTA_TOPIC_PREFIX",
        "KUOTA_METRICS_PORT",
        "KUOTA_LOG_LEVEL",
    }
    for service in SERVICES:
        assert common <= settings_read(service), service
    assert {
        "KUOTA_REDIS_URL",
        "KUBECONFIG",
        "KUOTA_CONFIG_CONFIGMAP",
    } <= (settings_read("ingest"))
    assert "KUOTA_WEBHOOK_CERT_FILE" not in settings_read("ingest"), "the webhook's own"
    assert {
        "KUBECONFIG",
        "KUOTA_WEBHOOK_CERT_FILE",
        "KUOTA_WEBHOOK_CERT_CHECK_SECONDS",
        "KUOTA_CONFIG_CONFIGMAP",
        "KUOTA_METRICS_PORT",
    } <= settings_read("webhook")
    # (kuota.service's Kafka names are in its scan too, transitively; that the webhook
    # starts without them: tests/unit/webhook/test_webhook_server.py)
    assert "KUOTA_SNAPSHOT_KEY" in settings_read("admission")
    assert "KUOTA_SNAPSHOT_KEY" not in settings_read("actuator")
    assert {"KUOTA_REDIS_URL", "KUBECONFIG"}.isdisjoint(settings_read("preemption"))
    assert "KUOTA_STATUS_INTERVAL" in settings_read("actuator")
    kafka_security = {
        "KUOTA_KAFKA_SECURITY",
        "KUOTA_KAFKA_SASL_MECHANISM",
        "KUOTA_KAFKA_SASL_USERNAME",
        "KUOTA_KAFKA_SASL_PASSWORD",
        "KUOTA_KAFKA_CA_FILE",
        "KUOTA_KAFKA_CERT_FILE",
        "KUOTA_KAFKA_KEY_FILE",
        "KUOTA_KAFKA_SSL_CHECK_HOSTNAME",
        "KUOTA_KAFKA_REPLICATION_FACTOR",
        "KUOTA_KAFKA_MIN_INSYNC_REPLICAS",
    }
    redis_security = {
        "KUOTA_REDIS_USERNAME",
        "KUOTA_REDIS_PASSWORD",
        "KUOTA_REDIS_TLS",
        "KUOTA_REDIS_CA_FILE",
        "KUOTA_REDIS_CERT_FILE",
        "KUOTA_REDIS_KEY_FILE",
    }
    for service in SERVICES:
        assert kafka_security <= settings_read(service), service
    for service in ("ingest", "admission", "actuator"):
        assert redis_security <= settings_read(service), service
    assert redis_security.isdisjoint(settings_read("preemption"))


def test_healthcheck_default_ports_are_the_services_defaults() -> None:
    from kuota.cli.healthcheck import SERVICE_METRICS_PORTS

    assert set(SERVICE_METRICS_PORTS) == {f"kuota-{s}" for s in ALL}
    for service in ALL:
        env = {
            "KUOTA_WEBHOOK_CERT_FILE": __file__,
            "KUOTA_WEBHOOK_KEY_FILE": __file__,
            "KUOTA_KAFKA_BOOTSTRAP": "k:9092",
            "KUOTA_REDIS_URL": "redis://r",
            "KUBECONFIG": __file__,
            "KUOTA_SNAPSHOT_KEY": "k",
            "KUOTA_SEEN_KEY": "k",
        }
        assert loader(service)(env).metrics_port == SERVICE_METRICS_PORTS[f"kuota-{service}"]


# --------------------------------------------------------------------------- compose


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``$$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, default = m.group(1), m.group(2), m.group(3) or ""
        if op == ":-":
            return env.get(name) or default
        if op == "-":
            return env.get(name, default)
        return env.get(name, "")

    return re.sub(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}", sub, value)


def compose_mounts(service: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Container path -> host source of the service's bind mounts."""
    out = {}
    for v in service.get("volumes", []):
        parts = interpolate(v, env).split(":")
        out[parts[1]] = parts[0]
    return out


def container_ports(service: dict[str, Any]) -> set[int]:
    return {int(str(p).split(":")[-1]) for p in service.get("ports", [])}


def problems_compose(compose: dict[str, Any], tmp: Path, host_env: Mapping[str, str]) -> list[str]:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    services = compose["services"]
    problems = []
    if set(services) != {"kafka", "redis", *ALL}:
        problems.append(f"services are {sorted(services)}")
    kafka_env = services.get("kafka", {}).get("environment", {})
    for name in ALL:
        svc = services.get(name)
        if svc is None:
            continue
        cmd = svc.get("command")
        if cmd != [f"kuota-{name}"] or f"kuota-{name}" not in scripts:
            problems.append(f"{name}: command {cmd} is not the console script kuota-{name}")
        if svc.get("restart") not in ("always", "unless-stopped", "on-failure"):
            problems.append(f"{name}: no restart policy")
        test = svc.get("healthcheck", {}).get("test", [])
        if test[:3] != ["CMD", "kuota", "healthcheck"] or "kuota" not in scripts:
            problems.append(f"{name}: healthcheck {test} is not `kuota healthcheck`")
        env = {k: interpolate(str(v), host_env) for k, v in svc.get("environment", {}).items()}
        unread = sorted(set(env) - settings_read(name))
        if unread:
            problems.append(f"{name}: sets {unread}, which kuota-{name} does not read")
        mounts = compose_mounts(svc, host_env)
        for key, value in list(env.items()):
            if value and is_path_setting(key):
                source = next(
                    (
                        src
                        for dst, src in mounts.items()
                        if value == dst or value.startswith(dst + "/")
                    ),
                    None,
                )
                if source is None:
                    problems.append(f"{name}: {key}={value} is in no volume")
                    continue
                host = REPO / source if source.startswith("./") else None
                if host is not None and host.is_file():
                    env[key] = str(host)  # a file of this checkout: check the real one
                else:
                    stand_in = tmp / f"{name}-{key}"
                    stand_in.write_text("apiVersion: v1\nkind: Config\n")
                    env[key] = str(stand_in)
        settings, error = try_load(name, env)
        if error:
            problems.append(error)
            continue
        if settings.metrics_port not in container_ports(svc):
            problems.append(f"{name}: metrics port {settings.metrics_port} is not published")
        if name == "webhook" and settings.port not in container_ports(svc):
            problems.append(f"webhook: port {settings.port} is not published")
        kafka = getattr(settings, "kafka", None)
        bootstrap = kafka.bootstrap if kafka is not None else None
        if kafka is not None and f"PLAINTEXT://{bootstrap}" not in kafka_env.get(
            "KAFKA_ADVERTISED_LISTENERS", ""
        ):
            problems.append(
                f"{name}: KUOTA_KAFKA_BOOTSTRAP={bootstrap} is not what kafka advertises"
            )
        redis_url = getattr(settings, "redis_url", None)
        if redis_url is not None and urlsplit(redis_url).hostname not in services:
            problems.append(f"{name}: KUOTA_REDIS_URL={redis_url} names no compose service")
        user = interpolate(str(svc.get("user", "")), host_env).split(":")[0]
        if user in ("0", "root"):  # unset: the image's USER, non-root
            problems.append(f"{name}: runs as root (user {user!r})")
    return problems


def compose_file() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def test_compose_parses_and_runs_what_the_issue_asks() -> None:
    compose = compose_file()
    services = compose["services"]
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:4."), kafka["image"]
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, one combined node
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"
    assert services["redis"]["image"].startswith("redis:")
    for name, svc in services.items():
        assert "healthcheck" in svc and svc.get("restart"), name
    for name in ("ingest", "actuator", "webhook"):
        mounts = [
            v for v in services[name]["volumes"] if v.startswith("${KUBECONFIG:-~/.kube/config}:")
        ]
        assert len(mounts) == 1 and mounts[0].endswith(":ro"), f"{name}: kubeconfig mount {mounts}"
    for name in ("admission", "preemption"):
        assert "KUBECONFIG" not in services[name]["environment"], name


def test_compose_environment_matches_the_code(tmp_path: Path) -> None:
    assert problems_compose(compose_file(), tmp_path, {}) == []


def test_compose_with_the_user_settings_set(tmp_path: Path) -> None:
    """The optional settings, as a user sets them, are read and accepted too."""
    webhook = tmp_path / "webhook"
    webhook.mkdir()
    host_env = {
        "KUOTA_LOG_LEVEL": "DEBUG",
        "KUOTA_WEBHOOK_DIR": str(webhook),
        "KUOTA_WEBHOOK_TRUSTED_USERS": "kuota-admin",
    }
    assert problems_compose(compose_file(), tmp_path, host_env) == []


@pytest.mark.parametrize(
    ("service", "old", "new"),
    [
        ("ingest", "KUOTA_REDIS_URL", "KUOTA_REDIS"),
        ("admission", "KUOTA_METRICS_PORT", "KUOTA_METRIC_PORT"),
        ("actuator", "KUBECONFIG", "KUOTA_KUBECONFIG"),
        ("preemption", "KUOTA_KAFKA_BOOTSTRAP", "KAFKA_BOOTSTRAP"),
    ],
)
def test_a_renamed_setting_breaks_the_check(
    tmp_path: Path, service: str, old: str, new: str
) -> None:
    compose = compose_file()
    env = compose["services"][service]["environment"]
    env[new] = env.pop(old)
    problems = problems_compose(compose, tmp_path, {})
    assert any(new in p for p in problems), problems


# --------------------------------------------------------------------------- Kubernetes


def resolve_env(c: dict[str, Any], docs: list[dict[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """A container's environment as the kubelet would set it (Secrets the user
    makes in production are filled with examples)."""
    env: dict[str, str] = {}
    problems = []
    for e in c.get("env", []):
        name = e["name"]
        if "value" in e:
            env[name] = e["value"]
            continue
        ref = e["valueFrom"]
        if "configMapKeyRef" in ref:
            r = ref["configMapKeyRef"]
            found = find(docs, "ConfigMap", r["name"])
            if not found or r["key"] not in found[0].get("data", {}):
                problems.append(f"{name}: no ConfigMap {r['name']} key {r['key']}")
                continue
            env[name] = found[0]["data"][r["key"]]
        elif "secretKeyRef" in ref:
            r = ref["secretKeyRef"]
            found = find(docs, "Secret", r["name"])
            if found:
                data = found[0].get("data", {})
                if r["key"] not in data:
                    problems.append(f"{name}: Secret {r['name']} has no key {r['key']}")
                    continue
                env[name] = base64.b64decode(data[r["key"]]).decode()
            elif r["key"] in USER_SECRETS.get(r["name"], {}):
                env[name] = USER_SECRETS[r["name"]][r["key"]]
            elif r["key"] in strimzi_secrets().get(r["name"], {}):
                env[name] = strimzi_secrets()[r["name"]][r["key"]]
            else:
                problems.append(f"{name}: Secret {r['name']} key {r['key']} is nowhere")
        else:
            problems.append(f"{name}: unexpected valueFrom {ref}")
    return env, problems


def problems_deployments(docs: list[dict[str, Any]], tmp: Path) -> list[str]:
    problems = []
    for name in ALL:
        deployment = find(docs, "Deployment", f"kuota-{name}")
        if len(deployment) != 1:
            problems.append(f"{name}: {len(deployment)} Deployments")
            continue
        pod = deployment[0]["spec"]["template"]["spec"]
        c = container(deployment[0])
        env, unresolved = resolve_env(c, docs)
        problems += [f"{name}: {p}" for p in unresolved]
        unread = sorted(set(env) - settings_read(name))
        if unread:
            problems.append(f"{name}: sets {unread}, which kuota-{name} does not read")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for key, value in list(env.items()):
            if value and is_path_setting(key):
                mount = next((p for p in mounts if value.startswith(p.rstrip("/") + "/")), None)
                if mount is None:
                    problems.append(f"{name}: {key}={value} is in no volume")
                    continue
                volume = volumes[mounts[mount]]
                if "secret" in volume:
                    keys = {i["key"] for i in volume["secret"].get("items", [])} or None
                    file = value[len(mount.rstrip("/")) + 1 :]
                    if keys is not None and file not in keys:
                        problems.append(f"{name}: {key}={value}: not in the Secret's items")
                stand_in = tmp / f"{name}-{key}"
                stand_in.write_text("x")
                env[key] = str(stand_in)
        settings, error = try_load(name, env)
        if error:
            problems.append(error)
            continue
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        if ports.get("metrics") != settings.metrics_port:
            problems.append(
                f"{name}: port 'metrics' is {ports.get('metrics')}, not {settings.metrics_port}"
            )
        if name == "webhook" and ports.get("webhook") != settings.port:
            problems.append(f"webhook: port 'webhook' is not {settings.port}")
        if name in ("ingest", "webhook"):
            if settings.config_map is None:
                problems.append(f"{name}: no KUOTA_CONFIG_CONFIGMAP")
            else:
                ns, cm = settings.config_map
                if not any(
                    d["metadata"].get("namespace") == ns for d in find(docs, "ConfigMap", cm)
                ):
                    problems.append(f"{name}: no ConfigMap {ns}/{cm}")
        if "KUBECONFIG" in env:
            problems.append(f"{name}: KUBECONFIG set in a pod (use the service account)")
    return problems


@pytest.mark.parametrize("overlay", ["dev", "production"])
def test_deployment_environment_matches_the_code(
    overlay: str, tmp_path: Path, in_cluster_token: Path
) -> None:
    assert problems_deployments(documents(render(f"overlays/{overlay}")), tmp_path) == []


def test_dev_overlay_addresses_name_the_dev_services(
    tmp_path: Path, in_cluster_token: Path
) -> None:
    docs = documents(render("overlays/dev"))
    env, problems = resolve_env(container(find(docs, "Deployment", "kuota-admission")[0]), docs)
    assert problems == []
    redis = urlsplit(env["KUOTA_REDIS_URL"])
    assert redis.hostname == "kuota-redis.kuota-system.svc"
    (svc,) = find(docs, "Service", "kuota-redis")
    assert redis.port == svc["spec"]["ports"][0]["port"]


def test_a_renamed_setting_breaks_the_deployment_check(
    tmp_path: Path, in_cluster_token: Path
) -> None:
    docs = documents(render("overlays/dev"))
    c = container(find(docs, "Deployment", "kuota-actuator")[0])
    for e in c["env"]:
        if e["name"] == "KUOTA_REDIS_URL":
            e["name"] = "KUOTA_REDIS_ADDRESS"
    problems = problems_deployments(docs, tmp_path)
    assert any("KUOTA_REDIS_ADDRESS" in p for p in problems), problems
    assert any("KUOTA_REDIS_URL is not set" in p for p in problems), problems


# --------------------------------------------------------------------------- security


def production_settings(service: str, tmp: Path) -> Any:
    docs = documents(render("overlays/production"))
    env, problems = resolve_env(container(find(docs, "Deployment", f"kuota-{service}")[0]), docs)
    assert problems == []
    for key in [k for k in env if is_path_setting(k)]:
        stand_in = tmp / key
        stand_in.write_text("x")
        env[key] = str(stand_in)
    return loader(service)(env)


@pytest.mark.parametrize("service", SERVICES)
def test_production_reaches_strimzi_over_tls_as_its_kafka_user(
    service: str, tmp_path: Path, in_cluster_token: Path
) -> None:
    """The production overlay's Kafka settings name what deploy/kafka/strimzi
    makes: a TLS listener with the same authentication, the KafkaUser, its
    Secret and the cluster CA; kuota's own topics at replication factor 3."""
    kafka = production_settings(service, tmp_path).kafka
    strimzi = documents(render("kafka/strimzi"))
    (cluster,) = find(strimzi, "Kafka")
    host, _, port = kafka.bootstrap.rpartition(":")
    assert host == f"{cluster['metadata']['name']}-kafka-bootstrap.kuota-system.svc"
    (listener,) = [x for x in cluster["spec"]["kafka"]["listeners"] if x["port"] == int(port)]
    assert listener["tls"] is True and kafka.security_protocol == "SASL_SSL"
    assert listener["authentication"]["type"] == kafka.sasl_mechanism.lower()
    assert cluster["spec"]["kafka"]["authorization"]["type"] == "simple"
    assert "userOperator" in cluster["spec"]["entityOperator"]
    # each service as its own KafkaUser, whose ACLs name its own group (what
    # they allow is tested on a real broker: test_security_kafka_acls.py)
    assert kafka.sasl_username == f"kuota-{service}"
    (user,) = find(strimzi, "KafkaUser", kafka.sasl_username)
    assert user["spec"]["authentication"]["type"] == kafka.sasl_mechanism.lower()
    acls = [a["resource"] for a in user["spec"]["authorization"]["acls"]]
    instance = kafka.topic_prefix.rstrip(".").replace(".", "-")
    assert {"type": "topic", "name": kafka.topic_prefix, "patternType": "prefix"} in acls
    if service != "ingest":
        assert {"type": "group", "name": f"{instance}-{service}", "patternType": "literal"} in acls
    assert kafka.sasl_password == "p" and kafka.ca_file is not None
    assert (kafka.replication_factor, kafka.topic_min_insync) == (3, 2)
    (pool,) = find(strimzi, "KafkaNodePool")
    assert kafka.replication_factor <= pool["spec"]["replicas"]


@pytest.mark.parametrize("service", ["ingest", "admission", "actuator"])
def test_production_logs_in_to_redis_as_an_acl_user(
    service: str, tmp_path: Path, in_cluster_token: Path
) -> None:
    from kuota.store.settings import RedisSettings

    production_settings(service, tmp_path)  # the service accepts its environment
    docs = documents(render("overlays/production"))
    c = container(find(docs, "Deployment", f"kuota-{service}")[0])
    env, problems = resolve_env(c, docs)
    assert problems == []
    redis = RedisSettings.from_env(env)
    assert redis.client_kwargs()["username"] == f"kuota-{service}"  # kuota.store.acl's
    password = USER_SECRETS["kuota-redis-users"][f"{service}-password"]
    assert redis.client_kwargs()["password"] == password
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in c["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    want = {"name": "kuota-redis-users", "key": f"{service}-password"}
    assert refs["KUOTA_REDIS_PASSWORD"] == want
