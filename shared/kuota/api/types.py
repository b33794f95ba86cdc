"""Frozen dataclasses for the objects the core folds over.

Amounts are ints in milli-units (see ``kuota.quantity``). Collections are
tuples (ordered, hashable) so that folding never depends on dict or set order.
Names follow Kueue's and Kubernetes' field names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from kuota.kinds import workload_key

# --------------------------------------------------------------------------- common


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str = ""  # "" for cluster-scoped objects

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass(frozen=True, slots=True)
class ValidationError:
    """An object that could not be read. ``field`` is a JSON-path-like field name
    (``spec.resourceGroups[0].flavors[1].resources[0].nominalQuota``)."""

    ref: ObjectRef
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.ref}: {self.field}: {self.message}"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""
    # Kept for the pod templates the actuator writes; matching ignores it (a NoExecute
    # eviction delay), so it is left out of equality and hashing too.
    toleration_seconds: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector. ``None`` where an object has no selector at all."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()  # In/NotIn/Exists/DoesNotExist


# --------------------------------------------------------------------------- Kueue kinds


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: tuple[tuple[str, str], ...] = ()
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    name: str  # resource name, e.g. "cpu", "nvidia.com/gpu", "gpu-memory"
    nominal_quota: int
    borrowing_limit: int | None = None  # None = unlimited (within the cohort)
    lending_limit: int | None = None  # None = lend everything


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str  # ResourceFlavor name
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


FungibilityBorrow = Literal["Borrow", "TryNextFlavor", "MayStopSearch"]
FungibilityPreempt = Literal["Preempt", "TryNextFlavor", "MayStopSearch"]


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: str = "MayStopSearch"  # v1beta2 default; v1beta1 "Borrow" is an alias
    when_can_preempt: str = "TryNextFlavor"


@dataclass(frozen=True, slots=True)
class BorrowWithinCohort:
    policy: str = "Never"  # Never | LowerPriority
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    within_cluster_queue: str = "Never"  # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Never"  # Never | LowerPriority | Any
    borrow_within_cohort: BorrowWithinCohort = field(default_factory=BorrowWithinCohort)


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    namespace_selector: LabelSelector | None = None  # None selects every namespace
    queueing_strategy: str = "BestEffortFIFO"  # BestEffortFIFO | StrictFIFO
    resource_groups: tuple[ResourceGroup, ...] = ()
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    preemption: PreemptionPolicy = field(default_factory=PreemptionPolicy)
    fair_sharing_weight: int = 1000  # milli-units; weight 1 = 1000, weight 0 = 0
    stop_policy: str = "None"  # None | Hold | HoldAndDrain
    # spec.admissionScope.admissionMode: "UsageBasedAdmissionFairSharing" orders its
    # pending workloads by their LocalQueue's decayed usage (docs/design/admission-fair-sharing.md)
    admission_mode: str = "NoAdmissionFairSharing"


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: int = 1000
    # History-aware fair sharing (kuota's, opt-in by annotation on the root cohort;
    # docs/design/fair-sharing-history.md): the half-life of the decayed usage and
    # its weight in the DRS (milli, 0..1000); 0 / 0 = plain DRS.
    history_half_life_seconds: int = 0
    history_weight: int = 0


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"
    fair_sharing_weight: int = 1000  # spec.fairSharing.weight (admission fair sharing), milli


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: tuple[tuple[str, str], ...] = ()


# --------------------------------------------------------------------------- Configuration


@dataclass(frozen=True, slots=True)
class CounterSource:
    """Charge the named counter that matched devices consume (``consumesCounters``)."""

    name: str  # counter name, e.g. "memory"
    driver: str | None = None  # restrict to ResourceSlices of this driver


@dataclass(frozen=True, slots=True)
class CapacitySource:
    """Charge the named consumable capacity (KEP-5075) a request takes of a shared
    device: its ``capacity.requests`` amount rounded per the device's requestPolicy."""

    name: str  # capacity name as devices publish it, e.g. "memory"
    driver: str | None = None  # restrict to ResourceSlices of this driver
    device_selector: str = ""  # a CEL expression devices must also match; "" = all


@dataclass(frozen=True, slots=True)
class DeviceClassMapping:
    name: str  # the quota resource name (what ClusterQueues list in coveredResources)
    device_class_names: tuple[str, ...]
    counter: CounterSource | None = None  # None = charge device counts
    capacity: CapacitySource | None = None  # never together with counter


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    enable: bool = False
    timeout_seconds: int = 300
    block_admission: bool = False
    recovery_timeout_seconds: int | None = None
    requeuing_timestamp: str = "Eviction"  # Eviction | Creation
    backoff_limit_count: int | None = None  # None = unlimited
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True, slots=True)
class FairSharingConfig:
    enable: bool = False
    preemption_strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


