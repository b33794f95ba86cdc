"""Every command the README and docs/ mark runnable offline runs, and exits 0.

A fenced block whose info string is ``sh offline`` (```` ```sh offline ````) is
a script a reader can paste on a machine with only ``make venv`` done: no
stack, no cluster. Each such block runs here as one ``bash -eu -o pipefail``
script, so a renamed flag or a moved file breaks this test rather than a
reader. It runs in a fresh temporary folder in which every top-level entry of
the checkout is a symlink (``examples/``, ``.venv/`` = the running venv, ...):
paths read as in the docs, and a file a command writes (``--export
journal.jsonl``) lands in the temporary folder, never in the checkout. The
marker is documented in tests/README.md ("Docs that run").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MARKER = "offline"
#: A block is a quick-start, not a benchmark: a few seconds each.
TIMEOUT_S = 120
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    where: str  # README.md:42 (the line of the opening fence)
    info: str
    script: str


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, with their info strings."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    name = path.relative_to(REPO).as_posix()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group("fence"), m.group("info").strip(), i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        blocks.append(Block(f"{name}:{start + 1}", info, "\n".join(body) + "\n"))
        i += 1
    return blocks


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def offline_blocks() -> list[Block]:
    return [b for path in documents() for b in fenced_blocks(path) if MARKER in b.info.split()[1:]]


BLOCKS = offline_blocks()


def test_the_quick_starts_are_marked() -> None:
    """The check is not vacuous: the README's quick-start and the scenario page
    have offline blocks (a lost marker would silently check nothing)."""
    where = {b.where.split(":")[0] for b in BLOCKS}
    assert {"README.md", "docs/scenarios.md"} <= where


def test_fences_are_found() -> None:
    blocks = fenced_blocks(REPO / "tests" / "README.md")
    assert any(b.info == "sh offline" and "kuota simulate" in b.script for b in blocks)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_an_offline_block_runs_and_exits_0(block: Block, tmp_path: Path) -> None:
    for entry in REPO.iterdir():
        if entry.name not in (".git", ".venv"):
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the venv running the tests
    result = subprocess.run(
        ["bash", "-eu", "-o", "pipefail", "-c", block.script],
        cwd=tmp_path,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"{block.where} exited {result.returncode}:\n{block.script}\n"
        f"--- stdout (tail)\n{result.stdout[-2000:]}\n--- stderr (tail)\n{result.stderr[-4000:]}"
    )
