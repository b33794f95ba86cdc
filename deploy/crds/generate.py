#!/usr/bin/env python3
"""Generate kuota's CRDs for Kueue's kinds: ``deploy/crds/kueue.x-k8s.io_*.yaml``.

Theory of operation
-------------------
Users keep their Kueue manifests, so the five kinds kuota reads (ClusterQueue,
LocalQueue, ResourceFlavor, Cohort, WorkloadPriorityClass) are served under
Kueue's group ``kueue.x-k8s.io`` with Kueue's kind, plural, short names and field
names, at ``v1beta2`` (storage) and ``v1beta1`` (served).

kuota runs no conversion webhook (``conversion: None``): the apiserver stores
whatever body it was given and only rewrites ``apiVersion`` on the way out. Every
version must therefore accept every stored object, so each kind has ONE schema,
the union of the v1beta1 and v1beta2 field names (``cohort`` and ``cohortName``,
``parent`` and ``parentName``, ``flavorUsage`` and ``flavorsUsage``, the
``flavorFungibility`` values of both versions ...), and both versions carry it.
The rationale and the list of checks are in ``docs/design/crds.md``.

The schemas are written here from Kueue's Go types (``apis/kueue/v1beta{1,2}``),
one builder per Kueue type, so a sub-schema used in several places (resource
groups, flavor usage, conditions) is written once. Run::

    .venv/bin/python deploy/crds/generate.py          # rewrite the YAML
    .venv/bin/python deploy/crds/generate.py --check  # exit 1 if the YAML is stale

``tests/integration/test_crds.py`` runs the check and installs the YAML into a
real kube-apiserver.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

GROUP = "kueue.x-k8s.io"
STORAGE_VERSION = "v1beta2"
SERVED_VERSIONS = ("v1beta2", "v1beta1")
HERE = Path(__file__).resolve().parent

Schema = dict[str, Any]

# --------------------------------------------------------------------------- scalars

# DNS-1123 subdomain: what Kueue's *Reference types (ClusterQueue, Cohort,
# ResourceFlavor, Topology names) and object names accept.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

# resource.Quantity's textual grammar: a signed decimal number followed by a
# binary-SI suffix (Ki..Ei), a decimal-SI suffix (n u m k M G T P E) or an exponent.
_NUMBER = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
_SUFFIX = rf"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))"
QUANTITY = rf"^(\+|-)?{_NUMBER}{_SUFFIX}?$"
NONNEGATIVE_QUANTITY = rf"^\+?{_NUMBER}{_SUFFIX}?$"


def doc(text: str, schema: Schema) -> Schema:
    """``schema`` with a ``kubectl explain`` description."""
    return {"description": text, **{k: v for k, v in schema.items() if k != "description"}}


def string(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def ref(what: str) -> Schema:
    """A reference to a named object (Kueue's ``*Reference`` string types)."""
    return string(description=f"name of a {what}", maxLength=253, pattern=DNS_SUBDOMAIN)


def resource_name() -> Schema:
    """corev1.ResourceName, e.g. ``cpu``, ``nvidia.com/gpu``, a DRA quota name."""
    return string(minLength=1, maxLength=317)


def int32(**extra: Any) -> Schema:
    return {"type": "integer", "format": "int32", **extra}


def int64(**extra: Any) -> Schema:
    return {"type": "integer", "format": "int64", **extra}


def quantity(*, nonnegative: bool = False, **extra: Any) -> Schema:
    """resource.Quantity: an integer or a quantity string (``8``, ``"500m"``, ``"40Gi"``)."""
    schema: Schema = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": NONNEGATIVE_QUANTITY if nonnegative else QUANTITY,
    }
    if nonnegative:
        schema["minimum"] = 0  # applies to the integer form; the pattern to the string form
    schema.update(extra)
    return schema


def enum(*values: str, default: str | None = None, **extra: Any) -> Schema:
    schema = string(enum=list(values), **extra)
    if default is not None:
        schema["default"] = default
    return schema


def date_time() -> Schema:
    return string(format="date-time")


def obj(
    properties: dict[str, Schema],
    *,
    required: list[str] | None = None,
    rules: list[dict[str, str]] | None = None,
    **extra: Any,
) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if rules:
        schema["x-kubernetes-validations"] = rules
    schema.update(extra)
    return schema


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def list_map(items: Schema, key: str = "name", **extra: Any) -> Schema:
    """A list keyed by ``key`` (``+listType=map``): duplicates of the key are rejected."""
    return array(
        items, **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key], **extra}
    )


