#!/usr/bin/env python3
"""One tenant churns ResourceClaimTemplates; another's admission latency (#23 item 6).

Through the fold (``kuota.core.fold.fold.Fold``, no services), on bench_core's
cluster (100 tenants, each with a ClusterQueue, a LocalQueue and two templates;
100 8-GPU H100 nodes by default). Every tenant has ``--pending`` Jobs of distinct
shapes that never fit (so the fold holds that many pending charge groups per
tenant). Then, over ``--seconds`` of event time:

- the victim (``team-001``) submits a one-GPU Job every ``--every`` seconds,
  each finished ``--run-for`` seconds later (4 at a time by default, within its
  quota of 8: the latency is the fold's, never a wait for quota);
- in the churn run, the churner (``team-000``) creates and deletes ``--templates``
  templates (each with its own CEL selector) at an even rate, and keeps ten
  pending Jobs naming ten of them.

The events are folded one by one in time order; each ``apply`` is timed
(``perf_counter``), and the fold is modelled as one server: an event waits
until the fold is done with the ones before it. A victim Job's admission
latency is from its arrival to the end of the ``apply`` that admitted it. The
script prints the victim's p50 / p99 / max latency, quiet and under churn, and
the ratios (the goal: within 2x of quiet), and the fold time per template change.
``--before`` runs the churn the way the fold did before #23 item 6 (every
template change cleared the device-match caches and charged every tenant's
pending groups again), for comparison. Figures vary with the machine's load:
it prints the median of ``--repeat`` runs of each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench_core import DRA, _core_kind, _job_spec, cluster

import kuota.core.fold.fold as fold_module
from kuota.core.fold.fold import Fold
from kuota.events.schema import JournalEvent, ObjectDeleted, ObjectUpserted, WorkloadFinished

CHURNER, VICTIM = "team-000", "team-001"
Event = tuple[float, int, str, dict[str, Any]]  # (at, tie-break, kind, payload)


def _job(name: str, ns: str, template: str, parallelism: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"{ns}-{name}",
            "labels": {"kueue.x-k8s.io/queue-name": "queue"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": _job_spec(template, parallelism, 1),
    }


def _template(name: str, i: int) -> dict[str, Any]:
    selector = f"device.attributes['gpu.nvidia.com'].index == {i % 8} || {i} < 0"
    exactly = {
        "deviceClassName": "gpu.nvidia.com",
        "count": 1,
        "selectors": [{"cel": {"expression": selector}}],
    }
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": CHURNER},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def setup(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The cluster and every tenant's pending Jobs (never fit: more than the quota
    plus what it may borrow)."""
    objs = cluster(queues=args.queues, cohorts=10, nodes=args.nodes, gpu_quota=8, mig_quota_gi=40)
    for q in range(args.queues):
        ns = f"team-{q:03d}"
        for k in range(args.pending):
            template = "single-gpu" if k % 2 == 0 else "gpu-partition"
            objs.append(_job(f"pending-{k}", ns, template, 13 + k))
    for k in range(10):
        objs.append(_template(f"churn-{k}", k))
        objs.append(_job(f"churn-job-{k}", CHURNER, f"churn-{k}", 13 + k))
    return objs


def timeline(args: argparse.Namespace, churn: bool) -> list[Event]:
    events: list[Event] = []
    n = 0
    t = 1.0
    while t < 1.0 + args.seconds:
        name = f"victim-{n:05d}"
        events.append((t, 0, "job", _job(name, VICTIM, "single-gpu", 1)))
        events.append((t + args.run_for, 1, "finish", {"name": name}))
        n += 1
        t += args.every
    if churn:
        step = args.seconds / args.templates
        for i in range(args.templates):
            at = 1.0 + i * step + step / 3
            events.append((at, 2, "template", _template(f"churn-{i}", i)))
            events.append((at + step / 3, 3, "delete", {"name": f"churn-{i}"}))
    events.sort(key=lambda e: (e[0], e[1]))
    return events


def _event(i: int, at: float, kind: str, payload: dict[str, Any]) -> JournalEvent:
    eid = f"b{i}"
    if kind in ("job", "template", "obj"):
        return ObjectUpserted(id=eid, at=at, object=payload)
    if kind == "delete":
        return ObjectDeleted(
            id=eid, at=at, kind="ResourceClaimTemplate", name=payload["name"], namespace=CHURNER
        )
    return WorkloadFinished(id=eid, at=at, namespace=VICTIM, name=payload["name"], succeeded=True)


