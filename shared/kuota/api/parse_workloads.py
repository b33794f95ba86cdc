"""The distributed-training kinds as the ``WorkloadSpec`` kuota admits, gang by gang.

Theory of operation: each reader turns one manifest into one workload whose
podsets are named and counted as Kueue v0.19.2 names and counts them, so a
workload is admitted whole or not at all (the fold charges all its podsets
together). The metadata (queue and priority labels, creation time,
``kuota.dev/active``, the actuator's decision id, the generation) is read as a
Job's (``kuota.api.parse_job.read_header``); each podset's pod spec as a Job's
pod spec, its field errors named by their path in this kind.

- PyTorchJob (``kubeflow.org/v1``): ``master`` then ``worker``, from
  ``spec.pytorchReplicaSpecs.Master`` / ``.Worker``, ``replicas`` pods each
  (default 1); suspended by ``spec.runPolicy.suspend``. kuota refuses one
  without a Master (docs/kueue-differences.md).
- RayCluster (``ray.io/v1``): ``head`` (1 pod), then one podset per worker
  group, named by its ``groupName``, ``replicas`` (default 1) × ``numOfHosts``
  pods; ``spec.suspend``.
- RayJob (``ray.io/v1``): its ``spec.rayClusterSpec``'s podsets, then
  ``submitter`` (1 pod: ``spec.submitterPodTemplate`` or KubeRay's default
  submitter) in ``K8sJobMode`` (the default); in ``SidecarMode`` the default
  submitter container is added to the head instead. A RayJob with a
  ``clusterSelector`` runs on a cluster it does not own: not kuota's (``None``).
- JobSet (``jobset.x-k8s.io/v1alpha2``): one podset per replicatedJob, named
  by it, ``replicas`` × min(``parallelism``, ``completions``) pods; ``spec.suspend``.
- LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``): a :class:`WorkloadGroup`,
  one workload per group (``spec.replicas``), each ``leader`` (1) + ``worker``
  (``size`` - 1), or ``main`` (``size``) without a leader template. Kueue gates
  its pods rather than suspending it: no suspend field. On a cluster the object
  is not read: each group's pods are a pod group (:func:`leader_worker_group`,
  the name and count the webhook writes on them).

Rules in full: docs/design/workload-kinds.md.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from kuota.api.fields import (
    INT32_MAX,
    FieldError,
    Raw,
    child,
    dns1123_label,
    enum,
    index,
    integer,
    keyed,
    mapping,
    seq,
    spec_of,
)
from kuota.api.parse_job import MAX_PODS, Header, pod_set, read_header
from kuota.api.types import PodMember, PodSet, WorkloadGroup, WorkloadSpec
from kuota.kinds import QUEUE_NAME_LABEL, managed_owner, workload_key

#: The replica types of a PyTorchJob, in Kueue's podset order.
PYTORCH_REPLICA_TYPES = ("Master", "Worker")
RAY_HEAD = "head"
RAY_SUBMITTER = "submitter"
RAY_SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
# KubeRay's default submitter container (its requests and limits), as Kueue charges it.
_SUBMITTER_CONTAINER: dict[str, object] = {
    "name": "ray-job-submitter",
    "resources": {
        "requests": {"cpu": "500m", "memory": "200Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    },
}


def _kind_is(raw: Raw, kind: str) -> None:
    got = raw.get("kind")
    if got is not None and got != kind:
        raise FieldError("kind", f"expected a {kind}, not {got!r}")


def _suspend(value: object, field: str) -> bool | None:
    if value is None or type(value) is bool:
        return value
    raise FieldError(field, f"must be a boolean, not {type(value).__name__}")


def _template_spec(value: object, field: str) -> tuple[Raw, str]:
    """The pod spec of a pod template at ``field``, and its path."""
    template = mapping(value, field, required=True)
    path = child(field, "spec")
    return mapping(template.get("spec"), path, required=True), path


def _count(value: object, field: str, *, default: int = 1) -> int:
    return integer(value, field, default=default, minimum=0, maximum=MAX_PODS)


def _workload(
    header: Header, kind: str, podsets: list[PodSet], suspended: bool | None
) -> WorkloadSpec:
    total = sum(p.count for p in podsets)
    if total > MAX_PODS:
        raise FieldError("spec", f"{total} pods in all: more than {MAX_PODS} is a typo")
    names = [p.name for p in podsets]
    for name in names:
        if names.count(name) > 1:
            raise FieldError("spec", f"two podsets are named {name!r}")
    return WorkloadSpec(
        namespace=header.namespace,
        name=header.name,
        uid=header.uid or f"{header.namespace}/{kind.lower()}/{header.name}",
        queue_name=header.queue,
        priority_class=header.priority,
        creation_seconds=header.creation_seconds,
        podsets=tuple(podsets),
        active=header.active,
        owner_kind=kind,
        suspended=suspended,
        decision_id=header.decision_id,
        generation=header.generation,
    )


# --------------------------------------------------------------------------- PyTorchJob


def read_pytorch_job(raw: Raw, *, at: float, managed: bool = False) -> WorkloadSpec | None:
    _kind_is(raw, "PyTorchJob")
    header = read_header(raw, at=at, managed=managed)
    if header is None:
        return None
    spec = spec_of(raw, required=True)
    field = "spec.pytorchReplicaSpecs"
    replicas = mapping(spec.get("pytorchReplicaSpecs"), field, required=True)
    for key in replicas:
        if key not in PYTORCH_REPLICA_TYPES:
            raise FieldError(
                keyed(field, str(key)),
                f"unknown replica type: want {' or '.join(PYTORCH_REPLICA_TYPES)}",
            )
    if replicas.get("Master") is None:
        raise FieldError(field, "a PyTorchJob needs a Master replica spec (rank 0); it has none")
    podsets: list[PodSet] = []
    for rtype in PYTORCH_REPLICA_TYPES:
        path = keyed(field, rtype)
        if replicas.get(rtype) is None:
            continue
        rspec = mapping(replicas[rtype], path, required=True)
        count = _count(rspec.get("replicas"), child(path, "replicas"))
        pod, pod_path = _template_spec(rspec.get("template"), child(path, "template"))
        podsets.append(pod_set(pod, count, name=rtype.lower(), path=pod_path))
    run_policy = mapping(spec.get("runPolicy"), "spec.runPolicy")
    suspended = _suspend(run_policy.get("suspend"), "spec.runPolicy.suspend")
    return _workload(header, "PyTorchJob", podsets, suspended)


# --------------------------------------------------------------------------- Ray


def _ray_cluster_podsets(cluster: Raw, field: str) -> list[PodSet]:
    hpath = child(field, "headGroupSpec")
    head = mapping(cluster.get("headGroupSpec"), hpath, required=True)
    pod, pod_path = _template_spec(head.get("template"), child(hpath, "template"))
    podsets = [pod_set(pod, 1, name=RAY_HEAD, path=pod_path)]
    wpath = child(field, "workerGroupSpecs")
    for i, item in enumerate(seq(cluster.get("workerGroupSpecs"), wpath, max_items=64)):
        path = index(wpath, i)
        group = mapping(item, path, required=True)
        name = dns1123_label(group.get("groupName"), child(path, "groupName"))
        if name == RAY_HEAD:
            raise FieldError(child(path, "groupName"), f"{name!r} is the head's podset name")
        rpath = child(path, "replicas")
        replicas = group.get("replicas")
        if type(replicas) is int and replicas < 0:
            raise FieldError(
                rpath, f"worker group {name!r} asks for {replicas} replicas: must be at least 0"
            )
        count = _count(replicas, rpath)
        hosts = integer(
            group.get("numOfHosts"),
            child(path, "numOfHosts"),
            default=1,
            minimum=1,
            maximum=INT32_MAX,
        )
        pod, pod_path = _template_spec(group.get("template"), child(path, "template"))
        podsets.append(pod_set(pod, count * hosts, name=name, path=pod_path))
    return podsets


def _no_autoscaling(cluster: Raw, field: str) -> None:
    path = child(field, "enableInTreeAutoscaling")
    if _suspend(cluster.get("enableInTreeAutoscaling"), path):
        raise FieldError(
            path, "autoscaling Ray clusters are not supported: kuota admits fixed gangs"
        )


def read_ray_cluster(raw: Raw, *, at: float, managed: bool = False) -> WorkloadSpec | None:
    _kind_is(raw, "RayCluster")
    header = read_header(raw, at=at, managed=managed)
    if header is None:
        return None
    spec = spec_of(raw, required=True)
    _no_autoscaling(spec, "spec")
    podsets = _ray_cluster_podsets(spec, "spec")
    return _workload(header, "RayCluster", podsets, _suspend(spec.get("suspend"), "spec.suspend"))


def read_ray_job(raw: Raw, *, at: float, managed: bool = False) -> WorkloadSpec | None:
    _kind_is(raw, "RayJob")
    spec = spec_of(raw, required=True)
    if mapping(spec.get("clusterSelector"), "spec.clusterSelector"):
        return None  # runs on a RayCluster it does not own: that cluster is the workload
    header = read_header(raw, at=at, managed=managed)
    if header is None:
        return None
    field = "spec.rayClusterSpec"
    cluster = mapping(spec.get("rayClusterSpec"), field, required=True)
    _no_autoscaling(cluster, field)
    podsets = _ray_cluster_podsets(cluster, field)
    mode = enum(
        spec.get("submissionMode"),
        "spec.submissionMode",
        RAY_SUBMISSION_MODES,
        default="K8sJobMode",
    )
    if mode == "K8sJobMode":
        template = spec.get("submitterPodTemplate")
        if template is None:
            pod: Raw = {"containers": [_SUBMITTER_CONTAINER]}
            pod_path = "spec.submitterPodTemplate.spec"
        else:
            pod, pod_path = _template_spec(template, "spec.submitterPodTemplate")
        podsets.append(pod_set(pod, 1, name=RAY_SUBMITTER, path=pod_path))
    elif mode == "SidecarMode":
        head_pod, head_path = _template_spec(
            mapping(cluster.get("headGroupSpec"), field).get("template"),
            child(child(field, "headGroupSpec"), "template"),
        )
        containers = [*seq(head_pod.get("containers"), child(head_path, "containers"))]
        with_submitter = {**head_pod, "containers": [*containers, _SUBMITTER_CONTAINER]}
        podsets[0] = pod_set(with_submitter, 1, name=RAY_HEAD, path=head_path)
    suspended = spec.get("suspend")
    return _workload(header, "RayJob", podsets, _suspend(suspended, "spec.suspend"))


# --------------------------------------------------------------------------- JobSet


def read_job_set(raw: Raw, *, at: float, managed: bool = False) -> WorkloadSpec | None:
    _kind_is(raw, "JobSet")
    header = read_header(raw, at=at, managed=managed)
    if header is None:
        return None
    spec = spec_of(raw, required=True)
    field = "spec.replicatedJobs"
    items = seq(spec.get("replicatedJobs"), field, max_items=64)
    if not items:
        raise FieldError(field, "required: a JobSet has at least one replicatedJob")
    podsets: list[PodSet] = []
    for i, item in enumerate(items):
        path = index(field, i)
        rjob = mapping(item, path, required=True)
        name = dns1123_label(rjob.get("name"), child(path, "name"))
        replicas = _count(rjob.get("replicas"), child(path, "replicas"))
        tpath = child(path, "template")
        jspec_path = child(tpath, "spec")
        jspec = mapping(
            mapping(rjob.get("template"), tpath, required=True).get("spec"),
            jspec_path,
            required=True,
        )
        parallelism = _count(jspec.get("parallelism"), child(jspec_path, "parallelism"))
        completions = jspec.get("completions")
        per_job = parallelism
        if completions is not None:
            per_job = min(parallelism, _count(completions, child(jspec_path, "completions")))
        pod, pod_path = _template_spec(jspec.get("template"), child(jspec_path, "template"))
        podsets.append(pod_set(pod, replicas * per_job, name=name, path=pod_path))
    return _workload(header, "JobSet", podsets, _suspend(spec.get("suspend"), "spec.suspend"))


# --------------------------------------------------------------------------- LeaderWorkerSet

MAX_GROUPS = 1000  # LeaderWorkerSet replicas beyond this are a typo, not a workload


def read_leader_worker_set(raw: Raw, *, at: float, managed: bool = False) -> WorkloadGroup | None:
    """Each of ``spec.replicas`` groups (default 1) is a workload of its own, as
    Kueue makes one Workload per group: podsets ``leader`` (1) and ``worker``
    (``size`` - 1) with a ``leaderTemplate``, else ``main`` (``size``, default 1)."""
    _kind_is(raw, "LeaderWorkerSet")
    header = read_header(raw, at=at, managed=managed)
    if header is None:
        return None
    spec = spec_of(raw, required=True)
    groups = integer(
        spec.get("replicas"), "spec.replicas", default=1, minimum=0, maximum=MAX_GROUPS
    )
    field = "spec.leaderWorkerTemplate"
    lwt = mapping(spec.get("leaderWorkerTemplate"), field, required=True)
    size = integer(lwt.get("size"), child(field, "size"), default=1, minimum=1, maximum=MAX_PODS)
    worker, worker_path = _template_spec(lwt.get("workerTemplate"), child(field, "workerTemplate"))
    podsets: list[PodSet] = []
    if lwt.get("leaderTemplate") is not None:
        leader, leader_path = _template_spec(lwt["leaderTemplate"], child(field, "leaderTemplate"))
        podsets.append(pod_set(leader, 1, name="leader", path=leader_path))
        podsets.append(pod_set(worker, size - 1, name="worker", path=worker_path))
    else:
        podsets.append(pod_set(worker, size, name="main", path=worker_path))
    if groups * size > MAX_PODS:
        raise FieldError("spec.replicas", f"{groups} groups of {size}: more than {MAX_PODS} pods")
    specs = []
    for i in range(groups):
        group = replace(
            header, name=f"{header.name}/{i}", uid=f"{header.uid}/{i}" if header.uid else ""
        )
        specs.append(_workload(group, "LeaderWorkerSet", podsets, None))
    return WorkloadGroup("LeaderWorkerSet", header.namespace, header.name, tuple(specs))


# --------------------------------------------------------------------------- pod groups

POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
ADMISSION_GATE = "kueue.x-k8s.io/admission"


def role_of(podset: PodSet) -> str:
    """A podset name for the pods of one shape: the first 8 hex digits of sha256
    over what admission reads of the pod (requests, claims, placement). Kueue
    hashes its own selection of pod-spec fields, so the names differ from
    Kueue's; pods alike here are alike there."""
    shape = repr(
        (
            podset.requests,
            podset.claims,
            podset.node_selector,
            podset.required_affinity,
            podset.tolerations,
        )
    )
    return hashlib.sha256(shape.encode()).hexdigest()[:8]


