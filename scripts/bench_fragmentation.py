#!/usr/bin/env python3
"""Fragmentation: one mixed DRA trace through kuota and through Kueue v0.19.2 (issue #17).

    .venv/bin/python scripts/bench_fragmentation.py [--seed 1] [--jobs 48] [--span 45]
        [--nodes 8] [--run-min 10] [--run-max 40] [--only kuota|kueue] [--trace]

The trace (``bench_fragmentation_trace.generate``, the same seed the same
trace) mixes whole GPUs (1, 2 and 4 per pod), 1g.10gb and 3g.40gb MIG slices
(shared counters) and 2-pod gangs of 2 GPUs per pod, submitted over ``--span``
seconds and running 10-40 s each as kwok pods. Each system gets the same
hardware, ``--nodes`` kwok nodes of 4 GPUs with real ResourceSlices, and one
ClusterQueue whose ``gpu-memory`` quota is exactly the cluster's:

- **kuota** (first): its four services on the local stack (``scripts/stack``,
  ``scripts/kuota-services``' Python API), started as the e2e harness starts
  them (``tests/e2e/e2e_pipeline.py``: a pipeline of its own, its topics
  recorded, its objects labelled and cleaned up), with the Kueue stack's
  Configuration (``kueue_diff.kueue_configuration``) for a hardware id of its
  own. It places every pod on a node before admitting and pins the pods there.
- **Kueue**: on the Kueue stack (``scripts/kueue-stack``), as the side-by-side
  harness plays a scenario (``tests/kueue/kueue_diff.py``: its DeviceClasses
  and Configuration, Jobs created through Kueue's webhook). It admits on quota.

While the trace plays, watches of the run's namespace record every change of
its Jobs, Pods, ResourceClaims and Events; the figures
(``bench_fragmentation_figures``, where each is defined) are computed from
that recording alone. Lines printed: per system its figures, the means, the
goals met or not, then the last line

    jobs=N kuota_unplaceable_job_s=… kueue_unplaceable_job_s=… kuota_gpu_util_pct=…
    kueue_gpu_util_pct=… kuota_wait_p95_s=… kueue_wait_p95_s=…  (one line)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [
    str(REPO / "scripts"),
    str(REPO / "tests" / "kueue"),
    str(REPO / "tests" / "e2e"),
    str(REPO / "shared"),
]

from bench_fragmentation_figures import (  # noqa: E402
    EventObs,
    Figures,
    JobObs,
    PodObs,
    PodState,
    Recording,
    device_shares,
    dra_reason,
    figures,
    goals,
    gpus_of,
    last_line,
    mean_lines,
    pod_state,
    summary,
)
from bench_fragmentation_trace import (  # noqa: E402
    RUN_LABEL,
    TraceJob,
    generate,
    hardware,
    job_manifest,
    node_names,
    offered_gpu_seconds,
    queue_objects,
)

SETTLE_S = 420.0  # after the last submission, for every Job to finish
JOB_NAME = "batch.kubernetes.io/job-name"


def say(text: str) -> None:
    print(f"bench_fragmentation: {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- recording


def _done(job: dict[str, Any]) -> bool:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return True
    return False


def _record(api: Any, ns: str, rec: Recording, changed: asyncio.Event) -> list[asyncio.Task[None]]:
    """Watches of the namespace's Jobs, Pods, Events and ResourceClaims into ``rec``."""
    from kuota.kube.watch import Resource, Watcher

    def key(obj: dict[str, Any]) -> str:
        md = obj.get("metadata") or {}
        return f"{md.get('namespace')}/{md.get('name')}"

    async def jobs() -> None:
        w = Watcher(api, Resource("Job", f"/apis/batch/v1/namespaces/{ns}/jobs"))
        async for ch in w.changes():
            if ch.type == "UPSERT":
                spec = ch.object.get("spec") or {}
                rec.jobs.append(
                    JobObs(time.time(), key(ch.object), bool(spec.get("suspend")), _done(ch.object))
                )
                changed.set()

    async def pods() -> None:
        w = Watcher(api, Resource("Pod", f"/api/v1/namespaces/{ns}/pods"))
        async for ch in w.changes():
            labels = (ch.object.get("metadata") or {}).get("labels") or {}
            job = f"{ns}/{labels.get(JOB_NAME, '')}"
            state = pod_state(ch.object)
            if ch.type == "DELETE":
                state = PodState(state.node, state.done, False, gone=True)
            rec.pods.append(PodObs(time.time(), key(ch.object), job, state))

    async def events() -> None:
        w = Watcher(api, Resource("Event", f"/api/v1/namespaces/{ns}/events"))
        async for ch in w.changes():
            e = ch.object
            inv = e.get("involvedObject") or {}
            failed = ch.type == "UPSERT" and e.get("reason") == "FailedScheduling"
            if failed and inv.get("kind") == "Pod":
                pod = f"{ns}/{inv.get('name')}"
                rec.events.append(EventObs(time.time(), pod, e.get("message") or ""))

    async def claims() -> None:
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        w = Watcher(api, Resource("ResourceClaim", path))
        async for ch in w.changes():
            if ch.type != "UPSERT":
                continue
            alloc = (ch.object.get("status") or {}).get("allocation") or {}
            results = (alloc.get("devices") or {}).get("results") or []
            owners = (ch.object.get("metadata") or {}).get("ownerReferences") or []
            for o in owners:
                if o.get("kind") == "Pod" and results:
                    devs = rec.claims.setdefault(f"{ns}/{o.get('name')}", set())
                    devs.update((r["driver"], r["pool"], r["device"]) for r in results)

    return [asyncio.create_task(f(), name=f.__name__) for f in (jobs, pods, events, claims)]


