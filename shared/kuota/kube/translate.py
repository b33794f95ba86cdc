"""Observed Kubernetes objects -> journal events (pure: no I/O, no clock).

Theory of operation: ingest sees a stream of changes per object (an upsert
with the apiserver's manifest, or a delete). For each change it calls
:func:`translate_upsert` / :func:`translate_delete` with the object and what it
remembered about it (:class:`Seen`, ``None`` the first time) and gets back the
journal events to write and what to remember next. The manifest is journaled
without ``status``, managed fields and the simulation-only annotations (a Job,
a Pod, a Node and a ResourceClaim: only what the fold reads of them, a claim's
allocation included), and
only when :func:`fold_digest` (what the fold reads, minus kuota's own
bookkeeping on a Job) changed: of the actuator's writes only the ``spec.suspend``
flips and template restores echo back (the backstop reads the flips, each
``metadata.generation`` counts). A Job's status becomes ``WorkloadFinished``
(once per uid) and ``PodsReady`` (on each flip).
Ids are deterministic; ``at`` (ingest's clock) is an argument. Never raises:
a change that is not a named object yields a ``problem`` for the log; validity
is the fold's business. The rules in full: docs/design/ingest.md.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from kuota import kinds
from kuota.actuation.workloads import user_templates
from kuota.api.not_journaled import NOT_JOURNALED_ANNOTATION
from kuota.api.parse_job import ACTIVE_ANNOTATION, CREATED_AT_ANNOTATION, DECISION_ID_ANNOTATION
from kuota.api.parse_workloads import (
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    ROLE_HASH_ANNOTATION,
)
from kuota.events.schema import (
    JournalEvent,
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    Tick,
    WorkloadFinished,
)
from kuota.kinds import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from kuota.kube.projections import (
    claim_projection,
    node_projection,
    pick,
)
from kuota.kube.readiness import FINISHED_BY, STATUS_RULES, condition_true

# The apiVersion of every kind ingest journals, for LIST items (which carry none).
API_VERSIONS: dict[str, str] = {k.kind: k.api_version for k in kinds.JOURNALED}
KUOTA_ANNOTATION_PREFIX = "kuota.dev/"
# kuota.dev/ annotations the fold reads on a real Job (kuota.api.parse_job):
# kuota.dev/active is the user's lever to deactivate a workload (Kueue's
# Workload spec.active). Every other kuota.dev/ one is kuota's own bookkeeping
# and ignored by the digest.
FOLD_ANNOTATIONS = frozenset({ACTIVE_ANNOTATION})
# kuota.dev/ annotations the fold reads that only synthetic journals may carry:
# a real Job is journaled without them (the queue order of real Jobs comes from
# metadata.creationTimestamp).
SIMULATION_ANNOTATIONS = frozenset({CREATED_AT_ANNOTATION})
# Written by the actuator (kuota.actuation.patch.ANN_ORIGINAL): the pod template's
# nodeSelector and tolerations before the first flavor was injected (and its affinity
# before a podset was pinned to nodes).
ORIGINAL_SCHEDULING_ANNOTATION = "kuota.dev/original-pod-template-scheduling"
# On a Job journaled by a pipeline whose KUOTA_JOB_LABEL_SELECTOR it left (its
# value: that selector); the fold does not read it.
OUTSIDE_SELECTOR_ANNOTATION = "kuota.dev/outside-job-selector"
CONFIG_KINDS = kinds.names("config")
CONFIG_FILE_NAME = "kuota-config-file"  # metadata.name of a file Configuration without one
# The workload kinds beyond Job that ingest journals (#18): each one's pod templates
# are journaled as the user wrote them, and its status gives PodsReady/WorkloadFinished.
STATUS_KINDS = frozenset({"PyTorchJob", "RayCluster", "RayJob", "JobSet"})


@dataclass(frozen=True, slots=True)
class Seen:
    """What ingest remembers about one object between changes (and restarts)."""

    rv: str  # last observed resourceVersion (journaled or not)
    digest: str  # fold_digest of the last journaled upsert
    uid: str = ""
    finished: bool = False  # WorkloadFinished written for this uid
    ready: bool = False  # last PodsReady value written for this uid

    def dumps(self) -> str:
        return json.dumps(
            [self.rv, self.digest, self.uid, int(self.finished), int(self.ready)],
            separators=(",", ":"),
        )

    @classmethod
    def loads(cls, text: str | bytes) -> Seen | None:
        """The inverse of :meth:`dumps`; ``None`` for anything unreadable."""
        try:
            rv, digest, uid, finished, ready = json.loads(text)
        except (ValueError, TypeError):
            return None
        if not (isinstance(rv, str) and isinstance(digest, str) and isinstance(uid, str)):
            return None
        return cls(rv, digest, uid, bool(finished), bool(ready))


@dataclass(frozen=True, slots=True)
class Translation:
    events: tuple[JournalEvent, ...] = ()
    seen: Seen | None = None  # what to remember next; None: forget the object
    skipped: bool = False  # an upsert the digest rule left out of the journal
    problem: str | None = None  # why the change was not understood (for the log)


# --------------------------------------------------------------------------- helpers


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    md = obj.get("metadata")
    return md if isinstance(md, Mapping) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def object_key(kind: str, obj: Mapping[str, Any]) -> str:
    """``<Kind>/<namespace>/<name>``: the name of an object in ingest's memory."""
    md = _meta(obj)
    return f"{kind}/{_str(md.get('namespace'))}/{_str(md.get('name'))}"


