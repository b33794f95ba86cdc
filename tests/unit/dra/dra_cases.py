"""The table-case harness shared by the charge_podset tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dra_builders import (
    GPU_CLASS,
    GPU_PARTITION,
    MIG_CLASS,
    SINGLE_GPU,
    a100_node,
    h100_mig_node,
    inventory,
    milli,
)

from kuota.api.types import Configuration, PodSet
from kuota.core.dra.charging import Charge, NotChargeable, charge_podset


@dataclass
class Case:
    name: str
    manifests: tuple[dict[str, Any], ...]
    config: Configuration
    podset: PodSet
    want: dict[str, str] | None = None  # resource -> quantity, when chargeable
    reason: str | None = None
    retryable: bool | None = None
    message: str = ""  # a substring the message must contain
    namespace: str = "team-a"


def run(case: Case) -> Charge | NotChargeable:
    return charge_podset(
        inventory=inventory(*case.manifests),
        config=case.config,
        namespace=case.namespace,
        podset=case.podset,
    )


def check(case: Case) -> None:
    got = run(case)
    if case.want is not None:
        assert got == Charge(tuple(sorted((k, milli(v)) for k, v in case.want.items()))), got
    else:
        assert isinstance(got, NotChargeable), got
        assert got.reason == case.reason, got
        assert got.retryable == case.retryable, got
        assert case.message in got.message, got.message


ARTICLE = (GPU_CLASS, MIG_CLASS, SINGLE_GPU, GPU_PARTITION)
NODES = (a100_node().build(), h100_mig_node().build())
