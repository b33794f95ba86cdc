"""What ``scripts/bench_e2e.py`` measures besides latency: CPU per process, the
apiserver's own figures, the actuator's counters, the per-stage breakdown from
Kafka record timestamps, and the waits on the journal and the decisions.

Imported by ``bench_e2e.py`` (same directory, so on ``sys.path`` when run as a
script); it needs ``shared/`` on ``sys.path`` too, which ``bench_e2e.main`` adds.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from pathlib import Path
from typing import Any


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used (None if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def sched(pid: int) -> tuple[float, float] | None:
    """Seconds a process's threads ran and waited for a CPU (runqueue), from schedstat."""
    ran = waited = 0.0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (task / "schedstat").read_text().split()
                ran += int(fields[0]) / 1e9
                waited += int(fields[1]) / 1e9
    except OSError:
        return None
    return ran, waited


def sched_table(before: dict[str, tuple[float, float]], pids: dict[str, int]) -> str:
    """Per process: CPU time, and time runnable but waiting for a CPU, in the window."""
    parts = []
    for name, pid in pids.items():
        now = sched(pid)
        if now is None or name not in before:
            continue
        ran, waited = now[0] - before[name][0], now[1] - before[name][1]
        if ran >= 0.05:
            parts.append(f"{name} ran {ran:.1f}s, waited {waited:.1f}s")
    return "; ".join(parts)


# Operators of other kinds (the training-operator, KubeRay) run on both stacks
# when asked for; they queue nothing, so no figure counts them.
OPERATORS = frozenset({"training", "kuberay"})


def stack_pids(stack: Path) -> dict[str, int]:
    """The stack's own processes (kube-apiserver, etcd, ...) from ``<stack>/run/*.pid``,
    without the ``OPERATORS``."""
    out: dict[str, int] = {}
    for path in sorted((stack / "run").glob("*.pid")):
        if path.stem in OPERATORS:
            continue
        with contextlib.suppress(OSError, ValueError):
            out[path.stem] = int(path.read_text().split()[0])
    return out


def cpu_table(before: dict[str, float], pids: dict[str, int], wall: float) -> str:
    """CPU used in the window per process, as seconds and share of one core."""
    parts = []
    for name, pid in pids.items():
        now = cpu_seconds(pid)
        if now is None or name not in before:
            continue
        used = now - before[name]
        parts.append((used, f"{name} {used:.1f}s ({100 * used / max(wall, 1e-9):.0f}%)"))
    return ", ".join(text for _, text in sorted(parts, reverse=True))


async def apiserver_figures(api: Any) -> dict[str, float]:
    """Cumulative apiserver figures: seconds and counts of Job POST / PATCH, the webhook's
    share, and every request served (sum, count) — diffed around the run."""
    out: dict[str, float] = {}
    try:
        resp = await api.call_api(
            "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False
        )
        text = (await resp.read()).decode()
        resp.release()
    except Exception:  # figures are a nicety; the run goes on without them
        return out
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        try:
            v = float(value)
        except ValueError:
            continue
        if name.startswith("apiserver_request_total{"):
            out["requests"] = out.get("requests", 0.0) + v
        elif name.startswith("apiserver_admission_webhook_admission_duration_seconds_"):
            if 'operation="CREATE"' in name and name.split("{")[0].endswith(("_sum", "_count")):
                key = "webhook_" + name.split("{")[0].rsplit("_", 1)[1]
                out[key] = out.get(key, 0.0) + v
        elif name.startswith("apiserver_request_duration_seconds_") and 'resource="jobs"' in name:
            if 'subresource=""' not in name:
                continue
            for verb in ("POST", "PATCH"):
                if f'verb="{verb}"' in name:
                    kind = name.split("{")[0].rsplit("_", 1)[1]
                    if kind in ("sum", "count"):
                        key = f"{verb}_{kind}"
                        out[key] = out.get(key, 0.0) + v
    return out


def apiserver_summary(before: dict[str, float], after: dict[str, float], wall: float) -> str:
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}

    def mean_ms(what: str) -> str:
        n = d.get(f"{what}_count", 0.0)
        return f"{1000 * d.get(f'{what}_sum', 0.0) / n:.0f} ms x {n:.0f}" if n else "-"

    return (
        f"{d.get('requests', 0.0) / max(wall, 1e-9):.0f} requests/s served (all clients); "
        f"Job create {mean_ms('POST')} (of which the mutating webhook {mean_ms('webhook')}), "
        f"Job PATCH {mean_ms('PATCH')} (server-side means; other pipelines' requests included)"
    )


