"""``KUOTA_JOB_LABEL_SELECTOR``: several pipelines on one apiserver each watch their own Jobs
(all of them, labelled or not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuota_ingest.settings import IngestSettings
from kuota_ingest.sources import WATCHED, jobs_watch

BASE = {"KUOTA_KAFKA_BOOTSTRAP": "127.0.0.1:1", "KUOTA_REDIS_URL": "redis://127.0.0.1:1/0"}


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
    assert watched.resource.label_selector == selector


def test_unset_selector_is_the_default_job_watch() -> None:
    (default,) = [w for w in WATCHED if w.resource.kind == "Job"]
    assert jobs_watch(None) == default
