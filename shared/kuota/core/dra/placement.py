"""Gang placement on node-local DRA devices: can every pod get a node and its devices?

Theory of operation (issue #17, first brick; docs/design/dra-placement.md):
:func:`place_gang` takes the inventory, what is already taken (devices, by
(driver, pool, device), and counter amounts, by (driver, pool, counterSet,
counter)) and a gang (:class:`GangPod`: the ``exactly`` requests of one pod and
the nodes it may use, None for all). It answers a :class:`Placement` (per pod a
node and, per request, the devices chosen), :class:`NoPlacement` (proven: no
assignment exists; the message names the nodes and what each has free),
:class:`SearchBudgetExhausted` (none found within ``budget`` steps, not proven
impossible) or :class:`PlacementInvalid` (a request it cannot evaluate: an
unknown DeviceClass, bad CEL, an unsupported request form).

Devices are those of :meth:`DraInventory.usable_devices` whose slice names a
node. A request's candidates on a node are the devices there that match its
DeviceClass's and its own selectors (:meth:`DraInventory.matching_devices`,
so a CEL runtime error anywhere fails the request, as in the scheduler's
allocator), minus the taken ones. A device that consumes counters may be taken
only while every counter it consumes stays within its pool's counter set
(:meth:`DraInventory.counter_sets`) — this is how a MIG slice and its whole GPU
exclude each other.

The search is a depth-first backtracking over, in order, each pod's node (nodes
sorted by name) and each of its requests' device combinations (devices sorted by
(driver, pool, device), combinations in lexicographic order). It is exhaustive:
picking devices greedily is incomplete once counters or overlapping selectors
are involved (a MIG slice of GPU 0 may block the whole GPU 0 a later request
needs), so nothing is committed that cannot be undone. Two cheap prunings keep
it exact: a node is skipped for a pod when some request has fewer free
candidates there than its count, and two consecutive identical pods (same
requests, same allowed nodes) are tried on non-decreasing nodes, and on one node
with increasing first devices (any placement can be reordered so, their device
sets being disjoint): a gang of 8 identical one-slice pods on 7 slices fails in
a few hundred steps, not 8!. Cost: worst case the product over pods of
sum over nodes of C(candidates, count) per request — exponential — so every
node tried and every device tried is one step against ``budget``
(:data:`DEFAULT_BUDGET`); the work is O(budget x devices per node). The search
keeps its own explicit stack (no recursion), so large counts cannot overflow.

``consumed`` is not derived from ``taken``: the caller passes the counters the
taken devices (and any reservation) spend.

When the gang has no placement, each pod is searched alone (same budget each,
so a failure costs at most (pods + 1) x budget steps) to name the first pod no
node can take; if each fits alone, the message says the
pods do not fit together. Messages list the eligible nodes in sorted order,
each with its free candidates (untaken, their counters not exhausted).

The rules of :mod:`kuota.core.dra.placement_rules`, as Kubernetes' allocator
applies them: a device with a ``NoSchedule``/``NoExecute`` taint the request
does not tolerate is no candidate; a ``matchAttribute`` constraint
(:class:`GangPod` ``constraints``: request indices and a fully qualified
attribute) keeps only candidates that have the attribute, and within one pod
every device given to its requests has one value (checked as devices are taken,
so the search stays exhaustive); an ``adminAccess`` request needs ``count``
matching devices on the node but takes none: it may have a device that is taken
or given to another pod, not one an earlier request of its own claim
(:class:`GangPod` ``claims``) took, and a later regular request of its pod may
not take one it has (one scheduling cycle). Its devices' counters count within
its pod only, checked against every regular device of the gang (whatever order
the scheduler takes the pods in), the last check made once a full assignment is
found. Identical pods' first devices only do not decrease when that request is
``adminAccess`` (theirs may be shared).

Allocation mode ``All`` takes every matching device of the node, as the
scheduler's allocator does: a request ``All`` of ``count`` devices (``count``:
what charging charged, :func:`kuota.core.dra.alternatives.all_count`) fits on a
node only when exactly ``count`` devices there match, none is taken, and their
counters fit together, so what is held is what was charged. ``firstAvailable``
reaches the placement already resolved: charging picked the alternative
(:func:`kuota.core.dra.alternatives.choose`), the first that some node can give
(beside the pod's other requests), so no earlier one can fit on any node and
the scheduler's first fitting alternative on the chosen node is the charged
one; its request is placed as any other (docs/design/dra-placement.md,
"firstAvailable and All").

Not covered yet (later bricks): devices with ``allowMultipleAllocations`` and
consumable capacity (such devices are never candidates here), requests with
``capacity.requests``, ``distinctAttribute`` constraints
(:class:`PlacementInvalid`), taints from DeviceTaintRule objects (only a
slice's own device taints are read), devices of
slices without ``nodeName``, and node properties beyond the allowed-node set.

Pure: no clock, no randomness, no I/O; iteration is over sorted keys, so the
same input gives the same output.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.cel import CompiledSelector, SelectorError, compile_selector
from kuota.core.dra.inventory import DraInventory, MatchError, PoolDevice
from kuota.core.dra.placement_reasons import free_for, pods_text
from kuota.core.dra.placement_rules import (
    AttributeValue,
    PodConstraint,
    attribute_values,
    taints_allow,
)
from kuota.core.pickling import register_by_fields

__all__ = [
    "DEFAULT_BUDGET",
    "CounterKey",
    "DeviceId",
    "GangPod",
    "NoPlacement",
    "Placement",
    "PlacementInvalid",
    "PlacementResult",
    "PodPlacement",
    "SearchBudgetExhausted",
    "device_consumes",
    "device_nodes",
    "matching_devices",
    "place_gang",
    "request_devices",
]

DEFAULT_BUDGET = 100_000

DeviceId = tuple[str, str, str]  # (driver, pool, device name)
CounterKey = tuple[str, str, str, str]  # (driver, pool, counter set, counter)


@dataclass(frozen=True, slots=True)
class GangPod:
    """One pod of the gang: its device requests and the nodes it may use;
    ``constraints``: its claims' matchAttribute constraints; ``claims``: per
    request, the index of its claim (() : each request a claim of its own)."""

    requests: tuple[ExactDeviceRequest, ...] = ()
    nodes: frozenset[str] | None = None  # None: every node
    constraints: tuple[PodConstraint, ...] = ()
    claims: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PodPlacement:
    node: str
    devices: tuple[tuple[DeviceId, ...], ...]  # per request, in request order


@dataclass(frozen=True, slots=True)
class Placement:
    pods: tuple[PodPlacement, ...]  # in pod order
    steps: int


@dataclass(frozen=True, slots=True)
class NoPlacement:
    """Proven: no assignment of nodes and devices satisfies the gang."""

    message: str
    steps: int


@dataclass(frozen=True, slots=True)
class SearchBudgetExhausted:
    """No placement was found within the budget; one may still exist."""

    message: str
    steps: int


@dataclass(frozen=True, slots=True)
class PlacementInvalid:
    """A request cannot be evaluated (unknown class, bad CEL, unsupported form)."""

    message: str


PlacementResult = Placement | NoPlacement | SearchBudgetExhausted | PlacementInvalid


@dataclass(frozen=True, slots=True)
class _Device:
    id: DeviceId
    consumes: tuple[tuple[CounterKey, int], ...]


def place_gang(
    *,
    inventory: DraInventory,
    pods: Sequence[GangPod],
    taken: frozenset[DeviceId] = frozenset(),
    consumed: Mapping[CounterKey, int] | None = None,
    budget: int = DEFAULT_BUDGET,
) -> PlacementResult:
    """Place every pod of ``pods`` or say why not (see module docstring)."""
    problem = _unsupported(pods)
    if problem is not None:
        return PlacementInvalid(problem)
    nodes, candidates, limits = _candidates(inventory, pods)
    if isinstance(candidates, str):
        return PlacementInvalid(candidates)
    candidates, attrs = _constrain(inventory, pods, candidates)
    used = dict(consumed or {})
    search = _Search(pods, nodes, candidates, limits, used, budget, taken, attrs)
    found = search.run()
    if found is not None:
        return Placement(found, search.steps)
    if search.exhausted:
        return SearchBudgetExhausted(
            f"no placement found within the search budget ({budget} steps) for "
            f"{pods_text(len(pods))}; not proven impossible",
            search.steps,
        )
    return NoPlacement(
        _why(pods, nodes, candidates, limits, used, budget, taken, attrs), search.steps
    )


# --------------------------------------------------------------------------- inputs


def _unsupported(pods: Sequence[GangPod]) -> str | None:
    for i, pod in enumerate(pods):
        for r, request in enumerate(pod.requests):
            where = f"pod {i + 1} request {r + 1} (class {request.device_class_name})"
            if request.allocation_mode not in ("ExactCount", "All"):
                return f"{where}: allocationMode {request.allocation_mode} is not supported"
            if request.capacity_requests:
                return f"{where}: capacity requests are not supported by placement yet"
            if request.count < 0:
                return f"{where}: negative count {request.count}"
        if pod.claims and len(pod.claims) != len(pod.requests):
            return f"pod {i + 1}: {len(pod.claims)} claim indices for {len(pod.requests)} requests"
        for c in pod.constraints:
            if c.distinct:
                return (
                    f"pod {i + 1}: constraint distinctAttribute {c.attribute} is not "
                    "supported by placement yet"
                )
            if not c.requests or not all(0 <= r < len(pod.requests) for r in c.requests):
                return f"pod {i + 1}: constraint on {c.attribute} names no request of the pod"
    return None


_Candidates = tuple[tuple[dict[str, tuple[_Device, ...]], ...], ...]  # pod -> request -> node
_ByNode = dict[str, tuple[_Device, ...]]  # node -> its matching devices, sorted
_LIMITS = "limits"  # placement_memo key of the counter limits, and of the nodes
_CONSUMES = "consumes"  # placement_memo key of device -> what it consumes
_NODES = "nodes"  # placement_memo key of device -> its node


def _static(inventory: DraInventory) -> tuple[tuple[str, ...], dict[CounterKey, int]]:
    """The nodes that have devices, and every counter's limit (memoised until a
    DeviceClass or ResourceSlice changes)."""
    memo = inventory.placement_memo
    found = memo.get(_LIMITS)
    if found is None:
        node_names: set[str] = set()
        limits: dict[CounterKey, int] = {}
        pools: set[tuple[str, str]] = set()
        for d in inventory.usable_devices():
            node = inventory.node_name(d)
            if node is not None:
                node_names.add(node)
                pools.add((d.driver, d.pool))
        for driver, pool in sorted(pools):
            for cs in inventory.counter_sets(driver, pool):
                for counter, amount in cs.counters:
                    limits[(driver, pool, cs.name, counter)] = amount
        found = memo[_LIMITS] = (tuple(sorted(node_names)), limits)
    return found  # type: ignore[return-value]


def device_consumes(inventory: DraInventory) -> dict[DeviceId, tuple[tuple[CounterKey, int], ...]]:
    """Per usable device that consumes counters, what it consumes (memoised)."""
    memo = inventory.placement_memo
    found = memo.get(_CONSUMES)
    if found is None:
        out: dict[DeviceId, tuple[tuple[CounterKey, int], ...]] = {}
        for d in inventory.usable_devices():
            if d.device.consumes_counters:
                out[(d.driver, d.pool, d.device.name)] = _consumption(d)
        found = memo[_CONSUMES] = out
    return found  # type: ignore[return-value]


def device_nodes(inventory: DraInventory) -> dict[DeviceId, str]:
    """The node of every node-local usable device (memoised)."""
    memo = inventory.placement_memo
    found = memo.get(_NODES)
    if found is None:
        out: dict[DeviceId, str] = {}
        for d in inventory.usable_devices():
            node = inventory.node_name(d)
            if node is not None:
                out[(d.driver, d.pool, d.device.name)] = node
        found = memo[_NODES] = out
    return found  # type: ignore[return-value]


def _consumption(d: PoolDevice) -> tuple[tuple[CounterKey, int], ...]:
    return tuple(
        sorted(
            ((d.driver, d.pool, use.counter_set, counter), amount)
            for use in d.device.consumes_counters
            for counter, amount in use.counters
        )
    )


def request_devices(inventory: DraInventory, request: ExactDeviceRequest) -> _ByNode | str:
    """The devices the request may take, per node (node-local, not shared),
    whether taken or not; or why the request cannot be evaluated (memoised)."""
    key = (request.device_class_name, request.selectors, request.tolerations)
    memo = inventory.placement_memo
    found = memo.get(key)
    if found is None:
        matched = matching_devices(inventory, request)
        if isinstance(matched, str):
            found = matched
        else:
            grouped: dict[str, list[_Device]] = {}
            for d in matched:
                node = inventory.node_name(d)
                if node is None or d.device.allow_multiple_allocations:
                    continue
                if d.device.taints and not taints_allow(d.device, request):
                    continue  # a taint the request does not tolerate
                grouped.setdefault(node, []).append(
                    _Device((d.driver, d.pool, d.device.name), _consumption(d))
                )
            found = {n: tuple(sorted(ds, key=lambda x: x.id)) for n, ds in grouped.items()}
        memo[key] = found
    return found  # type: ignore[return-value]


def _candidates(
    inventory: DraInventory, pods: Sequence[GangPod]
) -> tuple[tuple[str, ...], _Candidates | str, dict[CounterKey, int]]:
    """The sorted node names, per pod and request the candidates on each node
    (taken ones included: the search skips them), or why a request cannot be
    evaluated, and every counter's limit."""
    with_devices, limits = _static(inventory)
    extra = {n for pod in pods if pod.nodes is not None for n in pod.nodes}
    nodes = tuple(sorted(extra.union(with_devices))) if extra else with_devices
    out: list[tuple[dict[str, tuple[_Device, ...]], ...]] = []
    for i, pod in enumerate(pods):
        per_request: list[dict[str, tuple[_Device, ...]]] = []
        for r, request in enumerate(pod.requests):
            found = request_devices(inventory, request)
            if isinstance(found, str):
                return (
                    nodes,
                    f"pod {i + 1} request {r + 1}: {found.removeprefix('request: ')}",
                    limits,
                )
            per_request.append(found)
        out.append(tuple(per_request))
    return nodes, tuple(out), limits


