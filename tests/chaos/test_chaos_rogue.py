"""The rogue user's tries, against a fake apiserver: every kind made, outcomes sorted."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from chaos_rogue import (
    ANN_DECISION_ID,
    ATTEMPTS,
    HOLD_FINALIZER,
    MAX_JOBS,
    OPPORTUNISTIC,
    OVERSIZED_BYTES,
    QUEUE_LABEL,
    SWAP_TEMPLATE,
    Rogue,
    _outcome,
    rogue_charge,
    rogue_job,
)
from e2e_harness import KWOK_COMPLETE
from kubernetes_asyncio.client.exceptions import ApiException

DENIED = 'admission webhook "mutate-batch-v1-job.kuota.dev" denied the request: '


class Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    async def read(self) -> bytes:
        return json.dumps(self.body).encode()

    def release(self) -> None:
        pass


class FakeBatch:
    """Jobs in a dict; the door refuses an unsuspend and any kuota.dev/ annotation."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.patches: list[tuple[str, Any]] = []
        self.deleted: list[tuple[str, Any]] = []

    async def create_namespaced_job(self, ns: str, body: dict[str, Any]) -> None:
        body = json.loads(json.dumps(body))
        body["spec"]["suspend"] = True
        long = body["spec"]["template"]["metadata"]["annotations"][KWOK_COMPLETE] != "2s"
        if len(self.jobs) == 1 or long:  # the second one runs, admitted, and the long ones
            body["spec"]["suspend"] = False
            body["metadata"].setdefault("annotations", {})[ANN_DECISION_ID] = "d-1"
        self.jobs[body["metadata"]["name"]] = body

    async def list_namespaced_job(self, ns: str, **kw: Any) -> Response:
        return Response({"items": list(self.jobs.values())})

    async def patch_namespaced_job(self, name: str, ns: str, body: dict[str, Any]) -> None:
        self.patches.append((name, body))
        if (body.get("spec") or {}).get("suspend") is False:
            raise ApiException(status=403, reason="Forbidden")
        if (body.get("metadata") or {}).get("annotations"):
            raise ApiException(status=403, reason="Forbidden")
        labels = (body.get("metadata") or {}).get("labels") or {}
        if QUEUE_LABEL in labels and not self.jobs[name]["spec"]["suspend"]:
            err = ApiException(status=403)
            err.body = json.dumps({"message": DENIED + "metadata.labels: Forbidden"})
            raise err

    async def delete_namespaced_job(self, name: str, ns: str, **kw: Any) -> None:
        self.deleted.append((name, kw.get("propagation_policy")))
        self.jobs.pop(name, None)


class Pod:
    def __init__(self, name: str) -> None:
        self.metadata = type("Meta", (), {"name": name, "deletion_timestamp": None})()


class FakeCore:
    """Each Job has one pod, named after it; patches are recorded."""

    def __init__(self, batch: FakeBatch) -> None:
        self.batch = batch
        self.patches: list[tuple[str, Any]] = []

    async def list_namespaced_pod(self, ns: str, label_selector: str) -> Any:
        job = label_selector.split("=", 1)[1]
        return type("List", (), {"items": [Pod(f"{job}-pod")] if job in self.batch.jobs else []})

    async def patch_namespaced_pod(self, name: str, ns: str, body: Any) -> None:
        self.patches.append((name, body))


class FakeCustom:
    def __init__(self) -> None:
        self.templates: dict[str, int] = {}

    async def create_namespaced_custom_object(self, *args: Any) -> None:
        body = args[-1]
        request = body["spec"]["spec"]["devices"]["requests"][0]
        self.templates[body["metadata"]["name"]] = request["exactly"]["count"]

    async def delete_namespaced_custom_object(self, *args: Any) -> None:
        self.templates.pop(args[-1], None)


