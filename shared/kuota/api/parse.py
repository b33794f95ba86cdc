"""Manifests (plain dicts) -> ``kuota.api.types``, or a ``ValidationError``.

Theory of operation: ``parse_object`` looks at ``apiVersion`` and ``kind``,
hands the manifest to the reader for that kind and returns the frozen object,
``None`` for kinds that are not read here (the DRA kinds, which ``kuota.api.dra``
reads for the fold's DRA inventory; a Job without the queue-name label; an
unrelated ConfigMap), or a ``ValidationError`` naming the object and the first
bad field. It never raises: readers raise ``FieldError`` (``kuota.api.fields``)
and the boundary turns it, and any other exception, into a
``ValidationError``, so one bad object never stops the rest of the journal.

This module holds the Kueue queue kinds; ``parse_job``, ``parse_workloads``,
``parse_config`` and ``nodes`` read the others (``dra`` the DRA kinds). The
Kueue semantics kept (versions and renamed fields, namespaceSelector,
flavorFungibility, the webhook's limits): docs/design/manifests.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias, TypeVar

import yaml

from kuota.api.duration import DurationError, duration_seconds
from kuota.api.fields import (
    INT32_MAX,
    INT32_MIN,
    FieldError,
    Raw,
    child,
    dns1123_label,
    dns1123_subdomain,
    enum,
    index,
    integer,
    keyed,
    label_selector,
    mapping,
    meta_of,
    object_name,
    object_namespace,
    optional_quantity,
    qualified_name,
    quantity,
    seq,
    spec_of,
    string,
    string_map,
    taint,
    tolerations,
)
from kuota.api.nodes import Node, read_node
from kuota.api.not_journaled import not_journaled
from kuota.api.parse_config import operator_configuration, upstream_configuration
from kuota.api.parse_job import (
    ACTIVE_ANNOTATION,
    CREATED_AT_ANNOTATION,
    MAX_PODS,
    read_job,
)
from kuota.api.parse_workloads import (
    read_job_set,
    read_leader_worker_set,
    read_pod,
    read_pytorch_job,
    read_ray_cluster,
    read_ray_job,
)
from kuota.api.types import (
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    Configuration,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueue,
    Namespace,
    ObjectRef,
    PodMember,
    PreemptionPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    ValidationError,
    WorkloadGroup,
    WorkloadPriorityClass,
    WorkloadSpec,
)
from kuota.kinds import (
    DRA_GROUP,
    KINDS,
    NAMESPACE_NAME_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    get,
    names,
)
from kuota.quantity import QuantityError, parse_quantity

ParsedObject: TypeAlias = (
    ResourceFlavor
    | ClusterQueue
    | Cohort
    | LocalQueue
    | WorkloadPriorityClass
    | Namespace
    | Configuration
    | WorkloadSpec
    | WorkloadGroup
    | PodMember
    | Node
)

__all__ = [
    "ACTIVE_ANNOTATION",
    "CREATED_AT_ANNOTATION",
    "KUEUE_CONFIG_KEY",
    "MAX_PODS",
    "NAMESPACE_NAME_LABEL",
    "PRIORITY_CLASS_LABEL",
    "QUEUE_NAME_LABEL",
    "ParsedObject",
    "object_ref",
    "parse_job",
    "parse_object",
]

KUEUE_CONFIG_KEY = "controller_manager_config.yaml"  # in the kueue-manager-config ConfigMap

# Scopes from kuota.kinds; a kind the apiserver does not serve (Configuration)
# keeps the namespace it was written with.
_NAMESPACED = frozenset(k.kind for k in KINDS if k.served and k.namespaced)
_CLUSTER_SCOPED = frozenset(k.kind for k in KINDS if k.served and not k.namespaced)
_DRA_KINDS = names("dra")
_STOP_POLICIES = ("None", "Hold", "HoldAndDrain")

_T = TypeVar("_T")
Reader = Callable[[Raw, str, float], ParsedObject | None]


# --------------------------------------------------------------------------- public


def object_ref(manifest: object) -> ObjectRef:
    """Kind, name and namespace of whatever ``manifest`` is, never raising."""
    if not isinstance(manifest, dict):
        return ObjectRef(kind="", name="")
    kind = manifest.get("kind")
    kind = kind if isinstance(kind, str) else ""
    meta = manifest.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    namespace = meta.get("namespace")
    namespace = namespace if isinstance(namespace, str) else ""
    if kind in _CLUSTER_SCOPED:
        namespace = ""
    elif kind in _NAMESPACED and not namespace:
        namespace = "default"
    return ObjectRef(kind=kind, name=name if isinstance(name, str) else "", namespace=namespace)


def parse_object(manifest: object, *, at: float = 0.0) -> ParsedObject | ValidationError | None:
    """Parse any manifest kuota reads. ``at`` is the event time, used only as the
    creation time of a Job that carries none."""
    if type(manifest) is dict:  # _boundary(manifest, ...) inlined: once per journal event
        try:
            return _dispatch(manifest, at)
        except Exception as e:
            return _invalid(manifest, e)
    return _boundary(manifest, lambda raw: _dispatch(raw, at))


def parse_job(
    manifest: object, *, at: float, managed: bool = False
) -> WorkloadSpec | ValidationError | None:
    """A ``batch/v1`` Job as a workload, or ``None`` without a queue-name label
    unless ``managed`` (see ``kuota.api.parse_job`` for what is read and how)."""
    return _boundary(manifest, lambda raw: read_job(raw, at=at, managed=managed))


# --------------------------------------------------------------------------- boundary


def _boundary(manifest: object, read: Callable[[Raw], _T | None]) -> _T | ValidationError | None:
    try:
        if not isinstance(manifest, dict):
            raise FieldError("", f"a manifest must be a mapping, not {type(manifest).__name__}")
        return read(manifest)
    except Exception as e:  # the boundary: bad input must never stop the fold
        return _invalid(manifest, e)


def _invalid(manifest: object, error: Exception) -> ValidationError:
    """The ValidationError for a manifest whose reading raised ``error``; the
    ObjectRef naming it is built only here, when something is wrong."""
    ref = object_ref(manifest)
    refused = not_journaled(manifest) if isinstance(manifest, dict) else None
    if refused is not None:  # ingest's stand-in for an object too large to journal
        return ValidationError(ref=ref, field="metadata", message=refused)
    if isinstance(error, FieldError):
        return ValidationError(ref=ref, field=error.field, message=error.message)
    return ValidationError(
        ref=ref, field="", message=f"cannot parse: {type(error).__name__}: {error}"
    )


def _dispatch(raw: Raw, at: float) -> ParsedObject | None:
    if raw.get("kind") == "Job" and raw.get("apiVersion") == "batch/v1":
        return read_job(raw, at=at)  # what the general path below does, for the commonest kind
    kind = string(raw.get("kind"), "kind", required=True)
    if not_journaled(raw) is not None:  # ingest's stand-in (a Job's has no spec: fails)
        raise FieldError("metadata", "not journaled")  # _invalid gives the reason
    api_version = string(raw.get("apiVersion"), "apiVersion")
    group, _, version = api_version.rpartition("/")
    if group == DRA_GROUP or (not api_version and kind in _DRA_KINDS):
        return None  # the DRA kinds: kuota.api.dra reads them for the inventory
    entry = _READERS.get(kind)
    if entry is None:
        raise FieldError("kind", f"unsupported kind {kind!r} (apiVersion {api_version!r})")
    want_group, versions, reader = entry
    if api_version and (group != want_group or version not in versions):
        want = ", ".join(sorted(f"{want_group}/{v}" if want_group else v for v in versions))
        raise FieldError(
            "apiVersion", f"unsupported apiVersion {api_version!r} for {kind}: want {want}"
        )
    return reader(raw, version or versions[0], at)


# --------------------------------------------------------------------------- queue kinds


def _resource_flavor(raw: Raw, version: str, at: float) -> ResourceFlavor:
    spec = spec_of(raw)
    return ResourceFlavor(
        name=object_name(raw),
        node_labels=string_map(spec.get("nodeLabels"), "spec.nodeLabels", max_items=8, labels=True),
        node_taints=tuple(
            taint(t, index("spec.nodeTaints", i))
            for i, t in enumerate(seq(spec.get("nodeTaints"), "spec.nodeTaints", max_items=8))
        ),
        tolerations=tolerations(spec.get("tolerations"), "spec.tolerations", max_items=8),
    )


def _flavor_quotas(
    value: object, field: str, covered: tuple[str, ...], *, has_parent: bool, is_cohort: bool
) -> FlavorQuotas:
    raw = mapping(value, field, required=True)
    name = dns1123_subdomain(raw.get("name"), child(field, "name"))
    path = child(field, "resources")
    items = seq(raw.get("resources"), path, max_items=64)
    if len(items) != len(covered):
        raise FieldError(
            path,
            f"must list the {len(covered)} coveredResources {list(covered)}, has {len(items)}",
        )
    parent = "a parent" if is_cohort else "a cohort"
    quotas: list[ResourceQuota] = []
    for k, item in enumerate(items):
        rpath = index(path, k)
        rq = mapping(item, rpath, required=True)
        rname = string(rq.get("name"), child(rpath, "name"), required=True)
        if rname != covered[k]:
            raise FieldError(
                child(rpath, "name"), f"{rname!r} must match coveredResources[{k}] {covered[k]!r}"
            )
        nominal = quantity(rq.get("nominalQuota"), child(rpath, "nominalQuota"))
        borrowing = optional_quantity(rq.get("borrowingLimit"), child(rpath, "borrowingLimit"))
        lending = optional_quantity(rq.get("lendingLimit"), child(rpath, "lendingLimit"))
        if borrowing is not None and not has_parent:
            raise FieldError(child(rpath, "borrowingLimit"), f"must not be set without {parent}")
        if lending is not None and not has_parent:
            raise FieldError(child(rpath, "lendingLimit"), f"must not be set without {parent}")
        if lending is not None and not is_cohort and lending > nominal:
            raise FieldError(
                child(rpath, "lendingLimit"), "must be less than or equal to nominalQuota"
            )
        quotas.append(
            ResourceQuota(
                name=rname, nominal_quota=nominal, borrowing_limit=borrowing, lending_limit=lending
            )
        )
    return FlavorQuotas(name=name, resources=tuple(quotas))


def _resource_groups(
    value: object, field: str, *, has_parent: bool, is_cohort: bool
) -> tuple[ResourceGroup, ...]:
    groups: list[ResourceGroup] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    total_flavors = total_covered = 0
    for i, item in enumerate(seq(value, field, max_items=16)):
        path = index(field, i)
        raw = mapping(item, path, required=True)
        cpath = child(path, "coveredResources")
        covered_items = seq(raw.get("coveredResources"), cpath, max_items=64)
        if not covered_items:
            raise FieldError(cpath, "must list at least one resource")
        covered: list[str] = []
        for j, r in enumerate(covered_items):
            name = qualified_name(r, index(cpath, j))
            if name in seen_resources:
                raise FieldError(
                    index(cpath, j),
                    f"duplicate resource {name!r}: a resource belongs to one resource group",
                )
            seen_resources.add(name)
            covered.append(name)
        fpath = child(path, "flavors")
        flavor_items = seq(raw.get("flavors"), fpath, max_items=64)
        if not flavor_items:
            raise FieldError(fpath, "must list at least one flavor")
        if len(flavor_items) * len(covered) > 512:
            raise FieldError(path, "must have at most 512 flavor-resource combinations")
        flavors: list[FlavorQuotas] = []
        for j, f in enumerate(flavor_items):
            fq = _flavor_quotas(
                f, index(fpath, j), tuple(covered), has_parent=has_parent, is_cohort=is_cohort
            )
            if fq.name in seen_flavors:
                raise FieldError(
                    child(index(fpath, j), "name"),
                    f"duplicate flavor {fq.name!r}: a flavor belongs to one resource group",
                )
            seen_flavors.add(fq.name)
            flavors.append(fq)
        total_flavors += len(flavors)
        total_covered += len(covered)
        if total_flavors > 256:
            raise FieldError(field, "must have at most 256 flavors across all resource groups")
        if total_covered > 256:
            raise FieldError(
                field, "must have at most 256 covered resources across all resource groups"
            )
        groups.append(ResourceGroup(covered_resources=tuple(covered), flavors=tuple(flavors)))
    return tuple(groups)


def _fair_sharing_weight(spec: Raw) -> int:
    fs = mapping(spec.get("fairSharing"), "spec.fairSharing")
    weight = fs.get("weight")
    return 1000 if weight is None else quantity(weight, "spec.fairSharing.weight")


def _admission_mode(spec: Raw) -> str:
    scope = mapping(spec.get("admissionScope"), "spec.admissionScope")
    return enum(
        scope.get("admissionMode"),
        "spec.admissionScope.admissionMode",
        ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"),
        default="NoAdmissionFairSharing",
    )


def _reference(spec: Raw, new: str, old: str) -> str | None:
    """A name field renamed between versions (``cohortName``/``cohort``)."""
    values = {key: string(spec.get(key), f"spec.{key}") for key in (new, old)}
    if values[new] and values[old] and values[new] != values[old]:
        raise FieldError(
            f"spec.{old}", f"{values[old]!r} conflicts with spec.{new} {values[new]!r}"
        )
    key = new if values[new] else old
    return dns1123_subdomain(values[key], f"spec.{key}") if values[key] else None


_BORROW = {
    "MayStopSearch": "MayStopSearch",
    "Borrow": "MayStopSearch",
    "TryNextFlavor": "TryNextFlavor",
}
_PREEMPT = {
    "MayStopSearch": "MayStopSearch",
    "Preempt": "MayStopSearch",
    "TryNextFlavor": "TryNextFlavor",
}


def _fungibility(value: object) -> FlavorFungibility:
    field = "spec.flavorFungibility"
    raw = mapping(value, field)
    borrow = _BORROW[
        enum(
            raw.get("whenCanBorrow"),
            child(field, "whenCanBorrow"),
            tuple(_BORROW),
            default="MayStopSearch",
        )
    ]
    preempt = _PREEMPT[
        enum(
            raw.get("whenCanPreempt"),
            child(field, "whenCanPreempt"),
            tuple(_PREEMPT),
            default="TryNextFlavor",
        )
    ]
    preference = enum(
        raw.get("preference"),
        child(field, "preference"),
        ("BorrowingOverPreemption", "PreemptionOverBorrowing"),
        default="",
    )
    if preference and (borrow, preempt) != ("TryNextFlavor", "TryNextFlavor"):
        raise FieldError(
            child(field, "preference"),
            "requires whenCanBorrow and whenCanPreempt to be TryNextFlavor",
        )
    return FlavorFungibility(when_can_borrow=borrow, when_can_preempt=preempt)


def _preemption(value: object) -> PreemptionPolicy:
    field = "spec.preemption"
    raw = mapping(value, field)
    within = enum(
        raw.get("withinClusterQueue"),
        child(field, "withinClusterQueue"),
        ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
        default="Never",
    )
    reclaim = enum(
        raw.get("reclaimWithinCohort"),
        child(field, "reclaimWithinCohort"),
        ("Never", "LowerPriority", "Any"),
        default="Never",
    )
    bpath = child(field, "borrowWithinCohort")
    borrow = mapping(raw.get("borrowWithinCohort"), bpath)
    policy = enum(
        borrow.get("policy"), child(bpath, "policy"), ("Never", "LowerPriority"), default="Never"
    )
    threshold = borrow.get("maxPriorityThreshold")
    if threshold is not None:
        threshold = integer(
            threshold, child(bpath, "maxPriorityThreshold"), minimum=INT32_MIN, maximum=INT32_MAX
        )
    if reclaim == "Never" and policy != "Never":
        raise FieldError(child(bpath, "policy"), "must be Never when reclaimWithinCohort is Never")
    return PreemptionPolicy(
        within_cluster_queue=within,
        reclaim_within_cohort=reclaim,
        borrow_within_cohort=BorrowWithinCohort(
            policy=policy, max_priority_threshold=threshold if isinstance(threshold, int) else None
        ),
    )


def _cluster_queue(raw: Raw, version: str, at: float) -> ClusterQueue:
    name = object_name(raw)
    spec = spec_of(raw)
    cohort = _reference(spec, "cohortName", "cohort")
    return ClusterQueue(
        name=name,
        cohort=cohort,
        namespace_selector=label_selector(spec.get("namespaceSelector"), "spec.namespaceSelector"),
        queueing_strategy=enum(
            spec.get("queueingStrategy"),
            "spec.queueingStrategy",
            ("BestEffortFIFO", "StrictFIFO"),
            default="BestEffortFIFO",
        ),
        resource_groups=_resource_groups(
            spec.get("resourceGroups"),
            "spec.resourceGroups",
            has_parent=cohort is not None,
            is_cohort=False,
        ),
        flavor_fungibility=_fungibility(spec.get("flavorFungibility")),
        preemption=_preemption(spec.get("preemption")),
        fair_sharing_weight=_fair_sharing_weight(spec),
        stop_policy=enum(spec.get("stopPolicy"), "spec.stopPolicy", _STOP_POLICIES, default="None"),
        admission_mode=_admission_mode(spec),
    )


def _cohort(raw: Raw, version: str, at: float) -> Cohort:
    name = object_name(raw)
    spec = spec_of(raw)
    parent = _reference(spec, "parentName", "parent")
    history = _history(raw)
    return Cohort(
        name=name,
        parent=parent,
        resource_groups=_resource_groups(
            spec.get("resourceGroups"),
            "spec.resourceGroups",
            has_parent=parent is not None,
            is_cohort=True,
        ),
        fair_sharing_weight=_fair_sharing_weight(spec),
        history_half_life_seconds=history[0],
        history_weight=history[1],
    )


HISTORY_HALF_LIFE = "kuota.dev/fair-sharing-history-half-life"
HISTORY_WEIGHT = "kuota.dev/fair-sharing-history-weight"


def _history(raw: Raw) -> tuple[int, int]:
    """History-aware fair sharing's annotations: (half-life seconds, weight milli)."""
    annotations = dict(string_map(meta_of(raw).get("annotations"), "metadata.annotations"))
    half_life_text = annotations.get(HISTORY_HALF_LIFE)
    weight_text = annotations.get(HISTORY_WEIGHT)
    if half_life_text is None and weight_text is None:
        return 0, 0
    half_path = keyed("metadata.annotations", HISTORY_HALF_LIFE)
    try:
        half_life = duration_seconds(half_life_text if half_life_text is not None else "1h")
    except DurationError as e:
        raise FieldError(half_path, str(e)) from None
    if half_life <= 0 or half_life > 366 * 86400:
        raise FieldError(half_path, "must be a duration between 1s and 366 days")
    weight_path = keyed("metadata.annotations", HISTORY_WEIGHT)
    try:
        weight = parse_quantity(weight_text if weight_text is not None else "4")
    except QuantityError as e:
        raise FieldError(weight_path, str(e)) from None
    if not 0 <= weight <= 100_000:
        raise FieldError(weight_path, f"must be between 0 and 100, got {weight_text!r}")
    return half_life, weight


