"""The pure translation of observed objects into journal events
(``kuota.kube.translate``): the digest rule, the ids, status-derived events
once per uid, deletions, and bad input that never raises."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuota.events.schema import (
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    WorkloadFinished,
    parse_event,
)
from kuota.kube.readiness import job_pods
from kuota.kube.translate import (
    Seen,
    config_file_object,
    fold_digest,
    journal_object,
    object_key,
    stub,
    tick,
    translate_delete,
    translate_upsert,
)

AT = 1_700_000_000.5
ORIGINAL = "kuota.dev/original-pod-template-scheduling"
QUEUE = "kueue.x-k8s.io/queue-name"


class JobB:
    """A Job manifest, as the apiserver returns it, built fluently."""

    def __init__(self, name: str = "train", ns: str = "team-a", uid: str = "u-1") -> None:
        self.m: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": uid,
                "resourceVersion": "100",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {QUEUE: "lq"},
                "annotations": {},
                "managedFields": [{"manager": "kubectl", "operation": "Update"}],
            },
            "spec": {
                "suspend": True,
                "parallelism": 2,
                "completions": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "x"}],
                    }
                },
            },
            "status": {},
        }

    def rv(self, rv: int | str) -> JobB:
        self.m["metadata"]["resourceVersion"] = str(rv)
        return self

    def suspend(self, value: bool) -> JobB:
        self.m["spec"]["suspend"] = value
        return self

    def spec(self, **kw: Any) -> JobB:
        self.m["spec"].update(kw)
        return self

    def pod_spec(self, **kw: Any) -> JobB:
        self.m["spec"]["template"]["spec"].update(kw)
        return self

    def inject(self, selector: dict[str, str] | None, tolerations: Any = None) -> JobB:
        """What the actuator does on admission: record the original scheduling, inject."""
        pod = self.m["spec"]["template"]["spec"]
        original = {"nodeSelector": pod.get("nodeSelector"), "tolerations": pod.get("tolerations")}
        self.annotate(**{ORIGINAL: json.dumps(original)})
        if selector:
            pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **selector}
        if tolerations:
            pod["tolerations"] = [*(pod.get("tolerations") or []), *tolerations]
        return self

    def annotate(self, **kw: str) -> JobB:
        self.m["metadata"]["annotations"].update(kw)
        return self

    def label(self, **kw: str) -> JobB:
        self.m["metadata"]["labels"].update(kw)
        return self

    def status(self, **kw: Any) -> JobB:
        self.m["status"].update(kw)
        return self

    def condition(self, type_: str, status: str = "True", message: str = "") -> JobB:
        self.m["status"].setdefault("conditions", []).append(
            {"type": type_, "status": status, "message": message}
        )
        return self

    def copy(self) -> JobB:
        other = JobB()
        other.m = copy.deepcopy(self.m)
        return other


def upsert(obj: Any, prev: Seen | None = None, kind: str = "Job") -> Any:
    return translate_upsert(kind, obj, prev, at=AT)


# --------------------------------------------------------------------------- journaled form


def test_job_is_journaled_without_status_and_managed_fields() -> None:
    job = JobB().status(active=1, ready=1)
    t = upsert(job.m)
    assert [type(e) for e in t.events] == [ObjectUpserted]
    ev = t.events[0]
    assert ev.id == "Job/team-a/train@100"
    assert ev.at == AT
    assert "status" not in ev.object
    assert "managedFields" not in ev.object["metadata"]
    assert ev.object["spec"] == {
        "suspend": True,
        "parallelism": 2,
        "completions": 2,
        "template": {"spec": {"containers": [{"name": "c"}]}},
    }, "what the fold reads of the spec, as the apiserver said it (no image)"
    assert "status" in job.m and "managedFields" in job.m["metadata"], "the input is not mutated"
    # the journaled event survives the wire
    assert parse_event(ev.model_dump_json()) == ev


def test_list_items_get_kind_and_api_version() -> None:
    item = {"metadata": {"name": "gpu", "resourceVersion": "7"}, "spec": {}}
    out = journal_object("DeviceClass", item)
    assert out["kind"] == "DeviceClass" and out["apiVersion"] == "resource.k8s.io/v1"
    item = {"metadata": {"name": "cq", "resourceVersion": "8"}, "spec": {}}
    t = upsert(item, kind="ClusterQueue")
    assert t.events[0].id == "ClusterQueue//cq@8", "cluster-scoped: empty namespace in the id"
    assert t.events[0].object["apiVersion"] == "kueue.x-k8s.io/v1beta2"


def test_a_real_jobs_created_at_annotation_is_not_journaled() -> None:
    """The trust boundary: whoever back-dated ``kuota.dev/created-at``, the fold
    orders the journaled Job by the apiserver's creationTimestamp."""
    from kuota.api.parse import parse_job
    from kuota.api.types import WorkloadSpec

    job = JobB().annotate(**{"kuota.dev/created-at": "1", "kuota.dev/active": "false", "t": "x"})
    t = upsert(job.m)
    journaled = t.events[0].object
    assert journaled["metadata"]["annotations"] == {"kuota.dev/active": "false"}, (
        "only the annotations the fold reads"
    )
    assert "kuota.dev/created-at" in job.m["metadata"]["annotations"], "the input is not mutated"
    spec = parse_job(journaled, at=AT)
    assert isinstance(spec, WorkloadSpec)
    assert spec.creation_seconds == 1_767_225_600.0, "2026-01-01T00:00:00Z, not 1"
    assert spec.active is False, "kuota.dev/active, the user's lever, is journaled"
    # The same object fed to the fold directly (a synthetic journal) keeps it.
    direct = parse_job(job.m, at=AT)
    assert isinstance(direct, WorkloadSpec) and direct.creation_seconds == 1.0
    # Only Jobs: another kind's annotations are journaled as they are.
    cm = {"metadata": {"name": "c", "annotations": {"kuota.dev/created-at": "1"}}}
    assert journal_object("ConfigMap", cm)["metadata"]["annotations"] == {
        "kuota.dev/created-at": "1"
    }


