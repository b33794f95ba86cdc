"""kuota.api.dra reads device taints, request tolerations and claim constraints
(#17): the values kept, a malformed one named by its field, never a crash; and
ingest journals them (slices and templates whole, a claim's spec.devices whole)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.manifests import (
    device,
    device_request,
    resource_claim,
    resource_claim_template,
    resource_slice,
)

from kuota.api.dra import (
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_dra_object,
)
from kuota.api.dra_rules import DeviceConstraint, DeviceTaint, DeviceToleration
from kuota.api.types import ValidationError
from kuota.kube.translate import journal_object

GPU = "gpu.nvidia.com"
PARENT = f"{GPU}/parent"


def tainted(*taints: object) -> dict[str, Any]:
    d = device("gpu-0")
    d["taints"] = list(taints)
    return resource_slice("node-a", devices=[d])


def tolerating(*tolerations: object) -> dict[str, Any]:
    r = device_request("gpu", device_class=GPU)
    r["exactly"]["tolerations"] = list(tolerations)
    return resource_claim_template("t", namespace="team-a", requests=[r])


def constrained(*constraints: object, requests: int = 2) -> dict[str, Any]:
    rs = [device_request(f"r{i}", device_class=GPU) for i in range(requests)]
    out = resource_claim_template("t", namespace="team-a", requests=rs)
    out["spec"]["spec"]["devices"]["constraints"] = list(constraints)
    return out


def test_device_taints_are_read() -> None:
    got = parse_dra_object(
        tainted(
            {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"},
            {"key": "drain", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
            {"key": "note", "effect": "None"},
            {"key": "future", "effect": "SomeNewEffect"},  # unknown effects act as None
        )
    )
    assert isinstance(got, ResourceSlice)
    assert got.devices[0].taints == (
        DeviceTaint("example.com/unhealthy", "ecc", "NoSchedule"),
        DeviceTaint("drain", "", "NoExecute"),
        DeviceTaint("note", "", "None"),
        DeviceTaint("future", "", "SomeNewEffect"),
    )
    plain = parse_dra_object(resource_slice("node-a", devices=[device("g")]))
    assert isinstance(plain, ResourceSlice) and plain.devices[0].taints == ()


@pytest.mark.parametrize(
    ("taints", "field", "says"),
    [
        ("oops", "spec.devices[0].taints", "must be a list"),
        (["oops"], "spec.devices[0].taints[0]", "must be an object"),
        ([{"effect": "NoSchedule"}], "spec.devices[0].taints[0].key", "required"),
        ([{"key": "bad key!", "effect": "NoSchedule"}], "taints[0].key", "not a qualified name"),
        ([{"key": "k", "value": "x" * 64, "effect": "NoSchedule"}], "taints[0].value", "label"),
        ([{"key": "k"}], "spec.devices[0].taints[0].effect", "required"),
        ([{"key": "k", "effect": 3}], "spec.devices[0].taints[0].effect", "must be a string"),
        (
            [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}],
            "spec.devices[0].taints[1]",
            "duplicate",
        ),
    ],
)
def test_malformed_taints_are_named(taints: Any, field: str, says: str) -> None:
    d = device("gpu-0")
    d["taints"] = taints
    got = parse_dra_object(resource_slice("node-a", devices=[d]))
    assert isinstance(got, ValidationError), got
    assert field in got.field and says in got.message, got


def test_request_tolerations_are_read() -> None:
    got = parse_dra_object(
        tolerating(
            {"key": "example.com/unhealthy", "operator": "Equal", "value": "ecc"},
            {"key": "drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            {"operator": "Exists"},
            {"key": "k", "value": "v"},  # operator defaults to Equal
        )
    )
    assert isinstance(got, ResourceClaimTemplate)
    exact = got.requests[0].exactly
    assert exact is not None
    assert exact.tolerations == (
        DeviceToleration("example.com/unhealthy", "Equal", "ecc", ""),
        DeviceToleration("drain", "Exists", "", "NoExecute"),
        DeviceToleration("", "Exists", "", ""),
        DeviceToleration("k", "Equal", "v", ""),
    )


@pytest.mark.parametrize(
    ("toleration", "field", "says"),
    [
        ({"key": "k", "operator": "In"}, "tolerations[0].operator", "not Equal or Exists"),
        ({"key": "k", "operator": "Exists", "value": "v"}, "tolerations[0].value", "empty"),
        ({"value": "v"}, "tolerations[0].operator", "must be Exists when key is empty"),
        ({"key": "k", "effect": "PreferNoSchedule"}, "tolerations[0].effect", "not NoSchedule"),
        ({"key": "k", "tolerationSeconds": "30"}, "tolerationSeconds", "integer"),
        ({"key": "bad key!"}, "tolerations[0].key", "not a qualified name"),
        ("oops", "tolerations[0]", "must be an object"),
    ],
)
def test_malformed_tolerations_are_named(toleration: Any, field: str, says: str) -> None:
    got = parse_dra_object(tolerating(toleration))
    assert isinstance(got, ValidationError), got
    assert field in got.field and says in got.message, got


def test_claim_constraints_are_read_in_templates_and_claims() -> None:
    got = parse_dra_object(
        constrained(
            {"requests": ["r0", "r1"], "matchAttribute": PARENT},
            {"matchAttribute": f"{GPU}/clique"},
            {"requests": ["r1"], "distinctAttribute": f"{GPU}/uuid"},
        )
    )
    assert isinstance(got, ResourceClaimTemplate)
    assert got.constraints == (
        DeviceConstraint(("r0", "r1"), PARENT, None),
        DeviceConstraint((), f"{GPU}/clique", None),
        DeviceConstraint(("r1",), None, f"{GPU}/uuid"),
    )
    claim = resource_claim(
        "c", namespace="team-a", requests=[device_request("r0", device_class=GPU)]
    )
    claim["spec"]["devices"]["constraints"] = [{"matchAttribute": PARENT}]
    parsed = parse_dra_object(claim)
    assert isinstance(parsed, ResourceClaim)
    assert parsed.constraints == (DeviceConstraint((), PARENT, None),)


@pytest.mark.parametrize(
    ("constraint", "field", "says"),
    [
        ({"requests": ["r0"]}, "constraints[0]", "exactly one of matchAttribute"),
        (
            {"matchAttribute": PARENT, "distinctAttribute": PARENT},
            "constraints[0]",
            "exactly one",
        ),
        ({"matchAttribute": "parent"}, "constraints[0].matchAttribute", "fully qualified"),
        ({"matchAttribute": "a b/c"}, "constraints[0].matchAttribute", "not a qualified name"),
        ({"requests": ["r9"], "matchAttribute": PARENT}, "requests[0]", "not a request"),
        ({"requests": ["r0", "r0"], "matchAttribute": PARENT}, "requests[1]", "duplicate"),
        ({"requests": "r0", "matchAttribute": PARENT}, "constraints[0].requests", "list"),
        ("oops", "constraints[0]", "must be an object"),
    ],
)
def test_malformed_constraints_are_named(constraint: Any, field: str, says: str) -> None:
    got = parse_dra_object(constrained(constraint))
    assert isinstance(got, ValidationError), got
    assert field in got.field and says in got.message, got


def test_a_subrequest_name_is_read_by_its_main_request() -> None:
    got = parse_dra_object(constrained({"requests": ["r0/small"], "matchAttribute": PARENT}))
    assert isinstance(got, ResourceClaimTemplate)
    assert got.constraints[0].requests == ("r0/small",)


def test_ingest_journals_taints_tolerations_and_constraints() -> None:
    """What the fold reads of them survives the journal's projection."""
    slice_ = tainted({"key": "k", "effect": "NoSchedule"})
    assert parse_dra_object(journal_object("ResourceSlice", slice_)) == parse_dra_object(slice_)
    template = constrained({"matchAttribute": PARENT})
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "k", "operator": "Exists"}
    ]
    journaled = parse_dra_object(journal_object("ResourceClaimTemplate", template))
    assert journaled == parse_dra_object(template)
    assert isinstance(journaled, ResourceClaimTemplate) and journaled.constraints
    claim = resource_claim(
        "c", namespace="team-a", requests=[device_request("r0", device_class=GPU)]
    )
    claim["spec"]["devices"]["constraints"] = [{"matchAttribute": PARENT}]
    claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [{"operator": "Exists"}]
    from_journal = parse_dra_object(journal_object("ResourceClaim", claim))
    assert isinstance(from_journal, ResourceClaim)
    assert from_journal == parse_dra_object(claim)
    assert from_journal.constraints and from_journal.requests[0].exactly == ExactDeviceRequest(
        GPU, tolerations=(DeviceToleration("", "Exists", "", ""),)
    )
