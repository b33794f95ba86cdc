"""Three leaks the rogue-user chaos run found (#22): a running Job grown by its user
(``no_resize``), the unlabelled entry's ``failurePolicy: Ignore`` (the strict
registration, ``kuota_webhook.registration``), and the webhook answering "not
managed" before its view was complete (``ClusterView.complete``, the rescan
when the Configuration or a Namespace changes; the feed that completes it is
``test_webhook_feed.py``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml
from test_webhook_server_door import (
    ACTUATOR,
    REPO,
    TRUSTED,
    WHO,
    answer,
    job,
    managed_view,
    review,
)

from kuota import kinds
from kuota.kube.admission_review import mutate_job, starting_message
from kuota.kube.cluster_view import ClusterView
from kuota.kube.translate import config_file_object
from kuota_webhook.registration import namespace_selector, read_configuration


def sized(*, parallelism: int = 1, completions: int | None = 1, **kw: Any) -> dict[str, Any]:
    j = job(**kw)
    j["spec"]["parallelism"] = parallelism
    if completions is not None:
        j["spec"]["completions"] = completions
    return j


# --------------------------------------------------------------------------- 1. no_resize

GROW = (
    f"spec.parallelism: Forbidden: {WHO} may not change it from 1 to 4 while the Job is not "
    'suspended: the Job is queued in LocalQueue "lq" and its admission covers its current '
    "size; suspend the Job first (spec.suspend: true); kuota re-reads a suspended Job and "
    "admits it for its new size"
)


def test_a_running_job_may_not_change_its_size() -> None:
    running = sized(suspend=False)
    assert answer(review(sized(parallelism=4, suspend=False), running)) == ("refused", GROW)
    outcome, message = answer(review(sized(completions=3, suspend=False), running))
    assert outcome == "refused"
    assert message.startswith(f"spec.completions: Forbidden: {WHO} may not change it from 1 to 3")
    # shrinking too: the admission is for the old shape, and the fold evicts on a change
    assert answer(review(sized(parallelism=1, suspend=False), sized(parallelism=2, suspend=False)))[
        0
    ] == ("refused")
    # both at once: two reasons in the one message
    both = sized(parallelism=4, completions=4, suspend=False)
    assert answer(review(both, running))[1].count("Forbidden") == 2


def test_a_suspended_job_may_change_its_size() -> None:
    assert answer(review(sized(parallelism=4), sized())) == ("unchanged", "")
    # suspending it in the same update: kuota stops the pods, then re-reads it
    assert answer(review(sized(parallelism=4, suspend=True), sized(suspend=False)))[0] == (
        "unchanged"
    )


def test_kuota_and_unmanaged_jobs_may_change_their_size() -> None:
    grown = review(sized(parallelism=4, suspend=False), sized(suspend=False), user=ACTUATOR)
    assert answer(grown)[0] == "unchanged"
    plain = managed_view(manage=False)
    body = review(sized(queue=None, parallelism=4, suspend=False), sized(queue=None, suspend=False))
    assert answer(body, plain)[0] == "unchanged"
    # an unlabelled Job of a managed namespace is guarded like a queued one
    outcome, message = answer(body, managed_view())
    assert outcome == "refused" and 'namespace "team-a" is managed by kuota' in message


# --------------------------------------------------------------------------- 2. the strict form

STRICT_CONFIG = (
    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    "manageJobsWithoutQueueName: true\n"
    "managedJobsNamespaceSelector:\n  matchLabels:\n    team: 'yes'\n"
    "  matchExpressions:\n  - {key: tier, operator: In, values: [gpu]}\n"
)
SYSTEM = {
    "key": kinds.NAMESPACE_NAME_LABEL,
    "operator": "NotIn",
    "values": list(kinds.SYSTEM_NAMESPACES),
}


def test_the_strict_selector_is_the_managed_namespaces_without_the_system_ones() -> None:
    config = read_configuration(STRICT_CONFIG)
    assert not isinstance(config, str), config
    assert namespace_selector(config) == {
        "matchLabels": {"team": "yes"},
        "matchExpressions": [SYSTEM, {"key": "tier", "operator": "In", "values": ["gpu"]}],
    }
    # Kueue's default selector (no kube-system, no Kueue's own namespace)
    default = read_configuration(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "manageJobsWithoutQueueName: true\n"
    )
    assert not isinstance(default, str)
    selector = namespace_selector(default)
    assert selector is not None
    assert selector["matchExpressions"][1] == {
        "key": kinds.NAMESPACE_NAME_LABEL,
        "operator": "NotIn",
        "values": ["kube-system", "kueue-system"],
    }
    # nothing managed: no strict entry to make
    off = read_configuration("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
    assert not isinstance(off, str) and namespace_selector(off) is None
    assert isinstance(read_configuration("kind: Pod\n"), str)


def _register(tmp_path: Path, *args: str, kubectl: str = "/bin/true") -> dict[str, Any]:
    ca = tmp_path / "ca.crt"
    ca.write_text("x\n")
    env = {**os.environ, "KUOTA_KUBECTL": kubectl, "KUBECONFIG": "/dev/null"}
    env["KUOTA_STACK_DIR"] = str(tmp_path)
    out = subprocess.run(
        [str(REPO / "scripts/webhook-register"), "--print", "--ca", str(ca), *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    (doc,) = list(yaml.safe_load_all(out))
    return {w["name"]: w for w in doc["webhooks"]}


def test_webhook_register_managed_from_makes_the_unlabelled_entry_strict(tmp_path: Path) -> None:
    config = tmp_path / "kueue-config.yaml"
    config.write_text(STRICT_CONFIG)
    hooks = _register(tmp_path, "--managed-from", str(config), "--match-label", "p=x")
    queued, other = (
        hooks["mutate-batch-v1-job.kuota.dev"],
        hooks["unlabelled-batch-v1-job.kuota.dev"],
    )
    assert (queued["failurePolicy"], other["failurePolicy"]) == ("Fail", "Fail")
    assert queued["namespaceSelector"] == {"matchExpressions": [SYSTEM]}
    config_value = read_configuration(STRICT_CONFIG)
    assert not isinstance(config_value, str)
    assert other["namespaceSelector"] == namespace_selector(config_value)
    assert other["objectSelector"]["matchLabels"] == {"p": "x"}
    # a Configuration that manages nothing keeps the documented Ignore entry
    config.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
    hooks = _register(tmp_path, "--managed-from", str(config))
    assert hooks["unlabelled-batch-v1-job.kuota.dev"]["failurePolicy"] == "Ignore"


def test_webhook_register_reads_the_configmap_through_kubectl(tmp_path: Path) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": STRICT_CONFIG},
    }
    fake = tmp_path / "kubectl"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(cm)}\nEOF\n")
    fake.chmod(0o755)
    hooks = _register(
        tmp_path, "--managed-from-configmap", "kueue-system/kueue-manager-config", kubectl=str(fake)
    )
    other = hooks["unlabelled-batch-v1-job.kuota.dev"]
    assert other["failurePolicy"] == "Fail"
    assert other["namespaceSelector"]["matchLabels"] == {"team": "yes"}
    # an absent ConfigMap (kubectl --ignore-not-found prints nothing): Kueue's defaults, off
    hooks = _register(tmp_path, "--managed-from-configmap", "kueue-system/none")
    assert hooks["unlabelled-batch-v1-job.kuota.dev"]["failurePolicy"] == "Ignore"


def test_kuota_services_registers_the_strict_form() -> None:
    text = (REPO / "scripts/kuota-services").read_text()
    assert '"--managed-from", p.config_file' in text
    assert '"--managed-from-configmap", p.config_map' in text


# --------------------------------------------------------------------------- 3. before complete


def _starting(manage: bool = True) -> ClusterView:
    """A view that has read the Configuration but not yet every Namespace and Job."""
    text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    text += f"manageJobsWithoutQueueName: {str(manage).lower()}\n"
    text += "managedJobsNamespaceSelector:\n  matchLabels:\n    team: 'yes'\n"
    obj = config_file_object(text)
    assert isinstance(obj, dict)
    view = ClusterView()
    view.observe("Configuration", "UPSERT", obj)
    return view


def test_before_the_view_is_complete_an_unsuspended_create_is_refused_as_retryable() -> None:
    view = _starting()
    a = mutate_job(review(job(queue=None, suspend=False)), trusted_users=TRUSTED, managed=view)
    status = a.review["response"]["status"]
    assert (a.outcome, a.review["response"]["allowed"]) == ("refused", False)
    assert (status["code"], status["reason"]) == (503, "ServiceUnavailable")
    assert (
        status["message"]
        == starting_message("team-a")
        == (
            'kuota-webhook is starting and does not know yet whether namespace "team-a" is managed '
            "by kuota (manageJobsWithoutQueueName), so it cannot tell whether this Job must wait "
            "for admission; retry in a few seconds, or create it suspended (spec.suspend: true) "
            "or with a kueue.x-k8s.io/queue-name label"
        )
    )
    # created suspended, or labelled: as usual
    assert answer(review(job(queue=None, suspend=True)), view) == ("unchanged", "")
    assert answer(review(job(suspend=False)), view)[0] == "suspended"
    # the system namespaces are never kuota's
    body = review(job(queue=None, suspend=False), namespace="kube-system")
    assert mutate_job(body, managed=view).outcome == "unchanged"
    # once complete, "not managed" is an answer: the namespace has no team label
    view.mark_complete()
    assert answer(review(job(queue=None, suspend=False)), view) == ("unchanged", "")


def test_before_the_view_is_complete_the_rules_guard_every_unlabelled_job() -> None:
    view = _starting()
    outcome, message = answer(review(job(queue=None, suspend=False), job(queue=None)), view)
    assert outcome == "refused"
    assert message == (
        f"spec.suspend: Forbidden: {WHO} may not set it to false: kuota-webhook is starting "
        'and does not know yet whether namespace "team-a" is managed '
        "(manageJobsWithoutQueueName), so it guards every Job there as if it were; if the "
        "Job is not kuota's, retry in a few seconds, and only kuota unsuspends it, when it "
        "admits it within its ClusterQueue's quota; leave it suspended and kuota starts it"
    )
    grow = review(sized(queue=None, parallelism=2, suspend=False), sized(queue=None, suspend=False))
    assert answer(grow, view)[0] == "refused"
    # an update no rule refuses passes (a controller's metadata write, say)
    relabelled = job(queue=None)
    relabelled["metadata"]["labels"]["app"] = "x"
    assert answer(review(relabelled, job(queue=None)), view) == ("unchanged", "")
    # a namespace the view already knows is managed is answered as managed
    view.observe("Namespace", "UPSERT", {"metadata": {"name": "team-a", "labels": {"team": "yes"}}})
    assert answer(review(job(queue=None, suspend=False)), view)[0] == "suspended"


def _config(manage: bool = True) -> dict[str, Any]:
    text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    text += f"manageJobsWithoutQueueName: {str(manage).lower()}\n"
    text += "managedJobsNamespaceSelector:\n  matchLabels:\n    team: 'yes'\n"
    obj = config_file_object(text)
    assert isinstance(obj, dict)
    return obj


def test_a_job_listed_before_the_configuration_is_known_once_it_is_read() -> None:
    view = ClusterView()
    view.observe("Namespace", "UPSERT", {"metadata": {"name": "team-a", "labels": {"team": "yes"}}})
    view.observe("Job", "UPSERT", job(queue=None, uid="u-early"))  # defaults: not managed yet
    assert not view.known("u-early")
    view.observe("Configuration", "UPSERT", _config())
    assert view.known("u-early"), "the Configuration makes the held Jobs known at once"
    # and it stays kuota's when the Configuration stops managing the namespace
    view.observe("Configuration", "UPSERT", _config(manage=False))
    assert view.known("u-early")
    view.observe("Job", "DELETE", job(queue=None, uid="u-early"))
    assert not view.known("u-early")


def test_a_namespace_labelled_later_makes_its_jobs_known() -> None:
    view = ClusterView()
    view.observe("Configuration", "UPSERT", _config())
    view.observe("Job", "UPSERT", job(queue=None, uid="u-1"))  # before its Namespace
    other = job(queue=None, uid="u-2")
    other["metadata"]["namespace"] = "team-b"
    view.observe("Job", "UPSERT", other)
    assert not view.known("u-1") and not view.known("u-2")
    view.observe("Namespace", "UPSERT", {"metadata": {"name": "team-a", "labels": {"team": "yes"}}})
    assert view.known("u-1") and not view.known("u-2"), "only that namespace's Jobs"
    view.observe("Namespace", "UPSERT", {"metadata": {"name": "team-b", "labels": {}}})
    assert not view.known("u-2")
    view.observe("Namespace", "UPSERT", {"metadata": {"name": "team-b", "labels": {"team": "yes"}}})
    assert view.known("u-2")
