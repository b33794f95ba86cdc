"""Shared by the CRD tests (``test_crds.py``, ``test_crds_validation.py``): the
files, a live cluster handle that renames a run's objects, and assertions.

``apply_crds`` is also what other integration tests use to install the CRDs.
A run's objects carry a unique name prefix and a run label; ``open_cluster``
deletes them (and the run's namespace) at the end. The CRDs stay installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

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


@contextlib.asynccontextmanager
async def open_cluster(kubeconfig: str) -> AsyncIterator[Cluster]:
    """The CRDs installed and a fresh run (prefix, namespace), cleaned up on exit."""
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
