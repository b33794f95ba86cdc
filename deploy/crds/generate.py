#!/usr/bin/env python3
"""Generate kuota's CRDs for Kueue's kinds: ``deploy/crds/kueue.x-k8s.io_*.yaml``.

Theory of operation
-------------------
Users keep their Kueue manifests, so the five kinds kuota reads (ClusterQueue,
LocalQueue, ResourceFlavor, Cohort, WorkloadPriorityClass) are served under
Kueue's group ``kueue.x-k8s.io`` with Kueue's kind, plural, short names and field
names, at ``v1beta2`` (storage) and ``v1beta1`` (served).

kuota runs no conversion webhook (``conversion: None``): the apiserver stores
whatever body it was given and only rewrites ``apiVersion`` on the way out. Every
version must therefore accept every stored object, so each kind has ONE schema,
the union of the v1beta1 and v1beta2 field names (``cohort`` and ``cohortName``,
``parent`` and ``parentName``, ``flavorUsage`` and ``flavorsUsage``, the
``flavorFungibility`` values of both versions ...), and both versions carry it.
The rationale and the list of checks are in ``docs/design/crds.md``.

The schemas are written from Kueue's Go types (``apis/kueue/v1beta{1,2}``), one
builder per Kueue type, so a sub-schema used in several places (resource groups,
flavor usage, conditions) is written once: ``crd_openapi.py`` holds the generic
OpenAPI builders and the Kubernetes types, ``crd_kueue.py`` Kueue's types and the
five kinds; this script wraps the kinds in CRDs and writes the YAML. Run::

    .venv/bin/python deploy/crds/generate.py          # rewrite the YAML
    .venv/bin/python deploy/crds/generate.py --check  # exit 1 if the YAML is stale

``tests/integration/test_crds.py`` runs the check and installs the YAML into a
real kube-apiserver.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
# The schema modules sit beside this script, which is also loaded by file path
# (tests/integration/test_crds.py), so their folder may not be on sys.path yet.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from crd_kueue import (  # noqa: E402
    cluster_queue_schema,
    cohort_schema,
    local_queue_schema,
    resource_flavor_schema,
    workload_priority_class_schema,
)
from crd_openapi import Schema  # noqa: E402

GROUP = "kueue.x-k8s.io"
STORAGE_VERSION = "v1beta2"
SERVED_VERSIONS = ("v1beta2", "v1beta1")


# --------------------------------------------------------------------------- CRDs


def column(name: str, json_path: str, type_: str, description: str, priority: int = 0) -> Schema:
    col: Schema = {"name": name, "type": type_, "jsonPath": json_path, "description": description}
    if priority:
        col["priority"] = priority
    return col


AGE = column("Age", ".metadata.creationTimestamp", "date", "Time since creation")
PENDING = column(
    "Pending Workloads", ".status.pendingWorkloads", "integer", "Number of pending workloads"
)


def admitted_column(priority: int = 0) -> Schema:
    """ClusterQueue shows it with ``-o wide`` only (priority 1), LocalQueue always."""
    return column(
        "Admitted Workloads",
        ".status.admittedWorkloads",
        "integer",
        "Number of admitted workloads that haven't finished yet",
        priority,
    )


def crd(
    *,
    kind: str,
    plural: str,
    scope: str,
    short_names: list[str],
    schema: Schema,
    status: bool = False,
    columns: list[Schema] | None = None,
) -> Schema:
    versions = []
    for version in SERVED_VERSIONS:
        v: Schema = {"name": version, "served": True, "storage": version == STORAGE_VERSION}
        if version != STORAGE_VERSION:
            v["deprecated"] = True
            v["deprecationWarning"] = (
                f"{GROUP}/{version} {kind} is deprecated; use {GROUP}/{STORAGE_VERSION}"
            )
        # Each version gets its own copy: identical content, no YAML anchors.
        v["schema"] = {"openAPIV3Schema": copy.deepcopy(schema)}
        if status:
            v["subresources"] = {"status": {}}
        if columns:
            v["additionalPrinterColumns"] = copy.deepcopy(columns)
        versions.append(v)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "kuota"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
            },
            "scope": scope,
            "conversion": {"strategy": "None"},
            "versions": versions,
        },
    }


def all_crds() -> dict[str, Schema]:
    """File name -> CRD, in the order kustomization.yaml lists them."""
    crds = [
        crd(
            kind="ClusterQueue",
            plural="clusterqueues",
            scope="Cluster",
            short_names=["cq"],
            schema=cluster_queue_schema(),
            status=True,
            columns=[
                # A union path: whichever spelling the object uses (the first
                # present wins), so `cohort:` written under v1beta2 still shows.
                column(
                    "Cohort",
                    ".spec['cohortName','cohort']",
                    "string",
                    "Cohort that this ClusterQueue belongs to",
                ),
                column(
                    "Strategy",
                    ".spec.queueingStrategy",
                    "string",
                    "The queueing strategy used to prioritize workloads",
                    priority=1,
                ),
                PENDING,
                admitted_column(priority=1),
                AGE,
            ],
        ),
        crd(
            kind="LocalQueue",
            plural="localqueues",
            scope="Namespaced",
            short_names=["queue", "queues", "lq"],
            schema=local_queue_schema(),
            status=True,
            columns=[
                column("ClusterQueue", ".spec.clusterQueue", "string", "Backing ClusterQueue"),
                PENDING,
                admitted_column(),
                AGE,
            ],
        ),
        crd(
            kind="ResourceFlavor",
            plural="resourceflavors",
            scope="Cluster",
            short_names=["flavor", "flavors", "rf"],
            schema=resource_flavor_schema(),
        ),
        crd(
            kind="Cohort",
            plural="cohorts",
            scope="Cluster",
            short_names=["co"],
            schema=cohort_schema(),
            status=True,
            columns=[
                column("Parent", ".spec['parentName','parent']", "string", "Parent Cohort"),
                AGE,
            ],
        ),
        crd(
            kind="WorkloadPriorityClass",
            plural="workloadpriorityclasses",
            scope="Cluster",
            short_names=["wpc"],
            schema=workload_priority_class_schema(),
            columns=[
                column("Value", ".value", "integer", "Value of workloadPriorityClass's Priority"),
                AGE,
            ],
        ),
    ]
    return {f"{GROUP}_{c['spec']['names']['plural']}.yaml": c for c in crds}


HEADER = (
    "# Generated by deploy/crds/generate.py from Kueue's API types; do not edit by hand.\n"
    "# One schema per kind serves v1beta2 (storage) and v1beta1 (conversion: None):\n"
    "# see docs/design/crds.md.\n"
)


def render(doc: Schema) -> str:
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)
    return HEADER + body


def render_kustomization(files: list[str]) -> str:
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": files,
    }
    return HEADER + yaml.safe_dump(doc, sort_keys=False)


def outputs() -> dict[Path, str]:
    crds = all_crds()
    out = {HERE / name: render(doc) for name, doc in crds.items()}
    out[HERE / "kustomization.yaml"] = render_kustomization(list(crds))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the YAML is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        stale.append(path.name)
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        print("stale: " + ", ".join(stale) + " (run deploy/crds/generate.py)", file=sys.stderr)
        return 1
    if not args.check:
        print(f"wrote {len(stale)} file(s)" if stale else "up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
