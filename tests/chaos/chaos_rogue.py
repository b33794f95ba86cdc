"""The rogue user of the fault runs (issue #22): every way around the queue, tried.

Theory of operation. ``rogue_account`` (as the stack's admin) makes the
ServiceAccount ``rogue`` in the team namespace ``chaos-a``, binds it there to
the built-in ``edit`` ClusterRole (a RoleBinding: what a team member gets) and
writes a kubeconfig with its own token (TokenRequest): the ``Rogue`` acts with
nothing else. It makes its own Jobs (one 1g.10gb slice per pod, ``parallelism``
1 of 4 ``completions``, labelled ``ROGUE_LABEL``; the first with
``kuota.dev/active: "false"``, so never admitted: a steady target) and, from a
``Random`` of its own (the workload and the fault plan stay those of the seed),
keeps trying ``ATTEMPTS`` on them while the faults run, first each kind once,
then at random, each on a Job in a state it applies to (read with a GET;
``stopped``: suspended again after it ran, its admission's id remembered).

Each try is recorded with its outcome: ``refused`` (403 from kuota's webhook,
message kept), ``forbidden`` (RBAC), ``invalid`` (the apiserver's own
validation), ``accepted``, or ``away`` (webhook or apiserver down: a
``failurePolicy: Fail`` webhook refuses everything then). Whether an accepted
try cost anything is not judged here: ``chaos_check.Observer`` measures the
GPU-seconds pods ran without an admission in force (``bypass_gpu_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from chaos_workload import DRIVER, GI, HIGH, RUN, _template, labels
from e2e_harness import KWOK_COMPLETE, KWOK_READY, QUEUE_LABEL, job_done
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kuota.kinds import PRIORITY_CLASS_LABEL

NAMESPACE = f"{RUN}-a"  # the rogue's team namespace (managed: see chaos_workload)
ACCOUNT = "rogue"
ROGUE_LABEL = "chaos.kuota.dev/rogue"
OTHER_QUEUE = "q2"  # a second LocalQueue of chaos-a (ClusterQueue chaos-b)
ANN_DECISION_ID = "kuota.dev/decision-id"
ANN_CREATED_AT = "kuota.dev/created-at"
ANN_ACTIVE = "kuota.dev/active"
COMPLETIONS = 4
RUN_FOR = 2.0  # seconds each pod runs
MAX_JOBS = 24
# Jobs the rogue may make past MAX_JOBS for each kind it has not yet tried, to give
# it a target (a full namespace of finished or queued Jobs left swap-template-running
# untried in one CI run)
OWED_JOBS = 2
# kind -> the Job states it applies to ("suspended", "running", "" for a create)
ATTEMPTS: Mapping[str, str] = {
    "unsuspend": "suspended",
    "drop-label-then-unsuspend": "suspended",
    "relabel-suspended-then-unsuspend": "suspended",
    "forge-decision-id": "suspended",
    "forge-created-at": "suspended",
    "edit-suspended-template": "suspended",
    "grow-suspended": "suspended",
    "relabel-running": "running",
    "drop-label-running": "running",
    "grow-running": "running",
    "create-unlabelled": "",
    "create-unsuspended": "",
    # the id kuota wrote while the Job ran, put back once it was stopped, and unsuspend
    "restore-decision-id": "stopped",
    # issue #23: ways to keep GPUs without paying for them
    "orphan-delete-running": "running",  # item 2: the pods outlive their Job
    "hold-pod-then-delete": "running",  # items 2-3: pods held Terminating by a finalizer
    # item 4: its template recreated with 2 devices (the delete refused while it runs)
    "swap-template-running": "swappable",
    "create-oversized": "",  # item 5: a Job of about 1.2 MB (over Kafka's 1 MiB)
}
# tried only when a Job of the rogue's was stopped after running (not in every run)
OPPORTUNISTIC = frozenset({"restore-decision-id"})
# what the door lets through and costs nothing (kuota queues it or reads it again);
# the report lists each accepted try of the other kinds, with its time
MAY_PASS = frozenset(
    {
        "create",
        "create-unsuspended",
        "edit-suspended-template",
        "grow-suspended",
        "relabel-suspended-then-unsuspend",
        # allowed to a namespace's editor; what they would cost, the quota check
        # and bypass_gpu_s measure (the pods, not the objects)
        "orphan-delete-running",
        "hold-pod-then-delete",
        # refused at its delete while the Job runs (docs/design/template-guard.md);
        # accepted only when kuota stopped the Job meanwhile, then costs nothing
        "swap-template-running",
        "create-oversized",
        "create-template",  # its own ResourceClaimTemplate, for the swap
    }
)
SWAP_TEMPLATE = "rogue-slice"  # the rogue's own template, which it recreates
LONG_RUN_FOR = 15.0  # seconds a pod of a Job made for the #23 tries runs
HOLD_FOR = 6.0  # seconds a held pod stays Terminating before its finalizer goes
HOLD_FINALIZER = "chaos.kuota.dev/hold"
OVERSIZED_BYTES = 1_200_000


def token_kubeconfig(admin: Path, token: str, out: Path) -> Path:
    """A kubeconfig for the admin's apiserver that authenticates with ``token`` only."""
    cfg = yaml.safe_load(admin.read_text())
    contexts = {c["name"]: c["context"] for c in cfg["contexts"]}
    clusters = {c["name"]: c["cluster"] for c in cfg["clusters"]}
    cluster = dict(clusters[contexts[cfg["current-context"]]["cluster"]])
    ca = cluster.get("certificate-authority")
    if ca and not Path(ca).is_absolute():
        cluster["certificate-authority"] = str(admin.parent / ca)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stack", "cluster": cluster}],
        "users": [{"name": ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": ACCOUNT, "context": {"cluster": "stack", "user": ACCOUNT}}],
        "current-context": ACCOUNT,
    }
    out.write_text(yaml.safe_dump(doc))
    return out


def account_objects() -> list[dict[str, Any]]:
    """The rogue's ServiceAccount and its RoleBinding to ``edit`` in its namespace."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": ACCOUNT, "namespace": NAMESPACE, "labels": labels()},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{ACCOUNT}-edit", "namespace": NAMESPACE, "labels": labels()},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "edit",
            },
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        },
    ]


def rogue_token(kubectl: str, kubeconfig: str) -> str:
    done = subprocess.run(
        [
            kubectl,
            f"--kubeconfig={kubeconfig}",
            "create",
            "token",
            ACCOUNT,
            "-n",
            NAMESPACE,
            "--duration=2h",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def rogue_template(devices: int) -> dict[str, Any]:
    """The rogue's own ResourceClaimTemplate: ``devices`` 1g.10gb slices (as ``slice``)."""
    profile = f"device.attributes['{DRIVER}'].profile == '1g.10gb'"
    doc = _template(NAMESPACE, SWAP_TEMPLATE, f"mig-{RUN}", profile)
    doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = devices
    return doc


def rogue_job(
    name: str,
    *,
    queue: str | None = "q",
    active: bool = True,
    run_for: float = RUN_FOR,
    template: str = "slice",
) -> dict[str, Any]:
    """One of the rogue's Jobs: one slice per pod, 1 of 4 completions at a time, high
    priority (a user picks the priority class; admitted soon, so some run)."""
    job_labels = {**labels(), ROGUE_LABEL: "true", PRIORITY_CLASS_LABEL: HIGH}
    if queue is not None:
        job_labels[QUEUE_LABEL] = queue
    md: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "labels": job_labels}
    if not active:
        md["annotations"] = {ANN_ACTIVE: "false"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": md,
        "spec": {
            "parallelism": 1,
            "completions": COMPLETIONS,
            "backoffLimit": 6,
            "template": {
                "metadata": {
                    "labels": {**labels(), ROGUE_LABEL: "true"},
                    "annotations": {KWOK_READY: "200ms", KWOK_COMPLETE: f"{run_for:g}s"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                },
            },
        },
    }


def rogue_charge(obj: Mapping[str, Any]) -> dict[str, int]:
    """What a rogue Job uses running: a 10Gi slice per pod it runs at once, its
    ``parallelism`` capped by its ``completions`` (the Job controller makes no
    more pods than completions are left; a swappable Job has 1 and may be grown
    to a parallelism of 4 while suspended)."""
    spec = obj.get("spec") or {}
    pods = int(1 if spec.get("parallelism") is None else spec["parallelism"])
    if spec.get("completions") is not None:
        pods = min(pods, int(spec["completions"]))
    return {"gpu-memory": 10 * GI * pods}


@dataclass
class Try:
    kind: str
    job: str
    outcome: str  # refused | forbidden | invalid | accepted | away | conflict | gone
    message: str = ""
    at: float = 0.0  # time.monotonic()


@dataclass
class Rogue:
    batch: client.BatchV1Api
    rng: random.Random
    say: Callable[[str], None]
    # job key -> the kind of try that created it
    registry: MutableMapping[str, str] = field(default_factory=dict)
    period: tuple[float, float] = (0.3, 0.9)  # seconds between two tries
    tries: list[Try] = field(default_factory=list)
    t0: float = 0.0  # time.monotonic() of the run's first Job (for the report)
    core: Any = None  # client.CoreV1Api: its pods (the #23 tries; None: not tried)
    custom: Any = None  # client.CustomObjectsApi: its ResourceClaimTemplate
    _serial: int = 0
    _ids: dict[str, str] = field(default_factory=dict)  # Job -> decision id seen running
    _holds: list[tuple[float, str]] = field(default_factory=list)  # (release at, pod)
    _swap_devices: int = 1  # the devices SWAP_TEMPLATE asks for now
    _owed_made: Counter[str] = field(default_factory=Counter)  # past MAX_JOBS, by kind

    # ------------------------------------------------------------ calls

    async def _call(self, kind: str, job: str, call: Any) -> Try:
        t = Try(kind, f"{NAMESPACE}/{job}", "accepted", at=time.monotonic())
        try:
            await call
        except ApiException as err:
            t.outcome, t.message = _outcome(err)
        except (OSError, TimeoutError, aiohttp.ClientError) as err:
            t.outcome, t.message = "away", repr(err)[:200]
        self.tries.append(t)
        return t

    async def _patch(self, kind: str, name: str, body: Any) -> Try:
        return await self._call(kind, name, self.batch.patch_namespaced_job(name, NAMESPACE, body))

    async def _create(self, kind: str, manifest: dict[str, Any]) -> Try:
        name = manifest["metadata"]["name"]
        self.registry[f"{NAMESPACE}/{name}"] = kind
        return await self._call(kind, name, self.batch.create_namespaced_job(NAMESPACE, manifest))

    def _name(self) -> str:
        self._serial += 1
        return f"rogue-{self._serial:03d}"

    async def _state(self) -> dict[str, list[dict[str, Any]]]:
        """The rogue's Jobs now, by state (its own GET, as a user would look)."""
        out: dict[str, list[dict[str, Any]]] = {
            "suspended": [],
            "running": [],
            "stopped": [],
            "swappable": [],
        }
        try:
            listed = await self.batch.list_namespaced_job(
                NAMESPACE, label_selector=f"{ROGUE_LABEL}=true", _preload_content=False
            )
            items = json.loads(await listed.read()).get("items") or []
            listed.release()
        except (ApiException, OSError, TimeoutError, aiohttp.ClientError, ValueError):
            return out
        for obj in items:
            if job_done(obj):
                continue
            md = obj.get("metadata") or {}
            did = (md.get("annotations") or {}).get(ANN_DECISION_ID)
            suspended = bool((obj.get("spec") or {}).get("suspend"))
            out["suspended" if suspended else "running"].append(obj)
            if not suspended and _template_of(obj) == SWAP_TEMPLATE:
                out["swappable"].append(obj)
            if not suspended and did:
                self._ids[md.get("name", "")] = did
            elif suspended and self._ids.get(md.get("name", "")) not in (None, did):
                out["stopped"].append(obj)
        return out

    # ------------------------------------------------------------ the run

    async def run(self, until: Callable[[], bool]) -> None:
        """Tries until ``until()``: every kind once in order, then at random."""
        await self._create("create", rogue_job(self._name(), active=False))
        await self._create("create", rogue_job(self._name()))
        if self.custom is not None:
            await self._call("create-template", SWAP_TEMPLATE, self._put_template(1))
            await self._create("create", self._swappable())
        first = [k for k in ATTEMPTS if k not in OPPORTUNISTIC]
        skipped = 0
        try:
            await self._loop(until, first, skipped)
        finally:
            await self.release_holds(everything=True)

    async def _loop(self, until: Callable[[], bool], first: list[str], skipped: int) -> None:
        while not until():
            await asyncio.sleep(self.rng.uniform(*self.period))
            await self.release_holds()
            state = await self._state()
            owed = self.owed()
            if first:
                kind = first[0]
            elif owed and self.rng.random() < 0.5:  # a kind skipped in the first round
                kind = self.rng.choice(owed)
            else:
                kind = self.rng.choice(list(ATTEMPTS))
            wanted = ATTEMPTS[kind]
            targets = state.get(wanted, []) if wanted else []
            if wanted and not targets:
                # nothing in that state: make a Job now and then (it will be queued)
                if self._room(kind) and self.rng.random() < 0.3:
                    # a swappable Job runs too: made for any running kind while the swap is owed
                    swap = self.custom is not None and (
                        wanted == "swappable"
                        or (wanted == "running" and "swap-template-running" in owed)
                    )
                    await self._create("create", self._swappable() if swap else self._long())
                skipped += 1
                if first and skipped > 40:  # e.g. never admitted: go on
                    first.pop(0)
                    skipped = 0
                continue
            if first:
                first.pop(0)
                skipped = 0
            target = self.rng.choice(targets) if targets else None
            await self._attempt(kind, target, state)

    async def _attempt(
        self, kind: str, obj: dict[str, Any] | None, state: dict[str, list[dict[str, Any]]]
    ) -> None:
        name = (obj or {}).get("metadata", {}).get("name", "")
        if kind == "unsuspend":
            await self._patch(kind, name, {"spec": {"suspend": False}})
        elif kind == "drop-label-then-unsuspend":
            t = await self._patch(kind, name, {"metadata": {"labels": {QUEUE_LABEL: None}}})
            if t.outcome == "accepted":
                await self._patch(f"{kind}:unsuspend", name, {"spec": {"suspend": False}})
        elif kind == "relabel-suspended-then-unsuspend":
            current = ((obj or {}).get("metadata", {}).get("labels") or {}).get(QUEUE_LABEL)
            other = "q" if current == OTHER_QUEUE else OTHER_QUEUE
            t = await self._patch(kind, name, {"metadata": {"labels": {QUEUE_LABEL: other}}})
            if t.outcome == "accepted":  # allowed (a move re-queues it): now the lever
                await self._patch(f"{kind}:unsuspend", name, {"spec": {"suspend": False}})
        elif kind == "forge-decision-id":
            # an Admitted decision's id, read off a running Job of the namespace
            forged = await self._admitted_id()
            body = {"metadata": {"annotations": {ANN_DECISION_ID: forged}}}
            body["spec"] = {"suspend": False}
            await self._patch(kind, name, body)
        elif kind == "forge-created-at":
            body = {"metadata": {"annotations": {ANN_CREATED_AT: "2000-01-01T00:00:00Z"}}}
            await self._patch(kind, name, body)
        elif kind == "edit-suspended-template":
            # mutable on a suspended Job (Kubernetes' scheduling directives): kuota must re-read
            body = {
                "spec": {
                    "template": {
                        "metadata": {"labels": {"chaos.kuota.dev/edited": str(self._serial)}},
                        "spec": {
                            "tolerations": [{"key": "chaos.kuota.dev/any", "operator": "Exists"}]
                        },
                    }
                }
            }
            await self._patch(kind, name, body)
        elif kind == "grow-suspended":
            await self._patch(kind, name, {"spec": {"parallelism": COMPLETIONS}})
        elif kind == "relabel-running":
            current = ((obj or {}).get("metadata", {}).get("labels") or {}).get(QUEUE_LABEL)
            other = "q" if current == OTHER_QUEUE else OTHER_QUEUE
            await self._patch(kind, name, {"metadata": {"labels": {QUEUE_LABEL: other}}})
        elif kind == "drop-label-running":
            await self._patch(kind, name, {"metadata": {"labels": {QUEUE_LABEL: None}}})
        elif kind == "grow-running":
            await self._patch(kind, name, {"spec": {"parallelism": COMPLETIONS}})
        elif kind == "restore-decision-id":
            body = {"metadata": {"annotations": {ANN_DECISION_ID: self._ids[name]}}}
            body["spec"] = {"suspend": False}
            await self._patch(kind, name, body)
        elif kind == "create-unlabelled":
            if self._room(kind):
                await self._create(kind, rogue_job(self._name(), queue=None))
        elif kind == "create-unsuspended":
            if self._room(kind):
                manifest = rogue_job(self._name())
                manifest["spec"]["suspend"] = False
                await self._create(kind, manifest)
        elif kind == "orphan-delete-running":
            # the Job goes, its pods stay: kuota must charge them until they are gone
            await self._call(kind, name, self._delete_job(name, "Orphan"))
        elif kind == "hold-pod-then-delete":
            # its pods kept Terminating (a finalizer the rogue may add) after the delete
            if self.core is not None:
                for pod in await self._pods_of(name):
                    body = {"metadata": {"finalizers": [HOLD_FINALIZER]}}  # merged in
                    t = await self._call(
                        f"{kind}:hold", name, self.core.patch_namespaced_pod(pod, NAMESPACE, body)
                    )
                    if t.outcome == "accepted":
                        self._holds.append((time.monotonic() + HOLD_FOR, pod))
            await self._call(kind, name, self._delete_job(name, "Background"))
        elif kind == "swap-template-running":
            # recreated with twice the devices: pods made from now on claim more
            if self.custom is not None:
                await self._call(f"{kind}:delete", name, self._drop_template())
                devices = 2 if self._swap_devices == 1 else 1
                t = await self._call(kind, name, self._put_template(devices))
                if t.outcome == "accepted":
                    self._swap_devices = devices
        elif kind == "create-oversized":
            if self._room(kind):
                manifest = rogue_job(self._name())
                container = manifest["spec"]["template"]["spec"]["containers"][0]
                container["env"] = [{"name": "BLOB", "value": "x" * OVERSIZED_BYTES}]
                await self._create(kind, manifest)
        else:  # pragma: no cover - ATTEMPTS and this list are one
            raise ValueError(kind)

    # ------------------------------------------------------------ the #23 tries' calls

    def _long(self) -> dict[str, Any]:
        """A Job whose pods run long enough to be caught running."""
        return rogue_job(self._name(), run_for=LONG_RUN_FOR)

    def _swappable(self) -> dict[str, Any]:
        """One long pod on SWAP_TEMPLATE: after a swap no pod is made on the old
        admission (kuota stops it, and admits it again charged the new shape)."""
        job = rogue_job(self._name(), run_for=LONG_RUN_FOR, template=SWAP_TEMPLATE)
        job["spec"]["completions"] = 1
        return job

    def _delete_job(self, name: str, propagation: str) -> Any:
        return self.batch.delete_namespaced_job(name, NAMESPACE, propagation_policy=propagation)

    def _put_template(self, devices: int) -> Any:
        return self.custom.create_namespaced_custom_object(
            "resource.k8s.io", "v1", NAMESPACE, "resourceclaimtemplates", rogue_template(devices)
        )

    def _drop_template(self) -> Any:
        return self.custom.delete_namespaced_custom_object(
            "resource.k8s.io", "v1", NAMESPACE, "resourceclaimtemplates", SWAP_TEMPLATE
        )

    async def _pods_of(self, job: str) -> list[str]:
        with contextlib.suppress(ApiException, OSError, TimeoutError, aiohttp.ClientError):
            listed = await self.core.list_namespaced_pod(
                NAMESPACE, label_selector=f"batch.kubernetes.io/job-name={job}"
            )
            return [p.metadata.name for p in listed.items if not p.metadata.deletion_timestamp]
        return []

    async def release_holds(self, *, everything: bool = False) -> None:
        """Takes the rogue's finalizer off the pods it held once their time is up."""
        now = time.monotonic()
        due = [h for h in self._holds if everything or h[0] <= now]
        self._holds = [h for h in self._holds if h not in due]
        for _, pod in due:
            body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [HOLD_FINALIZER]}}
            with contextlib.suppress(ApiException, OSError, TimeoutError, aiohttp.ClientError):
                await self.core.patch_namespaced_pod(pod, NAMESPACE, body)

    async def _admitted_id(self) -> str:
        with contextlib.suppress(ApiException, OSError, TimeoutError, aiohttp.ClientError):
            listed = await self.batch.list_namespaced_job(NAMESPACE, _preload_content=False)
            items = json.loads(await listed.read()).get("items") or []
            listed.release()
            for obj in items:
                ann = (obj.get("metadata") or {}).get("annotations") or {}
                if not (obj.get("spec") or {}).get("suspend") and ann.get(ANN_DECISION_ID):
                    return str(ann[ANN_DECISION_ID])
        return "d-forged"

    # ------------------------------------------------------------ report

    def summary(self) -> list[str]:
        """One line per kind: its outcomes, and the first message of each outcome."""
        by_kind: dict[str, Counter[str]] = {}
        first: dict[tuple[str, str], str] = {}
        for t in self.tries:
            by_kind.setdefault(t.kind, Counter())[t.outcome] += 1
            first.setdefault((t.kind, t.outcome), t.message)
        lines = []
        for kind, counts in sorted(by_kind.items()):
            outcomes = ", ".join(f"{o} {n}" for o, n in sorted(counts.items()))
            lines.append(f"{kind}: {outcomes}")
            for o in sorted(counts):
                if first[(kind, o)] and o != "accepted":
                    lines.append(f"    {o}: {first[(kind, o)][:400]}")
            if kind.split(":")[0] not in MAY_PASS or kind.endswith(":unsuspend"):
                for t in self.tries:
                    if t.kind == kind and t.outcome == "accepted":
                        made = self.registry.get(t.job, "?")
                        lines.append(f"    accepted at t+{t.at - self.t0:.1f}s: {t.job} ({made})")
        return lines

    def _room(self, kind: str) -> bool:
        """Whether a try of ``kind`` may make a Job now (and counts it if past MAX_JOBS)."""
        if len(self.registry) < MAX_JOBS:
            return True
        if kind in self.owed() and self._owed_made[kind] < OWED_JOBS:
            self._owed_made[kind] += 1
            return True
        return False

    def owed(self) -> list[str]:
        """The kinds every run must try that this one has not yet tried."""
        tried = {t.kind for t in self.tries}
        return [k for k in ATTEMPTS if k not in OPPORTUNISTIC and k not in tried]

    def accepted(self) -> list[str]:
        """The kinds of try that got through (a create and a suspended relabel may)."""
        return sorted({t.kind for t in self.tries if t.outcome == "accepted"})


def _template_of(job: Mapping[str, Any]) -> str:
    pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    claims = pod.get("resourceClaims") or [{}]
    return str(claims[0].get("resourceClaimTemplateName") or "")


def _outcome(err: ApiException) -> tuple[str, str]:
    status = int(err.status or 0)
    try:
        message = str(json.loads(err.body or "{}").get("message") or err.reason or "")
    except (ValueError, AttributeError):
        message = str(err.reason or err.body or "")
    if status == 403 and "admission webhook" in message:
        return "refused", message
    if status == 403:
        return "forbidden", message
    if status == 422:
        return "invalid", message
    if status == 409:
        return "conflict", message
    if status == 404:
        return "gone", message
    if status == 500 and "failed calling webhook" in message:
        return "away", message  # failurePolicy Fail: kuota-ingest is down
    return "away", f"{status} {message}"[:300]


async def rogue_client(kubectl: str, kubeconfig: str, run_dir: Path) -> client.ApiClient:
    """An API client that authenticates as the rogue and nothing else."""
    token = await asyncio.to_thread(rogue_token, kubectl, kubeconfig)
    path = token_kubeconfig(Path(kubeconfig), token, run_dir / "rogue-kubeconfig")
    return await config.new_client_from_config(config_file=str(path))
