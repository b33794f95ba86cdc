"""What ingest journals of a ResourceClaim (#17): its identity, its spec.devices
and, of its status, the allocation's results, node selector and reservations;
journaled again only when that changes: a driver's device status, conditions and
resourceVersion bumps journal nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from builders.manifests import resource_claim, set_path
from test_kube_translate_nodes import (
    deleted_and_stood_in,
    journaled_change,
    journaled_versions,
    unjournaled_writes,
)

from kuota.api.dra import parse_dra_object
from kuota.api.types import ValidationError
from kuota.kube.translate import journal_object

GPU = "gpu.nvidia.com"
KEY = "team-a/p-0-gpu-x7k2"  # the claim's namespace/name


def cluster_claim(name: str = "p-0-gpu-x7k2", *, rv: str = "300") -> dict[str, Any]:
    """An allocated, reserved claim as the apiserver returns it (a LIST item: no
    apiVersion nor kind), with everything the fold does not read."""
    m = resource_claim(
        name,
        namespace="team-a",
        device_class=GPU,
        count=2,
        allocated=[("node-a", "gpu-0"), ("node-a", "gpu-1")],
        node="node-a",
        reserved_for="p-0",
    )
    del m["apiVersion"], m["kind"]
    m["metadata"].update(
        uid=f"uid-{name}",
        resourceVersion=rv,
        creationTimestamp="2026-01-01T00:00:00Z",
        generateName="p-0-gpu-",
        labels={"app": "trainer"},
        annotations={"resource.kubernetes.io/pod-claim-name": "gpu"},
        ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p-0", "uid": "uid-p-0"}],
        finalizers=["resource.kubernetes.io/delete-protection"],
        managedFields=[{"manager": "kube-scheduler", "operation": "Update"}],
    )
    m["spec"]["devices"]["constraints"] = [{"requests": ["gpu"], "matchAttribute": "x/y"}]
    m["spec"]["devices"]["config"] = [{"requests": ["gpu"], "opaque": {"driver": GPU}}]
    allocation = m["status"]["allocation"]
    for result in allocation["devices"]["results"]:
        result.update(adminAccess=False, tolerations=[{"key": "k"}], bindingConditions=["c"])
    allocation["devices"]["config"] = [{"source": "FromClaim", "opaque": {"driver": GPU}}]
    allocation["allocationTimestamp"] = "2026-01-01T00:00:01Z"
    m["status"]["devices"] = [
        {
            "driver": GPU,
            "pool": "node-a",
            "device": "gpu-0",
            "conditions": [{"type": "Ready", "status": "True"}],
            "data": {"health": "ok"},
        }
    ]
    return m


def driver_status(m: dict[str, Any], *, rv: str, health: str) -> dict[str, Any]:
    """A driver's write of the device status: new resourceVersion, nothing the fold reads."""
    out = copy.deepcopy(m)
    out["metadata"]["resourceVersion"] = rv
    out["metadata"]["managedFields"].append({"manager": "gpu-driver"})
    out["status"]["devices"][0]["data"] = {"health": health}
    out["status"]["devices"][0]["conditions"][0]["lastTransitionTime"] = rv
    return out


# --------------------------------------------------------------------------- the projection


def test_only_what_the_fold_reads_of_a_claim_is_journaled() -> None:
    out = journal_object("ResourceClaim", cluster_claim())
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 2}}
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
    assert out == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "p-0-gpu-x7k2",
            "namespace": "team-a",
            "uid": "uid-p-0-gpu-x7k2",
            "resourceVersion": "300",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "devices": {
                "requests": [request],
                "constraints": [{"requests": ["gpu"], "matchAttribute": "x/y"}],
                "config": [{"requests": ["gpu"], "opaque": {"driver": GPU}}],
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": GPU,
                            "pool": "node-a",
                            "device": f"gpu-{i}",
                            "adminAccess": False,
                        }
                        for i in (0, 1)
                    ]
                },
                "nodeSelector": {"nodeSelectorTerms": [term]},
            },
            "reservedFor": [{"resource": "pods", "name": "p-0", "uid": "uid-p-0"}],
        },
    }


