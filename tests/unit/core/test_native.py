"""The compiled core decides exactly what the pure-Python core decides.

``make test`` runs on the core compiled by ``scripts/native.py`` (mypyc,
docs/design/native-core.md). Here ``scripts/bench_core.py`` folds a small
loaded cluster (20 ClusterQueues in 4 cohorts, whole GPUs and MIG memory,
5,000 Jobs) twice, once compiled and once with ``KUOTA_NATIVE=0``, and the
sha256 over every decision's JSON must be the same. Both runs first say which
core they load, so a missing or stale build fails here instead of comparing
pure Python with itself. An edited source must make the finder fall back to
pure Python rather than load the build made before the edit.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SHAPE = ["--queues", "20", "--cohorts", "4", "--nodes", "20", "--workloads", "5000"]


def _run(*args: str, native: bool, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUOTA_NATIVE": "1" if native else "0", **extra}
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
        "import kuota.api, kuota.core, kuota.core.fold.fold\n"
        "from kuota.store.snapshots import code_build\n"
        "print(code_build(kuota.core, kuota.api))"
    )
    builds = [_run("-c", code, native=n) for n in (True, False, True)]
    assert all(b.returncode == 0 for b in builds), [b.stderr for b in builds]
    native, pure, again = (b.stdout.strip() for b in builds)
    assert native == again and native != pure


def test_an_edited_source_runs_as_pure_python_never_as_the_stale_build(tmp_path: Path) -> None:
    """The finder hashes the sources the package would load: a copy of them
    loads the compiled modules; the same copy with one compiled module edited
    loads every module from source, and says why on stderr."""
    shutil.copytree(
        REPO / "shared" / "kuota",
        tmp_path / "kuota",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    where = (
        "import kuota.core.fold.fold as f, kuota.core.queueing.queues as q; "
        "print(f.__file__, q.__file__)"
    )
    before = _run("-c", where, native=True, PYTHONPATH=str(tmp_path))
    assert before.returncode == 0, before.stderr
    assert all(not f.endswith(".py") for f in before.stdout.split()), before.stdout
    queues = tmp_path / "kuota" / "core" / "queueing" / "queues.py"
    queues.write_text(queues.read_text() + "\n# edited after the build\n")
    after = _run("-c", where, native=True, PYTHONPATH=str(tmp_path))
    assert after.returncode == 0, after.stderr
    assert after.stdout.split() == [
        str(tmp_path / "kuota" / "core" / "fold" / "fold.py"),
        str(queues),
    ]
    assert "the sources changed since it was built" in after.stderr


_FAILING_RUN = """
import kuota.sim.engine
from kuota.sim.engine import Simulator


class Broken:  # a fold with a bug
    def apply(self, event, *, offset=None):
        raise KeyError("the bug")

    def next_wakeup(self):
        return None


def test_a_run_through_the_compiled_engine_fails():
    assert not kuota.sim.engine.__file__.endswith(".py"), kuota.sim.engine.__file__
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    Simulator([manifest], fold=Broken()).run()
"""


def test_a_test_failing_inside_the_compiled_engine_is_reported(tmp_path: Path) -> None:
    """pytest reports the failure with the engine's note, rather than crashing
    on the traceback (a compiled generator consumed by compiled code leaves an
    entry without a line number, which pytest's report cannot format)."""
    (tmp_path / "test_failing_run.py").write_text(_FAILING_RUN)
    out = _run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path), native=True)
    report = out.stdout + out.stderr
    assert out.returncode == 1, report[-3000:]  # 1: a test failed; 3 would be INTERNALERROR
    assert "INTERNALERROR" not in report
    assert "KeyError: 'the bug'" in report
    assert "while the fold applied sim-0 ObjectUpserted Namespace a at 0s" in report
