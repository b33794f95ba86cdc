"""Differential scenarios: Kueue v0.19.2 itself against kuota's fold, scenario by scenario.

Theory of operation (docs/design/kueue-side-by-side.md):

- **Kueue's side** is real: a scenario of ``tests/e2e/scenarios/`` is played on
  the Kueue stack (``scripts/kueue-stack``: kube-apiserver, etcd, scheduler,
  controller-manager, kwok and the released Kueue binary with its own CRDs and
  webhooks) as real Jobs, PyTorchJobs (the training-operator runs there) and
  RayClusters (KubeRay runs there) on kwok nodes, each created at its
  ``kuota.dev/submit-at`` time without its suspend field (Kueue's webhook
  suspends it), running ``kuota.dev/run-for`` as a kwok pod duration, and
  deleted at its ``kuota.dev/delete-at`` time (a RayCluster runs until then).
  Every ``POLL`` seconds one LIST of the Workloads gives the transitions:
  admitted (``status.admission`` appears: flavors and ``resourceUsage``),
  preempted (the ``Preempted`` condition: reason, preemptor by its JobUID),
  finished (``Finished``, or the Workload gone with its deleted owner); a
  workload never admitted is a never-fit, with Kueue's message. A workload is
  named as kuota's decisions name it: ``ns/name`` for a Job, ``ns/kind/name``
  for the other kinds (``ns/pytorchjob/ddp-a``).
- **kuota's side** is the fold the services run (``kuota.sim`` in plans mode,
  the preemption service in-process) over the same manifests, hardware and
  Configuration. The e2e suite already holds the services to that fold on the
  real stack (``tests/e2e/e2e_scenario.py``), so the fold stands for them here.
- **Compared** per scenario, after both sides are normalised (the run prefix
  dropped from names, quantities canonical): the admission order, each
  admission's flavors (per podset) and charge (per flavor and resource, summed
  over podsets, as kuota's decision gives it), the preemptions (victim, preemptor, reason)
  and the set of workloads that never fit. Times are not compared: the
  scenarios keep several seconds around every boundary, so an order that
  differs is a rule that differs, not a clock.
- A difference that ``DEPARTURES`` names (scenario -> what differs, and its
  section of docs/kueue-differences.md) is a recorded departure; any other is
  ``differ``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import re
import string
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from e2e_hardware import KWOK_COMPLETE, KWOK_READY, hardware
from kubernetes_asyncio import client, config

from kuota.core.fold.fold import Fold
from kuota.core.fold.preempting import PLANS
from kuota.quantity import format_quantity, parse_quantity
from kuota.sim.duration import micros_to_seconds, parse_duration
from kuota.sim.engine import Simulator
from kuota.sim.planning import PreemptionService

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "tests" / "e2e" / "scenarios"
KUEUE_STACK = Path(os.environ.get("KUOTA_KUEUE_STACK_DIR") or REPO / ".stack-kueue")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
POLL = 0.2  # seconds between two LISTs of the Workloads
SETTLE = 90.0  # after the last submission, for every workload to finish (or never fit)
NEVER_FIT_GRACE = 5.0  # a workload still unadmitted this long after the others are done
LABEL = "diff.kuota.dev/run"
JOB_UID_RE = re.compile(r"JobUID: ([0-9a-f-]+)\)")
# The workload kinds a scenario may hold: kind -> (group, version, plural), the
# path of the suspend field, and where its pod templates are.
WORKLOADS: dict[str, tuple[str, str, str]] = {
    "Job": ("batch", "v1", "jobs"),
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
    "RayCluster": ("ray.io", "v1", "rayclusters"),
}

# The DeviceClasses a scenario names (gpu-/mig-/wgpu-${run}) are the stack's
# hardware (KUOTA_KUEUE_DRA_ID): Kueue reads its deviceClassMappings at start.
_CLASS_REF = re.compile(r"(?<![a-z0-9])(wgpu|gpu|mig)-\$\{run\}")

# scenario -> {a difference line, exactly as `differences` writes it: the row of
# docs/kueue-differences.md that records it}. Exact lines, so that only the
# outcome recorded passes, never another difference in the same scenario.
DEPARTURES: dict[str, dict[str, str]] = {
    "finished-frees-quota": {
        # f-2 and f-3 are created 0.5 s apart, in one second of creationTimestamp
        "admission order: kuota ['fin/f-1', 'fin/f-2', 'fin/f-3'] "
        "kueue ['fin/f-1', 'fin/f-3', 'fin/f-2']": "FIFO ties within one second",
    },
    "node-fragmentation": {
        # f-2's quota fits but no node has its 2 GPUs: Kueue admits it (its pod
        # waits Pending, holding quota that f-3 then lacks); kuota places first
        "admission order: kuota ['frag/f-1', 'frag/f-3', 'frag/f-2'] "
        "kueue ['frag/f-1', 'frag/f-2', 'frag/f-3']": "Quota and a node",
    },
}


# e2e scenarios of what Kueue refuses outright, not played on Kueue: scenario ->
# the row of docs/kueue-differences.md that says so.
KUOTA_ONLY: dict[str, str] = {
    # Kueue v0.19.2 marks a workload whose pods name a ResourceClaim directly
    # inadmissible for good ("DRA resource claims not supported"): nothing to compare
    "direct-claim": "Direct ResourceClaims",
    "direct-claim-placed": "Direct ResourceClaims",
    # Kueue v0.19.2 reads no DeviceTaintRule (nor any device taint): it would admit
    # t-2 at once and its pod would sit Pending, the difference node-fragmentation
    # already records; and the Kueue stack's apiserver need not serve the kind
    "device-taint-rule": "A claim with `adminAccess`, device taints or `matchAttribute`",
    # Kueue v0.19.2 refuses a ResourceClaimTemplate request with firstAvailable
    # ("FirstAvailable device selection is not supported"): never admitted
    "first-available": "firstAvailable and All",
}


def scenario_names() -> list[str]:
    return sorted(p.stem for p in SCENARIOS.glob("*.yaml") if p.stem not in KUOTA_ONLY)


def load(name: str, run: str, hw: str) -> list[dict[str, Any]]:
    """The scenario's objects for one run: queue names under ``run``, hardware ``hw``."""
    text = _CLASS_REF.sub(lambda m: f"{m.group(1)}-{hw}", (SCENARIOS / f"{name}.yaml").read_text())
    text = string.Template(text).substitute(run=run, driver=driver_of(hw), pool=hw)
    docs = [copy.deepcopy(d) for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    for d in docs:
        d.setdefault("metadata", {}).setdefault("labels", {})[LABEL] = run
    return docs


def driver_of(hw: str) -> str:
    return f"{hw}.gpu.kuota.dev"


def kueue_configuration(hw: str) -> dict[str, Any]:
    """What scripts/stack.d/kueue.sh gives Kueue, for the fold: the same mappings
    and admission fair sharing."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "5s"},
        "resources": {
            "deviceClassMappings": [
                {
                    "name": "gpu-memory",
                    "deviceClassNames": [f"gpu-{hw}", f"mig-{hw}"],
                    "sources": [
                        {
                            "counter": {
                                "name": "memory",
                                "driver": driver_of(hw),
                                "deviceSelector": {
                                    "cel": {"expression": f"device.driver == '{driver_of(hw)}'"}
                                },
                            }
                        }
                    ],
                },
                {"name": "whole-gpus", "deviceClassNames": [f"wgpu-{hw}"]},
            ]
        },
    }


# ====================================================================== the record


@dataclass(frozen=True)
class Admission:
    workload: str  # namespace/name with the run prefix dropped
    cluster_queue: str
    flavors: tuple[tuple[str, str], ...]  # (resource, flavor), sorted
    usage: tuple[tuple[str, str], ...]  # (resource, quantity), sorted

    def __str__(self) -> str:
        fl = ",".join(f"{r}:{f}" for r, f in self.flavors)
        us = ",".join(f"{r}={q}" for r, q in self.usage)
        return f"{self.workload}[{fl} {us}]"


@dataclass(frozen=True)
class Preemption:
    victim: str
    preemptor: str
    reason: str

    def __str__(self) -> str:
        return f"{self.victim}<-{self.preemptor}({self.reason})"


@dataclass
class Record:
    """One side's story of a scenario, normalised."""

    admissions: list[Admission] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    never_fit: dict[str, str] = field(default_factory=dict)  # workload -> reason/message

    @property
    def order(self) -> list[str]:
        return [a.workload for a in self.admissions]


def differences(kuota: Record, kueue: Record) -> list[str]:
    """What differs, one line each (empty: they agree)."""
    out = []
    if kuota.order != kueue.order:
        out.append(f"admission order: kuota {kuota.order} kueue {kueue.order}")
    else:
        for a, b in zip(kuota.admissions, kueue.admissions, strict=True):
            if (a.cluster_queue, a.flavors) != (b.cluster_queue, b.flavors):
                out.append(f"flavors of {a.workload}: kuota {a} kueue {b}")
            if a.usage != b.usage:
                out.append(f"charge of {a.workload}: kuota {a} kueue {b}")
    if sorted(map(str, kuota.preemptions)) != sorted(map(str, kueue.preemptions)):
        out.append(
            f"preemptions: kuota {sorted(map(str, kuota.preemptions))} "
            f"kueue {sorted(map(str, kueue.preemptions))}"
        )
    if sorted(kuota.never_fit) != sorted(kueue.never_fit):
        out.append(f"never fit: kuota {kuota.never_fit} kueue {kueue.never_fit}")
    return out


def _strip(run: str, name: str) -> str:
    return name[len(run) + 1 :] if name.startswith(run + "-") else name


def _key(run: str, namespace: str, name: str) -> str:
    return f"{_strip(run, namespace)}/{name}"


def _canon(quantity: str) -> str:
    return format_quantity(parse_quantity(str(quantity)))


# ====================================================================== kuota's side


def kuota_record(name: str, run: str, hw: str) -> Record:
    docs = load(name, run, hw)
    infra = [*hardware(hw, driver_of(hw)), kueue_configuration(hw)]
    decisions = Simulator(
        infra + docs, fold=Fold(preemption=PLANS), planning=PreemptionService()
    ).run()
    rec = Record()
    admitted: set[str] = set()
    last_inadmissible: dict[str, str] = {}
    for d in decisions:
        if not d.workload:
            continue
        ns, _, wl = d.workload.partition("/")
        key = _key(run, ns, wl)
        if d.type == "Admitted":
            flavors = sorted(
                (r, _strip(run, f)) for ps in (d.flavors or {}).values() for r, f in ps.items()
            )
            usage = sorted(
                (r, _canon(q)) for per in (d.usage or {}).values() for r, q in per.items()
            )
            rec.admissions.append(
                Admission(key, _strip(run, d.cluster_queue or ""), tuple(flavors), tuple(usage))
            )
            admitted.add(key)
        elif d.type == "Preempted" and d.preemptor:
            pns, _, pwl = d.preemptor.partition("/")
            rec.preemptions.append(Preemption(key, _key(run, pns, pwl), d.reason or ""))
        elif d.type == "Inadmissible":
            last_inadmissible[key] = f"{d.reason}: {d.message or ''}".strip()
    for key, why in sorted(last_inadmissible.items()):
        if key not in admitted:
            rec.never_fit[key] = why
    return rec


# ====================================================================== Kueue's side


@dataclass
class KueueStack:
    env: dict[str, str]

    @classmethod
    def read(cls, stack_dir: Path = KUEUE_STACK) -> KueueStack:
        f = stack_dir / "stack.env"
        if not f.is_file():
            raise RuntimeError(f"no {f}: start the Kueue stack with `scripts/kueue-stack up`")
        env: dict[str, str] = {}
        for line in f.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                k, _, v = line[len("export ") :].partition("=")
                env[k] = v
        return cls(env)

    @property
    def hw(self) -> str:
        return self.env.get("KUOTA_KUEUE_DRA_ID", "kq")


async def kubectl_apply(stack: KueueStack, objs: Sequence[Mapping[str, Any]]) -> None:
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)})
    proc = await asyncio.create_subprocess_exec(
        stack.env["KUOTA_KUBECTL"],
        f"--kubeconfig={stack.env['KUBECONFIG']}",
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kuota-diff",
        "-f",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate(data.encode())
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl apply failed: {err.decode().strip()}")


async def _api(stack: KueueStack) -> client.ApiClient:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=stack.env["KUBECONFIG"], client_configuration=cfg)
    return client.ApiClient(cfg)


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return c  # type: ignore[no-any-return]
    return None


