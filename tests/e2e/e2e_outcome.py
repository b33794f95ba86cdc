"""What a scenario showed: the quota model, the Jobs it played and its ``Outcome``.

``QuotaModel`` reads the scenario's ClusterQueues and LocalQueues and says what
usage would be over quota (nominal, borrowing limit, cohort total); ``Outcome``
holds what the cluster, the decision topic and the simulator showed for one
scenario. Part of ``e2e_harness.py`` (which re-exports every name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from e2e_pipeline import Run

from kuota.events.schema import Decision
from kuota.quantity import parse_quantity

# (ClusterQueue, resource) -> milli-units
Usage = dict[tuple[str, str], int]


@dataclass
class QuotaModel:
    """The scenario's ClusterQueues: who may use how much."""

    # cq -> resource -> (nominal, borrowing limit or None)
    limits: dict[str, dict[str, tuple[int, int | None]]]
    cohort_of: dict[str, str | None]
    queue_of: dict[tuple[str, str], str]  # (namespace, LocalQueue) -> ClusterQueue

    @classmethod
    def of(cls, docs: list[dict[str, Any]]) -> QuotaModel:
        limits: dict[str, dict[str, tuple[int, int | None]]] = {}
        cohort_of: dict[str, str | None] = {}
        queue_of: dict[tuple[str, str], str] = {}
        for d in docs:
            if d["kind"] == "ClusterQueue":
                name = d["metadata"]["name"]
                spec = d.get("spec") or {}
                cohort_of[name] = spec.get("cohortName") or spec.get("cohort")
                res: dict[str, tuple[int, int | None]] = {}
                for g in spec.get("resourceGroups") or []:
                    for f in g.get("flavors") or []:
                        for r in f.get("resources") or []:
                            limit = r.get("borrowingLimit")
                            res[r["name"]] = (
                                parse_quantity(str(r["nominalQuota"])),
                                None if limit is None else parse_quantity(str(limit)),
                            )
                limits[name] = res
            elif d["kind"] == "LocalQueue":
                md = d["metadata"]
                queue_of[(md["namespace"], md["name"])] = d["spec"]["clusterQueue"]
        return cls(limits, cohort_of, queue_of)

    def violations(self, usage: Usage) -> list[str]:
        """What in this usage is over quota (empty: nothing)."""
        out = []
        cohort_use: dict[tuple[str, str], int] = {}
        cohort_cap: dict[tuple[str, str], int] = {}
        for cq, res in self.limits.items():
            cohort = self.cohort_of.get(cq)
            for r, (nominal, limit) in res.items():
                used = usage.get((cq, r), 0)
                if cohort is None:
                    cap: int | None = nominal
                else:
                    cap = None if limit is None else nominal + limit
                    cohort_use[(cohort, r)] = cohort_use.get((cohort, r), 0) + used
                    cohort_cap[(cohort, r)] = cohort_cap.get((cohort, r), 0) + nominal
                if cap is not None and used > cap:
                    out.append(f"{cq} uses {used / 1000:g} {r} > {cap / 1000:g}")
        for (cohort, r), used in cohort_use.items():
            if used > cohort_cap[(cohort, r)]:
                out.append(
                    f"cohort {cohort} uses {used / 1000:g} {r} > {cohort_cap[(cohort, r)] / 1000:g}"
                )
        return out


def parse_charge(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, qty = part.partition("=")
        out[name.strip()] = parse_quantity(qty.strip())
    return out


def job_done(obj: Mapping[str, Any]) -> bool:
    """The Job has finished: a Complete or Failed condition is True."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def job_running(obj: Mapping[str, Any]) -> bool:
    """Admitted and holding quota: unsuspended and not finished."""
    return not (obj.get("spec") or {}).get("suspend", False) and not job_done(obj)


def job_key(obj: Mapping[str, Any]) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace')}/{md.get('name')}"


@dataclass
class ScenarioJob:
    key: str
    manifest: dict[str, Any]
    submit_at: float
    run_for: float
    charge: dict[str, int]  # resource -> milli
    device: str | None
    expect: str  # "Finished" or "Inadmissible/<Reason>"
    cluster_queue: str
    admissions: int = 1  # how often it is admitted (more than once: it was preempted)
    created: dict[str, Any] | None = None  # the create call's answer
    created_at: float = 0.0  # wall clock


@dataclass
class Outcome:
    name: str
    run: Run
    jobs: dict[str, ScenarioJob]
    quota: QuotaModel
    flavors: dict[str, dict[str, str]]  # ResourceFlavor -> nodeLabels
    decisions: list[Decision]  # this scenario's, in topic order
    sim_decisions: list[Decision]
    final_jobs: dict[str, dict[str, Any]]
    pods: dict[str, list[dict[str, Any]]]  # job key -> pods
    claims: dict[str, list[dict[str, Any]]]  # pod "ns/name" -> allocated claims
    events: dict[str, list[dict[str, Any]]]  # job key -> Events
    samples: list[tuple[float, Usage]]
    sample_violations: list[str]
    change_violations: list[str]
    peak: Usage
    unsuspended_at: dict[str, float]  # first time seen unsuspended
    stopped_at: dict[str, list[float]]  # seen suspended again after running (preempted)
    finished_at: dict[str, float]  # first time seen Complete or Failed
    duration: float

    def admitted_order(self, decisions: list[Decision] | None = None) -> list[str]:
        return [
            d.workload or ""
            for d in (self.decisions if decisions is None else decisions)
            if d.type == "Admitted"
        ]

    def admissions(self, decisions: list[Decision] | None = None) -> list[tuple[str, list[str]]]:
        """(workload, victims) of every Admitted decision, in order."""
        return [
            (d.workload or "", list(d.victims or ()))
            for d in (self.decisions if decisions is None else decisions)
            if d.type == "Admitted"
        ]

    def preemptions(self, decisions: list[Decision] | None = None) -> list[tuple[str, str, str]]:
        """(victim, preemptor, reason) of every Preempted decision, in order."""
        return [
            (d.workload or "", d.preemptor or "", d.reason or "")
            for d in (self.decisions if decisions is None else decisions)
            if d.type == "Preempted"
        ]

    def of_type(self, kind: str, key: str) -> list[Decision]:
        return [d for d in self.decisions if d.type == kind and d.workload == key]


def usage_of(jobs: Mapping[str, ScenarioJob], objs: Mapping[str, Mapping[str, Any]]) -> Usage:
    usage: Usage = {}
    for key, obj in objs.items():
        job = jobs.get(key)
        if job is None or not job_running(obj):
            continue
        for r, amount in job.charge.items():
            usage[(job.cluster_queue, r)] = usage.get((job.cluster_queue, r), 0) + amount
    return usage


def unsuspended_after(o: Outcome, key: str, admitted: Decision) -> float | None:
    """When the Job was first seen unsuspended after this admission was decided."""
    times = [
        ch.at
        for ch in o.run.job_changes
        if job_key(ch.obj) == key
        and not (ch.obj.get("spec") or {}).get("suspend", False)
        and ch.at >= admitted.at
    ]
    return min(times) if times else None
