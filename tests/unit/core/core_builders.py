"""Fluent builders of manifests and a small driver that feeds them to a Fold.

``cq("team-a").cohort("pool").flavor("h100", gpu=(8, 4))`` is a ClusterQueue
whose one resource group covers ``nvidia.com/gpu`` with nominal 8 and
borrowing limit 4 in flavor h100; ``job("ns", "j1").queue("lq").requests(cpu="1")``
is a Job with the queue label. Resource keyword names are short aliases
(``gpu`` = ``nvidia.com/gpu``); quotas are ``n``, ``(n, borrowing)`` or
``(n, borrowing, lending)``. Builders return manifests (plain dicts) through
``.m``; ``Driver`` (tests/builders/driver.py) wraps them in journal events.

These are a fluent scenario DSL (a builder grows a manifest a call at a time),
not a second set of manifests: the plain objects (``lq``, ``wpc``,
``namespace``, the DRA kinds and the Configuration) come from
:mod:`builders.manifests`. Their argument order (``job(namespace, name)``,
``lq(namespace, name, cluster_queue)``) is the one the fold tests were written
in.
"""

from __future__ import annotations

from typing import Any

from builders import manifests

# The shared driver, as the core tests import it.
from builders.driver import Driver as Driver
from builders.driver import kinds as kinds
from builders.driver import manifest as manifest

from kuota.events.schema import Decision

ALIASES = {"gpu": "nvidia.com/gpu", "mem": "memory"}
Quota = int | str | tuple[Any, ...]


def res(name: str) -> str:
    return ALIASES.get(name, name)


class _Builder:
    def __init__(self, m: dict[str, Any]) -> None:
        self.m = m

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.m["metadata"]
        return meta


def _quota(name: str, q: Quota) -> dict[str, Any]:
    if not isinstance(q, tuple):
        q = (q,)
    out: dict[str, Any] = {"name": name, "nominalQuota": q[0]}
    if len(q) > 1 and q[1] is not None:
        out["borrowingLimit"] = q[1]
    if len(q) > 2 and q[2] is not None:
        out["lendingLimit"] = q[2]
    return out


class _QuotaHolder(_Builder):
    def _groups(self) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = self.m["spec"].setdefault("resourceGroups", [])
        return groups

    def group(self) -> _QuotaHolder:
        """Start a new resource group for the next ``flavor`` calls."""
        self._groups().append({"coveredResources": [], "flavors": []})
        return self

    def flavor(self, name: str, quotas: dict[str, Quota] | None = None, **kw: Quota) -> Any:
        items = [(res(k), v) for k, v in (quotas or {}).items()] + [
            (res(k), v) for k, v in kw.items()
        ]
        groups = self._groups()
        if not groups:
            groups.append({"coveredResources": [], "flavors": []})
        group = groups[-1]
        if not group["coveredResources"]:
            group["coveredResources"] = [r for r, _ in items]
        group["flavors"].append({"name": name, "resources": [_quota(r, q) for r, q in items]})
        return self


class CQ(_QuotaHolder):
    def cohort(self, name: str) -> CQ:
        self.m["spec"]["cohort"] = name
        return self

    def strategy(self, value: str) -> CQ:
        self.m["spec"]["queueingStrategy"] = value
        return self

    def strict(self) -> CQ:
        return self.strategy("StrictFIFO")

    def selector(self, selector: dict[str, Any] | None) -> CQ:
        if selector is None:
            self.m["spec"].pop("namespaceSelector", None)
        else:
            self.m["spec"]["namespaceSelector"] = selector
        return self

    def fungibility(self, *, borrow: str | None = None, preempt: str | None = None) -> CQ:
        f = self.m["spec"].setdefault("flavorFungibility", {})
        if borrow:
            f["whenCanBorrow"] = borrow
        if preempt:
            f["whenCanPreempt"] = preempt
        return self

    def borrow_within_cohort(self, policy: str) -> CQ:
        p = self.m["spec"].setdefault("preemption", {})
        p["reclaimWithinCohort"] = "Any"
        p["borrowWithinCohort"] = {"policy": policy}
        return self

    def stop(self, policy: str = "Hold") -> CQ:
        self.m["spec"]["stopPolicy"] = policy
        return self


def cq(name: str) -> CQ:
    return CQ(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {"namespaceSelector": {}},
        }
    )


class CohortB(_QuotaHolder):
    def parent(self, name: str | None) -> CohortB:
        if name is None:
            self.m["spec"].pop("parentName", None)
        else:
            self.m["spec"]["parentName"] = name
        return self