async def _wait_active(api: client.ApiClient, names: Sequence[str], timeout: float = 60) -> None:
    """Until Kueue reports each ClusterQueue Active (its flavors and quotas read)."""
    co = client.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    while True:
        waiting = []
        for n in names:
            try:
                obj = await co.get_cluster_custom_object(*KUEUE, "clusterqueues", n)
            except client.ApiException:
                waiting.append(n)
                continue
            if _condition(obj, "Active") is None:
                waiting.append(n)
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"ClusterQueues not Active on Kueue in {timeout:.0f}s: {waiting}")
        await asyncio.sleep(0.3)


async def kueue_record(stack: KueueStack, name: str, run: str) -> Record:
    """Play the scenario on the Kueue stack and record what Kueue did."""
    hw = stack.hw
    docs = load(name, run, hw)
    api = await _api(stack)
    try:
        await kubectl_apply(stack, hardware(hw, driver_of(hw)))
        setup = [d for d in docs if d["kind"] not in WORKLOADS]
        await kubectl_apply(stack, setup)
        await _wait_active(
            api, [d["metadata"]["name"] for d in setup if d["kind"] == "ClusterQueue"]
        )
        jobs = [d for d in docs if d["kind"] in WORKLOADS]
        namespaces = {d["metadata"]["namespace"] for d in jobs}
        for d in jobs:
            ann = d["metadata"].get("annotations") or {}
            run_for = ann.get("kuota.dev/run-for")
            unsuspend(d)  # Kueue's webhook must suspend it
            for template in pod_templates(d):
                pod_ann = template.setdefault("metadata", {}).setdefault("annotations", {})
                pod_ann[KWOK_READY] = "200ms"
                # a RayCluster runs until it is deleted (kuota.dev/delete-at)
                secs = micros_to_seconds(parse_duration(run_for)) if run_for else 8760 * 3600
                pod_ann[KWOK_COMPLETE] = f"{secs:g}s"
        return await _play(api, run, jobs, namespaces)
    finally:
        await api.close()