async def play(
    api: Any, ns: str, trace: Sequence[TraceJob], labels: dict[str, str], system: str
) -> Recording:
    """Create the trace's Jobs at their times while the watches record; until every
    Job finished (or ``SETTLE_S`` after the last submission)."""
    from kubernetes_asyncio import client

    rec = Recording()
    changed = asyncio.Event()
    tasks = _record(api, ns, rec, changed)
    await asyncio.sleep(1.0)  # the watches' first LIST
    batch = client.BatchV1Api(api)
    want = {f"{ns}/{j.name}" for j in trace}
    failures: list[str] = []

    async def create(j: TraceJob) -> None:
        k = f"{ns}/{j.name}"
        rec.created[k] = time.time()
        try:
            resp = await batch.create_namespaced_job(
                ns, job_manifest(j, ns, labels), _preload_content=False
            )
            resp.release()
        except Exception as err:  # counted and reported; the run goes on
            failures.append(f"{k}: {err}")
            rec.created.pop(k, None)
            want.discard(k)

    def finished() -> set[str]:
        return {o.job for o in rec.jobs if o.done}

    try:
        t0 = time.time()
        creations = []
        for j in sorted(trace, key=lambda j: j.submit_at):
            delay = t0 + j.submit_at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            creations.append(asyncio.create_task(create(j)))
        await asyncio.gather(*creations)
        if failures:
            say(f"{system}: {len(failures)} creations failed, e.g. {failures[0]}")
        deadline = time.monotonic() + SETTLE_S
        next_note = time.monotonic() + 15
        while not want <= finished() and time.monotonic() < deadline:
            for t in tasks:
                if t.done() and not t.cancelled() and t.exception() is not None:
                    raise RuntimeError(f"watch {t.get_name()} failed: {t.exception()!r}")
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 1.0)
            if time.monotonic() >= next_note:
                next_note += 15
                running = {o.job for o in rec.jobs if not o.suspended}
                say(
                    f"{system}: {time.time() - t0:.0f}s: {len(rec.created)} created, "
                    f"{len(running)} admitted, {len(finished() & want)} finished"
                )
        if not want <= finished():
            say(f"{system}: {len(want - finished())} Jobs unfinished after {SETTLE_S:.0f}s")
        await asyncio.sleep(1.0)  # the last pods' and claims' changes
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
    return rec


async def wait_nodes_ready(api: Any, names: Sequence[str], timeout: float = 90) -> None:
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while True:
        ready = 0
        for name in names:
            with contextlib.suppress(ApiException):
                node = await core.read_node(name)
                conds = {c.type: c.status for c in node.status.conditions or []}
                ready += conds.get("Ready") == "True"
        if ready == len(names):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(names) - ready} of {len(names)} kwok nodes not Ready")
        await asyncio.sleep(0.5)


# ---------------------------------------------------------------- kuota


