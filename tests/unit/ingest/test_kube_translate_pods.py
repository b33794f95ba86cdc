"""What ingest journals of a Pod with the queue label (#18): what the fold reads of
it (the projection: no env, args or images; its phase, gates and controller
owner), only when that changes; each pod group's PodsReady and WorkloadFinished
under the group's key, read from its Pods as Kueue v0.19.2 reads them; a Job's
pod with the label copied into its template is never journaled."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from builders.driver import Driver, kinds
from builders.manifests import cluster_queue, flavor, local_queue
from builders.workloads import pod

from kuota.actuation.scheduling import read_flavor
from kuota.actuation.workloads import admit_pod
from kuota.api.parse import parse_object
from kuota.api.types import PodMember, ResourceFlavor
from kuota.events.schema import ObjectDeleted, ObjectUpserted, PodsReady, WorkloadFinished
from kuota.kube.pod_status import PodGroups
from kuota.kube.translate import Seen, fold_digest, journal_object, translate_upsert
from kuota.kube.watch import Resource
from kuota_ingest.journal import Item
from kuota_ingest.sources import Clock, Sources, Watched

GROUP = "ns/podgroup/g"


def cluster_pod(name: str = "g-0", *, rv: str = "1", **kw: Any) -> dict[str, Any]:
    """A group Pod as the apiserver returns it: env, args, image, volumes, status."""
    m = pod(name, **{"group": "g", "total": 3, **kw})
    m["metadata"].update(
        uid=f"uid-{name}",
        resourceVersion=rv,
        creationTimestamp="2026-01-01T00:00:00Z",
        managedFields=[{"manager": "kubectl"}],
    )
    m["metadata"]["labels"]["app"] = "trainer"
    m["metadata"]["annotations"]["note"] = "n" * 50
    c = m["spec"]["containers"][0]
    c.update(args=["--epochs", "3"], env=[{"name": "TOKEN", "value": "secret"}], image="t:1")
    m["spec"].update(volumes=[{"name": "data", "emptyDir": {}}], nodeSelector={"zone": "a"})
    m["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    return m


def running(m: dict[str, Any], *, rv: str, ready: bool = True) -> dict[str, Any]:
    out = copy.deepcopy(m)
    out["metadata"]["resourceVersion"] = rv
    out["spec"].pop("schedulingGates", None)
    cond = {"type": "Ready", "status": "True" if ready else "False"}
    out["status"] = {"phase": "Running", "conditions": [cond], "podIP": "10.0.0.1"}
    return out


def ended(m: dict[str, Any], phase: str, *, rv: str, message: str = "") -> dict[str, Any]:
    out = running(m, rv=rv, ready=False)
    out["status"]["phase"] = phase
    if message:
        out["status"]["message"] = message
    return out


# --------------------------------------------------------------------------- the projection


def test_the_fold_reads_the_projection_as_the_whole_pod() -> None:
    whole = cluster_pod()
    journaled = journal_object("Pod", whole)
    assert parse_object(journaled, at=1.0) == parse_object(whole, at=1.0)
    member = parse_object(journaled, at=1.0)
    assert isinstance(member, PodMember) and member.gated and member.total == 3
    failed = ended(whole, "Failed", rv="2")
    assert parse_object(journal_object("Pod", failed), at=1.0) == parse_object(failed, at=1.0)
    read = parse_object(journal_object("Pod", failed), at=1.0)
    assert isinstance(read, PodMember) and read.failed, "the phase is journaled"


def test_only_what_the_fold_reads_of_a_pod_is_journaled() -> None:
    whole = cluster_pod()
    whole["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n1"},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1",
         "controller": True, "blockOwnerDeletion": True},
    ]  # fmt: skip
    whole["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    out = journal_object("Pod", whole)
    md = out["metadata"]
    assert md["labels"] == {
        "kueue.x-k8s.io/queue-name": "lq",
        "kueue.x-k8s.io/pod-group-name": "g",
    }
    assert md["annotations"] == {"kueue.x-k8s.io/pod-group-total-count": "3"}
    assert md["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1",
         "controller": True},
    ], "only the controller, trimmed"  # fmt: skip
    assert md["deletionTimestamp"] == "2026-01-01T00:01:00Z"
    assert "managedFields" not in md
    (c,) = out["spec"]["containers"]
    assert c == {"name": "main", "resources": whole["spec"]["containers"][0]["resources"]}
    assert out["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert out["spec"]["nodeSelector"] == {"zone": "a"}
    assert "volumes" not in out["spec"] and "restartPolicy" not in out["spec"]
    assert out["status"] == {"phase": "Pending"}
    assert (out["kind"], out["apiVersion"]) == ("Pod", "v1")
    assert "secret" not in repr(out) and "t:1" not in repr(out)


def test_a_pod_is_journaled_again_only_when_what_the_fold_reads_changes() -> None:
    gated = cluster_pod()
    first = translate_upsert("Pod", gated, None, at=1.0)
    assert [type(e) for e in first.events] == [ObjectUpserted]
    kubelet = copy.deepcopy(gated)  # kubelet's and the scheduler's writes: no journal
    kubelet["metadata"]["resourceVersion"] = "2"
    kubelet["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    t = translate_upsert("Pod", kubelet, first.seen, at=2.0)
    assert t.skipped and not t.events
    assert fold_digest("Pod", kubelet) == fold_digest("Pod", gated)
    ungated = copy.deepcopy(kubelet)  # kuota's admission: the gate goes
    ungated["metadata"]["resourceVersion"] = "3"
    ungated["spec"].pop("schedulingGates")
    t2 = translate_upsert("Pod", ungated, t.seen, at=3.0)
    assert [type(e) for e in t2.events] == [ObjectUpserted]
    failed = ended(ungated, "Failed", rv="4")  # a Failed Pod leaves its group's count
    assert [type(e) for e in translate_upsert("Pod", failed, t2.seen, at=4.0).events] == [
        ObjectUpserted
    ]


# --------------------------------------------------------------------------- group status


def test_a_group_is_ready_once_all_its_pods_exist_and_are_ready() -> None:
    groups = PodGroups()
    pods = [cluster_pod(f"g-{i}") for i in range(3)]
    assert groups.upsert(running(pods[0], rv="2"), at=1.0) == []
    assert groups.upsert(running(pods[1], rv="2"), at=1.0) == [], "2 of 3: not ready"
    assert groups.upsert(pods[2], at=1.0) == [], "the third still gated"
    (ready,) = groups.upsert(running(pods[2], rv="2"), at=2.0)
    assert isinstance(ready, PodsReady)
    assert (ready.workload, ready.ready, ready.namespace, ready.name) == (GROUP, True, "ns", "g")
    assert groups.upsert(running(pods[2], rv="3"), at=2.5) == [], "on a flip only"
    (lost,) = groups.upsert(running(pods[1], rv="4", ready=False), at=3.0)
    assert isinstance(lost, PodsReady) and lost.ready is False


def test_a_group_finishes_once_as_many_pods_as_its_count_succeeded() -> None:
    groups = PodGroups()
    pods = [cluster_pod(f"g-{i}") for i in range(3)]
    events = [e for p in pods for e in groups.upsert(running(p, rv="2"), at=1.0)]
    assert [type(e) for e in events] == [PodsReady]
    assert groups.upsert(ended(pods[0], "Succeeded", rv="3"), at=2.0) == [], (
        "a Succeeded Pod counts as ready, as a Job's: no flicker before the end"
    )
    assert groups.upsert(ended(pods[1], "Succeeded", rv="3"), at=2.0) == []
    (done,) = groups.upsert(ended(pods[2], "Succeeded", rv="3"), at=3.0)
    assert isinstance(done, WorkloadFinished)
    assert (done.workload, done.succeeded, done.message) == (GROUP, True, "Pods succeeded: 3/3.")
    assert groups.upsert(ended(pods[2], "Succeeded", rv="4"), at=3.5) == [], "once"
    # its Pods deleted: forgotten with the last, a new group of the name starts afresh
    assert [groups.delete(p, at=4.0) for p in pods] == [[], [], []]
    assert len(groups) == 0
    again = [e for p in pods for e in groups.upsert(ended(p, "Succeeded", rv="9"), at=5.0)]
    assert [type(e) for e in again] == [PodsReady, WorkloadFinished]


def test_a_retriable_groups_failed_pod_is_replaced_an_unretriable_group_ends() -> None:
    groups = PodGroups()
    pods = [cluster_pod(f"g-{i}") for i in range(3)]
    for p in pods[:2]:
        groups.upsert(ended(p, "Succeeded", rv="2"), at=1.0)
    failed = groups.upsert(ended(pods[2], "Failed", rv="2"), at=1.0)
    assert not any(isinstance(e, WorkloadFinished) for e in failed), "its owner replaces it"
    unretriable = copy.deepcopy(pods[2])
    unretriable["metadata"]["annotations"]["kueue.x-k8s.io/retriable-in-group"] = "false"
    (done,) = [
        e
        for e in groups.upsert(ended(unretriable, "Failed", rv="3"), at=2.0)
        if isinstance(e, WorkloadFinished)
    ]
    assert (done.succeeded, done.message) == (False, "Pods succeeded: 2/3.")


def test_a_single_pod_is_ready_with_its_condition_and_ends_with_its_phase() -> None:
    groups = PodGroups()
    solo = pod("solo")
    solo["metadata"].update(uid="s1", resourceVersion="1")
    (ready,) = groups.upsert(running(solo, rv="2"), at=1.0)
    assert isinstance(ready, PodsReady) and ready.workload == "ns/pod/solo" and ready.ready
    out = groups.upsert(ended(solo, "Failed", rv="3", message="OOMKilled"), at=2.0)
    assert [type(e) for e in out] == [PodsReady, WorkloadFinished]
    assert isinstance(out[1], WorkloadFinished)
    assert (out[1].succeeded, out[1].message, out[1].name) == (False, "OOMKilled", "solo")


# --------------------------------------------------------------------------- the source


class Writer:
    """The journal writer's queue, as the sources see it."""

    def __init__(self) -> None:
        self.items: list[Item] = []

    async def put(self, item: Item) -> None:
        self.items.append(item)

    def events(self) -> list[Any]:
        return [e for item in self.items for e in item.events]