def pod_workload_key(raw: Raw) -> str | None:
    """The workload key of a Pod that is kuota's as a Pod: ``ns/podgroup/<group>``
    for a member of a pod group, ``ns/pod/<name>`` for a single Pod; None for a Pod
    without the queue label, or one whose controller owner is a workload kind kuota
    or Kueue admits itself (``kuota.kinds.managed_owner``: a Job's, a PyTorchJob's
    pod). Lenient: the fold's reader says what is wrong with a bad one."""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    labels = meta.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    if not labels.get(QUEUE_NAME_LABEL) or managed_owner(raw) is not None:
        return None
    namespace = meta.get("namespace") or "default"
    group = labels.get(POD_GROUP_NAME_LABEL)
    if isinstance(group, str) and group:
        return workload_key("Pod", str(namespace), group, pod_group=True)
    name = meta.get("name")
    return workload_key("Pod", str(namespace), name) if isinstance(name, str) and name else None


def read_pod(raw: Raw, *, at: float) -> PodMember | None:
    """A Pod with the queue label: one member of its pod group (label
    ``kueue.x-k8s.io/pod-group-name``, annotation
    ``kueue.x-k8s.io/pod-group-total-count``), or a group of one (podset ``main``).
    None without the label, or for the pod of a workload kuota or Kueue admits
    itself (its controller owner: ``kuota.kinds.managed_owner``), as Kueue leaves
    such a Pod to its owner even when the queue label was copied into its template."""
    _kind_is(raw, "Pod")
    if managed_owner(raw) is not None:
        return None
    header = read_header(raw, at=at)
    if header is None:
        return None
    meta = mapping(raw.get("metadata"), "metadata")
    labels = mapping(meta.get("labels"), "metadata.labels")
    annotations = mapping(meta.get("annotations"), "metadata.annotations")
    gpath = keyed("metadata.labels", POD_GROUP_NAME_LABEL)
    group = labels.get(POD_GROUP_NAME_LABEL)
    spec = spec_of(raw, required=True)
    podset = pod_set(spec, 1, name="main", path="spec")
    if group is None:
        name, total, role, pod_group = header.name, 1, "main", False
    else:
        name = dns1123_label(group, gpath)
        cpath = keyed("metadata.annotations", POD_GROUP_TOTAL_COUNT_ANNOTATION)
        count = annotations.get(POD_GROUP_TOTAL_COUNT_ANNOTATION)
        if count is None:
            raise FieldError(
                cpath, f"required: a Pod of pod group {name!r} says how many pods it has"
            )
        if not isinstance(count, str) or not count.isascii() or not count.isdigit():
            raise FieldError(cpath, f"{count!r} is not a whole number of pods")
        total = whole_number(count, MAX_PODS) or 0
        if total < 1:
            got = count if len(count) <= 12 else f"{count[:12]}... ({len(count)} digits)"
            raise FieldError(cpath, f"must be from 1 to {MAX_PODS}, got {got}")
        # The role is the pod's shape, never the role-hash annotation a user may
        # write: pods of two shapes under one written hash would be charged as the
        # first one's (a 0-GPU pod's hash on an 8-GPU pod: charged nothing).
        role = role_of(podset)
        pod_group = True
    gates = seq(spec.get("schedulingGates"), "spec.schedulingGates")
    gated = any(isinstance(g, dict) and g.get("name") == ADMISSION_GATE for g in gates)
    status = mapping(raw.get("status"), "status")
    return PodMember(
        namespace=header.namespace,
        group=name,
        pod_group=pod_group,
        pod=header.name,
        uid=header.uid,
        total=total,
        role=role,
        podset=podset,
        queue_name=header.queue,
        priority_class=header.priority,
        creation_seconds=header.creation_seconds,
        gated=gated,
        failed=status.get("phase") == "Failed",
    )


