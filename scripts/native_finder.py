"""Load the mypyc-compiled core modules when they match the sources.

``scripts/native.py build`` copies this file into the venv's site-packages as
``_kuota_native.py``, next to ``_kuota_native.json`` (which modules, where
their compiled libraries are, the digest of the sources they were built from)
and ``_kuota_native.pth`` (``import _kuota_native``, run at interpreter start).

At start it installs a meta-path finder. When one of the compiled modules is
imported, it computes the digest of the ``.py`` sources the package would
load (once per process) and answers with the compiled library only if that
digest and the Python version are the ones it was built for. Otherwise
(an edited source, another interpreter) it says nothing, so the pure-Python
module loads as usual, and it warns once on stderr. ``KUOTA_NATIVE=0`` turns
it off. See docs/design/native-core.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType
from typing import Any

CONFIG = Path(__file__).with_name("_kuota_native.json")


def source_digest(package_dir: Path, modules: Sequence[str]) -> str:
    """sha256 over the listed modules' names and ``.py`` sources, found under
    the directory of the top-level package (``kuota.core.fold.cycle`` ->
    ``<package_dir>/core/fold/cycle.py``)."""
    digest = hashlib.sha256()
    for name in sorted(modules):
        relative = Path(*name.split(".")[1:]).with_suffix(".py")
        digest.update(name.encode() + b"\x00")
        digest.update((package_dir / relative).read_bytes() + b"\x00")
    return digest.hexdigest()


def compiled_modules(prefix: str = "kuota.") -> list[str]:
    """The imported modules under ``prefix`` that were loaded from a compiled
    library rather than from their ``.py`` source, sorted."""
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith(prefix)
        and not (getattr(module, "__file__", None) or ".py").endswith(".py")
    )


class NativeFinder:
    """Compiled libraries for the modules they were built from; None otherwise."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.libraries: dict[str, str] = config["libraries"]  # module -> .so path
        self.modules: list[str] = config["modules"]  # the compiled sources
        self.digest: str = config["digest"]
        self.python: str = config["python"]
        self._fresh: bool | None = None

    def fresh(self) -> bool:
        if self._fresh is None:
            self._fresh = self._check()
        return self._fresh

    def _check(self) -> bool:
        if sys.version != self.python:
            return self._stale(f"built for Python {self.python.split()[0]}")
        top = self.modules[0].split(".")[0]
        package: ModuleType | None = sys.modules.get(top)
        if package is None or not getattr(package, "__path__", None):
            return False
        try:
            digest = source_digest(Path(next(iter(package.__path__))), self.modules)
        except OSError as err:
            return self._stale(f"cannot read the sources ({err})")
        if digest != self.digest:
            return self._stale("the sources changed since it was built (run `make native`)")
        return True

    @staticmethod
    def _stale(why: str) -> bool:
        print(f"kuota: not using the compiled core: {why}; pure Python instead", file=sys.stderr)
        return False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        library = self.libraries.get(fullname)
        if library is None or os.environ.get("KUOTA_NATIVE") == "0" or not self.fresh():
            return None
        return spec_from_file_location(fullname, library)


def install() -> None:
    if os.environ.get("KUOTA_NATIVE") == "0" or not CONFIG.exists():
        return
    try:
        config = json.loads(CONFIG.read_text())
    except (OSError, ValueError) as err:
        print(f"kuota: ignoring {CONFIG}: {err}", file=sys.stderr)
        return
    if not all(Path(p).exists() for p in config.get("libraries", {}).values()):
        print("kuota: the compiled core's cache is gone (run `make native`)", file=sys.stderr)
        return
    sys.meta_path.insert(0, NativeFinder(config))


if __name__ == "_kuota_native":  # imported by _kuota_native.pth at interpreter start
    install()
