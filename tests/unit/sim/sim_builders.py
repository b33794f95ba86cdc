"""Small fluent builders for scenario manifests in the sim tests."""

from __future__ import annotations

import copy
from typing import Any


class ManifestBuilder:
    def __init__(self, kind: str, name: str, namespace: str | None = None) -> None:
        metadata: dict[str, Any] = {"name": name}
        if namespace is not None:
            metadata["namespace"] = namespace
        self._m: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": metadata}

    def annotate(self, key: str, value: object) -> ManifestBuilder:
        self._m["metadata"].setdefault("annotations", {})[key] = value
        return self

    def submit_at(self, value: object) -> ManifestBuilder:
        return self.annotate("kuota.dev/submit-at", value)

    def run_for(self, value: object) -> ManifestBuilder:
        return self.annotate("kuota.dev/run-for", value)

    def ready_after(self, value: object) -> ManifestBuilder:
        return self.annotate("kuota.dev/ready-after", value)

    def delete_at(self, value: object) -> ManifestBuilder:
        return self.annotate("kuota.dev/delete-at", value)

    def spec(self, **fields: Any) -> ManifestBuilder:
        self._m.setdefault("spec", {}).update(fields)
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self._m)


def job(name: str, namespace: str | None = "team") -> ManifestBuilder:
    b = ManifestBuilder("Job", name, namespace)
    b._m["apiVersion"] = "batch/v1"
    return b


def obj(kind: str, name: str, namespace: str | None = None) -> ManifestBuilder:
    return ManifestBuilder(kind, name, namespace)
