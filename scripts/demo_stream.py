"""What ``scripts/demo`` shows: the demo's Jobs, its console and the decision stream.

``read_jobs`` reads ``examples/demo/40-jobs.yaml`` (with kwok's pod timings);
``Stream.show`` turns each committed decision into one line of the live table
and keeps per-ClusterQueue bookkeeping (usage, peak, longest wait) for the
summary. No I/O but the console; the cluster and Kafka side is in
``demo_cluster.py``. kuota's own modules are imported where used, so the demo
starts (and says what is missing) before the venv is checked.
"""

from __future__ import annotations

import contextlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kuota.kinds import PRIORITY_CLASS_LABEL as PRIORITY_LABEL
from kuota.kinds import QUEUE_NAME_LABEL as QUEUE_LABEL

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "examples" / "demo"
SETUP_FILES = ("10-gpu-nodes.yaml", "20-device-classes-and-config.yaml", "30-teams.yaml")
JOBS_FILE = "40-jobs.yaml"
NAMESPACES = ("training", "inference")
GPU_MEMORY = "gpu-memory"
SHARE_MEMORY = "gpu-share-memory"  # the MPS H100's memory, charged per share
MEMORY_RESOURCES = (GPU_MEMORY, SHARE_MEMORY)
GPU_COUNT = "nvidia.com/gpu"  # the A100 node's GPUs, counted (device plugin)
QUOTA_RESOURCES = (*MEMORY_RESOURCES, GPU_COUNT)
PYTORCHJOB = ("kubeflow.org", "v1", "pytorchjobs")
KWOK_READY = "pod-ready.stage.kwok.x-k8s.io/delay"
KWOK_COMPLETE = "pod-complete.stage.kwok.x-k8s.io/delay"


class DemoError(Exception):
    """Something went wrong that the user can act on: one line, exit 1."""


# ------------------------------------------------------------------ the console

try:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
except ImportError:  # pragma: no cover - rich is a dependency of kuota
    print("demo: rich is missing; run `make venv`", file=sys.stderr)
    sys.exit(1)

console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)

STYLES = {
    "Submitted": "dim",
    "Admitted": "bold green",
    "Inadmissible": "yellow",
    "Finished": "cyan",
    "Preempted": "bold magenta",
    "Evicted": "magenta",
    "Requeued": "magenta",
    "Deactivated": "red",
    "Rejected": "bold red",
}
COLUMNS = (
    ("time", 8, "right"),
    ("workload", 30, "left"),
    ("decision", 12, "left"),
    ("ClusterQueue", 12, "left"),
    ("flavor", 6, "left"),
    ("GPU charge", 10, "right"),
    ("reason", None, "left"),
)


