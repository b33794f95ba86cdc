"""Pickling and deep-copying of the fold's dataclasses, compiled or not.

Theory of operation: the fold's state is pickled (snapshots) and deep-copied
(tests, the preemption search). In a module compiled by mypyc
(``docs/design/native-core.md``) two kinds of class do not survive the default
protocol: a frozen dataclass with slots restores its fields in ``__setstate__``
through ``object.__setattr__``, which the native attribute setter refuses; and
a class whose constructor is written out (``init=False``, for speed) is
re-created by calling that constructor with no arguments. Registering a
reducer in ``copyreg`` (which ``pickle`` and ``copy`` consult before
``__reduce_ex__``) rebuilds each instance through its constructor instead,
from its fields in order: the same in pure Python and compiled, and nothing
per class to keep in step with its fields. An instance must not be reachable
from its own fields (pickle cannot rebuild such a cycle through a
constructor); none of the registered classes is.
"""

from __future__ import annotations

import copyreg
from dataclasses import fields
from typing import Any

__all__ = ["register_by_fields"]


# class -> its field names in order, read once at registration (a snapshot
# pickles tens of thousands of records; ``fields()`` per instance was repeat work)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _rebuild(obj: Any) -> tuple[Any, tuple[Any, ...]]:
    cls = type(obj)  # copyreg dispatches on the exact class, so it is registered
    return cls, tuple([getattr(obj, name) for name in _FIELD_NAMES[cls]])


def register_by_fields(*classes: type) -> None:
    """Pickle and copy instances of these dataclasses through their constructor
    (every field must be an ``__init__`` argument, in order)."""
    for cls in classes:
        for f in fields(cls):
            if not f.init or f.kw_only:
                raise TypeError(f"{cls.__name__}.{f.name} is not a positional __init__ field")
        _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
        copyreg.pickle(cls, _rebuild)
