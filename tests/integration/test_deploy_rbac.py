"""Least privilege, checked by the apiserver's own authorizer.

The RBAC objects of ``deploy/base`` (as rendered by ``kubectl kustomize
deploy/overlays/production``; the dev overlay's are the same) are applied for
real, moved to a namespace of this run (``kuota-system`` -> ``kuota-t-<hex>``,
ClusterRoles and bindings suffixed with it), and every ServiceAccount is asked
``SubjectAccessReview`` questions as ``system:serviceaccount:<ns>:<sa>`` with
the groups a real token carries (so the cluster's default bindings for
``system:authenticated`` and ``system:serviceaccounts`` count too):

- a matrix of verbs x resources x namespaces, allowed exactly where the
  service's calls need it (``EXPECTED``; the calls are listed in the RBAC
  files' comments, docs/design/ingest.md and docs/design/actuator.md);
- named refusals: ingest cannot update Jobs or create Events, the actuator
  cannot delete Jobs, read Secrets or write ClusterQueue specs, admission and
  preemption cannot list anything;
- enough, not only allowed: ``kuota-ingest`` and ``kuota-actuator`` run as
  subprocesses with a kubeconfig holding nothing but their ServiceAccount's
  token (TokenRequest): ingest lists every source and journals the
  Configuration ConfigMap; the actuator applies an Admitted and a Preempted
  decision to a Job, writes Events and the ClusterQueue's status — without a
  403 in their logs.

Everything a run creates is deleted at the end (cluster-scoped objects by
name, the namespace without waiting).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from test_deploy_manifests import (
    NAMESPACE,
    RUN_LABEL,
    documents,
    find,
    kubectl,
    relocate,
    render,
    unique_namespace,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
live = pytest.mark.asyncio(loop_scope="module")

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
USER_NS = "team-a"  # some user's namespace
CONFIG = "kuota-config"  # the Configuration ConfigMap ingest watches


@dataclass(frozen=True)
class Res:
    group: str
    resource: str
    subresource: str = ""
    namespaced: bool = True

    def __str__(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.group or 'core'}/{self.resource}{sub}"


def cluster(group: str, resource: str, subresource: str = "") -> Res:
    return Res(group, resource, subresource, namespaced=False)


NAMESPACES = cluster("", "namespaces")
CONFIGMAPS = Res("", "configmaps")
SECRETS = Res("", "secrets")
EVENTS = Res("", "events")
JOBS = Res("batch", "jobs")
JOBS_STATUS = Res("batch", "jobs", "status")
DEVICECLASSES = cluster("resource.k8s.io", "deviceclasses")
RESOURCESLICES = cluster("resource.k8s.io", "resourceslices")
RESOURCECLAIMTEMPLATES = Res("resource.k8s.io", "resourceclaimtemplates")
CLUSTERQUEUES = cluster("kueue.x-k8s.io", "clusterqueues")
CLUSTERQUEUES_STATUS = cluster("kueue.x-k8s.io", "clusterqueues", "status")
LOCALQUEUES = Res("kueue.x-k8s.io", "localqueues")
RESOURCEFLAVORS = cluster("kueue.x-k8s.io", "resourceflavors")
COHORTS = cluster("kueue.x-k8s.io", "cohorts")
PRIORITYCLASSES = cluster("kueue.x-k8s.io", "workloadpriorityclasses")

UNIVERSE: tuple[Res, ...] = (
    NAMESPACES,
    CONFIGMAPS,
    SECRETS,
    EVENTS,
    Res("", "pods"),
    Res("", "services"),
    Res("", "serviceaccounts"),
    cluster("", "nodes"),
    JOBS,
    JOBS_STATUS,
    Res("apps", "deployments"),
    DEVICECLASSES,
    RESOURCESLICES,
    RESOURCECLAIMTEMPLATES,
    Res("resource.k8s.io", "resourceclaims"),
    CLUSTERQUEUES,
    CLUSTERQUEUES_STATUS,
    LOCALQUEUES,
    Res("kueue.x-k8s.io", "localqueues", "status"),
    RESOURCEFLAVORS,
    COHORTS,
    PRIORITYCLASSES,
    Res("kueue.x-k8s.io", "workloads"),
    Res("events.k8s.io", "events"),
    Res("coordination.k8s.io", "leases"),
    cluster("rbac.authorization.k8s.io", "clusterroles"),
    cluster("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    cluster("apiextensions.k8s.io", "customresourcedefinitions"),
)

# A question: (verb, resource, namespace, name). "@kuota" stands for the run's
# namespace (kuota-system in a real deployment).
Question = tuple[str, Res, str, str]
HERE = "@kuota"


def everywhere(verbs: tuple[str, ...], *resources: Res) -> set[Question]:
    out: set[Question] = set()
    for verb, res in itertools.product(verbs, resources):
        for ns in (USER_NS, HERE) if res.namespaced else ("",):
            out.add((verb, res, ns, ""))
    return out


READ = ("get", "list", "watch")
EXPECTED: dict[str, set[Question]] = {
    "kuota-ingest": everywhere(
        READ,
        NAMESPACES,
        JOBS,
        DEVICECLASSES,
        RESOURCESLICES,
        RESOURCECLAIMTEMPLATES,
        CLUSTERQUEUES,
        LOCALQUEUES,
        RESOURCEFLAVORS,
        COHORTS,
        PRIORITYCLASSES,
    )
    | {
        ("list", CONFIGMAPS, HERE, ""),
        ("watch", CONFIGMAPS, HERE, ""),
        ("get", CONFIGMAPS, HERE, CONFIG),
    },
    "kuota-actuator": everywhere((*READ, "patch"), JOBS)
    | everywhere(("patch",), JOBS_STATUS)
    | everywhere(("create",), EVENTS)
    | everywhere(READ, RESOURCEFLAVORS, CLUSTERQUEUES)
    | everywhere(("patch",), CLUSTERQUEUES_STATUS)
    | everywhere(
        ("get",),
        COHORTS,
        LOCALQUEUES,
        PRIORITYCLASSES,
        DEVICECLASSES,
        RESOURCESLICES,
        RESOURCECLAIMTEMPLATES,
        NAMESPACES,
    ),
    "kuota-admission": set(),
    "kuota-preemption": set(),
}


def questions() -> list[Question]:
    out = []
    for verb, res in itertools.product(VERBS, UNIVERSE):
        for ns in (USER_NS, HERE) if res.namespaced else ("",):
            out.append((verb, res, ns, ""))
    # Names matter where a rule names them.
    out += [
        ("get", CONFIGMAPS, HERE, CONFIG),
        ("get", CONFIGMAPS, HERE, "kube-root-ca.crt"),
        ("get", CONFIGMAPS, USER_NS, CONFIG),
        ("update", CONFIGMAPS, HERE, CONFIG),
        ("get", SECRETS, HERE, "kuota-redis"),
        ("get", SECRETS, HERE, "kuota-ingest-webhook-tls"),
    ]
    return out


# --------------------------------------------------------------------------- fixtures


@dataclass
class Rbac:
    api: client.ApiClient
    namespace: str
    docs: list[dict[str, Any]]

    async def allowed(self, sa: str, q: Question) -> bool:
        verb, res, ns, name = q
        attrs: dict[str, Any] = {"verb": verb, "group": res.group, "resource": res.resource}
        if res.subresource:
            attrs["subresource"] = res.subresource
        if ns:
            attrs["namespace"] = self.namespace if ns == HERE else ns
        if name:
            attrs["name"] = name
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{self.namespace}:{sa}",
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{self.namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": attrs,
            },
        }
        review = await client.AuthorizationV1Api(self.api).create_subject_access_review(body)
        return bool(review.status.allowed)

    async def granted(self, sa: str, qs: list[Question]) -> set[Question]:
        gate = asyncio.Semaphore(16)

        async def ask(q: Question) -> bool:
            async with gate:
                return await self.allowed(sa, q)

        answers = await asyncio.gather(*(ask(q) for q in qs))
        return {q for q, ok in zip(qs, answers, strict=True) if ok}


def rbac_documents(overlay: str) -> list[dict[str, Any]]:
    return [d for d in documents(render(overlay)) if d["kind"] in RBAC_KINDS]


@pytest.fixture(scope="module")
def applied(kubeconfig: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    ns = unique_namespace()
    docs = [d for d in relocate(render("overlays/production"), ns) if d["kind"] in RBAC_KINDS]
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    manifest["metadata"]["labels"] = {RUN_LABEL: "deploy-rbac"}
    kubectl("create", "-f", "-", stdin=yaml.safe_dump(manifest), kubeconfig=kubeconfig)
    try:
        kubectl(
            "apply",
            "--server-side",
            "--field-manager=kuota-test-deploy",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(docs),
            kubeconfig=kubeconfig,
        )
        yield ns, docs
    finally:
        for doc in docs:
            if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                kubectl(
                    "delete",
                    doc["kind"].lower(),
                    doc["metadata"]["name"],
                    "--ignore-not-found",
                    kubeconfig=kubeconfig,
                    check=False,
                )
        kubectl("delete", "namespace", ns, "--wait=false", kubeconfig=kubeconfig, check=False)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rbac(applied: tuple[str, list[dict[str, Any]]], kubeconfig: str) -> AsyncIterator[Rbac]:
    ns, docs = applied
    api = await config.new_client_from_config(config_file=kubeconfig)
    try:
        rbac = Rbac(api, ns, docs)
        # The authorizer learns new bindings through a watch: wait until the
        # last-applied ones answer before asking the matrix.
        probes = [
            ("kuota-ingest", ("list", CONFIGMAPS, HERE, "")),
            ("kuota-actuator", ("patch", CLUSTERQUEUES_STATUS, "", "")),
        ]
        deadline = time.monotonic() + 15
        while not all([await rbac.allowed(sa, q) for sa, q in probes]):
            assert time.monotonic() < deadline, "the applied RBAC never took effect"
            await asyncio.sleep(0.2)
        yield rbac
    finally:
        await api.close()


# --------------------------------------------------------------------------- tests


def test_rbac_is_the_same_in_both_overlays() -> None:
    assert rbac_documents("overlays/dev") == rbac_documents("overlays/production")


def test_no_binding_for_admission_or_preemption_and_no_token() -> None:
    docs = documents(render("overlays/production"))
    for sa in ("kuota-admission", "kuota-preemption"):
        bound = [
            b["metadata"]["name"]
            for b in find(docs, "ClusterRoleBinding") + find(docs, "RoleBinding")
            if any(s.get("name") == sa for s in b.get("subjects", []))
        ]
        assert bound == [], f"{sa} is bound by {bound}"
        (account,) = find(docs, "ServiceAccount", sa)
        assert account["automountServiceAccountToken"] is False
        (deployment,) = find(docs, "Deployment", sa)
        assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    for sa in ("kuota-ingest", "kuota-actuator"):
        (deployment,) = find(docs, "Deployment", sa)
        assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is True


def test_ingest_config_role_names_the_configmap_ingest_reads() -> None:
    docs = documents(render("overlays/production"))
    (ingest,) = find(docs, "Deployment", "kuota-ingest")
    env = {
        e["name"]: e.get("value")
        for e in ingest["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    ns, name = env["KUOTA_CONFIG_CONFIGMAP"].split("/")
    assert find(docs, "ConfigMap", name), f"no ConfigMap {name}"
    (role,) = find(docs, "Role", "kuota-ingest-config")
    assert role["metadata"]["namespace"] == ns == NAMESPACE
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [[CONFIG]] and name == CONFIG


@live
@pytest.mark.parametrize("sa", sorted(EXPECTED))
async def test_each_service_account_may_do_exactly_what_its_service_needs(
    rbac: Rbac, sa: str
) -> None:
    qs = questions()
    assert EXPECTED[sa] <= set(qs)
    granted = await rbac.granted(sa, qs)
    extra = sorted(
        f"{v} {r} ns={n or '-'} name={m or '-'}" for v, r, n, m in granted - EXPECTED[sa]
    )
    missing = sorted(
        f"{v} {r} ns={n or '-'} name={m or '-'}" for v, r, n, m in EXPECTED[sa] - granted
    )
    assert not extra, f"{sa} may do more than it needs: {extra}"
    assert not missing, f"{sa} may not do what it needs: {missing}"


@live
@pytest.mark.parametrize(
    ("sa", "question"),
    [
        ("kuota-ingest", ("update", JOBS, USER_NS, "")),
        ("kuota-ingest", ("patch", JOBS, USER_NS, "")),
        ("kuota-ingest", ("create", EVENTS, USER_NS, "")),
        ("kuota-ingest", ("list", CONFIGMAPS, USER_NS, "")),
        ("kuota-ingest", ("get", SECRETS, HERE, "kuota-redis")),
        ("kuota-actuator", ("delete", JOBS, USER_NS, "")),
        ("kuota-actuator", ("create", JOBS, USER_NS, "")),
        ("kuota-actuator", ("update", JOBS, USER_NS, "")),
        ("kuota-actuator", ("update", JOBS_STATUS, USER_NS, "")),
        ("kuota-actuator", ("get", SECRETS, USER_NS, "")),
        ("kuota-actuator", ("list", SECRETS, HERE, "")),
        ("kuota-actuator", ("update", CLUSTERQUEUES, "", "")),
        ("kuota-actuator", ("patch", CLUSTERQUEUES, "", "")),
        ("kuota-actuator", ("delete", EVENTS, USER_NS, "")),
        ("kuota-admission", ("list", JOBS, USER_NS, "")),
        ("kuota-admission", ("list", NAMESPACES, "", "")),
        ("kuota-admission", ("get", CONFIGMAPS, HERE, CONFIG)),
        ("kuota-preemption", ("list", CLUSTERQUEUES, "", "")),
        ("kuota-preemption", ("watch", JOBS, USER_NS, "")),
    ],
    ids=lambda v: v if isinstance(v, str) else f"{v[0]}-{v[1]}",
)
async def test_refused(rbac: Rbac, sa: str, question: Question) -> None:
    assert not await rbac.allowed(sa, question), f"{sa} may {question}"


@live
async def test_the_reviews_can_say_yes(rbac: Rbac) -> None:
    """The refusals above are not an authorizer that refuses everything."""
    assert await rbac.allowed("kuota-actuator", ("patch", JOBS, USER_NS, ""))
    assert await rbac.allowed("kuota-ingest", ("watch", CLUSTERQUEUES, "", ""))
    assert not await rbac.allowed("kuota-ingest", ("watch", CLUSTERQUEUES_STATUS, "", "x"))


# ------------------------------------------------------------ the services, as their accounts


def token_kubeconfig(admin: str, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig for the stack's apiserver that authenticates as ``sa`` (TokenRequest)."""
    token = kubectl(
        "create", "token", sa, "-n", namespace, "--duration=30m", kubeconfig=admin
    ).stdout.strip()
    cfg = yaml.safe_load(Path(admin).read_text())
    contexts = {c["name"]: c["context"] for c in cfg["contexts"]}
    clusters = {c["name"]: c["cluster"] for c in cfg["clusters"]}
    cluster_cfg = dict(clusters[contexts[cfg["current-context"]]["cluster"]])
    ca = cluster_cfg.get("certificate-authority")
    if ca and not Path(ca).is_absolute():
        cluster_cfg["certificate-authority"] = str(Path(admin).parent / ca)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stack", "cluster": cluster_cfg}],
                "users": [{"name": sa, "user": {"token": token}}],
                "contexts": [{"name": sa, "context": {"cluster": "stack", "user": sa}}],
                "current-context": sa,
            }
        )
    )
    return path


