"""The types the gang placement shares between its modules (issue #17).

``DeviceId`` and ``CounterKey`` name devices and counters; :class:`GangPod` is
one pod of a gang (kuota.core.dra.placement, ``place_gang``);
:class:`SearchDevice` is a candidate device with what it consumes; the
aliases are the search's per-pod tables; :class:`FitMemo` remembers which pods
fit alone on which nodes between searches. Pure data.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kuota.api.dra import ExactDeviceRequest
from kuota.core.dra.placement_rules import AttributeValue, PodConstraint
from kuota.core.dra.placement_rules import share_id as share_id

DeviceId = tuple[str, str, str]  # (driver, pool, device name)
# A counter: its driver, pool, counter set and name, joined by NUL (which no
# Kubernetes name holds) into one string, whose hash Python keeps: the search
# looks counters up millions of times, and a tuple is hashed afresh each time
# (docs/design/native-core.md, "Keys read as the objects they are").
CounterKey = str


def counter_key(driver: str, pool: str, counter_set: str, name: str) -> CounterKey:
    """The key of counter ``name`` of ``counter_set`` in ``driver``'s ``pool``."""
    return f"{driver}\x00{pool}\x00{counter_set}\x00{name}"


@dataclass(slots=True, init=False, unsafe_hash=True)  # a value (docs/design/native-core.md)
class GangPod:
    """One pod of the gang: its device requests and the nodes it may use;
    ``constraints``: its claims' matchAttribute constraints; ``claims``: per
    request, the index of its claim (() : each request a claim of its own)."""

    requests: Final[tuple[ExactDeviceRequest, ...]]
    nodes: Final[frozenset[str] | None]  # None: every node
    constraints: Final[tuple[PodConstraint, ...]]
    claims: Final[tuple[int, ...]]

    def __init__(
        self,
        requests: tuple[ExactDeviceRequest, ...] = (),
        nodes: frozenset[str] | None = None,
        constraints: tuple[PodConstraint, ...] = (),
        claims: tuple[int, ...] = (),
    ) -> None:
        self.requests = requests
        self.nodes = nodes
        self.constraints = constraints
        self.claims = claims


# What a device consumes: (counter, amount) pairs. The counter is a CounterKey,
# typed Any so that compiled code passes the tuple it holds to a dict lookup
# rather than building a new one for each (docs/design/native-core.md).
Consumes = tuple[tuple[Any, int], ...]


@dataclass(frozen=True, slots=True)
class SearchDevice:
    id: Any  # a DeviceId (a share_id when shared), typed Any for the same reason as Consumes
    consumes: Consumes
    shared: bool = False  # allowMultipleAllocations: a share, taken from no other pod


Candidates = tuple[tuple[dict[str, tuple[SearchDevice, ...]], ...], ...]  # pod -> request -> node
ByNode = dict[str, tuple[SearchDevice, ...]]  # node -> its matching devices, sorted
Attrs = tuple[tuple[dict[DeviceId, AttributeValue], ...], ...]  # pod -> constraint -> values


@dataclass(frozen=True, slots=True)
class PodPlacement:
    node: str
    # per request, in request order (a shared device by its share_id: typed Any)
    devices: tuple[tuple[Any, ...], ...]


AloneKey = tuple[object, ...]  # a pod's requests, constraints and claims (not its nodes)


