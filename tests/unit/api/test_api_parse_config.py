"""Kueue's Configuration: upstream v1beta1/v1beta2, its ConfigMap, the Red Hat operator's Kueue."""

from __future__ import annotations

from typing import Any

import pytest
from api_builders import configuration, kueue_operator

from kuota.api.parse import parse_object
from kuota.api.types import (
    AdmissionFairSharingConfig,
    CapacitySource,
    Configuration,
    CounterSource,
    DeviceClassMapping,
    FairSharingConfig,
    WaitForPodsReady,
)
from kuota.api.types import ValidationError as Invalid


def config(manifest: dict[str, Any]) -> Configuration:
    result = parse_object(manifest)
    assert isinstance(result, Configuration), result
    return result


WFPR = "waitForPodsReady"
WAIT_FOR_PODS_READY: list[tuple[str, dict[str, Any], WaitForPodsReady]] = [
    ("v1beta1-absent", configuration("v1beta1"), WaitForPodsReady()),
    ("v1beta2-absent-stays-off", configuration("v1beta2"), WaitForPodsReady()),
    (
        "v1beta1-needs-enable",
        configuration("v1beta1", **{WFPR: {"timeout": "10m"}}),
        WaitForPodsReady(enable=False, timeout_seconds=600, recovery_timeout_seconds=600),
    ),
    (
        "v1beta1-enable-defaults",
        configuration("v1beta1", **{WFPR: {"enable": True}}),
        WaitForPodsReady(
            enable=True, timeout_seconds=300, block_admission=True, recovery_timeout_seconds=300
        ),
    ),
    (
        "v1beta2-presence-enables",
        configuration("v1beta2", **{WFPR: {"timeout": "1h30m"}}),
        WaitForPodsReady(
            enable=True, timeout_seconds=5400, block_admission=False, recovery_timeout_seconds=5400
        ),
    ),
    (
        "v1beta2-empty-section",
        configuration("v1beta2", **{WFPR: {}}),
        WaitForPodsReady(enable=True, timeout_seconds=1800, recovery_timeout_seconds=1800),
    ),
    (
        "v1beta2-zero-timeout-defaults",
        configuration("v1beta2", **{WFPR: {"timeout": "0s"}}),
        WaitForPodsReady(enable=True, timeout_seconds=1800, recovery_timeout_seconds=1800),
    ),
    (
        "v1beta2-explicit-enable-false",
        configuration("v1beta2", **{WFPR: {"enable": False, "timeout": "5m"}}),
        WaitForPodsReady(enable=False, timeout_seconds=300, recovery_timeout_seconds=300),
    ),
    (
        "seconds-as-int",
        configuration("v1beta2", **{WFPR: {"timeout": 90}}),
        WaitForPodsReady(enable=True, timeout_seconds=90, recovery_timeout_seconds=90),
    ),
    (
        "subsecond-rounds-up",
        configuration("v1beta2", **{WFPR: {"timeout": "1500ms"}}),
        WaitForPodsReady(enable=True, timeout_seconds=2, recovery_timeout_seconds=2),
    ),
    (
        "everything",
        configuration(
            "v1beta1",
            **{
                WFPR: {
                    "enable": True,
                    "timeout": "10m",
                    "blockAdmission": False,
                    "recoveryTimeout": "0s",
                    "requeuingStrategy": {
                        "timestamp": "Creation",
                        "backoffLimitCount": 3,
                        "backoffBaseSeconds": 10,
                        "backoffMaxSeconds": 100,
                    },
                }
            },
        ),
        WaitForPodsReady(
            enable=True,
            timeout_seconds=600,
            block_admission=False,
            recovery_timeout_seconds=None,
            requeuing_timestamp="Creation",
            backoff_limit_count=3,
            backoff_base_seconds=10,
            backoff_max_seconds=100,
        ),
    ),
    (
        "recovery-explicit",
        configuration("v1beta2", **{WFPR: {"timeout": "5m", "recoveryTimeout": "1m"}}),
        WaitForPodsReady(enable=True, timeout_seconds=300, recovery_timeout_seconds=60),
    ),
]


