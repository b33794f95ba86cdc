"""End to end, the dashboard in a real browser: ``kuota dashboard`` on the real pipeline.

One run of the four real services (``run_fixture``), the queues of two
scenario files (``cohort-borrowing``: team-a and team-b in a cohort, whole
GPUs counted; ``mig-memory``: a GPU-memory quota in GiB), then
``kuota dashboard --port 0`` as a process of its own with the run's settings,
and headless Chromium (Debian's, via Selenium: ``e2e_browser.py``) on it:

1. the page loads and shows the run's ClusterQueues and their cohort;
2. a Job is admitted: within 2 s of its ``Admitted`` decision reaching the
   decision topic, the page shows it in the stream and in team-a's usage;
3. a Job that waits is in the pending table with its position and the
   reason of its ``Inadmissible`` decision; the namespace filter narrows
   the table; its workload page shows ``kuota explain``'s history;
4. a screenshot is saved (``$KUOTA_TEST_ARTIFACTS``, default
   ``<stack dir>/artifacts/``) and its path printed.

The Jobs run for 10 minutes on kwok, so nothing finishes while the page is
read; the run's cleanup deletes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from e2e_browser import chromium
from e2e_hardware import KWOK_COMPLETE, KWOK_READY
from e2e_harness import Run, kubectl_apply, load_launcher, run_fixture, wait_journaled
from e2e_scenario import load_scenario
from kubernetes_asyncio import client
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

e2e_run = run_fixture()

UPDATE_WITHIN_S = 2.0  # the bound: the page shows an admission this soon
WAIT = 60.0


def _jobs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The scenario's Jobs by name, running 10 minutes on kwok, not suspended
    by hand (the webhook must suspend them)."""
    out = {}
    for d in docs:
        if d["kind"] != "Job":
            continue
        job = copy.deepcopy(d)
        job["spec"].pop("suspend", None)
        ann = job["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})
        ann[KWOK_READY] = "200ms"
        ann[KWOK_COMPLETE] = "600s"
        out[job["metadata"]["name"]] = job
    return out


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dashboard(e2e_run: Run) -> AsyncIterator[str]:
    """``kuota dashboard`` for the run; its URL."""
    env = dict(e2e_run.env)
    env["KUOTA_TOPIC_PREFIX"] = e2e_run.pipeline.topic_prefix
    env.pop("KUOTA_DASHBOARD_TOKEN", None)
    kuota = Path(sys.executable).parent / "kuota"
    log = Path(load_launcher().stack_dir()) / "logs" / f"kuota-dashboard-{e2e_run.id}.log"
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            str(kuota),
            "dashboard",
            "--port",
            "0",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), WAIT)
            text = line.decode().strip()
            assert text.startswith("kuota: dashboard on http://127.0.0.1:"), (
                f"kuota dashboard printed {text!r} (log: {log})"
            )
            yield text.rsplit(" ", 1)[1]
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
    assert proc.returncode in (0, -15), f"kuota dashboard exited {proc.returncode} (log: {log})"


