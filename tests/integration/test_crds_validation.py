"""kuota's CRDs reject invalid objects and serve the ``/status`` subresource.

Live against the real kube-apiserver (an unreachable one is a FAILURE, never a
skip): invalid ClusterQueues, LocalQueues, Cohorts, ResourceFlavors and
WorkloadPriorityClasses are rejected with a field error that names the field;
ClusterQueue / LocalQueue status is written through ``/status`` only and printed
by the CRDs' columns. The installation and round-trip tests are in
``test_crds.py``; the shared helpers in ``crd_helpers.py``.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from crd_helpers import (
    GROUP,
    VERSIONS,
    Cluster,
    cause_for,
    live,
    open_cluster,
    rejected,
    sample,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(kubeconfig: str) -> AsyncIterator[Cluster]:
    async with open_cluster(kubeconfig) as c:
        yield c


# --------------------------------------------------------------------------- invalid objects


def _seventeen_groups(doc: dict[str, Any]) -> None:
    group = doc["spec"]["resourceGroups"][0]
    doc["spec"]["resourceGroups"] = []
    for i in range(17):
        g = copy.deepcopy(group)
        g["coveredResources"] = [f"example.com/r{i}"]
        g["flavors"][0]["name"] = f"f{i}"
        g["flavors"][0]["resources"][0]["name"] = f"example.com/r{i}"
        doc["spec"]["resourceGroups"].append(g)


def _first_quota(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]


RQ0 = "spec.resourceGroups[0].flavors[0].resources[0]"

# name, sample (file, kind), apiVersion or None (as the sample), edit, field, message part
INVALID: list[tuple[str, tuple[str, str], str | None, Callable[[dict[str, Any]], None], str, str]]
INVALID = [
    (
        "bogus queueingStrategy",
        ("article-004-team-alpha.yaml", "ClusterQueue"),
        None,
        lambda d: d["spec"].update(queueingStrategy="Bogus"),
        "spec.queueingStrategy",
        "Unsupported value",
    ),
    (
        "17 resource groups",
        ("article-004-team-alpha.yaml", "ClusterQueue"),
        None,
        _seventeen_groups,
        "spec.resourceGroups",
        "must have at most 16 items",
    ),
    (
        "missing nominalQuota",
        ("article-004-team-alpha.yaml", "ClusterQueue"),
        None,
        lambda d: _first_quota(d).pop("nominalQuota"),
        f"{RQ0}.nominalQuota",
        "Required value",
    ),
    (
        "missing nominalQuota at v1beta1",
        ("clusterqueue-v1beta1.yaml", "ClusterQueue"),
        None,
        lambda d: _first_quota(d).pop("nominalQuota"),
        f"{RQ0}.nominalQuota",
        "Required value",
    ),
    (
        "negative nominalQuota",
        ("article-004-team-alpha.yaml", "ClusterQueue"),
        None,
        lambda d: _first_quota(d).update(nominalQuota="-1"),
        f"{RQ0}.nominalQuota",
        "should match",
    ),
    (
        "negative integer lendingLimit",
        ("clusterqueue-v1beta1.yaml", "ClusterQueue"),
        None,
        lambda d: d["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0].update(
            lendingLimit=-2
        ),
        "spec.resourceGroups[1].flavors[0].resources[0].lendingLimit",
        "greater than or equal to 0",
    ),
    (
        "quantity that is not one",
        ("article-004-team-alpha.yaml", "ClusterQueue"),
        None,
        lambda d: _first_quota(d).update(borrowingLimit="four"),
        f"{RQ0}.borrowingLimit",
        "should match",
    ),
    (
        "borrowingLimit without a cohort",
        ("article-004-team-alpha.yaml", "ClusterQueue"),
        None,
        lambda d: d["spec"].pop("cohort"),
        "spec.resourceGroups",
        "must be unset when the ClusterQueue has no cohort",
    ),
    (
        "cohort and cohortName disagree",
        ("article-004-team-alpha.yaml", "ClusterQueue"),
        None,
        lambda d: d["spec"].update(cohortName="other-pool"),
        "spec.cohortName",
        "must be equal",
    ),
    (
        "flavor resources out of coveredResources order",
        ("clusterqueue-v1beta1.yaml", "ClusterQueue"),
        None,
        lambda d: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"].reverse(),
        "spec.resourceGroups[0].flavors",
        "same order",
    ),
    (
        "bogus preemption policy",
        ("clusterqueue-v1beta1.yaml", "ClusterQueue"),
        None,
        lambda d: d["spec"]["preemption"].update(withinClusterQueue="Always"),
        "spec.preemption.withinClusterQueue",
        "Unsupported value",
    ),
    (
        "bogus stopPolicy",
        ("article-004-team-alpha.yaml", "LocalQueue"),
        None,
        lambda d: d["spec"].update(stopPolicy="Pause"),
        "spec.stopPolicy",
        "Unsupported value",
    ),
    (
        "missing clusterQueue",
        ("article-004-team-alpha.yaml", "LocalQueue"),
        None,
        lambda d: d["spec"].pop("clusterQueue"),
        "spec.clusterQueue",
        "Required value",
    ),
    (
        "missing coveredResources",
        ("cohort-gpu-pool.yaml", "Cohort"),
        None,
        lambda d: d["spec"]["resourceGroups"][0].pop("coveredResources"),
        "spec.resourceGroups[0].coveredResources",
        "Required value",
    ),
    (
        "missing value",
        ("workloadpriorityclasses.yaml", "WorkloadPriorityClass"),
        None,
        lambda d: d.pop("value"),
        "value",
        "Required value",
    ),
    (
        "bogus toleration operator",
        ("article-004-resourceflavor.yaml", "ResourceFlavor"),
        None,
        lambda d: d["spec"]["tolerations"][0].update(operator="Maybe"),
        "spec.tolerations[0].operator",
        "Unsupported value",
    ),
    (
        "v1beta2 rejects a fungibility value of neither version",
        ("clusterqueue-v1beta1.yaml", "ClusterQueue"),
        "v1beta2",
        lambda d: d["spec"]["flavorFungibility"].update(whenCanBorrow="Always"),
        "spec.flavorFungibility.whenCanBorrow",
        "Unsupported value",
    ),
]


@live
@pytest.mark.parametrize(
    ("sample_ref", "api_version", "edit", "field", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in INVALID],
)
async def test_invalid_object_is_rejected_with_a_field_error(
    cluster: Cluster,
    sample_ref: tuple[str, str],
    api_version: str | None,
    edit: Callable[[dict[str, Any]], None],
    field: str,
    message: str,
) -> None:
    doc = cluster.renamed(sample(*sample_ref))
    doc["metadata"]["name"] += "-invalid"
    if api_version:
        doc["apiVersion"] = f"{GROUP}/{api_version}"
    edit(doc)
    cause_for(await rejected(cluster.create(doc)), field, message)


# --------------------------------------------------------------------------- status


def _cq_status(flavor: str) -> dict[str, Any]:
    usage = [
        {
            "name": flavor,
            "resources": [{"name": "nvidia.com/gpu", "total": "10", "borrowed": "2"}],
        }
    ]
    return {
        "pendingWorkloads": 3,
        "reservingWorkloads": 2,
        "admittedWorkloads": 2,
        "flavorsReservation": usage,
        "flavorsUsage": usage,
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Ready",
                "message": "Can admit new workloads",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
        "fairSharing": {"weightedShare": 0},
    }


@live
async def test_cluster_queue_status_subresource(cluster: Cluster) -> None:
    doc = cluster.renamed(sample("article-004-team-alpha.yaml", "ClusterQueue"))
    doc["metadata"]["name"] += "-status"
    created = await cluster.create(doc)
    status = _cq_status(f"{cluster.prefix}-nvidia-h100")

    patched = await cluster.patch(doc, {"status": status}, status=True)
    assert patched["status"] == status
    assert patched["metadata"]["generation"] == created["metadata"]["generation"]
    for version in VERSIONS:
        assert (await cluster.get(doc, version))["status"] == status

    # Through the main resource, status is ignored (and spec through /status).
    await cluster.patch(doc, {"status": {"pendingWorkloads": 99}})
    await cluster.patch(doc, {"spec": {"queueingStrategy": "StrictFIFO"}}, status=True)
    got = await cluster.get(doc, "v1beta2")
    assert got["status"]["pendingWorkloads"] == 3
    assert got["spec"]["queueingStrategy"] == "BestEffortFIFO"

    causes = await rejected(
        cluster.patch(
            doc,
            {"status": {"conditions": [{**status["conditions"][0], "status": "Maybe"}]}},
            status=True,
        )
    )
    cause_for(causes, "status.conditions[0].status", "Unsupported value")

    # What `kubectl get cq -o wide` prints, at both versions: the cohort shows
    # although the article spells it `cohort` under v1beta2.
    for version in VERSIONS:
        table = await cluster.table(doc, version)
        names = [c["name"] for c in table["columnDefinitions"]]
        assert names == [
            "Name",
            "Cohort",
            "Strategy",
            "Pending Workloads",
            "Admitted Workloads",
            "Age",
        ]
        cells = dict(zip(names, table["rows"][0]["cells"], strict=True))
        assert cells["Name"] == doc["metadata"]["name"]
        assert cells["Cohort"] == f"{cluster.prefix}-gpu-pool"
        assert cells["Strategy"] == "BestEffortFIFO"
        assert (cells["Pending Workloads"], cells["Admitted Workloads"]) == (3, 2)


@live
async def test_local_queue_status_subresource(cluster: Cluster) -> None:
    doc = cluster.renamed(sample("article-004-team-alpha.yaml", "LocalQueue"))
    doc["metadata"]["name"] += "-status"
    await cluster.create(doc)
    usage = [
        {
            "name": f"{cluster.prefix}-nvidia-h100",
            "resources": [{"name": "nvidia.com/gpu", "total": 4}],
        }
    ]
    status = {
        "pendingWorkloads": 1,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
        "flavorsReservation": usage,
        "flavorsUsage": usage,
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Ready",
                "message": "Can submit new workloads to localQueue",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    patched = await cluster.patch(doc, {"status": status}, status=True)
    assert patched["status"] == status
    assert (await cluster.get(doc, "v1beta1"))["status"] == status

    table = await cluster.table(doc, "v1beta2")
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "ClusterQueue", "Pending Workloads", "Admitted Workloads", "Age"]
    cells = dict(zip(names, table["rows"][0]["cells"], strict=True))
    assert cells["ClusterQueue"] == f"{cluster.prefix}-team-alpha-cq"
    assert (cells["Pending Workloads"], cells["Admitted Workloads"]) == (1, 1)
