"""The registry of the Kubernetes kinds kuota reads: one entry per kind.

Theory of operation: :data:`KINDS` lists every kind once, as a frozen
:class:`Kind` (group, the versions kuota reads with the one it watches first,
kind, plural, scope, role, how ingest sees it). Everything else is derived:
the apiVersion ingest fills into LIST items (``kuota.kube.translate``), the
paths ingest watches and the actuator GETs (:meth:`Kind.path`), the
group/version check of the parser (``kuota.api.parse``), the role sets (the
workload kinds of the simulator, the DRA kinds, the config kinds) and the RBAC
the tests expect of ``deploy/base``. The labels Kueue reads on workloads live
here too. Adding a kind (a PyTorchJob, a JobSet) is one entry in
:data:`KINDS`, plus its reader. Pure: no imports from kuota, no I/O.
See docs/design/kinds.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: A workload's LocalQueue (Kueue's label; a workload without it is not kuota's).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: A workload's WorkloadPriorityClass.
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
#: The label the apiserver sets on every Namespace to its name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: The namespaces kuota's webhook registration leaves out (deploy/base/webhook.yaml,
#: scripts/webhook-register); ingest journals no unlabelled Job of theirs.
SYSTEM_NAMESPACES = ("kube-system", "kuota-system")
#: The convention for several kuota pipelines on one apiserver: each one's
#: ``KUOTA_JOB_LABEL_SELECTOR`` selects its own value (the e2e tests, the benches).
PIPELINE_LABEL = "kuota.dev/pipeline"

KUEUE_GROUP = "kueue.x-k8s.io"
DRA_GROUP = "resource.k8s.io"

#: What a kind is to kuota ("node": the Nodes pods are placed on, #17).
Role = Literal["namespace", "node", "workload", "queue", "dra", "config"]
#: How ingest sees a kind: listed and watched in every namespace ("cluster"),
#: in one namespace only ("namespace": the Configuration ConfigMap), or never
#: ("": a file's document, or a kind the services do not watch yet).
Watch = Literal["cluster", "namespace", ""]


@dataclass(frozen=True, slots=True)
class Kind:
    group: str  # "" for the core group
    versions: tuple[str, ...]  # every version read; versions[0] is watched, written, assumed
    kind: str
    plural: str
    namespaced: bool
    role: Role
    watch: Watch = "cluster"
    crd: bool = False  # served by a CRD that may not be installed
    served: bool = True  # False: never an apiserver object (a file's document only)
    # the label selector of ingest's watch ("": every object of the kind; a Pod's
    # watch selects the queue label: a Pod is kuota's only with it, #18)
    selector: str = ""
    # a built-in API the apiserver serves only when enabled: how ("" : always
    # served); ingest looks for it again while it is not
    gate: str = ""

    @property
    def version(self) -> str:
        """The version kuota watches and assumes for a manifest without one."""
        return self.versions[0]

    @property
    def api_version(self) -> str:
        """``group/version`` (``v1`` for the core group) of :attr:`version`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_versions(self) -> tuple[str, ...]:
        return tuple(f"{self.group}/{v}" if self.group else v for v in self.versions)

    def path(self, namespace: str = "", name: str = "") -> str:
        """The collection's path (every namespace when ``namespace`` is empty), or
        with ``name`` one object's: ``/apis/{group}/{version}/namespaces/{ns}/{plural}``."""
        if not self.served:
            raise ValueError(f"{self.kind} is not served by the apiserver")
        if namespace and not self.namespaced:
            raise ValueError(f"{self.kind} is cluster-scoped, not in namespace {namespace!r}")
        if name and self.namespaced and not namespace:
            raise ValueError(f"a {self.kind} is named within a namespace")
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        scope = f"/namespaces/{namespace}" if namespace else ""
        leaf = f"/{name}" if name else ""
        return f"{root}{scope}/{self.plural}{leaf}"

    def mutate_path(self) -> str:
        """The mutating webhook's path for this kind, as controller-runtime names it."""
        return f"/mutate-{self.group.replace('.', '-')}-{self.version}-{self.kind.lower()}"


