"""The objects the end-to-end tests make again and again, labelled for their run.

``labelled`` puts the run's pipeline label on an object (ingest of that run
journals it; the harness deletes it afterwards). ``one_flavor_queue`` is the
smallest queue a test needs: a Namespace, a ResourceFlavor on the run's kwok
nodes, a ClusterQueue of that one flavor with ``quota`` of one resource, and
the LocalQueue ``lq`` of the namespace, all named ``name``.
"""

from __future__ import annotations

from typing import Any

from e2e_harness import KUEUE, NODE_POOL_LABEL, PIPELINE_LABEL, Run


def labelled(run: Run, obj: dict[str, Any]) -> dict[str, Any]:
    obj.setdefault("metadata", {}).setdefault("labels", {})[PIPELINE_LABEL] = run.id
    return obj


def one_flavor_queue(
    run: Run,
    name: str,
    resource: str,
    quota: int,
    *,
    preemption: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Namespace, flavor, ClusterQueue (``quota`` of ``resource``) and LocalQueue ``lq``."""
    api = f"{KUEUE[0]}/{KUEUE[1]}"
    quotas = [{"name": resource, "nominalQuota": quota}]
    cq_spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": [resource], "flavors": [{"name": name, "resources": quotas}]}
        ],
    }
    if preemption is not None:
        cq_spec["preemption"] = preemption
    objs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        {
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {"nodeLabels": {NODE_POOL_LABEL: run.id}},
        },
        {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": cq_spec},
        {
            "apiVersion": api,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": name},
            "spec": {"clusterQueue": name},
        },
    ]
    return [labelled(run, o) for o in objs]