@pytest.mark.parametrize(
    ("manifest", "want"),
    [c[1:] for c in WAIT_FOR_PODS_READY],
    ids=[c[0] for c in WAIT_FOR_PODS_READY],
)
def test_wait_for_pods_ready(manifest: dict[str, Any], want: WaitForPodsReady) -> None:
    assert config(manifest).wait_for_pods_ready == want


BOTH = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
FAIR_SHARING: list[tuple[str, dict[str, Any], FairSharingConfig]] = [
    ("absent", configuration(), FairSharingConfig(enable=False)),
    (
        "v1beta1-enable",
        configuration("v1beta1", fairSharing={"enable": True}),
        FairSharingConfig(True, BOTH),
    ),
    (
        "v1beta1-disabled",
        configuration("v1beta1", fairSharing={"enable": False}),
        FairSharingConfig(False, BOTH),
    ),
    ("v1beta2-presence", configuration("v1beta2", fairSharing={}), FairSharingConfig(True, BOTH)),
    (
        "v1beta2-one-strategy",
        configuration("v1beta2", fairSharing={"preemptionStrategies": ["LessThanInitialShare"]}),
        FairSharingConfig(True, ("LessThanInitialShare",)),
    ),
]


@pytest.mark.parametrize(
    ("manifest", "want"), [c[1:] for c in FAIR_SHARING], ids=[c[0] for c in FAIR_SHARING]
)
def test_fair_sharing(manifest: dict[str, Any], want: FairSharingConfig) -> None:
    assert config(manifest).fair_sharing == want


def test_admission_fair_sharing_and_excluded_prefixes() -> None:
    got = config(
        configuration(
            admissionFairSharing={
                "usageHalfLifeTime": "168h",
                "resourceWeights": {"nvidia.com/gpu": 2, "cpu": 0.5},
            },
            resources={"excludeResourcePrefixes": ["ephemeral-storage", "example.com/"]},
        )
    )
    assert got.admission_fair_sharing == AdmissionFairSharingConfig(
        usage_half_life_seconds=168 * 3600,
        usage_sampling_interval_seconds=300,
        resource_weights=(("cpu", 500), ("nvidia.com/gpu", 2000)),
    )
    assert got.exclude_resource_prefixes == ("ephemeral-storage", "example.com/")
    assert config(configuration()).admission_fair_sharing is None


def mappings(*entries: dict[str, Any]) -> dict[str, Any]:
    return configuration(resources={"deviceClassMappings": list(entries)})


def counter(
    name: str = "memory", driver: str | None = "gpu.nvidia.com", **extra: object
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **extra}
    if driver is not None:
        body["driver"] = driver
    return {"counter": body}


def capacity(
    name: str = "memory", driver: str | None = "gpu.nvidia.com", **extra: object
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **extra}
    if driver is not None:
        body["driver"] = driver
    return {"capacity": body}


def test_mappings_capacity_sources_in_both_shapes() -> None:
    """Kueue v0.19's ``{capacity: ...}`` and the article's ``type: Capacity`` read alike;
    a class may feed two mappings that charge different capacities."""
    selector = {"cel": {"expression": "device.allowMultipleAllocations"}}
    got = config(
        mappings(
            {
                "name": "gpu-memory",
                "deviceClassNames": ["mps.nvidia.com"],
                "sources": [capacity(deviceSelector=selector)],
            },
            {
                "name": "gpu-cores",
                "deviceClassNames": ["mps.nvidia.com"],
                "sources": [{"type": "Capacity", **capacity("gpu.nvidia.com/cores", driver=None)}],
            },
        )
    )
    assert got.device_class_mappings == (
        DeviceClassMapping(
            "gpu-memory",
            ("mps.nvidia.com",),
            capacity=CapacitySource(
                "memory", "gpu.nvidia.com", device_selector="device.allowMultipleAllocations"
            ),
        ),
        DeviceClassMapping(
            "gpu-cores", ("mps.nvidia.com",), capacity=CapacitySource("gpu.nvidia.com/cores")
        ),
    )