def stream_line(*cells: str, style: str = "") -> None:
    grid = Table.grid(padding=(0, 1), expand=True)
    for name, width, justify in COLUMNS:
        if width is None:
            grid.add_column(name, ratio=1, overflow="fold")
        else:
            grid.add_column(name, width=width, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    grid.add_row(*[Text(c, style=style) for c in cells])
    console.print(grid)


def step(n: int, total: int, what: str) -> None:
    console.print()
    console.rule(f"[bold]{n}/{total}  {what}", align="left")


def elapsed(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"+{int(seconds // 60)}:{seconds % 60:04.1f}"


def gib(milli: int) -> str:
    from kuota.quantity import format_quantity

    return format_quantity(milli)


# ------------------------------------------------------------------ the jobs


@dataclass
class DemoJob:
    manifest: dict[str, Any]
    submit_at: float  # seconds after the start of submissions
    run_for: float
    key: str
    pods: int
    priority: str | None
    kind: str = "Job"
    submitted: float | None = None  # wall clock
    admitted: float | None = None  # decision time
    finished: bool = False

    @property
    def queue(self) -> str:
        return str(self.manifest["metadata"]["labels"][QUEUE_LABEL])


def read_jobs(path: Path) -> list[DemoJob]:
    import yaml

    from kuota.sim.duration import micros_to_seconds, parse_duration

    jobs: list[DemoJob] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not isinstance(doc, dict) or doc.get("kind") not in ("Job", "PyTorchJob"):
            continue
        md = doc["metadata"]
        ann = md.get("annotations") or {}
        submit = micros_to_seconds(parse_duration(ann.get("kuota.dev/submit-at", "0s")))
        run = micros_to_seconds(parse_duration(ann.get("kuota.dev/run-for", "10s")))
        if doc["kind"] == "Job":
            templates = [doc["spec"]["template"]]
            pods = int(doc["spec"].get("parallelism") or 1)
            key = f"{md['namespace']}/{md['name']}"
        else:  # a PyTorchJob: one template per replica type, its key names the kind
            replicas = doc["spec"]["pytorchReplicaSpecs"].values()
            templates = [r["template"] for r in replicas]
            pods = sum(int(r.get("replicas", 1)) for r in replicas)
            key = f"{md['namespace']}/pytorchjob/{md['name']}"
        for template in templates:  # kwok runs each pod this long (scripts/kube/stages)
            pod_ann = template.setdefault("metadata", {}).setdefault("annotations", {})
            pod_ann.setdefault(KWOK_READY, "500ms")
            pod_ann.setdefault(KWOK_COMPLETE, f"{run:g}s")
        jobs.append(
            DemoJob(
                manifest=doc,
                submit_at=submit,
                run_for=run,
                key=key,
                pods=pods,
                priority=(md.get("labels") or {}).get(PRIORITY_LABEL),
                kind=doc["kind"],
            )
        )
    jobs.sort(key=lambda j: j.submit_at)
    return jobs


def describe(job: DemoJob) -> str:
    if job.kind == "PyTorchJob":
        specs = job.manifest["spec"]["pytorchReplicaSpecs"]
        roles = " + ".join(f"{int(r.get('replicas', 1))} {t.lower()}" for t, r in specs.items())
        limits = next(iter(specs.values()))["template"]["spec"]["containers"][0]["resources"]
        gpus = (limits.get("limits") or {}).get(GPU_COUNT, 0)
        return f"PyTorchJob gang of {job.pods} pods ({roles}) x {gpus} A100s, runs {job.run_for:g}s"
    if job.queue == "shared-gpu-queue":
        unit = "20Gi share of the MPS H100"
    elif job.key.startswith("training/"):
        unit = "whole H100"
    else:
        unit = "1g.10gb MIG slice"
    pods = f"{job.pods} pod{'s' if job.pods > 1 else ''} x {unit}"
    prio = f", priority {job.priority}" if job.priority else ""
    return f"{pods}, runs {job.run_for:g}s{prio}"


# ------------------------------------------------------------------ quota bookkeeping


@dataclass
class QueueQuota:
    name: str
    cohort: str | None
    nominal: int  # milli-units of gpu-memory (or of GPUs, for training-ddp)
    borrowing_limit: int | None
    what: str = "of GPU memory"  # what the quota counts, after the amount
    usage: int = 0
    peak: int = 0
    admitted: int = 0
    finished: int = 0
    longest_wait: float = 0.0


@dataclass
class Stream:
    """The decisions of this run, as they arrive, in words."""

    t0: float
    jobs: dict[str, DemoJob]
    quotas: dict[str, QueueQuota]
    held: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (cq, amount)
    flavors: dict[str, str] = field(default_factory=dict)  # key -> flavor while admitted
    counts: dict[str, int] = field(default_factory=dict)
    priorities: dict[str, int] = field(default_factory=dict)
    planned: list[str] = field(default_factory=list)  # "victim for preemptor", from plans

    def show(self, d: Any) -> None:
        from kuota.quantity import QuantityError, parse_quantity

        key = d.workload
        if key is not None and key.split("/", 1)[0] not in NAMESPACES:
            return  # another user's Job on the same stack
        if key is None and d.type != "Rejected":
            return
        self.counts[d.type] = self.counts.get(d.type, 0) + 1
        job = self.jobs.get(key) if key else None
        cq = d.cluster_queue or "-"
        flavor, memory, reason = "-", "", d.reason or ""
        quota = self.quotas.get(cq)
        if d.type == "Admitted":
            amount = 0
            for fl, resources in (d.usage or {}).items():
                flavor = fl
                for name in QUOTA_RESOURCES:
                    with contextlib.suppress(QuantityError):
                        amount += parse_quantity(resources.get(name, "0"))
            memory = gib(amount)
            parts = []
            if job is not None:
                job.admitted = d.at
                if job.submitted is not None and d.at - job.submitted > 1.5:
                    parts.append(f"waited {d.at - job.submitted:.0f}s")
            if job is not None and job.priority:
                value = self.priorities.get(job.priority)
                parts.append(f"priority {job.priority}" + (f" ({value})" if value else ""))
            if quota is not None:
                quota.usage += amount
                quota.peak = max(quota.peak, quota.usage)
                quota.admitted += 1
                if job is not None and job.submitted is not None:
                    quota.longest_wait = max(quota.longest_wait, d.at - job.submitted)
                self.held[key] = (cq, amount)
                self.flavors[key] = flavor
                over = quota.usage - quota.nominal
                if over > 0:
                    parts.append(
                        f"{cq} now uses {gib(quota.usage)}: its {gib(quota.nominal)} guaranteed"
                        f" + {gib(over)} borrowed from cohort {quota.cohort}"
                    )
                else:
                    parts.append(
                        f"{cq} now uses {gib(quota.usage)} of its {gib(quota.nominal)} guaranteed"
                    )
            reason = "; ".join(parts)
        elif d.type == "Finished":
            if job is not None:
                job.finished = True
            cq_held, amount = self.held.pop(key, (cq, 0))
            q = self.quotas.get(cq_held)
            if q is not None:
                q.usage -= amount
                q.finished += 1
            memory = gib(amount) if amount else ""
            reason = (d.reason or "finished").lower() + (f"; frees {gib(amount)}" if amount else "")
            flavor = self.flavors.pop(key, "-")
        elif d.type == "Inadmissible":
            message = d.message or ""
            message = re.sub(r"^couldn't assign flavors to podset \S+: ", "", message)
            m = re.search(r"requested (\S+?),", message)
            memory = m.group(1) if m else ""
            reason = f"{d.reason}: {message}" if message else (d.reason or "")
        elif d.type == "Rejected":
            reason = f"{d.object}: {d.message or d.reason}"
        else:
            cq_held, amount = self.held.pop(key, (cq, 0)) if key else (cq, 0)
            q = self.quotas.get(cq_held)
            if q is not None and amount:
                q.usage -= amount
            reason = f"{d.reason or ''} {d.message or ''}".strip()
            if d.type == "Preempted" and (d.cause or "").startswith("plan/"):
                # caused by a PreemptionPlan journal event: admission validated it
                reason += f"; planned by the preemption service ({d.cause})"
                self.planned.append(f"{key} for {d.preemptor}")
        stream_line(
            elapsed(d.at - self.t0),
            key or "-",
            d.type,
            cq,
            flavor,
            memory,
            reason,
            style=STYLES.get(d.type, ""),
        )