def run(args: argparse.Namespace, *, churn: bool) -> dict[str, float]:
    fold = Fold()
    i = 0
    for obj in setup(args):
        fold.apply(_event(i, 0.0, "obj", obj), offset=i)
        i += 1
    free_at = 0.0  # event time (s) at which the modelled fold is free again
    arrived: dict[str, float] = {}
    latencies: list[float] = []
    churn_s: list[float] = []
    for at, _, kind, payload in timeline(args, churn):
        event = _event(i, at, kind, payload)
        start = time.perf_counter()
        out = fold.apply(event, offset=i)
        took = time.perf_counter() - start
        i += 1
        free_at = max(free_at, at) + took
        if kind == "job":
            arrived[f"{VICTIM}/{payload['metadata']['name']}"] = at
        elif kind in ("template", "delete"):
            churn_s.append(took)
        for d in out:
            if d.type == "Admitted" and d.workload in arrived:
                latencies.append(free_at - arrived.pop(d.workload))
    if arrived:
        raise SystemExit(f"{len(arrived)} victim Jobs never admitted: the bench is mis-set")
    latencies.sort()
    return {
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "max_ms": 1000 * latencies[-1],
        "jobs": len(latencies),
        "change_ms": 1000 * statistics.fmean(churn_s) if churn_s else 0.0,
    }


BEFORE_CALLS: list[None] = []


def _before() -> Callable[[], None]:
    """Make the fold handle a template change as before #23 item 6; returns the undo."""
    original = fold_module.dra_changed

    def every_group(fold: Any) -> None:
        BEFORE_CALLS.append(None)
        inv = fold._inventory
        inv._matches.clear()
        inv._usage.clear()
        inv._extended.clear()
        fold._recharge()

    fold_module.dra_changed = every_group

    def undo() -> None:
        fold_module.dra_changed = original

    return undo


def median_of(args: argparse.Namespace, *, churn: bool) -> dict[str, float]:
    runs = [run(args, churn=churn) for _ in range(args.repeat)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=100, help="tenants")
    parser.add_argument("--nodes", type=int, default=100, help="8-GPU H100 nodes")
    parser.add_argument("--pending", type=int, default=10, help="pending Jobs per tenant")
    parser.add_argument("--templates", type=int, default=1000, help="churned templates")
    parser.add_argument("--seconds", type=float, default=20.0, help="event time of the churn")
    parser.add_argument("--every", type=float, default=0.02, help="victim Job interval (s)")
    parser.add_argument(
        "--run-for", type=float, default=None, help="victim Job run time (s; 4 x --every)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", action="store_true", help="also run the pre-#23 path")
    args = parser.parse_args(argv)
    if args.run_for is None:
        args.run_for = 4 * args.every  # 4 one-GPU Jobs at a time: always within the quota
    print(f"core: {_core_kind()}", file=sys.stderr)
    print(
        f"tenants={args.queues} nodes={args.nodes} pending_groups={args.queues * args.pending} "
        f"templates={args.templates} (create+delete) over {args.seconds:g}s, "
        f"victim Job every {args.every:g}s"
    )
    quiet = median_of(args, churn=False)
    modes = [("after", None)]
    if args.before:
        modes.append(("before", _before))
    for label, patch in modes:
        undo = patch() if patch is not None else None
        try:
            churned = median_of(args, churn=True)
        finally:
            if undo is not None:
                undo()
        if label == "before" and not BEFORE_CALLS:
            print("before: not measured (a compiled fold.py ignores the patch: KUOTA_NATIVE=0)")
            continue
        print(
            f"{label}: quiet p50={quiet['p50_ms']:.3f}ms p99={quiet['p99_ms']:.3f}ms "
            f"max={quiet['max_ms']:.3f}ms | churn p50={churned['p50_ms']:.3f}ms "
            f"p99={churned['p99_ms']:.3f}ms max={churned['max_ms']:.3f}ms | "
            f"template_change={churned['change_ms']:.3f}ms jobs={int(churned['jobs'])}"
        )
        print(
            f"{label}: ratio_p50={churned['p50_ms'] / quiet['p50_ms']:.2f} "
            f"ratio_p99={churned['p99_ms'] / quiet['p99_ms']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