# --------------------------------------------------------------------------- the digest rule


@dataclass(frozen=True)
class DigestCase:
    name: str
    change: Any  # JobB -> JobB
    journaled: bool


DIGEST_CASES = [
    DigestCase("suspend flipped (the backstop reads it)", lambda j: j.suspend(False), True),
    DigestCase("status only", lambda j: j.status(active=2, ready=2), False),
    DigestCase("injected node selector", lambda j: j.inject({"gpu": "h100"}), False),
    DigestCase(
        "injected tolerations",
        lambda j: j.inject(None, [{"key": "gpu", "operator": "Exists"}]),
        False,
    ),
    DigestCase(
        "injection with an unreadable record",
        lambda j: j.inject({"gpu": "h100"}).annotate(**{ORIGINAL: "{"}),
        True,  # once: the fields become unknown; the Job is journaled as it is
    ),
    DigestCase("user edits the node selector", lambda j: j.pod_spec(nodeSelector={"a": "b"}), True),
    DigestCase("empty node selector is absent", lambda j: j.pod_spec(nodeSelector={}), False),
    DigestCase(
        "decision id annotation", lambda j: j.annotate(**{"kuota.dev/decision-id": "d"}), False
    ),
    DigestCase("managed fields", lambda j: j.m["metadata"].update(managedFields=[]) or j, False),
    DigestCase("generation", lambda j: j.m["metadata"].update(generation=5) or j, True),
    DigestCase("parallelism", lambda j: j.spec(parallelism=4), True),
    DigestCase("container resources", lambda j: j.pod_spec(containers=[{"name": "d"}]), True),
    DigestCase("active annotation", lambda j: j.annotate(**{"kuota.dev/active": "false"}), True),
    DigestCase(
        "created-at annotation (never journaled)",
        lambda j: j.annotate(**{"kuota.dev/created-at": "5"}),
        False,
    ),
    DigestCase("user annotation", lambda j: j.annotate(team="x"), True),
    DigestCase(
        "priority label", lambda j: j.label(**{"kueue.x-k8s.io/priority-class": "hi"}), True
    ),
    DigestCase("queue label", lambda j: j.label(**{QUEUE: "other"}), True),
]


