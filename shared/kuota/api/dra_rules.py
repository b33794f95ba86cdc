"""Device taints, device tolerations and claim constraints, as kuota reads them.

Theory of operation: three parts of ``resource.k8s.io/v1`` that restrict which
devices a request may be given (issue #17; docs/design/dra-placement.md):

- ``Device.taints`` (DRADeviceTaints): ``key``, ``value``, ``effect``. A device
  with a ``NoSchedule`` or ``NoExecute`` taint is not allocated to a request that
  does not tolerate it; ``None`` and effects this version does not know are
  ignored, as the API tells consumers to treat unknown effects.
- ``ExactDeviceRequest.tolerations``: ``key``, ``operator`` (``Equal``, the
  default, or ``Exists``), ``value``, ``effect`` (empty: every effect),
  ``tolerationSeconds`` (read, and ignored for allocation, as by Kubernetes).
- ``DeviceClaim.constraints``: ``requests`` (names of requests of the claim;
  empty: all of them) and exactly one of ``matchAttribute`` (every device of
  those requests has this attribute, with one value) or ``distinctAttribute``
  (every device a different value; read, not placed).

The readers check what the apiserver's validation checks of one object (label
keys and values, the operator and effect enums, a fully qualified attribute
name, constraints naming requests of the claim) and raise
:class:`~kuota.api.fields.FieldError` naming the field; ``kuota.api.dra``
turns that into a ``ValidationError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kuota.api.fields import FieldError, label_value, qualified_name

__all__ = [
    "TAINT_EFFECTS_THAT_BLOCK",
    "DeviceConstraint",
    "DeviceTaint",
    "DeviceToleration",
    "device_constraints",
    "device_taints",
    "device_tolerations",
]

#: The taint effects that keep a device from a request that does not tolerate them.
TAINT_EFFECTS_THAT_BLOCK = frozenset({"NoSchedule", "NoExecute"})
_TOLERATION_EFFECTS = ("", "NoSchedule", "NoExecute")
_MAX_TAINTS = 16  # the apiserver's limit per device
_MAX_TOLERATIONS = 16  # per request
_MAX_CONSTRAINTS = 32  # per claim


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | NoExecute | None (others act as None)


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""  # empty: every key (operator Exists)
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty: every effect


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()  # request names of the claim; empty: all
    match_attribute: str | None = None  # fully qualified: domain/name
    distinct_attribute: str | None = None


def _map(raw: object, field: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise FieldError(field, f"must be an object, not {type(raw).__name__}")
    return raw


def _list(raw: object, field: str, limit: int) -> Sequence[object]:
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise FieldError(field, f"must be a list, not {type(raw).__name__}")
    if len(raw) > limit:
        raise FieldError(field, f"must have at most {limit} items, has {len(raw)}")
    return raw


def _text(raw: object, field: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise FieldError(field, f"must be a string, not {type(raw).__name__}")
    return raw


def device_taints(raw: object, field: str) -> tuple[DeviceTaint, ...]:
    """A device's ``taints``: each with a label key, a label value and an effect."""
    out: list[DeviceTaint] = []
    for i, item in enumerate(_list(raw, field, _MAX_TAINTS)):
        f = f"{field}[{i}]"
        t = _map(item, f)
        key = qualified_name(t.get("key"), f"{f}.key")
        value = label_value(_text(t.get("value"), f"{f}.value"), f"{f}.value")
        effect = _text(t.get("effect"), f"{f}.effect")
        if not effect:
            raise FieldError(f"{f}.effect", "required (NoSchedule, NoExecute or None)")
        taint = DeviceTaint(key, value, effect)
        if any(x.key == key and x.effect == effect for x in out):
            raise FieldError(f, f"duplicate taint {key!r} with effect {effect}")
        out.append(taint)
    return tuple(out)


def device_tolerations(raw: object, field: str) -> tuple[DeviceToleration, ...]:
    """A request's ``tolerations``, checked as the apiserver checks them."""
    out: list[DeviceToleration] = []
    for i, item in enumerate(_list(raw, field, _MAX_TOLERATIONS)):
        f = f"{field}[{i}]"
        t = _map(item, f)
        key = _text(t.get("key"), f"{f}.key")
        if key:
            qualified_name(key, f"{f}.key")
        operator = _text(t.get("operator"), f"{f}.operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise FieldError(f"{f}.operator", f"{operator!r} is not Equal or Exists")
        value = _text(t.get("value"), f"{f}.value")
        if operator == "Exists" and value:
            raise FieldError(f"{f}.value", "must be empty when operator is Exists")
        if not key and operator != "Exists":
            raise FieldError(f"{f}.operator", "must be Exists when key is empty")
        label_value(value, f"{f}.value")
        effect = _text(t.get("effect"), f"{f}.effect")
        if effect not in _TOLERATION_EFFECTS:
            raise FieldError(f"{f}.effect", f"{effect!r} is not NoSchedule or NoExecute")
        seconds = t.get("tolerationSeconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            raise FieldError(f"{f}.tolerationSeconds", "must be an integer")
        out.append(DeviceToleration(key, operator, value, effect))
    return tuple(out)


def device_constraints(
    raw: object, field: str, request_names: Sequence[str]
) -> tuple[DeviceConstraint, ...]:
    """A claim's ``constraints``; each names requests of the claim (``main`` or
    ``main/subrequest``) and exactly one fully qualified attribute."""
    out: list[DeviceConstraint] = []
    known = set(request_names)
    for i, item in enumerate(_list(raw, field, _MAX_CONSTRAINTS)):
        f = f"{field}[{i}]"
        c = _map(item, f)
        names: list[str] = []
        for j, name in enumerate(_list(c.get("requests"), f"{f}.requests", 32)):
            text = _text(name, f"{f}.requests[{j}]")
            if text.split("/", 1)[0] not in known:
                raise FieldError(f"{f}.requests[{j}]", f"{text!r} is not a request of the claim")
            if text in names:
                raise FieldError(f"{f}.requests[{j}]", f"duplicate request {text!r}")
            names.append(text)
        match = _attribute_name(c.get("matchAttribute"), f"{f}.matchAttribute")
        distinct = _attribute_name(c.get("distinctAttribute"), f"{f}.distinctAttribute")
        if (match is None) == (distinct is None):
            raise FieldError(f, "exactly one of matchAttribute and distinctAttribute must be set")
        out.append(DeviceConstraint(tuple(names), match, distinct))
    return tuple(out)


def _attribute_name(raw: object, field: str) -> str | None:
    if raw is None:
        return None
    name = qualified_name(raw, field)
    if "/" not in name:
        raise FieldError(field, f"{name!r} must be fully qualified (domain/name)")
    return name
