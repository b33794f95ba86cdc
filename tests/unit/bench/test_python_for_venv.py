"""``scripts/python-for-venv``: which Python 3.11 ``make venv`` builds ``.venv``
from (docs/design/interpreter.md). An explicit ``KUOTA_PYTHON`` wins when it is
usable and fails the set-up with its reason when it is not; an interpreter of
another version, or without venv, is refused."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "python-for-venv"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )


def _fake(tmp_path: Path, name: str, body: str) -> Path:
    """An executable standing for a Python: reads the check from stdin, then ``body``."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\ncat >/dev/null\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_an_explicit_usable_python_is_chosen(tmp_path: Path) -> None:
    fake = _fake(tmp_path, "python3.11", "exit 0")  # passes every check
    done = _run({"KUOTA_PYTHON": str(fake)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(fake)


def test_an_explicit_python_that_is_missing_fails_with_its_reason() -> None:
    done = _run({"KUOTA_PYTHON": "/nonexistent/python3.11"})
    assert done.returncode == 1
    assert done.stdout == ""
    assert "KUOTA_PYTHON=/nonexistent/python3.11 is not found" in done.stderr


def test_an_explicit_python_of_another_version_is_refused(tmp_path: Path) -> None:
    fake = _fake(tmp_path, "python3.12", 'echo "is Python 3.12.1, not 3.11" >&2; exit 1')
    done = _run({"KUOTA_PYTHON": str(fake)})
    assert done.returncode == 1
    assert "is Python 3.12.1, not 3.11" in done.stderr


def test_without_kuota_python_a_usable_3_11_is_printed() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUOTA_PYTHON"}
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    chosen = done.stdout.strip()
    version = subprocess.run(
        [chosen, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version == "(3, 11)"
    if Path("/usr/bin/python3.11").exists():  # the distribution's build comes first
        assert chosen == "/usr/bin/python3.11"
