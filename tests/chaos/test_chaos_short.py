"""The short fault run of ``make test``: ~170 Jobs, one fault of every kind, all zeros.

It runs ``scripts/chaos.py`` as a process (its own stack in ``.stack-chaos`` on
its own ports, so the restarts it causes never touch the stack the other tests
use), with one ``kill -9`` of each service, one of preemption mid-plan and one
of admission between a plan and its decision, a Kafka broker restart, a
kube-apiserver restart, Redis losing its data (and admission killed after it)
and the actuator cut off from the apiserver for 30 s, and, while they run, a
rogue user with a namespace ``edit`` token trying every way around the queue
(``chaos_rogue``). It asserts the last line: no over-admission, no lost Job,
no double actuation, an identical replay, at least one preemption (planned by
the preemption service), ``bypass_gpu_s=0`` (no pod ran without an
admission), with every kind of the rogue's tries made, and
``restart_overlap_gpu_s=0``: the quota of a stopped run is kept until its pods
are gone (#23 items 2-3), so no late pod of it runs beside kuota's own restart
of the Job, and the quota invariant is checked on the pods too
(``chaos_check``: terminating ones count).
The whole output is printed when it fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from chaos_rogue import ATTEMPTS, OPPORTUNISTIC

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]

REPO = Path(__file__).resolve().parents[2]
LAST = re.compile(
    r"^faults=(\d+) jobs=(\d+) over_admissions=(\d+) lost=(\d+) "
    r"double_actuations=(\d+) replay=(\w+) preempted=(\d+) bypass_gpu_s=([\d.e+-]+) "
    r"restart_overlap_gpu_s=([\d.e+-]+)$"
)


def test_short_fault_run_keeps_every_promise() -> None:
    seed = os.environ.get("KUOTA_CHAOS_SEED", "7")
    argv = [sys.executable, str(REPO / "scripts" / "chaos.py"), "--seed", seed]
    argv += ["--jobs", "170", "--kills", "1", "--rate", "5", "--settle", "150"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=460, cwd=REPO)
    out = done.stdout + done.stderr
    lines = [ln for ln in done.stdout.strip().splitlines() if ln.strip()]
    assert lines, f"chaos printed nothing:\n{out[-4000:]}"
    m = LAST.match(lines[-1])
    assert m, f"last line is not the verdict: {lines[-1]!r}\n{out[-4000:]}"
    faults, jobs, over, lost, doubles, replay, preempted, bypass, overlap = m.groups()
    # one kill per service, the two kills at moments of preemption, kafka,
    # apiserver, redis (+ the kill after it), partition
    assert int(faults) == 11, f"{faults} faults injected, 11 planned\n{out[-4000:]}"
    assert int(preempted) > 0, f"no preemption in the run\n{out[-4000:]}"
    assert int(jobs) == 170
    assert (over, lost, doubles, replay) == ("0", "0", "0", "identical"), out[-6000:]
    # the rogue user tried every way around the queue, and none ran a pod on no quota;
    # a stopped run's pods keep its quota until they are gone (#23 items 2-3), so
    # none runs beside kuota's own restart of the Job
    assert float(bypass) == 0, out[-6000:]
    assert float(overlap) == 0, out[-6000:]
    tried = out[out.index("rogue user (edit): ") :]
    for kind in set(ATTEMPTS) - OPPORTUNISTIC:
        assert f"\n    {kind}: " in tried, f"the rogue user never tried {kind}\n{tried[:3000]}"
    assert done.returncode == 0, out[-4000:]
    print(out[-1500:])  # the run's summary, shown with -s
    schedule = out[out.index("fault schedule") :].splitlines()[1:12]
    assert sum("waits for a preemption plan" in ln for ln in schedule) == 1, schedule
    assert sum("plan with victims is journaled" in ln for ln in schedule) == 1, schedule
    assert {ln.split()[2] for ln in schedule} >= {
        "kill:ingest",
        "kill:admission",
        "kill:preemption",
        "kill:actuator",
        "kafka",
        "apiserver",
        "redis",
        "partition",
    }, schedule
