"""kuota.kinds: the registry of kinds, what reads it, and deploy/base's RBAC against it.

The registry's own facts (paths, versions, lookups), then that every table
that used to list kinds by hand now says what the registry says (translate,
ingest's watches, the actuator, the parser, the DRA reader, the simulator, the
webhook), then that deploy/base's RBAC grants each service exactly the verbs it
needs on the registry's kinds, read from the YAML (the apiserver's own answer
to the same question is tests/integration/test_deploy_rbac.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota import kinds
from kuota.api import dra, parse
from kuota.api.types import ValidationError
from kuota.kinds import KINDS, Kind
from kuota.kube import admission_review, template_guard, translate
from kuota.sim import engine
from kuota_actuator import apply, jobcache, status
from kuota_ingest import sources
from kuota_webhook import server as webhook

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "base"
NAMESPACE = "kuota-system"  # deploy/base's
CONFIG = "kuota-config"  # the Configuration ConfigMap ingest watches (KUOTA_CONFIG_CONFIGMAP)
READ = frozenset({"get", "list", "watch"})

# --------------------------------------------------------------------------- the registry


def test_paths_follow_the_api_conventions() -> None:
    job, cq, ns = kinds.get("Job"), kinds.get("ClusterQueue"), kinds.get("Namespace")
    assert job.path() == "/apis/batch/v1/jobs"
    assert job.path("team-a") == "/apis/batch/v1/namespaces/team-a/jobs"
    assert job.path("team-a", "j") == "/apis/batch/v1/namespaces/team-a/jobs/j"
    assert cq.path() == "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
    assert cq.path(name="cq") == "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq"
    assert ns.path(name="team-a") == "/api/v1/namespaces/team-a"
    assert kinds.get("ConfigMap").path("s") == "/api/v1/namespaces/s/configmaps"
    assert kinds.get("ResourceClaimTemplate").path() == (
        "/apis/resource.k8s.io/v1/resourceclaimtemplates"
    )
    assert job.mutate_path() == "/mutate-batch-v1-job"


@pytest.mark.parametrize(
    ("kind", "namespace", "name", "why"),
    [
        ("ClusterQueue", "team-a", "", "cluster-scoped"),
        ("Job", "", "j", "named within a namespace"),
        ("Configuration", "", "", "not served"),
    ],
)
def test_a_path_that_cannot_exist_is_refused(
    kind: str, namespace: str, name: str, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        kinds.get(kind).path(namespace, name)


def test_versions_and_api_versions() -> None:
    cohort = kinds.get("Cohort")
    assert cohort.version == "v1beta2"
    assert cohort.api_version == "kueue.x-k8s.io/v1beta2"
    assert set(cohort.api_versions) == {
        "kueue.x-k8s.io/v1beta2",
        "kueue.x-k8s.io/v1beta1",
        "kueue.x-k8s.io/v1alpha1",
    }
    assert kinds.get("Namespace").api_version == "v1"
    assert kinds.get("Job").api_versions == ("batch/v1",)
    assert kinds.get("DeviceClass").api_version == "resource.k8s.io/v1"


def test_nodes_are_watched_everywhere_and_read_only_by_ingest() -> None:
    """#17: every Node, cluster-scoped, in the core group; no selector (a Node is
    never a workload's, and placement needs them all)."""
    node = kinds.get("Node")
    assert node == Kind("", ("v1",), "Node", "nodes", False, "node")
    assert (node.watch, node.crd, node.served, node.selector) == ("cluster", False, True, "")
    assert node.path() == "/api/v1/nodes"
    assert node.path(name="gpu-0") == "/api/v1/nodes/gpu-0"
    assert kinds.by_plural("", "nodes") is node
    assert kinds.by_api_version("v1", "Node") is node
    assert node in kinds.WATCHED and node in kinds.JOURNALED
    assert node.kind not in kinds.segments(), "no workload key"
    assert ("", "Node") not in kinds.MANAGED_OWNERS
    with pytest.raises(ValueError, match="cluster-scoped"):
        node.path("team-a")
    ingest = {g for g in grants("kuota-ingest") if g[2] == "nodes"}
    assert ingest == _everywhere(READ, node), "get/list/watch, nothing more"
    actuator = {g for g in grants("kuota-actuator") if g[2] == "nodes"}
    assert actuator == _everywhere({"get"}, node), "a Rejected Node's Event uid"


