#!/usr/bin/env python3
"""The backstop's latency: a Job unsuspended without admission -> suspended again.

    .venv/bin/python scripts/bench_resuspend.py [--jobs 50] [--gap 0.2] [--keep]

Against the local stack (``scripts/stack up``) it starts a pipeline of its own
(the four services through ``scripts/kuota-services``' Python API, named
``bench-<hex>``, as ``bench_e2e.py`` does) and a ClusterQueue held with
``stopPolicy: Hold``, so no Job is ever admitted. It creates ``--jobs`` Jobs,
suspended and with ``parallelism: 0`` (kuota's path is measured, not the Job
controller's), waits until each waits Inadmissible, then, one Job at a time
(``--gap`` seconds apart, a quiet stack), unsuspends it as the stack's admin
``kuota-admin`` — whom the webhook trusts, as it trusts kuota's own identity:
the door lets it through, so only the backstop can stop it. A Job's latency
runs from the watch event that shows it unsuspended to the first watch event
that shows it suspended again (both on this script's watch, this clock):
apiserver -> kuota-ingest -> journal -> kuota-admission (a ``Suspended``
decision) -> kuota-actuator (one merge PATCH) -> apiserver -> the watch.

Then the admission phase releases the hold: every Job is admitted and
unsuspended by the actuator, which is now journaled too (``spec.suspend`` is
in ingest's digest). The journal is read back and each Job upsert that differs
from the Job's previous journaled upsert only in ``spec.suspend`` is counted:
those records are what this change adds to the journal (before it, ingest
skipped them): one per admission (the actuator's unsuspend) and one per stop.
The last line printed is

    resuspend_p50_ms=N p99_ms=N max_ms=N jobs=N extra_records_per_admission=N
    extra_bytes_per_admission=N extra_journal_share=N
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "shared"))

from bench_e2e import (  # noqa: E402 - after the path is set
    cleanup,
    job,
    kubectl_apply,
    say,
    setup_objects,
    start_run,
)
from bench_e2e_preempt import pct  # noqa: E402
from bench_e2e_report import wait_journaled, wait_pending  # noqa: E402

from kuota.kube.translate import fold_digest  # noqa: E402


def suspend_only(prev: dict[str, Any], cur: dict[str, Any]) -> bool:
    """Whether two journaled manifests of a Job differ only in ``spec.suspend``
    (and ``metadata.generation``, which a suspend flip moves)."""
    a, b = copy.deepcopy(prev), copy.deepcopy(cur)
    if (a.get("spec") or {}).get("suspend") is (b.get("spec") or {}).get("suspend"):
        return False
    b.setdefault("spec", {})["suspend"] = (a.get("spec") or {}).get("suspend")
    generation = (a.get("metadata") or {}).get("generation")
    b.setdefault("metadata", {})["generation"] = generation
    return fold_digest("Job", a) == fold_digest("Job", b)


async def journal_volume(kafka: Any, topic: str, since: int = 0) -> dict[str, int]:
    """Records and bytes of the journal from offset ``since``, and the Job upserts
    that change only ``spec.suspend`` (what the backstop adds)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from kuota.events.schema import ObjectUpserted, parse_event

    consumer = AIOKafkaConsumer(isolation_level="read_committed", **kafka.client_kwargs())
    await consumer.start()
    out = {"records": 0, "bytes": 0, "job_upserts": 0, "extra_records": 0, "extra_bytes": 0}
    out["created_bytes"] = 0  # the first upsert of each Job: what was journaled before
    last: dict[str, dict[str, Any]] = {}
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, 0)
        idle = 0
        while idle < 3:  # the last offsets may be transaction markers, never returned
            records = (await consumer.getmany(tp, timeout_ms=500)).get(tp, [])
            idle = 0 if records else idle + 1
            if records and records[-1].offset >= end - 1:
                idle = 3
            for record in records:
                size = len(record.value or b"")
                counted = record.offset >= since
                if counted:
                    out["records"] += 1
                    out["bytes"] += size
                with contextlib.suppress(ValueError):
                    e = parse_event(record.value or b"")
                    if not (isinstance(e, ObjectUpserted) and e.object.get("kind") == "Job"):
                        continue
                    md = e.object.get("metadata") or {}
                    key = f"{md.get('namespace')}/{md.get('name')}"
                    prev = last.get(key)
                    last[key] = e.object
                    if not counted:
                        continue
                    out["job_upserts"] += 1
                    if prev is None:
                        out["created_bytes"] += size
                    elif suspend_only(prev, e.object):
                        out["extra_records"] += 1
                        out["extra_bytes"] += size
        return out
    finally:
        await consumer.stop()