def test_mappings_devices_and_counters() -> None:
    got = config(
        mappings(
            {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
            {"name": "gpu-memory", "deviceClassNames": ["mig.nvidia.com"], "sources": [counter()]},
            {
                "name": "gpu-compute",
                "deviceClassNames": ["mig.nvidia.com"],
                "sources": [counter("compute", driver=None)],
            },
        )
    )
    assert got.device_class_mappings == (
        DeviceClassMapping("nvidia.com/gpu", ("gpu.nvidia.com",)),
        DeviceClassMapping(
            "gpu-memory", ("mig.nvidia.com",), CounterSource("memory", "gpu.nvidia.com")
        ),
        # One DeviceClass may feed two mappings that charge different counters.
        DeviceClassMapping("gpu-compute", ("mig.nvidia.com",), CounterSource("compute", None)),
    )


DCM = "resources.deviceClassMappings"
GPU = {"name": "gpu", "deviceClassNames": ["gpu.nvidia.com"]}
CONFIG_ERRORS: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "mapping-name",
        mappings({"name": "GPU memory", "deviceClassNames": ["a"]}),
        f"{DCM}[0].name",
        "qualified name",
    ),
    (
        "mapping-twice",
        mappings(GPU, {**GPU, "deviceClassNames": ["b"]}),
        f"{DCM}[1].name",
        "duplicate",
    ),
    ("no-device-classes", mappings({"name": "gpu"}), f"{DCM}[0].deviceClassNames", "at least one"),
    (
        "nine-device-classes",
        mappings({"name": "gpu", "deviceClassNames": [f"c{i}" for i in range(9)]}),
        f"{DCM}[0].deviceClassNames",
        "at most 8",
    ),
    (
        "class-twice-in-mapping",
        mappings({"name": "gpu", "deviceClassNames": ["a", "a"]}),
        f"{DCM}[0].deviceClassNames[1]",
        "duplicate",
    ),
    (
        "class-in-two-count-mappings",
        mappings(GPU, {"name": "gpu2", "deviceClassNames": ["gpu.nvidia.com"]}),
        f"{DCM}[1].deviceClassNames[0]",
        "already mapped to resource gpu",
    ),
    (
        "same-counter-twice",
        mappings(
            {**GPU, "sources": [counter()]},
            {"name": "m2", "deviceClassNames": ["gpu.nvidia.com"], "sources": [counter()]},
        ),
        f"{DCM}[1].deviceClassNames[0]",
        "counter 'memory'",
    ),
    (
        "counter-and-capacity-mixed",
        mappings({**GPU, "sources": [counter(), capacity()]}),
        f"{DCM}[0].sources[1]",
        "cannot be mixed",
    ),
    (
        "capacity-then-counter-mixed",
        mappings({**GPU, "sources": [capacity(), {"type": "Counter", **counter()}]}),
        f"{DCM}[0].sources[1]",
        "cannot be mixed",
    ),
    (
        "counter-and-capacity-in-one-source",
        mappings({**GPU, "sources": [{**counter(), **capacity()}]}),
        f"{DCM}[0].sources[0]",
        "exactly one of counter and capacity",
    ),
    (
        "class-with-counter-and-capacity-mappings",
        mappings(
            {**GPU, "sources": [counter()]},
            {"name": "m2", "deviceClassNames": ["gpu.nvidia.com"], "sources": [capacity()]},
        ),
        f"{DCM}[1].deviceClassNames[0]",
        "cannot be mixed for one device class",
    ),
    (
        "same-capacity-twice",
        mappings(
            {**GPU, "sources": [capacity()]},
            {"name": "m2", "deviceClassNames": ["gpu.nvidia.com"], "sources": [capacity()]},
        ),
        f"{DCM}[1].deviceClassNames[0]",
        "capacity 'memory'",
    ),
    (
        "two-capacities",
        mappings({**GPU, "sources": [capacity(), capacity("cores")]}),
        f"{DCM}[0].sources[1]",
        "at most one capacity source",
    ),
    (
        "capacity-name",
        mappings({**GPU, "sources": [capacity("GPU memory")]}),
        f"{DCM}[0].sources[0].capacity.name",
        "qualified name",
    ),
    (
        "capacity-selector",
        mappings({**GPU, "sources": [capacity(deviceSelector={"cel": {"expression": 5}})]}),
        f"{DCM}[0].sources[0].capacity.deviceSelector.cel.expression",
        "string",
    ),
    (
        "type-capacity-with-counter-body",
        mappings({**GPU, "sources": [{"type": "Capacity", **counter()}]}),
        f"{DCM}[0].sources[0].type",
        "does not match the counter field",
    ),
    (
        "type-capacity-without-body",
        mappings({**GPU, "sources": [{"type": "Capacity"}]}),
        f"{DCM}[0].sources[0].capacity",
        "required",
    ),
    (
        "operator-type-unknown",
        mappings({**GPU, "sources": [{"type": "TimeSlice", **counter()}]}),
        f"{DCM}[0].sources[0].type",
        "want Counter or Capacity",
    ),
    (
        "source-empty",
        mappings({**GPU, "sources": [{}]}),
        f"{DCM}[0].sources[0].counter",
        "required",
    ),
    (
        "two-counters",
        mappings({**GPU, "sources": [counter(), counter("compute")]}),
        f"{DCM}[0].sources[1]",
        "at most one",
    ),
    (
        "counter-name",
        mappings({**GPU, "sources": [counter("Memory")]}),
        f"{DCM}[0].sources[0].counter.name",
        "DNS-1123 label",
    ),
    (
        "counter-driver",
        mappings({**GPU, "sources": [counter(driver="GPU!")]}),
        f"{DCM}[0].sources[0].counter.driver",
        "DNS-1123",
    ),
    (
        "counter-selector",
        mappings({**GPU, "sources": [counter(deviceSelector={"cel": {"expression": 5}})]}),
        f"{DCM}[0].sources[0].counter.deviceSelector.cel.expression",
        "string",
    ),
    (
        "seventeen-mappings",
        mappings(*({"name": f"m{i}", "deviceClassNames": [f"c{i}"]} for i in range(17))),
        DCM,
        "at most 16",
    ),
    (
        "mappings-not-list",
        configuration(resources={"deviceClassMappings": {"name": "gpu"}}),
        DCM,
        "list",
    ),
    (
        "timeout-garbage",
        configuration(waitForPodsReady={"timeout": "5 minutes"}),
        "waitForPodsReady.timeout",
        "invalid duration",
    ),
    (
        "timeout-negative",
        configuration(waitForPodsReady={"timeout": "-5m"}),
        "waitForPodsReady.timeout",
        "negative",
    ),
    (
        "timeout-boolean",
        configuration(waitForPodsReady={"timeout": True}),
        "waitForPodsReady.timeout",
        "boolean",
    ),
    (
        "v1beta1-timeout-zero",
        configuration("v1beta1", waitForPodsReady={"enable": True, "timeout": "0s"}),
        "waitForPodsReady.timeout",
        "greater than 0",
    ),
    (
        "enable-string",
        configuration("v1beta1", waitForPodsReady={"enable": "yes"}),
        "waitForPodsReady.enable",
        "true or false",
    ),
    (
        "backoff-limit-negative",
        configuration(waitForPodsReady={"requeuingStrategy": {"backoffLimitCount": -1}}),
        "waitForPodsReady.requeuingStrategy.backoffLimitCount",
        "at least 0",
    ),
    (
        "requeue-timestamp",
        configuration(waitForPodsReady={"requeuingStrategy": {"timestamp": "Admission"}}),
        "waitForPodsReady.requeuingStrategy.timestamp",
        "unsupported",
    ),
    (
        "strategies-reordered",
        configuration(fairSharing={"preemptionStrategies": list(reversed(BOTH))}),
        "fairSharing.preemptionStrategies",
        "unsupported list",
    ),
    (
        "weight-as-string",
        configuration(admissionFairSharing={"resourceWeights": {"cpu": "1"}}),
        "admissionFairSharing.resourceWeights[cpu]",
        "must be a number",
    ),
    (
        "weight-negative",
        configuration(admissionFairSharing={"resourceWeights": {"cpu": -1}}),
        "admissionFairSharing.resourceWeights[cpu]",
        "negative",
    ),
    (
        "half-life-garbage",
        configuration(admissionFairSharing={"usageHalfLifeTime": "a week"}),
        "admissionFairSharing.usageHalfLifeTime",
        "invalid duration",
    ),
    (
        "prefix-not-string",
        configuration(resources={"excludeResourcePrefixes": [3]}),
        "resources.excludeResourcePrefixes[0]",
        "string",
    ),
    ("api-version", configuration("v1alpha1"), "apiVersion", "unsupported apiVersion"),
]


