"""Device holds: the placement of a head whose quota fits, and what it holds.

Theory of operation: a head whose pods claim DRA devices is admitted only when
every pod of every podset can be given a node with free devices
(:func:`~kuota.core.fold.node_fit.place_workload`, all or none).
:meth:`DeviceHolds._placeable` runs that search after the quota fits; the
devices it found are *held* from the Admitted decision until the workload's pods
are gone, or until its pods are all ready and an allocated ResourceClaim stands
for them (:meth:`DeviceHolds._end_hold`). Allocated claims (``_claims``) take
their devices whoever owns them. A head that no node could take waits with
``NoNodePlacement`` and is woken only when devices are freed on a node where
one of its pods could now be placed alone and its whole gang passes the
placement's prunings, or when a node or DRA object changes. What is held and
claimed is kept with the counters it spends and a ``FitMemo`` of which pods fit
alone where, touched at every change. A share of a device several claims may
use at once (``allowMultipleAllocations``) is taken from nobody: a hold or an
allocated claim spends the capacity counters its shares consume
(``_share_holds``, ``_claim_shares``). Design: docs/design/dra-placement.md.
"""

from __future__ import annotations

from typing import cast

from kuota.api.dra import ResourceClaim
from kuota.core.dra.placement import (
    CounterKey,
    DeviceId,
    GangPod,
    claim_share,
    device_consumes,
    device_nodes,
    device_scope,
)
from kuota.core.dra.placement_types import MEMO_IDS, Consumes, Taken, same_node_sets
from kuota.core.dra.pod_devices import PodDevices, claim_devices
from kuota.core.fold.fairadmission import FairAdmission
from kuota.core.fold.node_fit import (
    NO_NODE_PLACEMENT,
    Placed,
    Share,
    Unplaceable,
    fits_on,
    place_workload,
    taken_counters,
)
from kuota.core.queueing.queues import Needs
from kuota.core.queueing.verdict import Verdict
from kuota.core.queueing.workload import Fit, WorkloadRecord


def claim_hold_key(namespace: str, name: str) -> str:
    """The holder of the devices kuota holds for a direct ResourceClaim not
    allocated yet (never a workload's key: those have no space)."""
    return f"ResourceClaim {namespace}/{name}"