def sources(memory: dict[str, Seen] | None = None, api: Any = None) -> tuple[Sources, Writer]:
    writer = Writer()
    src = Sources(api, writer, memory=memory if memory is not None else {}, clock=Clock())  # type: ignore[arg-type]
    return src, writer


def job_owned(m: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(m)
    out["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j1", "controller": True}
    ]
    return out


async def test_a_jobs_pod_with_the_queue_label_copied_is_never_journaled() -> None:
    src, writer = sources()
    await src.observe("Pod", "UPSERT", job_owned(cluster_pod("j-abc")))
    await src.observe("Pod", "UPSERT", running(job_owned(cluster_pod("j-abc")), rv="2"))
    await src.observe("Pod", "DELETE", job_owned(cluster_pod("j-abc")))
    assert writer.items == [] and src.memory == {} and len(src.pod_groups) == 0


async def test_a_member_that_gains_a_workloads_owner_leaves_its_group() -> None:
    src, writer = sources()
    member = cluster_pod("g-0")
    await src.observe("Pod", "UPSERT", member)
    assert [type(e) for e in writer.events()] == [ObjectUpserted]
    adopted = job_owned(member)
    adopted["metadata"]["resourceVersion"] = "2"
    await src.observe("Pod", "UPSERT", adopted)
    (gone,) = writer.events()[1:]
    assert isinstance(gone, ObjectDeleted) and (gone.kind, gone.name) == ("Pod", "g-0")
    assert "Pod/ns/g-0" not in src.memory and len(src.pod_groups) == 0