_SCHEDULING = ("nodeSelector", "tolerations")


def original_scheduling(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod template's ``nodeSelector`` / ``tolerations`` as the user wrote them.

    ``None`` when the actuator's record is present but unreadable; otherwise a
    dict with the keys that are set (an empty selector or list is absent, as
    Kubernetes treats it), and ``affinity`` (None: the template had none) when the
    record has it: the actuator pinned the template to nodes."""
    annotations = _meta(obj).get("annotations")
    recorded = (
        annotations.get(ORIGINAL_SCHEDULING_ANNOTATION)
        if isinstance(annotations, Mapping)
        else None
    )
    if recorded is None:
        source: object = _pod_spec(obj)
    else:
        try:
            source = json.loads(recorded) if isinstance(recorded, str) else None
        except ValueError:
            return None
        if not isinstance(source, Mapping):
            return None
    assert isinstance(source, Mapping)
    out = {k: source[k] for k in _SCHEDULING if source.get(k)}
    if recorded is not None and "affinity" in source:
        out["affinity"] = source["affinity"]
    return out


def _pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    return pod_spec if isinstance(pod_spec, Mapping) else {}


# What the fold reads of a Job (kuota.api.parse_job.read_job and the backstop), and
# so all of a Job that is journaled: the fields that decide its place and charge.
# A tenant's env values, args, images, volumes and template metadata stay out of
# a journal kept forever, and a Job large by those is journaled small.
JOB_METADATA = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp")
JOB_LABELS = (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL)
JOB_ANNOTATIONS = (ACTIVE_ANNOTATION, DECISION_ID_ANNOTATION)
JOB_SPEC = ("parallelism", "completions", "suspend")
POD_SPEC = ("nodeSelector", "tolerations", "overhead", "resourceClaims")
CONTAINER = ("name", "resources", "restartPolicy")  # restartPolicy: an init container's
RESOURCES = ("requests", "limits")
REQUIRED_AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


def _containers(value: object) -> object:
    if not isinstance(value, list):
        return copy.deepcopy(value)
    out: list[object] = []
    for c in value:
        if isinstance(c, Mapping):
            picked = {k: copy.deepcopy(c[k]) for k in CONTAINER if k in c and k != "resources"}
            if "resources" in c:
                picked["resources"] = pick(c["resources"], RESOURCES)
            out.append(picked)
        else:
            out.append(copy.deepcopy(c))
    return out


def _affinity(value: object) -> object:
    if not isinstance(value, Mapping):
        return copy.deepcopy(value)
    if "nodeAffinity" not in value:
        return {}
    return {"nodeAffinity": pick(value["nodeAffinity"], (REQUIRED_AFFINITY,))}


def _job_projection(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the fold reads of a Job, each field copied as found (a field of the
    wrong type is kept, so it is rejected as it would be in the whole Job)."""
    out: dict[str, Any] = {k: copy.deepcopy(obj[k]) for k in ("apiVersion", "kind") if k in obj}
    md = obj.get("metadata")
    if isinstance(md, Mapping):
        meta: dict[str, Any] = {k: copy.deepcopy(md[k]) for k in JOB_METADATA if k in md}
        for field, keys in (("labels", JOB_LABELS), ("annotations", JOB_ANNOTATIONS)):
            if field in md:
                picked = pick(md[field], keys)
                if picked != {}:
                    meta[field] = picked
        out["metadata"] = meta
    elif "metadata" in obj:
        out["metadata"] = copy.deepcopy(md)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        if "spec" in obj:
            out["spec"] = copy.deepcopy(spec)
        return out
    pspec: dict[str, Any] = {k: copy.deepcopy(spec[k]) for k in JOB_SPEC if k in spec}
    out["spec"] = pspec
    if "template" not in spec:
        return out
    template = spec["template"]
    if not isinstance(template, Mapping):
        pspec["template"] = copy.deepcopy(template)
        return out
    pspec["template"] = {}
    if "spec" not in template:
        return out
    pod = template["spec"]
    if not isinstance(pod, Mapping):
        pspec["template"]["spec"] = copy.deepcopy(pod)
        return out
    ppod: dict[str, Any] = {k: copy.deepcopy(pod[k]) for k in POD_SPEC if k in pod}
    for k in ("containers", "initContainers"):
        if k in pod:
            ppod[k] = _containers(pod[k])
    if "affinity" in pod:
        ppod["affinity"] = _affinity(pod["affinity"])
    pspec["template"]["spec"] = ppod
    annotations = _meta(obj).get("annotations")
    if isinstance(annotations, Mapping) and ORIGINAL_SCHEDULING_ANNOTATION in annotations:
        original = original_scheduling(obj)  # the user's, not the actuator's injected flavor
        if original is not None:
            for k in _SCHEDULING:
                ppod.pop(k, None)
            user = copy.deepcopy(original)
            if "affinity" in user:  # pinned to nodes: the user's affinity, not the pin
                ppod.pop("affinity", None)
                affinity = user.pop("affinity")
                if affinity is not None:
                    ppod["affinity"] = _affinity(affinity)
            ppod.update(user)
    return out


# What the fold reads of a Pod (kuota.api.parse_workloads.read_pod), and so all of a
# Pod that is journaled: a Job's metadata, the pod-group label and annotations, the
# pod spec as a Job's template (no env, args, images, volumes) with its scheduling
# gates, the phase (a Failed Pod does not count) and the deletion mark; its
# controller owner (a Job's pod is no group member: kuota.kinds.managed_owner).
POD_METADATA = (*JOB_METADATA, "deletionTimestamp")
POD_LABELS = (*JOB_LABELS, POD_GROUP_NAME_LABEL)
POD_ANNOTATIONS = (ACTIVE_ANNOTATION, POD_GROUP_TOTAL_COUNT_ANNOTATION, ROLE_HASH_ANNOTATION)
POD_SPEC_PODS = (*POD_SPEC, "schedulingGates")
OWNER_REFERENCE = ("apiVersion", "kind", "name", "uid", "controller")


def _owners(value: object) -> object:
    """The controller owner references (the only ones the fold reads), trimmed."""
    if not isinstance(value, list):
        return copy.deepcopy(value)
    return [
        pick(ref, OWNER_REFERENCE)
        for ref in value
        if isinstance(ref, Mapping) and ref.get("controller") is True
    ]


def _pod_spec_projection(pod: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: copy.deepcopy(pod[k]) for k in POD_SPEC_PODS if k in pod}
    for k in ("containers", "initContainers"):
        if k in pod:
            out[k] = _containers(pod[k])
    if "affinity" in pod:
        out["affinity"] = _affinity(pod["affinity"])
    return out


def _pod_projection(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the fold reads of a Pod (:data:`POD_METADATA` ... :data:`POD_SPEC_PODS`),
    each field copied as found, as for a Job."""
    out: dict[str, Any] = {k: copy.deepcopy(obj[k]) for k in ("apiVersion", "kind") if k in obj}
    md = obj.get("metadata")
    if isinstance(md, Mapping):
        meta: dict[str, Any] = {k: copy.deepcopy(md[k]) for k in POD_METADATA if k in md}
        for field, keys in (("labels", POD_LABELS), ("annotations", POD_ANNOTATIONS)):
            if field in md:
                picked = pick(md[field], keys)
                if picked != {}:
                    meta[field] = picked
        if "ownerReferences" in md:
            owners = _owners(md["ownerReferences"])
            if owners != []:
                meta["ownerReferences"] = owners
        out["metadata"] = meta
    elif "metadata" in obj:
        out["metadata"] = copy.deepcopy(md)
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        out["spec"] = _pod_spec_projection(spec)
    elif "spec" in obj:
        out["spec"] = copy.deepcopy(spec)
    status = obj.get("status")
    if isinstance(status, Mapping) and "phase" in status:
        out["status"] = {"phase": copy.deepcopy(status["phase"])}
    return out


_PROJECTIONS = {
    "Pod": _pod_projection,
    "Node": node_projection,
    "ResourceClaim": claim_projection,
}


def journal_object(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest as journaled, kind and apiVersion set. A Job: only what the fold
    reads (:data:`JOB_METADATA` ... :data:`REQUIRED_AFFINITY`; no status, no
    simulation-only annotation), its pod template with the user's own node selector
    and tolerations. A Pod: only what the fold reads (:data:`POD_METADATA` ...), its
    phase the one status field. A Node: only what the fold reads
    (:data:`NODE_METADATA` ...), its allocatable the one status field. A
    ResourceClaim: its identity, ``spec.devices`` and its allocation's results
    (:data:`CLAIM_METADATA` ...). Any other kind: all but status and managed
    fields (a training kind's pod templates with the user's own node selector and
    tolerations, from the actuator's record:
    ``kuota.actuation.workloads.user_templates``). Never
    ingest's stand-in marker (``kuota.api.not_journaled``): only :func:`stand_in` sets it."""
    project = _PROJECTIONS.get(kind)
    if kind == "Job":
        out = _job_projection(obj)
    elif project is not None:
        out = project(obj)
    else:
        source = user_templates(obj) if kind in STATUS_KINDS else obj
        out = {k: copy.deepcopy(v) for k, v in source.items() if k != "status"}
        md = out.get("metadata")
        if isinstance(md, dict):
            md.pop("managedFields", None)
            annotations = md.get("annotations")
            if isinstance(annotations, dict):
                annotations.pop(NOT_JOURNALED_ANNOTATION, None)
    out["kind"] = _str(out.get("kind")) or kind
    if not out.get("apiVersion") and kind in API_VERSIONS:
        out["apiVersion"] = API_VERSIONS[kind]
    return out


def stand_in(event: ObjectUpserted, size: int, limit: int) -> ObjectUpserted:
    """The upsert to journal instead of ``event``, whose record would be ``size`` bytes,
    over ``limit``: same id and time, the object's identity (a Job's queue and priority
    labels too) and why (``kuota.api.not_journaled``); the fold rejects it."""
    obj = event.object
    kind = _str(obj.get("kind"))
    md = _meta(obj)
    meta: dict[str, Any] = {k: md[k] for k in JOB_METADATA if isinstance(md.get(k), str | int)}
    labels = md.get("labels")
    if kind in ("Job", "Pod") and isinstance(labels, Mapping):
        keys = JOB_LABELS if kind == "Job" else POD_LABELS
        meta["labels"] = {k: labels[k] for k in keys if isinstance(labels.get(k), str)}
    projected = kind == "Job" or kind in _PROJECTIONS
    what = "its projection (what the fold reads)" if projected else "the object"
    meta["annotations"] = {
        NOT_JOURNALED_ANNOTATION: (
            f"{what} is {size:,} bytes as a journal event, over the journal's limit of "
            f"{limit:,} bytes: make it smaller"
            + (" (node selector, tolerations, affinity, containers)" if kind == "Job" else "")
        )
    }
    out: dict[str, Any] = {"kind": kind, "metadata": meta}
    if isinstance(obj.get("apiVersion"), str):
        out["apiVersion"] = obj["apiVersion"]
    return ObjectUpserted(id=event.id, at=event.at, object=out)


def _job_spec_projection(obj: Mapping[str, Any]) -> object:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return spec
    # spec.suspend counts (the backstop reads it: docs/design/backstop.md), as a
    # bool: the apiserver defaults it to false, a synthetic manifest may omit it.
    out = {k: v for k, v in spec.items() if k != "suspend"}
    out["suspend"] = spec.get("suspend") is True
    template = out.get("template")
    user = original_scheduling(obj)
    if isinstance(template, Mapping):
        tspec = template.get("spec")
        if isinstance(tspec, Mapping):
            tspec = {k: v for k, v in tspec.items() if k not in _SCHEDULING}
            if user is not None and "affinity" in user:
                # pinned to nodes: digested with the user's affinity in its place, as
                # the same template before the pin and after its restore
                tspec.pop("affinity", None)
                if user["affinity"] is not None:
                    tspec["affinity"] = user["affinity"]
            out["template"] = {**template, "spec": tspec}
    if user is not None:
        user = {k: v for k, v in user.items() if k != "affinity"}
    out["scheduling (user)"] = user
    return out


def fold_digest(kind: str, obj: Mapping[str, Any]) -> str:
    """A digest of what the fold reads of ``obj`` (docs/design/ingest.md, the digest rule).
    A Pod's, a Node's and a ResourceClaim's: of its projection but the
    resourceVersion (a Pod's phase counts: a Failed Pod leaves its group's count; a
    Node's allocatable counts; a claim's allocation and reservations count; the
    rest of their status, kubelet's heartbeats and conditions, a driver's device
    status, does not)."""
    project = _PROJECTIONS.get(kind)
    if project is not None:
        projected = project(obj)
        if isinstance(projected.get("metadata"), dict):
            projected["metadata"].pop("resourceVersion", None)
        text = json.dumps(projected, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(f"{kind}:{text}".encode()).hexdigest()[:32]
    md = _meta(obj)
    annotations = md.get("annotations")
    if kind == "Job" and isinstance(annotations, Mapping):
        annotations = {
            k: v
            for k, v in annotations.items()
            if not str(k).startswith(KUOTA_ANNOTATION_PREFIX) or k in FOLD_ANNOTATIONS
        }
    projection: dict[str, Any] = {
        "kind": kind,
        "metadata": {
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
            "creationTimestamp": md.get("creationTimestamp"),
            "labels": md.get("labels") or {},
            "annotations": annotations or {},
        },
    }
    if kind == "Job":
        # The Admitted decision carries it and the actuator starts the Job only at
        # it, so the fold must see each one: kuota's own template restore included.
        projection["metadata"]["generation"] = md.get("generation")
    for k, v in obj.items():
        if k in ("apiVersion", "kind", "metadata", "status"):
            continue
        projection[k] = _job_spec_projection(obj) if kind == "Job" and k == "spec" else v
    text = json.dumps(projection, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def tick(at: float) -> Tick:
    return Tick(id=f"tick@{at!r}", at=at)


# --------------------------------------------------------------------------- translation


def outside_selector(manifest: dict[str, Any], selector: str) -> dict[str, Any]:
    """A journaled Job as a pipeline whose Job selector it left sees it: without its
    queue label (the label counts only inside the selector), so the fold stops it as
    a Job whose label was removed; ``OUTSIDE_SELECTOR_ANNOTATION`` says why."""
    md = manifest.get("metadata")
    if isinstance(md, dict):
        labels = md.get("labels")
        if isinstance(labels, dict):
            labels.pop(QUEUE_NAME_LABEL, None)
        annotations = md.get("annotations")
        if not isinstance(annotations, dict):
            annotations = md["annotations"] = {}
        annotations[OUTSIDE_SELECTOR_ANNOTATION] = selector
    return manifest


def translate_upsert(
    kind: str, obj: object, prev: Seen | None, *, at: float, outside: str | None = None
) -> Translation:
    """Events for an added or modified object; ``prev`` is what was remembered.
    ``outside``: the Job selector a remembered Job no longer matches (see
    :func:`outside_selector`)."""
    if not isinstance(obj, Mapping):
        return Translation(seen=prev, problem=f"{kind}: not an object ({type(obj).__name__})")
    md = _meta(obj)
    name, namespace = _str(md.get("name")), _str(md.get("namespace"))
    if not name:
        return Translation(seen=prev, problem=f"{kind}: an object without metadata.name")
    rv = _str(md.get("resourceVersion"))
    uid = _str(md.get("uid"))
    try:
        digest = fold_digest(kind, obj)
        manifest = journal_object(kind, obj)
        if outside is not None and kind == "Job":
            manifest = outside_selector(manifest, outside)
            digest = f"outside:{digest}"  # leaving (or re-entering) the selector counts
    except (TypeError, ValueError, RecursionError) as e:
        return Translation(seen=prev, problem=f"{kind} {namespace}/{name}: {e}")

    if prev is not None and prev.uid != uid:
        prev = None  # a new object under the same name: nothing carries over
    events: list[JournalEvent] = []
    skipped = prev is not None and prev.digest == digest
    if not skipped:
        events.append(ObjectUpserted(id=f"{kind}/{namespace}/{name}@{rv}", at=at, object=manifest))
    seen = Seen(rv=rv, digest=digest, uid=uid)
    if prev is not None:
        seen = replace(seen, finished=prev.finished, ready=prev.ready)
    if kind in STATUS_RULES:
        seen = _status_events(kind, obj, seen, name=name, namespace=namespace, at=at, out=events)
    return Translation(events=tuple(events), seen=seen, skipped=skipped)


def _status_events(
    kind: str,
    obj: Mapping[str, Any],
    seen: Seen,
    *,
    name: str,
    namespace: str,
    at: float,
    out: list[JournalEvent],
) -> Seen:
    """PodsReady on each flip and WorkloadFinished once per uid, from the kind's status
    (a Job's keyed ``ns/name`` as always; another kind's by its workload key)."""
    if seen.finished:
        return seen
    is_ready, finishing, success = STATUS_RULES[kind]
    status = obj.get("status")
    status = status if isinstance(status, Mapping) else {}
    ns = namespace or "default"
    workload = None if kind == "Job" else kinds.workload_key(kind, ns, name)
    label = f"{ns}/{name}" if workload is None else workload
    uid = seen.uid or label
    ready = is_ready(obj)
    ended = FINISHED_BY.get(kind)
    done = ended(obj) if ended is not None else condition_true(status, finishing)
    # Readiness first: a Job that completes in one step was ready on its way there.
    if ready != seen.ready:
        out.append(
            PodsReady(
                id=f"podsready/{label}/{uid}/{str(ready).lower()}@{seen.rv}",
                at=at,
                namespace=ns,
                name=name,
                ready=ready,
                workload=workload,
            )
        )
        seen = replace(seen, ready=ready)
    if done is not None:
        message = _str(done.get("message")) or _str(done.get("reason"))
        out.append(
            WorkloadFinished(
                id=f"finished/{label}/{uid}",
                at=at,
                namespace=ns,
                name=name,
                succeeded=done.get("type") == success,
                message=message,
                workload=workload,
            )
        )
        seen = replace(seen, finished=True)
    return seen


def translate_delete(kind: str, obj: object, prev: Seen | None, *, at: float) -> Translation:
    """Events for a deleted object (from a watch DELETED or a relist's diff)."""
    if not isinstance(obj, Mapping):
        return Translation(seen=prev, problem=f"{kind}: not an object ({type(obj).__name__})")
    md = _meta(obj)
    name, namespace = _str(md.get("name")), _str(md.get("namespace"))
    if not name:
        return Translation(seen=prev, problem=f"{kind}: a deleted object without metadata.name")
    rv = _str(md.get("resourceVersion")) or (prev.rv if prev is not None else "")
    return Translation(
        events=(
            ObjectDeleted(
                id=f"{kind}/{namespace}/{name}@{rv}/deleted",
                at=at,
                kind=kind,
                name=name,
                namespace=namespace,
            ),
        ),
        seen=None,
    )


def stub(kind: str, key: str, seen: Seen) -> dict[str, Any]:
    """A placeholder object for a remembered key (seeds a watcher after a restart)."""
    _, namespace, name = key.split("/", 2)
    md: dict[str, Any] = {"name": name, "resourceVersion": seen.rv}
    if namespace:
        md["namespace"] = namespace
    if seen.uid:
        md["uid"] = seen.uid
    return {"kind": kind, "metadata": md}


# --------------------------------------------------------------------------- configuration file


def config_file_object(text: str) -> dict[str, Any] | str:
    """The manifest to journal for a Configuration file, or why it cannot be one.

    The file holds one YAML document: an upstream Kueue ``Configuration``
    (what ``controller_manager_config.yaml`` holds), the operator's ``Kueue``,
    or a whole ``ConfigMap`` like ``kueue-manager-config``. Its
    ``metadata.resourceVersion`` becomes ``sha256-<digest of the text>`` so an
    unchanged file gives the same event id, and ``metadata.name`` defaults to
    ``kuota-config-file``.
    """
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        return f"not YAML: {e}"
    if len(docs) != 1:
        return f"want exactly one YAML document, found {len(docs)}"
    doc = docs[0]
    if not isinstance(doc, dict):
        return f"the document is a {type(doc).__name__}, not a mapping"
    kind = doc.get("kind")
    if kind not in CONFIG_KINDS:
        return f"kind {kind!r} is not one of {sorted(CONFIG_KINDS)}"
    md = doc.get("metadata")
    md = dict(md) if isinstance(md, dict) else {}
    md.setdefault("name", CONFIG_FILE_NAME)
    md["resourceVersion"] = "sha256-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return {**doc, "metadata": md}
