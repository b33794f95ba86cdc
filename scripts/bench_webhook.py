#!/usr/bin/env python3
"""Job creation through kuota-webhook with no ingest running (#23 item 7).

    .venv/bin/python scripts/bench_webhook.py [--jobs N] [--concurrency C]

Starts one ``kuota-webhook`` of its own (its certificates from
``scripts/webhook-certs`` in a temporary directory, free ports, no Kafka or
Redis setting) and no kuota-ingest at all, registers it for a namespace of its
own (``--match-label``), then creates N labelled, unsuspended Jobs through the
apiserver, C at a time, and prints: how many were stored suspended (all must
be), the creation latency (p50, p95, max) and the rate; then the same N
creations with the registration removed (the Jobs created suspended by the
client), so the webhook's share of a creation shows. The namespace, the
registration and the process are removed at the end. Needs the local stack
(``scripts/stack up``; the addresses from ``.stack/stack.env``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

REPO = Path(__file__).resolve().parent.parent
LABEL = "kuota.dev/bench-run"


def stack_env() -> dict[str, str]:
    out: dict[str, str] = {}
    path = Path(os.environ.get("KUOTA_STACK_DIR") or REPO / ".stack") / "stack.env"
    for line in path.read_text().splitlines() if path.is_file() else []:
        if line.startswith("export ") and "=" in line:
            k, _, v = line[len("export ") :].partition("=")
            out[k.strip()] = v.strip().strip("'\"")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def job(name: str, run: str, suspend: bool) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {LABEL: run, "kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": suspend,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }


async def create_all(
    batch: client.BatchV1Api, ns: str, run: str, prefix: str, n: int, c: int, suspend: bool
) -> tuple[list[float], int]:
    latencies: list[float] = []
    suspended = 0
    todo = iter(range(n))

    async def worker() -> None:
        nonlocal suspended
        for i in todo:
            t0 = time.perf_counter()
            created = await batch.create_namespaced_job(ns, job(f"{prefix}{i}", run, suspend))
            latencies.append(time.perf_counter() - t0)
            suspended += created.spec.suspend is True

    await asyncio.gather(*(worker() for _ in range(c)))
    return latencies, suspended


def report(what: str, latencies: list[float], suspended: int, wall: float) -> None:
    q = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else latencies * 19
    print(
        f"{what}: {len(latencies)} Jobs, {suspended} stored suspended; "
        f"latency p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"p95 {q[18] * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms; "
        f"{len(latencies) / wall:.0f} Jobs/s"
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    env = {**stack_env(), **os.environ}
    kubeconfig = env.get("KUBECONFIG", "")
    if not kubeconfig:
        print("bench_webhook: no KUBECONFIG (scripts/stack up)", file=sys.stderr)
        return 1
    run = uuid.uuid4().hex[:8]
    ns = f"bench-webhook-{run}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-webhook-"))
    out = subprocess.run(
        [str(REPO / "scripts/webhook-certs"), str(tmp / "certs")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    certs = dict(line.split("=", 1) for line in out.split())
    port, metrics = free_port(), free_port()
    hook_env = {k: v for k, v in os.environ.items() if not k.startswith("KUOTA_")}
    hook_env.update(
        KUBECONFIG=kubeconfig,
        KUOTA_WEBHOOK_PORT=str(port),
        KUOTA_WEBHOOK_HOST="127.0.0.1",
        KUOTA_METRICS_PORT=str(metrics),
        KUOTA_METRICS_HOST="127.0.0.1",
        KUOTA_WEBHOOK_CERT_FILE=certs["KUOTA_WEBHOOK_CERT_FILE"],
        KUOTA_WEBHOOK_KEY_FILE=certs["KUOTA_WEBHOOK_KEY_FILE"],
        KUOTA_JOB_LABEL_SELECTOR=f"{LABEL}={run}",
        KUOTA_LOG_LEVEL="WARNING",
    )
    log = (tmp / "webhook.log").open("wb")
    proc = subprocess.Popen(
        [str(REPO / ".venv/bin/kuota-webhook")], env=hook_env, stdout=log, stderr=log
    )
    name = f"kuota-bench-{run}"
    register = [str(REPO / "scripts/webhook-register"), "--name", name]
    api = await config.new_client_from_config(config_file=kubeconfig)
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    try:
        ingest = subprocess.run(["pgrep", "-f", "kuota-ingest"], capture_output=True, text=True)
        print(
            f"kuota-ingest processes on this machine: {len(ingest.stdout.split())} "
            "(none belongs to this run: its Jobs reach no ingest)"
        )
        await core.create_namespace({"metadata": {"name": ns, "labels": {LABEL: run}}})
        await asyncio.sleep(1.0)  # the webhook lists the new namespace
        subprocess.run(
            [
                *register,
                "--url",
                f"https://127.0.0.1:{port}/mutate-batch-v1-job",
                "--ca",
                certs["KUOTA_WEBHOOK_CA_FILE"],
                "--match-label",
                f"{LABEL}={run}",
            ],
            check=True,
            capture_output=True,
            env={**env},
        )
        deadline = time.monotonic() + 20
        while True:  # the apiserver picks the registration up asynchronously
            probe = await batch.create_namespaced_job(ns, job("probe", run, False), dry_run="All")
            if probe.spec.suspend:
                break
            if time.monotonic() > deadline:
                print("bench_webhook: the webhook was not called within 20s", file=sys.stderr)
                return 1
            await asyncio.sleep(0.2)
        t0 = time.perf_counter()
        lat, suspended = await create_all(batch, ns, run, "w", args.jobs, args.concurrency, False)
        report("through kuota-webhook, no ingest", lat, suspended, time.perf_counter() - t0)
        subprocess.run([*register, "--delete"], check=True, capture_output=True, env={**env})
        await asyncio.sleep(2.0)
        t0 = time.perf_counter()
        lat, suspended = await create_all(batch, ns, run, "b", args.jobs, args.concurrency, True)
        report("no webhook (created suspended)", lat, suspended, time.perf_counter() - t0)
        print(f"concurrency {args.concurrency}; the same apiserver, kwok stack, this machine")
    except ApiException as e:
        print(f"bench_webhook: {e.status} {e.reason}: {e.body}", file=sys.stderr)
        return 1
    finally:
        subprocess.run([*register, "--delete"], capture_output=True, env={**env})
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        log.close()
        with contextlib.suppress(ApiException):
            await core.delete_namespace(ns)
        await api.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
