"""kuota's CRDs for Kueue's kinds, proven against the real kube-apiserver.

The CRDs in ``deploy/crds/`` serve ``kueue.x-k8s.io`` ``v1beta2`` (storage) and
``v1beta1`` with ``conversion: None`` and one union schema per kind (see
``docs/design/crds.md``). The tests here:

- offline: the YAML is what ``deploy/crds/generate.py`` writes, every schema is
  structural, both versions carry the same schema, and the samples parse;
- live (needs ``KUBECONFIG``; unset or unreachable is a FAILURE, never a skip):
  install the CRDs with server-side apply (idempotent) and wait for Established;
  accept the reference article's YAML unchanged; create every sample and read it
  back through both versions; accept v1beta1 field names at v1beta2; keep a
  LocalQueue's clusterQueue immutable.

``test_crds_validation.py`` holds the rejections of invalid objects and the
``/status`` subresource tests; the shared helpers are in ``crd_helpers.py``.
Every object a run creates carries a unique name prefix and a run label, and is
deleted at the end. The CRDs themselves stay installed (other tests need them).
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from crd_helpers import (
    CRD_DIR,
    GROUP,
    KINDS,
    VERSIONS,
    Cluster,
    apply_crds,
    assert_subset,
    cause_for,
    crd_documents,
    live,
    open_cluster,
    rejected,
    sample,
    sample_documents,
    without_version,
)
from kubernetes_asyncio import client

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
# test_actuator_service.py imports apply_crds from this module.


# --------------------------------------------------------------------------- files


def structural_problems(schema: dict[str, Any], path: str = "") -> list[str]:
    """What makes ``schema`` non-structural (or uses what we chose to avoid)."""
    where = path or "<root>"
    problems = []
    for forbidden in ("$ref", "oneOf", "not", "x-kubernetes-preserve-unknown-fields"):
        if forbidden in schema:
            problems.append(f"{where}: uses {forbidden}")
    if schema.get("x-kubernetes-int-or-string"):
        if "type" in schema:
            problems.append(f"{where}: int-or-string must not set type")
        if schema.get("anyOf") not in (None, [{"type": "integer"}, {"type": "string"}]):
            problems.append(f"{where}: int-or-string anyOf must be [integer, string]")
        return problems
    type_ = schema.get("type")
    if type_ is None:
        problems.append(f"{where}: no type")
    if "anyOf" in schema:
        problems.append(f"{where}: anyOf outside int-or-string")
    if ("properties" in schema or "additionalProperties" in schema) and type_ != "object":
        problems.append(f"{where}: properties on a non-object")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{where}: both properties and additionalProperties")
    if type_ == "array" and "items" not in schema:
        problems.append(f"{where}: array without items")
    if "items" in schema and type_ != "array":
        problems.append(f"{where}: items on a non-array")
    if schema.get("x-kubernetes-list-type") == "map":
        required = set(schema["items"].get("required", []))
        for key in schema.get("x-kubernetes-list-map-keys", []):
            if key not in required:
                problems.append(f"{where}: list-map key {key!r} is not required in items")
    for name, sub in schema.get("properties", {}).items():
        problems += structural_problems(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += structural_problems(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        problems += structural_problems(schema["items"], f"{path}[]")
    return problems


# --------------------------------------------------------------------------- offline


def test_generated_yaml_is_current() -> None:
    spec = importlib.util.spec_from_file_location("kuota_crd_generate", CRD_DIR / "generate.py")
    assert spec and spec.loader
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    stale = [p.name for p, text in generate.outputs().items() if p.read_text() != text]
    assert not stale, f"run deploy/crds/generate.py: stale {stale}"


def test_crds_are_structural_and_versions_share_one_schema() -> None:
    docs = crd_documents()
    assert sorted(d["spec"]["names"]["kind"] for d in docs) == sorted(KINDS)
    for doc in docs:
        spec = doc["spec"]
        assert spec["group"] == GROUP
        assert spec["conversion"] == {"strategy": "None"}
        versions = {v["name"]: v for v in spec["versions"]}
        assert list(versions) == list(VERSIONS)
        assert [n for n, v in versions.items() if v["storage"]] == ["v1beta2"]
        assert all(v["served"] for v in versions.values())
        schemas = [v["schema"]["openAPIV3Schema"] for v in versions.values()]
        assert schemas[0] == schemas[1], f"{spec['names']['kind']}: versions differ"
        assert structural_problems(schemas[0]) == []
        # With conversion None a stored object is returned as-is at either version,
        # so subresources and columns must agree too.
        for key in ("subresources", "additionalPrinterColumns"):
            assert versions["v1beta2"].get(key) == versions["v1beta1"].get(key)


def test_samples_use_served_kinds_and_versions() -> None:
    samples = sample_documents()
    seen = {(d["kind"], d["apiVersion"].split("/")[1]) for docs in samples.values() for d in docs}
    assert ("ClusterQueue", "v1beta1") in seen and ("ClusterQueue", "v1beta2") in seen
    assert {k for k, _ in seen} == set(KINDS)
    article = samples["article-004-team-alpha.yaml"]
    assert [d["kind"] for d in article] == ["ClusterQueue", "LocalQueue"]
    assert article[0]["spec"]["cohort"] == "gpu-pool"  # the article's spelling, kept


# --------------------------------------------------------------------------- live fixture


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(kubeconfig: str) -> AsyncIterator[Cluster]:
    async with open_cluster(kubeconfig) as c:
        yield c


# --------------------------------------------------------------------------- live tests


@live
async def test_crds_install_with_kueue_names(cluster: Cluster) -> None:
    await apply_crds(cluster.api)  # a second apply is a no-op
    ext = client.ApiextensionsV1Api(cluster.api)
    want_short = {
        "ClusterQueue": ["cq"],
        "LocalQueue": ["queue", "queues", "lq"],
        "ResourceFlavor": ["flavor", "flavors", "rf"],
        "Cohort": ["co"],
        "WorkloadPriorityClass": ["wpc"],
    }
    for kind in KINDS.values():
        crd = await ext.read_custom_resource_definition(f"{kind.plural}.{GROUP}")
        assert crd.status.accepted_names.kind == kind.kind
        assert crd.status.accepted_names.short_names == want_short[kind.kind]
        assert crd.spec.scope == ("Namespaced" if kind.namespaced else "Cluster")
        assert crd.status.stored_versions == ["v1beta2"]


@live
async def test_article_yaml_is_accepted_unchanged(cluster: Cluster) -> None:
    """The article's manifests, byte for byte in content, pass strict validation."""
    for file in ("article-004-resourceflavor.yaml", "article-004-team-alpha.yaml"):
        for doc in sample_documents()[file]:
            doc = copy.deepcopy(doc)
            if KINDS[doc["kind"]].namespaced:
                # team-alpha may not exist here; only the namespace differs.
                doc["metadata"]["namespace"] = cluster.namespace
            # Strict: an unknown field (e.g. `cohort` under v1beta2) would be an error.
            got = await cluster.create(doc, dry_run="All")
            assert_subset(doc["spec"], got["spec"])