def scrape(port: int) -> dict[str, float]:
    """The actuator's counters that tell where its time went (name{labels} -> value)."""
    import urllib.request

    wanted = (
        "kuota_actuation_retries_total",
        "kuota_actuator_kube_events_total",
        "kuota_actuator_events_dropped_total",
        "kuota_actuation_latency_seconds_sum",
        "kuota_actuation_latency_seconds_count",
        "kuota_actuator_decisions_total",
        "kuota_actuator_api_request_seconds_sum",
        "kuota_actuator_api_request_seconds_count",
    )
    out: dict[str, float] = {}
    url = f"http://127.0.0.1:{port}/metrics"
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(wanted):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
    return out


async def wait_journaled(kafka: Any, journal: str, kind: str, name: str, timeout: float) -> None:
    """Until the journal shows the object (the pipeline can place Jobs in it)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from kuota.events.schema import ObjectUpserted, parse_event

    consumer = AIOKafkaConsumer(isolation_level="read_committed", **kafka.client_kwargs())
    await consumer.start()
    try:
        tp = TopicPartition(journal, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for record in (await consumer.getmany(tp, timeout_ms=200)).get(tp, []):
                with contextlib.suppress(ValueError):
                    e = parse_event(record.value or b"")
                    if (
                        isinstance(e, ObjectUpserted)
                        and e.object.get("kind") == kind
                        and (e.object.get("metadata") or {}).get("name") == name
                    ):
                        return
        raise SystemExit(f"bench_e2e: {kind} {name} not journaled within {timeout:.0f}s")
    finally:
        await consumer.stop()


async def wait_pending(kafka: Any, decisions: str, want: int, timeout: float) -> int:
    """Until ``want`` workloads have an Inadmissible decision (the ClusterQueue is held)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from kuota.events.schema import parse_decision

    consumer = AIOKafkaConsumer(isolation_level="read_committed", **kafka.client_kwargs())
    await consumer.start()
    pending: set[str] = set()
    try:
        tp = TopicPartition(decisions, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while len(pending) < want and time.monotonic() < deadline:
            for record in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                with contextlib.suppress(ValueError):
                    d = parse_decision(record.value or b"")
                    if d.type == "Inadmissible" and d.workload:
                        pending.add(d.workload)
        return len(pending)
    finally:
        await consumer.stop()


async def stage_breakdown(
    kafka: Any, run: str, created: dict[str, float], unsuspended: dict[str, float]
) -> str:
    """Median time per stage, from the Kafka records' timestamps (producer clocks)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from kuota.events.schema import ObjectUpserted, parse_decision, parse_event

    journaled: dict[str, float] = {}
    decided: dict[str, float] = {}
    consumer = AIOKafkaConsumer(isolation_level="read_committed", **kafka.client_kwargs())
    await consumer.start()
    try:
        for topic in (f"{run}.journal", f"{run}.decisions"):
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            while await consumer.position(tp) < end:
                for r in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                    ts = r.timestamp / 1000
                    with contextlib.suppress(ValueError):
                        if topic.endswith("journal"):
                            e = parse_event(r.value or b"")
                            if isinstance(e, ObjectUpserted) and e.object.get("kind") == "Job":
                                name = e.object["metadata"]["name"]
                                journaled.setdefault(name, ts)
                        else:
                            d = parse_decision(r.value or b"")
                            if d.type == "Admitted" and d.workload:
                                decided.setdefault(d.workload.split("/", 1)[1], ts)
    finally:
        await consumer.stop()
    names = [n for n in unsuspended if n in created and n in journaled and n in decided]
    if not names:
        return ""

    def med(values: list[float]) -> str:
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        return f"{statistics.median(ordered) * 1000:.0f}/{p99 * 1000:.0f}"

    return (
        f"created->journaled {med([journaled[n] - created[n] for n in names])}, "
        f"journaled->decided {med([decided[n] - journaled[n] for n in names])}, "
        f"decided->unsuspended {med([unsuspended[n] - decided[n] for n in names])}"
    )
