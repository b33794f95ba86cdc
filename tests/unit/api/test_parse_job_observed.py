"""What ``kuota.api.parse_job`` observes for the backstop (docs/design/backstop.md):
``spec.suspend``, the actuator's ``kuota.dev/decision-id``, and unlabelled Jobs
read only when the caller says they are managed."""

from __future__ import annotations

import pytest
from builders.manifests import job

from kuota.api.parse import parse_job
from kuota.api.types import ValidationError, WorkloadSpec


def read(manifest: dict[str, object], *, managed: bool = False) -> WorkloadSpec:
    spec = parse_job(manifest, at=0.0, managed=managed)
    assert isinstance(spec, WorkloadSpec), spec
    return spec


@pytest.mark.parametrize(("suspend", "observed"), [(None, None), (True, True), (False, False)])
def test_spec_suspend_is_observed(suspend: bool | None, observed: bool | None) -> None:
    assert read(job("j", namespace="ns", suspend=suspend)).suspended is observed


def test_a_suspend_that_is_not_a_boolean_is_invalid() -> None:
    manifest = job("j", namespace="ns")
    manifest["spec"]["suspend"] = "false"
    error = parse_job(manifest, at=0.0)
    assert isinstance(error, ValidationError) and error.field == "spec.suspend"


def test_the_actuators_decision_id_is_observed() -> None:
    plain = read(job("j", namespace="ns"))
    noted = read(job("j", namespace="ns", annotations={"kuota.dev/decision-id": "abc"}))
    assert (plain.decision_id, noted.decision_id) == (None, "abc")
    assert plain != noted, "a different observation of the same Job"
    assert plain.podsets == noted.podsets


def test_an_unlabelled_job_is_read_only_when_managed() -> None:
    manifest = job("j", namespace="ns", queue=None, suspend=True)
    assert parse_job(manifest, at=0.0) is None
    spec = read(manifest, managed=True)
    assert (spec.queue_name, spec.key, spec.suspended) == ("", "ns/j", True)
    labelled = read(job("j", namespace="ns", queue="lq"), managed=True)
    assert labelled.queue_name == "lq", "managed changes nothing for a labelled Job"
