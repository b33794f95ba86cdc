#!/usr/bin/env python3
"""Differential scenarios against Kueue itself: ``make diff-kueue`` (issue #16).

    .venv/bin/python scripts/diff_kueue.py [SCENARIO...]

Plays each scenario of ``tests/e2e/scenarios/`` (default: all) as real Jobs on
the Kueue stack (``scripts/kueue-stack up``: Kueue v0.19.2 on its own
kube-apiserver and kwok nodes) and folds the same manifests with kuota's core;
prints one row per scenario (agree / departure / differ, with what differs),
then

    scenarios=M agree=K departures=D differ=N

and exits non-zero when N > 0. The code is in ``tests/kueue/kueue_diff.py``;
the design in ``docs/design/kueue-side-by-side.md``, the recorded departures
in ``docs/kueue-differences.md``.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests" / "kueue"), str(REPO / "tests" / "e2e")]

from kueue_diff import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