@dataclass(slots=True)
class FitMemo:
    """Whether a pod alone fits on a node (its requests can all be given free
    devices there), kept between searches by its owner (the fold) while nothing
    taken on the node changes; and what a message says each node has free.

    ``versions``: node -> the ``clock`` at its last change (a message's part
    holds while the node's version is the one it was made at); ``took`` and
    ``gave``: node -> the clock of its last change that took devices or counters,
    and of its last that gave some back. An answer computed at clock c holds
    while taking more cannot change it and nothing was given back since (no fit:
    ``gave`` at most c), or while giving back cannot change it and nothing was
    taken since (a fit: ``took`` at most c). The owner calls
    :meth:`touch` with every node whose taken devices or spent counters change
    (every node of a device's pool), and passes the memo to a search only when
    the search's taken devices and counters are exactly its own (no
    reservation, nothing counted as freed). ``generation``: the inventory
    generation the answers hold for (another one drops them all).

    Answers are kept per :meth:`token`: a number per distinct (requests,
    constraints, claims) of a pod, found by the identity of those tuples (a
    workload's pods are rebuilt from the same tuples at every try), so that a
    lookup hashes no request."""

    generation: int = -1
    clock: int = 0
    versions: dict[str, int] = field(default_factory=dict)
    took: dict[str, int] = field(default_factory=dict)
    gave: dict[str, int] = field(default_factory=dict)
    # token -> node -> (clock it was computed at, fits alone)
    alone: dict[int, dict[str, tuple[int, bool]]] = field(default_factory=dict)
    # per token: (clock, its nodes, the search's nodes, result) of the last search,
    # reused while nothing was touched since: the nodes where it fits alone, and
    # the text of what each node has free for it
    fitting: dict[int, tuple[int, object, object, tuple[int, ...]]] = field(default_factory=dict)
    texts: dict[int, tuple[int, object, object, str]] = field(default_factory=dict)
    # per token: (its nodes, the search's nodes, what the message names: the
    # needs, the nodes named, how many more, how many without devices)
    named: dict[int, tuple[object, object, tuple[str, tuple[str, ...], int, int]]] = field(
        default_factory=dict
    )
    # token -> node -> (version, what the message says the node has free)
    parts: dict[int, dict[str, tuple[int, str]]] = field(default_factory=dict)
    # token -> node -> (version, free devices for its one request, each alone)
    counts: dict[int, dict[str, tuple[int, int]]] = field(default_factory=dict)
    # token -> per request, its candidates per node (``cands``); the tokens whose
    # pods placement can evaluate (``supported``)
    cands: dict[int, tuple[dict[str, tuple[SearchDevice, ...]], ...]] = field(default_factory=dict)
    supported: set[int] = field(default_factory=set)
    # the nodes of each of the last touches (``touches[k]``: clock ``first + k``)
    touches: list[tuple[str, ...]] = field(default_factory=list)
    first: int = 1
    # (a search's node tuple, node -> its index there), for the last tuple seen
    index: tuple[object, dict[str, int]] = ((), {})
    # tokens: by value, and by the identity of the requests tuple (the tuples
    # kept alive beside, so an identity is never another object's)
    tokens: dict[AloneKey, int] = field(default_factory=dict)
    ids: dict[int, tuple[object, object, object, int]] = field(default_factory=dict)
    next_token: int = 0
    # id of a pod's node set -> (that set, the nodes with devices, the first but
    # the second): placement.py, _outside
    outside: dict[int, tuple[object, object, frozenset[str]]] = field(default_factory=dict)
    # what placement waiters ask, one object per question (core/fold/holds.py)
    questions: dict[tuple[object, ...], object] = field(default_factory=dict)
    # id of a waiter's pods -> (those pods, whole, its question)
    asked: dict[int, tuple[object, bool, object]] = field(default_factory=dict)
    # a gang's last failed placement, by the budget and, per pod, its token and
    # the identity of its node set (flat: budget, token, id, token, id, ...):
    # (clock, those pods, kept alive so that an id in the key is never another
    # set's, the answer), reused while nothing was touched since (placement.py,
    # place_gang)
    failed: dict[tuple[object, ...], tuple[int, Sequence[GangPod], object]] = field(
        default_factory=dict
    )

    def touch(self, nodes: Iterable[str], *, took: bool = True, gave: bool = True) -> None:
        """Devices or counters of ``nodes`` were taken (``took``) or given back
        (``gave``), or both."""
        self.clock += 1
        clock = self.clock
        versions = self.versions
        touched = tuple(nodes)
        for node in touched:
            versions[node] = clock
            if took:
                self.took[node] = clock
            if gave:
                self.gave[node] = clock
        self.touches.append(touched)
        if len(self.touches) > TOUCHES_KEPT:
            half = TOUCHES_KEPT // 2
            del self.touches[:half]
            self.first += half

    def touched_since(self, clock: int) -> set[str] | None:
        """The nodes touched after ``clock`` (None: not kept that far back)."""
        if clock + 1 < self.first:
            return None
        out: set[str] = set()
        for nodes in self.touches[clock + 1 - self.first :]:
            out.update(nodes)
        return out

    def index_of(self, nodes: tuple[str, ...]) -> dict[str, int]:
        if self.index[0] is not nodes:
            self.index = (nodes, {node: n for n, node in enumerate(nodes)})
        return self.index[1]

    def token(self, pod: GangPod, generation: int) -> int:
        """The number of ``pod``'s (requests, constraints, claims); everything
        kept is dropped first if the inventory changed."""
        if generation != self.generation:
            self._forget()
            self.generation = generation
        requests = pod.requests
        found = self.ids.get(id(requests))
        if (
            found is not None
            and found[0] is requests
            and found[1] is pod.constraints
            and found[2] is pod.claims
        ):
            return found[3]
        key: AloneKey = (requests, pod.constraints, pod.claims)
        token = self.tokens.get(key)
        if token is None:
            if len(self.tokens) >= MEMO_SHAPES:
                self.tokens.clear()  # bounded: many distinct pods since the last change
                self.ids.clear()
                self._forget()
            self.next_token += 1
            token = self.tokens[key] = self.next_token
        if len(self.ids) >= MEMO_IDS:
            self.ids.clear()
        self.ids[id(requests)] = (requests, pod.constraints, pod.claims, token)
        return token

    def still(self, node: str, known: tuple[int, bool]) -> bool:
        """Whether ``known`` (clock, fits alone) still holds on ``node``."""
        changed = self.took if known[1] else self.gave
        return changed.get(node, 0) <= known[0]

    def free_counts(self, token: int) -> dict[str, tuple[int, int]]:
        found = self.counts.get(token)
        if found is None:
            found = self.counts[token] = {}
        return found

    def answers(self, token: int) -> dict[str, tuple[int, bool]]:
        found = self.alone.get(token)
        if found is None:
            found = self.alone[token] = {}
        return found

    def _forget(self) -> None:
        self.alone.clear()
        self.fitting.clear()
        self.texts.clear()
        self.named.clear()
        self.parts.clear()
        self.counts.clear()
        self.cands.clear()
        self.supported.clear()
        self.failed.clear()


