"""OpenAPI v3 schema builders for CRDs, and the Kubernetes types Kueue's kinds embed.

Theory of operation
-------------------
Small functions that each return one structural schema fragment (a dict), so a
kind's schema reads like its Go type: ``obj({...}, required=[...], rules=[...])``
for a struct, ``list_map(...)`` for a ``+listType=map`` slice, ``quantity()`` for
a ``resource.Quantity``. Nothing here knows about Kueue; ``crd_kueue.py`` builds
Kueue's types from these and ``generate.py`` turns the kinds into CRDs.
"""

from __future__ import annotations

from typing import Any

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
