"""Schema version 1 of the journal events and the decisions.

Journal events (``type`` discriminates): ``ObjectUpserted`` (an observed
Kubernetes object of a kind kuota reads, as the full manifest, which the core
parses and validates) and ``ObjectDeleted``; ``Tick`` (event time advanced,
written periodically by ingest, so timers fire when nothing else happens);
``WorkloadFinished`` and ``PodsReady`` (from the Job's status);
``PreemptionPlan`` (victims the preemption service proposes; admission
re-checks them against its own state); ``ActuationFailed`` (the actuator could
not apply a decision; its ``at`` is the decision's, so the actuator never moves
event time forward); ``WorkloadStopped`` (the actuator saw a stopped Job's pods
gone: the fold releases the quota it kept for them). ``at`` is event time in
seconds since the Unix epoch (the scenario's start in ``kuota simulate``); the
fold reads no other clock.
Decisions use Kueue's workload-condition vocabulary (``DECISION_TYPES``). The
``trusted_*`` constructors build what the fold and the engine emit without
re-validating it. Every field: docs/events.md.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _EventBase(_Frozen):
    schema_version: int = SCHEMA_VERSION
    id: str  # deterministic, unique within the journal (e.g. "<uid>@<resourceVersion>")
    at: float  # event time, seconds


class ObjectUpserted(_EventBase):
    type: Literal["ObjectUpserted"] = "ObjectUpserted"
    object: dict[str, Any]


class ObjectDeleted(_EventBase):
    type: Literal["ObjectDeleted"] = "ObjectDeleted"
    kind: str
    name: str
    namespace: str = ""


class Tick(_EventBase):
    type: Literal["Tick"] = "Tick"


class WorkloadFinished(_EventBase):
    type: Literal["WorkloadFinished"] = "WorkloadFinished"
    namespace: str
    name: str
    succeeded: bool = True
    message: str = ""
    # the workload key, for a kind other than a batch/v1 Job ("ns/pytorchjob/name");
    # None: the Job namespace/name (docs/design/workload-identity.md)
    workload: str | None = None


class PodsReady(_EventBase):
    type: Literal["PodsReady"] = "PodsReady"
    namespace: str
    name: str
    ready: bool = True
    workload: str | None = None  # as WorkloadFinished's


class PreemptionPlan(_EventBase):
    type: Literal["PreemptionPlan"] = "PreemptionPlan"
    preemptor: str  # "namespace/name"
    victims: list[str]  # "namespace/name", in the order they were chosen
    reasons: dict[str, str] = Field(default_factory=dict)  # victim -> Kueue preemption reason
    based_on: str = ""  # id of the last journal event the plan's state had folded


class ActuationFailed(_EventBase):
    """A decision the actuator could not apply (id ``actuationfailed/<decision_id>``)."""

    type: Literal["ActuationFailed"] = "ActuationFailed"
    decision_id: str
    workload: str  # "namespace/name"
    reason: str  # machine-readable, CamelCase, e.g. JobNotFound, FailedToStart
    message: str = ""
    decision_type: str | None = None  # the Decision's type, e.g. "Admitted"
    # JobChanged: the Job's metadata.generation as the actuator found it
    generation: int | None = None


class WorkloadStopped(_EventBase):
    """A stopped workload's pods are gone (id ``workloadstopped/<decision_id>``): no pod
    labelled ``batch.kubernetes.io/controller-uid=<uid>`` is left outside phase
    Succeeded/Failed, terminating ones included. Its ``at`` is the stop decision's."""

    type: Literal["WorkloadStopped"] = "WorkloadStopped"
    workload: str  # "namespace/name"
    uid: str  # the Job's uid the stop decision named
    decision_id: str  # the stop decision (Preempted, Evicted, Deactivated, Finished Deleted)
    waited: float = 0.0  # seconds the actuator waited for the pods, for people


JournalEvent = Annotated[
    ObjectUpserted
    | ObjectDeleted
    | Tick
    | WorkloadFinished
    | PodsReady
    | PreemptionPlan
    | ActuationFailed
    | WorkloadStopped,
    Field(discriminator="type"),
]
_event_adapter: TypeAdapter[JournalEvent] = TypeAdapter(JournalEvent)


def parse_event(data: bytes | str | dict[str, Any]) -> JournalEvent:
    """Decode a journal record (JSON bytes/str or a dict). Raises ``pydantic.ValidationError``."""
    if isinstance(data, dict):
        return _event_adapter.validate_python(data)
    return _event_adapter.validate_json(data)


