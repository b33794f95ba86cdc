"""The gang placement's search: exhaustive backtracking with a step budget.

Theory of operation: see :mod:`kuota.core.dra.placement` (the levels, the
prunings, the rules of adminAccess, taints, matchAttribute and allocation mode
All). :class:`Search` keeps an explicit stack of level iterators: level 2*i
chooses pod i's node, the levels after it its requests' devices; every node and
device tried is one step against the budget (:mod:`kuota.core.dra.placement_why`
says why a search found nothing).

Pure: no clock, no randomness, no I/O.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping, Sequence
from typing import Any

from kuota.core.dra.placement_rules import AttributeValue
from kuota.core.dra.placement_types import (
    Attrs,
    Candidates,
    CounterKey,
    DeviceId,
    FitMemo,
    GangPod,
    PodPlacement,
    SearchDevice,
    Taken,
    one_device,
    one_free,
)


class Budget(Exception):
    pass


SHARES = 1 << 30  # the free devices a shared one counts for (Search._free_on)


class Search:
    """The backtracking search over an explicit stack of level iterators: level
    2*i chooses pod i's node, the levels after it its requests' devices."""

    def __init__(
        self,
        pods: Sequence[GangPod],
        nodes: tuple[str, ...],
        candidates: Candidates,
        limits: dict[CounterKey, int],
        used: Mapping[CounterKey, int],
        budget: int,
        taken: Container[DeviceId] = frozenset(),
        attrs: Attrs = (),
        memo: FitMemo | None = None,
        generation: int = 0,
        prefilter: bool = True,
        tokens: Sequence[int] = (),
    ) -> None:
        self.pods = pods
        self.nodes = nodes
        self.candidates = candidates
        # counters keyed Any: see Consumes (placement_types.py)
        self.limits: dict[Any, int] = limits
        # what was spent before the search: never written
        self.base_used: dict[Any, int] = used if isinstance(used, dict) else dict(used)
        self.used: dict[Any, int] = {}  # what this search spends on top of it
        self.budget = budget
        self.steps = 0
        self.exhausted = False
        self.base = taken  # already taken: never written
        # the same, read as the two dicts of a Taken (nothing freed) when it is one
        # (device ids are read Any, as SearchDevice.id: see Consumes)
        self.held: Mapping[Any, str] | None = None
        self.claimed: Mapping[Any, int] = {}
        if isinstance(taken, Taken) and not taken.freed:
            self.held, self.claimed = taken.held, taken.claimed
        self.taken: set[Any] = set()  # what this search took
        self.node_of: list[int] = [-1] * len(pods)
        # adminAccess devices: free for every other pod, but within their own pod
        # (one scheduling cycle) they count against counters, and a later
        # request of the pod may not take them (Kubernetes' allocator).
        self.admin_used: list[dict[Any, int]] = [{} for _ in pods]
        self.attrs = attrs or tuple(() for _ in pods)
        self.memo = memo
        self.generation = generation
        # each pod's token in the memo (made here when the caller did not)
        self.tokens: list[int] = list(tokens)
        if memo is not None and len(self.tokens) != len(pods):
            self.tokens = [memo.token(pod, generation) for pod in pods]
        # the rest of the search's state is made by run() (_prepare): many
        # searches end at the prefilter
        self.first: list[int] = []
        self.chosen: list[list[tuple[DeviceId, ...]]] = []
        self.admin_on: list[dict[Any, int]] = []
        self.bound: list[list[tuple[int, ...]]] = []
        self.value: list[list[AttributeValue | None]] = []
        self.holding: list[list[int]] = []
        # distinctAttribute: per pod and constraint, value -> how many hold it (None:
        # a matchAttribute constraint)
        self.seen: list[list[dict[Any, int] | None]] = []
        self.levels: list[tuple[int, int | None]] = []
        # per pod, the indices of the nodes it may use where it fits alone (None:
        # every node, the sub-searches of this filter)
        self.allowed: list[tuple[int, ...] | None] = [None] * len(pods)
        if prefilter:
            self._prefilter(memo, generation)

    def _in_base(self, device: Any) -> bool:
        """Whether ``device`` was taken before the search."""
        held = self.held
        if held is not None:
            return device in held or device in self.claimed
        return device in self.base

    def _prepare(self) -> None:
        pods = self.pods
        self.first = [-1] * len(pods)  # candidate index of request 0's first device
        self.chosen = [[() for _ in pod.requests] for pod in pods]
        self.admin_on = [{} for _ in pods]
        # matchAttribute: per pod and constraint, the value and how many hold it
        self.bound = [
            [
                tuple(c for c, k in enumerate(pod.constraints) if r in k.requests)
                for r in range(len(pod.requests))
            ]
            for pod in pods
        ]
        self.value = [[None] * len(p.constraints) for p in pods]
        self.holding = [[0] * len(p.constraints) for p in pods]
        self.seen = [[{} if c.distinct else None for c in p.constraints] for p in pods]
        # Levels: (pod, None) picks the node, (pod, r) the devices of request r.
        self.levels = []
        for i, pod in enumerate(pods):
            self.levels.append((i, None))
            self.levels.extend((i, r) for r in range(len(pod.requests)))

    def run(self) -> tuple[PodPlacement, ...] | None:
        if all(one_device(pod) for pod in self.pods):
            return self._run_one()
        return self._run_levels()

    def _run_levels(self) -> tuple[PodPlacement, ...] | None:
        """The backtracking search itself (class docstring)."""
        self._prepare()
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
        except Budget:
            self.exhausted = True
        return None

    def _run_one(self) -> tuple[PodPlacement, ...] | None:
        """``run()`` for a gang whose pods each ask for one device
        (:func:`one_device`), the commonest: the levels' first choices, taken
        greedily, are their first placement when no pod runs out of nodes; the
        steps are those the levels count on that path. A pod that runs out of
        nodes would make the levels go back to an earlier pod's choice: then
        the levels run, from the start. Per pod, the node level counts a step
        per node it tries and skips one where no candidate is free with its
        counters fitting (``_may_fit``); else the device level counts a step
        per candidate not taken, from where it starts, up to the first whose
        counters fit, and takes it."""
        pods, nodes = self.pods, self.nodes
        budget = self.budget
        steps = start = self.steps
        taken, used = self.taken, self.used
        found: list[PodPlacement] = []
        last_n = last_k = -1
        for i, pod in enumerate(pods):
            by_node = self.candidates[i][0]
            allowed = self.allowed[i]
            twin = self._twin(i)
            first = last_n if twin else 0  # identical pods: non-decreasing nodes
            placed = False
            for n in range(first, len(nodes)) if allowed is None else allowed:
                if n < first:
                    continue
                node = nodes[n]
                if pod.nodes is not None and node not in pod.nodes:
                    continue
                steps += 1
                if steps > budget:
                    return self._out_of_budget()
                cands = by_node.get(node, ())
                # identical pods on one node: their devices increase. The devices
                # before k are taken or short of counters (the pods before took
                # the first usable ones), so the scan from k finds one exactly when
                # _may_fit would say yes, and the levels count no step here if not.
                k = last_k + 1 if twin and n == last_n else 0
                tried = 0  # the device level's steps here, if it gets here
                short: object = None  # a consumption found short of its counters
                while k < len(cands):
                    d = cands[k]
                    k += 1
                    if d.id in taken or self._in_base(d.id):
                        continue
                    tried += 1
                    if d.consumes:
                        if d.consumes is short:
                            continue  # the same counters, the same amounts: short too
                        if not self._fits(d, i):
                            short = d.consumes
                            continue
                    steps += tried
                    if steps > budget:  # the device level stops at the budget's end
                        return self._out_of_budget()
                    if d.shared:  # a share: the next identical pod may take it too
                        k -= 1
                    else:
                        taken.add(d.id)
                    for key, amount in d.consumes:
                        used[key] = used.get(key, 0) + amount
                    found.append(PodPlacement(node, ((d.id,),)))
                    self.node_of[i] = last_n = n
                    last_k = k - 1
                    placed = True
                    break
                if placed:
                    break
            if not placed:
                if i == 0:
                    self.steps = steps
                    return None  # the levels end there too
                # the levels would try an earlier pod's next choice: let them
                taken.clear()
                used.clear()
                self.node_of = [-1] * len(pods)
                self.steps = start
                return self._run_levels()
        self.steps = steps
        return tuple(found)

    def _out_of_budget(self) -> tuple[PodPlacement, ...] | None:
        """What ``run()`` returns when a step passes the budget (the levels raise
        Budget there)."""
        self.steps, self.exhausted = self.budget + 1, True
        return None

    def _admin_fits(self) -> bool:
        """Whether each pod's adminAccess devices fit the counters whatever the
        order the scheduler takes the pods in: with every other pod's devices
        allocated (checked as they were chosen against the pods before only)."""
        base, used, limits = self.base_used, self.used, self.limits
        for admin in self.admin_used:
            for key, amount in admin.items():
                if amount and base.get(key, 0) + used.get(key, 0) + amount > limits.get(key, 0):
                    return False
        return True

    def _prefilter(self, memo: FitMemo | None, generation: int) -> None:
        """Keep for each pod only the nodes it may use where it fits alone, given
        what was taken before the search (a node where it does not can be in no
        placement of the gang); answers kept in ``memo`` are reused: a pod's last
        list, with only the nodes touched since asked again."""
        for i, pod in enumerate(self.pods):
            if i and pod is self.pods[i - 1]:
                self.allowed[i] = self.allowed[i - 1]  # the same pod again
                continue
            if memo is None:
                self.allowed[i] = tuple(
                    n
                    for n, node in enumerate(self.nodes)
                    if self._may_use(i, node) and self._alone(i, node)
                )
            else:
                self.allowed[i] = self._remembered(i, memo, generation)

    def enough(self) -> bool:
        """A necessary condition for a gang of one pod repeated, each asking for
        ``count`` devices with one plain request: the nodes where it fits alone
        have, together, enough free devices (each node at most its free devices
        over ``count`` pods). Other gangs: True (the search decides)."""
        pods = self.pods
        if len(pods) < 2 or pods[-1] is not pods[0] or len(pods[0].requests) != 1:
            return True
        pod = pods[0]
        request = pod.requests[0]
        if (
            pod.constraints
            or request.admin_access
            or request.allocation_mode != "ExactCount"
            or request.count < 1
        ):
            return True
        allowed = self.allowed[0]
        if allowed is None:
            return True
        memo = self.memo
        counts: dict[str, tuple[int, int]] | None = None
        if memo is not None:
            counts = memo.free_counts(self.tokens[0])
        cands = self.candidates[0][0]
        room = 0
        for n in allowed:
            node = self.nodes[n]
            if counts is not None and memo is not None:
                version = memo.versions.get(node, 0)
                known = counts.get(node)
                if known is not None and known[0] == version:
                    free = known[1]
                else:
                    free = self._free_on(cands.get(node, ()))
                    counts[node] = (version, free)
            else:
                free = self._free_on(cands.get(node, ()))
            room += free // request.count
            if room >= len(pods):
                return True
        return False

    def _free_on(self, cands: tuple[SearchDevice, ...]) -> int:
        """How many of ``cands`` are not taken and fit their counters, each alone."""
        free = 0
        short: object = None  # a consumption found short of its counters
        fit: object = None  # one found to fit (nothing is taken during the scan)
        for d in cands:
            if d.consumes and d.consumes is not fit:
                if d.consumes is short:
                    continue  # the same counters, the same amounts: short too
                if not self._fits(d, 0):
                    short = d.consumes
                    continue
                fit = d.consumes  # the same counters, the same amounts: fit too
            if d.shared:
                return SHARES  # a share: it may serve every pod
            if not self._in_base(d.id):
                free += 1
        return free

    def _remembered(self, i: int, memo: FitMemo, generation: int) -> tuple[int, ...]:
        pod = self.pods[i]
        key = self.tokens[i]
        answers = memo.answers(key)
        last = memo.fitting.get(key)
        found: tuple[int, ...] | None = None
        if last is not None and last[1] is pod.nodes and last[2] is self.nodes:
            if last[0] == memo.clock:
                return last[3]
            touched = memo.touched_since(last[0])
            if touched is not None:
                index = memo.index_of(self.nodes)
                kept = set(last[3])
                for node in touched:
                    n = index.get(node)
                    if n is None:
                        continue
                    kept.discard(n)
                    if self._may_use(i, node) and self._answer(i, node, answers, memo):
                        kept.add(n)
                found = tuple(sorted(kept))
        if found is None:
            found = tuple(
                n
                for n, node in enumerate(self.nodes)
                if self._may_use(i, node) and self._answer(i, node, answers, memo)
            )
        memo.fitting[key] = (memo.clock, pod.nodes, self.nodes, found)
        return found

    def _may_use(self, i: int, node: str) -> bool:
        allowed = self.pods[i].nodes
        return allowed is None or node in allowed

    def _answer(
        self, i: int, node: str, answers: dict[str, tuple[int, bool]], memo: FitMemo
    ) -> bool:
        known = answers.get(node)
        if known is not None and memo.still(node, known):
            return known[1]
        fits = self._alone(i, node)
        answers[node] = (memo.clock, fits)
        return fits

    def fits_somewhere(
        self, i: int, nodes: Sequence[str], memo: FitMemo | None, generation: int
    ) -> bool:
        """Whether pod i alone fits on one of ``nodes`` (those it may use), with
        what was taken before the search."""
        pod = self.pods[i]
        answers: dict[str, tuple[int, bool]] | None = None
        if memo is not None:
            answers = memo.answers(self.tokens[i])
        for node in nodes:
            if pod.nodes is not None and node not in pod.nodes:
                continue
            if (
                self._answer(i, node, answers, memo)
                if answers is not None and memo is not None
                else self._alone(i, node)
            ):
                return True
        return False

    def _alone(self, i: int, node: str) -> bool:
        """Whether pod i alone fits on ``node`` with what was taken before the
        search (or its search there runs out of budget: not proven otherwise)."""
        if one_device(self.pods[i]):  # any free device whose counters fit
            # (before the search: nothing taken by it, no adminAccess device)
            here = self.candidates[i][0].get(node, ())
            return one_free(here, self.base, self.base_used, self.limits)
        for r, per_request in enumerate(self.candidates[i]):
            if node not in per_request and self.pods[i].requests[r].count > 0:
                return False  # no device there it may take
        cands = tuple(
            {node: per_request[node]} if node in per_request else {}
            for per_request in self.candidates[i]
        )
        sub = Search(
            (self.pods[i],),
            (node,),
            (cands,),
            self.limits,
            self.base_used,
            self.budget,
            self.base,
            (self.attrs[i],),
            prefilter=False,
        )
        return sub.run() is not None or sub.exhausted

    def _step(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise Budget

    def _level(self, k: int) -> Iterator[None]:
        i, r = self.levels[k]
        if r is None:
            return self._nodes(i)
        return self._devices(i, r)

    def _nodes(self, i: int) -> Iterator[None]:
        pod = self.pods[i]
        first = self.node_of[i - 1] if self._twin(i) else 0  # non-decreasing nodes
        allowed = self.allowed[i]
        for n in range(first, len(self.nodes)) if allowed is None else allowed:
            if n < first:
                continue
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
        if i == 0:
            return False
        before, pod = self.pods[i - 1], self.pods[i]
        return before is pod or before == pod

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
            short: object = None  # a consumption found short of its counters
            fit: object = None  # one found to fit (nothing is taken during the scan)
            for d in self.candidates[i][r].get(node, ()):
                if d.consumes and d.consumes is not fit:
                    if d.consumes is short:
                        continue  # the same counters, the same amounts: short too
                    if not self._fits(d, i):
                        short = d.consumes
                        continue
                    fit = d.consumes  # the same counters, the same amounts: fit too
                if admin or (d.id not in taken and not self._in_base(d.id)):
                    need -= 1
                    if need == 0:
                        break
            else:
                return False
        return True

    def _all_free(self, i: int, r: int, cands: tuple[SearchDevice, ...], need: int) -> bool:
        """Whether allocation mode All can take ``cands``, every matching device of
        the node: there are exactly ``need`` (what was charged), none is taken, and
        each one's counters fit alone (together: checked as they are taken)."""
        if len(cands) != need or need <= 0:
            return False
        admin = self.pods[i].requests[r].admin_access
        return all(
            self._usable(i, r, d, admin) and (not d.consumes or self._fits(d, i)) for d in cands
        )

    def _fits(self, d: SearchDevice, i: int) -> bool:
        base = self.base_used
        used = self.used
        limits = self.limits
        admin = self.admin_used[i]
        for key, amount in d.consumes:
            spent = base.get(key, 0) + amount
            if used:  # empty until the search takes devices (the prefilter's case)
                spent += used.get(key, 0)
            if admin:
                spent += admin.get(key, 0)
            if spent > limits.get(key, 0):
                return False
        return True

    def _usable(self, i: int, r: int, d: SearchDevice, admin: bool) -> bool:
        """Whether request r of pod i may take d now: a regular request a device
        nobody took (adminAccess ones of this pod included); an adminAccess one
        any device but those earlier requests of its claim took."""
        if not admin:
            return (
                d.id not in self.taken and not self._in_base(d.id) and d.id not in self.admin_on[i]
            )
        claims = self.pods[i].claims
        for r2 in range(r):
            if (claims[r2] == claims[r] if claims else False) and d.id in self.chosen[i][r2]:
                return False
        return True

    def _agrees(self, i: int, r: int, d: SearchDevice) -> bool:
        """Whether d keeps every matchAttribute and distinctAttribute constraint
        on request r."""
        for c in self.bound[i][r]:
            seen = self.seen[i][c]
            if seen is not None:  # distinctAttribute: a value no other device holds
                if seen and self.attrs[i][c].get(d.id) in seen:
                    return False
            elif self.holding[i][c] and self.attrs[i][c].get(d.id) != self.value[i][c]:
                return False
        return True

    def _take(self, i: int, r: int, d: SearchDevice, admin: bool) -> None:
        if admin or d.shared:  # a share is taken from no other pod, but given once in its own
            self.admin_on[i][d.id] = self.admin_on[i].get(d.id, 0) + 1
        else:
            self.taken.add(d.id)
        used = self.admin_used[i] if admin else self.used
        for key, amount in d.consumes:
            used[key] = used.get(key, 0) + amount
        for c in self.bound[i][r]:
            seen = self.seen[i][c]
            if seen is not None:
                value = self.attrs[i][c].get(d.id)
                seen[value] = seen.get(value, 0) + 1
            elif not self.holding[i][c]:
                self.value[i][c] = self.attrs[i][c].get(d.id)
            self.holding[i][c] += 1

    def _release(self, i: int, r: int, d: SearchDevice, admin: bool) -> None:
        if admin or d.shared:
            left = self.admin_on[i][d.id] - 1
            if left:
                self.admin_on[i][d.id] = left
            else:
                del self.admin_on[i][d.id]
        else:
            self.taken.discard(d.id)
        used = self.admin_used[i] if admin else self.used
        for key, amount in d.consumes:
            used[key] -= amount
        for c in self.bound[i][r]:
            seen = self.seen[i][c]
            if seen is not None:
                value = self.attrs[i][c].get(d.id)
                left = seen[value] - 1
                if left:
                    seen[value] = left
                else:
                    del seen[value]
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
            # adminAccess devices and shares may be shared, so theirs only do not
            # decrease.
            k = self.first[i - 1]
            if not admin and not cands[k].shared:
                k += 1
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
                if (
                    self._usable(i, r, d, admin)
                    if admin or admin_on
                    else d.id not in self.taken and not self._in_base(d.id)
                ):
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

    def _all(self, i: int, r: int, cands: tuple[SearchDevice, ...], need: int) -> Iterator[None]:
        """Allocation mode All: the one combination, every matching device of the
        node, when there are exactly ``need`` of them and all can be taken."""
        if not self._all_free(i, r, cands, need):
            return
        admin = self.pods[i].requests[r].admin_access
        bound = self.bound[i][r]
        held: list[SearchDevice] = []
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