def test_a_shared_devices_share_is_kept_and_an_unallocated_claim_has_no_status() -> None:
    shared = cluster_claim()
    result = shared["status"]["allocation"]["devices"]["results"][0]
    result.update(shareID="5a1c", consumedCapacity={"memory": "10Gi"})
    out = journal_object("ResourceClaim", shared)["status"]["allocation"]["devices"]["results"]
    assert out[0]["shareID"] == "5a1c" and out[0]["consumedCapacity"] == {"memory": "10Gi"}
    pending = resource_claim("c", namespace="team-a", device_class=GPU)
    pending["status"] = {"devices": [], "conditions": []}
    assert "status" not in journal_object("ResourceClaim", pending)
    assert "status" not in journal_object(
        "ResourceClaim", resource_claim("c", namespace="n", device_class=GPU)
    )
    odd = set_path(cluster_claim(), "status.reservedFor", "p-0")  # not read yet: kept as found
    assert journal_object("ResourceClaim", odd)["status"]["reservedFor"] == "p-0"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("status", "allocated"),
        ("status.allocation", ["x"]),
        ("status.allocation.devices", 3),
        ("status.allocation.devices.results", {"device": "gpu-0"}),
        ("status.allocation.devices.results", [7]),
        ("spec", ["a list"]),
        ("metadata", "a string"),
    ],
)
def test_a_bad_shape_is_kept_so_the_reader_rejects_it_the_same(field: str, value: object) -> None:
    whole = set_path(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **cluster_claim()},
        field,
        value,
    )
    read = parse_dra_object(journal_object("ResourceClaim", whole))
    assert isinstance(read, ValidationError) and read == parse_dra_object(whole)


# --------------------------------------------------------------------------- the digest rule


def test_a_drivers_device_status_journals_nothing() -> None:
    claim = cluster_claim()
    writes = [driver_status(claim, rv=str(300 + i), health=f"h{i}") for i in range(1, 4)]
    assert unjournaled_writes("ResourceClaim", claim, writes) == f"ResourceClaim/{KEY}@300"


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.pop("status"),
        lambda m: m["status"].pop("allocation"),
        lambda m: m["status"]["allocation"]["devices"]["results"][1].update(device="gpu-5"),
        lambda m: m["status"]["allocation"]["devices"]["results"][0].update(adminAccess=True),
        lambda m: m["status"].pop("reservedFor"),
        lambda m: m["status"]["allocation"].pop("nodeSelector"),
        lambda m: m["spec"]["devices"]["requests"][0]["exactly"].update(count=3),
        lambda m: m["metadata"].update(uid="uid-new"),
    ],
    ids=["deallocated", "no-allocation", "device", "admin", "unreserved", "node", "spec", "uid"],
)
def test_a_change_the_fold_reads_is_journaled(change: Any) -> None:
    claim = cluster_claim()
    changed = driver_status(claim, rv="301", health="h")
    change(changed)
    assert journaled_change("ResourceClaim", claim, changed) == f"ResourceClaim/{KEY}@301"


def test_a_claims_delete_and_its_stand_in() -> None:
    gone, small = deleted_and_stood_in("ResourceClaim", cluster_claim())
    assert (gone.kind, gone.name, gone.namespace) == ("ResourceClaim", "p-0-gpu-x7k2", "team-a")
    assert small.object["metadata"]["namespace"] == "team-a"
    assert "status" not in small.object
    read = parse_dra_object(small.object)
    assert isinstance(read, ValidationError) and read.field == "metadata"


# --------------------------------------------------------------------------- the source


async def test_the_sources_journal_a_claim_once_through_its_device_status() -> None:
    claim = cluster_claim()
    writes = [driver_status(claim, rv=str(300 + i), health=str(i)) for i in range(1, 6)]
    freed = driver_status(claim, rv="400", health="x")
    del freed["status"]["allocation"]
    key = f"ResourceClaim/{KEY}"
    assert await journaled_versions("ResourceClaim", key, claim, [*writes, freed]) == ["300", "400"]
