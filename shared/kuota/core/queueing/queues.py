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

**Lanes** (admission fair sharing, :mod:`kuota.core.queueing.afs`): in a
*fair* queue every group belongs to one lane (its LocalQueue) with a *rank*
(that LocalQueue's usage); heads go by (rank, order) instead of order, from
``fair_heap``. A rank change pushes fresh entries for the lane's groups; an
entry whose rank is no longer its lane's is stale and dropped when it
surfaces, like any other.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

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
        # the heap's entries read as objects: an OrderKey read typed is unboxed,
        # then boxed again, a new tuple, for each comparison (native-core.md)
        heap: list[Any] = self.heap
        members: dict[str, Any] = self.members
        while heap:
            top = heap[0]
            if members.get(top[2]) == top:
                return top  # type: ignore[no-any-return]
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
    fair: bool = False  # admission fair sharing: heads by (lane rank, order)
    fair_heap: list[tuple[float, OrderKey, int]] = field(default_factory=list)
    lane_of: dict[int, str] = field(default_factory=dict)  # shape -> lane
    lane_shapes: dict[str, dict[int, None]] = field(default_factory=dict)
    ranks: dict[str, float] = field(default_factory=dict)  # lane -> rank

    # ------------------------------------------------------------------ membership

    def push(self, order: OrderKey, shape: int, lane: str = "") -> ShapeGroup:
        """Queue a workload (in ``lane`` if the queue is fair); returns its group
        (parked if the group is parked)."""
        group = self.groups.get(shape)
        if group is None:
            self.epochs += 1
            group = self.groups[shape] = ShapeGroup(shape, epoch=self.epochs)
            if self.fair:
                self.lane_of[shape] = lane
                self.lane_shapes.setdefault(lane, {})[shape] = None
        before = group.head()
        group.add(order)
        self.size += 1
        if not group.parked and (before is None or order < before):
            self._push_head(order, shape)
        return group

    def _push_head(self, order: OrderKey, shape: int) -> None:
        if self.fair:
            rank = self.ranks.get(self.lane_of.get(shape, ""), 0.0)
            heapq.heappush(self.fair_heap, (rank, order, shape))
        else:
            heapq.heappush(self.heap, (order, shape))

    def set_rank(self, lane: str, rank: float) -> None:
        """A lane's rank changed: its groups' heads go by the new one."""
        if self.ranks.get(lane, 0.0) == rank:
            self.ranks[lane] = rank
            return
        self.ranks[lane] = rank
        for shape in self.lane_shapes.get(lane, {}):
            group = self.groups.get(shape)
            if group is not None and not group.parked:
                head = group.head()
                if head is not None:
                    heapq.heappush(self.fair_heap, (rank, head, shape))
        if len(self.fair_heap) > 2 * len(self.groups) + 32:
            self._rebuild_heap()

    def set_fair(self, fair: bool, lanes: dict[int, str]) -> None:
        """Turn lanes on or off (``lanes``: shape -> lane of every group); ranks
        are set afterwards by :meth:`set_rank`."""
        self.fair = fair
        self.lane_of = dict(lanes) if fair else {}
        self.lane_shapes = {}
        for shape, lane in self.lane_of.items():
            self.lane_shapes.setdefault(lane, {})[shape] = None
        self.ranks = {}
        self._rebuild_heap()

    def remove(self, key: str, shape: int) -> None:
        group = self.groups.get(shape)
        if group is None or key not in group.members:
            return
        was_head = group.head()
        group.discard(key)
        self.size -= 1
        if not group.members:
            del self.groups[shape]
            if self.fair:
                lane = self.lane_of.pop(shape, "")
                shapes = self.lane_shapes.get(lane)
                if shapes is not None:
                    shapes.pop(shape, None)
                    if not shapes:
                        del self.lane_shapes[lane]
        elif not group.parked and was_head is not None and was_head[2] == key:
            new_head = group.head()
            if new_head is not None:
                self._push_head(new_head, shape)
        if self.blocked_head == key:
            self.blocked_head = None
        if len(self.heap) + len(self.fair_heap) > 2 * len(self.groups) + 32:
            self._rebuild_heap()

    def _rebuild_heap(self) -> None:
        entries: list[tuple[OrderKey, int]] = []
        for shape, group in self.groups.items():
            if not group.parked:
                head = group.head()
                if head is not None:
                    entries.append((head, shape))
        if self.fair:
            ranks = self.ranks
            lane_of = self.lane_of
            fair = [(ranks.get(lane_of.get(s, ""), 0.0), o, s) for o, s in entries]
            heapq.heapify(fair)
            self.fair_heap = fair
            self.heap = []
            return
        heapq.heapify(entries)
        self.heap = entries
        self.fair_heap = []

    # ------------------------------------------------------------------ scheduling

    def head(self) -> tuple[OrderKey, int] | None:
        """The next workload to try, or None (empty, all parked, or blocked)."""
        found = self.next_head()
        return None if found is None else found[0]

    def next_head(self) -> tuple[tuple[OrderKey, int], Verdict | None, Needs] | None:
        """``head()`` and what ``recheck()`` says of it, in one step (the cycle's
        hottest call): ``(entry, verdict, needs)``, verdict None when the head
        must be assigned afresh; None when there is no head."""
        if self.fair:
            return self._fair_next_head()
        # entries read as objects (see ShapeGroup.head)
        heap: list[Any] = self.heap
        groups = self.groups
        while heap:
            entry = heap[0]
            order: Any = entry[0]
            shape: int = entry[1]
            group = groups.get(shape)
            if group is not None and not group.parked:
                # group.head() == order, inlined
                gheap: list[Any] = group.heap
                members: dict[str, Any] = group.members
                while gheap:
                    top = gheap[0]
                    if members.get(top[2]) == top:
                        break
                    heapq.heappop(gheap)
                else:
                    top = None
                if top == order:
                    return self._answer(entry, group)
            heapq.heappop(heap)
        return None

    def _fair_next_head(self) -> tuple[tuple[OrderKey, int], Verdict | None, Needs] | None:
        """``next_head`` of a fair queue: the lowest (rank, order) current entry."""
        heap = self.fair_heap
        groups = self.groups
        ranks = self.ranks
        lane_of = self.lane_of
        while heap:
            rank, order, shape = heap[0]
            group = groups.get(shape)
            if (
                group is not None
                and not group.parked
                and ranks.get(lane_of.get(shape, ""), 0.0) == rank
                and group.head() == order
            ):
                return self._answer((order, shape), group)
            heapq.heappop(heap)
        return None

    def _answer(
        self, entry: tuple[OrderKey, int], group: ShapeGroup
    ) -> tuple[tuple[OrderKey, int], Verdict | None, Needs] | None:
        """``next_head``'s answer for ``entry``, the current head of ``group``: None
        while it is the blocked head; else the verdict a StrictFIFO queue's last
        block or the group's parking left on it."""
        key = entry[0][2]
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

    def wake_searcher(self, shape: int, epoch: int) -> bool:
        """A release in the cohort tree may give a head whose preemption search
        found no victim one now: if the registration is current, the group (or
        the blocked head) is tried afresh, its recorded needs dropped so that no
        quick re-check sets it aside without a search. Returns whether it woke."""
        if shape == BLOCKED_HEAD:
            if self.block_epoch != epoch:
                return False
            self.last_blocked = None
            if self.blocked_head is None:
                return False
            self.blocked_head = None
            return True
        group = self.groups.get(shape)
        if group is None or group.epoch != epoch:
            return False  # stale: parked again with other needs since, or gone
        self.epochs += 1
        group.epoch = self.epochs  # its waiter entries are now stale
        group.needs = ()
        group.live = {}
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
            self._push_head(head, group.shape)

    def queued_keys(self) -> list[str]:
        """Every queued workload key, in queue order (a fair queue: by lane rank,
        then order)."""
        if self.fair:
            ranks = self.ranks
            lanes = self.lane_of
            ranked = sorted(
                (ranks.get(lanes.get(s, ""), 0.0), o)
                for s, g in self.groups.items()
                for o in g.members.values()
            )
            return [order[2] for _, order in ranked]
        orders = sorted(o for g in self.groups.values() for o in g.members.values())
        return [order[2] for order in orders]


register_by_fields(ShapeGroup)
