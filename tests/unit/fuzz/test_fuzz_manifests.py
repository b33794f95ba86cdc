"""Fuzz: mutated and random manifests parse, or say which object and field are bad.

The seeds are the valid manifests the project ships (``fuzz_support``). Each
mutated manifest must give a parsed object, ``None`` (not ours), or a
``ValidationError`` that names the object's kind and the bad field with a
message — never an exception, and never the boundary's catch-all ``cannot
parse: <Exception>`` (that would be a reader that crashed and was caught, a bug
even though the fold survives). The DRA kinds go through ``DraInventory``, and
whole journals of mutated objects through ``Fold``, which must not raise and
must only emit decisions that name what they are about.
"""

from __future__ import annotations

from typing import Any

import yaml
from fuzz_support import EXAMPLES, FUZZ, REPO, SEED_KINDS, SEEDS, json_like, mutated_manifests
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota import kinds
from kuota.api.dra import KINDS as DRA_READ_KINDS
from kuota.api.dra import parse_dra_object
from kuota.api.parse import KUEUE_CONFIG_KEY, object_ref, parse_job, parse_object
from kuota.api.types import ValidationError
from kuota.core.dra.charging import DraInventory
from kuota.core.fold.fold import Fold
from kuota.events.schema import (
    ObjectDeleted,
    ObjectUpserted,
    PodsReady,
    PreemptionPlan,
    Tick,
    WorkloadFinished,
)

DRA_KINDS = set(DRA_READ_KINDS)  # the inventory's and the ResourceClaim
CONFIG_KINDS = kinds.names("config")
JOBS = [m for m in SEEDS if m["kind"] == "Job"]
DRA = [m for m in SEEDS if m["kind"] in DRA_KINDS]
CONFIGS = [m for m in SEEDS if m["kind"] in CONFIG_KINDS]
QUEUES = [m for m in SEEDS if m["kind"] not in DRA_KINDS | CONFIG_KINDS | {"Job"}]


def _dra_error(manifest: dict[str, Any]) -> ValidationError | None:
    """What the fold finds wrong with a DRA object: the inventory's answer, or the
    reader's for a ResourceClaim (the fold keeps claims apart from the inventory)."""
    if DraInventory.handles(str(manifest.get("kind"))):
        return DraInventory().upsert(manifest)
    read = parse_dra_object(manifest)
    return read if isinstance(read, ValidationError) else None


def _named_error(error: ValidationError, manifest: object) -> None:
    assert error.message, "a message"
    assert not error.message.startswith("cannot parse:"), f"a reader crashed: {error}"
    ref = object_ref(manifest)
    assert error.ref.kind == ref.kind
    if isinstance(manifest, dict):
        assert error.field, f"no field named: {error}"
    assert str(error)  # renders for a decision message


def test_the_seeds_cover_every_family() -> None:
    assert len(SEEDS) >= 40
    assert {"ClusterQueue", "Cohort", "Job", "ResourceSlice", "DeviceClass"} <= set(SEED_KINDS)
    assert JOBS and DRA and CONFIGS and QUEUES
    for m in SEEDS:
        if m["kind"] in DRA_KINDS:
            assert _dra_error(m) is None, m["metadata"]["name"]
        else:
            assert not isinstance(parse_object(m), ValidationError), m["metadata"]


@FUZZ
@given(mutated_manifests(QUEUES))
def test_mutated_queue_objects(manifest: dict[str, Any]) -> None:
    result = parse_object(manifest)
    if isinstance(result, ValidationError):
        _named_error(result, manifest)


@FUZZ
@given(mutated_manifests(CONFIGS))
def test_mutated_configurations(manifest: dict[str, Any]) -> None:
    result = parse_object(manifest)
    if isinstance(result, ValidationError):
        _named_error(result, manifest)


@FUZZ
@given(mutated_manifests(JOBS), st.floats(min_value=0, max_value=2e9))
def test_mutated_jobs(manifest: dict[str, Any], at: float) -> None:
    for result in (parse_job(manifest, at=at), parse_object(manifest, at=at)):
        if isinstance(result, ValidationError):
            _named_error(result, manifest)


@FUZZ
@given(mutated_manifests(DRA))
def test_mutated_dra_objects(manifest: dict[str, Any]) -> None:
    error = _dra_error(manifest)
    if error is not None:
        _named_error(error, manifest)


@FUZZ
@given(st.sampled_from(SEED_KINDS), st.dictionaries(st.text(max_size=10), json_like, max_size=5))
def test_random_bodies_under_every_kind(kind: str, body: dict[str, Any]) -> None:
    manifest = {**body, "kind": kind, "metadata": body.get("metadata", {"name": "x"})}
    if kind in DRA_KINDS:
        error = _dra_error(manifest)
        if error is not None:
            _named_error(error, manifest)
        return
    result = parse_object(manifest)
    if isinstance(result, ValidationError):
        _named_error(result, manifest)


WORKLOADS = sorted(
    {f"{m['metadata'].get('namespace', 'default')}/{m['metadata']['name']}" for m in JOBS}
)
KIND_NAMES = sorted({(m["kind"], m["metadata"].get("name", "")) for m in SEEDS})