def test_resource_claims_are_watched_everywhere_and_read_only_by_ingest() -> None:
    """#17: every ResourceClaim, whoever owns it (the devices allocated on each node),
    namespaced, no selector; ingest reads them, the actuator may GET one."""
    claim = kinds.get("ResourceClaim")
    assert claim == Kind(
        "resource.k8s.io",
        ("v1", "v1beta1", "v1beta2"),
        "ResourceClaim",
        "resourceclaims",
        True,
        "dra",
    )
    assert (claim.watch, claim.crd, claim.served, claim.selector) == ("cluster", False, True, "")
    assert claim.path() == "/apis/resource.k8s.io/v1/resourceclaims"
    assert (
        claim.path("team-a", "c") == "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c"
    )
    assert claim in kinds.WATCHED and claim in kinds.JOURNALED
    assert claim.kind not in kinds.segments(), "no workload key"
    ingest = {g for g in grants("kuota-ingest") if g[2] == "resourceclaims"}
    assert ingest == _everywhere(READ, claim), "get/list/watch, nothing more"
    actuator = {g for g in grants("kuota-actuator") if g[2] == "resourceclaims"}
    assert actuator == _everywhere({"get"}, claim), "a Rejected claim's Event uid"


def test_lookups() -> None:
    assert kinds.find("Job") is kinds.get("Job")
    assert kinds.find("PodTemplate") is None
    with pytest.raises(KeyError):
        kinds.get("PodTemplate")
    assert kinds.by_plural("kueue.x-k8s.io", "localqueues") is kinds.get("LocalQueue")
    assert kinds.by_plural("", "namespaces") is kinds.get("Namespace")
    assert kinds.by_plural("batch", "localqueues") is None
    assert kinds.by_api_version("kueue.x-k8s.io/v1beta1", "ClusterQueue") is kinds.get(
        "ClusterQueue"
    )
    assert kinds.by_api_version("kueue.x-k8s.io/v1alpha1", "ClusterQueue") is None
    assert kinds.by_api_version("v1", "ConfigMap") is kinds.get("ConfigMap")
    assert kinds.by_api_version("batch/v1", "Pod") is None


def test_each_kind_and_plural_once_and_the_roles() -> None:
    assert len({k.kind for k in KINDS}) == len({(k.group, k.plural) for k in KINDS}) == len(KINDS)
    assert kinds.names("workload") == {
        "Job",
        "PyTorchJob",
        "RayCluster",
        "RayJob",
        "JobSet",
        "LeaderWorkerSet",
        "Pod",
    }
    # the training kinds are read from files and journals; ingest watches those wired
    # into the services (#18: PyTorchJob, RayCluster, RayJob, JobSet, pod groups), not the
    # LeaderWorkerSet yet
    wired = ("Job", "PyTorchJob", "RayCluster", "RayJob", "JobSet", "Pod")
    others = [k for k in KINDS if k.role == "workload" and k.kind not in wired]
    assert [k.kind for k in others] == ["LeaderWorkerSet"]
    assert all(not k.watch and k.crd for k in others)
    assert all(kinds.get(k).watch == "cluster" and kinds.get(k).crd for k in wired[1:-1])
    pod = kinds.get("Pod")
    assert (pod.watch, pod.crd, pod.selector) == ("cluster", False, kinds.QUEUE_NAME_LABEL)
    assert kinds.names("config") == {"ConfigMap", "Configuration", "Kueue"}
    assert kinds.names("dra") == {
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaimTemplate",
        "ResourceClaim",
        "DeviceTaintRule",
    }
    assert kinds.names("queue") == {
        "ResourceFlavor",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "WorkloadPriorityClass",
    }
    assert all(k.crd for k in KINDS if k.role == "queue")
    assert kinds.names("namespace") == {"Namespace"}
    assert kinds.names("node") == {"Node"}
    assert kinds.get("Job").selector == "", "Jobs are watched all (#22)"
    assert [k.kind for k in KINDS if k.selector] == ["Pod"], "a Pod is kuota's by its label"