def _local_queue(raw: Raw, version: str, at: float) -> LocalQueue:
    name = object_name(raw)
    namespace = object_namespace(raw)
    spec = spec_of(raw, required=True)
    return LocalQueue(
        namespace=namespace,
        name=name,
        cluster_queue=dns1123_subdomain(spec.get("clusterQueue"), "spec.clusterQueue"),
        stop_policy=enum(spec.get("stopPolicy"), "spec.stopPolicy", _STOP_POLICIES, default="None"),
        fair_sharing_weight=_fair_sharing_weight(spec),
    )


def _workload_priority_class(raw: Raw, version: str, at: float) -> WorkloadPriorityClass:
    return WorkloadPriorityClass(
        name=object_name(raw),
        value=integer(raw.get("value"), "value", minimum=INT32_MIN, maximum=INT32_MAX),
    )


def _namespace_object(raw: Raw, version: str, at: float) -> Namespace:
    name = dns1123_label(meta_of(raw).get("name"), "metadata.name")
    labels = dict(string_map(meta_of(raw).get("labels"), "metadata.labels", labels=True))
    labels[NAMESPACE_NAME_LABEL] = name  # the apiserver sets (and forces) it
    return Namespace(name=name, labels=tuple(sorted(labels.items())))


# --------------------------------------------------------------------------- configuration


