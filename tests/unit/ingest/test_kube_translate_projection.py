"""A Job is journaled as what the fold reads of it (#23 item 5,
``kuota.kube.translate.journal_object``): the fold reads the projection exactly
as the whole Job (same workload, same error for a bad one), a Job made large by
env values is journaled small, and an object still too large for a journal
record is journaled as a stand-in the fold rejects with the reason."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from builders.driver import Driver
from builders.manifests import resource_claim_template

from kuota.api.dra import parse_dra_object
from kuota.api.parse import parse_job, parse_object
from kuota.api.types import ValidationError, WorkloadSpec
from kuota.events.schema import ObjectUpserted
from kuota.kube.translate import fold_digest, journal_object, stand_in, translate_upsert

AT = 1_700_000_000.0
QUEUE = "kueue.x-k8s.io/queue-name"
MB = 1_000_000


def _job(**pod: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "trainer:1",
                "args": ["--epochs", "3"],
                "env": [{"name": "TOKEN", "value": "secret"}],
                "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
            }
        ],
    }
    spec.update(pod)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team",
            "uid": "u-1",
            "resourceVersion": "7",
            "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {QUEUE: "lq", "kueue.x-k8s.io/priority-class": "high", "app": "x"},
            "annotations": {"kuota.dev/active": "true", "note": "n" * 100},
            "ownerReferences": [{"kind": "CronJob", "name": "c"}],
        },
        "spec": {
            "suspend": True,
            "parallelism": 3,
            "completions": 5,
            "backoffLimit": 2,
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": spec},
        },
        "status": {"active": 0},
    }


SIDECAR = {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
JOBS = {
    "plain": _job(),
    "init and sidecar": _job(
        initContainers=[
            {"name": "fetch", "image": "x", "resources": {"requests": {"memory": "1Gi"}}},
            SIDECAR,
        ],
        overhead={"cpu": "100m"},
    ),
    "claims, selector, affinity, tolerations": _job(
        resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "a100"}],
        nodeSelector={"zone": "a"},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}],
            },
            "podAntiAffinity": {"x": 1},
        },
    ),
    # bad ones: the projection must be rejected the same way
    "containers not a list": _job(containers={"name": "c"}),
    "a container not a mapping": _job(containers=["c"]),
    "resources not a mapping": _job(containers=[{"name": "c", "resources": "lots"}]),
    "request over limit": _job(
        containers=[{"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]
    ),
    "affinity a string": _job(affinity="near"),
    "nodeAffinity a list": _job(affinity={"nodeAffinity": []}),
    "bad toleration": _job(tolerations=[{"operator": "Sometimes"}]),
    "no containers": _job(containers=[]),
}


def _bad_spec(job: dict[str, Any], **spec: Any) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["spec"].update(spec)
    return job


JOBS["template a string"] = _bad_spec(_job(), template="x")
JOBS["parallelism a string"] = _bad_spec(_job(), parallelism="3")
JOBS["suspend a string"] = _bad_spec(_job(), suspend="yes")
JOBS["labels a list"] = copy.deepcopy(_job())
JOBS["labels a list"]["metadata"]["labels"] = [QUEUE]
JOBS["bad active"] = copy.deepcopy(_job())
JOBS["bad active"]["metadata"]["annotations"]["kuota.dev/active"] = "maybe"


@pytest.mark.parametrize("name", sorted(JOBS))
def test_the_fold_reads_the_projection_as_the_whole_job(name: str) -> None:
    job = JOBS[name]
    for managed in (False, True):
        whole = parse_job(job, at=AT, managed=managed)
        projected = parse_job(journal_object("Job", job), at=AT, managed=managed)
        assert projected == whole, name
    assert fold_digest("Job", job) == fold_digest("Job", copy.deepcopy(job)), "input unchanged"


def test_valid_jobs_read_as_workloads_and_bad_ones_as_errors() -> None:
    """The table above really holds both kinds (else the comparison proves little)."""
    read = {n: parse_job(j, at=AT) for n, j in JOBS.items()}
    assert {n for n, r in read.items() if isinstance(r, WorkloadSpec)} == {
        "plain",
        "init and sidecar",
        "claims, selector, affinity, tolerations",
    }
    assert all(isinstance(r, WorkloadSpec | ValidationError) for r in read.values())


def test_only_what_the_fold_reads_is_journaled() -> None:
    out = journal_object("Job", JOBS["claims, selector, affinity, tolerations"])
    assert out["metadata"] == {
        "name": "train",
        "namespace": "team",
        "uid": "u-1",
        "resourceVersion": "7",
        "generation": 2,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {QUEUE: "lq", "kueue.x-k8s.io/priority-class": "high"},
        "annotations": {"kuota.dev/active": "true"},
    }
    assert "status" not in out
    assert out["spec"]["template"] == {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "a100"}],
            "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}
                        ]
                    }
                }
            },
        }
    }
    assert "secret" not in json.dumps(out) and "--epochs" not in json.dumps(out)


def test_a_job_large_by_its_env_is_journaled_small() -> None:
    big = _job()
    big["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "BLOB", "value": "x" * (6 * MB // 5)}
    ]
    t = translate_upsert("Job", big, None, at=AT)
    (event,) = t.events
    size = len(event.model_dump_json())
    assert size < 2_000, f"the journaled Job is {size} bytes"
    assert parse_job(event.object, at=AT) == parse_job(big, at=AT)


def _oversized(obj: dict[str, Any], size: int = 1_234_567) -> ObjectUpserted:
    event = ObjectUpserted(id="x@1", at=AT, object=obj)
    out = stand_in(event, size, MB)
    assert (out.id, out.at) == (event.id, event.at)
    assert len(out.model_dump_json()) < 2_000
    return out


def test_a_job_still_too_large_is_rejected_with_the_reason() -> None:
    huge = _job(nodeSelector={f"k{i}.example.com/x": "v" for i in range(30_000)})
    out = _oversized(journal_object("Job", huge))
    assert out.object["metadata"]["labels"] == {
        QUEUE: "lq",
        "kueue.x-k8s.io/priority-class": "high",
    }
    parsed = parse_object(out.object)
    assert isinstance(parsed, ValidationError)
    assert str(parsed) == (
        "Job team/train: metadata: not journaled: its projection (what the fold reads) is "
        "1,234,567 bytes as a journal event, over the journal's limit of 1,000,000 bytes: "
        "make it smaller (node selector, tolerations, affinity, containers)"
    )
    # In a managed namespace, without a queue label, it is rejected the same way.
    del out.object["metadata"]["labels"][QUEUE]
    unlabelled = parse_job(out.object, at=AT, managed=True)
    assert isinstance(unlabelled, ValidationError) and "not journaled" in unlabelled.message


def test_the_fold_rejects_the_stand_in_and_admits_nothing() -> None:
    driver = Driver()
    out = _oversized(journal_object("Job", _job()))
    decisions = driver.feed(out)
    assert [(d.type, d.object, d.reason) for d in decisions] == [
        ("Rejected", "Job team/train", "InvalidObject")
    ]
    assert decisions[0].message is not None and "not journaled" in decisions[0].message


def test_any_kind_is_rejected_so_even_one_that_would_read() -> None:
    ns = _oversized({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
    parsed = parse_object(ns.object)
    assert isinstance(parsed, ValidationError) and parsed.field == "metadata"
    assert "the object is 1,234,567 bytes" in parsed.message
    rct = _oversized(resource_claim_template("t", namespace="team", device_class="gpu"))
    dra = parse_dra_object(rct.object)
    assert isinstance(dra, ValidationError) and "not journaled" in dra.message
    dc = _oversized(
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"}}
    )
    assert isinstance(parse_dra_object(dc.object), ValidationError), "a class needs no spec"


def test_a_users_copy_of_the_marker_is_never_journaled() -> None:
    rct = resource_claim_template("t", namespace="team", device_class="gpu")
    rct["metadata"]["annotations"] = {"kuota.dev/not-journaled": "fake", "a": "b"}
    out = journal_object("ResourceClaimTemplate", rct)
    assert out["metadata"]["annotations"] == {"a": "b"}
    assert not isinstance(parse_dra_object(out), ValidationError)