def pod_group_workload(members: list[PodMember]) -> WorkloadSpec:
    """The workload of a complete pod group: one podset per role, sorted by name
    (as Kueue sorts them), counting the members of each; the queue, priority
    and creation time of its earliest member."""
    first = min(members, key=lambda m: (m.creation_seconds, m.pod))
    counts: dict[str, int] = {}
    shapes: dict[str, PodSet] = {}
    for m in members:
        counts[m.role] = counts.get(m.role, 0) + 1
        shapes.setdefault(m.role, m.podset)
    podsets = tuple(replace(shapes[role], name=role, count=counts[role]) for role in sorted(counts))
    return WorkloadSpec(
        namespace=first.namespace,
        name=first.group,
        uid=first.uid or first.group,
        queue_name=first.queue_name,
        priority_class=first.priority_class,
        creation_seconds=first.creation_seconds,
        podsets=podsets,
        owner_kind="Pod",
        pod_group=first.pod_group,
    )


def whole_number(value: object, most: int) -> int | None:
    """``value`` as a whole number from 0 to ``most`` when it is a string of ASCII
    digits (a label's or an annotation's), else None. The length is checked before
    ``int``: ``"²".isdigit()`` is true and ``int`` of thousands of digits raises."""
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        return None
    digits = value.lstrip("0") or "0"
    if len(digits) > len(str(most)):
        return None
    number = int(digits)
    return number if number <= most else None