def _configuration(raw: Raw, version: str, at: float) -> Configuration:
    return upstream_configuration(raw, version=version)


def _kueue_operator(raw: Raw, version: str, at: float) -> Configuration:
    return operator_configuration(spec_of(raw, required=True))


def _config_map(raw: Raw, version: str, at: float) -> Configuration | None:
    data = mapping(raw.get("data"), "data")
    text = data.get(KUEUE_CONFIG_KEY)
    if text is None:
        return None  # not Kueue's configuration: not ours
    field = keyed("data", KUEUE_CONFIG_KEY)
    try:
        config = yaml.safe_load(string(text, field))
    except yaml.YAMLError as e:
        raise FieldError(field, f"not YAML: {e}") from None
    config = mapping(config, field, required=True)
    api_version = string(config.get("apiVersion"), child(field, "apiVersion"))
    version = api_version.rpartition("/")[2]
    if api_version and api_version not in _CONFIGURATION.api_versions:
        raise FieldError(child(field, "apiVersion"), f"unsupported apiVersion {api_version!r}")
    return upstream_configuration(config, version=version or _CONFIGURATION.version, base=field)


def _job_reader(raw: Raw, version: str, at: float) -> WorkloadSpec | None:
    return read_job(raw, at=at)


def _pytorch_job(raw: Raw, version: str, at: float) -> WorkloadSpec | None:
    return read_pytorch_job(raw, at=at)


