"""Stub replaced by the nodes branch (the Node reader)."""

from __future__ import annotations

from dataclasses import dataclass

from kuota.api.types import Taint


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: tuple[tuple[str, int], ...] = ()
