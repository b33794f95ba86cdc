"""What one pod of a PodSet charges against quota, DRA devices included.

Theory of operation: ``charge_podset`` turns a PodSet's per-pod requests plus
its ResourceClaimTemplates into one per-pod resource vector, as Kueue's DRA
integration (``pkg/dra``) does. A request of a DeviceClass mapped in
``deviceClassMappings`` charges ``count`` devices to the mapping's name, or,
for a mapping with a counter source, the largest amount of that counter the
matching devices consume, times ``count`` (a whole 80 GiB GPU 80Gi, a
``1g.10gb`` MIG slice 10Gi). An extended resource backed by a DeviceClass is
charged to the class's mapping, so both paths draw from one quota. The rest
passes through, minus ``excludeResourcePrefixes``. A pod claim naming a
ResourceClaim directly (``resourceClaimName``) is not the pod's: every pod that
names it shares it, so ``charge_podset`` leaves it out and :func:`charge_claim`
charges the claim as a whole, once (the fold decides once for whom:
docs/design/dra-placement.md, "Direct ResourceClaims"): an unallocated claim
as its requests ask, as a template would be; an allocated one at what it holds,
each allocated device mapped as the request it was allocated for maps devices.
What cannot be charged is a
:class:`NotChargeable`: a CamelCase reason, a message naming the object, and
``retryable`` (a cluster change alone can fix it); the first problem found
wins. Results depend only on the arguments. Rules: docs/design/dra-charging.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from kuota.api.dra import (
    Device,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_dra_object,
)
from kuota.api.types import ClaimRef, Configuration, DeviceClassMapping, PodSet
from kuota.core.dra.alternatives import all_count, choose
from kuota.core.dra.capacity import NO_VALID_VALUE, CapacityProblem, capacity_of, consumed
from kuota.core.dra.cel import CompiledSelector, SelectorError, compile_selector
from kuota.core.dra.inventory import (
    IMPLICIT_EXTENDED_RESOURCE_PREFIX,
    DraInventory,
    MatchError,
    PoolDevice,
)
from kuota.core.dra.pod_devices import PodDevices, device_requests, pod_devices, pod_requests
from kuota.quantity import MAX_MILLI, MILLI, format_quantity

__all__ = [
    "IMPLICIT_EXTENDED_RESOURCE_PREFIX",
    "MAX_DEVICES_PER_REQUEST",
    "Charge",
    "Device",
    "DeviceClass",
    "DeviceRequest",
    "DraInventory",
    "NotChargeable",
    "PodDevices",
    "PoolDevice",
    "Reason",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "charge_claim",
    "charge_podset",
    "device_requests",
    "direct_claims",
    "parse_dra_object",
    "pod_devices",
]

MAX_DEVICES_PER_REQUEST = 10_000


class Reason:
    """The closed set of NotChargeable reasons."""

    UNSUPPORTED_CLAIM = "UnsupportedClaim"  # no exactly nor firstAvailable, an unknown mode
    UNKNOWN_RESOURCE_CLAIM_TEMPLATE = "UnknownResourceClaimTemplate"  # retryable
    UNKNOWN_RESOURCE_CLAIM = "UnknownResourceClaim"  # retryable: a direct claim not found
    UNKNOWN_DEVICE_CLASS = "UnknownDeviceClass"  # retryable
    DEVICE_CLASS_NOT_MAPPED = "DeviceClassNotMapped"
    INVALID_CEL = "InvalidCEL"  # does not compile, errors on a device, or is not a bool
    INSUFFICIENT_DEVICES = "InsufficientDevices"  # retryable
    MISSING_COUNTER = "MissingCounter"  # retryable: matched devices consume no such counter
    INVALID_REQUEST = "InvalidRequest"  # absurd counts, fractional devices, overflow
    # consumable capacity (docs/design/consumable-capacity.md)
    CAPACITY_NOT_MAPPED = "CapacityNotMapped"  # capacity.requests, but no capacity source
    UNKNOWN_CAPACITY = "UnknownCapacity"  # retryable: no matching device publishes it
    CAPACITY_OUT_OF_RANGE = "CapacityOutOfRange"  # above validRange.max or the capacity
    NO_VALID_CAPACITY_VALUE = "NoValidCapacityValue"  # above every validValues entry


@dataclass(frozen=True, slots=True)
class Charge:
    per_pod: tuple[tuple[str, int], ...]  # resource name -> milli-units, sorted by name


@dataclass(frozen=True, slots=True)
class NotChargeable:
    reason: str  # one of Reason
    message: str
    retryable: bool


def charge_podset(
    *, inventory: DraInventory, config: Configuration, namespace: str, podset: PodSet
) -> Charge | NotChargeable:
    """The per-pod resource vector of ``podset`` in ``namespace`` (see module docstring)."""
    charger = _Charger(inventory=inventory, config=config, namespace=namespace, podset=podset)
    try:
        return charger.run()
    except _Stop as stop:
        return stop.verdict


def charge_claim(
    *,
    inventory: DraInventory,
    config: Configuration,
    namespace: str,
    name: str,
    pod_claim: str = "",
) -> Charge | NotChargeable:
    """What ResourceClaim ``namespace/name`` charges as a whole, once for all the
    pods that share it (``per_pod`` is then the claim's vector, not a pod's);
    ``pod_claim`` names the pod claim that refers to it, for the messages."""
    charger = _Charger(
        inventory=inventory, config=config, namespace=namespace, podset=PodSet("", 1, (), ())
    )
    try:
        return charger.direct(name, pod_claim)
    except _Stop as stop:
        return stop.verdict


def direct_claims(podset: PodSet) -> tuple[str, ...]:
    """The ResourceClaims the podset's pods name directly, in order, each once."""
    return tuple(
        dict.fromkeys(c.resource_claim_name for c in podset.claims if c.resource_claim_name)
    )