def rule(expression: str, message: str, field_path: str | None = None) -> dict[str, str]:
    r = {"rule": expression, "message": message}
    if field_path:
        r["fieldPath"] = field_path
    return r


# --------------------------------------------------------------------------- Kubernetes types


def condition() -> Schema:
    """metav1.Condition."""
    return obj(
        {
            "type": string(
                maxLength=316,
                pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            ),
            "status": enum("True", "False", "Unknown"),
            "observedGeneration": int64(minimum=0),
            "lastTransitionTime": date_time(),
            "reason": string(
                minLength=1, maxLength=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
            ),
            "message": string(maxLength=32768),
        },
        required=["type", "status", "lastTransitionTime", "reason", "message"],
    )


def conditions() -> Schema:
    return list_map(condition(), key="type", maxItems=16)


def label_selector() -> Schema:
    """metav1.LabelSelector."""
    return obj(
        {
            "matchLabels": {"type": "object", "additionalProperties": string()},
            "matchExpressions": array(
                obj(
                    {
                        "key": string(),
                        "operator": string(),  # In | NotIn | Exists | DoesNotExist
                        "values": array(string(), **{"x-kubernetes-list-type": "atomic"}),
                    },
                    required=["key", "operator"],
                ),
                **{"x-kubernetes-list-type": "atomic"},
            ),
        },
        **{"x-kubernetes-map-type": "atomic"},
    )


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def taint() -> Schema:
    """corev1.Taint; Kueue accepts the three scheduling effects only."""
    return obj(
        {
            "key": string(),
            "value": string(),
            "effect": enum(*TAINT_EFFECTS),
            "timeAdded": date_time(),
        },
        required=["key", "effect"],
    )


def toleration() -> Schema:
    """corev1.Toleration, with Kueue's ResourceFlavor rules (written per item)."""
    return obj(
        {
            "key": string(),
            "operator": enum("Equal", "Exists"),
            "value": string(),
            "effect": enum(*TAINT_EFFECTS),
            "tolerationSeconds": int64(),
        },
        rules=[
            rule(
                "has(self.key) || (has(self.operator) && self.operator == 'Exists')",
                "operator must be Exists when 'key' is empty, "
                "which means 'match all values and all keys'",
            ),
            rule(
                "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
                "effect must be 'NoExecute' when 'tolerationSeconds' is set",
            ),
            rule(
                "!(has(self.operator) && self.operator == 'Exists' && has(self.value)"
                " && self.value != '')",
                "a value must be empty when 'operator' is 'Exists'",
            ),
        ],
    )


# --------------------------------------------------------------------------- Kueue types


def resource_quota() -> Schema:
    """ResourceQuota: one resource's quota within a flavor."""
    return obj(
        {
            "name": resource_name(),
            "nominalQuota": doc(
                "Quota of this resource in this flavor that the queue owns; non-negative.",
                quantity(nonnegative=True),
            ),
            "borrowingLimit": doc(
                "Most this queue may borrow above nominalQuota from its cohort; "
                "unset means no limit. Needs a cohort (parent).",
                quantity(nonnegative=True),
            ),
            "lendingLimit": doc(
                "Most of the unused nominalQuota that may be lent to the cohort; "
                "unset means all of it. Needs a cohort (parent).",
                quantity(nonnegative=True),
            ),
        },
        required=["name", "nominalQuota"],
    )


def flavor_quotas() -> Schema:
    return obj(
        {
            "name": ref("ResourceFlavor"),
            "resources": list_map(resource_quota(), minItems=1, maxItems=64),
        },
        required=["name", "resources"],
    )


def resource_group() -> Schema:
    return obj(
        {
            "coveredResources": array(
                resource_name(), minItems=1, maxItems=64, **{"x-kubernetes-list-type": "atomic"}
            ),
            "flavors": list_map(flavor_quotas(), minItems=1, maxItems=64),
        },
        required=["coveredResources", "flavors"],
        rules=[
            # Kueue checks the count in its CRD and the names in its webhook; one
            # list comparison does both.
            rule(
                "self.flavors.all(f, f.resources.map(r, r.name) == self.coveredResources)",
                "each flavor must list the coveredResources, by name and in the same order",
                ".flavors",
            )
        ],
    )


def resource_groups() -> Schema:
    return array(resource_group(), maxItems=16, **{"x-kubernetes-list-type": "atomic"})


