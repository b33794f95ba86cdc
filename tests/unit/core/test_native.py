"""The compiled core decides exactly what the pure-Python core decides.

``make test`` runs on the core compiled by ``scripts/native.py`` (mypyc,
docs/design/native-core.md). Here ``scripts/bench_core.py`` folds a small
loaded cluster (20 ClusterQueues in 4 cohorts, whole GPUs and MIG memory,
5,000 Jobs) twice, once compiled and once with ``KUOTA_NATIVE=0``, and the
sha256 over every decision's JSON must be the same. Both runs first say which
core they load, so a missing or stale build fails here instead of comparing
pure Python with itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SHAPE = ["--queues", "20", "--cohorts", "4", "--nodes", "20", "--workloads", "5000"]


def _run(*args: str, native: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUOTA_NATIVE": "1" if native else "0"}
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def _digest(native: bool) -> str:
    out = _run("scripts/bench_core.py", *SHAPE, "--digest", native=native)
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(r"digest sha256=([0-9a-f]{64}) decisions=(\d+)", out.stderr)
    assert found is not None, out.stderr[-2000:]
    assert int(found.group(2)) > 5000  # admissions, finishes and waits
    return found.group(1)


def test_the_tests_run_on_the_compiled_core() -> None:
    status = _run("scripts/native.py", "status", native=True)
    assert status.returncode == 0, f"{status.stdout}{status.stderr} (run `make native`)"
    pure = _run("scripts/native.py", "status", native=False)
    assert pure.returncode == 1 and "0 of" in pure.stdout, pure.stdout


def test_compiled_and_pure_python_cores_make_the_same_decisions() -> None:
    assert _digest(native=True) == _digest(native=False)


def test_snapshots_of_the_compiled_and_the_pure_core_carry_different_builds() -> None:
    """A snapshot pickled by one is refused by the other (it replays instead)."""
    code = (
        "import kuota.api, kuota.core, kuota.core.fold\n"
        "from kuota.store.snapshots import code_build\n"
        "print(code_build(kuota.core, kuota.api))"
    )
    builds = [_run("-c", code, native=n) for n in (True, False, True)]
    assert all(b.returncode == 0 for b in builds), [b.stderr for b in builds]
    native, pure, again = (b.stdout.strip() for b in builds)
    assert native == again and native != pure