@live
@pytest.mark.parametrize("file", sorted(sample_documents()))
async def test_sample_round_trips_through_both_versions(cluster: Cluster, file: str) -> None:
    for original in sample_documents()[file]:
        doc = cluster.renamed(original)
        created = await cluster.create(doc)
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
        assert_subset(body, created)
        reads = {v: await cluster.get(doc, v) for v in VERSIONS}
        for version, got in reads.items():
            assert got["apiVersion"] == f"{GROUP}/{version}"
            assert got["kind"] == doc["kind"]
            assert_subset(body, got)
        # conversion None: the same stored object, whichever version is asked for.
        assert without_version(reads["v1beta2"]) == without_version(reads["v1beta1"])


@live
async def test_defaults_match_kueue(cluster: Cluster) -> None:
    doc = cluster.renamed(sample("article-004-team-alpha.yaml", "ClusterQueue"))
    doc["metadata"]["name"] += "-defaults"
    spec = (await cluster.create(doc))["spec"]
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["stopPolicy"] == "None"
    assert spec["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "TryNextFlavor",
    }
    assert spec["preemption"] == {
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
        "borrowWithinCohort": {"policy": "Never"},
    }
    assert spec["cohort"] == f"{cluster.prefix}-gpu-pool"
    assert "cohortName" not in spec  # kept as written; readers treat them as synonyms


@live
async def test_v1beta2_accepts_v1beta1_field_names_and_values(cluster: Cluster) -> None:
    doc = cluster.renamed(sample("clusterqueue-v1beta1.yaml", "ClusterQueue"))
    doc["apiVersion"] = f"{GROUP}/v1beta2"
    doc["metadata"]["name"] += "-as-v1beta2"
    got = await cluster.create(doc)
    assert got["spec"]["flavorFungibility"]["whenCanBorrow"] == "Borrow"
    assert got["spec"]["cohort"] == f"{cluster.prefix}-gpu-pool"


@live
async def test_local_queue_cluster_queue_is_immutable(cluster: Cluster) -> None:
    doc = cluster.renamed(sample("article-004-team-alpha.yaml", "LocalQueue"))
    doc["metadata"]["name"] += "-immutable"
    await cluster.create(doc)
    causes = await rejected(cluster.patch(doc, {"spec": {"clusterQueue": "elsewhere"}}))
    cause_for(causes, "spec.clusterQueue", "field is immutable")