def limits_need_parent(parent_fields: tuple[str, str], what: str) -> dict[str, str]:
    """borrowingLimit / lendingLimit only mean something towards a parent cohort."""
    a, b = parent_fields
    return rule(
        f"has(self.{a}) || has(self.{b}) || !has(self.resourceGroups) || "
        "self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, "
        "!has(r.borrowingLimit) && !has(r.lendingLimit))))",
        f"borrowingLimit and lendingLimit must be unset when the {what}",
        ".resourceGroups",
    )


def same_value(a: str, b: str, meaning: str) -> dict[str, str]:
    """The v1beta1 and v1beta2 spellings of one field may both be set only if they agree."""
    return rule(
        f"!has(self.{a}) || !has(self.{b}) || self.{a} == self.{b}",
        f"{a} and {b} both name the {meaning}; when both are set they must be equal",
        f".{b}",
    )


def fair_sharing() -> Schema:
    return obj({"weight": quantity(nonnegative=True, default=1)})


def fair_sharing_status() -> Schema:
    """FairSharingStatus (ClusterQueue, Cohort) and LocalQueueFairSharingStatus."""
    return obj(
        {
            "weightedShare": int64(),
            "admissionFairSharingStatus": obj(
                {
                    "consumedResources": {
                        "type": "object",
                        "additionalProperties": quantity(),
                    },
                    "lastUpdate": date_time(),
                },
                required=["consumedResources", "lastUpdate"],
            ),
        },
        required=["weightedShare"],
    )


STOP_POLICY = ("None", "Hold", "HoldAndDrain")


def flavor_fungibility() -> Schema:
    # v1beta1 added Borrow / Preempt to MayStopSearch / TryNextFlavor; v1beta2
    # keeps only the latter two. A stored object may hold either.
    return obj(
        {
            "whenCanBorrow": enum(
                "MayStopSearch", "TryNextFlavor", "Borrow", default="MayStopSearch"
            ),
            "whenCanPreempt": enum(
                "MayStopSearch", "TryNextFlavor", "Preempt", default="TryNextFlavor"
            ),
            "preference": enum("BorrowingOverPreemption", "PreemptionOverBorrowing"),
        },
        rules=[
            rule(
                "!has(self.preference) || "
                "(has(self.whenCanBorrow) && self.whenCanBorrow == 'TryNextFlavor' && "
                "has(self.whenCanPreempt) && self.whenCanPreempt == 'TryNextFlavor')",
                "preference can only be set when both whenCanBorrow and whenCanPreempt "
                "are TryNextFlavor",
                ".preference",
            )
        ],
        default={},
    )


