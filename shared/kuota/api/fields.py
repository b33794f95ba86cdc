"""Typed readers for the fields of untrusted manifests.

Theory of operation: a manifest is a tree of plain JSON values that nobody has
validated (a user's YAML, a scenario file, or something an apiserver with an
old CRD accepted). Every reader here takes a raw value and the field path that
names it (``spec.resourceGroups[0].flavors[1].name``), and either returns a
typed value or raises ``FieldError(field, message)``. The parsers in
``kuota.api.parse`` stop at the first ``FieldError`` and turn it into the
``ValidationError`` of the object; nothing here ever sees an ``ObjectRef``.

Absent and ``null`` are the same thing (as for Kubernetes' ``omitempty``
fields). Numbers are never read from strings, and booleans are never numbers:
the apiserver would reject both, and accepting them would hide typos.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from kuota.api.types import LabelSelector, NodeSelectorRequirement, Taint, Toleration
from kuota.quantity import QuantityError, parse_quantity

Raw = Mapping[str, object]
_EMPTY: Raw = {}


class FieldError(Exception):
    """The value at ``field`` is not acceptable; ``message`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def child(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def index(parent: str, i: int) -> str:
    return f"{parent}[{i}]"


def keyed(parent: str, key: str) -> str:
    """The path of one entry of a string map: ``metadata.labels[team]``."""
    return f"{parent}[{key}]"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


# --------------------------------------------------------------------------- scalars


def mapping(value: object, field: str, *, required: bool = False) -> Raw:
    if type(value) is dict:  # the common case, without the ABC check below
        return value
    if value is None:
        if required:
            raise FieldError(field, "required")
        return _EMPTY
    if not isinstance(value, Mapping):
        raise FieldError(field, f"must be a mapping, not {_kind(value)}")
    return value


def seq(value: object, field: str, *, max_items: int | None = None) -> Sequence[object]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise FieldError(field, f"must be a list, not {_kind(value)}")
    if max_items is not None and len(value) > max_items:
        raise FieldError(field, f"must have at most {max_items} items, has {len(value)}")
    return value


def string(value: object, field: str, *, required: bool = False) -> str:
    """A string; absent is ``""`` unless ``required``."""
    if value is None:
        if required:
            raise FieldError(field, "required")
        return ""
    if not isinstance(value, str):
        raise FieldError(field, f"must be a string, not {_kind(value)}")
    if required and not value:
        raise FieldError(field, "required")
    return value


def integer(
    value: object,
    field: str,
    *,
    default: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    if (
        type(value) is int
        and (minimum is None or value >= minimum)
        and (maximum is None or value <= maximum)
    ):
        return value  # the common case, without the checks below
    if value is None:
        if default is None:
            raise FieldError(field, "required")
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON has one number type; 3.0 is 3
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(field, f"must be an integer, not {_kind(value)}")
    if minimum is not None and value < minimum:
        raise FieldError(field, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise FieldError(field, f"must be at most {maximum}, got {value}")
    return value


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def boolean(value: object, field: str, *, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise FieldError(field, f"must be true or false, not {_kind(value)}")
    return value


def quantity(value: object, field: str) -> int:
    """A non-negative Kubernetes quantity in milli-units (absent is an error)."""
    if value is None:
        raise FieldError(field, "required")
    try:
        return parse_quantity(value)
    except QuantityError as e:
        raise FieldError(field, str(e)) from None


def optional_quantity(value: object, field: str) -> int | None:
    return None if value is None else quantity(value, field)


def enum(value: object, field: str, allowed: Sequence[str], *, default: str) -> str:
    """One of ``allowed``; absent or ``""`` (Go's zero value) is ``default``."""
    s = string(value, field)
    if not s:
        return default
    if s not in allowed:
        raise FieldError(field, f"unsupported value {s!r}: want one of {', '.join(allowed)}")
    return s


# --------------------------------------------------------------------------- names

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


# Strings already found valid, so that names seen over and over (namespaces, queue
# names) skip the regular expressions; bounded, cleared when full.
_VALID_LABELS: dict[str, None] = {}
_VALID_SUBDOMAINS: dict[str, None] = {}
_VALID_MAX = 4096


def _remember(valid: dict[str, None], s: str) -> None:
    if len(valid) >= _VALID_MAX:
        valid.clear()
    valid[s] = None


def dns1123_label(value: object, field: str) -> str:
    if type(value) is str and value in _VALID_LABELS:
        return value
    s = string(value, field, required=True)
    if len(s) > 63 or not _DNS1123_LABEL.match(s):
        raise FieldError(
            field,
            f"{s!r} is not a valid DNS-1123 label (lower-case alphanumerics and '-', "
            "starting and ending alphanumeric, at most 63 characters)",
        )
    _remember(_VALID_LABELS, s)
    return s


def dns1123_subdomain(value: object, field: str) -> str:
    if type(value) is str and value in _VALID_SUBDOMAINS:
        return value
    s = string(value, field, required=True)
    if len(s) > 253 or not _DNS1123_SUBDOMAIN.match(s):
        raise FieldError(
            field,
            f"{s!r} is not a valid DNS-1123 subdomain (lower-case alphanumerics, '-' and '.', "
            "at most 253 characters)",
        )
    _remember(_VALID_SUBDOMAINS, s)
    return s


def qualified_name(value: object, field: str) -> str:
    """A label key / resource name: ``[prefix/]name`` (``nvidia.com/gpu``, ``cpu``)."""
    s = string(value, field, required=True)
    prefix, slash, name = s.rpartition("/")
    ok = len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))
    if slash:
        ok = ok and 0 < len(prefix) <= 253 and bool(_DNS1123_SUBDOMAIN.match(prefix))
    if not ok:
        raise FieldError(
            field,
            f"{s!r} is not a qualified name (an optional DNS subdomain prefix and '/', then "
            "at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric)",
        )
    return s


def label_value(value: object, field: str) -> str:
    s = string(value, field)
    if len(s) > 63 or not _LABEL_VALUE.match(s):
        raise FieldError(field, f"{s!r} is not a valid label value")
    return s


def string_map(
    value: object, field: str, *, max_items: int | None = None, labels: bool = False
) -> tuple[tuple[str, str], ...]:
    """A ``map[string]string`` as sorted pairs; ``labels`` validates keys and values."""
    raw = mapping(value, field)
    if max_items is not None and len(raw) > max_items:
        raise FieldError(field, f"must have at most {max_items} entries, has {len(raw)}")
    out: list[tuple[str, str]] = []
    for key, item in raw.items():
        if not isinstance(key, str):
            raise FieldError(field, f"keys must be strings, not {_kind(key)}")
        path = keyed(field, key)
        if labels:
            qualified_name(key, path)
            out.append((key, label_value(item, path)))
        else:
            out.append((key, string(item, path)))
    return tuple(sorted(out))


def unique_strings(value: object, field: str, *, max_items: int | None = None) -> tuple[str, ...]:
    items = seq(value, field, max_items=max_items)
    out: list[str] = []
    for i, item in enumerate(items):
        s = string(item, index(field, i), required=True)
        if s in out:
            raise FieldError(index(field, i), f"duplicate value {s!r}")
        out.append(s)
    return tuple(out)


# --------------------------------------------------------------------------- metadata


def meta_of(raw: Raw) -> Raw:
    return mapping(raw.get("metadata"), "metadata", required=True)


def object_name(raw: Raw) -> str:
    return dns1123_subdomain(meta_of(raw).get("name"), "metadata.name")


def object_namespace(raw: Raw) -> str:
    namespace = mapping(raw.get("metadata"), "metadata").get("namespace")
    return "default" if namespace in (None, "") else dns1123_label(namespace, "metadata.namespace")


def spec_of(raw: Raw, *, required: bool = False) -> Raw:
    return mapping(raw.get("spec"), "spec", required=required)


# --------------------------------------------------------------------------- selectors

_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPERATORS = (*_LABEL_OPERATORS, "Gt", "Lt")


def requirement(value: object, field: str, *, node: bool) -> NodeSelectorRequirement:
    """A ``matchExpressions`` entry of a label selector or (``node``) a node selector term."""
    raw = mapping(value, field, required=True)
    key = qualified_name(raw.get("key"), child(field, "key"))
    operators = _NODE_OPERATORS if node else _LABEL_OPERATORS
    operator = string(raw.get("operator"), child(field, "operator"), required=True)
    if operator not in operators:
        raise FieldError(
            child(field, "operator"),
            f"unsupported operator {operator!r}: want one of {', '.join(operators)}",
        )
    values_path = child(field, "values")
    values = tuple(
        string(v, index(values_path, i)) for i, v in enumerate(seq(raw.get("values"), values_path))
    )
    if operator in ("In", "NotIn") and not values:
        raise FieldError(values_path, f"must be non-empty for operator {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise FieldError(values_path, f"must be empty for operator {operator}")
    if operator in ("Gt", "Lt") and (
        len(values) != 1 or not re.fullmatch(r"[+-]?\d{1,18}", values[0])
    ):
        raise FieldError(values_path, f"operator {operator} takes exactly one integer value")
    return NodeSelectorRequirement(key=key, operator=operator, values=values)


def label_selector(value: object, field: str) -> LabelSelector | None:
    """A ``metav1.LabelSelector``; ``None`` when the field is absent or null.

    ``{}`` (no labels, no expressions) is a selector that matches everything;
    the caller decides what an absent selector means.
    """
    if value is None:
        return None
    raw = mapping(value, field)
    labels = string_map(raw.get("matchLabels"), child(field, "matchLabels"), labels=True)
    path = child(field, "matchExpressions")
    expressions = tuple(
        requirement(item, index(path, i), node=False)
        for i, item in enumerate(seq(raw.get("matchExpressions"), path))
    )
    return LabelSelector(match_labels=labels, match_expressions=expressions)


# --------------------------------------------------------------------------- taints

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def taint(value: object, field: str) -> Taint:
    raw = mapping(value, field, required=True)
    key = qualified_name(raw.get("key"), child(field, "key"))
    effect = string(raw.get("effect"), child(field, "effect"), required=True)
    if effect not in _EFFECTS:
        raise FieldError(
            child(field, "effect"),
            f"unsupported effect {effect!r}: want one of {', '.join(_EFFECTS)}",
        )
    return Taint(key=key, value=label_value(raw.get("value"), child(field, "value")), effect=effect)


def toleration(value: object, field: str) -> Toleration:
    raw = mapping(value, field, required=True)
    key = string(raw.get("key"), child(field, "key"))
    if key:
        qualified_name(key, child(field, "key"))
    operator = enum(
        raw.get("operator"), child(field, "operator"), ("Equal", "Exists"), default="Equal"
    )
    tol_value = string(raw.get("value"), child(field, "value"))
    effect = string(raw.get("effect"), child(field, "effect"))
    if effect and effect not in _EFFECTS:
        raise FieldError(
            child(field, "effect"),
            f"unsupported effect {effect!r}: want one of {', '.join(_EFFECTS)}",
        )
    if not key and operator != "Exists":
        raise FieldError(child(field, "operator"), "must be Exists when key is empty")
    if operator == "Exists" and tol_value:
        raise FieldError(child(field, "value"), "must be empty when operator is Exists")
    seconds = raw.get("tolerationSeconds")
    if seconds is not None:
        seconds = integer(seconds, child(field, "tolerationSeconds"))
        if effect != "NoExecute":
            raise FieldError(
                child(field, "effect"), "must be NoExecute when tolerationSeconds is set"
            )
    return Toleration(
        key=key, operator=operator, value=tol_value, effect=effect, toleration_seconds=seconds
    )


def tolerations(
    value: object, field: str, *, max_items: int | None = None
) -> tuple[Toleration, ...]:
    return tuple(
        toleration(item, index(field, i))
        for i, item in enumerate(seq(value, field, max_items=max_items))
    )
