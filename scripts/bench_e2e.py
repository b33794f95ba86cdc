#!/usr/bin/env python3
"""End-to-end benchmark: Jobs created at a fixed rate, creation -> unsuspended latency.

    .venv/bin/python scripts/bench_e2e.py [--jobs 2000] [--rate 100] [--held] [--pods] [--keep]

Against the local stack (``scripts/stack up``) it starts a pipeline of its own
— the four services, through ``scripts/kuota-services``' Python API, named
``bench-<hex>`` (own topics, ports, webhook registration, and only the Jobs
labelled ``kuota.dev/pipeline=bench-<hex>``) — and a ClusterQueue with quota
for every Job (each pod asks for 10m of cpu), with two kwok nodes of its own.
It then creates ``--jobs`` Jobs at ``--rate`` per second (up to
``--create-concurrency`` creations in flight, so a slow apiserver does not hold
the offered rate down; the rate achieved and the create request latency are
printed), each through the mutating webhook (not created suspended), and
watches them: a Job's latency is the time from the watch event that shows it
created (suspended by the webhook) to the first watch event that shows it
unsuspended by kuota-actuator — both timestamps taken by the same watch, on
this machine's clock. The path measured: apiserver -> kuota-ingest (watch) ->
Kafka journal -> kuota-admission (fold, transaction) -> Kafka decisions ->
kuota-actuator (one merge PATCH of the cached Job) -> apiserver -> the watch.

**The Jobs have ``parallelism: 0`` by default**: admitted and unsuspended like
any other, but the Job controller makes no pod, so what is measured is
kuota's path, not kube-controller-manager's pod churn. They also charge no
quota (a podset of count 0 requests nothing, as in Kueue), which is why
``--held`` holds them with ``stopPolicy: Hold`` rather than a zero quota. With ``--pods`` each has
one pod, run by kwok for ``--run-for``: then the Job controller (about 6 pods a
second on the 2-core dev machine) and kube-scheduler share the cores with
kuota, and cleaning 2,000 such Jobs up takes minutes.

``--held`` measures throughput instead of latency at a rate: the ClusterQueue
starts with ``stopPolicy: Hold``, the Jobs are created and held pending
(Inadmissible), then the hold is released and every Job is admitted at once;
latency and ``admitted_per_s`` then count from the release.

Besides the stage breakdown (Kafka record timestamps: created -> journaled ->
decided -> unsuspended, p50/p99), it prints the CPU each process used in the
measured window (the services, this script, and the stack's kube-apiserver,
etcd, Kafka ...), the load average, the apiserver's own mean latencies for Job
create (and the webhook's share) and PATCH, and the actuator's counters, so a
slow run says where its time went. The machine is shared: read figures with
the load average printed next to them.

Then, unless ``--preempt 0``, a preemption phase (``bench_e2e_preempt``):
``--preempt`` low-priority Jobs fill a ClusterQueue of their own and as many
high-priority Jobs, created at ``--preempt-rate`` per second, each preempt one
through the real pipeline (admission -> a plan from kuota-preemption on the
journal -> Preempted + Admitted). Its plan latency runs from the journal
record that made the head wait for a plan to the Preempted decision's record
(Kafka timestamps).

The last line printed is

    jobs=N admitted_per_s=N p50_ms=N p99_ms=N rss_mb_total=N plan_p50_ms=N plan_p99_ms=N

``admitted_per_s`` is the Jobs unsuspended divided by the time from the first
creation (``--held``: the release) to the last unsuspension (without
``--held`` it cannot exceed ``--rate`` by much); ``rss_mb_total`` is the
resident memory of the four services at the end of the main phase;
``plan_p50_ms``/``plan_p99_ms`` are the preemption phase's (``-`` when it did
not run or measured nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import statistics
import sys
import time
import uuid
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from bench_e2e_preempt import (  # noqa: E402 - after the path is set
    delete_namespace,
    pct,
    preemption_phase,
)
from bench_e2e_report import (  # noqa: E402 - after the path is set
    apiserver_figures,
    apiserver_summary,
    cpu_seconds,
    cpu_table,
    sched,
    sched_table,
    scrape,
    stack_pids,
    stage_breakdown,
    wait_journaled,
    wait_pending,
)

from kuota.kinds import PIPELINE_LABEL, QUEUE_NAME_LABEL  # noqa: E402

KUEUE = ("kueue.x-k8s.io", "v1beta2")


def load_launcher() -> ModuleType:
    path = REPO / "scripts" / "kuota-services"
    loader = SourceFileLoader("kuota_services", str(path))
    spec = importlib.util.spec_from_loader("kuota_services", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kuota_services"] = module
    loader.exec_module(module)
    return module


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def setup_objects(run: str, *, held: bool = False) -> list[dict[str, Any]]:
    """The run's nodes, flavor, ClusterQueue (``held``: ``stopPolicy: Hold``), namespace
    and LocalQueue."""
    labels = {PIPELINE_LABEL: run}
    objs: list[dict[str, Any]] = []
    for n in range(2):
        node = f"{run}-{n}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {
                        **labels,
                        "bench.kuota.dev/pool": run,
                        "kubernetes.io/hostname": node,
                        "kubernetes.io/os": "linux",
                    },
                },
                "status": {
                    "capacity": {"cpu": "1000", "memory": "4Ti", "pods": "2000"},
                    "allocatable": {"cpu": "1000", "memory": "4Ti", "pods": "2000"},
                },
            }
        )
    objs += [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": run, "labels": labels},
            "spec": {"nodeLabels": {"bench.kuota.dev/pool": run}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": run, "labels": labels},
            "spec": {
                "namespaceSelector": {},
                "stopPolicy": "Hold" if held else "None",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": run, "resources": [{"name": "cpu", "nominalQuota": "100000"}]}
                        ],
                    }
                ],
            },
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": run, "labels": labels}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "bench", "namespace": run, "labels": labels},
            "spec": {"clusterQueue": run},
        },
    ]
    return objs


def job(run: str, i: int, run_for: str | None) -> dict[str, Any]:
    """One bench Job; ``run_for`` None: ``parallelism: 0``, the Job controller makes no pod."""
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"job-{i:06d}",
            "labels": {PIPELINE_LABEL: run, QUEUE_NAME_LABEL: "bench"},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "annotations": {
                        "pod-ready.stage.kwok.x-k8s.io/delay": "100ms",
                        "pod-complete.stage.kwok.x-k8s.io/delay": run_for,
                    }
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m"}},
                        }
                    ],
                },
            },
        },
    }
    if run_for is None:
        manifest["spec"]["parallelism"] = 0
    return manifest


async def kubectl_apply(env: dict[str, str], objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        env["KUOTA_KUBECTL"],
        f"--kubeconfig={env['KUBECONFIG']}",
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kuota-bench",
        "-o",
        "json",
        "-f",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}).encode()
    out, err = await proc.communicate(data)
    if proc.returncode != 0:
        raise SystemExit(f"bench_e2e: kubectl apply failed: {err.decode().strip()}")
    doc = json.loads(out)
    return list(doc.get("items", [doc]))


async def start_run(
    script: str, service_env: dict[str, str] | None = None
) -> tuple[ModuleType, dict[str, str], str, Any, Any, Any]:
    """What a pipeline bench needs on the local stack: the launcher, the stack's
    environment, a fresh run name, its (not yet started) pipeline of the four
    services on free ports, its Kafka settings and an apiserver client."""
    from kubernetes_asyncio import client, config

    from kuota.bus.settings import KafkaSettings

    launcher = load_launcher()
    env = dict(os.environ)
    for key, value in launcher.stack_env().items():
        env.setdefault(key, value)
    for var in ("KUOTA_KAFKA_BOOTSTRAP", "KUOTA_REDIS_URL", "KUBECONFIG", "KUOTA_KUBECTL"):
        if not env.get(var):
            raise SystemExit(f"{script}: {var} unset; start the stack: scripts/stack up")
    run = f"bench-{uuid.uuid4().hex[:8]}"
    metrics_ports, webhook_port = launcher.free_ports()  # distinct ports
    pipeline = launcher.Pipeline(
        name=run,
        topic_prefix=f"{run}.",
        ports=metrics_ports,
        webhook_port=webhook_port,
        config_map=None,
        env={"KUBECONFIG": env["KUBECONFIG"], **(service_env or {})},
    )
    kafka = KafkaSettings.from_env(
        {"KUOTA_KAFKA_BOOTSTRAP": env["KUOTA_KAFKA_BOOTSTRAP"], "KUOTA_TOPIC_PREFIX": f"{run}."}
    )
    cfg = client.Configuration()
    await config.load_kube_config(config_file=env["KUBECONFIG"], client_configuration=cfg)
    return launcher, env, run, pipeline, kafka, client.ApiClient(cfg)


async def bench(args: argparse.Namespace) -> int:
    from kubernetes_asyncio import client

    from kuota.kube.watch import Resource, Watcher

    launcher, env, run, pipeline, kafka, api = await start_run(
        "bench_e2e", dict(kv.split("=", 1) for kv in args.service_env)
    )
    created: dict[str, float] = {}
    unsuspended: dict[str, float] = {}
    done = asyncio.Event()
    try:
        pods = f"pods run {args.run_for} on kwok" if args.pods else "parallelism 0, no pods"
        say(f"bench_e2e: {run}: {args.jobs} Jobs at {args.rate:g}/s, {pods}")
        await kubectl_apply(env, setup_objects(run, held=args.held))
        t = time.monotonic()
        await asyncio.to_thread(launcher.up, pipeline, quiet=True)
        say(f"bench_e2e: services up in {time.monotonic() - t:.1f}s")
        await wait_journaled(kafka, f"{run}.journal", "LocalQueue", "bench", 60)

        async def watch() -> None:
            w = Watcher(api, Resource("Job", f"/apis/batch/v1/namespaces/{run}/jobs"))
            async for change in w.changes():
                now = time.time()
                if change.type != "UPSERT":
                    continue
                name = change.object["metadata"]["name"]
                created.setdefault(name, now)
                running = not (change.object.get("spec") or {}).get("suspend", False)
                if running and name not in unsuspended:
                    unsuspended[name] = now
                    if len(unsuspended) >= args.jobs:
                        done.set()

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.5)  # the watch's first LIST
        measured = {
            **{f"kuota-{k}": v for k, v in launcher.pids(pipeline).items()},
            **stack_pids(Path(env.get("KUOTA_STACK_DIR") or launcher.stack_dir())),
            "bench_e2e": os.getpid(),
        }
        cpu_before = {n: c for n, pid in measured.items() if (c := cpu_seconds(pid)) is not None}
        sched_before = {n: c for n, pid in measured.items() if (c := sched(pid)) is not None}
        api_before = await apiserver_figures(api)
        load_before = os.getloadavg()[0]
        batch = client.BatchV1Api(api)
        # Enough creations in flight that a slow apiserver (the webhook call
        # included) does not hold the offered rate down.
        inflight = asyncio.Semaphore(args.create_concurrency)
        failures: list[str] = []
        create_ms: list[float] = []

        async def create(i: int) -> None:
            async with inflight:
                started = time.monotonic()
                try:
                    resp = await batch.create_namespaced_job(
                        run,
                        job(run, i, args.run_for if args.pods else None),
                        _preload_content=False,
                    )
                    resp.release()
                    create_ms.append((time.monotonic() - started) * 1000)
                except Exception as err:  # counted and reported, the run goes on
                    failures.append(f"job-{i:06d}: {err}")

        t0 = time.time()
        creations = []
        for i in range(args.jobs):
            delay = t0 + i / args.rate - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            creations.append(asyncio.create_task(create(i)))
            if i and i % max(1, int(args.rate * 5)) == 0:
                say(
                    f"bench_e2e: {i} created, {len(unsuspended)} unsuspended "
                    f"({time.time() - t0:.0f}s)"
                )
        await asyncio.gather(*creations)
        t_created = time.time()
        if failures:
            say(f"bench_e2e: {len(failures)} creations failed, e.g. {failures[0]}")
        want = args.jobs - len(failures)
        released: float | None = None
        t_create = t0
        if args.held:
            held = await wait_pending(kafka, f"{run}.decisions", want, args.timeout)
            if held < want:
                raise SystemExit(f"bench_e2e: only {held} of {want} Jobs held pending")
            say(f"bench_e2e: {held} Jobs pending on the held ClusterQueue; releasing it")
            t_create = t0
            t0 = time.time()  # the measured window starts with the release
            cpu_before = {
                n: c for n, pid in measured.items() if (c := cpu_seconds(pid)) is not None
            }
            sched_before = {n: c for n, pid in measured.items() if (c := sched(pid)) is not None}
            api_before = await apiserver_figures(api)
            load_before = os.getloadavg()[0]
            resp = await api.call_api(
                f"/apis/{KUEUE[0]}/{KUEUE[1]}/clusterqueues/{run}",
                "PATCH",
                body={"spec": {"stopPolicy": "None"}},
                header_params={"Content-Type": "application/merge-patch+json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
            )
            resp.release()
            released = time.time()
        deadline = time.monotonic() + args.timeout
        while len(unsuspended) < want and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 1.0)
        wall = time.time() - t0
        cpu_used = cpu_table(cpu_before, measured, wall)
        starved = sched_table(sched_before, measured)
        load_after = os.getloadavg()[0]
        counters = scrape(pipeline.ports["actuator"])
        api_after = await apiserver_figures(api)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        pids = launcher.pids(pipeline)
        rss = launcher.rss_mb(pids.values())
        peak = 0.0
        for pid in pids.values():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak += int(line.split()[1]) / 1024

        start = created if released is None else dict.fromkeys(created, released)
        lat = sorted((unsuspended[n] - start[n]) * 1000 for n in unsuspended if n in start)
        if not lat:
            raise SystemExit("bench_e2e: no Job was unsuspended")
        first = min(start.values())
        last = max(unsuspended.values())
        admitted_per_s = len(unsuspended) / max(1e-9, last - first)

        def pct_lat(p: float) -> float:
            return pct(lat, p)

        stages = await stage_breakdown(kafka, run, created, unsuspended)
        if stages:
            say(f"bench_e2e: per stage, ms p50/p99: {stages}")
        say(
            f"bench_e2e: CPU in the {wall:.0f}s window (load average {load_before:.1f} -> "
            f"{load_after:.1f} on {os.cpu_count()} cores): {cpu_used}"
        )
        if starved:
            say(f"bench_e2e: runnable but waiting for a CPU (schedstat): {starved}")
        if api_after:
            say(f"bench_e2e: apiserver: {apiserver_summary(api_before, api_after, wall)}")
        if counters:
            say(
                "bench_e2e: actuator: "
                + ", ".join(f"{k}={v:g}" for k, v in sorted(counters.items()) if v)
            )
        create_ms.sort()
        say(
            f"bench_e2e: created {args.jobs} in {t_created - t_create:.1f}s "
            f"({args.jobs / max(1e-9, t_created - t_create):.0f}/s achieved of {args.rate:g}/s; "
            f"create request p50 {create_ms[len(create_ms) // 2] if create_ms else 0:.0f} ms, "
            f"p99 {create_ms[int(0.99 * len(create_ms))] if create_ms else 0:.0f} ms), "
            f"{len(unsuspended)} unsuspended; latency ms: min {lat[0]:.0f} "
            f"mean {statistics.fmean(lat):.0f} p90 {pct_lat(0.90):.0f} max {lat[-1]:.0f}; "
            f"services' peak RSS {peak:.0f} MB"
        )
        ticks = os.sysconf("SC_CLK_TCK")
        for service, pid in pids.items():
            cpu = 0.0
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / ticks
            say(
                f"bench_e2e:   kuota-{service}: rss {launcher.rss_mb([pid]):.0f} MB, "
                f"cpu {cpu:.1f}s since start"
            )
        plan = "plan_p50_ms=- plan_p99_ms=-"
        planned: list[float] = []
        if args.preempt > 0:
            planned = await preemption_phase(
                api=api,
                kafka=kafka,
                run=run,
                pairs=args.preempt,
                rate=args.preempt_rate,
                timeout=args.timeout,
                admission_port=pipeline.ports["admission"],
                apply=lambda objs: kubectl_apply(env, objs),
                say=say,
            )
            if planned:
                plan = f"plan_p50_ms={pct(planned, 0.50):.0f} plan_p99_ms={pct(planned, 0.99):.0f}"
        print(
            f"jobs={len(unsuspended)} admitted_per_s={admitted_per_s:.0f} "
            f"p50_ms={pct_lat(0.50):.0f} p99_ms={pct_lat(0.99):.0f} rss_mb_total={rss:.0f} "
            f"{plan}",
            flush=True,
        )
        complete = len(unsuspended) == args.jobs
        return 0 if complete and (args.preempt == 0 or len(planned) == args.preempt) else 1
    finally:
        if not args.keep:
            await asyncio.to_thread(launcher.down, pipeline, quiet=True)
            await cleanup(api, run, kafka, env)
        else:
            say(f"bench_e2e: kept pipeline {run} (scripts/kuota-services has its pids)")
        await api.close()


async def cleanup(api: Any, run: str, kafka: Any, env: dict[str, str]) -> None:
    """Give the stack back as it was, without leaving it busy for minutes.

    Thousands of Jobs are work for kube-controller-manager's Job controller
    (five syncs at a time): deleting them while their pods still run, or
    deleting the nodes under those pods, keeps it and the pod garbage
    collector busy for minutes, and every Job created meanwhile on this stack
    waits for its pods. So: let the Jobs finish, delete the namespace and wait
    until it is gone, and only then delete the nodes.
    """
    from aiokafka.admin import AIOKafkaAdminClient
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    selector = f"{PIPELINE_LABEL}={run}"
    core = client.CoreV1Api(api)
    batch = client.BatchV1Api(api)
    t = time.monotonic()
    next_note = t
    while time.monotonic() - t < 300:
        resp = await batch.list_namespaced_job(run, _preload_content=False)
        items = json.loads(await resp.read()).get("items") or []
        active = sum(1 for j in items if (j.get("status") or {}).get("active"))
        if not active:
            break
        if time.monotonic() >= next_note:
            say(f"bench_e2e: cleanup: waiting for {active} Jobs' pods to finish")
            next_note += 10
        await asyncio.sleep(1)
    await delete_namespace(api, run, timeout=600 - (time.monotonic() - t))
    say(f"bench_e2e: cleanup took {time.monotonic() - t:.0f}s")
    objects = client.CustomObjectsApi(api)
    for plural in ("clusterqueues", "resourceflavors", "workloadpriorityclasses"):
        with contextlib.suppress(ApiException):
            await objects.delete_collection_cluster_custom_object(
                *KUEUE, plural, label_selector=selector
            )
    with contextlib.suppress(ApiException):
        await core.delete_collection_node(label_selector=selector)
    admin = AIOKafkaAdminClient(**kafka.client_kwargs())
    with contextlib.suppress(Exception):
        await admin.start()
        await admin.delete_topics([f"{run}.journal", f"{run}.decisions", f"{run}.deadletter"])
    with contextlib.suppress(Exception):
        await admin.close()
    import redis.asyncio as aioredis

    r = aioredis.from_url(env["KUOTA_REDIS_URL"])
    with contextlib.suppress(Exception):
        await r.delete(
            f"kuota:snapshot:{run}-admission-0",
            f"kuota:ingest:seen:{run}.journal",
            f"{run}:status:clusterqueues",
        )
    await r.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000, help="Jobs to create (2000)")
    parser.add_argument("--rate", type=float, default=100.0, help="Jobs created per second (100)")
    parser.add_argument(
        "--pods",
        action="store_true",
        help="give the Jobs a pod each (kwok runs it --run-for); default: parallelism 0",
    )
    parser.add_argument("--run-for", default="1s", help="with --pods: how long a pod runs, 1s")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="wait after the last creation (300s)"
    )
    parser.add_argument("--keep", action="store_true", help="leave the pipeline running")
    parser.add_argument(
        "--held",
        action="store_true",
        help="throughput: create the Jobs while the ClusterQueue is held (stopPolicy: Hold), "
        "then release it; latency and admitted_per_s count from the release, not creation",
    )
    parser.add_argument(
        "--preempt",
        type=int,
        default=40,
        help="preemption phase: low-priority Jobs to fill a ClusterQueue and high-priority "
        "Jobs that each preempt one (40; 0: no phase)",
    )
    parser.add_argument(
        "--preempt-rate", type=float, default=5.0, help="high-priority Jobs created per second (5)"
    )
    parser.add_argument(
        "--create-concurrency",
        type=int,
        default=256,
        help="Job creations in flight at most (256), so the offered rate holds",
    )
    parser.add_argument(
        "--service-env",
        action="append",
        default=[],
        metavar="K=V",
        help="extra setting for the services, e.g. KUOTA_ACTUATOR_CONCURRENCY=64 (repeatable)",
    )
    args = parser.parse_args()
    if args.jobs <= 0 or args.rate <= 0:
        parser.error("--jobs and --rate must be positive")
    if args.preempt < 0 or args.preempt_rate <= 0:
        parser.error("--preempt must be 0 or more and --preempt-rate positive")
    sys.path.insert(0, str(REPO / "shared"))
    try:
        return asyncio.run(bench(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