def preemption() -> Schema:
    return obj(
        {
            "reclaimWithinCohort": enum("Never", "LowerPriority", "Any", default="Never"),
            "borrowWithinCohort": obj(
                {
                    "policy": enum("Never", "LowerPriority", default="Never"),
                    "maxPriorityThreshold": int32(),
                },
                default={},
            ),
            "withinClusterQueue": enum(
                "Never", "LowerPriority", "LowerOrNewerEqualPriority", default="Never"
            ),
        },
        rules=[
            rule(
                "!((!has(self.reclaimWithinCohort) || self.reclaimWithinCohort == 'Never') && "
                "has(self.borrowWithinCohort) && has(self.borrowWithinCohort.policy) && "
                "self.borrowWithinCohort.policy != 'Never')",
                "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            )
        ],
        default={},
    )


def admission_checks_strategy() -> Schema:
    return obj(
        {
            "admissionChecks": list_map(
                obj(
                    {
                        "name": string(minLength=1, maxLength=316),
                        "onFlavors": array(
                            ref("ResourceFlavor"),
                            maxItems=64,
                            **{"x-kubernetes-list-type": "set"},
                        ),
                    },
                    required=["name"],
                ),
                minItems=1,
                maxItems=64,
            )
        },
        required=["admissionChecks"],
    )


def concurrent_admission_policy() -> Schema:
    return obj(
        {
            "migration": obj(
                {
                    "mode": enum("TryPreferredFlavors", "RetainFirstAdmission"),
                    "constraints": obj({"lastAcceptableFlavorName": ref("ResourceFlavor")}),
                },
                required=["mode"],
            )
        },
        required=["migration"],
    )


def flavor_usage(*, with_borrowed: bool) -> Schema:
    """FlavorUsage (ClusterQueue: total + borrowed) / LocalQueueFlavorUsage (total)."""
    usage: dict[str, Schema] = {"name": resource_name(), "total": quantity()}
    if with_borrowed:
        usage["borrowed"] = quantity()
    return list_map(
        obj(
            {
                "name": ref("ResourceFlavor"),
                "resources": list_map(obj(usage, required=["name"]), maxItems=64),
            },
            required=["name"],
        ),
        maxItems=64,
    )


# --------------------------------------------------------------------------- kinds


def cluster_queue_schema() -> Schema:
    spec = obj(
        {
            "resourceGroups": doc(
                "Groups of resources with the flavors that give them quota (at most 16).",
                resource_groups(),
            ),
            "cohort": doc(
                "v1beta1 spelling of cohortName; accepted at both versions.",
                ref("Cohort"),
            ),
            "cohortName": doc(
                "Cohort this ClusterQueue borrows from and lends to; unset means none.",
                ref("Cohort"),
            ),
            "queueingStrategy": doc(
                "StrictFIFO: the oldest workload blocks newer ones; BestEffortFIFO: "
                "newer workloads that fit may be admitted first.",
                enum("StrictFIFO", "BestEffortFIFO", default="BestEffortFIFO"),
            ),
            "namespaceSelector": label_selector(),
            "flavorFungibility": flavor_fungibility(),
            "preemption": preemption(),
            "admissionChecks": array(  # v1beta1 only; v1beta2 has admissionChecksStrategy
                string(minLength=1, maxLength=316), **{"x-kubernetes-list-type": "set"}
            ),
            "admissionChecksStrategy": admission_checks_strategy(),
            "stopPolicy": enum(*STOP_POLICY, default="None"),
            "fairSharing": fair_sharing(),
            "admissionScope": obj(
                {"admissionMode": enum("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")},
                required=["admissionMode"],
            ),
            "concurrentAdmissionPolicy": concurrent_admission_policy(),
        },
        rules=[
            same_value("cohort", "cohortName", "ClusterQueue's cohort"),
            limits_need_parent(("cohortName", "cohort"), "ClusterQueue has no cohort"),
            rule(
                "!(has(self.admissionChecks) && has(self.admissionChecksStrategy))",
                "admissionChecks cannot be used along with admissionChecksStrategy",
                ".admissionChecksStrategy",
            ),
        ],
    )
    status = obj(
        {
            "conditions": conditions(),
            "flavorsReservation": flavor_usage(with_borrowed=True),
            "flavorsUsage": flavor_usage(with_borrowed=True),
            "pendingWorkloads": int32(),
            "reservingWorkloads": int32(),
            "admittedWorkloads": int32(),
            "pendingWorkloadsStatus": obj(  # v1beta1 only
                {
                    "clusterQueuePendingWorkload": array(
                        obj(
                            {"name": string(), "namespace": string()},
                            required=["name", "namespace"],
                        ),
                        **{"x-kubernetes-list-type": "atomic"},
                    ),
                    "lastChangeTime": date_time(),
                },
                required=["lastChangeTime"],
            ),
            "fairSharing": fair_sharing_status(),
        }
    )
    return root(
        {"spec": spec, "status": status},
        description="A pool of quota per flavor and resource, shared within its cohort.",
    )


def local_queue_schema() -> Schema:
    spec = obj(
        {
            "clusterQueue": doc(
                "The ClusterQueue whose quota this queue's workloads use; immutable.",
                {
                    **ref("ClusterQueue"),
                    "x-kubernetes-validations": [rule("self == oldSelf", "field is immutable")],
                },
            ),
            "stopPolicy": doc(
                "None admits; Hold stops new admissions; HoldAndDrain also evicts.",
                enum(*STOP_POLICY, default="None"),
            ),
            "fairSharing": fair_sharing(),
        },
        required=["clusterQueue"],
    )
    local_flavor = obj(  # v1beta1 LocalQueueFlavorStatus
        {
            "name": ref("ResourceFlavor"),
            "resources": array(resource_name(), maxItems=64, **{"x-kubernetes-list-type": "set"}),
            "nodeLabels": {
                "type": "object",
                "additionalProperties": string(),
                "maxProperties": 8,
            },
            "nodeTaints": array(taint(), maxItems=8, **{"x-kubernetes-list-type": "atomic"}),
            "topology": obj(
                {
                    "name": ref("Topology"),
                    "levels": array(
                        string(maxLength=317),
                        minItems=1,
                        maxItems=16,
                        **{"x-kubernetes-list-type": "atomic"},
                    ),
                },
                required=["name", "levels"],
            ),
        },
        required=["name"],
    )
    status = obj(
        {
            "conditions": conditions(),
            "pendingWorkloads": int32(),
            "reservingWorkloads": int32(),
            "admittedWorkloads": int32(),
            "flavorsReservation": flavor_usage(with_borrowed=False),
            "flavorsUsage": flavor_usage(with_borrowed=False),  # v1beta2 spelling
            "flavorUsage": flavor_usage(with_borrowed=False),  # v1beta1 spelling
            "flavors": list_map(local_flavor, maxItems=64),  # v1beta1 only
            "fairSharing": fair_sharing_status(),
        }
    )
    return root(
        {"spec": spec, "status": status},
        required=["spec"],
        description="A namespace's entry point to a ClusterQueue; Jobs name it in the "
        "kueue.x-k8s.io/queue-name label.",
    )


def resource_flavor_schema() -> Schema:
    spec = obj(
        {
            "nodeLabels": {
                "type": "object",
                "additionalProperties": string(),
                "maxProperties": 8,
                "x-kubernetes-map-type": "atomic",
            },
            "nodeTaints": array(taint(), maxItems=8, **{"x-kubernetes-list-type": "atomic"}),
            "tolerations": array(toleration(), maxItems=8, **{"x-kubernetes-list-type": "atomic"}),
            "topologyName": ref("Topology"),
        },
        rules=[
            rule(
                "!has(self.topologyName) || (has(self.nodeLabels) && size(self.nodeLabels) >= 1)",
                "at least one nodeLabel is required when topology is set",
                ".nodeLabels",
            ),
            rule(
                "!has(oldSelf.topologyName) || "
                "(has(self.topologyName) && self.topologyName == oldSelf.topologyName)",
                "topologyName is immutable when topologyName is set",
                ".topologyName",
            ),
        ],
    )
    return root(
        {"spec": spec},
        description="A kind of node (labels, taints) that ClusterQueues give quota for.",
    )


def cohort_schema() -> Schema:
    spec = obj(
        {
            "parent": doc(
                "v1alpha1 spelling of parentName; accepted at both versions.",
                ref("Cohort"),
            ),
            "parentName": doc("Parent Cohort; unset makes this Cohort a root.", ref("Cohort")),
            "resourceGroups": resource_groups(),
            "fairSharing": fair_sharing(),
        },
        rules=[
            same_value("parent", "parentName", "Cohort's parent"),
            limits_need_parent(("parentName", "parent"), "Cohort has no parent"),
        ],
    )
    status = obj({"fairSharing": fair_sharing_status()})
    return root(
        {"spec": spec, "status": status},
        description="A node of the cohort tree: ClusterQueues and Cohorts below it share "
        "quota; it may add quota of its own.",
    )


def workload_priority_class_schema() -> Schema:
    # value and description sit at the top level, beside metadata (as in
    # scheduling.k8s.io PriorityClass), not under a spec.
    return root(
        {
            "value": doc(
                "Priority of workloads using this class; higher is more important.",
                int32(minimum=-(2**31), maximum=2**31 - 1),
            ),
            "description": doc("Free text on when to use this class.", string(maxLength=2048)),
        },
        required=["value"],
        description="A named priority for workloads, independent of pod priority.",
    )


def root(
    properties: dict[str, Schema], *, description: str, required: list[str] | None = None
) -> Schema:
    return doc(
        description,
        obj(
            {
                "apiVersion": string(),
                "kind": string(),
                "metadata": {"type": "object"},
                **properties,
            },
            required=required,
        ),
    )


# --------------------------------------------------------------------------- CRDs


def column(name: str, json_path: str, type_: str, description: str, priority: int = 0) -> Schema:
    col: Schema = {"name": name, "type": type_, "jsonPath": json_path, "description": description}
    if priority:
        col["priority"] = priority
    return col


AGE = column("Age", ".metadata.creationTimestamp", "date", "Time since creation")


def crd(
    *,
    kind: str,
    plural: str,
    scope: str,
    short_names: list[str],
    schema: Schema,
    status: bool = False,
    columns: list[Schema] | None = None,
) -> Schema:
    versions = []
    for version in SERVED_VERSIONS:
        v: Schema = {"name": version, "served": True, "storage": version == STORAGE_VERSION}
        if version != STORAGE_VERSION:
            v["deprecated"] = True
            v["deprecationWarning"] = (
                f"{GROUP}/{version} {kind} is deprecated; use {GROUP}/{STORAGE_VERSION}"
            )
        # Each version gets its own copy: identical content, no YAML anchors.
        v["schema"] = {"openAPIV3Schema": copy.deepcopy(schema)}
        if status:
            v["subresources"] = {"status": {}}
        if columns:
            v["additionalPrinterColumns"] = copy.deepcopy(columns)
        versions.append(v)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "kuota"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
            },
            "scope": scope,
            "conversion": {"strategy": "None"},
            "versions": versions,
        },
    }