def test_every_kind_is_tried_and_the_outcomes_are_sorted() -> None:
    batch = FakeBatch()
    core, custom = FakeCore(batch), FakeCustom()
    rogue = Rogue(
        batch=batch, rng=random.Random(1), say=print, period=(0.0, 0.0), core=core, custom=custom
    )  # type: ignore[arg-type]
    asyncio.run(rogue.run(lambda: len(rogue.tries) > 90))
    kinds = {t.kind.split(":")[0] for t in rogue.tries}
    assert kinds >= set(ATTEMPTS) - OPPORTUNISTIC, kinds
    outcomes = {(t.kind, t.outcome) for t in rogue.tries}
    assert ("relabel-running", "refused") in outcomes
    assert ("unsuspend", "forbidden") in outcomes  # a 403 without the webhook's words
    assert ("create-unlabelled", "accepted") in outcomes
    assert any(line.startswith("unsuspend: ") for line in rogue.summary())
    # issue #23's tries: an orphaning delete, pods held by a finalizer (and let go at
    # the end), the template recreated with more devices, a Job over 1 MiB
    assert any(p == "Orphan" for _, p in batch.deleted)
    held = [name for name, body in core.patches if body["metadata"].get("finalizers")]
    freed = [n for n, b in core.patches if "$deleteFromPrimitiveList/finalizers" in b["metadata"]]
    assert held and sorted(held) == sorted(freed), (held, freed)
    assert core.patches[0][1]["metadata"]["finalizers"] == [HOLD_FINALIZER]
    assert custom.templates.get(SWAP_TEMPLATE) in (1, 2)
    assert any(t.kind == "swap-template-running" and t.outcome == "accepted" for t in rogue.tries)
    big = [t for t in rogue.tries if t.kind == "create-oversized"]
    assert big and all(t.outcome == "accepted" for t in big)
    assert OVERSIZED_BYTES > 1 << 20


class FullBatch(FakeBatch):
    """A namespace already at MAX_JOBS whose Jobs all wait: only a Job made past it runs."""

    async def create_namespaced_job(self, ns: str, body: dict[str, Any]) -> None:
        body = json.loads(json.dumps(body))
        body["spec"]["suspend"] = len(self.jobs) < 3  # the first ones: queued for good
        body["metadata"].setdefault("annotations", {})[ANN_DECISION_ID] = "d-1"
        self.jobs[body["metadata"]["name"]] = body


def test_a_kind_skipped_in_a_full_namespace_is_still_tried() -> None:
    # CI once ended a run with swap-template-running untried: the namespace was at
    # MAX_JOBS and no Job on the rogue's template was running when its turn came
    batch = FullBatch()
    core, custom = FakeCore(batch), FakeCustom()
    rogue = Rogue(
        batch=batch, rng=random.Random(3), say=print, period=(0.0, 0.0), core=core, custom=custom
    )  # type: ignore[arg-type]
    rogue.registry.update({f"chaos-a/old-{i:03d}": "create" for i in range(MAX_JOBS)})
    asyncio.run(rogue.run(lambda: not rogue.owed() or len(rogue.tries) > 2000))
    assert rogue.owed() == [], rogue.owed()
    assert any(t.kind == "swap-template-running" for t in rogue.tries)


def test_outcomes_of_the_apiservers_answers() -> None:
    def err(status: int, message: str) -> ApiException:
        e = ApiException(status=status)
        e.body = json.dumps({"message": message})
        return e

    assert _outcome(err(403, DENIED + "spec.suspend: Forbidden"))[0] == "refused"
    assert _outcome(err(403, 'jobs.batch "x" is forbidden: User ...'))[0] == "forbidden"
    assert _outcome(err(422, "spec.template: field is immutable"))[0] == "invalid"
    away = 'Internal error occurred: failed calling webhook "mutate-batch-v1-job.kuota.dev"'
    assert _outcome(err(500, away))[0] == "away"


def test_a_rogue_job_is_charged_the_pods_it_runs_at_once() -> None:
    """CI's seed 7 (2026-12-06) counted a swappable Job (completions 1) grown to a
    parallelism of 4 as four slices: over-admissions of 30Gi that kuota never made
    (it charges, and the Job controller runs, one pod)."""
    gi = 1 << 30
    job = rogue_job("r")
    assert rogue_charge(job) == {"gpu-memory": 10 * gi * 1000}
    job["spec"]["parallelism"] = 4
    assert rogue_charge(job) == {"gpu-memory": 40 * gi * 1000}, "4 of its 4 completions at once"
    job["spec"]["completions"] = 1
    assert rogue_charge(job) == {"gpu-memory": 10 * gi * 1000}, "one completion: one pod"
    del job["spec"]["completions"]
    assert rogue_charge(job) == {"gpu-memory": 40 * gi * 1000}
