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
  preemption cannot list anything.

That the grants are enough, not only allowed (the services running on their
tokens alone), is ``test_deploy_rbac_services.py``; the resources, the
``Rbac`` handle and the apply/clean-up are in ``rbac_helpers.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from rbac_helpers import (
    CLUSTERQUEUES,
    CLUSTERQUEUES_STATUS,
    CONFIG,
    CONFIGMAPS,
    EVENTS,
    HERE,
    JOBS,
    JOBS_STATUS,
    NAMESPACES,
    NODES,
    READ,
    RESOURCECLAIMS,
    RESOURCEFLAVORS,
    SECRETS,
    UNIVERSE,
    USER_NS,
    VERBS,
    Question,
    Rbac,
    Res,
    applied_rbac,
    everywhere,
    of,
    rbac_documents,
)
from test_deploy_manifests import NAMESPACE, documents, find, render

from kuota import kinds

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
live = pytest.mark.asyncio(loop_scope="module")

PODS = Res("", "pods")
LOCALQUEUES_STATUS = Res("kueue.x-k8s.io", "localqueues", "status")

EXPECTED: dict[str, set[Question]] = {
    # Every kind ingest lists and watches cluster-wide (kuota.kinds.WATCHED), and
    # the one ConfigMap it watches in its own namespace.
    "kuota-ingest": everywhere(READ, *(of(k.kind) for k in kinds.WATCHED))
    | {
        ("list", CONFIGMAPS, HERE, ""),
        ("watch", CONFIGMAPS, HERE, ""),
        ("get", CONFIGMAPS, HERE, CONFIG),
    },
    # A GET of any kind ingest journals (the object a Rejected decision names, a
    # Node or a ResourceClaim too), and its caches, Job writes and ClusterQueue status.
    "kuota-actuator": everywhere(("get",), *(of(k.kind) for k in kinds.WATCHED))
    | {("get", CONFIGMAPS, HERE, CONFIG)}
    | everywhere(("list", "watch", "patch"), JOBS)
    | everywhere(
        ("list", "watch", "patch"),
        of("PyTorchJob"),
        of("RayCluster"),
        of("RayJob"),
        of("JobSet"),
    )
    | everywhere(("patch",), JOBS_STATUS)
    | everywhere(("create",), EVENTS)
    | everywhere(("list", "watch"), PODS)  # a stopped Job's pods, until gone (#23 items 2-3)
    | everywhere(("patch", "delete"), PODS)  # a pod group ungated, its pods deleted (#18)
    | everywhere(("list", "watch"), RESOURCEFLAVORS, CLUSTERQUEUES)
    | everywhere(("patch",), CLUSTERQUEUES_STATUS)
    | everywhere(("patch",), LOCALQUEUES_STATUS),  # admission fair sharing's status (#19)
    "kuota-admission": set(),
    "kuota-preemption": set(),
    # The webhook's view (kuota_webhook.feed): every Namespace and Job, and the
    # Configuration ConfigMap's namespace; list and watch only (#23 item 7).
    "kuota-webhook": everywhere(("list", "watch"), NAMESPACES, JOBS)
    | {("list", CONFIGMAPS, HERE, ""), ("watch", CONFIGMAPS, HERE, "")},
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
        ("get", SECRETS, HERE, "kuota-webhook-tls"),
    ]
    return out


# --------------------------------------------------------------------------- fixture


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rbac(kubeconfig: str) -> AsyncIterator[Rbac]:
    async with applied_rbac(kubeconfig) as r:
        yield r


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
    for sa in ("kuota-ingest", "kuota-actuator", "kuota-webhook"):
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
        ("kuota-ingest", ("patch", NODES, "", "")),  # it reads Nodes (#17), never writes
        ("kuota-ingest", ("update", NODES, "", "")),
        ("kuota-ingest", ("patch", Res("", "nodes", "status"), "", "")),
        ("kuota-ingest", ("delete", NODES, "", "")),
        ("kuota-ingest", ("patch", RESOURCECLAIMS, USER_NS, "")),  # read only (#17)
        (
            "kuota-ingest",
            ("update", Res("resource.k8s.io", "resourceclaims", "status"), USER_NS, ""),
        ),
        ("kuota-ingest", ("delete", RESOURCECLAIMS, USER_NS, "")),
        ("kuota-actuator", ("delete", JOBS, USER_NS, "")),
        ("kuota-actuator", ("create", JOBS, USER_NS, "")),
        ("kuota-actuator", ("update", JOBS, USER_NS, "")),
        ("kuota-actuator", ("update", JOBS_STATUS, USER_NS, "")),
        ("kuota-actuator", ("get", SECRETS, USER_NS, "")),
        ("kuota-actuator", ("list", SECRETS, HERE, "")),
        ("kuota-actuator", ("update", CLUSTERQUEUES, "", "")),
        ("kuota-actuator", ("patch", CLUSTERQUEUES, "", "")),
        ("kuota-actuator", ("delete", EVENTS, USER_NS, "")),
        ("kuota-actuator", ("list", NODES, "", "")),  # a GET of a Rejected Node only
        ("kuota-actuator", ("patch", NODES, "", "")),
        ("kuota-actuator", ("list", RESOURCECLAIMS, USER_NS, "")),  # a Rejected claim's GET
        ("kuota-actuator", ("delete", RESOURCECLAIMS, USER_NS, "")),
        ("kuota-webhook", ("get", RESOURCECLAIMS, USER_NS, "")),
        ("kuota-webhook", ("get", NODES, "", "")),
        ("kuota-admission", ("list", JOBS, USER_NS, "")),
        ("kuota-admission", ("list", NAMESPACES, "", "")),
        ("kuota-admission", ("get", CONFIGMAPS, HERE, CONFIG)),
        ("kuota-preemption", ("list", CLUSTERQUEUES, "", "")),
        ("kuota-preemption", ("watch", JOBS, USER_NS, "")),
        ("kuota-webhook", ("patch", JOBS, USER_NS, "")),
        ("kuota-webhook", ("get", JOBS, USER_NS, "")),
        ("kuota-webhook", ("get", SECRETS, HERE, "kuota-webhook-tls")),
        ("kuota-webhook", ("list", CONFIGMAPS, USER_NS, "")),
        ("kuota-webhook", ("watch", CLUSTERQUEUES, "", "")),
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
    assert await rbac.allowed("kuota-ingest", ("watch", NODES, "", ""))
    assert await rbac.allowed("kuota-ingest", ("watch", RESOURCECLAIMS, "", ""))
    assert await rbac.allowed("kuota-webhook", ("watch", JOBS, USER_NS, ""))
    assert not await rbac.allowed("kuota-ingest", ("watch", CLUSTERQUEUES_STATUS, "", "x"))