_Attrs = tuple[tuple[dict[DeviceId, AttributeValue], ...], ...]  # pod -> constraint -> values


def _constrain(
    inventory: DraInventory, pods: Sequence[GangPod], candidates: _Candidates
) -> tuple[_Candidates, _Attrs]:
    """Per pod and constraint, the attribute's value per device; and the
    candidates, those of a request a constraint binds kept only if they have
    the attribute (others can never be given to it)."""
    attrs: list[tuple[dict[DeviceId, AttributeValue], ...]] = []
    out: list[tuple[dict[str, tuple[_Device, ...]], ...]] = []
    for i, pod in enumerate(pods):
        per: list[dict[DeviceId, AttributeValue]] = []
        requests = list(candidates[i])  # the dicts are memoised: replaced, never changed
        for c in pod.constraints:
            values = attribute_values(inventory, c.attribute)
            per.append(values)
            for r in c.requests:
                kept = {n: tuple(d for d in ds if d.id in values) for n, ds in requests[r].items()}
                requests[r] = {n: ds for n, ds in kept.items() if ds}
        attrs.append(tuple(per))
        out.append(tuple(requests))
    return tuple(out), tuple(attrs)


def matching_devices(
    inventory: DraInventory, request: ExactDeviceRequest, where: str = "request"
) -> tuple[PoolDevice, ...] | str:
    """The usable devices the request's class and selectors match, or why they
    cannot be evaluated."""
    device_class = inventory.device_class(request.device_class_name)
    if device_class is None:
        return f"{where}: DeviceClass {request.device_class_name} not found"
    compiled: list[CompiledSelector] = []
    for expression in (*device_class.selectors, *request.selectors):
        selector = compile_selector(expression)
        if isinstance(selector, SelectorError):
            return f"{where}: {selector}"
        compiled.append(selector)
    matched = inventory.matching_devices(selectors=tuple(compiled), driver=None)
    if isinstance(matched, MatchError):
        return f"{where}: {matched.error} failed on device {matched.device}"
    return matched