@pytest.mark.parametrize(
    ("manifest", "field", "fragment"),
    [c[1:] for c in CONFIG_ERRORS],
    ids=[c[0] for c in CONFIG_ERRORS],
)
def test_configuration_validation(manifest: dict[str, Any], field: str, fragment: str) -> None:
    result = parse_object(manifest)
    assert isinstance(result, Invalid), result
    assert result.ref.kind == "Configuration"
    assert (result.field, fragment in result.message) == (field, True), result.message


# --------------------------------------------------------------------------- kueue-manager-config


def config_map(text: object) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": text},
    }


def test_config_map_wraps_an_upstream_configuration() -> None:
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta1\n"
        "kind: Configuration\n"
        "waitForPodsReady:\n  enable: true\n  timeout: 2m\n"
        "resources:\n  deviceClassMappings:\n"
        "  - name: gpu\n    deviceClassNames: [gpu.nvidia.com]\n"
    )
    got = config(config_map(text))
    assert got.wait_for_pods_ready.timeout_seconds == 120
    assert got.wait_for_pods_ready.block_admission  # v1beta1 default
    assert got.device_class_mappings == (DeviceClassMapping("gpu", ("gpu.nvidia.com",)),)


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("waitForPodsReady: [", "data[controller_manager_config.yaml]", "not YAML"),
        ("just words", "data[controller_manager_config.yaml]", "mapping"),
        (
            "waitForPodsReady: {timeout: soon}",
            "data[controller_manager_config.yaml].waitForPodsReady.timeout",
            "invalid",
        ),
        (
            "apiVersion: v1\nkind: Configuration",
            "data[controller_manager_config.yaml].apiVersion",
            "unsupported",
        ),
    ],
)
def test_config_map_errors_name_the_key(text: str, field: str, fragment: str) -> None:
    result = parse_object(config_map(text))
    assert isinstance(result, Invalid)
    assert result.ref.namespace == "kueue-system"
    assert (result.field, fragment in result.message) == (field, True), result.message


