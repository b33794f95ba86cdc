"""What a team's namespace role may not do, checked by the apiserver's own authorizer.

kuota's promise (no Job runs beyond its team's quota) assumes a team member
holds the built-in ``edit`` ClusterRole in their own namespace and nothing
more (docs/security.md, "A team's role"). A ServiceAccount ``team-user`` of a
fresh namespace is bound there to ``edit`` (a RoleBinding, what a team gets) and
asked ``SubjectAccessReview`` questions with the groups a real token carries:

- refused: every write to kuota's and Kueue's objects (``kueue.x-k8s.io``, the
  quota itself), ``jobs/status`` (a forged ``Complete``), the webhook
  registrations and admission policies (the door), Namespaces (the labels a
  ``managedJobsNamespaceSelector`` reads), the Configuration's ConfigMap, the
  DRA inventory (DeviceClasses, ResourceSlices), kuota's namespace (its
  ServiceAccounts' tokens and Secrets: the identities the webhook trusts), and
  RBAC in its own namespace;
- allowed (the reviews can say yes, and the gaps the doc names): Jobs and
  bare Pods in its own namespace. A bare Pod is not a Job: kuota does not
  queue it (docs/security.md says what closes that gap).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config
from rbac_helpers import (
    CLUSTERQUEUES,
    CLUSTERQUEUES_STATUS,
    COHORTS,
    CONFIGMAPS,
    DEVICECLASSES,
    HERE,
    JOBS,
    JOBS_STATUS,
    LOCALQUEUES,
    NAMESPACES,
    PRIORITYCLASSES,
    RESOURCEFLAVORS,
    RESOURCESLICES,
    SECRETS,
    USER_NS,
    Question,
    Rbac,
    Res,
    cluster,
)
from stack_helpers import temp_namespace
from test_deploy_manifests import RUN_LABEL

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
live = pytest.mark.asyncio(loop_scope="module")

USER = "team-user"
KUOTA_NS = "kuota-system"  # where kuota's ServiceAccounts live (deploy/base)
KUEUE_NS = "kueue-system"  # where Kueue's Configuration ConfigMap lives
WRITE = ("create", "update", "patch", "delete")
PODS = Res("", "pods")
SERVICEACCOUNTS = Res("", "serviceaccounts")
TOKENS = Res("", "serviceaccounts", "token")
WORKLOADS = Res("kueue.x-k8s.io", "workloads")
LOCALQUEUES_STATUS = Res("kueue.x-k8s.io", "localqueues", "status")
PODS_STATUS = Res("", "pods", "status")
ROLEBINDINGS = Res("rbac.authorization.k8s.io", "rolebindings")
ROLES = Res("rbac.authorization.k8s.io", "roles")
MUTATING = cluster("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
VALIDATING = cluster("admissionregistration.k8s.io", "validatingwebhookconfigurations")
POLICIES = cluster("admissionregistration.k8s.io", "validatingadmissionpolicies")
POLICY_BINDINGS = cluster("admissionregistration.k8s.io", "validatingadmissionpolicybindings")
CRDS = cluster("apiextensions.k8s.io", "customresourcedefinitions")
USERS = cluster("", "users")


def writes(*resources: Res, namespace: str = HERE) -> list[Question]:
    return [
        (verb, res, namespace if res.namespaced else "", "") for res in resources for verb in WRITE
    ]


# (why, questions): each must be refused
REFUSED: list[tuple[str, list[Question]]] = [
    (
        "the quota: Kueue's objects",
        writes(CLUSTERQUEUES, RESOURCEFLAVORS, COHORTS, PRIORITYCLASSES),
    ),
    ("its own LocalQueues and Workloads", writes(LOCALQUEUES, LOCALQUEUES_STATUS, WORKLOADS)),
    ("the quota's status", writes(CLUSTERQUEUES_STATUS)),
    ("a forged Job or Pod status", writes(JOBS_STATUS, PODS_STATUS)),
    ("the door", writes(MUTATING, VALIDATING, POLICIES, POLICY_BINDINGS, CRDS)),
    (
        "the namespace labels managedJobsNamespaceSelector reads",
        [(v, NAMESPACES, "", "") for v in ("update", "patch")]
        + [(v, NAMESPACES, HERE, "") for v in ("update", "patch")],
    ),
    (
        "the Configuration",
        [(v, CONFIGMAPS, ns, "") for ns in (KUEUE_NS, KUOTA_NS) for v in ("get", *WRITE)],
    ),
    ("the DRA inventory", writes(DEVICECLASSES, RESOURCESLICES)),
    (
        "kuota's identities",
        [
            ("create", TOKENS, KUOTA_NS, "kuota-actuator"),
            ("impersonate", SERVICEACCOUNTS, KUOTA_NS, "kuota-actuator"),
            ("impersonate", USERS, "", "kuota-admin"),
            ("get", SECRETS, KUOTA_NS, ""),
            ("list", SECRETS, KUOTA_NS, ""),
        ],
    ),
    ("RBAC in its own namespace", writes(ROLES, ROLEBINDINGS)),
    ("another team's Jobs", writes(JOBS, namespace=USER_NS)),
]
ALLOWED: list[Question] = [
    ("create", JOBS, HERE, ""),
    ("patch", JOBS, HERE, ""),
    ("update", JOBS, HERE, ""),
    ("delete", JOBS, HERE, ""),
    ("get", JOBS, HERE, ""),
    ("create", PODS, HERE, ""),  # the gap: a bare Pod is not queued (docs/security.md)
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def team(kubeconfig: str) -> AsyncIterator[Rbac]:
    """``team-user`` of a fresh namespace, bound there to the ``edit`` ClusterRole."""
    api = await config.new_client_from_config(config_file=kubeconfig)
    name = f"kuota-team-{uuid.uuid4().hex[:8]}"
    try:
        async with temp_namespace(api, name, {RUN_LABEL: "rbac-team-role"}):
            await client.CoreV1Api(api).create_namespaced_service_account(
                name, {"metadata": {"name": USER}}
            )
            binding = {
                "metadata": {"name": f"{USER}-edit"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "edit",
                },
                "subjects": [{"kind": "ServiceAccount", "name": USER, "namespace": name}],
            }
            await client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(name, binding)
            rbac = Rbac(api, name, [])
            deadline = time.monotonic() + 15
            while not await rbac.allowed(USER, ("create", JOBS, HERE, "")):
                assert time.monotonic() < deadline, "the binding never took effect"
                await asyncio.sleep(0.2)
            yield rbac
    finally:
        await api.close()


def _label(q: Question) -> str:
    verb, res, ns, name = q
    return f"{verb} {res} ns={ns or '-'} name={name or '-'}"


@live
@pytest.mark.parametrize(("why", "questions"), REFUSED, ids=[w for w, _ in REFUSED])
async def test_a_team_role_may_not(team: Rbac, why: str, questions: list[Question]) -> None:
    granted = await team.granted(USER, questions)
    assert not granted, f"{why}: a namespace edit role may {sorted(map(_label, granted))}"


@live
async def test_a_team_role_may_write_its_jobs_and_bare_pods(team: Rbac) -> None:
    """The refusals are not an authorizer that refuses everything; and the gap is real."""
    granted = await team.granted(USER, ALLOWED)
    assert granted == set(ALLOWED), sorted(map(_label, set(ALLOWED) - granted))
