"""The fold's layers, and the hooks an upper layer overrides.

Theory of operation: a Fold is ten layers of one object, each a module with
one idea, plus components it holds:

- ``state.FoldState``: what it knows (and the ``timers.Timers`` component:
  WaitForPodsReady state and the timer heap);
- ``placement.Placement``: where a pending workload waits;
- ``fairadmission.FairAdmission``: admission fair sharing (LocalQueue lanes,
  samples, settlements) and the history of history-aware fair sharing;
- ``holds.DeviceHolds``: the node placement of a head whose quota fits, and
  the devices an admitted workload holds until its claims stand for them;
- ``direct_claims.DirectClaims``: the charge of a ResourceClaim that pods
  name directly, carried per ClusterQueue from its first admitted user to its
  last;
- ``cycle.Cycles``: scheduling cycles (in ``ordering.cycle_order``), admission,
  release, evictions and what a release wakes;
- ``draining.Draining``: a stopped workload's quota, kept until its pods are
  gone;
- ``node_victims.NodeVictims``: what a preemption's victims free on the
  nodes (their held devices, the claims that can only be theirs), the room a
  preemptor needs on a node, and the devices reserved for it meanwhile;
- ``preempting.Preempting``: preemption, inline or through plans; it fires
  the timers;
- ``cohorts.Cohorts``: the quota tree's objects (ClusterQueues, Cohorts,
  ResourceFlavors, cycles of cohorts) and whether each ClusterQueue can admit;
- ``fold.Fold``: the public API, journal events and the other queue objects.

Decisions are built by ``decisions``. A layer calls a hook it defines, which
an upper layer overrides (calling ``super()``); :class:`FoldHooks` lists them
all, and mypy checks that ``Cycles`` and ``Preempting`` implement it.
"""

from __future__ import annotations

from typing import Protocol

from kuota.core.assign.flavors import Assignment
from kuota.core.dra.placement import GangPod
from kuota.core.queueing.queues import Needs
from kuota.core.queueing.verdict import Verdict
from kuota.core.queueing.workload import Admission, Fit, WorkloadRecord
from kuota.core.quota.tree import FlavorResource


class FoldHooks(Protocol):
    """The methods one layer defines and an upper layer overrides."""

    def _try_preempt(
        self, rec: WorkloadRecord, cq_name: str, assignment: Assignment, at: float
    ) -> bool:
        """Make room for a Preempt head and admit it. Defined (no preemption) and
        called by ``cycle.Cycles._schedule``; implemented by
        ``preempting.Preempting`` (an inline search, or awaiting a plan)."""
        ...

    def _not_admitted(self, rec: WorkloadRecord, cq_name: str, assignment: Assignment) -> None:
        """Set aside a head that was not admitted. Defined and called by
        ``cycle.Cycles``; extended by ``preempting.Preempting`` (a head awaiting a
        plan gets WaitingForPreemptionPlan)."""
        ...

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
        """Park a head that was not admitted and register what wakes it (``unplaced``:
        the pods no node could take, ``whole`` when they are its whole gang). Defined
        (unimplemented) and called by ``holds.DeviceHolds._placeable`` (no node
        can take it); implemented by ``cycle.Cycles``."""
        ...

    def _give_back(self, cq_name: str, usage: tuple[tuple[FlavorResource, int], ...]) -> None:
        """Take usage off a ClusterQueue's quota and wake who waited for it. Defined
        (unimplemented) and called by ``direct_claims.DirectClaims`` (the last user
        of a claim stopped); implemented by ``cycle.Cycles``."""
        ...

    def _admit(
        self,
        rec: WorkloadRecord,
        cq_name: str,
        fit: Fit,
        at: float,
        victims: list[str] | None = None,
    ) -> None:
        """Admit with a fitting assignment. Defined by ``cycle.Cycles`` (quota,
        Admitted, PodsReady timer); extended by ``preempting.Preempting``
        (admission number, end of a plan wait)."""
        ...

    def _release(self, rec: WorkloadRecord, *, drain: bool = True) -> None:
        """End an admitted workload's admission. Defined by ``cycle.Cycles``
        (quota, wake-ups, PodsReady timer); extended by ``preempting.Preempting``
        (admission number, victim-search cache)."""
        ...

    def _keep_charge(self, rec: WorkloadRecord, adm: Admission) -> bool:
        """Keep a stopped workload's quota until its pods are gone. Defined (no)
        and called by ``cycle.Cycles._release``; implemented by
        ``draining.Draining`` (a drain, until WorkloadStopped)."""
        ...