def test_other_config_maps_are_not_ours() -> None:
    assert (
        parse_object(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
        )
        is None
    )


# --------------------------------------------------------------------------- Red Hat operator

GANG = "gangScheduling"
OPERATOR: list[tuple[str, dict[str, Any], WaitForPodsReady]] = [
    ("absent", {}, WaitForPodsReady()),
    ("None", {GANG: {"policy": "None"}}, WaitForPodsReady()),
    (
        "ByWorkloadDefaults",
        {GANG: {"policy": "ByWorkloadDefaults"}},
        WaitForPodsReady(enable=True, timeout_seconds=1800, recovery_timeout_seconds=1800),
    ),
    (
        "ByWorkload",
        {
            GANG: {
                "policy": "ByWorkload",
                "byWorkload": {
                    "admission": "Sequential",
                    "timeoutSeconds": 600,
                    "recoveryTimeoutSeconds": 0,
                    "requeuingStrategy": {
                        "timeReference": "Creation",
                        "retryLimit": 5,
                        "backoffBaseSeconds": 30,
                        "backoffMaxSeconds": 600,
                    },
                },
            }
        },
        WaitForPodsReady(
            enable=True,
            timeout_seconds=600,
            block_admission=True,
            recovery_timeout_seconds=None,
            requeuing_timestamp="Creation",
            backoff_limit_count=5,
            backoff_base_seconds=30,
            backoff_max_seconds=600,
        ),
    ),
    (
        "ByWorkload-parallel",
        {GANG: {"policy": "ByWorkload", "byWorkload": {"admission": "Parallel"}}},
        WaitForPodsReady(enable=True, timeout_seconds=1800, recovery_timeout_seconds=1800),
    ),
]