def same_node_sets(kept: Sequence[GangPod], pods: Sequence[GangPod]) -> bool:
    """Whether ``kept`` (the pods a memo entry keeps alive) have, pod by pod, the
    very node sets of ``pods``: an entry found by the ids of node sets may be of
    sets gone since (in a copy or a pickle of the memo)."""
    return len(kept) == len(pods) and all(pod.nodes is pods[i].nodes for i, pod in enumerate(kept))


MEMO_SHAPES = 4096  # distinct pods a FitMemo answers for before it starts afresh
MEMO_IDS = 65536  # request tuples a FitMemo knows the token of before it starts afresh
TOUCHES_KEPT = 1024  # touches a FitMemo remembers (a pod's nodes older than that: all asked again)


class Taken:
    """What a placement finds taken: the devices kuota holds and those allocated
    claims take, but ``freed`` (a view: nothing is copied)."""

    __slots__ = ("claimed", "freed", "held")

    def __init__(
        self,
        held: Mapping[DeviceId, str],
        claimed: Mapping[DeviceId, int],
        freed: frozenset[DeviceId] = frozenset(),
    ) -> None:
        self.held = held
        self.claimed = claimed
        self.freed = freed

    def __contains__(self, device: object) -> bool:
        if device not in self.held and device not in self.claimed:
            return False
        return not self.freed or device not in self.freed

    def devices(self) -> list[DeviceId]:
        """Every device taken, once."""
        out = [d for d in self.held if d not in self.freed]
        out.extend(d for d in self.claimed if d not in self.held and d not in self.freed)
        return out


def one_free(
    cands: tuple[SearchDevice, ...],
    taken: Container[Any],
    used: dict[Any, int],
    limits: dict[Any, int],
) -> bool:
    """Whether one of ``cands`` is not ``taken`` and its counters fit with
    ``used`` spent: a pod asking for one device fits alone. (dicts: compiled,
    a Mapping's ``get`` is a method call.)"""
    held: Mapping[Any, str] | None = None
    claimed: Mapping[Any, int] = {}
    if isinstance(taken, Taken) and not taken.freed:
        held, claimed = taken.held, taken.claimed  # (Search._in_base, inlined)
    short: object = None  # a consumption found short of its counters
    fit: object = None  # one found to fit (nothing is taken during the scan)
    for d in cands:
        consumes = d.consumes
        if consumes and consumes is not fit:
            if consumes is short:
                continue  # the same counters, the same amounts: short too
            for key, amount in consumes:
                if used.get(key, 0) + amount > limits.get(key, 0):
                    short = consumes
                    break
            if short is consumes:
                continue
            fit = consumes  # the same counters, the same amounts: fit too
        if held is not None:
            if d.id in held or d.id in claimed:
                continue
        elif d.id in taken:
            continue
        return True
    return False


def one_device(pod: GangPod) -> bool:
    """Whether ``pod`` asks for exactly one device with one plain request (no
    adminAccess, no constraint): ``Search.run`` takes its shortcut."""
    if len(pod.requests) != 1 or pod.constraints:
        return False
    request = pod.requests[0]
    return (
        request.count == 1 and request.allocation_mode == "ExactCount" and not request.admin_access
    )
