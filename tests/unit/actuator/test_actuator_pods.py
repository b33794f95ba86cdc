"""The actuator shell on a pod group's Pods (#18), against an in-memory apiserver: an
admission lists the group by its label and writes one conditional merge patch per
gated Pod (a conflict lists again and writes only what is left), a redelivery
writes nothing, a stop deletes the running Pods with a uid precondition, a replaced
group is reported, and the Events land on the Pods."""

from __future__ import annotations

import asyncio
import copy
from typing import Any
from urllib.parse import unquote

import pytest
from actuator_builders import decision, tol
from builders.workloads import pod
from prometheus_client import CollectorRegistry
from test_actuator_shell import FakeKube

from kuota.actuation.patch import ANN_DECISION_ID
from kuota.api.parse import parse_object
from kuota.api.parse_workloads import role_of
from kuota.api.types import PodMember
from kuota.events.schema import ActuationFailed
from kuota_actuator.apply import Actuator, pod_workload, pods_path
from kuota_actuator.events import EventSink
from kuota_actuator.jobcache import JobCache
from kuota_actuator.kubeapi import Conflict
from kuota_actuator.metrics import ActuatorMetrics

GPU = "nvidia.com/gpu"
FLAVOR = {
    "metadata": {"name": "h100"},
    "spec": {"nodeLabels": {"gpu": "h100"}, "tolerations": [tol(GPU)]},
}
KEY = "ns/podgroup/g"
PODS = "/api/v1/namespaces/ns/pods"


class PodKube(FakeKube):
    """Pods by path; a LIST by the group label; DELETE with a uid precondition."""

    def __init__(self) -> None:
        super().__init__()
        self.lists: list[str] = []
        self.deletes: list[tuple[str, dict[str, Any] | None]] = []

    async def get(self, path: str) -> dict[str, Any] | None:
        if "?labelSelector=" not in path:
            return await super().get(path)
        self._maybe_fail()
        base, _, query = path.partition("?labelSelector=")
        self.lists.append(unquote(query))
        key, _, value = unquote(query).partition("=")
        items = [
            copy.deepcopy(obj)
            for p, obj in sorted(self.objects.items())
            if p.startswith(base + "/") and obj["metadata"].get("labels", {}).get(key) == value
        ]
        for item in items:  # a LIST's items carry no kind
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return {"kind": "PodList", "items": items}

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any] | None:
        self._maybe_fail()
        stored = self.objects.get(path)
        if stored is None:
            return None
        want = ((body or {}).get("preconditions") or {}).get("uid")
        if want is not None and want != stored["metadata"].get("uid"):
            raise Conflict(409, "Precondition failed: UID in precondition")
        self.deletes.append((path, body))
        del self.objects[path]
        return stored


class Harness:
    def __init__(self) -> None:
        self.kube = PodKube()
        self.reported: list[ActuationFailed] = []
        self.metrics = ActuatorMetrics(CollectorRegistry())
        self.sink = EventSink(self.kube, self.metrics, workers=1)

        async def report(event: ActuationFailed) -> None:
            self.reported.append(event)

        async def no_sleep(seconds: float) -> None:
            await asyncio.sleep(0)

        self.actuator = Actuator(
            self.kube,
            flavors=lambda: {"h100": FLAVOR},
            report=report,
            metrics=self.metrics,
            jobs=JobCache(None),
            events=self.sink,
            sleep=no_sleep,
            clock=lambda: 1000.5,
        )

    def add(self, m: dict[str, Any]) -> None:
        self.kube.objects[f"{PODS}/{m['metadata']['name']}"] = m

    def pod(self, name: str) -> dict[str, Any]:
        return self.kube.objects[f"{PODS}/{name}"]

    async def events(self) -> list[dict[str, Any]]:
        stop = asyncio.Event()
        task = asyncio.create_task(self.sink.run(stop))
        await self.sink.drain()
        stop.set()
        await task
        return self.kube.events


def group(h: Harness, n: int = 3) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        m = pod(f"g-{i}", group="g", total=n)
        m["metadata"].update(uid=f"uid-g-{i}", resourceVersion=str(10 + i))
        h.add(m)
        out.append(m)
    return out


def admitted(pods: list[dict[str, Any]]) -> Any:
    member = parse_object(pods[0], at=0.0)
    assert isinstance(member, PodMember)
    flavors = {role_of(member.podset): {GPU: "h100"}}
    return decision("Admitted", workload=KEY, uid="uid-g-0", cluster_queue="cq", flavors=flavors)


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_the_keys_and_paths_of_pods() -> None:
    ref = pod_workload(KEY)
    assert ref is not None and ref.pod_group
    assert pods_path(ref) == (
        "/api/v1/namespaces/ns/pods?labelSelector=kueue.x-k8s.io%2Fpod-group-name%3Dg"
    )
    solo = pod_workload("ns/pod/solo")
    assert solo is not None and pods_path(solo) == "/api/v1/namespaces/ns/pods/solo"
    assert pod_workload("ns/train") is None and pod_workload("ns/pytorchjob/p") is None