async def test_the_sources_journal_the_groups_status_beside_its_pods() -> None:
    src, writer = sources()
    for i in range(3):
        await src.observe("Pod", "UPSERT", running(cluster_pod(f"g-{i}"), rv="2"))
    journaled = [type(e) for e in writer.events()]
    assert journaled == [ObjectUpserted, ObjectUpserted, ObjectUpserted, PodsReady]
    assert writer.items[-1].key == "Pod/ns/g-2", "in the same journal item as the Pod"


class ListingApi:
    """The apiserver's LIST of Pods (a WATCH that stays quiet)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.selectors: list[str | None] = []

    async def call_api(self, path: str, method: str, **kw: Any) -> Any:
        query = dict(kw.get("query_params") or [])
        self.selectors.append(query.get("labelSelector"))
        body = {"items": self.items, "metadata": {"resourceVersion": "100"}}
        return _Response(body, watch=query.get("watch") == "true")


class _Response:
    status = 200

    def __init__(self, body: dict[str, Any], *, watch: bool) -> None:
        self._body = body
        self.content = self._quiet() if watch else None

    async def _quiet(self) -> Any:
        await asyncio.sleep(3600)
        yield b""

    async def read(self) -> bytes:
        return json.dumps(self._body).encode()

    def release(self) -> None:
        pass


async def test_after_a_restart_every_pod_is_read_again_to_know_its_group() -> None:
    """Before the restart g-0 and g-1 had succeeded and g-2 ran (all journaled); g-2
    succeeded while ingest was down. Only g-2 is journaled again, but the group's end
    needs all three: the unchanged ones are read again too."""
    pods = [running(cluster_pod(f"g-{i}"), rv="5") for i in range(3)]
    memory: dict[str, Seen] = {}
    for p in pods:
        t = translate_upsert("Pod", p, None, at=1.0)
        assert t.seen is not None
        memory[f"Pod/ns/{p['metadata']['name']}"] = t.seen
    done = [ended(p, "Succeeded", rv="5") for p in pods]  # as they were before the restart...
    done[2]["metadata"]["resourceVersion"] = "7"  # ...but the third ended while ingest was down
    for p in done[:2]:  # the first two ended before the restart: remembered as such
        t = translate_upsert("Pod", p, None, at=1.0)
        assert t.seen is not None
        memory[f"Pod/ns/{p['metadata']['name']}"] = t.seen
    api = ListingApi(done)
    src, writer = sources(memory, api)
    watched = Watched(Resource("Pod", "/api/v1/pods", label_selector="kueue.x-k8s.io/queue-name"))
    task = asyncio.create_task(src.watch(watched))
    try:
        async with asyncio.timeout(5):
            while not any(isinstance(e, WorkloadFinished) for e in writer.events()):
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    upserts = [e for e in writer.events() if isinstance(e, ObjectUpserted)]
    assert [e.object["metadata"]["name"] for e in upserts] == ["g-2"], "only the change"
    (fin,) = [e for e in writer.events() if isinstance(e, WorkloadFinished)]
    assert fin.workload == GROUP and fin.succeeded
    assert api.selectors[0] == "kueue.x-k8s.io/queue-name"


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_the_digest_moves_with_the_phase(phase: str) -> None:
    p = running(cluster_pod(), rv="2")
    assert fold_digest("Pod", p) != fold_digest("Pod", ended(p, phase, rv="3"))


# --------------------------------------------------------------------------- through the fold


def test_the_fold_admits_the_journaled_group_keeps_it_and_ends_it_on_its_pods() -> None:
    """Ingest's events into the fold: the group admitted once its three Pods are
    journaled, kept admitted through kuota's own admission writes (gate gone, the
    flavor's selector in), ended (quota free) when ingest sees all three Succeeded,
    and quiet while the done Pods are deleted."""
    d = Driver()
    d.apply(
        flavor("h100", spec={"nodeLabels": {"gpu": "h100"}}),
        cluster_queue("cq", gpus=4),
        local_queue("lq", namespace="ns", cluster_queue="cq"),
    )
    groups = PodGroups()
    memory: dict[str, Seen] = {}

    def ingest(m: dict[str, Any], at: float) -> list[Any]:
        key = f"Pod/ns/{m['metadata']['name']}"
        t = translate_upsert("Pod", m, memory.get(key), at=at)
        assert t.seen is not None
        memory[key] = t.seen
        out = []
        for e in (*t.events, *groups.upsert(m, at=at)):
            out += d.feed(e)
        return out

    pods = [cluster_pod(f"g-{i}") for i in range(3)]
    for p in pods:
        p["spec"].pop("nodeSelector")
    decided = [x for p in pods for x in ingest(p, 1.0)]
    (admitted,) = [x for x in decided if x.type == "Admitted"]
    h100 = read_flavor({"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu": "h100"}}})
    assert isinstance(h100, ResourceFlavor)
    for i, p in enumerate(pods):
        ungated = admit_pod(p, admitted, {"h100": h100})
        assert ungated["spec"]["nodeSelector"] == {"gpu": "h100"}
        assert ingest(running(ungated, rv="5"), 2.0 + i) == [], "its own write: no re-decision"
    assert d.state(GROUP) == "Admitted"
    assert {r: q for (_, r), q in d.usage("cq").items()} == {"nvidia.com/gpu": 3000}
    out = [x for i, p in enumerate(pods) for x in ingest(ended(p, "Succeeded", rv="9"), 5.0 + i)]
    assert kinds(out) == [("Finished", GROUP)] and out[0].reason == "Succeeded"
    assert d.usage("cq") == {}
    gone = [x for p in pods for x in d.delete("Pod", p["metadata"]["name"], "ns")]
    assert gone == []