def _bare(name: str, driver: str) -> str:
    """A capacity name without its domain when that domain is ``driver``'s."""
    prefix = driver + "/"
    return name[len(prefix) :] if name.startswith(prefix) else name


def _q(text: str) -> str:
    """Quote a name in a message the way Kubernetes messages do: "name"."""
    return json.dumps(text, ensure_ascii=False)


class _Stop(Exception):
    def __init__(self, reason: str, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.verdict = NotChargeable(reason, message, retryable)


@dataclass
class _Charger:
    inventory: DraInventory
    config: Configuration
    namespace: str
    podset: PodSet
    totals: dict[str, int] = field(default_factory=dict)
    replaced: set[str] = field(default_factory=set)  # extended resources charged via DRA
    taken: set[tuple[str, str]] = field(default_factory=set)  # (slice, device) counted once
    choices: list[int] | None = None  # the firstAvailable alternatives charged, in order

    def run(self) -> Charge:
        for claim in self.podset.claims:
            self._claim(claim)
        for name, amount in self.podset.requests:
            self._extended_resource(name, amount)
        prefixes = self.config.exclude_resource_prefixes
        for name, amount in self.podset.requests:
            if name not in self.replaced and not name.startswith(prefixes):
                self._add(name, amount, f"resource {_q(name)}")
        return Charge(tuple(sorted(self.totals.items())))

    # ------------------------------------------------------------------ claims

    def direct(self, name: str, pod_claim: str) -> Charge:
        """The whole charge of ResourceClaim ``name`` (``charge_claim``)."""
        claim = self.inventory.claim(self.namespace, name)
        if claim is None:
            of = f" (pod claim {_q(pod_claim)})" if pod_claim else ""
            raise _Stop(
                Reason.UNKNOWN_RESOURCE_CLAIM,
                f"ResourceClaim {self.namespace}/{name}{of} not found",
                retryable=True,
            )
        owner = f"ResourceClaim {claim.ref}"
        for request in claim.requests:
            held = [r for r in claim.results if r[0].split("/", 1)[0] == request.name]
            if held:
                self._allocated(owner, request, held)
            elif not claim.results:
                self._request(owner, request)
            # else: allocated, nothing for this request (adminAccess): it takes nothing
        return Charge(tuple(sorted(self.totals.items())))

    def _allocated(
        self, owner: str, request: DeviceRequest, held: list[tuple[str, str, str, str]]
    ) -> None:
        """Charge an allocated request at the devices it holds, each mapped as
        charging maps devices: a device (mapping without source), what the device
        consumes of the mapping's counter. A device not published any more, one
        consuming no such counter, or a capacity mapping (the capacity a shared
        device gave is not read): charged as the request asks."""
        where = f"{owner} request {_q(request.name)} (allocated)"
        exact = request.exactly
        if exact is None:
            self._request(owner, request)  # firstAvailable: refused there
            return
        mappings = self._mappings(exact.device_class_name)
        if not mappings:
            raise _Stop(
                Reason.DEVICE_CLASS_NOT_MAPPED,
                f"{where}: DeviceClass {_q(exact.device_class_name)} is not mapped to a quota "
                "resource in deviceClassMappings",
                retryable=False,
            )
        devices = [self.inventory.device(d, p, n) for _, d, p, n in held]
        if any(m.capacity is not None for m in mappings) or None in devices:
            self._request(owner, request)
            return
        counters = [m for m in mappings if m.counter is not None]
        if not counters:
            self._add(mappings[0].name, len(held) * MILLI, where)
            return
        amounts: list[tuple[str, int]] = []
        for mapping in counters:
            source = mapping.counter
            assert source is not None
            total = 0
            for d in devices:
                assert d is not None
                if source.driver and d.driver != source.driver:
                    continue
                for use in d.device.consumes_counters:
                    total += sum(a for c, a in use.counters if c == source.name)
            if total == 0:
                self._request(owner, request)
                return
            amounts.append((mapping.name, total))
        for mapping_name, total in amounts:
            self._add(mapping_name, total, where)

    def _claim(self, claim: ClaimRef) -> None:
        if claim.resource_claim_name:
            return  # shared by every pod naming it: charged once (``charge_claim``)
        name = claim.resource_claim_template_name
        if not name:
            return
        template = self.inventory.claim_template(self.namespace, name)
        if template is None:
            raise _Stop(
                Reason.UNKNOWN_RESOURCE_CLAIM_TEMPLATE,
                f"ResourceClaimTemplate {self.namespace}/{name} (pod claim {_q(claim.name)}) "
                "not found",
                retryable=True,
            )
        for request in template.requests:
            self._request(f"ResourceClaimTemplate {template.ref}", request)

    def _request(self, owner: str, request: DeviceRequest) -> None:
        where = f"{owner} request {_q(request.name)}"
        exact = request.exactly
        if request.alternatives:
            where, exact = self._first_available(where, request)
        if exact is None:
            raise _Stop(
                Reason.UNSUPPORTED_CLAIM,
                f"{where}: neither exactly nor firstAvailable is set",
                retryable=False,
            )
        if exact.admin_access:
            return  # admin access observes devices in use: no quota (Kueue refuses it)
        if exact.allocation_mode not in ("ExactCount", "All"):
            raise _Stop(
                Reason.UNSUPPORTED_CLAIM,
                f"{where}: allocationMode {_q(exact.allocation_mode)} is not supported",
                retryable=False,
            )
        count = self._device_count(where, exact.count)
        request_selectors = self._compile(where, "selector", exact.selectors)
        class_name = exact.device_class_name
        mappings = self._mappings(class_name)
        if not mappings:
            raise _Stop(
                Reason.DEVICE_CLASS_NOT_MAPPED,
                f"{where}: DeviceClass {_q(class_name)} is not mapped to a quota resource in "
                "deviceClassMappings",
                retryable=False,
            )
        device_class = self.inventory.device_class(class_name)
        if device_class is None:
            raise _Stop(
                Reason.UNKNOWN_DEVICE_CLASS,
                f"{where}: DeviceClass {_q(class_name)} not found",
                retryable=True,
            )
        selectors = self._class_selectors(where, device_class) + request_selectors
        if exact.allocation_mode == "All":
            count = self._all_count(where, device_class, selectors, exact)
        capacities = [m for m in mappings if m.capacity is not None]
        if exact.capacity_requests and not capacities:
            names = ", ".join(_q(n) for n, _ in exact.capacity_requests)
            raise _Stop(
                Reason.CAPACITY_NOT_MAPPED,
                f"{where}: requests capacity {names}, but no deviceClassMappings entry for "
                f"DeviceClass {_q(class_name)} has a capacity source; a shared device would be "
                f"charged as a whole one (add sources: [{{capacity: {{name: ...}}}}] to "
                f"mapping {_q(mappings[0].name)})",
                retryable=False,
            )
        if capacities:
            for mapping in capacities:
                self._charge_capacity(
                    where, device_class, selectors, mapping, count, exact.capacity_requests
                )
            return
        counters = [m for m in mappings if m.counter is not None]
        if counters:
            for mapping in counters:
                self._charge_counter(where, device_class, selectors, mapping, count)
            return
        if request_selectors:
            self._take_devices(where, device_class, selectors, count)
        self._add(mappings[0].name, count * MILLI, where)

    # ------------------------------------------------------------------ firstAvailable, All

    def _first_available(
        self, where: str, request: DeviceRequest
    ) -> tuple[str, ExactDeviceRequest]:
        """The alternative charged: the first some node can give, beside the pod's
        other requests when it can (``kuota.core.dra.alternatives.choose``). Every
        alternative's class must exist and
        its selectors compile, as the scheduler's allocator checks them all before
        allocating any; a CEL error on a device counts for the alternatives it
        tries: those up to the one charged."""
        alternatives = request.alternatives
        names = request.first_available
        compiled = []
        for name, alternative in zip(names, alternatives, strict=True):
            sub = f"{where} subrequest {_q(name)}"
            self._device_count(sub, alternative.count)
            device_class = self.inventory.device_class(alternative.device_class_name)
            if device_class is None:
                raise _Stop(
                    Reason.UNKNOWN_DEVICE_CLASS,
                    f"{sub}: DeviceClass {_q(alternative.device_class_name)} not found",
                    retryable=True,
                )
            selectors = self._class_selectors(sub, device_class) + self._compile(
                sub, "selector", alternative.selectors
            )
            compiled.append((sub, selectors))
        if self.choices is None:
            pod = pod_requests(self.inventory, self.namespace, self.podset)
            self.choices = list(choose(self.inventory, pod))
        chosen = self.choices.pop(0) if self.choices else -1
        for sub, selectors in compiled[: chosen + 1] if chosen >= 0 else compiled:
            matched = self.inventory.matching_devices(
                selectors=tuple(s for _, s in selectors), driver=None
            )
            if isinstance(matched, MatchError):
                raise self._cel_failure(sub, selectors, matched)
        if chosen < 0:
            wanted = ", ".join(
                f"{_q(n)} ({_alternative(a)})" for n, a in zip(names, alternatives, strict=True)
            )
            raise _Stop(
                Reason.INSUFFICIENT_DEVICES,
                f"{where}: no node can give any firstAvailable alternative: {wanted}",
                retryable=True,
            )
        return compiled[chosen][0], alternatives[chosen]

    def _all_count(
        self,
        where: str,
        device_class: DeviceClass,
        selectors: tuple[tuple[str, CompiledSelector], ...],
        exact: ExactDeviceRequest,
    ) -> int:
        """How many devices allocationMode All takes (the most one node can give)."""
        matched = self.inventory.matching_devices(
            selectors=tuple(s for _, s in selectors), driver=None
        )
        if isinstance(matched, MatchError):
            raise self._cel_failure(where, selectors, matched)
        count = all_count(self.inventory, exact)
        if count <= 0:
            raise _Stop(
                Reason.INSUFFICIENT_DEVICES,
                f'{where}: allocationMode "All" needs at least one device; no node can '
                f"give the {len(matched)} device(s) matching DeviceClass "
                f"{_q(device_class.name)} and the request's selectors",
                retryable=True,
            )
        return self._device_count(where, count)

    # ------------------------------------------------------------------ extended resources

    def _extended_resource(self, name: str, amount: int) -> None:
        device_class = self.inventory.device_class_for_extended_resource(name)
        if device_class is None or amount <= 0:
            return
        self.replaced.add(name)
        where = f"extended resource {_q(name)} (DeviceClass {_q(device_class.name)})"
        if amount % MILLI:
            raise _Stop(
                Reason.INVALID_REQUEST,
                f"{where}: quantity {format_quantity(amount)} is not a whole number of devices",
                retryable=False,
            )
        count = self._device_count(where, amount // MILLI)
        mappings = self._mappings(device_class.name)
        counters = [m for m in mappings if m.counter is not None]
        capacities = [m for m in mappings if m.capacity is not None]
        if capacities:
            selectors = self._class_selectors(where, device_class)
            for mapping in capacities:
                self._charge_capacity(where, device_class, selectors, mapping, count, ())
        elif counters:
            selectors = self._class_selectors(where, device_class)
            for mapping in counters:
                self._charge_counter(where, device_class, selectors, mapping, count)
        else:
            self._add(mappings[0].name if mappings else name, amount, where)

    # ------------------------------------------------------------------ devices

    def _charge_counter(
        self,
        where: str,
        device_class: DeviceClass,
        selectors: tuple[tuple[str, CompiledSelector], ...],
        mapping: DeviceClassMapping,
        count: int,
    ) -> None:
        source = mapping.counter
        assert source is not None
        usage = self.inventory.counter_usage(
            selectors=tuple(s for _, s in selectors), driver=source.driver, counter=source.name
        )
        if isinstance(usage, MatchError):
            raise self._cel_failure(where, selectors, usage)
        matched, largest = usage
        of_driver = f" of driver {_q(source.driver)}" if source.driver else ""
        if matched < count:
            raise _Stop(
                Reason.INSUFFICIENT_DEVICES,
                f"{where}: {matched} device(s){of_driver} match DeviceClass "
                f"{_q(device_class.name)} and the request's selectors, {count} requested",
                retryable=True,
            )
        if largest is None:
            raise _Stop(
                Reason.MISSING_COUNTER,
                f"{where}: no device{of_driver} matching DeviceClass {_q(device_class.name)} "
                f"consumes counter {_q(source.name)} (quota resource {_q(mapping.name)})",
                retryable=True,
            )
        self._add(mapping.name, largest * count, where)

    def _charge_capacity(
        self,
        where: str,
        device_class: DeviceClass,
        selectors: tuple[tuple[str, CompiledSelector], ...],
        mapping: DeviceClassMapping,
        count: int,
        requests: tuple[tuple[str, int], ...],
    ) -> None:
        """The capacity a request takes, rounded per each matching device's
        requestPolicy, the largest over the devices that can give it, × count."""
        source = mapping.capacity
        assert source is not None
        if source.device_selector:
            label = f"deviceClassMappings {_q(mapping.name)} deviceSelector"
            selectors = selectors + self._compile(where, label, (source.device_selector,))
        matched = self.inventory.matching_devices(
            selectors=tuple(s for _, s in selectors), driver=source.driver
        )
        if isinstance(matched, MatchError):
            raise self._cel_failure(where, selectors, matched)
        of_driver = f" of driver {_q(source.driver)}" if source.driver else ""
        if len(matched) < count:
            raise _Stop(
                Reason.INSUFFICIENT_DEVICES,
                f"{where}: {len(matched)} device(s){of_driver} match DeviceClass "
                f"{_q(device_class.name)} and the request's selectors, {count} requested",
                retryable=True,
            )
        largest: int | None = None
        fitting = 0
        unknown: tuple[PoolDevice, str] | None = None  # the first device lacking a name
        problem: tuple[PoolDevice, str, CapacityProblem] | None = None  # the first refusal
        for d in matched:
            # ``memory`` and ``<driver>/memory`` name one capacity of this driver's devices.
            mapped = _bare(source.name, d.driver)
            wanted = {_bare(n, d.driver): amount for n, amount in requests}
            charge: int | None = None
            for name in sorted({mapped, *wanted}):
                published = capacity_of(d.device, d.driver, name)
                if published is None:
                    unknown = unknown or (d, name)
                    break
                verdict = consumed(
                    value=published[0], policy=published[1], request=wanted.get(name)
                )
                if isinstance(verdict, CapacityProblem):
                    problem = problem or (d, name, verdict)
                    break
                if name == mapped:
                    # A device that cannot be shared is allocated whole, whatever the
                    # claim asked of it: charge all of it (Kueue charges the request).
                    charge = verdict if d.device.allow_multiple_allocations else published[0]
            else:
                fitting += 1
                assert charge is not None
                largest = charge if largest is None else max(largest, charge)
        if largest is not None and fitting >= count:
            self._add(mapping.name, largest * count, where)
            return
        if largest is not None:
            raise _Stop(
                Reason.INSUFFICIENT_DEVICES,
                f"{where}: {fitting} device(s){of_driver} matching DeviceClass "
                f"{_q(device_class.name)} can give the capacity requested, {count} requested",
                retryable=True,
            )
        if problem is not None:
            d, name, refused = problem
            reason = (
                Reason.NO_VALID_CAPACITY_VALUE
                if refused.kind == NO_VALID_VALUE
                else Reason.CAPACITY_OUT_OF_RANGE
            )
            raise _Stop(
                reason,
                f"{where}: no device{of_driver} matching DeviceClass {_q(device_class.name)} "
                f"can give capacity {_q(name)}: on device {d}, {refused.text}",
                retryable=False,
            )
        assert unknown is not None
        d, name = unknown
        raise _Stop(
            Reason.UNKNOWN_CAPACITY,
            f"{where}: no device{of_driver} matching DeviceClass {_q(device_class.name)} "
            f"publishes capacity {_q(name)} (device {d} does not; quota resource "
            f"{_q(mapping.name)})",
            retryable=True,
        )

    def _take_devices(
        self,
        where: str,
        device_class: DeviceClass,
        selectors: tuple[tuple[str, CompiledSelector], ...],
        count: int,
    ) -> None:
        matched = self.inventory.matching_devices(
            selectors=tuple(s for _, s in selectors), driver=None
        )
        if isinstance(matched, MatchError):
            raise self._cel_failure(where, selectors, matched)
        free: list[PoolDevice] = []
        for d in matched:
            if (d.slice_name, d.device.name) not in self.taken:
                free.append(d)
                if len(free) == count:
                    break
        if len(free) < count:
            raise _Stop(
                Reason.INSUFFICIENT_DEVICES,
                f"{where}: {len(free)} device(s) in the cluster match DeviceClass "
                f"{_q(device_class.name)} and the request's selectors, {count} requested",
                retryable=True,
            )
        self.taken.update((d.slice_name, d.device.name) for d in free)

    @staticmethod
    def _cel_failure(
        where: str, selectors: tuple[tuple[str, CompiledSelector], ...], failure: MatchError
    ) -> _Stop:
        label = next(lbl for lbl, s in selectors if s.expression == failure.error.expression)
        return _Stop(
            Reason.INVALID_CEL,
            f"{where}: {label} {_q(failure.error.expression)} failed on device "
            f"{failure.device}: {failure.error.message}",
            retryable=False,
        )

    # ------------------------------------------------------------------ helpers

    def _mappings(self, class_name: str) -> tuple[DeviceClassMapping, ...]:
        return tuple(
            m for m in self.config.device_class_mappings if class_name in m.device_class_names
        )

    def _class_selectors(
        self, where: str, device_class: DeviceClass
    ) -> tuple[tuple[str, CompiledSelector], ...]:
        label = f"DeviceClass {_q(device_class.name)} selector"
        return self._compile(where, label, device_class.selectors)

    def _compile(
        self, where: str, label: str, expressions: tuple[str, ...]
    ) -> tuple[tuple[str, CompiledSelector], ...]:
        out = []
        for i, expression in enumerate(expressions):
            compiled = compile_selector(expression)
            if isinstance(compiled, SelectorError):
                raise _Stop(
                    Reason.INVALID_CEL,
                    f"{where}: {label} #{i} {_q(compiled.expression)}: {compiled.message}",
                    retryable=False,
                )
            out.append((f"{label} #{i}", compiled))
        return tuple(out)

    def _device_count(self, where: str, count: int) -> int:
        if count > MAX_DEVICES_PER_REQUEST:
            raise _Stop(
                Reason.INVALID_REQUEST,
                f"{where}: {count} devices requested, more than the limit of "
                f"{MAX_DEVICES_PER_REQUEST} per request",
                retryable=False,
            )
        return count

    def _add(self, name: str, amount: int, where: str) -> None:
        total = self.totals.get(name, 0) + amount
        if amount > MAX_MILLI or total > MAX_MILLI:
            raise _Stop(
                Reason.INVALID_REQUEST,
                f"{where}: the per-pod total of {_q(name)} is absurdly large",
                retryable=False,
            )
        self.totals[name] = total


def _alternative(request: ExactDeviceRequest) -> str:
    if request.allocation_mode == "All":
        return f"all devices of DeviceClass {_q(request.device_class_name)}"
    return f"{request.count} of DeviceClass {_q(request.device_class_name)}"
