from __future__ import annotations

import pytest
from sim_builders import job, obj

from kuota.sim.scenario import ScenarioError, Timing, load_scenario, timing_of

S = 1_000_000

TIMINGS = {
    "defaults": (job("a"), Timing(submit_at=0, run_for=None, ready_after=0, delete_at=None)),
    "all set": (
        job("a").submit_at("30s").run_for("5m").ready_after("20s").delete_at("1h"),
        Timing(submit_at=30 * S, run_for=300 * S, ready_after=20 * S, delete_at=3600 * S),
    ),
    "never ready": (job("a").ready_after("never"), Timing(ready_after=None)),
    "never in capitals": (job("a").ready_after("Never"), Timing(ready_after=None)),
    "bare numbers": (
        job("a").submit_at(30).run_for("1.5"),
        Timing(submit_at=30 * S, run_for=1_500_000),
    ),
    "delete at submit": (
        obj("ClusterQueue", "cq").submit_at("10s").delete_at("10s"),
        Timing(submit_at=10 * S, delete_at=10 * S),
    ),
    "foreign annotations ignored": (job("a").annotate("example.com/x", "y"), Timing()),
}


@pytest.mark.parametrize(("builder", "timing"), TIMINGS.values(), ids=TIMINGS.keys())
def test_timing_of(builder: object, timing: Timing) -> None:
    assert timing_of(builder.build(), index=0) == timing  # type: ignore[attr-defined]


TIMING_ERRORS = {
    "bad run-for": (
        job("train", "ml").run_for("5 minutes"),
        "Job ml/train (document 4): annotation kuota.dev/run-for",
    ),
    "bad submit-at": (job("a").submit_at("soon"), "kuota.dev/submit-at"),
    "never is only for ready-after": (job("a").run_for("never"), "kuota.dev/run-for"),
    "bad ready-after mentions never": (job("a").ready_after("x"), "or 'never'"),
    "negative": (job("a").delete_at("-5s"), "negative"),
    "delete before submit": (
        job("a").submit_at("1m").delete_at("30s"),
        "before kuota.dev/submit-at",
    ),
    "misspelt annotation": (
        job("a").annotate("kuota.dev/run_for", "1s"),
        "did you mean kuota.dev/run-for",
    ),
}


@pytest.mark.parametrize(("builder", "fragment"), TIMING_ERRORS.values(), ids=TIMING_ERRORS.keys())
def test_timing_errors_name_object_and_annotation(builder: object, fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        timing_of(builder.build(), index=3)  # type: ignore[attr-defined]


def test_load_scenario_keeps_file_order_and_expands_lists() -> None:
    text = """
kind: Namespace
metadata: {name: a}
---
---
kind: List
items:
- {kind: ResourceFlavor, metadata: {name: f1}}
- {kind: ResourceFlavor, metadata: {name: f2}}
---
kind: Job
metadata:
  name: j
  creationTimestamp: 2024-01-01T00:00:00Z
"""
    manifests = load_scenario(text)
    assert [m["metadata"]["name"] for m in manifests] == ["a", "f1", "f2", "j"]
    # timestamps stay strings: manifests travel as JSON
    assert manifests[3]["metadata"]["creationTimestamp"] == "2024-01-01T00:00:00Z"


LOAD_ERRORS = {
    "malformed": ("kind: Job\nmetadata: {name: [\n", "x.yaml: malformed YAML: .* line"),
    "bad indentation": ("a: 1\n b: 2\n", "malformed YAML"),
    "scalar document": ("kind: Job\n---\njust text\n", "document 2 is a str, not a mapping"),
    "list item not a mapping": ("kind: List\nitems: [1]\n", r"items\[0\] is not a mapping"),
    # not "unsupported kind 'List'" from the fold
    "list items not a list": (
        "apiVersion: v1\nkind: List\nitems: foo\n",
        "x.yaml: document 1: kind List: items must be a list of manifests, not a str",
    ),
}


def test_a_list_without_items_is_empty() -> None:
    assert load_scenario("apiVersion: v1\nkind: List\n---\nkind: Namespace\n") == [
        {"kind": "Namespace"}
    ]


@pytest.mark.parametrize(("text", "fragment"), LOAD_ERRORS.values(), ids=LOAD_ERRORS.keys())
def test_load_scenario_errors(text: str, fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment):
        load_scenario(text, source="x.yaml")
