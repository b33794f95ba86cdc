"""Shared by the RBAC tests (``test_deploy_rbac.py``, ``test_deploy_rbac_services.py``).

The resources a question is about (``Res``; ``UNIVERSE`` is every one asked
about), the question type, and ``applied_rbac``: deploy/base's RBAC objects
applied for real in a namespace of this run (``kuota-system`` ->
``kuota-t-<hex>``, ClusterRoles and bindings suffixed with it) with an ``Rbac``
handle that asks the apiserver ``SubjectAccessReview`` questions as a
ServiceAccount. Everything applied is deleted on exit (cluster-scoped objects by
name, the namespace without waiting).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes_asyncio import client, config
from test_deploy_manifests import (
    RUN_LABEL,
    documents,
    kubectl,
    relocate,
    render,
    unique_namespace,
)

from kuota import kinds

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


def of(kind: str, subresource: str = "") -> Res:
    """The resource of a kind of kuota.kinds (its group, plural and scope)."""
    k = kinds.get(kind)
    return Res(k.group, k.plural, subresource, namespaced=k.namespaced)


NAMESPACES = of("Namespace")
NODES = of("Node")  # cluster-scoped: ingest reads them (#17)
CONFIGMAPS = of("ConfigMap")
SECRETS = Res("", "secrets")
EVENTS = Res("", "events")
JOBS = of("Job")
JOBS_STATUS = of("Job", "status")
DEVICECLASSES = of("DeviceClass")
RESOURCESLICES = of("ResourceSlice")
RESOURCECLAIMTEMPLATES = of("ResourceClaimTemplate")
RESOURCECLAIMS = of("ResourceClaim")  # every claim: ingest reads them (#17)
CLUSTERQUEUES = of("ClusterQueue")
CLUSTERQUEUES_STATUS = of("ClusterQueue", "status")
LOCALQUEUES = of("LocalQueue")
RESOURCEFLAVORS = of("ResourceFlavor")
COHORTS = of("Cohort")
PRIORITYCLASSES = of("WorkloadPriorityClass")

UNIVERSE: tuple[Res, ...] = (
    NAMESPACES,
    CONFIGMAPS,
    SECRETS,
    EVENTS,
    Res("", "pods"),
    Res("", "services"),
    Res("", "serviceaccounts"),
    NODES,
    JOBS,
    JOBS_STATUS,
    Res("apps", "deployments"),
    DEVICECLASSES,
    RESOURCESLICES,
    RESOURCECLAIMTEMPLATES,
    RESOURCECLAIMS,
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
    *(of(k.kind) for k in kinds.KINDS if k.served),
)
UNIVERSE = tuple(dict.fromkeys(UNIVERSE))  # every served kind of kuota.kinds once

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


@contextlib.asynccontextmanager
async def applied_rbac(kubeconfig: str) -> AsyncIterator[Rbac]:
    """The production overlay's RBAC applied in a fresh namespace, once it answers."""
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