_QUEUE_VERSIONS = ("v1beta2", "v1beta1")
_DRA_VERSIONS = ("v1", "v1beta1", "v1beta2")


def _queue(
    kind: str, plural: str, *, namespaced: bool = False, older: tuple[str, ...] = ()
) -> Kind:
    versions = (*_QUEUE_VERSIONS, *older)
    return Kind(KUEUE_GROUP, versions, kind, plural, namespaced, "queue", crd=True)


def _dra(kind: str, plural: str, *, namespaced: bool = False, watch: Watch = "cluster") -> Kind:
    return Kind(DRA_GROUP, _DRA_VERSIONS, kind, plural, namespaced, "dra", watch)


#: Every kind, in the order ingest starts its watches.
KINDS: tuple[Kind, ...] = (
    Kind("", ("v1",), "Namespace", "namespaces", False, "namespace"),
    # every Node: the fold places DRA devices per node (#17); journaled trimmed to
    # its labels, taints, unschedulable and allocatable (kuota.kube.translate)
    Kind("", ("v1",), "Node", "nodes", False, "node"),
    _dra("DeviceClass", "deviceclasses"),
    _dra("ResourceSlice", "resourceslices"),
    _dra("ResourceClaimTemplate", "resourceclaimtemplates", namespaced=True),
    # every claim, whoever owns it: the devices allocated on each node (#17); journaled
    # trimmed to its spec.devices and its allocation (kuota.kube.translate)
    _dra("ResourceClaim", "resourceclaims", namespaced=True),
    # taints an administrator puts on devices (DRADeviceTaintRules: beta in 1.36, its
    # API resource.k8s.io/v1beta2 off by default; v1 from 1.37): placement keeps a
    # device a rule taints out, as one its slice taints (#17)
    Kind(
        DRA_GROUP,
        ("v1beta2", "v1"),
        "DeviceTaintRule",
        "devicetaintrules",
        False,
        "dra",
        gate="--runtime-config=resource.k8s.io/v1beta2=true and --feature-gates="
        "DRADeviceTaintRules=true on the apiserver (Kubernetes 1.36)",
    ),
    _queue("ResourceFlavor", "resourceflavors"),
    _queue("Cohort", "cohorts", older=("v1alpha1",)),
    _queue("ClusterQueue", "clusterqueues"),
    _queue("LocalQueue", "localqueues", namespaced=True),
    _queue("WorkloadPriorityClass", "workloadpriorityclasses"),
    Kind("batch", ("v1",), "Job", "jobs", True, "workload"),
    # The distributed-training kinds (#18): read in files, the simulator and the
    # fold; ingest watches those wired into the services (PyTorchJob, RayCluster,
    # RayJob, JobSet, Pod), not the others yet (watch="").
    Kind("kubeflow.org", ("v1",), "PyTorchJob", "pytorchjobs", True, "workload", crd=True),
    Kind("ray.io", ("v1",), "RayCluster", "rayclusters", True, "workload", crd=True),
    Kind("ray.io", ("v1",), "RayJob", "rayjobs", True, "workload", crd=True),
    Kind("jobset.x-k8s.io", ("v1alpha2",), "JobSet", "jobsets", True, "workload", crd=True),
    # pod groups and single Pods: only Pods with the queue label are watched
    Kind("", ("v1",), "Pod", "pods", True, "workload", selector=QUEUE_NAME_LABEL),
    Kind(
        "leaderworkerset.x-k8s.io",
        ("v1",),
        "LeaderWorkerSet",
        "leaderworkersets",
        True,
        "workload",
        "",
        crd=True,
    ),
    Kind("", ("v1",), "ConfigMap", "configmaps", True, "config", "namespace"),
    Kind(
        "config.kueue.x-k8s.io",
        _QUEUE_VERSIONS,
        "Configuration",
        "configurations",
        namespaced=False,
        role="config",
        watch="",
        served=False,
    ),
    Kind("kueue.openshift.io", ("v1",), "Kueue", "kueues", False, "config", "", crd=True),
)

