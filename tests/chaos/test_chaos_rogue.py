"""The rogue user's tries, against a fake apiserver: every kind made, outcomes sorted."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from chaos_rogue import ANN_DECISION_ID, ATTEMPTS, OPPORTUNISTIC, QUEUE_LABEL, Rogue, _outcome
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

    async def create_namespaced_job(self, ns: str, body: dict[str, Any]) -> None:
        body = json.loads(json.dumps(body))
        body["spec"]["suspend"] = True
        if len(self.jobs) == 1:  # the second one runs, admitted
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


def test_every_kind_is_tried_and_the_outcomes_are_sorted() -> None:
    batch = FakeBatch()
    rogue = Rogue(batch=batch, rng=random.Random(1), say=print, period=(0.0, 0.0))  # type: ignore[arg-type]
    asyncio.run(rogue.run(lambda: len(rogue.tries) > 60))
    kinds = {t.kind.split(":")[0] for t in rogue.tries}
    assert kinds >= set(ATTEMPTS) - OPPORTUNISTIC, kinds
    outcomes = {(t.kind, t.outcome) for t in rogue.tries}
    assert ("relabel-running", "refused") in outcomes
    assert ("unsuspend", "forbidden") in outcomes  # a 403 without the webhook's words
    assert ("create-unlabelled", "accepted") in outcomes
    assert any(line.startswith("unsuspend: ") for line in rogue.summary())


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
