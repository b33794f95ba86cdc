"""Small fluent builders for the manifests the api tests feed to the parser.

A garbage-planting DSL, not a second set of manifests: the plain objects
start from :mod:`builders.manifests` (``Manifest.of``).

Each builder starts from a valid object and changes one thing at a time;
``set("spec.resourceGroups[0].flavors", "oops")`` plants any value (garbage
included) at a path, creating mappings on the way.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Self

import yaml
from builders import manifests

REFERENCES = Path(__file__).resolve().parents[2] / "fixtures" / "references"

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def load_reference(name: str) -> list[dict[str, Any]]:
    """The YAML documents of one file in ``tests/fixtures/references``."""
    with (REFERENCES / name).open() as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


class Manifest:
    def __init__(self, api_version: str, kind: str, name: str, namespace: str | None = None):
        meta: dict[str, Any] = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        self.m: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}

    @classmethod
    def of(cls, m: dict[str, Any]) -> Manifest:
        """A builder over a manifest of :mod:`builders.manifests`."""
        out = cls.__new__(cls)
        out.m = m
        return out

    def set(self, path: str, value: object) -> Self:
        """Put ``value`` at a dotted path (``a.b[0].c``); list items must exist."""
        steps = [(k, int(i) if i else None) for k, i in _STEP.findall(path)]
        node: Any = self.m
        for n, (key, idx) in enumerate(steps):
            last = n == len(steps) - 1
            if idx is not None:
                if last:
                    node[idx] = value
                else:
                    node = node[idx]
            elif last:
                node[key] = value
            else:
                node = node.setdefault(key, {})
        return self

    def drop(self, path: str) -> Self:
        parent, _, key = path.rpartition(".")
        node: Any = self.m
        for k, i in _STEP.findall(parent):
            node = node[int(i)] if i else node[k]
        del node[key]
        return self

    def label(self, key: str, value: str) -> Self:
        self.m["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: object) -> Self:
        self.m["metadata"].setdefault("annotations", {})[key] = value
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.m)


# --------------------------------------------------------------------------- queue kinds


def quota(
    resource: str, nominal: object, *, borrowing: object = None, lending: object = None
) -> dict[str, Any]:
    q: dict[str, Any] = {"name": resource, "nominalQuota": nominal}
    if borrowing is not None:
        q["borrowingLimit"] = borrowing
    if lending is not None:
        q["lendingLimit"] = lending
    return q


def flavor(name: str, *quotas: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "resources": list(quotas)}


def group(covered: list[str], *flavors: dict[str, Any]) -> dict[str, Any]:
    return {"coveredResources": covered, "flavors": list(flavors)}


class ClusterQueueBuilder(Manifest):
    def __init__(self, name: str = "team-a-cq", *, version: str = "v1beta2"):
        super().__init__(f"kueue.x-k8s.io/{version}", "ClusterQueue", name)
        self.m["spec"] = {}

    def cohort(self, name: str, *, key: str = "cohortName") -> Self:
        return self.set(f"spec.{key}", name)

    def group(self, covered: list[str], *flavors: dict[str, Any]) -> Self:
        self.m["spec"].setdefault("resourceGroups", []).append(group(covered, *flavors))
        return self

    def gpus(self, nominal: object = 8, **limits: object) -> Self:
        """One group: nvidia.com/gpu from flavor h100."""
        return self.group(
            ["nvidia.com/gpu"], flavor("h100", quota("nvidia.com/gpu", nominal, **limits))
        )


class CohortBuilder(Manifest):
    def __init__(self, name: str = "gpu-pool", *, version: str = "v1beta2"):
        super().__init__(f"kueue.x-k8s.io/{version}", "Cohort", name)
        self.m["spec"] = {}

    def parent(self, name: str, *, key: str = "parentName") -> Self:
        return self.set(f"spec.{key}", name)

    def group(self, covered: list[str], *flavors: dict[str, Any]) -> Self:
        self.m["spec"].setdefault("resourceGroups", []).append(group(covered, *flavors))
        return self


def local_queue(
    name: str = "training-queue", namespace: str = "team-a", cq: str = "team-a-cq"
) -> Manifest:
    return Manifest.of(manifests.local_queue(name, namespace=namespace, cluster_queue=cq))


def resource_flavor(name: str = "h100") -> Manifest:
    return Manifest.of(manifests.flavor(name))


def priority_class(name: str = "high", value: Any = 1000) -> Manifest:
    """``value`` may be garbage (any object)."""
    return Manifest.of(manifests.priority_class(name, value=value))


def namespace(name: str = "team-a") -> Manifest:
    return Manifest.of(manifests.namespace(name))


# --------------------------------------------------------------------------- Job


class JobBuilder(Manifest):
    def __init__(
        self, name: str = "train", namespace: str = "team-a", queue: str | None = "training-queue"
    ):
        super().__init__("batch/v1", "Job", name, namespace)
        if queue is not None:
            self.label("kueue.x-k8s.io/queue-name", queue)
        self.m["spec"] = {"template": {"spec": {"containers": []}}}
        self._pod: dict[str, Any] = self.m["spec"]["template"]["spec"]

    def parallelism(self, n: object) -> Self:
        return self.set("spec.parallelism", n)

    def completions(self, n: object) -> Self:
        return self.set("spec.completions", n)

    def container(
        self, requests: dict[str, object] | None = None, limits: dict[str, object] | None = None
    ) -> Self:
        self._pod["containers"].append(
            _container(f"c{len(self._pod['containers'])}", requests, limits)
        )
        return self

    def init_container(
        self,
        requests: dict[str, object] | None = None,
        limits: dict[str, object] | None = None,
        *,
        sidecar: bool = False,
    ) -> Self:
        c = _container(f"init{len(self._pod.get('initContainers', []))}", requests, limits)
        if sidecar:
            c["restartPolicy"] = "Always"
        self._pod.setdefault("initContainers", []).append(c)
        return self

    def overhead(self, amounts: dict[str, object]) -> Self:
        self._pod["overhead"] = amounts
        return self

    def claim(self, name: str, *, template: str | None = None, claim: str | None = None) -> Self:
        entry: dict[str, Any] = {"name": name}
        if template is not None:
            entry["resourceClaimTemplateName"] = template
        if claim is not None:
            entry["resourceClaimName"] = claim
        self._pod.setdefault("resourceClaims", []).append(entry)
        return self

    def node_selector(self, labels: dict[str, str]) -> Self:
        self._pod["nodeSelector"] = labels
        return self

    def affinity_term(self, *expressions: tuple[str, str, list[str]]) -> Self:
        required = (
            self._pod.setdefault("affinity", {})
            .setdefault("nodeAffinity", {})
            .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []})
        )
        required["nodeSelectorTerms"].append(
            {
                "matchExpressions": [
                    {"key": k, "operator": op, "values": v} for k, op, v in expressions
                ]
            }
        )
        return self

    def toleration(self, **fields: object) -> Self:
        self._pod.setdefault("tolerations", []).append(dict(fields))
        return self


def _container(
    name: str, requests: dict[str, object] | None, limits: dict[str, object] | None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "busybox", "resources": resources}


# --------------------------------------------------------------------------- Configuration


def configuration(version: str = "v1beta2", **fields: object) -> dict[str, Any]:
    return manifests.configuration(api_version=f"config.kueue.x-k8s.io/{version}", **fields)


def kueue_operator(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.openshift.io/v1",
        "kind": "Kueue",
        "metadata": {"name": "cluster"},
        "spec": {"config": config},
    }