_BY_KIND = {k.kind: k for k in KINDS}
_BY_PLURAL = {(k.group, k.plural): k for k in KINDS}
if len(_BY_KIND) != len(KINDS) or len(_BY_PLURAL) != len(KINDS):
    raise AssertionError("a kind or a plural is listed twice")

#: Listed and watched by ingest in every namespace, in start order.
WATCHED: tuple[Kind, ...] = tuple(k for k in KINDS if k.watch == "cluster")
#: Every kind ingest journals from the apiserver (WATCHED and the ConfigMap).
JOURNALED: tuple[Kind, ...] = tuple(k for k in KINDS if k.watch)


def get(kind: str) -> Kind:
    """The registered kind named ``kind``; ``KeyError`` if there is none."""
    return _BY_KIND[kind]


def find(kind: str) -> Kind | None:
    return _BY_KIND.get(kind)


def by_plural(group: str, plural: str) -> Kind | None:
    """The kind served as ``plural`` in ``group`` (``""`` for the core group)."""
    return _BY_PLURAL.get((group, plural))


def by_api_version(api_version: str, kind: str) -> Kind | None:
    """The registered kind, if kuota reads it in ``api_version`` (``group/version``)."""
    k = _BY_KIND.get(kind)
    return k if k is not None and api_version in k.api_versions else None


def names(role: Role) -> frozenset[str]:
    """The names of the kinds with ``role``."""
    return frozenset(k.kind for k in KINDS if k.role == role)


# --------------------------------------------------------------------------- workload keys
# docs/design/workload-identity.md: a batch/v1 Job keeps the key ``namespace/name``
# that every decision carried before other kinds; any other workload kind is
# ``namespace/<segment>/name``, its segment the kind in lower case (a group of Pods:
# ``podgroup``). Names never contain "/", so no key of one kind equals another's.

#: The segment of a group of Pods (``kueue.x-k8s.io/pod-group-name``); a single Pod
#: with the queue label is ``pod``.
POD_GROUP_SEGMENT = "podgroup"
#: The one kind whose object is several workloads: each LeaderWorkerSet group
#: (a leader and its workers) is ``ns/leaderworkerset/<name>/<group index>``.
GROUPED_SEGMENT = "leaderworkerset"
_JOB = "Job"


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """What a workload key names: the object's kind, namespace and name."""

    kind: str
    namespace: str
    name: str
    pod_group: bool = False  # a group of Pods, named by its pod-group-name
    group: int | None = None  # a LeaderWorkerSet's group index (each group is a workload)

    @property
    def api_version(self) -> str:
        return get(self.kind).api_version

    @property
    def key(self) -> str:
        name = self.name if self.group is None else f"{self.name}/{self.group}"
        return workload_key(self.kind, self.namespace, name, pod_group=self.pod_group)


def _segment(kind: str, pod_group: bool) -> str:
    return POD_GROUP_SEGMENT if pod_group else kind.lower()


_BY_SEGMENT: dict[str, tuple[str, bool]] = {
    _segment(k.kind, False): (k.kind, False) for k in KINDS if k.role == "workload"
}
if "Pod" in _BY_KIND:
    _BY_SEGMENT[POD_GROUP_SEGMENT] = ("Pod", True)


def workload_key(kind: str, namespace: str, name: str, *, pod_group: bool = False) -> str:
    """The key decisions name a workload by: ``ns/name`` for a Job, else ``ns/<segment>/name``."""
    if kind == _JOB and not pod_group:
        return f"{namespace}/{name}"
    return f"{namespace}/{_segment(kind, pod_group)}/{name}"


