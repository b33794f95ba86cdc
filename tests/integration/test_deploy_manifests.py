"""kuota's Kubernetes manifests, proven against the real kube-apiserver.

``deploy/`` is a Kustomize base with two overlays (``dev``, ``production``), a
single-node dev Kafka and Redis (``deploy/kafka/dev``, part of the dev overlay)
and Strimzi resources for production Kafka (``deploy/kafka/strimzi``). Here:

- live (the local stack's apiserver, with our CRDs installed; a missing
  apiserver is a FAILURE, never a skip): ``kubectl kustomize`` of the base and
  of each overlay passes ``kubectl apply --server-side --dry-run=server`` with
  no warning (the namespace enforces and warns on the "restricted" Pod
  Security Standard, so a non-compliant pod template warns). The documents
  are moved to a namespace of their own (every ``kuota-system`` becomes
  ``kuota-t-<hex>``), which the test creates with the Namespace document's
  labels and deletes, and the cluster-scoped ClusterRoles, bindings and
  webhook registration get that suffix (a dry-run merges into an existing
  object of the same name: the stack may hold a real ``kuota-ingest``);
- offline, said plainly: cert-manager's and Strimzi's CRDs are not installed on
  the local stack, so their documents (production overlay's Issuer and
  Certificate, ``deploy/kafka/strimzi``) are parsed and checked for the fields
  their CRDs require and for agreement with the rest of the manifests (names,
  ports, replication factors, topic names) — not admitted by an apiserver. If
  an apiserver does serve their group, they are dry-run too;
- offline: what the issue asks of each service — readiness and liveness
  probes, resources, a PodDisruptionBudget, a metrics Service, the webhook
  Service and registration, NetworkPolicies — is present and consistent.

Helpers here (``render``, ``documents``, ``kubectl``) are imported by the
other ``test_deploy_*`` modules.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota.bus.settings import KafkaSettings
from kuota.bus.topics import FOREVER, THIRTY_DAYS_MS, Topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAYS = ("dev", "production")
NAMESPACE = "kuota-system"
SERVICES = ("ingest", "admission", "preemption", "actuator")
THIRD_PARTY_GROUPS = ("cert-manager.io", "kafka.strimzi.io")
FIELD_MANAGER = "kuota-test-deploy"
RUN_LABEL = "kuota.dev/test-run"


# --------------------------------------------------------------------------- helpers


def kubectl_path() -> str:
    """The local stack's kubectl (it has ``kustomize``); missing is a failure."""
    path = os.environ.get("KUOTA_KUBECTL", "")
    if not path or not Path(path).is_file():
        pytest.fail(
            f"KUOTA_KUBECTL={path!r} is not the stack's kubectl: run `scripts/stack up` "
            "(its stack.env names it)",
            pytrace=False,
        )
    return path


def kubectl(
    *args: str, stdin: str | None = None, kubeconfig: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [kubectl_path(), *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []), *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        pytest.fail(
            f"`kubectl {' '.join(args)}` exited {proc.returncode}:\n{proc.stderr}{proc.stdout}",
            pytrace=False,
        )
    return proc


@cache
def render(path: str) -> str:
    """``kubectl kustomize deploy/<path>``: the YAML a user applies."""
    return kubectl("kustomize", str(DEPLOY / path)).stdout


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"want one {kind} {name}, found {len(found)}"
    return found[0]


def group_of(doc: dict[str, Any]) -> str:
    api_version = doc["apiVersion"]
    return api_version.split("/")[0] if "/" in api_version else ""


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{deployment['metadata']['name']}: one container expected"
    return containers[0]


#: Cluster-scoped kinds a run renames (suffix ``-<namespace>``), so it never
#: touches a real deployment's objects or another run's; CRDs are shared.
RENAMED = ("ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration")


def relocate(text: str, namespace: str) -> list[dict[str, Any]]:
    """The manifests moved to ``namespace``: every ``kuota-system`` replaced, and
    the cluster-scoped objects in ``RENAMED`` (and references to them) renamed."""
    docs = documents(text.replace(NAMESPACE, namespace))
    for doc in docs:
        if doc["kind"] in RENAMED:
            doc["metadata"]["name"] += f"-{namespace}"
        if doc["kind"] == "ClusterRoleBinding" and doc["roleRef"]["kind"] == "ClusterRole":
            doc["roleRef"]["name"] += f"-{namespace}"
    return docs


def unique_namespace() -> str:
    return f"kuota-t-{uuid.uuid4().hex[:10]}"


# --------------------------------------------------------------------------- live


@pytest.fixture(scope="module")
def crds_installed(kubeconfig: str) -> str:
    """Our Kueue CRDs on the apiserver (server-side apply, idempotent), Established."""
    kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kuota-test-crds",
        "-k",
        str(DEPLOY / "crds"),
        kubeconfig=kubeconfig,
    )
    names = [d["metadata"]["name"] for d in documents(render("crds"))]
    kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        *[f"crd/{n}" for n in names],
        kubeconfig=kubeconfig,
    )
    return kubeconfig


