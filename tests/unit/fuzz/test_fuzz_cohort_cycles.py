"""Property: whatever Cohort parents arrive, the quota structure stays a forest,
exactly the ClusterQueues under a declared cycle are stopped, and they all run
again once the cycle is broken (docs/design/bad-input.md)."""

from __future__ import annotations

from typing import Any

from bad_input_builders import FLAVOR, NS, job, journal
from builders.manifests import cluster_queue, cohort, flavor, local_queue
from fuzz_support import FUZZ
from hypothesis import given
from hypothesis import strategies as st

NAMES = ["a", "b", "c"]  # few names: cycles form and break often


def _declared_cycle_members(declared: dict[str, str | None]) -> set[str]:
    """Cohorts on a cycle of the parents as last declared (the oracle)."""
    members: set[str] = set()
    for start in declared:
        path: list[str] = []
        current: str | None = start
        while current is not None and current not in path:
            path.append(current)
            current = declared.get(current)
        if current is not None:
            members.update(path[path.index(current) :])
    return members


def _reaches(start: str, members: set[str], parent_of: Any) -> bool:
    current: str | None = start
    seen: set[str] = set()
    while current is not None and current not in seen:
        if current in members:
            return True
        seen.add(current)
        current = parent_of(current)
    return False


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from([*NAMES, None])), max_size=15))
def test_cohort_parents_in_any_order(updates: list[tuple[str, str | None]]) -> None:
    j = journal()
    j.apply(flavor(FLAVOR, spec={}))
    for n in NAMES:  # one ClusterQueue (and LocalQueue) per cohort
        j.apply(
            cluster_queue(f"q-{n}", quotas={"cpu": 100}, flavor=FLAVOR, cohort=n),
            local_queue(f"lq-{n}", namespace=NS, cluster_queue=f"q-{n}"),
        )
    fold = j.fold
    declared: dict[str, str | None] = {}
    for name, parent in updates:
        out = j.apply(cohort(name, parent=parent))
        declared[name] = parent
        members = _declared_cycle_members(declared)
        # A cycle's closing update is Rejected naming a cycle; others are not.
        rejected = [d for d in out if d.type == "Rejected"]
        if rejected:
            assert rejected[0].reason == "CohortCycle" and " -> " in (rejected[0].message or "")
        # The structure in force is a forest.
        for n in NAMES:
            assert not _reaches(fold._tree.cohort_parent(n) or "", {n}, fold._tree.cohort_parent)
        # Exactly the queues under a declared cycle are stopped.
        for n in NAMES:
            stopped = getattr(fold._inactive.get(f"q-{n}"), "reason", None) == "CohortCycle"
            assert stopped == _reaches(n, members, fold._tree.cohort_parent), (n, declared)
    # Breaking every cycle frees every queue: each admits a Job.
    for n in NAMES:
        j.apply(cohort(n))
    assert not fold._cohort_pending and not fold._inactive
    for n in NAMES:
        out = j.apply(job(f"j-{n}", queue=f"lq-{n}", requests={"cpu": "1"}))
        assert [d.type for d in out] == ["Admitted"], out