# --------------------------------------------------------------------------- search


class _Budget(Exception):
    pass


class _Search:
    """The backtracking search over an explicit stack of level iterators: level
    2*i chooses pod i's node, the levels after it its requests' devices."""

    def __init__(
        self,
        pods: Sequence[GangPod],
        nodes: tuple[str, ...],
        candidates: _Candidates,
        limits: dict[CounterKey, int],
        used: dict[CounterKey, int],
        budget: int,
        taken: frozenset[DeviceId] = frozenset(),
        attrs: _Attrs = (),
    ) -> None:
        self.pods = pods
        self.nodes = nodes
        self.candidates = candidates
        self.limits = limits
        self.used = used
        self.budget = budget
        self.steps = 0
        self.exhausted = False
        self.taken: set[DeviceId] = set(taken)  # already taken, and what this search took
        self.node_of: list[int] = [-1] * len(pods)
        self.first: list[int] = [-1] * len(pods)  # candidate index of request 0's first device
        self.chosen: list[list[tuple[DeviceId, ...]]] = [[() for _ in pod.requests] for pod in pods]
        # adminAccess devices: free for every other pod, but within their own pod
        # (one scheduling cycle) they count against counters, and a later
        # request of the pod may not take them (Kubernetes' allocator).
        self.admin_on: list[dict[DeviceId, int]] = [{} for _ in pods]
        self.admin_used: list[dict[CounterKey, int]] = [{} for _ in pods]
        # matchAttribute: per pod and constraint, the value and how many hold it
        self.attrs = attrs or tuple(() for _ in pods)
        self.bound: list[list[tuple[int, ...]]] = [
            [
                tuple(c for c, k in enumerate(pod.constraints) if r in k.requests)
                for r in range(len(pod.requests))
            ]
            for pod in pods
        ]
        self.value: list[list[AttributeValue | None]] = [[None] * len(p.constraints) for p in pods]
        self.holding: list[list[int]] = [[0] * len(p.constraints) for p in pods]
        # Levels: (pod, None) picks the node, (pod, r) the devices of request r.
        self.levels: list[tuple[int, int | None]] = []
        for i, pod in enumerate(pods):
            self.levels.append((i, None))
            self.levels.extend((i, r) for r in range(len(pod.requests)))

    def run(self) -> tuple[PodPlacement, ...] | None:
        if not self.levels:
            return ()
        stack: list[Iterator[None]] = [self._level(0)]
        try:
            while stack:
                try:
                    next(stack[-1])
                except StopIteration:
                    stack.pop()
                    continue
                if len(stack) == len(self.levels):
                    if not self._admin_fits():
                        continue  # try the next choice of the last level
                    return tuple(
                        PodPlacement(self.nodes[self.node_of[i]], tuple(self.chosen[i]))
                        for i in range(len(self.pods))
                    )
                stack.append(self._level(len(stack)))
        except _Budget:
            self.exhausted = True
        return None

    def _admin_fits(self) -> bool:
        """Whether each pod's adminAccess devices fit the counters whatever the
        order the scheduler takes the pods in: with every other pod's devices
        allocated (checked as they were chosen against the pods before only)."""
        for admin in self.admin_used:
            for key, amount in admin.items():
                if amount and self.used.get(key, 0) + amount > self.limits.get(key, 0):
                    return False
        return True

    def _step(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise _Budget

    def _level(self, k: int) -> Iterator[None]:
        i, r = self.levels[k]
        if r is None:
            return self._nodes(i)
        return self._devices(i, r)

    def _nodes(self, i: int) -> Iterator[None]:
        pod = self.pods[i]
        first = self.node_of[i - 1] if self._twin(i) else 0  # non-decreasing nodes
        for n in range(first, len(self.nodes)):
            node = self.nodes[n]
            if pod.nodes is not None and node not in pod.nodes:
                continue
            self._step()
            if not self._may_fit(i, node):
                continue
            self.node_of[i] = n
            yield

    def _twin(self, i: int) -> bool:
        """Whether pod i is identical to pod i-1 (same requests, same nodes)."""
        return i > 0 and self.pods[i - 1] == self.pods[i]

    def _may_fit(self, i: int, node: str) -> bool:
        """Whether each request has at least ``count`` untaken candidates whose
        counters are not spent on ``node`` (a necessary condition)."""
        taken = self.taken
        for r, request in enumerate(self.pods[i].requests):
            need = request.count
            if request.allocation_mode == "All":
                if not self._all_free(i, r, self.candidates[i][r].get(node, ()), need):
                    return False
                continue
            if need <= 0:
                continue
            admin = request.admin_access
            for d in self.candidates[i][r].get(node, ()):
                if (admin or d.id not in taken) and (not d.consumes or self._fits(d, i)):
                    need -= 1
                    if need == 0:
                        break
            else:
                return False
        return True

    def _all_free(self, i: int, r: int, cands: tuple[_Device, ...], need: int) -> bool:
        """Whether allocation mode All can take ``cands``, every matching device of
        the node: there are exactly ``need`` (what was charged), none is taken, and
        each one's counters fit alone (together: checked as they are taken)."""
        if len(cands) != need or need <= 0:
            return False
        admin = self.pods[i].requests[r].admin_access
        return all(
            self._usable(i, r, d, admin) and (not d.consumes or self._fits(d, i)) for d in cands
        )

    def _fits(self, d: _Device, i: int) -> bool:
        used = self.used
        limits = self.limits
        admin = self.admin_used[i]
        for key, amount in d.consumes:
            if used.get(key, 0) + admin.get(key, 0) + amount > limits.get(key, 0):
                return False
        return True

    def _usable(self, i: int, r: int, d: _Device, admin: bool) -> bool:
        """Whether request r of pod i may take d now: a regular request a device
        nobody took (adminAccess ones of this pod included); an adminAccess one
        any device but those earlier requests of its claim took."""
        if not admin:
            return d.id not in self.taken and d.id not in self.admin_on[i]
        claims = self.pods[i].claims
        for r2 in range(r):
            if (claims[r2] == claims[r] if claims else False) and d.id in self.chosen[i][r2]:
                return False
        return True

    def _agrees(self, i: int, r: int, d: _Device) -> bool:
        """Whether d keeps every matchAttribute constraint on request r."""
        for c in self.bound[i][r]:
            if self.holding[i][c] and self.attrs[i][c].get(d.id) != self.value[i][c]:
                return False
        return True

    def _take(self, i: int, r: int, d: _Device, admin: bool) -> None:
        if admin:
            self.admin_on[i][d.id] = self.admin_on[i].get(d.id, 0) + 1
            used = self.admin_used[i]
        else:
            self.taken.add(d.id)
            used = self.used
        for key, amount in d.consumes:
            used[key] = used.get(key, 0) + amount
        for c in self.bound[i][r]:
            if not self.holding[i][c]:
                self.value[i][c] = self.attrs[i][c].get(d.id)
            self.holding[i][c] += 1

    def _release(self, i: int, r: int, d: _Device, admin: bool) -> None:
        if admin:
            left = self.admin_on[i][d.id] - 1
            if left:
                self.admin_on[i][d.id] = left
            else:
                del self.admin_on[i][d.id]
            used = self.admin_used[i]
        else:
            self.taken.discard(d.id)
            used = self.used
        for key, amount in d.consumes:
            used[key] -= amount
        for c in self.bound[i][r]:
            self.holding[i][c] -= 1

    def _devices(self, i: int, r: int) -> Iterator[None]:
        """Each combination of ``count`` free candidates whose counters fit, in
        lexicographic order, applied to the state while it is yielded."""
        request = self.pods[i].requests[r]
        need = request.count
        admin = request.admin_access
        cands = self.candidates[i][r].get(self.nodes[self.node_of[i]], ())
        if self.pods[i].requests[r].allocation_mode == "All":
            yield from self._all(i, r, cands, need)
            return
        if need == 0:
            self.chosen[i][r] = ()
            yield
            return
        admin_on = self.admin_on[i]  # non-empty only while the pod has adminAccess devices
        bound = self.bound[i][r]
        picked: list[int] = []
        k = 0
        if r == 0 and self._twin(i) and self.node_of[i - 1] == self.node_of[i]:
            # Identical pods on one node: their first devices increase (their
            # combinations are disjoint, so this orders them lexicographically);
            # adminAccess devices may be shared, so theirs only do not decrease.
            k = self.first[i - 1] + (0 if admin else 1)
        while True:
            if len(picked) == need:
                self.chosen[i][r] = tuple(cands[p].id for p in picked)
                if r == 0:
                    self.first[i] = picked[0]
                yield
                k = picked.pop()
                self._release(i, r, cands[k], admin)
                k += 1
            elif k <= len(cands) - (need - len(picked)):
                d = cands[k]
                if self._usable(i, r, d, admin) if admin or admin_on else d.id not in self.taken:
                    self._step()
                    if (not d.consumes or self._fits(d, i)) and (
                        not bound or self._agrees(i, r, d)
                    ):
                        self._take(i, r, d, admin)
                        picked.append(k)
                k += 1
            elif picked:
                k = picked.pop()
                self._release(i, r, cands[k], admin)
                k += 1
            else:
                return

    def _all(self, i: int, r: int, cands: tuple[_Device, ...], need: int) -> Iterator[None]:
        """Allocation mode All: the one combination, every matching device of the
        node, when there are exactly ``need`` of them and all can be taken."""
        if not self._all_free(i, r, cands, need):
            return
        admin = self.pods[i].requests[r].admin_access
        bound = self.bound[i][r]
        held: list[_Device] = []
        for d in cands:
            self._step()
            if not self._usable(i, r, d, admin) or (d.consumes and not self._fits(d, i)):
                break
            if bound and not self._agrees(i, r, d):
                break
            self._take(i, r, d, admin)
            held.append(d)
        else:
            self.chosen[i][r] = tuple(d.id for d in cands)
            if r == 0:
                self.first[i] = 0
            yield
        for d in reversed(held):
            self._release(i, r, d, admin)


# --------------------------------------------------------------------------- reasons


def _why(
    pods: Sequence[GangPod],
    nodes: tuple[str, ...],
    candidates: _Candidates,
    limits: dict[CounterKey, int],
    used: dict[CounterKey, int],
    budget: int,
    taken: frozenset[DeviceId],
    attrs: _Attrs,
) -> str:
    """Name the first pod that fits on no node alone, else say they do not fit together."""
    tried: set[GangPod] = set()
    for i, pod in enumerate(pods):
        if pod in tried:
            continue  # an identical pod before it fit alone
        tried.add(pod)
        alone = _Search(
            (pod,), nodes, (candidates[i],), limits, dict(used), budget, taken, (attrs[i],)
        )
        if alone.run() is None and not alone.exhausted:
            return (
                f"no node can take pod {i + 1} of {len(pods)}: "
                f"{free_for(pod, nodes, candidates[i], limits, used, taken, attrs[i])}"
            )
    return (
        f"each pod fits alone but the {len(pods)} pods cannot be placed together; "
        f"pod 1: {free_for(pods[0], nodes, candidates[0], limits, used, taken, attrs[0])}"
    )


register_by_fields(
    GangPod, PodPlacement, Placement, NoPlacement, SearchBudgetExhausted, PlacementInvalid, _Device
)
