"""``KUOTA_JOB_LABEL_SELECTOR``: several pipelines on one apiserver each watch their own Jobs."""

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
        ("", "kueue.x-k8s.io/queue-name"),
        ("  ", "kueue.x-k8s.io/queue-name"),
        ("kuota.dev/pipeline=e2e-1", "kueue.x-k8s.io/queue-name,kuota.dev/pipeline=e2e-1"),
        ("!kuota.dev/pipeline", "kueue.x-k8s.io/queue-name,!kuota.dev/pipeline"),
    ],
)
def test_job_selector_is_anded_with_the_queue_label(
    kubeconfig: str, raw: str, selector: str
) -> None:
    s = IngestSettings.from_env({**BASE, "KUBECONFIG": kubeconfig, "KUOTA_JOB_LABEL_SELECTOR": raw})
    watched = jobs_watch(s.job_label_selector)
    assert watched.resource.kind == "Job"
    assert watched.resource.path == "/apis/batch/v1/jobs"
    assert watched.resource.label_selector == selector


def test_unset_selector_is_the_default_job_watch() -> None:
    (default,) = [w for w in WATCHED if w.resource.kind == "Job"]
    assert jobs_watch(None) == default