# --------------------------------------------------------------------------- LeaderWorkerSet pods
# On a cluster a LeaderWorkerSet is admitted through its pods, as Kueue does: the
# LWS controller makes each group's pods (through StatefulSets), labelled with the
# LWS's name and the group's index and annotated with the group's size; kuota's
# webhook makes those pods one pod group (the group label and count written over
# whatever the template said), and the fold, the actuator and the drains take them
# as any pod group. The LWS object itself is not journaled (``kuota.kinds``:
# ``watch=""``): read too, each group would be counted twice.

#: What the LeaderWorkerSet controller writes on every pod it makes.
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"  # 0: the leader
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
#: A LeaderWorkerSet group's pod-group name: ``leaderworkerset-<name>-<group index>``.
LWS_GROUP_PREFIX = "leaderworkerset"
_LABEL_MAX = 63
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NOT_DNS1123 = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True, slots=True)
class LeaderWorkerGroup:
    """The pod group of one LeaderWorkerSet group's pods."""

    name: str  # the kueue.x-k8s.io/pod-group-name label: leaderworkerset-<lws>-<index>
    total: int  # the kueue.x-k8s.io/pod-group-total-count: the group's size


def leader_worker_group_name(namespace: str, name: str, index: int) -> str:
    """``leaderworkerset-<name>-<index>`` when that is a DNS-1123 label (at most 63
    characters), else the name part cut (and made lower-case alphanumerics and
    '-') to fit, followed by the index and 10 hex digits of a sha256 of
    ``<namespace>/<name>/<index>``: stable, and two long names that share their
    first characters still name two groups."""
    plain = f"{LWS_GROUP_PREFIX}-{name}-{index}"
    if len(plain) <= _LABEL_MAX and _DNS1123.match(plain):
        return plain
    digest = hashlib.sha256(f"{namespace}/{name}/{index}".encode()).hexdigest()[:10]
    tail = f"-{index}-{digest}"
    room = _LABEL_MAX - len(LWS_GROUP_PREFIX) - 1 - len(tail)
    stem = _NOT_DNS1123.sub("-", name.lower())[:room].strip("-")
    return f"{LWS_GROUP_PREFIX}-{stem}{tail}" if stem else f"{LWS_GROUP_PREFIX}{tail}"


