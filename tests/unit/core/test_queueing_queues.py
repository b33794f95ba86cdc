"""The per-ClusterQueue queue: order, shape groups, parking, blocking, epochs."""

from __future__ import annotations

from kuota.core.queueing.queues import BLOCKED_HEAD, ClusterQueueQueue
from kuota.core.queueing.verdict import text_verdict

NO = text_verdict("InsufficientQuota", "no")
NEEDS = ((("f", "cpu"), 2000),)


def order(key: str, priority: int = 0, created: float = 0.0) -> tuple[int, float, str]:
    return (-priority, created, key)


def head_key(q: ClusterQueueQueue) -> str | None:
    head = q.head()
    return head[0][2] if head else None


def test_heads_follow_priority_then_creation_then_key_across_groups() -> None:
    q = ClusterQueueQueue()
    q.push(order("c", 0, 1.0), shape=1)
    q.push(order("b", 5, 9.0), shape=2)
    q.push(order("a", 0, 1.0), shape=1)
    got = []
    while (h := q.head()) is not None:
        got.append(h[0][2])
        q.remove(h[0][2], h[1])
    assert got == ["b", "a", "c"]
    assert q.size == 0 and q.groups == {}


def test_parking_sets_the_whole_group_aside() -> None:
    q = ClusterQueueQueue()
    q.push(order("a1", created=1), shape=1)
    q.push(order("a2", created=2), shape=1)
    q.push(order("b1", created=3), shape=2)
    epoch, todo = q.park(1, NO, NEEDS)
    assert todo == NEEDS
    assert head_key(q) == "b1"
    joined = q.push(order("a0", created=0), shape=1)
    assert joined.parked and head_key(q) == "b1"  # a new member of a parked group waits too
    assert q.wake(1, epoch, ("f", "cpu"))
    assert head_key(q) == "a0"
    assert not q.wake(1, epoch, ("f", "cpu"))  # already awake


def test_reparking_with_the_same_needs_keeps_other_registrations() -> None:
    q = ClusterQueueQueue()
    q.push(order("a"), shape=1)
    needs = ((("f", "cpu"), 1), (("g", "cpu"), 1))
    epoch, todo = q.park(1, NO, needs)
    assert todo == needs
    assert q.wake(1, epoch, ("f", "cpu"))  # the f entry was consumed
    again, todo = q.park(1, NO, needs)
    assert (again, todo) == (epoch, ((("f", "cpu"), 1),))  # only f is registered again
    assert q.is_registered(1, epoch, ("g", "cpu"))
    newer, todo = q.park(1, NO, ((("f", "cpu"), 5),))  # different needs: a new epoch
    assert newer != epoch and not q.is_registered(1, epoch, ("g", "cpu"))


def test_wake_all_makes_every_registration_stale() -> None:
    q = ClusterQueueQueue()
    q.push(order("a"), shape=1)
    epoch, _ = q.park(1, NO, NEEDS)
    q.wake_all()
    assert head_key(q) == "a"
    assert q.recheck("a", 1) is None  # tried afresh, not re-checked
    assert not q.wake(1, epoch, ("f", "cpu"))


def test_strict_fifo_blocks_at_the_head() -> None:
    q = ClusterQueueQueue(strategy="StrictFIFO")
    q.push(order("a", created=1), shape=1)
    q.push(order("b", created=2), shape=2)
    epoch = q.block("a", NO, NEEDS)
    assert q.head() is None
    assert q.recheck("a", 1) == (NO, NEEDS)
    q.push(order("urgent", priority=9), shape=3)
    assert head_key(q) == "urgent"  # a new head is tried
    q.remove("urgent", 3)
    assert q.head() is None
    assert q.wake(BLOCKED_HEAD, epoch, ("f", "cpu"))
    assert head_key(q) == "a"


def test_removing_the_blocked_head_unblocks() -> None:
    q = ClusterQueueQueue(strategy="StrictFIFO")
    q.push(order("a", created=1), shape=1)
    q.push(order("b", created=2), shape=1)
    q.block("a", NO, NEEDS)
    q.remove("a", 1)
    assert head_key(q) == "b"


def test_stale_heap_entries_are_compacted() -> None:
    q = ClusterQueueQueue()
    for i in range(200):
        q.push(order(f"w{i:03}", created=i), shape=i % 3)
    for _ in range(199):
        h = q.head()
        assert h is not None
        q.remove(h[0][2], h[1])
    assert head_key(q) == "w199"
    assert len(q.heap) <= 2 * len(q.groups) + 32
    assert q.queued_keys() == ["w199"]