@st.composite
def journal_events(draw: st.DrawFn, index: int) -> Any:
    """Any journal event a cluster could cause, about the seeds' objects."""
    at = float(index)
    kind = draw(
        st.sampled_from(("seed", "mutated", "tick", "finished", "ready", "plan", "deleted"))
    )
    eid = f"e{index}"
    if kind == "seed":
        return ObjectUpserted(id=eid, at=at, object=draw(st.sampled_from(SEEDS)))
    if kind == "mutated":
        return ObjectUpserted(id=eid, at=at, object=draw(mutated_manifests()))
    if kind == "tick":
        return Tick(id=eid, at=at + draw(st.sampled_from([0.0, 60.0, 3600.0, 1e6])))
    ns, _, name = draw(st.sampled_from(WORKLOADS)).partition("/")
    if kind == "finished":
        return WorkloadFinished(
            id=eid, at=at, namespace=ns, name=name, succeeded=draw(st.booleans())
        )
    if kind == "ready":
        return PodsReady(id=eid, at=at, namespace=ns, name=name, ready=draw(st.booleans()))
    if kind == "plan":
        victims = draw(st.lists(st.sampled_from([*WORKLOADS, "x/y", ""]), max_size=3))
        return PreemptionPlan(id=eid, at=at, preemptor=f"{ns}/{name}", victims=victims)
    k, n = draw(st.sampled_from(KIND_NAMES))
    return ObjectDeleted(id=eid, at=at, kind=k, name=n, namespace=draw(st.sampled_from(["", ns])))


@settings(FUZZ, max_examples=max(10, EXAMPLES // 3))  # each example folds a whole journal
@given(st.data(), st.sampled_from(["inline", "plans"]))
def test_a_journal_of_mutated_objects_never_stops_the_fold(data: st.DataObject, mode: str) -> None:
    fold = Fold(preemption=mode) if mode == "plans" else Fold()
    n = data.draw(st.integers(min_value=1, max_value=10))
    for i in range(n):
        event = data.draw(journal_events(i))
        for d in fold.apply(event, offset=i):
            if d.type == "Rejected":
                assert d.object and d.message and d.reason, d
            elif d.type == "Inadmissible":
                assert d.workload and d.reason and d.message, d
    fold.apply(Tick(id="tick", at=1e7), offset=n)


def _config_map(text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {KUEUE_CONFIG_KEY: text},
    }


UPSTREAM = [m for m in CONFIGS if m["kind"] == "Configuration"]


@FUZZ
@given(st.one_of(mutated_manifests(UPSTREAM), json_like))
def test_mutated_configurations_inside_a_config_map(config: Any) -> None:
    manifest = _config_map(yaml.safe_dump(config, allow_unicode=True))
    result = parse_object(manifest)
    if isinstance(result, ValidationError):
        _named_error(result, manifest)
        assert result.field.startswith(f"data[{KUEUE_CONFIG_KEY}]"), result


@FUZZ
@given(st.text(max_size=200))
def test_any_text_as_the_kueue_config_file(text: str) -> None:
    manifest = _config_map(text)
    result = parse_object(manifest)
    if isinstance(result, ValidationError):
        _named_error(result, manifest)


SCENARIOS = {
    path.name: [m for m in yaml.safe_load_all(path.read_text()) if isinstance(m, dict)]
    for path in sorted((REPO / "examples" / "scenarios").glob("*.yaml"))
}


def _is_rejected(manifest: dict[str, Any]) -> bool:
    kind = manifest.get("kind")
    if isinstance(kind, str) and kind in DRA_KINDS:
        return isinstance(parse_dra_object(manifest), ValidationError)
    return isinstance(parse_object(manifest), ValidationError)


@st.composite
def bad_objects(draw: st.DrawFn, index: int) -> dict[str, Any]:
    """A mutated manifest that is rejected, under a name no valid object has."""
    for _ in range(5):
        m = draw(mutated_manifests())
        if not isinstance(m.get("metadata"), dict):
            m["metadata"] = {}
        m["metadata"]["name"] = f"zz-bad-{index}"
        if _is_rejected(m):
            return m
    return {"kind": "ClusterQueue", "metadata": {"name": f"zz-bad-{index}"}, "spec": "broken"}


@settings(FUZZ, max_examples=max(10, EXAMPLES // 5))  # each example folds two journals
@given(st.sampled_from(sorted(SCENARIOS)), st.data())
def test_a_rejected_object_changes_no_other_decision(scenario: str, data: st.DataObject) -> None:
    """Insert rejected objects anywhere in a valid journal: every other decision
    is exactly the same (ids included), and each bad object gets one Rejected."""
    good = SCENARIOS[scenario]
    slots = data.draw(st.lists(st.integers(0, len(good)), min_size=1, max_size=4))
    plain, mixed = Fold(), Fold()
    want: list[Any] = []
    got: list[Any] = []
    bad_count = 0
    for i, m in enumerate([*good, None]):
        for _ in range(slots.count(i)):
            bad = data.draw(bad_objects(bad_count))
            at = float(max(i - 1, 0))  # the previous good event's time: the clock stays put
            out = mixed.apply(ObjectUpserted(id=f"bad{bad_count}", at=at, object=bad))
            assert [d.type for d in out] == ["Rejected"], out
            assert out[0].object and f"zz-bad-{bad_count}" in out[0].object
            bad_count += 1
        event = ObjectUpserted(id=f"e{i}", at=float(i), object=m) if m else Tick(id="t", at=1e5)
        want += plain.apply(event)
        got += mixed.apply(event)
    assert got == want