@pytest.mark.parametrize("case", DIGEST_CASES, ids=lambda c: c.name)
def test_job_digest_rule(case: DigestCase) -> None:
    first = upsert(JobB().m)
    changed = case.change(JobB()).rv(101)
    t = upsert(changed.m, first.seen)
    assert (len(t.events) == 1) == case.journaled, [e.id for e in t.events]
    assert t.skipped == (not case.journaled)
    if case.journaled:
        assert t.events[0].id == "Job/team-a/train@101"
    assert t.seen is not None and t.seen.rv == "101", "the observed rv is remembered either way"


def test_an_absent_suspend_digests_as_false() -> None:
    running = JobB().suspend(False)
    absent = JobB()
    del absent.m["spec"]["suspend"]
    assert fold_digest("Job", absent.m) == fold_digest("Job", running.m)
    assert fold_digest("Job", absent.m) != fold_digest("Job", JobB().m), "JobB is suspended"


def test_journaled_job_carries_the_users_scheduling_not_the_injection() -> None:
    job = JobB().pod_spec(nodeSelector={"zone": "a"}, tolerations=[{"key": "t"}])
    user = copy.deepcopy(job.m["spec"]["template"]["spec"])
    injected = job.copy().inject({"gpu": "h100"}, [{"key": "gpu", "operator": "Exists"}])
    injected.label(team="x")  # something the fold reads changes while admitted
    t = upsert(injected.m)
    pod = t.events[0].object["spec"]["template"]["spec"]
    assert pod == {
        "containers": [{"name": "c"}],
        "nodeSelector": user["nodeSelector"],
        "tolerations": user["tolerations"],
    }, "the user's nodeSelector and tolerations, not the flavor's"
    assert ORIGINAL not in t.events[0].object["metadata"].get("annotations", {})
    assert injected.m["spec"]["template"]["spec"]["nodeSelector"]["gpu"] == "h100", "input kept"


PINNED_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Exists"}]}]
        }
    }
}


