"""The YAML of the two reference articles parses to exactly what the articles mean."""

from __future__ import annotations

from api_builders import REFERENCES, load_reference

from kuota.api.dra import ResourceClaim, parse_dra_object
from kuota.api.parse import parse_object
from kuota.api.types import (
    ClusterQueue,
    Configuration,
    CounterSource,
    DeviceClassMapping,
    FlavorQuotas,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Toleration,
    ValidationError,
    WaitForPodsReady,
)


def test_000_whole_gpu_mapping_charges_device_counts() -> None:
    (kueue,) = load_reference("000-kueue-whole-gpu-device-class-mapping.yaml")
    assert parse_object(kueue) == Configuration(
        device_class_mappings=(
            DeviceClassMapping(
                name="nvidia-gpu", device_class_names=("gpu.nvidia.com",), counter=None
            ),
        )
    )


def test_000_counter_mapping_charges_gpu_memory() -> None:
    (kueue,) = load_reference("000-kueue-gpu-memory-counter-device-class-mapping.yaml")
    config = parse_object(kueue)
    assert isinstance(config, Configuration)
    assert config.device_class_mappings == (
        DeviceClassMapping(
            name="gpu-memory",
            device_class_names=("gpu.nvidia.com", "mig.nvidia.com"),
            counter=CounterSource(name="memory", driver="gpu.nvidia.com"),
        ),
    )
    # The article's Kueue object says nothing about gang scheduling or fair sharing.
    assert config.wait_for_pods_ready == WaitForPodsReady()
    assert not config.fair_sharing.enable


def test_000_upstream_counter_shape_reads_the_same_as_the_articles() -> None:
    (kueue,) = load_reference("000-kueue-gpu-memory-counter-device-class-mapping.yaml")
    upstream = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {
            "deviceClassMappings": [
                {
                    "name": "gpu-memory",
                    "deviceClassNames": ["gpu.nvidia.com", "mig.nvidia.com"],
                    "sources": [
                        {
                            "counter": {
                                "name": "memory",
                                "driver": "gpu.nvidia.com",
                                "deviceSelector": {"cel": {"expression": "true"}},
                            }
                        }
                    ],
                }
            ]
        },
    }
    assert parse_object(upstream) == parse_object(kueue)


def test_000_resource_claim_templates_belong_to_the_dra_module() -> None:
    for name in (
        "000-resourceclaimtemplate-single-gpu.yaml",
        "000-resourceclaimtemplate-gpu-partition.yaml",
    ):
        (template,) = load_reference(name)
        assert template["kind"] == "ResourceClaimTemplate"
        assert parse_object(template) is None


def test_004_resource_flavor() -> None:
    (rf,) = load_reference("004-resourceflavor-nvidia-h100.yaml")
    assert parse_object(rf) == ResourceFlavor(
        name="nvidia-h100",
        node_labels=(("cloud.google.com/gke-accelerator", "nvidia-tesla-h100"),),
        tolerations=(Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),),
    )


def test_004_cluster_queue_borrows_four_gpus_from_its_cohort() -> None:
    cq_doc, _ = load_reference("004-clusterqueue-and-localqueue-team-alpha.yaml")
    cq = parse_object(cq_doc)
    assert cq == ClusterQueue(
        name="team-alpha-cq",
        cohort="gpu-pool",  # written `cohort:` under v1beta2, as the article does
        namespace_selector=None,  # absent: Kueue's nothing-selector
        resource_groups=(
            ResourceGroup(
                covered_resources=("nvidia.com/gpu",),
                flavors=(
                    FlavorQuotas(
                        name="nvidia-h100",
                        resources=(
                            ResourceQuota(
                                name="nvidia.com/gpu", nominal_quota=8000, borrowing_limit=4000
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )


def test_004_local_queue() -> None:
    _, lq = load_reference("004-clusterqueue-and-localqueue-team-alpha.yaml")
    assert parse_object(lq) == LocalQueue(
        namespace="team-alpha", name="training-queue", cluster_queue="team-alpha-cq"
    )


def test_004_resource_claim_belongs_to_the_dra_module() -> None:
    (claim,) = load_reference("004-resourceclaim-h100-mig-slice.yaml")
    assert claim["spec"]["devices"]["requests"][0]["deviceClassName"] == "mig-3g.40gb"
    assert parse_object(claim) is None
    read = parse_dra_object(claim)
    assert isinstance(read, ResourceClaim) and read.allocated == ()
    assert read.requests[0].exactly is not None
    assert read.requests[0].exactly.device_class_name == "mig-3g.40gb"


def test_every_reference_fixture_parses_without_error() -> None:
    files = sorted(REFERENCES.glob("*.yaml"))
    assert len(files) == 7
    for path in files:
        for doc in load_reference(path.name):
            assert not isinstance(parse_object(doc), ValidationError), path.name
