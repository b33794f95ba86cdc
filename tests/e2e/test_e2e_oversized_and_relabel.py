"""End to end, issue #23 items 5 and 1: the four services on the real stack.

1. A Job of about 1.2 MB (a big env value, as a tenant may write) is over Kafka's
   1 MiB record limit, yet ingest journals only what the fold reads of it (a few
   hundred bytes, no env), so it is admitted; a Job still too large for a journal
   record as journaled (a node selector of 30,000 entries) is ``Rejected`` with
   the reason; ingest keeps running and a normal Job created after both is
   admitted.
2. A label change is not a delete: removing the queue label from a running
   admitted Job, or the ``kuota.dev/pipeline`` label this pipeline's
   ``KUOTA_JOB_LABEL_SELECTOR`` selects, is a stop (``Evicted``
   ``QueueLabelRemoved``, the Job suspended again and its pods gone), never an
   ``ObjectDeleted``. (When the quota comes back is item 3's: once the pods are gone.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from e2e_harness import PIPELINE_LABEL, QUEUE_LABEL, Run, kubectl_apply, run_fixture, wait_journaled
from kubernetes_asyncio import client
from test_e2e_backstop import decisions, job, queue_objects

from kuota.events.schema import ObjectDeleted, ObjectUpserted

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()
MB = 1_000_000


def journaled(run: Run, key: str) -> list[ObjectUpserted]:
    ns, _, name = key.partition("/")
    return [
        e
        for _, e in run.journal
        if isinstance(e, ObjectUpserted)
        and e.object.get("kind") == "Job"
        and e.object["metadata"].get("namespace") == ns
        and e.object["metadata"].get("name") == name
    ]


def deleted(run: Run, key: str) -> list[ObjectDeleted]:
    ns, _, name = key.partition("/")
    return [
        e
        for _, e in run.journal
        if isinstance(e, ObjectDeleted) and (e.kind, e.namespace, e.name) == ("Job", ns, name)
    ]


async def test_a_big_job_is_journaled_small_and_a_too_big_one_rejected(e2e_run: Run) -> None:
    run = e2e_run
    ns = f"{run.id}-big"
    batch = client.BatchV1Api(run.api)
    await wait_journaled(run, await kubectl_apply(run, queue_objects(run, ns, cpus=4)))

    big = job(run, "big", 1)
    container = big["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "BLOB", "value": "x" * (6 * MB // 5)}]
    container["args"] = ["--secret-flag"]
    assert len(json.dumps(big)) > 1_048_576, "over Kafka's default record limit"
    huge = job(run, "huge", 1)
    huge["spec"]["template"]["spec"]["nodeSelector"] = {
        f"k{i}.example.com/key": f"value-{i}" for i in range(30_000)
    }
    assert 1_048_576 < len(json.dumps(huge)) < 1_400_000, "etcd holds it"
    await batch.create_namespaced_job(ns, big)
    await batch.create_namespaced_job(ns, huge)
    await batch.create_namespaced_job(ns, job(run, "after", 1))

    for name in ("big", "after"):
        await run.until(lambda n=name: decisions(run, f"{ns}/{n}", "Admitted"), f"{name} admitted")
    huge_ref = f"Job {ns}/huge"
    (rejected,) = await run.until(
        lambda: [d for _, d in run.decisions if d.type == "Rejected" and d.object == huge_ref],
        "huge rejected",
    )
    assert rejected.reason == "InvalidObject"
    assert rejected.message is not None and "not journaled" in rejected.message, rejected.message
    assert "over the journal's limit of 1,000,000 bytes" in rejected.message
    assert not decisions(run, f"{ns}/huge", "Admitted")

    (first, *_) = journaled(run, f"{ns}/big")
    text = first.model_dump_json()
    print(f"\n[e2e] the 1.2 MB Job journaled in {len(text)} bytes")
    assert len(text) < 5_000, len(text)
    assert "BLOB" not in text and "--secret-flag" not in text, "env and args are not journaled"
    (stand_in, *_) = journaled(run, f"{ns}/huge")
    assert "kuota.dev/not-journaled" in stand_in.object["metadata"]["annotations"]
    assert "spec" not in stand_in.object
    live = await batch.read_namespaced_job("huge", ns)
    assert live.spec.suspend is True, "never started"


async def test_a_label_change_is_a_stop_not_a_delete(e2e_run: Run) -> None:
    run = e2e_run
    ns = f"{run.id}-lbl"
    batch = client.BatchV1Api(run.api)
    await wait_journaled(run, await kubectl_apply(run, queue_objects(run, ns, cpus=2)))
    try:
        for name, remove in (("unqueued", QUEUE_LABEL), ("unpiped", PIPELINE_LABEL)):
            key = f"{ns}/{name}"
            await batch.create_namespaced_job(ns, job(run, name, 1))
            await run.until(lambda k=key: decisions(run, k, "Admitted"), f"{name} admitted")
            await _until_running(run, batch, ns, name, True)
            await batch.patch_namespaced_job(name, ns, {"metadata": {"labels": {remove: None}}})
            (evicted,) = await run.until(
                lambda k=key: decisions(run, k, "Evicted"), f"{name} stopped"
            )
            assert evicted.reason == "QueueLabelRemoved", evicted
            await _until_running(run, batch, ns, name, False)
            assert not deleted(run, key), f"{name}: a label change journaled as a delete"
        last = journaled(run, f"{ns}/unpiped")[-1].object["metadata"]
        assert last["annotations"]["kuota.dev/outside-job-selector"] == f"{PIPELINE_LABEL}={run.id}"
        # Stopped, not forgotten: no pod of either is left, and neither is admitted again.
        core = client.CoreV1Api(run.api)
        for name in ("unqueued", "unpiped"):
            for _ in range(300):
                pods = await core.list_namespaced_pod(
                    ns, label_selector=f"batch.kubernetes.io/job-name={name}"
                )
                if not pods.items:
                    break
                await asyncio.sleep(0.2)
            assert not pods.items, f"{name}: pods still there after the stop"
            assert len(decisions(run, f"{ns}/{name}", "Admitted")) == 1, name
    finally:
        with contextlib.suppress(client.ApiException):  # outside the run's label: not cleaned
            await batch.delete_namespaced_job("unpiped", ns, propagation_policy="Background")


async def _until_running(
    run: Run, batch: client.BatchV1Api, ns: str, name: str, running: bool
) -> None:
    """Until the Job runs (unsuspended, a pod active) or, ``running=False``, is suspended."""
    for _ in range(300):
        j = await batch.read_namespaced_job(name, ns)
        if running and j.spec.suspend is not True and (j.status.active or 0) > 0:
            return
        if not running and j.spec.suspend is True:
            return
        run.check_tasks()
        await asyncio.sleep(0.2)
    pytest.fail(f"{ns}/{name}: {'running' if running else 'suspended'} not within 60s")