class DeviceHolds(FairAdmission):
    """Placement and device holds (module docstring); hooks: :mod:`kuota.core.fold.hooks`."""

    def _set_aside(
        self,
        rec: WorkloadRecord,
        cq_name: str,
        verdict: Verdict,
        needs: Needs,
        *,
        searched: bool = False,
        unplaced: tuple[GangPod, ...] | None = None,
        whole: bool = False,
    ) -> None:
        """Set aside a head that was not admitted. Defined by ``cycle.Cycles``."""
        raise NotImplementedError

    def _placeable(self, rec: WorkloadRecord, cq_name: str, fit: Fit) -> bool:
        """Whether the pods of a head whose quota fits can be placed on nodes
        (core/fold/node_fit.py); when they can, the placement waits in
        ``_placing`` for ``_admit``; when not, the head is set aside until a hold
        is released or a node or DRA object changes."""
        only: dict[str, str] | None = None
        shared: dict[str, tuple[tuple[str, PodDevices], ...]] | None = None
        together: frozenset[str] = frozenset()
        named = asks = False
        for ps in rec.requests:
            if ps.claims:
                named = True
                break
            if ps.devices:
                asks = True
        if not named:
            if not asks:
                return True
        else:
            where = self._claims_where(rec)
            if where is None:
                return True  # a claim on several nodes, or on none: not placed
            only, shared, together = where
        held, consumed = self._taken_for(rec.key)
        outcome = place_workload(
            inventory=self._inventory,
            nodes=self._nodes,
            flavors=self._flavors,
            requests=rec.requests,
            podset_flavors=fit.flavors,
            held=held,
            claimed=self._claimed,
            eligible_memo=self._eligible,
            consumed=consumed,
            only=only,
            memo=self._fit_memo if consumed is not None else None,
            shared=shared,
            together=together,
            shares=self._shares_spent() if consumed is None else None,
        )
        if isinstance(outcome, Unplaceable):
            # keyed by what it needs: what nodes have free changes at every retry
            verdict = Verdict(NO_NODE_PLACEMENT, (outcome.key,), outcome.message)
            self._set_aside(rec, cq_name, verdict, (), unplaced=outcome.gang, whole=True)
            return False
        if isinstance(outcome, Placed):
            self._placing = (rec.key, outcome)
        return True

    def _claims_where(
        self, rec: WorkloadRecord
    ) -> (
        tuple[dict[str, str], dict[str, tuple[tuple[str, PodDevices], ...]], frozenset[str]] | None
    ):
        """Where the direct ResourceClaims ``rec``'s pods name put them
        (core/fold/node_fit.py, "Direct ResourceClaims"): the one node of each
        podset naming a claim allocated or held there (``only``); the claims not
        allocated nor held yet, carried by the first podset naming each
        (``shared``); the podsets naming those (``together``: one node for all,
        the node of one of them when it has one). None: a claim on devices of no
        node or of several, or podsets that would need two nodes at once."""
        namespace = rec.spec.namespace
        only: dict[str, str] = {}
        shared: dict[str, tuple[tuple[str, PodDevices], ...]] = {}
        together: set[str] = set()
        carried: set[str] = set()
        for ps in rec.requests:
            if not ps.claims or ps.count <= 0:
                continue
            nodes: set[str] = set()
            todo: list[tuple[str, PodDevices]] = []
            for name, _ in ps.claims:
                claim = self._inventory.claim(namespace, name)
                if claim is None:
                    return None
                node = self._claim_node(namespace, claim)
                if node is None:
                    return None
                if node:
                    nodes.add(node)
                    continue
                together.add(ps.name)
                if name not in carried:
                    carried.add(name)
                    wanted = claim_devices(self._inventory, claim)
                    if wanted.requests:
                        todo.append((name, wanted))
            if len(nodes) > 1:
                return None
            if nodes:
                only[ps.name] = nodes.pop()
            if todo:
                shared[ps.name] = tuple(todo)
        pins = {only[name] for name in together if name in only}
        if len(pins) > 1:
            return None
        for node in pins:
            only.update((name, node) for name in together)
        return only, shared, frozenset(together)

    def _claim_node(self, namespace: str, claim: ResourceClaim) -> str | None:
        """The node of direct ResourceClaim ``claim``: that of the devices it is
        allocated, or of those kuota holds for it (placed with an earlier user);
        "" when it is neither allocated nor held; None when it is allocated on
        devices of no node or of several."""
        if not claim.allocated:
            return self._claim_holds.get((namespace, claim.name), "")
        where = device_nodes(self._inventory)
        found = {where.get(device) for device in claim.allocated}
        if len(found) != 1:
            return None
        return found.pop()

    def _taken_for(self, key: str) -> tuple[dict[DeviceId, str], dict[CounterKey, int] | None]:
        """What kuota holds, as ``key``'s placement sees it: the holds, and the
        devices reserved for a preemptor waiting for its victims' pods (not
        ``key``'s own); the counters they and the allocated claims spend when
        kept (None: to compute)."""
        reserved = self._devices_reserved
        if not reserved:
            return self._devices_held, self._counters_taken()
        held = dict(self._devices_held)
        for device, owner in reserved.items():
            if owner != key:
                held.setdefault(device, owner)
        return held, None

    def _counters_taken(self) -> dict[CounterKey, int]:
        """The counters the held devices and the allocated claims' devices spend
        (each device once): kept up to date by holds, releases and claims,
        computed afresh when the inventory changed."""
        generation = self._inventory.generation
        if self._counters_at != generation:
            taken = Taken(self._devices_held, self._claimed)
            counters = taken_counters(self._inventory, taken.devices())
            for key, amount in self._shares_spent().items():
                counters[key] = counters.get(key, 0) + amount
            self._held_counters = counters
            self._counters_at = generation
        return self._held_counters

    def _shares_spent(self) -> dict[CounterKey, int]:
        """The counters every share held or claimed spends."""
        out: dict[CounterKey, int] = {}
        for shares in self._share_holds.values():
            for _, spends in shares:
                for key, amount in spends:
                    out[key] = out.get(key, 0) + amount
        for claimed in self._claim_shares.values():
            for key, amount in self._claim_spends(claimed):
                out[key] = out.get(key, 0) + amount
        return out

    def _claim_spends(
        self, shares: tuple[tuple[DeviceId, tuple[tuple[str, int], ...]], ...]
    ) -> Consumes:
        """What an allocated claim's shares spend, as the inventory reads them now."""
        out: list[tuple[CounterKey, int]] = []
        for device, consumed in shares:
            out.extend(claim_share(self._inventory, device, consumed))
        return tuple(out)

    def _count_taken(
        self,
        devices: tuple[DeviceId, ...] | list[DeviceId],
        sign: int,
        shares: Consumes = (),
        shared: tuple[DeviceId, ...] = (),
    ) -> None:
        """``devices`` were taken (sign 1) or given back (-1), and shares of the
        ``shared`` devices spending ``shares``: what they spend changes, and the
        nodes where pods fit alone may change (``_fit_memo``)."""
        scope = device_scope(self._inventory)
        touched = {n for d in devices for n in scope.get(d, ())}
        for d in shared:
            touched.update(scope.get(d, ()))
        self._fit_memo.touch(touched, took=sign > 0, gave=sign < 0)
        if self._counters_at != self._inventory.generation:
            return  # recomputed at the next use
        consumes = device_consumes(self._inventory)
        counters = self._held_counters
        for device in devices:
            for key, amount in consumes.get(device, ()):
                counters[key] = counters.get(key, 0) + sign * amount
        for key, amount in shares:
            counters[key] = counters.get(key, 0) + sign * amount

    def _hold_devices(self, rec: WorkloadRecord) -> dict[str, list[str]] | None:
        """Hold the devices found for ``rec`` by ``_placeable``; its nodes per
        podset for the Admitted decision (None: not placed)."""
        placing, self._placing = self._placing, None
        if placing is None or placing[0] != rec.key:
            return None
        placed = placing[1]
        holds = [(rec.key, placed.devices, placed.shares)]
        namespace = rec.spec.namespace
        for claim, node, devices, shares in placed.claims:  # shared claims placed with it
            self._claim_holds[(namespace, claim)] = node
            holds.append((claim_hold_key(namespace, claim), devices, shares))
        claimed = self._claimed
        for key, devices, shares in holds:
            self._device_holds[key] = devices
            self._held_since[key] = self._claim_seq
            for device in devices:
                self._devices_held[device] = key
            if shares:
                self._share_holds[key] = shares
            self._count_taken([d for d in devices if d not in claimed], 1, *_spent(shares))
        return {name: list(nodes) for name, nodes in placed.nodes.items()}

    def _release_claim_hold(self, namespace: str, name: str) -> None:
        """Direct ResourceClaim ``namespace/name`` is allocated (it takes its
        devices itself now), deleted, or no admitted workload names it any more:
        the devices kuota held for it since its first user was placed go back."""
        if self._claim_holds.pop((namespace, name), None) is not None:
            self._release_devices(claim_hold_key(namespace, name))

    def _release_devices(self, key: str) -> None:
        """The pods of ``key`` are gone (or all ready: :meth:`_end_hold`): give its
        held devices back, and wake the heads that no node could take."""
        if self._stood_for:
            self._stood_for.pop(key, None)
        devices = self._device_holds.pop(key, None)
        if devices is None:
            return
        del self._held_since[key]
        claimed = self._claimed
        given: list[DeviceId] = []
        for device in devices:
            if self._devices_held.get(device) == key:
                del self._devices_held[device]
                if device not in claimed:
                    given.append(device)
        shares = self._share_holds.pop(key, ()) if self._share_holds else ()
        spends, shared = _spent(shares)
        self._count_taken(given, -1, spends, shared)
        self._wake_unplaced(devices + shared if shared else devices)

    def _end_hold(self, rec: WorkloadRecord) -> None:
        """The pods of admitted ``rec`` are all ready: they are scheduled and their
        claims allocated, and those claims (``_claims``) now stand for the devices
        it uses, wherever the scheduler put them. Its hold, a prediction, ends; it
        never comes back for this admission. Only once a claim of its namespace was
        allocated after the hold began: else nothing in the journal stands for its
        devices (a journal without claims, a simulator file), and the hold lasts
        until its pods are gone."""
        since = self._held_since.get(rec.key)
        if since is not None and self._allocated_at.get(rec.spec.namespace, 0) > since:
            where = device_nodes(self._inventory)
            held = self._device_holds.get(rec.key, ())
            held += tuple(d for d, _ in self._share_holds.get(rec.key, ()))
            nodes = frozenset(where[d] for d in held if d in where)
            self._release_devices(rec.key)
            # what its claims may be told by, should it be preempted (node_victims.py)
            self._stood_for[rec.key] = (since, self._claim_seq, nodes)

    def _set_claim(
        self,
        key: tuple[str, str],
        devices: tuple[DeviceId, ...],
        shares: tuple[tuple[DeviceId, tuple[tuple[str, int], ...]], ...] = (),
    ) -> None:
        """ResourceClaim ``key`` (namespace, name) now takes ``devices`` and
        ``shares`` of shared devices (none: not allocated, or deleted). When a
        device no claim takes any more, or a share, is freed, wake the heads that
        no node could take."""
        before = self._claims.get(key, ())
        was = self._claim_shares.get(key, ())
        if before == devices and was == shares:
            return
        if devices or shares:  # allocated (again): a new allocation number
            self._claim_seq += 1
            self._allocated_at[key[0]] = self._claim_seq
            self._claim_at[key] = self._claim_seq
        else:
            self._claim_at.pop(key, None)
        if was != shares:
            self._set_claim_shares(key, was, shares)
        if before != devices:
            self._set_claim_devices(key, before, devices)
        if (devices or shares) and self._claim_holds:
            self._release_claim_hold(*key)  # a shared claim allocated: it takes its own

    def _set_claim_devices(
        self, key: tuple[str, str], before: tuple[DeviceId, ...], devices: tuple[DeviceId, ...]
    ) -> None:
        """Claim ``key`` took the whole devices ``before`` and takes ``devices`` now."""
        if devices:
            self._claims[key] = devices
        else:
            del self._claims[key]
        claimed, held = self._claimed, self._devices_held
        added: list[DeviceId] = []
        for device in devices:
            had = claimed.get(device, 0)
            claimed[device] = had + 1
            if not had and device not in held:
                added.append(device)
        freed: list[DeviceId] = []
        for device in before:
            left = claimed[device] - 1
            if left:
                claimed[device] = left
            else:
                del claimed[device]
                freed.append(device)
        if added:
            self._count_taken(added, 1)
        given = [d for d in freed if d not in held]
        if given:
            self._count_taken(given, -1)
        if freed:
            self._wake_unplaced(tuple(freed))

    def _set_claim_shares(
        self,
        key: tuple[str, str],
        before: tuple[tuple[DeviceId, tuple[tuple[str, int], ...]], ...],
        shares: tuple[tuple[DeviceId, tuple[tuple[str, int], ...]], ...],
    ) -> None:
        """Claim ``key``'s shares were ``before`` and are ``shares`` now."""
        if before:
            self._count_taken((), -1, self._claim_spends(before), tuple(d for d, _ in before))
        if shares:
            self._claim_shares[key] = shares
            self._count_taken((), 1, self._claim_spends(shares), tuple(d for d, _ in shares))
        else:
            del self._claim_shares[key]
        if before:
            self._wake_unplaced(tuple(d for d, _ in before))

    def _wake_unplaced(self, freed: tuple[DeviceId, ...] | None = None) -> None:
        """Capacity changed: try again the heads that no node could take. A node or
        DRA object changed (``freed`` None): all of them. Devices were freed (a
        hold released, a claim's devices): those of which a pod could now be
        placed alone on a node where devices were freed (nothing else changed,
        so the others would fail the same way)."""
        if not self._placement_waiters:
            return
        if freed is None:
            waiters, self._placement_waiters = self._placement_waiters, {}
            self._asking = {}
            self._wake_searchers({k: epoch for k, (epoch, _, _, _) in waiters.items()})
            return
        where = device_nodes(self._inventory)
        nodes = {where[d] for d in freed if d in where}
        if not nodes:
            return
        taken = Taken(self._devices_held, self._claimed)
        memo = None if self._devices_reserved else self._fit_memo
        consumed = self._counters_taken()
        # each question once (waiters of one shape ask the same: _question), and
        # its waiters woken in the order they were set aside
        woken: list[tuple[int, tuple[str, int]]] = []
        for number, (question, group) in list(self._asking.items()):
            pods, whole = _asks(question)
            if group and not fits_on(
                inventory=self._inventory,
                pods=pods,
                nodes=nodes,
                taken=taken,
                consumed=consumed,
                memo=memo,
                whole=whole,
            ):
                continue
            del self._asking[number]
            woken.extend((seq, k) for k, seq in group.items())
        if not woken:
            return
        woken.sort()
        searchers: dict[tuple[str, int], int] = {}
        for _, k in woken:
            searchers[k] = self._placement_waiters.pop(k)[0]
        self._wake_searchers(searchers)

    def _wait_for_nodes(
        self, key: tuple[str, int], epoch: int, pods: tuple[GangPod, ...], whole: bool
    ) -> None:
        """Register the group (or blocked head) ``key`` as a placement waiter: its
        gang ``pods`` (``whole``: all of it) found no nodes. A waiter set aside
        again keeps its place in the order."""
        question = self._question(pods, whole)
        waiters = self._placement_waiters
        before = waiters.get(key)
        if before is None:
            self._waiter_seq += 1
            seq = self._waiter_seq
        else:
            asked = self._asking.get(_number(before[3]))
            seq = asked[1].pop(key) if asked is not None and key in asked[1] else 0
        waiters[key] = (epoch, pods, whole, question)
        number = _number(question)
        asking = self._asking.get(number)
        if asking is None:
            asking = self._asking[number] = (question, {})
        asking[1][key] = seq

    def _question(self, pods: tuple[GangPod, ...], whole: bool) -> object:
        """What a placement waiter with ``pods`` asks when devices are freed (does
        one fit alone on those nodes, and, ``whole``, does the gang pass the
        prunings), as one object for every waiter that asks the same: the pods'
        shapes (their memo tokens, by value) and node sets (by identity: the
        eligible sets are shared), in order."""
        memo = self._fit_memo
        last = memo.asked.get(id(pods))  # a workload's gang is one tuple (NodeSets)
        if last is not None and last[0] is pods and last[1] == whole:
            return last[2]
        generation = self._inventory.generation
        key = (
            whole,
            len(pods),
            *(
                (memo.token(p, generation), id(p.nodes))
                for i, p in enumerate(pods)
                if not i or p is not pods[i - 1]
            ),
        )
        questions = memo.questions
        found = questions.get(key)
        if found is not None and not same_node_sets(cast("_Question", found)[1], pods):
            found = None  # an id of a set gone since (a copy or a pickle): asked afresh
        if found is None:
            if len(questions) >= MEMO_IDS:
                questions.clear()
            # (key, the pods, its number): the pods (and so their node sets) kept
            # alive beside, so that an id in the key is never another set's
            self._question_seq += 1
            found = questions[key] = (key, pods, self._question_seq)
        if len(memo.asked) >= MEMO_IDS:
            memo.asked.clear()
        memo.asked[id(pods)] = (pods, whole, found)
        return found

    def _wake_searchers(self, searchers: dict[tuple[str, int], int]) -> None:
        """Send the heads whose preemption search found no victim to search again
        (a release in their tree: their queue may be back within its nominal
        quota, or what is free now and what they may take together suffice)."""
        queues = self._queues
        ready = self._ready
        for (cq_name, shape), epoch in searchers.items():
            queue = queues.get(cq_name)
            if queue is not None and queue.wake_searcher(shape, epoch):
                ready[cq_name] = None


def _spent(shares: tuple[Share, ...]) -> tuple[Consumes, tuple[DeviceId, ...]]:
    """What ``shares`` spend, all together, and their devices."""
    if not shares:
        return (), ()
    return tuple(p for _, spends in shares for p in spends), tuple(d for d, _ in shares)


# A question (DeviceHolds._question): (its key, the pods it asks about, its number)
_Question = tuple[tuple[object, ...], tuple[GangPod, ...], int]


def _asks(question: object) -> tuple[tuple[GangPod, ...], bool]:
    """The pods a question asks about, and whether they are the whole gang."""
    asked = cast("_Question", question)
    return asked[1], bool(asked[0][0])


def _number(question: object) -> int:
    return cast("_Question", question)[2]
