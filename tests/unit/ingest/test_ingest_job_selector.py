"""``KUOTA_JOB_LABEL_SELECTOR``: several pipelines on one apiserver each watch their own Jobs
(all of them, labelled or not); ingest applies the selector itself (#23 item 1), so
a journaled Job that leaves it is journaled as a stop, never as a delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuota.events.schema import ObjectUpserted
from kuota.kinds import QUEUE_NAME_LABEL
from kuota.kube.label_selector import parse_selector, selects
from kuota.kube.translate import translate_upsert
from kuota_ingest.settings import IngestSettings
from kuota_ingest.sources import WATCHED, jobs_watch

BASE = {
    "KUOTA_KAFKA_BOOTSTRAP": "127.0.0.1:1",
    "KUOTA_REDIS_URL": "redis://127.0.0.1:1/0",
    "KUOTA_SEEN_KEY": "a-test-key",
}


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    p = tmp_path / "kubeconfig"
    p.write_text("apiVersion: v1\n")
    return str(p)


@pytest.mark.parametrize(
    ("raw", "selector"),
    [
        ("", None),
        ("  ", None),
        ("kuota.dev/pipeline=e2e-1", "kuota.dev/pipeline=e2e-1"),
        ("!kuota.dev/pipeline", "!kuota.dev/pipeline"),
    ],
)
def test_job_selector_narrows_the_watch_of_every_job(
    kubeconfig: str, raw: str, selector: str | None
) -> None:
    """Every Job is watched, not only labelled ones (#22): a Job whose queue label is
    removed arrives as an upsert, an unlabelled one in a managed namespace at all."""
    s = IngestSettings.from_env({**BASE, "KUBECONFIG": kubeconfig, "KUOTA_JOB_LABEL_SELECTOR": raw})
    watched = jobs_watch(s.job_label_selector)
    assert watched.resource.kind == "Job"
    assert watched.resource.path == "/apis/batch/v1/jobs"
    assert watched.resource.label_selector is None, "ingest applies it, not the apiserver"
    assert (watched.selector[0] if watched.selector else None) == selector


def test_unset_selector_is_the_default_job_watch() -> None:
    (default,) = [w for w in WATCHED if w.resource.kind == "Job"]
    assert jobs_watch(None) == default


LABELS = {"kuota.dev/pipeline": "e2e-1", "team": "a"}


@pytest.mark.parametrize(
    ("text", "matches", "unlabelled"),
    [
        ("kuota.dev/pipeline=e2e-1", True, False),
        ("kuota.dev/pipeline==e2e-1", True, False),
        ("kuota.dev/pipeline=e2e-2", False, False),
        ("kuota.dev/pipeline!=e2e-2", True, True),  # != matches a Job without the label
        ("other!=x", True, True),
        ("!kuota.dev/pipeline", False, True),
        ("kuota.dev/pipeline", True, False),
        ("!other", True, True),
        ("team in (a, b)", True, False),
        ("team notin (a,b)", False, True),
        ("kuota.dev/pipeline=e2e-1,team=b", False, False),
        ("kuota.dev/pipeline in (e2e-1),team", True, False),
    ],
)
def test_the_selector_reads_and_matches_as_the_apiserver(
    text: str, matches: bool, unlabelled: bool
) -> None:
    selector = parse_selector(text)
    assert selects(selector, {"metadata": {"labels": LABELS}}) is matches
    assert selects(selector, {"metadata": {}}) is unlabelled, "a Job without labels"


@pytest.mark.parametrize("text", ["a=b=c", "team in a", "a,,b", "=x", "in (a)"])
def test_a_selector_that_does_not_read_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        jobs_watch(text)


def test_a_job_outside_the_selector_is_journaled_as_a_removed_label() -> None:
    """The fold stops it as a Job whose queue label was removed (backstop), never frees
    its quota as if it were deleted; the digest moves, so leaving is journaled."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "5",
            "labels": {QUEUE_NAME_LABEL: "lq", "kuota.dev/pipeline": "other"},
        },
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    inside = translate_upsert("Job", job, None, at=1.0)
    assert inside.seen is not None
    out = translate_upsert("Job", job, inside.seen, at=2.0, outside="kuota.dev/pipeline=e2e-1")
    (event,) = out.events
    assert isinstance(event, ObjectUpserted)
    md = event.object["metadata"]
    assert QUEUE_NAME_LABEL not in md.get("labels", {})
    assert md["annotations"] == {"kuota.dev/outside-job-selector": "kuota.dev/pipeline=e2e-1"}
    assert out.seen is not None and out.seen.digest != inside.seen.digest
    back = translate_upsert("Job", job, out.seen, at=3.0)
    assert [e.object["metadata"]["labels"][QUEUE_NAME_LABEL] for e in back.events] == ["lq"]
    assert QUEUE_NAME_LABEL in job["metadata"]["labels"], "the input is not changed"
