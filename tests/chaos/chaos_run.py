"""One fault run: its own stack, the pipeline, the workload, the faults, the verdict.

Theory of operation. The run never touches the stack other tests use: it
starts a second one (``scripts/stack`` with ``KUOTA_STACK_DIR=.stack-chaos``
and the port block ``STACK_PORTS``), from empty data each time, and stops it
at the end (``--keep`` leaves it up). On it, one pipeline of the four real
services (``scripts/kuota-services``' ``Pipeline``, named ``chaos``), whose
actuator reaches the apiserver only through ``chaos_faults.Proxy``. The
workload (``chaos_workload``) is created in bursts through the webhook,
retrying while the webhook or the apiserver is down (what a user's client
would do); the faults (``chaos_faults``) run from the printed schedule; the
``chaos_check.Observer`` watches throughout. When every Job has completed
(or ``--settle`` seconds after the last burst and the last fault), the
pipeline is stopped, ``kuota audit replay`` re-folds the whole journal, and
the last line printed is::

    faults=<n> jobs=<n> over_admissions=<n> lost=<n> double_actuations=<n> replay=<...>
    preempted=<n> bypass_gpu_s=<x>  (on the same line)

(``replay=identical`` or ``replay=differs``; ``preempted`` counts the
Preempted decisions, each planned by the preemption service, and must be
above 0: a run that never preempts did not test it). While the faults run, a
rogue user (``chaos_rogue``, ``--rogue edit``: a namespace ``edit`` token;
``--rogue admin``: the stack's admin, whom the webhook trusts, so only the
backstop stands) tries every way around the queue; ``bypass_gpu_s`` is the
GPU-seconds pods ran without an admission, and must be 0 with ``edit``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import logging
import os
import random
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from chaos_check import Observer
from chaos_faults import Fault, Injector, Proxy, plan_faults, proxied_kubeconfig
from chaos_rogue import NAMESPACE as ROGUE_NAMESPACE
from chaos_rogue import Rogue, account_objects, rogue_client
from chaos_workload import (
    RUN,
    JobSpec,
    draw_jobs,
    infrastructure,
    kueue_configuration,
    manifest,
    plan_bursts,
    queue_objects,
    quota_docs,
)
from e2e_harness import QuotaModel, load_launcher
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kuota.bus.settings import KafkaSettings
from kuota.quantity import format_quantity

REPO = Path(__file__).resolve().parents[2]
STACK_PORTS: Mapping[str, str] = {
    "KUOTA_KAFKA_PORT": "29092",
    "KUOTA_KAFKA_CONTROLLER_PORT": "29093",
    "KUOTA_REDIS_PORT": "26379",
    "KUOTA_ETCD_PORT": "22379",
    "KUOTA_ETCD_PEER_PORT": "22380",
    "KUOTA_APISERVER_PORT": "26443",
    "KUOTA_KCM_PORT": "30257",
    "KUOTA_SCHEDULER_PORT": "30259",
    "KUOTA_KWOK_PORT": "30263",
}
# What the main stack's stack.env sets; the run replaces all of it with its own.
STACK_VARS = (
    "KUOTA_STACK_DIR",
    "KUOTA_KAFKA_BOOTSTRAP",
    "KUOTA_REDIS_URL",
    "KUBECONFIG",
    "KUOTA_KUBECONFIG",
    "KUOTA_KUBE_APISERVER",
    "KUOTA_KUBECTL",
    "KUOTA_TOPIC_PREFIX",
    *STACK_PORTS,
)
ALL_KINDS = ("kafka", "apiserver", "redis", "partition")


def say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="chaos", description="Seeded fault runs (issue #8).")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=4.0, help="Jobs created per second, on average")
    ap.add_argument("--kills", type=int, default=3, help="kill -9 of each service, this many times")
    ap.add_argument(
        "--faults",
        default=",".join(ALL_KINDS),
        help=f"infrastructure faults, comma-separated from {','.join(ALL_KINDS)} ('' for none)",
    )
    ap.add_argument("--no-faults", action="store_true", help="no faults at all (a baseline run)")
    ap.add_argument(
        "--settle",
        type=float,
        default=120.0,
        help="at the end, give up after this many seconds without a Job completing",
    )
    ap.add_argument("--stack-dir", default=str(REPO / ".stack-chaos"))
    ap.add_argument(
        "--port-offset",
        type=int,
        default=0,
        help="added to every port of the run's stack (two runs at once need two stacks)",
    )
    ap.add_argument(
        "--rogue",
        choices=("edit", "admin", "none"),
        default="edit",
        help="the rogue user: a namespace edit token (default), the stack's admin "
        "(trusted by the webhook: only the backstop stands), or none",
    )
    ap.add_argument("--keep", action="store_true", help="leave the run's stack up")
    ap.add_argument("--reuse-stack", action="store_true", help="do not purge the stack first")
    return ap.parse_args(argv)


def stack_env(stack_dir: Path, offset: int = 0) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in STACK_VARS}
    env.update({k: str(int(v) + offset) for k, v in STACK_PORTS.items()})
    # 1,000 Jobs' pods and ResourceClaims: upstream's 20 requests/s throttles them
    env.setdefault("KUOTA_KCM_API_QPS", "200")
    env.setdefault("KUOTA_KCM_API_BURST", "400")
    env["KUOTA_STACK_DIR"] = str(stack_dir)
    return env


def stack(env: Mapping[str, str], *args: str) -> None:
    t0 = time.monotonic()
    done = subprocess.run(
        [str(REPO / "scripts" / "stack"), *args], env=dict(env), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"scripts/stack {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    say(f"scripts/stack {' '.join(args)}: {time.monotonic() - t0:.1f}s")


async def kubectl_apply(env: Mapping[str, str], objs: list[dict[str, Any]]) -> None:
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    proc = await asyncio.create_subprocess_exec(
        env["KUOTA_KUBECTL"],
        f"--kubeconfig={env['KUBECONFIG']}",
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kuota-chaos",
        "-f",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate(data.encode())
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl apply failed: {err.decode().strip()}")


async def create_job(batch: client.BatchV1Api, job: JobSpec) -> int:
    """Create the Job, retrying while the webhook or the apiserver is away; the tries."""
    ns = job.key.split("/", 1)[0]
    body = manifest(job)
    for attempt in itertools.count(1):
        try:
            resp = await batch.create_namespaced_job(ns, body, _preload_content=False)
            status = int(getattr(resp, "status", 200))
            text = (await resp.read())[:300].decode(errors="replace")
            resp.release()
            # without preloading, the client does not raise for HTTP errors
            if status >= 400:
                raise ApiException(status=status, reason=text)
            return attempt
        except ApiException as err:
            if err.status == 409:  # created, but the answer was lost
                return attempt
            if err.status not in (0, 429, 500, 502, 503, 504):
                raise
        except (OSError, TimeoutError, aiohttp.ClientError):
            pass  # the apiserver restarts
        await asyncio.sleep(min(0.25 * attempt, 2.0))
    raise AssertionError("unreachable")


async def submit(
    batch: client.BatchV1Api,
    bursts: list[tuple[float, list[JobSpec]]],
    t0: float,
    injector: Injector | None,
    tries: list[int],
) -> None:
    for at, jobs in bursts:
        delay = t0 + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tries += await asyncio.gather(*(create_job(batch, j) for j in jobs))
        if injector is not None:
            injector.burst.set()
    if injector is not None:
        injector.bursts_over = True


async def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    jobs = draw_jobs(rng, args.jobs)
    bursts = plan_bursts(rng, jobs, args.rate)
    window = bursts[-1][0] if bursts else 0.0
    kinds = tuple(k for k in args.faults.split(",") if k) if not args.no_faults else ()
    for k in kinds:
        if k not in ALL_KINDS:
            raise SystemExit(f"unknown fault kind {k!r} (known: {', '.join(ALL_KINDS)})")
    faults: list[Fault] = [] if args.no_faults else plan_faults(rng, window, args.kills, kinds)
    kinds_count = {k: sum(1 for j in jobs if j.kind == k) for k in ("whole", "mig", "wgpu")}
    say(
        f"seed={args.seed} jobs={len(jobs)} ({kinds_count}) in {len(bursts)} bursts over "
        f"{window:.0f}s; {sum(1 for j in jobs if j.priority.endswith('high'))} high priority"
    )
    say(f"fault schedule ({len(faults)} faults, seed {args.seed}):")
    for f in faults:
        print(f"    {f.describe()}", flush=True)

    stack_dir = Path(args.stack_dir).resolve()
    env = stack_env(stack_dir, args.port_offset)
    if not args.reuse_stack:
        stack(env, "down", "--purge")
    stack(env, "up")
    launcher = load_launcher()
    for key, value in launcher.stack_env(stack_dir).items():
        env[key] = value
    for key in STACK_VARS:  # the launcher reads os.environ: only the run's stack in it
        os.environ.pop(key, None)
    os.environ.update({k: env[k] for k in ("KUOTA_STACK_DIR", *STACK_PORTS)})
    os.environ.update(
        {k: env[k] for k in ("KUOTA_KAFKA_BOOTSTRAP", "KUOTA_REDIS_URL", "KUBECONFIG")}
    )
    os.environ["KUOTA_KUBECTL"] = env["KUOTA_KUBECTL"]

    proxy = Proxy("127.0.0.1", int(env["KUOTA_APISERVER_PORT"]))
    await proxy.start()
    run_dir = stack_dir / "run" / RUN
    run_dir.mkdir(parents=True, exist_ok=True)
    actuator_kubeconfig = proxied_kubeconfig(
        Path(env["KUBECONFIG"]), proxy.port, run_dir / "actuator-kubeconfig"
    )
    config_file = run_dir / "kueue-config.yaml"
    config_file.write_text(yaml.safe_dump(kueue_configuration()))

    @dataclasses.dataclass(frozen=True)
    class ChaosPipeline(launcher.Pipeline):  # type: ignore[name-defined,misc]
        """The actuator's kubeconfig points at the proxy; the others' at the apiserver."""

        def service_env(self, service: str, base: Mapping[str, str]) -> dict[str, str]:
            own: dict[str, str] = super().service_env(service, base)
            if service == "actuator":
                own["KUBECONFIG"] = str(actuator_kubeconfig)
            return own

    metrics_ports, webhook_port = launcher.free_ports()  # distinct ports
    pipeline = ChaosPipeline(
        name=RUN,
        topic_prefix=f"{RUN}.",
        ports=metrics_ports,
        webhook_port=webhook_port,
        config_file=str(config_file),
        config_map=None,
        env={"KUOTA_STATUS_INTERVAL": "1"},
        stack=stack_dir,
    )
    kcfg = client.Configuration()
    await config.load_kube_config(config_file=env["KUBECONFIG"], client_configuration=kcfg)
    api = client.ApiClient(kcfg)
    kafka = KafkaSettings.from_env(
        {"KUOTA_KAFKA_BOOTSTRAP": env["KUOTA_KAFKA_BOOTSTRAP"], "KUOTA_TOPIC_PREFIX": f"{RUN}."}
    )
    quota = QuotaModel.of(quota_docs())
    charges = {j.key: (j.cluster_queue, j.charge) for j in jobs}
    injector = Injector(
        launcher=launcher,
        pipeline=pipeline,
        stack_env=env,
        stack_dir=stack_dir,
        repo=REPO,
        proxy=proxy,
        say=say,
    )
    observer = Observer(
        api=api, kafka=kafka, run=RUN, quota=quota, charges=charges, moments=injector.moments
    )
    tries: list[int] = []
    started = time.monotonic()
    supervisor: asyncio.Task[None] | None = None
    rogue: Rogue | None = None
    rogue_api: client.ApiClient | None = None
    rogue_done = asyncio.Event()
    try:
        await kubectl_apply(env, infrastructure())
        await asyncio.to_thread(launcher.ensure_crds, pipeline.base_env(), launcher.Log(True))
        await kubectl_apply(env, queue_objects())
        if args.rogue != "none":
            rogue_api = await rogue_setup(env, api, run_dir, args.rogue)
            rogue = Rogue(
                batch=client.BatchV1Api(rogue_api),
                rng=random.Random(f"rogue-{args.seed}"),  # the seed's plan stays as it was
                say=say,
                core=client.CoreV1Api(rogue_api),
                custom=client.CustomObjectsApi(rogue_api),
            )
        await asyncio.to_thread(launcher.up, pipeline, quiet=True)
        say(f"pipeline up in {time.monotonic() - started:.1f}s (logs {pipeline.log_dir})")
        observer.start()
        await asyncio.sleep(3)  # ingest journals the queues before the first Job
        supervisor = asyncio.create_task(injector.supervise())
        t0 = time.monotonic()
        observer.t0 = t0
        if rogue is not None:
            rogue.t0 = t0
        faulting = asyncio.create_task(injector.run(faults, t0))
        creating = asyncio.create_task(submit(client.BatchV1Api(api), bursts, t0, injector, tries))
        roguing = asyncio.create_task(rogue.run(rogue_done.is_set)) if rogue else None
        await creating
        say(f"all {len(jobs)} Jobs created in {time.monotonic() - t0:.0f}s ({sum(tries)} calls)")
        await faulting
        say(f"all {len(injector.done)} faults injected at t+{time.monotonic() - t0:.0f}s")
        rogue_done.set()
        if roguing is not None:
            await roguing
        # The backlog drains at the control plane's pace (the Job controller and
        # kube-scheduler make a few pods a second here): wait while Jobs still
        # complete; --settle seconds without one completing ends the wait.
        deadline = time.monotonic() + args.settle
        next_report, done_before = 0.0, -1
        while time.monotonic() < deadline:
            observer.check_tasks()
            left = [j.key for j in jobs if not observer.completed(j.key)]
            if not left:
                break
            if len(jobs) - len(left) > done_before:
                done_before = len(jobs) - len(left)
                deadline = time.monotonic() + args.settle
            if time.monotonic() > next_report:
                say(f"waiting for {len(left)} Jobs to complete (e.g. {left[:3]})")
                next_report = time.monotonic() + 15
            await asyncio.sleep(1)
        await asyncio.sleep(1)  # the last decisions and watch events
        supervisor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await supervisor
        elapsed = time.monotonic() - t0
        ends, lost = observer.classify([j.key for j in jobs])
        violations = observer.violations + observer.unadmitted_pods()
        doubles = observer.doubles + observer.foreign_unsuspensions()
        gaps = sorted(b - a for a, b in itertools.pairwise(observer.samples))
        p95 = gaps[int(len(gaps) * 0.95)] if gaps else 0.0
        bypass_s, bypassed = observer.bypass()
    finally:
        rogue_done.set()
        if rogue_api is not None:
            await rogue_api.close()
        if supervisor is not None:
            supervisor.cancel()  # before the services are stopped: no restarts then
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
        await observer.stop()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(launcher.down, pipeline, quiet=True)
        await proxy.close()
        await api.close()
    replay = audit_replay(env, stack_dir)
    if not args.keep:
        stack(env, "down")

    peaks = ", ".join(
        f"{cq}/{r}: {format_quantity(v)}" for (cq, r), v in sorted(observer.peak.items())
    )
    say(
        f"{elapsed:.0f}s from the first Job; ends {ends}; peak usage {peaks}; "
        f"{len(observer.decisions)} decisions; Job watch relists {observer.job_relists}; "
        f"{len(observer.samples)} samples, 95th percentile gap {p95 * 1000:.0f}ms; "
        f"services that exited by themselves: {injector.crashes or 'none'}; "
        f"create calls {sum(tries)} for {len(tries)} Jobs"
    )
    if rogue is not None:
        say(
            f"rogue user ({args.rogue}): {len(rogue.tries)} tries in {ROGUE_NAMESPACE}, "
            f"{len(rogue.registry)} Jobs; accepted: {', '.join(rogue.accepted()) or 'none'}"
        )
        for line in rogue.summary():
            print(f"    {line}", flush=True)
    say(f"bypass: {bypass_s:.3g} GPU-seconds in {len(bypassed)} pods without an admission")
    for item in observer.restart_overlaps[:10]:
        say(f"restart overlap (kuota's own stop, issue #23): {item}")
    lists = (("over-admission", violations), ("lost", lost), ("double", doubles))
    for what, items in (*lists, ("bypass", bypassed)):
        for item in items[: 30 if what == "bypass" else 10]:
            say(f"{what}: {item}")
    sampled_ok = p95 <= 0.2
    if not sampled_ok:
        say(f"sampling too sparse: 95th percentile gap {p95 * 1000:.0f}ms > 200ms")
    preempted = observer.preempted()
    if not preempted:
        say("no preemption happened: the run did not exercise the preemption service")
    print(
        f"faults={len(injector.done)} jobs={len(jobs)} over_admissions={len(violations)} "
        f"lost={len(lost)} double_actuations={len(doubles)} replay={replay} "
        f"preempted={preempted} bypass_gpu_s={bypass_s:.3g} "
        f"restart_overlap_gpu_s={observer.restart_overlap_s:.3g}",
        flush=True,
    )
    ok = not violations and not lost and not doubles and replay == "identical" and sampled_ok
    ok = ok and preempted > 0 and (bypass_s == 0 or args.rogue == "admin")
    return 0 if ok else 1


async def rogue_setup(
    env: Mapping[str, str], admin: client.ApiClient, run_dir: Path, who: str
) -> client.ApiClient:
    """The rogue's client: its own ServiceAccount's token (``edit`` in its namespace),
    or, ``admin``, the stack's admin identity (which kuota's webhook trusts)."""
    if who == "admin":
        kcfg = client.Configuration()
        await config.load_kube_config(config_file=env["KUBECONFIG"], client_configuration=kcfg)
        return client.ApiClient(kcfg)
    await kubectl_apply(env, account_objects())
    api = await rogue_client(env["KUOTA_KUBECTL"], env["KUBECONFIG"], run_dir)
    batch = client.BatchV1Api(api)
    deadline = time.monotonic() + 20
    while True:  # the authorizer learns the new binding through a watch
        try:
            await batch.list_namespaced_job(ROGUE_NAMESPACE, limit=1)
            return api
        except ApiException as err:
            if err.status != 403 or time.monotonic() > deadline:
                await api.close()
                raise
            await asyncio.sleep(0.2)


def audit_replay(env: Mapping[str, str], stack_dir: Path) -> str:
    renv = {
        **{k: v for k, v in os.environ.items() if k not in STACK_VARS},
        "KUOTA_KAFKA_BOOTSTRAP": env["KUOTA_KAFKA_BOOTSTRAP"],
        "KUOTA_REDIS_URL": env["KUOTA_REDIS_URL"],
        "KUOTA_TOPIC_PREFIX": f"{RUN}.",
        "KUOTA_STACK_DIR": str(stack_dir),
    }
    t0 = time.monotonic()
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "kuota"), "audit", "replay"],
        env=renv,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = (done.stdout + done.stderr).strip().splitlines()
    say(f"kuota audit replay: exit {done.returncode} in {time.monotonic() - t0:.1f}s")
    for line in out[-12:]:
        print(f"    {line}", flush=True)
    return "identical" if done.returncode == 0 else "differs"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # The run's own clients see every fault too; their retries are not news.
    logging.basicConfig(level=logging.WARNING, format="[%(name)s] %(message)s")
    for noisy in ("aiokafka", "kuota.kube.watch", "chaos"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
