#!/usr/bin/env python3
"""kuota's stack and Kueue v0.19.2's, one after the other, on the same burst: ratios.

    .venv/bin/python scripts/bench_vs_kueue.py [--jobs 2000] [--cqs 10]

**kuota**: ``scripts/bench_e2e.py --held --preempt 0 --jobs N`` on the local
stack (``scripts/stack up``): a pipeline of the four services of its own, the
Jobs (``parallelism: 0``) created while their ClusterQueue is held, then
released; its figures are read from its output. **Kueue**: on the Kueue stack
(``scripts/kueue-stack up``), a cohort of ``--cqs`` ClusterQueues with ample
quota, held (``stopPolicy: Hold``), ``N`` Jobs spread over them and created
through Kueue's webhook; once Kueue has a Workload for each, the holds are
released and a watch times every Job's unsuspension. In both, latency and
``admitted_per_s`` count from the release (the ceiling, not an offered rate),
and CPU is every process of that stack (``<stack>/run/*.pid``: apiserver,
etcd, controller-manager, scheduler, kwok, and Kafka, Redis and the services
or Kueue) over the window, per admitted Job. RSS is the peak (VmHWM) of the
queueing system's own processes: kuota's services (as bench_e2e reports
them), Kafka and Redis, against Kueue's one process.

Differences of shape, said where they matter: bench_e2e holds one
ClusterQueue, so kuota's side is always ``--cqs 1`` (the worst case for
Kueue, which pops one head per ClusterQueue per cycle, is ``--cqs 1`` too).
The last line is

    kueue=v0.19.2 jobs=N kuota_admitted_per_s=… kueue_admitted_per_s=… throughput_ratio=…
    kuota_p99_ms=… kueue_p99_ms=… kuota_cpu_ms_per_job=… kueue_cpu_ms_per_job=…
    kuota_rss_mb=… kueue_rss_mb=…  (one line)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests" / "kueue"), str(REPO / "tests" / "e2e")]

from bench_e2e_report import cpu_seconds, stack_pids  # noqa: E402
from kueue_diff import KUEUE, KueueStack, kubectl_apply  # noqa: E402

LAST = re.compile(
    r"^jobs=(\d+) admitted_per_s=([\d.]+) p50_ms=(\d+) p99_ms=(\d+) rss_mb_total=(\d+)"
)
CPU = re.compile(r"(\S+) ([\d.]+)s \(\d+%\)")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else 0.0


def hwm_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def kuota_phase(jobs: int) -> dict[str, float]:
    argv = [sys.executable, str(REPO / "scripts" / "bench_e2e.py")]
    argv += ["--held", "--preempt", "0", "--jobs", str(jobs)]
    say(f"bench_vs_kueue: kuota: {' '.join(argv[1:])}")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=1800)
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    m = LAST.match(lines[-1]) if lines else None
    if done.returncode != 0 or m is None:
        raise SystemExit(f"bench_e2e failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    cpu_line = next(ln for ln in done.stderr.splitlines() if "CPU in the" in ln)
    per = {n: float(s) for n, s in CPU.findall(cpu_line.split("):", 1)[1])}
    per.pop("bench_e2e", None)  # the driver, not the stack (Kueue's driver is not counted)
    stack_dir = Path(os.environ.get("KUOTA_STACK_DIR") or REPO / ".stack")
    rss = float(m.group(5)) + sum(
        hwm_mb(pid) for n, pid in stack_pids(stack_dir).items() if n in ("kafka", "redis")
    )
    say(f"bench_vs_kueue: kuota: {lines[-1]}; CPU {cpu_line.split('):', 1)[1].strip()}")
    return {
        "admitted_per_s": float(m.group(2)),
        "p99_ms": float(m.group(4)),
        "cpu_ms_per_job": 1000 * sum(per.values()) / int(m.group(1)),
        "rss_mb": rss,
    }


def kueue_objects(run: str, cqs: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": run},
        }
    ]
    for i in range(cqs):
        name = f"{run}-{i}"
        objs += [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "cohortName": run,
                    "namespaceSelector": {},
                    "stopPolicy": "Hold",
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": run,
                                    "resources": [{"name": "cpu", "nominalQuota": "100000"}],
                                }
                            ],
                        }
                    ],
                },
            },
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "bench", "namespace": name},
                "spec": {"clusterQueue": name},
            },
        ]
    return objs


def kueue_job(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"j-{i}", "labels": {"kueue.x-k8s.io/queue-name": "bench"}},
        "spec": {
            "parallelism": 0,
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m"}},
                        }
                    ],
                }
            },
        },
    }


async def kueue_phase(jobs: int, cqs: int) -> dict[str, float]:
    from kubernetes_asyncio import client, config, watch

    stack = KueueStack.read()
    cfg = client.Configuration()
    await config.load_kube_config(config_file=stack.env["KUBECONFIG"], client_configuration=cfg)
    api = client.ApiClient(cfg)
    run = f"bk{uuid.uuid4().hex[:6]}"
    batch = client.BatchV1Api(api)
    co = client.CustomObjectsApi(api)
    try:
        await kubectl_apply(stack, kueue_objects(run, cqs))
        say(f"bench_vs_kueue: kueue: {jobs} Jobs over {cqs} held ClusterQueues ({run})")
        sem = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            async with sem:
                ns = f"{run}-{i % cqs}"
                resp = await batch.create_namespaced_job(ns, kueue_job(i), _preload_content=False)
                resp.release()

        t = time.monotonic()
        await asyncio.gather(*(create(i) for i in range(jobs)))
        say(f"bench_vs_kueue: kueue: created in {time.monotonic() - t:.1f}s")
        namespaces = {f"{run}-{i}" for i in range(cqs)}

        async def workloads() -> int:
            resp = await co.list_cluster_custom_object(*KUEUE, "workloads", _preload_content=False)
            items = json.loads(await resp.read()).get("items") or []
            return sum(w["metadata"]["namespace"] in namespaces for w in items)

        while (n := await workloads()) < jobs:
            if time.monotonic() - t > 600:
                raise SystemExit(f"Kueue made {n} of {jobs} Workloads in 600s")
            await asyncio.sleep(1)
        unsuspended: dict[str, float] = {}
        done = asyncio.Event()

        async def watcher() -> None:
            w = watch.Watch()
            async for ev in w.stream(batch.list_job_for_all_namespaces, timeout_seconds=0):
                obj = ev["object"]
                if obj.metadata.namespace in namespaces and obj.spec.suspend is False:
                    key = f"{obj.metadata.namespace}/{obj.metadata.name}"
                    unsuspended.setdefault(key, time.time())
                    if len(unsuspended) >= jobs:
                        done.set()

        wt = asyncio.create_task(watcher())
        await asyncio.sleep(1.0)  # the watch's first LIST
        pids = stack_pids(KUEUE_STACK_DIR())
        before = {n: c for n, p in pids.items() if (c := cpu_seconds(p)) is not None}
        released = time.time()
        for i in range(cqs):
            await co.patch_cluster_custom_object(
                *KUEUE,
                "clusterqueues",
                f"{run}-{i}",
                {"spec": {"stopPolicy": "None"}},
                _content_type="application/merge-patch+json",
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 1200)
        wall = time.time() - released
        used = {n: (cpu_seconds(p) or 0.0) - before[n] for n, p in pids.items() if n in before}
        wt.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await wt
        lat = sorted((t - released) * 1000 for t in unsuspended.values())
        if len(lat) < jobs:
            raise SystemExit(f"Kueue unsuspended {len(lat)} of {jobs} Jobs")
        rate = jobs / max(1e-9, max(unsuspended.values()) - released)
        say(
            f"bench_vs_kueue: kueue: admitted_per_s={rate:.0f} p50_ms={pct(lat, 50):.0f} "
            f"p99_ms={pct(lat, 99):.0f} in {wall:.0f}s; CPU "
            + ", ".join(f"{n} {s:.1f}s" for n, s in sorted(used.items(), key=lambda x: -x[1]))
        )
        return {
            "admitted_per_s": rate,
            "p99_ms": pct(lat, 99),
            "cpu_ms_per_job": 1000 * sum(used.values()) / jobs,
            "rss_mb": hwm_mb(pids["kueue"]),
        }
    finally:
        for i in range(cqs):
            with contextlib.suppress(Exception):
                await client.CoreV1Api(api).delete_namespace(f"{run}-{i}")
        await api.close()


def KUEUE_STACK_DIR() -> Path:
    return Path(os.environ.get("KUOTA_KUEUE_STACK_DIR") or REPO / ".stack-kueue")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--cqs", type=int, default=10, help="Kueue's ClusterQueues in one cohort")
    args = ap.parse_args()
    kuota = kuota_phase(args.jobs)
    kueue = asyncio.run(kueue_phase(args.jobs, args.cqs))
    print(
        f"kueue=v0.19.2 jobs={args.jobs} cqs={args.cqs} "
        f"kuota_admitted_per_s={kuota['admitted_per_s']:.0f} "
        f"kueue_admitted_per_s={kueue['admitted_per_s']:.0f} "
        f"throughput_ratio={kuota['admitted_per_s'] / max(kueue['admitted_per_s'], 1e-9):.2f} "
        f"kuota_p99_ms={kuota['p99_ms']:.0f} kueue_p99_ms={kueue['p99_ms']:.0f} "
        f"kuota_cpu_ms_per_job={kuota['cpu_ms_per_job']:.1f} "
        f"kueue_cpu_ms_per_job={kueue['cpu_ms_per_job']:.1f} "
        f"kuota_rss_mb={kuota['rss_mb']:.0f} kueue_rss_mb={kueue['rss_mb']:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
