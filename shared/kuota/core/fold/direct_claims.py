"""Direct ResourceClaims: a claim shared by pods, podsets and workloads, charged once.

Theory of operation (issue #17; docs/design/dra-placement.md, "Direct
ResourceClaims"): a pod claim with ``resourceClaimName`` names a ResourceClaim
that every pod naming it shares, so it is charged as a whole, once, never per
pod (:func:`~kuota.core.dra.charging.charge_claim`: what it asks, or what it
holds once allocated). Within a workload it is charged in the first podset
naming it. Across workloads the charge is *carried* per ClusterQueue: the first
user admitted in a ClusterQueue pays it there (``ClaimCharge``, kept apart from
its own admission's usage), and it stays charged until the last admitted user
in that ClusterQueue stops (finishes, or its pods are gone after a stop); a
user admitted in that ClusterQueue meanwhile pays nothing for it. A user in
another ClusterQueue pays it again there: sharing a claim across queues never
makes it free in a queue that did not pay for it, so no queue can use devices
beyond its own quota. Pending users are charged for the carried set of their
queue at the time they are placed; they are placed again whenever that set
changes (the first user admitted, the last one gone), and a head charged
nothing for a claim whose charge went away meanwhile is placed again before it
can be admitted (:meth:`DirectClaims._claims_current`). A claim's own change
(created, its requests or allocation) charges again the pending workloads
naming it; an admitted user keeps its admission and a carried charge keeps
what it took. Preemption does not count a carried charge as freed by evicting
one user (others may still use the claim): conservative.
"""

from __future__ import annotations

from kuota.api.types import PodSet
from kuota.core.fold.holds import DeviceHolds
from kuota.core.fold.state import ClaimCharge
from kuota.core.queueing.workload import ADMITTED, Fit, WorkloadRecord
from kuota.core.quota.tree import FlavorResource, add_usage

ClaimKey = tuple[str, str, str]  # (ClusterQueue, namespace, claim)


def names_claim(podsets: tuple[PodSet, ...], name: str) -> bool:
    """Whether a pod claim of any podset names ResourceClaim ``name`` directly."""
    return any(c.resource_claim_name == name for ps in podsets for c in ps.claims)


class DirectClaims(DeviceHolds):
    """Carried charges of direct ResourceClaims (module docstring)."""

    def _give_back(self, cq_name: str, usage: tuple[tuple[FlavorResource, int], ...]) -> None:
        """Take ``usage`` off the ClusterQueue's quota. Defined by ``cycle.Cycles``."""
        raise NotImplementedError

    def _claims_admitted(
        self, rec: WorkloadRecord, cq_name: str, fit: Fit
    ) -> tuple[tuple[FlavorResource, int], ...]:
        """``rec`` is being admitted in ``cq_name`` with ``fit``: charge each claim
        it names that is not carried there yet (its part of the fit's usage moves
        to a new ``ClaimCharge``), and count it a user of each. Returns the usage
        left to its own admission."""
        usage = dict(fit.assignment.usage)
        flavors = dict(fit.flavors)
        parts: dict[str, tuple[tuple[FlavorResource, int], ...]] = {}
        for ps in rec.requests:
            of = dict(flavors.get(ps.name, ()))
            for name, part in ps.claims:
                if part:
                    parts[name] = tuple(((of.get(res, ""), res), qty) for res, qty in part)
                else:
                    parts.setdefault(name, ())
        namespace = rec.spec.namespace
        node = self._tree.queues[cq_name]
        keys: list[ClaimKey] = []
        moved: list[ClaimKey] = []
        for name, used in sorted(parts.items()):
            key = (cq_name, namespace, name)
            keys.append(key)
            for fr, qty in used:  # paid by the claim (below), or by its carrier already
                left = usage.get(fr, 0) - qty
                if left > 0:
                    usage[fr] = left
                else:
                    usage.pop(fr, None)
            carried = self._claim_charges.get(key)
            if carried is None:
                for fr, qty in used:
                    add_usage(node, fr, qty)
                carried = self._claim_charges[key] = ClaimCharge(used, {})
                moved.append(key)
            carried.users[rec.key] = None
        self._claim_users[rec.key] = tuple(keys)
        for key in moved:
            self._replace_claim_users(key)  # they pay nothing for it now
        return tuple((fr, usage[fr]) for fr, _ in fit.assignment.usage if fr in usage)

    def _claims_released(self, key: str) -> None:
        """Workload ``key`` no longer uses its claims (it finished, or its pods are
        gone after a stop): a claim whose last user it was gives its charge back,
        and its pending users there are charged for it again."""
        for ck in self._claim_users.pop(key, ()):
            carried = self._claim_charges.get(ck)
            if carried is None:
                continue
            carried.users.pop(key, None)
            if not carried.users:
                del self._claim_charges[ck]
                self._give_back(ck[0], carried.usage)
                self._replace_claim_users(ck)
                claim = ck[1:]
                if claim in self._claim_holds and not any(
                    k[1:] == claim for k in self._claim_charges
                ):
                    self._release_claim_hold(*claim)  # its last user anywhere

    def _claims_current(self, rec: WorkloadRecord, cq_name: str) -> bool:
        """Whether ``rec`` (a head about to be admitted in ``cq_name``) was charged
        for what is carried now: a claim it was charged nothing for must still be
        carried there. If not (its last user stopped since), it is placed again,
        with the claim charged, and False."""
        unpaid = [n for ps in rec.requests for n, part in ps.claims if not part]
        if not unpaid:
            return True  # the common case: no direct claim, or each paid here
        namespace = rec.spec.namespace
        charges = self._claim_charges
        paid = {n for ps in rec.requests for n, part in ps.claims if part}
        for name in unpaid:
            if name not in paid and (cq_name, namespace, name) not in charges:
                self._reevaluate([rec.key])
                return False
        return True

    def _replace_claim_users(self, key: ClaimKey) -> None:
        """What is carried of claim ``key`` in its ClusterQueue changed: place again
        its pending users in that ClusterQueue, so they are charged for it anew."""
        cq_name, namespace, name = key
        users: dict[str, None] = {}
        for group in self._charge_groups.values():
            if group.members and group.key[0] == namespace and names_claim(group.key[1], name):
                for member in group.members:
                    rec = self._workloads.get(member)
                    if rec is not None and rec.cluster_queue == cq_name:
                        users[member] = None
        if users:
            self._reevaluate(users)

    def _claim_changed(self, namespace: str, name: str) -> None:
        """ResourceClaim ``namespace/name`` was created, changed what it asks or
        holds, or was deleted: charge again the pending workloads naming it (an
        unknown claim's users wait ``UnknownResourceClaim`` until it comes)."""
        groups = self._charge_groups
        changed: dict[str, None] = {}
        named = False
        for cid, group in list(groups.items()):
            if group.key[0] != namespace or not names_claim(group.key[1], name):
                continue
            if not group.members:
                del self._charge_ids[group.key]
                del groups[cid]
                continue
            named = True
            result = self._charge(group.key)
            if result != group.result:
                group.result = result
                group.shapes.clear()
                changed.update(group.members)
        if not named and not any(
            rec.state == ADMITTED
            and rec.spec.namespace == namespace
            and names_claim(rec.spec.podsets, name)
            for rec in self._workloads.values()
        ):
            self._inventory.forget_claim_read(namespace, name)  # the next change is free
        self._reevaluate(changed)