async def kuota_side(trace: Sequence[TraceJob], nodes: int) -> tuple[Recording, list[Any]]:
    import yaml
    from e2e_hardware import hardware as e2e_hardware
    from e2e_pipeline import (
        Run,
        _cleanup,
        _record_topic,
        kubectl_apply,
        load_launcher,
        wait_journaled,
    )
    from kubernetes_asyncio import client, config
    from kueue_diff import driver_of, kueue_configuration

    from kuota.bus.settings import KafkaSettings
    from kuota.events.schema import ObjectUpserted, parse_decision, parse_event
    from kuota.kinds import PIPELINE_LABEL

    launcher = load_launcher()
    run_id = f"bf-{uuid.uuid4().hex[:6]}"
    driver = driver_of(run_id)
    env = dict(os.environ)
    for k, v in launcher.stack_env().items():
        env.setdefault(k, v)
    for var in ("KUOTA_KAFKA_BOOTSTRAP", "KUOTA_REDIS_URL", "KUBECONFIG", "KUOTA_KUBECTL"):
        if not env.get(var):
            raise SystemExit(f"bench_fragmentation: {var} unset; start the stack: scripts/stack up")
    tmp = Path(launcher.stack_dir()) / "run" / run_id
    tmp.mkdir(parents=True, exist_ok=True)
    config_file = tmp / "kueue-config.yaml"
    config_file.write_text(yaml.safe_dump(kueue_configuration(run_id)))
    metrics_ports, webhook_port = launcher.free_ports()  # distinct ports
    pipeline = launcher.Pipeline(
        name=run_id,
        topic_prefix=f"{run_id}.",
        ports=metrics_ports,
        webhook_port=webhook_port,
        config_file=str(config_file),
        config_map=None,
        env={"KUBECONFIG": env["KUBECONFIG"], "KUOTA_STATUS_INTERVAL": "0.5"},
    )
    cfg = client.Configuration()
    await config.load_kube_config(config_file=env["KUBECONFIG"], client_configuration=cfg)
    api = client.ApiClient(cfg)
    labels = {PIPELINE_LABEL: run_id, RUN_LABEL: run_id}
    classes = [
        o
        for o in e2e_hardware(run_id, driver)
        if o["metadata"]["name"] in (f"gpu-{run_id}", f"mig-{run_id}")
    ]
    hw = hardware(run_id, run_id, driver, labels, nodes) + classes
    run = Run(
        id=run_id,
        driver=driver,
        pipeline=pipeline,
        api=api,
        env=env,
        infra=[],
        kafka=KafkaSettings.from_env(
            {
                "KUOTA_KAFKA_BOOTSTRAP": env["KUOTA_KAFKA_BOOTSTRAP"],
                "KUOTA_TOPIC_PREFIX": f"{run_id}.",
            }
        ),
    )
    try:
        t = time.monotonic()
        applied = await kubectl_apply(run, hw)
        await asyncio.to_thread(launcher.up, pipeline, quiet=True)
        run.tasks = [
            asyncio.create_task(_record_topic(run, f"{run_id}.journal", parse_event, run.journal)),
            asyncio.create_task(
                _record_topic(run, f"{run_id}.decisions", parse_decision, run.decisions)
            ),
        ]
        await wait_journaled(run, applied)
        names = set(node_names(run_id, nodes))

        def journaled(kind: str) -> set[str]:
            return {
                str((e.object.get("metadata") or {}).get("name"))
                for _, e in run.journal
                if isinstance(e, ObjectUpserted) and e.object.get("kind") == kind
            }

        await run.until(lambda: names <= journaled("Node"), "ingest journals the Nodes", 90)
        await run.until(lambda: journaled("Configuration"), "ingest journals the Configuration")
        await wait_nodes_ready(api, sorted(names))
        setup = queue_objects(run_id, run_id, driver, run_id, labels, nodes)
        await wait_journaled(run, await kubectl_apply(run, setup))
        up_s = time.monotonic() - t
        say(f"kuota: {run_id}: services, {nodes} nodes and queues up in {up_s:.0f}s")
        rec = await play(api, run_id, trace, labels, "kuota")
        ds = [d for _, d in run.decisions if (d.workload or "").startswith(f"{run_id}/")]
        waits = [d for d in ds if d.type == "Inadmissible" and d.reason == "NoNodePlacement"]
        say(
            f"kuota: {sum(d.type == 'Admitted' for d in ds)} admissions, {len(waits)} "
            f"NoNodePlacement waits of {len({d.workload for d in waits})} Jobs"
            + (f", e.g. {waits[0].workload}: {waits[0].message}" if waits else "")
        )
        return rec, hw
    finally:
        for task in run.tasks:
            task.cancel()
        for task in run.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        try:
            await asyncio.to_thread(launcher.down, pipeline, quiet=True)
        finally:
            await _cleanup(run)
            await api.close()
            config_file.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                tmp.rmdir()


