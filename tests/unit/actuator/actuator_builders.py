"""Small fluent builders of Jobs, decisions and flavors for the actuator tests.

``job().selector(zone="a").toleration("gpu").running()`` is a batch/v1 Job
manifest as the apiserver returns it; ``admitted(flavors={"nvidia.com/gpu":
"h100"})`` an Admitted decision for it; ``flavor("h100", labels={...},
tolerations=[...])`` a ResourceFlavor, read as the actuator reads one
(``read_flavor``). :func:`converge` runs the plan loop the way the shell
does (apply each step, ask again) and returns the final Job and the steps
taken; it plays the Job controller too: an unsuspended Job gets a startTime
and an active pod, and while the shell waits, a suspended Job's pods go
(``controller_clears_start_time`` says whether the controller also clears
startTime, as 1.36's does).
"""

from __future__ import annotations

import copy
from typing import Any

from kuota.actuation.patch import (
    DecisionOrder,
    Fail,
    Plan,
    ResetStartTime,
    Skip,
    UpdateJob,
    Wait,
    plan,
)
from kuota.actuation.scheduling import read_flavor
from kuota.api.types import ResourceFlavor
from kuota.events.schema import Decision

NS, NAME, UID = "team", "train", "uid-1"


def tol(key: str, effect: str = "NoSchedule", **extra: Any) -> dict[str, Any]:
    return {"key": key, "operator": "Exists", "effect": effect, **extra}


class JobBuilder:
    def __init__(self) -> None:
        self.m: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": NAME,
                "namespace": NS,
                "uid": UID,
                "resourceVersion": "100",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            },
            "spec": {
                "suspend": True,
                "template": {
                    "metadata": {},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "pause"}],
                    },
                },
            },
            "status": {},
        }

    @property
    def pod(self) -> dict[str, Any]:
        pod: dict[str, Any] = self.m["spec"]["template"]["spec"]
        return pod

    def selector(self, **labels: str) -> JobBuilder:
        self.pod.setdefault("nodeSelector", {}).update(labels)
        return self

    def toleration(self, key: str, effect: str = "NoSchedule") -> JobBuilder:
        self.pod.setdefault("tolerations", []).append(tol(key, effect))
        return self

    def running(self, start_time: str = "2026-01-01T00:00:00Z") -> JobBuilder:
        self.m["spec"]["suspend"] = False
        self.m["status"].update(startTime=start_time, active=1)
        return self

    def active(self, n: int) -> JobBuilder:
        self.m["status"]["active"] = n
        return self

    def start_time(self, value: str = "2026-01-01T00:00:00Z") -> JobBuilder:
        self.m["status"]["startTime"] = value
        return self

    def finished(self, kind: str = "Complete") -> JobBuilder:
        self.m["status"]["conditions"] = [{"type": kind, "status": "True"}]
        return self

    def annotate(self, **annotations: str) -> JobBuilder:
        self.m["metadata"].setdefault("annotations", {}).update(annotations)
        return self

    def uid(self, uid: str) -> JobBuilder:
        self.m["metadata"]["uid"] = uid
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.m)


def job() -> JobBuilder:
    return JobBuilder()


_ids = iter(range(1, 1_000_000))


def decision(type_: str, **fields: Any) -> Decision:
    n = next(_ids)
    base: dict[str, Any] = {
        "id": f"d{n:06d}",
        "cause": f"event-{n}",
        "cause_offset": fields.pop("cause_offset", n),
        "at": 1000.0,
        "type": type_,
        "workload": f"{NS}/{NAME}",
        "uid": UID,
    }
    base.update(fields)
    return Decision(**base)


def admitted(flavors: dict[str, str] | None = None, *, cq: str = "cq", **fields: Any) -> Decision:
    return decision(
        "Admitted",
        cluster_queue=cq,
        flavors={"main": flavors} if flavors is not None else None,
        usage=fields.pop("usage", None),
        **fields,
    )


def flavor(
    name: str,
    labels: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> ResourceFlavor:
    spec = {"nodeLabels": labels or {}, "tolerations": tolerations or []}
    parsed = read_flavor({"metadata": {"name": name}, "spec": spec})
    assert isinstance(parsed, ResourceFlavor), parsed
    return parsed


def order(d: Decision, record: int = 0) -> DecisionOrder:
    return DecisionOrder.of(d, record)


def converge(
    manifest: dict[str, Any],
    d: Decision,
    flavors: dict[str, ResourceFlavor] | None = None,
    *,
    record: int = 0,
    max_steps: int = 8,
    controller_clears_start_time: bool = True,
) -> tuple[dict[str, Any], list[Plan]]:
    """Apply plan steps to ``manifest`` like the shell (and the Job controller) would."""
    current = copy.deepcopy(manifest)
    steps: list[Plan] = []
    for _ in range(max_steps):
        step = plan(current, d, order=order(d, record), flavors=flavors or {})
        steps.append(step)
        if isinstance(step, Skip | Fail):
            return current, steps
        if isinstance(step, ResetStartTime):
            current = step.job
            continue
        if isinstance(step, Wait):
            status = current.setdefault("status", {})
            status.pop("active", None)
            if controller_clears_start_time:
                status.pop("startTime", None)
            continue
        assert isinstance(step, UpdateJob)
        current = step.job
        rv = int(current["metadata"]["resourceVersion"]) + 1
        current["metadata"]["resourceVersion"] = str(rv)
        if current["spec"].get("suspend") is False:
            current.setdefault("status", {}).update(startTime="2026-01-01T00:00:01Z", active=1)
        if step.final:
            return current, steps
    raise AssertionError(f"no final step in {max_steps}: {steps}")