def all_crds() -> dict[str, Schema]:
    """File name -> CRD, in the order kustomization.yaml lists them."""
    crds = [
        crd(
            kind="ClusterQueue",
            plural="clusterqueues",
            scope="Cluster",
            short_names=["cq"],
            schema=cluster_queue_schema(),
            status=True,
            columns=[
                # A union path: whichever spelling the object uses (the first
                # present wins), so `cohort:` written under v1beta2 still shows.
                column(
                    "Cohort",
                    ".spec['cohortName','cohort']",
                    "string",
                    "Cohort that this ClusterQueue belongs to",
                ),
                column(
                    "Strategy",
                    ".spec.queueingStrategy",
                    "string",
                    "The queueing strategy used to prioritize workloads",
                    priority=1,
                ),
                column(
                    "Pending Workloads",
                    ".status.pendingWorkloads",
                    "integer",
                    "Number of pending workloads",
                ),
                column(
                    "Admitted Workloads",
                    ".status.admittedWorkloads",
                    "integer",
                    "Number of admitted workloads that haven't finished yet",
                    priority=1,
                ),
                AGE,
            ],
        ),
        crd(
            kind="LocalQueue",
            plural="localqueues",
            scope="Namespaced",
            short_names=["queue", "queues", "lq"],
            schema=local_queue_schema(),
            status=True,
            columns=[
                column("ClusterQueue", ".spec.clusterQueue", "string", "Backing ClusterQueue"),
                column(
                    "Pending Workloads",
                    ".status.pendingWorkloads",
                    "integer",
                    "Number of pending workloads",
                ),
                column(
                    "Admitted Workloads",
                    ".status.admittedWorkloads",
                    "integer",
                    "Number of admitted workloads that haven't finished yet",
                ),
                AGE,
            ],
        ),
        crd(
            kind="ResourceFlavor",
            plural="resourceflavors",
            scope="Cluster",
            short_names=["flavor", "flavors", "rf"],
            schema=resource_flavor_schema(),
        ),
        crd(
            kind="Cohort",
            plural="cohorts",
            scope="Cluster",
            short_names=["co"],
            schema=cohort_schema(),
            status=True,
            columns=[
                column("Parent", ".spec['parentName','parent']", "string", "Parent Cohort"),
                AGE,
            ],
        ),
        crd(
            kind="WorkloadPriorityClass",
            plural="workloadpriorityclasses",
            scope="Cluster",
            short_names=["wpc"],
            schema=workload_priority_class_schema(),
            columns=[
                column("Value", ".value", "integer", "Value of workloadPriorityClass's Priority"),
                AGE,
            ],
        ),
    ]
    return {f"{GROUP}_{c['spec']['names']['plural']}.yaml": c for c in crds}


HEADER = (
    "# Generated by deploy/crds/generate.py from Kueue's API types; do not edit by hand.\n"
    "# One schema per kind serves v1beta2 (storage) and v1beta1 (conversion: None):\n"
    "# see docs/design/crds.md.\n"
)


def render(doc: Schema) -> str:
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)
    return HEADER + body


def render_kustomization(files: list[str]) -> str:
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": files,
    }
    return HEADER + yaml.safe_dump(doc, sort_keys=False)


def outputs() -> dict[Path, str]:
    crds = all_crds()
    out = {HERE / name: render(doc) for name, doc in crds.items()}
    out[HERE / "kustomization.yaml"] = render_kustomization(list(crds))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the YAML is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        stale.append(path.name)
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        print("stale: " + ", ".join(stale) + " (run deploy/crds/generate.py)", file=sys.stderr)
        return 1
    if not args.check:
        print(f"wrote {len(stale)} file(s)" if stale else "up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