# ---------------------------------------------------------------- Kueue


async def kueue_side(trace: Sequence[TraceJob], nodes: int) -> tuple[Recording, list[Any]]:
    from bench_e2e_preempt import delete_namespace
    from e2e_hardware import hardware as e2e_hardware
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException
    from kueue_diff import KUEUE, LABEL, KueueStack, _api, _wait_active, driver_of, kubectl_apply

    stack = KueueStack.read()
    hw_id = stack.hw
    driver = driver_of(hw_id)
    run = f"bf{uuid.uuid4().hex[:6]}"
    labels = {LABEL: run, RUN_LABEL: run}
    classes = [
        o
        for o in e2e_hardware(hw_id, driver)
        if o["metadata"]["name"] in (f"gpu-{hw_id}", f"mig-{hw_id}")
    ]
    hw = hardware(run, run, driver, labels, nodes)
    api = await _api(stack)
    try:
        t = time.monotonic()
        await kubectl_apply(stack, hw + classes)
        await wait_nodes_ready(api, node_names(run, nodes))
        await kubectl_apply(stack, queue_objects(run, hw_id, driver, run, labels, nodes))
        await _wait_active(api, [run])
        say(f"kueue: {run}: {nodes} nodes and queues up in {time.monotonic() - t:.0f}s")
        rec = await play(api, run, trace, labels, "kueue")
        return rec, hw
    finally:
        await delete_namespace(api, run, timeout=120)
        co = client.CustomObjectsApi(api)
        selector = f"{LABEL}={run}"
        for plural in ("clusterqueues", "resourceflavors"):
            with contextlib.suppress(ApiException):
                await co.delete_collection_cluster_custom_object(
                    *KUEUE, plural, label_selector=selector
                )
        with contextlib.suppress(ApiException):
            await client.ResourceV1Api(api).delete_collection_resource_slice(
                label_selector=selector
            )
        with contextlib.suppress(ApiException):
            await client.CoreV1Api(api).delete_collection_node(label_selector=selector)
        await api.close()


# ---------------------------------------------------------------- main


def measure(system: str, rec: Recording, hw: list[Any]) -> Figures:
    f = figures(rec, device_shares(hw), gpus_of(hw))
    dra = [e for e in rec.events if dra_reason(e.message)]
    if dra:
        pods = len({e.pod for e in dra})
        say(
            f"{system}: {len(dra)} DRA FailedScheduling events of {pods} pods, e.g. {dra[0].pod}: "
            f"{dra[0].message}"
        )
    print(summary(system, f), flush=True)
    return f


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=48)
    ap.add_argument("--span", type=float, default=45.0, help="seconds over which Jobs arrive")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--run-min", type=int, default=10)
    ap.add_argument("--run-max", type=int, default=40)
    ap.add_argument("--only", choices=("kuota", "kueue"), default=None)
    ap.add_argument("--trace", action="store_true", help="print the trace only (no stack)")
    args = ap.parse_args(argv)
    trace = generate(args.seed, args.jobs, args.span, (args.run_min, args.run_max))
    gpus = args.nodes * 4
    say(
        f"seed {args.seed}: {len(trace)} Jobs over {args.span:g}s on {args.nodes} nodes "
        f"({gpus} GPUs): {offered_gpu_seconds(trace):.0f} GPU-s offered, "
        f"{offered_gpu_seconds(trace) / gpus:.0f}s of the whole cluster"
    )
    if args.trace:
        for j in trace:
            print(f"{j.submit_at:6.1f}s {j.name} {j.shape.name} run {j.run_for}s")
        return 0
    out: dict[str, Figures] = {}
    for system, side in (("kuota", kuota_side), ("kueue", kueue_side)):
        if args.only in (None, system):
            rec, hw = asyncio.run(side(trace, args.nodes))
            out[system] = measure(system, rec, hw)
    if len(out) < 2:
        return 0
    for line in [*mean_lines(out["kuota"], out["kueue"]), *goals(out["kuota"], out["kueue"])]:
        print(line, flush=True)
    print(last_line(len(trace), out["kuota"], out["kueue"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
