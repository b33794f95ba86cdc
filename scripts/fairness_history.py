#!/usr/bin/env python3
"""History-aware fair sharing, shown by the simulator (docs/design/fair-sharing-history.md).

Two teams with equal weights share one cohort of ``2 * --nominal`` GPUs
(``--nominal`` each), with ``Configuration.fairSharing`` on and
``reclaimWithinCohort: Any``. Team A bursts alone for ``--burst`` (it borrows
all of team B's idle quota); then both keep a backlog deeper than the cohort
for ``--saturate``. Every Job takes one GPU for ``--run-for``, so quota turns
over and every freed GPU is an admission choice.

The run is folded twice by the real fold (``kuota.sim.engine``), with the
root Cohort's history annotations and without them, and each team's share of
the GPU-seconds used over the whole run is printed. With plain DRS, team A
keeps its burst: both teams get their nominal quota once B arrives. With
history, team B's lower decayed usage wins the freed GPUs (and A cannot take
them back) until the histories even out, so the long-run shares approach the
weights. ``--write`` also saves the scenario (history on) as a file for
``kuota simulate``.

Last stdout lines::

    history=off team-a=<share> team-b=<share> off_by=<max |share - 0.5|>
    history=on  team-a=<share> team-b=<share> off_by=<...>
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from kuota.api.duration import duration_seconds
from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision
from kuota.sim.engine import simulate

GPU = "nvidia.com/gpu"
TEAMS = ("team-a", "team-b")


def scenario(
    *,
    nominal: int,
    burst: int,
    saturate: int,
    run_for: int,
    half_life: str,
    weight: str,
    history: bool,
) -> list[dict[str, Any]]:
    cohort: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "pool"},
        "spec": {},
    }
    if history:
        cohort["metadata"]["annotations"] = {
            "kuota.dev/fair-sharing-history-half-life": half_life,
            "kuota.dev/fair-sharing-history-weight": weight,
        }
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "fairSharing": {
                "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {},
        },
        cohort,
    ]
    for team in TEAMS:
        objs += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": team}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": team},
                "spec": {
                    "cohortName": "pool",
                    "namespaceSelector": {},
                    "preemption": {"reclaimWithinCohort": "Any"},
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [
                                {
                                    "name": "h100",
                                    "resources": [{"name": GPU, "nominalQuota": nominal}],
                                }
                            ],
                        }
                    ],
                },
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": team},
                "spec": {"clusterQueue": team},
            },
        ]
    total = 2 * nominal
    rounds = lambda seconds: -(-seconds // run_for)  # noqa: E731  (ceil)
    # Team A alone: enough for the whole cohort during the burst.
    jobs = [("team-a", 0, i) for i in range(total * rounds(burst))]
    # Then both: each alone could keep the whole cohort busy until the end.
    jobs += [(team, burst, i) for team in TEAMS for i in range(total * rounds(saturate))]
    for team, at, i in jobs:
        objs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"{'burst' if at == 0 else 'work'}-{i:05d}",
                    "namespace": team,
                    "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                    "annotations": {
                        "kuota.dev/submit-at": f"{at}s",
                        "kuota.dev/run-for": f"{run_for}s",
                    },
                },
                "spec": {
                    "suspend": True,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
                                }
                            ],
                        }
                    },
                },
            }
        )
    return objs


def shares(decisions: list[Decision], end: float) -> dict[str, float]:
    """Each team's share of the GPU-seconds used over [0, end]."""
    started: dict[str, float] = {}
    used = dict.fromkeys(TEAMS, 0.0)

    def stop(key: str, at: float) -> None:
        begin = started.pop(key, None)
        if begin is not None:
            used[key.partition("/")[0]] += min(at, end) - begin

    for d in decisions:
        if d.workload is None:
            continue
        if d.type == "Admitted":
            started[d.workload] = d.at
        elif d.type in ("Finished", "Preempted", "Evicted"):
            stop(d.workload, d.at)
    for key in list(started):
        stop(key, end)
    total = sum(used.values()) or 1.0
    return {team: used[team] / total for team in TEAMS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nominal", type=int, default=10, help="GPUs per team (default 10)")
    p.add_argument("--burst", default="1h", help="team A alone (default 1h)")
    p.add_argument("--saturate", default="8h", help="then both (default 8h)")
    p.add_argument("--run-for", default="10m", help="each Job's run time (default 10m)")
    p.add_argument("--half-life", default="4h", help="history half-life (default 4h)")
    p.add_argument("--weight", default="8", help="history weight 0..100 (default 8)")
    p.add_argument("--write", type=Path, help="also save the scenario (history on) here")
    args = p.parse_args(argv)
    burst = duration_seconds(args.burst)
    saturate = duration_seconds(args.saturate)
    end = float(burst + saturate)
    common = dict(
        nominal=args.nominal,
        burst=burst,
        saturate=saturate,
        run_for=duration_seconds(args.run_for),
        half_life=args.half_life,
        weight=args.weight,
    )
    if args.write is not None:
        docs = scenario(**common, history=True)  # type: ignore[arg-type]
        args.write.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        print(f"wrote {args.write} ({len(docs)} objects)", file=sys.stderr)
    lines = []
    for history in (False, True):
        objs = scenario(**common, history=history)  # type: ignore[arg-type]
        decisions = simulate(objs, fold=Fold(), until=end)
        s = shares(decisions, end)
        off = max(abs(v - 0.5) for v in s.values())
        label = "on " if history else "off"
        lines.append(
            f"history={label} team-a={s['team-a']:.3f} team-b={s['team-b']:.3f} off_by={off:.3f}"
        )
    print(
        f"# {args.nominal}+{args.nominal} GPUs, team-a alone {args.burst}, both {args.saturate}, "
        f"jobs {args.run_for}; history half-life {args.half_life}, weight {args.weight}"
    )
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