@dataclass(frozen=True, slots=True)
class AdmissionFairSharingConfig:
    usage_half_life_seconds: int = 0
    usage_sampling_interval_seconds: int = 300
    resource_weights: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Configuration:
    device_class_mappings: tuple[DeviceClassMapping, ...] = ()
    exclude_resource_prefixes: tuple[str, ...] = ()
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    fair_sharing: FairSharingConfig = field(default_factory=FairSharingConfig)
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    # Kueue's manageJobsWithoutQueueName: Jobs without a queue-name label in a managed
    # namespace are suspended and wait too (default off, as in Kueue).
    manage_jobs_without_queue_name: bool = False
    # Kueue's managedJobsNamespaceSelector; None = Kueue's default, which excludes
    # kube-system and ``namespace`` (see kuota.api.managed).
    managed_jobs_namespace_selector: LabelSelector | None = None
    namespace: str = "kueue-system"  # Kueue's own namespace (its ``namespace`` field)


# --------------------------------------------------------------------------- workloads


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A pod-level ``resourceClaims`` entry: either a template or a claim name."""

    name: str  # the pod's local name for the claim
    resource_claim_template_name: str | None = None
    resource_claim_name: str | None = None


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str  # "main" for a Job
    count: int  # pods (Job parallelism, capped by completions)
    requests: tuple[tuple[str, int], ...]  # per-pod effective requests, sorted by name
    claims: tuple[ClaimRef, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: tuple[NodeSelectorTerm, ...] = ()  # ORed terms
    tolerations: tuple[Toleration, ...] = ()


@dataclass(slots=True, init=False, unsafe_hash=True)
class WorkloadSpec:
    """What kuota admits: one Job (later JobSet etc.) as podsets, all or nothing.

    One is read per Job event, so its constructor is written out and its fields
    are ``Final`` (read-only under mypy) rather than frozen: a frozen dataclass
    sets each field through ``object.__setattr__``, which made construction a
    third of reading a Job. Equality and hashing are the dataclass's."""

    namespace: Final[str]
    name: Final[str]
    uid: Final[str]
    queue_name: Final[str]
    priority_class: Final[str | None]
    creation_seconds: Final[float]  # event time of creation, seconds since the journal's epoch
    podsets: Final[tuple[PodSet, ...]]
    active: Final[bool]  # False if the user deactivated it (default True)
    owner_kind: Final[str]  # default "Job"
    # Observed, for the backstop (docs/design/backstop.md): spec.suspend (None when the
    # manifest has none, as in the simulator) and the actuator's kuota.dev/decision-id.
    suspended: Final[bool | None]
    decision_id: Final[str | None]
    # metadata.generation (None when absent, as in the simulator): an Admitted decision
    # carries it, the actuator starts the Job only at it (docs/design/backstop.md)
    generation: Final[int | None]
    pod_group: Final[bool]  # a group of Pods (kueue.x-k8s.io/pod-group-name), not one Pod

    def __init__(
        self,
        namespace: str,
        name: str,
        uid: str,
        queue_name: str,
        priority_class: str | None,
        creation_seconds: float,
        podsets: tuple[PodSet, ...],
        active: bool = True,
        owner_kind: str = "Job",
        suspended: bool | None = None,
        decision_id: str | None = None,
        generation: int | None = None,
        pod_group: bool = False,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.queue_name = queue_name
        self.priority_class = priority_class
        self.creation_seconds = creation_seconds
        self.podsets = podsets
        self.active = active
        self.owner_kind = owner_kind
        self.suspended = suspended
        self.decision_id = decision_id
        self.generation = generation
        self.pod_group = pod_group

    @property
    def key(self) -> str:
        """The workload key decisions carry (docs/design/workload-identity.md)."""
        if self.owner_kind == "Job":
            return f"{self.namespace}/{self.name}"
        return workload_key(self.owner_kind, self.namespace, self.name, pod_group=self.pod_group)


@dataclass(frozen=True, slots=True)
class WorkloadGroup:
    """One object that is several workloads, each admitted on its own: a
    LeaderWorkerSet's groups (a leader and its workers each), in index order.
    ``kind``/``namespace``/``name`` name the object; each spec's name is
    ``<name>/<group index>``."""

    kind: str
    namespace: str
    name: str
    specs: tuple[WorkloadSpec, ...]


@dataclass(frozen=True, slots=True)
class PodMember:
    """One Pod of a pod group (or a single Pod with the queue label), as the fold
    collects them into the group's workload once they all exist."""

    namespace: str
    group: str  # the pod-group-name, or the Pod's own name for a single Pod
    pod_group: bool  # False: a single Pod, a group of one
    pod: str  # the Pod's name
    uid: str
    total: int  # the pod-group-total-count (1 for a single Pod)
    role: str  # the podset this Pod belongs to (its role hash; "main" for a single Pod)
    podset: PodSet  # one pod of that role
    queue_name: str
    priority_class: str | None
    creation_seconds: float
    gated: bool  # it still has the scheduling gate kueue.x-k8s.io/admission
    failed: bool  # phase Failed: no longer counted as one of the group's pods