def test_what_ingest_watches_and_journals() -> None:
    assert [k.kind for k in kinds.WATCHED] == [
        "Namespace",
        "Node",
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaimTemplate",
        "ResourceClaim",
        "DeviceTaintRule",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
        "Job",
        "PyTorchJob",
        "RayCluster",
        "RayJob",
        "JobSet",
        "Pod",
    ]
    assert [k.kind for k in kinds.JOURNALED] == [*(k.kind for k in kinds.WATCHED), "ConfigMap"]
    assert all(k.served for k in kinds.JOURNALED)


# --------------------------------------------------------------------------- the readers


def test_translate_fills_in_the_watched_version() -> None:
    assert translate.API_VERSIONS == {
        "Job": "batch/v1",
        "Namespace": "v1",
        "Node": "v1",
        "ConfigMap": "v1",
        "DeviceClass": "resource.k8s.io/v1",
        "ResourceSlice": "resource.k8s.io/v1",
        "ResourceClaimTemplate": "resource.k8s.io/v1",
        "ResourceClaim": "resource.k8s.io/v1",
        "DeviceTaintRule": "resource.k8s.io/v1beta2",  # off by default in 1.36
        "ClusterQueue": "kueue.x-k8s.io/v1beta2",
        "LocalQueue": "kueue.x-k8s.io/v1beta2",
        "ResourceFlavor": "kueue.x-k8s.io/v1beta2",
        "Cohort": "kueue.x-k8s.io/v1beta2",
        "WorkloadPriorityClass": "kueue.x-k8s.io/v1beta2",
        "PyTorchJob": "kubeflow.org/v1",
        "RayCluster": "ray.io/v1",
        "RayJob": "ray.io/v1",
        "JobSet": "jobset.x-k8s.io/v1alpha2",
        "Pod": "v1",
    }
    assert {"Configuration", "Kueue", "ConfigMap"} == translate.CONFIG_KINDS


def test_ingest_watches_the_registrys_paths() -> None:
    got = {
        w.resource.kind: (w.resource.path, w.resource.label_selector, w.crd)
        for w in sources.WATCHED
    }
    assert got == {
        k.kind: (
            k.path(),
            # every object of the kind (a Job whose queue label goes is still seen),
            # but Pods: only those with the queue label are kuota's
            k.selector or None,
            f"{k.plural}.{k.group}" if k.crd else None,
        )
        for k in kinds.WATCHED
    }
    assert got["Job"] == ("/apis/batch/v1/jobs", None, None)
    assert got["Pod"] == ("/api/v1/pods", "kueue.x-k8s.io/queue-name", None)
    assert got["LocalQueue"][0] == "/apis/kueue.x-k8s.io/v1beta2/localqueues"
    cm = sources.config_map_watch(NAMESPACE, CONFIG)
    assert cm.resource.path == f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    assert cm.only_key == f"ConfigMap/{NAMESPACE}/{CONFIG}"


def test_the_actuators_paths() -> None:
    assert apply.FLAVORS_PATH == "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"
    assert status.CQ_PATH == "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
    assert jobcache.JOBS_PATH == "/apis/batch/v1/jobs"
    assert jobcache.QUEUE_NAME_LABEL is kinds.QUEUE_NAME_LABEL
    assert apply.job_path("team-a/j") == "/apis/batch/v1/namespaces/team-a/jobs/j"