def leader_worker_group(raw: Raw, namespace: str) -> LeaderWorkerGroup | None:
    """The pod group of a LeaderWorkerSet's pod: one with both the
    ``leaderworkerset.sigs.k8s.io/name`` and ``.../group-index`` labels (None for
    any other Pod). Its size is the ``leaderworkerset.sigs.k8s.io/size`` annotation.
    ``FieldError`` (its message as the webhook says it: ``Required: ...``,
    ``Invalid value ...``) for an empty name, an index that is not a whole
    number, or a size that is absent or not a whole number from 1 to ``MAX_PODS``."""
    meta = mapping(raw.get("metadata"), "metadata")
    labels = mapping(meta.get("labels"), "metadata.labels")
    if LWS_NAME_LABEL not in labels or LWS_GROUP_INDEX_LABEL not in labels:
        return None
    npath = keyed("metadata.labels", LWS_NAME_LABEL)
    name = labels[LWS_NAME_LABEL]
    if not isinstance(name, str) or not name:
        raise FieldError(npath, f"Invalid value {name!r}: the name of the pod's LeaderWorkerSet")
    ipath = keyed("metadata.labels", LWS_GROUP_INDEX_LABEL)
    raw_index = labels[LWS_GROUP_INDEX_LABEL]
    index = whole_number(raw_index, INT32_MAX)
    if index is None:
        raise FieldError(
            ipath, f"Invalid value {raw_index!r}: the index of the pod's group, a whole number"
        )
    spath = keyed("metadata.annotations", LWS_SIZE_ANNOTATION)
    size = mapping(meta.get("annotations"), "metadata.annotations").get(LWS_SIZE_ANNOTATION)
    if size is None:
        raise FieldError(
            spath,
            f"Required: a pod of LeaderWorkerSet {name!r} (group {index}) says how many pods "
            "its group has (the LeaderWorkerSet controller writes it); kuota admits the group "
            "once they all exist",
        )
    total = whole_number(size, MAX_PODS)
    if total is None or total < 1:
        raise FieldError(
            spath, f"Invalid value {size!r}: a whole number of pods from 1 to {MAX_PODS}"
        )
    return LeaderWorkerGroup(leader_worker_group_name(namespace, name, index), total)
