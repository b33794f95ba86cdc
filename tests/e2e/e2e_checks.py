"""What every e2e scenario must show, whatever its story: ``assert_pipeline``; and
what the stories assert: ``wait_message`` (why a Job waited), ``decided_before``
(the order of two decisions); what the DRA scenarios (#17) show besides:
``claim_failures`` (kube-scheduler
could not give a pod its claims), ``job_devices`` (what it allocated a Job) and
``counter_peaks`` (what the devices of Jobs running at once spent of each shared
counter, never more than the counter has).

The webhook suspended every Job; usage stayed within quota at every sample and
every Job change; each Job was admitted as often as expected, charged what the
scenario says, unsuspended with its flavor's node labels, ran on the run's
nodes with DRA devices of the right kind; the simulator agrees on admissions
and preemptions; a preemptor starts only after its victims stopped.
Part of ``e2e_harness.py`` (which re-exports every name).
"""

from __future__ import annotations

import itertools
import math
from datetime import datetime
from typing import Any

from e2e_hardware import SHARED_GPU
from e2e_outcome import Outcome, unsuspended_after
from e2e_pipeline import Run
from kubernetes_asyncio import client

from kuota.quantity import parse_quantity


def assert_pipeline(o: Outcome) -> None:
    """What every scenario must show, whatever its story."""
    # The webhook suspended every Job at creation (none was created suspended).
    for key, job in o.jobs.items():
        assert job.created is not None
        assert job.created["spec"].get("suspend") is True, (
            f"{key}: stored with spec.suspend={job.created['spec'].get('suspend')!r}; "
            "kuota-ingest's webhook must suspend queued Jobs at creation"
        )
    # Quota held at every sample and at every change of every Job.
    assert not o.sample_violations, f"usage over quota in samples: {o.sample_violations[:5]}"
    assert not o.change_violations, f"usage over quota after a change: {o.change_violations[:5]}"
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(o.samples))
    assert len(o.samples) >= o.duration / 0.2 * 0.8, (
        f"only {len(o.samples)} samples in {o.duration:.1f}s"
    )
    assert gaps and gaps[int(len(gaps) * 0.95)] <= 0.2, (
        f"sampling too sparse: 95th percentile gap {gaps[int(len(gaps) * 0.95)] * 1000:.0f}ms"
    )

    for key, job in o.jobs.items():
        admitted = o.of_type("Admitted", key)
        final = o.final_jobs.get(key)
        assert final is not None, f"{key}: the Job is gone"
        if job.expect != "Finished":
            assert not admitted, f"{key} was admitted: {admitted}"
            assert final["spec"].get("suspend") is True, f"{key} must stay suspended"
            assert not o.pods[key], f"{key} must have no pods, has {len(o.pods[key])}"
            continue
        assert len(admitted) == job.admissions, (
            f"{key}: admitted {len(admitted)} times, expected {job.admissions}: {admitted}"
        )
        for d in admitted:
            # Charged what the scenario says (80Gi for a whole GPU, 10Gi per slice, ...).
            charged = {
                r: parse_quantity(q) for per in (d.usage or {}).values() for r, q in per.items()
            }
            assert charged == job.charge, f"{key}: charged {d.usage}, expected {job.charge}"
            assert d.cluster_queue == job.cluster_queue, d
        d = admitted[-1]
        # Unsuspended, with the flavor's node labels injected into the pod template.
        assert final["spec"].get("suspend") is False, f"{key}: still suspended after Admitted"
        flavor_names = {f for per in (d.flavors or {}).values() for f in per.values()}
        selector = final["spec"]["template"]["spec"].get("nodeSelector") or {}
        for flavor in flavor_names:
            for label, value in o.flavors[flavor].items():
                assert selector.get(label) == value, (
                    f"{key}: nodeSelector {selector} lacks {label}={value} of flavor {flavor}"
                )
        conditions = {
            c["type"]: c["status"] for c in (final.get("status") or {}).get("conditions") or []
        }
        assert conditions.get("Complete") == "True", f"{key}: not Complete: {conditions}"
        # Its pods ran on the run's kwok nodes (which the injected selector picks)
        # and completed; each got its DRA devices allocated by kube-scheduler.
        pods = o.pods[key]
        want_pods = int(job.manifest["spec"].get("completions") or 1)
        done = [p for p in pods if p["status"].get("phase") == "Succeeded"]
        assert len(done) >= want_pods, (
            f"{key}: {len(done)} pods Succeeded of {want_pods}: "
            f"{[(p['metadata']['name'], p['status'].get('phase')) for p in pods]}"
        )
        for p in done:
            node = p["spec"].get("nodeName")
            assert node in o.run.nodes, f"{key}: pod on {node}, not on {o.run.nodes}"
            # placed (#17): on one of the nodes its Admitted decision named
            pinned = {n for ns in (d.nodes or {}).values() for n in ns}
            assert not d.nodes or node in pinned, f"{key}: pod on {node}, placed on {pinned}"
            pod = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            if job.device is None:
                continue
            allocated = [
                r
                for c in o.claims.get(pod, [])
                for r in c["status"]["allocation"]["devices"]["results"]
            ]
            assert allocated, f"{key}: pod {pod} got no DRA allocation"
            for r in allocated:
                assert r["driver"] == o.run.driver, r
                assert r["pool"] == node, f"{pod}: device {r} not from its node {node}"
                is_mig = "-mig-" in r["device"]
                assert is_mig == (job.device == "mig"), f"{pod}: wanted {job.device}, got {r}"
                is_shared = r["device"] == SHARED_GPU
                assert is_shared == (job.device == "shared"), f"{pod}: wanted {job.device}, {r}"
    # Parity: the in-process simulator, fed the same manifests, admits in the
    # same order, preempts the same victims for the same preemptors.
    simulated = o.admissions(o.sim_decisions)
    assert o.admissions() == simulated, (
        f"pipeline admitted (workload, victims) {o.admissions()}, kuota simulate {simulated}"
    )
    assert o.preemptions() == o.preemptions(o.sim_decisions), (
        f"pipeline preempted {o.preemptions()}, kuota simulate {o.preemptions(o.sim_decisions)}"
    )
    # A preemptor's Job is unsuspended only after its victims' Jobs were suspended.
    for d in o.decisions:
        if d.type != "Admitted" or not d.victims or d.workload not in o.jobs:
            continue
        started = unsuspended_after(o, d.workload or "", d)
        for victim in d.victims:
            stops = o.stopped_at.get(victim) or []
            assert stops, f"victim {victim} of {d.workload} was never suspended"
            assert started is not None and min(stops) <= started, (
                f"{d.workload} unsuspended at {started}, before its victim {victim} "
                f"was suspended at {min(stops)}"
            )


