"""Why a workload is not admitted: the payload of an Inadmissible decision.

Theory of operation: a :class:`Verdict` carries the CamelCase ``reason``, a
``signature`` and what is needed to write the human ``message``. Two verdicts
with the same reason and signature say the same thing; the fold emits an
Inadmissible decision only when that pair changes for a workload. For a quota
shortage the signature lists the flavors, resources and requested amounts but
not the figures that move with every admission elsewhere ("1 available",
what caps it), so a parked workload is announced once per cause, not once per
change in free quota. The message is rendered only when a decision is
emitted: most failed attempts are never shown to anyone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from kuota.core.assign.flavors import Assignment, PodSetRequest, Reason, render_reasons
from kuota.core.pickling import register_by_fields
from kuota.quantity import format_quantity


@dataclass(slots=True, init=False, unsafe_hash=True)  # a value: see flavors.Shortfall
class Verdict:
    reason: Final[str]
    signature: Final[tuple[object, ...]]
    text: Final[str]  # the message, when it is fixed text (default "")
    podsets: Final[tuple[tuple[str, tuple[Reason, ...]], ...]]  # rendered on demand (default ())
    # The rendered message, once asked for: a parked group's verdict is announced
    # to each workload that joins the group. Not part of the value.
    rendered: list[str] = field(default_factory=list, compare=False, repr=False)

    def __init__(
        self,
        reason: str,
        signature: tuple[object, ...],
        text: str = "",
        podsets: tuple[tuple[str, tuple[Reason, ...]], ...] = (),
        rendered: list[str] | None = None,
    ) -> None:
        self.reason = reason
        self.signature = signature
        self.text = text
        self.podsets = podsets
        self.rendered = [] if rendered is None else rendered

    @property
    def key(self) -> tuple[str, tuple[object, ...]]:
        return (self.reason, self.signature)

    def message(self) -> str:
        if self.podsets:
            rendered = self.rendered
            if not rendered:
                rendered.append(
                    "; ".join(render_reasons(name, reasons) for name, reasons in self.podsets)
                )
            return rendered[0]
        return self.text


def gang_prefix(kind: str, podsets: Sequence[PodSetRequest]) -> str:
    """For a workload of several podsets, what the whole gang needs, before the
    per-podset reasons of a quota verdict: ``PyTorchJob of 5 pods (master 1 +
    worker 4) needs nvidia.com/gpu 5 in all, admitted whole or not at all: ``.
    ``""`` for a workload of one podset (a Job's message is Kueue's alone)."""
    if len(podsets) < 2:
        return ""
    pods = sum(p.count for p in podsets)
    shape = " + ".join(f"{p.name} {p.count}" for p in podsets)
    totals: dict[str, int] = {}
    for p in podsets:
        for resource, amount in p.totals:
            totals[resource] = totals.get(resource, 0) + amount
    needs = ", ".join(f"{r} {format_quantity(a)}" for r, a in sorted(totals.items()))
    return (
        f"{kind} of {pods} pods ({shape}) needs {needs or 'nothing'} in all, "
        "admitted whole or not at all: "
    )


def text_verdict(reason: str, message: str) -> Verdict:
    return Verdict(reason, (message,), message)


def assignment_verdict(assignment: Assignment) -> Verdict:
    return Verdict(
        assignment.reason or "InsufficientQuota",
        assignment.signature,
        podsets=tuple((p.name, p.reasons) for p in assignment.podsets if p.reasons),
    )


register_by_fields(Verdict)
