"""Managed namespaces (#22): Kueue's ``manageJobsWithoutQueueName`` and
``managedJobsNamespaceSelector`` read from the three Configuration shapes, with
Kueue's defaults (off; without a selector, every namespace but kube-system and
Kueue's own), and ``kuota.api.managed``'s answers."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from api_builders import configuration, kueue_operator

from kuota.api.managed import job_managed, label_selector_matches, namespace_managed, queue_name
from kuota.api.parse import parse_object
from kuota.api.types import (
    Configuration,
    LabelSelector,
    NodeSelectorRequirement,
    ValidationError,
)


def config(manifest: dict[str, Any]) -> Configuration:
    result = parse_object(manifest)
    assert isinstance(result, Configuration), result
    return result


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_off_unless_configured(version: str) -> None:
    c = config(configuration(version))
    assert (c.manage_jobs_without_queue_name, c.managed_jobs_namespace_selector) == (False, None)
    assert c.namespace == "kueue-system"
    assert not namespace_managed(c, "team-a", {})
    assert Configuration().manage_jobs_without_queue_name is False


def test_upstream_fields() -> None:
    c = config(
        configuration(
            manageJobsWithoutQueueName=True,
            namespace="queues",
            managedJobsNamespaceSelector={
                "matchExpressions": [{"key": "team", "operator": "Exists"}]
            },
        )
    )
    assert c.manage_jobs_without_queue_name and c.namespace == "queues"
    assert c.managed_jobs_namespace_selector == LabelSelector(
        match_expressions=(NodeSelectorRequirement("team", "Exists"),)
    )
    assert namespace_managed(c, "a", {"team": "x"})
    assert not namespace_managed(c, "b", {})


def test_kueues_default_selector_leaves_out_kube_system_and_its_own_namespace() -> None:
    c = config(configuration(manageJobsWithoutQueueName=True))
    assert namespace_managed(c, "team-a", {})
    assert not namespace_managed(c, "kube-system", {})
    assert not namespace_managed(c, "kueue-system", ())
    moved = config(configuration(manageJobsWithoutQueueName=True, namespace="queues"))
    assert not namespace_managed(moved, "queues", {}) and namespace_managed(
        moved, "kueue-system", {}
    )
    # the name label is the apiserver's; given or not, it is the namespace's name
    assert not namespace_managed(c, "kube-system", {"kubernetes.io/metadata.name": "kube-system"})


def test_the_config_map_shape() -> None:
    text = yaml.safe_dump(configuration("v1beta1", manageJobsWithoutQueueName=True))
    c = config(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": text},
        }
    )
    assert c.manage_jobs_without_queue_name


def test_the_operators_label_policy() -> None:
    """``labelPolicy: None`` manages unlabelled Jobs in the namespaces the operator's
    label opts in; ``QueueName`` or absent is Kueue's default."""
    on = config(kueue_operator({"workloadManagement": {"labelPolicy": "None"}}))
    assert on.manage_jobs_without_queue_name
    assert not namespace_managed(on, "team-a", {})
    assert namespace_managed(on, "team-a", {"kueue.openshift.io/managed": "true"})
    for policy in ("QueueName", "", None):
        off = config(kueue_operator({"workloadManagement": {"labelPolicy": policy}}))
        assert not off.manage_jobs_without_queue_name, policy
        assert off.managed_jobs_namespace_selector is None


@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        (configuration(manageJobsWithoutQueueName="yes"), "manageJobsWithoutQueueName"),
        (
            configuration(managedJobsNamespaceSelector={"matchExpressions": [{"key": "k"}]}),
            "managedJobsNamespaceSelector.matchExpressions[0].operator",
        ),
        (
            kueue_operator({"workloadManagement": {"labelPolicy": "Some"}}),
            "spec.config.workloadManagement.labelPolicy",
        ),
    ],
)
def test_errors_name_the_field(manifest: dict[str, Any], field: str) -> None:
    got = parse_object(manifest)
    assert isinstance(got, ValidationError) and got.field == field, got


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        (LabelSelector(), {}, True),
        (LabelSelector(match_labels=(("a", "1"),)), {"a": "1"}, True),
        (LabelSelector(match_labels=(("a", "1"),)), {"a": "2"}, False),
        (
            LabelSelector(match_expressions=(NodeSelectorRequirement("a", "In", ("1", "2")),)),
            {"a": "2"},
            True,
        ),
        (LabelSelector(match_expressions=(NodeSelectorRequirement("a", "In", ("1",)),)), {}, False),
        (
            LabelSelector(match_expressions=(NodeSelectorRequirement("a", "NotIn", ("1",)),)),
            {},
            True,
        ),
        (
            LabelSelector(match_expressions=(NodeSelectorRequirement("a", "NotIn", ("1",)),)),
            {"a": "1"},
            False,
        ),
        (
            LabelSelector(match_expressions=(NodeSelectorRequirement("a", "DoesNotExist"),)),
            {"a": ""},
            False,
        ),
        (
            LabelSelector(match_expressions=(NodeSelectorRequirement("a", "Gt", ("1",)),)),
            {"a": "2"},
            False,
        ),
    ],
)
def test_label_selector_semantics(
    selector: LabelSelector, labels: dict[str, str], want: bool
) -> None:
    assert label_selector_matches(selector, labels) is want


def test_job_managed() -> None:
    labelled = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq"}}}
    empty = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": ""}}}
    assert queue_name(labelled) == "lq" and queue_name(empty) is None and queue_name({}) is None
    assert job_managed(labelled, namespace_is_managed=False)
    assert not job_managed(empty, namespace_is_managed=False)
    assert job_managed({}, namespace_is_managed=True)