def unsuspend(d: dict[str, Any]) -> None:
    spec = d["spec"]
    holder = (spec.get("runPolicy") or {}) if d["kind"] == "PyTorchJob" else spec
    holder.pop("suspend", None)


def pod_templates(d: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a workload of one of the ``WORKLOADS`` kinds."""
    spec = d["spec"]
    if d["kind"] == "PyTorchJob":
        return [r["template"] for r in (spec.get("pytorchReplicaSpecs") or {}).values()]
    if d["kind"] == "RayCluster":
        groups = [spec["headGroupSpec"], *(spec.get("workerGroupSpecs") or [])]
        return [g["template"] for g in groups]
    return [spec["template"]]


def workload_key(run: str, namespace: str, kind: str, name: str) -> str:
    """A workload as kuota's decisions name it, the run prefix dropped."""
    return _key(run, namespace, name if kind == "Job" else f"{kind.lower()}/{name}")


async def _play(
    api: client.ApiClient, run: str, jobs: list[dict[str, Any]], namespaces: set[str]
) -> Record:
    co = client.CustomObjectsApi(api)
    job_of_uid: dict[str, str] = {}
    rec = Record()
    admitted_now: dict[str, bool] = {}  # job key -> status.admission set at the last LIST
    preempted_seen: set[tuple[str, str]] = set()  # (workload, condition transition time)
    finished: set[str] = set()
    ever_admitted: set[str] = set()
    pending_msg: dict[str, str] = {}
    expected = {
        workload_key(run, d["metadata"]["namespace"], d["kind"], d["metadata"]["name"])
        for d in jobs
    }

    async def poll_once() -> None:
        resp = await co.list_cluster_custom_object(*KUEUE, "workloads", _preload_content=False)
        items = json.loads(await resp.read()).get("items") or []
        items = [w for w in items if w["metadata"]["namespace"] in namespaces]
        listed: set[str] = set()
        # one LIST: order the transitions it shows by Kueue's own admission time
        items.sort(key=lambda w: (_reserved_at(w), w["metadata"]["name"]))
        for w in items:
            md = w["metadata"]
            owner = next(
                (o for o in md.get("ownerReferences") or [] if o.get("kind") in WORKLOADS), None
            )
            if owner is None:
                continue
            key = workload_key(run, md["namespace"], owner["kind"], owner["name"])
            listed.add(key)
            st = w.get("status") or {}
            adm = st.get("admission")
            if adm and not admitted_now.get(key):
                flavors: list[tuple[str, str]] = []
                per_flavor: dict[tuple[str, str], int] = {}
                for psa in adm.get("podSetAssignments") or []:
                    fl = psa.get("flavors") or {}
                    flavors += [(r, _strip(run, f)) for r, f in fl.items()]
                    for r, q in (psa.get("resourceUsage") or {}).items():
                        k = (str(fl.get(r, "")), r)
                        per_flavor[k] = per_flavor.get(k, 0) + parse_quantity(str(q))
                usage = [(r, format_quantity(q)) for (_, r), q in per_flavor.items()]
                rec.admissions.append(
                    Admission(
                        key,
                        _strip(run, adm.get("clusterQueue", "")),
                        tuple(sorted(flavors)),
                        tuple(sorted(usage)),
                    )
                )
                ever_admitted.add(key)
            admitted_now[key] = bool(adm)
            pre = _condition(w, "Preempted")
            seen = (md["name"], str((pre or {}).get("lastTransitionTime")))
            if pre is not None and seen not in preempted_seen:
                preempted_seen.add(seen)
                m = JOB_UID_RE.search(pre.get("message") or "")
                preemptor = job_of_uid.get(m.group(1), "?") if m else "?"
                rec.preemptions.append(Preemption(key, preemptor, pre.get("reason") or ""))
            if _condition(w, "Finished") is not None:
                finished.add(key)
            if not adm:
                qr = next(
                    (c for c in st.get("conditions") or [] if c.get("type") == "QuotaReserved"),
                    None,
                )
                if qr is not None:
                    pending_msg[key] = f"{qr.get('reason')}: {qr.get('message', '')}"
        # a Workload gone with its deleted owner (a RayCluster at its delete-at) ended
        for key in ever_admitted - listed:
            finished.add(key)
            admitted_now[key] = False

    t0 = time.time()
    poller_error: list[BaseException] = []

    async def poller() -> None:
        try:
            while True:
                await poll_once()
                await asyncio.sleep(POLL)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # surfaced by the settle loop
            poller_error.append(e)

    task = asyncio.create_task(poller())
    deletions: list[asyncio.Task[None]] = []
    try:
        for d in sorted(jobs, key=_submit_at):
            delay = t0 + _submit_at(d) - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            ns = d["metadata"]["namespace"]
            group, version, plural = WORKLOADS[d["kind"]]
            created = await co.create_namespaced_custom_object(
                group, version, ns, plural, d, _preload_content=False
            )
            obj = json.loads(await created.read())
            key = workload_key(run, ns, d["kind"], obj["metadata"]["name"])
            job_of_uid[obj["metadata"]["uid"]] = key
            if "kuota.dev/delete-at" in (d["metadata"].get("annotations") or {}):
                deletions.append(asyncio.create_task(_delete_at(co, t0, d)))
        deadline = time.monotonic() + SETTLE
        quiet_since: float | None = None
        while True:
            if poller_error:
                raise poller_error[0]
            open_ = expected - finished
            if not open_:
                break
            # what is left never ran and nothing else is running: a never-fit
            running = {k for k, on in admitted_now.items() if on} - finished
            if open_ <= expected - ever_admitted and not running:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > NEVER_FIT_GRACE:
                    break
            else:
                quiet_since = None
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kueue did not settle in {SETTLE:.0f}s: open {sorted(open_)}")
            await asyncio.sleep(POLL)
        await poll_once()
    finally:
        for t in [task, *deletions]:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
    for key in sorted(expected - ever_admitted):
        rec.never_fit[key] = pending_msg.get(key, "no Workload")
    return rec


async def _delete_at(co: client.CustomObjectsApi, t0: float, d: Mapping[str, Any]) -> None:
    ann = d["metadata"]["annotations"]
    at = micros_to_seconds(parse_duration(ann["kuota.dev/delete-at"]))
    await asyncio.sleep(max(0.0, t0 + at - time.time()))
    group, version, plural = WORKLOADS[d["kind"]]
    md = d["metadata"]
    await co.delete_namespaced_custom_object(
        group, version, md["namespace"], plural, md["name"], propagation_policy="Background"
    )


def _submit_at(d: Mapping[str, Any]) -> float:
    ann = d["metadata"].get("annotations") or {}
    return micros_to_seconds(parse_duration(ann.get("kuota.dev/submit-at", "0s")))


def _reserved_at(w: Mapping[str, Any]) -> str:
    for c in (w.get("status") or {}).get("conditions") or []:
        if c.get("type") == "QuotaReserved" and c.get("status") == "True":
            return str(c.get("lastTransitionTime") or "")
    return "~"


# ====================================================================== a row


@dataclass
class Row:
    scenario: str
    verdict: str  # agree | departure | differ
    details: list[str]
    kuota: Record
    kueue: Record
    seconds: float

    def line(self) -> str:
        head = f"{self.scenario:<22} {self.verdict:<9} admitted={len(self.kueue.order)} "
        head += f"preempted={len(self.kueue.preemptions)} never_fit={len(self.kueue.never_fit)} "
        head += f"({self.seconds:.0f}s)"
        return "\n".join([head, *(f"    {d}" for d in self.details)])


async def diff_scenario(stack: KueueStack, name: str) -> Row:
    run = f"d{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    kueue = await kueue_record(stack, name, run)
    kuota = kuota_record(name, run, stack.hw)
    details = differences(kuota, kueue)
    known = DEPARTURES.get(name, {})
    if not details:
        verdict = "agree"
    elif all(d in known for d in details):
        verdict = "departure"
        details = [f"{d}  [docs/kueue-differences.md: {known[d]}]" for d in details]
    else:
        verdict = "differ"
    return Row(name, verdict, details, kuota, kueue, time.monotonic() - t0)


async def amain(names: Sequence[str]) -> int:
    stack = KueueStack.read()
    rows = []
    for name in names:
        row = await diff_scenario(stack, name)
        print(row.line(), flush=True)
        rows.append(row)
    agree = sum(r.verdict == "agree" for r in rows)
    dep = sum(r.verdict == "departure" for r in rows)
    differ = sum(r.verdict == "differ" for r in rows)
    print(f"scenarios={len(rows)} agree={agree} departures={dep} differ={differ}")
    return 1 if differ else 0


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="*", help="names in tests/e2e/scenarios (default: all)")
    args = ap.parse_args(argv)
    return asyncio.run(amain(args.scenarios or scenario_names()))