def wait_message(o: Outcome, key: str, reason: str) -> str:
    """The message of the Job's first ``Inadmissible`` decision, asserted to have
    ``reason``."""
    waits = o.of_type("Inadmissible", key)
    assert waits and waits[0].reason == reason, (key, waits)
    return waits[0].message or ""


def decided_before(o: Outcome, first: tuple[str, str], then: tuple[str, str]) -> None:
    """The decision ``first`` (type, workload) came before ``then``."""
    order = [(d.type, d.workload) for d in o.decisions]
    assert order.index(first) < order.index(then), order


async def claim_failures(run: Run, namespace: str, *, waits: str | None = None) -> list[str]:
    """The messages of kube-scheduler's ``FailedScheduling`` events in ``namespace``
    that are about claims (it could not give a pod its DRA devices), but those
    containing ``waits`` (a wait the test knows to be no failure)."""
    events = await client.CoreV1Api(run.api).list_namespaced_event(namespace)
    return [
        e.message
        for e in events.items
        if e.reason == "FailedScheduling"
        and "claim" in (e.message or "")
        and (waits is None or waits not in e.message)
    ]


def job_devices(o: Outcome, key: str) -> list[dict[str, Any]]:
    """The allocation results (driver, pool, device, request) of the claims of
    the Job's pods, as kube-scheduler wrote them."""
    return [r for p in o.pods[key] for r in _pod_devices(o, p)]