def cohort(name: str) -> CohortB:
    return CohortB(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": name},
            "spec": {},
        }
    )


class Flavor(_Builder):
    def labels(self, **labels: str) -> Flavor:
        self.m["spec"].setdefault("nodeLabels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> Flavor:
        self.m["spec"].setdefault("nodeLabels", {})[key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Flavor:
        t: dict[str, Any] = {"key": key, "effect": effect}
        if value:
            t["value"] = value
        self.m["spec"].setdefault("nodeTaints", []).append(t)
        return self


def flavor(name: str) -> Flavor:
    return Flavor(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {},
        }
    )


def lq(namespace: str, name: str, cluster_queue: str) -> _Builder:
    return _Builder(manifests.local_queue(name, namespace=namespace, cluster_queue=cluster_queue))


def wpc(name: str, value: int) -> _Builder:
    return _Builder(manifests.priority_class(name, value=value))


def namespace(name: str, **labels: str) -> _Builder:
    return _Builder(manifests.namespace(name, labels=labels))


class Job(_Builder):
    def _pod(self) -> dict[str, Any]:
        pod: dict[str, Any] = self.m["spec"]["template"]["spec"]
        return pod

    def queue(self, name: str) -> Job:
        self.meta().setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = name
        return self

    def priority(self, name: str) -> Job:
        self.meta().setdefault("labels", {})["kueue.x-k8s.io/priority-class"] = name
        return self

    def created(self, seconds: float) -> Job:
        self.meta().setdefault("annotations", {})["kuota.dev/created-at"] = str(seconds)
        return self

    def uid(self, value: str) -> Job:
        self.meta()["uid"] = value
        return self

    def parallelism(self, n: int) -> Job:
        self.m["spec"]["parallelism"] = n
        return self

    def requests(self, quotas: dict[str, str | int] | None = None, **kw: str | int) -> Job:
        reqs = {res(k): v for k, v in (quotas or {}).items()}
        reqs.update({res(k): v for k, v in kw.items()})
        container = self._pod()["containers"][0]
        container.setdefault("resources", {}).setdefault("requests", {}).update(reqs)
        return self

    def node_selector(self, **labels: str) -> Job:
        self._pod().setdefault("nodeSelector", {}).update(labels)
        return self

    def node_selector_kv(self, key: str, value: str) -> Job:
        self._pod().setdefault("nodeSelector", {})[key] = value
        return self

    def affinity(self, *terms: list[dict[str, Any]]) -> Job:
        self._pod()["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]
                }
            }
        }
        return self

    def toleration(self, key: str, operator: str = "Exists", value: str = "") -> Job:
        t: dict[str, Any] = {"key": key, "operator": operator}
        if value:
            t["value"] = value
        self._pod().setdefault("tolerations", []).append(t)
        return self

    def claim(self, name: str, template: str) -> Job:
        self._pod().setdefault("resourceClaims", []).append(
            {"name": name, "resourceClaimTemplateName": template}
        )
        return self

    def direct_claim(self, name: str, claim: str) -> Job:
        """A pod claim naming ResourceClaim ``claim`` directly (shared by the pods)."""
        self._pod().setdefault("resourceClaims", []).append(
            {"name": name, "resourceClaimName": claim}
        )
        return self


def job(namespace: str, name: str) -> Job:
    return Job(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox"}],
                    }
                }
            },
        }
    )


def admitted(decisions: list[Decision]) -> list[str]:
    return [d.workload for d in decisions if d.type == "Admitted" and d.workload]


def last(decisions: list[Decision], kind: str, workload: str | None = None) -> Decision:
    for d in reversed(decisions):
        if d.type == kind and (workload is None or d.workload == workload):
            return d
    raise AssertionError(f"no {kind} decision for {workload}: {kinds(decisions)}")


# --------------------------------------------------------------------------- DRA and configuration


def configuration(*mappings: dict[str, Any]) -> dict[str, Any]:
    """Upstream Kueue Configuration with ``resources.deviceClassMappings``."""
    return manifests.configuration(resources={"deviceClassMappings": list(mappings)})


def class_mapping(name: str, *classes: str) -> dict[str, Any]:
    return {"name": name, "deviceClassNames": list(classes)}


def device_class(name: str) -> dict[str, Any]:
    return manifests.device_class(name)


def claim_template(
    namespace: str, name: str, device_class_name: str, count: int = 1
) -> dict[str, Any]:
    return manifests.resource_claim_template(
        name, namespace=namespace, device_class=device_class_name, count=count
    )
