#!/usr/bin/env python3
"""Compile the decision core's hot path with mypyc, cached per machine (``make native``).

    native.py build [--venv DIR]   compile (unless cached) and install the finder
    native.py status               whether this interpreter loads the compiled modules
    native.py remove [--venv DIR]  uninstall the finder (pure Python from then on)

The modules in ``MODULES`` are compiled from the checkout's sources into
``$KUOTA_CACHE/native/<key>/`` (default ``~/.cache/kuota``), where ``key``
covers the sources, this script, the finder, the Python and mypy versions: a
machine compiles each version of the sources once (about a minute on one core).
``build`` then writes ``_kuota_native.{py,json,pth}`` into the venv's
site-packages (``scripts/native_finder.py``), which loads a compiled module
only while the sources still match it. The modules behave the same compiled or
not (the test suite runs on the compiled build; ``tests/unit/core/test_native.py``
compares both on a benchmark's decisions). See docs/design/native-core.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_finder import compiled_modules, source_digest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "shared" / "kuota"
FINDER = Path(__file__).resolve().with_name("native_finder.py")

# The fold's hot path: the scheduling cycle and its order, queues, quota tree,
# flavor search, placement, the decision builders, the timers and the state they
# share (not fold/hooks.py: a Protocol, for mypy only); and the simulation engine
# that drives it (``kuota simulate``, the benches), whose input checks live in the
# interpreted ``kuota.sim.scenario``. Everything else stays pure Python.
MODULES = (
    "kuota.core.assign.fitting",
    "kuota.core.assign.node_match",
    "kuota.core.dra.placement",
    "kuota.core.dra.placement_devices",
    "kuota.core.dra.placement_reasons",
    "kuota.core.dra.placement_rules",
    "kuota.core.dra.placement_search",
    "kuota.core.dra.placement_types",
    "kuota.core.dra.placement_why",
    "kuota.core.assign.flavors",
    "kuota.core.fold.cohorts",
    "kuota.core.fold.cycle",
    "kuota.core.fold.decisions",
    "kuota.core.fold.draining",
    "kuota.core.fold.fairadmission",
    "kuota.core.fold.fold",
    "kuota.core.fold.holds",
    "kuota.core.fold.direct_claims",
    "kuota.core.fold.node_fit",
    "kuota.core.fold.node_victims",
    "kuota.core.fold.ordering",
    "kuota.core.fold.placement",
    "kuota.core.fold.preempting",
    "kuota.core.fold.state",
    "kuota.core.fold.timers",
    "kuota.core.queueing.afs",
    "kuota.core.queueing.queues",
    "kuota.core.queueing.verdict",
    "kuota.core.queueing.workload",
    "kuota.core.quota.tree",
    "kuota.sim.engine",
)


def cache_root() -> Path:
    return Path(os.environ.get("KUOTA_CACHE") or Path.home() / ".cache" / "kuota") / "native"


def build_key(digest: str) -> str:
    h = hashlib.sha256()
    for part in (
        digest,
        Path(__file__).read_bytes().decode(),
        FINDER.read_bytes().decode(),
        sys.version,
        version("mypy"),
        sysconfig.get_config_var("EXT_SUFFIX") or "",
    ):
        h.update(part.encode() + b"\x00")
    return h.hexdigest()[:20]


def compile_into(target: Path) -> None:
    """Run mypyc on a copy of the package (it builds in place) and keep the
    libraries: one per module plus the group library they share."""
    with tempfile.TemporaryDirectory(prefix="kuota-native-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(PACKAGE, src / "kuota", ignore=shutil.ignore_patterns("__pycache__"))
        files = [str(Path(*m.split(".")).with_suffix(".py")) for m in MODULES]
        started = time.monotonic()
        print(f"native: compiling {len(files)} modules with mypyc (once per source version)")
        result = subprocess.run(
            [sys.executable, "-m", "mypyc", *files],
            cwd=src,
            capture_output=True,
            text=True,
            env={**os.environ, "MYPYC_OPT_LEVEL": "3"},
        )
        if result.returncode != 0:
            sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
            raise SystemExit(f"native: mypyc failed (exit {result.returncode})")
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
        # (mypyc leaves copies under build/: only the in-place ones count)
        for lib in [*src.glob(f"*{suffix}"), *(src / "kuota").rglob(f"*{suffix}")]:
            dest = staging / lib.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, dest)
        try:
            staging.rename(target)
        except OSError:  # another build finished first: keep its copy
            shutil.rmtree(staging, ignore_errors=True)
        print(f"native: compiled in {time.monotonic() - started:.0f}s into {target}")


def libraries(target: Path) -> dict[str, str]:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out: dict[str, str] = {}
    for lib in sorted(target.rglob(f"*{suffix}")):
        relative = lib.relative_to(target)
        name = ".".join(relative.parts)[: -len(suffix)]
        out[name] = str(lib)
    missing = [m for m in MODULES if m not in out]
    if missing:
        raise SystemExit(f"native: {target} lacks {missing}; delete it and build again")
    return out


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        raise SystemExit(f"native: no site-packages under {venv}")
    return found[0]


def build(venv: Path) -> None:
    digest = source_digest(PACKAGE, MODULES)
    target = cache_root() / build_key(digest)
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        compile_into(target)
    config = {
        "modules": list(MODULES),
        "digest": digest,
        "python": sys.version,
        "libraries": libraries(target),
    }
    site = site_packages(venv)
    (site / "_kuota_native.json").write_text(json.dumps(config, indent=1) + "\n")
    shutil.copyfile(FINDER, site / "_kuota_native.py")
    (site / "_kuota_native.pth").write_text("import _kuota_native\n")
    print(f"native: {len(MODULES)} compiled core modules in use ({target.name})")


def remove(venv: Path) -> None:
    site = site_packages(venv)
    for name in ("_kuota_native.pth", "_kuota_native.py", "_kuota_native.json"):
        (site / name).unlink(missing_ok=True)
    print("native: removed; the core runs as pure Python")


def status() -> int:
    import importlib

    for name in MODULES:
        importlib.import_module(name)
    compiled = [m for m in compiled_modules() if m in MODULES]
    print(f"native: {len(compiled)} of {len(MODULES)} core modules compiled")
    return 0 if len(compiled) == len(MODULES) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("build", "status", "remove"))
    parser.add_argument("--venv", type=Path, default=Path(sys.prefix))
    args = parser.parse_args(argv)
    if args.action == "build":
        build(args.venv)
    elif args.action == "remove":
        remove(args.venv)
    else:
        return status()
    return 0


if __name__ == "__main__":
    sys.exit(main())
