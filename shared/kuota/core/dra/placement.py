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
needs), so nothing is committed that cannot be undone. Cheap prunings keep it
exact: before the search each pod keeps only the nodes where it fits alone (a
pod left with none ends the attempt), and a gang of one pod repeated ends when
those nodes have too few free devices together (``Search.enough``); during it,
a node is skipped for a pod when some request has fewer free
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

When the gang has no placement, the message names the first pod that fits
alone on no node (the first pruning left it none); if each fits alone, it says
the pods do not fit together. Messages list the eligible nodes in sorted order,
each with its free candidates (untaken, their counters not exhausted).

``memo`` (:class:`~kuota.core.dra.placement_types.FitMemo`), when the caller
keeps one for exactly these ``taken`` and ``consumed``, carries between
searches which pod shapes fit alone on which nodes, their candidates and free
counts and the message's parts; it changes no answer
(docs/design/dra-placement.md, "Cost").

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

Consumable capacity (KEP-5075): a device with ``allowMultipleAllocations``
serves several claims at once. Each of its capacities is a counter of its own
(:func:`capacity_key`, its limit the capacity's value), and its candidate for
a request (:func:`share_id`: an id no held or claimed device has, marked
``shared``) consumes what the scheduler would consume of each
(:func:`kuota.core.dra.capacity.share_amounts`: the request's amount rounded
up per the policy, else the default, else all of it), besides its own
counters; a device that cannot serve the request is no candidate. Taking it
takes nothing from other pods: only its capacity counters are spent, and
within one pod it is given once (as if exclusive: Kubernetes may give it to
two requests of one pod, so this is the stricter rule). A device without
``allowMultipleAllocations`` is a candidate for a request with
``capacity.requests`` only when it publishes every capacity asked and could
give the amounts. Two identical pods may share the first device of their
request, so their first devices only do not decrease.

A ``distinctAttribute`` constraint keeps, like ``matchAttribute``, only
candidates that have the attribute, and within one pod every device given to
its requests has a value no other has (checked as devices are taken).

Not covered yet: devices of slices without ``nodeName``, and node properties
beyond the allowed-node set.

Pure: no clock, no randomness, no I/O; iteration is over sorted keys, so the
same input gives the same output.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kuota.core.dra.inventory import DraInventory
from kuota.core.dra.placement_devices import (
    capacity_key,
    claim_share,
    device_consumes,
    device_nodes,
    device_scope,
    matching_devices,
    request_devices,
    static_limits,
)
from kuota.core.dra.placement_reasons import pods_text
from kuota.core.dra.placement_rules import (
    AttributeValue,
    attribute_values,
)
from kuota.core.dra.placement_search import Search
from kuota.core.dra.placement_types import (
    MEMO_IDS,
    Attrs,
    Candidates,
    CounterKey,
    DeviceId,
    FitMemo,
    GangPod,
    PodPlacement,
    SearchDevice,
    counter_key,
    one_device,
    one_free,
    same_node_sets,
    share_id,
)
from kuota.core.dra.placement_why import why
from kuota.core.pickling import register_by_fields

__all__ = [
    "DEFAULT_BUDGET",
    "CounterKey",
    "DeviceId",
    "FitMemo",
    "GangPod",
    "NoPlacement",
    "Placement",
    "PlacementInvalid",
    "PlacementResult",
    "PodPlacement",
    "SearchBudgetExhausted",
    "capacity_key",
    "claim_share",
    "counter_key",
    "device_consumes",
    "device_nodes",
    "device_scope",
    "fits_alone",
    "matching_devices",
    "may_place",
    "place_gang",
    "request_devices",
    "share_id",
]

DEFAULT_BUDGET = 100_000


@dataclass(frozen=True, slots=True)
class Placement:
    pods: tuple[PodPlacement, ...]  # in pod order
    steps: int


@dataclass(slots=True, init=False, unsafe_hash=True)  # a value (docs/design/native-core.md)
class NoPlacement:
    """Proven: no assignment of nodes and devices satisfies the gang."""

    message: Final[str]
    steps: Final[int]

    def __init__(self, message: str, steps: int) -> None:
        self.message = message
        self.steps = steps


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


def place_gang(
    *,
    inventory: DraInventory,
    pods: Sequence[GangPod],
    taken: Container[DeviceId] = frozenset(),
    consumed: Mapping[CounterKey, int] | None = None,
    budget: int = DEFAULT_BUDGET,
    memo: FitMemo | None = None,
) -> PlacementResult:
    """Place every pod of ``pods`` or say why not (see module docstring).
    ``memo``: which pods fit alone on which nodes, kept by the caller
    (:class:`FitMemo`: only when ``taken`` and ``consumed`` are what it holds for)."""
    tokens: list[int] | None = None
    key: tuple[object, ...] = ()
    if memo is not None:
        # the same gang (the same pod shapes and node sets) with nothing touched
        # since its last failure: the same answer (the search is a function of
        # them, what is taken, and the budget)
        tokens = _tokens(pods, memo, inventory.generation)
        parts: list[object] = [budget]  # then each pod's token and the id of its nodes
        for i, pod in enumerate(pods):
            parts.append(tokens[i])
            parts.append(id(pod.nodes))
        key = tuple(parts)
        last = memo.failed.get(key)
        if last is not None and last[0] == memo.clock and same_node_sets(last[1], pods):
            return last[2]  # type: ignore[return-value]
    search = _search(inventory, pods, taken, consumed or {}, memo, budget, tokens=tokens)
    if isinstance(search, str):
        return PlacementInvalid(search)
    # a pod that fits alone on no node, or too few free devices on the nodes
    # where its pods fit alone: no placement (why() names the pod, or says so)
    found = search.run() if all(search.allowed) and search.enough() else None
    if found is not None:
        return Placement(found, search.steps)
    failure: NoPlacement | SearchBudgetExhausted
    if search.exhausted:
        failure = SearchBudgetExhausted(
            f"no placement found within the search budget ({budget} steps) for "
            f"{pods_text(len(pods))}; not proven impossible",
            search.steps,
        )
    else:
        failure = NoPlacement(why(search), search.steps)
    if memo is not None:
        if len(memo.failed) >= MEMO_IDS:
            memo.failed.clear()
        memo.failed[key] = (memo.clock, pods, failure)
    return failure


def may_place(
    *,
    inventory: DraInventory,
    pods: Sequence[GangPod],
    taken: Container[DeviceId],
    consumed: Mapping[CounterKey, int],
    memo: FitMemo | None = None,
) -> bool:
    """Whether the gang passes what :func:`place_gang` checks before it searches:
    each pod fits alone on some node, and a repeated pod's nodes have enough free
    devices together (False: it has no placement; True: it may have one)."""
    search = _search(inventory, pods, taken, consumed, memo)
    return isinstance(search, str) or (all(search.allowed) and search.enough())


def fits_alone(
    *,
    inventory: DraInventory,
    pod: GangPod,
    nodes: Iterable[str],
    taken: Container[DeviceId],
    consumed: Mapping[CounterKey, int],
    memo: FitMemo | None = None,
) -> bool:
    """Whether ``pod`` alone could be placed on one of ``nodes`` (those it may
    use), with ``taken`` and ``consumed`` as they are: a search that runs out of
    budget, or a pod placement cannot evaluate, counts as could."""
    wanted = sorted(set(nodes))
    if memo is not None:  # answered from the memo, if it knows every node
        token = memo.token(pod, inventory.generation)
        answers = memo.answers(token)
        unknown: list[str] = []
        for node in wanted:
            if pod.nodes is not None and node not in pod.nodes:
                continue
            known = answers.get(node)
            if known is None or not memo.still(node, known):
                unknown.append(node)
            elif known[1]:
                return True
        if not unknown:
            return False
        cands = memo.cands.get(token)
        if cands is not None and one_device(pod):
            # what Search._alone asks, without building a search (the memo has
            # the pod's candidates: its form was found fine)
            by_node, limits = cands[0], static_limits(inventory)[1]
            used = consumed if isinstance(consumed, dict) else dict(consumed)
            for node in unknown:
                fits = one_free(by_node.get(node, ()), taken, used, limits)
                answers[node] = (memo.clock, fits)
                if fits:
                    return True
            return False
    search = _search(inventory, (pod,), taken, consumed, memo, prefilter=False)
    if isinstance(search, str):
        return True
    return search.fits_somewhere(0, wanted, memo, inventory.generation)


def _search(
    inventory: DraInventory,
    pods: Sequence[GangPod],
    taken: Container[DeviceId],
    consumed: Mapping[CounterKey, int],
    memo: FitMemo | None,
    budget: int = DEFAULT_BUDGET,
    prefilter: bool = True,
    tokens: list[int] | None = None,
) -> Search | str:
    """The search of ``pods`` (its prefilter run unless ``prefilter`` is False),
    or why a pod cannot be evaluated (``tokens``: each pod's in ``memo``, when
    the caller found them)."""
    generation = inventory.generation
    if tokens is None:
        tokens = _tokens(pods, memo, generation)
    problem = _unsupported(pods, memo, tokens)
    if problem is not None:
        return problem
    nodes, candidates, limits = _candidates(inventory, pods, memo, tokens)
    if isinstance(candidates, str):
        return candidates
    candidates, attrs = _constrain(inventory, pods, candidates)
    return Search(
        pods,
        nodes,
        candidates,
        limits,
        consumed,
        budget,
        taken,
        attrs,
        memo,
        generation,
        prefilter=prefilter,
        tokens=tokens,
    )


def _tokens(pods: Sequence[GangPod], memo: FitMemo | None, generation: int) -> list[int]:
    """Each pod's memo token (-1 each without a memo)."""
    if memo is None:
        return [-1] * len(pods)
    out: list[int] = []
    for i, pod in enumerate(pods):
        out.append(out[-1] if i and pod is pods[i - 1] else memo.token(pod, generation))
    return out


# --------------------------------------------------------------------------- inputs


def _unsupported(
    pods: Sequence[GangPod], memo: FitMemo | None = None, tokens: Sequence[int] = ()
) -> str | None:
    """Why a pod of the gang cannot be placed (its form), or None; a pod shape
    found fine is remembered in ``memo`` (``tokens``: each pod's there)."""
    for i, pod in enumerate(pods):
        if i and pod is pods[i - 1]:
            continue  # the same pod again (a podset's pods)
        token = tokens[i] if memo is not None else -1
        if memo is not None and token in memo.supported:
            continue
        problem = _pod_problem(i, pod)
        if problem is not None:
            return problem
        if memo is not None:
            memo.supported.add(token)
    return None


def _pod_problem(i: int, pod: GangPod) -> str | None:
    """Why pod ``i`` cannot be placed (a request or constraint form placement
    does not handle), or None."""
    for r, request in enumerate(pod.requests):
        where = f"pod {i + 1} request {r + 1} (class {request.device_class_name})"
        if request.allocation_mode not in ("ExactCount", "All"):
            return f"{where}: allocationMode {request.allocation_mode} is not supported"
        if request.count < 0:
            return f"{where}: negative count {request.count}"
    if pod.claims and len(pod.claims) != len(pod.requests):
        return f"pod {i + 1}: {len(pod.claims)} claim indices for {len(pod.requests)} requests"
    for c in pod.constraints:
        if not c.requests or not all(0 <= r < len(pod.requests) for r in c.requests):
            return f"pod {i + 1}: constraint on {c.attribute} names no request of the pod"
    return None


_NODE_SET = "node-set"  # placement_memo key of the nodes that have devices, as a set


def _candidates(
    inventory: DraInventory,
    pods: Sequence[GangPod],
    memo: FitMemo | None = None,
    tokens: Sequence[int] = (),
) -> tuple[tuple[str, ...], Candidates | str, dict[CounterKey, int]]:
    """The sorted node names, per pod and request the candidates on each node
    (taken ones included: the search skips them), or why a request cannot be
    evaluated, and every counter's limit (``tokens``: each pod's in ``memo``)."""
    with_devices, limits = static_limits(inventory)
    static = inventory.placement_memo
    known = static.get(_NODE_SET)
    if known is None:
        known = static[_NODE_SET] = frozenset(with_devices)
    assert isinstance(known, frozenset)
    extra: set[str] = set()
    seen: frozenset[str] | None = None
    for pod in pods:
        if pod.nodes is not None and pod.nodes is not seen:
            seen = pod.nodes
            outside = _outside(memo, pod.nodes, known)
            if outside:
                extra.update(outside)
    nodes = tuple(sorted(known.union(extra))) if extra else with_devices
    out: list[tuple[dict[str, tuple[SearchDevice, ...]], ...]] = []
    for i, pod in enumerate(pods):
        if i and pod is pods[i - 1]:
            out.append(out[-1])  # the same pod again (a podset's pods)
            continue
        token = -1
        if memo is not None:
            token = tokens[i]
            known = memo.cands.get(token)
            if known is not None:
                out.append(known)
                continue
        per_request: list[dict[str, tuple[SearchDevice, ...]]] = []
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
        if memo is not None:
            memo.cands[token] = out[-1]
    return nodes, tuple(out), limits


def _outside(memo: FitMemo | None, nodes: frozenset[str], known: frozenset[str]) -> frozenset[str]:
    """``nodes`` but those of ``known``; remembered in ``memo`` by the identity of
    the two sets (a workload's pods are rebuilt from the same sets at every try)."""
    if memo is None:
        return nodes - known
    found = memo.outside.get(id(nodes))
    if found is not None and found[0] is nodes and found[1] is known:
        return found[2]
    out = nodes - known
    if len(memo.outside) >= MEMO_IDS:
        memo.outside.clear()
    memo.outside[id(nodes)] = (nodes, known, out)
    return out


def _constrain(
    inventory: DraInventory, pods: Sequence[GangPod], candidates: Candidates
) -> tuple[Candidates, Attrs]:
    """Per pod and constraint, the attribute's value per device; and the
    candidates, those of a request a constraint binds kept only if they have
    the attribute (others can never be given to it)."""
    attrs: list[tuple[dict[DeviceId, AttributeValue], ...]] = []
    out: list[tuple[dict[str, tuple[SearchDevice, ...]], ...]] = []
    for i, pod in enumerate(pods):
        if not pod.constraints:
            attrs.append(())
            out.append(candidates[i])
            continue
        if i and pod is pods[i - 1]:
            attrs.append(attrs[-1])  # the same pod again (a podset's pods)
            out.append(out[-1])
            continue
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


register_by_fields(
    FitMemo,
    GangPod,
    PodPlacement,
    Placement,
    NoPlacement,
    SearchBudgetExhausted,
    PlacementInvalid,
    SearchDevice,
)
