"""``kuota events tail``: the one-line rendering of a decision and the filters."""

from __future__ import annotations

from kuota.audit.render import decision_text, when
from kuota.cli.events import matches
from kuota.events.schema import Decision


def test_decision_one_liners() -> None:
    d = Decision(
        id="x",
        cause="c",
        cause_offset=12,
        at=1_767_225_605.25,
        type="Preempted",
        workload="team-a/low",
        cluster_queue="cq",
        reason="InClusterQueue",
        message="preempted to admit team-a/high",
        preemptor="team-a/high",
        policy="LowerPriority",
    )
    line = decision_text(d).plain
    assert line.startswith("2026-01-01T00:00:05.250Z  Preempted")
    assert "team-a/low  cq=cq" in line and "by team-a/high, policy LowerPriority" in line
    assert "InClusterQueue: preempted to admit team-a/high" in line and line.endswith("@12")
    assert when(90.0) == "t=90s", "scenario time"
    assert matches(d, workload="team-a/high", cluster_queue=None), "the preemptor's view"
    assert matches(d, workload="team-a/low", cluster_queue="cq")
    assert not matches(d, workload=None, cluster_queue="other")
    assert not matches(d, workload="team-a/x", cluster_queue=None)
