"""The DRA objects kuota reads, and how manifests become them.

Theory of operation: five ``resource.k8s.io`` kinds matter for quota and
placement: DeviceClass (which devices a class means, and its extended resource
name), ResourceSlice (the devices a driver publishes, with attributes, capacity
and the shared counters partitions consume), ResourceClaimTemplate (what a pod
asks for), ResourceClaim (what one claim asks for, and the devices its
allocation took, whoever owns it) and DeviceTaintRule (a taint an administrator
puts on the devices it selects by driver, pool and name). ``parse_dra_object``
turns a manifest (``resource.k8s.io/v1``, or the beta shapes where they differ
cheaply) into a
frozen dataclass or a ``ValidationError`` naming the first bad field. Amounts
are milli-units (``kuota.quantity``); collections are tuples in manifest order,
maps sorted by key. Only what one object can answer alone is checked here, as
the apiserver's validation would; what needs the rest of the pool is checked by
the fold's inventory (``kuota.core.dra.inventory``). Details:
docs/design/dra-charging.md, and for claims docs/design/dra-placement.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from kuota.api.dra_rules import (
    DeviceConstraint,
    DeviceTaint,
    DeviceToleration,
    device_constraints,
    device_taints,
    device_tolerations,
)
from kuota.api.fields import FieldError
from kuota.api.not_journaled import not_journaled
from kuota.api.semver import parse_semver
from kuota.api.types import ObjectRef, ValidationError
from kuota.kinds import KINDS as _REGISTRY
from kuota.quantity import QuantityError, parse_quantity

#: The DRA kinds read here (kuota.kinds: the "dra" role, watched by ingest).
KINDS = tuple(k.kind for k in _REGISTRY if k.role == "dra" and k.watch)
_NAMESPACED = tuple(k.kind for k in _REGISTRY if k.kind in KINDS and k.namespaced)
_API_VERSIONS = frozenset(v for k in _REGISTRY if k.kind in KINDS for v in k.api_versions)

AttributeKind = Literal["int", "bool", "string", "version"]


@dataclass(frozen=True, slots=True)
class DeviceAttribute:
    name: str  # as published: "profile" or "gpu.nvidia.com/profile"
    kind: AttributeKind
    value: int | bool | str


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: tuple[tuple[str, int], ...]  # counter name -> milli-units, sorted


@dataclass(frozen=True, slots=True)
class CapacityRequestPolicy:
    """How a request consumes one capacity of a shared device (KEP-5075).

    At most one of ``valid_values`` (ascending) and a range (``range_min`` set,
    ``range_max`` and ``step`` optional) is given; with either, ``default`` is
    required and valid, as the apiserver validates."""

    default: int | None = None  # milli-units consumed when a request names no amount
    valid_values: tuple[int, ...] = ()
    range_min: int | None = None
    range_max: int | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    attributes: tuple[DeviceAttribute, ...] = ()  # sorted by name
    capacity: tuple[tuple[str, int], ...] = ()  # qualified name -> milli-units, sorted
    consumes_counters: tuple[CounterConsumption, ...] = ()
    allow_multiple_allocations: bool = False
    # qualified name -> requestPolicy, sorted; only capacities that publish one
    request_policies: tuple[tuple[str, CapacityRequestPolicy], ...] = ()
    taints: tuple[DeviceTaint, ...] = ()  # DRADeviceTaints (kuota.api.dra_rules)


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: tuple[tuple[str, int], ...]  # counter name -> milli-units, sorted


@dataclass(frozen=True, slots=True)
class ResourcePool:
    name: str
    generation: int
    resource_slice_count: int


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: ResourcePool
    node_name: str | None = None
    shared_counters: tuple[CounterSet, ...] = ()
    devices: tuple[Device, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, all must match
    extended_resource_name: str | None = None
    creation_timestamp: str = ""  # RFC 3339 as written by the apiserver; "" if unknown


@dataclass(frozen=True, slots=True)
class ExactDeviceRequest:
    device_class_name: str
    count: int = 1
    allocation_mode: str = "ExactCount"  # ExactCount | All
    selectors: tuple[str, ...] = ()  # CEL expressions
    admin_access: bool = False
    # capacity.requests (consumable capacity): qualified name -> milli-units, sorted
    capacity_requests: tuple[tuple[str, int], ...] = ()
    tolerations: tuple[DeviceToleration, ...] = ()  # of device taints


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[str, ...] = ()  # subrequest names
    # firstAvailable's subrequests, in order (parallel to ``first_available``)
    alternatives: tuple[ExactDeviceRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


#: A device, as an allocation result names it: (driver, pool, device).
AllocatedDevice = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A claim, made from a template for a pod or written directly, and what its
    allocation took: ``allocated`` is the (driver, pool, device) of each result of
    ``status.allocation.devices.results``, sorted, each once; () when it is not
    allocated. A result with ``adminAccess`` takes nothing (Kubernetes' allocator
    does not count such a device as allocated), so it is left out. ``results``:
    the same results with the request each was allocated for, as
    (request, driver, pool, device), sorted (a ``firstAvailable`` subrequest's
    request is ``request/subrequest``): what charging reads of an allocated
    direct claim. ``shares``: the results that are a share of a device several
    claims may use at once (``allowMultipleAllocations``, KEP-5075: the
    scheduler gives such a result a ``shareID`` and the ``consumedCapacity``
    it takes), as (driver, pool, device, shareID, consumedCapacity: qualified
    name -> milli-units, sorted), sorted; their devices are in ``allocated``
    too."""

    namespace: str
    name: str
    uid: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    allocated: tuple[AllocatedDevice, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    results: tuple[tuple[str, str, str, str], ...] = ()
    shares: tuple[tuple[str, str, str, str, tuple[tuple[str, int], ...]], ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """One taint on every device its selector matches, as if the device's slice
    carried it (``resource.k8s.io/v1beta2``). Each of ``driver``, ``pool`` and
    ``device`` narrows the match when set; ``selects`` False: the rule has no
    ``deviceSelector`` and matches nothing (an empty one matches every device)."""

    name: str
    taint: DeviceTaint
    selects: bool = True
    driver: str = ""
    pool: str = ""
    device: str = ""

    def matches(self, driver: str, pool: str, device: str) -> bool:
        return (
            self.selects
            and (not self.driver or self.driver == driver)
            and (not self.pool or self.pool == pool)
            and (not self.device or self.device == device)
        )


DraObject = DeviceClass | ResourceSlice | ResourceClaimTemplate | ResourceClaim | DeviceTaintRule


class _Invalid(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# --------------------------------------------------------------------------- readers


def _map(raw: object, field: str, *, required: bool = False) -> Mapping[str, object]:
    if raw is None:
        if required:
            raise _Invalid(field, "required")
        return {}
    # (a plain dict, the usual case, skips the Mapping ABC's slower check)
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise _Invalid(field, f"must be an object, not {type(raw).__name__}")
    for k in raw:
        if not isinstance(k, str):
            raise _Invalid(field, f"must be an object, not {type(raw).__name__}")
    return raw


def _list(raw: object, field: str) -> list[object]:
    if raw is None:
        return []
    if not isinstance(raw, list | tuple):
        raise _Invalid(field, f"must be a list, not {type(raw).__name__}")
    return list(raw)


def _str(raw: object, field: str, *, required: bool = True) -> str:
    if raw is None or raw == "":
        if required:
            raise _Invalid(field, "required")
        return ""
    if not isinstance(raw, str):
        raise _Invalid(field, f"must be a string, not {type(raw).__name__}")
    return raw


def _int(raw: object, field: str, *, default: int | None = None, minimum: int = 0) -> int:
    if raw is None and default is not None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise _Invalid(field, f"must be an integer, not {type(raw).__name__}")
    if raw < minimum:
        raise _Invalid(field, f"must be at least {minimum}, not {raw}")
    if raw >= 2**63:
        raise _Invalid(field, f"{raw} does not fit in 64 bits")
    return raw


def _bool(raw: object, field: str) -> bool:
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise _Invalid(field, f"must be a boolean, not {type(raw).__name__}")
    return raw


def _quantity(raw: object, field: str) -> int:
    # Kubernetes wraps amounts as {value: <quantity>}; a bare quantity is accepted too.
    if isinstance(raw, Mapping):
        raw = raw.get("value")
        field = f"{field}.value"
    if raw is None:
        raise _Invalid(field, "required")
    try:
        return parse_quantity(raw)
    except QuantityError as exc:
        raise _Invalid(field, str(exc)) from None


def _amounts(raw: object, field: str) -> tuple[tuple[str, int], ...]:
    m = _map(raw, field)
    return tuple(sorted((k, _quantity(v, f"{field}[{k}]")) for k, v in m.items()))


# --------------------------------------------------------------------------- parse


def parse_dra_object(manifest: Mapping[str, object]) -> DraObject | ValidationError:
    """Read a DeviceClass, ResourceSlice, ResourceClaimTemplate, ResourceClaim or
    DeviceTaintRule manifest."""
    kind = manifest.get("kind") if isinstance(manifest, Mapping) else None
    meta = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") if isinstance(meta.get("name"), str) else ""
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
    ref = ObjectRef(
        kind if isinstance(kind, str) else "",
        str(name),
        str(namespace) if kind in _NAMESPACED else "",
    )
    try:
        if kind not in KINDS:
            raise _Invalid("kind", f"{kind!r} is not one of {', '.join(KINDS)}")
        refused = not_journaled(manifest)
        if refused is not None:  # ingest's stand-in for an object too large to journal
            raise _Invalid("metadata", refused)
        api_version = manifest.get("apiVersion")
        if api_version is not None and (
            not isinstance(api_version, str) or api_version not in _API_VERSIONS
        ):
            raise _Invalid("apiVersion", f"{api_version!r} is not a version kuota reads")
        _str(meta.get("name"), "metadata.name")
        spec = _map(manifest.get("spec"), "spec", required=kind != "DeviceClass")
        if kind == "DeviceClass":
            return _device_class(str(name), meta, spec)
        if kind == "ResourceSlice":
            return _resource_slice(str(name), spec)
        if kind == "DeviceTaintRule":
            return _taint_rule(str(name), spec)
        _str(meta.get("namespace"), "metadata.namespace")
        if kind == "ResourceClaim":
            return _claim(str(namespace), str(name), meta, spec, manifest.get("status"))
        return _claim_template(str(namespace), str(name), spec)
    except (_Invalid, FieldError) as exc:
        return ValidationError(ref, exc.field, exc.message)
    except Exception as exc:  # the boundary: bad input must never stop the fold
        return ValidationError(ref, "", f"cannot parse: {type(exc).__name__}: {exc}")


def _taint_rule(name: str, spec: Mapping[str, object]) -> DeviceTaintRule:
    if spec.get("taint") is None:
        raise _Invalid("spec.taint", "required")
    try:
        (taint,) = device_taints([spec.get("taint")], "spec.taint")
    except FieldError as exc:
        raise _Invalid(exc.field.replace("spec.taint[0]", "spec.taint", 1), exc.message) from None
    raw = spec.get("deviceSelector")
    if raw is None:
        return DeviceTaintRule(name, taint, selects=False)
    selector = _map(raw, "spec.deviceSelector")
    for gone in ("deviceClassName", "selectors"):  # tombstoned in v1beta2 (1.35)
        if selector.get(gone) is not None:
            raise _Invalid(f"spec.deviceSelector.{gone}", "not supported (removed in 1.35)")
    return DeviceTaintRule(
        name,
        taint,
        driver=_str(selector.get("driver"), "spec.deviceSelector.driver", required=False),
        pool=_str(selector.get("pool"), "spec.deviceSelector.pool", required=False),
        device=_str(selector.get("device"), "spec.deviceSelector.device", required=False),
    )


def _device_class(name: str, meta: Mapping[str, object], spec: Mapping[str, object]) -> DeviceClass:
    selectors = _selectors(spec.get("selectors"), "spec.selectors")
    ext = _str(spec.get("extendedResourceName"), "spec.extendedResourceName", required=False)
    created = _str(meta.get("creationTimestamp"), "metadata.creationTimestamp", required=False)
    return DeviceClass(name, selectors, ext or None, created)


def _selectors(raw: object, field: str) -> tuple[str, ...]:
    out = []
    for i, sel in enumerate(_list(raw, field)):
        f = f"{field}[{i}]"
        cel = _map(_map(sel, f).get("cel"), f"{f}.cel", required=True)
        out.append(_str(cel.get("expression"), f"{f}.cel.expression"))
    return tuple(out)


def _resource_slice(name: str, spec: Mapping[str, object]) -> ResourceSlice:
    driver = _str(spec.get("driver"), "spec.driver")
    pool_raw = _map(spec.get("pool"), "spec.pool", required=True)
    pool = ResourcePool(
        _str(pool_raw.get("name"), "spec.pool.name"),
        _int(pool_raw.get("generation"), "spec.pool.generation", default=0),
        _int(pool_raw.get("resourceSliceCount"), "spec.pool.resourceSliceCount", minimum=1),
    )
    node_name = _str(spec.get("nodeName"), "spec.nodeName", required=False) or None

    sets: list[CounterSet] = []
    for i, raw in enumerate(_list(spec.get("sharedCounters"), "spec.sharedCounters")):
        f = f"spec.sharedCounters[{i}]"
        cs = _map(raw, f)
        set_name = _str(cs.get("name"), f"{f}.name")
        if any(s.name == set_name for s in sets):
            raise _Invalid(f"{f}.name", f"duplicate counter set {set_name!r}")
        sets.append(CounterSet(set_name, _amounts(cs.get("counters"), f"{f}.counters")))

    devices: list[Device] = []
    names: set[str] = set()  # a set: a slice may list hundreds of devices
    for i, raw in enumerate(_list(spec.get("devices"), "spec.devices")):
        device = _device(raw, f"spec.devices[{i}]")
        if device.name in names:
            raise _Invalid(f"spec.devices[{i}].name", f"duplicate device {device.name!r}")
        names.add(device.name)
        _check_consumption(device, sets, f"spec.devices[{i}]")
        devices.append(device)
    return ResourceSlice(name, driver, pool, node_name, tuple(sets), tuple(devices))


def _device(raw: object, field: str) -> Device:
    d = _map(raw, field)
    name = _str(d.get("name"), f"{field}.name")
    body, bfield = d, field
    if "basic" in d:  # v1beta1
        body, bfield = _map(d.get("basic"), f"{field}.basic"), f"{field}.basic"
    attrs = []
    for key, value in sorted(_map(body.get("attributes"), f"{bfield}.attributes").items()):
        attrs.append(_attribute(key, value, f"{bfield}.attributes[{key}]"))
    capacity = _amounts(body.get("capacity"), f"{bfield}.capacity")
    multi = _bool(body.get("allowMultipleAllocations"), f"{bfield}.allowMultipleAllocations")
    policies = _request_policies(body.get("capacity"), f"{bfield}.capacity", multi=multi)
    consumes = []
    for j, raw_c in enumerate(_list(body.get("consumesCounters"), f"{bfield}.consumesCounters")):
        f = f"{bfield}.consumesCounters[{j}]"
        c = _map(raw_c, f)
        consumes.append(
            CounterConsumption(
                _str(c.get("counterSet"), f"{f}.counterSet"),
                _amounts(c.get("counters"), f"{f}.counters"),
            )
        )
    taints = device_taints(body.get("taints"), f"{bfield}.taints")
    return Device(name, tuple(attrs), capacity, tuple(consumes), multi, policies, taints)


_MAX_VALID_VALUES = 10  # the apiserver's limit on requestPolicy.validValues


def _request_policies(
    raw: object, field: str, *, multi: bool
) -> tuple[tuple[str, CapacityRequestPolicy], ...]:
    """The ``requestPolicy`` of each capacity that has one, checked as the
    apiserver checks it (KEP-5075): only on a device that allows multiple
    allocations, one of validValues and validRange, a default that is valid."""
    out: list[tuple[str, CapacityRequestPolicy]] = []
    for key, value in sorted(_map(raw, field).items()):
        if not isinstance(value, Mapping) or value.get("requestPolicy") is None:
            continue
        f = f"{field}[{key}].requestPolicy"
        if not multi:
            raise _Invalid(f, "requires allowMultipleAllocations: true on the device")
        p = _map(value.get("requestPolicy"), f)
        default = None if p.get("default") is None else _quantity(p["default"], f"{f}.default")
        values_raw = _list(p.get("validValues"), f"{f}.validValues")
        range_raw = p.get("validRange")
        if values_raw and range_raw is not None:
            raise _Invalid(f, "validValues and validRange are mutually exclusive")
        if len(values_raw) > _MAX_VALID_VALUES:
            raise _Invalid(f"{f}.validValues", f"at most {_MAX_VALID_VALUES} values")
        values = tuple(_quantity(v, f"{f}.validValues[{i}]") for i, v in enumerate(values_raw))
        if any(b <= a for a, b in pairwise(values)):
            raise _Invalid(f"{f}.validValues", "must be unique and in ascending order")
        lo = hi = step = None
        if range_raw is not None:
            r = _map(range_raw, f"{f}.validRange")
            lo = _quantity(r.get("min"), f"{f}.validRange.min")
            if r.get("max") is not None:
                hi = _quantity(r["max"], f"{f}.validRange.max")
                if hi < lo:
                    raise _Invalid(f"{f}.validRange.max", "must not be less than min")
            if r.get("step") is not None:
                step = _quantity(r["step"], f"{f}.validRange.step")
                if step <= 0:
                    raise _Invalid(f"{f}.validRange.step", "must be positive")
        if values or range_raw is not None:
            if default is None:
                raise _Invalid(f"{f}.default", "required with validValues or validRange")
            in_range = (
                lo is not None
                and default >= lo
                and (hi is None or default <= hi)
                and (step is None or (default - lo) % step == 0)
            )
            if default not in values and not in_range:
                raise _Invalid(f"{f}.default", "must be one of validValues or within validRange")
        out.append((key, CapacityRequestPolicy(default, values, lo, hi, step)))
    return tuple(out)


def _attribute(key: str, raw: object, field: str) -> DeviceAttribute:
    if not key or key.count("/") > 1 or key.startswith("/") or key.endswith("/"):
        raise _Invalid(field, f"{key!r} is not a qualified name (domain/name or name)")
    a = _map(raw, field)
    present = [k for k in ("int", "bool", "string", "version") if a.get(k) is not None]
    if len(present) != 1:
        raise _Invalid(field, "exactly one of int, bool, string, version must be set")
    kind = present[0]
    value = a[kind]
    if kind == "int":
        return DeviceAttribute(key, "int", _int(value, f"{field}.int", minimum=-(2**63)))
    if kind == "bool":
        return DeviceAttribute(key, "bool", _bool(value, f"{field}.bool"))
    text = _str(value, f"{field}.{kind}", required=kind == "version")
    if kind == "version":
        if parse_semver(text) is None:
            raise _Invalid(f"{field}.version", f"{text!r} is not a semantic version")
        return DeviceAttribute(key, "version", text)
    return DeviceAttribute(key, "string", text)


def _check_consumption(device: Device, sets: list[CounterSet], field: str) -> None:
    """A device may not consume more of a counter than a same-slice set shares.
    Sets published in another slice of the pool are checked when the pool is read."""
    by_name = {s.name: dict(s.counters) for s in sets}
    for j, use in enumerate(device.consumes_counters):
        shared = by_name.get(use.counter_set)
        if shared is None:
            continue
        for counter, amount in use.counters:
            f = f"{field}.consumesCounters[{j}].counters[{counter}]"
            if counter not in shared:
                raise _Invalid(f, f"counter set {use.counter_set!r} has no counter {counter!r}")
            if amount > shared[counter]:
                raise _Invalid(
                    f,
                    f"device {device.name!r} consumes more than counter set "
                    f"{use.counter_set!r} shares",
                )


def _claim_template(namespace: str, name: str, spec: Mapping[str, object]) -> ResourceClaimTemplate:
    inner = _map(spec.get("spec"), "spec.spec")
    requests = _requests(inner.get("devices"), "spec.spec.devices")
    constraints = _constraints(inner.get("devices"), "spec.spec.devices", requests)
    return ResourceClaimTemplate(namespace, name, requests, constraints)


def _constraints(
    raw: object, field: str, requests: tuple[DeviceRequest, ...]
) -> tuple[DeviceConstraint, ...]:
    devices = _map(raw, field)
    names = [q.name for q in requests]
    return device_constraints(devices.get("constraints"), f"{field}.constraints", names)


def _claim(
    namespace: str,
    name: str,
    meta: Mapping[str, object],
    spec: Mapping[str, object],
    status_raw: object,
) -> ResourceClaim:
    uid = _str(meta.get("uid"), "metadata.uid", required=False)
    requests = _requests(spec.get("devices"), "spec.devices")
    constraints = _constraints(spec.get("devices"), "spec.devices", requests)
    status = _map(status_raw, "status")
    allocation = _map(status.get("allocation"), "status.allocation")
    devices = _map(allocation.get("devices"), "status.allocation.devices")
    field = "status.allocation.devices.results"
    taken: set[AllocatedDevice] = set()
    results: set[tuple[str, str, str, str]] = set()
    shares: set[tuple[str, str, str, str, tuple[tuple[str, int], ...]]] = set()
    for i, raw in enumerate(_list(devices.get("results"), field)):
        f = f"{field}[{i}]"
        result = _map(raw, f)
        request = _str(result.get("request"), f"{f}.request")
        device = (
            _str(result.get("driver"), f"{f}.driver"),
            _str(result.get("pool"), f"{f}.pool"),
            _str(result.get("device"), f"{f}.device"),
        )
        if not _bool(result.get("adminAccess"), f"{f}.adminAccess"):
            taken.add(device)
            results.add((request, *device))
            share = _str(result.get("shareID"), f"{f}.shareID", required=False)
            consumed = _amounts(result.get("consumedCapacity"), f"{f}.consumedCapacity")
            if share or consumed:
                shares.add((*device, share or f"{request}#{i}", consumed))
    return ResourceClaim(
        namespace,
        name,
        uid,
        requests,
        tuple(sorted(taken)),
        constraints,
        tuple(sorted(results)),
        tuple(sorted(shares)),
    )


def _requests(raw: object, field: str) -> tuple[DeviceRequest, ...]:
    """A claim's ``devices.requests`` (a template's ``spec.spec.devices``, a claim's
    ``spec.devices``: ``field``)."""
    devices = _map(raw, field)
    requests: list[DeviceRequest] = []
    for i, raw_request in enumerate(_list(devices.get("requests"), f"{field}.requests")):
        f = f"{field}.requests[{i}]"
        r = _map(raw_request, f)
        req_name = _str(r.get("name"), f"{f}.name")
        if any(q.name == req_name for q in requests):
            raise _Invalid(f"{f}.name", f"duplicate request {req_name!r}")
        subs = [
            (_map(sub, f"{f}.firstAvailable[{j}]"), f"{f}.firstAvailable[{j}]")
            for j, sub in enumerate(_list(r.get("firstAvailable"), f"{f}.firstAvailable"))
        ]
        first = tuple(_str(sub.get("name"), f"{g}.name") for sub, g in subs)
        if len(set(first)) < len(first):
            raise _Invalid(f"{f}.firstAvailable", "duplicate subrequest name")
        alternatives = tuple(_exact(sub, g) for sub, g in subs)
        exactly = None
        if "exactly" in r:
            exactly = _exact(_map(r.get("exactly"), f"{f}.exactly", required=True), f"{f}.exactly")
        elif "deviceClassName" in r:  # v1beta1: the exact fields sit on the request
            exactly = _exact(r, f)
        if exactly is None and not first:
            raise _Invalid(f, "one of exactly or firstAvailable must be set")
        if exactly is not None and first:
            raise _Invalid(f, "exactly and firstAvailable are mutually exclusive")
        requests.append(DeviceRequest(req_name, exactly, first, alternatives))
    return tuple(requests)


def _exact(r: Mapping[str, object], field: str) -> ExactDeviceRequest:
    mode = _str(r.get("allocationMode"), f"{field}.allocationMode", required=False) or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise _Invalid(f"{field}.allocationMode", f"{mode!r} is not ExactCount or All")
    if mode == "All" and r.get("count") is not None:
        raise _Invalid(f"{field}.count", "must not be set when allocationMode is All")
    count = _int(r.get("count"), f"{field}.count", default=1, minimum=1)
    return ExactDeviceRequest(
        _str(r.get("deviceClassName"), f"{field}.deviceClassName"),
        count,
        mode,
        _selectors(r.get("selectors"), f"{field}.selectors"),
        _bool(r.get("adminAccess"), f"{field}.adminAccess"),
        _capacity_requests(r.get("capacity"), f"{field}.capacity"),
        device_tolerations(r.get("tolerations"), f"{field}.tolerations"),
    )


def _capacity_requests(raw: object, field: str) -> tuple[tuple[str, int], ...]:
    """``capacity.requests``: each a positive quantity under a qualified name."""
    requests = _map(_map(raw, field).get("requests"), f"{field}.requests")
    out = []
    for key, value in sorted(requests.items()):
        f = f"{field}.requests[{key}]"
        if not key or key.count("/") > 1 or key.startswith("/") or key.endswith("/"):
            raise _Invalid(f, f"{key!r} is not a qualified name (domain/name or name)")
        if isinstance(value, Mapping):
            raise _Invalid(f, "must be a quantity")
        amount = _quantity(value, f)
        if amount <= 0:
            raise _Invalid(f, "must be positive")
        out.append((key, amount))
    return tuple(out)