def test_the_webhook_mutates_the_registrys_job() -> None:
    assert webhook.PATH == "/mutate-batch-v1-job"
    assert admission_review.QUEUE_NAME_LABEL is kinds.QUEUE_NAME_LABEL
    hooks = [d for d in _documents("webhook.yaml") if d["kind"] == "MutatingWebhookConfiguration"]
    entries = [w for d in hooks for w in d["webhooks"]]
    assert len(entries) == 9, (
        "queued Jobs, the others (#22); PyTorchJobs, RayClusters, RayJobs, JobSets, "
        "LeaderWorkerSets, Pods; template deletes"
    )
    guard = entries.pop()
    assert guard["clientConfig"]["service"]["path"] == template_guard.PATH
    assert guard["rules"][0]["resources"] == ["resourceclaimtemplates"]
    for kind in ("Pod", "LeaderWorkerSet", "JobSet", "RayJob", "RayCluster", "PyTorchJob"):
        hook = entries.pop()
        k = kinds.get(kind)
        assert hook["clientConfig"]["service"]["path"] == k.mutate_path()
        assert hook["clientConfig"]["service"]["path"] in webhook.PATHS
        (rule,) = hook["rules"]
        assert (rule["apiGroups"], rule["apiVersions"], rule["resources"]) == (
            [k.group],
            [k.version],
            [k.plural],
        )
    assert kinds.get("Pod").mutate_path() == "/mutate--v1-pod", "Kueue's pod webhook path"
    assert (
        kinds.get("LeaderWorkerSet").mutate_path()
        == "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
    ), "Kueue's LeaderWorkerSet webhook path"
    for hook in entries:
        assert hook["clientConfig"]["service"]["path"] == webhook.PATH
        (rule,) = hook["rules"]
        job = kinds.get("Job")
        assert (rule["apiGroups"], rule["apiVersions"], rule["resources"]) == (
            [job.group],
            [job.version],
            [job.plural],
        )


def test_dra_and_the_simulator_read_the_registry() -> None:
    assert dra.KINDS == (
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaimTemplate",
        "ResourceClaim",
        "DeviceTaintRule",
    )
    assert (
        engine.WORKLOAD_KINDS
        == kinds.names("workload")
        == {
            "Job",
            "PyTorchJob",
            "RayCluster",
            "RayJob",
            "JobSet",
            "LeaderWorkerSet",
            "Pod",
        }
    )


@pytest.mark.parametrize("kind", [k for k in KINDS if k.role in ("queue", "namespace", "node")])
def test_the_parser_reads_every_version_the_registry_lists(kind: Kind) -> None:
    for api_version in kind.api_versions:
        manifest = {"apiVersion": api_version, "kind": kind.kind, "metadata": {"name": "x"}}
        got = parse.parse_object(manifest)
        assert not (isinstance(got, ValidationError) and got.field == "apiVersion"), (
            f"{api_version} {kind.kind}: {got}"
        )
    bad = {"apiVersion": f"{kind.group}/v9" if kind.group else "v9", "kind": kind.kind}
    got = parse.parse_object({**bad, "metadata": {"name": "x"}})
    assert isinstance(got, ValidationError) and got.field == "apiVersion"
    assert got.message.endswith("want " + ", ".join(sorted(kind.api_versions)))


def test_object_refs_take_the_registrys_scope() -> None:
    for k in KINDS:
        if not k.served:
            continue
        ref = parse.object_ref({"kind": k.kind, "metadata": {"name": "x", "namespace": "n"}})
        assert ref.namespace == ("n" if k.namespaced else ""), k.kind
    cfg = parse.object_ref({"kind": "Configuration", "metadata": {"name": "x", "namespace": "n"}})
    assert cfg.namespace == "n"  # a file's document keeps what it says


def test_dra_objects_are_left_to_the_dra_reader() -> None:
    for k in KINDS:
        if k.role == "dra":
            for api_version in (*k.api_versions, ""):
                manifest = {"apiVersion": api_version, "kind": k.kind, "metadata": {"name": "x"}}
                assert parse.parse_object(manifest) is None, (api_version, k.kind)


# --------------------------------------------------------------------------- deploy/base RBAC

# A grant: (verb, group, resource["/subresource"], namespace ("*": every one), name ("": any)).
Grant = tuple[str, str, str, str, str]


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _rules(role: dict[str, Any], namespace: str) -> Iterator[Grant]:
    for rule in role.get("rules", []):
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        yield verb, group, resource, namespace, name


