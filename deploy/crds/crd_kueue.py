"""Kueue's types and the five kinds kuota serves, as OpenAPI v3 schemas.

Theory of operation
-------------------
One builder per Kueue Go type (``apis/kueue/v1beta{1,2}``), so a sub-schema used
in several places (resource groups, flavor usage, conditions) is written once.
With ``conversion: None`` every served version must accept every stored object,
so each kind's schema is the UNION of the v1beta1 and v1beta2 field names; the
rationale is in ``docs/design/crds.md``. ``generate.py`` wraps these in CRDs.
"""

from __future__ import annotations

from crd_openapi import (
    Schema,
    array,
    conditions,
    date_time,
    doc,
    enum,
    int32,
    int64,
    label_selector,
    list_map,
    obj,
    quantity,
    ref,
    resource_name,
    rule,
    string,
    taint,
    toleration,
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
