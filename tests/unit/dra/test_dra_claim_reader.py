"""kuota.api.dra reads a ResourceClaim (#17): its requests as a template's, and the
devices its allocation took; never raises, a bad field is named."""

from __future__ import annotations

from typing import Any

import pytest
from builders.manifests import (
    DELETE,
    device_request,
    resource_claim,
    resource_claim_template,
    set_path,
)

from kuota.api.dra import (
    KINDS,
    DeviceRequest,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimTemplate,
    parse_dra_object,
)
from kuota.api.types import ObjectRef, ValidationError
from kuota.kube.translate import journal_object

GPU = "gpu.nvidia.com"


def allocated(*devices: str, pool: str = "node-a", **kw: Any) -> dict[str, Any]:
    return resource_claim(
        "c", namespace="team-a", device_class=GPU, allocated=[(pool, d) for d in devices], **kw
    )


def test_the_reader_reads_every_dra_kind_ingest_watches() -> None:
    assert KINDS == (
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaimTemplate",
        "ResourceClaim",
        "DeviceTaintRule",
    )


def test_an_unallocated_claim_asks_as_a_template_does_and_holds_nothing() -> None:
    claim = resource_claim("c", namespace="team-a", device_class=GPU, count=2)
    claim["metadata"]["uid"] = "u-1"
    got = parse_dra_object(claim)
    request = DeviceRequest("gpu", ExactDeviceRequest(GPU, 2))
    assert got == ResourceClaim("team-a", "c", "u-1", (request,), ())
    template = parse_dra_object(
        resource_claim_template("c", namespace="team-a", device_class=GPU, count=2)
    )
    assert isinstance(template, ResourceClaimTemplate) and template.requests == got.requests
    assert got.ref == "team-a/c"


def test_an_allocated_claim_holds_its_devices_sorted_once_each() -> None:
    claim = allocated("gpu-3", "gpu-1", node="node-a", reserved_for="p-0")
    other = {"request": "gpu", "driver": "a.example.com", "pool": "p", "device": "d"}
    claim["status"]["allocation"]["devices"]["results"] += [other, dict(other)]
    got = parse_dra_object(claim)
    assert isinstance(got, ResourceClaim)
    assert got.allocated == (
        ("a.example.com", "p", "d"),
        (GPU, "node-a", "gpu-1"),
        (GPU, "node-a", "gpu-3"),
    )