class Service:
    """A kuota service as a subprocess, its output in a log file."""

    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        binary = Path(sys.executable).with_name(f"kuota-{name}")
        assert binary.exists(), f"{binary} missing: run .venv/bin/pip install -e '.[dev]'"
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [str(binary)], env=env, stdout=self._out, stderr=subprocess.STDOUT
        )

    def text(self) -> str:
        return self.log.read_text()

    def alive(self) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"kuota-{self.name} exited {self.proc.returncode}:\n{self.text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._out.close()

    def forbidden(self) -> list[str]:
        """Warnings and errors about a refused API call (the apiserver says
        "... is forbidden: User ... cannot ...", with status 403)."""
        return [
            line
            for line in self.text().splitlines()
            if (" WARNING " in line or " ERROR " in line)
            and re.search(r"forbidden|HTTP 403|\b403: ", line, re.IGNORECASE)
        ]


async def eventually(probe: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.25)
    pytest.fail(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def service_env(kafka_bootstrap: str, redis_url: str, kubeconfig: Path, run: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUOTA_")}
    return {
        **env,
        "KUOTA_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "KUOTA_REDIS_URL": redis_url,
        "KUOTA_TOPIC_PREFIX": f"test-{run}.",
        "KUBECONFIG": str(kubeconfig),
        "KUOTA_METRICS_PORT": "0",
    }


@live
async def test_ingest_runs_on_its_service_account_alone(
    rbac: Rbac, kubeconfig: str, kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """Every watch of kuota-ingest lists (it says ``ready``), the Configuration
    ConfigMap included, with nothing but the token of ``kuota-ingest``."""
    ns = rbac.namespace
    (config_map,) = [
        d
        for d in relocate(render("overlays/production"), ns)
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == CONFIG
    ]
    kubectl(
        "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(config_map), kubeconfig=kubeconfig
    )
    run = uuid.uuid4().hex[:8]
    env = service_env(
        kafka_bootstrap,
        redis_url,
        token_kubeconfig(kubeconfig, ns, "kuota-ingest", tmp_path / "ingest.kubeconfig"),
        run,
    )
    env["KUOTA_CONFIG_CONFIGMAP"] = f"{ns}/{CONFIG}"
    env["KUOTA_WEBHOOK_PORT"] = "0"
    svc = Service("ingest", env, tmp_path / "ingest.log")
    try:

        async def ready() -> str | None:
            svc.alive()
            return next((line for line in svc.text().splitlines() if " ready in " in line), None)

        line = await eventually(ready, f"kuota-ingest ready as kuota-ingest ({svc.log})")
        assert "waiting for CRDs" not in line, line

        async def config_journaled() -> bool:
            return f"ConfigMap/{ns}/{CONFIG}@" in svc.text()

        await eventually(config_journaled, "the Configuration ConfigMap journaled")
        assert svc.forbidden() == [], svc.forbidden()
    finally:
        svc.stop()


@live
async def test_actuator_runs_on_its_service_account_alone(
    rbac: Rbac, kubeconfig: str, kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """With only the token of ``kuota-actuator``: an Admitted decision unsuspends a
    Job (flavors injected) and writes Events and the ClusterQueue's status; a
    Preempted decision suspends it again and restores its template."""
    from aiokafka import AIOKafkaProducer

    from kuota.bus.settings import KafkaSettings
    from kuota.bus.topics import ensure_topics
    from kuota.core.actuation import ANN_DECISION_ID
    from kuota.events.schema import Decision

    ns = rbac.namespace
    run = uuid.uuid4().hex[:8]
    objects = client.CustomObjectsApi(rbac.api)
    batch, core = client.BatchV1Api(rbac.api), client.CoreV1Api(rbac.api)
    flavor, cq = f"kwok-{run}", f"cq-{run}"
    await objects.create_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"type": "kwok"}},
        },
    )
    await objects.create_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq, "labels": {RUN_LABEL: run}},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                        ],
                    }
                ],
            },
        },
    )
    job = await batch.create_namespaced_job(
        ns,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {
                "suspend": True,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "1"}},
                            }
                        ],
                    },
                },
            },
        },
    )
    settings = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=f"test-{run}.")
    topics = await ensure_topics(settings)
    producer = AIOKafkaProducer(enable_idempotence=True, **settings.client_kwargs())
    await producer.start()
    env = service_env(
        kafka_bootstrap,
        redis_url,
        token_kubeconfig(kubeconfig, ns, "kuota-actuator", tmp_path / "actuator.kubeconfig"),
        run,
    )
    env["KUOTA_CLUSTERQUEUE_SELECTOR"] = f"{RUN_LABEL}={run}"
    svc = Service("actuator", env, tmp_path / "actuator.log")
    workload = f"{ns}/train"

    async def send(d: Decision) -> None:
        await producer.send_and_wait(
            topics.decisions, value=d.model_dump_json().encode(), key=workload.encode()
        )

    async def read_job() -> Any:
        svc.alive()
        return await batch.read_namespaced_job("train", ns)

    try:

        async def live() -> bool:
            svc.alive()
            return "live: consuming" in svc.text()

        await eventually(live, f"kuota-actuator live ({svc.log})")
        await send(
            Decision(
                id=f"adm-{run}",
                cause="test/admit",
                cause_offset=1,
                at=time.time(),
                type="Admitted",
                workload=workload,
                uid=job.metadata.uid,
                cluster_queue=cq,
                flavors={"main": {"cpu": flavor}},
                usage={flavor: {"cpu": "1"}},
            )
        )

        async def unsuspended() -> Any:
            j = await read_job()
            return j if j.spec.suspend is False else None

        j = await eventually(unsuspended, "the Job unsuspended by the Admitted decision")
        assert j.spec.template.spec.node_selector == {"type": "kwok"}

        async def events() -> set[str]:
            evs = await core.list_namespaced_event(ns, field_selector="involvedObject.name=train")
            return {
                e.reason for e in evs.items if e.source and e.source.component == "kuota-actuator"
            }

        async def admitted_events() -> set[str] | None:
            got = await events()
            return got if {"Admitted", "Started"} <= got else None

        await eventually(admitted_events, "Admitted and Started Events")

        async def cq_status() -> Any:
            svc.alive()
            obj = await objects.get_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", cq
            )
            status = obj.get("status") or {}
            return status if status.get("admittedWorkloads") == 1 else None

        await eventually(cq_status, "ClusterQueue /status admittedWorkloads=1")

        await send(
            Decision(
                id=f"pre-{run}",
                cause="test/preempt",
                cause_offset=2,
                at=time.time(),
                type="Preempted",
                workload=workload,
                uid=job.metadata.uid,
                cluster_queue=cq,
                reason="InClusterQueue",
                preemptor=f"{ns}/big",
            )
        )

        async def stopped() -> Any:
            j = await read_job()
            done = (j.metadata.annotations or {}).get(ANN_DECISION_ID) == f"pre-{run}"
            return j if done else None

        j = await eventually(stopped, "the Job stopped and restored by the Preempted decision")
        assert j.spec.suspend is True
        assert not j.spec.template.spec.node_selector
        assert svc.forbidden() == [], svc.forbidden()
    finally:
        svc.stop()
        await producer.stop()
        for plural, name in (("clusterqueues", cq), ("resourceflavors", flavor)):
            try:
                await objects.delete_cluster_custom_object(
                    "kueue.x-k8s.io", "v1beta2", plural, name
                )
            except ApiException as e:
                if e.status != 404:
                    raise


@live
async def test_ingest_on_a_token_without_grants_is_refused_and_says_so(
    rbac: Rbac, kubeconfig: str, kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """The control for the two tests above: as ``kuota-admission`` (no grants),
    ingest never gets ready and its log shows the refusals they look for."""
    env = service_env(
        kafka_bootstrap,
        redis_url,
        token_kubeconfig(kubeconfig, rbac.namespace, "kuota-admission", tmp_path / "k"),
        uuid.uuid4().hex[:8],
    )
    env["KUOTA_WEBHOOK_PORT"] = "0"
    svc = Service("ingest", env, tmp_path / "ingest.log")
    try:

        async def refused() -> list[str]:
            svc.alive()
            return svc.forbidden()

        await eventually(refused, "a refusal in the log")
        assert " ready in " not in svc.text()
    finally:
        svc.stop()
