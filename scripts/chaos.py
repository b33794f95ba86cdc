#!/usr/bin/env python3
"""Seeded fault runs on the real stack: ``make chaos`` (issue #8).

    .venv/bin/python scripts/chaos.py [--seed 1] [--jobs 1000] [--kills 3] [--keep] ...

Starts a stack of its own (``.stack-chaos``, ports 29092/26379/26443/...), the
four services, a GPU workload (whole GPUs, MIG slices, cohort borrowing,
priority preemption) and a printed, seeded fault schedule (kill -9 of each
service, a Kafka restart, a kube-apiserver restart, Redis losing its data,
the actuator cut off from the apiserver for 30 s); checks quota, lost Jobs,
double actuation and ``kuota audit replay``. The last line is

    faults=<n> jobs=<n> over_admissions=0 lost=0 double_actuations=0 replay=identical preempted=<n>

and the exit status is non-zero unless every count is zero and the replay is
identical. The code is in ``tests/chaos/`` (``chaos_run.py`` is the driver);
the design and the defects found are in ``docs/design/chaos.md``.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests" / "chaos"), str(REPO / "tests" / "e2e")]

from chaos_run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
