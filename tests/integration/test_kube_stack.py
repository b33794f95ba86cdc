"""Proof that the local Kubernetes stack runs a DRA GPU Job end to end.

Against the stack's kube-apiserver (``KUBECONFIG`` from the environment or
``.stack/stack.env``; unset fails the test): publish a partitionable GPU as
ResourceSlices of a kwok node (a shared counter set of 80Gi, one whole GPU that
consumes all of it and seven ``1g.10gb`` MIG partitions of 10Gi each), a
DeviceClass, a ResourceClaimTemplate that asks for one ``1g.10gb`` partition
by CEL, and a suspended Job using the template. Each object is seen arriving
through a watch. Unsuspending the Job must get its pod scheduled on the kwok
node by kube-scheduler (DRA plugin), its ResourceClaim allocated to a
``1g.10gb`` device, the pod driven Pending -> Running -> Succeeded by kwok, and
the Job complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException
from stack_helpers import temp_namespace

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DRIVER = "gpu.nvidia.com"
NODE = "kwok-gpu-0"  # from scripts/kube/nodes.yaml
WAIT = 120.0  # seconds, for every wait below
TEST_LABEL = "kuota.dev/test"
MIG_PROFILE = "1g.10gb"
MIG_COUNT = 7


class Recorder:
    """Every event of one list/watch endpoint, from a consistent list onwards.

    ``wait`` returns the first recorded object matching a predicate, so nothing
    is missed between starting an action and starting to wait for its effect.
    """

    def __init__(
        self,
        what: str,
        list_fn: Callable[..., Any],
        *args: Any,
        model: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.what, self.model = what, model
        self.list_fn, self.args, self.kwargs = list_fn, args, kwargs
        self.events: list[tuple[str, Any]] = []
        self.changed = asyncio.Event()
        self.rv = ""
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Recorder:
        await self._relist()
        self.task = asyncio.create_task(self._run())
        return self

    async def _relist(self) -> None:
        listed = await self.list_fn(*self.args, **self.kwargs)
        for item in listed.items:
            self._add("LISTED", item)
        self.rv = listed.metadata.resource_version

    def _add(self, kind: str, obj: Any) -> None:
        self.events.append((kind, obj))
        self.changed.set()

    async def _run(self) -> None:
        while True:
            try:
                # model: kubernetes_asyncio guesses it from the list's name, which
                # fails for ResourceClaim (generated as ResourceV1ResourceClaim).
                async with watch.Watch(return_type=self.model) as w:
                    stream = w.stream(
                        self.list_fn,
                        *self.args,
                        resource_version=self.rv,
                        timeout_seconds=30,
                        **self.kwargs,
                    )
                    async for ev in stream:
                        self._add(ev["type"], ev["object"])
                        self.rv = ev["object"].metadata.resource_version
            except ApiException as e:
                if e.status != 410:  # 410 Gone: history compacted, list again
                    raise
                await self._relist()

    async def wait(self, pred: Callable[[str, Any], bool], what: str) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        seen = 0
        while True:
            self.changed.clear()
            for kind, obj in self.events[seen:]:
                if pred(kind, obj):
                    return obj
            seen = len(self.events)
            if self.task is not None and self.task.done():
                error = None if self.task.cancelled() else self.task.exception()
                pytest.fail(f"the {self.what} watch ended ({error!r}) while waiting for {what}")
            remaining = deadline - loop.time()
            if remaining <= 0:
                last = [(k, _brief(o)) for k, o in self.events[-5:]]
                pytest.fail(f"{what}: not seen within {WAIT:.0f}s; last {self.what} events: {last}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)

    async def stop(self) -> None:
        if self.task is None or self.task.done():
            return
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task


def _brief(obj: Any) -> str:
    status = getattr(obj, "status", None)
    phase = getattr(status, "phase", None) if status is not None else None
    return f"{obj.metadata.name}" + (f" ({phase})" if phase else "")


def _named(name: str) -> Callable[[str, Any], bool]:
    return lambda kind, obj: kind in ("LISTED", "ADDED") and obj.metadata.name == name


@pytest.fixture
async def api(kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api_client:
        yield api_client


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"kuota-kube-{uuid.uuid4().hex[:8]}"
    async with temp_namespace(api, name, {TEST_LABEL: "kube-stack"}):
        yield name


def _slices(run: str) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """The pool of one partitionable 80Gi GPU on NODE, as two ResourceSlices:
    Kubernetes 1.36 wants shared counters and devices in separate slices."""
    pool = {"name": f"{NODE}-{run}", "generation": 1, "resourceSliceCount": 2}
    counter_set = "gpu-0-memory"
    meta = {"labels": {TEST_LABEL: "kube-stack"}}
    product = {"string": "NVIDIA A100-SXM4-80GB"}

    def consumes(size: str) -> list[dict[str, Any]]:
        return [{"counterSet": counter_set, "counters": {"memory": {"value": size}}}]

    devices = [
        {
            "name": "gpu-0",
            "attributes": {
                "profile": {"string": "full"},
                "productName": product,
                "kuotaTestRun": {"string": run},
            },
            "capacity": {"memory": {"value": "80Gi"}},
            "consumesCounters": consumes("80Gi"),
        }
    ]
    mig_names = {f"gpu-0-mig-{MIG_PROFILE.replace('.', '-')}-{i}" for i in range(MIG_COUNT)}
    for name in sorted(mig_names):
        devices.append(
            {
                "name": name,
                "attributes": {
                    "profile": {"string": MIG_PROFILE},
                    "productName": product,
                    "kuotaTestRun": {"string": run},
                },
                "capacity": {"memory": {"value": "10Gi"}},
                "consumesCounters": consumes("10Gi"),
            }
        )
    counters = {
        "metadata": {"name": f"{NODE}-{run}-counters", **meta},
        "spec": {
            "driver": DRIVER,
            "nodeName": NODE,
            "pool": pool,
            "sharedCounters": [{"name": counter_set, "counters": {"memory": {"value": "80Gi"}}}],
        },
    }
    devs = {
        "metadata": {"name": f"{NODE}-{run}-devices", **meta},
        "spec": {"driver": DRIVER, "nodeName": NODE, "pool": pool, "devices": devices},
    }
    return counters, devs, mig_names


async def test_dra_job_runs_on_kwok_node(api: client.ApiClient, namespace: str) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    resource = client.ResourceV1Api(api)
    run = uuid.uuid4().hex[:8]
    class_name = f"gpu.nvidia.com-{run}"
    template_name = "mig-1g"
    job_name = "train"

    # Slices left by an interrupted earlier run would offer devices of the same driver.
    await resource.delete_collection_resource_slice(label_selector=f"{TEST_LABEL}=kube-stack")

    node = await core.read_node(NODE)
    ready = {c.type: c.status for c in node.status.conditions or []}
    assert ready.get("Ready") == "True", f"kwok node {NODE} is not Ready: {ready}"

    recorders: list[Recorder] = []

    async def record(what: str, list_fn: Callable[..., Any], *args: Any, **kw: Any) -> Recorder:
        r = await Recorder(what, list_fn, *args, **kw).start()
        recorders.append(r)
        return r

    counters, devs, mig_names = _slices(run)
    try:
        classes = await record("DeviceClass", resource.list_device_class)
        slices = await record(
            "ResourceSlice", resource.list_resource_slice, label_selector=f"{TEST_LABEL}=kube-stack"
        )
        templates = await record(
            "ResourceClaimTemplate", resource.list_namespaced_resource_claim_template, namespace
        )
        jobs = await record("Job", batch.list_namespaced_job, namespace)
        pods = await record("Pod", core.list_namespaced_pod, namespace)
        claims = await record(
            "ResourceClaim",
            resource.list_namespaced_resource_claim,
            namespace,
            model="ResourceV1ResourceClaim",
        )

        await resource.create_device_class(
            {
                "metadata": {"name": class_name, "labels": {TEST_LABEL: "kube-stack"}},
                # Only this run's devices: other suites (the demo, e2e) publish devices of
                # the same driver without a `profile`, and a request selector that hits a
                # missing attribute is a CEL runtime error that fails the whole claim.
                "spec": {
                    "selectors": [
                        {
                            "cel": {
                                "expression": f'device.driver == "{DRIVER}" && "kuotaTestRun" '
                                f'in device.attributes["{DRIVER}"] && '
                                f'device.attributes["{DRIVER}"].kuotaTestRun == "{run}"'
                            }
                        }
                    ]
                },
            }
        )
        await resource.create_resource_slice(counters)
        await resource.create_resource_slice(devs)
        await resource.create_namespaced_resource_claim_template(
            namespace,
            {
                "metadata": {"name": template_name},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "exactly": {
                                        "deviceClassName": class_name,
                                        "allocationMode": "ExactCount",
                                        "count": 1,
                                        "selectors": [
                                            {
                                                "cel": {
                                                    "expression": f"device.attributes['{DRIVER}']"
                                                    f".profile == '{MIG_PROFILE}'"
                                                }
                                            }
                                        ],
                                    },
                                }
                            ]
                        }
                    }
                },
            },
        )
        await batch.create_namespaced_job(
            namespace,
            {
                "metadata": {"name": job_name},
                "spec": {
                    "suspend": True,
                    "completions": 1,
                    "parallelism": 1,
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {
                            # kwok (scripts/kube/stages/pod.yaml): Running for 5s, then Succeeded
                            "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "5s"}
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "nodeSelector": {"type": "kwok"},
                            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                            "resourceClaims": [
                                {"name": "gpu", "resourceClaimTemplateName": template_name}
                            ],
                            "containers": [
                                {
                                    "name": "trainer",
                                    "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"claims": [{"name": "gpu"}]},
                                }
                            ],
                        },
                    },
                },
            },
        )

        # Everything arrives through the watches.
        await classes.wait(_named(class_name), f"DeviceClass {class_name}")
        await slices.wait(_named(counters["metadata"]["name"]), "counter ResourceSlice")
        got = await slices.wait(_named(devs["metadata"]["name"]), "device ResourceSlice")
        assert {d.name for d in got.spec.devices} == mig_names | {"gpu-0"}
        await templates.wait(_named(template_name), f"ResourceClaimTemplate {template_name}")
        job = await jobs.wait(_named(job_name), f"Job {job_name}")
        assert job.spec.suspend is True

        # Suspended: no pod yet.
        await asyncio.sleep(1)
        assert not [o for _, o in pods.events], "a suspended Job must not create pods"

        await batch.patch_namespaced_job(job_name, namespace, {"spec": {"suspend": False}})

        pod = await pods.wait(
            lambda kind, p: kind != "DELETED" and bool(p.spec.node_name),
            f"pod of Job {job_name} scheduled",
        )
        assert pod.spec.node_name == NODE, f"pod scheduled on {pod.spec.node_name}, not {NODE}"

        claim = await claims.wait(
            lambda kind, c: kind != "DELETED" and bool(c.status and c.status.allocation),
            "ResourceClaim allocated",
        )
        results = claim.status.allocation.devices.results
        assert len(results) == 1, f"expected one allocated device, got {results}"
        res = results[0]
        assert res.driver == DRIVER and res.pool == f"{NODE}-{run}", res
        assert res.device in mig_names, f"allocated {res.device}, not a {MIG_PROFILE} partition"
        assert res.request == "gpu"
        owners = [r.name for r in claim.metadata.owner_references or []]
        assert pod.metadata.name in owners, f"claim {claim.metadata.name} owned by {owners}"

        await pods.wait(
            lambda kind, p: p.metadata.name == pod.metadata.name and p.status.phase == "Running",
            "pod Running",
        )
        await pods.wait(
            lambda kind, p: p.metadata.name == pod.metadata.name and p.status.phase == "Succeeded",
            "pod Succeeded",
        )
        done = await jobs.wait(
            lambda kind, j: j.metadata.name == job_name and (j.status.succeeded or 0) == 1,
            f"Job {job_name} succeeded",
        )
        conditions = {c.type: c.status for c in done.status.conditions or []}
        assert conditions.get("Complete") == "True", f"Job conditions: {conditions}"
        phases = [
            p.status.phase
            for _, p in pods.events
            if p.metadata.name == pod.metadata.name and p.status is not None
        ]
        assert phases.index("Running") < phases.index("Succeeded"), phases
        assert phases[0] == "Pending", phases
    finally:
        for r in recorders:
            await r.stop()
        for name in (devs["metadata"]["name"], counters["metadata"]["name"]):
            try:
                await resource.delete_resource_slice(name)
            except ApiException as e:
                if e.status != 404:
                    raise
        try:
            await resource.delete_device_class(class_name)
        except ApiException as e:
            if e.status != 404:
                raise