@pytest.fixture
def test_namespace(crds_installed: str) -> Iterator[str]:
    """A fresh namespace with the labels of deploy/base's Namespace (Pod Security)."""
    ns = unique_namespace()
    labels = one(documents(render("base")), "Namespace", NAMESPACE)["metadata"]["labels"]
    manifest = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ns, "labels": {**labels, RUN_LABEL: "deploy"}},
    }
    kubectl("create", "-f", "-", stdin=yaml.safe_dump(manifest), kubeconfig=crds_installed)
    try:
        yield ns
    finally:
        kubectl("delete", "namespace", ns, "--wait=false", kubeconfig=crds_installed, check=False)


def served_groups(kubeconfig: str) -> set[str]:
    out = kubectl("api-versions", kubeconfig=kubeconfig).stdout.split()
    return {v.split("/")[0] if "/" in v else "" for v in out}


def dry_run(docs: list[dict[str, Any]], kubeconfig: str) -> subprocess.CompletedProcess[str]:
    return kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        "--validate=strict",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(docs, sort_keys=False),
        kubeconfig=kubeconfig,
        check=False,
    )


@pytest.mark.parametrize("path", ["base", "overlays/dev", "overlays/production"])
def test_manifests_pass_a_server_side_dry_run(
    path: str, test_namespace: str, crds_installed: str
) -> None:
    docs = relocate(render(path), test_namespace)
    served = served_groups(crds_installed)
    offline = [d for d in docs if group_of(d) not in served]
    strangers = sorted(
        f"{d['apiVersion']} {d['kind']}" for d in offline if group_of(d) not in THIRD_PARTY_GROUPS
    )
    assert not strangers, f"{path}: API groups the apiserver does not serve: {strangers}"
    live = [d for d in docs if group_of(d) in served]
    assert len(live) >= 30, f"{path}: only {len(live)} documents to dry-run"
    proc = dry_run(live, crds_installed)
    assert proc.returncode == 0, f"{path}: dry-run failed:\n{proc.stderr}"
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert not warnings, f"{path}: the apiserver warned:\n" + "\n".join(warnings)
    applied = [line for line in proc.stdout.splitlines() if "(server dry run)" in line]
    assert len(applied) == len(live), proc.stdout
    if path == "overlays/production":
        kinds = sorted(d["kind"] for d in offline)
        # the CA chain, and the dashboard's serving pair
        expected = ["Certificate", "Certificate", "Certificate", "Issuer", "Issuer"]
        assert kinds == ([] if "cert-manager.io" in served else expected), (
            f"{path}: unexpected offline-only documents {kinds}"
        )


