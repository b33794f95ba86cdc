"""kuota's CRDs for Kueue's kinds, proven against the real kube-apiserver.

The CRDs in ``deploy/crds/`` serve ``kueue.x-k8s.io`` ``v1beta2`` (storage) and
``v1beta1`` with ``conversion: None`` and one union schema per kind (see
``docs/design/crds.md``). The tests here:

- offline: the YAML is what ``deploy/crds/generate.py`` writes, every schema is
  structural, both versions carry the same schema, and the samples parse;
- live (needs ``KUBECONFIG``; unset or unreachable is a FAILURE, never a skip):
  install the CRDs with server-side apply (idempotent) and wait for Established;
  accept the reference article's YAML unchanged; create every sample and read it
  back through both versions; reject invalid objects with a field error; and
  write ClusterQueue / LocalQueue status through the ``/status`` subresource.

Every object a run creates carries a unique name prefix and a run label, and is
deleted at the end. The CRDs themselves stay installed (other tests need them).
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
live = pytest.mark.asyncio(loop_scope="module")

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "deploy" / "crds"
SAMPLE_DIR = REPO / "deploy" / "samples"
GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
RUN_LABEL = "kuota.dev/test-run"
FIELD_MANAGER = "kuota-test-crds"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class Kind:
    kind: str
    plural: str
    namespaced: bool


KINDS = {
    k.kind: k
    for k in (
        Kind("ClusterQueue", "clusterqueues", False),
        Kind("LocalQueue", "localqueues", True),
        Kind("ResourceFlavor", "resourceflavors", False),
        Kind("Cohort", "cohorts", False),
        Kind("WorkloadPriorityClass", "workloadpriorityclasses", False),
    )
}


# --------------------------------------------------------------------------- files


def crd_documents() -> list[dict[str, Any]]:
    """The CRDs, in the order ``kustomization.yaml`` lists them."""
    kustomization = yaml.safe_load((CRD_DIR / "kustomization.yaml").read_text())
    return [yaml.safe_load((CRD_DIR / name).read_text()) for name in kustomization["resources"]]


def sample_documents() -> dict[str, list[dict[str, Any]]]:
    """Sample file name -> its Kueue documents (Namespace documents left out)."""
    out = {}
    for path in sorted(SAMPLE_DIR.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        out[path.name] = [d for d in docs if d["apiVersion"].startswith(GROUP + "/")]
    return {k: v for k, v in out.items() if v}


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


# --------------------------------------------------------------------------- live fixtures


@dataclass
class Cluster:
    api: client.ApiClient
    objects: client.CustomObjectsApi
    prefix: str  # unique per run; every object name starts with it
    namespace: str  # the run's namespace for LocalQueues

    def renamed(self, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` with this run's names: its own, its namespace, and what it references."""
        d = copy.deepcopy(doc)
        meta = d["metadata"]
        meta["name"] = f"{self.prefix}-{meta['name']}"
        meta.setdefault("labels", {})[RUN_LABEL] = self.prefix
        if KINDS[d["kind"]].namespaced:
            meta["namespace"] = self.namespace
        spec = d.get("spec") or {}
        for key in ("clusterQueue", "cohort", "cohortName", "parent", "parentName"):
            if key in spec:
                spec[key] = f"{self.prefix}-{spec[key]}"
        for group in spec.get("resourceGroups", []):
            for flavor in group["flavors"]:
                flavor["name"] = f"{self.prefix}-{flavor['name']}"
        return d

    def _where(self, doc: dict[str, Any], version: str | None) -> dict[str, Any]:
        kind = KINDS[doc["kind"]]
        where = {
            "group": GROUP,
            "version": version or doc["apiVersion"].split("/")[1],
            "plural": kind.plural,
        }
        if kind.namespaced:
            where["namespace"] = doc["metadata"].get("namespace", self.namespace)
        return where

    async def create(self, doc: dict[str, Any], **kw: Any) -> dict[str, Any]:
        where = self._where(doc, None)
        kw.setdefault("field_validation", "Strict")
        if "namespace" in where:
            return await self.objects.create_namespaced_custom_object(body=doc, **where, **kw)
        return await self.objects.create_cluster_custom_object(body=doc, **where, **kw)

    async def get(self, doc: dict[str, Any], version: str) -> dict[str, Any]:
        where = self._where(doc, version)
        name = doc["metadata"]["name"]
        if "namespace" in where:
            return await self.objects.get_namespaced_custom_object(name=name, **where)
        return await self.objects.get_cluster_custom_object(name=name, **where)

    async def patch(
        self, doc: dict[str, Any], body: dict[str, Any], *, status: bool = False
    ) -> dict[str, Any]:
        where = self._where(doc, None)
        name = doc["metadata"]["name"]
        kw = {"name": name, "body": body, "_content_type": MERGE_PATCH, **where}
        if "namespace" in where:
            fn = (
                self.objects.patch_namespaced_custom_object_status
                if status
                else self.objects.patch_namespaced_custom_object
            )
        else:
            fn = (
                self.objects.patch_cluster_custom_object_status
                if status
                else self.objects.patch_cluster_custom_object
            )
        return await fn(**kw)

    async def table(self, doc: dict[str, Any], version: str) -> dict[str, Any]:
        """The object as a meta.k8s.io Table: what ``kubectl get`` prints."""
        where = self._where(doc, version)
        path = "/apis/{group}/{version}/{plural}/{name}"
        if "namespace" in where:
            path = "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"
        return await self.api.call_api(
            path,
            "GET",
            path_params={**where, "name": doc["metadata"]["name"]},
            header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
            response_types_map={200: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )


async def apply_crds(api: client.ApiClient) -> None:
    """Server-side apply every CRD (idempotent) and wait until each is Established."""
    ext = client.ApiextensionsV1Api(api)
    changed = False
    for doc in crd_documents():
        name = doc["metadata"]["name"]
        try:
            before = (await ext.read_custom_resource_definition(name)).metadata.generation
        except ApiException as e:
            if e.status != 404:
                raise
            before = None
        after = await ext.patch_custom_resource_definition(
            name,
            doc,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        changed |= after.metadata.generation != before
    deadline = time.monotonic() + 60
    for doc in crd_documents():
        name = doc["metadata"]["name"]
        while True:
            crd = await ext.read_custom_resource_definition(name)
            conds = {c.type: c.status for c in (crd.status.conditions or [])}
            if conds.get("Established") == "True" and conds.get("NamesAccepted") == "True":
                break
            assert time.monotonic() < deadline, f"{name} not Established: {conds}"
            await asyncio.sleep(0.2)
    if changed:
        # The apiserver swaps a changed CRD's request handler asynchronously, after
        # Established; give it a moment so the new schema is the one that answers.
        await asyncio.sleep(3)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(kubeconfig: str) -> AsyncIterator[Cluster]:
    api = await config.new_client_from_config(config_file=kubeconfig)
    try:
        await apply_crds(api)
        prefix = f"kt{uuid.uuid4().hex[:8]}"
        namespace = f"{prefix}-team-alpha"
        core = client.CoreV1Api(api)
        await core.create_namespace(
            {"metadata": {"name": namespace, "labels": {RUN_LABEL: prefix}}}
        )
        c = Cluster(api, client.CustomObjectsApi(api), prefix, namespace)
        try:
            yield c
        finally:
            await delete_run(c)
            await core.delete_namespace(namespace)
    finally:
        await api.close()


async def delete_run(c: Cluster) -> None:
    """Delete every object labelled with this run, whichever test made it."""
    selector = f"{RUN_LABEL}={c.prefix}"
    for kind in KINDS.values():
        where = {"group": GROUP, "version": "v1beta2", "plural": kind.plural}
        if kind.namespaced:
            where["namespace"] = c.namespace
            listed = await c.objects.list_namespaced_custom_object(label_selector=selector, **where)
        else:
            listed = await c.objects.list_cluster_custom_object(label_selector=selector, **where)
        for item in listed["items"]:
            name = item["metadata"]["name"]
            try:
                if kind.namespaced:
                    await c.objects.delete_namespaced_custom_object(name=name, **where)
                else:
                    await c.objects.delete_cluster_custom_object(name=name, **where)
            except ApiException as e:
                if e.status != 404:
                    raise


# --------------------------------------------------------------------------- helpers


def assert_subset(sent: Any, got: Any, path: str = "") -> None:
    """Every field that was sent came back unchanged (the server may add defaults)."""
    if isinstance(sent, dict):
        assert isinstance(got, dict), f"{path}: {got!r} is not an object"
        for key, value in sent.items():
            assert key in got, f"{path}.{key}: dropped by the server"
            assert_subset(value, got[key], f"{path}.{key}")
    elif isinstance(sent, list):
        assert isinstance(got, list) and len(got) == len(sent), f"{path}: {got!r}"
        for i, (s, g) in enumerate(zip(sent, got, strict=True)):
            assert_subset(s, g, f"{path}[{i}]")
    else:
        assert sent == got, f"{path}: sent {sent!r}, got {got!r}"


async def rejected(call: Any) -> list[dict[str, Any]]:
    """Await ``call``; it must fail as Invalid (422). Returns the field causes."""
    with pytest.raises(ApiException) as info:
        await call
    assert info.value.status == 422, info.value.body
    body = json.loads(info.value.body)
    assert body["reason"] == "Invalid", body
    return list(body["details"].get("causes", []))


def cause_for(causes: list[dict[str, Any]], field: str, contains: str) -> dict[str, Any]:
    for cause in causes:
        if cause.get("field") == field and contains in cause.get("message", ""):
            return cause
    raise AssertionError(f"no cause on {field!r} containing {contains!r} in {causes}")


def without_version(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "apiVersion"}


def sample(file: str, kind: str) -> dict[str, Any]:
    return next(d for d in sample_documents()[file] if d["kind"] == kind)


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