def _pod_devices(o: Outcome, pod: dict[str, Any]) -> list[dict[str, Any]]:
    md = pod["metadata"]
    return [
        r
        for c in o.claims.get(f"{md['namespace']}/{md['name']}", [])
        for r in c["status"]["allocation"]["devices"]["results"]
    ]


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _pod_span(pod: dict[str, Any]) -> tuple[float, float] | None:
    """From the pod's scheduling (its claims are allocated before it is bound) to
    the end of its last container (they are deallocated after), in the whole
    seconds the apiserver keeps; None for a pod never scheduled."""
    status = pod.get("status") or {}
    scheduled = [
        c["lastTransitionTime"]
        for c in status.get("conditions") or []
        if c["type"] == "PodScheduled" and c["status"] == "True"
    ]
    if not scheduled:
        return None
    ends = [
        (s.get("state") or {}).get("terminated", {}).get("finishedAt")
        for s in status.get("containerStatuses") or []
    ]
    if not ends or not all(ends):
        return _seconds(scheduled[0]), math.inf
    return _seconds(scheduled[0]), max(_seconds(e) for e in ends if e)


CounterKey = tuple[str, str, str]  # pool, counter set, counter


def counter_peaks(o: Outcome) -> dict[CounterKey, int]:
    """The most of each shared counter of the run's slices that the devices
    allocated to the scenario's pods spent at once, asserted within what the
    counter has at every moment. A pod counts from its scheduling to the end of
    its containers (``_pod_span``); a pod that ended and one scheduled in the
    same second do not overlap (the second's claims were allocated only once the
    first's were freed, so in truth it ended first)."""
    limits: dict[CounterKey, int] = {}
    consumes: dict[tuple[str, str], list[tuple[CounterKey, int]]] = {}
    for obj in o.run.infra:
        if obj.get("kind") != "ResourceSlice":
            continue
        pool = obj["spec"]["pool"]["name"]
        for cs in obj["spec"].get("sharedCounters") or []:
            for name, c in cs["counters"].items():
                limits[(pool, cs["name"], name)] = parse_quantity(c["value"])
        for d in obj["spec"].get("devices") or []:
            consumes[(pool, d["name"])] = [
                ((pool, cc["counterSet"], name), parse_quantity(c["value"]))
                for cc in d.get("consumesCounters") or []
                for name, c in cc["counters"].items()
            ]
    # (time, 0 for an end so that it comes before a start in the same second, pod)
    edges: list[tuple[float, int, str, list[dict[str, Any]]]] = []
    for pods in o.pods.values():
        for pod in pods:
            span = _pod_span(pod)
            if span is not None:
                name = pod["metadata"]["name"]
                edges += [(span[0], 1, name, _pod_devices(o, pod))]
                edges += [(span[1], 0, name, _pod_devices(o, pod))]
    spent: dict[CounterKey, int] = {}
    peaks: dict[CounterKey, int] = {}
    for t, edge, name, devices in sorted(edges, key=lambda e: e[:3]):
        for r in devices:
            for counter, amount in consumes.get((r["pool"], r["device"]), []):
                spent[counter] = spent.get(counter, 0) + (amount if edge else -amount)
                peaks[counter] = max(peaks.get(counter, 0), spent[counter])
                assert spent[counter] <= limits[counter], (
                    f"pod {name} at {t:.0f}: {counter} spent {spent[counter]}, "
                    f"has {limits[counter]}"
                )
    return peaks