async def test_an_admission_ungates_each_pod_with_one_conditional_patch(h: Harness) -> None:
    d = admitted(group(h))
    out = await h.actuator.apply(d, 3)
    assert out.result == "applied", out
    assert h.kube.lists == ["kueue.x-k8s.io/pod-group-name=g"]
    assert [b["metadata"]["resourceVersion"] for b in h.kube.patches] == ["10", "11", "12"]
    for body in h.kube.patches:
        assert body["spec"]["schedulingGates"] is None, "the gate removed"
        assert body["spec"]["nodeSelector"] == {"gpu": "h100"}
    for name in ("g-0", "g-1", "g-2"):
        stored = h.pod(name)
        assert "schedulingGates" not in stored["spec"]
        assert stored["metadata"]["annotations"][ANN_DECISION_ID] == d.id
    events = await h.events()
    assert sorted((e["involvedObject"]["name"], e["reason"]) for e in events) == [
        (f"g-{i}", r) for i in range(3) for r in ("Admitted", "Started")
    ]
    assert {e["involvedObject"]["kind"] for e in events} == {"Pod"}
    # redelivered: nothing gated is left, nothing written
    again = await h.actuator.apply(d, 3)
    assert again.result == "skipped" and len(h.kube.patches) == 3


async def test_a_conflict_lists_again_and_writes_only_what_is_left(h: Harness) -> None:
    d = admitted(group(h))
    h.kube.patch_failures = [Conflict(409, "modified")]  # the first Pod's write
    out = await h.actuator.apply(d, 3)
    assert out.result == "applied"
    assert len(h.kube.lists) == 2, "listed again after the conflict"
    assert [b["metadata"]["resourceVersion"] for b in h.kube.patches] == ["10", "11", "12"]
    assert all("schedulingGates" not in h.pod(f"g-{i}")["spec"] for i in range(3))


async def test_a_stop_deletes_the_running_pods_with_their_uid(h: Harness) -> None:
    pods = group(h)
    d = admitted(pods)
    assert (await h.actuator.apply(d, 3)).result == "applied"
    for name in ("g-0", "g-1"):
        h.pod(name)["status"] = {"phase": "Running"}
    h.pod("g-2")["status"] = {"phase": "Succeeded"}
    after = (d.cause_offset or 0) + 1  # a later decision than the admission
    stop = decision(
        "Preempted", workload=KEY, uid="uid-g-0", reason="InClusterQueue", cause_offset=after
    )
    out = await h.actuator.apply(stop, 9)
    assert out.result == "applied", out
    assert [(p, (b or {})["preconditions"]) for p, b in h.kube.deletes] == [
        (f"{PODS}/g-0", {"uid": "uid-g-0"}),
        (f"{PODS}/g-1", {"uid": "uid-g-1"}),
    ]
    assert f"{PODS}/g-2" in h.kube.objects, "an ended Pod stays"
    again = await h.actuator.apply(stop, 9)
    assert again.result == "skipped" and len(h.kube.deletes) == 2
    preempted = [e for e in await h.events() if e["reason"] == "Preempted"]
    assert sorted(e["involvedObject"]["name"] for e in preempted) == ["g-0", "g-1"]


async def test_an_admission_of_a_replaced_group_is_reported(h: Harness) -> None:
    pods = group(h)
    d = admitted(pods)
    for m in pods:
        m["metadata"]["uid"] = "new-" + m["metadata"]["uid"]
    out = await h.actuator.apply(d, 3)
    assert out.result == "failed"
    (failed,) = h.reported
    assert (failed.reason, failed.workload, failed.decision_id) == ("JobNotFound", KEY, d.id)
    assert h.kube.patches == [] and all(m["spec"]["schedulingGates"] for m in pods)


async def test_a_single_pod_is_read_and_written_by_name(h: Harness) -> None:
    solo = pod("solo")
    solo["metadata"].update(uid="s1", resourceVersion="7")
    h.add(solo)
    d = decision("Admitted", workload="ns/pod/solo", uid="s1", flavors={"main": {GPU: "h100"}})
    assert (await h.actuator.apply(d, 1)).result == "applied"
    assert h.kube.lists == [] and "schedulingGates" not in h.pod("solo")["spec"]


async def test_a_pending_group_gets_its_event_on_the_pod_that_names_it(h: Harness) -> None:
    group(h, 2)
    d = decision("Inadmissible", workload=KEY, uid="uid-g-1", message="1 of 2 pods exist")
    await h.actuator.apply(d, 1)
    (event,) = await h.events()
    assert (event["reason"], event["involvedObject"]["name"]) == ("Pending", "g-1")