DecisionType = Literal[
    "Admitted",  # quota reserved and workload admitted; flavors + usage set
    "Preempted",  # evicted to make room; reason in InClusterQueue | InCohortReclamation |
    #              InCohortFairSharing | InCohortReclaimWhileBorrowing; preemptor set
    "Evicted",  # evicted for another cause, e.g. PodsReadyTimeout, ClusterQueueStopped
    "Requeued",  # back in its queue after eviction/backoff
    "Finished",  # the Job finished; quota released
    "Inadmissible",  # cannot be admitted now; reason + message say why (re-emitted on change)
    "Deactivated",  # taken out of queueing by policy (e.g. backoffLimitCount reached)
    "Rejected",  # an object (queue, flavor, config, DRA object) failed validation
    "QuotaChanged",  # a ClusterQueue's quota, as the fold decides against it, took effect:
    #                 cohort + quota set; reason Deleted (no quota) when it is gone
    "Suspended",  # a managed Job observed running without an admission: suspend it again
    #              (reason StartedWithoutAdmission); the workload keeps its place
    "QuotaReleased",  # a stopped workload's pods are gone (WorkloadStopped): the usage it
    #                  kept since its stop decision (stop_id) is released; usage set
    "LocalQueueUsage",  # admission fair sharing sampled a LocalQueue (object): its decayed
    #                    consumed resources and weighted_usage (the LocalQueue's fairSharing)
]
DECISION_TYPES: tuple[str, ...] = DecisionType.__args__  # type: ignore[attr-defined]


class Decision(_Frozen):
    schema_version: int = SCHEMA_VERSION
    id: str  # deterministic: decision_id(cause, index)
    cause: str  # id of the journal event that caused it
    cause_offset: int | None = None  # journal offset of that event, set by the pipeline
    at: float
    type: DecisionType
    workload: str | None = None  # the key: "namespace/name" of a Job, else "namespace/<kind>/name"
    uid: str | None = None
    cluster_queue: str | None = None
    flavors: dict[str, dict[str, str]] | None = None  # podset -> resource -> flavor
    usage: dict[str, dict[str, str]] | None = None  # flavor -> resource -> quantity
    reason: str | None = None  # machine-readable, CamelCase
    message: str | None = None  # for people
    preemptor: str | None = None
    policy: str | None = None  # the preemption policy that allowed a preemption
    victims: list[str] | None = None
    object: str | None = None  # for Rejected: "Kind namespace/name"
    requeue_at: float | None = None  # for Evicted with backoff
    cohort: str | None = None  # for QuotaChanged: the ClusterQueue's cohort
    # for QuotaChanged: flavor -> resource -> {"nominalQuota", and "borrowingLimit" /
    # "lendingLimit" when set} as quantities, in the ClusterQueue's resource-group order
    quota: dict[str, dict[str, dict[str, str]]] | None = None
    # for Admitted: the Job's metadata.generation the fold decided on; the actuator
    # starts the Job only at that generation (docs/design/backstop.md)
    generation: int | None = None
    # for Admitted of a workload with node-local DRA claims: podset -> the nodes its
    # pods were placed on (sorted, unique); the actuator pins the podset's pods to
    # them (docs/design/dra-placement.md, #17)
    nodes: dict[str, list[str]] | None = None
    # for QuotaReleased: the id of the stop decision whose kept quota is released
    stop_id: str | None = None
    # the kind and apiVersion of the object the decision is about: the workload's
    # ("Job", "batch/v1"; "PyTorchJob", "kubeflow.org/v1"), or a Rejected or
    # QuotaChanged object's (docs/design/workload-identity.md)
    kind: str | None = None
    api_version: str | None = None
    # for LocalQueueUsage: resource -> decayed consumed quantity, and the usage that
    # orders the LocalQueue's workloads (None: weight 0)
    consumed: dict[str, str] | None = None
    weighted_usage: float | None = None


# Trusted construction: the fold builds every Decision from fields it computed
# itself (strings, a float time, maps of strings), so it skips validation.
_DECISION_TEMPLATE: dict[str, Any] = {
    name: None if info.is_required() else info.default
    for name, info in Decision.model_fields.items()
}
_new_object = object.__new__
# The setters of BaseModel's four instance slots, called directly: what
# ``object.__setattr__`` finds for these names, without the lookup each time.
_set_dict = cast("Any", BaseModel.__dict__["__dict__"]).__set__
_set_fields_set = cast("Any", BaseModel.__dict__["__pydantic_fields_set__"]).__set__
_set_extra = cast("Any", BaseModel.__dict__["__pydantic_extra__"]).__set__
_set_private = cast("Any", BaseModel.__dict__["__pydantic_private__"]).__set__


def trusted_decision(data: dict[str, Any]) -> Decision:
    """The Decision ``Decision.model_validate(data)`` returns, without validating:
    only for ``data`` kuota built itself (the fold's decisions), never for
    input from outside (``parse_decision`` is for that). Same field values and
    order, same ``model_fields_set``, nested maps and lists copied as
    validation copies them (``tests/unit/events/test_events_schema_trusted_decision.py``
    compares the two). A third of the cost of validation, per decision."""
    fields = _DECISION_TEMPLATE.copy()
    fields.update(data)
    at = fields["at"]
    if type(at) is not float:
        fields["at"] = float(at)
    flavors = fields["flavors"]
    if flavors is not None:
        fields["flavors"] = {k: dict(v) for k, v in flavors.items()}
    usage = fields["usage"]
    if usage is not None:
        fields["usage"] = {k: dict(v) for k, v in usage.items()}
    victims = fields["victims"]
    if victims is not None:
        fields["victims"] = list(victims)
    requeue_at = fields["requeue_at"]
    if requeue_at is not None and type(requeue_at) is not float:
        fields["requeue_at"] = float(requeue_at)
    consumed = fields["consumed"]
    if consumed is not None:
        fields["consumed"] = dict(consumed)
    quota = fields["quota"]
    if quota is not None:
        fields["quota"] = {f: {r: dict(q) for r, q in rs.items()} for f, rs in quota.items()}
    decision: Decision = _new_object(Decision)
    _set_dict(decision, fields)
    _set_fields_set(decision, set(data))
    _set_extra(decision, None)
    _set_private(decision, None)
    return decision


