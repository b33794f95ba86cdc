#!/usr/bin/env python3
"""kuota's stack and Kueue v0.19.2's, one after the other, on the same burst: ratios.

    .venv/bin/python scripts/bench_vs_kueue.py [--jobs 2000] [--cqs 10] [--rate 100]
        [--paced-jobs 1000] [--shape baseline --shape-cqs 6 --shape-scale 1.0] [--no-burst]

``--rate`` adds a paced run and ``--shape`` Kueue's own scheduler shape on both
systems (``bench_vs_kueue_live``); each prints its lines, and one line per
system gives CPU-ms per Job per process, before the last line.

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
queueing system's own processes: kuota's five services (bench_e2e's
"services' peak RSS"), Kafka and Redis, against Kueue's one process.

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

import bench_vs_kueue_live as live  # noqa: E402
from bench_e2e_report import cpu_seconds, stack_pids  # noqa: E402
from bench_kueue import SHAPES  # noqa: E402
from bench_vs_kueue_figures import (  # noqa: E402
    last_line,
    ms_per_job,
    parse_cpu_table,
    parse_peak_rss,
    per_process_line,
    percentile,
    shape_figures,
    status_hwm_mb,
)
from kueue_diff import KUEUE, KueueStack, kubectl_apply  # noqa: E402

LAST = re.compile(
    r"^jobs=(\d+) admitted_per_s=([\d.]+) p50_ms=(\d+) p99_ms=(\d+) rss_mb_total=(\d+)"
)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


pct = percentile


def hwm_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        return status_hwm_mb(Path(f"/proc/{pid}/status").read_text())
    return 0.0


def kuota_phase(jobs: int, *, rate: float | None = None) -> dict[str, Any]:
    """bench_e2e on the local stack: ``--held`` (the burst) or, with ``rate``, paced."""
    argv = [sys.executable, str(REPO / "scripts" / "bench_e2e.py")]
    argv += ["--preempt", "0", "--jobs", str(jobs)]
    argv += ["--held"] if rate is None else ["--rate", f"{rate:g}"]
    say(f"bench_vs_kueue: kuota: {' '.join(argv[1:])}")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=1800)
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    m = LAST.match(lines[-1]) if lines else None
    if done.returncode != 0 or m is None:
        raise SystemExit(f"bench_e2e failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    cpu_line = next(ln for ln in done.stderr.splitlines() if "CPU in the" in ln)
    per = parse_cpu_table(cpu_line)
    per.pop("bench_e2e", None)  # the driver, not the stack (Kueue's driver is not counted)
    stack_dir = Path(os.environ.get("KUOTA_STACK_DIR") or REPO / ".stack")
    services_peak = parse_peak_rss(done.stderr)
    if services_peak is None:
        raise SystemExit("bench_e2e printed no services' peak RSS")
    rss = services_peak + sum(
        hwm_mb(pid) for n, pid in stack_pids(stack_dir).items() if n in ("kafka", "redis")
    )
    say(f"bench_vs_kueue: kuota: {lines[-1]}; CPU {cpu_line.split('):', 1)[1].strip()}")
    admitted = int(m.group(1))
    return {
        "admitted_per_s": float(m.group(2)),
        "p50_ms": float(m.group(3)),
        "p99_ms": float(m.group(4)),
        "cpu_ms_per_job": 1000 * sum(per.values()) / admitted,
        "per_process": ms_per_job(per, admitted),
        "rss_mb": rss,
    }


def kueue_objects(run: str, cqs: int, *, held: bool = True) -> list[dict[str, Any]]:
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
                    "stopPolicy": "Hold" if held else "None",
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
        per = ms_per_job(used, jobs)
        say(
            f"bench_vs_kueue: kueue: admitted_per_s={rate:.0f} p50_ms={pct(lat, 50):.0f} "
            f"p99_ms={pct(lat, 99):.0f} in {wall:.0f}s; CPU "
            + ", ".join(f"{n} {s:.1f}s" for n, s in sorted(used.items(), key=lambda x: -x[1]))
        )
        return {
            "admitted_per_s": rate,
            "p99_ms": pct(lat, 99),
            "cpu_ms_per_job": sum(per.values()),
            "per_process": per,
            "rss_mb": hwm_mb(pids["kueue"]),
        }
    finally:
        for i in range(cqs):
            with contextlib.suppress(Exception):
                await client.CoreV1Api(api).delete_namespace(f"{run}-{i}")
        await api.close()


def KUEUE_STACK_DIR() -> Path:
    return Path(os.environ.get("KUOTA_KUEUE_STACK_DIR") or REPO / ".stack-kueue")


async def kueue_api() -> Any:
    from kubernetes_asyncio import client, config

    cfg = client.Configuration()
    stack = KueueStack.read()
    await config.load_kube_config(config_file=stack.env["KUBECONFIG"], client_configuration=cfg)
    return stack, client.ApiClient(cfg)


async def kueue_paced(jobs: int, cqs: int, rate: float) -> dict[str, Any]:
    """Jobs created at ``rate`` on ``cqs`` open ClusterQueues; creation -> unsuspended."""
    stack, api = await kueue_api()
    run = f"bp{uuid.uuid4().hex[:6]}"
    namespaces = [f"{run}-{i}" for i in range(cqs)]
    try:
        await kubectl_apply(stack, kueue_objects(run, cqs, held=False))
        say(f"bench_vs_kueue: kueue: {jobs} Jobs at {rate:g}/s over {cqs} ClusterQueues ({run})")
        pids = stack_pids(KUEUE_STACK_DIR())
        d = await live.drive(
            api,
            run,
            live.paced_jobs(run, jobs, rate, namespaces, {}),
            pids,
            until=live.all_admitted(jobs),
            timeout=600,
        )
        fig = live.latency(d)
        if fig["jobs"] < jobs:
            raise SystemExit(f"Kueue unsuspended {fig['jobs']:.0f} of {jobs} Jobs")
        per = ms_per_job(d.used, jobs)
        say(
            f"bench_vs_kueue: kueue: paced p50_ms={fig['p50_ms']:.0f} p99_ms={fig['p99_ms']:.0f}"
            f" in {d.wall_s:.0f}s"
        )
        return {**fig, "cpu_ms_per_job": sum(per.values()), "per_process": per}
    finally:
        await live.remove(api, run, namespaces)
        await api.close()


def shape_line(system: str, name: str, queues: int, d: live.Drive, nominal: int) -> str:
    f = shape_figures(d.timelines.values(), nominal)
    per = ms_per_job(d.used, max(1, f.finished))
    tta = " ".join(f"tta_{c}_s={v:.2f}" for c, v in f.tta_s.items())
    return (
        f"shape={name} cohorts=1 cqs={queues} system={system} jobs={f.total} "
        f"finished={f.finished} usage_pct={f.usage_pct:.1f} {tta} preempted={f.preempted} "
        f"span_s={f.span_s:.0f} cpu_ms_per_job={sum(per.values()):.1f}"
    )


async def shape_phase(system: str, name: str, queues: int, scale: float) -> tuple[str, str]:
    """Kueue's own scheduler shape on one system, with real kwok pods: the shape's line
    and its per-process CPU line."""
    import bench_e2e

    from kuota.kinds import PIPELINE_LABEL

    shape = SHAPES[name]
    nominal = queues * shape.nominal * 1000
    if system == "kueue":
        stack, api = await kueue_api()
        run, labels = f"bs{uuid.uuid4().hex[:6]}", {}
        pipeline = launcher = kafka = env = None
        apply = lambda objs: kubectl_apply(stack, objs)  # noqa: E731
        pids = stack_pids(KUEUE_STACK_DIR())
    else:
        launcher, env, run, pipeline, kafka, api = await bench_e2e.start_run("bench_vs_kueue")
        labels = {PIPELINE_LABEL: run}
        await asyncio.to_thread(launcher.ensure_crds, env, say)  # a fresh stack has none
        apply = lambda objs: bench_e2e.kubectl_apply(env, objs)  # noqa: E731
    namespaces = [f"{run}-{q}" for q in range(queues)]
    schedule = live.shape_jobs(run, name, queues, scale, labels)
    try:
        await apply(live.shape_objects(run, name, queues, labels))
        if launcher is not None:
            await asyncio.to_thread(launcher.up, pipeline, quiet=True)
            await bench_e2e.wait_journaled(kafka, f"{run}.journal", "LocalQueue", "bench", 60)
            pids = {
                **{f"kuota-{k}": v for k, v in launcher.pids(pipeline).items()},
                **stack_pids(Path(env.get("KUOTA_STACK_DIR") or launcher.stack_dir())),
            }
        say(f"bench_vs_kueue: {system}: shape {name}, {queues} ClusterQueues, {len(schedule)} Jobs")
        d = await live.drive(
            api, run, schedule, pids, until=live.all_finished(len(schedule)), timeout=900
        )
        line = shape_line(system, name, queues, d, nominal)
        say(f"bench_vs_kueue: {line}")
        fin = max(1, sum(t.finished is not None for t in d.timelines.values()))
        return line, f"shape {per_process_line(system, ms_per_job(d.used, fin))}"
    finally:
        if launcher is not None:
            await asyncio.to_thread(launcher.down, pipeline, quiet=True)
        await live.remove(api, run, namespaces)
        if launcher is not None:
            await bench_e2e.cleanup(api, run, kafka, env)
        await api.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--cqs", type=int, default=10, help="Kueue's ClusterQueues in one cohort")
    ap.add_argument(
        "--rate", type=float, default=None, help="also a paced run: Jobs created per second"
    )
    ap.add_argument("--paced-jobs", type=int, default=1000, help="Jobs of the paced run (1000)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default=None, help="also Kueue's shape")
    ap.add_argument("--shape-cqs", type=int, default=6, help="ClusterQueues of the shape (6)")
    ap.add_argument(
        "--shape-scale", type=float, default=1.0, help="Jobs per class x this (1.0: 3,000 at 6)"
    )
    ap.add_argument("--no-burst", action="store_true", help="skip the burst (no last line)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "shared"))
    out: list[str] = []
    if not args.no_burst:
        kuota = kuota_phase(args.jobs)
        kueue = asyncio.run(kueue_phase(args.jobs, args.cqs))
        out.append(f"burst jobs={args.jobs} kuota_cqs=1 kueue_cqs={args.cqs}")
        out.append(f"burst {per_process_line('kuota', kuota['per_process'])}")
        out.append(f"burst {per_process_line('kueue', kueue['per_process'])}")
    if args.rate is not None:
        kp = kuota_phase(args.paced_jobs, rate=args.rate)
        qp = asyncio.run(kueue_paced(args.paced_jobs, args.cqs, args.rate))
        out.append(f"paced {per_process_line('kuota', kp['per_process'])}")
        out.append(f"paced {per_process_line('kueue', qp['per_process'])}")
        out.append(
            f"paced rate={args.rate:g} jobs={args.paced_jobs} kuota_cqs=1 kueue_cqs={args.cqs} "
            f"kuota_p50_ms={kp['p50_ms']:.0f} kueue_p50_ms={qp['p50_ms']:.0f} "
            f"kuota_p99_ms={kp['p99_ms']:.0f} kueue_p99_ms={qp['p99_ms']:.0f} "
            f"p99_ratio={qp['p99_ms'] / max(kp['p99_ms'], 1e-9):.2f} "
            f"kuota_cpu_ms_per_job={kp['cpu_ms_per_job']:.1f} "
            f"kueue_cpu_ms_per_job={qp['cpu_ms_per_job']:.1f}"
        )
    if args.shape is not None:
        for system in ("kuota", "kueue"):
            line, cpu = asyncio.run(
                shape_phase(system, args.shape, args.shape_cqs, args.shape_scale)
            )
            out += [cpu, line]
    for line in out:
        print(line, flush=True)
    if not args.no_burst:
        print(last_line(args.jobs, kuota, kueue), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
