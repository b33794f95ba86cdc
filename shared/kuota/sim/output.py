"""Stable JSON lines for decisions (``kuota simulate`` stdout).

Theory of operation: one compact JSON object per decision, keys in a fixed
order, fields that do not apply left out, nested maps sorted by key and
instants printed by ``json_seconds`` (ints as ints, otherwise at most three
decimals). The same decisions therefore always print the same bytes, which is
what makes ``kuota simulate`` output diffable and golden-testable. Ids and
causes are left out on purpose: they are journal plumbing, not outcomes. A
workload of a kind other than a Job (its key ``ns/<kind>/name``) also prints
its ``kind`` after ``workload`` (docs/design/workload-identity.md).

With ``--preemption plans`` a decision caused by a preemption plan (the
victims' ``Preempted`` and ``Requeued``, the preemptor's ``Admitted``, or the
quota reason after an empty plan) ends with ``"plannedBy"``: "the preemption
service" and the plan's id, so the output says which preemptions came through
a plan.
"""

from __future__ import annotations

import json
from typing import Any

from kuota.events.schema import Decision
from kuota.sim.duration import json_seconds

#: ``plannedBy`` of a decision caused by a preemption plan (followed by the plan's id).
PLANNED_BY_SERVICE = "the preemption service"

#: (JSON key, Decision attribute), in print order.
FIELDS: tuple[tuple[str, str], ...] = (
    ("type", "type"),
    ("workload", "workload"),
    ("object", "object"),
    ("clusterQueue", "cluster_queue"),
    ("flavors", "flavors"),
    ("usage", "usage"),
    ("nodes", "nodes"),
    ("reason", "reason"),
    ("message", "message"),
    ("preemptor", "preemptor"),
    ("policy", "policy"),
    ("victims", "victims"),
    ("requeueAt", "requeue_at"),
    ("cohort", "cohort"),
    ("quota", "quota"),
    ("consumedResources", "consumed"),
    ("weightedUsage", "weighted_usage"),
)


def decision_record(decision: Decision, *, plan: str | None = None) -> dict[str, Any]:
    """The decision as an ordered dict of the fields that apply; ``plan``: the id
    of the preemption plan that caused it, if one did."""
    record: dict[str, Any] = {"at": json_seconds(decision.at)}
    for key, attribute in FIELDS:
        if key == "object" and decision.workload is not None and decision.kind not in (None, "Job"):
            record["kind"] = decision.kind  # a Job's key says it is a Job: said for others only
        value = getattr(decision, attribute)
        if value is None or value == "" or value == {} or value == []:
            continue
        if key == "requeueAt":
            value = json_seconds(value)
        elif key == "weightedUsage":
            value = round(value, 6)
        elif isinstance(value, dict):
            value = _sorted(value)
        record[key] = value
    if plan is not None:
        record["plannedBy"] = f"{PLANNED_BY_SERVICE} ({plan})"
    return record


def decision_json(decision: Decision, *, plan: str | None = None) -> str:
    """One compact JSON line (no trailing newline)."""
    return json.dumps(
        decision_record(decision, plan=plan), separators=(",", ":"), ensure_ascii=False
    )


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    return value