def test_kafka_dev_manifests_pass_a_server_side_dry_run(
    test_namespace: str, crds_installed: str
) -> None:
    """deploy/kafka/dev on its own (the dev overlay includes it as well)."""
    docs = relocate(render("kafka/dev"), test_namespace)
    assert sorted(d["kind"] for d in docs) == [
        "Deployment",
        "NetworkPolicy",
        "NetworkPolicy",
        "Service",
        "Service",
        "StatefulSet",
    ]
    proc = dry_run(docs, crds_installed)
    assert proc.returncode == 0, proc.stderr
    assert not proc.stderr.strip(), f"the apiserver warned:\n{proc.stderr}"


def test_a_broken_manifest_fails_the_dry_run(test_namespace: str, crds_installed: str) -> None:
    """The dry-run is a real check: an unknown field and a bad probe are refused."""
    docs = relocate(render("overlays/dev"), test_namespace)
    deployment = one(docs, "Deployment", "kuota-ingest")
    container(deployment)["livenessProbe"]["httpGet"]["port"] = "no-such-port-name-too-long"
    deployment["spec"]["template"]["spec"]["nodeSelectr"] = {"a": "b"}
    proc = dry_run([deployment], crds_installed)
    assert proc.returncode != 0
    assert "nodeSelectr" in proc.stderr or "unknown field" in proc.stderr, proc.stderr


def test_a_privileged_template_is_warned_about(test_namespace: str, crds_installed: str) -> None:
    """The no-warning assertion above can fail: Pod Security warns on a root container."""
    docs = relocate(render("overlays/dev"), test_namespace)
    deployment = one(docs, "Deployment", "kuota-admission")
    spec = deployment["spec"]["template"]["spec"]
    spec["securityContext"]["runAsNonRoot"] = False
    spec["securityContext"]["runAsUser"] = 0
    proc = dry_run([deployment], crds_installed)
    assert proc.returncode == 0, proc.stderr
    assert "PodSecurity" in proc.stderr and "restricted" in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- offline: shape


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return documents(render(f"overlays/{request.param}"))


def test_both_overlays_share_the_base(overlay: list[dict[str, Any]]) -> None:
    base = documents(render("base"))
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"):
        assert find(overlay, kind) == find(base, kind), f"{kind}s differ from the base's"
    crds = {d["metadata"]["name"] for d in find(overlay, "CustomResourceDefinition")}
    assert crds == {d["metadata"]["name"] for d in documents(render("crds"))}
    ns = one(overlay, "Namespace", NAMESPACE)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    config = one(overlay, "ConfigMap", "kuota-config")
    assert "controller_manager_config.yaml" in config["data"]


