"""Workload records: what the fold remembers about each Job it queues.

Theory of operation: a record is created when a Job with the queue label is
first seen and lives until the workload finishes (the fold then keeps only its
uid, so a late update of the finished Job is ignored) or the Job is deleted.
Its ``state`` is one of :data:`STATES` (never Finished: that is the uid-only
memory). A pending record waits in exactly one place: ``queued`` (in a
ClusterQueue's queue, under ``shape``) or ``holds`` (index keys of what could
unblock it: its LocalQueue, ClusterQueue, priority class, namespace, the DRA
inventory); an admitted one is in neither and carries its :class:`Admission`
(the charged usage, released on finish, delete or eviction). ``last_verdict``
is the (reason, signature) of its last Inadmissible decision, so the same one
is never emitted twice in a row; ``requests`` caches the charged podsets for
the current spec, DRA inventory and configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from kuota.api.types import WorkloadSpec
from kuota.core.assign.flavors import Assignment, PodSetRequest
from kuota.core.pickling import register_by_fields
from kuota.core.queueing.queues import OrderKey
from kuota.core.quota.tree import FlavorResource

PENDING = "Pending"
INADMISSIBLE = "Inadmissible"
ADMITTED = "Admitted"
FINISHED = "Finished"
DEACTIVATED = "Deactivated"
STATES = (PENDING, INADMISSIBLE, ADMITTED, FINISHED, DEACTIVATED)

HoldKey = tuple[str, ...]  # ("lq", ns, name) | ("cq", name) | ("wpc", name) | ("ns", ns) | ("dra",)


@dataclass(slots=True, init=False, unsafe_hash=True)  # a value: see flavors.Shortfall
class Admission:
    cluster_queue: Final[str]
    usage: Final[tuple[tuple[FlavorResource, int], ...]]
    flavors: Final[tuple[tuple[str, tuple[tuple[str, str], ...]], ...]]  # podset -> (res, flavor)
    at: Final[float]

    def __init__(
        self,
        cluster_queue: str,
        usage: tuple[tuple[FlavorResource, int], ...],
        flavors: tuple[tuple[str, tuple[tuple[str, str], ...]], ...],
        at: float,
    ) -> None:
        self.cluster_queue = cluster_queue
        self.usage = usage
        self.flavors = flavors
        self.at = at


@dataclass(frozen=True, slots=True)
class Fit:
    """A fitting assignment with what admitting with it records (``flavors`` of
    the :class:`Admission`) and announces (the Admitted decision's maps); kept
    per ClusterQueue, shape and flavor choice, so most admissions build none."""

    assignment: Assignment
    flavors: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    decision_flavors: dict[str, dict[str, str]]  # podset -> resource -> flavor
    decision_usage: dict[str, dict[str, str]]  # flavor -> resource -> quantity


@dataclass(slots=True, init=False)  # constructor written out: see flavors.Shortfall
class WorkloadRecord:
    spec: WorkloadSpec
    order: OrderKey
    priority: int = 0
    state: str = PENDING
    cluster_queue: str | None = None  # the ClusterQueue its LocalQueue points to, if known
    queued: bool = False
    shape: int = -1
    charge_id: int = -1  # the fold's charge group while pending
    holds: tuple[HoldKey, ...] = ()
    requests: tuple[PodSetRequest, ...] = ()
    admission: Admission | None = None
    last_verdict: tuple[str, tuple[object, ...]] | None = None  # Verdict.key last emitted
    pods_ready: bool = False
    extra: dict[str, object] = field(default_factory=dict)  # seam for later issues
    # The backstop (docs/design/backstop.md): the id of its latest Admitted decision
    # (an observation the actuator wrote for it is stale once that admission ended,
    # until the Job is seen suspended), and whether its queue label was removed.
    admitted_id: str | None = None
    label_removed: bool = False

    def __init__(
        self,
        spec: WorkloadSpec,
        order: OrderKey,
        priority: int = 0,
        state: str = PENDING,
        cluster_queue: str | None = None,
        queued: bool = False,
        shape: int = -1,
        charge_id: int = -1,
        holds: tuple[HoldKey, ...] = (),
        requests: tuple[PodSetRequest, ...] = (),
        admission: Admission | None = None,
        last_verdict: tuple[str, tuple[object, ...]] | None = None,
        pods_ready: bool = False,
        extra: dict[str, object] | None = None,
        admitted_id: str | None = None,
        label_removed: bool = False,
    ) -> None:
        self.spec = spec
        self.order = order
        self.priority = priority
        self.state = state
        self.cluster_queue = cluster_queue
        self.queued = queued
        self.shape = shape
        self.charge_id = charge_id
        self.holds = holds
        self.requests = requests
        self.admission = admission
        self.last_verdict = last_verdict
        self.pods_ready = pods_ready
        self.extra = {} if extra is None else extra
        self.admitted_id = admitted_id
        self.label_removed = label_removed

    @property
    def key(self) -> str:
        return self.order[2]


def order_key(spec: WorkloadSpec, priority: int) -> OrderKey:
    return (-priority, spec.creation_seconds, spec.key)


register_by_fields(Admission, Fit, WorkloadRecord)