@pytest.mark.parametrize(
    ("affinity", "nodes"), [(None, None), (PINNED_AFFINITY, {"main": ["n1", "n2"]})]
)
def test_actuator_admit_and_stop_echo_only_the_suspend_flips(
    affinity: dict[str, Any] | None, nodes: dict[str, list[str]] | None
) -> None:
    """Contract with kuota.actuation.patch: every Job the actuator writes while
    admitting and stopping has the digest of the Job the user created, but for
    ``spec.suspend`` (the backstop reads it): each write that flips it is
    journaled once, every other write is not. A podset pinned to nodes (#17) is
    journaled with the user's affinity, not the pin."""
    from kuota.actuation.patch import ANN_ORIGINAL, DecisionOrder, ResetStartTime, UpdateJob, plan
    from kuota.actuation.scheduling import read_flavor
    from kuota.events.schema import Decision

    assert ANN_ORIGINAL == ORIGINAL
    flavor = read_flavor(
        {
            "metadata": {"name": "h100"},
            "spec": {
                "nodeLabels": {"gpu": "h100"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        }
    )
    job = JobB().pod_spec(nodeSelector={"zone": "a"}).m
    if affinity is not None:
        job["spec"]["template"]["spec"]["affinity"] = copy.deepcopy(affinity)
    first = upsert(job)
    admitted = Decision(
        id="d1",
        cause="c",
        cause_offset=1,
        at=AT,
        type="Admitted",
        workload="team-a/train",
        uid="u-1",
        cluster_queue="cq",
        flavors={"main": {"nvidia.com/gpu": "h100"}},
        nodes=nodes,
    )
    preempted = Decision(
        id="d2",
        cause="c2",
        cause_offset=2,
        at=AT,
        type="Preempted",
        workload="team-a/train",
        uid="u-1",
        cluster_queue="cq",
        reason="InClusterQueue",
    )
    seen = first.seen
    writes = suspend_flips = 0
    for decision, offset in ((admitted, 10), (preempted, 11)):
        for _ in range(5):
            step = plan(
                job, decision, order=DecisionOrder.of(decision, offset), flavors={"h100": flavor}
            )
            if not isinstance(step, UpdateJob | ResetStartTime):
                break
            flips = (job.get("spec") or {}).get("suspend") != step.job["spec"].get("suspend")
            job = step.job
            writes += 1
            t = upsert(job, seen)
            upserts = [e for e in t.events if isinstance(e, ObjectUpserted)]
            if flips:
                suspend_flips += 1
                assert len(upserts) == 1 and not t.skipped, f"{decision.type}: {step.what}"
                assert upserts[0].object["spec"]["suspend"] is job["spec"]["suspend"]
                journaled = upserts[0].object["spec"]["template"]["spec"]
                assert journaled.get("affinity") == affinity, "the user's, never the pin"
            else:
                assert t.skipped and not upserts, (
                    f"{decision.type}: {step.what} echoed into the journal"
                )
            seen = t.seen
            if isinstance(step, UpdateJob) and step.final:
                break
    assert writes >= 3, "admit, suspend and restore were all exercised"
    assert suspend_flips == 2, "the unsuspend of the admission and the suspend of the stop"
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "a"}, "restored"
    assert job["spec"]["template"]["spec"].get("affinity") == affinity, "restored"


def test_status_only_change_of_other_kinds_is_not_journaled() -> None:
    cq = {"metadata": {"name": "cq", "resourceVersion": "1"}, "spec": {"cohortName": "a"}}
    first = upsert(cq, kind="ClusterQueue")
    with_status = {**cq, "metadata": {"name": "cq", "resourceVersion": "2"}, "status": {"x": 1}}
    assert upsert(with_status, first.seen, kind="ClusterQueue").events == ()
    # ...but a suspend-like field of another kind is not special
    spec_changed = {"metadata": {"name": "cq", "resourceVersion": "3"}, "spec": {"suspend": True}}
    assert len(upsert(spec_changed, first.seen, kind="ClusterQueue").events) == 1


def test_digest_is_independent_of_key_order_and_list_items() -> None:
    a = JobB().m
    b = {k: a[k] for k in reversed(list(a))}
    assert fold_digest("Job", a) == fold_digest("Job", b)
    items_form = copy.deepcopy(a)
    del items_form["apiVersion"], items_form["kind"]  # a LIST item
    assert fold_digest("Job", a) == fold_digest("Job", items_form)


def test_a_new_uid_under_the_same_name_is_a_new_object() -> None:
    first = upsert(JobB().condition("Complete").m)
    assert first.seen is not None and first.seen.finished
    again = upsert(JobB(uid="u-2").rv(200).m, first.seen)
    assert [e.id for e in again.events] == ["Job/team-a/train@200"]
    assert again.seen is not None and not again.seen.finished and again.seen.uid == "u-2"


# --------------------------------------------------------------------------- status-derived events


def test_finished_once_per_uid() -> None:
    job = JobB().suspend(False)
    t1 = upsert(job.m)
    done = job.copy().rv(101).status(succeeded=2).condition("Complete", message="done")
    t2 = upsert(done.m, t1.seen)
    finished = [e for e in t2.events if isinstance(e, WorkloadFinished)]
    assert len(finished) == 1
    assert finished[0].id == "finished/team-a/train/u-1"
    assert (finished[0].namespace, finished[0].name, finished[0].succeeded) == (
        "team-a",
        "train",
        True,
    )
    assert finished[0].message == "done"
    # later status updates of the same uid: nothing more
    t3 = upsert(done.copy().rv(102).status(ready=0).m, t2.seen)
    assert t3.events == ()
    # after a restart, the remembered state still says finished
    restored = Seen.loads(t2.seen.dumps()) if t2.seen else None
    assert upsert(done.copy().rv(103).m, restored).events == ()


def test_failed_condition_is_an_unsuccessful_finish() -> None:
    t = upsert(JobB().condition("FailureTarget").condition("Failed", message="backoff").m)
    finished = [e for e in t.events if isinstance(e, WorkloadFinished)]
    assert len(finished) == 1 and finished[0].succeeded is False
    assert finished[0].message == "backoff"


def test_false_or_intermediate_conditions_do_not_finish() -> None:
    job = JobB().condition("Complete", "False").condition("SuccessCriteriaMet")
    assert not [e for e in upsert(job.m).events if isinstance(e, WorkloadFinished)]


def _ready_events(events: Any) -> list[tuple[bool, str]]:
    return [(e.ready, e.id) for e in events if isinstance(e, PodsReady)]


def test_pods_ready_flips_once_each_way() -> None:
    job = JobB().suspend(False)  # parallelism 2, completions 2
    t = upsert(job.m)
    assert _ready_events(t.events) == [], "not ready at first: the fold's default, no event"
    t = upsert(job.copy().rv(101).status(ready=1).m, t.seen)
    assert _ready_events(t.events) == []
    t = upsert(job.copy().rv(102).status(ready=2).m, t.seen)
    assert _ready_events(t.events) == [(True, "podsready/team-a/train/u-1/true@102")]
    t = upsert(job.copy().rv(103).status(ready=1, succeeded=1).m, t.seen)
    assert _ready_events(t.events) == [], "succeeded pods count as ready (Kueue)"
    t = upsert(job.copy().rv(104).status(ready=0, succeeded=1).m, t.seen)
    assert _ready_events(t.events) == [(False, "podsready/team-a/train/u-1/false@104")]


def test_a_succeeded_pod_not_yet_counted_keeps_the_job_ready() -> None:
    """The Job controller drops a finished pod from .ready before it counts it in
    .succeeded (it sits in uncountedTerminatedPods meanwhile): no flicker."""
    job = JobB().suspend(False).spec(parallelism=1, completions=1)
    t = upsert(job.copy().status(ready=1).m)
    assert _ready_events(t.events) == [(True, "podsready/team-a/train/u-1/true@100")]
    between = job.copy().rv(101).status(ready=0, uncountedTerminatedPods={"succeeded": ["p"]})
    t = upsert(between.m, t.seen)
    assert _ready_events(t.events) == []
    t = upsert(job.copy().rv(102).status(ready=0, succeeded=1).condition("Complete").m, t.seen)
    assert _ready_events(t.events) == [] and isinstance(t.events[-1], WorkloadFinished)


def test_suspended_job_is_never_ready_and_eviction_unreadies() -> None:
    job = JobB().suspend(True).status(ready=2)
    t = upsert(job.m)
    assert _ready_events(t.events) == []
    t = upsert(job.copy().rv(101).suspend(False).m, t.seen)
    assert _ready_events(t.events) == [(True, "podsready/team-a/train/u-1/true@101")]
    assert not t.skipped, "the suspend flip is journaled (the backstop reads it)"
    t = upsert(job.copy().rv(102).suspend(True).m, t.seen)
    assert _ready_events(t.events) == [(False, "podsready/team-a/train/u-1/false@102")]


def test_ready_then_finished_in_one_observation_orders_ready_first() -> None:
    job = JobB().suspend(False).status(succeeded=2).condition("Complete")
    t = upsert(job.m)
    assert [type(e) for e in t.events] == [ObjectUpserted, PodsReady, WorkloadFinished]
    t2 = upsert(job.copy().rv(101).status(succeeded=0).m, t.seen)
    assert t2.events == (), "no readiness events after the finish"


@pytest.mark.parametrize(
    ("spec", "pods"),
    [
        ({}, 1),
        ({"parallelism": 4}, 4),
        ({"parallelism": 4, "completions": 2}, 2),
        ({"parallelism": 2, "completions": 8}, 2),
        ({"parallelism": "x"}, 1),
    ],
)
def test_job_pods_is_kueues_pods_count(spec: dict[str, Any], pods: int) -> None:
    assert job_pods(spec) == pods


# --------------------------------------------------------------------------- deletions


def test_delete_gives_object_deleted_and_forgets() -> None:
    first = upsert(JobB().m)
    gone = JobB().rv(150).m
    t = translate_delete("Job", gone, first.seen, at=AT)
    assert len(t.events) == 1
    ev = t.events[0]
    assert isinstance(ev, ObjectDeleted)
    assert ev.id == "Job/team-a/train@150/deleted"
    assert (ev.kind, ev.name, ev.namespace) == ("Job", "train", "team-a")
    assert t.seen is None


def test_delete_of_a_stub_uses_the_remembered_version() -> None:
    seen = Seen(rv="42", digest="d", uid="u")
    obj = stub("Namespace", "Namespace//team-a", seen)
    assert object_key("Namespace", obj) == "Namespace//team-a"
    del obj["metadata"]["resourceVersion"]
    t = translate_delete("Namespace", obj, seen, at=AT)
    assert t.events[0].id == "Namespace//team-a@42/deleted"
    assert t.events[0].namespace == ""


def test_stub_round_trips_key_and_version() -> None:
    seen = Seen(rv="9", digest="d", uid="u-9")
    obj = stub("Job", "Job/team-a/train", seen)
    assert object_key("Job", obj) == "Job/team-a/train"
    assert obj["metadata"]["resourceVersion"] == "9" and obj["metadata"]["uid"] == "u-9"


# --------------------------------------------------------------------------- bad input


BAD = [
    None,
    1,
    "x",
    [],
    {},
    {"metadata": None},
    {"metadata": {"name": 5}},
    {"metadata": []},
    {"metadata": {"name": "j"}, "spec": "nope", "status": 7},
    {"metadata": {"name": "j"}, "spec": {"template": 1, "parallelism": True}},
    {"metadata": {"name": "j", "annotations": ["a"]}, "status": {"conditions": [1, None]}},
]


@pytest.mark.parametrize("obj", BAD, ids=repr)
@pytest.mark.parametrize("kind", ["Job", "ClusterQueue"])
def test_bad_objects_never_raise(obj: Any, kind: str) -> None:
    prev = Seen(rv="1", digest="d", uid="")
    for t in (
        translate_upsert(kind, obj, prev, at=AT),
        translate_delete(kind, obj, prev, at=AT),
    ):
        if t.problem is not None:
            assert t.events == () and t.seen == prev, "a bad change leaves memory as it was"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(obj=json_values, prev_rv=st.text(max_size=3))
def test_arbitrary_json_never_raises(obj: Any, prev_rv: str) -> None:
    prev = Seen(rv=prev_rv, digest="", uid="")
    translate_upsert("Job", obj, prev, at=AT)
    translate_delete("Job", obj, prev, at=AT)
    job = JobB().m
    job["status"] = obj
    job["spec"]["template"] = obj
    translate_upsert("Job", job, prev, at=AT)


@pytest.mark.parametrize("text", ["", "[1]", "{", "1", "null", '[1, "d", "u", 0, 0]', b"\xff"])
def test_seen_loads_rejects_garbage(text: str | bytes) -> None:
    assert Seen.loads(text) is None


def test_seen_round_trips() -> None:
    seen = Seen(rv="12", digest="abc", uid="u", finished=True, ready=False)
    assert Seen.loads(seen.dumps()) == seen
    assert Seen.loads(seen.dumps().encode()) == seen


# --------------------------------------------------------------------------- ticks and config file


def test_tick_id_is_its_time() -> None:
    t = tick(AT)
    assert t.id == f"tick@{AT!r}" and t.at == AT


CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: nvidia.com/gpu
    deviceClassNames: [gpu.nvidia.com]
"""


def test_config_file_becomes_a_configuration_object() -> None:
    obj = config_file_object(CONFIG)
    assert isinstance(obj, dict)
    assert obj["kind"] == "Configuration" and obj["metadata"]["name"] == "kuota-config-file"
    rv = obj["metadata"]["resourceVersion"]
    assert rv.startswith("sha256-")
    t = upsert(obj, kind="Configuration")
    assert t.events[0].id == f"Configuration//kuota-config-file@{rv}"
    assert upsert(config_file_object(CONFIG), t.seen, kind="Configuration").events == ()
    changed = config_file_object(CONFIG.replace("gpu.nvidia.com", "mig.nvidia.com"))
    assert isinstance(changed, dict) and changed["metadata"]["resourceVersion"] != rv
    assert len(upsert(changed, t.seen, kind="Configuration").events) == 1


def test_config_file_parses_with_the_api_reader() -> None:
    from kuota.api.parse import parse_object
    from kuota.api.types import Configuration

    parsed = parse_object(config_file_object(CONFIG))
    assert isinstance(parsed, Configuration), parsed
    assert parsed.device_class_mappings[0].name == "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "not YAML"),
        ("", "exactly one"),
        ("a: 1\n---\nb: 2\n", "exactly one"),
        ("- 1\n", "not a mapping"),
        ("kind: Pod\n", "is not one of"),
    ],
)
def test_bad_config_files_say_why(text: str, why: str) -> None:
    out = config_file_object(text)
    assert isinstance(out, str) and why in out, out