async def _until(
    browser: WebDriver, check: Callable[[WebDriver], Any], what: str, timeout: float = WAIT
) -> Any:
    """Poll the page (in a thread: Selenium blocks) every 100 ms until ``check`` is truthy."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            got = await asyncio.to_thread(check, browser)
        except Exception as err:  # the element is not there yet, or went stale
            last, got = err, None
        if got:
            return got
        await asyncio.sleep(0.1)
    pytest.fail(f"{what}: not within {timeout:.1f}s (last error: {last!r})")


def _card(browser: WebDriver, name: str) -> Any:
    return browser.find_element(By.CSS_SELECTOR, f'#queues .card[data-name="{name}"]')


def _admitted_line(browser: WebDriver, workload: str) -> bool:
    lines = browser.find_elements(By.CSS_SELECTOR, '#decisions li[data-type="Admitted"]')
    return any(li.get_attribute("data-workload") == workload for li in lines)


def _pending_row(browser: WebDriver, workload: str) -> dict[str, str] | None:
    for row in browser.find_elements(By.CSS_SELECTOR, "#pending tbody tr"):
        if row.get_attribute("data-workload") == workload:
            cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
            return dict(zip(("workload", "cq", "lq", "position", "reason"), cells, strict=True))
    return None


def _choose(browser: WebDriver, select: str, value: str) -> bool:
    """Pick ``value`` in a filter (a re-render may replace the options meanwhile:
    ``_until`` tries again)."""
    Select(browser.find_element(By.ID, select)).select_by_value(value)
    return True


def _artifacts() -> Path:
    root = os.environ.get("KUOTA_TEST_ARTIFACTS") or str(
        Path(load_launcher().stack_dir()) / "artifacts"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


async def test_the_dashboard_in_a_browser(e2e_run: Run, dashboard: str) -> None:
    run = e2e_run
    borrowing = load_scenario("cohort-borrowing", run)
    mig = load_scenario("mig-memory", run)
    setup = [d for d in borrowing + mig if d["kind"] != "Job"]
    await wait_journaled(run, await kubectl_apply(run, setup))
    jobs = _jobs(borrowing) | _jobs(mig)
    a, b, pool = f"{run.id}-team-a", f"{run.id}-team-b", f"{run.id}-pool"
    batch = client.BatchV1Api(run.api)

    async def submit(name: str) -> str:
        job = jobs[name]
        ns = job["metadata"]["namespace"]
        await batch.create_namespaced_job(ns, job)
        return f"{ns}/{name}"

    async def decided(kind: str, key: str) -> float:
        """Until the decision topic has a ``kind`` decision for ``key``; when it was seen."""
        await run.until(
            lambda: any(d.type == kind and d.workload == key for _, d in run.decisions),
            f"{kind} of {key} on the decision topic",
        )
        return time.monotonic()

    with chromium() as browser:
        await asyncio.to_thread(browser.get, dashboard)
        # 1. The run's queues and their cohort.
        await _until(
            browser,
            lambda br: {
                c.get_attribute("data-name")
                for c in br.find_elements(By.CSS_SELECTOR, "#queues .card")
            }
            >= {a, b, f"{run.id}-mig"},
            "the page lists the run's ClusterQueues",
        )
        await _until(
            browser,
            lambda br: br.find_element(By.CSS_SELECTOR, f'#cohorts .card[data-name="{pool}"]'),
            "the page shows the cohort",
        )
        # (every read polls: a re-render may replace what was just found)
        await _until(
            browser,
            lambda br: "whole-gpus: 0 of 2 nominal, 3 with borrowing" in _card(br, a).text
            and _card(br, a).get_attribute("data-admitted") == "0",
            "team-a's bars before any Job: 0 of 2, 3 with borrowing",
        )

        # 2. An admission shows within 2 s of its decision.
        a1 = await submit("a-1")
        seen = await decided("Admitted", a1)
        await _until(
            browser,
            lambda br: _admitted_line(br, a1)
            and "whole-gpus: 2 of 2 nominal" in _card(br, a).text
            and _card(br, a).get_attribute("data-admitted") == "1",
            f"the page shows {a1} admitted (stream and team-a's usage)",
            timeout=UPDATE_WITHIN_S,
        )
        shown_after = time.monotonic() - seen
        print(f"\n[dashboard] {a1} on the page {shown_after:.2f}s after its decision")
        assert shown_after <= UPDATE_WITHIN_S

        # MIG memory in GiB: train-1 takes a whole 80Gi GPU of the 160Gi quota.
        train = await submit("train-1")
        await decided("Admitted", train)
        await _until(
            browser,
            lambda br: "gpu-memory: 80 GiB of 160 GiB nominal" in _card(br, f"{run.id}-mig").text,
            "the MIG queue's usage in GiB",
        )
        await decided("Admitted", await submit("infer-1"))  # three 1g.10gb slices: 30Gi more

        # 3. Waiting workloads: position and reason; filters; the workload page.
        for name in ("a-2", "b-1"):
            await decided("Admitted", await submit(name))
        a3 = await submit("a-3")  # team-a at its borrowing limit
        b2 = await submit("b-2")  # the cohort's 4 GPUs are in use
        for key in (a3, b2):
            await decided("Inadmissible", key)
        for key, cq in ((a3, a), (b2, b)):
            (why, *_) = [
                d.reason for _, d in run.decisions if d.type == "Inadmissible" and d.workload == key
            ]
            assert why, f"{key}'s Inadmissible decision has no reason"
            row = await _until(
                browser,
                lambda br, key=key, why=why: (r := _pending_row(br, key))
                and why in r["reason"]
                and r,
                f"{key} pending with its reason {why}",
            )
            assert row["cq"] == cq and row["position"] == "1 of 1", row
        await _until(browser, lambda br: _choose(br, "filter-namespace", b), "choose a namespace")
        await _until(
            browser,
            lambda br: [
                r.get_attribute("data-workload")
                for r in br.find_elements(By.CSS_SELECTOR, "#pending tbody tr")
            ]
            == [b2],
            "the namespace filter shows team-b's workload only",
        )
        await _until(browser, lambda br: _choose(br, "filter-namespace", ""), "choose a namespace")

        # 4. The screenshot, with everything on the page.
        await _until(browser, lambda br: _pending_row(br, a3), "the table again in full")
        shot = _artifacts() / f"dashboard-{run.id}.png"
        await asyncio.to_thread(browser.save_screenshot, str(shot))
        assert shot.stat().st_size > 10_000
        print(f"[dashboard] screenshot: {shot}")

        ns, name = a3.split("/")
        await asyncio.to_thread(browser.get, f"{dashboard}workload/{ns}/{name}")
        page = await _until(
            browser,
            lambda br: (t := br.find_element(By.ID, "explain").text) and "Inadmissible" in t and t,
            f"{a3}'s workload page",
        )
        assert a3 in page
        with contextlib.suppress(Exception):
            await asyncio.to_thread(
                browser.save_screenshot, str(_artifacts() / f"dashboard-explain-{run.id}.png")
            )
