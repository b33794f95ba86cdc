"""The DRA inventory the fold keeps: DeviceClasses, ResourceSlices, ResourceClaimTemplates
and DeviceTaintRules.

Theory of operation: the fold feeds every observed DRA object to
:meth:`DraInventory.upsert` / :meth:`DraInventory.delete`; each change bumps
:attr:`DraInventory.generation`, so callers may cache per generation. Devices
are read by the scheduler's rules for resource pools: slices group by (driver,
pool name), and only the newest ``pool.generation`` counts, once all its slices
are present. Contradictions make a pool unusable: a device or counter set named
twice in one pool generation is rejected at upsert; a device consuming a
counter its pool does not share, or more than the set holds, makes the pool
ignored (:meth:`DraInventory.ignored_pools`) and the upsert of its slices a
``ValidationError``. CEL results are cached in one :class:`DeviceEnv` per
distinct (driver, attributes, capacity, allowMultipleAllocations), device
matches until a slice changes (a template clears nothing, a DeviceClass the
extended-resource map), each cache capped first-in-first-out (deterministic, so
replays match). :attr:`DraInventory.changed_template` and
:meth:`DraInventory.template_read` let the fold charge again only what reads a
template. A DeviceTaintRule adds its taint to the devices it selects when the
pools' views are built, so every reader sees it as a slice's own taint; a rule's
change rebuilds every view, as a slice's does. Iteration is over sorted keys.
Details: docs/design/dra-charging.md ("Inventory"), docs/design/claim-templates.md,
docs/design/dra-placement.md ("DeviceTaintRules").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from kuota.api.dra import (
    KINDS,
    CounterSet,
    Device,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_dra_object,
)
from kuota.api.types import ObjectRef, ValidationError
from kuota.core.dra.cel import CompiledSelector, DeviceEnv, SelectorError, semver_value

#: The kinds the inventory holds: every DRA kind the reader reads but the
#: ResourceClaim, which the fold keeps apart (``FoldState._claims``): claims change
#: often, and none of them changes a device match or a charge.
INVENTORY_KINDS = tuple(k for k in KINDS if k != "ResourceClaim")
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
_ENVS_BY_CONTENT_MAX = 4096
# Distinct selector lists remembered (inventory-wide, and per pool): a tenant's
# templates can name any number of them (#23 item 6).
MATCHES_MAX = 4096
POOL_MATCHES_MAX = 1024

_K = TypeVar("_K")
_V = TypeVar("_V")


def remember(cache: dict[_K, _V], key: _K, value: _V, cap: int) -> _V:
    """Store ``value`` under ``key``; past ``cap`` entries the oldest goes first."""
    if len(cache) >= cap:
        del cache[next(iter(cache))]
    cache[key] = value
    return value


@dataclass(frozen=True, slots=True)
class PoolDevice:
    """A device of a usable pool, with where it was published."""

    driver: str
    pool: str
    slice_name: str
    device: Device

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device.name}"


@dataclass(frozen=True, slots=True)
class MatchError:
    """A selector failed while evaluating against ``device``."""

    device: PoolDevice
    error: SelectorError


_Match = tuple[PoolDevice, ...] | MatchError
_BY_ID = "devices-by-id"  # placement_memo key of ``device``
_CLASS, _SLICE = "DeviceClass", "ResourceSlice"  # what a change was to (else a template)
_Usage = tuple[int, int | None] | MatchError  # (devices matched, largest consumption)


class DraInventory:
    """Mutable holder of the DRA objects, owned by the fold (see module docstring)."""

    def __init__(self) -> None:
        self._classes: dict[str, DeviceClass] = {}
        self._templates: dict[tuple[str, str], ResourceClaimTemplate] = {}
        self._slices: dict[str, ResourceSlice] = {}
        # DeviceTaintRules by name, and in name order: their taints are added to
        # the devices they select as the pools' views are built (``_view``)
        self._rules: dict[str, DeviceTaintRule] = {}
        self._rules_in_order: tuple[DeviceTaintRule, ...] = ()
        # Moves on every change the memos depend on; read only (a plain
        # attribute, not a property: the fold reads it hundreds of thousands of
        # times a run, and a property is a Python call each time)
        self.generation = 0
        self._pools: dict[tuple[str, str], dict[str, ResourceSlice]] = {}  # (driver, pool)
        # Derived, rebuilt lazily: a view per pool (dropped when one of its slices
        # changes), a DeviceEnv per device (dropped when its slice changes), and
        # per-generation memos.
        self._views: dict[tuple[str, str], _PoolView] = {}
        self._envs: dict[str, dict[str, DeviceEnv]] = {}  # slice name -> device name -> env
        # (driver, attributes, capacity, allowMultipleAllocations) -> the env shared by
        # every device with that content (see ``env``)
        self._env_by_content: dict[tuple[object, ...], DeviceEnv] = {}
        self._usable: tuple[PoolDevice, ...] | None = None
        self._matches: dict[tuple[tuple[str, ...], str | None], _Match] = {}
        self._usage: dict[tuple[tuple[str, ...], str | None, str], _Usage] = {}
        self._extended: dict[str, DeviceClass | None] = {}
        self._changed_template: tuple[str, str] | None = None
        # What placement (kuota.core.dra.placement) derives from the devices and
        # classes alone, kept until a DeviceClass or ResourceSlice changes
        self.placement_memo: dict[object, object] = {}
        # Every (namespace, template) a charge looked up, until the fold finds no
        # workload naming it (see ``template_read``).
        self._read: dict[tuple[str, str], None] = {}
        # ResourceClaims by (namespace, name): what a direct claim asks and holds,
        # read by charging (``claim``); a claim moves no generation (claims are
        # frequent, and only the charges naming one read it: ``claim_read``)
        self._claims: dict[tuple[str, str], ResourceClaim] = {}
        self._claims_read: dict[tuple[str, str], None] = {}

    # ------------------------------------------------------------------ changes

    @staticmethod
    def handles(kind: str) -> bool:
        return kind in INVENTORY_KINDS

    @property
    def changed_template(self) -> tuple[str, str] | None:
        """(namespace, name) of the ResourceClaimTemplate the latest change was to;
        None when it was to a DeviceClass or ResourceSlice (cluster-wide)."""
        return self._changed_template

    def upsert(self, manifest: Mapping[str, object]) -> ValidationError | None:
        """Store a DeviceClass, ResourceSlice or ResourceClaimTemplate.

        An invalid object is reported and *replaces* what was stored under its
        name: the cluster now holds that invalid object, not the old one."""
        obj = parse_dra_object(manifest)
        if isinstance(obj, ValidationError):
            self._forget(obj.ref)
            return obj
        if isinstance(obj, ResourceClaim):  # the fold's (FoldState._claims), never here
            ref = ObjectRef("ResourceClaim", obj.name, obj.namespace)
            return ValidationError(ref, "kind", "a ResourceClaim is not held by the inventory")
        if isinstance(obj, DeviceClass):
            if self._classes.get(obj.name) != obj:
                self._classes[obj.name] = obj
                self._changed(_CLASS)
        elif isinstance(obj, DeviceTaintRule):
            if self._rules.get(obj.name) != obj:
                self._rules[obj.name] = obj
                self._rules_changed()
        elif isinstance(obj, ResourceClaimTemplate):
            key = (obj.namespace, obj.name)
            if self._templates.get(key) != obj:
                self._templates[key] = obj
                self._changed(key)
        else:
            conflict = self._conflict(obj)
            if conflict is not None:
                self._forget(conflict.ref)
                return conflict
            if self._slices.get(obj.name) != obj:
                self._drop_slice(obj.name)
                self._slices[obj.name] = obj
                key = (obj.driver, obj.pool.name)
                self._pools.setdefault(key, {})[obj.name] = obj
                self._views.pop(key, None)
                self._changed(_SLICE)
            view = self._view((obj.driver, obj.pool.name))
            if view.contradiction:
                # Stored (it is what the cluster holds) but its pool is ignored: say so.
                return ValidationError(
                    ObjectRef("ResourceSlice", obj.name),
                    "spec.pool",
                    f"pool {obj.pool.name!r} of driver {obj.driver!r} is ignored, "
                    f"its devices count for nothing: {view.problem}",
                )
        return None

    def delete(self, *, kind: str, name: str, namespace: str = "") -> None:
        self._forget(ObjectRef(kind, name, namespace))

    def _forget(self, ref: ObjectRef) -> None:
        if ref.kind == "DeviceClass":
            if self._classes.pop(ref.name, None) is not None:
                self._changed(_CLASS)
        elif ref.kind == "ResourceClaimTemplate":
            key = (ref.namespace, ref.name)
            if self._templates.pop(key, None) is not None:
                self._changed(key)
        elif ref.kind == "ResourceSlice" and self._drop_slice(ref.name):
            self._changed(_SLICE)
        elif ref.kind == "DeviceTaintRule" and self._rules.pop(ref.name, None) is not None:
            self._rules_changed()

    def _rules_changed(self) -> None:
        """A DeviceTaintRule came, changed or went: every pool's devices may
        carry other taints now."""
        self._rules_in_order = tuple(rule for _, rule in sorted(self._rules.items()))
        self._views.clear()
        self._changed(_SLICE)

    def _drop_slice(self, name: str) -> bool:
        old = self._slices.pop(name, None)
        if old is None:
            return False
        key = (old.driver, old.pool.name)
        del self._pools[key][name]
        if not self._pools[key]:
            del self._pools[key]
        self._views.pop(key, None)
        self._envs.pop(name, None)
        return True

    def _changed(self, what: tuple[str, str] | str) -> None:
        """Bump the generation and drop what the change can make stale: a template
        (namespace, name) nothing cached, a DeviceClass the extended-resource map,
        a slice every device match too."""
        self.generation += 1
        if isinstance(what, tuple):
            self._changed_template = what
            return
        self._changed_template = None
        self._extended.clear()
        self.placement_memo.clear()
        if what == _SLICE:
            self._matches.clear()
            self._usage.clear()
            self._usable = None

    def _conflict(self, new: ResourceSlice) -> ValidationError | None:
        """Device and counter-set names are unique within a pool generation."""
        for other in sorted(self._slices.values(), key=lambda s: s.name):
            if (
                other.name == new.name
                or other.driver != new.driver
                or other.pool.name != new.pool.name
                or other.pool.generation != new.pool.generation
            ):
                continue
            where = (
                f"of pool {new.pool.name!r} generation {new.pool.generation} "
                f"is also published by ResourceSlice {other.name!r}"
            )
            ref = ObjectRef("ResourceSlice", new.name)
            other_devices = {x.name for x in other.devices}
            other_sets = {x.name for x in other.shared_counters}
            for i, d in enumerate(new.devices):
                if d.name in other_devices:
                    return ValidationError(
                        ref, f"spec.devices[{i}].name", f"device {d.name!r} {where}"
                    )
            for i, s in enumerate(new.shared_counters):
                if s.name in other_sets:
                    return ValidationError(
                        ref, f"spec.sharedCounters[{i}].name", f"counter set {s.name!r} {where}"
                    )
        return None

    # ------------------------------------------------------------------ reads

    def device_class(self, name: str) -> DeviceClass | None:
        return self._classes.get(name)

    def claim_template(self, namespace: str, name: str) -> ResourceClaimTemplate | None:
        key = (namespace, name)
        self._read[key] = None
        return self._templates.get(key)

    def template_read(self, namespace: str, name: str) -> bool:
        """Whether a charge looked the template up since :meth:`forget_read` last
        dropped it. A workload that names it was charged, and so looked it up
        (a charge that stopped before it does not depend on it until what
        stopped it changes): a template never read has no user to charge again."""
        return (namespace, name) in self._read

    def forget_read(self, namespace: str, name: str) -> None:
        """The fold found no workload naming the template: forget it was read."""
        self._read.pop((namespace, name), None)

    def set_claim(self, namespace: str, name: str, claim: ResourceClaim | None) -> bool:
        """Store (None: forget) ResourceClaim ``namespace/name``; whether a charge
        read it and it changed (then the charges naming it are stale). Moves no
        generation."""
        key = (namespace, name)
        if claim is None:
            if self._claims.pop(key, None) is None:
                return False
        elif self._claims.get(key) == claim:
            return False
        else:
            self._claims[key] = claim
        return key in self._claims_read

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        """ResourceClaim ``namespace/name``, for a charge (remembered as read)."""
        key = (namespace, name)
        self._claims_read[key] = None
        return self._claims.get(key)

    def forget_claim_read(self, namespace: str, name: str) -> None:
        """The fold found no workload naming the claim: forget it was read."""
        self._claims_read.pop((namespace, name), None)

    def device(self, driver: str, pool: str, name: str) -> PoolDevice | None:
        """The usable device (driver, pool, name), or None (memoised per generation)."""
        memo = self.placement_memo
        found = memo.get(_BY_ID)
        if found is None:
            found = memo[_BY_ID] = {
                (d.driver, d.pool, d.device.name): d for d in self.usable_devices()
            }
        assert isinstance(found, dict)
        device = found.get((driver, pool, name))
        return device if isinstance(device, PoolDevice) else None

    def device_class_for_extended_resource(self, resource: str) -> DeviceClass | None:
        """The DeviceClass the scheduler uses for an extended resource request.

        ``deviceclass.resource.kubernetes.io/<class>`` names a class directly.
        Otherwise the classes whose ``extendedResourceName`` is ``resource``: the
        one created last wins, ties go to the name that sorts first (the
        documented rule of the DeviceClass API)."""
        if resource in self._extended:
            return self._extended[resource]
        found: DeviceClass | None = None
        if resource.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX):
            found = self._classes.get(resource.removeprefix(IMPLICIT_EXTENDED_RESOURCE_PREFIX))
        else:
            candidates = [c for c in self._classes.values() if c.extended_resource_name == resource]
            if candidates:
                newest = max(c.creation_timestamp for c in candidates)
                found = min(
                    (c for c in candidates if c.creation_timestamp == newest), key=lambda c: c.name
                )
        self._extended[resource] = found
        return found

    def usable_devices(self) -> tuple[PoolDevice, ...]:
        """Devices of complete, consistent pools at their newest generation, sorted
        by (driver, pool, slice name) and in slice order."""
        if self._usable is None:
            self._usable = tuple(d for key in sorted(self._pools) for d in self._view(key).devices)
        return self._usable

    def node_name(self, device: PoolDevice) -> str | None:
        """The node a usable device is local to: its slice's ``nodeName``; None when
        the slice names no node (``nodeSelector``, ``allNodes``)."""
        published = self._slices.get(device.slice_name)
        return None if published is None else published.node_name

    def counter_sets(self, driver: str, pool: str) -> tuple[CounterSet, ...]:
        """The shared counter sets of a usable pool's newest generation, sorted by
        name (from any of its slices); () for an unknown or ignored pool."""
        if (driver, pool) not in self._pools:
            return ()
        return self._view((driver, pool)).counter_sets

    def ignored_pools(self) -> tuple[tuple[str, str, str], ...]:
        """(driver, pool, why) for every pool whose devices are not used."""
        return tuple(
            (*key, self._view(key).problem)
            for key in sorted(self._pools)
            if self._view(key).problem
        )

    def _view(self, key: tuple[str, str]) -> _PoolView:
        view = self._views.get(key)
        if view is None:
            slices = sorted(self._pools[key].values(), key=lambda s: s.name)
            newest = max(s.pool.generation for s in slices)
            current = [s for s in slices if s.pool.generation == newest]
            why, contradiction = _pool_problem(current)
            if why:
                view = _PoolView((), f"generation {newest}: {why}", contradiction)
            else:
                driver, pool = key
                view = _PoolView(
                    tuple(
                        PoolDevice(driver, pool, s.name, self._tainted(driver, pool, d))
                        for s in current
                        for d in s.devices
                    ),
                    counter_sets=tuple(
                        sorted(
                            (cs for s in current for cs in s.shared_counters),
                            key=lambda cs: cs.name,
                        )
                    ),
                )
            self._views[key] = view
        return view

    def _tainted(self, driver: str, pool: str, device: Device) -> Device:
        """``device`` with the taints of the DeviceTaintRules that select it added
        (in rule name order), as the scheduler sees it."""
        if not self._rules_in_order:
            return device
        added = tuple(
            rule.taint
            for rule in self._rules_in_order
            if rule.matches(driver, pool, device.name) and rule.taint not in device.taints
        )
        return replace(device, taints=device.taints + added) if added else device

    # ------------------------------------------------------------------ matching

    def env(self, device: PoolDevice) -> DeviceEnv:
        per_slice = self._envs.setdefault(device.slice_name, {})
        env = per_slice.get(device.device.name)
        if env is None:
            d = device.device
            # A selector sees only the driver, attributes, capacity and
            # allowMultipleAllocations (not the name, pool or slice), so devices
            # alike in those share one DeviceEnv and its per-expression results:
            # 100 identical 8-GPU nodes evaluate each selector 16 times, not 6,400.
            content = (device.driver, d.attributes, d.capacity, d.allow_multiple_allocations)
            env = self._env_by_content.get(content)
            if env is None:
                attrs = [
                    (a.name, semver_value(str(a.value)) if a.kind == "version" else a.value)
                    for a in d.attributes
                ]
                env = DeviceEnv(
                    driver=device.driver,
                    attributes=attrs,
                    capacity=d.capacity,
                    allow_multiple_allocations=d.allow_multiple_allocations,
                )
                if len(self._env_by_content) >= _ENVS_BY_CONTENT_MAX:
                    self._env_by_content.clear()  # bounded: a cache, never a result
                self._env_by_content[content] = env
            per_slice[device.device.name] = env
        return env

    def matching_devices(
        self, *, selectors: tuple[CompiledSelector, ...], driver: str | None
    ) -> tuple[PoolDevice, ...] | MatchError:
        """Usable devices (of ``driver`` if given) for which every selector is true,
        evaluated in order with short-circuit. The first runtime error, in device
        order, aborts the whole match, as a CEL runtime error aborts allocation in
        Kubernetes."""
        key = (tuple(s.expression for s in selectors), driver)
        cached = self._matches.get(key)
        if cached is None:
            found: list[PoolDevice] = []
            for pool_key in sorted(self._pools):
                if driver is not None and pool_key[0] != driver:
                    continue
                matched = self._pool_matches(pool_key, selectors)
                if isinstance(matched, MatchError):
                    cached = matched
                    break
                found.extend(matched)
            else:
                cached = tuple(found)
            remember(self._matches, key, cached, MATCHES_MAX)
        return cached

    def counter_usage(
        self, *, selectors: tuple[CompiledSelector, ...], driver: str | None, counter: str
    ) -> _Usage:
        """How many usable devices match, and the most of ``counter`` any of them
        consumes (``None`` if none consumes it)."""
        key = (tuple(s.expression for s in selectors), driver, counter)
        cached = self._usage.get(key)
        if cached is None:
            matched = self.matching_devices(selectors=selectors, driver=driver)
            if isinstance(matched, MatchError):
                cached = matched
            else:
                amounts = [
                    amount
                    for d in matched
                    for use in d.device.consumes_counters
                    for name, amount in use.counters
                    if name == counter
                ]
                cached = (len(matched), max(amounts) if amounts else None)
            remember(self._usage, key, cached, MATCHES_MAX)
        return cached

    def _pool_matches(
        self, key: tuple[str, str], selectors: tuple[CompiledSelector, ...]
    ) -> tuple[PoolDevice, ...] | MatchError:
        view = self._view(key)
        exprs = tuple(s.expression for s in selectors)
        cached = view.matches.get(exprs)
        if cached is not None:
            return cached
        found: list[PoolDevice] = []
        for device in view.devices:
            env = self.env(device)
            for selector in selectors:
                verdict = env.matches(selector)
                if isinstance(verdict, SelectorError):
                    return remember(
                        view.matches, exprs, MatchError(device, verdict), POOL_MATCHES_MAX
                    )
                if not verdict:
                    break
            else:
                found.append(device)
        return remember(view.matches, exprs, tuple(found), POOL_MATCHES_MAX)


@dataclass(slots=True)
class _PoolView:
    """What a pool contributes, derived from its slices; ``problem`` non-empty
    means the pool is ignored."""

    devices: tuple[PoolDevice, ...]
    problem: str = ""
    contradiction: bool = False  # the slices contradict each other (not just incomplete)
    counter_sets: tuple[CounterSet, ...] = ()  # of the current generation, sorted by name
    matches: dict[tuple[str, ...], tuple[PoolDevice, ...] | MatchError] = field(
        default_factory=dict
    )


def _pool_problem(current: list[ResourceSlice]) -> tuple[str, bool]:
    """Why the pool's current generation is unusable ("" if usable), and whether
    that is a contradiction between its slices rather than a pool still arriving."""
    counts = sorted({s.pool.resource_slice_count for s in current})
    if len(counts) != 1:
        return f"slices disagree on resourceSliceCount ({', '.join(map(str, counts))})", True
    if len(current) != counts[0]:
        return f"{len(current)} of {counts[0]} slices present", False
    shared = {cs.name: dict(cs.counters) for s in current for cs in s.shared_counters}
    for s in current:
        for d in s.devices:
            for use in d.consumes_counters:
                have = shared.get(use.counter_set)
                for counter, amount in use.counters:
                    if have is None or counter not in have:
                        return (
                            f"device {d.name!r} of ResourceSlice {s.name!r} consumes counter "
                            f"{counter!r} of counter set {use.counter_set!r}, which the pool "
                            "does not share"
                        ), True
                    if amount > have[counter]:
                        return (
                            f"device {d.name!r} of ResourceSlice {s.name!r} consumes more "
                            f"{counter!r} than counter set {use.counter_set!r} shares"
                        ), True
    return "", False
