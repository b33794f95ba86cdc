"""Per-ClusterQueue ordering, parking and requeueing of pending workloads.

Theory of operation: pending workloads are ordered by priority (higher first),
creation time, then key, and kept in *shape groups*: members with the same
shape (priority, and per podset its name, count, charge and node constraints)
are interchangeable for admission, so one attempt settles the whole group. Each
group is a heap; the queue keeps a heap of the groups' heads. **BestEffortFIFO**:
a head that cannot be admitted *parks* its group (in bulk, as Kueue's
inadmissible list with scheduling-equivalence hashing) and later groups go
ahead; :meth:`wake` and :meth:`wake_all` put parked groups back. **StrictFIFO**:
such a head *blocks* the queue until woken; a newcomer that sorts first is
tried. Waiter entries carry the group's *epoch*, so stale ones are recognised;
heaps delete lazily and are compacted when stale entries pile up. Plain lists
and dicts keep it picklable and deterministic. More: docs/design/fold.md.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from kuota.core.pickling import register_by_fields
from kuota.core.queueing.verdict import Verdict
from kuota.core.quota.tree import FlavorResource

OrderKey = tuple[int, float, str]  # (-priority, creation seconds, workload key)
Needs = tuple[tuple[FlavorResource, int], ...]  # what a failed attempt was short of

BEST_EFFORT_FIFO = "BestEffortFIFO"
STRICT_FIFO = "StrictFIFO"
BLOCKED_HEAD = -1  # the "shape" a StrictFIFO block registers under


@dataclass(slots=True, init=False)  # constructor written out: see flavors.Shortfall
class ShapeGroup:
    shape: int
    members: dict[str, OrderKey] = field(default_factory=dict)
    heap: list[OrderKey] = field(default_factory=list)
    parked: bool = False
    epoch: int = 0  # names the current set of waiter registrations
    verdict: Verdict | None = None  # why it was last parked
    # What the last failed attempt was short of; kept when a release wakes the
    # group (so its head can be re-checked cheaply), dropped by wake_all.
    needs: Needs = ()
    # Flavor-resources whose waiter entry (for ``epoch``) is still registered.
    live: dict[FlavorResource, None] = field(default_factory=dict)

    def __init__(
        self,
        shape: int,
        members: dict[str, OrderKey] | None = None,
        heap: list[OrderKey] | None = None,
        parked: bool = False,
        epoch: int = 0,
        verdict: Verdict | None = None,
        needs: Needs = (),
        live: dict[FlavorResource, None] | None = None,
    ) -> None:
        self.shape = shape
        self.members = {} if members is None else members
        self.heap = [] if heap is None else heap
        self.parked = parked
        self.epoch = epoch
        self.verdict = verdict
        self.needs = needs
        self.live = {} if live is None else live

    def head(self) -> OrderKey | None:
        heap = self.heap
        members = self.members
        while heap:
            top = heap[0]
            if members.get(top[2]) == top:
                return top
            heapq.heappop(heap)
        return None

    def add(self, order: OrderKey) -> None:
        self.members[order[2]] = order
        heapq.heappush(self.heap, order)

    def discard(self, key: str) -> None:
        self.members.pop(key, None)
        if len(self.heap) > 2 * len(self.members) + 32:
            self.heap = sorted(self.members.values())


@dataclass(slots=True)
class ClusterQueueQueue:
    strategy: str = BEST_EFFORT_FIFO
    groups: dict[int, ShapeGroup] = field(default_factory=dict)
    heap: list[tuple[OrderKey, int]] = field(default_factory=list)  # (group head, shape)
    blocked_head: str | None = None  # StrictFIFO: the head that could not be admitted
    epochs: int = 0  # epoch counter shared by groups and blocks (never reused)
    block_epoch: int = 0
    # StrictFIFO: the last blocked head, its verdict and needs (for a cheap re-check)
    last_blocked: tuple[str, Verdict, Needs] | None = None
    size: int = 0

    # ------------------------------------------------------------------ membership

    def push(self, order: OrderKey, shape: int) -> ShapeGroup:
        """Queue a workload; returns its group (parked if the group is parked)."""
        group = self.groups.get(shape)
        if group is None:
            self.epochs += 1
            group = self.groups[shape] = ShapeGroup(shape, epoch=self.epochs)
        before = group.head()
        group.add(order)
        self.size += 1
        if not group.parked and (before is None or order < before):
            heapq.heappush(self.heap, (order, shape))
        return group

    def remove(self, key: str, shape: int) -> None:
        group = self.groups.get(shape)
        if group is None or key not in group.members:
            return
        was_head = group.head()
        group.discard(key)
        self.size -= 1
        if not group.members:
            del self.groups[shape]
        elif not group.parked and was_head is not None and was_head[2] == key:
            new_head = group.head()
            if new_head is not None:
                heapq.heappush(self.heap, (new_head, shape))
        if self.blocked_head == key:
            self.blocked_head = None
        if len(self.heap) > 2 * len(self.groups) + 32:
            self._rebuild_heap()

    def _rebuild_heap(self) -> None:
        entries: list[tuple[OrderKey, int]] = []
        for shape, group in self.groups.items():
            if not group.parked:
                head = group.head()
                if head is not None:
                    entries.append((head, shape))
        heapq.heapify(entries)
        self.heap = entries

    # ------------------------------------------------------------------ scheduling

    def head(self) -> tuple[OrderKey, int] | None:
        """The next workload to try, or None (empty, all parked, or blocked)."""
        found = self.next_head()
        return None if found is None else found[0]

    def next_head(self) -> tuple[tuple[OrderKey, int], Verdict | None, Needs] | None:
        """``head()`` and what ``recheck()`` says of it, in one step (the cycle's
        hottest call): ``(entry, verdict, needs)``, verdict None when the head
        must be assigned afresh; None when there is no head."""
        heap = self.heap
        groups = self.groups
        while heap:
            entry = heap[0]
            order, shape = entry
            group = groups.get(shape)
            if group is not None and not group.parked:
                # group.head() == order, inlined
                gheap = group.heap
                members = group.members
                while gheap:
                    top = gheap[0]
                    if members.get(top[2]) == top:
                        break
                    heapq.heappop(gheap)
                else:
                    top = None
                if top == order:
                    key = order[2]
                    if self.blocked_head == key:
                        return None
                    if self.strategy == STRICT_FIFO:
                        last = self.last_blocked
                        if last is not None and last[0] == key and last[2]:
                            return entry, last[1], last[2]
                        return entry, None, ()
                    if group.needs and group.verdict is not None:
                        return entry, group.verdict, group.needs
                    return entry, None, ()
            heapq.heappop(heap)
        return None

    def park(self, shape: int, verdict: Verdict, needs: Needs) -> tuple[int, Needs]:
        """BestEffortFIFO: set the whole group aside. Returns the epoch and the
        needs to register as waiters: all of them when they changed, else only
        those whose entry was consumed since (the others are still in place)."""
        group = self.groups[shape]
        group.parked = True
        group.verdict = verdict
        if needs != group.needs:
            self.epochs += 1
            group.epoch = self.epochs
            group.needs = needs
            group.live = {}
        live = group.live
        # nothing registered for this epoch yet: all of them
        todo = needs
        if live:
            for need in needs:
                if need[0] in live:  # some still registered: only the others
                    todo = tuple(n for n in needs if n[0] not in live)
                    break
        for fr, _ in todo:
            live[fr] = None
        return group.epoch, todo

    def block(self, key: str, verdict: Verdict, needs: Needs) -> int:
        """StrictFIFO: hold the queue at ``key``. Returns the block epoch."""
        self.blocked_head = key
        self.epochs += 1
        self.block_epoch = self.epochs
        self.last_blocked = (key, verdict, needs)
        return self.block_epoch

    def recheck(self, key: str, shape: int) -> tuple[Verdict, Needs] | None:
        """The verdict and needs of the last failed attempt that ``key`` (the
        head) would repeat if none of those needs can be met now, or None when
        it must be assigned afresh."""
        if self.strategy == STRICT_FIFO:
            last = self.last_blocked
            if last is not None and last[0] == key and last[2]:
                return last[1], last[2]
            return None
        group = self.groups.get(shape)
        if group is not None and group.needs and group.verdict is not None:
            return group.verdict, group.needs
        return None

    def wake(self, shape: int, epoch: int, fr: FlavorResource) -> bool:
        """A waiter entry for ``fr`` was taken out of its heap: wake its group (or
        the blocked head) if the entry is current. Returns whether it woke."""
        if shape == BLOCKED_HEAD:
            if self.blocked_head is not None and self.block_epoch == epoch:
                self.blocked_head = None
                return True
            return False
        group = self.groups.get(shape)
        if group is None or group.epoch != epoch:
            return False  # stale: the group re-registered since, or is gone
        group.live.pop(fr, None)
        if not group.parked:
            return False
        self.unpark(group)
        return True

    def is_registered(self, shape: int, epoch: int, fr: FlavorResource) -> bool:
        """Whether a waiter entry is current (used to compact waiter heaps)."""
        if shape == BLOCKED_HEAD:
            return self.blocked_head is not None and self.block_epoch == epoch
        group = self.groups.get(shape)
        return group is not None and group.epoch == epoch and fr in group.live

    def wake_all(self) -> None:
        """Something structural changed: every parked group and a blocked head
        are tried afresh (their recorded needs no longer say anything)."""
        self.blocked_head = None
        self.last_blocked = None
        for group in self.groups.values():
            self.epochs += 1
            group.epoch = self.epochs  # every waiter entry of the group is now stale
            group.needs = ()
            group.live = {}
            if group.parked:
                self.unpark(group)

    def unpark(self, group: ShapeGroup) -> None:
        """Put a parked group back in the queue (its waiter entry was current)."""
        group.parked = False
        head = group.head()
        if head is not None:
            heapq.heappush(self.heap, (head, group.shape))

    def queued_keys(self) -> list[str]:
        """Every queued workload key, in queue order."""
        orders = sorted(o for g in self.groups.values() for o in g.members.values())
        return [order[2] for order in orders]


register_by_fields(ShapeGroup)