def grants(sa: str) -> set[Grant]:
    """What deploy/base's RBAC grants ServiceAccount ``sa`` of kuota-system."""
    docs = [d for f in sorted(DEPLOY.glob("*.yaml")) for d in _documents(f.name)]
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    out: set[Grant] = set()
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == sa
            and s.get("namespace") == NAMESPACE
            for s in b.get("subjects", [])
        ):
            continue
        ref = b["roleRef"]
        where = b["metadata"].get("namespace", "") if b["kind"] == "RoleBinding" else "*"
        home = b["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        role = roles[(ref["kind"], home, ref["name"])]
        out |= set(_rules(role, where))
    return out


def _on_registry_kinds(granted: set[Grant]) -> set[Grant]:
    return {g for g in granted if kinds.by_plural(g[1], g[2].partition("/")[0]) is not None}


def _everywhere(verbs: frozenset[str] | set[str], kind: Kind, sub: str = "") -> set[Grant]:
    resource = f"{kind.plural}/{sub}" if sub else kind.plural
    return {(v, kind.group, resource, "*", "") for v in verbs}


def test_the_grants_are_read_from_the_yaml() -> None:
    """The reader above is not vacuous: it sees the bindings deploy/base has."""
    assert ("watch", "batch", "jobs", "*", "") in grants("kuota-ingest")
    assert ("create", "", "events", "*", "") in grants("kuota-actuator")
    assert grants("kuota-nobody") == set()


def test_ingest_may_read_exactly_the_kinds_it_watches() -> None:
    want: set[Grant] = set()
    for k in kinds.WATCHED:
        want |= _everywhere(READ, k)
    (cm,) = [k for k in KINDS if k.watch == "namespace"]
    want |= {
        ("list", cm.group, cm.plural, NAMESPACE, ""),
        ("watch", cm.group, cm.plural, NAMESPACE, ""),
        ("get", cm.group, cm.plural, NAMESPACE, CONFIG),
    }
    assert _on_registry_kinds(grants("kuota-ingest")) == want
    assert all(g[0] in READ for g in grants("kuota-ingest")), "ingest writes nothing"


# The actuator: a GET of any journaled kind (the object a Rejected decision
# names), and beyond it its list+watch caches, its Job writes and the
# ClusterQueue status it keeps.
ACTUATOR_MORE: dict[tuple[str, str], set[str]] = {
    ("Job", ""): {"list", "watch", "patch"},
    ("Job", "status"): {"patch"},
    ("ResourceFlavor", ""): {"list", "watch"},
    ("ClusterQueue", ""): {"list", "watch"},
    ("ClusterQueue", "status"): {"patch"},
    # a stopped Job's pods, until they are gone (drains); a pod group's Pods ungated at
    # admission (patch), deleted at a stop (#18)
    ("Pod", ""): {"list", "watch", "patch", "delete"},
    ("LocalQueue", "status"): {"patch"},  # admission fair sharing's status.fairSharing
    ("PyTorchJob", ""): {"list", "watch", "patch"},  # admit, stop, the drains' cache (#18)
    ("RayCluster", ""): {"list", "watch", "patch"},
    ("RayJob", ""): {"list", "watch", "patch"},
    ("JobSet", ""): {"list", "watch", "patch"},
}


def test_the_actuator_may_do_exactly_what_its_calls_need_on_the_kinds() -> None:
    want: set[Grant] = set()
    for k in kinds.JOURNALED:
        if k.watch == "cluster":
            want |= _everywhere({"get"}, k)
        else:  # the Configuration ConfigMap, in kuota-system, by name
            want.add(("get", k.group, k.plural, NAMESPACE, CONFIG))
    for (kind, sub), verbs in ACTUATOR_MORE.items():
        want |= _everywhere(verbs, kinds.get(kind), sub)
    assert _on_registry_kinds(grants("kuota-actuator")) == want
    assert set(apply._KINDS) == {k.kind for k in kinds.JOURNALED}  # what it may GET


@pytest.mark.parametrize("sa", ["kuota-admission", "kuota-preemption"])
def test_admission_and_preemption_get_nothing(sa: str) -> None:
    assert grants(sa) == set()


# --------------------------------------------------------------------------- workload keys


def test_a_job_keeps_the_key_namespace_name() -> None:
    assert kinds.workload_key("Job", "ns", "train") == "ns/train"
    ref = kinds.workload_ref("ns/train")
    assert ref == kinds.WorkloadRef("Job", "ns", "train")
    assert ref.api_version == "batch/v1"
    assert kinds.workload_identity("ns/train") == ("Job", "batch/v1")


def test_the_job_segment_is_accepted_and_canonicalised() -> None:
    ref = kinds.workload_ref("ns/JOB/train")
    assert ref is not None and ref.key == "ns/train"


def test_keys_that_name_no_workload_are_refused() -> None:
    for key in ("train", "ns/", "/train", "ns/nosuchkind/train", "a/b/c/d", "ns/clusterqueue/x"):
        assert kinds.workload_ref(key) is None, key
        assert kinds.workload_identity(key) is None or key.count("/") == 1, key


TRAINING = {
    "Pod": "v1",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
    "PyTorchJob": "kubeflow.org/v1",
    "RayCluster": "ray.io/v1",
    "RayJob": "ray.io/v1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
}


@pytest.mark.parametrize(("kind", "api_version"), sorted(TRAINING.items()))
def test_other_workload_kinds_have_a_key_of_their_own(kind: str, api_version: str) -> None:
    key = kinds.workload_key(kind, "ns", "same")
    assert key == f"ns/{kind.lower()}/same" != kinds.workload_key("Job", "ns", "same")
    ref = kinds.workload_ref(key)
    assert ref == kinds.WorkloadRef(kind, "ns", "same") and ref.key == key
    assert kinds.workload_identity(key) == (kind, api_version)
    assert kinds.get(kind).api_version == api_version
    typed = kinds.workload_ref(f"ns/{kind}/same")  # as people type it
    assert typed is not None and typed.key == key


def test_no_two_workload_kinds_share_a_key() -> None:
    keys = {kinds.workload_key(k, "ns", "x") for k in kinds.names("workload")}
    assert len(keys) == len(kinds.names("workload"))
    assert kinds.segments() == tuple(
        sorted([*(k.lower() for k in kinds.names("workload")), "podgroup"])
    )
    assert kinds.workload_key("Pod", "ns", "x", pod_group=True) == "ns/podgroup/x"
    assert kinds.workload_ref("ns/podgroup/x") == kinds.WorkloadRef("Pod", "ns", "x", True)
    assert kinds.workload_identity("ns/podgroup/x") == ("Pod", "v1")


def test_a_leader_worker_set_group_key_names_its_index() -> None:
    ref = kinds.workload_ref("ns/LeaderWorkerSet/lws/2")
    assert ref == kinds.WorkloadRef("LeaderWorkerSet", "ns", "lws", group=2)
    assert ref.key == "ns/leaderworkerset/lws/2"
    assert kinds.workload_identity(ref.key) == ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1")
    for bad in ("ns/leaderworkerset/lws/x", "ns/pytorchjob/p/0", "ns/leaderworkerset//0"):
        assert kinds.workload_ref(bad) is None, bad


# --------------------------------------------------------------------------- pods of workloads


def test_the_owners_whose_pods_are_not_pod_group_members() -> None:
    """Every workload kind kuota reads but the Pod, and Kueue's other job kinds; a
    ReplicaSet or a StatefulSet (Kueue manages their pods as pods) is not one."""
    for k in KINDS:
        if k.role == "workload" and k.kind != "Pod":
            assert (k.group, k.kind) in kinds.MANAGED_OWNERS, k.kind
    assert ("kubeflow.org", "TFJob") in kinds.MANAGED_OWNERS
    assert ("", "Pod") not in kinds.MANAGED_OWNERS

    def pod(*refs: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "Pod", "metadata": {"name": "p", "ownerReferences": list(refs)}}

    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    assert kinds.managed_owner(pod(job)) == "Job"
    assert kinds.managed_owner(pod({**job, "controller": False})) is None, "not its controller"
    assert kinds.managed_owner(pod({**job, "apiVersion": "apps/v1", "kind": "ReplicaSet"})) is None
    assert kinds.managed_owner(pod({**job, "apiVersion": "other.io/v1"})) is None, "another Job"
    tf = {**job, "apiVersion": "kubeflow.org/v1", "kind": "TFJob"}
    assert kinds.managed_owner(pod({**job, "controller": False}, tf)) == "TFJob"
    assert kinds.managed_owner({"kind": "Pod", "metadata": {"ownerReferences": "x"}}) is None
