"""A Fold with a bug on chosen events, for the tests of the shells around it.

The Fold may be compiled (``docs/design/native-core.md``), and a compiled class
takes no Python subclass: ``RaisingFold`` wraps a real Fold instead, raising on
the chosen event ids and handing everything else to it. It pickles with its
Fold (the admission shell snapshots it).
"""

from __future__ import annotations

from typing import Any

from kuota.core.fold.fold import Fold
from kuota.events.schema import Decision, JournalEvent


class RaisingFold:
    def __init__(self, *bad_ids: str, error: Exception | None = None) -> None:
        self.fold = Fold()
        self.bad_ids = frozenset(bad_ids)
        self.error = error if error is not None else KeyError("boom\nsecond line")

    def apply(self, event: JournalEvent, *, offset: int | None = None) -> list[Decision]:
        if event.id in self.bad_ids:
            raise self.error
        return self.fold.apply(event, offset=offset)

    def __getattr__(self, name: str) -> Any:
        if name == "fold":  # not set yet (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.fold, name)