def test_an_admin_access_result_takes_nothing() -> None:
    claim = allocated("gpu-0", "gpu-1")
    claim["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    claim["status"]["allocation"]["devices"]["results"][1]["adminAccess"] = False
    got = parse_dra_object(claim)
    assert isinstance(got, ResourceClaim) and got.allocated == ((GPU, "node-a", "gpu-1"),)


def test_status_without_an_allocation_holds_nothing() -> None:
    for status in ({}, {"allocation": None}, {"reservedFor": []}, {"allocation": {}}):
        claim = resource_claim("c", namespace="team-a", device_class=GPU)
        claim["status"] = status
        got = parse_dra_object(claim)
        assert isinstance(got, ResourceClaim) and got.allocated == (), status


def test_the_beta_shapes_and_the_reference_claim_read() -> None:
    beta = allocated("gpu-0")
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    request = beta["spec"]["devices"]["requests"][0]
    request.update(request.pop("exactly"))
    assert parse_dra_object(beta) == parse_dra_object(allocated("gpu-0"))
    direct = resource_claim(
        "c",
        namespace="team-a",
        requests=[
            device_request("a", device_class=GPU, cel=["device.driver == 'x'"]),
            {"name": "b", "firstAvailable": [{"name": "big", "deviceClassName": GPU}]},
        ],
    )
    got = parse_dra_object(direct)
    assert isinstance(got, ResourceClaim)
    assert [r.name for r in got.requests] == ["a", "b"]
    assert got.requests[1].first_available == ("big",)
    assert got.requests[1].alternatives == (ExactDeviceRequest(GPU),)


def test_first_available_subrequests_are_read_in_order() -> None:
    subs = [
        {
            "name": "two",
            "deviceClassName": GPU,
            "count": 2,
            "selectors": [{"cel": {"expression": "true"}}],
        },
        {"name": "all", "deviceClassName": "mig", "allocationMode": "All"},
    ]
    claim = resource_claim(
        "c", namespace="team-a", requests=[{"name": "r", "firstAvailable": subs}]
    )
    got = parse_dra_object(claim)
    assert isinstance(got, ResourceClaim)
    assert got.requests[0].first_available == ("two", "all")
    assert got.requests[0].alternatives == (
        ExactDeviceRequest(GPU, 2, selectors=("true",)),
        ExactDeviceRequest("mig", 1, allocation_mode="All"),
    )
    subs.append({"name": "two", "deviceClassName": GPU})
    bad = parse_dra_object(claim)
    assert isinstance(bad, ValidationError)
    assert "spec.devices.requests[0].firstAvailable" in str(bad)
    assert "duplicate subrequest name" in str(bad)
    subs[-1] = {"name": "three", "deviceClassName": GPU, "allocationMode": "All", "count": 3}
    bad = parse_dra_object(claim)
    assert isinstance(bad, ValidationError)
    assert "firstAvailable[2].count" in str(bad)


def test_the_journaled_projection_reads_as_the_whole_claim() -> None:
    whole = allocated("gpu-0", "gpu-1", node="node-a", reserved_for="p-0")
    whole["metadata"].update(uid="u", managedFields=[{"manager": "x"}], labels={"a": "b"})
    whole["status"]["devices"] = [{"driver": GPU, "pool": "node-a", "device": "gpu-0", "data": {}}]
    assert parse_dra_object(journal_object("ResourceClaim", whole)) == parse_dra_object(whole)


RESULTS = "status.allocation.devices.results"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("metadata.namespace", DELETE, "metadata.namespace"),
        ("metadata.uid", 7, "metadata.uid"),
        ("spec", DELETE, "spec"),
        ("spec.devices", ["x"], "spec.devices"),
        ("spec.devices.requests", "gpu", "spec.devices.requests"),
        ("spec.devices.requests.0.exactly.count", 0, "spec.devices.requests[0].exactly.count"),
        ("spec.devices.requests.0.exactly", DELETE, "spec.devices.requests[0]"),
        ("status", "allocated", "status"),
        ("status.allocation", ["x"], "status.allocation"),
        ("status.allocation.devices", 3, "status.allocation.devices"),
        (RESULTS, {"device": "gpu-0"}, RESULTS),
        (f"{RESULTS}.0", "gpu-0", f"{RESULTS}[0]"),
        (f"{RESULTS}.0.driver", DELETE, f"{RESULTS}[0].driver"),
        (f"{RESULTS}.0.pool", 5, f"{RESULTS}[0].pool"),
        (f"{RESULTS}.0.device", "", f"{RESULTS}[0].device"),
        (f"{RESULTS}.0.request", DELETE, f"{RESULTS}[0].request"),
        (f"{RESULTS}.0.adminAccess", "yes", f"{RESULTS}[0].adminAccess"),
    ],
)
def test_a_bad_field_is_named(path: str, value: object, field: str) -> None:
    bad = set_path(allocated("gpu-0"), path, value)
    got = parse_dra_object(bad)
    assert isinstance(got, ValidationError), got
    assert got.field == field, got
    assert got.ref == ObjectRef(
        "ResourceClaim", "c", "" if path == "metadata.namespace" else "team-a"
    )
    assert not got.message.startswith("cannot parse")
    journaled = parse_dra_object(journal_object("ResourceClaim", bad))
    assert journaled == got, "the journal's projection is rejected the same"


def test_garbage_never_raises() -> None:
    for status in (3, "x", [], {"allocation": {"devices": {"results": [None]}}}):
        claim = allocated("gpu-0")
        claim["status"] = status
        got = parse_dra_object(claim)
        assert isinstance(got, ValidationError) and got.field.startswith("status"), status
    for manifest in ({"spec": {}}, {"metadata": {"name": "c"}, "spec": {}}, {"metadata": "c"}):
        got = parse_dra_object(
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **manifest}
        )
        assert isinstance(got, ValidationError) and got.field.startswith("metadata"), manifest


def test_a_share_of_a_device_is_read_with_what_it_consumed() -> None:
    claim = allocated("gpu-0", "gpu-1")
    results = claim["status"]["allocation"]["devices"]["results"]
    results[0]["shareID"] = "5f1c"
    results[0]["consumedCapacity"] = {"memory": "20Gi", "cores": "10"}
    got = parse_dra_object(claim)
    assert isinstance(got, ResourceClaim)
    assert got.allocated == ((GPU, "node-a", "gpu-0"), (GPU, "node-a", "gpu-1"))
    gi = 1024**3 * 1000
    assert got.shares == (
        (GPU, "node-a", "gpu-0", "5f1c", (("cores", 10_000), ("memory", 20 * gi))),
    )
    results[0]["consumedCapacity"] = {"memory": "lots"}
    bad = parse_dra_object(claim)
    assert isinstance(bad, ValidationError)
    assert bad.field == "status.allocation.devices.results[0].consumedCapacity[memory]", bad