@pytest.mark.parametrize(
    ("spec_config", "want"), [c[1:] for c in OPERATOR], ids=[c[0] for c in OPERATOR]
)
def test_operator_gang_scheduling(spec_config: dict[str, Any], want: WaitForPodsReady) -> None:
    assert config(kueue_operator(spec_config)).wait_for_pods_ready == want


def test_operator_fair_sharing_and_admission_fair_sharing() -> None:
    got = config(
        kueue_operator(
            {
                "preemption": {"preemptionPolicy": "FairSharing"},
                "admissionFairSharing": {
                    "configuration": "Custom",
                    "custom": {
                        "usageHalfLifeTimeSeconds": 600,
                        "resourceWeights": [{"name": "nvidia.com/gpu", "weight": "0.5"}],
                    },
                },
            }
        )
    )
    assert got.fair_sharing == FairSharingConfig(True, BOTH)
    assert got.admission_fair_sharing == AdmissionFairSharingConfig(
        600, 300, (("nvidia.com/gpu", 500),)
    )
    default = config(kueue_operator({"admissionFairSharing": {"configuration": "Default"}}))
    assert default.admission_fair_sharing == AdmissionFairSharingConfig(
        usage_half_life_seconds=1800
    )
    assert not config(
        kueue_operator({"preemption": {"preemptionPolicy": "Classical"}})
    ).fair_sharing.enable


@pytest.mark.parametrize(
    ("spec_config", "field", "fragment"),
    [
        ({GANG: {"policy": "Sometimes"}}, "spec.config.gangScheduling.policy", "unsupported"),
        (
            {GANG: {"policy": "ByWorkload", "byWorkload": {"timeoutSeconds": 100000}}},
            "spec.config.gangScheduling.byWorkload.timeoutSeconds",
            "at most 86400",
        ),
        (
            {"preemption": {"preemptionPolicy": "Fair"}},
            "spec.config.preemption.preemptionPolicy",
            "unsupported",
        ),
        (
            {
                "admissionFairSharing": {
                    "configuration": "Custom",
                    "custom": {"resourceWeights": [{"name": "cpu", "weight": "lots"}]},
                }
            },
            "spec.config.admissionFairSharing.custom.resourceWeights[0].weight",
            "not a valid",
        ),
        (
            {
                "resources": {
                    "deviceClassMappings": [
                        {"name": "m", "deviceClassNames": ["a"], "sources": [{"type": "Counter"}]}
                    ]
                }
            },
            "spec.config.resources.deviceClassMappings[0].sources[0].counter",
            "required",
        ),
    ],
)
def test_operator_errors(spec_config: dict[str, Any], field: str, fragment: str) -> None:
    result = parse_object(kueue_operator(spec_config))
    assert isinstance(result, Invalid)
    assert result.ref.kind == "Kueue"
    assert (result.field, fragment in result.message) == (field, True), result.message
