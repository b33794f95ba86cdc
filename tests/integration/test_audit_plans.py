"""``kuota audit replay`` of a journal the real services wrote in plans mode.

kuota-admission and kuota-preemption run as processes on the local stack
(``pipeline_helpers``); a high-priority Job preempts through a plan that
kuota-preemption wrote to the journal. The replay, in the services' mode
(``--preemption plans``, the default), recomputes every committed decision,
from the journal, from the admission snapshot and from an export; an inline
re-fold diverges at the head that waited for its plan; a ``--preemption``
that contradicts the snapshot is refused (docs/design/plans-mode.md).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pipeline_helpers import Pipeline, pipeline
from preemption_journal import WAITING, Journal, within_cluster_queue

pytestmark = pytest.mark.integration

KUOTA = Path(sys.executable).parent / "kuota"


@pytest.fixture
async def pipe(kafka_bootstrap: str, redis_url: str, tmp_path: Path) -> AsyncIterator[Pipeline]:
    async with pipeline(kafka_bootstrap, redis_url, tmp_path) as p:
        p.report_stops()  # no cluster here: the victims' pods are gone at once
        yield p


async def kuota(pipe: Pipeline, *args: str) -> subprocess.CompletedProcess[str]:
    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUOTA), *args],
            env=pipe.admission.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return await asyncio.to_thread(run)


def as_json(r: subprocess.CompletedProcess[str]) -> Any:
    assert r.stdout.strip(), f"no output (exit {r.returncode}); stderr:\n{r.stderr}"
    return json.loads(r.stdout)


async def test_replay_of_a_journal_with_plans_written_by_the_services(
    pipe: Pipeline, tmp_path: Path
) -> None:
    pipe.admission.start()
    pipe.preemption.start()
    await pipe.admission.wait_log(r"recovered: ")
    await pipe.preemption.wait_log(r"recovered: ")
    j = Journal()
    await pipe.produce(within_cluster_queue(j))
    await pipe.decisions.admitted("team-a/mid")
    await pipe.produce(j.job("high", namespace="team-a", gpus=2, priority="high"))
    await pipe.decisions.admitted("team-a/high")
    await pipe.decisions.settle()
    assert pipe.admission.terminate() == 0 and pipe.preemption.terminate() == 0
    decisions = pipe.decisions.all
    assert [d.workload for d in decisions if d.type == "Preempted"] == ["team-a/low"]
    plans = await pipe.plans()
    assert [p.preemptor for p in plans if p.victims] == ["team-a/high"]

    doc = as_json(await kuota(pipe, "audit", "replay", "--json"))
    assert doc["identical"], doc["divergence"]
    assert doc["matched"] == len(decisions) and doc["fold_errors"] == 0

    r = await kuota(pipe, "audit", "replay", "--json", "--preemption", "inline")
    assert r.returncode == 1, r.stderr
    div = as_json(r)["divergence"]
    assert div["recorded"]["workload"] == "team-a/high"
    assert div["recorded"]["reason"] == WAITING  # what admission wrote; inline preempts there
    assert div["expected"]["type"] == "Preempted"

    doc = as_json(await kuota(pipe, "audit", "replay", "--snapshot", "--json"))
    assert doc["identical"], doc["divergence"]
    r = await kuota(pipe, "audit", "replay", "--snapshot", "--preemption", "inline")
    assert r.returncode == 2 and "folds in 'plans' mode" in r.stderr, r.stderr

    export = tmp_path / "journal.jsonl"
    r = await kuota(pipe, "journal", "export", str(export))
    assert r.returncode == 0, r.stderr
    doc = as_json(await kuota(pipe, "audit", "replay", "--file", str(export), "--json"))
    assert doc["identical"] and doc["matched"] == len(decisions), doc