# Trusted construction of the journal events the simulation engine writes itself
# (``kuota.sim.engine``): the fields are an id string, a float time and values
# it computed, so validation has nothing to check. Same values, field order and
# ``model_fields_set`` as ``Model.model_validate(fields)``
# (``tests/unit/events/test_events_schema_trusted_events.py`` compares them).
def _template(model: type[BaseModel]) -> dict[str, Any]:
    return {
        name: None if info.is_required() else info.default
        for name, info in model.model_fields.items()
    }


_TICK_TEMPLATE = _template(Tick)
_UPSERTED_TEMPLATE = _template(ObjectUpserted)
_DELETED_TEMPLATE = _template(ObjectDeleted)
_PODS_READY_TEMPLATE = _template(PodsReady)
_FINISHED_TEMPLATE = _template(WorkloadFinished)
_TICK_SET = frozenset(("id", "at"))
_UPSERTED_SET = frozenset(("id", "at", "object"))
_DELETED_SET = frozenset(("id", "at", "kind", "name", "namespace"))
_PODS_READY_SET = frozenset(("id", "at", "namespace", "name", "ready"))
_FINISHED_SET = frozenset(("id", "at", "namespace", "name", "succeeded"))


_M = TypeVar("_M", bound=BaseModel)


def _trusted(
    model: type[_M], template: dict[str, Any], fields_set: frozenset[str], data: dict[str, Any]
) -> _M:
    event: _M = _new_object(model)
    _set_dict(event, {**template, **data})  # the template's field order, data's values
    _set_fields_set(event, set(fields_set))
    _set_extra(event, None)
    _set_private(event, None)
    return event


def trusted_tick(id: str, at: float) -> Tick:
    """``Tick.model_validate({"id": id, "at": at})`` without validating: only for a
    ``str`` id and a ``float`` time kuota computed itself (the simulation engine)."""
    return _trusted(Tick, _TICK_TEMPLATE, _TICK_SET, {"id": id, "at": at})


def trusted_upserted(id: str, at: float, obj: dict[str, Any]) -> ObjectUpserted:
    """``ObjectUpserted.model_validate({"id": id, "at": at, "object": obj})`` without
    validating. Validation copies ``object`` (one level, as ``dict(obj)``); so does
    this, so the event never shares its top-level map with the caller."""
    return _trusted(
        ObjectUpserted, _UPSERTED_TEMPLATE, _UPSERTED_SET, {"id": id, "at": at, "object": dict(obj)}
    )


def trusted_deleted(id: str, at: float, kind: str, name: str, namespace: str) -> ObjectDeleted:
    """``ObjectDeleted.model_validate`` of these five fields (all strings but a
    float ``at``), without validating."""
    return _trusted(
        ObjectDeleted,
        _DELETED_TEMPLATE,
        _DELETED_SET,
        {"id": id, "at": at, "kind": kind, "name": name, "namespace": namespace},
    )


def trusted_pods_ready(id: str, at: float, namespace: str, name: str) -> PodsReady:
    """``PodsReady.model_validate`` of id, at, namespace, name and ``ready=True``."""
    return _trusted(
        PodsReady,
        _PODS_READY_TEMPLATE,
        _PODS_READY_SET,
        {"id": id, "at": at, "namespace": namespace, "name": name, "ready": True},
    )


def trusted_finished(id: str, at: float, namespace: str, name: str) -> WorkloadFinished:
    """``WorkloadFinished.model_validate`` of id, at, namespace, name and ``succeeded=True``."""
    return _trusted(
        WorkloadFinished,
        _FINISHED_TEMPLATE,
        _FINISHED_SET,
        {"id": id, "at": at, "namespace": namespace, "name": name, "succeeded": True},
    )


def decision_id(cause: str, index: int) -> str:
    """A deterministic decision id: same cause event and position, same id (the
    first 24 hex digits of sha256 over ``cause``, a NUL and ``index``)."""
    digest = _SHA256_EMPTY.copy()  # a copy skips OpenSSL's per-call digest lookup
    digest.update(f"{cause}\x00{index}".encode())
    return digest.hexdigest()[:24]


_SHA256_EMPTY = hashlib.sha256()


_decision_adapter: TypeAdapter[Decision] = TypeAdapter(Decision)


def parse_decision(data: bytes | str | dict[str, Any]) -> Decision:
    if isinstance(data, dict):
        return _decision_adapter.validate_python(data)
    return _decision_adapter.validate_json(data)