def _ray_cluster(raw: Raw, version: str, at: float) -> WorkloadSpec | None:
    return read_ray_cluster(raw, at=at)


def _ray_job(raw: Raw, version: str, at: float) -> WorkloadSpec | None:
    return read_ray_job(raw, at=at)


def _job_set(raw: Raw, version: str, at: float) -> WorkloadSpec | None:
    return read_job_set(raw, at=at)


def _leader_worker_set(raw: Raw, version: str, at: float) -> WorkloadGroup | None:
    return read_leader_worker_set(raw, at=at)


def _pod(raw: Raw, version: str, at: float) -> PodMember | None:
    return read_pod(raw, at=at)


def _node(raw: Raw, version: str, at: float) -> Node:
    return read_node(raw)


_CONFIGURATION = get("Configuration")

# kind -> (API group, accepted versions (the first is assumed without apiVersion), reader);
# the groups and versions are kuota.kinds'.
_READERS: dict[str, tuple[str, tuple[str, ...], Reader]] = {
    kind: (get(kind).group, get(kind).versions, reader)
    for kind, reader in (
        ("ResourceFlavor", _resource_flavor),
        ("ClusterQueue", _cluster_queue),
        ("Cohort", _cohort),
        ("LocalQueue", _local_queue),
        ("WorkloadPriorityClass", _workload_priority_class),
        ("Namespace", _namespace_object),
        ("Node", _node),
        ("ConfigMap", _config_map),
        ("Job", _job_reader),
        ("PyTorchJob", _pytorch_job),
        ("RayCluster", _ray_cluster),
        ("RayJob", _ray_job),
        ("JobSet", _job_set),
        ("LeaderWorkerSet", _leader_worker_set),
        ("Pod", _pod),
        ("Configuration", _configuration),
        ("Kueue", _kueue_operator),
    )
}