def workload_ref(key: str) -> WorkloadRef | None:
    """The workload a key names, or ``None`` if it is not a key of a registered
    workload kind. The segment is read case-insensitively and ``ns/job/name`` is
    the Job ``ns/name``, so ``ns/PyTorchJob/name`` and ``ns/job/name`` are accepted
    as people type them; :attr:`WorkloadRef.key` is the canonical form."""
    parts = key.split("/")
    if len(parts) == 2:
        namespace, name = parts
        kind, pod_group = _JOB, False
    elif len(parts) == 3:
        namespace, segment, name = parts
        found = _BY_SEGMENT.get(segment.lower())
        if found is None:
            return None
        kind, pod_group = found
    elif len(parts) == 4 and parts[1].lower() == GROUPED_SEGMENT and parts[3].isdigit():
        namespace, _, name, index = parts  # ns/leaderworkerset/<name>/<group index>
        if not namespace or not name:
            return None
        return WorkloadRef(_BY_SEGMENT[GROUPED_SEGMENT][0], namespace, name, group=int(index))
    else:
        return None
    if not namespace or not name:
        return None
    return WorkloadRef(kind, namespace, name, pod_group)


_JOB_IDENTITY = (_JOB, "batch/v1")


def workload_identity(key: str) -> tuple[str, str] | None:
    """``(kind, apiVersion)`` of the workload ``key`` names (what every workload
    decision carries), or ``None`` for a key no registered kind has."""
    if key.count("/") == 1:
        return _JOB_IDENTITY
    ref = workload_ref(key)
    return None if ref is None else (ref.kind, ref.api_version)


def segments() -> tuple[str, ...]:
    """Every key segment, sorted (for messages that list them)."""
    return tuple(sorted(_BY_SEGMENT))


# --------------------------------------------------------------------------- pods of workloads

#: The other kinds Kueue v0.19.2 admits as jobs of their own (its batch
#: integrations beyond those in :data:`KINDS`), by (API group, kind).
KUEUE_JOB_OWNERS: tuple[tuple[str, str], ...] = (
    ("kubeflow.org", "TFJob"),
    ("kubeflow.org", "XGBoostJob"),
    ("kubeflow.org", "PaddleJob"),
    ("kubeflow.org", "JAXJob"),
    ("kubeflow.org", "MPIJob"),
    ("trainer.kubeflow.org", "TrainJob"),
    ("ray.io", "RayService"),
    ("workload.codeflare.dev", "AppWrapper"),
    ("sparkoperator.k8s.io", "SparkApplication"),
)
#: A Pod whose controller owner is of one of these kinds is that workload's pod,
#: never a pod-group member, even with the queue label copied into its template:
#: the owner is what is admitted (Kueue's pod webhook and reconciler leave such a
#: Pod alone). Every workload kind kuota reads but the Pod, and
#: :data:`KUEUE_JOB_OWNERS`. A JobSet's pods are owned by its Jobs, a RayJob's
#: submitter by a Job. The same rule holds for the objects of workload kinds: a
#: RayCluster or a submitter Job that KubeRay makes for a RayJob (its labels, the
#: queue label included, copied from the RayJob) is the RayJob's, never a workload
#: of its own (:func:`managed_owner`; Kueue skips them too). Not listed: ReplicaSet
#: and StatefulSet, whose pods Kueue's Deployment, StatefulSet and LeaderWorkerSet
#: integrations manage AS pod groups.
MANAGED_OWNERS: frozenset[tuple[str, str]] = frozenset(
    {(k.group, k.kind) for k in KINDS if k.role == "workload" and k.kind != "Pod"}
    | set(KUEUE_JOB_OWNERS)
)


def managed_owner(obj: Mapping[str, Any]) -> str | None:
    """The kind of ``obj``'s controller owner (``metadata.ownerReferences`` with
    ``controller: true``) when it is one of :data:`MANAGED_OWNERS`, else None."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else ():
        if not isinstance(ref, Mapping) or ref.get("controller") is not True:
            continue
        api_version, kind = ref.get("apiVersion"), ref.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            return None
        group = api_version.rpartition("/")[0]  # "" for the core group's "v1"
        return kind if (group, kind) in MANAGED_OWNERS else None
    return None