def test_each_service_has_probes_resources_budget_and_metrics_service(
    overlay: list[dict[str, Any]],
) -> None:
    for svc in SERVICES:
        name = f"kuota-{svc}"
        deployment = one(overlay, "Deployment", name)
        spec = deployment["spec"]
        pod_labels = spec["template"]["metadata"]["labels"]
        assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate", name
        assert spec["template"]["spec"]["serviceAccountName"] == name
        assert spec["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
        c = container(deployment)
        assert c["command"] == [name]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}, (name, probe)
        for what in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(c["resources"][what]), (name, what)
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]

        (pdb,) = [
            p
            for p in find(overlay, "PodDisruptionBudget")
            if p["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        ]
        assert pdb["spec"]["maxUnavailable"] == 1

        metrics = one(overlay, "Service", f"{name}-metrics")
        assert metrics["spec"]["selector"].items() <= pod_labels.items()
        (port,) = metrics["spec"]["ports"]
        assert port["targetPort"] == "metrics" and port["port"] == ports["metrics"]


def test_webhook_service_and_registration(overlay: list[dict[str, Any]]) -> None:
    from kuota_webhook.server import PATH

    webhook = one(overlay, "Deployment", "kuota-webhook")
    pod_labels = webhook["spec"]["template"]["metadata"]["labels"]
    service = one(overlay, "Service", "kuota-webhook")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "webhook"
    assert "webhook" in {p["name"] for p in container(webhook)["ports"]}
    ingest = one(overlay, "Deployment", "kuota-ingest")
    assert "webhook" not in {p["name"] for p in container(ingest)["ports"]}, "not ingest's"
    assert not [e for e in container(ingest)["env"] if e["name"].startswith("KUOTA_WEBHOOK")]

    config = one(overlay, "MutatingWebhookConfiguration", "kuota-webhook")
    # Two entries on one path (docs/design/webhook-registration.md): queued Jobs,
    # failing closed; unlabelled Jobs (managed namespaces), Ignore in deploy/base.
    queued, unlabelled, pytorch, ray, rayjob, jobset, lws, pods, guard = config["webhooks"]
    # labelled Pods (#18, pod groups): gated at creation, on Kueue's pod webhook path
    assert pods["name"] == "mutate--v1-pod.kuota.dev"
    assert pods["clientConfig"]["service"]["path"] == "/mutate--v1-pod"
    assert (pods["failurePolicy"], pods["rules"][0]["resources"]) == ("Fail", ["pods"])
    assert pods["objectSelector"]["matchExpressions"] == [
        {"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}
    ]
    # a ResourceClaimTemplate's delete, refused while a running Job uses it
    # (docs/design/template-guard.md): every template, failing closed
    assert guard["clientConfig"]["service"] == {
        "name": "kuota-webhook",
        "namespace": NAMESPACE,
        "path": "/validate-resource-k8s-io-resourceclaimtemplate",
        "port": port["port"],
    }
    assert (guard["failurePolicy"], guard["rules"][0]["operations"]) == ("Fail", ["DELETE"])
    assert "objectSelector" not in guard
    assert ray["clientConfig"]["service"]["path"] == "/mutate-ray-io-v1-raycluster"  # (#18)
    assert rayjob["clientConfig"]["service"]["path"] == "/mutate-ray-io-v1-rayjob"
    assert (rayjob["failurePolicy"], rayjob["rules"][0]["resources"]) == ("Fail", ["rayjobs"])
    assert jobset["clientConfig"]["service"]["path"] == "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
    assert (jobset["failurePolicy"], jobset["rules"][0]["resources"]) == ("Fail", ["jobsets"])
    # labelled LeaderWorkerSets: their pod templates get the queue label, failing closed
    path = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
    assert lws["clientConfig"]["service"]["path"] == path
    assert (lws["failurePolicy"], lws["rules"][0]["resources"]) == ("Fail", ["leaderworkersets"])
    assert lws["objectSelector"]["matchExpressions"] == [
        {"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}
    ]
    assert pytorch["name"] == "mutate-kubeflow-org-v1-pytorchjob.kuota.dev"  # (#18)
    assert pytorch["clientConfig"]["service"]["path"] == "/mutate-kubeflow-org-v1-pytorchjob"
    assert pytorch["failurePolicy"] == "Fail"
    assert (queued["name"], unlabelled["name"]) == (
        "mutate-batch-v1-job.kuota.dev",
        "unlabelled-batch-v1-job.kuota.dev",
    )
    for hook in (queued, unlabelled):
        assert hook["clientConfig"]["service"] == {
            "name": "kuota-webhook",
            "namespace": NAMESPACE,
            "path": PATH,
            "port": port["port"],
        }
        assert hook["sideEffects"] == "None"
        assert hook["rules"] == [
            {
                "apiGroups": ["batch"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["jobs"],
                "scope": "Namespaced",
            }
        ]
    assert queued["failurePolicy"] == "Fail" and unlabelled["failurePolicy"] == "Ignore"
    assert queued["objectSelector"]["matchExpressions"] == [
        {"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}
    ]
    assert unlabelled["objectSelector"]["matchExpressions"] == [
        {"key": "kueue.x-k8s.io/queue-name", "operator": "DoesNotExist"}
    ]
    # Only the actuator's ServiceAccount may write kuota.dev/ annotations on Jobs.
    actuator = one(overlay, "Deployment", "kuota-actuator")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in container(webhook)["env"]}
    assert env["KUOTA_WEBHOOK_TRUSTED_USERS"] == (
        f"system:serviceaccount:{NAMESPACE}:{actuator['serviceAccountName']}"
    )


def test_the_webhook_stands_apart(overlay: list[dict[str, Any]]) -> None:
    """#23 item 7: its own stateless Deployment, 2 replicas rolled with none down,
    spread over nodes, a budget that keeps one up, ready once its view is complete
    (HTTPS /readyz), and nothing of Kafka's or Redis's."""
    deployment = one(overlay, "Deployment", "kuota-webhook")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert pod["serviceAccountName"] == "kuota-webhook"
    assert pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    c = container(deployment)
    assert c["command"] == ["kuota-webhook"]
    https = {"port": "webhook", "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", **https}
    for probe in ("startupProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", **https}
    assert c["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    env = {e["name"] for e in c["env"]}
    assert not {n for n in env if "KAFKA" in n or "REDIS" in n}, env
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    (secret,) = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    assert secret == "kuota-webhook-tls"
    pod_labels = spec["template"]["metadata"]["labels"]
    (pdb,) = [
        p
        for p in find(overlay, "PodDisruptionBudget")
        if p["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    ]
    assert pdb["spec"]["minAvailable"] == 1 < spec["replicas"], "a drain keeps one serving"
    metrics = one(overlay, "Service", "kuota-webhook-metrics")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert metrics["spec"]["ports"][0]["port"] == ports["metrics"]


def test_network_policies(overlay: list[dict[str, Any]]) -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in find(overlay, "NetworkPolicy")}
    names = {f"kuota-{s}" for s in (*SERVICES, "webhook")}

    def selected(spec: dict[str, Any]) -> set[str]:
        sel = spec["podSelector"]
        if "matchLabels" in sel:
            return names & {sel["matchLabels"].get("app.kubernetes.io/name")}
        (expr,) = sel["matchExpressions"]
        assert expr["key"] == "app.kubernetes.io/name" and expr["operator"] == "In"
        return names & set(expr["values"])

    deny = policies["kuota-default-deny"]
    assert selected(deny) == names and sorted(deny["policyTypes"]) == ["Egress", "Ingress"]
    assert "ingress" not in deny and "egress" not in deny

    def egress_ports(svc: str) -> set[int]:
        out = set()
        for spec in policies.values():
            if f"kuota-{svc}" in selected(spec):
                for rule in spec.get("egress", []):
                    out |= {p["port"] for p in rule["ports"]}
        return out

    # Kafka: the port the services are configured to use (dev 9092; production
    # Strimzi's TLS listener, 9093).
    (env_cm,) = [
        c for c in find(overlay, "ConfigMap") if c["metadata"]["name"].startswith("kuota-env")
    ]
    kafka = int(env_cm["data"]["KUOTA_KAFKA_BOOTSTRAP"].rpartition(":")[2])
    assert egress_ports("ingest") == {53, kafka, 6379, 443, 6443}
    assert egress_ports("actuator") == {53, kafka, 6379, 443, 6443}
    assert egress_ports("admission") == {53, kafka, 6379}
    assert egress_ports("preemption") == {53, kafka}
    assert egress_ports("webhook") == {53, 443, 6443}, "the apiserver only"

    webhook = policies["kuota-webhook"]
    assert selected(webhook) == {"kuota-webhook"}
    (rule,) = webhook["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": "webhook"}]
    assert all(set(peer) == {"ipBlock"} for peer in rule["from"]), "no pod may be selected"
    cidrs = [peer["ipBlock"]["cidr"] for peer in rule["from"]]
    if len(cidrs) == 1:  # production: the control plane's CIDR, an overlay parameter
        (cidr,) = cidrs
        net = ipaddress.ip_network(cidr)
        assert net.prefixlen >= 8 and not net.is_unspecified, cidr
    else:  # dev: anything (the dev cluster's control plane is not known)
        assert cidrs == ["0.0.0.0/0", "::/0"]

    metrics = policies["kuota-allow-metrics"]
    assert selected(metrics) == names
    (rule,) = metrics["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": "metrics"}]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]


def test_dev_kafka_and_redis_carry_the_labels_the_policies_allow() -> None:
    dev = documents(render("overlays/dev"))
    kafka = one(dev, "StatefulSet", "kuota-kafka")
    redis = one(dev, "Deployment", "kuota-redis")
    assert kafka["spec"]["template"]["metadata"]["labels"]["kuota.dev/kafka"] == "true"
    assert redis["spec"]["template"]["metadata"]["labels"]["kuota.dev/redis"] == "true"
    env = {e["name"]: e["value"] for e in container(kafka)["env"]}
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"
    assert kafka["spec"]["template"]["spec"]["enableServiceLinks"] is False
    # The services' bootstrap address is the address the broker advertises.
    (env_cm,) = [c for c in find(dev, "ConfigMap") if c["metadata"]["name"].startswith("kuota-env")]
    bootstrap = env_cm["data"]["KUOTA_KAFKA_BOOTSTRAP"]
    assert env["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{bootstrap}"
    svc = one(dev, "Service", "kuota-kafka")
    assert bootstrap == f"kuota-kafka.{NAMESPACE}.svc:{svc['spec']['ports'][0]['port']}"


# --------------------------------------------------------------------------- offline: third party


def test_cert_manager_documents() -> None:
    """Offline (cert-manager's CRDs are not installed): the CA chain (#23 item 8),
    required fields and agreement: self-signed Issuer -> CA Certificate -> CA Issuer
    -> serving Certificate, the caBundle injected from the CA, not the serving pair."""
    prod = documents(render("overlays/production"))
    selfsigned = one(prod, "Issuer", "kuota-selfsigned")
    ca_cert = one(prod, "Certificate", "kuota-webhook-ca")
    ca_issuer = one(prod, "Issuer", "kuota-webhook-ca")
    cert = one(prod, "Certificate", "kuota-webhook")
    for doc in (selfsigned, ca_cert, ca_issuer, cert):
        assert doc["apiVersion"] == "cert-manager.io/v1"
        assert doc["metadata"]["namespace"] == NAMESPACE
    assert selfsigned["spec"] == {"selfSigned": {}}
    ca = ca_cert["spec"]
    assert ca["isCA"] is True
    group = "cert-manager.io"
    assert ca["issuerRef"] == {"name": "kuota-selfsigned", "kind": "Issuer", "group": group}
    assert ca["privateKey"]["rotationPolicy"] == "Never", "a renewed CA still verifies old leaves"
    assert ca_issuer["spec"] == {"ca": {"secretName": ca["secretName"]}}
    spec = cert["spec"]
    assert {"secretName", "issuerRef", "dnsNames"} <= set(spec)
    assert spec.get("isCA") is not True
    assert spec["issuerRef"] == {"name": "kuota-webhook-ca", "kind": "Issuer", "group": group}
    hours = {k: int(spec[k].removesuffix("h")) for k in ("duration", "renewBefore")}
    ca_hours = int(ca["duration"].removesuffix("h"))
    assert 0 < hours["renewBefore"] < hours["duration"] < ca_hours
    webhook = one(prod, "Deployment", "kuota-webhook")
    secrets = {
        v["secret"]["secretName"]
        for v in webhook["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }
    assert spec["secretName"] in secrets
    assert f"kuota-webhook.{NAMESPACE}.svc" in spec["dnsNames"]
    config = one(prod, "MutatingWebhookConfiguration", "kuota-webhook")
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{NAMESPACE}/{ca_cert['metadata']['name']}"
    ), "from the CA: the serving pair's renewal leaves the caBundle alone"
    dev_webhook = one(
        documents(render("overlays/dev")), "MutatingWebhookConfiguration", "kuota-webhook"
    )
    assert "cert-manager.io/inject-ca-from" not in (
        dev_webhook["metadata"].get("annotations") or {}
    )
    parameters = [c for c in find(prod, "ConfigMap") if "webhook-network" in c["metadata"]["name"]]
    assert not parameters, "the overlay's parameter is local-config: not applied"


def test_strimzi_documents() -> None:
    """Offline (Strimzi's CRDs are not installed): the fields Strimzi's v1 CRDs require,
    and agreement with kuota's settings and topics."""
    docs = documents(render("kafka/strimzi"))
    for doc in docs:
        assert doc["apiVersion"] == "kafka.strimzi.io/v1", doc["kind"]
        assert doc["metadata"]["namespace"] == NAMESPACE
    (kafka,) = find(docs, "Kafka")
    (pool,) = find(docs, "KafkaNodePool")
    topics = find(docs, "KafkaTopic")
    cluster = kafka["metadata"]["name"]

    # KafkaNodePool: spec.replicas, spec.roles, spec.storage required; KRaft roles.
    assert pool["metadata"]["labels"]["strimzi.io/cluster"] == cluster
    pool_spec = pool["spec"]
    assert {"replicas", "roles", "storage"} <= set(pool_spec)
    assert set(pool_spec["roles"]) == {"controller", "broker"}
    brokers = pool_spec["replicas"]
    assert brokers >= 3, "production: a quorum of three"
    (volume,) = pool_spec["storage"]["volumes"]
    assert volume["type"] == "persistent-claim" and volume["kraftMetadata"] == "shared"
    assert pool_spec["template"]["pod"]["metadata"]["labels"]["kuota.dev/kafka"] == "true"

    # Kafka: spec.kafka.listeners required, each with name, port, type, tls.
    listeners = kafka["spec"]["kafka"]["listeners"]
    for listener in listeners:
        assert {"name", "port", "type", "tls"} <= set(listener), listener
    config = kafka["spec"]["kafka"]["config"]
    assert config["transaction.state.log.replication.factor"] <= brokers
    assert (
        1
        < config["transaction.state.log.min.isr"]
        < config["transaction.state.log.replication.factor"]
    )
    assert 1 < config["min.insync.replicas"] < config["default.replication.factor"] <= brokers

    # The services' default bootstrap is this cluster's bootstrap Service and a
    # plain listener (KUOTA_KAFKA_SECURITY defaults to PLAINTEXT).
    base = documents(render("base"))
    (env_cm,) = [
        c for c in find(base, "ConfigMap") if c["metadata"]["name"].startswith("kuota-env")
    ]
    bootstrap = env_cm["data"]["KUOTA_KAFKA_BOOTSTRAP"]
    host, _, port = bootstrap.rpartition(":")
    assert host == f"{cluster}-kafka-bootstrap.{NAMESPACE}.svc"
    (plain,) = [x for x in listeners if x["port"] == int(port)]
    assert plain["tls"] is False and plain["type"] == "internal"
    peers = plain["networkPolicyPeers"]
    assert peers == [{"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "kuota"}}}]
    for svc in SERVICES:
        labels = one(base, "Deployment", f"kuota-{svc}")["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "kuota"

    # KafkaTopics: exactly kuota's topics, replicated and retained as ensure_topics makes them.
    settings = KafkaSettings.from_env(
        {
            "KUOTA_KAFKA_BOOTSTRAP": bootstrap,
            "KUOTA_TOPIC_PREFIX": env_cm["data"]["KUOTA_TOPIC_PREFIX"],
        }
    )
    want = Topics.from_settings(settings)
    by_name = {t["spec"]["topicName"]: t for t in topics}
    assert set(by_name) == {want.journal, want.decisions, want.deadletter}
    retention = {want.journal: FOREVER, want.decisions: FOREVER, want.deadletter: THIRTY_DAYS_MS}
    for name, topic in by_name.items():
        assert topic["metadata"]["labels"]["strimzi.io/cluster"] == cluster
        spec = topic["spec"]
        assert 1 < spec["config"]["min.insync.replicas"] < spec["replicas"] <= brokers, name
        assert str(spec["config"]["retention.ms"]) == retention[name], name
        partitions = 1 if name == want.deadletter else settings.journal_partitions
        assert spec["partitions"] == partitions, name