async def bench(args: argparse.Namespace) -> int:
    from kubernetes_asyncio import client

    from kuota.kube.watch import Resource, Watcher

    launcher, env, run, pipeline, kafka, api = await start_run("bench_resuspend")
    # name -> wall-clock times the watch saw it unsuspended / suspended again
    unsuspended: dict[str, float] = {}
    resuspended: dict[str, float] = {}
    running_now: dict[str, bool] = {}
    seen = asyncio.Event()
    try:
        say(f"bench_resuspend: {run}: {args.jobs} Jobs, held ClusterQueue")
        objs = setup_objects(run, held=True)
        await kubectl_apply(env, objs)
        t = time.monotonic()
        await asyncio.to_thread(launcher.up, pipeline, quiet=True)
        say(f"bench_resuspend: services up in {time.monotonic() - t:.1f}s")
        await wait_journaled(kafka, f"{run}.journal", "LocalQueue", "bench", 60)

        async def watch() -> None:
            w = Watcher(api, Resource("Job", f"/apis/batch/v1/namespaces/{run}/jobs"))
            async for change in w.changes():
                now = time.time()
                if change.type != "UPSERT":
                    continue
                name = change.object["metadata"]["name"]
                running = (change.object.get("spec") or {}).get("suspend") is False
                if running and not running_now.get(name):
                    unsuspended.setdefault(name, now)
                elif not running and running_now.get(name) and name in unsuspended:
                    resuspended.setdefault(name, now)
                running_now[name] = running
                seen.set()

        watcher = asyncio.create_task(watch())
        batch = client.BatchV1Api(api)
        names = []
        for i in range(args.jobs):
            manifest = job(run, i, None)
            manifest["spec"]["suspend"] = True
            await batch.create_namespaced_job(run, manifest)
            names.append(manifest["metadata"]["name"])
        pending = await wait_pending(kafka, f"{run}.decisions", args.jobs, 120)
        if pending < args.jobs:
            raise SystemExit(f"bench_resuspend: only {pending} of {args.jobs} Jobs pending")
        load = os.getloadavg()[0]
        request_ms: list[float] = []
        for name in names:
            sent = time.time()
            await batch.patch_namespaced_job(name, run, {"spec": {"suspend": False}})
            deadline = time.monotonic() + args.timeout
            while name not in resuspended and time.monotonic() < deadline:
                seen.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(seen.wait(), 0.5)
            if name in resuspended:
                request_ms.append((resuspended[name] - sent) * 1000)
            await asyncio.sleep(args.gap)
        latencies = sorted(
            (resuspended[n] - unsuspended[n]) * 1000 for n in names if n in resuspended
        )
        request_ms.sort()
        missed = [n for n in names if n not in resuspended]
        if missed:
            say(f"bench_resuspend: {len(missed)} Jobs never suspended again: {missed[:5]}")
        if latencies:
            say(
                f"bench_resuspend: watch unsuspend -> re-suspend p50 "
                f"{statistics.median(latencies):.0f} ms, p99 {pct(latencies, 0.99):.0f} ms; "
                f"from the admin's PATCH request p50 {statistics.median(request_ms):.0f} ms, "
                f"p99 {pct(request_ms, 0.99):.0f} ms (load average {load:.2f})"
            )
        bypass = await journal_volume(kafka, f"{run}.journal")
        say(
            f"bench_resuspend: bypass phase journal: {bypass['records']} records, "
            f"{bypass['bytes']} bytes; Job upserts changing only spec.suspend: "
            f"{bypass['extra_records']} ({bypass['extra_bytes']} bytes: the admin's unsuspends "
            "and the actuator's suspends)"
        )

        # The admission phase: release the hold; the actuator unsuspends every Job.
        from aiokafka import AIOKafkaConsumer, TopicPartition

        probe = AIOKafkaConsumer(**kafka.client_kwargs())
        await probe.start()
        tp = TopicPartition(f"{run}.journal", 0)
        since = (await probe.end_offsets([tp]))[tp]
        await probe.stop()
        released = [copy.deepcopy(o) for o in objs if o["kind"] == "ClusterQueue"]
        for cq in released:
            cq["spec"]["stopPolicy"] = "None"
        await kubectl_apply(env, released)
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            if all(running_now.get(n) for n in names):
                break
            seen.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(seen.wait(), 0.5)
        started = sum(1 for n in names if running_now.get(n))
        await asyncio.sleep(2.0)  # ingest journals the last unsuspends
        admit = await journal_volume(kafka, f"{run}.journal", since)
        per = max(1, started)
        share = admit["extra_bytes"] / admit["bytes"] if admit["bytes"] else 0.0
        created = bypass["created_bytes"] / len(names)
        say(
            f"bench_resuspend: admission phase: {started} of {len(names)} Jobs started; "
            f"journal {admit['records']} records, {admit['bytes']} bytes, of which "
            f"{admit['extra_records']} Job upserts change only spec.suspend "
            f"({admit['extra_bytes']} bytes, {share:.0%} of the phase's journal bytes); a "
            f"Job's create upsert is {created:.0f} bytes, so a created-and-admitted Job "
            f"journals {created + admit['extra_bytes'] / per:.0f} bytes of Job upserts "
            f"instead of {created:.0f}"
        )
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        if latencies:
            print(
                f"resuspend_p50_ms={statistics.median(latencies):.0f} "
                f"p99_ms={pct(latencies, 0.99):.0f} max_ms={latencies[-1]:.0f} "
                f"jobs={len(latencies)} "
                f"extra_records_per_admission={admit['extra_records'] / per:.2f} "
                f"extra_bytes_per_admission={admit['extra_bytes'] / per:.0f} "
                f"extra_journal_share={share:.2f}"
            )
        return 0 if not missed and latencies and started == len(names) else 1
    finally:
        if not args.keep:
            await asyncio.to_thread(launcher.down, pipeline, quiet=True)
            await cleanup(api, run, kafka, env)
        else:
            say(f"bench_resuspend: kept pipeline {run} (scripts/kuota-services has its pids)")
        await api.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50, help="Jobs to unsuspend (50)")
    parser.add_argument(
        "--gap", type=float, default=0.2, help="seconds between one re-suspend and the next"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="wait per Job (30s)")
    parser.add_argument("--keep", action="store_true", help="leave the pipeline running")
    args = parser.parse_args()
    if args.jobs <= 0:
        parser.error("--jobs must be positive")
    try:
        return asyncio.run(bench(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
